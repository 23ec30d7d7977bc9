#!/usr/bin/env bash
# Issue 25 §4's score-function runs on a lent GPU machine, in one call: the pieces of `.gpu-r1`
# (carried; the everyday mix and pydantic) unpacked once, then one `attnmt train` stage per score
# function, side by side on the one GPU (the RNNsearch's GRU steps one target position at a time and
# leaves the GPU mostly idle, so the stages share it), each from scratch with
# model/configs/rnnsearch-es-en-score-functions.yaml and only its score function changed. Each hands
# back its best checkpoint in float16 ($OUT/NAME/best.fp16.pt.0); the logs come back as one
# $OUT/logs.tar.xz with each run's config.yaml, since a call returns at most 8 files. Here, for each
# NAME: `mkdir -p runs/score-NAME && tar xJf logs.tar.xz --strip-components 2 -C runs/score-NAME
# ./NAME && cp NAME/best.fp16.pt.0 runs/score-NAME/best.pt && cp models/rnnsearch-es-en/spm.model
# runs/score-NAME/`; then `attnmt export` reads the run (docs/gpu.md).
# Env: SCORES (default "general dot scaled_dot"), RUNS (where the runs go, default runs/), THREADS (each stage's CPU threads), TRAIN_S,
# PIECES, OVERRIDES_EXTRA (JSON fields merged into every stage's, e.g. '"max_steps": 2' with
# DEVICE=cpu NO_SITE=1 for a dry run on a CPU machine).
set -u -o pipefail
OUT=${OUT:-gpu-out}
SCORES=${SCORES:-general dot scaled_dot}
RUNS=${RUNS:-runs}
export CONFIG=model/configs/rnnsearch-es-en-score-functions.yaml DATA=data/es-en-everyday WEIGHTS=
export PIECES=${PIECES:-.gpu-r1} INIT=/tmp/score-init TRAIN_S=${TRAIN_S:-540}
mkdir -p "$OUT"
RUN=/tmp/score-unpack UNPACK=only OUT="$OUT" bash bench/gpu_train.sh || exit $?
for score in $SCORES; do
    OVERRIDES="{\"device\": \"${DEVICE:-cuda}\", \"threads\": ${THREADS:-4}, \"score_function\": \"$score\"${OVERRIDES_EXTRA:+, $OVERRIDES_EXTRA}}" \
        RUN=$RUNS/score-$score OUT="$OUT/$score" UNPACK=skip bash bench/gpu_train.sh > "$OUT/$score.log" 2>&1 &
done
wait
for score in $SCORES; do echo "== $score"; tail -12 "$OUT/$score.log"; cp "$RUNS/score-$score/config.yaml" "$OUT/$score/"; done
tar cJf "$OUT/logs.tar.xz" -C "$OUT" $(cd "$OUT" && ls ./*.log ./*/train.log ./*/history.json ./*/config.yaml 2>/dev/null) \
    && rm -f "$OUT"/*.log "$OUT"/*/train.log "$OUT"/*/history.json "$OUT"/*/config.yaml
find "$OUT" -type f | xargs ls -la
