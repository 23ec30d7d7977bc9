"""`attnmt bench order`: what a server's mix of sentences costs the decoder itself, with
no gRPC, protobuf or client.

The offline engine decodes longest first (`decode_all`): each encoder call holds
sentences of similar length, and a step's rows attend over memories of similar length.
A server under closed-loop load gets sentences in random order and lets them join a few
at a time as others finish. This benchmark decodes the same test sentences both ways,
in-process, runs alternated, and reports wall and CPU time, the encoder's and the
steps' time, the steps, the rows per step and the attention memory's mean length. The
CPU ratio is a floor under `bench serving`'s CPU ratio (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import numpy as np

from attnmt.bench.loadtest import TimedEngine, cpu_seconds_self, describe, machine, spread
from attnmt.bench.reports import show
from attnmt.corpus.splits import read_split
from attnmt.service.inference.batch import DecodeBatch
from attnmt.service.inference.engine import Engine, EngineOptions
from attnmt.service.inference.offline import decode_all
from attnmt.service.inference.search import Search, SearchOptions
from attnmt.service.modeldir.manifest import load_manifest
from attnmt.service.text.translator import Translator

ORDERS = ("longest first", "random")


def server_order(engine, searches: list[Search], joiners: int, rows: int) -> None:
    """Decode `searches` in the given order the way the server's worker admits them: at most
    `rows` rows, waiting sentences join `joiners` at a time while the batch is running (all
    that fit when it is empty or the queue is shorter)."""
    pending, batch = list(searches), DecodeBatch(engine)
    while pending or len(batch):
        free = rows - batch.n_rows
        if pending and (free >= joiners or not len(batch) or (free and len(pending) < joiners)):
            joining, pending = pending[:free], pending[free:]
            batch.add(joining)
        batch.step()


def run(model_dir: Path, texts: list[str], repeats: int, joiners: int, rows: int, seed: int = 1) -> dict:
    engine = TimedEngine(Engine(model_dir, EngineOptions()))
    translator = Translator(engine, max_tokens=10_000)
    translator.translate(texts[:8])                                   # warm-up
    runs: dict[str, list[dict]] = {order: [] for order in ORDERS}
    for _ in range(repeats):
        for order in ORDERS:
            searches = [translator.search(t, SearchOptions()) for t in texts]
            engine.reset()
            cpu, start = cpu_seconds_self(), time.perf_counter()
            if order == "random":
                random.Random(seed).shuffle(searches)
                server_order(engine, searches, joiners, rows)
            else:
                decode_all(engine, searches, rows)
            runs[order].append({"seconds": time.perf_counter() - start, "cpu_s": cpu_seconds_self() - cpu,
                                "encode_s": engine.encode_seconds, "step_s": engine.step_seconds,
                                "steps": engine.steps,
                                "mean_rows": engine.rows / engine.steps,
                                "mean_memory_length": engine.memory_positions / engine.steps})
    medians = {order: {key: round(float(np.median([r[key] for r in timings])), 5) for key in timings[0]}
               for order, timings in runs.items()}
    first, second = (medians[o] for o in ORDERS)
    ratio = {"wall": round(second["seconds"] / first["seconds"], 3), "cpu": round(second["cpu_s"] / first["cpu_s"], 3)}
    return {"machine": machine(), "sentences": len(texts), "joiners": joiners, "rows": rows, "repeats": repeats,
            "orders": medians, "random_over_longest_first": ratio}


def format_report(report: dict) -> str:
    rows = [("wall seconds", "seconds"), ("CPU seconds", "cpu_s"), ("encoder seconds", "encode_s"),
            ("step seconds (ONNX Runtime and feeds)", "step_s"), ("steps", "steps"), ("mean rows a step", "mean_rows"),
            ("mean attention memory length", "mean_memory_length")]
    orders = report["orders"]
    lines = [describe(report["machine"]) + f"; {report['sentences']} test sentences, greedy, runs alternated, "
             f"{report['repeats']} of each, medians.",
             f"Random order: sentences join {report['joiners']} at a time, at most {report['rows']} rows "
             "(the server's defaults), as the decode worker admits them; no gRPC.", "",
             "| | longest first (offline) | random (a server's mix) | random / longest first |", "|---|---:|---:|---:|"]
    ratio = report["random_over_longest_first"]
    for label, key in rows:
        a, b = (f"{orders[o][key]:,.{0 if key == 'steps' else 1 if key.startswith('mean') else 3}f}" for o in ORDERS)
        extra = {"seconds": ratio["wall"], "cpu_s": ratio["cpu"]}.get(key, "")
        lines.append(f"| {label} | {a} | {b} | {extra} |")
    return "\n".join(lines)


def cmd_bench_order(args: argparse.Namespace) -> int:
    from attnmt.service.server.settings import Settings
    defaults = Settings.model_fields          # the server's, for the order its worker admits sentences in
    m = load_manifest(args.model, verify=False)
    texts = spread([s for s, _ in read_split(args.data, "test", m.source_language, m.target_language)], args.sentences)
    report = run(args.model, texts, args.repeats, args.joiners or defaults["min_joiners"].default,
                 args.rows or defaults["max_batch_rows"].default)
    show(report, format_report(report), args.json)
    return 0

