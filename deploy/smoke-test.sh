#!/usr/bin/env bash
# Runs the serving image as the Kubernetes base runs it and checks what a user would see:
#
#   deploy/smoke-test.sh IMAGE          # e.g. attnmt:0.1.0; ENGINE=podman picks the engine
#
# The base's security settings (read-only root, a 64 MiB tmpfs on /tmp as its emptyDir, every
# capability dropped, no privilege escalation, uid 10001) and its settings file
# (kubernetes/base/settings.env, the ConfigMap). Then: health SERVING for the server and for
# attnmt.v1.Translator (the probes), a translation that keeps its %s, HTTP on the published port
# (/readyz, POST /v1/translate, LibreTranslate's POST /translate, the web page and the API docs
# with the files they load), /metrics on the published port, the server's uid, the read-only root,
# the model directory holding what its manifest lists and no more, a start without warnings, and
# exit 0 after SIGTERM. The gRPC client runs inside the container (the image's grpcio and
# `attnmt translate --server`), and so does the JSON reading (the image's python): the host
# needs only docker or podman, and curl.
set -euo pipefail

image=${1:?usage: deploy/smoke-test.sh IMAGE}
settings=$(cd "$(dirname "$0")" && pwd)/kubernetes/base/settings.env
if [ -z "${ENGINE:-}" ]; then
    for candidate in docker podman; do      # a docker client without a daemon does not count
        if command -v "$candidate" >/dev/null && "$candidate" info >/dev/null 2>&1; then
            ENGINE=$candidate
            break
        fi
    done
fi
[ -n "${ENGINE:-}" ] || { echo "smoke-test: needs docker or podman, working" >&2; exit 2; }
command -v curl >/dev/null || { echo "smoke-test: needs curl" >&2; exit 2; }

cid=""
trap '[ -z "$cid" ] || $ENGINE rm --force "$cid" >/dev/null 2>&1 || true' EXIT
check() { printf '%-42s' "$1"; }
pass() { echo "ok${1:+  $1}"; }
fail() {
    echo "FAILED: $1"
    echo "--- server log"
    $ENGINE logs "$cid" 2>&1 | tail -n 40
    exit 1
}
in_container() { $ENGINE exec -i "$cid" "$@"; }
# EXPR of the JSON document on stdin (`body`), printed by the image's python
json_field() { in_container python -c "import json, sys; body = json.load(sys.stdin); print($1)"; }

echo "$ENGINE $($ENGINE version --format '{{.Client.Version}}' 2>/dev/null || true), image $image" \
     "($(( $($ENGINE image inspect --format '{{.Size}}' "$image") / 1000000 )) MB)"
started=$(date +%s%N)
cid=$($ENGINE run --detach \
    --read-only --tmpfs /tmp:rw,size=64m,mode=1777 \
    --cap-drop ALL --security-opt no-new-privileges \
    --user 10001:10001 \
    --env-file "$settings" \
    --publish 127.0.0.1::50051 --publish 127.0.0.1::8080 --publish 127.0.0.1::8002 \
    "$image")

check "health SERVING (server, Translator)"
in_container python - <<'EOF' || fail "not SERVING"
import sys
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

stub = health_pb2_grpc.HealthStub(grpc.insecure_channel("127.0.0.1:50051"))
deadline = time.monotonic() + 180       # the startup probe's budget (kubernetes/base/deployment.yaml)
for service in ("", "attnmt.v1.Translator"):        # liveness asks for "", readiness for the service
    status = None
    while status != health_pb2.HealthCheckResponse.SERVING:
        if time.monotonic() > deadline:
            sys.exit(f"{service or 'server'}: {status}")
        time.sleep(0.1)
        try:
            status = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=2).status
        except grpc.RpcError as e:
            status = e.code()
EOF
pass "$(( ($(date +%s%N) - started) / 1000000 )) ms after start"

check "translation keeps %s"
text="No se puede abrir el archivo %s: permiso denegado."
out=$(in_container attnmt translate --server 127.0.0.1:50051 "$text") || fail "Translate failed: $out"
[[ $out == *%s* ]] || fail "the placeholder is lost: '$text' -> '$out'"
pass "'$text' -> '$out'"

