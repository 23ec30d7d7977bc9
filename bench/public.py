"""`attnmt evaluate-public`: exported models and Apertium on the public test sets (FLORES-200
devtest, newstest2013, Tatoeba...) in one run, with other systems' published figures beside them.

A test set is a pair of line-aligned files `NAME.spa` and `NAME.eng`, as Helsinki-NLP/OPUS-MT-testsets
names them; every pair in the folders given is used, the three headline sets first. A location may
also be the upstream address of one test set (`.../testsets/spa-eng/newstest2013.spa`): both sides
are downloaded once into a cache and their sha256 printed.

Each model translates offline through the serving engine (what `attnmt translate --model` does),
Apertium (`apertium -u spa-eng`) in the same run. Scores are sacreBLEU's corpus BLEU and chrF with
its defaults; every system gets a 95 % bootstrap interval and a paired bootstrap test (Koehn 2004,
sacreBLEU's `--paired-bs`: the same resampled sentences for all) against the first system, a fixed
seed so that a rerun gives the same p-values. The published figures come from bench/published.json.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import shutil
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import sacrebleu

from attnmt.bench.evaluate import apertium
from attnmt.bench.loadtest import describe, machine, spread
from attnmt.bench.reports import show
from attnmt.corpus.splits import read_parallel
from attnmt.service.inference.engine import Engine
from attnmt.service.inference.search import SearchOptions
from attnmt.service.text.translator import Translator

# test-set file suffixes (ISO 639-3, as OPUS-MT-testsets names them) → the manifest's language codes
LANGUAGES = {"spa": "es", "eng": "en"}
# listed first, in this order; any other NAME.spa/NAME.eng pair follows by name
HEADLINE = ("flores200-devtest", "newstest2013", "tatoeba-test-v2021-08-07")
PUBLISHED = Path(__file__).with_name("published.json")
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "attnmt" / "testsets"
SEED = 12345                     # sacreBLEU's own default for SACREBLEU_SEED
SAMPLES = 1000


@dataclass(frozen=True)
class TestSet:
    name: str
    source: Path
    reference: Path
    sha256: dict[str, str]       # file name → sha256


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def is_url(location: str) -> bool:
    return "://" in str(location)


def download(url: str, cache: Path = CACHE, log=print) -> Path:
    """One test set by its upstream address (`.../NAME.spa`, `.../NAME.eng` or `.../NAME`): both
    sides into a folder of `cache` named after the address, once; returns that folder."""
    base = url[:-4] if url.endswith((".spa", ".eng")) else url
    name = base.rstrip("/").rsplit("/", 1)[-1]
    folder = Path(cache) / hashlib.sha256(base.encode()).hexdigest()[:16]
    for suffix in LANGUAGES:
        path = folder / f"{name}.{suffix}"
        if not path.exists():
            folder.mkdir(parents=True, exist_ok=True)
            with urllib.request.urlopen(f"{base}.{suffix}", timeout=60) as response:
                partial = path.with_name(path.name + ".part")
                partial.write_bytes(response.read())
            partial.replace(path)                # a broken download never looks complete
        log(f"{base}.{suffix}: sha256 {sha256(path)} ({path})")
    return folder


def find_testsets(locations: list[str], direction: str = "spa-eng", names: list[str] | None = None,
                  cache: Path = CACHE, log=print) -> tuple[list[TestSet], list[str]]:
    """Every `NAME.src`/`NAME.tgt` pair in the folders (or addresses) given, the headline sets first;
    with `names`, only those. A set found twice is read from the first place; notes say what was
    left out."""
    src, tgt = direction.split("-")
    found: dict[str, TestSet] = {}
    notes = []
    for location in locations:
        folder = download(location, cache, log) if is_url(location) else Path(location)
        if not folder.is_dir():
            raise FileNotFoundError(f"no folder of test sets at {folder}")
        for source in sorted(folder.glob(f"*.{src}")):
            name, reference = source.name[:-len(src) - 1], source.with_suffix(f".{tgt}")
            if not reference.exists() or (names and name not in names):
                continue
            testset = TestSet(name, source, reference, {p.name: sha256(p) for p in (source, reference)})
            if name not in found:
                found[name] = testset
            elif found[name].sha256 != testset.sha256:
                notes.append(f"{name}: the files in {folder} differ from those in {found[name].source.parent}; "
                             "the first were used")
    notes += [f"{name}: not found in {', '.join(map(str, locations))}" for name in names or () if name not in found]
    order = sorted(found, key=lambda n: (HEADLINE.index(n) if n in HEADLINE else len(HEADLINE), n))
    return [found[n] for n in order], notes


def published(direction: str, testset: str, path: Path = PUBLISHED) -> list[dict]:
    """Other systems' published scores on this test set (bench/published.json), each with its source."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return [{**s, "source": {"key": s["source"], **data["sources"][s["source"]]}} for s in data["scores"]
            if s["direction"] == direction and s["testset"] == testset]


