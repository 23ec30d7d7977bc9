"""The Transformer: Vaswani et al. (2017), "Attention Is All You Need", NeurIPS.

Names follow the paper: scaled dot-product attention softmax(Q Kᵀ / √d_k) V (§3.2.1),
multi-head attention Concat(head_1..head_h) W^O (§3.2.2), the position-wise
feed-forward network max(0, x W_1 + b_1) W_2 + b_2 (§3.3), embeddings multiplied by
√d_model and shared between source, target and the pre-softmax projection (§3.4),
sinusoidal positions (§3.5). α is the attention probabilities, (B, H, T, S).

Two departures from the paper, both the practice of the toolkits we convert to:
- **Pre-norm** residual blocks, x + Sublayer(LayerNorm(x)), with a final layer norm
  at the top of the encoder and of the decoder (Wang et al. 2019, "Learning Deep
  Transformer Models for Machine Translation"; Xiong et al. 2020): they train
  without a long warm-up on small data, and a deep encoder stays stable.
- **Sinusoids as CTranslate2 and tensor2tensor compute them**: [sin | cos]
  concatenated (not interleaved), timescales 10000^(-i / (d/2 - 1)) and the first
  position numbered 1, so CTranslate2's built-in table is ours and conversion is a
  copy of weights (docs/transformer.md lists every such trap).

The weight layout is CTranslate2's TransformerSpec: self-attention projects Q, K, V
with one fused [3d, d] matrix; cross-attention projects Q from the decoder and
K, V from the encoder output with one fused [2d, d] matrix, so the encoder's keys
and values are computed once per sentence (`Decoder.memory_keys_values`).

Size (defaults): 6 encoder layers, 2 decoder layers, d_model 256, 8 heads, FFN 1024,
about 9M parameters with one tied 8k x 256 table. A deep encoder and a shallow decoder
serve fast on CPUs, where the decoder runs once per target token and the encoder
once per sentence (Kasai et al. 2021, "Deep Encoder, Shallow Decoder"; Bergamot's
tiny students: 6/2 layers, d 256); d 256 decodes three times as fast as d 512
(measurements: docs/transformer.md).

The decoder has an incremental step (`Transformer.step_logits`): a key/value cache
per self-attention layer that grows by one position a step, and the cross-attention
keys/values computed once; it equals the full teacher-forced forward to float
rounding (tests/unit/model/test_transformer.py), which is what the export's step graph needs.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmt.model.tokenizer import PAD_ID

LAYER_NORM_EPS = 1e-5    # PyTorch's default, and CTranslate2's for a layer norm with a bias (β)


@dataclass
class TransformerConfig:
    vocab_size: int = 8000          # joint SentencePiece vocabulary: one table for source, target and output
    d_model: int = 256              # d_model: embeddings and every sublayer's output
    heads: int = 8                  # h; d_k = d_v = d_model / h
    ffn_size: int = 1024            # d_ff, the inner width of the feed-forward network
    encoder_layers: int = 6
    decoder_layers: int = 2
    dropout: float = 0.1            # P_drop on embeddings + positions and on each sublayer's output
    attention_dropout: float = 0.0  # on α inside attention (the α returned is before this dropout)
    max_positions: int = 1024       # sinusoid rows: covers the server's max_tokens_per_sentence (256) and
                                    # max_target_tokens (512); the table is computed, not stored
    alignment_layer: int = -1       # the decoder layer whose cross-attention α is the alignment (-1: last);
    alignment_head: int = 0         # and its head (-1: the mean of all heads). Training sets both from
                                    # guided_alignment when that is on (model/train.py)

    def __post_init__(self) -> None:
        if self.d_model % self.heads:
            raise ValueError(f"d_model ({self.d_model}) must be a multiple of heads ({self.heads})")
        if self.d_model % 2 or self.d_model < 4:
            raise ValueError(f"d_model must be even and at least 4 (sin and cos halves), not {self.d_model}")
        if not -self.decoder_layers <= self.alignment_layer < self.decoder_layers:
            raise ValueError(f"alignment_layer {self.alignment_layer} is not a layer of {self.decoder_layers}")
        if not -1 <= self.alignment_head < self.heads:
            raise ValueError(f"alignment_head must be -1 (mean) or a head below {self.heads}")

    def to_dict(self) -> dict:
        return asdict(self)


def sinusoids(positions: int, d_model: int) -> Tensor:
    """PE: positions x d_model. Row t is position t + 1 (CTranslate2 numbers from 1):
    [sin(p·τ_0) .. sin(p·τ_{d/2-1}) | cos(p·τ_0) .. cos(p·τ_{d/2-1})], τ_i = 10000^(-i/(d/2-1))."""
    half = d_model // 2
    timescales = torch.exp(torch.arange(half, dtype=torch.float32) * -(math.log(10000.0) / (half - 1)))  # d/2
    time = torch.arange(1, positions + 1, dtype=torch.float32).unsqueeze(1) * timescales.unsqueeze(0)  # P x d/2
    return torch.cat([torch.sin(time), torch.cos(time)], dim=-1)


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None,
                                 dropout: nn.Dropout | None = None,
                                 scale: float | None = None) -> tuple[Tensor, Tensor]:
    """softmax(Q Kᵀ / √d_k) V. q: B, H, T, d_k; k, v: B, H, S, d_k; mask: broadcast to
    B, H, T, S, True where a query may attend. Returns the context (B, H, T, d_k) and α (B, H, T, S).
    scale: 1/√d_k as a plain number, which an exported graph holds as a constant (read from
    q's shape, it is six nodes run at every call)."""
    scores = q @ k.transpose(-2, -1) * (q.size(-1) ** -0.5 if scale is None else scale)   # B, H, T, S
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    alpha = torch.softmax(scores, dim=-1)
    weights = dropout(alpha) if dropout is not None and dropout.p > 0 else alpha
    return weights @ v, alpha


class MultiHeadAttention(nn.Module):
    """Self-attention (cross=False): Q, K, V from x through one fused matrix, with an
    optional cache of the keys and values of earlier positions. Cross-attention
    (cross=True): Q from x, K and V from the encoder output through one fused matrix,
    computed once by `keys_values`."""

    def __init__(self, d_model: int, heads: int, attention_dropout: float, cross: bool = False):
        super().__init__()
        self.heads, self.cross = heads, cross
        if cross:
            self.query = nn.Linear(d_model, d_model)                      # W^Q
            self.key_value = nn.Linear(d_model, 2 * d_model)              # [W^K; W^V]
        else:
            self.query_key_value = nn.Linear(d_model, 3 * d_model)        # [W^Q; W^K; W^V]
        self.output = nn.Linear(d_model, d_model)                         # W^O
        self.dropout = nn.Dropout(attention_dropout)

    def split_heads(self, x: Tensor) -> Tensor:
        B, T, C = x.shape
        return x.view(B, T, self.heads, C // self.heads).transpose(1, 2)  # B, H, T, d_k

    def keys_values(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """Cross-attention: memory (B, S, C) -> K, V (B, H, S, d_k each)."""
        k, v = self.key_value(memory).chunk(2, dim=-1)
        return self.split_heads(k), self.split_heads(v)

    def forward(self, x: Tensor, mask: Tensor | None, keys_values: tuple[Tensor, Tensor] | None = None,
                past: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor, tuple[Tensor, Tensor]]:
        """x: B, T, C. Cross-attention reads `keys_values`; self-attention appends its keys and
        values to `past` (B, H, t, d_k each). Returns the output (B, T, C), α (B, H, T, S) and
        the keys and values attended over (the new cache for self-attention)."""
        B, T, C = x.shape
        if self.cross:
            q = self.split_heads(self.query(x))
            k, v = keys_values
        else:
            q, k, v = (self.split_heads(part) for part in self.query_key_value(x).chunk(3, dim=-1))
            if past is not None:
                k = torch.cat([past[0], k], dim=2)                        # B, H, t + T, d_k
                v = torch.cat([past[1], v], dim=2)
        context, alpha = scaled_dot_product_attention(q, k, v, mask, self.dropout)
        context = context.transpose(1, 2).reshape(B, T, C)               # heads side by side: B, T, C
        return self.output(context), alpha, (k, v)


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2."""

    def __init__(self, d_model: int, ffn_size: int):
        super().__init__()
        self.linear_1 = nn.Linear(d_model, ffn_size)
        self.linear_2 = nn.Linear(ffn_size, d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear_2(F.relu(self.linear_1(x)))


class EncoderLayer(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.self_attention_norm = nn.LayerNorm(cfg.d_model, eps=LAYER_NORM_EPS)
        self.self_attention = MultiHeadAttention(cfg.d_model, cfg.heads, cfg.attention_dropout)
        self.ffn_norm = nn.LayerNorm(cfg.d_model, eps=LAYER_NORM_EPS)
        self.ffn = FeedForward(cfg.d_model, cfg.ffn_size)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        # x: B, S, C; mask: B, 1, 1, S
        x = x + self.dropout(self.self_attention(self.self_attention_norm(x), mask)[0])
        return x + self.dropout(self.ffn(self.ffn_norm(x)))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.self_attention_norm = nn.LayerNorm(cfg.d_model, eps=LAYER_NORM_EPS)
        self.self_attention = MultiHeadAttention(cfg.d_model, cfg.heads, cfg.attention_dropout)
        self.cross_attention_norm = nn.LayerNorm(cfg.d_model, eps=LAYER_NORM_EPS)
        self.cross_attention = MultiHeadAttention(cfg.d_model, cfg.heads, cfg.attention_dropout, cross=True)
        self.ffn_norm = nn.LayerNorm(cfg.d_model, eps=LAYER_NORM_EPS)
        self.ffn = FeedForward(cfg.d_model, cfg.ffn_size)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor, self_mask: Tensor | None, memory_kv: tuple[Tensor, Tensor], src_mask: Tensor,
                past: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor, tuple[Tensor, Tensor]]:
        """x: B, T, C. Returns the output, the cross-attention α (B, H, T, S) and this layer's
        self-attention keys and values (the cache for the next step)."""
        h, _, present = self.self_attention(self.self_attention_norm(x), self_mask, past=past)
        x = x + self.dropout(h)
        h, alpha, _ = self.cross_attention(self.cross_attention_norm(x), src_mask, keys_values=memory_kv)
        x = x + self.dropout(h)
        return x + self.dropout(self.ffn(self.ffn_norm(x))), alpha, present


class Encoder(nn.Module):
    def __init__(self, cfg: TransformerConfig, embedding: nn.Embedding):
        super().__init__()
        self.embedding = embedding
        self.register_buffer("positions", sinusoids(cfg.max_positions, cfg.d_model), persistent=False)
        self.scale = math.sqrt(cfg.d_model)
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.encoder_layers))
        self.layer_norm = nn.LayerNorm(cfg.d_model, eps=LAYER_NORM_EPS)   # the pre-norm stack's final norm
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, src: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """src: B, S (ends with </s>, padded). Returns the encoder output (B, S, C), zero on
        padding, and the source mask (B, S), True on real tokens."""
        B, S = src.shape
        src_mask = torch.arange(S, device=src.device).unsqueeze(0) < lengths.unsqueeze(1)  # B, S
        x = self.dropout(self.embedding(src) * self.scale + self.positions[:S])           # B, S, C
        attention_mask = src_mask[:, None, None, :]                                        # B, 1, 1, S
        for layer in self.layers:
            x = layer(x, attention_mask)
        return self.layer_norm(x) * src_mask.unsqueeze(-1), src_mask


class Decoder(nn.Module):
    def __init__(self, cfg: TransformerConfig, embedding: nn.Embedding):
        super().__init__()
        self.embedding = embedding
        self.register_buffer("positions", sinusoids(cfg.max_positions, cfg.d_model), persistent=False)
        self.scale = math.sqrt(cfg.d_model)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.decoder_layers))
        self.layer_norm = nn.LayerNorm(cfg.d_model, eps=LAYER_NORM_EPS)
        self.output_layer = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.output_layer.weight = embedding.weight                       # tied (§3.4)
        self.dropout = nn.Dropout(cfg.dropout)

    def memory_keys_values(self, memory: Tensor) -> list[tuple[Tensor, Tensor]]:
        """Each layer's cross-attention K, V (B, H, S, d_k), computed once per sentence."""
        return [layer.cross_attention.keys_values(memory) for layer in self.layers]

    def forward(self, tgt_in: Tensor, memory_kv: list[tuple[Tensor, Tensor]], src_mask: Tensor,
                past: list[tuple[Tensor, Tensor]] | None = None
                ) -> tuple[Tensor, list[Tensor], list[tuple[Tensor, Tensor]]]:
        """tgt_in: B, T (starts with <s>), positions t .. t + T - 1 where t is the cache length.
        Returns logits (B, T, V), α per layer (B, H, T, S) and each layer's self-attention cache."""
        B, T = tgt_in.shape
        start = 0 if past is None else past[0][0].size(2)
        x = self.dropout(self.embedding(tgt_in) * self.scale + self.positions[start:start + T])  # B, T, C
        # Position i attends to positions <= i; padding sits after the real tokens, so the
        # causal mask alone keeps it out of every real position.
        causal = None if T == 1 else torch.ones(T, T, dtype=torch.bool, device=tgt_in.device).tril()
        if causal is not None and start:
            causal = torch.cat([torch.ones(T, start, dtype=torch.bool, device=tgt_in.device), causal], dim=1)
        attention_mask = src_mask[:, None, None, :]                                      # B, 1, 1, S
        alphas, present = [], []
        for i, layer in enumerate(self.layers):
            x, alpha, kv = layer(x, causal, memory_kv[i], attention_mask, None if past is None else past[i])
            alphas.append(alpha)
            present.append(kv)
        return self.output_layer(self.layer_norm(x)), alphas, present


class Transformer(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.cfg = cfg
        embedding = nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=PAD_ID)
        self.encoder = Encoder(cfg, embedding)
        self.decoder = Decoder(cfg, embedding)
        self._init_weights(embedding)

    def _init_weights(self, embedding: nn.Embedding) -> None:
        # Glorot-uniform weights (tensor2tensor's, fairseq's), biases zero. A fused attention
        # matrix is initialised one d x d block at a time, so fusing does not change the scale.
        d = self.cfg.d_model
        for module in self.modules():
            if isinstance(module, MultiHeadAttention):
                fused = [module.query, module.key_value] if module.cross else [module.query_key_value]
                for linear in fused + [module.output]:
                    for block in linear.weight.split(d, dim=0):
                        nn.init.xavier_uniform_(block)
                    nn.init.zeros_(linear.bias)
            elif isinstance(module, FeedForward):
                for linear in (module.linear_1, module.linear_2):
                    nn.init.xavier_uniform_(linear.weight)
                    nn.init.zeros_(linear.bias)
        # N(0, d^-1/2): after the √d scale an embedding has unit-variance components, as the
        # sinusoids do, and the tied output layer starts with logits of unit scale.
        nn.init.normal_(embedding.weight, std=self.cfg.d_model ** -0.5)
        with torch.no_grad():
            embedding.weight[PAD_ID].zero_()

    def encode(self, src: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """memory (B, S, C) and src_mask (B, S)."""
        return self.encoder(src, lengths)

    def forward(self, src: Tensor, lengths: Tensor, tgt_in: Tensor) -> tuple[Tensor, list[Tensor]]:
        """Teacher-forced pass. tgt_in: B, T (starts with <s>). Returns logits (B, T, V) and the
        cross-attention α of every decoder layer, (B, H, T, S) each."""
        memory, src_mask = self.encode(src, lengths)
        logits, alphas, _ = self.decoder(tgt_in, self.decoder.memory_keys_values(memory), src_mask)
        return logits, alphas

    def alignment(self, alphas: list[Tensor]) -> Tensor:
        """The alignment α, (B, T, S) from every layer's (B, H, T, S), or (B, S) from a step's
        (B, H, S): the configured layer and head."""
        alpha = alphas[self.cfg.alignment_layer]
        return alpha.mean(1) if self.cfg.alignment_head < 0 else alpha[:, self.cfg.alignment_head]

    # Incremental decoding: the state is (self-attention cache per layer, cross-attention
    # K/V per layer, src_mask); the position is the cache length.

    def start(self, memory: Tensor, src_mask: Tensor) -> "DecoderState":
        B, H, dk = memory.size(0), self.cfg.heads, self.cfg.d_model // self.cfg.heads
        empty = memory.new_zeros(B, H, 0, dk)
        return DecoderState([(empty, empty)] * len(self.decoder.layers),
                            self.decoder.memory_keys_values(memory), src_mask)

    def step_logits(self, prev_tokens: Tensor, state: "DecoderState") -> tuple[Tensor, "DecoderState", list[Tensor]]:
        """One step: prev_tokens (B) -> logits (B, V), the state one position on, and α per layer (B, H, S)."""
        logits, alphas, present = self.decoder(prev_tokens.unsqueeze(1), state.memory_kv, state.src_mask,
                                               past=state.self_kv)
        return logits[:, 0], DecoderState(present, state.memory_kv, state.src_mask), [a[:, :, 0] for a in alphas]


@dataclass
class DecoderState:
    self_kv: list[tuple[Tensor, Tensor]]     # per layer: K, V of the positions so far, B, H, t, d_k
    memory_kv: list[tuple[Tensor, Tensor]]   # per layer: cross-attention K, V, B, H, S, d_k
    src_mask: Tensor                         # B, S

    def select(self, rows: Tensor, memory_too: bool = True) -> "DecoderState":
        """Rows `rows` of the batch (beam reordering, finished rows leaving). Beam parents stay
        within their sentence, so a beam step keeps the memory as it is (memory_too=False)."""
        self_kv = [(k[rows], v[rows]) for k, v in self.self_kv]
        if not memory_too:
            return DecoderState(self_kv, self.memory_kv, self.src_mask)
        return DecoderState(self_kv, [(k[rows], v[rows]) for k, v in self.memory_kv], self.src_mask[rows])
