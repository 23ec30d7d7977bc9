"""The decode worker: one thread per model that owns its `DecodeBatch` and runs
decoder steps back to back while it has rows.

Iteration-level (continuous) batching: the unit is the decoder step (Orca,
OSDI 2022, for Transformers; the same holds for RNN decoders). Before every
step, waiting sentences that fit the row and token budgets are encoded and
join; after it, finished sentences leave and are handed back at once.
Request-level batching (Triton's dynamic batcher) is a mode of the same
worker: a batch is formed, decoded to its end, and only then answered and
replaced.

The event loop never waits on a step and the worker never waits on the event
loop: the loop hands work over through `put` (a lock-protected queue) and
marks cancellations on the job, and the worker returns finished sentences
through `loop.call_soon_threadsafe`, once per step. ONNX Runtime releases the
GIL while a step runs, so the loop's Python (gRPC, protobuf) overlaps it.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from attnmt.service.errors import DeadlineExceeded, DecodeFailed
from attnmt.service.inference.batch import DecodeBatch
from attnmt.service.inference.engine import Engine
from attnmt.service.inference.search import Search
from attnmt.service.server.admission import INTERACTIVE, FairQueue
from attnmt.service.server.metrics import Metrics

log = logging.getLogger(__name__)

# A step with at most this many rows, nobody waiting and no call refused for this many
# seconds counts as idle: with the server's `idle_spinning`, ONNX Runtime's threads then
# spin within it (a lone sentence's latency drops), and not under load, when the event
# loop needs the cores; nor between the waves of an overload, while it refuses callers
# who come back as RetryInfo tells them.
IDLE_ROWS = 8
IDLE_AFTER_REFUSAL = 10.0


@dataclass(frozen=True)
class SchedulerLimits:
    max_batch_rows: int = 64
    max_batch_tokens: int = 8192      # rows x longest source in a step
    max_cache_bytes: int = 0          # growing states (self-attention caches) of a step; 0: no limit
    max_queue: int = 1024
    max_queue_delay: float = 0.002    # seconds an idle worker waits for more sentences
    min_joiners: int = 1              # a running batch (half full or more) takes joiners this many at a time
    max_join_delay: float = 0.0       # seconds a waiting sentence waits for that company at most
    retry_after: float = 0.5
    continuous: bool = True


@dataclass(eq=False)
class Job:
    """One sentence between the event loop and the worker. `future` belongs to
    the loop (the worker never touches it); `cancelled` is written by the loop
    and read by the worker at step boundaries."""
    search: Search
    future: object                    # asyncio.Future
    deadline: float | None            # time.monotonic() value
    client: str = ""                  # who asked (admission is fair between clients)
    priority: int = INTERACTIVE       # INTERACTIVE (unary calls) or BULK (streams)
    protocol: str = "grpc"            # how the call came (metrics' `protocol` label)
    enqueued: float = field(default_factory=time.monotonic)
    cancelled: bool = False
    # Written by the worker, for traces and the request log (rpc_record.py): when the
    # sentence joined the batch, when its encoding ended and when its last step ended
    # (time.monotonic()); the worker's (steps, rows) totals when it joined and when it left.
    joined: float | None = None
    encoded: float | None = None
    finished: float | None = None
    totals_joined: tuple[int, int] = (0, 0)
    totals_left: tuple[int, int] = (0, 0)

    def expired(self, now: float) -> bool:
        return self.deadline is not None and now >= self.deadline

    @property
    def steps(self) -> int:
        """Decoder steps this sentence was in."""
        return self.totals_left[0] - self.totals_joined[0]

    @property
    def rows(self) -> int:
        """Rows of those steps, its batch-mates' included: rows / steps is the batch it shared."""
        return self.totals_left[1] - self.totals_joined[1]


# A result handed back: (job, None) when its search is done, (job, error) when it failed.
Result = tuple[Job, Exception | None]


