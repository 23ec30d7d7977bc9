"""`attnmt bench http`: the HTTP front against gRPC on the same server, in one run.

One `attnmt serve` with its default settings answers both (service/http/ runs in the
server's event loop, beside the gRPC servicer). Rounds alternate, the order swapped each
round: `concurrency` closed-loop clients on gRPC (grpc.aio, one channel: loadtest.closed_loop),
then on HTTP (one aiohttp ClientSession by default, or one httpx.AsyncClient: HTTP/1.1, a
keep-alive pool as large as the concurrency, `POST /v1/translate`); then each protocol at
concurrency 1. The client shares the server's cores, so its CPU is the benchmark's own cost:
aiohttp spends about 1.6 CPU-ms a call here, httpx about 4.2, grpc.aio 0.85
(docs/benchmarks.md), and on 2 cores that alone moves the throughput ratio by 0.1. Every
call is one verse, greedy, word alignments. Medians of the rounds: sentences/s, the server's CPU-seconds per sentence
(/proc), the client's own (getrusage: this process) apart, p50 and p90 at concurrency 1.
Every answer must be a 200/OK with a translation: failures are counted, not raised. Once,
the two protocols translate the latency verses one by one and their texts are compared.
"""

from __future__ import annotations

import asyncio
import importlib.util
import statistics
import time
from collections import Counter
from pathlib import Path

import grpc
import httpx
import numpy as np
import uvicorn
from google.protobuf import json_format

from attnmt.bench.loadtest import (
    ServerProcess,
    closed_loop,
    cpu_seconds_self,
    describe,
    format_targets,
    machine,
    spread,
    target,
)
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc

PROTOCOLS = ("grpc", "http")
HTTP_CLIENTS = ("aiohttp", "httpx")
_TIMEOUT = 120.0     # seconds for one HTTP call: a stuck call is counted, not waited on forever


def _text(status: int, reply) -> str | None:
    """The translation in a 200 answer (`reply`: its JSON, None when it was not JSON), or None."""
    if status != 200 or not isinstance(reply, dict):
        return None
    translations = reply.get("translations") or [{}]
    return translations[0].get("text") or None


def _failure(status: int, reply) -> str:
    if status == 200:
        return "200 without a translation"
    try:
        code = reply["error"]["code"]
    except (KeyError, TypeError):
        code = "no error body"
    return f"HTTP {status} {code}"


def _httpx_answer(response: httpx.Response) -> tuple[int, object]:
    try:
        return response.status_code, response.json()
    except ValueError:
        return response.status_code, None


def _http_client(port: int, concurrency: int) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    return httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", limits=limits, timeout=_TIMEOUT)


async def _closed_loop(post, sentences: list[str], concurrency: int, requests: int, options: pb.DecodingOptions,
                       errors: Counter, transport_errors: tuple) -> tuple[list[float], float]:
    """loadtest.closed_loop over HTTP: `concurrency` clients sharing one client's connection pool,
    each posting its next sentence as soon as the last one is answered (`post(body)`: the status
    and the JSON reply of `POST /v1/translate`); returns the latencies of the calls answered with a
    translation and the wall time; the others are counted in `errors`."""
    latencies: list[float] = []
    counter = iter(range(requests))
    json_options = json_format.MessageToDict(options)     # {"beamSize": 1, "alignment": "ALIGNMENT_WORDS"}

    async def client() -> None:
        for i in counter:
            start = time.perf_counter()
            body = {"sentences": [sentences[i % len(sentences)]], "options": json_options}
            try:
                status, reply = await post(body)
            except transport_errors as e:
                errors[type(e).__name__] += 1
                continue
            if _text(status, reply) is None:
                errors[_failure(status, reply)] += 1
                continue
            latencies.append(time.perf_counter() - start)

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    return latencies, time.perf_counter() - start


