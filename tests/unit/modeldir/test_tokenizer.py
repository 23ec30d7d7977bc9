"""The serving tokenizer's id -> piece table is sentencepiece's own answer for every id."""

import pytest

from attnmt.service.modeldir.tokenizer import Tokenizer
from attnmt.service.server.settings import BUNDLED_MODEL


def test_pieces_are_sentencepiece_pieces_for_every_id():
    path = BUNDLED_MODEL / "spm.model"
    if not path.exists():
        pytest.skip("the bundled model is not here")
    tokenizer = Tokenizer(path)
    ids = list(range(len(tokenizer)))
    assert tokenizer.pieces(ids) == [tokenizer.sp.id_to_piece(i) for i in ids]
    sentence = tokenizer.encode("En el principio creó Dios los cielos y la tierra.")
    assert tokenizer.pieces(sentence) == tokenizer.sp.encode("En el principio creó Dios los cielos y la tierra.",
                                                             out_type=str)
