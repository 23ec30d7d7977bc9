"""The decode worker's thread boundary under its races. Each race is forced in both
orders by gates the test holds the worker thread at (a step, an encoding, a
compaction) and by a worker clock the test moves, not by sleeps; then thousands of
sentences with random cancels and deadlines, failing steps and a stop in the middle,
checked for one answer or one count per sentence."""

from __future__ import annotations

import asyncio
import collections
import logging
import random
import statistics
import threading
import time
import types

import pytest

from attnmt.service.errors import AttnmtError, DeadlineExceeded, DecodeFailed, Unavailable
from attnmt.service.inference.batch import DecodeBatch
from attnmt.service.inference.search import SearchOptions
from attnmt.service.server import worker as worker_module
from attnmt.service.server.metrics import Metrics
from attnmt.service.server.scheduler import Scheduler
from attnmt.service.server.worker import CANCELLED, EXPIRED, FAILED, TRANSLATED, UNANSWERED
from conftest import synthetic_corpus
from unit.server.test_scheduler import LONG, SHORT, limits, run


def counted(scheduler: Scheduler, reason: str) -> float:
    return scheduler.metrics.registry.get_sample_value("attnmt_rejected_total", {"reason": reason, "protocol": "grpc"})


def translated(scheduler: Scheduler) -> float:
    value = scheduler.metrics.registry.get_sample_value("attnmt_sentences_total",
                                                        {"model": scheduler.model, "protocol": "grpc"})
    return value or 0.0


class Gate:
    """A place the worker thread stops at once armed, for the first batch `when` accepts:
    `reached` is set as it gets there, and it goes on when the test calls `open`. A gate
    left shut opens by itself after `hold` seconds, so that a worker waiting on the test
    fails the test instead of hanging it."""

    def __init__(self, hold: float = 5.0):
        self.hold = hold
        self.reached = threading.Event()
        self._open = threading.Event()
        self._when = None
        self.opened_at: float | None = None

    def arm(self, when=lambda batch: True) -> None:
        self.reached.clear()
        self._open.clear()
        self.opened_at = None
        self._when = when

    def __call__(self, batch: DecodeBatch) -> None:          # on the worker thread
        if self._when is not None and self._when(batch):
            self._when = None
            self.reached.set()
            self._open.wait(self.hold)
            if self.opened_at is None:
                self.opened_at = time.perf_counter()

    def open(self) -> None:
        self.opened_at = time.perf_counter()
        self._open.set()

    async def wait_reached(self, timeout: float = 30) -> None:
        assert await asyncio.to_thread(self.reached.wait, timeout), "the worker never reached the gate"


class Clock:
    """The worker's time.monotonic, moved forward by the test to pass deadlines."""

    def __init__(self):
        self.offset = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.offset


@pytest.fixture
def gates(monkeypatch):
    """Gates in DecodeBatch (before a step, after a step that finished sentences, in `add`
    as sentences join, in `remove` before its compaction), the worker's clock, failing
    steps (a batch holding a search id in `poison` raises), and each search's steps
    decoded alone (after a failed step)."""
    g = types.SimpleNamespace(step=Gate(), finished=Gate(), add=Gate(), remove=Gate(), clock=Clock(),
                              poison=set(), alone=collections.Counter(), batch_rows=[], worker=None)
    step, add, remove = DecodeBatch.step, DecodeBatch.add, DecodeBatch.remove

    def gated_step(self, idle=False):
        g.step(self)
        if g.worker is not None and self is g.worker.batch:
            g.batch_rows.append(self.n_rows)
        elif len(self.searches) == 1:
            g.alone[self.searches[0].id] += 1
        if any(s.id in g.poison for s in self.searches):
            raise RuntimeError("step exploded")
        finished = step(self, idle)
        if finished:
            g.finished(self)
        return finished

    def gated_add(self, searches, idle=False):
        g.add(self)
        return add(self, searches, idle)

    def gated_remove(self, search):
        g.remove(self)
        return remove(self, search)

    monkeypatch.setattr(DecodeBatch, "step", gated_step)
    monkeypatch.setattr(DecodeBatch, "add", gated_add)
    monkeypatch.setattr(DecodeBatch, "remove", gated_remove)
    monkeypatch.setattr(worker_module, "time", types.SimpleNamespace(monotonic=g.clock.monotonic,
                                                                     perf_counter=time.perf_counter))
    return g


