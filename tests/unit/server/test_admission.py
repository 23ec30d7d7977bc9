"""Fair admission: deficit round robin between clients, interactive before bulk."""

from dataclasses import dataclass

from attnmt.service.server.admission import BULK, INTERACTIVE, FairQueue


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
