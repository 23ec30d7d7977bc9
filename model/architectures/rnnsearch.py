"""RNNsearch: the attention encoder-decoder of Bahdanau, Cho & Bengio (2015),
"Neural Machine Translation by Jointly Learning to Align and Translate", ICLR.

Names follow the paper (Appendix A): annotations h_j = [→h_j; ←h_j], the
alignment model e_ij = v_aᵀ tanh(W_a s_{i-1} + U_a h_j), weights α_ij, context
c_i = Σ_j α_ij h_j, decoder state s_i = GRU([E y_{i-1}; c_i], s_{i-1}),
initial state s_0 = tanh(W_s ←h_1), and the deep output
t_i = maxout(U_o s_{i-1} + V_o E y_{i-1} + C_o c_i) before the softmax.

The score function a(s_{i-1}, h_j) is an option (`attention`): the paper's
additive score, Luong, Pham & Manning (2015)'s `general` (sᵀ W h) and `dot` (sᵀ h),
and the scaled dot product of Vaswani et al. (2017) (sᵀ h / √d). Every one scores
Bahdanau's query, the previous decoder state s_{i-1}, not Luong's new state h_t:
only the score changes, the rest of RNNsearch stays. `dot` and `scaled_dot`
compare s_{i-1} with h_j directly, so they need decoder_hidden == 2 *
encoder_hidden; at those widths every score function runs.

Export constraints shape the code: no pack_padded_sequence (it does not export
to ONNX, pytorch/pytorch#48460). The backward encoder instead reverses each
sentence within its own length with a gather, runs a forward GRU and reverses
back, so padding never reaches a real position in either direction and a
padded sentence encodes exactly as the same sentence alone.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn

from attnmt.model.tokenizer import PAD_ID

# e_ij = a(s_{i-1}, h_j); the query is always s_{i-1} (Bahdanau's), never Luong's h_t.
SCORE_FUNCTIONS = {
    "bahdanau": "v_aᵀ tanh(W_a s_{i-1} + U_a h_j), additive (the paper)",
    "general": "s_{i-1}ᵀ W h_j (Luong et al. 2015)",
    "dot": "s_{i-1}ᵀ h_j (Luong et al. 2015)",
    "scaled_dot": "s_{i-1}ᵀ h_j / √(2n) (Vaswani et al. 2017)",
}
SAME_WIDTH_SCORES = ("dot", "scaled_dot")   # no projection: s_{i-1} and h_j must be equally wide


@dataclass
class ModelConfig:
    vocab_size: int = 8000       # joint SentencePiece vocabulary
    embedding_size: int = 256    # m in the paper
    encoder_hidden: int = 256    # n, per direction: annotations are 2n wide
    decoder_hidden: int = 256    # decoder state s_i
    attention_size: int = 256    # n' in the paper (bahdanau only)
    readout_size: int = 256      # l in the paper: maxout units before the softmax
    readout: str = "maxout"      # maxout (the paper) | tanh
    attention: str = "bahdanau"  # a(s_{i-1}, h_j): bahdanau | general | dot | scaled_dot (SCORE_FUNCTIONS)
    tie_embeddings: bool = True  # one matrix for source, target embeddings and output layer
    dropout: float = 0.3

    def __post_init__(self) -> None:
        if self.attention not in SCORE_FUNCTIONS:
            raise ValueError(f"attention must be one of {', '.join(SCORE_FUNCTIONS)}, not {self.attention!r}")
        if self.readout not in ("maxout", "tanh"):
            raise ValueError(f"readout must be maxout or tanh, not {self.readout!r}")
        if self.attention in SAME_WIDTH_SCORES and self.decoder_hidden != 2 * self.encoder_hidden:
            raise ValueError(
                f"{self.attention} attention needs decoder_hidden == 2 * encoder_hidden: it compares the query "
                f"s_{{i-1}} ({self.decoder_hidden} wide) with the annotations h_j (2 * {self.encoder_hidden} = "
                f"{2 * self.encoder_hidden} wide); set decoder_hidden: {2 * self.encoder_hidden}")
        if self.tie_embeddings and self.readout_size != self.embedding_size:
            raise ValueError("tie_embeddings needs readout_size == embedding_size")

    def to_dict(self) -> dict:
        return asdict(self)


def source_mask(lengths: Tensor, max_len: int) -> Tensor:
    """mask: batch x src_len, True on real tokens."""
    positions = torch.arange(max_len, device=lengths.device).unsqueeze(0)  # 1 x src_len
    return positions < lengths.unsqueeze(1)


class Encoder(nn.Module):
    """Bidirectional GRU over source embeddings; returns the annotations."""

    def __init__(self, cfg: ModelConfig, embedding: nn.Embedding):
        super().__init__()
        self.embedding = embedding
        self.forward_rnn = nn.GRU(cfg.embedding_size, cfg.encoder_hidden, batch_first=True)
        self.backward_rnn = nn.GRU(cfg.embedding_size, cfg.encoder_hidden, batch_first=True)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, src: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        # src: batch x src_len, lengths: batch
        src_len = src.size(1)
        mask = source_mask(lengths, src_len)                           # batch x src_len
        positions = torch.arange(src_len, device=src.device).unsqueeze(0)
        # Position j of the reversed sentence reads position len-1-j; padding stays put.
        reverse = torch.where(mask, lengths.unsqueeze(1) - 1 - positions, positions)

        x = self.dropout(self.embedding(src))                          # batch x src_len x m
        fwd, _ = self.forward_rnn(x)                                   # batch x src_len x n
        x_rev = x.gather(1, reverse.unsqueeze(-1).expand(-1, -1, x.size(-1)))
        bwd_rev, _ = self.backward_rnn(x_rev)
        bwd = bwd_rev.gather(1, reverse.unsqueeze(-1).expand(-1, -1, bwd_rev.size(-1)))
        annotations = torch.cat([fwd, bwd], dim=-1) * mask.unsqueeze(-1)  # batch x src_len x 2n
        first_backward = bwd[:, 0]                                     # ←h_1: batch x n
        return annotations, mask, first_backward


class Attention(nn.Module):
    """Alignment model: α_i = softmax_j a(s_{i-1}, h_j) with the score function
    `cfg.attention` (SCORE_FUNCTIONS). `keys` hold everything of the score that
    depends on h_j alone (U_a h, W h, h / √(2n)) and are computed once per sentence,
    so a decoder step costs at most one projection of the query."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.kind = cfg.attention
        key_size = 2 * cfg.encoder_hidden
        if self.kind == "bahdanau":
            self.key_layer = nn.Linear(key_size, cfg.attention_size, bias=False)              # U_a
            self.query_layer = nn.Linear(cfg.decoder_hidden, cfg.attention_size, bias=False)  # W_a
            self.energy_layer = nn.Linear(cfg.attention_size, 1, bias=False)                  # v_a
        elif self.kind == "general":
            self.key_layer = nn.Linear(key_size, cfg.decoder_hidden, bias=False)              # W for sᵀ W h
        # Vaswani et al.'s 1/√d keeps scores from growing with the width (sᵀh sums d products)
        # and the softmax from saturating. Folded into the keys: (sᵀ h) / √d = sᵀ (h / √d).
        self.scale = key_size ** -0.5 if self.kind == "scaled_dot" else 1.0

    def keys(self, annotations: Tensor) -> Tensor:
        # annotations: batch x src_len x 2n -> keys: batch x src_len x K
        # (K = n' for bahdanau, decoder_hidden = 2n for the others)
        if self.kind == "dot":
            return annotations
        if self.kind == "scaled_dot":
            return annotations * self.scale
        return self.key_layer(annotations)

    def forward(self, query: Tensor, keys: Tensor, annotations: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        # query (s_{i-1}): batch x decoder_hidden
        if self.kind == "bahdanau":
            # proj_query: batch x 1 x n'; keys: batch x src_len x n'
            energy = torch.tanh(self.query_layer(query).unsqueeze(1) + keys)
            scores = self.energy_layer(energy).squeeze(-1)              # e_ij: batch x src_len
        else:
            # general, dot, scaled_dot: sᵀ (W h | h | h / √d); keys: batch x src_len x decoder_hidden
            scores = torch.bmm(keys, query.unsqueeze(-1)).squeeze(-1)   # e_ij: batch x src_len
        scores = scores.masked_fill(~mask, float("-inf"))
        alpha = torch.softmax(scores, dim=-1)                           # α_ij: batch x src_len
        context = torch.bmm(alpha.unsqueeze(1), annotations).squeeze(1)  # c_i: batch x 2n
        return context, alpha


class Decoder(nn.Module):
    """GRU decoder with attention and a deep output layer."""

    def __init__(self, cfg: ModelConfig, embedding: nn.Embedding):
        super().__init__()
        ctx = 2 * cfg.encoder_hidden
        self.embedding = embedding
        self.attention = Attention(cfg)
        self.init_layer = nn.Linear(cfg.encoder_hidden, cfg.decoder_hidden)      # W_s
        self.cell = nn.GRUCell(cfg.embedding_size + ctx, cfg.decoder_hidden)
        pieces = 2 if cfg.readout == "maxout" else 1
        # U_o s_{i-1} + V_o E y_{i-1} + C_o c_i as one matrix over the concatenation
        self.readout_layer = nn.Linear(cfg.decoder_hidden + cfg.embedding_size + ctx, pieces * cfg.readout_size)
        self.readout = cfg.readout
        self.output_layer = nn.Linear(cfg.readout_size, cfg.vocab_size)
        if cfg.tie_embeddings:
            self.output_layer.weight = embedding.weight
        self.dropout = nn.Dropout(cfg.dropout)

    def init_state(self, first_backward: Tensor) -> Tensor:
        return torch.tanh(self.init_layer(first_backward))             # s_0: batch x decoder_hidden

    def forward_step(self, prev_embedded: Tensor, state: Tensor, keys: Tensor, annotations: Tensor,
                     mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """One step i: returns the readout input t̃_i, the new state s_i and α_i."""
        context, alpha = self.attention(state, keys, annotations, mask)
        readout_in = torch.cat([state, prev_embedded, context], dim=-1)
        new_state = self.cell(torch.cat([prev_embedded, context], dim=-1), state)
        return readout_in, new_state, alpha

    def readout_hidden(self, readout_in: Tensor) -> Tensor:
        # readout_in: ... x (dec + m + 2n) -> t_i: ... x readout_size
        t = self.readout_layer(self.dropout(readout_in))
        if self.readout == "maxout":
            return t.unflatten(-1, (-1, 2)).amax(-1)                   # pool pairs of units
        return torch.tanh(t)

    def logits(self, readout_in: Tensor) -> Tensor:
        # readout_in: ... x (dec + m + 2n) -> logits: ... x vocab
        return self.output_layer(self.dropout(self.readout_hidden(readout_in)))


class RNNsearch(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        src_embedding = self._embedding(cfg)
        tgt_embedding = src_embedding if cfg.tie_embeddings else self._embedding(cfg)
        self.encoder = Encoder(cfg, src_embedding)
        self.decoder = Decoder(cfg, tgt_embedding)

    @staticmethod
    def _embedding(cfg: ModelConfig) -> nn.Embedding:
        embedding = nn.Embedding(cfg.vocab_size, cfg.embedding_size, padding_idx=PAD_ID)
        # N(0, 1/m) rather than N(0, 1): a tied output layer would otherwise start
        # with logits of standard deviation sqrt(m) and a loss far above log(V).
        nn.init.normal_(embedding.weight, std=cfg.embedding_size ** -0.5)
        with torch.no_grad():
            embedding.weight[PAD_ID].zero_()
        return embedding

    def encode(self, src: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """annotations (batch x src_len x 2n), keys, mask, s_0."""
        annotations, mask, first_backward = self.encoder(src, lengths)
        keys = self.decoder.attention.keys(annotations)
        return annotations, keys, mask, self.decoder.init_state(first_backward)

    def forward(self, src: Tensor, lengths: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor]:
        """Teacher-forced pass. tgt_in: batch x tgt_len (starts with <s>).
        Returns logits (batch x tgt_len x vocab) and α (batch x tgt_len x src_len)."""
        annotations, keys, mask, state = self.encode(src, lengths)
        embedded = self.decoder.dropout(self.decoder.embedding(tgt_in))  # batch x tgt_len x m
        readouts, alphas = [], []
        for i in range(tgt_in.size(1)):
            readout_in, state, alpha = self.decoder.forward_step(embedded[:, i], state, keys, annotations, mask)
            readouts.append(readout_in)
            alphas.append(alpha)
        # The output layer runs once over all steps: it is most of the FLOPs.
        logits = self.decoder.logits(torch.stack(readouts, dim=1))
        return logits, torch.stack(alphas, dim=1)

    def step_logits(self, prev_tokens: Tensor, state: Tensor, keys: Tensor, annotations: Tensor,
                    mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Inference step before the softmax: logits (batch x vocab), s_i, α_i. The export's step
        graphs add a vocabulary bias to these logits before normalising (model/export/rnnsearch.py)."""
        prev_embedded = self.decoder.embedding(prev_tokens)
        readout_in, new_state, alpha = self.decoder.forward_step(prev_embedded, state, keys, annotations, mask)
        return self.decoder.logits(readout_in), new_state, alpha

    def step_log_probs(self, prev_tokens: Tensor, state: Tensor, keys: Tensor, annotations: Tensor,
                       mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Inference step: log p(y_i | ...) (batch x vocab), s_i, α_i."""
        logits, new_state, alpha = self.step_logits(prev_tokens, state, keys, annotations, mask)
        return torch.log_softmax(logits, dim=-1), new_state, alpha


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
