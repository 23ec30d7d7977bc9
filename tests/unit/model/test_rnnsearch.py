import pytest
import torch

from attnmt.model.architectures.rnnsearch import ModelConfig, RNNsearch
from attnmt.model.batching import bucket_batches, make_batch


def small(**kw) -> RNNsearch:
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=50, embedding_size=16, encoder_hidden=12, decoder_hidden=24, attention_size=10,
                      readout_size=16, dropout=0.0, **kw)
    return RNNsearch(cfg).eval()


@pytest.mark.parametrize("attention", ["bahdanau", "general", "dot", "scaled_dot"])
def test_padded_sentence_encodes_exactly_as_alone(attention):
    model = small(attention=attention)
    sentences = [[5, 6, 7, 3], [8, 9, 10, 11, 12, 13, 14, 15, 3], [20, 3]]
    batch = make_batch([s[:-1] for s in sentences], None, [0, 1, 2])
    with torch.no_grad():
        annotations, keys, mask, s0 = model.encode(batch.src, batch.lengths)
        for row, sent in enumerate(sentences):
            a1, k1, m1, s1 = model.encode(torch.tensor([sent]), torch.tensor([len(sent)]))
            n = len(sent)
            # both directions, including the backward one that starts at the padded end
            assert torch.allclose(annotations[row, :n], a1[0], atol=1e-5)
            assert torch.allclose(keys[row, :n], k1[0], atol=1e-5)
            assert torch.allclose(s0[row], s1[0], atol=1e-5)
            assert mask[row].sum() == n
            assert torch.all(annotations[row, n:] == 0)


def test_padding_gets_no_attention_and_rows_sum_to_one():
    model = small()
    batch = make_batch([[5, 6], [7, 8, 9, 10, 11]], [[4, 5, 6], [7]], [0, 1])
    with torch.no_grad():
        logits, alpha = model(batch.src, batch.lengths, batch.tgt_in)
    assert logits.shape == (2, 4, 50)
    assert torch.allclose(alpha.sum(-1), torch.ones(2, 4), atol=1e-6)
    assert torch.all(alpha[0, :, 3:] == 0)        # sentence 0 has 3 source tokens with </s>


def test_tied_embeddings_share_one_matrix():
    model = small()
    assert model.decoder.output_layer.weight is model.encoder.embedding.weight
    untied = small(tie_embeddings=False)
    assert untied.decoder.output_layer.weight is not untied.encoder.embedding.weight


@pytest.mark.parametrize("bad, message", [
    ({"attention": "luong"}, "attention must be"),
    ({"readout": "relu"}, "readout must be"),
    ({"attention": "dot", "decoder_hidden": 10}, "dot attention needs"),
    ({"readout_size": 8}, "tie_embeddings needs"),
])
def test_config_errors_name_the_option(bad, message):
    args = dict(vocab_size=50, embedding_size=16, encoder_hidden=12, decoder_hidden=24, readout_size=16)
    args.update(bad)
    with pytest.raises(ValueError, match=message):
        ModelConfig(**args)


def test_token_budget_batches_cover_every_sentence_once():
    src = [[1] * n for n in range(1, 60)] * 3
    tgt = [[1] * (n + 2) for n in range(1, 60)] * 3
    batches = bucket_batches(src, tgt, token_budget=200, seed=1, epoch=0)
    assert sorted(i for b in batches for i in b) == list(range(len(src)))
    for b in batches:
        longest = max(max(len(src[i]), len(tgt[i])) + 1 for i in b)
        assert longest * len(b) <= 200 or len(b) == 1
    assert batches == bucket_batches(src, tgt, token_budget=200, seed=1, epoch=0)   # resumable
    assert batches != bucket_batches(src, tgt, token_budget=200, seed=1, epoch=1)
