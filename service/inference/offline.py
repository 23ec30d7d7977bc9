"""Offline decoding (`attnmt translate`, `attnmt evaluate`): a whole list of
searches through one decode batch, new sentences joining as others finish."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

from attnmt.service.inference.batch import DecodeBatch
from attnmt.service.inference.engine import Engine
from attnmt.service.inference.search import BEAM, Search
from attnmt.service.inference.slots import StateBuffers

# Rows per step: greedy is fastest at 64; beams at 160, where more sentences share each
# step's fixed costs (AMD EPYC, 2026-11-29, beam 5 in chunks of 64 verses: 1.05-1.09x 96 rows
# with two 1-thread workers, 1.18x with one 2-thread worker; greedy at 96 and 128 rows 0.93-0.95x 64).
OFFLINE_ROWS, OFFLINE_BEAM_ROWS = 64, 160
# On a GPU the step's cost barely grows with its rows: 256 rows a step, greedy or beam (H200,
# 2026-11-26: 2.1x the greedy sentences/s of 64 rows for RNNsearch, 1.6x for the Transformer,
# 2.2x and 2.4x with beam 5; docs/benchmarks.md).
GPU_ROWS = 256

# Cache memory handed from one offline batch to the next (slots.StateBuffers): a few sets,
# one for each batch decoding at once (decode workers), kept between calls.
_SPARE: list[StateBuffers] = []
_SPARE_LOCK = threading.Lock()
_SPARE_KEPT = 4


def cores() -> int:
    """The CPUs this process may run on (its affinity: a container's cpuset, taskset)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def worker_cores(workers: int, threads: int, allowed: set[int] | None = None) -> list[set[int]] | None:
    """The core each decode worker's thread keeps to, or None: only where the process may run on
    exactly one core per worker and each worker steps on one thread (a cpuset, a pod's exclusive
    cores, a machine of that size); elsewhere the cores are others' too and pinning could stack
    the workers on busy ones. `allowed`: the process's CPUs (default: its affinity)."""
    if allowed is None:
        if not hasattr(os, "sched_setaffinity"):
            return None
        allowed = os.sched_getaffinity(0)
    if threads != 1 or workers < 2 or len(allowed) != workers:
        return None
    return [{cpu} for cpu in sorted(allowed)]


def workers_and_threads(device: str, workers: int = 0, threads: int = 0) -> tuple[int, int]:
    """(decode workers, ONNX Runtime threads each) on `device`, the one rule for the server and
    offline decoding. workers 0: two where the CPU's cores hold two workers of `threads` (one
    when 0) each, else one; threads 0: the cores shared out between two or more workers, ONNX
    Runtime's default for one (and off the CPU)."""
    if not workers:
        workers = 2 if device == "cpu" and cores() >= 2 * max(1, threads) else 1
    if not threads and device == "cpu" and workers > 1:
        threads = max(1, cores() // workers)
    return workers, threads


def decode_all(engine: Engine, searches: list[Search], max_rows: int | None = None,
               workers: int = 1) -> list[Search]:
    """Offline decoding of a list of searches, at most `max_rows` rows at a time
    (default: OFFLINE_ROWS, OFFLINE_BEAM_ROWS with beams, GPU_ROWS on a GPU), longest sources first (the
    memory is sized once, then only shrinks); new sentences join as others finish.
    workers: decode batches on as many threads, each with every workers-th sentence by length
    (the engine's sessions run concurrent calls; with one ONNX Runtime thread each, two
    batches on two cores decode more than one batch on both: docs/benchmarks.md)."""
    if workers > 1 and len(searches) > 1:
        by_length = sorted(searches, key=lambda s: -s.src_len)
        with ThreadPoolExecutor(workers, thread_name_prefix="decode") as pool:
            for done in [pool.submit(decode_all, engine, by_length[i::workers], max_rows) for i in range(workers)]:
                done.result()
        return searches
    if max_rows is None and engine.device == "cuda":
        max_rows = GPU_ROWS
    elif max_rows is None:
        max_rows = OFFLINE_BEAM_ROWS if any(s.kind == BEAM for s in searches) else OFFLINE_ROWS
    pending = sorted(searches, key=lambda s: s.src_len)   # pop() takes the longest
    with _SPARE_LOCK:
        buffers = _SPARE.pop() if _SPARE else StateBuffers()
    try:
        _decode(DecodeBatch(engine, buffers), pending, max_rows)
    finally:
        with _SPARE_LOCK:
            if len(_SPARE) < _SPARE_KEPT:
                _SPARE.append(buffers)
    return searches


def _decode(batch: DecodeBatch, pending: list[Search], max_rows: int) -> None:
    """Step `batch` until `pending` (sorted shortest first) has all joined and finished."""
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
