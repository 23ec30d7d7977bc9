"""What goes into the serving image, checked without a container engine: the build context
(the tree less `.dockerignore`, matched the way Docker's and Buildah's pattern matcher does),
what the Dockerfile copies out of it, and the dependency locks it installs. The image itself
is run by `deploy/smoke-test.sh`, by hand, where docker or podman works."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from attnmt.service.errors import ModelLoadError
from attnmt.service.modeldir.manifest import MANIFEST, load_manifest
from attnmt.service.modeldir.manifest import NOT_SERVED as NOT_SERVED_FILES
from conftest import REPO

ROOT = REPO
MODELS = ["models/transformer-es-en", "models/rnnsearch-es-en", "models/transformer-en-es"]     # the default first
MODEL = MODELS[0]
LOCKS = ROOT / "deploy" / "requirements"
ORT_BUILDS = {"cpu": {"onnxruntime"}, "openvino": {"onnxruntime", "onnxruntime-ep-openvino"},
              "gpu": {"onnxruntime-gpu", "nvidia-cuda-runtime", "nvidia-cudnn-cu13"}}
# The model directory's files that serving never reads: out of the context; the manifest marks them.
NOT_SERVED = set(NOT_SERVED_FILES)
# Environment markers as the image evaluates them (CPython 3.11 on Linux x86_64).
IMAGE_MARKERS = {"python_version": "3.11", "python_full_version": "3.11.2", "implementation_name": "cpython",
                 "platform_python_implementation": "CPython", "sys_platform": "linux", "platform_system": "Linux",
                 "platform_machine": "x86_64", "os_name": "posix"}


# --- the builder's view: .dockerignore and COPY ---

def _pattern_regex(pattern: str) -> re.Pattern:
    """A .dockerignore pattern as moby's patternmatcher compiles it: `*` and `?` stop at a
    slash, `**` crosses any number of folders, and the whole path must match."""
    out, i = "", 0
    while i < len(pattern):
        ch = pattern[i]
        if pattern.startswith("**", i):
            i += 2
            if pattern.startswith("/", i):
                i += 1
            out += ".*" if i == len(pattern) else "(.*/)?"
            continue
        if ch == "*":
            out += "[^/]*"
        elif ch == "?":
            out += "[^/]"
        elif ch == "\\" and i + 1 < len(pattern):
            i += 1
            out += re.escape(pattern[i])
        elif ch == "[":
            end = pattern.index("]", i)
            out += pattern[i:end + 1]
            i = end
        else:
            out += re.escape(ch)
        i += 1
    return re.compile(f"^{out}$")


def read_dockerignore(text: str) -> list[tuple[bool, str, re.Pattern]]:
    """(exception, cleaned pattern, regex) for each line, as moby's ignorefile.ReadAll reads it."""
    patterns = []
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        pattern = line.strip()
        exception = pattern.startswith("!")
        pattern = os.path.normpath(pattern.removeprefix("!").strip()).lstrip("/")
        patterns.append((exception, pattern, _pattern_regex(pattern)))
    return patterns


def ignored(path: str, patterns: list[tuple[bool, str, re.Pattern]]) -> bool:
    """moby's MatchesOrParentMatches: the last pattern that matches the path or one of its
    folders decides, and an exception (`!`) keeps it."""
    parents = path.split("/")[:-1]
    matched = False
    for exception, _, regex in patterns:
        if exception != matched:
            continue
        if regex.match(path) or any(regex.match("/".join(parents[:i + 1])) for i in range(len(parents))):
            matched = not exception
    return matched


@cache
def context_files() -> frozenset[str]:
    """The files the builder sends: it skips an ignored folder unless an exception pattern
    reaches inside it."""
    patterns = read_dockerignore((ROOT / ".dockerignore").read_text())
    files = set()
    for folder, dirs, names in os.walk(ROOT):
        rel = os.path.relpath(folder, ROOT)
        prefix = "" if rel == "." else rel + "/"
        dirs[:] = [d for d in dirs if not ignored(prefix + d, patterns)
                   or any(exception and (p + "/").startswith(prefix + d + "/") for exception, p, _ in patterns)]
        files |= {prefix + n for n in names if not ignored(prefix + n, patterns)}
    return frozenset(files)


def dockerfile_instructions() -> list[tuple[int, str, list[str]]]:
    """(stage, instruction, arguments), continuation lines joined; stages count from 0."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    out, stage = [], -1
    for line in text.splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        instruction = words[0].upper()
        stage += instruction == "FROM"
        out.append((stage, instruction, words[1:]))
    return out


def copied_from_context() -> dict[str, set[str]]:
    """Each COPY source that reads the build context (not another stage), with the context
    files it brings in: a folder brings everything under it, a glob what it matches."""
    files = context_files()
    copied = {}
    for _, instruction, args in dockerfile_instructions():
        if instruction != "COPY" or any(a.startswith("--from") for a in args):
            continue
        for source in [a for a in args if not a.startswith("--")][:-1]:
            regex = _pattern_regex(source.rstrip("/"))
            copied[source] = {f for f in files
                              if regex.match(f) or any(regex.match(p) for p in _parents(f))}
    return copied


def _parents(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def runtime_env() -> dict[str, str]:
    """The ENV of the Dockerfile's last stage."""
    env = {}
    last = max(stage for stage, _, _ in dockerfile_instructions())
    for stage, instruction, args in dockerfile_instructions():
        if instruction == "ENV" and stage == last:
            env.update(a.split("=", 1) for a in args if "=" in a)
    return env


