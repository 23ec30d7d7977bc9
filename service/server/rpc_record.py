"""What one Translator RPC did, for traces (tracing.py) and the request log (logs.py).

A transport opens an `RpcRecord` when a call starts (`begin`: gRPC's
`RecordingInterceptor` in interceptors.py, HTTP's `HttpFront.call`) and keeps it in a
context variable of the call's task; `Scheduler.submit` attaches the call's jobs
to it (`attach`), and the decode worker writes their timestamps (joined,
encoded, finished) and the steps and rows they shared; when the call ends, the
record goes to each sink. The interceptor is installed only when tracing is on
or the log level is debug: otherwise `attach` finds no record and returns, and
nothing else runs.
"""

from __future__ import annotations

import logging
import re
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from attnmt.service.server.worker import Job

log = logging.getLogger(__name__)

_TRACEPARENT = re.compile(r"[\da-f]{2}-(?P<trace>[\da-f]{32})-(?P<span>[\da-f]{16})-[\da-f]{2}")


@dataclass(eq=False)
class RpcRecord:
    method: str                               # /attnmt.v1.Translator/Translate
    metadata: tuple                           # the caller's, traceparent included
    model: str = ""                           # the model that decoded (else the one the request named)
    sentences: int = 0                        # in the request (stream: requests read)
    jobs: list["Job"] = field(default_factory=list)
    start: float = field(default_factory=time.monotonic)
    start_ns: int = field(default_factory=time.time_ns)
    end: float = 0.0
    code: str = "OK"
    details: str = ""
    error: BaseException | None = None
    trace_id: str = ""                        # 32 hex digits, when the caller or the tracer gave one
    protocol: str = "grpc"                    # or "http": the same RPC called through service/http/

    @property
    def seconds(self) -> float:
        return self.end - self.start

    def epoch_ns(self, monotonic: float) -> int:
        """A worker timestamp (time.monotonic()) on the wall clock, as spans want it."""
        return self.start_ns + int((monotonic - self.start) * 1e9)


_current: ContextVar[RpcRecord | None] = ContextVar("attnmt_rpc_record", default=None)


def attach(model: str, jobs: list["Job"]) -> None:
    """Called by the scheduler for the sentences a call submits; a no-op when nobody records."""
    record = _current.get()
    if record is not None:
        record.model = model
        record.jobs += jobs


def sentences_in(request) -> int:
    """Translate: its sentences; Align: one; the other methods: none."""
    if hasattr(request, "sentences"):
        return len(request.sentences)
    return 1 if hasattr(request, "source") else 0


def caller_trace_id(metadata) -> str:
    for key, value in metadata or ():
        if key == "traceparent":
            match = _TRACEPARENT.fullmatch(str(value).strip())
            return match["trace"] if match else ""
    return ""


Sink = Callable[[RpcRecord], None]


def begin(method: str, metadata: tuple, request=None, protocol: str = "grpc") -> RpcRecord:
    """Open the record of a call in the current task (and the tasks it starts from now on)."""
    record = RpcRecord(method, metadata, trace_id=caller_trace_id(metadata), protocol=protocol)
    if request is not None:
        record.model = getattr(request, "model", "")
        record.sentences = sentences_in(request)
    _current.set(record)
    return record


def finish(record: RpcRecord, sinks: list[Sink], code: str, details: str, error: BaseException | None) -> None:
    """Close the record and hand it to every sink; a failing sink never fails the call."""
    record.end = time.monotonic()
    record.code, record.details, record.error = code, details, error
    for sink in sinks:
        try:
            sink(record)
        except Exception:  # noqa: BLE001 - observing a call must never fail it
            log.exception("recording %s failed in %r", record.method, sink)
