"""The PyTorch-world subcommands of `attnmt`: data, train, average, export, upgrade-model, evaluate,
evaluate-alignment.

This module imports nothing heavy at import time, so `attnmt serve` (which
registers these parsers) never loads torch; each handler imports what it needs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from attnmt.service.bench_cli import model_and_data_arguments


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="prepare a parallel corpus")
    corpus = p.add_subparsers(dest="corpus", required=True)
    c = corpus.add_parser("bible", help="Reina-Valera 1909 / World English Bible from SWORD")
    c.add_argument("out_dir", type=Path)
    c.set_defaults(func=cmd_data_bible)
    c = corpus.add_parser("gettext", help="software messages from the Spanish gettext catalogs of Debian packages")
    c.add_argument("out_dir", type=Path)
    c.add_argument("--cache", type=Path, help="where downloaded and unpacked packages are kept (default: OUT/cache)")
    c.set_defaults(func=cmd_data_gettext)
    c = corpus.add_parser("copies", help="copy variants of a corpus's training pairs: a word both sides share "
                                         "verbatim replaced on both by an English word (model/copies.py)")
    c.add_argument("out_dir", type=Path)
    c.add_argument("--from", dest="data_dir", type=Path, required=True, help="data directory with train.{es,en}")
    c.add_argument("--share", type=float, default=1.0, help="share of the eligible pairs turned into variants")
    c.set_defaults(func=cmd_data_copies)
    _held_out_corpus(corpus, "prose", cmd_data_prose, "LibreOffice's and GNOME's help: paragraphs paired by id "
                     "or structure, sentences aligned (Gale-Church), split by page (model/prose_corpus.py)", cache=True)
    _held_out_corpus(corpus, "backtranslate", cmd_data_backtranslate, "everyday English (WordNet examples, "
                     "fortunes) turned into tagged synthetic Spanish by Apertium (model/backtranslation.py)", cache=True)
    _held_out_corpus(corpus, "cldr", cmd_data_cldr, "weekday, month, country, language, unit and relative-time "
                     "phrase pairs from CLDR via babel (model/cldr_corpus.py)")
    _held_out_corpus(corpus, "dictionary", cmd_data_dictionary, "everyday nouns, adjectives and verbs as short "
                     "phrase pairs from Apertium's Spanish-English dictionary (model/dictionary_corpus.py)", cache=True)
    c = corpus.add_parser("mix", help="concatenate corpora into one training directory (train oversampled, dev capped)")
    c.add_argument("out_dir", type=Path)
    c.add_argument("corpora", nargs="+", help="DATA_DIR or DATA_DIR:WEIGHT (train repeated WEIGHT times)")
    c.add_argument("--dev-max", type=int, default=500, help="dev pairs kept per corpus")
    c.set_defaults(func=cmd_data_mix)
    c = corpus.add_parser("links", help="statistical word alignments (eflomal, the `align` extra) of the training "
                                        "pairs of every DATA_DIR: DATA_DIR/train.links, one Pharaoh line per pair "
                                        "(model/statistical_aligner.py)")
    c.add_argument("data_dirs", type=Path, nargs="+", metavar="DATA_DIR")
    c.add_argument("--gold", type=Path, help="gold-alignment directory ({split}.tsv): its pairs join the aligner's "
                                             "text, unlabelled, and their links go to --gold-out")
    c.add_argument("--gold-out", type=Path, default=Path("data/gold-links"),
                   help="where the gold pairs' links go: {split}.links, links.json (default: data/gold-links)")
    c.add_argument("--src", default="es")
    c.add_argument("--tgt", default="en")
    c.set_defaults(func=cmd_data_links)

    p = sub.add_parser("train", help="train an RNNsearch or a Transformer (resumes an interrupted run)")
    p.add_argument("--config", type=Path, help="YAML training config (keys: model/train.py TrainConfig)")
    p.add_argument("--run", type=Path, required=True, help="run directory: checkpoints, logs, tokenizer")
    p.add_argument("--data-dir", help="override data_dir: {split}.tsv or {split}.{src,tgt}")
    p.add_argument("--max-minutes", type=float, help="override max_minutes")
    p.add_argument("--init-from", help="override init_from: a run or model directory whose weights start this run")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("export", help="export a run's best checkpoint to an ONNX model directory")
    p.add_argument("--run", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--name", help="model name (default: the output directory's name)")
    p.add_argument("--checkpoint", default="best.pt")
    p.add_argument("--parity-sentences", type=int, default=64, help="dev sentences used for the parity check")
    p.add_argument("--quantize", choices=["int8"],
                   help="write int8 graphs (int8 weights; activations quantized per row, so batch-mates do not change "
                        "a sentence's quantization); batch invariance, BLEU change and speed on the dev split go into "
                        "the manifest")
    p.add_argument("--no-shortlist", dest="shortlist", action="store_false",
                   help="no lexical shortlist (by default one is built from the run's training split and its dev "
                        "BLEU change goes into the manifest)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("upgrade-model", help="re-export a schema_version 1 model directory from its checkpoint.pt "
                                             "as schema_version 2 (step graphs that choose tokens)")
    p.add_argument("model_dir", type=Path, metavar="DIR")
    p.add_argument("--out", type=Path, help="write the upgraded directory here (default: upgrade DIR in place)")
    p.set_defaults(func=cmd_upgrade_model)

    p = sub.add_parser("average", help="average the weights of a run's last N kept checkpoints (checkpoints/step-*.pt, "
                                       "`keep_checkpoints`) into one weights file")
    p.add_argument("--run", type=Path, required=True)
    p.add_argument("--last", type=int, default=5, help="how many of the latest checkpoints (default 5)")
    p.add_argument("--out", default="averaged.pt", help="file name in the run directory (default averaged.pt)")
    p.set_defaults(func=cmd_average)

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
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("evaluate-alignment", help="AER, precision, recall of a model's alignments (every rule) and "
                                                  "of links files on the hand-aligned gold set, bootstrap 95 %% CIs")
    p.add_argument("--model", type=Path, default=_REPO / "models" / "rnnsearch-es-en")
    p.add_argument("--gold", type=Path, default=_REPO / "tests" / "data" / "gold-alignments",
                   help="directory with {split}.tsv (id, domain, source, target, links)")
    p.add_argument("--splits", nargs="+", default=["dev", "test"])
    p.add_argument("--tune-split", default="dev", help="the split thresholds are chosen on")
    p.add_argument("--links", action="append", default=[], metavar="NAME=FILE",
                   help="score a Pharaoh links file too, one line per gold pair; {split} in FILE is replaced "
                        "(repeatable), e.g. eflomal=data/gold-links/{split}.links")
    p.add_argument("--samples", type=int, default=1000, help="bootstrap resamples of the pairs")
    p.add_argument("--seed", type=int, default=25)
    p.add_argument("--json", type=Path, help="also write the report here")
    p.set_defaults(func=cmd_evaluate_alignment)

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
    b = bench.add_parser("glossary", help="a glossary file on the test split: occurrences honoured (present and "
                                          "aligned), BLEU/chrF without and with it (no torch)")
    _measure_arguments(b)
    b.add_argument("--glossary", type=Path, default=_REPO / "tests" / "data" / "glossary-bible.tsv",
                   help="TSV glossary (default: tests/data/glossary-bible.tsv)")
    b.add_argument("--beam", type=int, default=5)
    b.set_defaults(func=cmd_bench_glossary)
    b = bench.add_parser("quality", help="quality estimation on the test split: Spearman with sentence chrF, AUROC "
                                         "for the worst 10 %%, Align true vs mismatched references (no torch)")
    _measure_arguments(b)
    b.add_argument("--beam", type=int, default=5)
    b.add_argument("--table", type=Path, help="also write the Markdown table here")
    b.set_defaults(func=cmd_bench_quality)
    from attnmt.service.bench_cli import register as register_serving_benches   # bench overload, bench soak
    register_serving_benches(bench)


_REPO = Path(__file__).resolve().parent.parent


# The dev and test sentences every new training corpus must leave out: the everyday set
# (never trained on), the Bible's and the software messages' (`make data` builds those first).
HELD_OUT = (Path("tests/data/everyday"), Path("data/bible"), Path("data/gettext"))


def _held_out_corpus(corpus: argparse._SubParsersAction, name: str, func, help: str, cache: bool = False) -> None:
    """A corpus command that leaves out the held-out sets' sentences (and may cache packages)."""
    c = corpus.add_parser(name, help=help)
    c.add_argument("out_dir", type=Path)
    c.add_argument("--held-out", type=Path, nargs="+", default=list(HELD_OUT), metavar="DIR",
                   help="directories whose dev and test sentences leave the training data (default: "
                        + " ".join(map(str, HELD_OUT)) + ")")
    if cache:
        c.add_argument("--cache", type=Path, help="where downloaded and unpacked packages are kept (default: OUT/cache)")
    c.set_defaults(func=func)


