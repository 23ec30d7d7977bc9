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
