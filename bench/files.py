"""`attnmt bench files`: single-sentence calls beside a large file. A gettext catalog of the
catalog data's distinct test sources (its msgids in the model's source language, no
translations) goes to `POST /v1/translate_file` while one client sends the probe data's
sentences one at a time to `POST /v1/translate`: their median latency against the same
server idle, how long the file took, and what came back (entries left untranslated,
`msgfmt --check` where gettext is installed). Compare settings with `--set` (for example
max_bulk_rows_beside_interactive=64, no cap, against the default)."""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import httpx
import polib

from attnmt.bench.loadtest import ServerProcess, machine
from attnmt.bench.offline import source_sentences
from attnmt.bench.reports import show

IDLE_CALLS = 50        # the idle server's calls (after 10 to warm up)
BUSY_CALLS = 400       # at most, while the file translates


def catalog(sentences: list[str], entries: int, language: str) -> tuple[str, int]:
    """A catalog of up to `entries` distinct msgids, none translated, and how many it has."""
    po = polib.POFile()
    po.metadata = {"Content-Type": "text/plain; charset=UTF-8", "Language": language}
    for text in dict.fromkeys(s for s in sentences if s.strip()):
        if len(po) == entries:
            break
        po.append(polib.POEntry(msgid=text, msgstr=""))
    return str(po), len(po)


def median_ms(latencies: list[float]) -> float:
    return round(statistics.median(latencies) * 1000, 1)


def bench_files(model: Path, file_text: str, entries: int, probes: list[str], settings: dict[str, str]) -> dict:
    with ServerProcess(model, settings, defaults=True) as server, \
            httpx.Client(base_url=f"http://127.0.0.1:{server.http_port}", timeout=3600) as client:

        def call(i: int) -> float:
            start = time.perf_counter()
            client.post("/v1/translate", json={"sentences": [probes[i % len(probes)]]}).raise_for_status()
            return time.perf_counter() - start

        [call(i) for i in range(10)]
        idle = [call(i) for i in range(IDLE_CALLS)]
        answer: dict = {}

        def send_file() -> None:
            start = time.perf_counter()
            reply = httpx.post(f"http://127.0.0.1:{server.http_port}/v1/translate_file", timeout=3600,
                               files={"file": ("bench.po", file_text.encode())})
            answer.update(status=reply.status_code, seconds=time.perf_counter() - start, data=reply.content,
                          untranslated=int(reply.headers.get("X-Untranslated-Entries", -1)))

        sender = threading.Thread(target=send_file)
        sender.start()
        time.sleep(1.0)                      # the file's first jobs are in
        busy = []
        while sender.is_alive() and len(busy) < BUSY_CALLS:
            busy.append(call(len(busy)))
        sender.join()
    report = {"machine": machine(), "model": str(model), "settings": settings,
              "entries": entries, "idle_p50_ms": median_ms(idle),
              "busy_p50_ms": median_ms(busy) if busy else None, "busy_calls": len(busy),
              "file_status": answer["status"], "file_seconds": round(answer["seconds"], 1),
              "untranslated": answer["untranslated"], "msgfmt_check": None}
    report["ratio"] = round(report["busy_p50_ms"] / report["idle_p50_ms"], 2) if busy else None
    if answer["status"] == 200 and shutil.which("msgfmt"):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "bench_out.po"
            path.write_bytes(answer["data"])
            check = subprocess.run(["msgfmt", "--check", "-o", "/dev/null", str(path)], capture_output=True)
            report["msgfmt_check"] = check.returncode == 0
    return report


def format_files(report: dict) -> str:
    return "\n".join([
        f"{report['machine']}; model {report['model']}; settings {report['settings'] or 'defaults'}",
        "",
        "| | figure |", "|---|---:|",
        f"| single-sentence p50, idle server | {report['idle_p50_ms']} ms |",
        f"| single-sentence p50 while the file translates ({report['busy_calls']} calls) | "
        f"{report['busy_p50_ms']} ms |",
        f"| ratio (goal ≤ 1.5) | {report['ratio']} |",
        f"| the file: {report['entries']} entries, HTTP {report['file_status']} | {report['file_seconds']} s |",
        f"| entries left untranslated (a placeholder lost) | {report['untranslated']} |",
        f"| msgfmt --check | {report['msgfmt_check']} |"])


def cmd_bench_files(args: argparse.Namespace) -> int:
    from attnmt.service.modeldir.manifest import load_manifest
    settings = dict(item.split("=", 1) for item in args.set or [])
    source = load_manifest(args.model, verify=False).source_language
    text, entries = catalog(source_sentences(args.model, args.catalog_data), args.entries, source)
    report = bench_files(args.model, text, entries, source_sentences(args.model, args.data, args.sentences), settings)
    show(report, format_files(report), args.json)
    return 0 if report["file_status"] == 200 else 1
