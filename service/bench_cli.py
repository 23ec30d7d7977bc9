"""`attnmt bench overload`, `attnmt bench soak` and `attnmt bench order`: the serving-side
benchmarks' arguments. The `bench` group belongs to `attnmt.model.cli`, which adds these; the
modules that run them (grpc, numpy, the client) are imported only when one runs, so
they cost `attnmt translate` and `attnmt serve` nothing at start-up."""

from __future__ import annotations

import argparse
from pathlib import Path


def _overload(args: argparse.Namespace) -> int:
    from .overload import cmd_bench_overload
    return cmd_bench_overload(args)


def _order(args: argparse.Namespace) -> int:
    from .bench_order import cmd_bench_order
    return cmd_bench_order(args)


def _soak(args: argparse.Namespace) -> int:
    from .soak import cmd_bench_soak
    return cmd_bench_soak(args)


REPO = Path(__file__).resolve().parent.parent


def model_and_data_arguments(b: argparse.ArgumentParser, sentences: bool = True) -> None:
    """--model, --data (and --sentences): what every benchmark and measurement reads."""
    b.add_argument("--model", type=Path, default=REPO / "models" / "rnnsearch-es-en",
                   help="model directory (default: the bundled model)")
    b.add_argument("--data", type=Path, default=REPO / "data" / "bible",
                   help="data directory with the test split (default: data/bible)")
    if sentences:
        b.add_argument("--sentences", type=int, help="use this many test sentences, evenly spaced (default: all)")


def register(bench: argparse._SubParsersAction) -> None:
    b = bench.add_parser("overload", help="512 callers against max_queue 64: goodput kept, refusal latency, "
                                          "CPU and unexpected codes (retrying at once vs honouring RetryInfo)")
    model_and_data_arguments(b)
    b.add_argument("--duration", type=float, default=30, help="seconds per run (three runs)")
    b.add_argument("--max-queue", type=int, default=64)
    b.add_argument("--callers", type=int, default=512, help="callers in the two overload runs")
    b.add_argument("--baseline-callers", type=int, default=64, help="callers in the baseline run")
    b.add_argument("--channels", type=int, default=8, help="connections the callers share")
    b.add_argument("--one-channel", action="store_true", help="every caller on one channel, as a client that "
                                                              "multiplexes its calls (instead of --channels)")
    b.add_argument("--set", action="append", metavar="KEY=VALUE", help="another server setting (repeatable)")
    b.add_argument("--json", type=Path, help="also write the report here")
    b.set_defaults(func=_overload)
    b = bench.add_parser("soak", help="a long mixed-load run at half capacity: memory growth and unexpected errors "
                                      "(`make soak`: 10 minutes)")
    model_and_data_arguments(b)
    b.add_argument("--duration", type=float, default=600, help="seconds of mixed load")
    b.add_argument("--capacity-seconds", type=float, default=20, help="about this long measuring capacity first")
    b.add_argument("--sample-every", type=float, default=5.0, help="seconds between memory samples")
    b.add_argument("--json", type=Path, help="also write the report here")
    b.set_defaults(func=_soak)
    b = bench.add_parser("order", help="the decoder alone (no gRPC) on the test sentences longest first, as offline, "
                                       "and in a server's random order: what the mix costs")
    model_and_data_arguments(b)
    b.add_argument("--repeats", type=int, default=3)
    b.add_argument("--joiners", type=int, help="sentences that join a running batch at a time "
                                               "(default: the server's min_joiners)")
    b.add_argument("--rows", type=int, help="rows a step at most (default: the server's max_batch_rows)")
    b.add_argument("--json", type=Path, help="also write the report here")
    b.set_defaults(func=_order)