class DecodeWorker:
    def __init__(self, engine: Engine, limits: SchedulerLimits, metrics: Metrics, name: str,
                 deliver: Callable[[list[Result]], None], on_death: Callable[[BaseException], None],
                 last_refusal: Callable[[], float] = lambda: float("-inf")):
        self.limits = limits
        self.metrics = metrics
        self.batch = DecodeBatch(engine)
        self._engine = engine
        self._deliver = deliver            # called on the worker thread; must hand over thread-safely
        self._on_death = on_death
        self._last_refusal = last_refusal  # time.monotonic() of the server's latest refusal
        self._cond = threading.Condition()
        self._waiting = FairQueue()
        self._jobs: dict[int, Job] = {}    # search id -> job, for sentences in the batch
        self._held: list[Job] = []         # request-level mode: done, answered when the batch ends
        self._deferred_since: float | None = None   # when sentences first waited for joining company
        self._stopping = False
        self.steps = 0
        self.rows = 0                      # rows over all steps (Job.rows is a difference of these)
        self.thread = threading.Thread(target=self._main, name=f"decode-{name}", daemon=True)

    # --- called from the event loop ---------------------------------------------

    def start(self) -> None:
        self.thread.start()

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def put(self, jobs: list[Job]) -> None:
        with self._cond:
            for job in jobs:
                self._waiting.append(job)
            self.metrics.queue_depth.set(len(self._waiting))
            self._cond.notify()

    def poke(self) -> None:
        """Something changed (a cancellation): look at the queue and batch again."""
        with self._cond:
            self._cond.notify()

    def stop(self, timeout: float | None = None) -> list[Job]:
        """Stop after the current step; returns the jobs never answered."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self.thread.ident is not None:           # started
            self.thread.join(timeout)
        return self.take_all()

    def take_all(self) -> list[Job]:
        """Every job not answered yet, removed from the worker (stopping or dead)."""
        with self._cond:
            left = list(self._waiting) + list(self._jobs.values()) + self._held
            self._waiting.clear()
            self._jobs.clear()
            self._held = []
        return left

    # --- the worker thread -------------------------------------------------------

    def _main(self) -> None:
        try:
            while True:
                joining = self._next_joiners()
                if joining is None:
                    return
                try:
                    self._iterate(joining)
                except Exception as e:  # noqa: BLE001 - a failing step fails its sentences, not the worker
                    log.exception("decoder step failed")
                    self.metrics.step_failures.inc()
                    self._isolate(DecodeFailed(f"decoder step failed: {type(e).__name__}: {e}"))
        except BaseException as e:  # the worker itself broke: nothing will decode any more
            log.critical("decode worker died", exc_info=True)
            self._on_death(e)

    def _next_joiners(self) -> list[Job] | None:
        """Wait for work; drop the dead; return the sentences joining the next step
        (None when stopping)."""
        with self._cond:
            while not self._stopping and not self._waiting and not self._jobs:
                self.metrics.queue_depth.set(0)
                self.metrics.inflight.set(0)
                self._cond.wait()
            if self._stopping:
                return None
            if not self._jobs and self.limits.max_queue_delay and len(self._waiting) < self.limits.max_batch_rows:
                # An idle batch waits briefly so that concurrent arrivals share the first step.
                self._cond.wait(self.limits.max_queue_delay)
            results = self._drop_dead()
            joining = [] if self._defer_joining() else self._admit()
            self.metrics.queue_depth.set(len(self._waiting))
        if results:
            self._deliver(results)
        return joining

    def _drop_dead(self) -> list[Result]:
        """Remove cancelled and expired sentences from the queue and the batch."""
        now = time.monotonic()
        results: list[Result] = []
        for job in self._waiting.remove(lambda j: j.cancelled or j.expired(now)):
            results += self._dead(job, now)
        for job in [j for j in self._jobs.values() if j.cancelled or j.expired(now)]:
            self.batch.remove(job.search)
            del self._jobs[job.search.id]
            results += self._dead(job, now)
        if not self._jobs and self._held:           # request-level: the batch ended by cancellation
            results += [(job, None) for job in self._held]
            self._held = []
        return results

    def _dead(self, job: Job, now: float) -> list[Result]:
        if job.cancelled:                            # the caller is gone: nobody to answer
            return []
        job.cancelled = True
        self.metrics.rejected.labels("deadline_exceeded", job.protocol).inc()
        return [(job, DeadlineExceeded("deadline exceeded before the translation finished"))]

    def _defer_joining(self) -> bool:
        """Whether waiting sentences wait one more step for company. The encoder costs more
        per sentence alone than among several, and at full load a batch frees one or two
        rows a step; so while the batch is at least half full and fewer than `min_joiners`
        sentences could join, they wait, up to `max_join_delay` after the first of them could
        have joined."""
        limits = self.limits
        could = min(len(self._waiting), limits.max_batch_rows - self.batch.n_rows)
        if (limits.min_joiners <= 1 or not could or could >= limits.min_joiners or not self._jobs
                or 2 * self.batch.n_rows < limits.max_batch_rows):
            self._deferred_since = None
            return False
        now = time.monotonic()
        if self._deferred_since is None:
            self._deferred_since = now
        if now - self._deferred_since >= limits.max_join_delay:
            self._deferred_since = None
            return False
        return True

    def _admit(self) -> list[Job]:
        """Waiting sentences that fit in the next step's row and token budgets, chosen
        fairly between clients (admission.py)."""
        if not self.limits.continuous and self._jobs:
            return []                    # request-level: the batch runs to its end first
        joining: list[Job] = []
        # rows, longest source and longest translation to come once this round's joiners are in
        budget = {"rows": self.batch.n_rows, "longest": self.batch.longest, "to_come": 0}

        def width(job: Job) -> int:
            return job.search.options.beam_size if job.search.forced is None else 1

        def fits(job: Job) -> bool:
            if not budget["rows"]:
                return True              # an empty step takes anything (limits are checked at the door)
            rows, longest = budget["rows"] + width(job), max(budget["longest"], job.search.src_len)
            if (self.limits.max_cache_bytes
                    and self.batch.cache_peak_bytes(rows, max(job.search.max_length, budget["to_come"]))
                    > self.limits.max_cache_bytes):
                return False             # the caches could outgrow their budget: wait until rows leave
            return rows <= self.limits.max_batch_rows and rows * longest <= self.limits.max_batch_tokens

        def admit(job: Job) -> None:
            joining.append(job)
            budget["rows"] += width(job)
            budget["longest"] = max(budget["longest"], job.search.src_len)
            budget["to_come"] = max(budget["to_come"], job.search.max_length)

        self._waiting.take(lambda job: width(job) * job.search.src_len, fits, admit)
        return joining

    def _iterate(self, joining: list[Job]) -> None:
        """Encode the joiners, run one step, hand back what finished."""
        now = time.monotonic()
        for job in joining:
            self._jobs[job.search.id] = job
            self.metrics.queue_wait.observe(now - job.enqueued)
            job.joined, job.totals_joined = now, (self.steps, self.rows)
        if not self._jobs:
            return
        start = time.perf_counter()
        if joining:
            self.batch.add([j.search for j in joining])
            self.metrics.encoder_seconds.observe(time.perf_counter() - start)
            encoded = time.monotonic()
            for job in joining:
                job.encoded = encoded
        rows = self.batch.n_rows
        self.metrics.cache_bytes.set(self.batch.cache_bytes())
        idle = self._idle(rows)
        if idle:
            self.metrics.idle_steps.inc()
        stepped = time.perf_counter()
        finished = self.batch.step(idle)
        self.metrics.step_seconds.observe(time.perf_counter() - stepped)
        self.metrics.batch_rows.observe(rows)
        self.steps += 1
        self.rows += rows
        done = [self._jobs.pop(s.id) for s in finished]
        ended = time.monotonic()
        for job in done:
            job.finished, job.totals_left = ended, (self.steps, self.rows)
        if not self.limits.continuous and self._jobs:
            self._held += done                      # request-level: answer when the whole batch is done
            return
        results = [(job, None) for job in self._held + done]
        self._held = []
        self.metrics.inflight.set(len(self._jobs))
        if results:
            self._deliver(results)

    def _idle(self, rows: int) -> bool:
        """Whether the next step has cores to spare (IDLE_ROWS, IDLE_AFTER_REFUSAL)."""
        refused_lately = time.monotonic() - self._last_refusal() <= IDLE_AFTER_REFUSAL
        return rows <= IDLE_ROWS and not self._waiting and not refused_lately

    def _isolate(self, error: Exception) -> None:
        """After a failed step, decode each of the batch's sentences again, alone and from
        the start: a poisoned sentence fails by itself and its batch-mates (other
        requests' sentences) still get their answers. Rare, so simple beats fast: this is
        a bisection down to single sentences, run before anything else joins."""
        jobs = list(self._jobs.values()) + self._held
        self._jobs.clear()
        self._held = []
        self.batch = DecodeBatch(self._engine)
        self.metrics.inflight.set(0)
        for job in jobs:
            if job.cancelled or job.expired(time.monotonic()):
                self._deliver(self._dead(job, time.monotonic()))
                continue
            job.search.restart()
            alone = DecodeBatch(self._engine)
            try:
                alone.add([job.search])
                while len(alone):
                    alone.step()
            except Exception:  # noqa: BLE001 - this sentence fails the step by itself
                log.exception("sentence %d fails the decoder step alone", job.search.id)
                self._deliver([(job, error)])
            else:
                self._deliver([(job, None)])
