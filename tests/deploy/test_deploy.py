"""The deployment files, checked offline with the real tools: hadolint on the
Dockerfile, yamllint on deploy/, `kubectl kustomize` + kubernetes-validate on
the Kubernetes base and GPU overlay, promtool on the alert rules and their unit
tests, and every PromQL query (alerts and Grafana dashboard) against the metric
names the service exports. No image is built and no cluster is contacted."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO

ROOT = REPO
DEPLOY = ROOT / "deploy"
KUSTOMIZE_DIRS = {"base": DEPLOY / "kubernetes" / "base", "gpu": DEPLOY / "kubernetes" / "overlays" / "gpu"}
ALERTS = DEPLOY / "prometheus" / "alerts.yml"
ALERTS_TEST = DEPLOY / "prometheus" / "alerts_test.yml"
DASHBOARD = DEPLOY / "grafana" / "attnmt-dashboard.json"
ADAPTER = DEPLOY / "prometheus-adapter" / "values.yaml"
KUBERNETES_VERSION = "1.30.0"    # the stated minimum: preStop sleep is on by default from 1.30
GRPC_PORT, HTTP_PORT, METRICS_PORT = 50051, 8080, 8002
SERVICE = "attnmt.v1.Translator"
MODEL_DIRS = ["/models/transformer-es-en", "/models/rnnsearch-es-en", "/models/transformer-en-es"]  # the default first

# What service/server/metrics.py exports (test_metric_list_matches_the_service keeps this honest).
COUNTERS = {"grpc_server_started_total", "grpc_server_handled_total", "grpc_server_msg_received_total",
            "grpc_server_msg_sent_total", "attnmt_sentences_total", "attnmt_source_tokens_total",
            "attnmt_target_tokens_total", "attnmt_rejected_total", "attnmt_step_failures_total",
            "attnmt_cache_requests_total", "attnmt_idle_steps_total", "http_server_requests_total"}
GAUGES = {"attnmt_queue_depth", "attnmt_inflight_sentences", "attnmt_model_info", "attnmt_ready",
          "attnmt_cache_entries", "attnmt_decoder_cache_bytes", "http_server_active_requests"}
HISTOGRAMS = {"grpc_server_handling_seconds", "attnmt_batch_rows", "attnmt_queue_wait_seconds",
              "attnmt_step_seconds", "attnmt_encoder_seconds", "http_server_request_duration_seconds"}
SCRAPE_SERIES = {"up"}           # written by Prometheus itself, for every target


# --- helpers ---

def tool(name: str) -> str:
    """A tool from the dev extra, installed next to this interpreter."""
    path = Path(sys.executable).parent / name
    if not path.exists():
        pytest.fail(f"{name} not found next to {sys.executable}: install the dev extra (pip install -e '.[dev]')")
    return str(path)


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.skip("promtool not installed (Debian package `prometheus`; `make test` installs it)")
    return path


def run(*cmd: str, cwd: Path = ROOT) -> str:
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=60)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{' '.join(cmd)} exited with {result.returncode}:\n{output}"
    return output


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_LABEL_LIST = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENTIFIER = re.compile(r"(?<![\w.$])([a-zA-Z_:][\w:]*)(?![\w:])(?!\s*\()")
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
             "and", "or", "unless", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """Metric names in a PromQL expression: what is left once strings, label
    matchers, label lists, ranges, functions and keywords are taken out."""
    expr = _STRING.sub('""', expr)
    expr = re.sub(r"\{[^}]*\}", " ", expr)
    expr = re.sub(r"\[[^\]]*\]", " ", expr)
    expr = _LABEL_LIST.sub(" ", expr)
    return {name for name in _IDENTIFIER.findall(expr) if name.lower() not in _KEYWORDS}


def unknown_metrics(expr: str, allowed_extra: set[str] = frozenset()) -> set[str]:
    unknown = set()
    for name in metric_names(expr):
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        if name in COUNTERS | GAUGES | allowed_extra or (base != name and base in HISTOGRAMS):
            continue
        unknown.add(name)           # includes a bare histogram name: no such series
    return unknown


def alert_rules() -> list[dict]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def dashboard_targets(board: dict) -> list[tuple[str, str]]:
    """(panel title, expr) for every query, rows' nested panels included."""
    out = []
    for panel in board["panels"]:
        for p in [panel, *panel.get("panels", [])]:
            out += [(p["title"], t["expr"]) for t in p.get("targets", [])]
    return out


