"""What measurement adds to an exported model directory: the manifest sections that are
figures from held-out data, not weights. `attnmt export` writes the directory; bench/
measures it through the serving engine and hands its figures here, so that measuring never
writes a model and building never imports bench/. The sections:

- `shortlist.dev`: greedy BLEU with and without the lexical shortlist (`attnmt evaluate
  --shortlist-change`), merged into the section the export wrote;
- `evaluation`: test-set scores by data directory and split (`attnmt evaluate --write-manifest`);
- `hard_links`: the served hard-link rule chosen on the gold dev split (`attnmt
  evaluate-alignment --write-manifest`), which the manifest's schema checks on the next load;
- `quality`: quality-estimation weights fitted on the dev split(s) (`attnmt fit-quality`);
- `names`: the known-words list that keeps unknown names as written, with its dev change (`attnmt fit-names`);
- `lexicon`: translations of the words the model never learnt, with its dev change (`attnmt fit-lexicon`).
"""

from __future__ import annotations

import json
from pathlib import Path

from attnmt.service.modeldir.manifest import MANIFEST, file_entries, write_manifest


def _read(model_dir: Path) -> dict:
    return json.loads((Path(model_dir) / MANIFEST).read_text(encoding="utf-8"))


def update_manifest(model_dir: Path, **sections) -> None:
    """Merge sections into an exported manifest: a dict into the dict already there (another
    data directory's scores beside the first's), anything else in place of what was there."""
    manifest = _read(model_dir)
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(manifest.get(key), dict):
            manifest[key].update(value)
        else:
            manifest[key] = value
    write_manifest(model_dir, manifest)


def write_hard_links(model_dir: Path, chosen: dict) -> None:
    """The served hard-link rule, in place of any chosen before (validated on the next load)."""
    manifest = _read(model_dir)
    manifest["hard_links"] = chosen
    write_manifest(model_dir, manifest)


def write_quality(model_dir: Path, spec: dict) -> None:
    """Fitted quality-estimation weights, in place of any fitted before."""
    manifest = _read(model_dir)
    manifest["quality"] = spec
    write_manifest(model_dir, manifest)


def write_names(model_dir: Path, spec: dict, section: str = "names", also: list[str] = (),
                gone: list[str] = ()) -> None:
    """The known-words section (or the lexicon's), its file (and the files `also` named) written
    beside the manifest, in place of any before; the files `gone` names leave the directory and
    its list of checksums."""
    manifest = _read(model_dir)
    manifest[section] = spec
    manifest["files"].update(file_entries(Path(model_dir), [spec["file"], *also]))
    for name in gone:
        manifest["files"].pop(name, None)
        (Path(model_dir) / name).unlink(missing_ok=True)
    write_manifest(model_dir, manifest)
