"""One default search offline and served: `attnmt translate --model DIR`
without --beam decodes with the `default_beam_size` setting (5; ATTNMT_DEFAULT_BEAM_SIZE,
or a settings file), as the server does for a request that sets none; `--beam 1` is the
fast greedy mode and reads no settings."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from attnmt.service.cli import main
from attnmt.service.text.translator import Translator
from conftest import synthetic_corpus

TEXTS = [s for s, _ in synthetic_corpus(6, seed=11)]


def translate(tiny_model, *flags: str, **env: str) -> str:
    """`attnmt translate --model` as a user runs it, in an environment without ATTNMT_*."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ATTNMT_")}
    return subprocess.run([sys.executable, "-m", "attnmt.service.cli", "translate", "--model", str(tiny_model),
                           *flags, *TEXTS], env={**clean, **env}, capture_output=True, text=True, timeout=120,
                          check=True).stdout


@pytest.fixture
def searched(monkeypatch):
    """The beam size of each offline `Translator.translate` call made through the CLI."""
    for name in list(os.environ):
        if name.startswith("ATTNMT_"):
            monkeypatch.delenv(name)
    beams: list[int] = []
    original = Translator.translate

    def recording(self, texts, options, *args, **kwargs):
        beams.append(options.beam_size)
        return original(self, texts, options, *args, **kwargs)
    monkeypatch.setattr(Translator, "translate", recording)
    return beams


def test_offline_without_beam_is_the_servers_default_beam(tiny_model):
    default = translate(tiny_model)
    assert default == translate(tiny_model, "--beam", "5")
    assert len(default.splitlines()) == len(TEXTS)
    assert translate(tiny_model, **{"ATTNMT_DEFAULT_BEAM_SIZE": "1"}) == translate(tiny_model, "--beam", "1")


def test_the_default_comes_from_the_setting(tiny_model, searched, monkeypatch, tmp_path, capsys):
    model = ["translate", "--model", str(tiny_model), TEXTS[0]]
    assert main(model) == 0 and searched == [5]                  # Settings.default_beam_size
    assert main(model + ["--beam", "1"]) == 0 and searched[-1] == 1
    monkeypatch.setenv("ATTNMT_DEFAULT_BEAM_SIZE", "1")
    assert main(model) == 0 and searched[-1] == 1                # greedy, as the server would be
    monkeypatch.delenv("ATTNMT_DEFAULT_BEAM_SIZE")
    settings = tmp_path / "attnmt.yaml"
    settings.write_text("default_beam_size: 3\n")
    monkeypatch.setenv("ATTNMT_CONFIG", str(settings))          # the file `attnmt serve` would read
    assert main(model) == 0 and searched[-1] == 3
    monkeypatch.setenv("ATTNMT_DEFAULT_BEAM_SIZE", "0")
    with pytest.raises(SystemExit, match="default_beam_size"):
        main(model)
    capsys.readouterr()


def test_greedy_reads_no_settings(tiny_model):
    """--beam 1 keeps `attnmt translate` from importing pydantic-settings (start-up time)."""
    code = ("import sys; from attnmt.service.cli import main; "
            f"main(['translate', '--model', {str(tiny_model)!r}, '--beam', '1', 'kasa .']); "
            "sys.exit('attnmt.service.server.settings' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120).returncode == 0


def test_the_python_client_leaves_the_search_to_the_server_unless_told():
    """Client.translate/stream without options send beam_size 0, so the server's
    default_beam_size applies, as with `attnmt translate --server`."""
    from attnmt.service.client import _server_default, options_pb
    assert options_pb(_server_default({})).beam_size == 0
    assert options_pb(_server_default({"beam_size": 1})).beam_size == 1