async def started(translator, gates, **settings) -> Scheduler:
    scheduler = Scheduler(translator, limits(**settings), Metrics())
    gates.worker = scheduler.workers[0]
    scheduler.start()
    return scheduler


def search(translator, text: str, **options):
    return translator.search(text, SearchOptions(**options))


# --- one writer of a sentence's fate ---------------------------------------------------

@pytest.mark.parametrize("loop_first", [True, False], ids=["loop-first", "worker-first"])
def test_an_expired_sentence_is_counted_once_whichever_side_sees_it_first(translator, gates, loop_first):
    """The loop withdraws a call whose deadline passed (gRPC cancels its handler) and the
    worker drops it at a step boundary: one count, deadline_exceeded, in either order."""
    async def main():
        scheduler = await started(translator, gates, max_batch_rows=1)
        gates.step.arm()
        blocker, = scheduler.submit([search(translator, LONG)], None)
        await gates.step.wait_reached()                 # the worker is in the blocker's first step
        late, = scheduler.submit([search(translator, SHORT)], time.monotonic() + 60)
        gates.clock.offset = 120                        # its deadline has passed, for the worker too
        if loop_first:
            scheduler.cancel([late])
            gates.step.open()
        else:
            gates.step.open()
            with pytest.raises(DeadlineExceeded):
                await late.future
            scheduler.cancel([late])
        await blocker.future                            # steps, hence boundaries, after the withdrawal
        await scheduler.close()
        return scheduler, late
    scheduler, late = run(main())
    assert counted(scheduler, "deadline_exceeded") == 1 and counted(scheduler, "cancelled") == 0
    assert late.outcome == EXPIRED and translated(scheduler) == 1


@pytest.mark.parametrize("before", [0.01, 1.0], ids=["at-the-deadline", "well-before"])
def test_a_withdrawal_at_the_deadline_counts_as_the_deadline(translator, gates, before):
    """A client whose deadline passes cancels the call, and its cancellation can reach the
    server a moment before the server's copy of the deadline: within DEADLINE_SLACK_SECONDS
    it counts deadline_exceeded, earlier it counts cancelled."""
    assert before < 0.5 * worker_module.DEADLINE_SLACK_SECONDS or before > 10 * worker_module.DEADLINE_SLACK_SECONDS

    async def main():
        scheduler = await started(translator, gates, max_batch_rows=1)
        gates.step.arm()
        blocker, = scheduler.submit([search(translator, LONG)], None)
        await gates.step.wait_reached()
        deadline = time.monotonic() + 60
        late, = scheduler.submit([search(translator, SHORT)], deadline)
        gates.clock.offset = 60 - before                # the worker's clock: `before` seconds short of it
        scheduler.cancel([late])
        gates.step.open()
        await blocker.future
        await scheduler.close()
        return scheduler, late
    scheduler, late = run(main())
    at_deadline = before < worker_module.DEADLINE_SLACK_SECONDS
    assert counted(scheduler, "deadline_exceeded") == (1 if at_deadline else 0)
    assert counted(scheduler, "cancelled") == (0 if at_deadline else 1)
    assert late.outcome == (EXPIRED if at_deadline else CANCELLED)


@pytest.mark.parametrize("order", ["cancel-then-step", "step-then-cancel", "answered-then-cancel"])
def test_a_cancelled_sentence_is_counted_once_or_answered_once(translator, gates, order):
    """Withdrawn while it waits: counted cancelled. Withdrawn while the worker is in the
    step that finishes it, or after its answer: translated, and not counted cancelled."""
    async def main():
        scheduler = await started(translator, gates)
        sentence = search(translator, SHORT)
        if order == "cancel-then-step":
            gates.step.arm()
            other, = scheduler.submit([search(translator, LONG)], None)
            await gates.step.wait_reached()
            job, = scheduler.submit([sentence], None)    # in the inbox while the worker steps
            scheduler.cancel([job])
            gates.step.open()
            await other.future
        elif order == "step-then-cancel":
            gates.finished.arm(lambda batch: sentence.done)
            job, = scheduler.submit([sentence], None)
            await gates.finished.wait_reached()          # its last step is done, not yet handed back
            scheduler.cancel([job])
            gates.finished.open()
        else:
            job, = scheduler.submit([sentence], None)
            await job.future
            scheduler.cancel([job])
        await scheduler.close()
        return scheduler, job
    scheduler, job = run(main())
    if order == "cancel-then-step":
        assert counted(scheduler, "cancelled") == 1 and job.outcome == CANCELLED and not job.search.done
    else:
        assert counted(scheduler, "cancelled") == 0 and job.outcome == TRANSLATED
    assert counted(scheduler, "deadline_exceeded") == 0
    assert translated(scheduler) == 1                  # the other sentence, or this one


