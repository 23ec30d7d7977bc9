"""The ONNX Runtime engine: runs a model directory's encoder and step graphs on
the tensors a decode batch hands it. No search logic lives here (that is
`search.py`, `batch.py` and `beam.py`), and opening the graphs is `sessions.py`'s;
this module owns the exact feeds and outputs of each run (see
`service/modeldir/manifest.py` for the contract), which step graph a step runs,
and, on the device path, what stays on the execution device.

Token choice happens inside the step graph: a step returns each row's k best
tokens and their log-probabilities, never rows x vocabulary, so on a GPU only
ids, scores, α and the new state cross to the host.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort

from attnmt.service.errors import ModelLoadError
from attnmt.service.inference.sessions import Sessions
from attnmt.service.inference.shortlist import Shortlist
from attnmt.service.inference.slots import Memory, RowMemory
from attnmt.service.modeldir.manifest import (
    CACHE_LENGTH,
    ENCODER_INPUTS,
    GROUP_ROWS,
    POSITIONS,
    ROW_PLACES,
    Manifest,
    decoder_outputs,
    encoder_outputs,
    load_manifest,
)
from attnmt.service.modeldir.tokenizer import Tokenizer
from attnmt.service.modeldir.vocabulary import never_generated, no_specials_bias


@dataclass(frozen=True)
class EngineOptions:
    device: str = "cpu"             # cpu | cuda | openvino (the CPU through OpenVINO's execution provider)
    precision: str = "f32"          # f32 | bf16 (openvino only: bfloat16 matrix products, AMX where the CPU has it)
    intra_op_threads: int = 0       # 0: ONNX Runtime's default (one per core)
    inter_op_threads: int = 1
    optimization: str = "all"       # disable | basic | extended | all
    allow_spinning: bool = True     # worker threads spin within a run (never between runs: sessions.py)
    idle_spinning: bool = False     # without allow_spinning: spin within the steps a caller marks idle (step(idle=))
    idle_threads: int = 0           # threads of those idle steps (0: intra_op_threads); decode workers of one
                                    # thread each step alone on every core when the others have nothing
    io_binding: bool | None = None  # the device path (None: on for cuda, off for cpu): a batch's memory and
                                    # state stay on the execution device across steps (service/inference/device.py)
    shortlist: bool = False         # use the model's lexical shortlist when it has one (off: it pays only
                                    # at one or two sentences a step; docs/benchmarks.md)


@dataclass
class Encoded:
    """Encoder output for N sentences: numpy arrays (OrtValues on the device from `encode_on_device`)."""
    memory: dict[str, np.ndarray]       # the manifest's memory, in its order: name -> N x S x ... (src_mask N x S)
    init_state: dict[str, np.ndarray]   # step-state name -> N x ...


@dataclass
class StepOutput:
    topk_log_probs: np.ndarray    # R x k, best first
    topk_ids: np.ndarray          # R x k
    forced_log_probs: np.ndarray  # R: log p of each row's forced token
    state: dict[str, np.ndarray]  # step-state name -> R x ... (the state for the next step)
    alpha: np.ndarray             # R x S


class Engine:
    """Loads a model directory and runs its graphs."""

    def __init__(self, model_dir: str | Path, options: EngineOptions = EngineOptions(), verify: bool = True):
        self.model_dir = Path(model_dir)
        self.options = options
        self.manifest: Manifest = load_manifest(self.model_dir, verify=verify)
        self.tokenizer = Tokenizer(self.model_dir / self.manifest.tokenizer)
        if len(self.tokenizer) != self.manifest.vocab_size:
            raise ModelLoadError(f"{self.model_dir}: tokenizer has {len(self.tokenizer)} pieces, "
                                 f"manifest says vocab_size {self.manifest.vocab_size}")
        self.sessions = Sessions(self.model_dir, self.manifest, options)
        self.state_names = self.sessions.state_names        # input -> output that replaces it
        self.initial_state = self.sessions.initial_state    # input -> encoder output that starts it
        self.memory_names = tuple(self.manifest.memory)     # the encoder outputs every step reads
        self.encoder_outputs = encoder_outputs(self.memory_names, self.initial_state.values())
        # the axis each memory tensor's source positions and each growing state's steps run along
        self.position_axes = {name: self.manifest.position_axis(name) for name in (*self.memory_names,
                                                                                    *self.state_names)}
        self.encoder = self.sessions.graph("encoder", ENCODER_INPUTS, self.encoder_outputs)
        io_binding = options.io_binding if options.io_binding is not None else options.device == "cuda"
        # On the CPU provider, a Transformer exported with it steps with decoder_step_append: its
        # caches have room to grow and the step returns only the new entries, which the batch
        # writes in place (slots.Rows.append_state), where decoder_step copied every cache into a
        # longer one at every step. Not with the shortlist, whose graphs append themselves, nor
        # on the device path or OpenVINO, which keep the graphs they were measured with.
        self.append = (options.device == "cpu" and not io_binding and "decoder_step_append" in self.manifest.graphs
                       and not (options.shortlist and self.manifest.shortlist))
        # Where the directory has it, the append step over the memory per sentence, for steps of
        # many beam rows (batch.py decides): a step's rows are grouped by sentence
        # (`sentence_groups`), so a beam's rows read their sentence's cross K and V once, and no
        # row needs a copy of its sentence's memory (slots.RowMemory). Opened when first used.
        self.grouped = self.append and "decoder_step_grouped" in self.manifest.graphs
        step_graph = "decoder_step_append" if self.append else "decoder_step"
        self.decoder = self.sessions.step_graph(step_graph)
        self.positions = self.sessions.positions            # whether the step graphs take POSITIONS
        self.cache_entry_bytes, self.cache_initial_length = _cache_size(self.decoder, self.encoder,
                                                                        self.initial_state, self.position_axes)
        # The same graph with spinning threads, for steps while the server is idle (a lone
        # sentence's latency drops); without spinning under load, when the event loop needs
        # the cores. It costs some resident memory.
        # With idle_threads the encoder gets its idle session too: a lone sentence is encoded
        # on every core, not on a decode worker's share of them.
        self._idle_decoder: ort.InferenceSession | None = None
        self._idle_encoder: ort.InferenceSession | None = None
        if options.idle_spinning and not options.allow_spinning and options.device == "cpu":
            self._idle_decoder = self.sessions.step_graph(step_graph, spinning=True,
                                                          threads=options.idle_threads or None)
            if options.idle_threads:
                self._idle_encoder = self.sessions.graph("encoder", ENCODER_INPUTS, self.encoder_outputs,
                                                         spinning=True, threads=options.idle_threads)
        self.provider = self.decoder.get_providers()[0]
        self.io_binding = io_binding
        self.device = "cuda" if self.provider == "CUDAExecutionProvider" else "cpu"
        # memory name -> the slot graph that gathers it on the device (device.py)
        self.memory_gathers = self.sessions.memory_gathers(self.encoder) if self.io_binding else {}
        ids = self.manifest.special_ids
        self.pad_id, self.unk_id, self.bos_id, self.eos_id = ids.pad, ids.unk, ids.bos, ids.eos
        self.vocab_size = self.manifest.vocab_size
        self.default_bias = no_specials_bias(self.vocab_size, ids)                          # 1 x V
        self._device_bias = self.upload(self.default_bias)[0] if self.io_binding else None   # uploaded once
        self.shortlist: Shortlist | None = None
        if options.shortlist and self.manifest.shortlist:
            self.shortlist = Shortlist(self.model_dir / self.manifest.shortlist["file"], self.vocab_size,
                                       always=[self.eos_id, self.unk_id], never=never_generated(ids))

    def position_axis(self, name: str) -> int:
        """The axis a memory tensor's or step state's positions run along (manifest `position_axes`)."""
        return self.position_axes.get(name, 1)

    @property
    def shared_decoder(self) -> ort.InferenceSession:
        """The shared-memory step graph, opened when a beam first needs it."""
        return self.sessions.cached("decoder_step_shared")

    def _source_feeds(self, sources: list[list[int]]) -> dict[str, np.ndarray]:
        lengths = np.array([len(s) for s in sources], dtype=np.int64)
        tokens = np.full((len(sources), int(lengths.max())), self.pad_id, dtype=np.int64)  # N x S
        for row, ids in enumerate(sources):
            tokens[row, :len(ids)] = ids
        return {"src_tokens": tokens, "src_lengths": lengths}

    def encode(self, sources: list[list[int]], idle: bool = False) -> Encoded:
        """Encode token id lists (each already ending with </s>); idle: as in `step`."""
        encoder = self._idle_encoder if idle and self._idle_encoder is not None else self.encoder
        outputs = encoder.run(list(self.encoder_outputs), self._source_feeds(sources))
        return self._encoded(outputs)

    def encode_on_device(self, sources: list[list[int]]) -> Encoded:
        """`encode` with its outputs left on the execution device (the device path): OrtValues."""
        return self._encoded(self.run_on_device(self.encoder, self._source_feeds(sources), self.encoder_outputs))

    def _encoded(self, outputs: list) -> Encoded:
        """The encoder's outputs in `encoder_outputs`' order: the memory, then the initial states."""
        m = len(self.memory_names)
        return Encoded(dict(zip(self.memory_names, outputs[:m])), dict(zip(self.initial_state, outputs[m:])))

    def run_on_device(self, session: ort.InferenceSession, feeds: dict, outputs: tuple[str, ...],
                      to_host: frozenset[str] = frozenset()) -> list[ort.OrtValue]:
        """Run a graph with IO binding: feeds are numpy arrays (copied in) or OrtValues on the
        device; the outputs stay on the execution device, but for those named in `to_host`."""
        binding = session.io_binding()
        for name, value in feeds.items():
            if isinstance(value, np.ndarray):
                binding.bind_cpu_input(name, np.ascontiguousarray(value))
            else:
                binding.bind_ortvalue_input(name, value)
        for name in outputs:
            binding.bind_output(name, "cpu" if name in to_host else self.device)
        session.run_with_iobinding(binding)
        return binding.get_outputs()

    def upload(self, *arrays: np.ndarray) -> tuple:
        """Arrays as OrtValues on the execution device."""
        return tuple(ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(x), self.device, 0) for x in arrays)

    @staticmethod
    def row_memory(copies: RowMemory, memory: Memory, slots: np.ndarray) -> dict[str, np.ndarray]:
        """The step's memory feeds when rows outnumber sentences (beams) and the memory
        lives on the host: row r's copy of memory slot slots[r], kept across steps
        (`slots.RowMemory`), for the direct graph; with IO binding the shared graph
        gathers on the device instead."""
        return copies.view(memory, slots)

    def step(self, prev_tokens: np.ndarray, state: dict[str, np.ndarray], memory: dict, k: int,
             forced_tokens: np.ndarray, memory_index: np.ndarray | None = None,
             vocab_bias: np.ndarray | None = None, candidates: np.ndarray | None = None,
             idle: bool = False, positions: np.ndarray | None = None, cache_length: int | None = None,
             groups: tuple[np.ndarray, np.ndarray] | None = None) -> StepOutput:
        """One decoder step for R rows.

        memory: the manifest's memory by name, numpy arrays or OrtValues on the device;
        state: numpy arrays, or with io_binding OrtValues on the device, where the new
        state then stays (StepOutput.state holds OrtValues);
        without `memory_index` row r attends memory row r (N = R), with it row r
        attends memory row memory_index[r] (beam rows share their sentence's memory).
        vocab_bias: 1 x V or R x V additive logits bias (default: forbid <pad> and <s>).
        candidates: vocabulary ids [C] the output layer runs over (the shortlist graphs);
        vocab_bias is then 1 x C or R x C, forced_tokens positions in candidates.
        idle: the machine has cores to spare (EngineOptions.idle_spinning); same answers.
        positions: R, each row's step, for graphs that take it (`self.positions`).
        cache_length: with `self.append`, the positions of the caches in use (the state then holds
        each cache with room beyond them, and StepOutput.state the new entries, R x H x 1 x d_k).
        groups: with `self.grouped`, (group_rows, row_places) of `sentence_groups` for the grouped
        step: the memory is then per sentence, as the batch keeps it (no memory_index).
        """
        session = (self.sessions.cached("decoder_step_grouped") if groups is not None else
                   self._step_graph(shared=memory_index is not None, shortlist=candidates is not None, idle=idle))
        feeds = {"prev_tokens": prev_tokens,
                 "vocab_bias": vocab_bias if vocab_bias is not None
                 else self.default_bias if self._device_bias is None else self._device_bias,
                 "k": np.array([k], dtype=np.int64), "forced_tokens": forced_tokens}
        if memory_index is not None:
            feeds["memory_index"] = memory_index
        if candidates is not None:
            feeds["candidates"] = candidates
        if self.positions:
            feeds[POSITIONS] = positions
        if self.append:                     # (never with memory_index or candidates: see __init__)
            feeds[CACHE_LENGTH] = np.array(cache_length, dtype=np.int64)
        if groups is not None:
            feeds[GROUP_ROWS], feeds[ROW_PLACES] = groups
        names = list(decoder_outputs(self.state_names.values()))
        feeds.update(state)
        feeds.update(memory)
        if not self.io_binding:
            outputs = dict(zip(names, session.run(names, feeds)))
            state = {name: outputs[out] for name, out in self.state_names.items()}
        else:
            # What the search reads comes to the host; the new state stays on the device.
            kept = set(self.state_names.values())
            values = dict(zip(names, self.run_on_device(session, feeds, names, frozenset(names) - kept)))
            outputs = {name: value.numpy() for name, value in values.items() if name not in kept}
            state = {name: values[out] for name, out in self.state_names.items()}
        return StepOutput(outputs["topk_log_probs"], outputs["topk_ids"], outputs["forced_log_probs"],
                          state, outputs["alpha"])

    def _step_graph(self, shared: bool, shortlist: bool, idle: bool) -> ort.InferenceSession:
        """Which of the step graphs a step runs: the shared one when rows gather their
        sentence's memory, the shortlist ones over candidates, the spinning session when idle."""
        if shortlist:
            return self.sessions.cached("decoder_step_shared_shortlist" if shared else "decoder_step_shortlist")
        if shared:
            return self.shared_decoder
        return self._idle_decoder if idle and self._idle_decoder is not None else self.decoder


def _cache_size(decoder: ort.InferenceSession, encoder: ort.InferenceSession, initial_state: dict[str, str],
                axes: dict[str, int]) -> tuple[int, int]:
    """(bytes one position of every growing state takes in one row, the positions a row's
    growing state starts with). A growing state is a per-row state of rank 2 or more, a
    Transformer's self-attention cache [R, H, T, d_k] (modeldir/manifest.py); (0, 0) for an RNN."""
    steps = {i.name: i for i in decoder.get_inputs()}
    starts = {o.name: o for o in encoder.get_outputs()}
    entry, initial = 0, 0
    for name, output in initial_state.items():
        shape = steps[name].shape
        if len(shape) < 3:
            continue
        axis = axes.get(name, 1)
        fixed = [d for i, d in enumerate(shape) if i not in (0, axis)]
        if not all(isinstance(d, int) for d in fixed):
            raise ModelLoadError(f"decoder_step input {name} {shape}: a growing state needs fixed sizes "
                                 f"on every axis but its rows (0) and positions ({axis})")
        entry += int(np.prod(fixed)) * 4                          # float32
        start = starts[output].shape[axis]
        initial = max(initial, start if isinstance(start, int) else 0)
    return entry, initial
