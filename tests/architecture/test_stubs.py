"""Generated code stays generated: the committed stubs are what `make stubs` makes,
and the serving world never imports torch."""

import importlib.util
import subprocess
import sys

from conftest import REPO

_spec = importlib.util.spec_from_file_location("generate_stubs", REPO / "proto" / "generate_stubs.py")
stubs_gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stubs_gen)


def test_committed_stubs_match_the_proto(tmp_path):
    generated_files = stubs_gen.generate(tmp_path)
    assert {path.suffix for path in generated_files} == {".py", ".pyi", ".binpb"}
    for generated in generated_files:
        committed = stubs_gen.STUBS / generated.name
        assert committed.exists(), f"{committed} missing: run `make stubs`"
        # The descriptor set (.binpb) is binary: compared byte for byte, like the text.
        assert committed.read_bytes() == generated.read_bytes(), f"{committed.name} is stale: run `make stubs`"


def test_service_never_imports_torch():
    code = ("import sys, attnmt.service.server.app, attnmt.service.cli, attnmt.service.client; "
            "attnmt.service.cli.build_parser(); "
            "sys.exit(1 if 'torch' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
