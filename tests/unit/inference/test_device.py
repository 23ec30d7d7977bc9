"""The device path (service/inference/device.py): a batch's memory and step state stay on the
execution device, moved by the slot graphs. It runs here on the CPU provider, the same
code as on CUDA, and must give the host path's answers to the last bit."""

import numpy as np
import onnxruntime as ort
import pytest

from attnmt.model.export import slot_graphs
from attnmt.service.inference.batch import DecodeBatch
from attnmt.service.inference.device import DeviceSlots
from attnmt.service.inference.engine import Engine, EngineOptions
from attnmt.service.inference.search import SearchOptions
from attnmt.service.inference.sessions import SLOT_GRAPHS
from attnmt.service.text.translator import Translator
from unit.inference.test_decoding import LONG, SHORT


@pytest.fixture(scope="module")
def device_translator(tiny_model):
    return Translator(Engine(tiny_model, EngineOptions(io_binding=True, intra_op_threads=1)))


def test_the_shipped_slot_graphs_are_what_the_generator_writes(tmp_path):
    slot_graphs.write(tmp_path)
    shipped = sorted(p.name for p in SLOT_GRAPHS.glob("*.onnx"))
    assert shipped == sorted(slot_graphs.graphs())
    for name in shipped:
        assert (SLOT_GRAPHS / name).read_bytes() == (tmp_path / name).read_bytes(), \
            f"{name}: run python -m attnmt.model.export.slot_graphs service/inference/graphs"


def _sized(x: np.ndarray, length: int) -> np.ndarray:
    out = np.zeros((x.shape[0], length, *x.shape[2:]), x.dtype)
    n = min(length, x.shape[1])
    out[:, :n] = x[:, :n]
    return out


MEMORY_GRAPHS = [(kind, rank, 1) for kind, rank in slot_graphs.MEMORY_KINDS] + list(slot_graphs.MEMORY_AT)
ROWS_GRAPHS = [(rank, 1) for rank in slot_graphs.ROW_RANKS] + list(slot_graphs.ROWS_AT)


