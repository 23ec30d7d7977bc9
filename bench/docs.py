"""Figures and the configuration reference in the documentation, written from one source each.

A document marks a generated block with a pair of comments,

    <!-- figures:NAME -->
    ...
    <!-- /figures:NAME -->

and `make docs-figures` (`python -m attnmt.bench.docs`) rewrites what lies between them:
test-set scores and alignment error from each bundled model's `manifest.json`, the other
measured figures from `docs/measured.json` (each with its command, CPU and date), the public
test sets from `docs/public.json` (`make benchmark-public` writes it),
and the settings table from the pydantic model in `service/server/settings.py`. `--check`
rewrites nothing and exits 1 naming every stale block (tests/unit/bench/test_docs.py runs it).

It lives in bench/, not in the serving CLI: it reads measurement outputs, and the serving image
has no use for it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
MODELS = ("transformer-es-en", "rnnsearch-es-en")    # the bundled Spanish→English models, the default first
OTHER_DIRECTIONS = ("transformer-en-es",)              # bundled beside them: their own cards and tables
MEASURED = Path("docs/measured.json")
PUBLIC = Path("docs/public.json")
BLOCK = re.compile(r"(<!-- figures:(?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- /figures:(?P=name) -->)", re.S)
# Test sets as the manifests name them, in the order the tables show them.
TESTSETS = {"bible/test": "Bible", "gettext/test": "software", "everyday/test": "everyday"}


def documents(repo: Path = REPO) -> list[Path]:
    """Every file that may hold marked blocks."""
    return [repo / "README.md", *sorted((repo / "docs").glob("*.md")),
            *sorted((repo / "models").glob("*/MODEL_CARD.md"))]


def manifest(repo: Path, name: str) -> dict:
    return json.loads((repo / "models" / name / "manifest.json").read_text(encoding="utf-8"))


def measured(repo: Path) -> dict:
    return json.loads((repo / MEASURED).read_text(encoding="utf-8"))


def pair(scores: dict | None) -> str:
    return f"{scores['bleu']:.2f} / {scores['chrf']:.2f}" if scores else ""


def table(header: list[str], rows: list[list[str]], right: int = 1) -> str:
    """A Markdown table; columns from `right` on are right-aligned."""
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---" if i < right else "---:" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def machine_name(repo: Path, key: str) -> str:
    return measured(repo)["machines"][key]["name"]


# --- blocks from the manifests ---

def quality(repo: Path) -> str:
    """The headline table: both bundled models beside Apertium on every test set, and gold AER."""
    data = measured(repo)
    prose = data["help_prose"]
    models = {name: manifest(repo, name) for name in MODELS}
    first = models[MODELS[0]]["evaluation"]
    rows = [["Apertium spa-eng (rule-based)"] + [pair(first[k]["apertium"]) for k in TESTSETS]
            + [pair(prose["apertium"]), f"{data['eflomal_aer']['test']:.1f} % (eflomal)"]]
    for name, m in models.items():
        ev = m["evaluation"]
        links = m["hard_links"]
        rows.append([f"`{name}`, beam 5"] + [pair(ev[k]["beam5"]) for k in TESTSETS]
                    + [pair(prose[name]["beam5"]), f"{100 * links['test_aer']:.1f} %"])
        rows.append([f"`{name}`, greedy"] + [pair(ev[k]["greedy"]) for k in TESTSETS]
                    + [pair(prose[name].get("greedy")), ""])
    sizes = [f"{first[k]['sentences']:,}" for k in TESTSETS] + [f"{prose['sentences']:,}"]
    header = ["BLEU / chrF"] + [f"{label} ({n})" for label, n in zip([*TESTSETS.values(), "help prose"], sizes)] \
        + ["gold AER"]
    dates = sorted({e["date"] for m in models.values() for e in m["evaluation"].values()})
    return (table(header, rows) + "\n\n"
            f"sacreBLEU 2.6.0 defaults; Apertium on the same sentences in the same runs; scores through the "
            f"serving engine (`attnmt evaluate --model DIR --data D`), recorded in each model's manifest "
            f"({', '.join(dates)}); help prose: {prose['command']}, {prose['date']}. Gold AER: the served hard "
            f"links on the 100 hand-aligned test pairs (`attnmt evaluate-alignment --model DIR`).")


def evaluation(repo: Path, name: str) -> str:
    """Every test-set figure in one model's manifest, Apertium's on the same sentences beside it."""
    ev = manifest(repo, name)["evaluation"]
    labels = {"greedy": "greedy", "beam5": "beam 5", "greedy-shortlist": "greedy, lexical shortlist",
              "greedy-unprotected": "greedy, placeholders unprotected"}
    rows = []
    for key, label in TESTSETS.items():
        if key not in ev:
            continue
        e = ev[key]
        for run, run_label in labels.items():
            kept = e.get(run, {}).get("placeholders", {})
            if run not in e or (run == "greedy-unprotected" and not kept.get("sentences")):
                continue
            share = f"{kept['kept']:,} of {kept['sentences']:,}" if kept.get("sentences") else ""
            rows.append([f"{label} ({e['sentences']:,})", run_label, f"{e[run]['bleu']:.2f}", f"{e[run]['chrf']:.2f}",
                         share, pair(e.get("apertium")), e["date"]])
    return table(["test set", "search", "BLEU", "chrF", "placeholders kept", "Apertium BLEU / chrF", "date"], rows, 2)


def files(repo: Path, name: str) -> str:
    """What the model directory serves, with sizes (`serving: false` files are not shipped)."""
    m = manifest(repo, name)
    rows = [[f"`{f}`", f"{entry['bytes'] / 1e6:.2f} MB" if entry["bytes"] >= 1e6 else f"{entry['bytes'] / 1e3:.0f} kB"]
            for f, entry in m["files"].items() if entry.get("serving", True)]
    total = sum(entry["bytes"] for entry in m["files"].values() if entry.get("serving", True))
    rows.append(["served in all", f"**{total / 1e6:.1f} MB**"])
    left_out = [f"`{f}`" for f, entry in m["files"].items() if not entry.get("serving", True)]
    tail = (f"\n\nNot shipped (`serving: false`, for re-export only): {', '.join(left_out)}." if left_out else "")
    return table(["file", "size"], rows) + tail


def alignment(repo: Path) -> str:
    data = measured(repo)
    rows = [["eflomal 2.0, trained on the training corpus", "grow-diag-final-and", "",
             f"{data['eflomal_aer']['test']:.1f} {data['eflomal_aer']['ci']}"]]
    for name in MODELS:
        links = manifest(repo, name)["hard_links"]
        reading = manifest(repo, name).get("alignment")
        what = (f"layer {reading['layer']}, head {', '.join(map(str, reading['heads']))}"
                f"{', Shift-Att' if reading.get('shift_att') else ''}; {links['rule']}" if reading else links["rule"])
        rows.append([f"`{name}`", what, f"{100 * links['dev_aer']:.1f}",
                     f"{100 * links['test_aer']:.1f} [{100 * links['test_aer_ci'][0]:.1f}, "
                     f"{100 * links['test_aer_ci'][1]:.1f}]"])
    return table(["aligner", "served reading", "dev AER %", "test AER % [95 % CI]"], rows, 2)


# --- blocks from docs/measured.json ---

def measured_table(repo: Path, key: str) -> str:
    """A table kept in docs/measured.json: header, rows, and where it was measured."""
    entry = measured(repo)[key]
    text = table(entry["header"], entry["rows"], entry.get("right", 1))
    if "machine" not in entry:      # each row names its own machine and date
        command = f" `{entry['command']}`." if "command" in entry else ""
        return text + f"\n\n{entry['note']}{command}"
    where = machine_name(repo, entry["machine"])
    return text + f"\n\n{entry['note']} Measured {entry['date']} on {where}: `{entry['command']}`."


def public(repo: Path) -> str:
    """The public test sets: `attnmt evaluate-public`'s JSON when present, else the figures recorded."""
    path = repo / PUBLIC
    if path.exists():
        report = json.loads(path.read_text(encoding="utf-8"))
        rows = []
        for testset in report["testsets"]:
            count = (f"{testset['scored']:,}" if testset["scored"] == testset["sentences"]
                     else f"{testset['scored']:,} of {testset['sentences']:,}")
            for label, row in testset["systems"].items():
                rows.append([testset["name"], count, label, f"{row['bleu']:.1f}", f"{row['chrf']:.1f}"])
            for p in testset.get("published", []):
                figures = [f"{p[m]:.1f}" if p.get(m) is not None else "–" for m in ("bleu", "chrf")]
                rows.append([testset["name"], "", f"{p['system']} (published)", *figures])
        m = report.get("machine", {})
        cpu = f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores" if isinstance(m, dict) else str(m)
        return (table(["test set", "sentences", "system", "BLEU", "chrF"], rows, 3)
                + f"\n\nBeam {report['beam']}; measured {report['date']} on {cpu}: `make benchmark-public "
                  "PUBLIC_TESTSETS=DIR` (DIR: a copy of OPUS-MT-testsets' `testsets/spa-eng`, for newstest2013; "
                  "FLORES-200 and Tatoeba come from `tests/data/public`), Apertium in the same run. Published "
                  "figures are copied from their sources (`bench/published.json`), not measured here.")
    return measured_table(repo, "public_baseline")


