"""A decode batch's slot buffers on the execution device: the attention
memory and the step state stay where the step graph runs, across steps and across
sentences joining and leaving. Per step, only the previous and forced tokens, k and the
rows' memory index go to the device, and the chosen ids, their scores and α come back.

The host keeps the layout: `slots.Memory` (built with no numbers, only its slots' masks
and tags) and `slots.Rows` (with no state) move their entries as they do on the host
path, and each entry's `origin` says where its numbers are on the device: a slot or row
of the device buffers as they were after the last step (origin >= 0), or the j-th
sentence encoded since (origin -1 - j). Before a step whose layout changed, one gather
per buffer (`model/export/slot_graphs.py`: one per memory tensor, by its element type and
rank, and one per state tensor, by its rank) brings the device buffers to the host's layout.

The encoder's outputs stay on the device too; the memory graphs cut or pad them to
the memory's length as they join.

The same code runs on the CPU provider (with OrtValues in host memory), which is how
the tests check it against the host path.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnxruntime as ort

from attnmt.service.inference.engine import Engine
from attnmt.service.inference.sessions import axis_suffix
from attnmt.service.inference.slots import Memory, Rows
from attnmt.service.modeldir.manifest import SRC_MASK

_NUMPY = {"tensor(float)": np.float32, "tensor(bool)": np.bool_}     # the slot graphs' element types


class DeviceSlots:
    """The device buffers of one DecodeBatch."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.memory: dict | None = None            # the memory by name, OrtValues in the host's layout
        self.memory_key: tuple | None = None       # (Memory.version, Memory.n) when `memory` was made
        self.state: dict[str, ort.OrtValue] = {}   # the last step's state outputs, by input name
        self.joined_memory: dict | None = None     # encoder outputs not yet gathered into `memory`
        self.joined_state: dict[str, ort.OrtValue] = {}
        self.joined = 0                             # sentences in joined_memory

    def encode(self, sources: list[list[int]]) -> int:
        """Encode sentences on the device; returns the index the first of them has among
        those encoded since the last step (origin -1 - index)."""
        encoded = self.engine.encode_on_device(sources)
        first = self.joined
        if self.joined_memory is None:
            self.joined_memory, self.joined_state = encoded.memory, encoded.init_state
        else:   # a second group before a step: append it (the memory graphs pad both to one length)
            count = self.joined + len(sources)
            length = max(self.joined_memory[SRC_MASK].shape()[1], encoded.memory[SRC_MASK].shape()[1])
            self.joined_memory = self._gather_memory(self.joined_memory, encoded.memory, np.arange(count), length)
            self.joined_state = {name: self._gather_rows(value, encoded.init_state[name], np.arange(count),
                                                         axis=self.engine.position_axis(name))
                                 for name, value in self.joined_state.items()}
        self.joined += len(sources)
        return first

    def step_memory(self, memory: Memory) -> dict:
        """The memory in the host's layout (gathered if sentences joined, left or moved)."""
        key = (memory.version, memory.n)
        if key != self.memory_key:
            n = memory.n
            old = self.memory or {name: self._empty_like(v) for name, v in self.joined_memory.items()}
            new = self.joined_memory or {name: self._empty_like(v) for name, v in old.items()}
            self.memory = self._gather_memory(old, new, self._index(memory.origin[:n], old[SRC_MASK].shape()[0]),
                                              memory.length)
            memory.origin[:n] = np.arange(n)
            self.memory_key = key
            self.joined_memory = None
        return self.memory

    def step_state(self, rows: Rows, cache_length: Callable[[], int] | None = None) -> dict[str, ort.OrtValue]:
        """The step state in the host's row layout (gathered if rows joined, left or moved);
        growing states cut to the live rows' `cache_length()` positions in the same gather
        (slots.Rows.trim_states does it on the host). `cache_length` is asked only on steps
        that gather, not on every step."""
        R = rows.n
        origin = rows.origin[:R]
        before = next(iter(self.state.values())).shape()[0] if self.state else 0
        if self.joined_state or before != R or not np.array_equal(origin, np.arange(R)):
            old = self.state or {name: self._empty_like(v) for name, v in self.joined_state.items()}
            new = self.joined_state or {name: self._empty_like(v) for name, v in old.items()}
            index = self._index(origin, before)
            length = cache_length() if cache_length is not None else 0
            axis = self.engine.position_axis
            self.state = {name: self._gather_rows(old[name], new[name], index, length, axis(name)) for name in old}
            self.joined_state = {}
            self.joined = 0
            rows.origin[:R] = np.arange(R)
        return self.state

    def keep(self, state: dict[str, ort.OrtValue]) -> None:
        """The step's state outputs become the rows' state (row r's is output row r, so
        the origins `step_state` left stand)."""
        self.state = state

    # --- the gathers --------------------------------------------------------------

    @staticmethod
    def _index(origin: np.ndarray, before: int) -> np.ndarray:
        """Positions in Concat(old, new): origin >= 0 is old entry origin, -1 - j new entry j."""
        return np.where(origin >= 0, origin, before - 1 - origin).astype(np.int64)

    def _gather_memory(self, old: dict, new: dict, index: np.ndarray, length: int) -> dict:
        """Each memory tensor of Concat(old, new) at `index`, cut or zero-padded to `length` positions."""
        memory = {}
        for name, graph in self.engine.memory_gathers.items():
            feeds = {"old": old[name], "new": new[name], "index": index, "length": np.array(length, np.int64)}
            (memory[name],) = self.engine.run_on_device(self.engine.sessions.slot_graph(graph), feeds, ("memory",))
        return memory

    def _gather_rows(self, old: ort.OrtValue, new: ort.OrtValue, index: np.ndarray,
                     cache_length: int = 0, axis: int = 1) -> ort.OrtValue:
        """Rows of Concat(old, new) at `index`; a growing state (rank 3 or more) padded or cut on
        the left of its position `axis` to the live rows' `cache_length` (0: the longer part's)."""
        rank = len(old.shape())
        feeds = {"old": old, "new": new, "index": index}
        if rank >= 3:       # caches of different ages: aligned on the right, as long as the oldest live row
            longer = max(old.shape()[axis], new.shape()[axis])
            feeds["length"] = np.array(min(longer, cache_length) if cache_length else longer, np.int64)
        graph = self.engine.sessions.slot_graph(f"rows_gather_{rank}{axis_suffix(axis)}.onnx")
        (rows,) = self.engine.run_on_device(graph, feeds, ("rows",))
        return rows

    def _empty_like(self, value: ort.OrtValue) -> ort.OrtValue:
        """No entries, the other dimensions and type of `value` (the part of a Concat with nothing to add)."""
        (empty,) = self.engine.upload(np.zeros((0, *value.shape()[1:]), _NUMPY[value.data_type()]))
        return empty

