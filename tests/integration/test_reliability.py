"""Reliability: faults injected by the test entry point tests/faults.py (`FAULTS`),
SIGTERM under load and during warm-up, and a chaos run whose every call is
accounted for on both sides. Real `attnmt serve` processes on loopback ports;
every wait is on a condition with a generous bound, never a fixed sleep."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import random
import signal
import subprocess
import threading
import time
from collections import Counter

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc
from conftest import RunningServer, serve_command

SHORT = "peru vidas kasa ."
LONG = "kasa granda amas libo nova . gato roja havas arbo blanka . sola vidas luna . peru amas mesa roja ."
LONG_TARGET = " ".join(["the big house sees the dog ."] * 45)     # forced decoding: ~950 steps
CLEAN = ["peru vidas kasa .", "kasa granda amas libo nova .", "mesa roja havas arbo ."]
SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING


def wait_for(condition, what: str, timeout: float = 60, every: float = 0.01):
    give_up = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < give_up, f"gave up after {timeout:g}s waiting for {what}"
        time.sleep(every)
    return value


def outcome(call):
    """The response, or the status code of the error."""
    try:
        return call()
    except grpc.RpcError as e:
        return e


class Spawned:
    """`attnmt serve` that is not waited for: for signals during start-up."""

    def __init__(self, model, env: dict[str, str]):
        settings = {"ATTNMT_HOST": "127.0.0.1", "ATTNMT_PORT": "0", "ATTNMT_METRICS_HOST": "127.0.0.1",
                    "ATTNMT_METRICS_PORT": "0", "ATTNMT_HTTP_HOST": "127.0.0.1", "ATTNMT_HTTP_PORT": "0",
                    "ATTNMT_MODELS": str(model), "ATTNMT_INTRA_OP_THREADS": "1", **env}
        self.proc = subprocess.Popen(serve_command(settings), env={**os.environ, **settings},
                                     stderr=subprocess.PIPE, text=True)
        self.log: list[str] = []
        threading.Thread(target=lambda: [self.log.append(line) for line in self.proc.stderr], daemon=True).start()

    def logged(self, text: str) -> bool:
        return any(text in line for line in self.log)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class HealthPoller(threading.Thread):
    """Checks health every few ms until the server is gone; keeps the order of what it saw
    (SERVING, NOT_SERVING, or the status code of a failed check)."""

    def __init__(self, address: str):
        super().__init__(daemon=True)
        self.address, self.seen, self.stop = address, [], threading.Event()

    def run(self) -> None:
        with grpc.insecure_channel(self.address) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            while not self.stop.is_set():
                try:
                    status = health.Check(health_pb2.HealthCheckRequest(), timeout=2).status
                except grpc.RpcError as e:
                    status = e.code()
                if not self.seen or self.seen[-1] != status:
                    self.seen.append(status)
                time.sleep(0.005)


# --- fault injection -------------------------------------------------------------------

def test_a_step_that_breaks_on_one_sentence_fails_only_that_sentence(tiny_model, translator):
    env = {"FAULTS": "poison=gato", "ATTNMT_DEFAULT_BEAM_SIZE": "1",
           "ATTNMT_MAX_QUEUE_DELAY_MS": "200"}                # concurrent arrivals share the first steps
    want = {t: translator.translate([t])[0].best.text for t in CLEAN}
    with RunningServer([tiny_model], env) as server, grpc.insecure_channel(server.address) as channel:
        stub = pb_grpc.TranslatorStub(channel)
        stream_items = [pb.StreamRequest(id="a", sentence=CLEAN[0]), pb.StreamRequest(id="poisoned", sentence="gato ."),
                        pb.StreamRequest(id="c", sentence=CLEAN[2])]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            clean = [pool.submit(outcome, lambda t=t: stub.Translate(pb.TranslateRequest(sentences=[t]), timeout=60))
                     for t in CLEAN]
            poisoned = pool.submit(outcome, lambda: stub.Translate(
                pb.TranslateRequest(sentences=["peru vidas gato ."]), timeout=60))
            streamed = pool.submit(lambda: list(stub.TranslateStream(iter(stream_items), timeout=60)))
            error = poisoned.result()
            assert isinstance(error, grpc.RpcError) and error.code() == grpc.StatusCode.INTERNAL, error
            assert "decoder step failed" in error.details() and "(request " in error.details()
            assert "breaks the step" not in error.details()           # the failure's own text stays in the log
            for text, answer in zip(CLEAN, clean):
                assert answer.result().translations[0].text == want[text]
            answers = {r.id: r for r in streamed.result()}
        assert sorted(answers) == ["a", "c", "poisoned"]
        assert answers["poisoned"].error.code == grpc.StatusCode.INTERNAL.value[0]
        assert answers["a"].translation.text == want[CLEAN[0]] and answers["c"].translation.text == want[CLEAN[2]]
        assert server.metric("attnmt_step_failures_total") >= 1
        assert any("breaks the step" in line for line in server.log)     # where the operator reads it
        # the worker lives on
        assert stub.Translate(pb.TranslateRequest(sentences=[CLEAN[1]])).translations[0].text == want[CLEAN[1]]
        assert health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest()).status == SERVING


def test_a_dying_worker_fails_its_calls_turns_not_serving_and_the_process_exits_non_zero(tiny_model):
    """The documented choice: the process exits 1 and the orchestrator restarts it."""
    env = {"FAULTS": "die_on=luna", "ATTNMT_MAX_BATCH_ROWS": "1", "ATTNMT_MAX_BEAM_SIZE": "1",
           "ATTNMT_DEFAULT_BEAM_SIZE": "1", "ATTNMT_MAX_TOKENS_PER_SENTENCE": "1024",
           "ATTNMT_GRACE_PERIOD_SECONDS": "5"}
    server = RunningServer([tiny_model], env)
    try:
        with grpc.insecure_channel(server.address) as channel:
            stub = pb_grpc.TranslatorStub(channel)
            watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(), timeout=120)
            assert next(watch).status == SERVING
            source = "kasa granda amas libo nova . peru amas mesa roja ."          # no "luna"
            pending = [stub.Align.future(pb.AlignRequest(source=source, target=LONG_TARGET), timeout=60)
                       for _ in range(3)]
            wait_for(lambda: server.metric("grpc_server_started_total", grpc_method="Align") == 3, "the aligns")
            trigger = outcome(lambda: stub.Translate(pb.TranslateRequest(sentences=["sola vidas luna ."]), timeout=60))
            for call in pending + [trigger]:
                error = outcome(call.result) if call is not trigger else trigger
                assert isinstance(error, grpc.RpcError) and error.code() == grpc.StatusCode.INTERNAL, error
                assert "decode worker" in error.details()
            assert next(watch).status == NOT_SERVING
        assert server.proc.wait(60) == 1
        assert any("stopped because a decode worker died" in line for line in server.log)
    finally:
        server.terminate()


# --- drain -----------------------------------------------------------------------------

def test_sigterm_under_load_not_serving_first_accepted_calls_finish_late_ones_refused_by_the_servicer(tiny_model):
    env = {"ATTNMT_MAX_BATCH_ROWS": "1", "ATTNMT_MAX_BEAM_SIZE": "1", "ATTNMT_DEFAULT_BEAM_SIZE": "1",
           "ATTNMT_MAX_TOKENS_PER_SENTENCE": "1024", "ATTNMT_GRACE_PERIOD_SECONDS": "60"}
    server = RunningServer([tiny_model], env)
    poller = HealthPoller(server.address)
    try:
        with grpc.insecure_channel(server.address) as channel:
            stub = pb_grpc.TranslatorStub(channel)
            accepted = [stub.Align.future(pb.AlignRequest(source=LONG, target=LONG_TARGET), timeout=120)
                        for _ in range(6)]
            wait_for(lambda: server.metric("grpc_server_started_total", grpc_method="Align") == 6, "the aligns")
            poller.start()
            wait_for(lambda: poller.seen, "a first health check")
            watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(), timeout=120)
            assert next(watch).status == SERVING        # left open: it must not hold the process up
            server.proc.send_signal(signal.SIGTERM)
            wait_for(lambda: NOT_SERVING in poller.seen, "health NOT_SERVING", timeout=30)
            assert next(watch).status == NOT_SERVING
            with grpc.insecure_channel(server.address) as late_channel:      # a new connection is still accepted
                late = outcome(lambda: pb_grpc.TranslatorStub(late_channel).Translate(
                    pb.TranslateRequest(sentences=[SHORT]), timeout=30))
            assert isinstance(late, grpc.RpcError) and late.code() == grpc.StatusCode.UNAVAILABLE
            assert "shutting down; retry on another replica" in late.details()      # the servicer said so
            for call in accepted:
                assert len(call.result(timeout=120).hypothesis.target_tokens) > 800
            # well before the 60 s grace period, although the Watch is still open
            assert server.proc.wait(30) == 0
        poller.stop.set()
        poller.join(10)
        # SERVING, then NOT_SERVING while the listener was still open, then the port closed
        assert poller.seen[:2] == [SERVING, NOT_SERVING], poller.seen
        assert all(isinstance(s, grpc.StatusCode) for s in poller.seen[2:]), poller.seen
    finally:
        poller.stop.set()
        server.terminate()


@pytest.mark.parametrize("moment", ["loaded model", "warming up"])
def test_sigterm_during_start_up_exits_within_the_grace_period(tiny_model, moment):
    """A SIGTERM while the model loads or warms up ends the process within the grace period,
    without waiting for SIGKILL."""
    grace = 10
    server = Spawned(tiny_model, {"FAULTS": "step_delay_ms=200", "ATTNMT_DEFAULT_BEAM_SIZE": "4",
                                  "ATTNMT_GRACE_PERIOD_SECONDS": str(grace)})
    try:
        wait_for(lambda: server.logged(moment) or server.proc.poll() is not None, f"{moment!r} in the log")
        assert server.proc.poll() is None, "".join(server.log)
        server.proc.send_signal(signal.SIGTERM)
        try:
            code = server.proc.wait(grace)
        except subprocess.TimeoutExpired:
            pytest.fail("still running a grace period after SIGTERM:\n" + "".join(server.log))
        assert code == 0, "".join(server.log)
        assert not server.logged("serving "), "".join(server.log)
    finally:
        server.kill()


# --- chaos accounting ------------------------------------------------------------------

CHAOS_TARGET = " ".join(["the big house sees the dog ."] * 20)    # forced decoding: ~420 steps
TRANSPORT_LIMIT = "Received message larger than max"


def retry_info(error: grpc.aio.AioRpcError) -> bool:
    return any(key == "grpc-status-details-bin" for key, _ in error.trailing_metadata() or ())


ONE_SHOT = {"deadline_1ms", "cancelled"}        # callers that do not come back after a refusal


async def chaos_calls(address: str, kinds: list[str]) -> tuple[list, list, dict]:
    """A caller for each of `kinds` at once (at most 48 at a time); returns (kind, outcome) for
    every call made and for each caller's last call (outcome: a status code name,
    RESOURCE_EXHAUSTED split into with and without RetryInfo), and every stream's answers by id."""
    limit = asyncio.Semaphore(48)
    streams: dict[int, list[str]] = {}
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.TranslatorStub(channel)
        health = health_pb2_grpc.HealthStub(channel)
        raw = channel.unary_unary("/attnmt.v1.Translator/Translate")

        async def stream(n: int) -> None:
            items = [pb.StreamRequest(id=f"{n}-{i}", sentence=s) for i, s in
                     enumerate([SHORT, "", "kasa" * 600, CLEAN[1], "gato roja .", SHORT])]
            streams[n] = [r.id async for r in stub.TranslateStream(iter(items), timeout=60)]

        async def cancelled(n: int) -> None:
            call = stub.Translate(pb.TranslateRequest(sentences=[LONG] * 4), timeout=60)
            await asyncio.sleep(0.005 * (n % 20))       # some before the call is sent, some while it runs
            call.cancel()
            await call

        calls = {
            "valid": lambda n: stub.Translate(pb.TranslateRequest(sentences=[CLEAN[n % 3]]), timeout=60),
            "slow": lambda n: stub.Align(pb.AlignRequest(source=LONG, target=CHAOS_TARGET), timeout=60),
            "empty": lambda n: stub.Translate(pb.TranslateRequest(sentences=[]), timeout=60),
            "bad_option": lambda n: stub.Translate(pb.TranslateRequest(
                sentences=[SHORT], options=pb.DecodingOptions(beam_size=99)), timeout=60),
            "unknown_model": lambda n: stub.Translate(pb.TranslateRequest(sentences=[SHORT], model="nope"), timeout=60),
            "garbage": lambda n: raw(b"\xff\xff\xff", timeout=60),
            "oversize": lambda n: stub.Translate(pb.TranslateRequest(sentences=["kasa " * 20000]), timeout=60),
            "deadline_1ms": lambda n: stub.Translate(pb.TranslateRequest(sentences=[SHORT]), timeout=0.001),
            "cancelled": cancelled,
            "stream": stream,
            "health": lambda n: health.Check(health_pb2.HealthCheckRequest(), timeout=60),
            "models": lambda n: stub.ListModels(pb.ListModelsRequest(), timeout=60),
        }

        async def attempt(n: int, kind: str) -> str:
            try:
                await asyncio.wait_for(calls[kind](n), 90)     # a hang fails the test, not the suite
            except asyncio.TimeoutError:
                return "HUNG"
            except asyncio.CancelledError:
                return "CANCELLED"
            except grpc.aio.AioRpcError as e:
                code = e.code().name
                if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                    code += "+RetryInfo" if retry_info(e) else " (transport)" if TRANSPORT_LIMIT in e.details() \
                        else " (other)"
                return code
            return "OK"

        async def one(n: int, kind: str) -> None:
            """A caller: refused with RetryInfo, it comes back after the hint, jittered, as the
            bundled client does (within 45 s); every attempt is a call to account for."""
            give_up = time.monotonic() + 45
            async with limit:
                while True:
                    code = await attempt(n, kind)
                    attempts.append((kind, code))
                    if code != "RESOURCE_EXHAUSTED+RetryInfo" or kind in ONE_SHOT or time.monotonic() > give_up:
                        finals.append((kind, code))
                        return
                    await asyncio.sleep(0.05 * random.uniform(0.5, 1.5))
        attempts: list[tuple[str, str]] = []
        finals: list[tuple[str, str]] = []
        await asyncio.gather(*(one(n, kind) for n, kind in enumerate(kinds)))
    return attempts, finals, streams