@contextlib.contextmanager
def _sacrebleu_seed(seed: int):
    """sacreBLEU's significance tests read their seed from SACREBLEU_SEED only."""
    before = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = str(seed)
    try:
        yield
    finally:
        if before is None:
            del os.environ["SACREBLEU_SEED"]
        else:
            os.environ["SACREBLEU_SEED"] = before


def score_systems(systems: dict[str, list[str]], refs: list[str], samples: int = SAMPLES,
                  seed: int = SEED) -> tuple[dict, dict]:
    """BLEU and chrF of every system with its bootstrap mean and 95 % half-interval, and the paired
    bootstrap of each against the first: sacreBLEU's PairedTest (as `sacrebleu --paired-bs`).
    Returns the scores by system and sacreBLEU's signatures by metric."""
    from sacrebleu.metrics import BLEU, CHRF
    from sacrebleu.significance import PairedTest
    with _sacrebleu_seed(seed):
        signatures, results = PairedTest(list(systems.items()), {"bleu": BLEU(), "chrf": CHRF()}, [refs],
                                         test_type="bs", n_samples=samples)()
    keys = [k for k in results if k != "System"]           # "BLEU", "chrF2", in the order given
    scores = {}
    for i, label in enumerate(results["System"]):
        row: dict = {}
        for metric, key in zip(("bleu", "chrf"), keys):
            result, baseline = results[key][i], results[key][0]
            row[metric] = round(result.score, 2)
            row[f"{metric}_bootstrap"] = {"mean": round(float(result.mean), 2), "ci95": round(float(result.ci), 2)}
            if i:
                row.setdefault("paired", {"against": results["System"][0]})[metric] = {
                    "difference": round(result.score - baseline.score, 2), "p": round(float(result.p_value), 4)}
        scores[label] = row
    return scores, {metric: signatures[key].format() for metric, key in zip(("bleu", "chrf"), keys)}


def _model_systems(models: list[Path], direction: str, notes: list[str]) -> list[tuple[str, Translator]]:
    """(label, Translator) for each model whose manifest translates `direction`."""
    src, tgt = (LANGUAGES[s] for s in direction.split("-"))
    systems = []
    for model in models:
        translator = Translator(Engine(model), max_tokens=10_000)     # as `attnmt translate --model`
        m = translator.engine.manifest
        if (m.source_language, m.target_language) != (src, tgt):
            notes.append(f"{model}: translates {m.source_language}→{m.target_language}, not {src}→{tgt}: skipped")
            continue
        label = m.name if m.name not in dict(systems) else f"{m.name} ({model})"
        systems.append((label, translator))
    return systems