# --- stop -------------------------------------------------------------------------------

def test_a_stop_that_outlasts_a_step_answers_every_call_and_leaves_the_worker_alone(translator, gates, caplog):
    """close() gives up on a step that runs past its timeout: the loop fails the calls still
    waiting; the worker, once the step ends, answers into futures already done, without
    a KeyError or a death, and exits."""
    deaths = []

    async def main():
        scheduler = Scheduler(translator, limits(max_batch_rows=4), Metrics(), on_death=deaths.append)
        gates.worker = scheduler.workers[0]
        scheduler.start()
        gates.step.arm()
        jobs = scheduler.submit([search(translator, LONG) for _ in range(3)], None)
        await gates.step.wait_reached()
        queued = scheduler.submit([search(translator, LONG) for _ in range(3)], None)   # no row for them
        await scheduler.close(timeout=0.05)
        pending = [j for j in jobs + queued if not j.future.done()]
        gates.step.open()
        exited = await asyncio.to_thread(scheduler.workers[0].stop, 30)
        outcomes = await asyncio.gather(*(j.future for j in jobs + queued), return_exceptions=True)
        return scheduler, jobs + queued, pending, exited, outcomes
    with caplog.at_level(logging.WARNING):
        scheduler, jobs, pending, exited, outcomes = run(main())
    assert not pending and exited and not deaths
    assert all(isinstance(o, Unavailable) for o in outcomes)
    assert all(j.outcome in (TRANSLATED, UNANSWERED) for j in jobs)
    problems = [r for r in caplog.records if r.levelno >= logging.ERROR and "still in a step" not in r.getMessage()]
    assert not problems, problems


@pytest.mark.parametrize("where", ["inbox", "joining", "batch"])
def test_a_stop_answers_sentences_wherever_the_worker_holds_them(translator, gates, where):
    """Stop while sentences are in the inbox, being encoded to join (out of the queue, not
    yet stepped), or in the batch: the worker answers each before it exits."""
    async def main():
        scheduler = await started(translator, gates, max_batch_rows=4)
        gate = gates.add if where == "joining" else gates.step
        gate.arm()
        first = scheduler.submit([search(translator, LONG) for _ in range(2)], None)
        await gate.wait_reached()
        later = scheduler.submit([search(translator, LONG) for _ in range(2)], None) if where == "inbox" else []
        closing = asyncio.ensure_future(scheduler.close())
        while not scheduler.workers[0]._stopping:
            await asyncio.sleep(0)
        gate.open()
        await closing
        outcomes = await asyncio.gather(*(j.future for j in first + later), return_exceptions=True)
        return scheduler, outcomes, first + later
    scheduler, outcomes, jobs = run(main())
    assert all(isinstance(o, Unavailable) for o in outcomes) and all(j.outcome == UNANSWERED for j in jobs)
    assert not scheduler.workers[0].thread.is_alive()
    with pytest.raises(Unavailable):                   # and nothing is taken after
        scheduler.workers[0].put([])


# --- the lock the event loop takes ---------------------------------------------------------

def test_put_and_cancel_return_at_once_while_the_batch_compacts(translator, gates):
    """The worker drops a withdrawn sentence from the batch (memory compaction, a shrink
    copy) with the loop's lock free: a put or a cancel meanwhile takes well under 1 ms."""
    async def main():
        scheduler = await started(translator, gates)
        gates.step.arm()
        leaving, staying = scheduler.submit([search(translator, LONG), search(translator, LONG)], None)
        await gates.step.wait_reached()
        gates.remove.arm()
        scheduler.cancel([leaving])
        gates.step.open()
        await gates.remove.wait_reached()              # the worker is in batch.remove, made slow
        puts, cancels = [], []
        for _ in range(20):
            start = time.perf_counter()
            job, = scheduler.submit([search(translator, SHORT)], None)
            puts.append(time.perf_counter() - start)
            start = time.perf_counter()
            scheduler.cancel([job])
            cancels.append(time.perf_counter() - start)
        measured = time.perf_counter()
        gates.remove.open()
        await staying.future
        await scheduler.close()
        return puts, cancels, measured
    puts, cancels, measured = run(main())
    assert gates.remove.opened_at >= measured          # every put and cancel ran during the compaction
    assert statistics.median(puts) < 0.001 and statistics.median(cancels) < 0.001
    assert max(puts + cancels) < 0.05                  # a machine's hiccup at most, never the compaction