def config(repo: Path) -> str:
    """Every setting, in the order `service/server/settings.py` declares them."""
    from attnmt.service.server.settings import Settings
    rows = []
    for name, field in Settings.model_fields.items():
        default = field.default_factory() if field.default_factory is not None else field.default
        rows.append([f"`{name}`", f"`ATTNMT_{name.upper()}`", f"`{show(default, repo)}`", field.description or ""])
    return table(["setting", "environment", "default", "meaning"], rows, 4)


def show(value, repo: Path) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Path):
        return str(value.relative_to(repo)) if value.is_absolute() and value.is_relative_to(repo) else str(value)
    if isinstance(value, (list, tuple)):
        return ",".join(show(v, repo) for v in value) if value else "(empty)"
    if isinstance(value, dict):
        return ",".join(f"{k}={show(v, repo)}" for k, v in value.items()) if value else "(empty)"
    return str(value)


def generators() -> dict[str, Callable[[Path], str]]:
    blocks: dict[str, Callable[[Path], str]] = {
        "quality": quality, "alignment": alignment, "public-baseline": public, "config": config,
        **{key: (lambda repo, key=key: measured_table(repo, key))
           for key in ("speed-cpu", "speed-gpu", "overload", "http", "headline-speed")},
    }
    for name in MODELS + OTHER_DIRECTIONS:
        blocks[f"evaluation-{name}"] = lambda repo, name=name: evaluation(repo, name)
        blocks[f"files-{name}"] = lambda repo, name=name: files(repo, name)
    return blocks


