#!/usr/bin/env bash
# The GPU checks, in one run on a lent GPU machine (docs/gpu.md says how the pieces
# get there): install what the machine lacks, then the GPU tests, `attnmt bench gpu` and the
# server at 64 closed-loop clients. Reports land in $OUT (default ./gpu-out).
#
# Expects, in PIECES_DIR (default: the repository; /tmp/pieces where the calls before copied them
# while the bundled weights were set aside): .gpu*/ort.tar.xz.* (onnxruntime-gpu 1.31.1 unpacked, its
# CUDA provider pruned to sm_90, xz, split), .gpu1/site.tar.xz (the cp312 wheels the machine lacks,
# installed with pip --target here) and .gpu1/bible/test.{es,en} (the Bible test split).
set -u -o pipefail
OUT=${OUT:-gpu-out}
P=${PIECES_DIR:-.}
mkdir -p "$OUT" /tmp/site
start=$(date +%s)
stamp() { echo "== $(( $(date +%s) - start )) s: $*"; }

stamp install
xz -dc "$P"/.gpu1/site.tar.xz | tar x -C /tmp/site || exit 3     # the wheels, installed here with --target
cat "$P"/.gpu*/ort.tar.xz.* | xz -d | tar x -C /tmp/site || exit 4
# attnmt itself: its three worlds linked in as the package (the editable install's layout, with
# no build), and the entry points that register the subcommands
mkdir -p /tmp/site/attnmt /tmp/site/attnmt-0.1.0.dist-info
for world in service model bench; do ln -sfn "$PWD/$world" "/tmp/site/attnmt/$world"; done
printf 'Metadata-Version: 2.1\nName: attnmt\nVersion: 0.1.0\n' > /tmp/site/attnmt-0.1.0.dist-info/METADATA
printf '[attnmt.commands]\nmodel = attnmt.model.cli:register\nbench = attnmt.bench.cli:register\n' \
    > /tmp/site/attnmt-0.1.0.dist-info/entry_points.txt
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 ORT_DISABLE_TELEMETRY=1
nvidia-smi | tee "$OUT/nvidia-smi.txt" | head -15
python3 - <<'EOF' 2>&1 | tee "$OUT/ort.txt"
import onnxruntime as ort, grpc, google.protobuf as pb, numpy, sys
print(sys.version.split()[0], "onnxruntime", ort.__version__, ort.__file__, "grpc", grpc.__version__,
      "protobuf", pb.__version__, "numpy", numpy.__version__)
print("available", ort.get_available_providers())
ort.preload_dlls()
EOF

stamp tests
timeout "${TEST_S:-200}" python3 -m pytest -q -p no:cacheprovider -rA --timeout 180 \
    tests/unit/inference/test_cuda.py \
    "tests/unit/inference/test_decoding.py::test_cuda_gives_the_cpu_answers" \
    "tests/unit/model/test_export.py::test_cuda_without_a_gpu_is_refused_not_silently_cpu" \
    "tests/unit/model/test_train.py::test_a_run_moves_between_cpu_and_cuda" \
    2>&1 | tee "$OUT/pytest.log" | tail -30

stamp bench gpu
timeout "${BENCH_S:-240}" python3 -m attnmt.service.cli bench gpu --data "$P"/.gpu1/bible --sentences "${GPU_SENTENCES:-256}" \
    --json "$OUT/bench-gpu.json" > "$OUT/bench-gpu.md" 2> "$OUT/bench-gpu.err"
echo "rc $?"; grep -v "^- .*: {" "$OUT/bench-gpu.md" | cut -c1-300; tail -5 "$OUT/bench-gpu.err"

for clients in ${CLIENTS:-64}; do
    stamp serving "$clients" clients
    timeout "${SERVING_S:-150}" python3 -m attnmt.service.cli bench serving --data "$P"/.gpu1/bible \
        --sentences "${SENTENCES:-512}" --repeats 2 --concurrency "$clients" --latency-sentences 50 \
        --set device=cuda --json "$OUT/serving-$clients.json" 2>&1 | tee "$OUT/serving-$clients.log" | tail -20
done
stamp done
