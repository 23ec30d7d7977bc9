"""`attnmt serve`: one process, gRPC and HTTP on the same models and decode workers.
Loads the settings, starts the Server (service/server/app.py) with the HTTP front
(service/http/) beside it, and drains both on SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from attnmt.service.errors import AttnmtError, ConfigError
from attnmt.service.server import logs
from attnmt.service.server.app import Server
from attnmt.service.server.settings import Settings, load_settings

log = logging.getLogger("attnmt")


def fronts(settings: Settings) -> tuple:
    if not settings.http_enabled:
        return ()
    from attnmt.service.http.front import HttpFront  # Starlette and uvicorn load only when HTTP is on
    return (HttpFront(),)


async def serve(settings: Settings) -> Server:
    server = Server(settings, fronts(settings))
    loop = asyncio.get_running_loop()
    starting = asyncio.ensure_future(server.start())

    def on_signal() -> None:
        if not starting.done():
            starting.cancel()       # loading or warming up: give up at the next await, then stop
        asyncio.ensure_future(server.stop())
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    try:
        await starting
    except asyncio.CancelledError:
        await server.stop(0)
        log.info("stopped during start-up")
        return server
    except BaseException:
        await server.stop(0)
        raise
    await server.wait()
    return server


def run(args: argparse.Namespace) -> int:
    try:
        settings = load_settings(args.config, port=args.port, metrics_port=args.metrics_port,
                                 http_port=args.http_port, models=args.model)
    except (ConfigError, OSError) as e:
        print(f"attnmt serve: {e}", file=sys.stderr)
        return 2
    logs.configure(settings.log_level, settings.log_format)
    sys.setswitchinterval(settings.switch_interval_ms / 1000)
    try:
        server = asyncio.run(serve(settings))
    except (ConfigError, AttnmtError) as e:
        print(f"attnmt serve: {e}", file=sys.stderr)
        return 2
    if server.failure is not None:
        print(f"attnmt serve: stopped because a decode worker died: {server.failure}", file=sys.stderr)
        return 1
    return 0
