"""Fair admission: deficit round robin between clients, interactive before bulk."""

from dataclasses import dataclass

from attnmt.service.server.admission import BULK, INTERACTIVE, FairQueue, RetryHint


@dataclass(eq=False)
class FakeJob:
    client: str
    cost: int
    priority: int = INTERACTIVE
    rows: int = 1


def take(queue: FairQueue, max_rows: int, max_cost: int | None = None) -> list[FakeJob]:
    """One step's admission with a row budget (and optionally a per-job cost cap)."""
    joined, used = [], {"rows": 0}

    def fits(job):
        return used["rows"] + job.rows <= max_rows and (max_cost is None or job.cost <= max_cost)

    def admit(job):
        joined.append(job)
        used["rows"] += job.rows
    queue.take(lambda j: j.cost, fits, admit)
    return joined


def test_a_late_client_is_not_stuck_behind_a_big_one():
    queue = FairQueue(quantum=100)
    for _ in range(64):
        queue.append(FakeJob("big", cost=100, rows=16))     # 1,024 rows of beam 16
    queue.append(FakeJob("small", cost=10))
    first = take(queue, max_rows=64)
    assert any(j.client == "small" for j in first)
    assert len(queue) == 64 + 1 - len(first)


def test_clients_share_by_cost_not_by_request_count():
    queue = FairQueue(quantum=50)
    for _ in range(400):
        queue.append(FakeJob("many-small", cost=10))
        queue.append(FakeJob("few-large", cost=100))
    admitted = {"many-small": 0, "few-large": 0}
    for _ in range(20):
        for job in take(queue, max_rows=8):
            admitted[job.client] += job.cost
    ratio = admitted["many-small"] / admitted["few-large"]
    assert 0.5 < ratio < 2.0, admitted


def test_interactive_work_goes_before_bulk():
    queue = FairQueue()
    for _ in range(10):
        queue.append(FakeJob("batch-job", cost=10, priority=BULK))
    queue.append(FakeJob("user", cost=10))
    first = take(queue, max_rows=1)
    assert [j.client for j in first] == ["user"]
    assert [j.client for j in take(queue, max_rows=3)] == ["batch-job"] * 3


def test_a_head_that_does_not_fit_does_not_block_other_clients():
    queue = FairQueue()
    queue.append(FakeJob("long", cost=5000))
    queue.append(FakeJob("short", cost=10))
    assert [j.client for j in take(queue, max_rows=64, max_cost=100)] == ["short"]
    assert len(queue) == 1


def test_order_within_a_client_is_kept_and_dead_jobs_are_removed():
    queue = FairQueue()
    jobs = [FakeJob("a", cost=10) for _ in range(5)]
    for job in jobs:
        queue.append(job)
    removed = queue.remove(lambda j: j is jobs[1])
    assert removed == [jobs[1]] and len(queue) == 4
    assert take(queue, max_rows=64) == [jobs[0], jobs[2], jobs[3], jobs[4]]
    assert len(queue) == 0


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_retry_hint_grows_while_refusals_pour_in_and_shrinks_when_they_stop():
    clock = FakeClock()
    hint = RetryHint(base=0.5, ceiling=4.0, refusals_per_second=10, clock=clock)
    delays = []
    for second in range(6):                   # 100 refusals a second: ten times the target
        for i in range(100):
            clock.now = second + i / 100
            delays.append(hint.refused())
    assert delays[0] == 0.5 and delays[99] == 0.5        # the first second is only counted
    assert [delays[100 * s + 1] for s in range(1, 6)] == [1.0, 2.0, 4.0, 4.0, 4.0]   # doubles, up to the ceiling
    clock.now = 6.2
    assert hint.refused() == 4.0              # this second's 100 refusals still count as heavy
    clock.now = 7.5                           # then one refusal in 1.3 s: a quiet second
    assert hint.refused() == 2.0
    clock.now = 20.0                          # twelve quiet seconds: back to the base, not below
    assert hint.refused() == 0.5


def test_a_steady_trickle_near_the_target_keeps_the_hint_where_it_is():
    clock = FakeClock()
    hint = RetryHint(base=0.5, ceiling=30.0, refusals_per_second=10, clock=clock)
    hint.delay = 2.0
    for second in range(5):                   # 7 a second: under the target, over half of it
        for i in range(7):
            clock.now = second + i / 7
            assert hint.refused() == 2.0
