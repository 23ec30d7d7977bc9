"""Answers filled in place (convert.py) are the messages built the plain way, byte for byte."""

import numpy as np
import pytest

from attnmt.service.server import convert
from attnmt.service.stubs import translator_pb2 as pb
from attnmt.service.text.quality import QualityModel
from attnmt.service.text.translator import Hypothesis, Translation

SOURCE = ["▁kasa", "▁granda", "▁vidas", "▁peru", "▁.", "</s>"]
TARGET = ["▁the", "▁big", "▁house", "▁sees", "▁the", "▁do", "g", "▁.", "</s>"]


def plain_hypothesis_pb(hyp: Hypothesis, kind: int, threshold: float | None) -> pb.Hypothesis:
    """hypothesis_pb as it was written before it filled messages in place."""
    message = pb.Hypothesis(text=hyp.text, score=hyp.score, log_prob=hyp.log_prob,
                            target_tokens=hyp.target_tokens, token_log_probs=hyp.token_log_probs,
                            glossary_applied=[convert.glossary_match_pb(m) for m in hyp.glossary])
    if hyp.quality is not None:
        q, f = hyp.quality, hyp.quality.features
        message.quality.CopyFrom(pb.Quality(
            score=q.score, mean_log_prob=f["mean_log_prob"], uncovered=f["uncovered"],
            wass_to_unif=f["wass_to_unif"], min_word_log_prob=f["min_word_log_prob"],
            mean_word_min_log_prob=f["mean_word_min_log_prob"], length_ratio=f["length_ratio"],
            words=[pb.WordQuality(mean_log_prob=w.mean_log_prob, min_log_prob=w.min_log_prob, pieces=w.pieces)
                   for w in q.words]))
        message.suspect = q.suspect
    if kind == convert.NONE:
        return message
    message.target_words.extend(hyp.target_words)
    links = hyp.hard_alignment(threshold)
    alignment = message.alignment
    alignment.SetInParent()
    for i, j in links:
        alignment.links.add(source=i, target=j)
    alignment.pharaoh = convert.pharaoh(links)
    alignment.level = pb.Alignment.LEVEL_PIECES if kind == convert.SOFT else pb.Alignment.LEVEL_WORDS
    if kind in (convert.SOFT, convert.WORDS):
        for row in (hyp.alignment if kind == convert.SOFT else hyp.word_alignment).tolist():
            alignment.rows.add(weights=row)
    return message


def hypothesis(seed: int, quality: bool = True) -> Hypothesis:
    rng = np.random.default_rng(seed)
    alpha = rng.dirichlet(np.ones(len(SOURCE)), size=len(TARGET)).astype(np.float32)
    log_probs = rng.uniform(-3, 0, len(TARGET)).tolist()
    return Hypothesis(text="the big house sees the dog .", target_tokens=TARGET, token_log_probs=log_probs,
                      log_prob=sum(log_probs), score=sum(log_probs) / len(TARGET), alignment=alpha,
                      source_tokens=SOURCE, quality_model=QualityModel() if quality else None)


@pytest.mark.parametrize("kind", [convert.NONE, convert.SOFT, convert.WORDS, convert.HARD])
@pytest.mark.parametrize("threshold", [None, 0.3])
def test_a_translation_filled_in_place_is_the_one_built_and_copied(kind, threshold):
    translation = Translation("kasa granda vidas peru .", SOURCE, [hypothesis(1), hypothesis(2, quality=False)])
    want = pb.Translation(source_tokens=translation.source_tokens, text=translation.best.text)
    if kind != convert.NONE:
        want.source_words.extend(translation.best.source_words)
    want.hypotheses.extend(plain_hypothesis_pb(h, kind, threshold) for h in translation.hypotheses)

    assert convert.translation_pb(translation, kind, threshold).SerializeToString() == want.SerializeToString()
    response = pb.TranslateResponse(model="m")
    convert.translation_pb(translation, kind, threshold, response.translations.add())
    assert response.SerializeToString() == pb.TranslateResponse(model="m", translations=[want]).SerializeToString()


def test_an_empty_translation_filled_in_place_is_still_there():
    answer = pb.StreamResponse(id="1")
    convert.translation_pb(Translation("", []), convert.WORDS, None, answer.translation)
    assert answer.HasField("translation")
    want = pb.StreamResponse(id="1")
    want.translation.CopyFrom(pb.Translation())
    assert answer.SerializeToString() == want.SerializeToString()
