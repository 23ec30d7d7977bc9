"""The lexical shortlist at serving time: each sentence's candidate target
pieces, and the step inputs that confine every row to its own sentence's set.

`model/shortlist.py` builds `shortlist.npz` (why and how is explained there).
A batch computes the output layer over the union of its sentences' candidates;
each row gets -inf on the candidates that are not its own sentence's, so its
softmax runs over exactly its own set, whoever its batch-mates are.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .errors import ModelLoadError


class Shortlist:
    def __init__(self, path: Path, vocab_size: int, always: list[int], never: list[int]):
        try:
            with np.load(path) as data:
                frequent, self.table = data["frequent"].astype(np.int64), data["table"].astype(np.int64)
        except (OSError, KeyError, ValueError) as e:
            raise ModelLoadError(f"{path}: not a shortlist file ({e})") from e
        if self.table.shape[0] != vocab_size:
            raise ModelLoadError(f"{path}: table has {self.table.shape[0]} rows, the vocabulary {vocab_size}")
        self.never = np.asarray(never, dtype=np.int64)
        self.base = np.setdiff1d(np.union1d(frequent, always), self.never)   # sorted, unique

    def candidates(self, source: list[int]) -> np.ndarray:
        """Sorted vocabulary ids a translation of `source` may contain: the frequent pieces,
        the strongest translations of each source piece, and the source pieces themselves."""
        src = np.asarray(source, dtype=np.int64)
        lexical = self.table[src].ravel()                                    # S * M, -1 padded
        found = np.union1d(self.base, np.concatenate([lexical[lexical >= 0], src]))
        return np.setdiff1d(found, self.never, assume_unique=True)


class Union:
    """The candidates of a decode batch and each sentence's bias row over them.

    Sentences join and leave at almost every step, so the union is kept append-only
    (a leaver's ids stay; a joiner's new ids go at the end, so no existing row moves)
    and rebuilt from the live sentences only when it has grown past `slack` times
    their own union. The order of `candidates` is irrelevant to the step graph, which
    maps its top k back to vocabulary ids; a row's -inf entries make its softmax run
    over its own set whatever else the union holds.
    """

    def __init__(self, vocab_size: int, slack: float = 1.25):
        self.slack = slack
        self.position = np.full(vocab_size, -1, dtype=np.int64)   # V: id -> column in candidates, -1: absent
        self.candidates = np.zeros(0, dtype=np.int64)             # C
        self.rows: dict[int, np.ndarray] = {}                     # search id -> its bias row (C)
        self._sets: dict[int, np.ndarray] = {}                    # search id -> its candidates
        self.live = np.zeros(vocab_size, dtype=np.int32)          # V: live sentences holding each id

    def update(self, sets: dict[int, np.ndarray]) -> None:
        """Make the union serve exactly the sentences in `sets` (search id -> candidates)."""
        for gone in self.rows.keys() - sets.keys():
            self.rows.pop(gone)
            self.live[self._sets.pop(gone)] -= 1
        joining = {i: ids for i, ids in sets.items() if i not in self.rows}
        for i, ids in joining.items():
            self.live[ids] += 1
        self._sets.update(joining)
        fresh = np.unique(np.concatenate(list(joining.values()))) if joining else self.candidates[:0]
        fresh = fresh[self.position[fresh] < 0]
        if len(self.candidates) + len(fresh) > self.slack * np.count_nonzero(self.live):
            self._rebuild()
            return
        if len(fresh):
            self.position[fresh] = len(self.candidates) + np.arange(len(fresh))
            self.candidates = np.concatenate([self.candidates, fresh])
            for i, row in self.rows.items():
                self.rows[i] = np.concatenate([row, np.full(len(fresh), -np.inf, dtype=np.float32)])
        for i, ids in joining.items():
            self.rows[i] = self._row(ids)

    def bias(self, order: list[int]) -> np.ndarray:
        """Bias rows (len(order) x C) for search ids in `order`."""
        return np.stack([self.rows[i] for i in order])

    def _row(self, ids: np.ndarray) -> np.ndarray:
        row = np.full(len(self.candidates), -np.inf, dtype=np.float32)
        row[self.position[ids]] = 0.0
        return row

    def _rebuild(self) -> None:
        self.position[self.candidates] = -1
        self.candidates = np.flatnonzero(self.live > 0)
        self.position[self.candidates] = np.arange(len(self.candidates))
        self.rows = {i: self._row(ids) for i, ids in self._sets.items()}