def evaluate_public(models: list[Path], locations: list[str], direction: str = "spa-eng", beam: int = 5,
                    use_apertium: bool = True, limit: int | None = None, names: list[str] | None = None,
                    samples: int = SAMPLES, seed: int = SEED, cache: Path = CACHE, out: Path | None = None,
                    log=print) -> dict:
    """The report: every test set found, every system's scores on it, the published ones beside.
    `limit`: at most this many sentences of each set, evenly spaced (every n-th). `out`: a folder
    for the translations, `NAME.SYSTEM.tgt`."""
    testsets, notes = find_testsets(locations, direction, names, cache, log)
    models_run = _model_systems([Path(m) for m in models], direction, notes)
    if use_apertium and shutil.which("apertium") is None:
        notes.append("Apertium is not installed (apt-get install apertium apertium-eng-spa): its column is skipped")
        use_apertium = False
    report: dict = {
        "date": dt.date.today().isoformat(), "machine": machine(), "direction": direction, "beam": beam,
        "limit": limit, "sacrebleu": sacrebleu.__version__,
        "bootstrap": {"samples": samples, "seed": seed, "against": models_run[0][0] if models_run
                      else "apertium" if use_apertium else None},
        "systems": [{"label": label, "model": str(t.engine.model_dir), "name": t.engine.manifest.name,
                     "version": t.engine.manifest.version} for label, t in models_run]
                   + ([{"label": "apertium", "command": f"apertium -u {direction}"}] if use_apertium else []),
        "notes": notes, "testsets": []}
    tgt = direction.split("-")[1]
    for testset in testsets:
        pairs = list(read_parallel(testset.source, testset.reference))
        chosen = spread(pairs, limit)
        sources, refs = [s for s, _ in chosen], [t for _, t in chosen]
        hyps: dict[str, list[str]] = {}
        for label, translator in models_run:
            log(f"{testset.name}: {label}, beam {beam}, {len(sources)} sentences")
            hyps[label] = [t.best.text for t in translator.translate(sources, SearchOptions(beam_size=beam))]
        if use_apertium:
            log(f"{testset.name}: apertium {direction}")
            translated = apertium(sources, direction)
            if translated is None:
                notes.append(f"{testset.name}: `apertium -u {direction}` failed or changed the number of lines: "
                             "skipped")
            else:
                hyps["apertium"] = translated
        entry = {"name": testset.name, "source": str(testset.source), "reference": str(testset.reference),
                 "sha256": testset.sha256, "sentences": len(pairs), "scored": len(chosen),
                 "sampling": "all" if len(chosen) == len(pairs) else f"{len(chosen)} evenly spaced (every "
                                                                      f"{len(pairs) / len(chosen):.1f}th)",
                 "systems": {}, "published": published(direction, testset.name)}
        if hyps:
            entry["systems"], report["signatures"] = score_systems(hyps, refs, samples, seed)
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            for label, lines in hyps.items():
                (out / f"{testset.name}.{label.replace(' ', '_').replace('/', '_')}.{tgt}").write_text(
                    "\n".join(lines) + "\n", encoding="utf-8")
        report["testsets"].append(entry)
    return report


def _interval(row: dict, metric: str) -> str:
    return f"{row[metric]:.1f} ± {row[f'{metric}_bootstrap']['ci95']:.1f}"


def _difference(row: dict, metric: str) -> str:
    paired = row.get("paired", {}).get(metric)
    return f"{paired['difference']:+.1f} (p {paired['p']:.3f})" if paired else ""


def format_public(report: dict) -> str:
    """One Markdown table: each test set, each system measured, then the published figures."""
    src, tgt = report["direction"].split("-")
    lines = [f"Public test sets, {src}→{tgt}, models at beam {report['beam']}: sacreBLEU BLEU and chrF "
             f"± half the 95 % bootstrap interval; Δ: paired bootstrap against {report['bootstrap']['against']} "
             f"({report['bootstrap']['samples']:,} resamples, seed {report['bootstrap']['seed']}).", "",
             "| Test set | Sentences | System | BLEU | chrF | Δ BLEU (p) | Δ chrF (p) |",
             "|---|---:|---|---:|---:|---:|---:|"]
    for testset in report["testsets"]:
        count = (f"{testset['scored']:,}" if testset["scored"] == testset["sentences"]
                 else f"{testset['scored']:,} of {testset['sentences']:,}")
        first = True
        for label, row in testset["systems"].items():
            lines.append(f"| {testset['name'] if first else ''} | {count if first else ''} | {label} | "
                         f"{_interval(row, 'bleu')} | {_interval(row, 'chrf')} | {_difference(row, 'bleu')} | "
                         f"{_difference(row, 'chrf')} |")
            first = False
        for p in testset["published"]:
            figures = [f"{p[m]:.1f}" if p.get(m) is not None else "–" for m in ("bleu", "chrf")]
            where = f", on {p['on']}" if p.get("on") else ""
            lines.append(f"| {testset['name'] if first else ''} | | {p['system']} (published, {p['source']['name']}"
                         f"{where}) | {figures[0]} | {figures[1]} | | |")
            first = False
    lines += ["", *(f"Note: {n}" for n in report["notes"])]
    if "signatures" in report:
        lines += [f"sacreBLEU: BLEU {report['signatures']['bleu']}; chrF {report['signatures']['chrf']}"]
    lines.append(f"Measured {describe(report['machine'])}.")
    return "\n".join(lines)


def cmd_evaluate_public(args) -> int:
    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)
    try:
        report = evaluate_public(args.model, args.testsets, args.direction, args.beam, args.apertium, args.limit,
                                 args.set, args.samples, args.seed, args.cache, args.out, log)
    except (FileNotFoundError, ValueError, OSError) as e:
        print(f"attnmt evaluate-public: {e}", file=sys.stderr)
        return 2
    show(report, format_public(report), args.json)
    return 0 if report["testsets"] else 1
