"""The layout's import rules, read from the source with `ast` (every import, at module level
or inside a function), so that they stay true:

- service/ is layered, each package importing only those below it:
  errors < modeldir < inference < text < core < the transports (grpc, http) < the front
  (cli, serve, client, plotting); the generated stubs sit beside, for every layer from core up;
- server/ holds two layers: its gRPC transport (the modules in GRPC) and, below both transports,
  the core they call (every other module: core.py's API, scheduling, the worker, the cache...);
- neither transport imports the other, and the core imports no transport library (grpc,
  starlette, uvicorn): a transport reaches the core only through its plain API;
- service/ never imports model/, bench/, corpus/ or torch;
- model/ imports from service/ only the model-directory contract (service.modeldir) and
  the domain exceptions (service.errors), and never bench/: building never needs bench/
  (model/export/measured.py records what bench/ measures in a model directory);
- bench/ imports from service/ only what a measurer needs (BENCH_MAY_USE): the contract, the
  engine and text layer it runs, the client and stubs it calls a server with, the settings it
  measures against; never the server's core or transports; and it never writes a manifest:
  measuring never writes a model;
- corpus/ (reading corpora, shared by model/ and bench/) imports nothing of the worlds;
- nothing but bench/ itself (and the tests) imports bench/.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import REPO

# service/'s layers, bottom first; a module may import its own layer and those below it. The
# transports share a rank: neither imports the other.
LAYERS = ["errors", "modeldir", "inference", "text", "core", "grpc", "http", "front"]
RANK = {name: i for i, name in enumerate(LAYERS)} | {"http": LAYERS.index("grpc")}
FRONT = {"cli", "serve", "client", "plotting"}
# server/'s gRPC transport; the rest of server/ is the core
GRPC = {"app", "servicer", "streaming", "wire", "status", "interceptors", "reflection"}
TRANSPORT_LIBRARIES = ("grpc", "grpc_health", "grpc_reflection", "grpc_status", "starlette", "uvicorn")
MODEL_MAY_USE = {"attnmt.service.modeldir", "attnmt.service.errors"}
# What a measurer needs of service/: the contract, the engine it times and the text layer users
# get, the client and stubs it calls a running server with, α as a picture, and the settings
# whose defaults it measures against (server.settings is configuration, not the core's machinery).
BENCH_MAY_USE = MODEL_MAY_USE | {"attnmt.service.inference", "attnmt.service.text", "attnmt.service.client",
                                 "attnmt.service.stubs", "attnmt.service.plotting", "attnmt.service.server.settings"}


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


def within(module: str, packages: set[str]) -> bool:
    return any(module == package or module.startswith(package + ".") for package in packages)


def sources(world: str) -> list[Path]:
    return sorted(p for p in (REPO / world).rglob("*.py") if "stubs" not in p.parts)


def layer(module: str) -> str | None:
    """The layer of an attnmt.service module (None: the stubs or a package itself)."""
    parts = module.split(".")
    if len(parts) < 3 or parts[2] == "stubs":
        return None
    name = parts[2]
    if name == "server":
        return None if len(parts) < 4 else "grpc" if parts[3] in GRPC else "core"
    return "front" if name in FRONT else name if name in LAYERS else None


def violations(path: Path, text: str | None = None) -> list[str]:
    """What `path` (holding `text`, if given) imports against the rules for service/."""
    own = layer(dotted(path))
    found = []
    for module in sorted(imports(path, text)):
        root = module.split(".")[0]
        if root == "torch":
            found.append(f"{module}: service/ never imports torch")
        if module.startswith(("attnmt.model", "attnmt.bench", "attnmt.corpus")):
            found.append(f"{module}: service/ never imports it")
        if own in LAYERS[:LAYERS.index("grpc")] and root in TRANSPORT_LIBRARIES:
            found.append(f"{module}: a transport's library, and this module is in layer {own}, below the transports")
        theirs = layer(module) if module.startswith("attnmt.service.") else None
        if own is not None and theirs is not None and theirs != own and RANK[theirs] >= RANK[own]:
            found.append(f"{module} is in layer {theirs}, "
                         + ("the other transport" if RANK[theirs] == RANK[own] else f"above this module's ({own})"))
    return found


def model_violations(path: Path, text: str | None = None) -> list[str]:
    """What a module of model/ imports against its rules."""
    found = []
    for module in sorted(imports(path, text)):
        if module.startswith("attnmt.bench"):
            found.append(f"{module}: model/ never imports bench/ (building never needs bench/)")
        if module.startswith("attnmt.service.") and not within(module, MODEL_MAY_USE):
            found.append(f"{module}: model/ uses only {sorted(MODEL_MAY_USE)} of service/")
    return found


def bench_violations(path: Path, text: str | None = None) -> list[str]:
    """What a module of bench/ imports against its rules."""
    found = []
    for module in sorted(imports(path, text)):
        if module.startswith("attnmt.service.") and not within(module, BENCH_MAY_USE):
            found.append(f"{module}: bench/ uses only {sorted(BENCH_MAY_USE)} of service/")
        if module.endswith(".write_manifest"):
            found.append(f"{module}: measuring never writes a model (model/export/measured.py records figures)")
    return found


def corpus_violations(path: Path, text: str | None = None) -> list[str]:
    """What a module of corpus/ imports of the worlds: nothing."""
    return [f"{module}: corpus/ imports nothing of service/, model/ or bench/"
            for module in sorted(imports(path, text))
            if module.startswith("attnmt.") and not within(module, {"attnmt.corpus"})]


def test_every_source_file_is_found():
    assert len(sources("service")) > 40 and len(sources("model")) > 25 and len(sources("bench")) > 10
    assert len(sources("corpus")) >= 3
    assert {p.stem for p in (REPO / "service" / "server").glob("*.py")} >= GRPC | {"core"}


@pytest.mark.parametrize("path", sources("service"), ids=lambda p: str(p.relative_to(REPO)))
def test_service_imports_only_downward_and_nothing_of_the_other_worlds(path):
    assert violations(path) == []


@pytest.mark.parametrize("path", sources("model"), ids=lambda p: str(p.relative_to(REPO)))
def test_model_uses_only_the_contract_of_service_and_never_bench(path):
    assert model_violations(path) == []


@pytest.mark.parametrize("path", sources("bench"), ids=lambda p: str(p.relative_to(REPO)))
def test_bench_uses_only_what_a_measurer_needs_of_service_and_writes_no_model(path):
    assert bench_violations(path) == []


@pytest.mark.parametrize("path", sources("corpus"), ids=lambda p: str(p.relative_to(REPO)))
def test_corpus_imports_nothing_of_the_worlds(path):
    assert corpus_violations(path) == []


def test_the_import_reader_sees_relative_and_nested_imports():
    """The rules above can fail: the reader finds an import inside a function, and a relative one."""
    probe = REPO / "service" / "inference" / "probe.py"
    found = imports(probe, "def f():\n    from ..server import app\n    import torch\n")
    assert {"attnmt.service.server", "attnmt.service.server.app", "torch"} <= found
    assert len(violations(probe, "def f():\n    from ..server import app\n    import torch\n")) == 2


@pytest.mark.parametrize("module, text, what", [
    ("server/core.py", "from attnmt.service.server.servicer import client_of\n", "layer grpc"),
    ("server/scheduler.py", "import grpc\n", "a transport's library"),
    ("server/cache.py", "from attnmt.service.http.errors import CallEnded\n", "layer http"),
    ("http/front.py", "from attnmt.service.server.servicer import TranslatorServicer\n", "the other transport"),
    ("http/native.py", "from attnmt.service.server.app import SERVICE_NAME\n", "the other transport"),
    ("server/servicer.py", "from attnmt.service.http import front\n", "the other transport"),
])
def test_the_layering_fails_on_a_violation(module, text, what):
    """The core sits below both transports, and neither transport reaches into the other."""
    found = violations(REPO / "service" / module, text)
    assert found and all(what in problem for problem in found)


@pytest.mark.parametrize("rules, module, text, what", [
    (violations, "service/modeldir/manifest.py", "from attnmt.corpus.splits import read_split\n", "never imports it"),
    (model_violations, "model/export/probe.py", "from attnmt.bench.quality_fit import fit_quality\n",
     "building never needs bench/"),
    (model_violations, "model/export/probe.py", "from attnmt.service.text.translator import Translator\n",
     "model/ uses only"),
    (bench_violations, "bench/probe.py", "from attnmt.service.server.scheduler import Scheduler\n", "bench/ uses only"),
    (bench_violations, "bench/probe.py", "from attnmt.service.http.front import HttpFront\n", "bench/ uses only"),
    (bench_violations, "bench/probe.py", "from attnmt.service.cli import main\n", "bench/ uses only"),
    (bench_violations, "bench/probe.py", "def f():\n    from attnmt.service.modeldir.manifest import write_manifest\n",
     "measuring never writes a model"),
    (corpus_violations, "corpus/probe.py", "from attnmt.service.modeldir.links import format_pharaoh\n",
     "imports nothing"),
    (corpus_violations, "corpus/probe.py", "from ..model import train\n", "imports nothing"),
])
def test_the_rules_between_the_worlds_fail_on_a_violation(rules, module, text, what):
    found = rules(REPO / module, text)
    assert found and all(what in problem for problem in found)


@pytest.mark.parametrize("rules, module, text", [
    (model_violations, "model/data/probe.py", "from attnmt.corpus.word_links import read_gold\n"),
    (model_violations, "model/export/probe.py", "from attnmt.service.modeldir.manifest import write_manifest\n"),
    (bench_violations, "bench/probe.py", "from attnmt.model.export.measured import write_quality\n"),
    (bench_violations, "bench/probe.py", "from attnmt.service.server.settings import Settings\n"),
])
def test_the_rules_between_the_worlds_allow_what_each_needs(rules, module, text):
    """Training and measurement read corpora; model/export writes manifests, and bench/ hands it figures."""
    assert rules(REPO / module, text) == []
