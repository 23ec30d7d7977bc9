"""`attnmt bench server`: continuous (iteration-level) against request-level batching,
under closed-loop and open-loop load, as a table, JSON and a plot.

For each batching mode a real `attnmt serve` starts on free loopback ports
(`ATTNMT_BATCHING=request` first, because its capacity sets the open-loop rates).
Every call is one test sentence; the sentences are the test split in a seeded
shuffle, so lengths are mixed and both modes see the same order.

- Closed loop: C clients (C in the concurrency sweep) each send their next call as
  soon as the last is answered, until N calls are done.
- Open loop: calls arrive as a Poisson process at each rate whatever the answers,
  so a saturated server builds a queue instead of slowing the clients (the latency
  a user sees). The arrival trace of a rate comes from one seed, identical for both
  modes. Rates are given, or fractions of request-level capacity (its best
  closed-loop sentences/s). With `traces` > 1 each rate is replayed with that many
  seeded traces: with a few hundred calls a point, p99 is a handful of long
  sentences, and whether they arrive in a burst moves it more than the batching mode
  does (docs/benchmarks.md), so the target is reported as the median over traces.

Per point: sentences/s answered, target tokens/s, p50/p90/p99 of answered calls,
the server's mean rows per decoder step (from its metrics), refusals
(RESOURCE_EXHAUSTED) and other errors. The target: at 70 % of
request-level capacity, iteration-level p99 is at most 0.6x request-level's.
`continuous_settings` are server settings for the continuous mode only (a step
budget, say), compared against request-level batching at its own settings.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
import numpy as np

from attnmt.bench.loadtest import ServerProcess, describe, format_targets, machine, target
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc

MODES = ("request", "continuous")
TARGET_LOAD, TARGET_RATIO = 0.7, 0.6


@dataclass
class Call:
    seconds: float
    code: str                     # a grpc.StatusCode name
    target_tokens: int = 0


class Load:
    """Calls to one server on one channel: each `send` translates one sentence."""

    def __init__(self, stub: pb_grpc.TranslatorStub, sentences: list[str], options: pb.DecodingOptions,
                 timeout: float):
        self.stub, self.sentences, self.options, self.timeout = stub, sentences, options, timeout

    async def send(self, i: int) -> Call:
        start = time.perf_counter()
        request = pb.TranslateRequest(sentences=[self.sentences[i % len(self.sentences)]], options=self.options)
        try:
            response = await self.stub.Translate(request, timeout=self.timeout)
        except grpc.aio.AioRpcError as e:
            return Call(time.perf_counter() - start, e.code().name)
        tokens = sum(len(t.hypotheses[0].target_tokens) for t in response.translations if t.hypotheses)
        return Call(time.perf_counter() - start, "OK", tokens)

    async def closed(self, concurrency: int, requests: int) -> tuple[list[Call], float]:
        calls: list[Call] = []
        numbers = iter(range(requests))

        async def client() -> None:
            for i in numbers:
                calls.append(await self.send(i))

        start = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(concurrency)))
        return calls, time.perf_counter() - start

    async def open(self, arrivals: list[float]) -> tuple[list[Call], float]:
        """One call at each arrival time (seconds from the start), however many are unanswered."""
        start = time.perf_counter()

        async def at(i: int, when: float) -> Call:
            await asyncio.sleep(max(0.0, start + when - time.perf_counter()))
            return await self.send(i)

        calls = await asyncio.gather(*(at(i, t) for i, t in enumerate(arrivals)))
        return list(calls), time.perf_counter() - start


def poisson_arrivals(rate: float, n: int, seed: int) -> list[float]:
    """n arrival times of a Poisson process of `rate` per second: exponential gaps, seeded."""
    gaps = np.random.default_rng(seed).exponential(1.0 / rate, size=n)
    return np.cumsum(gaps).tolist()


def summarise(calls: list[Call], seconds: float) -> dict:
    ok = [c for c in calls if c.code == "OK"]
    ms = np.array([c.seconds for c in ok]) * 1000 if ok else np.array([np.nan])
    refused = sum(c.code == "RESOURCE_EXHAUSTED" for c in calls)
    return {"calls": len(calls), "seconds": round(seconds, 3), "sentences_per_s": round(len(ok) / seconds, 2),
            "target_tokens_per_s": round(sum(c.target_tokens for c in ok) / seconds, 1),
            **{f"p{q}_ms": round(float(np.percentile(ms, q)), 2) for q in (50, 90, 99)},
            "refused": refused, "errors": len(calls) - len(ok) - refused}


def _measure(server: ServerProcess, run) -> tuple[list[Call], float, float]:
    """Run one load point; also the server's mean decoder rows per step over it."""
    steps, rows = server.scrape("attnmt_batch_rows_count"), server.scrape("attnmt_batch_rows_sum")
    calls, seconds = asyncio.run(run())
    steps = server.scrape("attnmt_batch_rows_count") - steps
    return calls, seconds, (server.scrape("attnmt_batch_rows_sum") - rows) / max(steps, 1)


