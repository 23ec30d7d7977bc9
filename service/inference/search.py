"""One sentence's search: its options (`SearchOptions`), what a decode batch
keeps for it between steps (`Search`), and the hypotheses it finishes
(`FinishedHypothesis`: target ids, their log-probabilities and α, before any
text; `service/text/translator.py` turns them into the public `Hypothesis`).

Three kinds of search share a decode batch: greedy (beam size 1), beam search,
and forced decoding, which scores and aligns a given target instead of searching.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from attnmt.service.errors import InvalidInput

GREEDY, FORCED, BEAM = 0, 1, 2      # Search.kind, and each row's kind in slots.Rows
DEFAULT_LENGTH_PENALTY = 1.0        # a model's, where its manifest names none


@dataclass(frozen=True)
class SearchOptions:
    beam_size: int = 1            # 1: greedy
    n_best: int = 1               # hypotheses returned, at most beam_size
    # final score = log P / (length ** length_penalty); 0: raw log P; None: the model's default (its manifest's
    # `decoding.length_penalty`, else DEFAULT_LENGTH_PENALTY), which Translator.search sets before a Search is made
    length_penalty: float | None = None
    max_length_ratio: float = 1.5  # target pieces at most ratio * source pieces + max_length_extra
    max_length_extra: int = 10
    max_target_tokens: int = 512  # a hard cap whatever ratio and extra say (the server's setting)
    # When a beam sentence stops: False (Marian's rule) once beam_size hypotheses have finished;
    # True (OpenNMT-py's) as soon as the best candidate of a step ends and n_best
    # hypotheses have finished: fewer steps, and a longer hypothesis that would have scored
    # better after length normalisation is not waited for.
    early_exit: bool = False
    # A line that is a set phrase of the model's dictionary gets its translation, forced (text/phrases.py);
    # off with the request's use_lexicon false.
    set_phrases: bool = True

    def validate(self, max_beam: int = 64) -> "SearchOptions":
        """The options' ranges, the one place they are checked; InvalidInput names the field."""
        if not 1 <= self.beam_size <= max_beam:
            raise InvalidInput(f"beam_size must be between 1 and {max_beam} (max_beam_size), got {self.beam_size}")
        if not 1 <= self.n_best <= self.beam_size:
            raise InvalidInput(f"n_best must be between 1 and beam_size ({self.beam_size}), got {self.n_best}")
        if self.length_penalty is not None and not 0.0 <= self.length_penalty <= 5.0:
            raise InvalidInput(f"length_penalty must be between 0 and 5, got {self.length_penalty}")
        if not 0.0 < self.max_length_ratio <= 10.0:
            raise InvalidInput(f"max_length_ratio must be in (0, 10], got {self.max_length_ratio}")
        if not 0 <= self.max_length_extra <= 1000:
            raise InvalidInput(f"max_length_extra must be between 0 and 1000, got {self.max_length_extra}")
        return self


@dataclass
class FinishedHypothesis:
    """A finished search hypothesis in target ids."""
    tokens: list[int]             # target ids, ending with </s> unless the length limit cut it
    token_log_probs: list[float]  # log p of each token in `tokens`
    alignment: np.ndarray         # α: len(tokens) x src_len (source incl. </s>), rows sum to 1
    log_prob: float               # Σ token_log_probs
    score: float                  # length-normalised log_prob, what n-best is sorted by


_ids = itertools.count()


@dataclass(eq=False)
class Search:
    """One sentence to decode. `forced` (target ids) turns it into forced
    decoding: the given target is scored and aligned, not searched."""
    source: list[int]                       # source ids ending with </s>
    options: SearchOptions = field(default_factory=SearchOptions)
    forced: list[int] | None = None         # target ids ending with </s>
    id: int = field(default_factory=lambda: next(_ids))
    protected: tuple[str, ...] = ()         # placeholders behind sentinels (text/placeholders.py), for the translator
    capitals: bool = False                  # sent in capitals, decoded in sentence case (text/case.py)
    title_case: bool = False                # sent in Title Case, decoded with its known words in small letters
    first_small: bool = False               # decoded with its first word in small letters (text/case.py first_small)
    candidates: np.ndarray | None = None    # sorted target ids it may produce (lexical shortlist); None: all
    finished: list[FinishedHypothesis] = field(default_factory=list)
    steps: int = 0
    done: bool = False
    # Filled in by DecodeBatch:
    slot: int = -1                          # memory slot
    rows: list[int] = field(default_factory=list)   # live hypothesis rows
    encoded: tuple | None = None            # (memory by name, init_state), src_len x ... each, before joining

    @property
    def src_len(self) -> int:
        return len(self.source)

    @cached_property
    def kind(self) -> int:          # read for every sentence at every step
        if self.forced is not None:
            return FORCED
        return GREEDY if self.options.beam_size == 1 else BEAM

    @cached_property
    def max_length(self) -> int:
        if self.forced is not None:
            return len(self.forced)
        wanted = int(self.options.max_length_ratio * (self.src_len - 1)) + self.options.max_length_extra
        return max(1, min(wanted, self.options.max_target_tokens))

    def finish(self, tokens: np.ndarray, log_probs: np.ndarray, alignment: np.ndarray) -> None:
        total = float(np.sum(log_probs, dtype=np.float64))
        n = len(tokens)
        penalty = DEFAULT_LENGTH_PENALTY if self.options.length_penalty is None else self.options.length_penalty
        score = total / (n ** penalty) if penalty else total
        self.finished.append(FinishedHypothesis(tokens.tolist(), log_probs.tolist(), alignment, total, score))

    def restart(self) -> None:
        """Forget all progress, to decode again from the first step."""
        self.finished, self.steps, self.done = [], 0, False
        self.slot, self.rows, self.encoded = -1, [], None

    def best(self) -> list[FinishedHypothesis]:
        """The n-best hypotheses, best first."""
        return self.finished[:self.options.n_best]
