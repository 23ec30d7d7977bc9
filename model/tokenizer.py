"""Joint SentencePiece vocabulary, trained on the training split only.

Special ids are fixed so that the network, the export and the service agree
without looking them up: 0 <pad>, 1 <unk>, 2 <s>, 3 </s>. They are written to
the manifest too.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Iterable

import sentencepiece as spm

from attnmt.service.modeldir.manifest import SpecialIds
from attnmt.service.modeldir.tokenizer import Tokenizer as ServingTokenizer

_IDS = SpecialIds()         # the special ids of the model-directory contract
PAD_ID, UNK_ID, BOS_ID, EOS_ID = _IDS.pad, _IDS.unk, _IDS.bos, _IDS.eos
MODEL_FILE = "spm.model"


def train_tokenizer(sentences: Iterable[str], out_dir: Path, vocab_size: int = 8000,
                    model_type: str = "unigram", seed_sentences: int = 200_000,
                    user_symbols: list[str] | None = None) -> Path:
    """Train a joint SentencePiece model on source and target sentences together;
    `user_symbols` (placeholder sentinels) are always single pieces."""
    out_dir.mkdir(parents=True, exist_ok=True)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(list(sentences)), model_writer=model,
        vocab_size=vocab_size, model_type=model_type, character_coverage=1.0,
        pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID,
        input_sentence_size=seed_sentences, shuffle_input_sentence=True, hard_vocab_limit=False,
        user_defined_symbols=user_symbols or [],
        minloglevel=2)
    path = out_dir / MODEL_FILE
    path.write_bytes(model.getvalue())
    return path


class Tokenizer(ServingTokenizer):
    """The serving tokenizer; decoding for dev BLEU also drops <unk> and specials."""

    def decode(self, ids: list[int]) -> str:
        return self.sp.decode([i for i in ids if i > EOS_ID])