def _runner(server: ServerProcess, sentences: list[str], options: pb.DecodingOptions, timeout: float):
    """`run(body)` makes a coroutine function that calls `body(Load)` on a fresh channel (each
    point runs in its own event loop)."""
    def run(body):
        async def go():
            async with grpc.aio.insecure_channel(server.address) as channel:
                return await body(Load(pb_grpc.TranslatorStub(channel), sentences, options, timeout))
        return go
    return run


def bench_server(model: Path, sentences: list[str], concurrencies: tuple[int, ...] = (1, 4, 16, 64, 128),
                 loads: tuple[float, ...] = (0.5, 0.7, 0.9), rates: tuple[float, ...] | None = None,
                 requests: int = 400, beam: int = 1, seed: int = 1, timeout: float = 60,
                 settings: dict[str, str] | None = None, traces: int = 1,
                 continuous_settings: dict[str, str] | None = None) -> dict:
    """Closed loop at each concurrency, then open loop at each rate (given, or `loads` x the
    request-level capacity) and each of `traces` arrival traces, for request-level then
    continuous batching."""
    order = list(sentences)
    random.Random(seed).shuffle(order)              # mixed lengths, the same order for both modes
    options = pb.DecodingOptions(beam_size=beam, alignment=pb.ALIGNMENT_WORDS)
    host = machine()
    points: list[dict] = []
    capacity = None
    for mode in MODES:
        own = (continuous_settings or {}) if mode == "continuous" else {}
        env = {**{f"ATTNMT_{k.upper()}": v for k, v in {**(settings or {}), **own}.items()}, "ATTNMT_BATCHING": mode}
        with ServerProcess(model, env) as server:
            run = _runner(server, order, options, timeout)
            asyncio.run(run(lambda load: load.closed(4, 16))())                         # warm-up
            for c in concurrencies:
                calls, seconds, rows = _measure(server, run(lambda load, c=c: load.closed(c, requests)))
                points.append({"batching": mode, "loop": "closed", "concurrency": c,
                               **summarise(calls, seconds), "mean_rows_per_step": round(rows, 2)})
            if capacity is None:                    # request-level, measured first
                capacity = max(p["sentences_per_s"] for p in points if p["batching"] == mode)
            offered = list(rates) if rates else [round(f * capacity, 2) for f in loads]
            for k, rate in enumerate(offered):
                for trace in range(traces):
                    # the same trace for both modes; trace 0 is the seed + k of single-trace runs
                    arrivals = poisson_arrivals(rate, requests, seed + k + 1000 * trace)
                    calls, seconds, rows = _measure(server, run(lambda load, a=arrivals: load.open(a)))
                    points.append({"batching": mode, "loop": "open", "offered_per_s": rate, "trace": trace,
                                   "load": round(rate / capacity, 3) if capacity else None,
                                   **summarise(calls, seconds), "mean_rows_per_step": round(rows, 2)})
    return {"machine": host, "model": str(model), "beam": beam, "seed": seed, "requests_per_point": requests,
            "sentences": len(order), "request_level_capacity_per_s": capacity, "traces": traces,
            "settings": settings or {}, "continuous_settings": continuous_settings or {}, "points": points,
            "targets": [_target(points)]}


