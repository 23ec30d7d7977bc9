"""The layout's import rules, read from the source with `ast` (every import, at module level
or inside a function), so that they stay true:

- service/ is layered, each package importing only those below it:
  errors < modeldir < inference < text < server < http < the front (cli, serve, client, plotting);
  the generated stubs sit beside, for server/ and the client;
- service/ never imports model/, bench/ or torch;
- model/ imports from service/ only the model-directory contract (service.modeldir) and
  the domain exceptions (service.errors);
- nothing but bench/ itself (and the tests) imports bench/.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import REPO

# service/'s layers, bottom first; a module may import its own layer and those below it.
LAYERS = ["errors", "modeldir", "inference", "text", "server", "http", "front"]
FRONT = {"cli", "serve", "client", "plotting"}
MODEL_MAY_USE = {"attnmt.service.modeldir", "attnmt.service.errors"}


def dotted(path: Path) -> str:
    """service/inference/engine.py -> attnmt.service.inference.engine"""
    parts = path.relative_to(REPO).with_suffix("").parts
    return "attnmt." + ".".join(p for p in parts if p != "__init__")


def imports(path: Path, text: str | None = None) -> set[str]:
    """Every module `path` imports (or would, holding `text`), absolute: relative imports resolved."""
    package = dotted(path) if path.name == "__init__.py" else dotted(path).rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text() if text is None else text, str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}     # `from pkg import module`
    return found


def sources(world: str) -> list[Path]:
    return sorted(p for p in (REPO / world).rglob("*.py") if "stubs" not in p.parts)


def layer(module: str) -> int | None:
    """The layer of an attnmt.service module (None: the stubs or the package itself)."""
    parts = module.split(".")
    if len(parts) < 3 or parts[2] == "stubs":
        return None
    name = parts[2]
    return LAYERS.index("front") if name in FRONT else LAYERS.index(name) if name in LAYERS else None


def test_every_source_file_is_found():
    assert len(sources("service")) > 40 and len(sources("model")) > 25 and len(sources("bench")) > 10


@pytest.mark.parametrize("path", sources("service"), ids=lambda p: str(p.relative_to(REPO)))
def test_service_imports_only_downward_and_nothing_of_the_other_worlds(path):
    own = layer(dotted(path))
    for module in imports(path):
        root = module.split(".")[0]
        assert root != "torch", f"{module}: service/ never imports torch"
        assert not module.startswith(("attnmt.model", "attnmt.bench")), f"{module}: service/ never imports it"
        if module.startswith("attnmt.service.") and own is not None:
            theirs = layer(module)
            assert theirs is None or theirs <= own, \
                f"{module} is in layer {LAYERS[theirs]}, above this module's ({LAYERS[own]})"


@pytest.mark.parametrize("path", sources("model"), ids=lambda p: str(p.relative_to(REPO)))
def test_model_uses_only_the_contract_of_service(path):
    for module in imports(path):
        assert not module.startswith("attnmt.bench"), f"{module}: model/ never imports bench/"
        if module.startswith("attnmt.service") and module != "attnmt.service":
            assert any(module == allowed or module.startswith(allowed + ".") for allowed in MODEL_MAY_USE), \
                f"{module}: model/ uses only {sorted(MODEL_MAY_USE)} of service/"


def test_the_import_reader_sees_relative_and_nested_imports():
    """The rules above can fail: the reader finds an import inside a function, and a relative one."""
    probe = REPO / "service" / "inference" / "probe.py"
    found = imports(probe, "def f():\n    from ..server import app\n    import torch\n")
    assert {"attnmt.service.server", "attnmt.service.server.app", "torch"} <= found
    assert layer("attnmt.service.server.app") > layer(dotted(probe))
