"""A Transformer checkpoint as a CTranslate2 model directory, so the two engines can be held
against each other on the same weights (`attnmt bench ctranslate2`).

CTranslate2's `TransformerSpec` is filled weight by weight as docs/transformer.md maps it
(pre-norm, ReLU, √d-scaled embeddings, its built-in sinusoids, which are ours); the vocabulary
is the SentencePiece pieces in id order, so ids agree; the weights are rounded to float16 as
`attnmt export` rounds them (then held in float32), so the two engines hold the same numbers.
Its parity traps, written down there: pass `</s>` as the last source token (CTranslate2 adds
none), and compare greedy output with `max_decoding_length` equal to ours. `ctranslate2` is a
development dependency (the `dev` extra), never a serving one.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from attnmt.model.architectures.transformer import Transformer
from attnmt.model.tokenizer import Tokenizer


def transformer_spec(model: Transformer, pieces: list[str]):
    """The filled, validated `ctranslate2.specs.TransformerSpec` of `model`."""
    import ctranslate2

    cfg = model.cfg
    weights = {name: value.detach().float().numpy() for name, value in model.state_dict().items()}
    spec = ctranslate2.specs.TransformerSpec.from_config((cfg.encoder_layers, cfg.decoder_layers), cfg.heads,
                                                         pre_norm=True)

    def linear(target, name: str) -> None:
        target.weight = weights[f"{name}.weight"]                 # [out, in], as PyTorch keeps it
        if f"{name}.bias" in weights:
            target.bias = weights[f"{name}.bias"]

    def norm(target, name: str) -> None:
        target.gamma, target.beta = weights[f"{name}.weight"], weights[f"{name}.bias"]

    def feed_forward(target, prefix: str) -> None:
        norm(target.layer_norm, prefix + "ffn_norm")
        linear(target.linear_0, prefix + "ffn.linear_1")
        linear(target.linear_1, prefix + "ffn.linear_2")

    spec.encoder.embeddings[0].weight = weights["encoder.embedding.weight"]
    for i, layer in enumerate(spec.encoder.layer):
        prefix = f"encoder.layers.{i}."
        norm(layer.self_attention.layer_norm, prefix + "self_attention_norm")
        linear(layer.self_attention.linear[0], prefix + "self_attention.query_key_value")
        linear(layer.self_attention.linear[1], prefix + "self_attention.output")
        feed_forward(layer.ffn, prefix)
    norm(spec.encoder.layer_norm, "encoder.layer_norm")

    spec.decoder.embeddings.weight = weights["decoder.embedding.weight"]
    for i, layer in enumerate(spec.decoder.layer):
        prefix = f"decoder.layers.{i}."
        norm(layer.self_attention.layer_norm, prefix + "self_attention_norm")
        linear(layer.self_attention.linear[0], prefix + "self_attention.query_key_value")
        linear(layer.self_attention.linear[1], prefix + "self_attention.output")
        norm(layer.attention.layer_norm, prefix + "cross_attention_norm")
        linear(layer.attention.linear[0], prefix + "cross_attention.query")
        linear(layer.attention.linear[1], prefix + "cross_attention.key_value")
        linear(layer.attention.linear[2], prefix + "cross_attention.output")
        feed_forward(layer.ffn, prefix)
    norm(spec.decoder.layer_norm, "decoder.layer_norm")
    spec.decoder.projection.weight = weights["decoder.output_layer.weight"]     # the tied table, no bias

    spec.register_source_vocabulary(pieces)
    spec.register_target_vocabulary(pieces)
    spec.validate()
    return spec


def export_ctranslate2(checkpoint: Path, tokenizer: Path, out: Path, quantization: str | None = None) -> dict:
    """Write the CTranslate2 model directory of a Transformer `checkpoint` to `out`;
    `quantization`: None (fp32) or one of CTranslate2's ("int8", "int8_float32"...)."""
    from attnmt.model.train import load_model

    return _write(load_model(Path(checkpoint)), Path(checkpoint), Path(tokenizer), out, quantization)


def export_ctranslate2_from_model_directory(model_dir: Path, out: Path, quantization: str | None = None) -> dict:
    """The same from an attnmt Transformer model directory: its `checkpoint.pt`, or, where the
    directory ships none (the bundled ones), the weights read back from its graphs."""
    from attnmt.model.export.recover import load_model_directory
    from attnmt.service.modeldir.manifest import load_manifest

    tokenizer = model_dir / load_manifest(model_dir, verify=False).tokenizer
    return _write(load_model_directory(model_dir), model_dir, tokenizer, out, quantization, as_served=True)


def _write(model, source: Path, tokenizer: Path, out: Path, quantization: str | None, as_served: bool = False
           ) -> dict:
    """as_served: the weights are those a model directory's graphs hold (read back from them),
    float16 or int8-rounded, and are taken as they are."""
    import ctranslate2

    from attnmt.model.export.directory import round_to_half

    if not isinstance(model, Transformer):
        raise ValueError(f"{source} holds an {type(model).__name__}: CTranslate2 runs no RNNs "
                         "(only Transformer checkpoints convert)")
    # The weights attnmt's export serves: rounded to float16 and held in float32, so both
    # engines hold the very same numbers. A directory's weights are already what it serves
    # (rounding int8-stored ones to float16 would change them).
    if not as_served:
        model = round_to_half(model)
    tok = Tokenizer(tokenizer)
    spec = transformer_spec(model, [tok.sp.id_to_piece(i) for i in range(len(tok))])
    spec.optimize(quantization=quantization)
    out.mkdir(parents=True, exist_ok=True)
    spec.save(str(out))
    parameters = int(sum(np.prod(p.shape) for p in model.parameters()))
    return {"ctranslate2": ctranslate2.__version__, "out": str(out), "quantization": quantization or "float32",
            "parameters": parameters}
