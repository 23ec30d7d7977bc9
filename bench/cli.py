"""The measurement subcommands of `attnmt`: bench (engine, server, offline, serving, http, glossary,
quality, score-functions, overload, soak, order, files, catalog, subtitles, typed), evaluate, evaluate-public,
evaluate-alignment, fit-quality, fit-names, fit-lexicon, fit-length-penalty, fit-first-word, fit-split.

Found by `attnmt` through the `attnmt.commands` entry point; the modules that run them
(torch, grpc, sacrebleu, the client) are imported only when one runs, so they cost
`attnmt translate` and `attnmt serve` nothing at start-up."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from attnmt.bench.reports import show


def _files(args: argparse.Namespace) -> int:
    from attnmt.bench.files import cmd_bench_files
    return cmd_bench_files(args)


def _catalog(args: argparse.Namespace) -> int:
    from attnmt.bench.catalog import cmd_bench_catalog
    return cmd_bench_catalog(args)


def _subtitles(args: argparse.Namespace) -> int:
    from attnmt.bench.subtitles import cmd_bench_subtitles
    return cmd_bench_subtitles(args)


def _overload(args: argparse.Namespace) -> int:
    from attnmt.bench.overload import cmd_bench_overload
    return cmd_bench_overload(args)


def _order(args: argparse.Namespace) -> int:
    from attnmt.bench.order import cmd_bench_order
    return cmd_bench_order(args)


def _ctranslate2(args: argparse.Namespace) -> int:
    if args.server_clients < 0:
        print("attnmt bench ctranslate2: --server-clients must be 0 (off) or more", file=sys.stderr)
        return 2
    if args.ctranslate2 is not None:
        return _bench_ctranslate2(args)
    # No CTranslate2 directory given: converted here from the model directory's own weights (its
    # checkpoint.pt, or a Transformer's graphs read back), fp32 and int8, and dropped afterwards.
    import tempfile

    from attnmt.model.export.ctranslate2 import export_ctranslate2_from_model_directory
    with tempfile.TemporaryDirectory(prefix="attnmt-ct2-") as tmp:
        try:
            args.ctranslate2 = Path(tmp) / "fp32"
            export_ctranslate2_from_model_directory(args.model, args.ctranslate2)
            if args.ctranslate2_int8 is None:
                args.ctranslate2_int8 = Path(tmp) / "int8"
                export_ctranslate2_from_model_directory(args.model, args.ctranslate2_int8, "int8")
        except ValueError as e:     # an RNNsearch (CTranslate2 runs no RNNs), or one without checkpoint.pt
            print(f"attnmt bench ctranslate2: {e}", file=sys.stderr)
            return 2
        print(f"attnmt bench ctranslate2: CTranslate2 fp32 and int8 converted from {args.model}", file=sys.stderr)
        return _bench_ctranslate2(args)


def _bench_ctranslate2(args: argparse.Namespace) -> int:
    from attnmt.bench.ctranslate2 import agreement, bench_ctranslate2, bench_server, format_ctranslate2
    from attnmt.bench.offline import source_sentences
    sources = source_sentences(args.model, args.data, args.sentences)
    agreed = agreement(args.model, args.ctranslate2, sources, args.threads)
    engines = {"fp32": args.ctranslate2, **({"int8": args.ctranslate2_int8} if args.ctranslate2_int8 else {})}
    report = {**bench_ctranslate2(args.model, engines, sources, args.repeats, args.threads, tuple(args.batches),
                                  model_int8=args.model_int8, rnnsearch=args.rnnsearch, workers=args.workers),
              "agreement": agreed}
    if args.server_clients:
        models = {"transformer": args.model, **({"rnnsearch": args.rnnsearch} if args.rnnsearch else {})}
        report["server"] = bench_server(models, sources, args.server_clients, args.repeats, args.threads,
                                        workers=args.workers)
    return _bench_report(report, format_ctranslate2(report, agreed), args.json)


def _fingerprint(args: argparse.Namespace) -> int:
    from attnmt.bench.fingerprint import cmd_bench_fingerprint
    return cmd_bench_fingerprint(args)


def _gpu(args: argparse.Namespace) -> int:
    from attnmt.bench.gpu import bench_gpu, format_gpu
    from attnmt.bench.offline import source_sentences
    models = args.model or [RNNSEARCH_MODEL, DEFAULT_MODEL]
    sources = source_sentences(models[0], args.data, args.sentences)
    report = bench_gpu(models, sources, tuple(args.rows or (64, 256)), args.repeats, device=args.device)
    return _bench_report(report, format_gpu(report), args.json)


def _typed(args: argparse.Namespace) -> int:
    from attnmt.bench.typed import cmd_bench_typed
    args.model = args.model or [DEFAULT_MODEL]
    return cmd_bench_typed(args)


def _score_functions(args: argparse.Namespace) -> int:
    from attnmt.bench.score_functions import bench_score_functions, format_score_functions, score_function
    for model in args.model:                    # a Transformer, or a manifest that names no score: refused
        try:
            score_function(model)
        except ValueError as e:
            print(f"attnmt bench score-functions: {e}", file=sys.stderr)
            return 2
    report = bench_score_functions(args.model, args.data, Path(args.gold) if args.gold else None, args.sentences,
                                   args.speed_sentences, args.repeats, args.threads, args.samples)
    return _bench_report(report, format_score_functions(report), args.json)


def _soak(args: argparse.Namespace) -> int:
    from attnmt.bench.soak import cmd_bench_soak
    return cmd_bench_soak(args)


REPO = Path(__file__).resolve().parent.parent
_REPO = REPO
DEFAULT_MODEL = REPO / "models" / "transformer-es-en"           # the served default
RNNSEARCH_MODEL = REPO / "models" / "rnnsearch-es-en"


def default_data() -> Path:
    """The Bible's test split once `make data` has built it; in a fresh clone, which has no
    data/, the committed everyday test set (144 sentences)."""
    bible = REPO / "data" / "bible"
    return bible if any(bible.glob("test.*")) else REPO / "tests" / "data" / "everyday"


def model_and_data_arguments(b: argparse.ArgumentParser, sentences: bool = True) -> None:
    """--model, --data (and --sentences): what every benchmark and measurement reads."""
    b.add_argument("--model", type=Path, default=DEFAULT_MODEL,
                   help="model directory (default: models/transformer-es-en, the served default)")
    b.add_argument("--data", type=Path, default=default_data(),
                   help="data directory with the test split (default: data/bible once `make data` has built it, "
                        "else tests/data/everyday)")
    if sentences:
        b.add_argument("--sentences", type=int, help="use this many test sentences, evenly spaced (default: all)")



def _testset_arguments(p: argparse.ArgumentParser, default: str) -> None:
    """--testsets and --set, as `attnmt evaluate-public` and `attnmt bench quality` read them."""
    p.add_argument("--testsets", action="append", metavar="DIR|URL",
                   help="a folder of NAME.spa/NAME.eng test sets, or the upstream address of one test set's file "
                        f"(downloaded once; repeatable; {default})")
    p.add_argument("--set", action="append", metavar="NAME",
                   help="only this test set (repeatable; default: every pair found), e.g. flores200-devtest")

def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="BLEU/chrF on the test split (greedy and beam), alignment heatmaps")
    p.add_argument("--model", type=Path, help="an exported model directory, run by the serving engine (with --run: "
                                              "the baseline scored beside the run)")
    p.add_argument("--run", type=Path, help="a training run: its checkpoint scored in PyTorch (either architecture)")
    p.add_argument("--checkpoint", default="best.pt", help="with --run: best.pt, last.pt, averaged.pt...")
    p.add_argument("--data", type=Path, required=True, help="data directory with test.{src,tgt}")
    p.add_argument("--split", default="test")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--heatmaps", type=int, default=4, help="test sentences to plot")
    p.add_argument("--out", type=Path, help="where to write hypotheses and heatmaps (default: MODEL/eval or RUN/eval)")
    p.add_argument("--write-manifest", action="store_true", help="record the scores in MODEL/manifest.json")
    p.add_argument("--baseline", type=Path, metavar="HYPS",
                   help="another system's translations of the split (a line each, e.g. the bundled model's "
                        "eval/DATA/test.beam5.en): the beam search's paired bootstrap against it, in the report")
    p.add_argument("--shortlist-change", action="store_true",
                   help="instead: greedy BLEU on the dev split with and without MODEL's lexical shortlist, written "
                        "into its manifest (what `attnmt export` leaves to this command)")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("evaluate-alignment", help="AER, precision, recall of a model's alignments (every rule) and "
                                                  "of links files on the hand-aligned gold set, bootstrap 95 %% CIs")
    p.add_argument("--model", type=Path, default=DEFAULT_MODEL, help="model directory (default: the served default, "
                                                                        "models/transformer-es-en)")
    p.add_argument("--gold", type=Path, default=_REPO / "tests" / "data" / "gold-alignments",
                   help="directory with {split}.tsv (id, domain, source, target, links) and languages.txt "
                        "(the columns' languages; the pairs are read reversed for a model of the other direction)")
    p.add_argument("--splits", nargs="+", default=["dev", "test"])
    p.add_argument("--tune-split", default="dev", help="the split thresholds are chosen on")
    p.add_argument("--links", action="append", default=[], metavar="NAME=FILE",
                   help="score a Pharaoh links file too, one line per gold pair in the gold file's direction "
                        "(eflomal's: es→en); reversed with the pairs when MODEL translates the other way "
                        "(languages.txt in GOLD), so both are scored on the same pairs in the same direction; "
                        "{split} in FILE is replaced (repeatable), e.g. eflomal=data/gold-links/{split}.links")
    p.add_argument("--samples", type=int, default=1000, help="bootstrap resamples of the pairs")
    p.add_argument("--seed", type=int, default=25)
    p.add_argument("--run", type=Path, help="instead of --model: a Transformer training run, every decoder layer "
                                            "and head of its checkpoint teacher-forced in PyTorch (which to export)")
    p.add_argument("--checkpoint", default="best.pt", help="with --run: the checkpoint file in RUN")
    p.add_argument("--write-manifest", action="store_true",
                   help="with --model: record the servable hard-link rule with the lowest AER on the tune split "
                        "(and its AER on every split) as the manifest's `hard_links`, the server's default")
    p.add_argument("--json", type=Path, help="also write the report here")
    p.set_defaults(func=cmd_evaluate_alignment)

    p = sub.add_parser("evaluate-public", help="models and Apertium on the public test sets (FLORES-200, "
                                               "newstest2013, Tatoeba...) in one run: BLEU, chrF, paired bootstrap, "
                                               "the published figures beside them")
    _testset_arguments(p, "default: tests/data/public")
    p.add_argument("--model", type=Path, action="append",
                   help="an exported model directory (repeatable; the first is what the others are tested "
                        "against; default: models/transformer-es-en)")
    p.add_argument("--apertium", action=argparse.BooleanOptionalAction, default=True,
                   help="translate with Apertium in the same run (default; skipped with a note when it is not "
                        "installed)")
    p.add_argument("--direction", choices=["spa-eng", "eng-spa"], default="spa-eng",
                   help="which file is the source (a model that translates the other way is skipped)")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--limit", type=int, metavar="N", help="at most N sentences of each test set, evenly spaced")
    p.add_argument("--samples", type=int, default=1000, help="paired bootstrap resamples")
    p.add_argument("--seed", type=int, default=12345, help="the bootstrap's seed (sacreBLEU's default)")
    p.add_argument("--cache", type=Path, help="where downloaded test sets are kept (default: "
                                              "$XDG_CACHE_HOME/attnmt/testsets)")
    p.add_argument("--out", type=Path, help="also write every system's translations here")
    p.add_argument("--json", type=Path, help="also write the report here")
    p.set_defaults(func=cmd_evaluate_public)

    p = sub.add_parser("bench", help="benchmarks")
    bench = p.add_subparsers(dest="bench", required=True)
    b = bench.add_parser("engine", help="PyTorch eager vs ONNX Runtime greedy decoding, batch 1 and 64")
    b.add_argument("--model", type=Path, required=True)
    b.add_argument("--data", type=Path, required=True, help="data directory with the test split")
    b.add_argument("--sentences", type=int, default=200)
    b.add_argument("--repeats", type=int, default=3)
    b.add_argument("--threads", type=int, default=0, help="threads for both runtimes (0: their defaults)")
    b.add_argument("--json", type=Path, help="also write the report here")
    b.set_defaults(func=cmd_bench_engine)
    b = bench.add_parser("server", help="continuous vs request-level batching: closed-loop concurrency sweep and "
                                        "open-loop Poisson arrivals; table, JSON and a plot")
    b.add_argument("--model", type=Path, required=True)
    b.add_argument("--data", type=Path, required=True, help="data directory with the test split")
    b.add_argument("--concurrency", type=_numbers(int), default=(1, 4, 16, 64, 128),
                   help="closed-loop clients, comma-separated (default 1,4,16,64,128)")
    b.add_argument("--loads", type=_numbers(float), default=(0.5, 0.7, 0.9),
                   help="open-loop rates as fractions of request-level capacity (default 0.5,0.7,0.9)")
    b.add_argument("--rates", type=_numbers(float), help="open-loop rates in sentences/s instead of --loads")
    b.add_argument("--requests", type=int, default=400, help="calls per point")
    b.add_argument("--sentences", type=int, help="test sentences used, evenly spaced (default: all)")
    b.add_argument("--seed", type=int, default=1, help="sentence order and arrival traces")
    b.add_argument("--beam", type=int, default=1)
    b.add_argument("--set", action="append", default=[], metavar="SETTING=VALUE",
                   help="a server setting for both modes (repeatable), e.g. intra_op_threads=1")
    b.add_argument("--set-continuous", action="append", default=[], metavar="SETTING=VALUE",
                   help="a server setting for the continuous mode only (repeatable), e.g. max_batch_tokens=2048")
    b.add_argument("--traces", type=int, default=1,
                   help="open-loop arrival traces per rate (seeded); the p99 target is their median")
    b.add_argument("--plot", type=Path, help="write the plot (PNG) here")
    b.add_argument("--json", type=Path, help="also write the report here")
    b.set_defaults(func=cmd_bench_server)
    b = bench.add_parser("offline", help="`attnmt translate` vs Apertium as processes; beam vs greedy in-process, "
                                         "and where beam time goes")
    _bench_arguments(b)
    b.add_argument("--beam", type=int, default=5)
    b.add_argument("--apertium-pair", default="spa-eng", help="`apertium -u PAIR` (skipped when not installed)")
    b.set_defaults(func=cmd_bench_offline)
    b = bench.add_parser("serving", help="`attnmt serve` (default settings) vs the offline engine: throughput, "
                                         "CPU per sentence, latency at concurrency 1")
    _bench_arguments(b)
    b.add_argument("--concurrency", type=int, default=64)
    b.add_argument("--latency-sentences", type=int, default=200, help="sentences sent one at a time")
    b.add_argument("--set", action="append", default=[], metavar="SETTING=VALUE",
                   help="a server setting other than its default (repeatable), e.g. intra_op_threads=1")
    b.set_defaults(func=cmd_bench_serving)
    b = bench.add_parser("http", help="HTTP against gRPC on the same server (default settings): throughput at "
                                      "64 clients, CPU per sentence (server and client apart), latency at "
                                      "concurrency 1 (needs aiohttp or httpx)")
    _bench_arguments(b)
    b.add_argument("--concurrency", type=int, default=64)
    b.add_argument("--client", choices=["aiohttp", "httpx"], default="aiohttp",
                   help="the HTTP client (default aiohttp: it spends less of the shared cores than httpx)")
    b.add_argument("--requests", type=int, help="calls per throughput run (default: each sentence once)")
    b.add_argument("--latency-sentences", type=int, default=200, help="sentences sent one at a time")
    b.add_argument("--set", action="append", default=[], metavar="SETTING=VALUE",
                   help="a server setting other than its default (repeatable), e.g. intra_op_threads=1")
    b.set_defaults(func=cmd_bench_http)
    b = bench.add_parser("glossary", help="a glossary file on the test split: occurrences honoured (present and "
                                          "aligned), BLEU/chrF without and with it (no torch)")
    _measure_arguments(b)
    b.add_argument("--glossary", type=Path, default=_REPO / "tests" / "data" / "glossary-bible.tsv",
                   help="TSV glossary (default: tests/data/glossary-bible.tsv)")
    b.add_argument("--beam", type=int, default=5)
    b.set_defaults(func=cmd_bench_glossary)
    b = bench.add_parser("quality", help="quality estimation on test splits and public test sets, each on its own: "
                                         "Spearman with sentence chrF, AUROC for the worst 10 %%, the share under "
                                         "chrF 30 and over 60 flagged suspect, Align true vs mismatched references "
                                         "(no torch)")
    b.add_argument("--model", type=Path, default=DEFAULT_MODEL,
                   help="model directory (default: models/transformer-es-en, the served default)")
    b.add_argument("--data", type=Path, nargs="+",
                   help="data directories with a test split (default, without --testsets: data/bible once `make "
                        "data` has built it, else tests/data/everyday)")
    _testset_arguments(b, "none without it")
    b.add_argument("--json", type=Path, help="also write the report here")
    b.add_argument("--beam", type=int, default=5)
    b.add_argument("--table", type=Path, help="also write the Markdown table here")
    b.set_defaults(func=cmd_bench_quality)
    b = bench.add_parser("score-functions", help="RNNsearch's score functions side by side (all with Bahdanau's query "
                                                 "s_{i-1}): BLEU/chrF greedy and beam 5 on each test split, gold "
                                                 "AER of the rule chosen on dev, greedy sentences/s at batch 64")
    b.add_argument("--model", type=Path, action="append", required=True,
                   help="an exported RNNsearch directory (repeatable: a row each)")
    b.add_argument("--data", type=Path, nargs="+",
                   default=[REPO / "data" / "bible", REPO / "data" / "gettext", REPO / "tests" / "data" / "everyday"],
                   help="data directories with a test split (default: data/bible data/gettext tests/data/everyday); "
                        "the speed is measured on the first")
    b.add_argument("--gold", default=str(REPO / "tests" / "data" / "gold-alignments"),
                   help="directory with {dev,test}.tsv aligned by hand ('' or a directory without them: AER not "
                        "measured)")
    b.add_argument("--sentences", type=int, help="test sentences per data directory, evenly spaced (default: all)")
    b.add_argument("--speed-sentences", type=int, default=512, help="test sentences of the first data directory "
                                                                     "decoded for the speed")
    b.add_argument("--repeats", type=int, default=3, help="speed rounds, the models alternated in each; the best kept")
    b.add_argument("--threads", type=int, default=0, help="intra-op threads of each engine (0: ONNX Runtime's "
                                                          "default)")
    b.add_argument("--samples", type=int, default=1000, help="bootstrap resamples of the gold pairs")
    b.add_argument("--json", type=Path, help="also write the report here")
    b.set_defaults(func=_score_functions)
    _register_serving_benches(bench)

    p = sub.add_parser("fit-quality", help="fit a model's quality-estimation weights on its dev split and write "
                                           "them into its manifest (needs sacrebleu)")
    p.add_argument("--model", type=Path, required=True, help="model directory (its manifest.json is updated)")
    _dev_arguments(p, data_help="data directories with a dev split: every domain the model serves (each weighs "
                                "alike in the fit and the suspect threshold)",
                   beam_help="the search whose output is scored (the server default: 5)")
    p.set_defaults(func=cmd_fit_quality)

    p = sub.add_parser("fit-names", help="write a model's known-words list, so that names it never learnt are kept "
                                         "as written, with BLEU and chrF on dev with and without it into its "
                                         "manifest (needs sacrebleu)")
    p.add_argument("--model", type=Path, required=True, help="model directory (known_words.txt.gz and its "
                                                             "manifest.json are written)")
    p.add_argument("--corpus", type=Path, required=True,
                   help="the model's training source, one sentence a line (train.es of its data directory)")
    _dev_arguments(p)
    p.set_defaults(func=cmd_fit_names)

    p = sub.add_parser("fit-lexicon", help="write a model's lexicon from Apertium's Spanish–English dictionary, so "
                                           "that nouns and adjectives it never learnt are translated, with BLEU and "
                                           "chrF on dev with and without it into its manifest (needs Debian "
                                           "apertium-eng-spa and sacrebleu)")
    p.add_argument("--model", type=Path, required=True, help="model directory with a known-words list (lexicon.tsv.gz "
                                                             "and its manifest.json are written)")
    p.add_argument("--corpus", type=Path,
                   help="the model's training source, one sentence a line: the lexicon then also takes the words seen "
                        "fewer than --rare-below times in it (default: only the words the known-words list lacks)")
    p.add_argument("--rare-below", type=int, nargs="+", metavar="N",
                   help="with --corpus, the thresholds tried; kept: the highest mean dev chrF among those that lose "
                        "no dev set more than 0.3 BLEU against the model alone (default: 5 10 20 40 80 160)")
    p.add_argument("--phrases-only", action="store_true",
                   help="add or renew only the lexicon's set phrases (lines that are a greeting or a proverb), its "
                        "words as they are")
    _dev_arguments(p)
    p.add_argument("--cache", type=Path, default=Path("data/dictionary/cache"),
                   help="where lttoolbox-dev's package is downloaded and unpacked (for lt-print)")
    p.set_defaults(func=cmd_fit_lexicon)
    p = sub.add_parser("fit-length-penalty", help="choose the length penalty a model's requests get when they name "
                                                  "none: the candidate with the highest mean chrF over the dev sets, "
                                                  "written into its manifest (decoding) with every set's BLEU and chrF")
    p.add_argument("--model", type=Path, required=True, help="model directory (its manifest.json is written)")
    _dev_arguments(p, decoding_fit=True)
    p.add_argument("--values", type=_numbers(float), default=(1.0, 1.3, 1.6, 2.0),
                   help="comma-separated candidates (default 1.0,1.3,1.6,2.0)")
    p.set_defaults(func=cmd_fit_length_penalty)
    p = sub.add_parser("fit-first-word", help="choose which lines have their first word read in small letters where "
                                              "the model knows it only so (unmarked, any, never): the rule with the "
                                              "highest mean chrF over the dev sets, written into its manifest "
                                              "(decoding.first_word) with every set's BLEU and chrF")
    p.add_argument("--model", type=Path, required=True, help="model directory (its manifest.json is written)")
    _dev_arguments(p, decoding_fit=True)
    p.set_defaults(func=cmd_fit_first_word)
    p = sub.add_parser("fit-split", help="choose past how many words a sentence is translated in parts cut after a "
                                         "comma, semicolon or colon (0: never): the candidate with the highest mean "
                                         "chrF over the dev sets, written into its manifest "
                                         "(decoding.split_above_words) with every set's BLEU and chrF")
    p.add_argument("--model", type=Path, required=True, help="model directory (its manifest.json is written)")
    _dev_arguments(p, decoding_fit=True)
    p.add_argument("--values", type=_numbers(int), default=(20, 25, 30, 40, 50),
                   help="comma-separated candidates in words (default 20,25,30,40,50; 0, never, is always tried)")
    p.set_defaults(func=cmd_fit_split)


def _dev_arguments(p: argparse.ArgumentParser, data_help: str = "data directories whose dev split is measured",
                   beam_help: str = "the search measured (the server default: 5)", decoding_fit: bool = False) -> None:
    """What every fit command reads: the data directories, their split (dev) and the beam; a fit of a
    decoding setting also takes --limit and --dry-run."""
    p.add_argument("--data", type=Path, nargs="+", required=True, help=data_help)
    p.add_argument("--split", default="dev", help="never the test split: the score is measured there")
    p.add_argument("--beam", type=int, default=5, help=beam_help)
    if decoding_fit:
        p.add_argument("--limit", type=int, help="at most this many sentences of each dev split (the first)")
        p.add_argument("--dry-run", action="store_true", help="measure and print, leave the manifest as it is")


def _register_serving_benches(bench: argparse._SubParsersAction) -> None:
    b = bench.add_parser("files", help="single-sentence calls beside a large gettext catalog in /v1/translate_file: "
                                       "their p50 against an idle server's, and the file's time")
    model_and_data_arguments(b)
    b.add_argument("--catalog-data", type=Path, default=Path("data/gettext"),
                   help="data directory whose test sources become the catalog's msgids (default: data/gettext)")
    b.add_argument("--entries", type=int, default=5000)
    b.add_argument("--set", action="append", metavar="KEY=VALUE", help="another server setting (repeatable)")
    b.add_argument("--json", type=Path, help="also write the report here")
    b.set_defaults(func=_files)
    b = bench.add_parser("catalog", help="a real gettext catalog (.po or .mo, its translations the reference) "
                                         "blanked and translated whole, as `attnmt translate --file` does, against "
                                         "its msgids as sentences: BLEU/chrF on the same entries, entries and "
                                         "plural forms filled, placeholders kept, msgfmt --check")
    b.add_argument("--catalog", type=Path, required=True,
                   help="the reference catalog, e.g. data/gettext/cache/root/tar_*/usr/share/locale/es/LC_MESSAGES/"
                        "tar.mo")
    b.add_argument("--model", type=Path, default=REPO / "models" / "transformer-en-es",
                   help="model directory (default: models/transformer-en-es); it must translate from the msgids' "
                        "language into the catalog's")
    b.add_argument("--msgid-language", default="en", help="the language of the catalog's msgids (default: en)")
    b.add_argument("--beam", type=int, default=5)
    b.add_argument("--examples", type=int, default=8,
                   help="entries translated differently by the two paths kept in the JSON report, the whole "
                        "file's worst first")
    b.add_argument("--out", type=Path, help="also write blank.po, translated.po and reference.po here")
    b.add_argument("--json", type=Path, help="also write the report here")
    b.set_defaults(func=_catalog)
    b = bench.add_parser("subtitles", help="a SubRip file built from a parallel split (one sentence a cue, about one "
                                           "in five across two cues) translated whole, as `attnmt translate --file` "
                                           "does, against each cue alone: timings kept, cues in and out, chrF/BLEU")
    b.add_argument("--model", type=Path, default=DEFAULT_MODEL,
                   help="model directory (default: models/transformer-es-en, the served default)")
    b.add_argument("--data", type=Path, help="data directory with the split (default: data/dialogue's test split "
                                             "where it has one, else data/tatoeba's dev split)")
    b.add_argument("--split", help="the split read (default: test; dev for the default data/tatoeba)")
    b.add_argument("--cues", type=int, default=200, help="cues in the file")
    b.add_argument("--split-share", type=float, default=0.2, help="share of the sentences split across two cues")
    b.add_argument("--beam", type=int, default=5)
    b.add_argument("--seed", type=int, default=0, help="draws the pauses between sentences")
    b.add_argument("--examples", type=int, default=8, help="cues translated differently kept in the JSON report")
    b.add_argument("--out", type=Path, help="also write the file sent and the file written here")
    b.add_argument("--json", type=Path, help="also write the report here")
    b.set_defaults(func=_subtitles)
    b = bench.add_parser("overload", help="512 callers against max_queue 64: goodput kept, refusal latency, "
                                          "CPU and unexpected codes (retrying at once vs honouring RetryInfo)")
    model_and_data_arguments(b)
    b.add_argument("--duration", type=float, default=30, help="seconds per run (three runs)")
    b.add_argument("--max-queue", type=int, default=64)
    b.add_argument("--callers", type=int, default=512, help="callers in the two overload runs")
    b.add_argument("--baseline-callers", type=int, default=64, help="callers in the baseline run")
    b.add_argument("--channels", type=int, default=8, help="connections the callers share")
    b.add_argument("--one-channel", action="store_true", help="every caller on one channel, as a client that "
                                                              "multiplexes its calls (instead of --channels)")
    b.add_argument("--set", action="append", metavar="KEY=VALUE", help="another server setting (repeatable)")
    b.add_argument("--json", type=Path, help="also write the report here")
    b.set_defaults(func=_overload)
    b = bench.add_parser("soak", help="a long mixed-load run at half capacity: memory growth and unexpected errors "
                                      "(`make soak`: 10 minutes)")
    model_and_data_arguments(b)
    b.add_argument("--duration", type=float, default=600, help="seconds of mixed load")
    b.add_argument("--capacity-seconds", type=float, default=20, help="about this long measuring capacity first")
    b.add_argument("--sample-every", type=float, default=5.0, help="seconds between memory samples")
    b.add_argument("--json", type=Path, help="also write the report here")
    b.set_defaults(func=_soak)
    b = bench.add_parser("order", help="the decoder alone (no gRPC) on the test sentences longest first, as offline, "
                                       "and in a server's random order: what the mix costs")
    model_and_data_arguments(b)
    b.add_argument("--repeats", type=int, default=3)
    b.add_argument("--joiners", type=int, help="sentences that join a running batch at a time "
                                               "(default: the server's min_joiners)")
    b.add_argument("--rows", type=int, help="rows a step at most (default: the server's max_batch_rows)")
    b.add_argument("--json", type=Path, help="also write the report here")
    b.set_defaults(func=_order)
    b = bench.add_parser("ctranslate2", help="attnmt against CTranslate2 on the same Transformer weights: greedy "
                                             "agreement (fp32) and sentences/s, greedy and beam 5, batch 64 and 1, "
                                             "CTranslate2 fp32 and int8 (`attnmt export --format ctranslate2`), "
                                             "attnmt fp32 and int8; the RNNsearch at batch 64; the server against "
                                             "the offline engine; where attnmt's time goes at batch 64")
    model_and_data_arguments(b)
    b.add_argument("--ctranslate2", type=Path,
                   help="CTranslate2 fp32 directory of the same checkpoint (`attnmt export --format ctranslate2`; "
                        "default: fp32 and int8 converted from MODEL's own weights for this run)")
    b.add_argument("--ctranslate2-int8", type=Path, help="and its int8 directory")
    b.add_argument("--model-int8", type=Path, metavar="DIR",
                   help="attnmt's int8 directory of the same checkpoint (`attnmt export --quantize int8`)")
    b.add_argument("--rnnsearch", type=Path, metavar="DIR",
                   help="an RNNsearch model directory (models/rnnsearch-es-en, say): decoded on the same sentences "
                        "at batch 64, greedy and beam 5, and served beside the Transformer")
    b.add_argument("--server-clients", type=int, default=64, metavar="N",
                   help="closed-loop gRPC clients of `attnmt serve` on each model, against its offline engine "
                        "(default 64; 0: no server)")
    b.add_argument("--repeats", type=int, default=3)
    b.add_argument("--threads", type=int, default=2, help="intra-op threads of every engine and server")
    b.add_argument("--workers", type=int, default=1, metavar="N",
                   help="parallel decoders sharing the threads: attnmt's decode workers, CTranslate2's "
                        "inter_threads (default 1)")
    b.add_argument("--batches", type=lambda v: [int(x) for x in v.split(",")], default=[64, 1],
                   help="batch sizes, comma-separated (default 64,1)")
    b.add_argument("--json", type=Path, help="also write the report here")
    b.set_defaults(func=_ctranslate2)
    b = bench.add_parser("fingerprint", help="the served n-best of the test sentences to the last digit (text, "
                                             "scores, token log-probs, a hash of α), one JSON line a hypothesis: "
                                             "`cmp` two to show a change kept behaviour")
    model_and_data_arguments(b)
    b.add_argument("--split", default="test")
    b.add_argument("--beam", type=int, default=5)
    b.add_argument("--n-best", type=int, default=5)
    b.add_argument("--out", type=Path, required=True, help="where the JSON lines go")
    b.set_defaults(func=_fingerprint)
    b = bench.add_parser("gpu", help="the engine on an NVIDIA GPU: node placement, CUDA against CPU and device path "
                                     "against host path, offline sentences/s greedy and beam 5 at 64 and 256 rows "
                                     "a step, host-device bytes a step")
    b.add_argument("--model", type=Path, action="append", help="model directory (repeatable; default: both "
                                                                "bundled models)")
    b.add_argument("--data", type=Path, default=default_data(), help="data directory with the test split (default: "
                                                                      "data/bible, else tests/data/everyday)")
    b.add_argument("--sentences", type=int, default=512, help="test sentences, evenly spaced")
    b.add_argument("--rows", type=int, action="append", help="rows a step at most (repeatable; default 64 and 256)")
    b.add_argument("--repeats", type=int, default=2)
    b.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                   help="cpu: the same measurements on the CPU provider (checks the command without a GPU)")
    b.add_argument("--json", type=Path, help="also write the report here")
    b.set_defaults(func=_gpu)
    b = bench.add_parser("typed", help="short sentences as typed into a box (no final mark, a lower-case first "
                                       "letter, no accents) against the same as written: BLEU/chrF (no torch)")
    b.add_argument("--model", type=Path, action="append", help="model directory (repeatable: a column each; "
                                                                "default: models/transformer-es-en)")
    b.add_argument("--data", type=Path, default=_REPO / "data" / "tatoeba",
                   help="data directory (default: data/tatoeba, `make data`)")
    b.add_argument("--split", default="dev", help="the split measured (default dev: checkpoints are chosen on it)")
    b.add_argument("--max-words", type=int, default=4, help="source sentences of this many words or fewer")
    b.add_argument("--beam", type=int, default=5)
    b.add_argument("--json", type=Path, help="also write the report here")
    b.set_defaults(func=_typed)


def _bench_arguments(b: argparse.ArgumentParser) -> None:
    model_and_data_arguments(b)
    b.add_argument("--repeats", type=int, default=5)
    b.add_argument("--json", type=Path, help="also write the report here")


def _measure_arguments(b: argparse.ArgumentParser) -> None:
    model_and_data_arguments(b, sentences=False)
    b.add_argument("--json", type=Path, help="also write the report here")


def cmd_evaluate(args: argparse.Namespace) -> int:
    if args.run is not None:
        from attnmt.bench.evaluate_run import evaluate_run
        report = evaluate_run(args.run, args.data, args.split, args.beam, args.checkpoint, args.model,
                              args.heatmaps, args.out)
        print(json.dumps(report, indent=2))
        return 0
    if args.model is None:
        print("attnmt evaluate: --model or --run is needed", file=sys.stderr)
        return 2
    if args.shortlist_change:
        from attnmt.bench.evaluate import shortlist_change
        print(json.dumps(shortlist_change(args.model, args.data)))
        return 0
    from attnmt.bench.evaluate import evaluate
    report = evaluate(args.model, args.data, args.split, args.beam, args.heatmaps, args.out, args.write_manifest,
                      args.baseline)
    print(json.dumps(report, indent=2))
    return 0


def cmd_evaluate_public(args: argparse.Namespace) -> int:
    from attnmt.bench.public import CACHE, cmd_evaluate_public
    args.testsets = args.testsets or [str(REPO / "tests" / "data" / "public")]
    args.model = args.model or [REPO / "models" / "transformer-es-en"]
    args.cache = args.cache or CACHE
    return cmd_evaluate_public(args)


def cmd_evaluate_alignment(args: argparse.Namespace) -> int:
    if args.run is not None:
        from attnmt.bench.alignment_heads import evaluate_heads, format_heads
        report = evaluate_heads(args.run, args.checkpoint, args.gold, tuple(args.splits), args.tune_split,
                                args.samples, args.seed)
        return _bench_report(report, format_heads(report), args.json)
    from attnmt.bench.evaluate_alignment import evaluate_alignment, format_report
    links = dict(item.split("=", 1) for item in args.links)
    report = evaluate_alignment(args.model, args.gold, tuple(args.splits), args.tune_split, links,
                                args.samples, args.seed)
    if args.write_manifest:
        from attnmt.model.export.measured import write_hard_links
        if "hard_links" not in report:
            print(f"attnmt evaluate-alignment: no pair of {args.tune_split} is aligned by hand: nothing to choose "
                  "a rule with", file=sys.stderr)
            return 2
        write_hard_links(args.model, report["hard_links"])
    return _bench_report(report, format_report(report), args.json)


def cmd_bench_engine(args: argparse.Namespace) -> int:
    from attnmt.bench.offline import main
    from attnmt.model.export.recover import MissingCheckpoint
    try:
        return main(args.model, args.data, args.sentences, args.repeats, args.threads, args.json)
    except MissingCheckpoint as e:            # an RNNsearch directory without its checkpoint.pt
        print(f"attnmt bench engine: {e}", file=sys.stderr)
        return 2


def _numbers(kind):
    """An argparse type: comma-separated numbers."""
    return lambda text: tuple(kind(x) for x in text.split(",") if x.strip())


def cmd_bench_server(args: argparse.Namespace) -> int:
    from attnmt.bench.batching import bench_server, format_bench_server, plot_bench_server
    from attnmt.bench.offline import source_sentences
    report = bench_server(args.model, source_sentences(args.model, args.data, args.sentences), args.concurrency,
                          args.loads, args.rates, args.requests, args.beam, args.seed,
                          settings=dict(item.split("=", 1) for item in args.set), traces=args.traces,
                          continuous_settings=dict(item.split("=", 1) for item in args.set_continuous))
    if args.plot:
        plot_bench_server(report, args.plot)
    return _bench_report(report, format_bench_server(report), args.json)


def cmd_bench_offline(args: argparse.Namespace) -> int:
    from attnmt.bench.offline import bench_offline, format_offline
    report = bench_offline(args.model, args.data, args.sentences, args.repeats, args.beam, args.apertium_pair)
    return _bench_report(report, format_offline(report), args.json)


def cmd_bench_serving(args: argparse.Namespace) -> int:
    from attnmt.bench.loadtest import bench_serving, format_serving
    from attnmt.bench.offline import source_sentences
    sentences = source_sentences(args.model, args.data, args.sentences)
    settings = dict(item.split("=", 1) for item in args.set)
    report = bench_serving(args.model, sentences, args.repeats, args.concurrency, args.latency_sentences, settings)
    return _bench_report(report, format_serving(report), args.json)


def cmd_bench_http(args: argparse.Namespace) -> int:
    import shlex

    from attnmt.bench.http import bench_http, format_http
    from attnmt.bench.offline import source_sentences
    sentences = source_sentences(args.model, args.data, args.sentences)
    settings = dict(item.split("=", 1) for item in args.set)
    # the command that repeats this run, defaults spelled out
    command = ["attnmt", "bench", "http", "--model", str(args.model), "--data", str(args.data),
               "--repeats", str(args.repeats), "--concurrency", str(args.concurrency),
               "--latency-sentences", str(args.latency_sentences), "--client", args.client]
    for flag, value in (("--sentences", args.sentences), ("--requests", args.requests)):
        command += [flag, str(value)] if value is not None else []
    command += [arg for item in args.set for arg in ("--set", item)]
    report = bench_http(args.model, sentences, args.repeats, args.concurrency, args.requests, args.latency_sentences,
                        settings, shlex.join(command), http_client=args.client)
    return _bench_report(report, format_http(report), args.json)


def cmd_bench_glossary(args: argparse.Namespace) -> int:
    # Serving-side measurements: the handler dispatches to service/ (the model directory is the contract).
    from attnmt.bench.glossary import bench_glossary, format_glossary
    report = bench_glossary(args.model, args.data, args.glossary, beam=args.beam)
    return _bench_report(report, format_glossary(report), args.json)


def cmd_bench_quality(args: argparse.Namespace) -> int:
    from attnmt.bench.quality_fit import bench_quality, format_quality
    data = args.data or ([] if args.testsets else [default_data()])
    try:
        report = bench_quality(args.model, data, args.testsets or (), args.set, beam=args.beam,
                               log=lambda message: print(message, file=sys.stderr, flush=True))
    except (FileNotFoundError, ValueError) as e:
        print(f"attnmt bench quality: {e}", file=sys.stderr)
        return 2
    table = format_quality(report)
    if args.table:
        args.table.write_text(table + "\n", encoding="utf-8")
    return _bench_report(report, table, args.json)


def _bench_report(report: dict, table: str, out: Path | None) -> int:
    show(report, table, out)
    return 0


def cmd_fit_names(args: argparse.Namespace) -> int:
    from attnmt.bench.names import fit_names
    print(json.dumps(fit_names(args.model, args.corpus, args.data, args.split, args.beam)))
    return 0


def cmd_fit_lexicon(args: argparse.Namespace) -> int:
    from attnmt.bench.lexicon import fit_lexicon, fit_phrases
    if args.phrases_only:
        print(json.dumps(fit_phrases(args.model, args.data, args.cache, args.split)))
        return 0
    if args.rare_below and (args.corpus is None or min(args.rare_below) < 1):
        print("attnmt fit-lexicon: --rare-below needs --corpus and whole numbers of 1 or more", file=sys.stderr)
        return 2
    print(json.dumps(fit_lexicon(args.model, args.data, args.cache, args.split, args.beam, corpus=args.corpus,
                                 rare_below=args.rare_below)))
    return 0


def cmd_fit_length_penalty(args: argparse.Namespace) -> int:
    from attnmt.bench.decoding import fit_length_penalty
    if not args.values or any(not 0.0 <= v <= 5.0 for v in args.values):
        print("attnmt fit-length-penalty: --values must be numbers between 0 and 5", file=sys.stderr)
        return 2
    spec = fit_length_penalty(args.model, args.data, list(args.values), args.split, args.beam, args.limit,
                              write=not args.dry_run, log=lambda m: print(m, file=sys.stderr, flush=True))
    print(json.dumps(spec))
    return 0


def cmd_fit_first_word(args: argparse.Namespace) -> int:
    from attnmt.bench.decoding import fit_first_word
    spec = fit_first_word(args.model, args.data, args.split, args.beam, args.limit, write=not args.dry_run,
                          log=lambda m: print(m, file=sys.stderr, flush=True))
    print(json.dumps(spec))
    return 0


def cmd_fit_split(args: argparse.Namespace) -> int:
    from attnmt.bench.decoding import fit_split
    if not args.values or any(v < 0 for v in args.values):
        print("attnmt fit-split: --values must be whole numbers of words, 0 or more", file=sys.stderr)
        return 2
    spec = fit_split(args.model, args.data, list(args.values), args.split, args.beam, args.limit,
                     write=not args.dry_run, log=lambda m: print(m, file=sys.stderr, flush=True))
    print(json.dumps(spec))
    return 0


def cmd_fit_quality(args: argparse.Namespace) -> int:
    from attnmt.bench.quality_fit import fit_quality
    print(json.dumps(fit_quality(args.model, args.data, args.split, args.beam)))
    return 0