async def closed_loop_http(port: int, sentences: list[str], concurrency: int, requests: int,
                           options: pb.DecodingOptions, errors: Counter) -> tuple[list[float], float]:
    """_closed_loop with one httpx.AsyncClient."""
    async with _http_client(port, concurrency) as http:

        async def post(body: dict) -> tuple[int, object]:
            return _httpx_answer(await http.post("/v1/translate", json=body))

        return await _closed_loop(post, sentences, concurrency, requests, options, errors, (httpx.HTTPError,))


async def closed_loop_aiohttp(port: int, sentences: list[str], concurrency: int, requests: int,
                              options: pb.DecodingOptions, errors: Counter) -> tuple[list[float], float]:
    """_closed_loop with one aiohttp ClientSession (a connection pool of `concurrency`)."""
    import aiohttp
    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=_TIMEOUT)
    async with aiohttp.ClientSession(f"http://127.0.0.1:{port}", connector=connector, timeout=timeout) as http:

        async def post(body: dict) -> tuple[int, object]:
            async with http.post("/v1/translate", json=body) as response:
                try:
                    return response.status, await response.json(content_type=None)
                except ValueError:
                    return response.status, None

        return await _closed_loop(post, sentences, concurrency, requests, options, errors,
                                  (aiohttp.ClientError, asyncio.TimeoutError))


def _load(server: ServerProcess, protocol: str, sentences: list[str], concurrency: int, requests: int,
          options: pb.DecodingOptions, errors: Counter, http_client: str = "aiohttp") -> tuple[list[float], float]:
    if protocol == "grpc":
        return asyncio.run(closed_loop(server.address, sentences, concurrency, requests, options, errors))
    loop = closed_loop_aiohttp if http_client == "aiohttp" else closed_loop_http
    return asyncio.run(loop(server.http_port, sentences, concurrency, requests, options, errors))


def _round(server: ServerProcess, protocol: str, sentences: list[str], concurrency: int, requests: int,
           options: pb.DecodingOptions, errors: Counter, http_client: str) -> dict:
    """One protocol's throughput run at `concurrency`, CPU on both sides of the wire."""
    server_cpu, own_cpu = server.cpu_seconds(), cpu_seconds_self()
    latencies, wall = _load(server, protocol, sentences, concurrency, requests, options, errors, http_client)
    return {"wall_s": wall, "server_cpu_s": server.cpu_seconds() - server_cpu,
            "client_cpu_s": cpu_seconds_self() - own_cpu,
            "p95_s": float(np.percentile(latencies, 95)) if latencies else None}


def _single(server: ServerProcess, protocol: str, singles: list[str], options: pb.DecodingOptions,
            errors: Counter, http_client: str) -> dict:
    latencies, _ = _load(server, protocol, singles, 1, len(singles), options, errors, http_client)
    if not latencies:
        return {"p50_1_s": None, "p90_1_s": None}
    return {"p50_1_s": float(np.percentile(latencies, 50)), "p90_1_s": float(np.percentile(latencies, 90))}


async def _texts(server: ServerProcess, sentences: list[str], options: pb.DecodingOptions) -> dict:
    """Each sentence once on each protocol, one at a time: the same text both ways?"""
    json_options = json_format.MessageToDict(options)
    differences = []
    async with grpc.aio.insecure_channel(server.address) as channel, _http_client(server.http_port, 1) as http:
        stub = pb_grpc.TranslatorStub(channel)
        for sentence in sentences:
            try:
                reply = await stub.Translate(pb.TranslateRequest(sentences=[sentence], options=options))
                by_grpc = reply.translations[0].text if reply.translations else None
            except grpc.aio.AioRpcError as e:
                by_grpc = f"<{e.code().name}>"
            try:
                answer = _httpx_answer(await http.post("/v1/translate", json={"sentences": [sentence],
                                                                            "options": json_options}))
                by_http = _text(*answer) or f"<{_failure(*answer)}>"
            except httpx.HTTPError as e:
                by_http = f"<{type(e).__name__}>"
            if by_grpc != by_http:
                differences.append({"sentence": sentence, "grpc": by_grpc, "http": by_http})
    return {"sentences": len(sentences), "same": len(sentences) - len(differences), "differences": differences[:3]}


