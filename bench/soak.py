"""`attnmt bench soak` (`make soak`, not in CI): a long run at half capacity with a
mixed load, watching the server's resident memory and every call's outcome.

A real `attnmt serve` with default settings on loopback. First its capacity is
measured (64 closed-loop callers, one sentence a call, greedy); then calls arrive
as a Poisson process at half that rate for `duration` seconds, drawn from a mix:
translations with varied options, forced alignments, streams of four sentences,
invalid requests, calls cancelled after a few ms and calls with a 1 ms deadline.
Each kind has the outcomes it may end with (a cancelled call may also finish OK);
anything else is an unexpected error. The server's VmRSS is sampled every few
seconds; growth is measured from the first sample after a tenth of the run (the
allocator's warm-up) to the mean of the last tenth.

Targets: resident memory growth < 5 %, zero unexpected errors.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from collections import Counter
from pathlib import Path

import grpc

from attnmt.bench.loadtest import ServerProcess, closed_loop, describe, format_targets, machine, target
from attnmt.bench.overload import closed_loop_overload
from attnmt.bench.reports import show
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc

# kind: (share of calls, outcomes it may end with)
MIX = {
    "translate": (0.55, {"OK"}),
    "translate_beam": (0.10, {"OK"}),
    "align": (0.10, {"OK"}),
    "stream": (0.05, {"OK"}),
    "invalid": (0.08, {"INVALID_ARGUMENT"}),
    "cancelled": (0.06, {"CANCELLED", "OK"}),
    "deadline_1ms": (0.06, {"DEADLINE_EXCEEDED", "OK"}),
}


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


async def one_call(stub, kind: str, sentence: str, rng: random.Random) -> str:
    """One call of `kind`; its outcome as a status code name (streams: OK only when every
    item came back once)."""
    alignments = (pb.ALIGNMENT_NONE, pb.ALIGNMENT_WORDS, pb.ALIGNMENT_HARD, pb.ALIGNMENT_SOFT)
    try:
        if kind in ("translate", "translate_beam"):
            beam = 1 if kind == "translate" else rng.choice((2, 4))
            options = pb.DecodingOptions(beam_size=beam, n_best=min(beam, 2), alignment=rng.choice(alignments))
            await stub.Translate(pb.TranslateRequest(sentences=[sentence], options=options), timeout=60)
        elif kind == "align":
            await stub.Align(pb.AlignRequest(source=sentence, target=sentence), timeout=60)
        elif kind == "stream":
            items = [pb.StreamRequest(id=str(i), sentence=sentence) for i in range(4)]
            ids = [r.id async for r in stub.TranslateStream(iter(items), timeout=60)]
            if sorted(ids) != ["0", "1", "2", "3"]:
                return "STREAM_IDS_WRONG"
        elif kind == "invalid":
            await stub.Translate(pb.TranslateRequest(sentences=[]), timeout=60)
        elif kind == "cancelled":
            call = stub.Translate(pb.TranslateRequest(sentences=[sentence]), timeout=60)
            await asyncio.sleep(rng.uniform(0, 0.01))
            call.cancel()
            await call
        elif kind == "deadline_1ms":
            await stub.Translate(pb.TranslateRequest(sentences=[sentence]), timeout=0.001)
    except asyncio.CancelledError:
        return "CANCELLED"
    except grpc.aio.AioRpcError as e:
        return e.code().name
    return "OK"


async def mixed_load(address: str, sentences: list[str], rate: float, duration: float, seed: int = 0,
                     sample=None, sample_every: float = 5.0) -> Counter:
    """Poisson arrivals at `rate` calls/s for `duration` s; `sample()` is called every
    `sample_every` s. Returns Counter((kind, outcome))."""
    rng = random.Random(seed)
    kinds, weights = list(MIX), [share for share, _ in MIX.values()]
    outcomes: Counter = Counter()
    tasks: set[asyncio.Task] = set()
    loop = asyncio.get_running_loop()
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.TranslatorStub(channel)

        async def run(kind: str, sentence: str) -> None:
            outcomes[kind, await one_call(stub, kind, sentence, rng)] += 1

        start = next_sample = loop.time()
        arrival = start
        while arrival < start + duration:
            arrival += rng.expovariate(rate)
            await asyncio.sleep(max(0.0, arrival - loop.time()))
            if sample is not None and loop.time() >= next_sample:
                sample()
                next_sample += sample_every
            task = asyncio.create_task(run(rng.choices(kinds, weights)[0], rng.choice(sentences)))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks)
    if sample is not None:
        sample()
    return outcomes


def bench_soak(model: Path, sentences: list[str], duration: float = 600, capacity_seconds: float = 20,
               sample_every: float = 5.0) -> dict:
    host = machine()
    options = pb.DecodingOptions(beam_size=1, alignment=pb.ALIGNMENT_WORDS)
    with ServerProcess(model, defaults=True) as server:
        asyncio.run(closed_loop(server.address, sentences, 8, 32, options))                      # warm-up
        started = time.perf_counter()
        capacity = asyncio.run(closed_loop_overload(server.address, sentences, 64, capacity_seconds, "none",
                                                    1))["goodput_per_s"]
        rate = capacity / 2
        samples: list[tuple[float, int]] = []
        t0 = time.monotonic()
        outcomes = asyncio.run(mixed_load(server.address, sentences, rate, duration, sample_every=sample_every,
                                          sample=lambda: samples.append((time.monotonic() - t0,
                                                                         rss_bytes(server.proc.pid)))))
        total_seconds = time.perf_counter() - started
    settled = [rss for t, rss in samples if t >= duration / 10] or [samples[-1][1]]
    tail = [rss for t, rss in samples if t >= duration * 0.9] or [samples[-1][1]]
    growth = (sum(tail) / len(tail) - settled[0]) / settled[0]
    unexpected = {f"{kind} {code}": n for (kind, code), n in outcomes.items() if code not in MIX[kind][1]}
    by_kind: dict[str, dict[str, int]] = {}
    for (kind, code), n in sorted(outcomes.items()):
        by_kind.setdefault(kind, {})[code] = n
    return {"machine": host, "duration_s": duration, "wall_s": round(total_seconds, 1),
            "capacity_sentences_per_s": round(capacity, 1), "rate_calls_per_s": round(rate, 1),
            "calls": sum(outcomes.values()), "outcomes": by_kind, "unexpected": unexpected,
            "rss_mb": {"first": round(samples[0][1] / 2**20, 1), "settled": round(settled[0] / 2**20, 1),
                       "last": round(samples[-1][1] / 2**20, 1), "max": round(max(r for _, r in samples) / 2**20, 1)},
            "rss_samples": [(round(t, 1), rss) for t, rss in samples],
            "rss_growth_pct": round(100 * growth, 2),
            "targets": [target("resident memory growth %", round(100 * growth, 2), "≤", 5),
                        target("unexpected errors", sum(unexpected.values()), "≤", 0)]}


def format_soak(report: dict) -> str:
    rss = report["rss_mb"]
    lines = [f"{describe(report['machine'])}; `attnmt serve` with default settings; capacity "
             f"{report['capacity_sentences_per_s']} sentences/s (64 callers, greedy), mixed load at "
             f"{report['rate_calls_per_s']} calls/s (Poisson) for {report['duration_s']:g} s: "
             f"{report['calls']} calls.", "",
             "| kind | share | outcomes |", "|---|---:|---|"]
    for kind, codes in report["outcomes"].items():
        lines.append(f"| {kind} | {MIX[kind][0]:.0%} | " + ", ".join(f"{c} {n}" for c, n in codes.items()) + " |")
    lines += ["", f"Resident memory: {rss['first']} MB at start, {rss['settled']} MB after a tenth of the run, "
              f"{rss['last']} MB at the end (max {rss['max']} MB): growth {report['rss_growth_pct']} %.",
              f"Unexpected: {report['unexpected'] or 'none'}.", "", format_targets(report["targets"])]
    return "\n".join(lines)


def cmd_bench_soak(args: argparse.Namespace) -> int:
    from attnmt.bench.offline import source_sentences
    report = bench_soak(args.model, source_sentences(args.model, args.data, args.sentences), args.duration,
                        args.capacity_seconds, args.sample_every)
    show(report, format_soak(report), args.json)
    met = all(t["met"] for t in report["targets"])
    return 0 if met else 1