def test_chaos_every_call_is_accounted_for_on_both_sides(tiny_model):
    env = {"ATTNMT_MAX_QUEUE": "4", "ATTNMT_MAX_BATCH_ROWS": "2", "ATTNMT_MAX_BEAM_SIZE": "2",
           "ATTNMT_DEFAULT_BEAM_SIZE": "1", "ATTNMT_MAX_MESSAGE_BYTES": "65536",
           "ATTNMT_MAX_TOKENS_PER_SENTENCE": "1024", "ATTNMT_RETRY_AFTER_SECONDS": "0.05"}
    kinds = ["valid"] * 40 + ["slow"] * 16 + ["empty", "bad_option", "unknown_model", "garbage", "oversize"] * 4 + \
        ["deadline_1ms"] * 16 + ["cancelled"] * 16 + ["stream"] * 6 + ["health", "models"] * 4
    random.Random(7).shuffle(kinds)
    with RunningServer([tiny_model], env) as server:
        assert server.metric("grpc_server_started_total") == 0         # the warm-up is not an RPC
        outcomes, finals, streams = asyncio.run(chaos_calls(server.address, kinds))

        def settled():
            started = server.metric("grpc_server_started_total")
            return started == server.metric("grpc_server_handled_total") and started
        started = wait_for(settled, "every started call to be handled on the server")
        handled = Counter({code: server.metric("grpc_server_handled_total", grpc_code=code) for code in
                           ("OK", "CANCELLED", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
                            "RESOURCE_EXHAUSTED", "UNAVAILABLE", "INTERNAL", "UNKNOWN", "UNIMPLEMENTED")})
        assert sum(handled.values()) == started

    by_kind: dict[str, Counter] = {}
    for kind, code in outcomes:
        by_kind.setdefault(kind, Counter())[code] += 1
    table = "\n".join(f"{kind:14} {dict(codes)}" for kind, codes in sorted(by_kind.items()))
    client = Counter(code for _, code in outcomes)
    assert client["HUNG"] == 0 and client["UNKNOWN"] == 0 and client["INTERNAL"] == 0, table
    assert handled["UNKNOWN"] == 0 and handled["INTERNAL"] == 0, handled
    assert client["RESOURCE_EXHAUSTED (other)"] == 0, table

    # What each call of a kind may end with; the overload did happen.
    # (While every queue is full, Translate and Align are refused before they are read: OverloadGate.)
    refused = "RESOURCE_EXHAUSTED+RetryInfo"
    allowed = {"valid": {"OK", refused}, "slow": {"OK", refused}, "empty": {"INVALID_ARGUMENT", refused},
               "bad_option": {"INVALID_ARGUMENT", refused}, "unknown_model": {"NOT_FOUND", refused},
               "garbage": {"INVALID_ARGUMENT", refused}, "oversize": {"RESOURCE_EXHAUSTED (transport)"},
               # a late cancel can find the answer already there:
               "deadline_1ms": {"DEADLINE_EXCEEDED", "OK", refused}, "cancelled": {"CANCELLED", "OK", refused},
               "stream": {"OK"}, "health": {"OK"}, "models": {"OK"}}
    for kind, codes in by_kind.items():
        assert set(codes) <= allowed[kind], table
    assert by_kind["slow"]["RESOURCE_EXHAUSTED+RetryInfo"] + by_kind["valid"]["RESOURCE_EXHAUSTED+RetryInfo"] > 0, \
        "the run never overloaded the server:\n" + table
    # Each caller ends as its kind should once it gets through (the 1 ms and cancelled ones need not).
    last: dict[str, Counter] = {}
    for kind, code in finals:
        last.setdefault(kind, Counter())[code] += 1
    ends = {"valid": "OK", "slow": "OK", "empty": "INVALID_ARGUMENT", "bad_option": "INVALID_ARGUMENT",
            "unknown_model": "NOT_FOUND", "garbage": "INVALID_ARGUMENT", "oversize": "RESOURCE_EXHAUSTED (transport)",
            "stream": "OK", "health": "OK", "models": "OK"}
    for kind, code in ends.items():
        assert last[kind] == Counter({code: kinds.count(kind)}), (kind, last[kind], table)

    # Every stream id answered exactly once.
    for n, ids in streams.items():
        assert sorted(ids) == sorted(f"{n}-{i}" for i in range(6)), ids

    # The accounting. A code only a handler gives (OK, INVALID_ARGUMENT, NOT_FOUND, RESOURCE_EXHAUSTED
    # with RetryInfo) can reach the client only from the server, so the server counts at least as many;
    # it counts more only when the client's own deadline or cancellation won a race with the answer.
    server_only = {"OK": "OK", "INVALID_ARGUMENT": "INVALID_ARGUMENT", "NOT_FOUND": "NOT_FOUND",
                   "RESOURCE_EXHAUSTED+RetryInfo": "RESOURCE_EXHAUSTED"}
    surplus = 0
    for client_code, server_code in server_only.items():
        assert handled[server_code] >= client[client_code], (client_code, handled, table)
        surplus += handled[server_code] - client[client_code]
    client_ended = client["DEADLINE_EXCEEDED"] + client["CANCELLED"]          # ended by the client itself
    assert handled["DEADLINE_EXCEEDED"] + handled["CANCELLED"] + surplus <= client_ended
    # The client's total minus the server's: calls that never reached a handler, each explained.
    never_reached = len(outcomes) - started
    transport = client["RESOURCE_EXHAUSTED (transport)"]          # over max_message_bytes: refused by gRPC itself
    expired_or_cancelled = client_ended - (handled["DEADLINE_EXCEEDED"] + handled["CANCELLED"] + surplus)
    assert never_reached == transport + expired_or_cancelled, (never_reached, transport, expired_or_cancelled, table)
    assert transport == by_kind["oversize"]["RESOURCE_EXHAUSTED (transport)"] == 4
    assert 0 <= expired_or_cancelled <= by_kind["deadline_1ms"]["DEADLINE_EXCEEDED"] + by_kind["cancelled"]["CANCELLED"]
    print(f"\nchaos run: {len(outcomes)} calls, {started} reached a handler, {never_reached} did not: "
          f"{transport} over the message limit, {expired_or_cancelled} expired or cancelled on the client first\n"
          + table)


