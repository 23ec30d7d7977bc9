"""The HTTP API against its own OpenAPI document: schemathesis (`st run`, every check) sends
requests generated from /openapi.json to a live `attnmt serve`, valid and invalid ones, and
holds every answer to the document: no 500, only documented statuses, content types, headers
and bodies; schema-valid requests accepted, schema-invalid ones refused with a 4xx.

A fixed seed and a bounded number of examples per operation keep it reproducible and within
about a minute on two cores."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import RunningServer

SEED = 20261128
EXAMPLES = 100         # per operation and phase
CONFIG = """
[generation]
# HTTP servers ignore headers they do not know (browsers and proxies add many): an unknown
# header is not invalid data, as the coverage phase would count it
allow-extra-parameters = false

[checks.not_a_server_error]
# 504 is the caller's own deadline running out (X-Request-Timeout: 5e-324), documented
expected-statuses = ["2xx", "3xx", "4xx", "504"]

[checks.positive_data_acceptance]
# 400 too: rules between fields and after tokenization that a JSON Schema cannot state
# (n_best within beam_size, tokens per sentence, a language pair the server translates); 504
# the caller's own deadline
expected-statuses = ["2xx", "400", "403", "404", "429", "504"]
"""


@pytest.fixture(scope="module")
def served(tiny_model):
    with RunningServer([tiny_model], {"ATTNMT_DEFAULT_BEAM_SIZE": "1"}) as server:
        yield server


@pytest.mark.timeout(240)
def test_the_api_holds_to_its_openapi_document(served, tmp_path):
    st = Path(sys.executable).with_name("st")
    if not st.exists() and shutil.which("st") is None:
        pytest.skip("schemathesis is not installed (pip install -e '.[dev]')")
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    command = [str(st if st.exists() else shutil.which("st")), "--config-file", str(config),
               "run", f"{served.http}/openapi.json",
               "--checks", "all", "--seed", str(SEED), "--max-examples", str(EXAMPLES),
               "--phases", "examples,coverage,fuzzing", "--workers", "2", "--request-timeout", "30",
               "--generation-database", "none", "--no-color", "--suppress-health-check", "all",
               "--report", "junit", "--report-dir", str(tmp_path)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=230, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-20000:] + run.stderr[-4000:]
    assert "Traceback" not in "".join(served.log)