def _bench_arguments(b: argparse.ArgumentParser) -> None:
    model_and_data_arguments(b)
    b.add_argument("--repeats", type=int, default=5)
    b.add_argument("--json", type=Path, help="also write the report here")


def _measure_arguments(b: argparse.ArgumentParser) -> None:
    model_and_data_arguments(b, sentences=False)
    b.add_argument("--json", type=Path, help="also write the report here")


def cmd_data_bible(args: argparse.Namespace) -> int:
    from .data import extract_bible
    print(json.dumps(extract_bible(args.out_dir)))
    return 0


def cmd_data_gettext(args: argparse.Namespace) -> int:
    from .gettext_corpus import extract_gettext
    print(json.dumps(extract_gettext(args.out_dir, args.cache)))
    return 0


def cmd_data_prose(args: argparse.Namespace) -> int:
    from .prose_corpus import extract_prose
    print(json.dumps(extract_prose(args.out_dir, args.held_out, args.cache)))
    return 0


def cmd_data_backtranslate(args: argparse.Namespace) -> int:
    from .backtranslation import extract_backtranslation
    print(json.dumps(extract_backtranslation(args.out_dir, args.held_out, args.cache)))
    return 0


def cmd_data_cldr(args: argparse.Namespace) -> int:
    from .cldr_corpus import extract_cldr
    print(json.dumps(extract_cldr(args.out_dir, args.held_out)))
    return 0