def clients(http_client: str = "aiohttp") -> dict:
    """Who is on each end of the wire, with versions."""
    parser = "httptools" if importlib.util.find_spec("httptools") else "h11"
    if http_client == "aiohttp":
        import aiohttp
        http = f"aiohttp {aiohttp.__version__} ClientSession, HTTP/1.1 keep-alive"
    else:
        http = f"httpx {httpx.__version__} AsyncClient, HTTP/1.1 keep-alive"
    return {"grpc": f"grpc.aio (grpcio {grpc.__version__})", "http": http,
            "http_server": f"uvicorn {uvicorn.__version__}, {parser}"}


def bench_http(model: Path, sentences: list[str], repeats: int = 5, concurrency: int = 64,
               requests: int | None = None, latency_sentences: int = 200,
               settings: dict[str, str] | None = None, command: str | None = None,
               http_client: str = "aiohttp") -> dict:
    """sentences: the verses sent round-robin, `requests` calls per throughput run (default:
    each verse once); `latency_sentences` of them (evenly spaced) are sent one at a time.
    settings: server settings other than the defaults ({"intra_op_threads": "1"}, say);
    command: the command line, for the report; http_client: aiohttp or httpx."""
    if http_client not in HTTP_CLIENTS:
        raise ValueError(f"http_client must be one of {', '.join(HTTP_CLIENTS)}, not {http_client!r}")
    options = pb.DecodingOptions(beam_size=1, alignment=pb.ALIGNMENT_WORDS)
    requests = requests or len(sentences)
    singles = spread(sentences, latency_sentences)
    host = machine()
    errors = {p: Counter() for p in PROTOCOLS}
    runs = []
    env = {f"ATTNMT_{k.upper()}": v for k, v in (settings or {}).items()}
    with ServerProcess(model, env, defaults=True) as server:
        if server.http_port is None:
            raise RuntimeError("the server's HTTP front is off (ATTNMT_HTTP_PORT)")
        warm = min(concurrency, 8)
        for protocol in PROTOCOLS:         # warm-up, errors not counted: the server's and each client's
            _load(server, protocol, sentences, warm, 2 * concurrency, options, Counter(), http_client)
        same = asyncio.run(_texts(server, singles, options))
        for r in range(repeats):
            order = PROTOCOLS if r % 2 == 0 else PROTOCOLS[::-1]
            run = {p: _round(server, p, sentences, concurrency, requests, options, errors[p], http_client)
                   for p in order}
            for p in order:
                run[p].update(_single(server, p, singles, options, errors[p], http_client))
            runs.append(run)

    def median(protocol: str, key: str) -> float | None:
        values = [r[protocol][key] for r in runs if r[protocol][key] is not None]
        return statistics.median(values) if values else None

    def ms(seconds: float | None) -> float | None:
        return None if seconds is None else round(1000 * seconds, 2)

    figures = {p: {"sentences_per_s": round(requests / median(p, "wall_s"), 2),
                   "server_cpu_ms_per_sentence": round(1000 * median(p, "server_cpu_s") / requests, 2),
                   "client_cpu_ms_per_sentence": round(1000 * median(p, "client_cpu_s") / requests, 2),
                   "p95_ms": ms(median(p, "p95_s")),
                   "concurrency_1_p50_ms": ms(median(p, "p50_1_s")),
                   "concurrency_1_p90_ms": ms(median(p, "p90_1_s")),
                   "errors": dict(errors[p])} for p in PROTOCOLS}

    def ratio(key: str) -> float | None:
        grpc_value, http_value = figures["grpc"][key], figures["http"][key]
        return round(http_value / grpc_value, 2) if grpc_value and http_value is not None else None

    ratios = {"throughput": ratio("sentences_per_s"), "server_cpu_per_sentence": ratio("server_cpu_ms_per_sentence"),
              "client_cpu_per_sentence": ratio("client_cpu_ms_per_sentence"),
              "latency_p50": ratio("concurrency_1_p50_ms"), "latency_p90": ratio("concurrency_1_p90_ms")}
    return {"machine": host, "command": command, "clients": clients(http_client), "model": model.name,
            "server_settings": settings or "defaults", "sentences": len(sentences), "requests": requests,
            "latency_sentences": len(singles), "repeats": repeats, "concurrency": concurrency,
            "calls": {p: repeats * (requests + len(singles)) for p in PROTOCOLS},
            "errors": sum(sum(e.values()) for e in errors.values()), "same_text": same,
            "grpc": figures["grpc"], "http": figures["http"], "http_over_grpc": ratios, "runs": runs,
            "targets": [target(f"HTTP sentences/s at concurrency {concurrency} / gRPC", ratios["throughput"], "≥", 0.9),
                        target("HTTP p50 latency at concurrency 1 / gRPC", ratios["latency_p50"], "≤", 1.2)]}


