"""`attnmt bench catalog`: a real gettext catalog translated whole, held against translating
its msgids as sentences.

The catalog given (.po or .mo, with its translations) is the reference. A blank copy of it,
every msgstr emptied, goes through what `attnmt translate --file` runs offline
(service/cli.py `cmd_translate_file`: `files.read`, the texts in the documents mode, 64 a call,
`FileDocument.write`); the same texts (msgids and msgid_plurals) go one sentence each through
`Translator.translate`, same model, same beam. The only difference between the two is the file
path: sentence splitting of the documents mode, the writer's placeholder check, the plural
forms. Both are scored against the reference msgstr (msgstr[0] for a plural) with sacreBLEU
on the same entries; fuzzy, obsolete and untranslated reference entries are left out of the
scoring and counted. Beside the scores: entries filled, plural entries with every form filled,
entries the writer left untranslated, placeholders kept (the served model's pattern, counted
as `attnmt evaluate` counts them) and `msgfmt --check` on the written catalog.

A .mo keeps no flags, so its entries lose the `c-format` that xgettext gave them and msgfmt
would check no format string: the reference read from a .mo has it put back where the msgid
is a C format string, as xgettext decides it from the C sources. The writer flags every
translation `fuzzy`, which plain `msgfmt --check` skips; `--use-fuzzy` checks them too (what
a reviewer accepting them all would ship), and is the figure the target reads.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import polib
import sacrebleu

from attnmt.bench import evaluate
from attnmt.bench.loadtest import describe, machine
from attnmt.bench.reports import show
from attnmt.service.inference.search import SearchOptions

CHUNK = 64                  # texts a call, as `attnmt translate --file` sends them
# the requirement: whole-file BLEU within 0.5 of the sentences', read one-sided (a file path
# that scores higher than plain sentences meets it)
TARGET_BLEU_GAP = 0.5
# A C printf directive (gettext's c-format: positions, flags, width, precision, length, and
# <inttypes.h>'s %<PRIu64>); a msgid is c-format when it holds one and every % starts one.
C_DIRECTIVE = re.compile(r"%<PRI\w+>|%(?:\d+\$)?[-+ 0#']*(?:\d+|\*(?:\d+\$)?)?(?:\.(?:\d+|\*(?:\d+\$)?))?"
                         r"(?:hh|h|ll|l|L|q|j|z|Z|t)?[diouxXeEfFgGaAcspnm%]")
FORMAT_FLAGS = re.compile(r"(?:no-)?[a-z0-9+-]+-format$")


def c_format(msgid: str) -> bool:
    directives = C_DIRECTIVE.findall(msgid)
    return any(d != "%%" for d in directives) and "%" not in C_DIRECTIVE.sub("", msgid)


def read_reference(path: Path) -> polib.POFile:
    """The catalog as a POFile; read from a .mo, its c-format flags put back (see the module)."""
    if path.suffix.lower() not in (".po", ".mo"):
        raise ValueError(f"{path}: a catalog with its translations is a .po or .mo file")
    if not path.is_file():          # polib would read a path that is not there as a catalog's text
        raise FileNotFoundError(f"{path}: no such file")
    if path.suffix.lower() == ".mo":
        po = polib.pofile(str(polib.mofile(str(path))))
        for entry in po:
            if c_format(entry.msgid) and not any(FORMAT_FLAGS.match(f) for f in entry.flags):
                entry.flags.append("c-format")
        return po
    return polib.pofile(str(path))


def blank(reference: polib.POFile) -> polib.POFile:
    """A copy with every msgstr and msgstr[n] emptied; header, comments, contexts, flags kept."""
    po = polib.pofile(str(reference))
    for entry in po:
        entry.msgstr = ""
        entry.msgstr_plural = {k: "" for k in entry.msgstr_plural}
    return po


def singular(entry: polib.POEntry) -> str:
    """The msgstr an entry is scored on: msgstr, or msgstr[0] for a plural."""
    return entry.msgstr_plural.get(0, "") if entry.msgid_plural else entry.msgstr


def key(entry: polib.POEntry) -> tuple:
    return entry.msgctxt, entry.msgid, entry.msgid_plural


def scored(reference: polib.POFile) -> tuple[list[polib.POEntry], dict]:
    """The entries scored (translated, neither fuzzy nor obsolete) and how many were left out."""
    entries = [e for e in reference if e.msgid]
    dropped = {"obsolete": sum(e.obsolete for e in entries),
               "fuzzy": sum(not e.obsolete and "fuzzy" in e.flags for e in entries)}
    live = [e for e in entries if not e.obsolete and "fuzzy" not in e.flags]
    kept = [e for e in live if singular(e).strip()]
    dropped["untranslated"] = len(live) - len(kept)
    return kept, dropped


def placeholders_kept(sources: list[str], hyps: list[str], pattern: re.Pattern) -> dict:
    """bench/evaluate.py's count, per text, with the served model's pattern (the writer refuses
    a translation that invents a placeholder too)."""
    return evaluate.placeholders_kept(sources, hyps, pattern.findall, "texts")


def translate_file(name: str, data: bytes, translate_texts: Callable[[list[str], bool], list[str]], target: str,
                   pattern: re.Pattern | None):
    """What `attnmt translate --file` does offline: the file read as the server reads it (no
    cap on its size), its texts translated CHUNK at a time, written back. Returns the written
    bytes, the FileDocument (its `untranslated`) and the texts' translations as they came."""
    from attnmt.service.server.settings import Settings
    from attnmt.service.text import files
    document = files.read(name, data, Settings().file_limits(max(len(data), 1)))
    translations = files.translate_texts(document, translate_texts, CHUNK)
    return document.write(translations, target, pattern), document, translations


