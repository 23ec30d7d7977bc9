"""Copy pairs: teach the model to carry an English term through a Spanish sentence.

Software messages keep many words verbatim: `git`, `HEAD`, option names, and in git's own
Spanish catalog `commit`, `rebase`, `upstream`. The held-out test catalogs use dozens of such
terms the training catalogs hardly show, and a model that has seen a term only a few times
translates it instead of copying it.

`attnmt data copies OUT --from DATA` writes variants of DATA's training pairs: in a pair
whose source and target share a word verbatim, that word is replaced on both sides by an
English word drawn from the corpus's target vocabulary (one the Spanish side never uses),
so that the model learns copying as a skill rather than a list of words. Mixed into
training beside the originals (`attnmt data mix`).
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

# A plain lower-case or capitalised word (not README or HEAD), not part of a placeholder
# (%s, $VAR, {name}, <tag>), an option (--name) or a path (a/b, file.c).
BEFORE, AFTER = r"(?<![\w%$<{\\/.-])", r"(?![\w}>/.-])"
WORD = re.compile(BEFORE + r"[A-Za-z][a-z]{2,}" + AFTER)


def shared_words(source: str, target: str) -> list[str]:
    """Words both sides hold verbatim, in source order, without repeats."""
    in_target = set(WORD.findall(target))
    seen: list[str] = []
    for word in WORD.findall(source):
        if word in in_target and word not in seen:
            seen.append(word)
    return seen


def foreign_pool(pairs: list[tuple[str, str]], min_length: int = 4) -> list[str]:
    """Lower-case target words of at least `min_length` letters that no source uses."""
    source_words = {w.lower() for s, _ in pairs for w in WORD.findall(s)}
    return sorted({w for _, t in pairs for w in WORD.findall(t)
                   if w.islower() and len(w) >= min_length and w not in source_words})


def _styled(word: str, like: str) -> str:
    """`word` in the capitalisation of `like` (Word, WORD or word)."""
    if like.isupper():
        return word.upper()
    if like[0].isupper():
        return word.capitalize()
    return word


def copy_variants(pairs: list[tuple[str, str]], share: float, seed: int = 2026,
                  pool: list[str] | None = None) -> list[tuple[str, str]]:
    """For `share` of the pairs that share a word verbatim, the pair with one such word
    replaced on both sides by a word of the foreign pool (`foreign_pool(pairs)` unless given)."""
    rng = random.Random(seed)
    pool = foreign_pool(pairs) if pool is None else pool
    out = []
    for source, target in pairs:
        words = shared_words(source, target)
        if not words or rng.random() >= share:
            continue
        word = rng.choice(words)
        new = _styled(rng.choice(pool), word)
        whole = re.compile(BEFORE + re.escape(word) + AFTER)
        out.append((whole.sub(new, source), whole.sub(new, target)))
    return out


def write_copies(out_dir: Path, data_dir: Path, share: float, seed: int = 2026) -> dict[str, int]:
    """`attnmt data copies`: OUT/train.{es,en} the copy variants of DATA's train split (no dev:
    `attnmt data mix` takes dev from the corpora themselves)."""
    from attnmt.corpus.splits import corpus_files, read_parallel
    pairs = list(read_parallel(*corpus_files(data_dir, "train", "es", "en")))
    pool = foreign_pool(pairs)
    variants = copy_variants(pairs, share, seed, pool)
    out_dir.mkdir(parents=True, exist_ok=True)
    for lang, column in (("es", 0), ("en", 1)):
        (out_dir / f"train.{lang}").write_text("".join(p[column] + "\n" for p in variants), encoding="utf-8")
        (out_dir / f"dev.{lang}").write_text("", encoding="utf-8")
    counts = {"train": len(variants), "from": len(pairs), "pool": len(pool)}
    (out_dir / "counts.json").write_text(json.dumps(counts, indent=2) + "\n")
    (out_dir / "DATA_CARD.md").write_text(
        f"# Data card: copy variants of `{data_dir}`\n\n{len(variants)} pairs made from {len(pairs)} training pairs "
        f"(share {share}, seed {seed}): in each, a word source and target shared verbatim is replaced on both sides "
        f"by one of {counts['pool']} English words the Spanish side never uses (`model/data/copies.py`). Same licences "
        f"as `{data_dir}`.\n", encoding="utf-8")
    return counts