# --- a failed step ------------------------------------------------------------------------------

@pytest.mark.parametrize("when", ["before", "during"])
@pytest.mark.parametrize("how", ["cancel", "deadline", "stop"])
def test_isolation_stops_a_sentence_between_its_steps(translator, gates, how, when):
    """After a failed step each sentence is decoded again alone; one withdrawn, expired or
    stopped before its first step alone (while the failing step runs) takes none, and
    one withdrawn, expired or stopped during its first step takes no second."""
    async def main():
        scheduler = await started(translator, gates, max_batch_rows=2)
        victim, poison = search(translator, LONG), search(translator, SHORT)
        gates.poison.add(poison.id)
        if when == "before":
            gates.step.arm(lambda batch: batch is scheduler.workers[0].batch)
        else:
            gates.step.arm(lambda batch: batch is not scheduler.workers[0].batch and victim in batch.searches)
        job, bad = scheduler.submit([victim, poison], time.monotonic() + 60)
        await gates.step.wait_reached()
        closing = None
        if how == "cancel":
            scheduler.cancel([job])
        elif how == "deadline":
            gates.clock.offset = 120
        else:
            closing = asyncio.ensure_future(scheduler.close())
            while not scheduler.workers[0]._stopping:
                await asyncio.sleep(0)
        gates.step.open()
        outcomes = await asyncio.gather(job.future, bad.future, return_exceptions=True)
        if closing is None:
            await scheduler.close()
        else:
            await closing
        return scheduler, job, bad, outcomes
    scheduler, job, bad, (victim_got, poison_got) = run(main())
    assert gates.alone[job.search.id] == (0 if when == "before" else 1) and not job.search.done
    assert counted(scheduler, "cancelled") == (how == "cancel")
    assert counted(scheduler, "deadline_exceeded") == (2 if how == "deadline" else 0)   # the poison's, too
    if how == "cancel":
        assert isinstance(victim_got, asyncio.CancelledError) and job.outcome == CANCELLED
        assert isinstance(poison_got, DecodeFailed) and str(poison_got).endswith("RuntimeError")
        assert "step exploded" in str(poison_got.__cause__)      # the log's, not the caller's
    elif how == "deadline":
        assert isinstance(victim_got, DeadlineExceeded) and isinstance(poison_got, DeadlineExceeded)
    else:
        assert isinstance(victim_got, Unavailable) and isinstance(poison_got, Unavailable)
        assert gates.alone[bad.search.id] == 0


# --- the batching window --------------------------------------------------------------------

def test_an_idle_batch_waits_its_whole_window_for_concurrent_arrivals(translator, gates):
    """With a queue delay, sentences arriving one by one within it share the first step,
    however many `put`s wake the worker meanwhile; a full step starts at once."""
    async def main(rows, delay_ms, arrivals):
        gates.batch_rows.clear()
        scheduler = await started(translator, gates, max_batch_rows=rows, max_queue_delay_ms=delay_ms)
        start, jobs = time.monotonic(), []
        for _ in range(arrivals):
            jobs += scheduler.submit([search(translator, SHORT)], None)
            await asyncio.sleep(0.01)
        await asyncio.gather(*(j.future for j in jobs))
        elapsed = time.monotonic() - start
        await scheduler.close()
        return gates.batch_rows[0], elapsed

    first_step, _ = run(main(rows=64, delay_ms=500, arrivals=6))
    assert first_step == 6
    first_step, elapsed = run(main(rows=4, delay_ms=10_000, arrivals=4))
    assert first_step == 4 and elapsed < 5


# --- all of it at once --------------------------------------------------------------------------------

