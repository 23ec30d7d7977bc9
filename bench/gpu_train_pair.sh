#!/usr/bin/env bash
# Both directions' training stages side by side on one lent GPU, in one call (docs/gpu.md, "Training
# on a GPU"): English→Spanish from scratch (model/configs/transformer-en-es-gpu.yaml) and the
# Spanish→English general stage from the CPU run's best weights
# (model/configs/transformer-es-en-general-gpu.yaml). A 256-wide Transformer leaves most of an H200
# idle, so two stages share it for about the device time of one.
#
# Expects /tmp/pieces/en and /tmp/pieces/es, copied there by the calls before (a call carries at
# most 64 MiB with the repository): each holds data.tar.xz, train.links.xz, piece_links.npz.xz and
# spm.model as bench/gpu_train.sh reads them; en also site.tar.xz (pydantic), es also checkpoint.pt
# (the starting weights in float16).
# Each stage hands back its averaged last three validations' weights in float16 parts
# ($OUT/en-es/, $OUT/es-en/; English→Spanish its best too), and one $OUT/logs.tar.xz with both
# runs' train.log, history.json and config.yaml, since a call returns at most 8 files.
# Env: TRAIN_S (each stage's training limit), PIECES_DIR, THREADS, OVERRIDES_EXTRA (JSON fields merged
# into both stages', e.g. '"device": "cpu", "max_steps": 2' with NO_SITE=1 for a dry run here).
set -u -o pipefail
OUT=${OUT:-gpu-out}
P=${PIECES_DIR:-/tmp/pieces}
export TRAIN_S=${TRAIN_S:-450}
mkdir -p "$OUT"
extra="\"threads\": ${THREADS:-7}${OVERRIDES_EXTRA:+, $OVERRIDES_EXTRA}"

CONFIG=model/configs/transformer-en-es-gpu.yaml RUN=runs/transformer-en-es-gpu INIT=/tmp/en-es-init \
    DATA=data/en-es-general PIECES=$P/en WEIGHTS= UNPACK=only OUT="$OUT/en-es" bash bench/gpu_train.sh || exit $?
CONFIG=model/configs/transformer-es-en-general-gpu.yaml RUN=runs/transformer-es-en-general-gpu \
    INIT=runs/transformer-es-en-general-gpu-init DATA=data/es-en-general PIECES=$P/es WEIGHTS=$P/es/checkpoint.pt \
    NO_SITE=1 UNPACK=only OUT="$OUT/es-en" bash bench/gpu_train.sh || exit $?

CONFIG=model/configs/transformer-en-es-gpu.yaml RUN=runs/transformer-en-es-gpu INIT=/tmp/en-es-init \
    OVERRIDES="{$extra}" KEEP="averaged-last3 best" UNPACK=skip OUT="$OUT/en-es" \
    bash bench/gpu_train.sh > "$OUT/en-es.log" 2>&1 & pids="$!"
CONFIG=model/configs/transformer-es-en-general-gpu.yaml RUN=runs/transformer-es-en-general-gpu \
    INIT=runs/transformer-es-en-general-gpu-init OVERRIDES="{$extra}" KEEP="averaged-last3" UNPACK=skip \
    OUT="$OUT/es-en" bash bench/gpu_train.sh > "$OUT/es-en.log" 2>&1 & pids="$pids $!"
while sleep "${WATCH_S:-60}" && kill -0 $pids 2>/dev/null; do
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader 2>/dev/null
    tail -qn1 runs/transformer-en-es-gpu/train.log runs/transformer-es-en-general-gpu/train.log 2>/dev/null; done
wait
for stage in en-es es-en; do echo "== $stage"; tail -15 "$OUT/$stage.log"; done
cp runs/transformer-en-es-gpu/config.yaml "$OUT/en-es/" 2>/dev/null
cp runs/transformer-es-en-general-gpu/config.yaml "$OUT/es-en/" 2>/dev/null
tar cJf "$OUT/logs.tar.xz" -C "$OUT" $(cd "$OUT" && ls ./*.log ./*/train.log ./*/history.json ./*/config.yaml 2>/dev/null) \
    && rm -f "$OUT"/*.log "$OUT"/*/train.log "$OUT"/*/history.json "$OUT"/*/config.yaml
find "$OUT" -type f | xargs ls -la
