"""Serving benchmarks, and what every `attnmt bench` report shares
(`attnmt bench server`, the batching modes under load, is in bench/batching.py).

`attnmt bench serving`: the server against the offline engine in one run.
`attnmt serve` with its default settings; 64 closed-loop clients, one verse
per call, greedy, word alignments; the offline `Translator` in this process on
the same verses. Server and offline runs alternate, medians of the repeats are
reported: throughput, CPU-seconds per sentence (the server process's from
/proc, ours from getrusage), and latency at concurrency 1 against translating
one sentence at a time offline, the two in turn sentence by sentence.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import platform
import re
import resource
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path

import grpc
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc

from attnmt.service.inference.engine import Engine, EngineOptions
from attnmt.service.inference.offline import workers_and_threads
from attnmt.service.inference.search import SearchOptions
from attnmt.service.modeldir.manifest import SRC_MASK
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc
from attnmt.service.text.translator import Translator

_SERVING = re.compile(r"serving .*? on \S+:(?P<port>\d+) \(.*?\), http on \S+:(?P<http>\d+|off), "
                      r"metrics on \S+:(?P<metrics>\d+)")


# --- what every report shares -------------------------------------------------

class TimedEngine:
    """An Engine whose `encode` and `step` calls are timed (`bench offline`, `bench order`);
    everything else passes through.
    The time inside them is ONNX Runtime plus building its feeds (a dict, a few small arrays,
    and for beam rows their memory copies, `row_memory`, also reported on their own)."""

    def __init__(self, engine: Engine):
        self._engine = engine
        self.reset()

    def reset(self) -> None:
        self.encode_seconds = self.step_seconds = self.row_memory_seconds = 0.0
        # memory_positions: the memory length of each step, summed (not `positions`, which would hide the
        # engine's flag for step graphs that take each row's position: a Transformer's)
        self.steps = self.rows = self.memory_positions = 0

    def __getattr__(self, name: str):
        return getattr(self._engine, name)

    def encode(self, sources: list[list[int]], idle: bool = False):
        start = time.perf_counter()
        try:
            return self._engine.encode(sources, idle)
        finally:
            self.encode_seconds += time.perf_counter() - start

    def row_memory(self, *args):
        start = time.perf_counter()     # the step's memory feeds for beam rows (slots.RowMemory)
        try:
            return self._engine.row_memory(*args)
        finally:
            elapsed = time.perf_counter() - start
            self.step_seconds += elapsed
            self.row_memory_seconds += elapsed

    def step(self, prev_tokens, state, memory, *args, **kwargs):
        start = time.perf_counter()
        try:
            return self._engine.step(prev_tokens, state, memory, *args, **kwargs)
        finally:
            self.step_seconds += time.perf_counter() - start
            self.steps += 1
            self.rows += len(prev_tokens)
            self.memory_positions += memory[SRC_MASK].shape[1]



def machine() -> dict:
    """Where a figure was measured; the load average says whether the machine was quiet."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    import onnxruntime
    return {"date": dt.date.today().isoformat(), "arch": platform.machine(), "cpu": cpu, "cores": os.cpu_count(),
            "onnxruntime": onnxruntime.__version__, "load_average": round(os.getloadavg()[0], 2)}


def describe(m: dict) -> str:
    return (f"{m['date']}, {m['arch']} {m['cpu']}, {m['cores']} cores, onnxruntime {m['onnxruntime']}, "
            f"load average {m['load_average']} at start")