def msgfmt_check(text: str) -> dict | None:
    """`msgfmt --check` of a catalog, as shipped and with its fuzzy entries used; None without msgfmt."""
    if shutil.which("msgfmt") is None:
        return None
    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "catalog.po"
        path.write_text(text, encoding="utf-8")
        for label, extra in (("check", []), ("check_use_fuzzy", ["--use-fuzzy"])):
            run = subprocess.run(["msgfmt", "--check", *extra, "-o", "/dev/null", str(path)],
                                 capture_output=True, text=True)
            errors = [line.split(":", 2)[-1].strip() for line in run.stderr.splitlines()
                      if "warning:" not in line and not line.startswith("msgfmt:")]
            out[label] = {"clean": run.returncode == 0, "errors": len(errors), "first_errors": errors[:5]}
    return out


def bleu_chrf(hyps: list[str], refs: list[str]) -> dict:
    # whitespace collapsed on both sides: a translation's layout (leading blanks, "\n") is not its words
    hyps, refs = [" ".join(h.split()) for h in hyps], [" ".join(r.split()) for r in refs]
    return {"bleu": round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2),
            "chrf": round(sacrebleu.corpus_chrf(hyps, [refs]).score, 2)}


def compare(reference: polib.POFile, written: bytes, texts: list[str], file_raw: list[str],
            sentence_raw: list[str], untranslated: int, pattern: re.Pattern, examples: int = 8) -> dict:
    """The whole-file translation (`written`, and `file_raw`, its texts' translations before the
    writer) against the sentence translations of the same `texts`, both scored on the same
    reference entries."""
    out = polib.pofile(written.decode("utf-8"))
    live = [e for e in out if e.msgid and not e.obsolete]
    plural = [e for e in live if e.msgid_plural]
    entries, dropped = scored(reference)
    by_key = {key(e): e for e in live}
    sentence_of = dict(zip(texts, sentence_raw))
    refs = [singular(e) for e in entries]
    whole = [singular(by_key[key(e)]) if key(e) in by_key else "" for e in entries]
    sentences = [sentence_of.get(e.msgid, "") for e in entries]
    filled = [i for i, h in enumerate(whole) if h.strip()]
    # the file as written: every filled form against its msgid (the writer leaves out what lost
    # or invented a placeholder, so the texts' raw translations may count more than a user gets)
    forms = [(e.msgid, e.msgstr) for e in live if e.msgstr.strip()] + [
        (e.msgid if n == 0 else e.msgid_plural, v)
        for e in plural for n, v in sorted(e.msgstr_plural.items()) if v.strip()]
    report = {
        "entries": len(live), "filled": sum(bool(singular(e).strip()) for e in live),
        "plural": len(plural),
        "plural_filled": sum(bool(e.msgstr_plural) and all(v.strip() for v in e.msgstr_plural.values())
                             for e in plural),
        "untranslated": untranslated, "texts": len(texts),
        "scored": len(entries), "dropped": dropped,
        "whole_file": {**bleu_chrf(whole, refs), "placeholders": placeholders_kept(texts, file_raw, pattern),
                       "placeholders_written": placeholders_kept(*zip(*forms), pattern) if forms else None},
        "sentences": {**bleu_chrf(sentences, refs), "placeholders": placeholders_kept(texts, sentence_raw, pattern)},
        # the entries the writer filled only: what the two translations differ by, apart from its refusals
        "filled_only": {"entries": len(filled),
                        "whole_file": bleu_chrf([whole[i] for i in filled], [refs[i] for i in filled]),
                        "sentences": bleu_chrf([sentences[i] for i in filled], [refs[i] for i in filled])},
    }
    report["difference"] = {m: round(report["whole_file"][m] - report["sentences"][m], 2) for m in ("bleu", "chrf")}
    differing = [i for i in range(len(entries)) if " ".join(whole[i].split()) != " ".join(sentences[i].split())]
    report["differing"] = len(differing)
    loss = lambda i: (sacrebleu.sentence_bleu(sentences[i], [refs[i]]).score  # noqa: E731
                      - sacrebleu.sentence_bleu(whole[i], [refs[i]]).score)
    report["examples"] = [{"msgid": entries[i].msgid, "reference": refs[i], "whole_file": whole[i],
                           "sentences": sentences[i]} for i in sorted(differing, key=loss, reverse=True)[:examples]]
    return report


