#!/usr/bin/env bash
# Both directions' training stages side by side on one lent GPU, in one call (docs/gpu.md, "Both
# directions in one call"). By default the typed-input continuations of the two bundled models
# (model/configs/transformer-en-es-typed-gpu.yaml, model/configs/transformer-es-en-typed-gpu.yaml); EN_CONFIG
# and ES_CONFIG name others (the 2026-11-28 run: transformer-en-es-gpu.yaml from scratch and
# transformer-es-en-general-gpu.yaml). A 256-wide Transformer leaves most of an H200 idle, so two stages
# share it for about the device time of one.
#
# Expects /tmp/pieces/en and /tmp/pieces/es (`python -m attnmt.bench.gpu_train_payload` builds them; the
# calls before copy them there): each holds data.tar.xz, train.links.xz, piece_links.npz.xz, spm.model
# and, for a stage that starts from weights (its config's init_from), checkpoint.pt in float16; en also
# site.tar.xz (pydantic).
# Each stage hands back its averaged last three validations' weights in float16 parts ($OUT/en-es/,
# $OUT/es-en/; English→Spanish its best too: EN_KEEP, ES_KEEP), and one $OUT/logs.tar.xz with both
# runs' train.log, history.json and config.yaml, since a call returns at most 8 files (a float16
# checkpoint is two parts of at most 15 MB).
# Env: TRAIN_S (each stage's training limit), PIECES_DIR, THREADS, OVERRIDES_EXTRA (JSON fields merged
# into both stages', e.g. '"device": "cpu", "max_steps": 2' with NO_SITE=1 for a dry run here),
# EN_CONFIG, ES_CONFIG, EN_RUN, ES_RUN, EN_KEEP, ES_KEEP.
set -u -o pipefail
OUT=${OUT:-gpu-out}
P=${PIECES_DIR:-/tmp/pieces}
export TRAIN_S=${TRAIN_S:-450}
mkdir -p "$OUT"
extra="\"threads\": ${THREADS:-7}${OVERRIDES_EXTRA:+, $OVERRIDES_EXTRA}"
EN_CONFIG=${EN_CONFIG:-model/configs/transformer-en-es-typed-gpu.yaml}
ES_CONFIG=${ES_CONFIG:-model/configs/transformer-es-en-typed-gpu.yaml}
EN_RUN=${EN_RUN:-runs/$(basename "$EN_CONFIG" .yaml)}
ES_RUN=${ES_RUN:-runs/$(basename "$ES_CONFIG" .yaml)}
field() { python3 -c "import sys, yaml; print(yaml.safe_load(open(sys.argv[1])).get(sys.argv[2]) or '')" "$1" "$2"; }

# Unpack each stage's piece: its data, links, cache and tokenizer, and its starting weights into the
# directory its config's init_from names (none: from scratch).
for stage in en es; do
    if [ $stage = en ]; then config=$EN_CONFIG run=$EN_RUN site=${NO_SITE:-}; else config=$ES_CONFIG run=$ES_RUN site=1; fi
    init=$(field "$config" init_from) weights=$P/$stage/checkpoint.pt
    [ -n "$init" ] || init=/tmp/$stage-init weights=
    CONFIG=$config RUN=$run INIT=$init DATA=$(field "$config" data_dir) PIECES=$P/$stage WEIGHTS=$weights \
        NO_SITE=$site UNPACK=only OUT="$OUT/$stage" bash bench/gpu_train.sh || exit $?
done

CONFIG=$EN_CONFIG RUN=$EN_RUN OVERRIDES="{$extra}" KEEP=${EN_KEEP:-averaged-last3 best} UNPACK=skip OUT="$OUT/en-es" \
    bash bench/gpu_train.sh > "$OUT/en-es.log" 2>&1 & pids="$!"
CONFIG=$ES_CONFIG RUN=$ES_RUN OVERRIDES="{$extra}" KEEP=${ES_KEEP:-averaged-last3} UNPACK=skip OUT="$OUT/es-en" \
    bash bench/gpu_train.sh > "$OUT/es-en.log" 2>&1 & pids="$pids $!"
while sleep "${WATCH_S:-60}" && kill -0 $pids 2>/dev/null; do
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader 2>/dev/null
    tail -qn1 "$EN_RUN/train.log" "$ES_RUN/train.log" 2>/dev/null; done
wait
for stage in en-es es-en; do echo "== $stage"; tail -15 "$OUT/$stage.log"; done
cp "$EN_RUN/config.yaml" "$OUT/en-es/" 2>/dev/null
cp "$ES_RUN/config.yaml" "$OUT/es-en/" 2>/dev/null
rmdir "$OUT/en" "$OUT/es" 2>/dev/null
tar cJf "$OUT/logs.tar.xz" -C "$OUT" $(cd "$OUT" && ls ./*.log ./*/train.log ./*/history.json ./*/config.yaml 2>/dev/null) \
    && rm -f "$OUT"/*.log "$OUT"/*/train.log "$OUT"/*/history.json "$OUT"/*/config.yaml
find "$OUT" -type f | xargs ls -la