@pytest.fixture(scope="module", params=sorted(KUSTOMIZE_DIRS))
def rendered(request, tmp_path_factory) -> tuple[str, Path, dict[str, dict]]:
    """(variant, rendered file, {kind: object}) of `kubectl kustomize` on the base or the GPU overlay."""
    text = run(tool("kubectl"), "kustomize", str(KUSTOMIZE_DIRS[request.param]))
    path = tmp_path_factory.mktemp("kustomize") / f"{request.param}.yaml"
    path.write_text(text)
    objects = [o for o in yaml.safe_load_all(text) if o]
    by_kind = {o["kind"]: o for o in objects}
    assert len(by_kind) == len(objects), "one object of each kind expected"
    return request.param, path, by_kind


def container(objects: dict[str, dict]) -> dict:
    (c,) = objects["Deployment"]["spec"]["template"]["spec"]["containers"]
    return c


# --- Dockerfile ---

def test_dockerfile_passes_hadolint():
    run(tool("hadolint"), "Dockerfile")


def test_dockerfile_copies_only_what_serving_needs():
    """What the build context holds and what lands in the image: tests/deploy/test_image_context.py."""
    text = (ROOT / "Dockerfile").read_text()
    copies = re.findall(r"^COPY\s+(?!--from)(.+)$", text, re.MULTILINE)
    sources = {src for line in copies for src in line.split()[:-1]}
    assert sources == {"deploy/requirements/", "pyproject.toml", "README.md", "service/", "model/", "bench/",
                       "corpus/", "models/rnnsearch-es-en/", "models/transformer-es-en/", "models/transformer-en-es/"}
    # setuptools installs the packages pyproject.toml lists; the image then removes all but service/
    assert 'rm -r "$package/model" "$package/bench" "$package/corpus"' in text
    for model in MODEL_DIRS:
        assert f"COPY {model.removeprefix('/')}/ {model}/" in text
    assert f"ATTNMT_MODELS={','.join(MODEL_DIRS)}" in text
    assert re.search(r"^USER 10001:10001$", text, re.MULTILINE), "numeric non-root user"
    assert re.search(rf"^EXPOSE {GRPC_PORT} {HTTP_PORT} {METRICS_PORT}$", text, re.MULTILINE)
    assert text.rstrip().endswith('ENTRYPOINT ["attnmt", "serve"]')
    assert "torch" not in re.sub(r"#.*", "", text)


