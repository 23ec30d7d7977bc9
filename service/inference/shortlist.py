"""The lexical shortlist at serving time: each sentence's candidate target
pieces, read from the model directory's `shortlist.npz`.

`model/export/shortlist.py` builds the file (why and how is explained there);
`vocab_bias.py` turns a batch's candidate sets into the step graph's inputs, which
confine every row to its own sentence's set whoever its batch-mates are.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from attnmt.service.errors import ModelLoadError


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

