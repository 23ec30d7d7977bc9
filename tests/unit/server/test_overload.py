"""Overload: the retry hint that adapts to the refusal rate, and the one queue-full refusal."""

import logging
import re

import grpc

from attnmt.service.errors import DecodeFailed, InvalidInput, Overloaded, StreamIdle
from attnmt.service.server.metrics import Metrics
from attnmt.service.server.overload import RetryHint, queue_full
from attnmt.service.server.status import error_pb, status_of


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


def test_a_queue_full_refusal_is_counted_and_carries_the_hint():
    metrics, hint = Metrics(), RetryHint(base=0.25, ceiling=4.0, refusals_per_second=10)
    error = queue_full(waiting=3, max_queue=2, sentences=4, hint=hint, metrics=metrics)
    assert isinstance(error, Overloaded) and error.retry_after == 0.25
    assert str(error) == "queue full: 3 sentences waiting, max_queue is 2; retry after 0.25s"
    assert metrics.registry.get_sample_value("attnmt_rejected_total", {"reason": "queue_full", "protocol": "grpc"}) == 4
    assert status_of(error) == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_a_stream_item_error_has_its_domain_code_and_a_bug_is_internal():
    assert error_pb(InvalidInput("sentence: too long")).code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert error_pb(StreamIdle("idle")).code == grpc.StatusCode.DEADLINE_EXCEEDED.value[0]
    bug = error_pb(KeyError("x"))
    assert bug.code == grpc.StatusCode.INTERNAL.value[0]
    assert re.fullmatch(r"internal error \(request [0-9a-f]{16}\): KeyError", bug.message)   # 'x' stays in the log


def test_an_internal_error_reaches_the_caller_as_a_request_id_and_the_log_with_its_cause(caplog):
    bug = KeyError("x")
    with caplog.at_level(logging.ERROR, logger="attnmt.service.server.status"):
        answer = error_pb(bug)
    request_id = re.search(r"request ([0-9a-f]{16})", answer.message)[1]
    (record,) = caplog.records
    assert request_id in record.getMessage() and record.exc_info[1] is bug     # the traceback is in the log

    failure = DecodeFailed("decoder step failed (model tiny): RuntimeError: boom")
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="attnmt.service.server.status"):
        answer = error_pb(failure)
    assert answer.message.startswith("decoder step failed (model tiny)") and "(request " in answer.message
    assert re.search(r"request ([0-9a-f]{16})", answer.message)[1] in caplog.records[0].getMessage()