def targets(report: dict) -> dict:
    """The requirement's four parts, each met or not (None: not measured)."""
    check = report.get("msgfmt")
    kept = report["whole_file"]["placeholders_written"] or {"kept": 0, "texts": 0, "invented": 0}
    parts = {"bleu_at_most_0.5_below": report["difference"]["bleu"] >= -TARGET_BLEU_GAP,
             "msgfmt_clean": check["check_use_fuzzy"]["clean"] if check else None,
             "placeholders_kept": kept["kept"] == kept["texts"] and kept["invented"] == 0,
             "plurals_filled": report["plural_filled"] == report["plural"]}
    return {**parts, "met": None if None in parts.values() else all(parts.values())}


def bench_catalog(path: Path, model: Path, beam: int, msgid_language: str = "en", examples: int = 8,
                  out: Path | None = None) -> dict:
    from attnmt.service.inference.engine import Engine
    from attnmt.service.text.documents import translate_documents
    from attnmt.service.text.files.gettext import FORMAT_DIRECTIVES
    from attnmt.service.text.translator import Translator, normalise
    reference = read_reference(path)
    engine = Engine(model)
    m = engine.manifest
    if m.source_language != msgid_language:
        raise ValueError(f"model {m.name} translates {m.source_language}→{m.target_language}, but the catalog's "
                         f"msgids are {msgid_language} (--msgid-language)")
    language = re.split(r"[_@.-]", reference.metadata.get("Language", "") or "")[0]
    if language and language != m.target_language:
        raise ValueError(f"the catalog's translations are {language} (its Language header), model {m.name} "
                         f"translates into {m.target_language}")
    translator = Translator(engine, max_tokens=10_000)      # as `attnmt translate` builds it
    pattern = translator.sentinels.pattern if translator.sentinels is not None else FORMAT_DIRECTIVES
    options = SearchOptions(beam_size=beam).validate()
    empty = blank(reference)

    def documents(texts: list[str], html: bool) -> list[str]:
        return [d.text for d in translate_documents(translator, texts, html, True, options)]
    host = machine()                                        # its load average before the runs
    translator.translate(["Warm-up."], options)
    start = time.perf_counter()
    written, document, file_raw = translate_file(path.with_suffix(".po").name, str(empty).encode("utf-8"),
                                                 documents, m.target_language, pattern)
    file_seconds = time.perf_counter() - start
    texts = document.texts
    start = time.perf_counter()
    sentences = iter(translator.translate([t for t in texts if normalise(t)], options))
    sentence_raw = [next(sentences).best.text if normalise(t) else "" for t in texts]
    sentence_seconds = time.perf_counter() - start
    report = {"machine": host, "catalog": str(path), "model": m.name,
              "direction": f"{m.source_language}→{m.target_language}", "beam": beam,
              **compare(reference, written, texts, file_raw, sentence_raw, document.untranslated, pattern, examples)}
    report["whole_file"]["seconds"] = round(file_seconds, 1)
    report["sentences"]["seconds"] = round(sentence_seconds, 1)
    report["msgfmt"] = msgfmt_check(written.decode("utf-8"))
    report["msgfmt_reference"] = msgfmt_check(str(reference))      # the control: the check itself passes
    report["targets"] = targets(report)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "blank.po").write_text(str(empty), encoding="utf-8")
        (out / "translated.po").write_bytes(written)
        (out / "reference.po").write_text(str(reference), encoding="utf-8")
    return report


