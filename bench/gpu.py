"""`attnmt bench gpu`: the serving engine on an NVIDIA GPU (docs/gpu.md).

For each model, in one run on one machine:
- placement: which provider ran each node of the encoder, step and slot graphs (ONNX Runtime's
  own profile of one translation, greedy and beam, on the device path);
- agreement: the CUDA answers against the CPU's (texts, scores, α), and the device path (IO
  binding: memory and state stay on the GPU) against the host path (numpy in and out each step);
- throughput: offline sentences/s, greedy and beam 5, at 64 and 256 rows a step, device path
  and host path alternated, best of `repeats`;
- host↔device bytes a decoder step, summed from the shapes of what crosses: on the host path
  every feed and every output of every graph run, on the device path the numpy feeds and the
  outputs bound to the host.

Without a usable GPU it refuses (`--device cpu` runs the same code on the CPU provider, to check
the command itself on a machine without one)."""

from __future__ import annotations

import itertools
import json
import subprocess
import tempfile
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import onnxruntime as ort

from attnmt.bench.loadtest import describe, machine
from attnmt.service.inference.engine import Engine, EngineOptions
from attnmt.service.inference.search import SearchOptions
from attnmt.service.text.translator import Translator

SEARCHES = {"greedy": SearchOptions(beam_size=1), "beam5": SearchOptions(beam_size=5)}
# Nodes that ONNX Runtime's CUDA provider leaves to the CPU on purpose: shape arithmetic on a
# few int64 values, which would cost a copy each way on the GPU (GetCpuPreferredNodes).
SMALL_OUTPUT_BYTES = 1024


def gpu_name() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip() or out.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unknown ({e})"


def placement(model: Path, device: str, texts: list[str]) -> dict:
    """Every node each graph ran in one greedy and one beam translation, by provider, from ONNX
    Runtime's profile; the nodes on the CPU provider listed with their largest output."""
    import attnmt.service.inference.sessions as sessions

    folder = Path(tempfile.mkdtemp(prefix="attnmt-profile-"))
    original_options, original_open = sessions.ort.SessionOptions, sessions.Sessions._open_session
    opened: list[tuple[str, ort.InferenceSession]] = []
    numbers = itertools.count()

    def profiled() -> ort.SessionOptions:
        so = original_options()
        so.enable_profiling = True
        # a prefix per session: ONNX Runtime names the file by prefix and the second it started, so
        # two sessions opened within one second would write into one file
        so.profile_file_prefix = str(folder / f"graph{next(numbers)}")
        return so

    def recorded(self, path, graph, spinning, threads):
        session = original_open(self, path, graph, spinning, threads)
        opened.append((graph, session))
        return session

    sessions.ort.SessionOptions, sessions.Sessions._open_session = profiled, recorded
    try:
        engine = Engine(model, EngineOptions(device=device, io_binding=True))
        translator = Translator(engine)
        for options in SEARCHES.values():
            translator.translate(texts, options)
        # the slot graphs (device-side gathers) open outside _open_session
        opened += [(name, session) for name, session in engine.sessions.kept_open().items()
                   if all(session is not seen for _, seen in opened)]
        files = [(graph, session.end_profiling()) for graph, session in opened]
    finally:
        sessions.ort.SessionOptions, sessions.Sessions._open_session = original_options, original_open
    graphs: dict[str, dict] = {}
    for graph, file in files:
        events = json.loads(Path(file).read_text() or "[]")
        providers: Counter = Counter()
        on_cpu: dict[str, dict] = {}
        for e in events:
            args = e.get("args", {})
            if e.get("cat") != "Node" or "provider" not in args or not e["name"].endswith("_kernel_time"):
                continue
            node = e["name"][:-len("_kernel_time")]
            providers[args["provider"]] += 1
            if args["provider"] == "CPUExecutionProvider":
                seen = on_cpu.setdefault(node, {"op": args.get("op_name"), "output_bytes": 0})
                seen["output_bytes"] = max(seen["output_bytes"], int(args.get("output_size", 0)))
        while graph in graphs:       # a graph opened twice (the spinning step graph)
            graph += "'"
        graphs[graph] = {"runs_by_provider": dict(providers), "on_cpu": on_cpu,
                                   "large_on_cpu": sorted(n for n, v in on_cpu.items()
                                                          if v["output_bytes"] > SMALL_OUTPUT_BYTES)}
    return graphs


