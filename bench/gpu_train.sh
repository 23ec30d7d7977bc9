#!/usr/bin/env bash
# A training stage on a lent GPU machine (docs/gpu.md, "Training on a GPU"), in one call: unpack
# the corpus, the links and the starting weights that the calls before carried, train with the
# stage's config (`device: cuda`), then average the last three validations' weights and hand back
# float16 weights in parts small enough for $OUT (16 MB a file), with train.log and history.json.
#
# Expects /tmp/pieces/.gpu-t1 (copied there by the call before): site.tar.xz (pydantic for
# CPython 3.12, which the machine lacks), data.tar.xz (the mix's train and dev splits),
# train.links.xz, piece_links.npz.xz (the run's cache of piece links, keyed by the links' content),
# spm.model; and .gpu-t2/checkpoint.pt in the repository (the starting weights, float16).
# Env: CONFIG, RUN, INIT (where the config's init_from points), DATA (its data_dir), PIECES and
# WEIGHTS (where the two pieces are), OVERRIDES
# (a JSON object of TrainConfig fields, e.g. '{"device": "cpu", "max_steps": 2}' and NO_SITE=1 for a
# dry run on a CPU machine), KEEP (which weights come back: any of averaged-last3, best, last-kept; all three
# by default), UNPACK=only|skip (unpack the pieces and stop, or train on what an
# earlier call unpacked: bench/gpu_score_functions.sh runs several stages at once that way).
set -u -o pipefail
OUT=${OUT:-gpu-out}
CONFIG=${CONFIG:-model/configs/transformer-es-en-everyday5.yaml}
RUN=${RUN:-runs/transformer-es-en-everyday5}
INIT=${INIT:-runs/transformer-es-en-everyday4/model}
DATA=${DATA:-data/es-en-everyday4}
PIECES=${PIECES:-/tmp/pieces/.gpu-t1}
SITE=${SITE:-/tmp/site-train}
WEIGHTS=${WEIGHTS-.gpu-t2/checkpoint.pt}   # set but empty: from scratch
start=$(date +%s)
stamp() { echo "== $(( $(date +%s) - start )) s: $*"; }

mkdir -p "$OUT" "$SITE" "$INIT" "$RUN" "$DATA"
if [ "${UNPACK:-}" != skip ]; then
stamp unpack
[ -n "${NO_SITE:-}" ] || xz -dc "$PIECES/site.tar.xz" | tar x -C "$SITE" || exit 3   # NO_SITE=1: a dry run here
xz -dc "$PIECES/data.tar.xz" | tar x || exit 4
test -f "$DATA/train.links" || xz -dc "$PIECES/train.links.xz" > "$DATA/train.links" || exit 5
test -f "$RUN/piece_links.npz" || xz -dc "$PIECES/piece_links.npz.xz" > "$RUN/piece_links.npz" || exit 6
cp "$PIECES/spm.model" "$INIT/" && { [ -z "$WEIGHTS" ] || cp "$WEIGHTS" "$INIT/checkpoint.pt"; } || exit 7  # WEIGHTS='': from scratch
# attnmt's worlds linked in as the package (the layout of the editable install, with no build)
mkdir -p "$SITE/attnmt"
for world in service model bench corpus; do ln -sfn "$PWD/$world" "$SITE/attnmt/$world"; done
fi
[ "${UNPACK:-}" != only ] || exit 0
export PYTHONPATH="$SITE" PYTHONUNBUFFERED=1
nvidia-smi -L 2>/dev/null

stamp train
timeout "${TRAIN_S:-470}" python3 - "$CONFIG" "$RUN" "${OVERRIDES:-{\}}" <<'PY' 2>&1 | grep -v "^\r" | tail -40
import json, sys
from pathlib import Path
import torch
from attnmt.model.train import TrainConfig, train
print("torch", torch.__version__, "cuda", torch.cuda.is_available(), flush=True)
cfg = TrainConfig.from_yaml(Path(sys.argv[1]), **json.loads(sys.argv[3]))
print(json.dumps({k: v for k, v in train(cfg, Path(sys.argv[2])).items() if k != "history"}))
PY
echo "train rc $?"

stamp weights
python3 - "$RUN" "$OUT" "${KEEP:-averaged-last3 best last-kept}" <<'PY'
import sys
from pathlib import Path
import torch
from attnmt.model.train import average_checkpoints
run, out = Path(sys.argv[1]), Path(sys.argv[2])
kept = sorted((run / "checkpoints").glob("step-*.pt"))
print("kept", [p.name for p in kept])
if kept:
    average_checkpoints(kept[-3:], run / "averaged-last3.pt")
for name, path in (("averaged-last3", run / "averaged-last3.pt"), ("best", run / "best.pt"),
                   ("last-kept", kept[-1] if kept else None)):
    if name not in sys.argv[3].split() or path is None or not path.exists():
        continue
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    shared = {}                   # tied tensors stay one tensor
    ckpt["state_dict"] = {k: shared.setdefault(v.data_ptr(), v.half()) for k, v in ckpt["state_dict"].items()}
    torch.save(ckpt, out / f"{name}.fp16.pt")
PY
for f in "$OUT"/*.fp16.pt; do [ -f "$f" ] && split -b 15M -d -a 1 "$f" "$f." && rm "$f"; done
cp "$RUN/train.log" "$RUN/history.json" "$OUT/" 2>/dev/null
ls -la "$OUT"
stamp done
