"""SentencePiece on the serving side (the model's `spm.model`, no torch)."""

from __future__ import annotations

from pathlib import Path

import sentencepiece as spm

WORD_BOUNDARY = "\u2581"  # ▁ marks a piece that starts a word


class Tokenizer:
    def __init__(self, path: Path):
        self.sp = spm.SentencePieceProcessor(model_file=str(path))
        # id -> piece, read once: the server turns every source and translation into pieces,
        # and sentencepiece's per-id call costs a Python wrapper each
        self._pieces = [self.sp.id_to_piece(i) for i in range(self.sp.get_piece_size())]

    def __len__(self) -> int:
        return self.sp.get_piece_size()

    def encode(self, text: str) -> list[int]:
        return self.sp.encode(text)

    def pieces(self, ids: list[int]) -> list[str]:
        table = self._pieces
        return [table[i] for i in ids]

    def decode_pieces(self, pieces: list[str]) -> str:
        return self.sp.decode_pieces(pieces)

    def decode(self, ids: list[int]) -> str:
        return self.sp.decode(ids)