# --- overload --------------------------------------------------------------------------

def test_a_full_queue_refuses_before_reading_the_request(tiny_model):
    """OverloadGate: while the queue is full, Translate and Align are refused before any
    validation or tokenization (a request that is itself invalid gets RESOURCE_EXHAUSTED,
    not INVALID_ARGUMENT); the other methods, health and streams are not gated; once the
    queue drains the same invalid request gets its INVALID_ARGUMENT."""
    env = {"ATTNMT_MAX_QUEUE": "1", "ATTNMT_MAX_BATCH_ROWS": "1", "ATTNMT_MAX_BEAM_SIZE": "1",
           "ATTNMT_DEFAULT_BEAM_SIZE": "1", "ATTNMT_MAX_TOKENS_PER_SENTENCE": "1024",
           "FAULTS": "step_delay_ms=2"}
    with RunningServer([tiny_model], env) as server, grpc.insecure_channel(server.address) as channel:
        stub = pb_grpc.TranslatorStub(channel)
        busy = [stub.Align.future(pb.AlignRequest(source=LONG, target=LONG_TARGET), timeout=120)]
        wait_for(lambda: server.metric("attnmt_inflight_sentences") == 1, "the first align in the batch")
        busy.append(stub.Align.future(pb.AlignRequest(source=LONG, target=LONG_TARGET), timeout=120))
        wait_for(lambda: server.metric("attnmt_queue_depth") == 1, "a full queue")
        too_long = pb.TranslateRequest(sentences=["kasa " * 1000])            # over max_chars_per_sentence
        error = outcome(lambda: stub.Translate(too_long, timeout=30))
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "max_queue is 1" in error.details()
        assert retry_info(error)
        error = outcome(lambda: stub.Align(pb.AlignRequest(source="", target=""), timeout=30))
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert stub.ListModels(pb.ListModelsRequest(), timeout=30).models
        assert health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=30).status == SERVING
        answers = list(stub.TranslateStream(iter([pb.StreamRequest(id="x", sentence=SHORT)]), timeout=60))
        assert [a.id for a in answers] == ["x"]       # the stream itself is not gated (its item may be refused)
        for call in busy:
            call.result(timeout=120)
        error = outcome(lambda: stub.Translate(too_long, timeout=30))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "max_chars_per_sentence" in error.details()
        assert server.metric("attnmt_rejected_total", reason="queue_full") >= 2


