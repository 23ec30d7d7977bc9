"""Iteration-level (continuous) batching of decoder steps.

Request-level batching (Triton's dynamic batcher) forms a batch, runs it to
the end and only then starts the next: a short sentence waits for the longest
one beside it. Here the unit is the decoder step (Orca, OSDI 2022, for
Transformers; the same holds for RNN decoders): before every step, waiting
sentences are encoded and join the batch, and after it, finished sentences
leave and are answered at once.

The event loop never blocks: ONNX Runtime runs on one executor thread per
model, which owns the `DecodeBatch` while a step runs. Cancelled and expired
sentences are dropped at the next step boundary and never computed again.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from .decoding import DecodeBatch, Search
from .errors import DeadlineExceeded, DecodeFailed, Overloaded
from .metrics import Metrics
from .translator import Translator

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SchedulerLimits:
    max_batch_rows: int = 64
    max_batch_tokens: int = 8192      # rows x longest source in a step
    max_queue: int = 1024
    max_queue_delay: float = 0.002    # seconds
    retry_after: float = 0.5
    continuous: bool = True


@dataclass(eq=False)
class Job:
    search: Search
    future: asyncio.Future
    deadline: float | None            # time.monotonic() value
    enqueued: float = field(default_factory=time.monotonic)
    cancelled: bool = False

    def expired(self, now: float) -> bool:
        return self.deadline is not None and now >= self.deadline


class Scheduler:
    def __init__(self, translator: Translator, limits: SchedulerLimits, metrics: Metrics):
        self.translator = translator
        self.limits = limits
        self.metrics = metrics
        self.model = translator.name
        self.queue: collections.deque[Job] = collections.deque()
        self.batch = DecodeBatch(translator.engine)
        self.jobs: dict[int, Job] = {}                 # search id -> job, for sentences in the batch
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"engine-{self.model}")
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._held: list[Job] = []                     # request-level mode: done, answered with the batch
        self.steps = 0

    # --- the request side -------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"scheduler-{self.model}")

    async def close(self) -> None:
        if self._task:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self.executor.shutdown(wait=True)

    def submit(self, searches: list[Search], deadline: float | None) -> list[Job]:
        """Admit sentences or refuse them all at once; await each job's future."""
        if len(self.queue) + len(searches) > self.limits.max_queue:
            self.metrics.rejected.labels("queue_full").inc(len(searches))
            raise Overloaded(f"queue full: {len(self.queue)} sentences waiting, max_queue is {self.limits.max_queue}; "
                             f"retry after {self.limits.retry_after:g}s", self.limits.retry_after)
        loop = asyncio.get_running_loop()
        jobs = [Job(s, loop.create_future(), deadline) for s in searches]
        self.queue.extend(jobs)
        self.metrics.queue_depth.set(len(self.queue))
        self._wake.set()
        return jobs

    def cancel(self, jobs: list[Job]) -> None:
        """The caller gave up (client cancel or deadline): drop its sentences at the next step."""
        now = time.monotonic()
        for job in jobs:
            # gather() has already cancelled the futures of a cancelled caller
            unanswered = job.future.cancelled() or not job.future.done()
            if unanswered and not job.cancelled:
                job.cancelled = True
                self.metrics.rejected.labels("deadline_exceeded" if job.expired(now) else "cancelled").inc()
        self._wake.set()

    # --- the loop ---------------------------------------------------------

    def _drop_dead(self) -> None:
        """Remove cancelled and expired sentences from the queue and the batch."""
        now = time.monotonic()
        for job in [j for j in self.queue if j.cancelled or j.expired(now)]:
            self.queue.remove(job)
            self._fail_dead(job, now)
        for job in [j for j in self.jobs.values() if j.cancelled or j.expired(now)]:
            self.batch.remove(job.search)
            del self.jobs[job.search.id]
            self._fail_dead(job, now)

    def _fail_dead(self, job: Job, now: float) -> None:
        if not job.cancelled:            # expired while the caller still waits
            job.cancelled = True
            self.metrics.rejected.labels("deadline_exceeded").inc()
        if not job.future.done():
            job.future.set_exception(DeadlineExceeded("deadline exceeded before the translation finished"))

    def _admit(self) -> list[Job]:
        """Waiting sentences that fit in the next step's row and token budgets."""
        if not self.limits.continuous and self.jobs:
            return []                    # request-level: the batch runs to its end first
        rows = self.batch.rows
        longest = max((s.src_len for s in self.batch.searches), default=0)
        joining: list[Job] = []
        while self.queue:
            job = self.queue[0]
            width = job.search.options.beam_size
            new_longest = max(longest, job.search.src_len)
            fits = rows + width <= self.limits.max_batch_rows and \
                (rows + width) * new_longest <= self.limits.max_batch_tokens
            if not fits and (rows or joining):
                break
            self.queue.popleft()
            joining.append(job)
            rows, longest = rows + width, new_longest
        return joining

    def _compute(self, joining: list[Search]) -> tuple[list[Search], float, float, int]:
        """Executor thread: encode the new sentences, run one step."""
        start = time.perf_counter()
        self.batch.add(joining)
        encoded = time.perf_counter()
        rows = self.batch.rows
        finished = self.batch.step()
        return finished, encoded - start, time.perf_counter() - encoded, rows

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._drop_dead()
            if not self.queue and not self.jobs:
                self._wake.clear()
                await self._wake.wait()
                continue
            if not self.jobs and self.limits.max_queue_delay and len(self.queue) < self.limits.max_batch_rows:
                # An idle batch waits briefly so that concurrent arrivals share the first step.
                await asyncio.sleep(self.limits.max_queue_delay)
                self._drop_dead()
            joining = self._admit()
            now = time.monotonic()
            for job in joining:
                self.jobs[job.search.id] = job
                self.metrics.queue_wait.observe(now - job.enqueued)
            self.metrics.queue_depth.set(len(self.queue))
            self.metrics.inflight.set(len(self.jobs))
            if not self.jobs:
                continue
            try:
                finished, encode_s, step_s, rows = await loop.run_in_executor(
                    self.executor, self._compute, [j.search for j in joining])
            except Exception as e:  # noqa: BLE001 - a failing step fails its sentences, not the server
                log.exception("decoder step failed")
                self.metrics.step_failures.inc()
                self._fail_batch(DecodeFailed(f"decoder step failed: {type(e).__name__}: {e}"))
                continue
            self.steps += 1
            if joining:
                self.metrics.encoder_seconds.observe(encode_s)
            self.metrics.step_seconds.observe(step_s)
            self.metrics.batch_rows.observe(rows)
            done = [self.jobs.pop(s.id) for s in finished]
            if not self.limits.continuous and self.jobs:
                self._held.extend(done)          # request-level: answer when the whole batch is done
                continue
            for job in self._held + done:
                self._resolve(job)
            self._held = []
            self.metrics.inflight.set(len(self.jobs))

    def _resolve(self, job: Job) -> None:
        if job.future.done():
            return
        search = job.search
        hyp = search.best()[0]
        self.metrics.sentences.labels(self.model).inc()
        self.metrics.source_tokens.labels(self.model).inc(search.src_len)
        self.metrics.target_tokens.labels(self.model).inc(len(hyp.tokens))
        job.future.set_result(search)

    def _fail_batch(self, error: Exception) -> None:
        for job in list(self.jobs.values()) + self._held:
            if not job.future.done():
                job.future.set_exception(error)
        self.jobs.clear()
        self._held = []
        self.batch = DecodeBatch(self.translator.engine)
        self.metrics.inflight.set(0)