def cmd_data_dictionary(args: argparse.Namespace) -> int:
    from .dictionary_corpus import extract_dictionary
    print(json.dumps(extract_dictionary(args.out_dir, args.held_out, args.cache)))
    return 0


def cmd_data_copies(args: argparse.Namespace) -> int:
    from .copies import write_copies
    print(json.dumps(write_copies(args.out_dir, args.data_dir, args.share)))
    return 0


def cmd_data_mix(args: argparse.Namespace) -> int:
    from .gettext_corpus import mix
    corpora = []
    for spec in args.corpora:
        path, _, weight = spec.partition(":")
        corpora.append((Path(path), int(weight or 1)))
    print(json.dumps(mix(args.out_dir, corpora, args.dev_max)))
    return 0


def cmd_data_links(args: argparse.Namespace) -> int:
    from .statistical_aligner import write_links
    print(json.dumps(write_links(args.data_dirs, args.gold, args.gold_out, args.src, args.tgt)))
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from .train import TrainConfig, train
    run_config = args.run / "config.yaml"
    config = args.config or (run_config if run_config.exists() else None)
    cfg = TrainConfig.from_yaml(config, data_dir=args.data_dir, max_minutes=args.max_minutes,
                               init_from=args.init_from)
    result = train(cfg, args.run)
    print(json.dumps({k: v for k, v in result.items() if k != "history"}))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    import yaml

    from .data import corpus_files, read_parallel
    from .export import export
    cfg = yaml.safe_load((args.run / "config.yaml").read_text())
    if cfg.get("architecture", "rnnsearch") != "rnnsearch":
        print(f"attnmt export: {args.run} is a {cfg['architecture']}; only RNNsearch runs export so far "
              "(`attnmt evaluate --run` scores it in PyTorch)", file=sys.stderr)
        return 2
    src, tgt = corpus_files(Path(cfg["data_dir"]), "dev", cfg["src_lang"], cfg["tgt_lang"])
    sentences = [s for s, _ in read_parallel(src, tgt)][:args.parity_sentences]
    history_file = args.run / "history.json"
    history = json.loads(history_file.read_text()) if history_file.exists() else []
    best = max(history, key=lambda h: h["dev_bleu"]) if history else {}
    training = {"config": cfg, "best_dev": best, "validations": len(history),
                "data_card": (Path(cfg["data_dir"]) / "DATA_CARD.md").read_text()
                if (Path(cfg["data_dir"]) / "DATA_CARD.md").exists() else None}
    lexical = None
    if args.shortlist:
        from .shortlist import from_corpus
        lexical = from_corpus(args.run / "spm.model", Path(cfg["data_dir"]), cfg["src_lang"], cfg["tgt_lang"])
    if not args.quantize:
        manifest = export(args.run / args.checkpoint, args.run / "spm.model", args.out, args.name or args.out.name,
                          cfg["src_lang"], cfg["tgt_lang"], sentences, training, lexical_shortlist=lexical)
        print(json.dumps(manifest["export_parity"]))
        if lexical is not None:
            from .evaluate import shortlist_change
            print(json.dumps(shortlist_change(args.out, Path(cfg["data_dir"]))))
        return 0
    import tempfile

    from .quantize import quantize_int8
    pairs = list(read_parallel(src, tgt))
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = Path(tmp) / "fp32"
        export(args.run / args.checkpoint, args.run / "spm.model", fp32, args.name or args.out.name,
               cfg["src_lang"], cfg["tgt_lang"], sentences, training, lexical_shortlist=lexical)
        report = quantize_int8(fp32, args.out, [s for s, _ in pairs], [t for _, t in pairs])
    print(json.dumps(report))
    return 0


