"""The decode worker: a thread that owns its `DecodeBatch` and runs decoder steps
back to back while it has rows. A model has one or more (`decode_workers`; the
scheduler gives each sentence to one), each with its own batch and queue.

Iteration-level (continuous) batching: the unit is the decoder step (Orca,
OSDI 2022, for Transformers; the same holds for RNN decoders). Before every
step, waiting sentences that fit the row and token budgets are encoded and
join; after it, finished sentences leave and are handed back at once.
Request-level batching (Triton's dynamic batcher) is a mode of the same
worker: a batch is formed, decoded to its end, and only then answered and
replaced.

The event loop never waits on a step and the worker never waits on the event
loop. Each piece of state has one owner:
- the inbox (`put`'s arrivals, `withdraw`'s cancellations, the stop request) is
  shared, under `_cond`; the loop appends, the worker empties it at step
  boundaries, and nobody does more than a list append or swap while holding it;
- the queue, the batch and every job's `outcome` belong to the worker thread:
  only the worker marks a job cancelled or expired, counts it, and answers it;
- a job's future belongs to the loop: the worker hands results back through
  `handoff.LoopCalls`, once per step.
ONNX Runtime releases the GIL while a step runs, so the loop's Python (gRPC,
protobuf) overlaps it. When asked to stop, the worker answers every sentence it
holds before it exits.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from attnmt.service.errors import DeadlineExceeded, DecodeFailed, Unavailable
from attnmt.service.inference.batch import DecodeBatch
from attnmt.service.inference.engine import Engine
from attnmt.service.inference.search import Search
from attnmt.service.server.admission import BULK, INTERACTIVE, FairQueue
from attnmt.service.server.metrics import Metrics

if TYPE_CHECKING:
    from attnmt.service.server.settings import Settings

log = logging.getLogger(__name__)

# A step with at most this many rows, nobody waiting and no call refused for this many
# seconds counts as idle: with the server's `idle_spinning`, ONNX Runtime's threads then
# spin within it (a lone sentence's latency drops), and not under load, when the event
# loop needs the cores; nor between the waves of an overload, while it refuses callers
# who come back as RetryInfo tells them.
IDLE_ROWS = 8
IDLE_AFTER_REFUSAL = 10.0
# Interactive work that arrived this recently still holds bulk work to a few rows (_admit): one
# client's calls one after another leave gaps of a round trip between them.
INTERACTIVE_RECENT = 1.0
# Beside interactive sentences in the batch, bulk sentences join at most this often (_admit):
# each joiner costs an encoder run and widens every step until it leaves, and the interactive
# sentences would pay for both. Bulk work still joins in the gaps between interactive calls, and
# at least this often under an unbroken stream of them, so a file never stalls.
BULK_JOIN_INTERVAL = 0.1

SHUTTING_DOWN = "server is shutting down"

# Job.outcome: how the worker settled a sentence, once.
TRANSLATED, FAILED, CANCELLED, EXPIRED, UNANSWERED = "translated", "failed", "cancelled", "deadline_exceeded", \
    "unavailable"

# A client whose deadline passes cancels the call (RST_STREAM); that can reach the server a
# little before the server's own copy of the deadline (the request's grpc-timeout counted from
# its arrival) has passed. A cancellation this close to the deadline is the deadline: counted
# as deadline_exceeded here and named DEADLINE_EXCEEDED by the metrics interceptor.
DEADLINE_SLACK_SECONDS = 0.05


@dataclass(frozen=True)
class SchedulerLimits:
    """The worker's and the scheduler's share of `Settings`; built by `from_settings` only."""
    max_batch_rows: int
    max_batch_tokens: int             # rows x longest source in a step
    max_cache_bytes: int              # growing states (self-attention caches) of a step; 0: no limit
    max_queue: int
    max_queue_delay: float            # seconds an idle batch waits for company before its first step
    min_joiners: int                  # a running batch (half full or more) takes joiners this many at a time
    max_join_delay: float             # seconds a waiting sentence waits for that company at most
    max_bulk_rows_beside_interactive: int   # bulk rows a step admits while interactive work is about
    retry_after: float
    continuous: bool
    workers: int = 1                  # decode workers of the model (each gets scheduler.worker_share of these)

    @classmethod
    def from_settings(cls, settings: "Settings") -> "SchedulerLimits":
        s = settings
        return cls(max_batch_rows=s.max_batch_rows, max_batch_tokens=s.max_batch_tokens,
                   max_cache_bytes=s.max_cache_bytes, max_queue=s.max_queue, max_queue_delay=s.queue_delay_seconds,
                   min_joiners=s.min_joiners, max_join_delay=s.max_join_delay_ms / 1000,
                   max_bulk_rows_beside_interactive=s.max_bulk_rows_beside_interactive,
                   retry_after=s.retry_after_seconds, continuous=s.batching == "continuous", workers=s.workers)


@dataclass(eq=False)
class Job:
    """One sentence between the event loop and the worker. `future` belongs to
    the loop (the worker never touches it); `outcome` and the timings below
    belong to the worker. The loop asks for cancellation through
    `DecodeWorker.withdraw`, never by writing the job."""
    search: Search
    future: object                    # asyncio.Future
    deadline: float | None            # time.monotonic() value
    client: str = ""                  # who asked (admission is fair between clients)
    priority: int = INTERACTIVE       # INTERACTIVE (unary calls) or BULK (streams)
    protocol: str = "grpc"            # how the call came (metrics' `protocol` label)
    worker: int = 0                   # which of the model's decode workers has it (the scheduler's choice)
    enqueued: float = field(default_factory=time.monotonic)
    outcome: str | None = None        # TRANSLATED, FAILED, CANCELLED, EXPIRED or UNANSWERED, set once
    # Written by the worker, for traces and the request log (rpc_record.py): when the
    # sentence joined the batch, when its encoding ended and when its last step ended
    # (time.monotonic()); the worker's (steps, rows) totals when it joined and when it left.
    joined: float | None = None
    encoded: float | None = None
    finished: float | None = None
    totals_joined: tuple[int, int] = (0, 0)
    totals_left: tuple[int, int] = (0, 0)

    def expired(self, now: float, slack: float = 0.0) -> bool:
        """Its deadline has passed at `now`, or will within `slack` seconds."""
        return self.deadline is not None and now >= self.deadline - slack

    @property
    def width(self) -> int:
        """Rows it takes in a step: its beam, or one for forced decoding."""
        return self.search.options.beam_size if self.search.forced is None else 1

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
                 last_refusal: Callable[[], float] = lambda: float("-inf"),
                 others_busy: Callable[[], bool] = lambda: False, index: int = 0, cpus: set[int] | None = None):
        self.limits = limits
        self.metrics = metrics
        self.name = name
        self._engine = engine
        self._deliver = deliver            # called on the worker thread; must hand over thread-safely
        self._on_death = on_death
        self._last_refusal = last_refusal  # time.monotonic() of the server's latest refusal
        self._others_busy = others_busy    # whether another worker of the model has sentences in its batch
        self._cpus = cpus                  # the cores the worker's thread keeps to (None: any)
        # The inbox, shared with the event loop under _cond: appended to there, emptied here.
        self._cond = threading.Condition()
        self._arrivals: list[Job] = []
        self._arriving_rows = 0
        self._withdrawals: list[Job] = []
        self._stopping = False
        self._refusal: Callable[[], Exception] | None = None   # once set, put refuses with it
        # One writer each, so no lock: sentences put (the loop) and sentences that left the queue
        # (the worker); `waiting` is the difference.
        self._put_count = 0
        self._left_count = 0
        # The worker thread's own.
        self.batch = DecodeBatch(engine)
        self._waiting = FairQueue()
        self._jobs: dict[int, Job] = {}    # search id -> job, for sentences in the batch
        self._held: list[Job] = []         # request-level mode: done, answered when the batch ends
        self._suspects: list[Job] = []     # after a failed step: decoded again one at a time, first first
        self._deferred_since: float | None = None   # when sentences first waited for joining company
        self._interactive_seen = float("-inf")      # when interactive work last arrived (bulk yields to it)
        self._bulk_joined = float("-inf")           # when a bulk sentence last joined the batch
        # No deadline of a sentence held (waiting or in the batch) passes before this (it may be
        # earlier than the earliest: _drop_dead scans, then sets it again), so a step with
        # nothing waiting or arriving skips the scan (_next_joiners).
        self._next_expiry = float("inf")
        self.steps = 0
        self.rows = 0                      # rows over all steps (Job.rows is a difference of these)
        # Written here, read by the scheduler and the metrics' gauges at scrape time.
        self.inflight = 0                  # sentences in the batch
        self.cache_bytes = 0               # the batch's growing states at the last step
        self.thread = threading.Thread(target=self._main, name=f"decode-{name}" + (f"-{index}" if index else ""),
                                       daemon=True)
        metrics.watch(self)

    # --- called from the event loop ---------------------------------------------

    def start(self) -> None:
        self.thread.start()

    @property
    def waiting(self) -> int:
        """Sentences put and not yet in the batch (nor dropped)."""
        return self._put_count - self._left_count

    def put(self, jobs: list[Job]) -> None:
        """Hand sentences over; raises Unavailable once stopping, DecodeFailed once the worker died."""
        with self._cond:
            if self._refusal is not None:
                raise self._refusal()
            self._arrivals += jobs
            self._arriving_rows += sum(job.width for job in jobs)
            self._put_count += len(jobs)
            self._cond.notify()

    def withdraw(self, jobs: list[Job]) -> None:
        """The callers gave up: the worker drops these sentences at its next step boundary
        and counts each once (deadline_exceeded if its deadline has passed by then, else
        cancelled); one it has already answered is left as it is."""
        with self._cond:
            self._withdrawals += jobs
            self._cond.notify()

    def stop(self, timeout: float | None = None) -> bool:
        """Stop after the current step; the worker answers every sentence it holds
        (UNAVAILABLE) before it exits. True once it has exited; False if it is still
        in a step after `timeout` seconds (then it answers when that step ends)."""
        self.request_stop()
        if self.thread.ident is None:               # never started: it holds nothing but the inbox
            return True
        self.thread.join(timeout)
        return not self.thread.is_alive()

    def request_stop(self) -> None:
        """`stop` without the wait: new sentences are refused and the worker stops after its
        current step (the scheduler asks every worker first, then waits for them together)."""
        with self._cond:
            self._stopping = True
            if self._refusal is None:
                self._refusal = lambda: Unavailable(SHUTTING_DOWN)
            self._cond.notify()

    # --- the worker thread -------------------------------------------------------

    def _main(self) -> None:
        if self._cpus:
            try:                        # Linux: pid 0 is the calling thread, not the whole process
                os.sched_setaffinity(0, self._cpus)
            except OSError as e:
                log.warning("decode worker %s keeps to no core: %s", self.thread.name, e)
        try:
            while (joining := self._next_joiners()) is not None:
                failed = None
                try:
                    self._iterate(joining)
                except Exception as e:  # noqa: BLE001 - a failing step fails its sentences, not the worker
                    failed = e
                if failed is not None:      # outside the handler: isolation's own errors are not its context
                    self._step_failed(failed)
        except BaseException as e:  # the worker itself broke: nothing will decode any more
            log.critical("decode worker of model %s died (%d sentences in the batch, %d waiting)", self.name,
                         len(self._jobs), len(self._waiting), exc_info=True)
            # the cause's own text stays in the log above (a caller reads its type and a request id)
            failure = DecodeFailed(f"the decode worker of model {self.name} has stopped: {type(e).__name__}")
            failure.__cause__ = e
            try:
                self._exit(failure)
            finally:
                self._on_death(e)
            return
        self._exit(Unavailable(SHUTTING_DOWN))

    def _next_joiners(self) -> list[Job] | None:
        """Wait for work; take the inbox; drop the dead; return the sentences joining the
        next step (None when stopping)."""
        with self._cond:
            while not (self._stopping or self._arrivals or self._withdrawals or self._waiting or self._jobs):
                self.inflight = 0
                self._cond.wait()
            if not self._jobs and not self._waiting and self._arrivals and self.limits.max_queue_delay:
                self._gather()
            stopping, arrivals, withdrawals = self._take_inbox()
        results = self._absorb(arrivals, withdrawals)
        joining = None
        if not stopping:
            if arrivals or withdrawals or self._waiting or time.monotonic() >= self._next_expiry:
                results += self._drop_dead()
                joining = [] if self._defer_joining() else self._admit()
            else:
                # The usual step under a steady batch: nothing came, waits or died, so there is
                # nothing to drop or admit (the scan and the admission cost a lone sentence's
                # steps a few percent each).
                joining = []
        if results:
            self._deliver(results)
        return joining

    def _gather(self) -> None:
        """With _cond held, on an idle batch: wait until `max_queue_delay` after the first
        arrival, or until the arrivals fill a step, so that concurrent arrivals share the
        first step (each `put` wakes this wait; it goes back to waiting)."""
        closes = self._arrivals[0].enqueued + self.limits.max_queue_delay
        while not self._stopping and self._arriving_rows < self.limits.max_batch_rows:
            left = closes - time.monotonic()
            if left <= 0:
                return
            self._cond.wait(left)

    def _take_inbox(self) -> tuple[bool, list[Job], list[Job]]:
        """With _cond held: (stopping, arrivals, withdrawals), the inbox emptied."""
        arrivals, withdrawals = self._arrivals, self._withdrawals
        self._arrivals, self._withdrawals, self._arriving_rows = [], [], 0
        return self._stopping, arrivals, withdrawals

    def _absorb(self, arrivals: list[Job], withdrawals: list[Job]) -> list[Result]:
        """Arrivals join the queue; withdrawn sentences not answered yet are marked and
        counted here, once, and leave their container in `_drop_dead`."""
        now, results = time.monotonic(), []
        for job in arrivals:
            self._waiting.append(job)
            if job.priority == INTERACTIVE:
                self._interactive_seen = now
            if job.deadline is not None:
                self._next_expiry = min(self._next_expiry, job.deadline)
        for job in withdrawals:
            if job.outcome is None:
                results += self._settle_dead(job, now, withdrawn=True)
        return results

    def _settle_dead(self, job: Job, now: float, withdrawn: bool = False) -> list[Result]:
        """Mark and count a sentence that will not be decoded further: expired, or withdrawn
        by its caller. Only an expired one is answered (its caller may still be waiting)."""
        if job.expired(now, DEADLINE_SLACK_SECONDS if withdrawn else 0.0):
            job.outcome = EXPIRED
            self.metrics.rejected.labels(EXPIRED, job.protocol).inc()
            return [(job, DeadlineExceeded("deadline exceeded before the translation finished"))]
        if withdrawn:
            job.outcome = CANCELLED
            self.metrics.rejected.labels(CANCELLED, job.protocol).inc()
        return []

    def _drop_dead(self) -> list[Result]:
        """Remove withdrawn and expired sentences from the queue and the batch."""
        now = time.monotonic()
        results: list[Result] = []

        def dead(job: Job) -> bool:
            return job.outcome is not None or job.expired(now)
        for job in self._waiting.remove(dead):
            self._left_count += 1
            if job.outcome is None:
                results += self._settle_dead(job, now)
        for job in [j for j in self._jobs.values() if dead(j)]:
            self.batch.remove(job.search)
            del self._jobs[job.search.id]
            if job.outcome is None:
                results += self._settle_dead(job, now)
        if not self._jobs and self._held:           # request-level: the batch ended by cancellation
            results += [(job, None) for job in self._held]
            self._held = []
        self._next_expiry = min((job.deadline for job in (*self._waiting, *self._jobs.values())
                                 if job.deadline is not None), default=float("inf"))
        return results

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
        # rows, longest source and longest translation to come once this round's joiners are in;
        # bulk rows beside interactive work: while interactive work is about (in the batch, or
        # arrived within INTERACTIVE_RECENT), bulk sentences join only up to a few rows, so an
        # interactive sentence's steps stay small, as on an idle server (a file's jobs do not
        # take every row between two calls of one interactive client); and beside interactive
        # sentences in the step, once in BULK_JOIN_INTERVAL at most
        now, bulk_joined = time.monotonic(), self._bulk_joined
        in_batch = sum(1 for j in self._jobs.values() if j.priority == INTERACTIVE)
        interactive = in_batch > 0 or now - self._interactive_seen < INTERACTIVE_RECENT
        bulk_rows = sum(j.width for j in self._jobs.values() if j.priority == BULK) if interactive else 0
        budget = {"rows": self.batch.n_rows, "longest": self.batch.longest, "to_come": 0, "bulk": bulk_rows,
                  "interactive": in_batch}

        def fits(job: Job) -> bool:
            if interactive and job.priority == BULK:
                if budget["bulk"] and budget["bulk"] + job.width > self.limits.max_bulk_rows_beside_interactive:
                    return False         # yields to the interactive work about (one always runs)
                if budget["interactive"] and now - bulk_joined < BULK_JOIN_INTERVAL:
                    return False         # beside interactive sentences: a round now and then
            if not budget["rows"]:
                return True              # an empty step takes anything (limits are checked at the door)
            rows, longest = budget["rows"] + job.width, max(budget["longest"], job.search.src_len)
            if (self.limits.max_cache_bytes
                    and self.batch.cache_peak_bytes(rows, max(job.search.max_length, budget["to_come"]))
                    > self.limits.max_cache_bytes):
                return False             # the caches could outgrow their budget: wait until rows leave
            return rows <= self.limits.max_batch_rows and rows * longest <= self.limits.max_batch_tokens

        def admit(job: Job) -> None:
            joining.append(job)
            budget["rows"] += job.width
            if job.priority == BULK:
                budget["bulk"] += job.width
                self._bulk_joined = now
            else:
                budget["interactive"] += 1
            budget["longest"] = max(budget["longest"], job.search.src_len)
            budget["to_come"] = max(budget["to_come"], job.search.max_length)

        self._waiting.take(lambda job: job.width * job.search.src_len, fits, admit)
        self._left_count += len(joining)
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
        idle = self._idle(self.batch.n_rows + sum(j.width for j in joining))
        start = time.perf_counter()
        if joining:
            self.batch.add([j.search for j in joining], idle)
            self.metrics.encoder_seconds.observe(time.perf_counter() - start)
            encoded = time.monotonic()
            for job in joining:
                job.encoded = encoded
        rows = self.batch.n_rows
        self.cache_bytes, self.inflight = self.batch.cache_bytes(), len(self._jobs)
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
            job.finished, job.totals_left, job.outcome = ended, (self.steps, self.rows), TRANSLATED
        if not self.limits.continuous and self._jobs:
            self._held += done                      # request-level: answer when the whole batch is done
            return
        results = [(job, None) for job in self._held + done]
        self._held = []
        self.inflight = len(self._jobs)
        if results:
            self._deliver(results)

    def _idle(self, rows: int) -> bool:
        """Whether the next step has cores to spare (IDLE_ROWS, IDLE_AFTER_REFUSAL). Bulk work
        neither waiting nor beside interactive sentences counts: it waits and stays narrow by
        design (_admit), and a file's backlog must not take the spinning threads from the
        interactive calls it yields to. Nor while another worker of the model has sentences:
        its steps need the cores the spinning threads would take."""
        if self._waiting.has(INTERACTIVE) or time.monotonic() - self._last_refusal() <= IDLE_AFTER_REFUSAL:
            return False
        if rows > IDLE_ROWS:                        # (at most IDLE_ROWS rows: so are the interactive ones)
            interactive_rows = sum(j.width for j in self._jobs.values() if j.priority == INTERACTIVE)
            if not 0 < interactive_rows <= IDLE_ROWS:
                return False
        return not self._others_busy()

    # --- a failed step ------------------------------------------------------------

    def _step_failed(self, error: Exception) -> None:
        log.error("decoder step of model %s failed (%d sentences in %d rows, step %d); decoding them again one "
                  "at a time", self.name, len(self._jobs), self.batch.n_rows, self.steps + 1, exc_info=error)
        self.metrics.step_failures.inc()
        # the error's own text (ONNX Runtime's, with its node names) is in the log line above only
        failure = DecodeFailed(f"decoder step failed (model {self.name}): {type(error).__name__}")
        failure.__cause__ = error
        self._isolate(failure)

    def _isolate(self, error: DecodeFailed) -> None:
        """After a failed step, decode each of the batch's sentences again, alone and from
        the start: a poisoned sentence fails by itself and its batch-mates (other
        requests' sentences) still get their answers. Rare, so simple beats fast: this is
        a bisection down to single sentences, run before anything else joins. Between
        steps it takes the inbox as the batch does: a withdrawn or expired sentence stops
        there, and a stop leaves the rest in `_suspects` for `_exit` to answer."""
        self._suspects = list(self._jobs.values())
        self._jobs.clear()
        held, self._held = self._held, []
        self.batch = DecodeBatch(self._engine)
        self.inflight = 0
        if held:                                    # request-level: finished before the failure
            self._deliver([(job, None) for job in held])
        while self._suspects:
            if not self._decode_alone(self._suspects[0], error):
                return
            self._suspects.pop(0)

    def _decode_alone(self, job: Job, error: DecodeFailed) -> bool:
        """Decode one suspect alone and answer it; False when the worker is stopping first."""
        alone: DecodeBatch | None = None
        while alone is None or len(alone):
            if not self._between_steps():
                return False
            now = time.monotonic()
            if job.outcome is not None:             # withdrawn: counted, nobody to answer
                return True
            if job.expired(now):
                self._deliver(self._settle_dead(job, now))
                return True
            try:
                if alone is None:
                    job.search.restart()
                    alone = DecodeBatch(self._engine)
                    alone.add([job.search])
                alone.step()
            except Exception:  # noqa: BLE001 - this sentence fails the step by itself
                log.exception("model %s: sentence %d fails the decoder step alone", self.name, job.search.id)
                job.outcome = FAILED
                self._deliver([(job, error)])
                return True
        job.outcome = TRANSLATED
        self._deliver([(job, None)])
        return True

    def _between_steps(self) -> bool:
        """A step boundary outside the batch: take the inbox and drop the queue's dead;
        False when stopping."""
        with self._cond:
            stopping, arrivals, withdrawals = self._take_inbox()
        results = self._absorb(arrivals, withdrawals) + self._drop_dead()
        if results:
            self._deliver(results)
        return not stopping

    # --- the end ----------------------------------------------------------------------

    def _exit(self, error: Exception) -> None:
        """Answer every sentence the worker still holds, then refuse new ones: the finished
        with their translation, the withdrawn not at all, the others with `error`."""
        with self._cond:
            self._refusal = lambda: type(error)(str(error))
            _, arrivals, withdrawals = self._take_inbox()
        results = self._absorb(arrivals, withdrawals)
        results += [(job, None) for job in self._held]
        left = [*self._waiting, *self._jobs.values(), *self._suspects]
        self._left_count += len(self._waiting)
        self._waiting.clear()
        self._jobs.clear()
        self._held, self._suspects = [], []
        for job in left:
            if job.outcome is None:
                job.outcome = FAILED if isinstance(error, DecodeFailed) else UNANSWERED
                results.append((job, error))
        self.inflight = self.cache_bytes = 0
        if results:
            self._deliver(results)
