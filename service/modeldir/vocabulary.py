"""The target vocabulary's one rule shared by export and serving: a translation
never contains <pad> or <s>. The step graphs take it as `vocab_bias`, -inf on
those ids before the softmax, which renormalises over the rest (their
probability is ~0 after training anyway)."""

from __future__ import annotations

import numpy as np

from attnmt.service.modeldir.manifest import SpecialIds


def never_generated(ids: SpecialIds | None = None) -> list[int]:
    """The ids no translation contains: <pad> and <s> (the manifest's, or the defaults)."""
    ids = ids or SpecialIds()
    return [ids.pad, ids.bos]


def no_specials_bias(vocab_size: int, ids: SpecialIds | None = None) -> np.ndarray:
    """vocab_bias (1 x V) ruling out `never_generated`."""
    bias = np.zeros((1, vocab_size), dtype=np.float32)      # 1 x V
    bias[0, never_generated(ids)] = -np.inf
    return bias
