"""A real Prometheus (Debian `prometheus`, which `make test` installs with promtool)
scrapes a live `attnmt serve` every second while a short mixed load runs: valid
calls of every method, invalid ones, a deadline that expires in the queue, and an
overload. Then every Grafana dashboard expression and every alert expression is
evaluated through Prometheus's HTTP API, and the rejection alert is seen pending
or firing (in a copy of the rules whose `for` is one second). Loopback only."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import grpc
import pytest
import yaml

from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.stubs import translator_pb2_grpc as pb_grpc
from conftest import RunningServer
from deploy.test_deploy import ALERTS, adapter_query, adapter_rules, dashboard, dashboard_targets

SHORT = "peru vidas kasa ."
LONG = "kasa granda amas libo nova . gato roja havas arbo blanka . sola vidas luna . peru amas mesa roja ."


def slow_align(n: int) -> pb.AlignRequest:
    """Forced decoding of about 630 + 21 n steps; each n its own request (the cache holds aligns too)."""
    return pb.AlignRequest(source=LONG, target=" ".join(["the big house sees the dog ."] * (30 + n)))

WINDOW = "5m"          # $__rate_interval in the dashboard: covers the whole run, so no rate() misses the load
PATIENCE = 120         # seconds any wait may take on a busy machine before the test gives up


def wait_for(what: str, condition, timeout: float = PATIENCE, every: float = 0.2):
    """Poll `condition` until it returns something truthy; fail with `what` after `timeout` seconds."""
    give_up = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > give_up:
            pytest.fail(f"gave up after {timeout:g}s waiting for {what}")
        time.sleep(every)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    """`prometheus` on a loopback port, scraping `target` as job "attnmt" every second
    and evaluating `rules` every second."""

    def __init__(self, root: Path, target: str, rules: list[dict]):
        binary = shutil.which("prometheus")
        (root / "alerts.yml").write_text(yaml.safe_dump({"groups": rules}, sort_keys=False))
        (root / "prometheus.yml").write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "rule_files": ["alerts.yml"],
            "scrape_configs": [{"job_name": "attnmt", "static_configs": [{"targets": [target]}]}]}))
        self.url = f"http://127.0.0.1:{free_port()}"
        self.log = open(root / "prometheus.log", "w+")
        self.proc = subprocess.Popen([binary, f"--config.file={root / 'prometheus.yml'}",
                                      f"--storage.tsdb.path={root / 'data'}",
                                      f"--web.listen-address={self.url.removeprefix('http://')}",
                                      "--log.level=warn"], stdout=self.log, stderr=subprocess.STDOUT)
        wait_for("Prometheus to be ready", self._ready)

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            self.log.seek(0)
            pytest.fail(f"prometheus exited with {self.proc.returncode}:\n{self.log.read()[-3000:]}")
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=5) as r:
                return r.status == 200
        except OSError:
            return False

    def api(self, path: str, **params: str) -> dict:
        url = f"{self.url}/api/v1/{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
        try:
            with urllib.request.urlopen(url, timeout=30) as r:
                body = json.load(r)
        except urllib.error.HTTPError as e:        # a bad query answers 400 with the error in the body
            body = json.load(e)
        return body

    def query(self, expr: str) -> dict:
        return self.api("query", query=expr)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.log.close()


def values(result: dict) -> list[float]:
    assert result["status"] == "success", result
    data = result["data"]
    samples = data["result"] if data["resultType"] == "vector" else [{"value": data["result"]}]
    return [float(s["value"][1]) for s in samples]


def short_rules() -> list[dict]:
    """alerts.yml with every `for` at one second, so a condition becomes an alert within the test."""
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    for group in groups:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = "1s"
    return groups


def mixed_load(server: RunningServer, round: int) -> None:
    """Every method answered OK, client errors, an expired deadline and an overload.
    Each round's expired and overloading requests are new to the cache."""
    # HTTP beside gRPC: a translation and a client error, for the dashboard's HTTP panels
    def post(path: str, body: dict) -> int:
        request = urllib.request.Request(f"{server.http}{path}", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status
        except urllib.error.HTTPError as e:
            return e.code
    assert post("/v1/translate", {"sentences": [SHORT]}) == 200
    assert post("/v1/translate", {}) == 400
    with grpc.insecure_channel(server.address) as channel:
        s = pb_grpc.TranslatorStub(channel)
        for _ in range(3):                                           # the second and third are cache hits
            s.Translate(pb.TranslateRequest(sentences=[SHORT, LONG]), timeout=60)
        s.Align(pb.AlignRequest(source=SHORT, target="the dog sees the house ."), timeout=60)
        stream = s.TranslateStream(iter([pb.StreamRequest(id=str(i), sentence=SHORT) for i in range(3)]), timeout=60)
        assert len(list(stream)) == 3
        s.ListModels(pb.ListModelsRequest(), timeout=60)
        s.GetModel(pb.GetModelRequest(), timeout=60)

        def refused(call, code: grpc.StatusCode) -> None:
            with pytest.raises(grpc.RpcError) as info:
                call()
            assert info.value.code() == code, info.value

        refused(lambda: s.Translate(pb.TranslateRequest(), timeout=60), grpc.StatusCode.INVALID_ARGUMENT)
        refused(lambda: s.GetModel(pb.GetModelRequest(name="nope"), timeout=60), grpc.StatusCode.NOT_FOUND)
        refused(lambda: channel.unary_unary("/attnmt.v1.Translator/Nope")(b"", timeout=60),
                grpc.StatusCode.UNIMPLEMENTED)

        # One row, a queue of 4: three long aligns hold the row and two queue places, a
        # translation with a short deadline expires in the queue behind them, then a burst
        # of aligns overflows the queue.
        aligns = server.metric("grpc_server_started_total", grpc_method="Align")
        first = 15 * round
        busy = [s.Align.future(slow_align(first + i), timeout=PATIENCE) for i in range(3)]
        wait_for("the long aligns to reach the server",
                 lambda: server.metric("grpc_server_started_total", grpc_method="Align") >= aligns + 3, every=0.01)
        uncached = ["gato amas libo nova .", "luna vidas arbo blanka ."][round]
        refused(lambda: s.Translate(pb.TranslateRequest(sentences=[uncached]), timeout=0.05),
                grpc.StatusCode.DEADLINE_EXCEEDED)
        busy += [s.Align.future(slow_align(first + 3 + i), timeout=PATIENCE) for i in range(12)]
        for call in busy:
            call.exception(timeout=PATIENCE)                        # answered or refused
        codes = [call.code() for call in busy]
        assert grpc.StatusCode.RESOURCE_EXHAUSTED in codes and grpc.StatusCode.OK in codes, codes


@pytest.fixture(scope="module")
def live(tiny_model, tmp_path_factory):
    if shutil.which("prometheus") is None:
        pytest.skip("the prometheus server is not installed (Debian package `prometheus`; "
                    "`make test` installs it, or apt-get install prometheus)")
    env = {"ATTNMT_MAX_QUEUE": "4", "ATTNMT_MAX_BATCH_ROWS": "1", "ATTNMT_MAX_BEAM_SIZE": "1",
           "ATTNMT_DEFAULT_BEAM_SIZE": "1", "ATTNMT_MAX_TOKENS_PER_SENTENCE": "2048", "ATTNMT_CACHE_SIZE": "16",
           "ATTNMT_RETRY_AFTER_SECONDS": "0.1"}
    with RunningServer([tiny_model], env) as server:
        prometheus = Prometheus(tmp_path_factory.mktemp("prometheus"), f"127.0.0.1:{server.metrics_port}",
                                short_rules())
        try:
            wait_for("Prometheus to scrape the server", lambda: values(prometheus.query('up{job="attnmt"}')) == [1.0])
            # Twice: a series born during a round holds one sample of its final count, and
            # rate() sees no increase in it; the second round increases every series.
            for round in range(2):
                mixed_load(server, round)
                # Prometheus has scraped the round once it agrees with the server's own /metrics.
                handled = server.metric("grpc_server_handled_total")
                wait_for(f"Prometheus to see all {handled:g} handled calls", lambda: values(
                    prometheus.query('sum(grpc_server_handled_total{job="attnmt"})')) == [handled])  # noqa: B023
            yield prometheus
        finally:
            prometheus.stop()


def grafana(expr: str) -> str:
    """A dashboard query as Grafana sends it, its variables filled in."""
    return expr.replace("$__rate_interval", WINDOW).replace("$job", "attnmt").replace("$instance", ".*")


def test_every_dashboard_query_returns_data(live):
    targets = dashboard_targets(dashboard())
    assert len(targets) >= 27
    empty = {}
    for title, expr in targets:
        result = live.query(grafana(expr))
        assert result["status"] == "success", f"{title}: {expr}\n{result}"
        numbers = [v for v in values(result) if v == v]         # NaN != NaN: a quantile of nothing
        if not numbers:
            empty[title] = expr
    assert empty == {}, "dashboard queries without data:\n" + json.dumps(empty, indent=1)


def test_dashboard_variables_find_the_job_and_the_instance(live):
    for variable in dashboard()["templating"]["list"]:
        query = variable.get("definition", "")
        match = re.fullmatch(r"label_values\((.+), (\w+)\)", query)
        if match:
            series, label = match[1].replace("$job", "attnmt"), match[2]
            found = live.api(f"label/{label}/values", **{"match[]": series})
            assert found["status"] == "success" and found["data"], f"{variable['name']}: {query}: {found}"


def test_every_rule_loads_and_evaluates_healthy(live):
    def evaluated() -> list[dict] | None:
        rules = [r for g in live.api("rules")["data"]["groups"] for r in g["rules"]]
        ready = rules and all(not r["lastEvaluation"].startswith("0001") for r in rules)
        return rules if ready else None

    rules = wait_for("every rule to be evaluated once", evaluated)
    expected = {r["alert"] for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]}
    assert {r["name"] for r in rules} == expected
    assert {r["name"]: r.get("lastError") for r in rules if r["health"] != "ok"} == {}