def agreement(a: Translator, b: Translator, texts: list[str]) -> dict:
    """How far b's answers are from a's: identical best texts and n-best lists; the largest score
    and α differences over hypotheses with the same text; and where the texts at a rank differ,
    the largest gap between the two engines' scores at that rank (a tie flipped by rounding
    keeps it near 0: two hypotheses within it of each other, ranked the other way)."""
    report = {}
    for label, options in {**SEARCHES, "beam5_nbest5": SearchOptions(beam_size=5, n_best=5)}.items():
        xs, ys = a.translate(texts, options), b.translate(texts, options)
        same_best = sum(x.best.text == y.best.text for x, y in zip(xs, ys))
        same_list = sum([h.text for h in x.hypotheses] == [h.text for h in y.hypotheses] for x, y in zip(xs, ys))
        score, alpha, flip_gap = 0.0, 0.0, 0.0
        differ, every = [], []
        for text, x, y in zip(texts, xs, ys):
            for hx, hy in zip(x.hypotheses, y.hypotheses):
                if hx.text == hy.text:
                    score = max(score, abs(hx.score - hy.score))
                    alpha = max(alpha, float(np.abs(hx.alignment - hy.alignment).max()))
                else:
                    flip_gap = max(flip_gap, abs(hx.score - hy.score))
            if x.best.text != y.best.text:
                every.append((text, x.best.text, y.best.text))
            if [h.text for h in x.hypotheses] != [h.text for h in y.hypotheses] and len(differ) < 5:
                differ.append({"source": text, "a": [(h.text, h.score) for h in x.hypotheses],
                               "b": [(h.text, h.score) for h in y.hypotheses]})
        report[label] = {"sentences": len(texts), "same_best": same_best, "same_nbest": same_list,
                         "max_score_diff": score, "max_alpha_diff": alpha,
                         "max_score_gap_where_texts_differ": flip_gap, "differences": differ,
                         "all_differences": every}
    report["greedy"]["divergence_margins"] = divergence_margins(a, texts, report["greedy"]["all_differences"])
    for entry in report.values():
        del entry["all_differences"]
    forced = [(t, x.best.text) for t, x in zip(texts, a.translate(texts, SEARCHES["greedy"]))]
    xs, ys = a.align(forced), b.align(forced)
    report["align"] = {"pairs": len(forced),
                       "max_score_diff": max(abs(x.best.score - y.best.score) for x, y in zip(xs, ys)),
                       "max_alpha_diff": max(float(np.abs(x.best.alignment - y.best.alignment).max())
                                             for x, y in zip(xs, ys))}
    return report


def divergence_margins(a: Translator, texts: list[str], differences: list[tuple[str, str, str]]) -> list[dict]:
    """For greedy outputs that differ: the first piece where they part, and a's log-probability
    margin between the two pieces there (each engine took the piece it scored higher, so a margin
    within the engines' numeric difference is a near-tie that rounding flipped)."""
    margins = []
    for source, x, y in differences:
        hx, hy = (t.best for t in a.align([(source, x), (source, y)]))
        i = next((i for i, (p, q) in enumerate(zip(hx.target_tokens, hy.target_tokens)) if p != q),
                 min(len(hx.target_tokens), len(hy.target_tokens)) - 1)
        margins.append({"source": source, "position": i, "pieces": [hx.target_tokens[i], hy.target_tokens[i]],
                        "margin": abs(hx.token_log_probs[i] - hy.token_log_probs[i])})
    return margins


@contextmanager
def counted_bytes(engine: Engine):
    """Bytes that cross between host and device while the block runs, and decoder steps."""
    tally = {"bytes": 0, "steps": 0}
    run, on_device, upload, step = ort.InferenceSession.run, Engine.run_on_device, Engine.upload, Engine.step

    def nbytes(values) -> int:
        return sum(v.nbytes for v in values if isinstance(v, np.ndarray))

    def run_counted(self, names, feeds, *args, **kwargs):
        outputs = run(self, names, feeds, *args, **kwargs)
        tally["bytes"] += nbytes(feeds.values()) + nbytes(outputs)
        return outputs

    def on_device_counted(self, session, feeds, outputs, to_host=frozenset()):
        values = on_device(self, session, feeds, outputs, to_host)
        tally["bytes"] += nbytes(feeds.values())
        tally["bytes"] += sum(int(np.prod(v.shape())) * v.numpy().itemsize
                              for name, v in zip(outputs, values) if name in to_host)
        return values

    def upload_counted(self, *arrays):
        tally["bytes"] += nbytes(arrays)
        return upload(self, *arrays)

    def step_counted(self, *args, **kwargs):
        tally["steps"] += 1
        return step(self, *args, **kwargs)

    ort.InferenceSession.run, Engine.run_on_device, Engine.upload, Engine.step = (
        run_counted, on_device_counted, upload_counted, step_counted)
    try:
        yield tally
    finally:
        ort.InferenceSession.run, Engine.run_on_device, Engine.upload, Engine.step = run, on_device, upload, step