def format_http(report: dict) -> str:
    g, h, ratio, c = report["grpc"], report["http"], report["http_over_grpc"], report["concurrency"]
    who, same = report["clients"], report["same_text"]

    def cell(value) -> str:
        return "—" if value is None else str(value)

    if report["errors"]:
        failed = "; ".join(f"{p}: " + ", ".join(f"{n} × {why}" for why, n in report[p]["errors"].items())
                           for p in ("grpc", "http") if report[p]["errors"])
        errors = f"**{report['errors']} calls failed, the figures are not comparable** ({failed})."
    else:
        errors = f"Every call answered 200/OK with a translation ({sum(report['calls'].values())} measured)."
    sanity = f"Same text on both protocols: {same['same']} of {same['sentences']} verses, one at a time"
    if same["differences"]:
        d = same["differences"][0]
        sanity += f"; **first difference**: {d['sentence']!r}: gRPC {d['grpc']!r}, HTTP {d['http']!r}"
    lines = [f"{describe(report['machine'])}; model {report['model']}; server settings {report['server_settings']}; "
             f"{report['sentences']} test verses, {report['requests']} calls per run "
             f"({report['latency_sentences']} for latency), gRPC and HTTP alternated, "
             f"rounds: {report['repeats']}, medians.",
             f"Server: `attnmt serve`, one process, gRPC and HTTP ({who['http_server']}) on loopback. "
             f"Clients in the benchmark process, {c} closed-loop, one verse per call, beam 1, word alignments: "
             f"gRPC {who['grpc']}, one channel; HTTP {who['http']}, `POST /v1/translate`, a pool of {c} "
             "connections.",
             f"Command: `{report['command'] or 'bench_http(...)'}`",
             "",
             "| | gRPC | HTTP | HTTP / gRPC |",
             "|---|---:|---:|---:|",
             f"| sentences/s at concurrency {c} | {g['sentences_per_s']} | {h['sentences_per_s']} | "
             f"{cell(ratio['throughput'])} |",
             f"| server CPU-ms per sentence | {g['server_cpu_ms_per_sentence']} | {h['server_cpu_ms_per_sentence']} | "
             f"{cell(ratio['server_cpu_per_sentence'])} |",
             f"| client CPU-ms per sentence | {g['client_cpu_ms_per_sentence']} | {h['client_cpu_ms_per_sentence']} | "
             f"{cell(ratio['client_cpu_per_sentence'])} |",
             f"| p95 ms at concurrency {c} | {cell(g['p95_ms'])} | {cell(h['p95_ms'])} | |",
             f"| p50 ms at concurrency 1 | {cell(g['concurrency_1_p50_ms'])} | {cell(h['concurrency_1_p50_ms'])} | "
             f"{cell(ratio['latency_p50'])} |",
             f"| p90 ms at concurrency 1 | {cell(g['concurrency_1_p90_ms'])} | {cell(h['concurrency_1_p90_ms'])} | "
             f"{cell(ratio['latency_p90'])} |",
             "",
             errors,
             sanity + ".",
             "",
             format_targets(report["targets"])]
    return "\n".join(lines)
