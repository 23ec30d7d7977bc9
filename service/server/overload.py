"""Refusing work while the queues are full: the one queue-full refusal, the retry
delay sent with it, and the gate that refuses at the door.

A refusal is RESOURCE_EXHAUSTED with google.rpc.RetryInfo, counted in
attnmt_rejected_total{reason="queue_full"}, whether `Scheduler.submit` makes it
for a model's queue or `OverloadGate` makes it before a call is even read.
"""

from __future__ import annotations

import time
from typing import Callable

import grpc

from attnmt.service.errors import Overloaded
from attnmt.service.server.metrics import CALL_PROTOCOL, Metrics
from attnmt.service.server.status import abort


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


class OverloadGate(grpc.aio.ServerInterceptor):
    """Refuse work at the door while every model's queue is full.

    For the unary work methods, one check of the queue lengths comes before
    anything else, so a refusal costs none of the request path (validation,
    tokenization, a Search per sentence, the fair queue's client lookup): under a
    retry storm that work would compete for the GIL with the decode thread. When a
    queue has room the call goes through and `Scheduler.submit` still makes the
    exact decision for the sentences it carries.

    Why not gRPC's `maximum_concurrent_rpcs`: grpc.aio refuses a call over that
    limit at once with RESOURCE_EXHAUSTED, before any interceptor, but without
    RetryInfo (so a client cannot tell it from a request too large to retry) and
    for every method alike: health checks and Models would be refused with the
    translations, and a refused liveness probe restarts the pod. TGI's semaphore
    (`try_acquire`, else 429 at once) and Triton's queue policy (`max_queue_size`,
    REJECT) make this same choice: a bounded queue and an immediate, cheap refusal.
    """

    def __init__(self, full: Callable[[], bool], refusal: Callable[[object], Overloaded], methods: tuple[str, ...]):
        self.full = full                  # no model has room for one more sentence
        self.refusal = refusal            # request -> the counted refusal (`queue_full`)
        self.methods = frozenset(methods)  # full method paths: /package.Service/Method

    async def intercept_service(self, continuation, details: grpc.HandlerCallDetails):
        handler = await continuation(details)
        if handler is None or details.method not in self.methods or handler.request_streaming:
            return handler
        behaviour, full, refusal = handler.unary_unary, self.full, self.refusal

        async def gated(request, context):
            if full():
                await abort(context, refusal(request))
            return await behaviour(request, context)
        return grpc.unary_unary_rpc_method_handler(gated, request_deserializer=handler.request_deserializer,
                                                   response_serializer=handler.response_serializer)