def _target(points: list[dict]) -> dict:
    """Iteration-level p99 over request-level p99 at the open-loop point nearest 70 % load: per
    arrival trace, and their median as the measured value."""
    what = f"continuous p99 / request-level p99, open loop at {TARGET_LOAD:.0%} of request-level capacity"
    opened = [p for p in points if p["loop"] == "open" and p["load"] is not None]
    if not opened:
        return target(what, None, "≤", TARGET_RATIO)
    nearest = min({p["load"] for p in opened}, key=lambda x: abs(x - TARGET_LOAD))
    p99 = {(p["batching"], p.get("trace", 0)): p["p99_ms"] for p in opened if p["load"] == nearest}
    ratios = [p99[("continuous", trace)] / p99[("request", trace)]
              for trace in sorted({trace for _, trace in p99})
              if p99.get(("request", trace)) and ("continuous", trace) in p99]
    ratios = [r for r in ratios if r == r]                    # NaN: no call of a point was answered
    if nearest != TARGET_LOAD:
        what += f" (nearest measured: {nearest:.0%})"
    if len(ratios) > 1:
        what += f"; median of {len(ratios)} arrival traces: {', '.join(f'{r:.3f}' for r in ratios)}"
    result = target(what, round(float(np.median(ratios)), 3) if ratios else None, "≤", TARGET_RATIO)
    return {**result, "per_trace": [round(r, 3) for r in ratios]}


def format_bench_server(report: dict) -> str:
    lines = [f"{describe(report['machine'])}; beam {report['beam']}, one sentence per call, "
             f"{report['requests_per_point']} calls per point, seed {report['seed']}; "
             f"request-level capacity {report['request_level_capacity_per_s']} sentences/s",
             "", "| batching | loop | concurrency / offered per s | sentences/s | target tokens/s | p50 ms | p90 ms | "
             "p99 ms | rows/step | refused | errors |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    if report.get("continuous_settings"):
        lines[0] += "; continuous mode only: " + ", ".join(f"{k}={v}" for k, v in report["continuous_settings"].items())
    for p in report["points"]:
        x = p["concurrency"] if p["loop"] == "closed" else f"{p['offered_per_s']} ({p['load']:.0%})"
        if report.get("traces", 1) > 1 and p["loop"] == "open":
            x += f" trace {p['trace']}"
        lines.append(f"| {p['batching']} | {p['loop']} | {x} | {p['sentences_per_s']} | {p['target_tokens_per_s']} | "
                     f"{p['p50_ms']} | {p['p90_ms']} | {p['p99_ms']} | {p['mean_rows_per_step']} | {p['refused']} | "
                     f"{p['errors']} |")
    return "\n".join(lines + ["", format_targets(report["targets"])])


def plot_bench_server(report: dict, path: Path) -> None:
    """Throughput and p99 against concurrency (closed loop) and offered load (open loop),
    both batching modes on the same axes."""
    try:
        import matplotlib
    except ImportError as e:
        raise SystemExit("plotting needs matplotlib: pip install 'attnmt[train]' or matplotlib") from e
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 7.5))
    style = {"continuous": dict(color="tab:blue", marker="o"), "request": dict(color="tab:orange", marker="s")}
    for row, (loop, x_key, x_label) in enumerate((
            ("closed", "concurrency", "concurrent clients (closed loop)"),
            ("open", "offered_per_s", "offered sentences/s (open loop, Poisson)"))):
        for mode in MODES:
            by_x: dict[float, list[dict]] = {}            # several arrival traces: their median
            for p in report["points"]:
                if p["loop"] == loop and p["batching"] == mode:
                    by_x.setdefault(p[x_key], []).append(p)
            xs = sorted(by_x)
            axes[row][0].plot(xs, [np.median([p["sentences_per_s"] for p in by_x[x]]) for x in xs],
                              label=f"{mode}-level" if mode == "request" else "continuous (iteration-level)",
                              **style[mode])
            axes[row][1].plot(xs, [np.median([p["p99_ms"] for p in by_x[x]]) for x in xs], **style[mode])
        axes[row][0].set_ylabel("answered sentences/s")
        axes[row][1].set_ylabel("p99 latency, ms")
        ticks = sorted({p[x_key] for p in report["points"] if p["loop"] == loop})
        for ax in axes[row]:
            ax.set_xlabel(x_label)
            ax.grid(alpha=0.3)
            if loop == "closed" and ticks:
                ax.set_xscale("log", base=2)
                ax.set_xticks(ticks, [str(t) for t in ticks])
        if loop == "open" and ticks:
            capacity = report["request_level_capacity_per_s"]
            axes[row][0].plot(ticks, ticks, color="grey", linestyle="--", linewidth=1, label="offered")
            for ax in axes[row]:
                ax.axvline(TARGET_LOAD * capacity, color="grey", linestyle=":", linewidth=1)
        axes[row][1].set_yscale("log")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"attnmt bench server: beam {report['beam']}, {report['machine']['date']}, "
                 f"{report['machine']['cores']} cores (dotted: 70 % of request-level capacity)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
