"""`attnmt`: one command, subcommands for every world that is installed.

The serving commands (serve, translate) live here. The training world's (data, train, average,
export, upgrade-model, store-weights) and the measurement world's (bench, evaluate, evaluate-alignment,
fit-quality) are found through the `attnmt.commands` entry points (pyproject.toml), so that
service/ never imports them and an install without them (the serving image) simply lacks
their commands. Each registers parsers only; its handlers import torch and the rest when run.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from importlib.metadata import entry_points
from pathlib import Path

from attnmt.service.errors import InvalidInput, ModelLoadError
from attnmt.service.inference.search import SearchOptions
from attnmt.service.modeldir.links import format_pharaoh as pharaoh

ALIGNMENTS = ("none", "soft", "words", "hard")


def _whole(minimum: int):
    """An argparse type: a whole number of at least `minimum` (`--beam 0` would otherwise decode
    nothing; `--decode-workers 0` is the default's choice)."""
    bound = "at least 1" if minimum == 1 else f"{minimum} or more"

    def whole(value: str) -> int:
        number = int(value)
        if number < minimum:
            raise argparse.ArgumentTypeError(f"must be {bound}, not {number}")
        return number
    return whole


def _seconds(value: str) -> float:
    """An argparse type: a number of seconds above 0."""
    number = float(value)
    if not number > 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, not {value}")
    return number


def _search_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--beam", type=_whole(1),
                   help="beam size (1: greedy, the fast mode; default: the default_beam_size setting, 5 unless "
                        "ATTNMT_DEFAULT_BEAM_SIZE or the settings file says otherwise; through --server, the server's)")
    p.add_argument("--n-best", type=_whole(1), default=1)
    p.add_argument("--early-exit", action="store_true",
                   help="stop a beam when its best candidate ends (OpenNMT-py's rule), not once "
                        "beam-size hypotheses have finished (Marian's, the default)")
    p.add_argument("--length-penalty", type=float, help="score = log P / length^this (default: the model's, "
                   "chosen on its dev sets; 1.0 where it names none)")
    p.add_argument("--max-length-ratio", type=float, default=1.5)
    p.add_argument("--alignment", choices=ALIGNMENTS, default="none",
                   help="soft: α over pieces; words: α over words; hard: Pharaoh i-j word pairs")
    p.add_argument("--threshold", type=float, help="hard alignment: all links with α >= threshold (default: argmax)")
    p.add_argument("--replace-unk", action="store_true", help="replace <unk> by the most attended source piece")
    p.add_argument("--keep-names", action=argparse.BooleanOptionalAction, default=None,
                   help="keep names the model never learnt as written (default: on for a model with a known-words "
                        "list; --no-keep-names: the model's own words)")
    p.add_argument("--lexicon", action=argparse.BooleanOptionalAction, default=None,
                   help="translate nouns and adjectives the model never learnt, and lines that are a set phrase, "
                        "by its lexicon (default: on for a model with one; --no-lexicon: the model's own words)")
    p.add_argument("--split-above-words", type=_whole(0), metavar="N",
                   help="translate a sentence of more than N words in parts cut after a comma, semicolon or colon "
                        "(default: the model's own, chosen on its dev sets; 0: never)")
    p.add_argument("--json", action="store_true", help="one JSON object per line with everything")


def default_beam_size() -> int:
    """The server's `default_beam_size` setting, read as `attnmt serve` reads it, so that
    offline and served translations agree."""
    from attnmt.service.errors import ConfigError
    from attnmt.service.server.settings import load_settings  # pydantic-settings: only without --beam
    try:
        return load_settings().default_beam_size
    except (ConfigError, OSError) as e:
        raise SystemExit(f"attnmt translate: {e}") from None


def _options(args: argparse.Namespace) -> SearchOptions:
    beam = args.beam if args.beam is not None else (0 if args.server else default_beam_size())
    options = SearchOptions(beam_size=beam, n_best=args.n_best, length_penalty=args.length_penalty,
                            max_length_ratio=args.max_length_ratio, early_exit=args.early_exit,
                            set_phrases=getattr(args, "lexicon", None) is not False)
    # beam 0 asks the server for its default_beam_size; the server validates that request
    return options.validate() if beam else options


def format_hypothesis(hyp, alignment: str, threshold: float | None) -> str:
    """Marian's output layout: `translation ||| alignment`."""
    if alignment == "none":
        return hyp.text
    if alignment == "hard":
        return f"{hyp.text} ||| {pharaoh(hyp.hard_alignment(threshold))}"
    weights = hyp.word_alignment if alignment == "words" else hyp.alignment
    return f"{hyp.text} ||| " + " ".join(",".join(f"{w:.4f}" for w in row) for row in weights)