def rewrite(text: str, render: Callable[[str], str]) -> str:
    """`text` with every marked block's body replaced by render(NAME)."""
    return BLOCK.sub(lambda m: m.group(1) + render(m.group("name")).rstrip("\n") + "\n" + m.group(4), text)


def update(repo: Path = REPO, check: bool = False) -> list[str]:
    """Rewrite every stale block (or, with check, only list them): 'FILE: NAME' for each."""
    blocks, cache, stale = generators(), {}, []

    def render(name: str) -> str:
        if name not in blocks:
            raise KeyError(f"no generator for the marked block figures:{name}")
        if name not in cache:
            cache[name] = blocks[name](repo)
        return cache[name]

    for path in documents(repo):
        if not path.exists():
            continue
        text = path.read_text(encoding="utf-8")
        new = rewrite(text, render)
        if new != text:
            old_bodies = {m.group("name"): m.group("body") for m in BLOCK.finditer(text)}
            new_bodies = {m.group("name"): m.group("body") for m in BLOCK.finditer(new)}
            stale += [f"{path.relative_to(repo)}: {n}" for n in new_bodies if new_bodies[n] != old_bodies.get(n)]
            if not check:
                path.write_text(new, encoding="utf-8")
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnmt.bench.docs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="rewrite nothing; exit 1 if a block is stale")
    args = parser.parse_args(argv)
    stale = update(check=args.check)
    for line in stale:
        print(("stale: " if args.check else "rewrote: ") + line)
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
