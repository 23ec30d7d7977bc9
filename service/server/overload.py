"""Refusing work while the queues are full: the one queue-full refusal and the retry
delay sent with it.

A refusal is `Overloaded` (RESOURCE_EXHAUSTED with google.rpc.RetryInfo over gRPC, 429
with Retry-After over HTTP), counted in attnmt_rejected_total{reason="queue_full"},
whether `Scheduler.submit` makes it for a model's queue or a transport's gate makes it
before a call is even read (server/interceptors.py's OverloadGate, HttpFront.refuse_if_full).
"""

from __future__ import annotations

import time
from typing import Callable

from attnmt.service.errors import Overloaded
from attnmt.service.server.metrics import CALL_PROTOCOL, Metrics


class RetryHint:
    """The retry delay sent (google.rpc.RetryInfo) with RESOURCE_EXHAUSTED, grown
    while refusals pour in and shrunk back when they stop.

    A refusal is cheap but not free (gRPC's own per-call work), and with a fixed hint
    N excess callers that honour it come back N/hint times a second whatever the
    server can do, taking the CPU the decode thread needs. Here the hint doubles
    after each second with more than `refusals_per_second` refusals (up to
    `ceiling`), and halves, down to `base`, after each second with fewer than half
    as many: the refusal rate settles near the target whatever the number of
    callers. The same multiplicative increase gRPC's own retry policy and AWS's
    backoff guidance use, decided by the server, which alone sees every caller.
    """

    def __init__(self, base: float, ceiling: float, refusals_per_second: float,
                 clock: Callable[[], float] = time.monotonic):
        self.base, self.ceiling, self.target = base, max(ceiling, base), refusals_per_second
        self.clock = clock
        self.delay = base
        self._since = self.clock()
        self._count = 0
        self.last_refusal = float("-inf")     # clock() of the latest refusal

    def refused(self) -> float:
        """Count one refusal; returns the delay to send with it."""
        now = self.clock()
        self.last_refusal = now
        elapsed = now - self._since
        if elapsed >= 1.0:
            rate = self._count / elapsed
            if rate > self.target:
                self.delay = min(self.delay * 2, self.ceiling)
            elif rate < self.target / 2:
                # one halving per quiet second since the last refusal
                self.delay = max(self.delay / 2 ** int(elapsed), self.base)
            self._since, self._count = now, 0
        self._count += 1
        return self.delay


def queue_full(waiting: int, max_queue: int, sentences: int, hint: RetryHint, metrics: Metrics) -> Overloaded:
    """Refuse `sentences` because `waiting` sentences fill a queue of `max_queue`: counts
    them and returns the error to end the call with, carrying `hint`'s delay."""
    metrics.rejected.labels("queue_full", CALL_PROTOCOL.get()).inc(sentences)
    delay = hint.refused()
    return Overloaded(f"queue full: {waiting} sentences waiting, max_queue is {max_queue}; "
                      f"retry after {delay:g}s", delay)
