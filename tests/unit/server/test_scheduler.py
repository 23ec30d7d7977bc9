"""The scheduler and its decode worker: a thread that owns the batch, joins at
step boundaries, and never waits on the event loop."""

from __future__ import annotations

import asyncio
import logging
import os
import time

import numpy as np
import pytest

from attnmt.service.errors import DeadlineExceeded, Overloaded, Unavailable
from attnmt.service.inference.search import SearchOptions
from attnmt.service.server.metrics import Metrics
from attnmt.service.server.scheduler import Scheduler, SchedulerLimits
from attnmt.service.server.settings import Settings
from conftest import synthetic_corpus

SHORT = "peru vidas kasa ."
LONG = " ".join(["kasa granda amas libo nova . gato roja havas arbo blanka ."] * 3)


def run(coro):
    return asyncio.run(coro)


def limits(**settings) -> SchedulerLimits:
    """The server's own limits: Settings' defaults with `settings` over them (a beam fits the rows),
    one decode worker unless `settings` says otherwise."""
    settings.setdefault("decode_workers", 1)
    beam = min(Settings.model_fields["max_beam_size"].default, settings.get("max_batch_rows", 64))
    beams = {"max_beam_size": beam, "default_beam_size": min(beam, Settings.model_fields["default_beam_size"].default)}
    return SchedulerLimits.from_settings(Settings(**{**beams, **settings}))


async def started(translator, **settings) -> Scheduler:
    scheduler = Scheduler(translator, limits(**settings), Metrics())
    scheduler.start()
    return scheduler


def texts_of(translator, searches, texts):
    return [translator.result(t, s).best.text for t, s in zip(texts, searches)]


def test_concurrent_requests_get_what_they_get_offline(translator):
    texts = [s for s, _ in synthetic_corpus(40, seed=3)] + [LONG, SHORT]
    offline = [t.best.text for t in translator.translate(texts)]

    async def main():
        scheduler = await started(translator, max_batch_rows=8)
        searches = [translator.search(t, SearchOptions()) for t in texts]

        async def one(search, delay):
            await asyncio.sleep(delay)            # arrivals spread over the decode: joins mid-batch
            (job,) = scheduler.submit([search], None)
            return await job.future
        await asyncio.gather(*(one(s, 0.002 * i) for i, s in enumerate(searches)))
        await scheduler.close()
        return searches
    searches = run(main())
    assert texts_of(translator, searches, texts) == offline


def test_steps_keep_running_while_the_event_loop_is_blocked(translator):
    """No per-step hop through asyncio: block the event loop from the moment the sentence
    is handed over until the worker has run five steps (a worker that needed the loop
    would make no progress and the wait would time out). The sentence takes 27 steps;
    the loop is blocked before the first, so a fast machine cannot finish it unseen."""
    async def main():
        scheduler = await started(translator)
        search = translator.search(LONG, SearchOptions(beam_size=4))
        before, give_up = scheduler.workers[0].steps, time.monotonic() + 30
        (job,) = scheduler.submit([search], None)
        while scheduler.workers[0].steps < before + 5 and time.monotonic() < give_up:
            time.sleep(0.01)                      # the event loop is blocked
        progressed = scheduler.workers[0].steps - before
        await job.future
        await scheduler.close()
        return progressed, search
    progressed, search = run(main())
    assert search.done and progressed >= 5