def test_dockerignore_patterns_match_as_the_builder_matches():
    """The matcher's rules on the cases this .dockerignore relies on (Docker's documented
    semantics)."""
    patterns = read_dockerignore("# comment\n*\n!service/\n!deploy/requirements/\n"
                                 "models/*/eval/\n**/*.pyc\n*.log\n")
    assert [p for _, p, _ in patterns] == ["*", "service", "deploy/requirements", "models/*/eval", "**/*.pyc",
                                           "*.log"]
    assert not ignored("service/inference/engine.py", patterns)
    assert not ignored("deploy/requirements/cpu.txt", patterns)
    assert ignored("deploy/README.md", patterns)
    assert ignored("data/bible/train.es", patterns)
    assert ignored("service/__pycache__/engine.cpython-311.pyc", patterns)      # ** crosses folders
    assert ignored("models/m/eval/report.json", read_dockerignore("models/*/eval/\n"))
    assert not ignored("models/m/x/eval/report.json", read_dockerignore("models/*/eval/\n"))  # * stops at /
    assert ignored("app.log", patterns)
    assert not ignored("service/app.log", read_dockerignore("*.log\n"))        # a bare name is the top level's


# --- the context and what is copied ---

def test_context_keeps_out_what_serving_never_reads():
    files = context_files()
    assert all(f"{model}/{MANIFEST}" in files for model in MODELS) and "pyproject.toml" in files, \
        "the allow-list lost the essentials"
    assert [f for f in files if Path(f).name in NOT_SERVED] == []
    assert [f for f in files if "/eval/" in f"/{f}"] == []
    assert [f for f in files if f.split("/")[0] in {"tests", "data", "runs", "docs", "benchmarks", ".git",
                                                    ".venv", "build", ".ci"}] == []
    assert [f for f in files if f.startswith("deploy/") and not f.startswith("deploy/requirements/")] == []
    assert [f for f in files if "__pycache__" in f or f.endswith(".pyc")] == []
    # and what a working tree may hold but a fresh clone does not
    patterns = read_dockerignore((ROOT / ".dockerignore").read_text())
    for path in ("data/bible/train.es", "runs/rnnsearch-es-en/best.pt", ".venv/bin/python", "tests/test_x.py",
                 f"{MODEL}/checkpoint.pt", f"{MODEL}/eval/bible/report.json", "models/other-model/weights.bin",
                 "service/__pycache__/engine.cpython-311.pyc", "notes.txt", "build/lib/attnmt/x.py"):
        assert ignored(path, patterns), path


def test_every_copy_finds_its_files():
    """A COPY whose source the context lacks fails the build; one that selects nothing is a typo."""
    copied = copied_from_context()
    assert copied, "no COPY from the build context"
    assert {source: len(files) for source, files in copied.items() if not files} == {}


def test_image_gets_the_package_and_the_locks():
    files = set().union(*copied_from_context().values())
    package = {f for f in context_files() if f.startswith("service/")}
    assert package <= files, "the whole service package (its graphs and stubs too)"
    assert {"pyproject.toml", "README.md", "model/cli.py", "model/configs/rnnsearch-es-en.yaml"} <= files
    assert {f"deploy/requirements/{build}.txt" for build in ORT_BUILDS} <= files


@pytest.mark.parametrize("MODEL", MODELS)
def test_image_gets_every_model_file_serving_reads(tmp_path, MODEL):
    """The model files copied are those the manifest lists, less those it marks `serving: false`
    (NOT_SERVED); the directory as copied loads, every checksum checked, with its manifest as it is."""
    manifest = json.loads((ROOT / MODEL / MANIFEST).read_text())
    copied = {f.removeprefix(MODEL + "/") for f in set().union(*copied_from_context().values())
              if f.startswith(MODEL + "/")}
    not_served = {name for name, entry in manifest["files"].items() if entry.get("serving") is False}
    assert not_served == NOT_SERVED & set(manifest["files"])
    assert copied == (set(manifest["files"]) - not_served) | {MANIFEST, "MODEL_CARD.md"}      # the card ships too
    read = {manifest["tokenizer"], *manifest["graphs"].values(), "weights.bin"}
    if manifest.get("shortlist"):
        read.add(manifest["shortlist"]["file"])
    assert read <= copied, "a graph, the tokenizer, the weights or the shortlist left out"

    image_model = tmp_path / Path(MODEL).name
    image_model.mkdir()
    for name in copied:
        shutil.copy(ROOT / MODEL / name, image_model / name)
    load_manifest(image_model, verify=True)
    (image_model / "weights.bin").unlink()               # a file serving reads may not be missing
    with pytest.raises(ModelLoadError, match="weights.bin is listed in the manifest but missing"):
        load_manifest(image_model, verify=False)


