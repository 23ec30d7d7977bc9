"""The flow of one TranslateStream call.

Requests are read as they arrive and each is answered as soon as its own
translation is done, whatever the order; what an item says is the servicer's
business (`answer`), how items move is this module's:

- at most `max_in_flight` items at a time: a permit is held from reading a
  request until its response is queued, and the queue is bounded, so a client
  that writes fast and reads slowly stops being read (backpressure);
- a stream that sends nothing for `idle_timeout` seconds while nothing is in
  flight ends with StreamIdle;
- a request that does not parse ends the stream (InvalidInput); an item that
  fails, even on a bug, is answered with its error and the stream goes on:
  every id gets exactly one answer.
"""

from __future__ import annotations

import asyncio
import logging
from typing import AsyncIterable, AsyncIterator, Awaitable, Callable

from attnmt.service.errors import StreamIdle
from attnmt.service.server.status import error_pb
from attnmt.service.server.wire import parsed
from attnmt.service.stubs import translator_pb2 as pb

log = logging.getLogger(__name__)

# (request, the stream's first request, whose model and options are the defaults) -> its response
Answer = Callable[[pb.StreamRequest, pb.StreamRequest], Awaitable[pb.StreamResponse]]

_END = object()                       # queued after the last response


class TranslationStream:
    def __init__(self, requests: AsyncIterable, answer: Answer, max_in_flight: int, idle_timeout: float):
        self._requests = requests
        self._answer = answer
        self._idle_timeout = idle_timeout   # 0: never
        self._permits = asyncio.Semaphore(max_in_flight)
        self._out: asyncio.Queue = asyncio.Queue(maxsize=max_in_flight)
        self._pending: set[asyncio.Task] = set()      # items being answered
        self._reads: set[asyncio.Future] = set()      # the read of the next request, while it waits
        self._reader: asyncio.Task | None = None

    async def responses(self) -> AsyncIterator[pb.StreamResponse]:
        """Each item's response as soon as it is ready; then raises what ended the request
        stream early (StreamIdle, InvalidInput), if anything did."""
        self._reader = asyncio.create_task(self._read_all())
        while (item := await self._out.get()) is not _END:
            yield item
        await self._reader

    def close(self) -> None:
        """The call has ended: stop reading and drop the items in flight."""
        if self._reader is not None:
            self._reader.cancel()
        for task in list(self._pending) + list(self._reads):
            task.cancel()

    async def _read_all(self) -> None:
        """Read every request and start its answer; end the responses once all are answered."""
        try:
            requests = self._requests.__aiter__()
            first = None
            while (request := await self._next(requests)) is not None:
                request = parsed(request)
                if first is None:
                    first = request
                await self._permits.acquire()
                task = asyncio.create_task(self._respond(request, first))
                self._pending.add(task)
                task.add_done_callback(self._pending.discard)
            if self._pending:
                await asyncio.gather(*self._pending)
        finally:
            await self._out.put(_END)

    async def _next(self, requests: AsyncIterator):
        """The next request, or None at the end of the stream; StreamIdle when none comes
        within the idle timeout while nothing is in flight."""
        # Not asyncio.wait_for: a read of gRPC's request stream does not end when
        # cancelled, so wait_for would wait for the next message anyway.
        read = asyncio.ensure_future(requests.__anext__())
        self._reads.add(read)
        while not read.done():
            if self._pending:           # work in flight: the stream is not idle
                await asyncio.wait({read, *self._pending}, return_when=asyncio.FIRST_COMPLETED)
                continue
            done, _ = await asyncio.wait({read}, timeout=self._idle_timeout or None)
            if not done:
                raise StreamIdle(f"no request for {self._idle_timeout:g}s with nothing in flight "
                                 "(stream_idle_timeout_seconds); open a new stream when there is work")
        self._reads.discard(read)
        try:
            return read.result()
        except StopAsyncIteration:
            return None

    async def _respond(self, request: pb.StreamRequest, first: pb.StreamRequest) -> None:
        try:
            response = await self._answer(request, first)
        except Exception as e:  # noqa: BLE001 - every id gets exactly one answer, even on a bug
            log.exception("stream item %r failed", request.id)
            response = pb.StreamResponse(id=request.id, error=error_pb(e))
        try:
            await self._out.put(response)     # blocks while the client reads slowly: backpressure
        finally:
            self._permits.release()