def test_smoke_test_runs_the_image_as_the_base_does():
    """deploy/smoke-test.sh (by hand, where docker or podman works) starts the container with the
    Deployment's security settings and the ConfigMap's settings file, and probes what the probes ask."""
    script = (DEPLOY / "smoke-test.sh").read_text()
    flags = " ".join(re.search(r'\$ENGINE run --detach(.*?)"\$image"\)', script, re.DOTALL)[1].replace("\\\n", " ")
                     .split())
    base = KUSTOMIZE_DIRS["base"]
    pod = yaml.safe_load((base / "deployment.yaml").read_text())["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["securityContext"]["readOnlyRootFilesystem"] and "--read-only" in flags
    assert c["securityContext"]["capabilities"]["drop"] == ["ALL"] and "--cap-drop ALL" in flags
    assert not c["securityContext"]["allowPrivilegeEscalation"] and "--security-opt no-new-privileges" in flags
    assert f"--user {pod['securityContext']['runAsUser']}:{pod['securityContext']['runAsGroup']}" in flags
    (tmp,) = [v for v in pod["volumes"] if v["name"] == "tmp"]
    assert tmp["emptyDir"]["sizeLimit"] == "64Mi" and "--tmpfs /tmp:rw,size=64m,mode=1777" in flags
    generator = yaml.safe_load((base / "kustomization.yaml").read_text())["configMapGenerator"]
    assert [g["envs"] for g in generator] == [["settings.env"]]
    assert '--env-file "$settings"' in flags and "settings=$(cd \"$(dirname \"$0\")\" && pwd)/kubernetes/base/" \
                                                   "settings.env" in script
    assert {c[p]["grpc"].get("service", "") for p in ("startupProbe", "readinessProbe", "livenessProbe")} \
        == {"", SERVICE} and f'for service in ("", "{SERVICE}")' in script
    # every port the Deployment declares, published on loopback; gRPC is called inside the
    # container, HTTP and /metrics from the host on their published ports
    assert [p["containerPort"] for p in c["ports"] if f"--publish 127.0.0.1::{p['containerPort']}" not in flags] == []
    assert all(f'$ENGINE port "$cid" {port}/tcp' in script for port in (HTTP_PORT, METRICS_PORT))
    assert "/readyz" in script and "POST /v1/translate" in script and "translatedText" in script

# --- YAML and Kubernetes ---

def test_deploy_yaml_passes_yamllint():
    run(tool("yamllint"), "-c", str(DEPLOY / ".yamllint.yml"), "--strict", str(DEPLOY))


def test_manifests_validate_against_kubernetes(rendered):
    variant, path, objects = rendered
    assert set(objects) == {"Namespace", "ConfigMap", "Service", "Deployment", "PodDisruptionBudget",
                            "HorizontalPodAutoscaler", "NetworkPolicy"}
    output = run(tool("kubernetes-validate"), "--strict", "-k", KUBERNETES_VERSION, str(path))
    assert output.count("passed") == len(objects), output


def test_probes_call_grpc_health_on_a_numeric_port(rendered):
    _, _, objects = rendered
    c = container(objects)
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        grpc = c[probe]["grpc"]
        assert grpc["port"] == GRPC_PORT and isinstance(grpc["port"], int), f"{probe}: named ports are refused"
    assert c["readinessProbe"]["grpc"]["service"] == SERVICE
    assert c["startupProbe"]["grpc"]["service"] == SERVICE
    assert {p["name"]: p["containerPort"] for p in c["ports"]} \
        == {"grpc": GRPC_PORT, "http": HTTP_PORT, "metrics": METRICS_PORT}


def test_settings_are_valid_service_settings(rendered, monkeypatch):
    """The ConfigMap, read the way `attnmt serve` reads its environment: a
    misspelt ATTNMT_* name would otherwise be ignored without a word."""
    from attnmt.service.server.settings import Settings, load_settings

    variant, _, objects = rendered
    data = objects["ConfigMap"]["data"]
    assert [k for k in data if k.removeprefix("ATTNMT_").lower() not in Settings.model_fields] == []
    for name in [n for n in os.environ if n.startswith("ATTNMT_")]:
        monkeypatch.delenv(name)
    for name, value in data.items():
        monkeypatch.setenv(name, value)
    settings = load_settings()
    assert [str(m) for m in settings.models] == MODEL_DIRS
    assert settings.port == GRPC_PORT and settings.metrics_port == METRICS_PORT
    assert settings.http_enabled and settings.http_port == HTTP_PORT, "the Service and NetworkPolicy expect HTTP"
    assert settings.device == ("cuda" if variant == "gpu" else "cpu")
    if variant == "base":
        # ONNX Runtime's "0 = one per core" would count the node's cores, not the pod's: the
        # decode workers' threads together are the CPU limit, whatever the node has
        assert settings.decode_workers and settings.intra_op_threads
        assert settings.workers * settings.worker_threads == int(container(objects)["resources"]["limits"]["cpu"])


def test_shutdown_fits_in_the_termination_grace_period(rendered):
    _, _, objects = rendered
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    pre_stop = container(objects)["lifecycle"]["preStop"]["sleep"]["seconds"]
    grace = float(objects["ConfigMap"]["data"]["ATTNMT_GRACE_PERIOD_SECONDS"])
    assert pre_stop > 0, "endpoint removal needs time to propagate before the drain starts"
    assert pod["terminationGracePeriodSeconds"] > pre_stop + grace


def test_pods_run_unprivileged(rendered):
    _, _, objects = rendered
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    c = container(objects)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert {m["mountPath"] for m in c["volumeMounts"]} == {"/tmp"}
    # The Service is called attnmt: its links would set ATTNMT_PORT=tcp://...
    assert pod["enableServiceLinks"] is False


def test_service_pdb_autoscaler_and_network_policy_point_at_the_pods(rendered):
    _, _, objects = rendered
    deployment = objects["Deployment"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    service = objects["Service"]["spec"]
    assert service["selector"].items() <= pod_labels.items()
    assert objects["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert objects["HorizontalPodAutoscaler"]["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    policy = objects["NetworkPolicy"]["spec"]
    assert policy["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert {p["port"] for rule in policy["ingress"] for p in rule["ports"]} == {GRPC_PORT, HTTP_PORT, METRICS_PORT}
    assert "replicas" not in deployment["spec"], "the HorizontalPodAutoscaler owns the replica count"
    ports = {p["name"]: p for p in service["ports"]}
    assert ports["grpc"]["port"] == GRPC_PORT and ports["grpc"]["appProtocol"] == "grpc"
    assert ports["http"]["port"] == HTTP_PORT and ports["http"]["appProtocol"] == "http"
    assert {p["targetPort"] for p in service["ports"]} == {p["name"] for p in container(objects)["ports"]}
    assert ports["metrics"]["port"] == METRICS_PORT
    # One way to be scraped (the dedicated job), or an annotation job scrapes the pods twice.
    annotations = deployment["spec"]["template"]["metadata"].get("annotations", {})
    assert [a for a in annotations if a.startswith("prometheus.io/")] == []


def test_only_the_gpu_overlay_asks_for_a_gpu(rendered):
    variant, _, objects = rendered
    c = container(objects)
    limits = c["resources"]["limits"]
    if variant == "gpu":
        assert int(limits["nvidia.com/gpu"]) == 1
        assert objects["ConfigMap"]["data"]["ATTNMT_DEVICE"] == "cuda"
        # the server's GPU defaults, which the base's explicit 64 would otherwise override
        assert objects["ConfigMap"]["data"]["ATTNMT_MAX_BATCH_ROWS"] == "256"
        assert objects["ConfigMap"]["data"]["ATTNMT_MAX_BATCH_TOKENS"] == "32768"
        assert c["image"].endswith("-gpu"), "the CUDA libraries are only in the image built with ORT=gpu"
    else:
        assert "nvidia.com/gpu" not in limits and "nvidia.com/gpu" not in c["resources"]["requests"]
        assert objects["ConfigMap"]["data"]["ATTNMT_DEVICE"] == "cpu"
        assert not c["image"].endswith("-gpu")


def test_every_object_goes_into_the_namespace_the_base_creates(rendered):
    _, _, objects = rendered
    namespace = objects["Namespace"]["metadata"]["name"]
    assert {kind: o["metadata"].get("namespace") for kind, o in objects.items() if kind != "Namespace"} \
        == {kind: namespace for kind in objects if kind != "Namespace"}


def adapter_rules() -> list[dict]:
    return yaml.safe_load(ADAPTER.read_text())["rules"]["custom"]


def adapter_query(rule: dict, matchers: str, group_by: str) -> str:
    """The adapter rule's metricsQuery as prometheus-adapter sends it."""
    return rule["metricsQuery"].replace("<<.LabelMatchers>>", matchers).replace("<<.GroupBy>>", group_by)


def test_autoscaler_scales_on_the_load_signal_the_adapter_serves(rendered):
    variant, _, objects = rendered
    metrics = objects["HorizontalPodAutoscaler"]["spec"]["metrics"]
    served = {rule["name"]["as"] for rule in adapter_rules()}
    pods = [m["pods"] for m in metrics if m["type"] == "Pods"]
    assert [p["metric"]["name"] for p in pods] == ["attnmt_sentences_in_progress"]
    assert pods[0]["metric"]["name"] in served
    assert pods[0]["target"]["type"] == "AverageValue"
    # half of a step's rows in progress per pod, whatever the variant's rows
    rows = int(objects["ConfigMap"]["data"]["ATTNMT_MAX_BATCH_ROWS"])
    assert int(pods[0]["target"]["averageValue"]) == rows // 2
    cpu = [m for m in metrics if m["type"] == "Resource" and m["resource"]["name"] == "cpu"]
    # CPU is the fallback on CPU pods; on a GPU pod it says little about load.
    assert len(cpu) == (1 if variant == "base" else 0)


def test_adapter_rule_queries_exported_series_with_pod_labels(tmp_path):
    (rule,) = adapter_rules()
    assert rule["resources"]["overrides"] == {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}
    assert unknown_metrics(rule["seriesQuery"]) == set()
    query = adapter_query(rule, 'namespace="attnmt",pod=~"attnmt-.*"', "pod")
    assert unknown_metrics(query) == set()
    path = tmp_path / "adapter_rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "adapter", "rules": [{"record": "adapter:query",
                                                                               "expr": query}]}]}))
    run(promtool(), "check", "rules", str(path))


