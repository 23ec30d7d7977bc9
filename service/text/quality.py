"""Quality estimation from the model's own signals: no reference, no second model.

Features of one hypothesis (target pieces y_1..y_T with log p(y_i), α: T x S):

- Seq-Logprob, the mean token log-probability: the strongest model-internal
  detector of hallucinations in Guerreiro et al. (EACL 2023) and in HalOmi
  (Dale et al. 2023).
- Uncovered: the share of source words whose attention mass Σ_i α_ij (summed
  over target tokens and the word's pieces) stays below a threshold: an
  omission signal (a word nobody attended to was probably not translated).
- Wass-to-Unif (Guerreiro et al., ACL 2023; deep-spin/ot-hallucination-detection
  `utils.py`): the attention averaged over target tokens is a distribution over
  source tokens; its Wasserstein distance to the uniform one under the 0/1 cost
  (total variation, their `metric_space="uni"`). Hallucinations detach from the
  source and stare at a few tokens (often `</s>`), far from uniform.
- Per-word confidence (Bergamot's `quality_estimator.h` features): the mean and
  minimum log-probability of each target word's pieces and its piece count;
  the sentence keeps the least confident word and the mean of the word minima.
- The length ratio |log((T + 1) / (S + 1))|: oscillating or truncated output.

`QualityModel.assess` turns them into a score in [0, 1]: a logistic model
σ(w · standardised features + b) fitted (bench/quality_fit.py, `attnmt
fit-quality`) on the model's dev split and kept in the model directory
(`manifest.json` `quality`): for translations, to predict sentence chrF / 100;
for forced alignments (Align: a parallel-corpus filter), to tell a verse's
reference from another verse's. Without it the score is exp(Seq-Logprob), the
geometric-mean token probability, and `suspect` is score < `DEFAULT_SUSPECT_BELOW`.

Numpy on arrays the translation already holds, computed when first read
(every hypothesis the server sends; offline only when printed); cost per
hypothesis is well under 1 % of its translation (measured in the README).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from attnmt.service.text.alignment import EOS_TOKEN, word_groups

FEATURES = ("mean_log_prob", "uncovered", "wass_to_unif", "min_word_log_prob", "mean_word_min_log_prob",
            "length_ratio")
DEFAULT_COVERAGE_THRESHOLD = 0.5   # attention mass below which a source word counts as not covered
# Without fitted weights, suspect below this geometric-mean token probability; a given target
# (Align) is less probable than the model's own output, so its default is lower.
DEFAULT_SUSPECT_BELOW = {"translation": 0.3, "translation_greedy": 0.3, "alignment": 0.1}


@dataclass(frozen=True)
class WordQuality:
    mean_log_prob: float
    min_log_prob: float
    pieces: int


@dataclass(frozen=True)
class Quality:
    score: float                   # [0, 1], higher is better
    suspect: bool                  # score below the fitted threshold
    features: dict[str, float]     # FEATURES by name
    words: tuple[WordQuality, ...] = field(default=())   # per target word, </s> last


def features(token_log_probs: list[float], alignment: np.ndarray, source_tokens: list[str],
             target_tokens: list[str], coverage_threshold: float = DEFAULT_COVERAGE_THRESHOLD,
             groups: tuple[list[list[int]], list[list[int]]] | None = None
             ) -> tuple[dict[str, float], tuple[WordQuality, ...]]:
    """The sentence features and the per-word confidences of one hypothesis. groups: the
    source's and the target's `word_groups`, when the caller has them already."""
    log_p = np.asarray(token_log_probs, dtype=np.float64)                              # T
    if log_p.size == 0:
        empty = {name: 0.0 for name in FEATURES}
        return {**empty, "mean_log_prob": -10.0, "min_word_log_prob": -10.0, "mean_word_min_log_prob": -10.0}, ()
    alpha = np.asarray(alignment, dtype=np.float64)                                    # T x S pieces
    src_groups, groups = groups or (word_groups(source_tokens), word_groups(target_tokens))

    # Per word (Bergamot): pieces grouped as the alignment groups them (each group a contiguous
    # run of pieces); </s> is a word of its own.
    bounds = np.array([g[0] for g in groups] + [log_p.size])                           # W + 1
    starts, pieces = bounds[:-1], np.diff(bounds)                                      # W, W
    word_mean = np.add.reduceat(log_p, starts) / pieces                                # W
    word_min = np.minimum.reduceat(log_p, starts)                                      # W
    words = tuple(WordQuality(m, n, c) for m, n, c in zip(word_mean.tolist(), word_min.tolist(), pieces.tolist()))
    real = np.array([target_tokens[g[0]] != EOS_TOKEN for g in groups])
    if not real.any():
        real[:] = True

    # Attention mass per source token, Σ over target tokens; per word, Σ over its pieces.
    if alpha.size:
        mass = alpha.sum(axis=0)                                                       # S
        word_mass = np.add.reduceat(mass, [g[0] for g in src_groups])                  # S_words
        word_mass = word_mass[[source_tokens[g[0]] != EOS_TOKEN for g in src_groups]]
        uncovered = float((word_mass < coverage_threshold).mean()) if word_mass.size else 0.0
        # Wass-to-Unif with the 0/1 cost = total variation: ½ Σ_j |ᾱ_j - 1/S|
        mean_alpha = mass / alpha.shape[0]                                             # S, sums to 1
        wass = float(0.5 * np.abs(mean_alpha - 1.0 / mean_alpha.size).sum())
    else:                                   # alignment not at hand (a hypothesis rebuilt without α)
        uncovered, wass = 0.0, 0.0
    values = {
        "mean_log_prob": float(log_p.mean()),
        "uncovered": uncovered,
        "wass_to_unif": wass,
        "min_word_log_prob": float(word_mean[real].min()),
        "mean_word_min_log_prob": float(word_min[real].mean()),
        "length_ratio": abs(float(np.log((len(groups) + 1) / (len(src_groups) + 1)))),
    }
    return values, words


class QualityModel:
    """The score of one model for one use: σ(w · (x - mean) / std + b), or exp(Seq-Logprob)
    by default. `use` is "translation" (the model's own output by beam search; fitted to
    predict chrF), "translation_greedy" (the same for greedy output, whose features sit
    elsewhere; falls back to "translation") or "alignment" (a given target, forced; fitted to
    tell a translation from another verse's)."""

    def __init__(self, spec: dict | None = None, use: str = "translation"):
        spec = spec or {}
        self.spec = spec
        self.use = use
        self.coverage_threshold = float(spec.get("coverage_threshold", DEFAULT_COVERAGE_THRESHOLD))
        fitted = spec.get(use) or (spec.get("translation") if use == "translation_greedy" else None) or {}
        self.suspect_below = float(fitted.get("suspect_below", DEFAULT_SUSPECT_BELOW[use]))
        self.fitted = "weights" in fitted
        if self.fitted:
            names = list(fitted["features"])
            if any(name not in FEATURES for name in names):
                raise ValueError(f"quality.{use}: unknown features {sorted(set(names) - set(FEATURES))}")
            self.names = names
            self.mean = np.asarray(fitted["mean"], dtype=np.float64)
            self.std = np.asarray(fitted["std"], dtype=np.float64)
            self.weights = np.asarray(fitted["weights"], dtype=np.float64)
            self.bias = float(fitted["bias"])

    @classmethod
    def from_manifest(cls, manifest, use: str = "translation") -> "QualityModel":
        """The manifest's `quality` section (written by `attnmt fit-quality`), or the defaults."""
        return cls(manifest.quality, use)

    def score(self, values: dict[str, float]) -> float:
        if not self.fitted:
            return float(np.exp(values["mean_log_prob"]))
        x = (np.array([values[name] for name in self.names]) - self.mean) / self.std
        return float(1.0 / (1.0 + np.exp(-(x @ self.weights + self.bias))))

    def assess(self, token_log_probs: list[float], alignment: np.ndarray, source_tokens: list[str],
               target_tokens: list[str], groups: tuple[list[list[int]], list[list[int]]] | None = None) -> Quality:
        """groups: as `features` takes them."""
        values, words = features(token_log_probs, alignment, source_tokens, target_tokens, self.coverage_threshold,
                                 groups)
        score = self.score(values)
        return Quality(score, score < self.suspect_below, values, words)