def hypothesis_json(hyp, threshold: float | None) -> dict:
    return {"text": hyp.text, "score": hyp.score, "log_prob": hyp.log_prob,
            "source_tokens": hyp.source_tokens, "target_tokens": hyp.target_tokens,
            "token_log_probs": [round(x, 5) for x in hyp.token_log_probs],
            "alignment": [[round(float(w), 5) for w in row] for row in hyp.alignment],
            "source_words": hyp.source_words, "target_words": hyp.target_words,
            "word_alignment": [[round(float(w), 5) for w in row] for row in hyp.word_alignment],
            "hard": pharaoh(hyp.hard_alignment(threshold)), **quality_json(hyp),
            "glossary": [vars(m) for m in hyp.glossary]}


def quality_json(hyp) -> dict:
    q = hyp.quality
    if q is None:
        return {}
    return {"quality": {"score": round(q.score, 4), **{k: round(v, 4) for k, v in q.features.items()},
                        "words": [[round(w.mean_log_prob, 4), round(w.min_log_prob, 4), w.pieces] for w in q.words]},
            "suspect": q.suspect}


def _glossary_file(args: argparse.Namespace):
    """--glossary FILE as (source, target) pairs, or None."""
    if not args.glossary:
        return None
    from attnmt.service.text.glossary import read_tsv
    try:
        return [(e.source, e.target) for e in read_tsv(args.glossary)]
    except (OSError, ValueError) as e:
        raise SystemExit(f"attnmt translate: --glossary: {e}") from None


def print_heatmap(hyp, out=sys.stdout) -> None:
    """α over words as shaded cells, for a terminal."""
    shades = " ░▒▓█"
    src, tgt, weights = hyp.source_words, hyp.target_words, hyp.word_alignment
    width = max((len(w) for w in tgt), default=0)
    for j, word in enumerate(src):
        print(" " * (width + 1) + "  " * j + f"↓ {word}", file=out)
    for i, word in enumerate(tgt):
        cells = "".join(shades[min(4, int(w * 5))] * 2 for w in weights[i])
        print(f"{word:>{width}} {cells}", file=out)


def _read_inputs(args: argparse.Namespace) -> list[str]:
    """The sentences: the arguments, or else the input's lines (stdin or --input)."""
    if args.text:
        return _arguments(args.text)
    lines = _input_text(args).split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def _arguments(texts: list[str]) -> list[str]:
    """The command line's sentences; an argument that is not UTF-8 (the shell passed bytes of
    another encoding, which Python keeps as surrogates) is refused by its number."""
    for i, text in enumerate(texts, 1):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise SystemExit(f"attnmt translate: argument {i} is not UTF-8 text") from None
    return texts