@pytest.mark.parametrize("kind,rank,axis", MEMORY_GRAPHS)
@pytest.mark.parametrize("old_rows,new_rows", [(3, 2), (0, 2), (3, 0)])
@pytest.mark.parametrize("length", [4, 8, 16])
def test_the_memory_graphs_cut_pad_and_gather(kind, rank, axis, old_rows, new_rows, length):
    """Positions on axis 1, or on `axis` (the same tensors with that axis moved there)."""
    session = ort.InferenceSession(str(SLOT_GRAPHS / f"{slot_graphs.memory_gather_name(kind, rank, axis)}.onnx"),
                                   providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(length)
    rest = [4, 2][:rank - 2]

    def tensor(rows: int, positions: int) -> np.ndarray:
        x = rng.random((rows, positions, *rest), np.float32)
        return x > 0.5 if kind == "bool" else x

    old, new = tensor(old_rows, 8), tensor(new_rows, 5)
    index = rng.integers(0, old_rows + new_rows, size=6)
    feeds = {"old": np.moveaxis(old, 1, axis).copy(), "new": np.moveaxis(new, 1, axis).copy(), "index": index,
             "length": np.array(length, np.int64)}
    (got,) = session.run(["memory"], feeds)
    assert got.dtype == old.dtype
    expected = np.concatenate([_sized(old, length), _sized(new, length)])[index]
    assert np.array_equal(got, np.moveaxis(expected, 1, axis))


@pytest.mark.parametrize("rank,axis", ROWS_GRAPHS)
def test_the_rows_graph_gathers_old_and_new_rows(rank, axis):
    """From rank 3 (a cache per row) both parts are first aligned on the right: padded with
    zeros on the left of axis 1 (or `axis`), or cut there, to `length` entries."""
    session = ort.InferenceSession(str(SLOT_GRAPHS / f"{slot_graphs.rows_gather_name(rank, axis)}.onnx"),
                                   providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(rank)
    rest = [3] * (rank - 2)
    old, new = rng.random((4, 5, *rest), np.float32), rng.random((2, 2, *rest), np.float32)
    if rank == 2:
        new = rng.random((2, 5), np.float32)
    index = np.array([5, 0, 0, 3, 4])
    for length in ((5,) if rank == 2 else (5, 7, 4)):
        feeds = {"old": np.moveaxis(old, 1, axis).copy(), "new": np.moveaxis(new, 1, axis).copy(), "index": index}
        if rank >= 3:
            feeds["length"] = np.array(length, np.int64)

        def right(x):
            out = np.zeros((x.shape[0], length, *x.shape[2:]), np.float32)  # noqa: B023
            n = min(length, x.shape[1])  # noqa: B023
            out[:, length - n:] = x[:, x.shape[1] - n:]  # noqa: B023
            return out
        (got,) = session.run(["rows"], feeds)
        assert np.array_equal(got, np.moveaxis(np.concatenate([right(old), right(new)])[index], 1, axis))


def _drive(engine, translator, plan):
    """Decode `plan` ((text, options, forced target) triples) through one DecodeBatch: two
    groups join before the first step (two encoder calls whose outputs are appended on the
    device), one at step 2, one sentence is removed at step 3 (a cancellation), the rest
    join at step 5."""
    batch = DecodeBatch(engine)
    searches = [translator.search(text, options, target) for text, options, target in plan]
    batch.add(searches[:2])
    batch.add(searches[2:4])
    step = 0
    while len(batch) or step < 5:
        step += 1
        if step == 2:
            batch.add(searches[4:5])
        if step == 3:
            batch.remove(searches[1])
        if step == 5:
            batch.add(searches[5:])
        batch.step()
    assert batch.n_rows == 0 and batch.memory.n == 0
    return searches


# Joins, a removal, beams opening and narrowing, forced rows, the memory growing and shrinking.
PLAN = [(LONG + " " + LONG, SearchOptions(max_length_ratio=0.01, max_length_extra=12), None),
        (LONG, SearchOptions(beam_size=2), None),
        (SHORT, SearchOptions(beam_size=4, n_best=3), None),
        ("gato .", SearchOptions(), None),
        ("sola amas luna granda .", SearchOptions(beam_size=3, n_best=3), None),
        (LONG, SearchOptions(beam_size=2, n_best=2), None),
        (SHORT, SearchOptions(), "the cat sees the house ."),
        (LONG + " " + LONG, SearchOptions(), None)]


def test_the_device_path_gives_the_host_paths_answers_bit_for_bit(translator, device_translator):
    """Joins (two groups before a step), a removal, beams opening and narrowing, forced
    rows, the memory growing and shrinking: every finished hypothesis, its log-probs and
    α, are the host path's exactly."""
    assert device_translator.engine.io_binding and not translator.engine.io_binding
    want = _drive(translator.engine, translator, PLAN)
    got = _drive(device_translator.engine, device_translator, PLAN)
    assert not want[1].finished and not got[1].finished          # removed before it finished
    assert sum(len(s.finished) for s in want) > 12
    for w, g in zip(want, got):
        assert len(w.finished) == len(g.finished)
        for a, b in zip(w.finished, g.finished):
            assert a.tokens == b.tokens and a.token_log_probs == b.token_log_probs and a.score == b.score
            assert np.array_equal(a.alignment, b.alignment)


def test_the_state_stays_on_the_device_and_moves_only_when_rows_do(device_translator, monkeypatch):
    """Greedy sentences that neither join nor leave: no gather between their steps; each
    step's new state is an OrtValue (not copied to the host)."""
    engine = device_translator.engine
    counts = {"memory": 0, "rows": 0}
    memory_gather, rows_gather = DeviceSlots._gather_memory, DeviceSlots._gather_rows
    monkeypatch.setattr(DeviceSlots, "_gather_memory",
                        lambda self, *a: (counts.__setitem__("memory", counts["memory"] + 1),
                                          memory_gather(self, *a))[1])
    monkeypatch.setattr(DeviceSlots, "_gather_rows",
                        lambda self, *a: (counts.__setitem__("rows", counts["rows"] + 1), rows_gather(self, *a))[1])
    states = []
    original = Engine.step
    monkeypatch.setattr(Engine, "step", lambda self, *a, **k: states.append(original(self, *a, **k)) or states[-1])
    options = SearchOptions(max_length_ratio=1e-4, max_length_extra=6)   # all stop at 6 pieces
    batch = DecodeBatch(engine)
    batch.add([device_translator.search(text, options) for text in (LONG, LONG + " " + LONG, LONG)])
    batch.step()
    assert counts == {"memory": 1, "rows": 1}                    # the joiners, gathered once
    while len(batch):
        batch.step()
    assert len(states) == 6 and all(isinstance(v, ort.OrtValue) for s in states for v in s.state.values())
    assert counts == {"memory": 1, "rows": 1}