def test_only_a_small_batch_with_nobody_waiting_counts_as_idle(translator, monkeypatch):
    """The worker marks steps idle (ONNX Runtime may spin: EngineOptions.idle_spinning) only
    while the batch has at most IDLE_ROWS rows, nobody waits and nobody was refused lately:
    a lone sentence's steps are idle; with a queue behind a full batch, or just after a
    refusal, they are not."""
    from attnmt.service.inference.batch import DecodeBatch
    from attnmt.service.server.worker import IDLE_ROWS

    seen: list[tuple[int, bool]] = []
    original = DecodeBatch.step

    def recording(self, idle=False):
        seen.append((self.n_rows, idle))
        return original(self, idle)

    monkeypatch.setattr(DecodeBatch, "step", recording)

    async def main(searches, refuse=False, **limits):
        scheduler = await started(translator, **limits)
        seen.clear()
        if refuse:
            with pytest.raises(Overloaded):
                scheduler.submit([translator.search(SHORT, SearchOptions())] * (scheduler.limits.max_queue + 1), None)
        jobs = scheduler.submit(searches, None)
        await asyncio.gather(*(j.future for j in jobs))
        await scheduler.close()
        return list(seen)

    alone = run(main([translator.search(LONG, SearchOptions())]))
    assert alone and all(idle for _, idle in alone)
    crowd = run(main([translator.search(LONG, SearchOptions()) for _ in range(12)], max_batch_rows=4))
    assert not any(idle for rows, idle in crowd[:5])          # eight wait behind the first four
    assert all(idle == (rows <= IDLE_ROWS) for rows, idle in crowd[-3:])   # the last ones: nobody waits
    refused = run(main([translator.search(LONG, SearchOptions())], refuse=True, max_queue=4))
    assert refused and not any(idle for _, idle in refused)


def test_cancelled_sentence_leaves_between_steps_and_others_finish(translator):
    async def main():
        scheduler = await started(translator)
        long_job, = scheduler.submit([translator.search(LONG, SearchOptions())], None)
        short = translator.search(SHORT, SearchOptions())
        short_job, = scheduler.submit([short], None)
        scheduler.cancel([long_job])
        long_job.future.cancel()
        await short_job.future
        for _ in range(100):
            if len(scheduler.workers[0].batch) == 0:
                break
            await asyncio.sleep(0.01)
        left = len(scheduler.workers[0].batch)
        await scheduler.close()
        return left, short
    left, short = run(main())
    assert left == 0 and short.done


def test_request_level_batch_answers_early_finishers_when_the_last_one_is_cancelled(translator):
    """Issue 7 #1: request-level batching holds finished sentences until the batch ends;
    if the batch ends because its last sentence was cancelled, they must still be answered."""
    async def main():
        scheduler = await started(translator, batching="request")
        long_job, short_job = scheduler.submit(
            [translator.search(LONG + " " + LONG, SearchOptions(max_length_ratio=10, max_length_extra=300)),
             translator.search(SHORT, SearchOptions())], None)
        while not short_job.search.done:
            await asyncio.sleep(0.001)
        scheduler.cancel([long_job])
        long_job.future.cancel()
        search = await asyncio.wait_for(short_job.future, 3)
        await scheduler.close()
        return search
    assert run(main()).done


def test_expired_sentences_fail_with_deadline_exceeded(translator):
    async def main():
        scheduler = await started(translator, max_batch_rows=1)
        blocker, = scheduler.submit([translator.search(LONG, SearchOptions(beam_size=1))], None)
        late, = scheduler.submit([translator.search(SHORT, SearchOptions())], time.monotonic() + 0.001)
        with pytest.raises(DeadlineExceeded):
            await late.future
        await blocker.future
        await scheduler.close()
    run(main())


def test_a_sentence_in_the_batch_expires_mid_decode_with_nothing_else_arriving(translator):
    """A steady batch skips the queue's scan at each step (nothing waits or arrives), but
    never past a deadline: the sentence leaves at the step after it, long before its end."""
    target = " ".join(["peru amas mesa roja ."] * 15)          # forced rows: 240 steps

    async def main():
        scheduler = await started(translator, max_batch_rows=8)
        worker = scheduler.workers[0]
        search = translator.search(SHORT, SearchOptions(), target=target)
        job, = scheduler.submit([search], time.monotonic() + 0.5)
        while worker.steps < 2:
            await asyncio.sleep(0)
        with worker._cond:                     # the worker stops at its next step boundary
            time.sleep(max(0.0, job.deadline - time.monotonic()) + 0.05)
        with pytest.raises(DeadlineExceeded):
            await job.future
        await scheduler.close()
        return search
    search = run(main())
    assert 2 <= search.steps < len(search.forced)


