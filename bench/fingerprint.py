"""`attnmt bench fingerprint`: what a model directory's served translations are, to the last
digit, so that a change meant to keep behaviour (a refactoring, a new runtime version) can
be shown to keep it: `cmp` two fingerprints taken on the same machine.

One JSON line per hypothesis of the n-best of each test sentence: the text, the score and
log-probability and every token's log-probability as Python's shortest round-tripping
`repr`, the shape and SHA-256 of α (float32 bytes), and the word-level α. Offline, in one
process, through the same `Translator` the server uses.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Iterator

import numpy as np

from attnmt.bench.loadtest import spread
from attnmt.corpus.splits import read_split
from attnmt.service.inference.engine import Engine, EngineOptions
from attnmt.service.inference.search import SearchOptions
from attnmt.service.modeldir.manifest import load_manifest
from attnmt.service.text.translator import Translator


def fingerprint(model_dir: Path, sources: list[str], beam: int = 5, n_best: int = 5) -> Iterator[dict]:
    translator = Translator(Engine(model_dir, EngineOptions()), max_tokens=10_000)
    for translation in translator.translate(sources, SearchOptions(beam_size=beam, n_best=n_best).validate()):
        for hyp in translation.hypotheses:
            alpha = np.ascontiguousarray(hyp.alignment, dtype=np.float32)          # target x source pieces
            yield {"source": translation.source, "text": hyp.text, "score": repr(hyp.score),
                   "log_prob": repr(hyp.log_prob), "token_log_probs": [repr(x) for x in hyp.token_log_probs],
                   "alpha_shape": list(alpha.shape), "alpha_sha256": hashlib.sha256(alpha.tobytes()).hexdigest(),
                   "word_alignment": np.asarray(hyp.word_alignment).tolist()}


def cmd_bench_fingerprint(args) -> int:
    m = load_manifest(args.model, verify=False)
    sources = spread([s for s, _ in read_split(args.data, args.split, m.source_language, m.target_language)],
                     args.sentences)
    with open(args.out, "w", encoding="utf-8") as out:
        lines = 0
        for record in fingerprint(args.model, sources, args.beam, args.n_best):
            print(json.dumps(record, ensure_ascii=False), file=out)
            lines += 1
    digest = hashlib.sha256(Path(args.out).read_bytes()).hexdigest()
    print(f"{len(sources)} sentences, {lines} hypotheses -> {args.out} (sha256 {digest})")
    return 0
