"""The event-loop side of scheduling: admission limits, futures, cancellation.

`submit` refuses at once when the queue is full (RESOURCE_EXHAUSTED with a
retry hint) or hands each sentence to one of the model's `DecodeWorker`s, the
one with the fewest sentences, which batches them at step boundaries on its own
thread (see `worker.py`). A call narrow enough to step on every core alone (the
parts of one long sentence, a few short ones) goes to one worker whole. Each
sentence's answer comes back as the result of an asyncio future, set on the
event loop.

A model has `limits.workers` workers, each with its own batch and a share of the
row, token and cache limits. With one ONNX Runtime thread each they share one
engine (a session runs concurrent calls, each on its caller's thread); with more
threads each has its own engine, so that no two workers' steps share a pool.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import Callable

from attnmt.service.errors import DecodeFailed, Unavailable
from attnmt.service.inference.engine import Engine
from attnmt.service.inference.search import Search
from attnmt.service.server import rpc_record
from attnmt.service.server.admission import INTERACTIVE
from attnmt.service.server.handoff import LoopCalls
from attnmt.service.server.metrics import CALL_PROTOCOL, WARMUP, Children, Metrics
from attnmt.service.server.overload import RetryHint, queue_full
from attnmt.service.server.worker import IDLE_ROWS, DecodeWorker, Job, Result, SchedulerLimits
from attnmt.service.text.translator import Translator

log = logging.getLogger(__name__)

__all__ = ["Scheduler", "SchedulerLimits", "Job"]


# How long `close` waits for the worker's current step before it answers for it.
CLOSE_TIMEOUT = 10.0


class Scheduler:
    def __init__(self, translator: Translator, limits: SchedulerLimits, metrics: Metrics,
                 on_death: Callable[[BaseException], None] | None = None, retry_hint: RetryHint | None = None,
                 engines: list[Engine] | None = None, cores: list[set[int]] | None = None):
        """engines: one per worker (default: the translator's, shared by every worker); cores:
        the cores each worker's thread keeps to (offline.worker_cores; default: any)."""
        self.translator = translator
        # the server's one hint for every refusal; alone, a fixed delay
        self.retry_hint = retry_hint or RetryHint(limits.retry_after, limits.retry_after, float("inf"))
        self.limits = limits
        self.metrics = metrics
        self.model = translator.name
        self._sentences = Children(metrics.sentences)             # counted per sentence: children kept
        self._source_tokens, self._target_tokens = Children(metrics.source_tokens), Children(metrics.target_tokens)
        self._calls: LoopCalls | None = None       # the workers' calls onto the event loop
        self._on_death = on_death
        self.dead: BaseException | None = None
        self._pending: set[Job] = set()         # the loop's: submitted, neither answered nor withdrawn
        n = limits.workers
        engines = engines or [translator.engine] * n
        share = worker_share(limits)
        self.workers = [DecodeWorker(engines[i], share, metrics, self.model, deliver=self._hand_back,
                                     on_death=self._worker_died, last_refusal=lambda: self.retry_hint.last_refusal,
                                     others_busy=self._busy_besides(i), index=i,
                                     cpus=cores[i] if cores else None)
                        for i in range(n)]

    @property
    def waiting(self) -> int:
        """Sentences submitted and not yet in a batch, over every worker."""
        return sum(w.waiting for w in self.workers)

    def _busy_besides(self, i: int) -> Callable[[], bool]:
        """Whether a worker other than the i-th has sentences in its batch (read on the i-th's thread)."""
        return lambda: any(w.inflight for j, w in enumerate(self.workers) if j != i)

    # --- the request side -------------------------------------------------

    def start(self) -> None:
        self._calls = LoopCalls(asyncio.get_running_loop())
        for worker in self.workers:
            worker.start()

    async def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Stop the workers after their current step (without blocking the loop); each answers
        what it holds (UNAVAILABLE) before it exits. If a step outlasts `timeout`, the
        calls still waiting are failed here, on the loop, and the worker's own answers
        come too late to count."""
        for worker in self.workers:
            worker.request_stop()
        stopped = await asyncio.to_thread(self._join, timeout)
        if self._calls is not None:
            self._calls.close()                  # runs the workers' last hand-backs, already queued
        if not stopped:
            log.error("a decode worker of model %s is still in a step after %gs; failing its %d calls",
                      self.model, timeout, len(self._pending))
        left, self._pending = self._pending, set()
        for job in left:                         # never handed to a running worker, or stuck in a step
            if not job.future.done():
                job.future.set_exception(Unavailable("server is shutting down"))

    def _join(self, timeout: float) -> bool:
        """Wait for every worker to exit, `timeout` seconds in all; True once they have."""
        ends = time.monotonic() + timeout
        return all([w.stop(max(0.0, ends - time.monotonic())) for w in self.workers])

    def submit(self, searches: list[Search], deadline: float | None, client: str = "",
               priority: int = INTERACTIVE) -> list[Job]:
        """Admit sentences or refuse them all at once; await each job's future."""
        if self.dead is not None:
            raise DecodeFailed(f"the decode worker of model {self.model} has stopped: {type(self.dead).__name__}")
        waiting = self.waiting
        if waiting + len(searches) > self.limits.max_queue:
            raise queue_full(waiting, self.limits.max_queue, len(searches), self.retry_hint, self.metrics)
        loop = asyncio.get_running_loop()
        protocol = CALL_PROTOCOL.get()
        jobs = [Job(s, loop.create_future(), deadline, client, priority, protocol) for s in searches]
        rpc_record.attach(self.model, jobs)         # for traces and the request log, when they are on
        if len(self.workers) == 1:
            self.workers[0].put(jobs)
        else:
            load = [w.waiting + w.inflight for w in self.workers]
            if sum(job.width for job in jobs) <= IDLE_ROWS:
                # one batch on a worker whose steps may take every core (worker._idle), as
                # offline decodes a call; spread, each worker would step on one thread
                fewest = min(range(len(load)), key=load.__getitem__)
                for job in jobs:
                    job.worker = fewest
            else:
                for job in jobs:                    # each to the worker with the fewest sentences
                    job.worker = min(range(len(load)), key=load.__getitem__)
                    load[job.worker] += 1
            handed: list[Job] = []
            for i, worker in enumerate(self.workers):
                if mine := [job for job in jobs if job.worker == i]:
                    try:
                        worker.put(mine)
                    except BaseException:       # stopping or dead: the call is refused whole
                        self._withdraw(handed)
                        raise
                    handed += mine
        self._pending.update(jobs)
        return jobs

    def cancel(self, jobs: list[Job]) -> None:
        """The caller gave up (client cancel or deadline): its futures are cancelled here,
        and the worker drops its sentences at the next step boundary and counts them."""
        for job in jobs:
            job.future.cancel()                  # a no-op once answered
            self._pending.discard(job)
        self._withdraw(jobs)

    def _withdraw(self, jobs: list[Job]) -> None:
        for i, worker in enumerate(self.workers):
            if mine := [job for job in jobs if job.worker == i]:
                worker.withdraw(mine)

    # --- results from the worker thread ---------------------------------------

    def _hand_back(self, results: list[Result]) -> None:
        """Worker thread: one wake-up of the event loop per step, whatever finished."""
        self._call_on_loop(self._settle, results)

    def _call_on_loop(self, function, *args) -> None:
        """Worker thread: `function` runs on the loop after everything handed back before it
        (handoff.py: the wake-up keeps the GIL)."""
        try:
            self._calls.call(function, *args)
        except RuntimeError:          # the loop or the scheduler has closed: nobody is left to answer
            log.warning("event loop closed; %s dropped", function.__name__)

    def _settle(self, results: list[Result]) -> None:
        for job, error in results:
            self._pending.discard(job)
            if error is None and job.protocol != WARMUP:    # decoded, even for a caller who has just left
                search = job.search
                hyp = search.best()[0]
                self._sentences(self.model, job.protocol).inc()
                self._source_tokens(self.model).inc(search.src_len)
                self._target_tokens(self.model).inc(len(hyp.tokens))
            if job.future.done():
                continue
            if error is not None:
                job.future.set_exception(error)
            else:
                job.future.set_result(job.search)

    def _worker_died(self, error: BaseException) -> None:
        """Worker thread, after it failed everything it held: new calls are refused and the
        server stops reporting SERVING."""
        self.dead = error
        if self._on_death is not None:
            self._call_on_loop(self._on_death, error)


def worker_share(limits: SchedulerLimits) -> SchedulerLimits:
    """One worker's limits: its share of the batch's rows, tokens and cache bytes (the queue's
    bound stays the model's, checked in `submit`)."""
    n = limits.workers
    if n == 1:
        return limits
    return dataclasses.replace(limits, max_batch_rows=limits.max_batch_rows // n,
                               max_batch_tokens=limits.max_batch_tokens // n,
                               max_cache_bytes=limits.max_cache_bytes // n)
