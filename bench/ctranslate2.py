"""`attnmt bench ctranslate2`: attnmt's engine against CTranslate2 on the same Transformer
weights, in one process, runs alternated.

- Agreement: greedy translations of the test sentences from both engines in fp32, the share
  identical, and each difference with the position where the two first part (a near tie
  between two tokens, or a length limit, explains most).
- Speed: sentences/s offline, greedy and beam 5, batch 64 and batch 1, CTranslate2 in fp32
  and int8 against attnmt in fp32 (attnmt has no int8 Transformer yet), the same threads for
  both (`intra_threads` = ONNX Runtime's intra-op threads); best of `repeats`. CTranslate2's
  compute type and its CPU backend (`ctranslate2.get_supported_compute_types`, the ISA it
  dispatches to) are written beside the figures.

The exported attnmt model directory (`attnmt export`) and the CTranslate2 directories
(`attnmt export --format ctranslate2`) must come from the same checkpoint.
"""

from __future__ import annotations

import time
from pathlib import Path

from attnmt.bench.loadtest import describe, machine
from attnmt.service.inference.engine import Engine, EngineOptions
from attnmt.service.inference.search import SearchOptions
from attnmt.service.text.translator import Translator

# CTranslate2 takes a fixed maximum length; attnmt's limit is per sentence
# (max_length_ratio x source + max_length_extra). Both are set high enough never to cut a
# translation of the test sentences, so the limits do not decide the comparison.
MAX_DECODING_LENGTH = 256


def _ctranslate2(directory: Path, threads: int):
    import ctranslate2
    return ctranslate2.Translator(str(directory), device="cpu", inter_threads=1, intra_threads=threads)


def _source_pieces(translator: Translator, sources: list[str]) -> list[list[str]]:
    """Each source as the pieces attnmt's encoder reads (normalised, placeholders protected),
    `</s>` last: CTranslate2 adds none."""
    greedy = SearchOptions()
    return [translator.engine.tokenizer.pieces(translator.search(s, greedy).source) for s in sources]


def _limit(translator: Translator) -> int:
    """The longest translation both engines may write: ours is also capped by the model's
    position table (max_positions), CTranslate2's table is its own."""
    return min(MAX_DECODING_LENGTH, translator.max_positions or MAX_DECODING_LENGTH)


def _first_difference(a: list[str], b: list[str]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def agreement(model_dir: Path, ct2_dir: Path, sources: list[str], threads: int = 1) -> dict:
    """Greedy pieces from both engines (fp32): the share identical, and the differences."""
    translator = Translator(Engine(model_dir, EngineOptions(intra_op_threads=threads)), max_tokens=10_000)
    limit = _limit(translator)
    options = SearchOptions(beam_size=1, max_length_ratio=10.0, max_length_extra=limit,
                            max_target_tokens=limit).validate()
    ours = [t.best.target_tokens for t in translator.translate(sources, options)]
    ours = [pieces[:-1] if pieces and pieces[-1] == "</s>" else pieces for pieces in ours]
    results = _ctranslate2(ct2_dir, threads).translate_batch(_source_pieces(translator, sources), beam_size=1,
                                                             max_decoding_length=limit)
    theirs = [r.hypotheses[0] for r in results]
    differences = [{"sentence": i, "source": sources[i], "first_difference": _first_difference(a, b),
                    "attnmt": " ".join(a), "ctranslate2": " ".join(b)}
                   for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    return {"sentences": len(sources), "identical": len(sources) - len(differences),
            "identical_share": round(1 - len(differences) / max(len(sources), 1), 4), "differences": differences}


def _best_rate(run, sentences: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return sentences / best


def bench_ctranslate2(model_dir: Path, ct2_dirs: dict[str, Path], sources: list[str], repeats: int = 3,
                      threads: int = 2, batches: tuple[int, ...] = (64, 1), beams: tuple[int, ...] = (1, 5)) -> dict:
    """sentences/s of each engine and precision, greedy and beam, per batch size; the runs of
    one setting alternate between the engines."""
    import ctranslate2

    translator = Translator(Engine(model_dir, EngineOptions(intra_op_threads=threads)), max_tokens=10_000)
    pieces = _source_pieces(translator, sources)
    engines = {name: _ctranslate2(path, threads) for name, path in ct2_dirs.items()}
    rows = []
    for beam in beams:
        options = SearchOptions(beam_size=beam, max_length_ratio=10.0, max_length_extra=MAX_DECODING_LENGTH).validate()
        for batch in batches:
            chunks = [sources[i:i + batch] for i in range(0, len(sources), batch)]
            piece_chunks = [pieces[i:i + batch] for i in range(0, len(pieces), batch)]
            runs = {"attnmt fp32": lambda chunks=chunks, options=options: [translator.translate(c, options)
                                                                        for c in chunks]}
            for name, engine in engines.items():
                runs[f"ctranslate2 {name}"] = (
                    lambda engine=engine, piece_chunks=piece_chunks, beam=beam, batch=batch:
                    [engine.translate_batch(c, beam_size=beam, max_batch_size=batch,
                                            max_decoding_length=_limit(translator)) for c in piece_chunks])
            rates: dict[str, float] = {name: 0.0 for name in runs}
            for _ in range(repeats):                                # alternated: one run of each per round
                for name, run in runs.items():
                    rates[name] = max(rates[name], _best_rate(run, len(sources), 1))
            base = rates["attnmt fp32"]
            rows.append({"beam": beam, "batch": batch, "sentences_per_s": {k: round(v, 1) for k, v in rates.items()},
                         "attnmt_over": {k: round(base / v, 3) for k, v in rates.items() if k != "attnmt fp32"}})
    return {"machine": machine(), "sentences": len(sources), "threads": threads, "repeats": repeats,
            "ctranslate2": ctranslate2.__version__,
            "ctranslate2_compute_types": sorted(ctranslate2.get_supported_compute_types("cpu")),
            "rows": rows}


def format_ctranslate2(report: dict, agreed: dict | None = None) -> str:
    lines = [f"attnmt vs CTranslate2 {report['ctranslate2']} on the same weights, {report['sentences']} sentences, "
             f"{report['threads']} threads, best of {report['repeats']} ({describe(report['machine'])}; "
             f"CTranslate2 CPU compute types {', '.join(report['ctranslate2_compute_types'])})", ""]
    names = list(report["rows"][0]["sentences_per_s"]) if report["rows"] else []
    lines.append("| beam | batch | " + " | ".join(f"{n} sent/s" for n in names) + " | attnmt / each |")
    lines.append("|---" * (3 + len(names)) + "|")
    for row in report["rows"]:
        ratios = ", ".join(f"{k}: {v}x" for k, v in row["attnmt_over"].items())
        lines.append(f"| {row['beam']} | {row['batch']} | "
                     + " | ".join(str(row["sentences_per_s"][n]) for n in names) + f" | {ratios} |")
    if agreed is not None:
        lines += ["", f"greedy fp32, identical translations: {agreed['identical']} of {agreed['sentences']} "
                      f"({100 * agreed['identical_share']:.1f} %)"]
    return "\n".join(lines)
