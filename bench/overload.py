"""`attnmt bench overload`: far more callers than the server can queue.

A real `attnmt serve` with default settings except `max_queue` (64) on loopback;
closed-loop grpc.aio callers in this process, one test sentence per call (beam 1,
word alignments, as `bench serving`), spread over `channels` connections, or with
`one_channel` all on one channel, as a client that multiplexes its calls is written
(a per-connection stream limit would turn most of such a client's calls into
UNAVAILABLE). Three runs of `duration` seconds each:

- baseline: 64 callers, which never overflow the queue: the goodput to keep;
- at once: 512 callers that retry a refusal immediately (the worst case);
- retry info: 512 callers that wait as the refusal's RetryInfo says, jittered
  x0.5-1.5 (what the bundled client does).

Reported per run: goodput (answered sentences/s) and its ratio to the baseline,
refusals/s, refusal latency p50/p99 as the callers see it (and p99 without the
first second, when all callers arrive together), the server's CPU time
(/proc) per answer and per refusal. The per-refusal figure subtracts the
baseline's CPU per answer times the answers, so it is what refusing cost on top of
translating. Also per run, the unexpected outcomes: any status but OK and
RESOURCE_EXHAUSTED with RetryInfo, counted by code with the first message of each.
Targets: goodput >= 0.7 x baseline in both overload runs, refusal p99 < 50 ms;
no unexpected outcome in any run.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from pathlib import Path

import grpc
import numpy as np

from attnmt.bench.loadtest import ServerProcess, cpu_seconds_self, describe, format_targets, machine, target
from attnmt.bench.reports import show
from attnmt.service.client import retry_delay
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc


def runs(callers: int = 512, baseline_callers: int = 64) -> tuple:
    """(name, callers, retry) of the three runs."""
    return (("baseline", baseline_callers, "none"), ("at_once", callers, "at_once"),
            ("retry_info", callers, "retry_info"))


async def closed_loop_overload(address: str, sentences: list[str], callers: int, duration: float,
                               retry: str, channels: int, one_channel: bool = False) -> dict:
    """`callers` callers, each sending its next sentence when the last call ended, for
    `duration` seconds; calls in flight at the end are waited for. retry: 'none' (a
    refusal is counted and the caller goes on), 'at_once' or 'retry_info' (how long a
    refused caller waits before its next call). one_channel: every caller on one channel
    with gRPC's default options, whatever `channels` says."""
    options = pb.DecodingOptions(beam_size=1, alignment=pb.ALIGNMENT_WORDS)
    answered, refusals, settled, errors, examples = 0, [], [], {}, {}
    first_call = time.perf_counter()
    loop = asyncio.get_running_loop()
    # A local subchannel pool gives each channel its own connection: gRPC otherwise shares one
    # connection between channels to the same address.
    connections = [grpc.aio.insecure_channel(address)] if one_channel else \
        [grpc.aio.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])
         for _ in range(max(1, channels))]
    stubs = [pb_grpc.TranslatorStub(c) for c in connections]
    start = loop.time()
    stop_at = start + duration

    async def caller(i: int) -> None:
        nonlocal answered
        stub, n = stubs[i % len(stubs)], i
        while loop.time() < stop_at:
            request = pb.TranslateRequest(sentences=[sentences[n % len(sentences)]], options=options)
            began = time.perf_counter()
            try:
                await stub.Translate(request, timeout=60)
                answered += 1
                n += callers
            except grpc.aio.AioRpcError as e:
                delay = retry_delay(e, 0) if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED else None
                if delay is None:                # anything but the admission's refusal is unexpected
                    code = e.code().name + (" without RetryInfo" if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                                            else "")
                    errors[code] = errors.get(code, 0) + 1
                    examples.setdefault(code, e.details())     # the first of each code, to explain it
                    continue
                refusals.append(time.perf_counter() - began)
                if began - first_call >= 1.0:
                    settled.append(refusals[-1])      # after the callers' first second together
                if retry == "retry_info":
                    await asyncio.sleep(delay * random.uniform(0.5, 1.5))
    try:
        await asyncio.gather(*(caller(i) for i in range(callers)))
    finally:
        for c in connections:
            await c.close()
    elapsed = loop.time() - start
    ms = np.array(refusals) * 1000
    return {"callers": callers, "retry": retry, "seconds": round(elapsed, 2), "answered": answered,
            "goodput_per_s": round(answered / elapsed, 1), "refusals": len(refusals),
            "refusals_per_s": round(len(refusals) / elapsed, 1),
            "refusal_p50_ms": round(float(np.percentile(ms, 50)), 2) if len(ms) else None,
            "refusal_p99_ms": round(float(np.percentile(ms, 99)), 2) if len(ms) else None,
            # the same without the first second, when every caller arrives at once (the burst
            # alone costs its size times the server's CPU per refusal)
            "refusal_p99_after_1s_ms": round(float(np.percentile(settled, 99)) * 1000, 2) if settled else None,
            "errors": errors, "unexpected": sum(errors.values()), "error_examples": examples}