def _mark(met: bool | None) -> str:
    return {True: "yes", False: "NO", None: "not measured"}[met]


def _check(check: dict | None, label: str) -> str:
    if check is None:
        return "skipped: msgfmt not installed (Debian: gettext)"
    c = check[label]
    return "clean" if c["clean"] else f"{c['errors']} errors, first: {'; '.join(c['first_errors'][:2])}"


def format_catalog(report: dict) -> str:
    w, s, f, t = report["whole_file"], report["sentences"], report["filled_only"], report["targets"]
    d = report["dropped"]
    held = lambda p: f"{p['kept']}/{p['texts']}, {p['invented']} invented"  # noqa: E731
    lines = [
        f"{report['catalog']}: model {report['model']} ({report['direction']}), beam {report['beam']}",
        describe(report["machine"]), "",
        f"entries {report['entries']}, filled {report['filled']}; plural {report['plural']}, every form filled "
        f"{report['plural_filled']}; left untranslated by the writer {report['untranslated']}",
        f"scored {report['scored']} (left out: fuzzy {d['fuzzy']}, obsolete {d['obsolete']}, untranslated in the "
        f"reference {d['untranslated']}); texts translated {report['texts']}", "",
        "| | whole file | as sentences | difference |", "|---|---:|---:|---:|",
        f"| BLEU | {w['bleu']} | {s['bleu']} | {report['difference']['bleu']:+} |",
        f"| chrF | {w['chrf']} | {s['chrf']} | {report['difference']['chrf']:+} |",
        f"| BLEU, the {f['entries']} entries the writer filled | {f['whole_file']['bleu']} | "
        f"{f['sentences']['bleu']} | |",
        f"| placeholders kept (texts with any) | {held(w['placeholders'])} | {held(s['placeholders'])} | |",
        f"| placeholders kept in the file as written (forms with any) | "
        f"{held(w['placeholders_written']) if w['placeholders_written'] else '—'} | | |",
        f"| seconds | {w['seconds']} | {s['seconds']} | |", "",
        f"entries translated differently: {report['differing']} of {report['scored']}",
        f"msgfmt --check: {_check(report['msgfmt'], 'check')}; with --use-fuzzy (every machine entry): "
        f"{_check(report['msgfmt'], 'check_use_fuzzy')}; the reference: "
        f"{_check(report['msgfmt_reference'], 'check_use_fuzzy')}", "",
        "| target | met |", "|---|---|",
        f"| BLEU at most {TARGET_BLEU_GAP} below the sentences' | {_mark(t['bleu_at_most_0.5_below'])} |",
        f"| msgfmt --check --use-fuzzy clean | {_mark(t['msgfmt_clean'])} |",
        f"| every placeholder kept, none invented (the file as written) | {_mark(t['placeholders_kept'])} |",
        f"| plural entries filled | {_mark(t['plurals_filled'])} |"]
    return "\n".join(lines)


def cmd_bench_catalog(args: argparse.Namespace) -> int:
    from attnmt.service.errors import AttnmtError
    try:
        report = bench_catalog(args.catalog, args.model, args.beam, args.msgid_language, args.examples, args.out)
    except (OSError, ValueError, AttnmtError) as e:       # no such catalog, a model of another direction
        print(f"attnmt bench catalog: {e}", file=sys.stderr)
        return 2
    show(report, format_catalog(report), args.json)
    return 0
