"""The event-loop side of scheduling: admission limits, futures, cancellation.

`submit` refuses at once when the queue is full (RESOURCE_EXHAUSTED with a
retry hint) or hands the sentences to the model's `DecodeWorker`, which batches
them at step boundaries on its own thread (see `worker.py`). Each sentence's
answer comes back as the result of an asyncio future, set on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

from attnmt.service.errors import DecodeFailed, Unavailable
from attnmt.service.inference.search import Search
from attnmt.service.server import rpc_record
from attnmt.service.server.admission import INTERACTIVE
from attnmt.service.server.metrics import CALL_PROTOCOL, Metrics
from attnmt.service.server.overload import RetryHint, queue_full
from attnmt.service.server.worker import DecodeWorker, Job, Result, SchedulerLimits
from attnmt.service.text.translator import Translator

log = logging.getLogger(__name__)

__all__ = ["Scheduler", "SchedulerLimits", "Job"]


class Scheduler:
    def __init__(self, translator: Translator, limits: SchedulerLimits, metrics: Metrics,
                 on_death: Callable[[BaseException], None] | None = None, retry_hint: RetryHint | None = None):
        self.translator = translator
        # the server's one hint for every refusal; alone, a fixed delay
        self.retry_hint = retry_hint or RetryHint(limits.retry_after, limits.retry_after, float("inf"))
        self.limits = limits
        self.metrics = metrics
        self.model = translator.name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._on_death = on_death
        self.dead: BaseException | None = None
        self.worker = DecodeWorker(translator.engine, limits, metrics, self.model,
                                   deliver=self._hand_back, on_death=self._worker_died,
                                   last_refusal=lambda: self.retry_hint.last_refusal)

    # --- the request side -------------------------------------------------

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.worker.start()

    async def close(self) -> None:
        """Stop the worker after its current step (without blocking the loop) and
        fail whatever it had not answered."""
        if self.worker.thread.is_alive():
            left = await asyncio.to_thread(self.worker.stop, 10.0)
        else:
            left = self.worker.stop(0)
        self._settle([(job, Unavailable("server is shutting down")) for job in left])

    def submit(self, searches: list[Search], deadline: float | None, client: str = "",
               priority: int = INTERACTIVE) -> list[Job]:
        """Admit sentences or refuse them all at once; await each job's future."""
        if self.dead is not None:
            raise DecodeFailed(f"the decode worker of model {self.model} has stopped: {self.dead}")
        waiting = self.worker.waiting
        if waiting + len(searches) > self.limits.max_queue:
            raise queue_full(waiting, self.limits.max_queue, len(searches), self.retry_hint, self.metrics)
        loop = asyncio.get_running_loop()
        protocol = CALL_PROTOCOL.get()
        jobs = [Job(s, loop.create_future(), deadline, client, priority, protocol) for s in searches]
        rpc_record.attach(self.model, jobs)         # for traces and the request log, when they are on
        self.worker.put(jobs)
        return jobs

    def cancel(self, jobs: list[Job]) -> None:
        """The caller gave up (client cancel or deadline): drop its sentences at the next step."""
        for job in jobs:
            # gather() has already cancelled the futures of a cancelled caller
            unanswered = job.future.cancelled() or not job.future.done()
            if unanswered and not job.cancelled:
                job.cancelled = True
                expired = job.expired(time.monotonic())
                self.metrics.rejected.labels("deadline_exceeded" if expired else "cancelled", job.protocol).inc()
        self.worker.poke()

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
            if job.future.done():
                continue
            if error is not None:
                job.future.set_exception(error)
                continue
            search = job.search
            hyp = search.best()[0]
            self.metrics.sentences.labels(self.model, job.protocol).inc()
            self.metrics.source_tokens.labels(self.model).inc(search.src_len)
            self.metrics.target_tokens.labels(self.model).inc(len(hyp.tokens))
            job.future.set_result(search)

    def _worker_died(self, error: BaseException) -> None:
        """Worker thread: fail everything it held; the server stops reporting SERVING."""
        self.dead = error
        failure = DecodeFailed(f"the decode worker of model {self.model} stopped: {type(error).__name__}: {error}")
        self._call_on_loop(self._settle, [(job, failure) for job in self.worker.take_all()])
        if self._on_death is not None:
            self._call_on_loop(self._on_death, error)