def cmd_upgrade_model(args: argparse.Namespace) -> int:
    from .upgrade import UpgradeError, upgrade_model
    try:
        manifest = upgrade_model(args.model_dir, args.out)
    except UpgradeError as e:
        print(f"attnmt upgrade-model: {e}", file=sys.stderr)
        return 2
    print(json.dumps(manifest["export_parity"]))
    return 0


def cmd_average(args: argparse.Namespace) -> int:
    from .train import average_checkpoints
    kept = sorted((args.run / "checkpoints").glob("step-*.pt"))
    if len(kept) < args.last:
        print(f"attnmt average: {len(kept)} checkpoints in {args.run / 'checkpoints'}, {args.last} asked for "
              "(keep_checkpoints in the training config keeps them)", file=sys.stderr)
        return 2
    print(json.dumps(average_checkpoints(kept[-args.last:], args.run / args.out)))
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    if args.run is not None:
        from .evaluate_run import evaluate_run
        report = evaluate_run(args.run, args.data, args.split, args.beam, args.checkpoint, args.model,
                              args.heatmaps, args.out)
        print(json.dumps(report, indent=2))
        return 0
    if args.model is None:
        print("attnmt evaluate: --model or --run is needed", file=sys.stderr)
        return 2
    from .evaluate import evaluate
    report = evaluate(args.model, args.data, args.split, args.beam, args.heatmaps, args.out, args.write_manifest)
    print(json.dumps(report, indent=2))
    return 0


def cmd_evaluate_alignment(args: argparse.Namespace) -> int:
    from .evaluate_alignment import evaluate_alignment, format_report
    links = dict(item.split("=", 1) for item in args.links)
    report = evaluate_alignment(args.model, args.gold, tuple(args.splits), args.tune_split, links,
                                args.samples, args.seed)
    return _bench_report(report, format_report(report), args.json)


def cmd_bench_engine(args: argparse.Namespace) -> int:
    from .bench import main
    return main(args.model, args.data, args.sentences, args.repeats, args.threads, args.json)


def _numbers(kind):
    """An argparse type: comma-separated numbers."""
    return lambda text: tuple(kind(x) for x in text.split(",") if x.strip())


def cmd_bench_server(args: argparse.Namespace) -> int:
    from attnmt.service.bench_server import bench_server, format_bench_server, plot_bench_server

    from .bench import source_sentences
    report = bench_server(args.model, source_sentences(args.model, args.data, args.sentences), args.concurrency,
                          args.loads, args.rates, args.requests, args.beam, args.seed,
                          settings=dict(item.split("=", 1) for item in args.set), traces=args.traces,
                          continuous_settings=dict(item.split("=", 1) for item in args.set_continuous))
    if args.plot:
        plot_bench_server(report, args.plot)
    return _bench_report(report, format_bench_server(report), args.json)


def cmd_bench_offline(args: argparse.Namespace) -> int:
    from .bench import bench_offline, format_offline
    report = bench_offline(args.model, args.data, args.sentences, args.repeats, args.beam, args.apertium_pair)
    return _bench_report(report, format_offline(report), args.json)


def cmd_bench_serving(args: argparse.Namespace) -> int:
    from attnmt.service.loadtest import bench_serving, format_serving

    from .bench import source_sentences
    sentences = source_sentences(args.model, args.data, args.sentences)
    settings = dict(item.split("=", 1) for item in args.set)
    report = bench_serving(args.model, sentences, args.repeats, args.concurrency, args.latency_sentences, settings)
    return _bench_report(report, format_serving(report), args.json)


def cmd_bench_glossary(args: argparse.Namespace) -> int:
    # Serving-side measurements: the handler dispatches to service/ (the model directory is the contract).
    from attnmt.service.glossary_bench import bench_glossary, format_glossary
    report = bench_glossary(args.model, args.data, args.glossary, beam=args.beam)
    return _bench_report(report, format_glossary(report), args.json)


def cmd_bench_quality(args: argparse.Namespace) -> int:
    from attnmt.service.quality_fit import bench_quality, format_quality
    report = bench_quality(args.model, args.data, beam=args.beam)
    table = format_quality(report)
    if args.table:
        args.table.write_text(table + "\n", encoding="utf-8")
    return _bench_report(report, table, args.json)


def _bench_report(report: dict, table: str, out: Path | None) -> int:
    print(table)
    if out:
        out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    return 0
