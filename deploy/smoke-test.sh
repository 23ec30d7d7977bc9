#!/usr/bin/env bash
# Runs the serving image as the Kubernetes base runs it and checks what a user would see:
#
#   deploy/smoke-test.sh IMAGE          # e.g. attnmt:0.1.0; ENGINE=podman picks the engine
#
# The base's security settings (read-only root, a 64 MiB tmpfs on /tmp as its emptyDir, every
# capability dropped, no privilege escalation, uid 10001) and its settings file
# (kubernetes/base/settings.env, the ConfigMap). Then: health SERVING for the server and for
# attnmt.v1.Translator (the probes), a translation that keeps its %s, /metrics on the published
# port, the server's uid, the read-only root, the model directory holding what its manifest lists
# and no more, a start without warnings, and exit 0 after SIGTERM. The gRPC client runs inside
# the container (the image's grpcio and `attnmt translate --server`): the host needs only docker
# or podman, and curl.
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

echo "$ENGINE $($ENGINE version --format '{{.Client.Version}}' 2>/dev/null || true), image $image" \
     "($(( $($ENGINE image inspect --format '{{.Size}}' "$image") / 1000000 )) MB)"
started=$(date +%s%N)
cid=$($ENGINE run --detach \
    --read-only --tmpfs /tmp:rw,size=64m,mode=1777 \
    --cap-drop ALL --security-opt no-new-privileges \
    --user 10001:10001 \
    --env-file "$settings" \
    --publish 127.0.0.1::50051 --publish 127.0.0.1::8002 \
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

check "/metrics on the published port"
port=$($ENGINE port "$cid" 8002/tcp | head -n 1)
metrics=$(curl -fsS "http://${port}/metrics") || fail "no /metrics on $port"
grep -q '^attnmt_ready 1' <<<"$metrics" || fail "attnmt_ready is not 1"
grep -q '^grpc_server_handled_total{.*grpc_code="OK".*grpc_method="Translate".*} 1' <<<"$metrics" \
    || fail "the Translate call is not counted"
pass "$port: attnmt_ready 1, the Translate call counted"

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

model = os.environ["ATTNMT_MODELS"]
files = load_manifest(model).files
listed = {name for name, entry in files.items() if entry.serving} | {MANIFEST}
shipped = set(os.listdir(model))
if shipped != listed:
    sys.exit(f"served, missing: {sorted(listed - shipped)}; shipped, not served: {sorted(shipped - listed)}")
if "checkpoint.pt" in shipped:
    sys.exit("checkpoint.pt (PyTorch weights, never served) is shipped")
print(*sorted(shipped))
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
