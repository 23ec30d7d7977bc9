"""`attnmt translate`: the CLI as a user runs it against a real server, printing
translations and alignments, drawing the heatmap on a terminal, and leaving the beam to the
server unless told; and what it refuses (input that is not UTF-8, a sentence too long for the
model, bad arguments and files), each in one line naming the line, argument or file."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

from conftest import SHORT, RunningServer


def test_client_and_cli_print_translation_and_alignment(server, tmp_path):
    plot = tmp_path / "alignment.png"
    out = subprocess.run([sys.executable, "-m", "attnmt.service.cli", "translate", "--server", server.address,
                          "--alignment", "hard", "--plot", str(plot), "kasa granda vidas peru ."],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip().startswith("the big house sees the dog . ||| ")
    assert "1-1" in out and "0-2" in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_through_a_server_on_a_terminal_draws_the_heatmap(server, tmp_path):
    """Issue 9: on a terminal the CLI draws the word alignment even when none was asked
    for; it used to crash because the server was asked for no alignment."""
    leader, follower = pty.openpty()
    plot = tmp_path / "a.png"
    proc = subprocess.run([sys.executable, "-m", "attnmt.service.cli", "translate", "--server", server.address,
                           "--plot", str(plot), SHORT], stdout=follower, stderr=subprocess.PIPE, timeout=60)
    os.close(follower)
    output = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    os.close(leader)
    assert proc.returncode == 0, proc.stderr.decode()
    text = output.decode()
    assert "↓ peru" in text and "the" in text
    assert plot.stat().st_size > 1000


def test_the_cli_through_a_server_uses_the_servers_default_beam_unless_told(tiny_model):
    """`attnmt translate --server` without --beam asks for the server's default_beam_size
    (here 4: steps of up to 4 rows); --beam 1 is greedy (one row a step)."""
    def rows_per_step_of(*flags: str) -> float:
        rows, steps = server.metric("attnmt_batch_rows_sum"), server.metric("attnmt_batch_rows_count")
        subprocess.run([sys.executable, "-m", "attnmt.service.cli", "translate", "--server", server.address, *flags,
                        "peru vidas kasa ."], capture_output=True, text=True, check=True)
        return (server.metric("attnmt_batch_rows_sum") - rows) / (server.metric("attnmt_batch_rows_count") - steps)

    with RunningServer([tiny_model], {"ATTNMT_DEFAULT_BEAM_SIZE": "4", "ATTNMT_WARMUP": "false"}) as server:
        assert rows_per_step_of() > 1.5
        assert rows_per_step_of("--beam", "1") == 1.0


def test_more_lines_than_one_call_may_carry_go_as_several_calls_in_order(tiny_model, tmp_path):
    """A file longer than max_sentences_per_request: the client splits it into calls (a few in
    flight) and prints every line's translation in the input's order; a server's refusal is one
    line naming the status, not a traceback."""
    sentences = ["peru vidas kasa .", "kasa granda amas libo nova .", "gato roja havas arbo blanka .",
                 "sola vidas luna ."] * 4
    source = tmp_path / "in.txt"
    source.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    settings = {"ATTNMT_DEFAULT_BEAM_SIZE": "1", "ATTNMT_MAX_SENTENCES_PER_REQUEST": "5", "ATTNMT_WARMUP": "false"}
    with RunningServer([tiny_model], settings) as server:
        from attnmt.service.client import Client
        with Client(server.address, sentences_per_call=5) as client:
            alone = [client.translate([s])[0].best.text for s in sentences[:4]]
            together = client.translate(sentences)
        assert [t.best.text for t in together] == alone * 4
        cli = [sys.executable, "-m", "attnmt.service.cli", "translate", "--server", server.address, "-i", str(source)]
        refused = subprocess.run(cli, capture_output=True, text=True)     # the CLI's calls carry 64
        assert refused.returncode == 1 and "Traceback" not in refused.stderr
        assert "INVALID_ARGUMENT" in refused.stderr and "max_sentences_per_request" in refused.stderr
    with RunningServer([tiny_model], {k: v for k, v in settings.items() if "MAX_SENTENCES" not in k}) as server:
        many = tmp_path / "many.txt"
        many.write_text("\n".join(sentences * 5) + "\n", encoding="utf-8")           # 80 lines: two calls
        cli = [sys.executable, "-m", "attnmt.service.cli", "translate", "--server", server.address, "-i", str(many)]
        done = subprocess.run(cli, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        out = done.stdout
        assert out.splitlines() == alone * 20
        # a refusal in the second call names the input's line, not the call's sentences[i]
        many.write_text("\n".join(sentences * 5)[:-1] + "kasa" * 600 + "\n", encoding="utf-8")
        refused = subprocess.run(cli, capture_output=True, text=True)
        assert refused.returncode == 1 and refused.stdout == ""
        assert refused.stderr.startswith("attnmt translate: INVALID_ARGUMENT: line 80: sentences[15] has"), \
            refused.stderr


# --- what the CLI refuses, and how -----------------------------------------------

def translate_offline(model, *flags: str, stdin: bytes | None = None, monkeypatch=None) -> int:
    """`attnmt translate --model MODEL FLAGS` in this process, stdin holding `stdin`."""
    import io

    from attnmt.service.cli import main
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    return main(["translate", "--model", str(model), "--beam", "1", *flags])


def refusal(call) -> str:
    """The message of the SystemExit that `call()` ends with; the test fails if it returns."""
    with pytest.raises(SystemExit) as ended:
        call()
    assert isinstance(ended.value.code, str), ended.value.code
    return ended.value.code


def test_input_that_is_not_utf8_is_refused_naming_its_line(tiny_model, tmp_path, monkeypatch, capsys):
    latin1 = "peru vidas kasa .\r\nsola vidas luna .\r\nmañana vidas gato .\n".encode("latin-1")
    for flags, stdin in (((), latin1), (("--input", str(tmp_path / "in.txt")), None),
                         (("--split-sentences",), latin1)):
        (tmp_path / "in.txt").write_bytes(latin1)
        message = refusal(lambda: translate_offline(tiny_model, *flags, stdin=stdin, monkeypatch=monkeypatch))  # noqa: B023
        assert "line 3 of the input is not UTF-8 (byte 0xf1 at column 3)" in message, flags
    assert capsys.readouterr().out == ""
    # the first two lines alone, after a byte-order mark: \r\n read as a line end, the mark dropped
    assert translate_offline(tiny_model, "peru vidas kasa .", "sola vidas luna .") == 0
    as_arguments = capsys.readouterr().out
    assert translate_offline(tiny_model, stdin=b"\xef\xbb\xbf" + latin1[:38], monkeypatch=monkeypatch) == 0
    assert capsys.readouterr().out == as_arguments and len(as_arguments.splitlines()) == 2


def test_a_sentence_the_model_cannot_take_is_named_by_its_line_or_argument(tiny_transformer, monkeypatch, capsys):
    """The tiny Transformer has 64 positions: a line of 100 words is refused by its number, with
    what to do instead, and nothing is printed; so is an argument."""
    long = " ".join(["kasa"] * 100)
    lines = f"peru vidas kasa .\n{long}\nsola vidas luna .\n".encode()
    message = refusal(lambda: translate_offline(tiny_transformer, stdin=lines, monkeypatch=monkeypatch))
    assert message.startswith("attnmt translate: line 2: source has") and "64 positions" in message
    assert "--split-sentences" in message
    assert refusal(lambda: translate_offline(tiny_transformer, "peru vidas kasa .", long)).startswith(
        "attnmt translate: argument 2: source has")
    assert capsys.readouterr().out == ""


def test_bad_arguments_and_files_are_one_line_each(tiny_model, tmp_path, capsys):
    from attnmt.service.cli import main
    with pytest.raises(SystemExit) as usage:
        main(["translate", "--model", str(tiny_model), "--beam", "0", SHORT])
    assert usage.value.code == 2 and "argument --beam: must be at least 1, not 0" in capsys.readouterr().err
    for flag, value, words in (("--decode-workers", "-2", "must be 0 or more, not -2"),
                               ("--timeout", "-1", "must be a number of seconds above 0, not -1"),
                               ("--timeout", "nan", "must be a number of seconds above 0, not nan")):
        with pytest.raises(SystemExit) as usage:
            main(["translate", "--model", str(tiny_model), flag, value, SHORT])
        assert usage.value.code == 2 and f"argument {flag}: {words}" in capsys.readouterr().err
    missing = tmp_path / "missing" / "x.txt"
    assert refusal(lambda: main(["translate", "--model", str(tiny_model), "--input", str(missing)])) == \
        f"attnmt translate: --input {missing}: No such file or directory"
    for flag, path in (("--output", missing), ("--plot", missing.with_suffix(".png"))):
        assert main(["translate", "--model", str(tiny_model), "--beam", "1", flag, str(path), SHORT]) == 1
        assert capsys.readouterr().err == f"attnmt translate: {path}: No such file or directory\n"
    assert refusal(lambda: main(["translate", "--model", str(tiny_model), "--beam", "1", "--plot",
                                 str(tmp_path / "a.txt"), SHORT])).startswith(
        f"attnmt translate: --plot {tmp_path / 'a.txt'}: Format 'txt' is not supported")
    assert main(["translate", "--model", str(tiny_model), "--beam", "100", SHORT]) == 1
    assert "beam_size must be between 1 and 64" in capsys.readouterr().err
    # the other commands too
    assert main(["evaluate", "--model", str(tiny_model), "--data", str(missing.parent)]) == 1
    assert capsys.readouterr().err == f"attnmt evaluate: no test data in {missing.parent}: expected test.tsv or " \
        "test.xx + test.en\n"


def test_the_python_client_refuses_what_it_would_misread(server):
    """One string is not a list of them (iterated, it was translated a character at a time); an
    alignment it does not know is refused, not taken for soft; no texts need no call."""
    from attnmt.service.client import Client
    with Client(server.address) as client:
        with pytest.raises(TypeError, match=r"not one str: pass \[text\]"):
            client.translate(SHORT)
        with pytest.raises(TypeError, match="not one str"):
            client.translate_documents("<p>peru vidas kasa .</p>", html=True)
        with pytest.raises(ValueError, match="alignment must be one of 'none', 'soft', 'words', 'hard', not 'bogus'"):
            client.translate([SHORT], alignment="bogus")
        handled = server.metric("grpc_server_handled_total", grpc_method="Translate")
        assert client.translate([]) == [] and client.translate_documents([]) == []
        assert client.translate((s for s in [SHORT]))[0].best.text == client.translate([SHORT])[0].best.text
        assert server.metric("grpc_server_handled_total", grpc_method="Translate") == handled + 2