def test_full_queue_refuses_and_close_fails_what_is_left(translator):
    async def main():
        scheduler = await started(translator, max_queue=2, max_batch_rows=1)
        # Hold the worker's lock (reentrant: put() takes it on this thread too) so that it cannot
        # admit, or even finish, the first two before the third arrives; without it the test
        # depended on the tiny model being slower than two submit() calls.
        with scheduler.workers[0]._cond:
            jobs = scheduler.submit([translator.search(LONG, SearchOptions()) for _ in range(2)], None)
            with pytest.raises(Overloaded, match="max_queue is 2"):
                scheduler.submit([translator.search(SHORT, SearchOptions()) for _ in range(2)], None)
        await scheduler.close()
        outcomes = await asyncio.gather(*(j.future for j in jobs), return_exceptions=True)
        return outcomes
    outcomes = run(main())
    # each job either finished before the stop or was failed with UNAVAILABLE; none is left hanging
    assert all(isinstance(o, Unavailable) or o.done for o in outcomes)


def test_a_busy_batch_takes_joiners_together_or_after_the_delay(translator):
    """A batch at least half full lets waiting sentences join `min_joiners` at a time (one
    encoder call for them), and a sentence left alone joins once `max_join_delay` passed."""
    target = " ".join(["peru amas mesa roja ."] * 15)          # forced rows: 240 steps

    async def main(max_join_delay_ms):
        scheduler = await started(translator, max_batch_rows=8, min_joiners=3, max_join_delay_ms=max_join_delay_ms)
        busy = scheduler.submit([translator.search(SHORT, SearchOptions(), target=target) for _ in range(5)], None)
        while scheduler.workers[0].steps < 2:
            await asyncio.sleep(0.001)
        first, = scheduler.submit([translator.search(SHORT, SearchOptions())], None)
        seen = scheduler.workers[0].steps
        while scheduler.workers[0].steps < seen + 20 and max_join_delay_ms > 1000:
            await asyncio.sleep(0.001)
        alone_after_20_steps = first.joined is None
        others = [] if max_join_delay_ms < 1000 else scheduler.submit(
            [translator.search(t, SearchOptions()) for t in ("gato .", "sola amas luna .")], None)
        await asyncio.gather(*(j.future for j in [first, *others]))
        for job in busy:
            scheduler.cancel([job])
            job.future.cancel()
        await scheduler.close()
        return alone_after_20_steps, first, others

    alone, first, others = run(main(max_join_delay_ms=10_000))
    assert alone and first.joined == others[0].joined == others[1].joined
    _, first, _ = run(main(max_join_delay_ms=5))
    assert first.joined - first.enqueued >= 0.005
    assert first.rows >= 6 * first.steps           # it joined the busy batch (5 rows), not an empty one


def test_mixed_greedy_beam_and_forced_sentences_share_steps(translator):
    texts = [s for s, _ in synthetic_corpus(12, seed=4)]
    greedy_want = [t.best.text for t in translator.translate(texts)]
    beam_want = [[h.text for h in t.hypotheses]
                 for t in translator.translate(texts, SearchOptions(beam_size=3, n_best=3))]

    async def main():
        scheduler = await started(translator)
        greedy = [translator.search(t, SearchOptions()) for t in texts]
        beams = [translator.search(t, SearchOptions(beam_size=3, n_best=3)) for t in texts]
        forced = [translator.search(t, SearchOptions(), target=w) for t, w in zip(texts, greedy_want)]
        jobs = scheduler.submit([x for trio in zip(greedy, beams, forced) for x in trio], None)
        await asyncio.gather(*(j.future for j in jobs))
        await scheduler.close()
        return greedy, beams, forced
    greedy, beams, forced = run(main())
    assert texts_of(translator, greedy, texts) == greedy_want
    assert [[h.text for h in translator.result(t, s).hypotheses] for t, s in zip(texts, beams)] == beam_want
    for g, f in zip(greedy, forced):
        assert f.best()[0].tokens == g.best()[0].tokens
        assert np.allclose(f.best()[0].token_log_probs, g.best()[0].token_log_probs, atol=1e-5)