def _input_text(args: argparse.Namespace) -> str:
    """The input (stdin or --input) as text with `\\n` line ends (as Python's text mode reads
    \\r\\n and \\r), a leading byte-order mark dropped. Input that is not UTF-8 is refused
    naming the line and column of its first bad byte, rather than translated into garbage or
    failing deep in the tokenizer."""
    if args.input in (None, "-"):
        data = sys.stdin.buffer.read()
    else:
        try:
            data = Path(args.input).read_bytes()
        except OSError as e:
            raise SystemExit(f"attnmt translate: --input {args.input}: {e.strerror}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - data.rfind(b"\n", 0, e.start)
        raise SystemExit(f"attnmt translate: line {line} of the input is not UTF-8 (byte 0x{data[e.start]:02x} "
                         f"at column {column}); convert it first, e.g. with iconv -f latin1 -t utf-8") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _client(args: argparse.Namespace):
    from attnmt.service.client import Client
    read = lambda path: open(path, "rb").read() if path else None  # noqa: E731
    tls = {"root_certificates": read(args.tls_ca), "private_key": read(args.tls_key),
           "certificate_chain": read(args.tls_cert)} if args.tls_ca else {}
    return Client(args.server, timeout=args.timeout, **tls)


def _translator(args: argparse.Namespace):
    if not args.model:
        raise SystemExit("attnmt translate: give --model DIR (offline) or --server HOST:PORT")
    from attnmt.service.inference.engine import Engine, EngineOptions
    from attnmt.service.inference.offline import workers_and_threads
    from attnmt.service.text.translator import Translator
    workers, threads = workers_and_threads(args.device, args.decode_workers)
    engine = Engine(args.model, EngineOptions(device=args.device, precision=args.precision, shortlist=args.shortlist,
                                              intra_op_threads=threads))
    return Translator(engine, max_tokens=10_000, workers=workers)


def document_json(document, threshold: float | None) -> dict:
    """A document with its sentences; word spans are [start, end) code points of the
    input (source) and of `text` (target, best hypothesis)."""
    sentences = []
    for s in document.sentences:
        hypotheses = [{**hypothesis_json(h, threshold), "target_word_spans": spans}
                      for h, spans in zip(s.translation.hypotheses, s.target_word_spans)]
        sentences.append({"source": list(s.source), "target": list(s.target),
                          "source_word_spans": [list(span) for span in s.source_word_spans],
                          "hypotheses": hypotheses})
    return {"source": document.source, "text": document.text, "sentences": sentences}


def cmd_translate_documents(args: argparse.Namespace) -> int:
    """--html / --split-sentences: each argument, or else the whole input, is one document,
    written back whole (its line breaks kept)."""
    entries = _arguments(args.text) if args.text else [_input_text(args)]
    options = _options(args)
    if args.server:
        with _client(args) as client:
            documents = client.translate_documents(entries, options, html=args.html,
                                                   split_sentences=args.split_sentences, threshold=args.threshold,
                                                   replace_unk=args.replace_unk, keep_names=args.keep_names,
                                                   use_lexicon=args.lexicon,
                                                   split_above_words=args.split_above_words, model=args.model_name)
    else:
        from attnmt.service.text.documents import translate_documents
        documents = translate_documents(_translator(args), entries, args.html, args.split_sentences, options,
                                        replace_unk=args.replace_unk, keep_names=args.keep_names,
                                        use_lexicon=args.lexicon, split_above=args.split_above_words)
    out = open(args.output, "w", encoding="utf-8") if args.output not in (None, "-") else sys.stdout
    for document in documents:
        if args.json:
            print(json.dumps(document_json(document, args.threshold), ensure_ascii=False), file=out)
        else:
            out.write(document.text if document.text.endswith("\n") else document.text + "\n")
    out.flush()
    return 0


def cmd_translate_file(args: argparse.Namespace) -> int:
    """--file: the file read by its format (service/text/files/), its texts translated as
    documents (offline, or through --server in calls the server takes), written back into
    its own structure; a progress line on a terminal."""
    from attnmt.service.server.settings import Settings
    from attnmt.service.text import files
    if args.text or args.input or args.html or args.split_sentences:
        raise SystemExit("attnmt translate: --file takes the file alone (no sentences, --input, --html or "
                         "--split-sentences: its format decides)")
    data = args.file.read_bytes()
    s = Settings()
    try:       # as the server reads a file, but with no cap on its size: its texts go in calls of their own
        document = files.read(args.file.name, data, s.file_limits(max(len(data), 1)))
    except InvalidInput as e:
        raise SystemExit(f"attnmt translate: {args.file}: {e}") from None
    options = _options(args)
    chunk = 64                          # texts a call (a progress step)
    progress = sys.stderr.isatty()

    def report(done: int, texts: int) -> None:
        if progress:
            print(f"\r{done}/{texts} texts", end="", file=sys.stderr, flush=True)
    if args.server:
        with _client(args) as client:
            target, pattern = client.get_model(args.model_name).target_language, None
            translations = files.translate_texts(document, lambda texts, html: [
                d.text for d in client.translate_documents(texts, options, html=html, alignment="none",
                                                           replace_unk=args.replace_unk, keep_names=args.keep_names,
                                                           use_lexicon=args.lexicon,
                                                           split_above_words=args.split_above_words,
                                                           model=args.model_name)],
                chunk, report)
    else:
        from attnmt.service.text.documents import translate_documents
        translator = _translator(args)
        target = translator.engine.manifest.target_language
        pattern = translator.sentinels.pattern if translator.sentinels is not None else None
        translations = files.translate_texts(document, lambda texts, html: [
            d.text for d in translate_documents(translator, texts, html, True, options, replace_unk=args.replace_unk,
                                                keep_names=args.keep_names, use_lexicon=args.lexicon,
                                                split_above=args.split_above_words)],
            chunk, report)
    if progress:
        print(file=sys.stderr)
    out = Path(args.output) if args.output not in (None, "-") else None
    written = document.write(translations, target, pattern)
    if out is None and args.output == "-":
        sys.stdout.buffer.write(written)
        return 0
    out = out or args.file.with_name(files.translated_name(args.file.name, target))
    out.write_bytes(written)
    if document.untranslated:
        print(f"attnmt translate: {document.untranslated} entries left untranslated (a translation lost a "
              "placeholder)", file=sys.stderr)
    print(out, file=sys.stderr)
    return 0


def _at_line(error, args: argparse.Namespace) -> str:
    """A server's refusal, its `sentences[i]` told as the input's line or argument too (the client
    sends a long input in several calls, each counting from 0)."""
    details = error.details() or ""
    named = re.search(r"\bsentences\[(\d+)\]", details)
    if named is None:
        return details
    number = getattr(error, "first_sentence", 0) + int(named[1]) + 1
    return f"{'argument' if args.text else 'line'} {number}: {details}"


_LONG_HINT = "; translate long text as documents (--split-sentences), which splits it into sentences"


def _refused(args: argparse.Namespace, start: int, chunk: list[str], translator, options: SearchOptions) -> str:
    """Which sentence of `chunk` (starting at `start` of the input) the translator refuses: `line N`
    of the input or `argument N`. Found again sentence by sentence, only once a batch failed."""
    for i, text in enumerate(chunk):
        try:
            if not translator.copied(text):
                translator.search(text, options)
        except InvalidInput:
            return f"{'argument' if args.text else 'line'} {start + i + 1}"
    return "the input"


def cmd_translate(args: argparse.Namespace) -> int:
    if args.file:
        return cmd_translate_file(args)
    if args.html or args.split_sentences:
        return cmd_translate_documents(args)
    texts = _read_inputs(args)
    options = _options(args)
    to_terminal = args.output in (None, "-") and sys.stdout.isatty()
    picture = bool(args.plot) or (to_terminal and len(texts) == 1 and not args.json)
    if args.server:
        import grpc
        with _client(args) as client:
            # The heatmap, --plot and --json need α even when no alignment is printed.
            wanted = "soft" if (picture or args.json) and args.alignment == "none" else args.alignment
            try:
                translations = client.translate(texts, options, alignment=wanted, threshold=args.threshold,
                                                replace_unk=args.replace_unk, keep_names=args.keep_names,
                                                use_lexicon=args.lexicon, split_above_words=args.split_above_words,
                                                model=args.model_name, glossary=_glossary_file(args),
                                                glossary_name=args.glossary_name)
            except grpc.RpcError as e:
                raise SystemExit(f"attnmt translate: {e.code().name}: {_at_line(e, args)}") from None
    else:
        if args.glossary_name:
            raise SystemExit("attnmt translate: --glossary-name names a glossary stored on a server (--server); "
                             "offline, give the file with --glossary")
        terms, glossary = _glossary_file(args), None
        if terms:                       # imported only then: part of `attnmt translate`'s start-up
            from attnmt.service.text.glossary import Entry, Glossary
            glossary = Glossary([Entry(s, t) for s, t in terms])
        translator = _translator(args)
        translations = []
        batch = 4096        # decode_all sorts each chunk by length: big chunks keep batches full
        progress = sys.stderr.isatty() and len(texts) > batch
        for start in range(0, len(texts), batch):
            chunk = texts[start:start + batch]
            try:
                translations += translator.translate(chunk, options, replace_unk=args.replace_unk,
                                                     glossary=glossary, keep_names=args.keep_names,
                                                     use_lexicon=args.lexicon, split_above=args.split_above_words)
            except InvalidInput as e:
                hint = _LONG_HINT if "tokens" in str(e) else ""      # a sentence longer than the model takes
                raise SystemExit(f"attnmt translate: {_refused(args, start, chunk, translator, options)}: {e}"
                                 f"{hint}") from None
            if progress:
                print(f"\r{len(translations)}/{len(texts)} sentences", end="", file=sys.stderr, flush=True)
        if progress:
            print(file=sys.stderr)
    out = open(args.output, "w", encoding="utf-8") if args.output not in (None, "-") else sys.stdout
    for t in translations:
        for hyp in t.hypotheses:
            if args.json:
                print(json.dumps({"source": t.source, **hypothesis_json(hyp, args.threshold)}, ensure_ascii=False),
                      file=out)
            else:
                print(format_hypothesis(hyp, args.alignment, args.threshold), file=out)
    if picture and to_terminal and len(translations) == 1 and not args.json:
        print_heatmap(translations[0].best)
    if args.plot and translations:
        from attnmt.service.plotting import plot_alignment
        try:
            plot_alignment(translations[0].best, Path(args.plot), title=translations[0].source[:80])
        except ValueError as e:         # matplotlib's: the file's extension names no image format it writes
            raise SystemExit(f"attnmt translate: --plot {args.plot}: {e}") from None
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from attnmt.service.serve import run
    return run(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attnmt", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("serve", help="serve models over gRPC and HTTP (settings: ATTNMT_* or --config)")
    p.add_argument("--config", type=Path, help="TOML or YAML settings file")
    p.add_argument("--model", action="append", type=Path, help="model directory (repeat to serve several)")
    p.add_argument("--port", type=int, help="gRPC port (default 50051)")
    p.add_argument("--metrics-port", type=int, help="Prometheus port (default 8002)")
    p.add_argument("--http-port", type=int, help="HTTP port (default 8080; http_enabled=false turns HTTP off)")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("translate", help="translate text offline (--model) or through a server (--server)")
    p.add_argument("text", nargs="*", help="sentences (default: read --input or stdin, one per line)")
    p.add_argument("--model", type=Path, help="model directory (offline)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda", "openvino"],
                   help="openvino: the CPU through OpenVINO's execution provider (pip install 'attnmt[openvino]')")
    p.add_argument("--precision", default="f32", choices=["f32", "bf16"],
                   help="bf16 (with --device openvino): bfloat16 matrix products, faster on CPUs with AMX")
    p.add_argument("--shortlist", action="store_true",
                   help="offline: use the model's lexical shortlist (faster one sentence at a time, slower in "
                        "large batches; off by default)")
    p.add_argument("--decode-workers", type=_whole(0), default=0, metavar="N",
                   help="offline: decode on N threads, the cores shared out between them (default: two on a CPU "
                        "of two cores or more, else one)")
    p.add_argument("--server", help="HOST:PORT of an attnmt server")
    p.add_argument("--model-name", default="", help="with --server: which served model")
    p.add_argument("--timeout", type=_seconds, default=60.0, help="with --server: seconds a call may take")
    p.add_argument("--tls-ca", help="with --server: PEM CA that signed the server's certificate (enables TLS)")
    p.add_argument("--tls-cert", help="with --tls-ca: client certificate for mutual TLS")
    p.add_argument("--tls-key", help="with --tls-cert: its private key")
    p.add_argument("-i", "--input", help="input file, one sentence a line ('-': stdin)")
    p.add_argument("-o", "--output", "--out", help="output file ('-': stdout; with --file: the translated file, "
                   "by default beside it, named as LibreTranslate names it: guide.po -> guide_en.po)")
    p.add_argument("--file", type=Path, help="a file translated with its structure kept (.txt, .html, .srt, "
                   ".vtt, .po, .pot, .xlf, .docx, .odt), written to --out")
    p.add_argument("--plot", help="write the first sentence's alignment heatmap (PNG)")
    p.add_argument("--html", action="store_true", help="the input is HTML; tags are placed by the alignment "
                   "(each argument, or the whole input, is one document)")
    p.add_argument("--split-sentences", action="store_true", help="each argument, or the whole input, is a "
                   "document: split into sentences, translated, reassembled with its whitespace and line breaks")
    p.add_argument("--glossary", type=Path, help="TSV file of terms (source<TAB>target a line) that must come "
                   "out as given; --json shows which were applied")
    p.add_argument("--glossary-name", default="", help="with --server: a glossary stored on the server")
    _search_arguments(p)
    p.set_defaults(func=cmd_translate)

    for command in sorted(entry_points(group="attnmt.commands"), key=lambda c: (c.name != "model", c.name)):
        try:
            register = command.load()
        except ModuleNotFoundError as e:    # that world is not installed here (the serving image)
            if e.name and command.module.startswith(e.name):
                continue
            raise
        register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args) or 0
    except KeyboardInterrupt:
        return 130
    except (ModelLoadError, InvalidInput) as e:     # a model that cannot load, options out of range: the message
        print(f"attnmt {args.command}: {e}", file=sys.stderr)
        return 1
    except OSError as e:            # a file named on the command line (--output, --plot, --data) that cannot be used
        if e.filename is None and not isinstance(e, FileNotFoundError):
            raise
        print(f"attnmt {args.command}: " + (f"{e.filename}: {e.strerror}" if e.filename else str(e)), file=sys.stderr)
        return 1
    except Exception as e:          # a server's refusal (grpc.RpcError; grpc is imported only with --server)
        code = getattr(e, "code", None)
        if not callable(code) or not hasattr(e, "details"):
            raise
        print(f"attnmt {args.command}: {code().name}: {e.details()}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