def spread(items: list, n: int | None) -> list:
    """n items evenly spaced over the list (all of them when n is None or too large),
    so a subsample keeps the mix of short and long sentences."""
    if n is None or n >= len(items):
        return list(items)
    return [items[i * len(items) // n] for i in range(n)]


def target(what: str, value: float | None, goal: str, bound: float) -> dict:
    """goal is '≥' or '≤'; `met` is None when there is nothing to compare (a skipped part)."""
    met = None if value is None else (value >= bound if goal == "≥" else value <= bound)
    return {"what": what, "value": value, "goal": f"{goal} {bound}", "met": met}


def format_targets(targets: list[dict]) -> str:
    verdict = {True: "yes", False: "**no**", None: "not measured"}
    lines = ["| target | measured | goal | met |", "|---|---:|---:|---|"]
    for t in targets:
        value = "—" if t["value"] is None else t["value"]
        lines.append(f"| {t['what']} | {value} | {t['goal']} | {verdict[t['met']]} |")
    return "\n".join(lines)


def cpu_seconds_self() -> float:
    """CPU time of this process, every thread (ONNX Runtime's included)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# --- a server in a subprocess -------------------------------------------------

class ServerProcess:
    """`attnmt serve` on free loopback ports, up once its log says it is serving
    (after its warm-up).

    settings: ATTNMT_* values on top of this environment's. With `defaults`,
    the ATTNMT_* variables of this environment are dropped first, so only the
    model, the host and the ports differ from the server's defaults.
    """

    def __init__(self, model: Path, settings: dict[str, str] | None = None, defaults: bool = False):
        env = {k: v for k, v in os.environ.items() if not (defaults and k.startswith("ATTNMT_"))}
        env.update({"ATTNMT_MODELS": str(model), "ATTNMT_HOST": "127.0.0.1", "ATTNMT_PORT": "0",
                    "ATTNMT_METRICS_HOST": "127.0.0.1", "ATTNMT_METRICS_PORT": "0",
                    "ATTNMT_HTTP_HOST": "127.0.0.1", "ATTNMT_HTTP_PORT": "0", **(settings or {})})
        self.proc = subprocess.Popen([sys.executable, "-m", "attnmt.service.cli", "serve"], env=env,
                                     stderr=subprocess.PIPE, text=True)
        log = []
        for line in self.proc.stderr:
            log.append(line)
            match = _SERVING.search(line)
            if match:
                self.port, self.metrics_port = int(match["port"]), int(match["metrics"])
                self.http_port = None if match["http"] == "off" else int(match["http"])
                # keep reading, so a chatty server never blocks on a full pipe
                threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()
                return
        self.proc.wait()
        raise RuntimeError(f"attnmt serve exited with {self.proc.returncode} before serving:\n"
                           + "".join(log[-20:]))

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def scrape(self, name: str) -> float:
        """The value of an unlabelled sample (0 when absent)."""
        return scrape(self.metrics_port, name)

    def cpu_seconds(self) -> float:
        """utime + stime of the server process, all threads (/proc/PID/stat fields 14 and 15)."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()    # after "(comm)", which may hold spaces
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self, timeout: float = 60) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()

    def __enter__(self) -> "ServerProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def scrape(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return 0.0


async def closed_loop(address: str, sentences: list[str], concurrency: int, requests: int,
                      options: pb.DecodingOptions, errors: Counter | None = None) -> tuple[list[float], float]:
    """`concurrency` clients on one channel, each sending its next sentence as soon as
    the last one is answered; returns every call's latency and the wall time.
    With `errors`, a call that fails or answers without a translation is counted there
    (by status code) and left out of the latencies, instead of raising."""
    latencies: list[float] = []
    counter = iter(range(requests))
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.TranslatorStub(channel)

        async def client() -> None:
            for i in counter:
                start = time.perf_counter()
                request = pb.TranslateRequest(sentences=[sentences[i % len(sentences)]], options=options)
                if errors is None:
                    await stub.Translate(request)
                else:
                    try:
                        reply = await stub.Translate(request)
                    except grpc.aio.AioRpcError as e:
                        errors[e.code().name] += 1
                        continue
                    if not (reply.translations and reply.translations[0].text):
                        errors["OK without a translation"] += 1
                        continue
                latencies.append(time.perf_counter() - start)

        start = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(concurrency)))
        return latencies, time.perf_counter() - start


# --- attnmt bench serving -----------------------------------------------------

def _offline(translator: Translator, texts: list[str]) -> None:
    """Greedy, with the word alignment and its links computed: the work the server
    does for ALIGNMENT_WORDS, less protobuf."""
    for translation in translator.translate(texts, SearchOptions()):
        translation.best.hard_alignment()