def test_a_worker_that_dies_fails_its_calls_and_refuses_new_ones(translator, monkeypatch):
    """A fault outside any step (a bug in the worker's own bookkeeping) must not leave
    callers waiting forever: their calls fail, the death is reported, new calls are refused."""
    from attnmt.service.errors import DecodeFailed
    from attnmt.service.server.worker import DecodeWorker
    deaths = []

    async def main():
        scheduler = Scheduler(translator, limits(), Metrics(), on_death=deaths.append)
        original = DecodeWorker._next_joiners
        calls = {"n": 0}

        def broken(self):
            calls["n"] += 1
            if calls["n"] == 3:
                raise RuntimeError("injected fault")
            return original(self)
        monkeypatch.setattr(DecodeWorker, "_next_joiners", broken)
        scheduler.start()
        jobs = scheduler.submit([translator.search(LONG, SearchOptions(beam_size=4))], None)
        with pytest.raises(DecodeFailed, match="has stopped: RuntimeError$") as failed:
            await asyncio.wait_for(jobs[0].future, 10)
        assert str(failed.value.__cause__) == "injected fault"          # for the log, not the caller
        with pytest.raises(DecodeFailed, match="has stopped"):
            scheduler.submit([translator.search(SHORT, SearchOptions())], None)
        await asyncio.sleep(0.01)
        await scheduler.close()
    run(main())
    assert len(deaths) == 1 and isinstance(deaths[0], RuntimeError)


def test_a_poisoned_sentence_fails_alone_and_its_batch_mates_succeed(translator, monkeypatch):
    """Issue 7 #5: a step that fails whenever one sentence is in the batch fails that
    sentence only; the others (from other requests, in the same steps) are answered."""
    from attnmt.service.errors import DecodeFailed
    from attnmt.service.inference.batch import DecodeBatch
    original = DecodeBatch.step
    poison = translator.search("gato roja havas arbo .", SearchOptions())

    def step(self, idle=False):
        if any(s is poison for s in self.searches):
            raise RuntimeError("step exploded")
        return original(self, idle)
    monkeypatch.setattr(DecodeBatch, "step", step)
    texts = [s for s, _ in synthetic_corpus(6, seed=11)]
    want = [t.best.text for t in translator.translate(texts)]

    async def main():
        scheduler = await started(translator, max_queue_delay_ms=50)   # all arrive in the same first step
        others = [translator.search(t, SearchOptions()) for t in texts]
        jobs = [scheduler.submit([s], None)[0] for s in others[:3]] + scheduler.submit([poison], None) + \
            [scheduler.submit([s], None)[0] for s in others[3:]]
        outcomes = await asyncio.gather(*(j.future for j in jobs), return_exceptions=True)
        after = scheduler.submit([translator.search(texts[0], SearchOptions())], None)
        await after[0].future
        await scheduler.close()
        return others, outcomes
    others, outcomes = run(main())
    assert isinstance(outcomes[3], DecodeFailed) and str(outcomes[3]).endswith("RuntimeError")
    assert "step exploded" in str(outcomes[3].__cause__)      # the log's, not the caller's
    assert texts_of(translator, others, texts) == want


