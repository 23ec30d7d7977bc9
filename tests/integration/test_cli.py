"""`attnmt translate --server`: the CLI as a user runs it against a real server, printing
translations and alignments, drawing the heatmap on a terminal, and leaving the beam to the
server unless told."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

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
