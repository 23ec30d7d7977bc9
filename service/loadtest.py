"""`attnmt bench server`: continuous (iteration-level) vs request-level batching
under the same closed-loop load.

For each mode a real `attnmt serve` starts on a free loopback port; C concurrent
clients (one asyncio loop, grpc.aio) each send one test sentence per request,
back to back, until N requests are done. Reported: throughput, latency
percentiles, and the server's own mean batch rows per step.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import platform
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import grpc
import numpy as np

from .stubs import translator_pb2 as pb
from .stubs import translator_pb2_grpc as pb_grpc

_SERVING = re.compile(r"serving .* on \S+:(?P<port>\d+) .*metrics on \S+:(?P<metrics>\d+)")


def start_server(model: Path, batching: str, extra_env: dict[str, str]) -> tuple[subprocess.Popen, int, int]:
    env = {**os.environ, "ATTNMT_MODELS": str(model), "ATTNMT_HOST": "127.0.0.1", "ATTNMT_PORT": "0",
           "ATTNMT_METRICS_HOST": "127.0.0.1", "ATTNMT_METRICS_PORT": "0", "ATTNMT_BATCHING": batching, **extra_env}
    proc = subprocess.Popen([sys.executable, "-m", "attnmt.service.cli", "serve"], env=env,
                            stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        match = _SERVING.search(line)
        if match:
            # keep reading, so a chatty server never blocks on a full pipe
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
            return proc, int(match["port"]), int(match["metrics"])
    raise RuntimeError(f"server ({batching}) did not start")


def scrape(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return 0.0


async def closed_loop(address: str, sentences: list[str], concurrency: int, requests: int,
                      options: pb.DecodingOptions) -> tuple[list[float], float]:
    latencies: list[float] = []
    counter = iter(range(requests))
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.TranslatorStub(channel)

        async def client() -> None:
            for i in counter:
                start = time.perf_counter()
                await stub.Translate(pb.TranslateRequest(sentences=[sentences[i % len(sentences)]], options=options))
                latencies.append(time.perf_counter() - start)

        start = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(concurrency)))
        return latencies, time.perf_counter() - start


def bench_server(model: Path, sentences: list[str], concurrency: int = 16, requests: int = 300,
                 beam: int = 1, modes: tuple[str, ...] = ("continuous", "request")) -> dict:
    options = pb.DecodingOptions(beam_size=beam, alignment=pb.ALIGNMENT_WORDS)
    rows = []
    for mode in modes:
        proc, port, metrics_port = start_server(model, mode, {})
        try:
            address = f"127.0.0.1:{port}"
            asyncio.run(closed_loop(address, sentences, min(concurrency, 4), 2 * concurrency, options))  # warm-up
            steps0 = scrape(metrics_port, "attnmt_batch_rows_count")
            rows0 = scrape(metrics_port, "attnmt_batch_rows_sum")
            latencies, seconds = asyncio.run(closed_loop(address, sentences, concurrency, requests, options))
            steps = scrape(metrics_port, "attnmt_batch_rows_count") - steps0
            mean_rows = (scrape(metrics_port, "attnmt_batch_rows_sum") - rows0) / max(steps, 1)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
        ms = np.array(latencies) * 1000
        rows.append({"batching": mode, "requests": requests, "concurrency": concurrency,
                     "sentences_per_s": round(requests / seconds, 1),
                     "p50_ms": round(float(np.percentile(ms, 50)), 1), "p95_ms": round(float(np.percentile(ms, 95)), 1),
                     "p99_ms": round(float(np.percentile(ms, 99)), 1), "mean_rows_per_step": round(mean_rows, 1),
                     "steps": int(steps)})
    return {"date": dt.date.today().isoformat(), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "beam": beam, "results": rows}


def format_table(report: dict) -> str:
    lines = [f"{report['date']}, {report['machine']}, beam {report['beam']}, one sentence per request, "
             "client and server on the same machine",
             "| batching | concurrency | sentences/s | p50 ms | p95 ms | p99 ms | mean rows/step |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in report["results"]:
        lines.append(f"| {r['batching']} | {r['concurrency']} | {r['sentences_per_s']} | {r['p50_ms']} | "
                     f"{r['p95_ms']} | {r['p99_ms']} | {r['mean_rows_per_step']} |")
    return "\n".join(lines)
