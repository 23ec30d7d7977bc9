"""Writes the serving image's dependency locks, deploy/requirements/{cpu,gpu,openvino}.txt
(`make lock`): one for each ONNX Runtime build the Dockerfile's ORT argument names, which the
image build installs exactly (`pip install --no-deps --require-hashes`).

Each lock is pyproject.toml's runtime dependencies and build backend with that ONNX Runtime
build, resolved by `pip install --dry-run --report` for the image: CPython 3.11 on Linux
x86_64 with Debian bookworm's glibc 2.36, wheels only. pip reads the packages' metadata alone
(the 2 GB of CUDA wheels stay on the index) and reports the sha256 of each file it chose. The
gpu lock is resolved first; the cpu and openvino locks take its ONNX Runtime release (the CPU
wheel's releases come out first) and its pins for every package they share, so the three images
differ only in the ONNX Runtime build.

pip evaluates environment markers on the interpreter that runs it, so this must run on the
image's: CPython 3.11 on Linux x86_64. Pins that pyproject.toml still allows are kept, so adding
a dependency adds its packages and moves nothing else; `--upgrade` (`make lock UPGRADE=1`)
resolves every package afresh.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
LOCKS = ROOT / "deploy" / "requirements"
ORT_NAMES = {"onnxruntime", "onnxruntime-gpu"}          # each lock names its own build
# ORT argument -> (pyproject extras, the ONNX Runtime requirement); gpu first: the others take its release.
BUILDS = {"gpu": ((), "onnxruntime-gpu[cuda,cudnn]"),
          "cpu": ((), "onnxruntime=={release}"),
          "openvino": (("openvino",), "onnxruntime=={release}")}
# The image's wheel tags: CPython 3.11, x86_64, manylinux up to glibc 2.36 (Debian bookworm).
IMAGE_TAGS = ["--python-version", "3.11", "--implementation", "cp", "--abi", "cp311", "--only-binary", ":all:",
              "--platform", "manylinux2014_x86_64",
              *[arg for minor in range(5, 37) for arg in ("--platform", f"manylinux_2_{minor}_x86_64")]]
PIN = re.compile(r"^([A-Za-z0-9._-]+)==(\S+)", re.MULTILINE)


def canonical(name: str) -> str:
    """A package name as the index compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def name_of(requirement: str) -> str:
    return canonical(re.match(r"\s*([A-Za-z0-9._-]+)", requirement)[1])


def requested(build: str, release: str | None) -> list[str]:
    """What the lock for `build` is resolved from, as pyproject.toml states it."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras, ort = BUILDS[build]
    wanted = project["project"]["dependencies"] + [r for e in extras
                                                   for r in project["project"]["optional-dependencies"][e]]
    return [*project["build-system"]["requires"], *(r for r in wanted if name_of(r) not in ORT_NAMES),
            ort.format(release=release)]


def pins(path: Path) -> dict[str, str]:
    """{package: version} of a lock, or {} if there is none yet."""
    return {canonical(name): version for name, version in PIN.findall(path.read_text())} if path.exists() else {}


def resolve(requirements: list[str], keep: dict[str, str]) -> dict[str, tuple[str, str]]:
    """{package: (version, sha256)} that pip would install on the image, `keep` as constraints."""
    # pip's default index, the one the image build installs from, whatever this machine's pip
    # configuration adds: a local mirror or wheel folder could give files the build cannot find.
    env = {k: v for k, v in os.environ.items() if k not in {"PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS",
                                                           "PIP_NO_INDEX", "PIP_CONSTRAINT"}}
    env["PIP_CONFIG_FILE"] = os.devnull
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as constraints:
        constraints.write("".join(f"{name}=={version}\n" for name, version in keep.items()))
        constraints.flush()
        result = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                                 "--report", "-", *IMAGE_TAGS, "--constraint", constraints.name, *requirements],
                                env=env, capture_output=True, text=True)
    if result.returncode != 0:
        hint = "; a kept pin may no longer fit pyproject.toml: `make lock UPGRADE=1`" if keep else ""
        sys.exit(f"make lock: pip could not resolve {requirements}{hint}\n{result.stderr}")
    resolved = {}
    for item in json.loads(result.stdout)["install"]:
        name, version = canonical(item["metadata"]["name"]), item["metadata"]["version"]
        sha256 = item["download_info"].get("archive_info", {}).get("hashes", {}).get("sha256")
        if sha256 is None:
            sys.exit(f"make lock: the index gave no sha256 for {name} {version}")
        resolved[name] = (version, sha256)
    return resolved


def write(build: str, requirements: list[str], resolved: dict[str, tuple[str, str]]) -> None:
    header = [f"# The serving image's Python packages with ORT={build} (Dockerfile), written by `make lock`",
              "# (deploy/lock_requirements.py): the image build installs exactly these files, each checked",
              "# against its hash. Resolved for CPython 3.11 on Linux x86_64 (glibc 2.36), wheels only, from",
              "# pyproject.toml and the ONNX Runtime build:",
              *(f"#   {r}" for r in requirements)]
    lines = [f"{name}=={version} --hash=sha256:{sha256}" for name, (version, sha256) in sorted(resolved.items())]
    (LOCKS / f"{build}.txt").write_text("\n".join(header + lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upgrade", action="store_true", help="resolve every package afresh (default: keep pins)")
    args = parser.parse_args()
    if (sys.implementation.name, sys.version_info[:2], sys.platform, platform.machine()) \
            != ("cpython", (3, 11), "linux", "x86_64"):
        sys.exit("make lock: pip evaluates environment markers on its own interpreter, which must be the image's, "
                 f"CPython 3.11 on Linux x86_64 (this is {platform.python_implementation()} "
                 f"{platform.python_version()} on {sys.platform} {platform.machine()})")
    LOCKS.mkdir(exist_ok=True)
    gpu, release = {}, None
    for build in BUILDS:                    # gpu first
        keep = {} if args.upgrade else pins(LOCKS / f"{build}.txt")
        keep |= {name: version for name, (version, _) in gpu.items()}
        requirements = requested(build, release)
        resolved = resolve(requirements, keep)
        if build == "gpu":
            gpu, release = resolved, resolved["onnxruntime-gpu"][0]
        write(build, requirements, resolved)
        print(f"{build}.txt: {len(resolved)} packages, "
              f"{' '.join(f'{n}=={resolved[n][0]}' for n in sorted(resolved) if n.startswith('onnxruntime'))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