def test_the_model_directories_copied_are_the_ones_served():
    assert runtime_env()["ATTNMT_MODELS"] == ",".join(f"/{model}" for model in MODELS)
    copies = [args for _, instruction, args in dockerfile_instructions() if instruction == "COPY"]
    for model in MODELS:
        assert [f"{model}/", f"/{model}/"] in copies
    assert ["--from=build", "/models/", "/models/"] in copies


# --- ONNX Runtime starts quietly ---

def test_onnx_runtime_starts_quietly_with_the_image_environment():
    """In the image HOME is /nonexistent: ONNX Runtime's telemetry could not keep its device id
    there and warned at every start. /proc/... stands in for it (not writable, even by root);
    the environment is otherwise empty, as CI variables switch that telemetry off by themselves."""
    def start(extra: dict[str, str]) -> str:
        env = {"PATH": os.environ["PATH"], "HOME": "/proc/nonexistent", **extra}
        result = subprocess.run([sys.executable, "-c", "import onnxruntime"], env=env, capture_output=True,
                                text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        return result.stderr

    if "telemetry" not in start({}):
        pytest.skip("this ONNX Runtime says nothing of telemetry without a writable home: nothing to silence")
    ort_env = {k: v for k, v in runtime_env().items() if k.startswith("ORT_")}
    assert start(ort_env) == "", f"with the image's {ort_env}"


# --- the locks ---

def lock(build: str) -> dict[str, str]:
    """{package: version} of deploy/requirements/BUILD.txt; every entry pinned with hashes."""
    text = (LOCKS / f"{build}.txt").read_text()
    entries = re.split(r"\n(?=[A-Za-z0-9])", re.sub(r"^#.*\n", "", text, flags=re.MULTILINE).strip())
    pins = {}
    for entry in entries:
        match = re.match(r"([A-Za-z0-9._-]+)==(\S+)", entry)
        assert match, f"{build}.txt: not a pin: {entry.splitlines()[0]}"
        assert "--hash=sha256:" in entry, f"{build}.txt: {match[1]} has no hash"
        pins[canonicalize_name(match[1])] = match[2]
    return pins


@cache
def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


@pytest.mark.parametrize("build", sorted(ORT_BUILDS))
def test_lock_pins_what_pyproject_asks_for(build):
    """Every runtime dependency and the build backend, at a version pyproject allows: a dependency
    added to pyproject without `make lock` would be missing from the image (pip --no-deps)."""
    pins = lock(build)
    wanted = [Requirement(r) for r in pyproject()["project"]["dependencies"] + pyproject()["build-system"]["requires"]]
    if build == "openvino":
        wanted += [Requirement(r) for r in pyproject()["project"]["optional-dependencies"]["openvino"]]
    for requirement in wanted:
        name = canonicalize_name(requirement.name)
        if name in {"onnxruntime", "onnxruntime-gpu"}:
            continue                    # each lock names its own build (ORT_BUILDS)
        if requirement.marker and not requirement.marker.evaluate(IMAGE_MARKERS):
            continue                    # not for the image's platform
        assert name in pins, f"{build}.txt lacks {requirement}: run `make lock`"
        assert requirement.specifier.contains(pins[name], prereleases=True), f"{build}.txt: {name}=={pins[name]} " \
                                                                             f"but pyproject asks {requirement}"


def test_locks_differ_only_in_the_onnx_runtime_build():
    pins = {build: lock(build) for build in ORT_BUILDS}
    for build, names in ORT_BUILDS.items():
        assert names <= set(pins[build]), f"{build}.txt lacks {names - set(pins[build])}"
    assert "onnxruntime-gpu" not in pins["cpu"] and "onnxruntime-gpu" not in pins["openvino"]
    assert "onnxruntime" not in pins["gpu"], "two ONNX Runtime builds in one environment overwrite each other"
    versions = {pins["cpu"]["onnxruntime"], pins["openvino"]["onnxruntime"], pins["gpu"]["onnxruntime-gpu"]}
    assert len(versions) == 1, f"one ONNX Runtime release in every image, not {versions}"
    shared = set(pins["cpu"]) & set(pins["gpu"]) & set(pins["openvino"])
    assert {name: {pins[b][name] for b in pins} for name in shared if len({pins[b][name] for b in pins}) > 1} == {}


def test_dockerfile_installs_the_lock_for_its_build():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "COPY deploy/requirements/ requirements/" in dockerfile
    assert 'pip install --no-cache-dir --no-deps --require-hashes -r "requirements/${ORT}.txt"' in dockerfile
    assert "pip install --no-cache-dir --no-deps --no-build-isolation ." in dockerfile
    assert sorted(p.stem for p in LOCKS.glob("*.txt")) == sorted(ORT_BUILDS)
