"""`attnmt bench ctranslate2`: attnmt's engine against CTranslate2 on the same Transformer
weights, in one process, runs alternated; and beside it, on the same sentences, what the
Transformer's issue asks of attnmt itself.

- Agreement: greedy translations of the test sentences from both engines in fp32, the share
  identical, and each difference with the position where the two first part (a near tie
  between two tokens, or a length limit, explains most).
- Speed: sentences/s offline, greedy and beam 5, batch 64 and batch 1, CTranslate2 in fp32
  and int8 against attnmt in fp32 and, given its int8 directory (`attnmt export --quantize
  int8`), attnmt in int8; the same threads for all (`intra_threads` = ONNX Runtime's intra-op
  threads); best of `repeats`, the engines' runs of one setting alternated. CTranslate2's
  compute type and its CPU backend (`ctranslate2.get_supported_compute_types`, the ISA it
  dispatches to) are written beside the figures.
- RNNsearch: given an RNNsearch model directory, attnmt's offline engine decodes the same
  sentences with it at batch 64, greedy and beam 5, in the same alternation: the
  Transformer's sentences/s against the RNNsearch's.
- Server (`bench_server`): `attnmt serve` on each model directory, N closed-loop gRPC
  clients, one sentence a call, greedy, alternated with the offline engine at batch 64 on
  the same sentences: sentences/s both ways and server / offline; the issue's target is the
  Transformer's ratio no worse than the RNNsearch's, measured in the same run.
- Profile: where attnmt's time goes at batch 64, per beam and model, from one more run (not
  timed) with timers wrapped around the engine's methods for its duration (`PARTS`);
  nothing in service/ changes.

The exported attnmt model directory (`attnmt export`) and the CTranslate2 directories
(`attnmt export --format ctranslate2`) must come from the same checkpoint.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path

from attnmt.bench.loadtest import ServerProcess, closed_loop, describe, format_targets, machine, target
from attnmt.service.inference.batch import DecodeBatch
from attnmt.service.inference.engine import Engine, EngineOptions
from attnmt.service.inference.search import SearchOptions
from attnmt.service.inference.slots import Memory, RowMemory, Rows
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.text.translator import Translator

# CTranslate2 takes a fixed maximum length; attnmt's limit is per sentence
# (max_length_ratio x source + max_length_extra). Both are set high enough never to cut a
# translation of the test sentences, so the limits do not decide the comparison.
MAX_DECODING_LENGTH = 256
# attnmt's beam with OpenNMT-py's stopping rule (SearchOptions.early_exit): a beam sentence ends
# when its best candidate ends, where attnmt's default (Marian's) waits for beam_size hypotheses
EARLY_EXIT = "attnmt fp32 early exit"
MAIN_BATCH = 64     # the batch: the RNNsearch's runs, the profile, the server's offline reference

# Where an offline run's wall time goes (`profile`); each part's time is exclusive (a timed
# call inside another counts for its own part only):
PARTS = ("encoder",         # ONNX Runtime running the encoder graph (Engine.encoder.run)
         "decoder steps",   # ONNX Runtime running the step graph (Engine.decoder.run: offline on the
                            # host every step runs decoder_step, beams reading row copies, batch.py)
         "cache moves",     # slots.Rows copying rows' step state (a Transformer's self-attention
                            # cache): store_state each step, put_state for joiners, copy for beam
                            # children, free and permute when rows move, reserve when they grow;
                            # copy, free, permute and reserve move the rows' histories in the same call
         "memory copies",   # the encoder's memory between slots: RowMemory.view (beam rows' copies),
                            # Memory.add / free / shrink / reserve
         "search",          # DecodeBatch._advance_one_token and _advance_beams: each row's token
                            # written, beams chosen and their rows assigned (beam.py), hypotheses finished
         "text",            # Translator.search and .result: normalising, tokenising, detokenising
         "rest")            # the wall time left: the step's feeds, α written into the histories,
                            # sentences joining and leaving, Python around it
_ROWS_METHODS = ("store_state", "put_state", "copy", "free", "permute", "reserve")
_MEMORY_METHODS = ("add", "free", "shrink", "reserve")


def _ctranslate2(directory: Path, threads: int, workers: int = 1):
    """workers: CTranslate2's inter_threads (batches decoded in parallel), the threads shared out."""
    import ctranslate2
    return ctranslate2.Translator(str(directory), device="cpu", inter_threads=workers,
                                  intra_threads=max(1, threads // workers))


def _translator(model_dir: Path, threads: int, workers: int = 1) -> Translator:
    """workers: attnmt's offline decode workers (decode_all), the threads shared out."""
    return Translator(Engine(model_dir, EngineOptions(intra_op_threads=max(1, threads // workers))),
                      max_tokens=10_000, workers=workers)


def _options(beam: int) -> SearchOptions:
    return SearchOptions(beam_size=beam, max_length_ratio=10.0, max_length_extra=MAX_DECODING_LENGTH).validate()


def _chunks(items: list, size: int) -> list[list]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def _offline(translator: Translator, chunks: list[list[str]], options: SearchOptions):
    """attnmt's offline run: each chunk of `batch` sentences through `Translator.translate`, each
    sentence whole (no long one in parts: the engines do the same work)."""
    return lambda: [translator.translate(c, options, split_above=0) for c in chunks]


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
    translator = _translator(model_dir, threads)
    limit = _limit(translator)
    options = SearchOptions(beam_size=1, max_length_ratio=10.0, max_length_extra=limit,
                            max_target_tokens=limit).validate()
    # the engines' own pieces: no names or lexicon words written over them (names.py, lexicon.py)
    ours = [t.best.target_tokens
            for t in translator.translate(sources, options, keep_names=False, use_lexicon=False, split_above=0)]
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


def _alternated(runs: dict, sentences: int, repeats: int) -> dict[str, float]:
    """The best sentences/s of each run, one run of each per round."""
    rates: dict[str, float] = {name: 0.0 for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            rates[name] = max(rates[name], _best_rate(run, sentences, 1))
    return rates


def bench_ctranslate2(model_dir: Path, ct2_dirs: dict[str, Path], sources: list[str], repeats: int = 3,
                      threads: int = 2, batches: tuple[int, ...] = (64, 1), beams: tuple[int, ...] = (1, 5),
                      model_int8: Path | None = None, rnnsearch: Path | None = None,
                      main_batch: int = MAIN_BATCH, workers: int = 1) -> dict:
    """sentences/s of each engine and precision, greedy and beam, per batch size; the runs of
    one setting alternate between the engines. model_int8: attnmt's int8 directory of the same
    checkpoint; rnnsearch: an RNNsearch model directory, run at `main_batch` only. At
    `main_batch` every attnmt model's time is also profiled (`profile`; with one worker only).
    workers: each batch split between that many parallel decoders, `threads` shared out between
    them: attnmt's decode workers, CTranslate2's inter_threads (its batch cut into as many)."""
    import ctranslate2

    ours = {"attnmt fp32": _translator(model_dir, threads, workers)}
    if model_int8 is not None:
        ours["attnmt int8"] = _translator(model_int8, threads, workers)
    rnn = _translator(rnnsearch, threads, workers) if rnnsearch is not None else None
    limit = _limit(ours["attnmt fp32"])
    pieces = _source_pieces(ours["attnmt fp32"], sources)
    engines = {name: _ctranslate2(path, threads, workers) for name, path in ct2_dirs.items()}
    rows, profiles = [], []
    for beam in beams:
        options = _options(beam)
        for batch in batches:
            chunks = _chunks(sources, batch)
            piece_chunks = _chunks(pieces, batch)
            models = {**ours, **({"rnnsearch": rnn} if rnn is not None and batch == main_batch else {})}
            runs = {name: _offline(translator, chunks, options) for name, translator in models.items()}
            if beam > 1:    # OpenNMT-py's rule: a sentence stops when its best candidate ends
                runs[EARLY_EXIT] = _offline(ours["attnmt fp32"], chunks, replace(options, early_exit=True))
            for name, engine in engines.items():
                runs[f"ctranslate2 {name}"] = (
                    lambda engine=engine, piece_chunks=piece_chunks, beam=beam, batch=batch:
                    [engine.translate_batch(c, beam_size=beam, max_batch_size=-(-batch // workers),
                                            max_decoding_length=limit)
                     for c in piece_chunks])
            rates = _alternated(runs, len(sources), repeats)
            base = rates["attnmt fp32"]
            row = {"beam": beam, "batch": batch, "sentences_per_s": {k: round(v, 1) for k, v in rates.items()},
                   "attnmt_over": {k: round(base / v, 3) for k, v in rates.items() if k != "attnmt fp32"}}
            if EARLY_EXIT in rates:
                row["early_exit_over"] = {k: round(rates[EARLY_EXIT] / v, 3) for k, v in rates.items()
                                          if k.startswith("ctranslate2 ")}
            if "attnmt int8" in rates:
                row["attnmt_int8_over"] = {k: round(rates["attnmt int8"] / v, 3) for k, v in rates.items()
                                           if k.startswith("ctranslate2 ")}
            rows.append(row)
            if batch == main_batch and workers == 1:       # the timers follow one thread
                profiles += [{"model": name, "beam": beam, "batch": batch, **profile(translator, chunks, options)}
                             for name, translator in models.items()]
    return {"machine": machine(), "sentences": len(sources), "threads": threads, "workers": workers,
            "repeats": repeats,
            "ctranslate2": ctranslate2.__version__,
            "ctranslate2_compute_types": sorted(ctranslate2.get_supported_compute_types("cpu")),
            "rows": rows, "profile": profiles}


# --- where attnmt's time goes ---------------------------------------------------

class _Timers:
    """Seconds and calls per part; a call's time less that of the timed calls inside it."""

    def __init__(self):
        self.seconds = dict.fromkeys(PARTS[:-1], 0.0)
        self.calls = dict.fromkeys(PARTS[:-1], 0)
        self._inner = [0.0]     # per open timed call: the time of the timed calls inside it

    def timed(self, part: str, function):
        def wrapper(*args, **kwargs):
            self._inner.append(0.0)
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - start
                self.seconds[part] += elapsed - self._inner.pop()
                self.calls[part] += 1
                self._inner[-1] += elapsed
        return wrapper


@contextmanager
def _timing(timers: _Timers, translator: Translator):
    """Timers around the methods `PARTS` names, for the duration: on this translator's and
    engine's objects, and on the decode batch's classes (it makes new objects each run)."""
    engine = translator.engine
    if engine.io_binding or engine.shortlist is not None:
        raise ValueError("the profile times the host path's decoder_step alone: no io_binding, no shortlist")
    on_objects = [(engine.encoder, "run", "encoder"), (engine.decoder, "run", "decoder steps"),
                  (translator, "search", "text"), (translator, "result", "text")]
    on_classes = ([(Rows, name, "cache moves") for name in _ROWS_METHODS]
                  + [(Memory, name, "memory copies") for name in _MEMORY_METHODS]
                  + [(RowMemory, "view", "memory copies")]
                  + [(DecodeBatch, name, "search") for name in ("_advance_one_token", "_advance_beams")])
    saved = [(obj, name, obj.__dict__.get(name)) for obj, name, _ in on_objects + on_classes]
    try:
        for obj, name, part in on_objects:          # an attribute of the object hides its class's method
            setattr(obj, name, timers.timed(part, getattr(obj, name)))
        for cls, name, part in on_classes:
            setattr(cls, name, timers.timed(part, cls.__dict__[name]))
        yield
    finally:
        for obj, name, original in saved:
            if original is not None:
                setattr(obj, name, original)
            elif name in vars(obj):
                delattr(obj, name)


def profile(translator: Translator, chunks: list[list[str]], options: SearchOptions) -> dict:
    """One offline run of the chunks with `_timing`'s timers on: the seconds and share of its
    wall time per part (`PARTS`; the timers' own cost, about a microsecond a call, lands in
    the parts), the decoder steps and encoder calls it made."""
    timers = _Timers()
    with _timing(timers, translator):
        start = time.perf_counter()
        for chunk in chunks:
            translator.translate(chunk, options, split_above=0)
        total = time.perf_counter() - start
    seconds = {**timers.seconds, "rest": max(total - sum(timers.seconds.values()), 0.0)}
    return {"total_s": round(total, 4), "steps": timers.calls["decoder steps"],
            "encoder_calls": timers.calls["encoder"],
            "seconds": {part: round(s, 4) for part, s in seconds.items()},
            "share": {part: round(s / total, 4) for part, s in seconds.items()}}


# --- the server against its own offline engine ------------------------------------

def bench_server(models: dict[str, Path], sources: list[str], clients: int = 64, repeats: int = 3,
                 threads: int = 2, batch: int = MAIN_BATCH, workers: int = 1) -> dict:
    """For each model directory (by label: "transformer", "rnnsearch"): `attnmt serve` on free
    loopback ports, default settings but `threads` intra-op threads, `clients` closed-loop gRPC
    clients sending each source once, one a call, greedy; and the offline engine on the same
    sources at `batch`, same threads and options. All servers stay up and each round runs every
    model's offline run then its server run; best of `repeats`. Failed calls are counted, not
    raised."""
    options = _options(1)
    request = pb.DecodingOptions(beam_size=1, max_length_ratio=options.max_length_ratio,
                                 max_length_extra=options.max_length_extra)
    translators = {label: _translator(path, threads, workers) for label, path in models.items()}
    env = {"ATTNMT_INTRA_OP_THREADS": str(max(1, threads // workers)), "ATTNMT_DECODE_WORKERS": str(workers)}
    offline = {label: _offline(t, _chunks(sources, batch), options) for label, t in translators.items()}
    rates = {label: {"offline": 0.0, "server": 0.0} for label in models}
    errors = {label: Counter() for label in models}
    with ExitStack() as stack:
        servers = {label: stack.enter_context(ServerProcess(path, env, defaults=True))
                   for label, path in models.items()}
        for label, server in servers.items():                                                 # warm-up
            translators[label].translate(sources[:8], options)
            asyncio.run(closed_loop(server.address, sources, min(clients, 8), 2 * clients, request, Counter()))
        for _ in range(repeats):
            for label, server in servers.items():
                rates[label]["offline"] = max(rates[label]["offline"], _best_rate(offline[label], len(sources), 1))
                answered, wall = asyncio.run(closed_loop(server.address, sources, clients, len(sources), request,
                                                         errors[label]))
                rates[label]["server"] = max(rates[label]["server"], len(answered) / wall)
    rows = [{"model": label, "name": translators[label].name,
             "offline_sentences_per_s": round(r["offline"], 1), "server_sentences_per_s": round(r["server"], 1),
             "server_over_offline": round(r["server"] / r["offline"], 3), "failed_calls": dict(errors[label])}
            for label, r in rates.items()]
    ratios = {row["model"]: row["server_over_offline"] for row in rows}
    targets = []
    if {"transformer", "rnnsearch"} <= set(ratios):
        targets.append(target(f"the Transformer's server at {clients} clients / its offline engine, "
                              "against the RNNsearch's", ratios["transformer"], "≥", ratios["rnnsearch"]))
    return {"clients": clients, "threads": threads, "batch": batch, "repeats": repeats, "rows": rows,
            "targets": targets}


# --- the report --------------------------------------------------------------------

def _speed_table(rows: list[dict]) -> list[str]:
    names = list(dict.fromkeys(name for row in rows for name in row["sentences_per_s"]))
    int8 = any("attnmt_int8_over" in row for row in rows)
    early = any("early_exit_over" in row for row in rows)
    lines = ["| beam | batch | " + " | ".join(f"{n} sent/s" for n in names) + " | attnmt / each |"
             + (" attnmt int8 / each |" if int8 else "") + (" early exit / each |" if early else ""),
             "|---" * (3 + len(names) + int8 + early) + "|"]
    for row in rows:
        cells = [str(row["sentences_per_s"].get(n, "—")) for n in names]
        cells.append(", ".join(f"{k}: {v}x" for k, v in row["attnmt_over"].items()))
        if int8:
            cells.append(", ".join(f"{k}: {v}x" for k, v in row.get("attnmt_int8_over", {}).items()))
        if early:
            cells.append(", ".join(f"{k}: {v}x" for k, v in row.get("early_exit_over", {}).items()) or "—")
        lines.append(f"| {row['beam']} | {row['batch']} | " + " | ".join(cells) + " |")
    return lines


def _profile_table(profiles: list[dict]) -> list[str]:
    lines = ["| model | beam | batch | seconds | decoder steps run | "
             + " | ".join(f"{part} s (share)" for part in PARTS) + " |",
             "|---" * (5 + len(PARTS)) + "|"]
    for p in profiles:
        cells = [f"{p['seconds'][part]:.3f} ({100 * p['share'][part]:.1f} %)" for part in PARTS]
        lines.append(f"| {p['model']} | {p['beam']} | {p['batch']} | {p['total_s']:.3f} | {p['steps']} | "
                     + " | ".join(cells) + " |")
    return lines


def _server_table(server: dict) -> list[str]:
    lines = [f"| model | offline sent/s (batch {server['batch']}) | server sent/s ({server['clients']} clients) "
             "| server / offline | failed calls |", "|---|---:|---:|---:|---|"]
    for row in server["rows"]:
        failed = ", ".join(f"{k}: {v}" for k, v in row["failed_calls"].items()) or "0"
        lines.append(f"| {row['model']} ({row['name']}) | {row['offline_sentences_per_s']} | "
                     f"{row['server_sentences_per_s']} | {row['server_over_offline']} | {failed} |")
    return lines


def format_ctranslate2(report: dict, agreed: dict | None = None) -> str:
    workers = report.get("workers", 1)
    split = (f" shared by {workers} parallel decoders each (attnmt's decode workers, CTranslate2's inter_threads)"
             if workers > 1 else "")
    lines = [f"attnmt vs CTranslate2 {report['ctranslate2']} on the same weights, {report['sentences']} sentences, "
             f"{report['threads']} threads{split}, best of {report['repeats']} ({describe(report['machine'])}; "
             f"CTranslate2 CPU compute types {', '.join(report['ctranslate2_compute_types'])})", ""]
    lines += _speed_table(report["rows"])
    against = [f"beam {row['beam']} batch {row['batch']}: {row['attnmt_over']['rnnsearch']}x"
               for row in report["rows"] if "rnnsearch" in row["attnmt_over"]]
    if against:
        lines += ["", "The Transformer's sentences/s (attnmt fp32) against the RNNsearch's: " + ", ".join(against)]
    if agreed is not None:
        lines += ["", f"greedy fp32, identical translations: {agreed['identical']} of {agreed['sentences']} "
                      f"({100 * agreed['identical_share']:.1f} %)"]
    if report.get("profile"):
        lines += ["", "Where attnmt's time goes (one more run, timers on):", ""] + _profile_table(report["profile"])
    if report.get("server"):
        lines += ["", "attnmt's server against its offline engine, greedy, best of "
                      f"{report['server']['repeats']}, alternated:", ""] + _server_table(report["server"])
        if report["server"]["targets"]:
            lines += ["", format_targets(report["server"]["targets"])]
    return "\n".join(lines)