def test_thousands_of_sentences_each_answered_or_counted_once(translator, gates, monkeypatch, caplog):
    """5,000 sentences from 60 clients, calls of one to three sentences, greedy and beam;
    some callers give up at a random moment, some calls have deadlines (gRPC cancels the
    handler when one passes, as the worker may drop it first), a few sentences make their
    step fail, and the scheduler stops when 60% are settled. Every sentence gets one fate,
    set once by the worker and handed back at most once; the metrics count each once."""
    settled_twice = []
    plain_setattr = worker_module.Job.__setattr__

    def once(job, name, value):
        if name == "outcome" and value is not None and getattr(job, "outcome", None) is not None:
            settled_twice.append((job.outcome, value))
        plain_setattr(job, name, value)
    monkeypatch.setattr(worker_module.Job, "__setattr__", once)
    rng = random.Random(7)
    texts = [s for s, _ in synthetic_corpus(200, seed=21)]
    total, clients = 5000, 60
    deaths = []

    async def main():
        scheduler = Scheduler(translator, limits(max_batch_rows=32, max_queue=4096), Metrics(),
                              on_death=deaths.append)
        gates.worker = scheduler.workers[0]
        handed_back = collections.Counter()
        hand_back = scheduler.workers[0]._deliver

        def counting(results):
            for job, _ in results:
                handed_back[id(job)] += 1
            hand_back(results)
        scheduler.workers[0]._deliver = counting
        scheduler.start()
        jobs, made, settled = [], [0], [0]
        stop_now = asyncio.Event()

        def one_settled(_):
            settled[0] += 1
            if settled[0] >= 0.6 * total:
                stop_now.set()

        async def call(searches, deadline, client, patient):
            try:
                got = scheduler.submit(searches, deadline, client)
            except Unavailable:
                return False                              # stopped: the client is done
            jobs.extend(got)
            for job in got:
                job.future.add_done_callback(one_settled)
            gone = None
            if not patient and rng.random() < 0.15:       # the caller gives up at a random moment
                gone = rng.uniform(0, 0.05)
            if deadline is not None:                      # gRPC cancels the handler at the deadline
                gone = min(gone or 1e9, max(deadline - time.monotonic(), 0))
            try:
                await asyncio.wait_for(asyncio.gather(*(j.future for j in got)), gone)
            except (asyncio.TimeoutError, AttnmtError):   # as the servicer does: withdraw the call
                scheduler.cancel(got)
            return True

        async def client(k):
            while made[0] < total:
                n = min(rng.choice((1, 1, 1, 2, 3)), total - made[0])
                beam = rng.choice((1, 1, 2))
                searches = [search(translator, rng.choice(texts), beam_size=beam) for _ in range(n)]
                poisoned = False
                for s in searches:
                    made[0] += 1
                    if made[0] % 700 == 0:                # its caller waits: its step does fail
                        gates.poison.add(s.id)
                        poisoned = True
                deadline = time.monotonic() + rng.uniform(0, 0.1) if rng.random() < 0.2 and not poisoned else None
                if not await call(searches, deadline, f"client-{k}", patient=poisoned):
                    return

        async def stopper():
            await stop_now.wait()
            await scheduler.close()

        await asyncio.gather(stopper(), *(client(k) for k in range(clients)))
        return scheduler, jobs, handed_back

    with caplog.at_level(logging.WARNING):
        started_at = time.monotonic()
        scheduler, jobs, handed_back = run(main())
        seconds = time.monotonic() - started_at
    fates = collections.Counter(job.outcome for job in jobs)
    print(f"{len(jobs)} sentences in {seconds:.1f}s: {dict(fates)}")
    assert not settled_twice and not deaths and not scheduler.workers[0].thread.is_alive()
    assert all(job.future.done() for job in jobs)                    # nothing pending after the stop
    assert max(handed_back.values()) == 1 and all(job.outcome is not None for job in jobs)
    for job in jobs:
        f = job.future
        if f.cancelled():
            assert job.outcome in (CANCELLED, EXPIRED, TRANSLATED, FAILED, UNANSWERED), job.outcome
        elif f.exception() is None:
            assert job.outcome == TRANSLATED
        else:
            kinds = {DeadlineExceeded: EXPIRED, DecodeFailed: FAILED, Unavailable: UNANSWERED}
            assert job.outcome == kinds[type(f.exception())], (f.exception(), job.outcome)
    assert counted(scheduler, "cancelled") == fates[CANCELLED]
    assert counted(scheduler, "deadline_exceeded") == fates[EXPIRED]
    assert translated(scheduler) == fates[TRANSLATED]
    assert min(fates[k] for k in (CANCELLED, EXPIRED, FAILED, UNANSWERED, TRANSLATED)) > 0, fates
    expected = ("decoder step of model", "fails the decoder step alone")
    problems = [r for r in caplog.records
                if r.levelno >= logging.ERROR and not any(e in r.getMessage() for e in expected)]
    assert not problems, [r.getMessage() for r in problems]
