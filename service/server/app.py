"""The server of `attnmt serve`: wires settings, engines, schedulers and the core
(core.py), serves the core over grpc.aio with health, reflection and metrics, starts
the other fronts beside it over the same core (HTTP: service/http/), and drains them
all on SIGTERM (service/serve.py runs it)."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
from importlib import metadata
from typing import Protocol

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio
from prometheus_client import start_http_server

from attnmt.service.errors import ConfigError, Overloaded
from attnmt.service.inference.engine import Engine, EngineOptions
from attnmt.service.inference.offline import worker_cores
from attnmt.service.inference.search import SearchOptions
from attnmt.service.modeldir.manifest import TRANSFORMER_GRAPHS_REVISION
from attnmt.service.server import reflection
from attnmt.service.server.cache import TranslationCache
from attnmt.service.server.core import SERVICE_NAME, Core, ServedModel
from attnmt.service.server.interceptors import MetricsInterceptor, OverloadGate, RecordingInterceptor
from attnmt.service.server.logs import log_request
from attnmt.service.server.metrics import CALL_PROTOCOL, WARMUP, Metrics
from attnmt.service.server.overload import RetryHint, queue_full
from attnmt.service.server.scheduler import Scheduler, SchedulerLimits
from attnmt.service.server.servicer import TranslatorServicer
from attnmt.service.server.settings import Settings
from attnmt.service.server.tracing import Tracing
from attnmt.service.server.wire import add_to_server
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.text.translator import Translator

log = logging.getLogger("attnmt")
KNOWN_SERVICES = (SERVICE_NAME, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                  *reflection.SERVICE_NAMES)
# One real sentence per source language (a model of another language warms up on the Spanish one:
# the shapes are what matter, the logged translation only reads well in a language it knows)
WARMUP_SENTENCES = {"es": "No se puede abrir el archivo %s: permiso denegado.",
                    "en": "Cannot open the file %s: permission denied."}
# Calls gRPC holds for the event loop before it starts dropping them: enough for the overload
# gate to answer a burst of callers on one channel. Calls still waiting after 30 s are
# cancelled whatever this says.
PENDING_CALLS = 10_000


class Front(Protocol):
    """A listener beside gRPC (service/http/front.py's HttpFront), calling the same core."""
    in_flight: int     # calls being answered; the drain waits for them

    async def start(self, server: Server) -> None: ...

    async def stop(self) -> None: ...


class Server:
    def __init__(self, settings: Settings, fronts: tuple[Front, ...] = ()):
        self.settings = settings
        self.fronts = fronts
        self.serving = False          # loaded, warmed up and not draining: what readiness reports
        try:
            self.version = metadata.version("attnmt")
        except metadata.PackageNotFoundError:
            self.version = "unknown"
        self.metrics = Metrics()
        self.health = health_aio.HealthServicer()
        self.models: dict[str, ServedModel] = {}
        self.grpc: grpc.aio.Server | None = None
        self.interceptor = MetricsInterceptor(self.metrics, KNOWN_SERVICES)
        self.port = 0
        self.metrics_port = 0
        self._metrics_http = None
        self._stopping: asyncio.Task | None = None
        self.failure: BaseException | None = None
        self.tracing: Tracing | None = None
        self.record_sinks: list = []
        # one retry hint for every refusal, at the door (OverloadGate) or in a model's queue
        self.retry_hint = RetryHint(settings.retry_after_seconds, settings.retry_after_max_seconds,
                                    settings.overload_refusals_per_second)

    def _load_models(self) -> None:
        s = self.settings
        threads = s.worker_threads
        # decode workers of one thread each share an engine, and step alone on every core when
        # the others have nothing (idle_spinning's steps)
        options = EngineOptions(device=s.device, precision=s.precision, intra_op_threads=threads,
                                inter_op_threads=s.inter_op_threads, optimization=s.graph_optimization,
                                allow_spinning=s.allow_spinning, idle_spinning=s.idle_spinning, shortlist=s.shortlist,
                                idle_threads=s.workers if threads == 1 and s.workers > 1 else 0)
        limits = SchedulerLimits.from_settings(s)
        cores = worker_cores(s.workers, threads) if s.pin_decode_workers and s.device == "cpu" else None
        if cores:
            log.info("decode workers keep to cores %s", ", ".join(str(min(c)) for c in cores))
        for model_dir in s.models:
            engines = [Engine(model_dir, options) for _ in range(1 if threads == 1 else s.workers)]
            for engine in engines:
                engine.shared_decoder  # noqa: B018 - a server loads every graph up front: a bad one stops start-up
            engine = engines[0]
            name = engine.manifest.name
            if name in self.models:
                raise ConfigError(f"models: two model directories are both named {name!r}")
            translator = Translator(engine, max_tokens=s.max_tokens_per_sentence)
            scheduler = Scheduler(translator, limits, self.metrics, on_death=self._worker_died,
                                  retry_hint=self.retry_hint, engines=engines * (s.workers // len(engines)),
                                  cores=cores)
            cache = TranslationCache(s.cache_size, self.metrics, name) if s.cache_size else None
            self.models[name] = ServedModel(translator, scheduler, cache)
            self.metrics.model_info.labels(name, engine.manifest.version, engine.provider).set(1)
            log.info("loaded model %s (%s) from %s on %s", name, engine.manifest.version, model_dir, engine.provider)
            if engine.manifest.older_graphs:
                log.warning("model %s: an older export wrote its step graphs (revision %d of %d), which run more "
                            "nodes a step for the same numbers; %s", name, engine.manifest.graphs_revision or 1,
                            TRANSFORMER_GRAPHS_REVISION,
                            f"`attnmt upgrade-model {model_dir}` re-exports them" if not engine.manifest.quantization
                            else "upgrade the float directory it was quantized from, then quantize it again")
        default = s.default_model or next(iter(self.models))
        if default not in self.models:
            raise ConfigError(f"default_model: {default!r} is not among the served models {sorted(self.models)}")
        self.default = default

    def _credentials(self) -> grpc.ServerCredentials | None:
        s = self.settings
        if s.tls_cert is None:
            return None
        try:
            key, cert = s.tls_key.read_bytes(), s.tls_cert.read_bytes()
            ca = s.tls_client_ca.read_bytes() if s.tls_client_ca else None
        except OSError as e:
            raise ConfigError(f"tls: cannot read {e.filename}: {e.strerror}") from e
        return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=ca is not None)

    def _recorders(self) -> list[grpc.aio.ServerInterceptor]:
        """Traces and the request log, when on; otherwise no call is recorded at all."""
        sinks = []
        if self.settings.tracing:
            self.tracing = Tracing()          # ConfigError without the otel extra
            sinks.append(self.tracing)
        if self.settings.log_level == "debug":
            sinks.append(log_request)
        self.record_sinks = sinks             # the HTTP front records its calls into the same sinks
        return [RecordingInterceptor(SERVICE_NAME, sinks)] if sinks else []

    async def start(self) -> None:
        s = self.settings
        recorders = self._recorders()
        self._load_models()
        self.core = Core(self.models, self.default, s, self.metrics)
        self.servicer = TranslatorServicer(self.core)
        options = [("grpc.so_reuseport", 0),      # a second server must fail to bind, not share the port
                   ("grpc.max_receive_message_length", s.max_message_bytes),
                   ("grpc.max_send_message_length", s.max_message_bytes),
                   # Calls that arrived faster than the event loop takes them: gRPC's default drops
                   # them at random from 1,000 waiting (all from 3,000), and the client sees
                   # CANCELLED; the overload gate should answer them (RESOURCE_EXHAUSTED, RetryInfo).
                   ("grpc.server.max_pending_requests", PENDING_CALLS),
                   ("grpc.server.max_pending_requests_hard_limit", 2 * PENDING_CALLS)]
        if s.max_concurrent_streams:            # 0: none advertised (gRPC's default: no limit)
            options.append(("grpc.max_concurrent_streams", s.max_concurrent_streams))
        if s.max_connection_age_seconds:
            options += [("grpc.max_connection_age_ms", int(s.max_connection_age_seconds * 1000)),
                        ("grpc.max_connection_age_grace_ms", int(s.grace_period_seconds * 1000))]
        gate = OverloadGate(self.queues_full, self.refusal, (f"/{SERVICE_NAME}/Translate", f"/{SERVICE_NAME}/Align"))
        self.grpc = grpc.aio.server(interceptors=[*recorders, self.interceptor, gate], options=options)
        add_to_server(self.servicer, self.grpc)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.grpc)
        for name in ("", SERVICE_NAME):
            await self.health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        if s.reflection:
            reflection.enable(self.grpc, (SERVICE_NAME, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name))
        address = f"{s.host}:{s.port}"
        credentials = self._credentials()
        try:
            port = (self.grpc.add_secure_port(address, credentials) if credentials
                    else self.grpc.add_insecure_port(address))
        except RuntimeError:  # grpcio 1.85 raises; older releases return 0 (grpc/grpc#16920)
            port = 0
        if port == 0:
            raise ConfigError(f"port: cannot listen on {address} (in use or not permitted)")
        self.port = port
        if s.metrics_enabled:
            self._metrics_http, _ = start_http_server(s.metrics_port, s.metrics_host, registry=self.metrics.registry)
            self.metrics_port = self._metrics_http.server_port
        await self.grpc.start()
        for front in self.fronts:
            await front.start(self)
        for served in self.models.values():
            served.scheduler.start()
        if s.warmup:
            await self._warmup()
        quiet_collector()
        for name in ("", SERVICE_NAME):
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        self.metrics.ready.set(1)
        self.serving = True
        http = next((f.port for f in self.fronts if hasattr(f, "port")), None)
        log.info("serving %s on %s:%d (%s), http on %s:%s, metrics on %s:%s, batching=%s", ", ".join(self.models),
                 s.host, self.port, "TLS" if credentials else "plaintext", s.http_host, http or "off",
                 s.metrics_host, self.metrics_port or "off", s.batching)

    async def _warmup(self) -> None:
        """One real translation per model before reporting SERVING."""
        token = CALL_PROTOCOL.set(WARMUP)       # not a call: attnmt_sentences_total leaves it out
        try:
            for served in self.models.values():
                log.info("warming up %s", served.translator.name)
                language = served.translator.engine.manifest.source_language
                sentence = WARMUP_SENTENCES.get(language, WARMUP_SENTENCES["es"])
                search = served.translator.search(sentence, SearchOptions(beam_size=self.settings.default_beam_size,
                                                                          n_best=1))
                jobs = served.scheduler.submit([search], None)
                await asyncio.gather(*(j.future for j in jobs))
                log.info("warm-up %s: %r -> %r", served.translator.name, sentence,
                         served.translator.result(sentence, search).best.text)
        finally:
            CALL_PROTOCOL.reset(token)

    def queues_full(self) -> bool:
        """No model can take one more sentence (and the server is not draining, which
        the core answers UNAVAILABLE)."""
        return not self.core.draining and all(
            m.scheduler.waiting >= m.scheduler.limits.max_queue for m in self.models.values())

    def refusal(self, request) -> Overloaded:
        """The gate's refusal of a call while `queues_full`, before any of the core's work
        (OverloadGate); the waiting count is the least busy model's."""
        sentences = len(request.sentences) if isinstance(request, pb.TranslateRequest) else 1
        waiting = min(m.scheduler.waiting for m in self.models.values())
        return queue_full(waiting, self.settings.max_queue, max(sentences, 1), self.retry_hint, self.metrics)

    def _worker_died(self, error: BaseException) -> None:
        """A decode worker stopped for good: its calls have failed with INTERNAL. Stop
        reporting SERVING and exit non-zero, so the orchestrator restarts the process
        (a clean restart is more trustworthy than reviving a thread in a broken state)."""
        log.critical("decode worker died (%s: %s): stopping the server", type(error).__name__, error)
        self.failure = error
        self.metrics.ready.set(0)
        asyncio.ensure_future(self.stop())

    async def stop(self, grace: float | None = None) -> None:
        """Drain: NOT_SERVING, refuse new RPCs, let in-flight ones finish within the grace period."""
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(
                self._stop(self.settings.grace_period_seconds if grace is None else grace))
        await self._stopping

    async def _stop(self, grace: float) -> None:
        log.info("draining: up to %.1fs for in-flight requests", grace)
        self.metrics.ready.set(0)
        self.serving = False
        if hasattr(self, "core"):
            self.core.draining = True
        await self.health.enter_graceful_shutdown()
        if self.grpc is not None:
            # Lame duck first: the listener stays open while accepted calls finish, so health
            # checks see NOT_SERVING and new calls get the core's UNAVAILABLE (counted,
            # with a message) instead of a closed port. Then gRPC's own stop, with a short
            # grace for calls being refused right now: what else is open (health Watch,
            # reflection streams) would otherwise hold the process for the whole grace period.
            give_up = time.monotonic() + grace
            while self._in_flight() > 0 and time.monotonic() < give_up:
                await asyncio.sleep(0.01)
            await self.grpc.stop(min(max(give_up - time.monotonic(), 0), 1.0))
        for front in self.fronts:
            await front.stop()
        for served in self.models.values():
            await served.scheduler.close()
        if self._metrics_http is not None:
            # socketserver's shutdown() returns only at serve_forever's next poll, every 0.5 s, and
            # would hold the event loop that long: the serving thread (a daemon) is told to stop
            # and closes its listener by itself, and the process need not wait for it
            metrics_http = self._metrics_http
            threading.Thread(target=lambda: (metrics_http.shutdown(), metrics_http.server_close()),
                             name="metrics-shutdown", daemon=True).start()
        if self.tracing is not None:
            self.tracing.shutdown()           # export the spans still buffered
        log.info("stopped")

    def _in_flight(self) -> int:
        """Translator calls being answered, over every protocol."""
        return self.interceptor.in_flight[SERVICE_NAME] + sum(f.in_flight for f in self.fronts)

    async def wait(self) -> None:
        await self.grpc.wait_for_termination()
        if self._stopping is not None:
            await self._stopping


def quiet_collector() -> None:
    """Keep Python's full garbage collections short and rare in a serving process.

    A full collection walks every tracked object and holds the GIL throughout: with the models,
    tokenizers and the gRPC and HTTP machinery loaded, one after a request that made many objects
    (a large HTML document) took 70-110 ms, and the event loop answered nothing meanwhile, health
    checks included. What is loaded at start lives as long as the process, so it is frozen out of
    the collector's sight (`gc.freeze`); and full collections come after 1,000 rather than 10
    middle-generation ones, since a request's objects die young. (CPython 3.11 also holds a full
    collection back until a quarter of the long-lived objects are new, which a freeze makes easy
    to reach.)"""
    gc.collect()
    gc.freeze()
    threshold0, threshold1, _ = gc.get_threshold()
    gc.set_threshold(threshold0, threshold1, 1000)
