"""ONNX Runtime's wheels keep a device id and a usage database under ~/.cache unless
ORT_DISABLE_TELEMETRY is set before it is imported; importing the engine sets it, so neither
`attnmt translate` nor `attnmt serve` writes outside its own files."""

from __future__ import annotations

import os
import subprocess
import sys


def test_translating_writes_nothing_under_home(tiny_model, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("ORT_DISABLE_TELEMETRY", "XDG_CACHE_HOME")}
    env["HOME"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-m", "attnmt.service.cli", "translate", "--model", str(tiny_model),
                           "--beam", "1", "kasa granda ."], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    assert list(tmp_path.rglob("*")) == []
