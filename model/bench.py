"""`attnmt bench engine`: PyTorch eager vs the ONNX Runtime engine, greedy
decoding, same weights (the model directory's checkpoint.pt holds exactly what
its graphs hold), same sentences, one process, batch 1 and batch 64.

The two runs alternate (torch, ORT, torch, ORT, ...) and the best of the
repeats is kept, so a busy neighbour on a shared machine hurts both alike.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import time
from pathlib import Path

import torch

from attnmt.service.decoding import Search, SearchOptions, decode_all
from attnmt.service.engine import Engine, EngineOptions

from .data import corpus_files, read_parallel
from .search import translate_ids
from .train import load_model


def _torch_run(model, sources: list[list[int]], batch: int) -> tuple[float, int]:
    start = time.perf_counter()
    outputs = translate_ids(model, sources, batch_size=batch)
    return time.perf_counter() - start, sum(len(o) + 1 for o in outputs)


def _ort_run(engine: Engine, sources: list[list[int]], batch: int) -> tuple[float, int]:
    start = time.perf_counter()
    searches = [Search(s + [engine.eos_id], SearchOptions()) for s in sources]
    decode_all(engine, searches, max_rows=batch)
    return time.perf_counter() - start, sum(len(s.best()[0].tokens) for s in searches)


def bench_engine(model_dir: Path, data_dir: Path, sentences: int = 200, repeats: int = 3,
                 batches: tuple[int, ...] = (1, 64), threads: int = 0) -> dict:
    engine = Engine(model_dir, EngineOptions(intra_op_threads=threads))
    model = load_model(model_dir / "checkpoint.pt")
    if threads:
        torch.set_num_threads(threads)
    m = engine.manifest
    src, tgt = corpus_files(data_dir, "test", m.source_language, m.target_language)
    texts = [s for s, _ in read_parallel(src, tgt)][:sentences]
    sources = [engine.tokenizer.encode(t) for t in texts]

    # The two must agree before their speeds mean anything.
    reference = translate_ids(model, sources[:32], batch_size=32)
    check = [Search(s + [engine.eos_id]) for s in sources[:32]]
    decode_all(engine, check, max_rows=32)
    same = sum(r == [t for t in c.best()[0].tokens if t != engine.eos_id] for r, c in zip(reference, check))

    rows = []
    for batch in batches:
        n = len(sources) if batch > 1 else min(len(sources), 100)
        subset = sources[:n]
        best = {"pytorch": (float("inf"), 0), "onnxruntime": (float("inf"), 0)}
        _ort_run(engine, subset[:8], batch)            # warm-up both
        _torch_run(model, subset[:8], batch)
        for _ in range(repeats):
            for name, run in (("pytorch", lambda: _torch_run(model, subset, batch)),
                              ("onnxruntime", lambda: _ort_run(engine, subset, batch))):
                seconds, tokens = run()
                if seconds < best[name][0]:
                    best[name] = (seconds, tokens)
        row = {"batch": batch, "sentences": n}
        for name, (seconds, tokens) in best.items():
            row[name] = {"seconds": round(seconds, 3), "sentences_per_s": round(n / seconds, 1),
                         "tokens_per_s": round(tokens / seconds, 1)}
        row["speedup"] = round(row["onnxruntime"]["sentences_per_s"] / row["pytorch"]["sentences_per_s"], 2)
        rows.append(row)
    return {"date": dt.date.today().isoformat(), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "model": m.name, "provider": engine.provider, "torch_threads": torch.get_num_threads(),
            "greedy_agreement": f"{same}/32", "results": rows}


def format_table(report: dict) -> str:
    lines = [f"{report['date']}, {report['machine']}, model {report['model']}, greedy, "
             f"agreement {report['greedy_agreement']}",
             "| batch | PyTorch eager sent/s | ORT engine sent/s | PyTorch tok/s | ORT tok/s | ORT / PyTorch |",
             "|---:|---:|---:|---:|---:|---:|"]
    for r in report["results"]:
        lines.append(f"| {r['batch']} | {r['pytorch']['sentences_per_s']} | {r['onnxruntime']['sentences_per_s']} | "
                     f"{r['pytorch']['tokens_per_s']} | {r['onnxruntime']['tokens_per_s']} | {r['speedup']}× |")
    return "\n".join(lines)


def main(model_dir: Path, data_dir: Path, sentences: int, repeats: int, threads: int, out: Path | None) -> int:
    report = bench_engine(model_dir, data_dir, sentences, repeats, threads=threads)
    print(format_table(report))
    if out:
        out.write_text(json.dumps(report, indent=2) + "\n")
    return 0
