"""The gRPC servicer: the Translator service over gRPC, thin over the core (core.py).

Each RPC takes from its context what the core asks for (the deadline, who is calling),
calls the core, and ends a failed call through `status.abort`, the one place domain
exceptions become status codes; how a TranslateStream's items move is streaming.py's."""

from __future__ import annotations

import asyncio
import time

import grpc

from attnmt.service.errors import AttnmtError, InvalidInput
from attnmt.service.server.core import Core
from attnmt.service.server.files import translate_file
from attnmt.service.server.status import abort, error_pb
from attnmt.service.server.streaming import TranslationStream
from attnmt.service.server.wire import MalformedRequest
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc


def client_of(context: grpc.aio.ServicerContext) -> str:
    """Who is asking, for fair admission: the mTLS identity when there is one (it cannot
    be chosen by the caller), else the `x-client-id` metadata value, else the peer address."""
    names = (context.auth_context() or {}).get("x509_common_name")
    if names:
        return "tls:" + names[0].decode(errors="replace")
    for key, value in context.invocation_metadata() or ():
        if key == "x-client-id" and value:
            return "id:" + str(value)[:128]
    return "peer:" + context.peer().rsplit(":", 1)[0]


def deadline_of(context: grpc.aio.ServicerContext) -> float | None:
    """The call's deadline on time.monotonic()'s clock; None when the caller set none."""
    remaining = context.time_remaining()
    return None if remaining is None else time.monotonic() + remaining


class TranslatorServicer(pb_grpc.TranslatorServicer):
    def __init__(self, core: Core):
        self.core = core

    async def _malformed(self, request: MalformedRequest, context) -> None:
        """A request whose bytes did not parse (wire.py) ends INVALID_ARGUMENT and is counted."""
        error = InvalidInput(request.message)
        self.core.rejected(error)
        await abort(context, error)

    async def Translate(self, request: pb.TranslateRequest, context) -> pb.TranslateResponse:
        if isinstance(request, MalformedRequest):
            await self._malformed(request, context)
        try:
            return await self.core.translate(request, deadline=deadline_of(context), client=client_of(context))
        except AttnmtError as e:
            await abort(context, e)

    async def Align(self, request: pb.AlignRequest, context) -> pb.AlignResponse:
        if isinstance(request, MalformedRequest):
            await self._malformed(request, context)
        try:
            return await self.core.align(request, deadline=deadline_of(context), client=client_of(context))
        except AttnmtError as e:
            await abort(context, e)

    async def TranslateStream(self, request_iterator, context):
        client = client_of(context)

        async def answer(item: pb.StreamRequest, first: pb.StreamRequest) -> pb.StreamResponse:
            """One item, answered in-band: its translation or its error."""
            try:
                return await self.core.translate_item(item, first, deadline=deadline_of(context), client=client)
            except AttnmtError as e:
                return pb.StreamResponse(id=item.id, error=error_pb(e))

        settings = self.core.settings
        stream = TranslationStream(request_iterator, answer, settings.max_stream_in_flight,
                                   settings.stream_idle_timeout_seconds)
        try:
            async for response in stream.responses():
                yield response
        except AttnmtError as e:          # the request stream itself failed: idle, or a malformed item
            self.core.rejected(e)
            await abort(context, e)
        finally:
            stream.close()

    async def ListModels(self, request, context) -> pb.ListModelsResponse:
        if isinstance(request, MalformedRequest):
            await abort(context, InvalidInput(request.message))
        return self.core.list_models()

    async def GetModel(self, request: pb.GetModelRequest, context) -> pb.ModelInfo:
        if isinstance(request, MalformedRequest):
            await abort(context, InvalidInput(request.message))
        try:
            return self.core.get_model(request.name)
        except AttnmtError as e:
            await abort(context, e)

    async def TranslateFile(self, request: pb.TranslateFileRequest, context):
        """Progress as the file's jobs finish, then the file; a failure ends the call with its status."""
        if isinstance(request, MalformedRequest):
            await self._malformed(request, context)
        events: asyncio.Queue[tuple[int, int] | None] = asyncio.Queue()

        async def run():
            try:
                return await translate_file(self.core, request.name, request.data, model=request.model,
                                            source=request.source_language, target=request.target_language,
                                            deadline=deadline_of(context), client=client_of(context),
                                            progress=lambda done, texts: events.put_nowait((done, texts)))
            finally:
                events.put_nowait(None)                 # the end, however it came

        task = asyncio.create_task(run())
        try:
            while (event := await events.get()) is not None:
                yield pb.TranslateFileResponse(progress=pb.FileProgress(texts_done=event[0], texts=event[1]))
            done = await task
        except AttnmtError as e:
            await abort(context, e)
        finally:
            task.cancel()                               # the caller went away: its jobs are withdrawn
        yield pb.TranslateFileResponse(file=pb.TranslatedFile(
            name=done.name, data=done.data, media_type=done.media_type, model=done.model,
            source_language=done.source_language, target_language=done.target_language,
            untranslated=done.untranslated))