check "every served model by name"
names=""
english="Cannot open the file %s: permission denied."
models=0
# each model with a sentence of its source language (its manifest's), named name:language
for entry in $(in_container python -c 'import json, os; print(*(os.path.basename(m) + ":" + json.load(open(os.path.join(m, "manifest.json")))["source_language"] for m in os.environ["ATTNMT_MODELS"].split(",")))'); do
    name=${entry%%:*}
    if [[ ${entry#*:} == en ]]; then sentence=$english; else sentence=$text; fi
    out=$(in_container attnmt translate --server 127.0.0.1:50051 --model-name "$name" "$sentence") \
        || fail "Translate with model $name failed: $out"
    [[ $out == *%s* ]] || fail "$name lost the placeholder: '$sentence' -> '$out'"
    [[ $out != "$sentence" ]] || fail "$name gave its source back: '$sentence'"
    names="$names $name (${entry#*:})"
    models=$((models + 1))
done
pass "${names# }"

check "HTTP /readyz on the published port"
http=$($ENGINE port "$cid" 8080/tcp | head -n 1)
status() { curl -sS -o /dev/null -w '%{http_code}' "http://${http}$1" 2>/dev/null || true; }
ready=""
for _ in $(seq 50); do          # the same flag as the health status above, set a moment after it
    ready=$(status /readyz)
    [ "$ready" = 200 ] && break
    sleep 0.1
done
[ "$ready" = 200 ] || fail "/readyz answered ${ready:-nothing}"
[ "$(status /healthz)" = 200 ] || fail "/healthz answered $(status /healthz)"
pass "$http: /readyz 200, /healthz 200"

post() { curl -fsS -H 'Content-Type: application/json' --data "$2" "http://${http}$1"; }
text="Y dijo Dios: Sea la luz."        # the bundled model learnt its Spanish from the Bible
check "HTTP POST /v1/translate"
body=$(post /v1/translate "{\"sentences\": [\"$text\"]}") || fail "POST /v1/translate failed"
out=$(json_field 'body["translations"][0]["text"]' <<<"$body") || fail "no translation in $body"
[ -n "$out" ] || fail "an empty translation: $body"
pass "'$text' -> '$out'"

check "LibreTranslate POST /translate"
body=$(post /translate "{\"q\": \"$text\", \"source\": \"es\", \"target\": \"en\"}") \
    || fail "POST /translate failed"
out=$(json_field 'body["translatedText"]' <<<"$body") || fail "no translatedText in $body"
[ -n "$out" ] || fail "an empty translatedText: $body"
pass "'$text' -> '$out'"

check "web page and API docs, with their files"
# The files are package data (pyproject's [tool.setuptools.package-data]): a pattern that misses
# one leaves the page without its script or the docs without Swagger UI.
for page in / /docs; do
    html=$(curl -fsS "http://${http}${page}") || fail "GET $page failed"
    for file in $(grep -o '\(src\|href\)="static/[^"]*"' <<<"$html" | cut -d'"' -f2); do
        [ "$(status "/$file")" = 200 ] || fail "GET /$file (loaded by $page) answered $(status "/$file")"
    done
done
openapi=$(curl -fsS "http://${http}/openapi.json" | json_field 'body["openapi"]') || fail "no /openapi.json"
pass "/, /docs and their static/ files, OpenAPI $openapi"

check "/metrics on the published port"
port=$($ENGINE port "$cid" 8002/tcp | head -n 1)
metrics=$(curl -fsS "http://${port}/metrics") || fail "no /metrics on $port"
grep -q '^attnmt_ready 1' <<<"$metrics" || fail "attnmt_ready is not 1"
calls=$((1 + models))      # the first translation, then one per model by name
grep -q "^grpc_server_handled_total{.*grpc_code=\"OK\".*grpc_method=\"Translate\".*} $calls" <<<"$metrics" \
    || fail "the $calls Translate calls are not counted"
grep -q '^http_server_requests_total{code="200",.*route="/v1/translate"} 1' <<<"$metrics" \
    || fail "the HTTP translation is not counted"
pass "$port: attnmt_ready 1, the gRPC and HTTP translations counted"

check "server runs as uid 10001"
uid=$(in_container python -c 'import os; print(os.stat("/proc/1").st_uid)')
[ "$uid" = 10001 ] || fail "uid $uid"
pass

check "read-only root, writable /tmp"
in_container python -c 'import os, sys; sys.exit(not os.statvfs("/").f_flag & os.ST_RDONLY)' \
    || fail "the root filesystem is writable"
in_container sh -c 'echo > /tmp/smoke-test' || fail "/tmp is not writable"
pass

check "model files: what the manifest serves"
files=$(in_container python - <<'EOF'
import os
import sys

from attnmt.service.modeldir.manifest import MANIFEST, load_manifest

for model in os.environ["ATTNMT_MODELS"].split(","):
    files = load_manifest(model).files
    listed = {name for name, entry in files.items() if entry.serving} | {MANIFEST, "MODEL_CARD.md"}
    shipped = set(os.listdir(model))
    if shipped != listed:
        sys.exit(f"{model}: served, missing: {sorted(listed - shipped)}; shipped, not served: "
                 f"{sorted(shipped - listed)}")
    if "checkpoint.pt" in shipped:
        sys.exit(f"{model}: checkpoint.pt (PyTorch weights, never served) is shipped")
    print(os.path.basename(model) + ":", *sorted(shipped))
EOF
) || fail "the model directory differs from its manifest"
pass "$files"

check "a start without warnings"
noise=$($ENGINE logs "$cid" 2>&1 | grep -v '^[0-9-]* [0-9:,]* INFO ' || true)
[ -z "$noise" ] || fail "besides INFO lines, the server logged: $noise"
pass

check "SIGTERM: drain and exit 0"
$ENGINE kill --signal TERM "$cid" >/dev/null
stopping=$(date +%s%N)
code=$(timeout 40 $ENGINE wait "$cid") || fail "still running 40 s after SIGTERM"
[ "$code" = 0 ] || fail "exit code $code"
$ENGINE logs "$cid" 2>&1 | grep -q 'INFO attnmt: stopped' || fail "no 'stopped' in the log"
pass "$(( ($(date +%s%N) - stopping) / 1000000 )) ms"

echo "--- server log"
$ENGINE logs "$cid" 2>&1
echo "smoke test passed: $image"