def test_bulk_work_joins_only_a_few_rows_while_interactive_work_is_about(translator):
    """A file's or a stream's sentences (BULK) fill the batch on their own, but beside an
    interactive call only max_bulk_rows_beside_interactive rows of them join, so the call's
    steps stay small (one bulk sentence always may)."""
    from attnmt.service.server.worker import BULK, DecodeWorker, Job

    def admitted(interactive: bool, cap: int) -> list[int]:
        worker = DecodeWorker(translator.engine, limits(max_bulk_rows_beside_interactive=cap), Metrics(), "tiny",
                              deliver=lambda results: None, on_death=lambda error: None)
        jobs = [Job(translator.search(SHORT, SearchOptions()), None, None, "file", BULK) for _ in range(10)]
        if interactive:
            jobs.append(Job(translator.search(SHORT, SearchOptions()), None, None, "user"))
        worker._absorb(jobs, [])
        return [job.priority for job in worker._admit()]

    assert admitted(False, 4) == [BULK] * 10
    assert sorted(admitted(True, 4)) == [0] + [BULK] * 4          # the interactive sentence, and 4 bulk rows
    assert sorted(admitted(True, 1)) == [0, BULK]


def test_bulk_work_joins_interactive_sentences_in_the_batch_only_now_and_then(translator, monkeypatch):
    """Each bulk joiner costs an encoder run and widens every step the interactive sentences
    take: beside them, bulk sentences join once per BULK_JOIN_INTERVAL at most; in the gaps
    between interactive calls, and once the interval has passed, they join again."""
    from attnmt.service.server import worker as module
    from attnmt.service.server.worker import BULK, INTERACTIVE, DecodeWorker, Job

    clock = [1000.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: clock[0])
    worker = DecodeWorker(translator.engine, limits(max_bulk_rows_beside_interactive=1), Metrics(), "tiny",
                          deliver=lambda results: None, on_death=lambda error: None)
    long_options = SearchOptions(max_length_ratio=10.0, max_length_extra=100)
    user = Job(translator.search(LONG, long_options), None, None, "user")
    bulk = [Job(translator.search(SHORT, SearchOptions()), None, None, "file", BULK) for _ in range(4)]
    worker._absorb([user, *bulk], [])

    def round_() -> list[int]:
        joining = worker._admit()
        for job in joining:             # in the batch, as _iterate puts them
            worker._jobs[job.search.id] = job
        return [job.priority for job in joining]

    assert sorted(round_()) == [INTERACTIVE, BULK]     # the call, and one bulk row beside it
    del worker._jobs[bulk[0].search.id]                # that bulk sentence finished
    clock[0] += module.BULK_JOIN_INTERVAL / 2
    assert round_() == []                              # the call still decodes: the next bulk waits
    clock[0] += module.BULK_JOIN_INTERVAL
    assert round_() == [BULK]                          # the interval has passed
    del worker._jobs[bulk[1].search.id]
    del worker._jobs[user.search.id]                   # the call is answered: a gap between calls
    assert round_() == [BULK]                          # joins at once, interactive work only recent


def test_a_files_backlog_does_not_keep_an_interactive_call_from_idle_steps(translator):
    """Bulk sentences waiting (a file's backlog) or beside an interactive call do not make its
    steps busy (the spinning threads stay the call's); interactive sentences waiting do."""
    from attnmt.service.server.worker import BULK, IDLE_ROWS, DecodeWorker, Job

    worker = DecodeWorker(translator.engine, limits(max_bulk_rows_beside_interactive=1), Metrics(), "tiny",
                          deliver=lambda results: None, on_death=lambda error: None)
    user = Job(translator.search(SHORT, SearchOptions()), None, None, "user")
    beside = Job(translator.search(SHORT, SearchOptions()), None, None, "file", BULK)
    worker._jobs = {user.search.id: user, beside.search.id: beside}
    worker._absorb([Job(translator.search(SHORT, SearchOptions()), None, None, "file", BULK) for _ in range(50)], [])
    assert worker._idle(IDLE_ROWS + 1)                 # one interactive row: idle, bulk besides
    worker._absorb([Job(translator.search(SHORT, SearchOptions()), None, None, "other")], [])
    assert not worker._idle(2)                         # an interactive sentence waits
    worker._waiting.clear()
    del worker._jobs[user.search.id]
    assert worker._idle(IDLE_ROWS) and not worker._idle(IDLE_ROWS + 1)   # bulk alone: its rows count


