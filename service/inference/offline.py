"""Offline decoding (`attnmt translate`, `attnmt evaluate`): a whole list of
searches through one decode batch, new sentences joining as others finish."""

from __future__ import annotations

from attnmt.service.inference.batch import DecodeBatch
from attnmt.service.inference.engine import Engine
from attnmt.service.inference.search import BEAM, Search

# Rows per step: greedy is fastest at 64; beams at 96, where more sentences share each
# step's fixed costs (docs/benchmarks.md).
OFFLINE_ROWS, OFFLINE_BEAM_ROWS = 64, 96
# On a GPU the step's cost barely grows with its rows: 256 rows a step, greedy or beam (H200,
# 2026-11-26: 2.1x the greedy sentences/s of 64 rows for RNNsearch, 1.6x for the Transformer,
# 2.2x and 2.4x with beam 5; docs/benchmarks.md).
GPU_ROWS = 256


def decode_all(engine: Engine, searches: list[Search], max_rows: int | None = None) -> list[Search]:
    """Offline decoding of a list of searches, at most `max_rows` rows at a time
    (default: OFFLINE_ROWS, OFFLINE_BEAM_ROWS with beams, GPU_ROWS on a GPU), longest sources first (the
    memory is sized once, then only shrinks); new sentences join as others finish."""
    if max_rows is None and engine.device == "cuda":
        max_rows = GPU_ROWS
    elif max_rows is None:
        max_rows = OFFLINE_BEAM_ROWS if any(s.kind == BEAM for s in searches) else OFFLINE_ROWS
    pending = sorted(searches, key=lambda s: s.src_len)   # pop() takes the longest
    batch = DecodeBatch(engine)
    while pending or len(batch):
        joining, rows = [], batch.n_rows
        while pending and (rows + pending[-1].options.beam_size <= max_rows or not (len(batch) or joining)):
            search = pending.pop()
            joining.append(search)
            rows += search.options.beam_size
        if joining and joining[0].encoded is None:
            # Encode a batch's worth ahead: sentences join a few at a time as others
            # finish, and one encoder call per joiner would cost more than the steps.
            batch.encode(joining + pending[-max_rows:])
        batch.add(joining)
        batch.step()
    return searches
