"""One channel, many calls: a client that multiplexes its calls on one
connection, as gRPC clients are written, gets the admission's answers (OK, or
RESOURCE_EXHAUSTED with RetryInfo), never the transport's UNAVAILABLE.

Each test opens a fresh channel and starts every call at once against a server whose
queue (64) is far smaller than the burst and whose steps are slowed, so some calls are
refused and some answered. With a per-connection stream limit
(`ATTNMT_MAX_CONCURRENT_STREAMS=100` in the environment) they fail: the streams past it are
reset and the calls end UNAVAILABLE.
"""

from __future__ import annotations

import asyncio
import collections

import grpc
import pytest

from attnmt.service.client import retry_delay
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc
from conftest import RunningServer, synthetic_corpus

SENTENCES = [s for s, _ in synthetic_corpus(32, seed=5)]
TARGETS = [t for _, t in synthetic_corpus(32, seed=5)]
GREEDY = pb.DecodingOptions(beam_size=1)
RESOURCE_EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
BOUND_S = 30        # every call has this deadline, and the whole burst this long


@pytest.fixture(scope="module")
def server(tiny_model):
    # 20 ms a step: 16 rows take about 80 sentences a second, so a burst of 256 fills the queue.
    env = {"ATTNMT_MAX_QUEUE": "64", "ATTNMT_MAX_BATCH_ROWS": "16", "ATTNMT_DEFAULT_BEAM_SIZE": "1",
           "FAULTS": "step_delay_ms=20", "ATTNMT_WARMUP": "false"}
    with RunningServer([tiny_model], env) as running:
        yield running


def burst(address: str, call, n: int) -> list:
    """`call(stub, i)` for i < n, all started at once on one fresh channel; each call's
    outcome: what it returned, or its AioRpcError."""
    async def main():
        async with grpc.aio.insecure_channel(address) as channel:
            stub = pb_grpc.TranslatorStub(channel)

            async def one(i):
                try:
                    return await call(stub, i)
                except grpc.aio.AioRpcError as e:
                    return e
            return await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(n))), BOUND_S)
    return asyncio.run(main())


def codes(outcomes: list) -> collections.Counter:
    """OK, RESOURCE_EXHAUSTED (with RetryInfo) or, for anything else, its code and message."""
    seen = collections.Counter()
    for o in outcomes:
        if not isinstance(o, grpc.aio.AioRpcError):
            seen["OK"] += 1
        elif o.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and retry_delay(o, 0) is not None:
            seen["RESOURCE_EXHAUSTED"] += 1
        else:
            seen[f"{o.code().name}: {o.details()}"] += 1
    return seen


def test_256_translate_calls_on_one_channel_end_ok_or_resource_exhausted(server):
    async def translate(stub, i):
        return await stub.Translate(pb.TranslateRequest(sentences=[SENTENCES[i % 32]], options=GREEDY),
                                    timeout=BOUND_S)
    seen = codes(burst(server.address, translate, 256))
    assert set(seen) == {"OK", "RESOURCE_EXHAUSTED"}, seen


def test_256_align_calls_on_one_channel_end_ok_or_resource_exhausted(server):
    async def align(stub, i):
        return await stub.Align(pb.AlignRequest(source=SENTENCES[i % 32], target=TARGETS[i % 32]), timeout=BOUND_S)
    seen = codes(burst(server.address, align, 256))
    assert set(seen) == {"OK", "RESOURCE_EXHAUSTED"}, seen


@pytest.mark.parametrize("streams", [64, 256])
def test_many_translate_streams_on_one_channel_end_ok(server, streams):
    """Each stream sends 512 / streams sentences at once and ends OK; each of its items is
    a translation or a RESOURCE_EXHAUSTED refusal (a stream reports queue-full per item),
    with at least one of each over the burst. 64 streams stay under a stream limit of 100;
    256 do not."""
    per_stream = 512 // streams

    async def stream(stub, i):
        requests = [pb.StreamRequest(id=str(k), sentence=SENTENCES[(i + k) % 32], options=GREEDY)
                    for k in range(per_stream)]
        return [r async for r in stub.TranslateStream(iter(requests), timeout=BOUND_S)]
    outcomes = burst(server.address, stream, streams)
    assert codes(outcomes) == {"OK": streams}, codes(outcomes)
    items = collections.Counter()
    for answers in outcomes:
        assert sorted(int(a.id) for a in answers) == list(range(per_stream))
        for a in answers:
            if not a.HasField("error"):
                items["translated"] += 1
            elif a.error.code == RESOURCE_EXHAUSTED and "retry after" in a.error.message:
                items["refused"] += 1
            else:
                items[f"error {a.error.code}: {a.error.message}"] += 1
    assert set(items) == {"translated", "refused"}, items


def test_bench_overload_on_one_channel_reports_unexpected_codes(tiny_model, tmp_path, capsys):
    """`attnmt bench overload --one-channel`: 150 callers (more than a stream limit of 100)
    on one channel; every outcome is OK or a refusal with RetryInfo."""
    import json

    from attnmt.service.cli import main
    from conftest import write_corpus
    data, out = write_corpus(tmp_path / "data", {"test": 12}), tmp_path / "overload.json"
    assert main(["bench", "overload", "--model", str(tiny_model), "--data", str(data), "--duration", "1",
                 "--max-queue", "2", "--callers", "150", "--baseline-callers", "2", "--one-channel",
                 "--set", "max_batch_rows=2", "--set", "max_beam_size=2", "--set", "default_beam_size=1",
                 "--json", str(out)]) == 0
    report, table = json.loads(out.read_text()), capsys.readouterr().out
    assert report["one_channel"] and report["channels"] == 1 and "callers on one channel" in table
    assert all(run["refusals"] > 0 for name, run in report["runs"].items() if name != "baseline")
    assert {name: run["errors"] for name, run in report["runs"].items()} == dict.fromkeys(report["runs"], {})
    unexpected = [t for t in report["targets"] if t["what"].startswith("unexpected")]
    assert len(unexpected) == 3 and all(t["met"] for t in unexpected)