# --- several decode workers per model ---------------------------------------------------

def test_two_workers_share_the_work_and_get_what_offline_gets(translator):
    """Each sentence goes to the worker with the fewest: both decode, each in its own batch
    with half the rows, and every answer is what offline decoding gives."""
    texts = [s for s, _ in synthetic_corpus(30, seed=5)] + [LONG, SHORT]
    offline = [t.best.text for t in translator.translate(texts)]
    greedy_and_beam = [SearchOptions(beam_size=1 + (i % 3 == 0)) for i in range(len(texts))]
    offline_beam = [t.best.text for t in translator.translate([texts[i] for i in range(0, len(texts), 3)],
                                                              SearchOptions(beam_size=2))]

    async def main():
        scheduler = await started(translator, decode_workers=2, max_batch_rows=8, max_beam_size=2,
                                  default_beam_size=1)
        assert [w.limits.max_batch_rows for w in scheduler.workers] == [4, 4]
        searches = [translator.search(t, o) for t, o in zip(texts, greedy_and_beam)]
        jobs = scheduler.submit(searches, None)
        await asyncio.gather(*(j.future for j in jobs))
        steps = [w.steps for w in scheduler.workers]
        await scheduler.close()
        return searches, jobs, steps
    searches, jobs, steps = run(main())
    assert all(steps) and {j.worker for j in jobs} == {0, 1}
    got = texts_of(translator, searches, texts)
    assert [g for i, g in enumerate(got) if i % 3] == [o for i, o in enumerate(offline) if i % 3]
    assert got[::3] == offline_beam


def test_a_narrow_call_goes_to_one_worker_whole_and_a_wide_one_is_spread(translator):
    """A call of at most IDLE_ROWS rows (the parts of one long sentence) decodes in one batch,
    on one worker, which may step on every core; a wider one is spread by sentences."""
    from attnmt.service.server.worker import IDLE_ROWS

    async def main():
        scheduler = await started(translator, decode_workers=2)
        # the wide call first, while both workers are empty: its sentences alternate between them
        wide = scheduler.submit([translator.search(SHORT, SearchOptions()) for _ in range(IDLE_ROWS + 1)], None)
        narrow = scheduler.submit([translator.search(LONG, SearchOptions()) for _ in range(IDLE_ROWS)], None)
        await asyncio.gather(*(j.future for j in narrow + wide))
        await scheduler.close()
        return narrow, wide
    narrow, wide = run(main())
    assert {j.worker for j in wide} == {0, 1}
    assert len({j.worker for j in narrow}) == 1
    assert all(j.search.done for j in narrow + wide)


def test_with_two_workers_a_cancel_reaches_the_worker_that_holds_the_sentence(translator):
    async def main():
        scheduler = await started(translator, decode_workers=2)
        long_jobs = scheduler.submit([translator.search(LONG, SearchOptions(beam_size=3)) for _ in range(4)], None)
        assert sorted(j.worker for j in long_jobs) == [0, 0, 1, 1]
        scheduler.cancel(long_jobs[:2])
        short, = scheduler.submit([translator.search(SHORT, SearchOptions())], None)
        await asyncio.gather(short.future, *(j.future for j in long_jobs[2:]))
        await scheduler.close()
        return scheduler, long_jobs
    scheduler, long_jobs = run(main())
    assert [j.outcome for j in long_jobs] == ["cancelled", "cancelled", "translated", "translated"]
    assert scheduler.metrics.registry.get_sample_value("attnmt_rejected_total",
                                                       {"reason": "cancelled", "protocol": "grpc"}) == 2