def test_make_export_refuses_without_a_training_run(tmp_path):
    """A newcomer has no run: `make export` says so before installing or writing anything."""
    model = tmp_path / "model"
    result = subprocess.run(["make", "-j1", "export", f"RUN={tmp_path / 'no-run'}", f"RNNSEARCH_MODEL={model}"],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "no trained run" in result.stderr and "make train" in result.stderr
    assert not model.exists()


# --- Prometheus alerts ---

def test_alert_rules_pass_promtool_check():
    run(promtool(), "check", "rules", str(ALERTS))


def test_alert_rules_pass_their_unit_tests():
    run(promtool(), "test", "rules", ALERTS_TEST.name, cwd=ALERTS_TEST.parent)


def test_every_alert_is_tested_firing_and_quiet():
    names = {rule["alert"] for rule in alert_rules()}
    fired, quiet = set(), set()
    for case in yaml.safe_load(ALERTS_TEST.read_text())["tests"]:
        for check in case.get("alert_rule_test", []):
            (fired if check.get("exp_alerts") else quiet).add(check["alertname"])
    assert names - fired == set(), "alerts never seen firing"
    assert names - quiet == set(), "alerts never seen staying quiet"


def test_queue_alert_is_half_the_configured_queue():
    (rule,) = [r for r in alert_rules() if r["alert"] == "AttnmtQueueSaturated"]
    settings = dict(line.split("=", 1) for line in (DEPLOY / "kubernetes" / "base" / "settings.env").read_text()
                    .splitlines() if line and not line.startswith("#"))
    assert float(re.search(r">\s*([\d.]+)\s*$", rule["expr"].strip()).group(1)) == int(settings["ATTNMT_MAX_QUEUE"]) / 2


# --- Grafana dashboard ---

def test_dashboard_is_a_grafana_dashboard_on_a_datasource_variable():
    board = dashboard()
    assert board["schemaVersion"] >= 36 and board["uid"] and board["title"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
            assert all(t["datasource"]["uid"] == "${datasource}" for t in panel["targets"]), panel["title"]
    titles = " ".join(p["title"] for p in board["panels"]).lower()
    for topic in ("requests/s", "error ratio", "latency", "queue depth", "in-flight", "batch rows", "queue wait",
                  "step time", "encoder time", "sentences/s", "tokens/s", "rejected", "models"):
        assert topic in titles


CLIENT_CODES = {"DEADLINE_EXCEEDED", "CANCELLED", "INVALID_ARGUMENT", "NOT_FOUND", "RESOURCE_EXHAUSTED",
                "OUT_OF_RANGE"}    # what callers cause: no server error


def grpc_codes(expr: str) -> set[str]:
    (match,) = set(re.findall(r'grpc_code=~"([^"]+)"', expr))
    return set(match.split("|"))


def panel_target(title: str, legend: str) -> str:
    (panel,) = [p for p in dashboard()["panels"] if p["title"] == title]
    (expr,) = [t["expr"] for t in panel["targets"] if t["legendFormat"].startswith(legend)]
    return expr


def test_error_ratio_panel_counts_the_codes_the_alert_pages_on():
    """The panel's "server errors" line is the alert's ratio: a client's tight deadline shows on neither."""
    (rule,) = [r for r in alert_rules() if r["alert"] == "AttnmtHighErrorRatio"]
    assert grpc_codes(panel_target("Error ratio", "server errors")) == grpc_codes(rule["expr"])
    assert grpc_codes(rule["expr"]).isdisjoint(CLIENT_CODES)


def test_http_error_ratio_counts_what_the_grpc_ratio_counts():
    """HTTP's "server errors" are the statuses the HTTP front answers for the gRPC codes the alert
    counts, and none of those it answers for what callers cause (504: the client's X-Request-Timeout)."""
    import grpc

    from attnmt.service.http.errors import HTTP_STATUS_OF

    def status(code: str) -> str:
        return str(HTTP_STATUS_OF.get(getattr(grpc.StatusCode, code), 500))

    expr = panel_target("HTTP error ratio", "server errors")
    numerator = expr.split(" or ")[0]
    matchers = re.findall(r'\bcode(=~|!~|!=|=)"([^"]+)"', numerator)
    counted = {str(s) for s in range(100, 600)
               if all(bool(re.fullmatch(value, str(s))) == op.startswith("=") for op, value in matchers)}
    (rule,) = [r for r in alert_rules() if r["alert"] == "AttnmtHighErrorRatio"]
    assert {status(c) for c in grpc_codes(rule["expr"])} <= counted
    assert counted.isdisjoint({status(c) for c in CLIENT_CODES})
    # /readyz answers 503 while warming up or draining: its answer, not a failure
    assert expr.count('route!="/readyz"') == 2


def test_dashboard_queries_parse(tmp_path):
    """promtool parses each query as a recording rule, Grafana variables filled in."""
    rules = [{"record": f"dashboard:query_{i}",
              "expr": expr.replace("$__rate_interval", "5m").replace("$job", ".*").replace("$instance", ".*")}
             for i, (_, expr) in enumerate(dashboard_targets(dashboard()))]
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    run(promtool(), "check", "rules", str(path))


# --- metric names ---

def test_metric_name_parser():
    assert metric_names('sum by (grpc_method) (rate(grpc_server_handled_total{grpc_code!="OK"}[5m]))') \
        == {"grpc_server_handled_total"}
    assert metric_names("a / ignoring (reason) group_left\n sum(rate(b_total[$__rate_interval])) > 0.5e3") \
        == {"a", "b_total"}
    assert unknown_metrics("histogram_quantile(0.95, sum by (le) (rate(attnmt_step_seconds_bucket[5m])))") == set()
    assert unknown_metrics("rate(grpc_server_handeld_total[5m])") == {"grpc_server_handeld_total"}
    assert unknown_metrics("attnmt_step_seconds") == {"attnmt_step_seconds"}
    assert unknown_metrics("up == 0") == {"up"} and unknown_metrics("up == 0", SCRAPE_SERIES) == set()


def test_alerts_use_only_exported_metrics():
    for rule in alert_rules():
        assert unknown_metrics(rule["expr"], SCRAPE_SERIES) == set(), rule["alert"]


def test_dashboard_uses_only_exported_metrics():
    targets = dashboard_targets(dashboard())
    assert len(targets) >= 15
    for title, expr in targets:
        assert unknown_metrics(expr) == set(), title
    used = set().union(*(metric_names(e) for _, e in targets))
    assert {re.sub(r"_(bucket|sum|count)$", "", n) for n in used} >= HISTOGRAMS | GAUGES, \
        "every histogram and gauge has a panel"


def test_metric_list_matches_the_service():
    from attnmt.service.server.metrics import Metrics

    exported = {"counter": set(), "gauge": set(), "histogram": set()}
    for family in Metrics().registry.collect():
        exported[family.type].add(family.name + "_total" if family.type == "counter" else family.name)
    assert exported == {"counter": COUNTERS, "gauge": GAUGES, "histogram": HISTOGRAMS}


def set_image(kustomization: Path, name: str, reference: str) -> None:
    """What `kustomize edit set image NAME=REPO:TAG` writes (the standalone kustomize is not installed)."""
    doc = yaml.safe_load(kustomization.read_text())
    repo, tag = reference.rsplit(":", 1)
    images = [i for i in doc.get("images", []) if i["name"] != name]
    doc["images"] = images + [{"name": name, "newName": repo, "newTag": tag}]
    kustomization.write_text(yaml.safe_dump(doc, sort_keys=False))


def test_the_documented_image_edits_give_each_variant_its_image(tmp_path):
    """After the README's `kustomize edit set image`, each variant runs its own image: the GPU
    overlay must not run the CPU image."""
    import shutil
    tree = tmp_path / "kubernetes"
    shutil.copytree(DEPLOY / "kubernetes", tree)
    set_image(tree / "base" / "kustomization.yaml", "attnmt", "registry.example/attnmt:0.1.0")
    set_image(tree / "overlays" / "gpu" / "kustomization.yaml", "attnmt-gpu", "registry.example/attnmt:0.1.0-gpu")
    images = {}
    for variant, path in (("base", tree / "base"), ("gpu", tree / "overlays" / "gpu")):
        objects = {o["kind"]: o for o in yaml.safe_load_all(run(tool("kubectl"), "kustomize", str(path))) if o}
        images[variant] = container(objects)["image"]
    assert images == {"base": "registry.example/attnmt:0.1.0", "gpu": "registry.example/attnmt:0.1.0-gpu"}
