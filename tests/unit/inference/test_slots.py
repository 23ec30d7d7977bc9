"""Slot storage with positions on another axis than 1 (service/inference/slots.py, manifest
`position_axes`): a Transformer's head-major keys and values, [N,H,S,d_k] and [R,H,T,d_k].
The same operations on the same numbers, laid out with positions on axis 1 and on axis 2,
must leave the same tensors, the axis moved."""

import numpy as np

from attnmt.service.inference.slots import Memory, RowMemory, Rows

H, D = 2, 3          # the axes beside the positions: heads, d_k


def head_major(x: np.ndarray) -> np.ndarray:
    """[.., positions, H, D] -> [.., H, positions, D] (one sentence's or a batch's)."""
    return np.moveaxis(x, -3, -2)


def test_the_memory_keeps_sentences_whose_positions_run_along_axis_2():
    rng = np.random.default_rng(0)
    shapes = {"keys": ((H, D), np.float32), "src_mask": ((), bool)}
    flat, heads = Memory(shapes), Memory(shapes, {"keys": 2})
    copies = {id(flat): RowMemory(), id(heads): RowMemory()}

    def add(n: int) -> None:
        keys = rng.random((n, H, D), np.float32)
        flat.add({"keys": keys, "src_mask": np.ones(n, bool)})
        heads.add({"keys": head_major(keys), "src_mask": np.ones(n, bool)})

    def same(slots: np.ndarray) -> None:
        assert heads.tensors["keys"].shape[2] == heads.length == flat.length
        np.testing.assert_array_equal(head_major(flat.tensors["keys"][:flat.n]), heads.tensors["keys"][:heads.n])
        np.testing.assert_array_equal(flat.mask[:flat.n], heads.mask[:heads.n])
        np.testing.assert_array_equal(head_major(copies[id(flat)].view(flat, slots)["keys"]),
                                      copies[id(heads)].view(heads, slots)["keys"])

    for n in (5, 30, 2, 7):                      # the memory grows past its capacity and length
        add(n)
    same(np.array([1, 1, 0, 3, 2, 1]))           # beam rows: copies of their sentences
    for memory in (flat, heads):
        assert memory.free([1]) == {3: 1}        # the last sentence moves into the hole
        memory.shrink(7)                          # the longest live sentence: 7 pieces
    assert heads.length == 8
    same(np.array([0, 1, 1, 2]))
    add(40)
    same(np.array([3, 0, 3]))


def test_rows_align_caches_on_the_right_of_axis_2_and_trim_there():
    rng = np.random.default_rng(1)
    flat, heads = Rows({"cache": (1, H, D)}), Rows({"cache": (H, 1, D)}, {"cache": 2})
    for rows in (flat, heads):
        rows.reserve(4, 8, 4)
    caches = [rng.random((t, H, D), np.float32) for t in (1, 3, 2)]
    for cache in caches:                          # rows of different ages join: right-aligned
        (row,) = flat.add(1)
        flat.put_state(int(row), {"cache": cache})
        (row,) = heads.add(1)
        heads.put_state(int(row), {"cache": head_major(cache)})
    np.testing.assert_array_equal(head_major(flat.state["cache"][:3]), heads.state["cache"][:3])
    assert heads.state["cache"].shape[2] == 3
    np.testing.assert_array_equal(heads.state["cache"][0, :, :2], 0)           # zeros on the left
    np.testing.assert_array_equal(heads.state["cache"][0, :, 2], caches[0][0])
    for rows in (flat, heads):
        rows.copy(np.array([0]), np.array([1]), np.array([1]), np.array([4]))   # a beam child
        rows.free([1])
        rows.trim_states(2)                      # the oldest live row needs its last 2 positions
    assert heads.state["cache"].shape[:3] == (2, H, 2)
    np.testing.assert_array_equal(head_major(flat.state["cache"]), heads.state["cache"])