def test_a_stop_answers_the_sentences_of_every_worker(translator):
    async def main():
        scheduler = await started(translator, decode_workers=2, max_batch_rows=2)
        jobs = scheduler.submit([translator.search(LONG, SearchOptions()) for _ in range(10)], None)
        await asyncio.sleep(0.05)
        await scheduler.close()
        outcomes = await asyncio.gather(*(j.future for j in jobs), return_exceptions=True)
        return scheduler, outcomes
    scheduler, outcomes = run(main())
    assert len(outcomes) == 10
    assert all(isinstance(o, Unavailable) or o.done for o in outcomes)
    assert not any(w.thread.is_alive() for w in scheduler.workers)


def test_the_gauges_count_every_workers_sentences(translator):
    """attnmt_queue_depth and attnmt_inflight_sentences sum the workers' counts at scrape time."""
    async def main():
        scheduler = await started(translator, decode_workers=2, max_batch_rows=2)
        jobs = scheduler.submit([translator.search(LONG, SearchOptions()) for _ in range(8)], None)
        registry = scheduler.metrics.registry
        give_up = time.monotonic() + 30
        while sum(w.inflight for w in scheduler.workers) < 2 and time.monotonic() < give_up:
            await asyncio.sleep(0.001)
        seen = (registry.get_sample_value("attnmt_queue_depth"), registry.get_sample_value("attnmt_inflight_sentences"),
                [w.waiting for w in scheduler.workers], [w.inflight for w in scheduler.workers])
        await asyncio.gather(*(j.future for j in jobs))
        await scheduler.close()
        return seen, registry.get_sample_value("attnmt_inflight_sentences")
    (depth, inflight, waiting, held), after = run(main())
    assert inflight >= 2 and depth >= 0 and depth + inflight <= 8
    assert after == 0


def test_a_lone_sentence_steps_on_every_core_only_while_the_other_worker_is_empty(translator, monkeypatch):
    """With two workers, a step counts as idle (the engine's idle sessions, every core) only
    when the other worker has no sentence in its batch."""
    from attnmt.service.inference.batch import DecodeBatch
    seen: list[bool] = []
    original = DecodeBatch.step

    def recording(self, idle=False):
        seen.append(idle)
        return original(self, idle)
    monkeypatch.setattr(DecodeBatch, "step", recording)

    async def main(other_busy: bool):
        scheduler = await started(translator, decode_workers=2)
        first, other = scheduler.workers
        assert not first._others_busy()
        if other_busy:
            other.inflight = 1                   # as the other worker's thread writes it before its steps
            assert first._others_busy() and not other._others_busy()
        seen.clear()
        job, = scheduler.submit([translator.search(LONG, SearchOptions())], None)
        await job.future
        other.inflight = 0
        await scheduler.close()
        return job.worker, list(seen)
    worker, alone = run(main(False))
    assert worker == 0 and alone and all(alone)
    worker, beside = run(main(True))
    assert worker == 0 and beside and not any(beside)


def test_a_call_one_worker_refuses_is_refused_whole(translator):
    """Sentences of a wide call go to both workers; if one refuses (stopping), the call fails at
    once and the other worker drops what it was given (at its next step boundary), counted."""
    async def main():
        scheduler = await started(translator, decode_workers=2)
        first, second = scheduler.workers
        second.request_stop()
        await asyncio.to_thread(second.thread.join, 30)
        with pytest.raises(Unavailable):
            scheduler.submit([translator.search(LONG, SearchOptions(beam_size=5)) for _ in range(2)], None)
        give_up = time.monotonic() + 30
        while first.waiting and time.monotonic() < give_up:
            await asyncio.sleep(0.005)
        waiting = first.waiting
        await scheduler.close()
        return scheduler, waiting
    scheduler, waiting = run(main())
    assert waiting == 0
    assert scheduler.metrics.registry.get_sample_value("attnmt_rejected_total",
                                                       {"reason": "cancelled", "protocol": "grpc"}) == 1