def without_threshold(expr: str) -> str:
    """The alert's expression without its final comparison (and outside `absent`)."""
    expr = expr.strip()
    inner = re.fullmatch(r"absent\((.*)\)", expr, re.DOTALL)
    expr = inner[1] if inner else expr
    return re.sub(r"\s*(>=|<=|==|!=|>|<)\s*[-+\d.e]+\s*$", "", expr)


def test_without_threshold_helper():
    assert without_threshold('absent(up{job="attnmt"} == 1)') == 'up{job="attnmt"}'
    assert without_threshold("a\n/\nb\n> 0.05\n") == "a\n/\nb"
    assert without_threshold("increase(x[10m]) > 0") == "increase(x[10m])"


def test_every_alert_expression_without_its_threshold_returns_data(live):
    empty = {}
    for group in yaml.safe_load(ALERTS.read_text())["groups"]:
        for rule in group["rules"]:
            expr = without_threshold(rule["expr"])
            result = live.query(expr)
            assert result["status"] == "success", f"{rule['alert']}: {expr}\n{result}"
            if not values(result):
                empty[rule["alert"]] = expr
    assert empty == {}, "alert expressions without data:\n" + json.dumps(empty, indent=1)


def test_the_autoscaler_signal_returns_data(live):
    """prometheus-adapter's query, as it asks for one pod (here: the one instance)."""
    for rule in adapter_rules():
        result = live.query(adapter_query(rule, 'job="attnmt"', "instance"))
        assert result["status"] == "success" and len(values(result)) == 1, result


def test_overload_drives_the_rejection_alert(live):
    def rejecting() -> list[dict]:
        alerts = live.api("alerts")["data"]["alerts"]
        return [a for a in alerts if a["labels"]["alertname"] == "AttnmtRejecting"]

    (alert,) = wait_for("AttnmtRejecting to be pending or firing", rejecting)
    assert alert["state"] in ("pending", "firing")
    assert alert["labels"]["reason"] == "queue_full" and alert["labels"]["severity"] == "warning"