def bench_overload(model: Path, sentences: list[str], duration: float = 30, max_queue: int = 64,
                   channels: int = 8, plan: tuple = runs(), settings: dict[str, str] | None = None,
                   one_channel: bool = False) -> dict:
    host = machine()
    env = {"ATTNMT_MAX_QUEUE": str(max_queue), **{f"ATTNMT_{k.upper()}": v for k, v in (settings or {}).items()}}
    results = {}
    with ServerProcess(model, env, defaults=True) as server:
        asyncio.run(closed_loop_overload(server.address, sentences, 8, min(duration, 2), "none", 1))   # warm-up
        for name, callers, retry in plan:
            server_cpu, own_cpu = server.cpu_seconds(), cpu_seconds_self()
            run = asyncio.run(closed_loop_overload(server.address, sentences, callers, duration, retry, channels,
                                                   one_channel))
            run["server_cpu_s"] = round(server.cpu_seconds() - server_cpu, 2)
            run["client_cpu_s"] = round(cpu_seconds_self() - own_cpu, 2)
            results[name] = run
    base = results.get("baseline")
    cpu_per_answer = base["server_cpu_s"] / base["answered"] if base and base["answered"] else None
    for run in results.values():
        run["server_cpu_ms_per_answer"] = round(1000 * run["server_cpu_s"] / run["answered"], 2) \
            if run["answered"] else None
        if base:
            run["goodput_ratio"] = round(run["goodput_per_s"] / base["goodput_per_s"], 3) \
                if base["goodput_per_s"] else None
        if run["refusals"] and cpu_per_answer is not None:
            extra = run["server_cpu_s"] - cpu_per_answer * run["answered"]
            run["server_cpu_ms_per_refusal"] = round(1000 * max(extra, 0.0) / run["refusals"], 3)
    targets = []
    for name in ("at_once", "retry_info"):
        run = results.get(name)
        if run is None:
            continue
        targets.append(target(f"goodput, {name.replace('_', ' ')} / baseline", run.get("goodput_ratio"), "≥", 0.7))
        targets.append(target(f"refusal p99 ms, {name.replace('_', ' ')}", run["refusal_p99_ms"], "≤", 50))
    for name, run in results.items():
        targets.append(target(f"unexpected outcomes, {name.replace('_', ' ')}", run["unexpected"], "≤", 0))
    return {"machine": host, "max_queue": max_queue, "channels": 1 if one_channel else channels,
            "one_channel": one_channel, "duration_s": duration,
            "sentences": len(sentences), "server_settings": settings or "defaults", "runs": results,
            "targets": targets}


def format_overload(report: dict) -> str:
    lines = [f"{describe(report['machine'])}; `attnmt serve` with max_queue {report['max_queue']}, "
             f"settings {report['server_settings']}; callers on "
             + ("one channel" if report.get("one_channel") else f"{report['channels']} connections")
             + f", {report['duration_s']:g} s a run, one sentence a call, beam 1, word alignments.",
             "Unexpected: any status but OK and RESOURCE_EXHAUSTED with RetryInfo.", "",
             "| run | callers | answered/s | / baseline | refusals/s | refusal p50 ms | refusal p99 ms "
             "| p99 after the first second | server CPU ms / answer | server CPU ms / refusal | unexpected |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, r in report["runs"].items():
        cells = [name, r["callers"], r["goodput_per_s"], r.get("goodput_ratio"), r["refusals_per_s"],
                 r["refusal_p50_ms"], r["refusal_p99_ms"], r.get("refusal_p99_after_1s_ms"),
                 r["server_cpu_ms_per_answer"],
                 r.get("server_cpu_ms_per_refusal"),
                 ", ".join(f"{n} {code}" for code, n in r["errors"].items()) or 0]
        lines.append("| " + " | ".join("—" if c is None else str(c) for c in cells) + " |")
    examples = [f"- {name}, {code}: {detail}" for name, r in report["runs"].items()
                for code, detail in r.get("error_examples", {}).items()]
    if examples:
        lines += ["", "First unexpected outcome of each code:", *examples]
    return "\n".join(lines + ["", format_targets(report["targets"])])


def cmd_bench_overload(args: argparse.Namespace) -> int:
    from attnmt.bench.offline import source_sentences
    settings = dict(item.split("=", 1) for item in args.set or [])
    report = bench_overload(args.model, source_sentences(args.model, args.data, args.sentences), args.duration,
                            args.max_queue, args.channels, runs(args.callers, args.baseline_callers), settings,
                            args.one_channel)
    show(report, format_overload(report), args.json)
    return 0