def test_when_one_of_two_workers_dies_every_call_still_ends_once(translator, monkeypatch):
    """One worker dies outside a step: its calls fail INTERNAL, new calls are refused, the
    death is reported once; the other worker's sentences are still answered, translated or
    refused by the stop, never left waiting."""
    from attnmt.service.errors import DecodeFailed
    from attnmt.service.server.worker import DecodeWorker
    deaths, doomed = [], []
    original = DecodeWorker._next_joiners

    def broken(self):
        if self in doomed and self._jobs:
            raise RuntimeError("injected fault")
        return original(self)
    monkeypatch.setattr(DecodeWorker, "_next_joiners", broken)

    async def main():
        scheduler = Scheduler(translator, limits(decode_workers=2), Metrics(), on_death=deaths.append)
        doomed.append(scheduler.workers[1])
        scheduler.start()
        jobs = scheduler.submit([translator.search(LONG, SearchOptions(beam_size=2)) for _ in range(6)], None)
        assert sorted(j.worker for j in jobs) == [0, 0, 0, 1, 1, 1]
        outcomes = await asyncio.wait_for(asyncio.gather(*(j.future for j in jobs), return_exceptions=True), 30)
        with pytest.raises(DecodeFailed, match="has stopped"):
            scheduler.submit([translator.search(SHORT, SearchOptions())], None)
        await scheduler.close()
        return jobs, outcomes
    jobs, outcomes = run(main())
    for job, outcome in zip(jobs, outcomes):
        if job.worker == 1:
            assert isinstance(outcome, DecodeFailed)
        else:
            assert outcome is job.search and outcome.done
    assert len(deaths) == 1 and isinstance(deaths[0], RuntimeError)


def test_decode_workers_keep_to_a_core_each_only_where_the_process_has_one_per_worker():
    from attnmt.service.inference.offline import worker_cores
    assert worker_cores(2, 1, {4, 2}) == [{2}, {4}]
    assert worker_cores(2, 1, {0, 1, 2, 3}) is None        # the cores are others' too: no pinning
    assert worker_cores(2, 2, {0, 1}) is None              # steps of two threads: the pools float
    assert worker_cores(1, 1, {0}) is None


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no thread affinity on this platform")
def test_a_pinned_worker_thread_runs_on_its_core_and_decodes(translator):
    """Each worker's thread sets its own affinity (pid 0: the calling thread), not the process's."""
    core = min(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)

    async def main():
        scheduler = Scheduler(translator, limits(decode_workers=2), Metrics(), cores=[{core}, {core}])
        scheduler.start()
        search = translator.search(SHORT, SearchOptions())
        (job,) = scheduler.submit([search], None)
        await job.future
        pinned = [os.sched_getaffinity(w.thread.native_id) for w in scheduler.workers]
        await scheduler.close()
        return pinned, search

    pinned, search = run(main())
    assert pinned == [{core}, {core}] and search.done
    assert os.sched_getaffinity(0) == before               # the process (this thread) keeps its cores


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no thread affinity on this platform")
def test_a_worker_that_cannot_keep_to_its_core_says_so_and_still_decodes(translator, caplog):
    """A core the process may not use (a cpuset that changed since start-up): the affinity call
    fails, the worker logs it and decodes on whatever cores it has."""
    missing = max(os.sched_getaffinity(0)) + 1024

    async def main():
        scheduler = Scheduler(translator, limits(), Metrics(), cores=[{missing}])
        scheduler.start()
        search = translator.search(SHORT, SearchOptions())
        (job,) = scheduler.submit([search], None)
        await job.future
        await scheduler.close()
        return search

    with caplog.at_level(logging.WARNING, logger="attnmt.service.server.worker"):
        search = run(main())
    assert search.done and "keeps to no core" in caplog.text
