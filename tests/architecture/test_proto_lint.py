"""The API definition passes buf's linter as `make lint-proto` runs it (npm's @bufbuild/buf at the
Makefile's BUF_VERSION, through npx, with proto/buf.yaml: STANDARD and four exceptions, each with
its reason there), and every exception is still needed.

Skipped, with the reason, where npx is missing or cannot fetch buf (a machine without network)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
import yaml

from conftest import REPO

PROTO = REPO / "proto"


def buf_version() -> str:
    return re.search(r"^BUF_VERSION \?= (\S+)$", (REPO / "Makefile").read_text(), re.M)[1]


@pytest.fixture(scope="module")
def buf() -> list[str]:
    npx = shutil.which("npx")
    if npx is None:
        pytest.skip("npx is not installed (Debian's `npm`): buf comes from npm's @bufbuild/buf")
    command = [npx, "--yes", f"@bufbuild/buf@{buf_version()}"]
    try:
        probe = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        pytest.skip("npx did not fetch @bufbuild/buf within 5 minutes")
    if probe.returncode != 0:
        pytest.skip(f"npx could not fetch @bufbuild/buf (no network?): {probe.stderr.strip()[-300:]}")
    return command


def test_the_proto_passes_buf_lint(buf):
    result = subprocess.run([*buf, "lint"], cwd=PROTO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"buf lint (proto/buf.yaml):\n{result.stdout}{result.stderr}"


def test_each_exception_is_one_the_proto_needs(buf):
    """Without its exceptions the proto breaks exactly the rules buf.yaml excepts: one that no
    longer fires is dropped from the list, and nothing else hides behind them."""
    config = yaml.safe_load((PROTO / "buf.yaml").read_text())
    excepted = set(config["lint"]["ignore_only"])
    plain = json.dumps({"version": "v2", "lint": {"use": config["lint"]["use"]}})
    result = subprocess.run([*buf, "lint", "--config", plain, "--error-format", "json"], cwd=PROTO,
                            capture_output=True, text=True, timeout=300)
    broken = {json.loads(line)["type"] for line in result.stdout.splitlines() if line.strip()}
    assert broken == excepted, result.stderr