# --- the load benches, on tiny bounds (their figures mean nothing here) ----------------

@pytest.fixture(scope="module")
def bench_data(tmp_path_factory):
    from conftest import write_corpus
    return write_corpus(tmp_path_factory.mktemp("load") / "data", {"test": 12})


def test_bench_overload_reports_every_figure(tiny_model, bench_data, tmp_path, capsys):
    import json

    from attnmt.service.cli import main
    out = tmp_path / "overload.json"
    assert main(["bench", "overload", "--model", str(tiny_model), "--data", str(bench_data), "--duration", "1",
                 "--max-queue", "2", "--callers", "24", "--baseline-callers", "2", "--channels", "2",
                 "--set", "max_batch_rows=2", "--set", "max_beam_size=2", "--set", "default_beam_size=1",
                 "--json", str(out)]) == 0
    report, table = json.loads(out.read_text()), capsys.readouterr().out
    assert set(report["runs"]) == {"baseline", "at_once", "retry_info"}
    for name in ("at_once", "retry_info"):
        run = report["runs"][name]
        assert run["callers"] == 24 and run["refusals"] > 0 and run["answered"] > 0, run
        assert run["refusal_p50_ms"] <= run["refusal_p99_ms"] and run["server_cpu_ms_per_refusal"] is not None
        assert "refusal_p99_after_1s_ms" in run          # None: a 1 s run has no second second
        assert run["goodput_ratio"] > 0 and run["errors"] == {} and run["error_examples"] == {}, run
    assert report["runs"]["baseline"]["errors"] == {}
    assert [t["goal"] for t in report["targets"]] == ["≥ 0.7", "≤ 50"] * 2 + ["≤ 0"] * 3    # no unexpected code
    assert [run["unexpected"] for run in report["runs"].values()] == [0, 0, 0]
    assert "| at_once | 24 |" in table and "| target | measured | goal | met |" in table


def test_bench_soak_reports_memory_and_outcomes(tiny_model, bench_data, tmp_path, capsys):
    import json

    from attnmt.service.cli import main
    out = tmp_path / "soak.json"
    code = main(["bench", "soak", "--model", str(tiny_model), "--data", str(bench_data), "--duration", "3",
                 "--capacity-seconds", "1", "--sample-every", "0.5", "--json", str(out)])
    report, table = json.loads(out.read_text()), capsys.readouterr().out
    assert report["unexpected"] == {}, report["outcomes"]
    assert code == (0 if report["targets"][0]["met"] else 1)      # memory over 3 s means little
    assert report["calls"] > 0 and len(report["rss_samples"]) >= 3
    assert report["outcomes"]["translate"].get("OK", 0) > 0
    assert report["rss_mb"]["first"] > 0 and isinstance(report["rss_growth_pct"], float)
    assert "Resident memory" in table and "| translate |" in table