def throughput(paths: dict[str, Translator], texts: list[str], rows: tuple[int, ...], repeats: int) -> list[dict]:
    """Sentences/s offline for each search × rows × path, the paths alternated, best of `repeats`;
    with the bytes a step that crossed in the first repeat."""
    results = []
    for search, options in SEARCHES.items():
        for max_rows in rows:
            times: dict[str, list[float]] = {p: [] for p in paths}
            per_step: dict[str, float] = {}
            for translator in paths.values():     # warm-up: the memory of this size allocated once
                translator.translate(texts[:max_rows], options, max_rows=max_rows)
            for i in range(repeats):
                for p, translator in paths.items():
                    if i == 0:
                        with counted_bytes(translator.engine) as tally:
                            start = time.perf_counter()
                            translator.translate(texts, options, max_rows=max_rows)
                            times[p].append(time.perf_counter() - start)
                        per_step[p] = tally["bytes"] / max(tally["steps"], 1)
                        per_step[p + "_steps"] = tally["steps"]
                    else:
                        start = time.perf_counter()
                        translator.translate(texts, options, max_rows=max_rows)
                        times[p].append(time.perf_counter() - start)
            row = {"search": search, "rows": max_rows, "sentences": len(texts)}
            for p in paths:
                row[f"{p}_sentences_per_s"] = len(texts) / min(times[p])
                row[f"{p}_bytes_per_step"] = per_step[p]
                row[f"{p}_steps"] = per_step[p + "_steps"]
            results.append(row)
    return results


def bench_gpu(models: list[Path], texts: list[str], rows: tuple[int, ...] = (64, 256), repeats: int = 2,
              agree_sentences: int = 64, device: str = "cuda") -> dict:
    report: dict = {"machine": machine(), "gpu": gpu_name(), "device": device,
                    "available_providers": ort.get_available_providers(), "models": {}}
    for model in models:
        cpu = Translator(Engine(model, EngineOptions(device="cpu")))
        on_device = Translator(Engine(model, EngineOptions(device=device, io_binding=True)))
        on_host = Translator(Engine(model, EngineOptions(device=device, io_binding=False)))
        if device == "cuda" and on_device.engine.provider != "CUDAExecutionProvider":
            raise RuntimeError(f"{model}: ONNX Runtime gave {on_device.engine.provider}, not CUDA")
        sample = texts[:agree_sentences]
        entry = {"provider": on_device.engine.provider,
                 "placement": placement(model, device, sample[:8]),
                 "cuda_vs_cpu": agreement(cpu, on_device, sample),
                 "device_vs_host_path": agreement(on_host, on_device, sample),
                 "throughput": throughput({"device_path": on_device, "host_path": on_host}, texts, rows, repeats)}
        report["models"][on_device.name] = entry
        print(json.dumps({on_device.name: {k: v for k, v in entry.items() if k != "placement"}}, default=str),
              flush=True)
    return report


def format_gpu(report: dict) -> str:
    lines = [f"{describe(report['machine'])}; GPU {report['gpu']}; device {report['device']}", ""]
    for name, entry in report["models"].items():
        lines.append(f"## {name} ({entry['provider']})")
        for graph, seen in entry["placement"].items():
            large = seen["large_on_cpu"]
            named = ", ".join(large[:8]) + (f" and {len(large) - 8} more" if len(large) > 8 else "")
            lines.append(f"- {graph}: {seen['runs_by_provider']}; on the CPU with outputs over "
                         f"{SMALL_OUTPUT_BYTES} bytes: {named or 'none'}")
        for what in ("cuda_vs_cpu", "device_vs_host_path"):
            for label, a in entry[what].items():
                if label == "align":
                    lines.append(f"- {what} align: max |Δscore| {a['max_score_diff']:.2e}, "
                                 f"max |Δα| {a['max_alpha_diff']:.2e} on {a['pairs']} pairs")
                else:
                    lines.append(f"- {what} {label}: {a['same_best']}/{a['sentences']} same best, "
                                 f"{a['same_nbest']} same n-best (score gap where they differ "
                                 f"{a['max_score_gap_where_texts_differ']:.2e}), "
                                 f"max |Δscore| {a['max_score_diff']:.2e}, "
                                 f"max |Δα| {a['max_alpha_diff']:.2e}")
        lines += ["", "| search | rows | device path sent/s | host path sent/s | ratio | bytes/step device | "
                      "bytes/step host |", "|---|---:|---:|---:|---:|---:|---:|"]
        for r in entry["throughput"]:
            lines.append(f"| {r['search']} | {r['rows']} | {r['device_path_sentences_per_s']:.1f} | "
                         f"{r['host_path_sentences_per_s']:.1f} | "
                         f"{r['device_path_sentences_per_s'] / r['host_path_sentences_per_s']:.2f} | "
                         f"{r['device_path_bytes_per_step']:,.0f} | {r['host_path_bytes_per_step']:,.0f} |")
        lines.append("")
    return "\n".join(lines)
