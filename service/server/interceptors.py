"""The grpc.aio interceptors: the `grpc_server_*` metrics (`MetricsInterceptor`;
py-grpc-prometheus has no aio interceptor, and grpc.aio refuses sync ones), one record
per call for traces and the request log (`RecordingInterceptor`), and the overload
gate (`OverloadGate`)."""

from __future__ import annotations

import asyncio
import collections
import inspect
import time
from typing import Callable

import grpc

from attnmt.service.errors import Overloaded
from attnmt.service.server.metrics import Children, Metrics
from attnmt.service.server.rpc_record import RpcRecord, Sink, begin, finish
from attnmt.service.server.status import abort
from attnmt.service.server.worker import DEADLINE_SLACK_SECONDS

OK = grpc.StatusCode.OK.name


def status_name(context, error: BaseException | None) -> str:
    """The name of the status a call ended with; `error` is what its handler raised, if anything."""
    if error is None:
        code = context.code()
        return code.name if isinstance(code, grpc.StatusCode) else OK
    if isinstance(error, asyncio.CancelledError):
        remaining = context.time_remaining()
        return "DEADLINE_EXCEEDED" if remaining is not None and remaining <= DEADLINE_SLACK_SECONDS else "CANCELLED"
    code = context.code()
    return code.name if isinstance(code, grpc.StatusCode) and code != grpc.StatusCode.OK else "UNKNOWN"


def wrap_handler(handler: grpc.RpcMethodHandler, one_response: Callable, response_stream: Callable
                 ) -> grpc.RpcMethodHandler:
    """`handler` with its behaviour wrapped: `one_response(behaviour)` where the call answers one
    message, `response_stream(behaviour)` where it answers a stream (`behaviour` takes the request,
    or the request iterator, and the context, as gRPC calls it). The kind of call and the
    serializers stay; every interceptor here rebuilds a handler this one way."""
    if handler.response_streaming:
        behaviour = handler.stream_stream if handler.request_streaming else handler.unary_stream
        make = (grpc.stream_stream_rpc_method_handler if handler.request_streaming
                else grpc.unary_stream_rpc_method_handler)
        wrapped = response_stream(behaviour)
    else:
        behaviour = handler.stream_unary if handler.request_streaming else handler.unary_unary
        make = (grpc.stream_unary_rpc_method_handler if handler.request_streaming
                else grpc.unary_unary_rpc_method_handler)
        wrapped = one_response(behaviour)
    return make(wrapped, request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)


class MetricsInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, metrics: Metrics, services: tuple[str, ...] = ()):
        self.m = metrics
        self.services = services          # label values for the service of an unknown method
        self.in_flight: collections.Counter[str] = collections.Counter()   # service -> RPCs in a handler now
        self.started, self.handled, self.handling = (Children(metrics.started), Children(metrics.handled),
                                                     Children(metrics.handling))
        self.received, self.sent = Children(metrics.msg_received), Children(metrics.msg_sent)

    def _unimplemented(self, method: str) -> grpc.RpcMethodHandler:
        """Answer (and count) a method nobody serves; gRPC alone would answer it uncounted.
        Method names come from clients, so they are not label values: 'unknown'."""
        service = method.split("/")[1] if method.count("/") == 2 else ""
        labels = (service if service in self.services else "unknown", "unknown", "unknown")
        started, handled = self.started, self.handled

        async def unimplemented(requests, context):
            started(*labels).inc()
            handled(*labels, grpc.StatusCode.UNIMPLEMENTED.name).inc()
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"method {method[:200]!r} is not served here")
            yield  # pragma: no cover - abort raises; this makes the function a stream handler

        # A stream handler answers any call type without waiting for a request message.
        return grpc.stream_stream_rpc_method_handler(unimplemented)

    async def intercept_service(self, continuation, details: grpc.HandlerCallDetails):
        handler = await continuation(details)
        if handler is None:
            return self._unimplemented(details.method)
        _, service, method = (details.method.split("/", 2) if details.method.count("/") == 2
                              else ("", "", details.method))
        kind = ("bidi_stream" if handler.request_streaming and handler.response_streaming else
                "client_stream" if handler.request_streaming else
                "server_stream" if handler.response_streaming else "unary")
        labels = (service, method, kind)
        in_flight, handled, received = self.in_flight, self.handled, self.received
        started, handling, sent = self.started, self.handling, self.sent

        def finish(context, start: float, error: BaseException | None) -> None:
            in_flight[service] -= 1
            handled(*labels, status_name(context, error)).inc()
            handling(*labels).observe(time.perf_counter() - start)

        async def counted(requests):
            async for request in requests:
                received(*labels).inc()
                yield request

        def begin(request):
            """Count the start (and a unary request); wrap a request stream to count its messages."""
            started(*labels).inc()
            in_flight[service] += 1
            if handler.request_streaming:
                return time.perf_counter(), counted(request)
            received(*labels).inc()
            return time.perf_counter(), request

        def one_response(behaviour):
            async def unary_response(request, context):
                start, request = begin(request)
                try:
                    response = await behaviour(request, context)
                except BaseException as e:
                    finish(context, start, e)
                    raise
                finish(context, start, None)
                sent(*labels).inc()
                return response
            return unary_response

        def response_stream(behaviour):
            if inspect.iscoroutinefunction(behaviour):
                # A handler that writes with context.write instead of yielding (the health
                # service's Watch): `async for` over it would end the call UNKNOWN.
                async def writing_response(request, context):
                    start, request = begin(request)
                    try:
                        await behaviour(request, context)
                    except BaseException as e:
                        finish(context, start, e)
                        raise
                    finish(context, start, None)
                return writing_response

            async def streaming_response(request, context):
                start, request = begin(request)
                try:
                    async for response in behaviour(request, context):
                        sent(*labels).inc()
                        yield response
                except BaseException as e:
                    finish(context, start, e)
                    raise
                finish(context, start, None)
            return streaming_response

        return wrap_handler(handler, one_response, response_stream)


class RecordingInterceptor(grpc.aio.ServerInterceptor):
    """One `RpcRecord` per call of `service`; other services (health, reflection) pass untouched."""

    def __init__(self, service: str, sinks: list[Sink]):
        self.prefix = f"/{service}/"
        self.sinks = sinks

    def _finish(self, record: RpcRecord, context, error: BaseException | None) -> None:
        code = status_name(context, error)
        details = context.details() if code != "OK" else ""
        details = details.decode(errors="replace") if isinstance(details, bytes) else str(details or "")
        finish(record, self.sinks, code, details, error)

    async def intercept_service(self, continuation, details: grpc.HandlerCallDetails):
        handler = await continuation(details)
        if handler is None or not details.method.startswith(self.prefix):
            return handler
        metadata = tuple(details.invocation_metadata or ())

        def begin_call(request) -> RpcRecord:
            # the call's own task (and the tasks it starts) see the record
            return begin(details.method, metadata, None if handler.request_streaming else request)

        async def counted(requests, record: RpcRecord):
            async for request in requests:
                record.sentences += 1
                yield request

        def one_response(behaviour):
            async def unary(request, context):
                record = begin_call(request)
                if handler.request_streaming:
                    request = counted(request, record)
                error = None
                try:
                    return await behaviour(request, context)
                except BaseException as e:
                    error = e
                    raise
                finally:
                    self._finish(record, context, error)
            return unary

        def response_stream(behaviour):
            async def streaming(request, context):
                record = begin_call(request)
                if handler.request_streaming:
                    request = counted(request, record)
                error = None
                try:
                    async for response in behaviour(request, context):
                        yield response
                except BaseException as e:
                    error = e
                    raise
                finally:
                    self._finish(record, context, error)
            return streaming

        return wrap_handler(handler, one_response, response_stream)


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
        full, refusal = self.full, self.refusal

        def one_response(behaviour):
            async def gated(request, context):
                if full():
                    await abort(context, refusal(request))
                return await behaviour(request, context)
            return gated
        return wrap_handler(handler, one_response, lambda behaviour: behaviour)
