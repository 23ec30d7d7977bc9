"""The event-loop side of scheduling: admission limits, futures, cancellation.

`submit` refuses at once when the queue is full (RESOURCE_EXHAUSTED with a
retry hint) or hands the sentences to the model's `DecodeWorker`, which batches
them at step boundaries on its own thread (see `worker.py`). Each sentence's
answer comes back as the result of an asyncio future, set on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

from attnmt.service.errors import DecodeFailed, Unavailable
from attnmt.service.inference.search import Search
from attnmt.service.server import rpc_record
from attnmt.service.server.admission import INTERACTIVE
from attnmt.service.server.metrics import CALL_PROTOCOL, WARMUP, Children, Metrics
from attnmt.service.server.overload import RetryHint, queue_full
from attnmt.service.server.worker import DecodeWorker, Job, Result, SchedulerLimits
from attnmt.service.text.translator import Translator

log = logging.getLogger(__name__)

__all__ = ["Scheduler", "SchedulerLimits", "Job"]


# How long `close` waits for the worker's current step before it answers for it.
CLOSE_TIMEOUT = 10.0


class Scheduler:
    def __init__(self, translator: Translator, limits: SchedulerLimits, metrics: Metrics,
                 on_death: Callable[[BaseException], None] | None = None, retry_hint: RetryHint | None = None):
        self.translator = translator
        # the server's one hint for every refusal; alone, a fixed delay
        self.retry_hint = retry_hint or RetryHint(limits.retry_after, limits.retry_after, float("inf"))
        self.limits = limits
        self.metrics = metrics
        self.model = translator.name
        self._sentences = Children(metrics.sentences)             # counted per sentence: children kept
        self._source_tokens, self._target_tokens = Children(metrics.source_tokens), Children(metrics.target_tokens)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._on_death = on_death
        self.dead: BaseException | None = None
        self._pending: set[Job] = set()         # the loop's: submitted, neither answered nor withdrawn
        self.worker = DecodeWorker(translator.engine, limits, metrics, self.model,
                                   deliver=self._hand_back, on_death=self._worker_died,
                                   last_refusal=lambda: self.retry_hint.last_refusal)

    # --- the request side -------------------------------------------------

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.worker.start()

    async def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Stop the worker after its current step (without blocking the loop); it answers
        what it holds (UNAVAILABLE) before it exits. If that step outlasts `timeout`, the
        calls still waiting are failed here, on the loop, and the worker's own answers
        come too late to count."""
        if self.worker.thread.is_alive():
            stopped = await asyncio.to_thread(self.worker.stop, timeout)
        else:
            stopped = self.worker.stop(0)
        await asyncio.sleep(0)                   # run the worker's last hand-back, already scheduled
        if not stopped:
            log.error("the decode worker of model %s is still in a step after %gs; failing its %d calls",
                      self.model, timeout, len(self._pending))
        left, self._pending = self._pending, set()
        for job in left:                         # never handed to a running worker, or stuck in a step
            if not job.future.done():
                job.future.set_exception(Unavailable("server is shutting down"))

    def submit(self, searches: list[Search], deadline: float | None, client: str = "",
               priority: int = INTERACTIVE) -> list[Job]:
        """Admit sentences or refuse them all at once; await each job's future."""
        if self.dead is not None:
            raise DecodeFailed(f"the decode worker of model {self.model} has stopped: {type(self.dead).__name__}")
        waiting = self.worker.waiting
        if waiting + len(searches) > self.limits.max_queue:
            raise queue_full(waiting, self.limits.max_queue, len(searches), self.retry_hint, self.metrics)
        loop = asyncio.get_running_loop()
        protocol = CALL_PROTOCOL.get()
        jobs = [Job(s, loop.create_future(), deadline, client, priority, protocol) for s in searches]
        rpc_record.attach(self.model, jobs)         # for traces and the request log, when they are on
        self.worker.put(jobs)
        self._pending.update(jobs)
        return jobs

    def cancel(self, jobs: list[Job]) -> None:
        """The caller gave up (client cancel or deadline): its futures are cancelled here,
        and the worker drops its sentences at the next step boundary and counts them."""
        for job in jobs:
            job.future.cancel()                  # a no-op once answered
            self._pending.discard(job)
        self.worker.withdraw(jobs)

    # --- results from the worker thread ---------------------------------------

    def _hand_back(self, results: list[Result]) -> None:
        """Worker thread: one wake-up of the event loop per step, whatever finished."""
        self._call_on_loop(self._settle, results)

    def _call_on_loop(self, function, *args) -> None:
        try:
            self._loop.call_soon_threadsafe(function, *args)
        except RuntimeError:          # the loop has closed: nobody is left to answer
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
