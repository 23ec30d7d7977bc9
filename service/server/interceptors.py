"""The grpc.aio interceptor behind the `grpc_server_*` metrics
(py-grpc-prometheus has no aio interceptor, and grpc.aio refuses sync ones)."""

from __future__ import annotations

import asyncio
import collections
import inspect
import time

import grpc

from attnmt.service.server.metrics import Metrics

OK = grpc.StatusCode.OK.name
# A client whose deadline passes cancels the call (RST_STREAM); that can reach the server a
# little before the server's own copy of the deadline (the request's grpc-timeout counted from
# its arrival) has passed. A cancellation this close to the deadline is the deadline.
DEADLINE_SLACK_SECONDS = 0.02


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


class MetricsInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, metrics: Metrics, services: tuple[str, ...] = ()):
        self.m = metrics
        self.services = services          # label values for the service of an unknown method
        self.in_flight: collections.Counter[str] = collections.Counter()   # service -> RPCs in a handler now

    def _unimplemented(self, method: str) -> grpc.RpcMethodHandler:
        """Answer (and count) a method nobody serves; gRPC alone would answer it uncounted.
        Method names come from clients, so they are not label values: 'unknown'."""
        service = method.split("/")[1] if method.count("/") == 2 else ""
        labels = (service if service in self.services else "unknown", "unknown", "unknown")
        m = self.m

        async def unimplemented(requests, context):
            m.started.labels(*labels).inc()
            m.handled.labels(*labels, grpc.StatusCode.UNIMPLEMENTED.name).inc()
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
        m, in_flight = self.m, self.in_flight

        def finish(context, start: float, error: BaseException | None) -> None:
            in_flight[service] -= 1
            m.handled.labels(*labels, status_name(context, error)).inc()
            m.handling.labels(*labels).observe(time.perf_counter() - start)

        async def counted(requests):
            async for request in requests:
                m.msg_received.labels(*labels).inc()
                yield request

        def begin(request):
            """Count the start (and a unary request); wrap a request stream to count its messages."""
            m.started.labels(*labels).inc()
            in_flight[service] += 1
            if handler.request_streaming:
                return time.perf_counter(), counted(request)
            m.msg_received.labels(*labels).inc()
            return time.perf_counter(), request

        if not handler.response_streaming:
            behaviour = handler.request_streaming and handler.stream_unary or handler.unary_unary

            async def unary_response(request, context):
                start, request = begin(request)
                try:
                    response = await behaviour(request, context)
                except BaseException as e:
                    finish(context, start, e)
                    raise
                finish(context, start, None)
                m.msg_sent.labels(*labels).inc()
                return response

            make = (grpc.stream_unary_rpc_method_handler if handler.request_streaming
                    else grpc.unary_unary_rpc_method_handler)
            return make(unary_response, request_deserializer=handler.request_deserializer,
                        response_serializer=handler.response_serializer)

        behaviour = handler.stream_stream if handler.request_streaming else handler.unary_stream
        make = (grpc.stream_stream_rpc_method_handler if handler.request_streaming
                else grpc.unary_stream_rpc_method_handler)

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

            return make(writing_response, request_deserializer=handler.request_deserializer,
                        response_serializer=handler.response_serializer)

        async def streaming_response(request, context):
            start, request = begin(request)
            try:
                async for response in behaviour(request, context):
                    m.msg_sent.labels(*labels).inc()
                    yield response
            except BaseException as e:
                finish(context, start, e)
                raise
            finish(context, start, None)

        return make(streaming_response, request_deserializer=handler.request_deserializer,
                    response_serializer=handler.response_serializer)