def _offline_throughput(translator: Translator, texts: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU-seconds of this process) for one batch run."""
    cpu, start = cpu_seconds_self(), time.perf_counter()
    _offline(translator, texts)
    return time.perf_counter() - start, cpu_seconds_self() - cpu


async def interleaved_latencies(translator: Translator, address: str, texts: list[str],
                                options: pb.DecodingOptions) -> tuple[list[float], list[float], list[float]]:
    """One sentence at a time, each translated offline and then by the server (one client),
    in turn: (offline latencies, server latencies, health checks). In turn sentence by
    sentence, not in blocks, because this shared machine's speed drifts from one block to the
    next by more than the difference being measured (one sentence offline took 20 to 30 ms
    from one block of 150 to the next, 2026-11-29). After each sentence, the same offline call
    again and then a gRPC health check: the round trip of a call that does no work, after the
    same idle time, what any gRPC call to this server costs on this machine. Idle threads wake
    slowly on a virtual machine: a bare grpc.aio server's health check took 0.68 ms back to
    back and 1.80 ms after 20 ms idle (AMD EPYC, cpuidle haltpoll, 2026-12-01)."""
    offline, served, health = [], [], []
    async with grpc.aio.insecure_channel(address) as channel:
        stub, checks = pb_grpc.TranslatorStub(channel), health_pb2_grpc.HealthStub(channel)
        for text in texts:
            start = time.perf_counter()
            _offline(translator, [text])
            offline.append(time.perf_counter() - start)
            start = time.perf_counter()
            await stub.Translate(pb.TranslateRequest(sentences=[text], options=options))
            served.append(time.perf_counter() - start)
            _offline(translator, [text])
            start = time.perf_counter()
            await checks.Check(health_pb2.HealthCheckRequest())
            health.append(time.perf_counter() - start)
    return offline, served, health


def bench_serving(model: Path, sentences: list[str], repeats: int = 5, concurrency: int = 64,
                  latency_sentences: int = 200, settings: dict[str, str] | None = None) -> dict:
    """sentences: the verses, each sent once per throughput run; `latency_sentences`
    of them (evenly spaced) are translated one at a time for the latency runs."""
    options = pb.DecodingOptions(beam_size=1, alignment=pb.ALIGNMENT_WORDS)
    singles = spread(sentences, latency_sentences)
    host = machine()
    # the offline engine computes as the server does: same device and precision. Throughput is
    # held against offline decoding as `attnmt translate` runs it (its decode workers), one
    # sentence's latency against the fastest single call (one batch on every thread).
    chosen = settings or {}
    device = chosen.get("device", "cpu")
    workers, threads = workers_and_threads(device)
    computed = dict(device=device, precision=chosen.get("precision", "f32"))
    translator = Translator(Engine(model, EngineOptions(**computed, intra_op_threads=threads)), workers=workers)
    single = Translator(Engine(model, EngineOptions(**computed))) if workers > 1 else translator
    runs = []
    # Default settings, unless `settings` ({"intra_op_threads": "1"}, say) changes some.
    env = {f"ATTNMT_{k.upper()}": v for k, v in (settings or {}).items()}
    with ServerProcess(model, env, defaults=True) as server:
        _offline(translator, sentences[:8])                                                  # warm-up all
        _offline(single, sentences[:8])
        asyncio.run(closed_loop(server.address, sentences, min(concurrency, 8), 2 * concurrency, options))
        for _ in range(repeats):
            run: dict = {}
            run["offline_s"], run["offline_cpu_s"] = _offline_throughput(translator, sentences)

            server_cpu, own_cpu = server.cpu_seconds(), cpu_seconds_self()
            steps, rows = server.scrape("attnmt_batch_rows_count"), server.scrape("attnmt_batch_rows_sum")
            latencies, run["server_s"] = asyncio.run(
                closed_loop(server.address, sentences, concurrency, len(sentences), options))
            run["server_cpu_s"] = server.cpu_seconds() - server_cpu
            run["client_cpu_s"] = cpu_seconds_self() - own_cpu
            steps = server.scrape("attnmt_batch_rows_count") - steps
            run["server_rows_per_step"] = (server.scrape("attnmt_batch_rows_sum") - rows) / max(steps, 1)
            run["server_p50_s"], run["server_p95_s"], run["server_p99_s"] = \
                (float(x) for x in np.percentile(latencies, [50, 95, 99]))

            offline, served, health = asyncio.run(interleaved_latencies(single, server.address, singles, options))
            run["offline_single_s"], run["server_single_s"] = statistics.median(offline), statistics.median(served)
            run["health_check_s"] = statistics.median(health)
            runs.append(run)

    def median(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    n = len(sentences)
    offline = {"sentences_per_s": n / median("offline_s"), "cpu_ms_per_sentence": 1000 * median("offline_cpu_s") / n,
               "single_sentence_ms": 1000 * median("offline_single_s")}
    served = {"sentences_per_s": n / median("server_s"), "cpu_ms_per_sentence": 1000 * median("server_cpu_s") / n,
              "client_cpu_ms_per_sentence": 1000 * median("client_cpu_s") / n,
              "p50_ms": 1000 * median("server_p50_s"), "p95_ms": 1000 * median("server_p95_s"),
              "p99_ms": 1000 * median("server_p99_s"), "mean_rows_per_step": median("server_rows_per_step"),
              "concurrency_1_p50_ms": 1000 * median("server_single_s"),
              "health_check_p50_ms": 1000 * median("health_check_s")}
    # Each run's ratio is of figures measured back to back, so the machine's drift from one run
    # to the next (as large as the differences measured) cancels within it: the ratios are the
    # medians of the runs' ratios, and `ranges` their range.
    per_run = {"throughput": [r["offline_s"] / r["server_s"] for r in runs],
               "cpu_per_sentence": [r["server_cpu_s"] / r["offline_cpu_s"] if r["offline_cpu_s"] else float("nan")
                                    for r in runs],
               "latency": [r["server_single_s"] / r["offline_single_s"] for r in runs],
               # the server's own share of one call: its latency less a call that does no work
               "latency_beyond_transport": [(r["server_single_s"] - r["health_check_s"]) / r["offline_single_s"]
                                            for r in runs],
               "tail": [r["server_p99_s"] / r["server_p50_s"] for r in runs]}
    ratios = {k: statistics.median(v) for k, v in per_run.items()}
    ranges = {k: [round(min(v), 2), round(max(v), 2)] for k, v in per_run.items()}
    offline, served, ratios = (_rounded(d, 2) for d in (offline, served, ratios))
    return {"machine": host, "model": translator.name, "server_settings": settings or "defaults",
            "workers_and_threads": workers, "sentences": n, "latency_sentences": len(singles),
            "repeats": repeats, "concurrency": concurrency, "offline": offline, "server": served,
            "server_over_offline": ratios, "ranges": ranges, "runs": runs,
            "targets": [target(f"server sentences/s at concurrency {concurrency} / offline greedy",
                               ratios["throughput"], "≥", 0.85),
                        target(f"server p99 / p50 at concurrency {concurrency}", ratios["tail"], "≤", 3.0),
                        target("server p50 latency at concurrency 1 / offline one sentence at a time",
                               ratios["latency"], "≤", 1.1),
                        target("server CPU time per sentence / offline", ratios["cpu_per_sentence"], "≤", 1.3)]}


def _rounded(figures: dict, digits: int) -> dict:
    return {k: round(v, digits) for k, v in figures.items()}


def format_serving(report: dict) -> str:
    off, srv, ratio, ranges = report["offline"], report["server"], report["server_over_offline"], report["ranges"]
    c = report["concurrency"]

    def ratio_of(key: str) -> str:
        low, high = ranges[key]
        return f"{ratio[key]} ({low}–{high})" if report["repeats"] > 1 else str(ratio[key])

    lines = [f"{describe(report['machine'])}; model {report['model']}; server settings {report['server_settings']}; "
             f"{report['sentences']} test verses "
             f"({report['latency_sentences']} for latency), runs alternated, {report['repeats']} of each, "
             "medians (a ratio: the median of the runs' ratios, their range in brackets).",
             f"Server: `attnmt serve`, default settings, loopback; {c} closed-loop grpc.aio clients in the "
             "benchmark process, one verse per call, beam 1, word alignments. Offline: `Translator.translate` "
             f"in-process as `attnmt translate` decodes ({report.get('workers_and_threads', 1)} decode workers; one "
             "sentence at a time: one worker on every thread), greedy, word alignments computed.",
             "",
             "| | offline | server | server / offline |",
             "|---|---:|---:|---:|",
             f"| sentences/s (server at concurrency {c}) | {off['sentences_per_s']} | {srv['sentences_per_s']} | "
             f"{ratio_of('throughput')} |",
             f"| CPU-ms per sentence | {off['cpu_ms_per_sentence']} | {srv['cpu_ms_per_sentence']} "
             f"(+ client {srv['client_cpu_ms_per_sentence']}) | {ratio_of('cpu_per_sentence')} |",
             f"| p50 ms, one sentence at a time, offline and served in turn (server at concurrency 1) | "
             f"{off['single_sentence_ms']} | "
             f"{srv['concurrency_1_p50_ms']} | {ratio_of('latency')} |",
             f"| the same less a gRPC health check's round trip, after the same idle time "
             f"({srv['health_check_p50_ms']} ms) | | | {ratio_of('latency_beyond_transport')} |",
             f"| p50 / p95 / p99 ms at concurrency {c} | | {srv['p50_ms']} / {srv['p95_ms']} / {srv['p99_ms']} | |",
             f"| mean rows per decoder step at concurrency {c} | | {srv['mean_rows_per_step']} | |",
             "",
             format_targets(report["targets"])]
    return "\n".join(lines)
