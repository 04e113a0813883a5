"""The number-translation task, masked softmax, additive attention and the encoder-decoder."""

import numpy as np
import pytest
import torch

from mini_llm.engine.train import TrainConfig, train
from mini_llm.seq2seq import (
    BOS,
    EOS,
    Seq2Seq,
    additive_attention,
    encode_batch,
    exact_match,
    is_held_out,
    masked_softmax,
    number_pairs,
    number_to_words,
    vocabularies,
)


@pytest.mark.parametrize(
    ("n", "words"),
    [
        (0, "zero"),
        (7, "seven"),
        (13, "thirteen"),
        (40, "forty"),
        (99, "ninety nine"),
        (100, "one hundred"),
        (305, "three hundred five"),
        (1000, "one thousand"),
        (20019, "twenty thousand nineteen"),
        (312005, "three hundred twelve thousand five"),
        (999999, "nine hundred ninety nine thousand nine hundred ninety nine"),
    ],
)
def test_numbers_in_words(n, words):
    assert " ".join(number_to_words(n)) == words


def test_numbers_out_of_range_are_refused():
    for bad in (-1, 1_000_000):
        with pytest.raises(ValueError, match="999,999"):
            number_to_words(bad)


def test_pairs_and_batches_use_the_vocabularies_with_padding_zero():
    source, target = vocabularies()
    assert source.itos[0] == target.itos[0] == "<pad>"
    pairs = number_pairs(50, np.random.default_rng(0), split="train")
    assert all("".join(digits) == str(int("".join(digits))) for _, digits in pairs)
    lengths = {len(digits) for _, digits in pairs}
    assert min(lengths) <= 2 and max(lengths) >= 5  # short and long numbers both occur
    src, tgt = encode_batch(pairs[:3], source, target)
    for row, (words, digits) in zip(range(3), pairs[:3], strict=True):
        assert source.decode(src[row][src[row] != 0].tolist()) == [*words, EOS]
        assert target.decode(tgt[row][tgt[row] != 0].tolist()) == [*digits, EOS]


def test_training_never_draws_a_held_out_number_and_testing_draws_only_those():
    """The split is decided per number before anything is drawn, so no training stream can
    produce a test number, whatever its seed and length."""
    held_out = np.array([is_held_out(n) for n in range(1_000_000)])
    assert 0.19 < held_out.mean() < 0.21  # one number in five
    assert held_out[:100].any() and held_out[100_000:].any()  # short and long numbers alike
    assert not held_out[0]  # "zero" occurs in no other number: it must be trained on
    for seed in range(3):
        train_numbers = [
            int("".join(d))
            for _, d in number_pairs(5000, np.random.default_rng(seed), split="train")
        ]
        assert not held_out[train_numbers].any()
        test_numbers = [
            int("".join(d)) for _, d in number_pairs(500, np.random.default_rng(seed), split="test")
        ]
        assert held_out[test_numbers].all()
    distinct = number_pairs(300, np.random.default_rng(0), split="test", distinct=True)
    assert len({tuple(d) for _, d in distinct}) == 300
    with pytest.raises(ValueError, match="split"):
        number_pairs(3, np.random.default_rng(0), split="validation")


def test_masked_softmax_ignores_padding():
    scores = torch.tensor([[1.0, 2.0, 30.0], [0.5, 0.5, 0.5]])
    mask = torch.tensor([[True, True, False], [True, True, True]])
    weights = masked_softmax(scores, mask)
    assert weights[0, 2] == 0
    torch.testing.assert_close(weights[0, :2], torch.softmax(torch.tensor([1.0, 2.0]), dim=0))
    torch.testing.assert_close(weights[1], torch.full((3,), 1 / 3))


def test_additive_attention_matches_the_formula():
    g = torch.Generator().manual_seed(0)
    B, S, Q, K, A = 2, 4, 3, 5, 6
    query, keys = torch.randn(B, Q, generator=g), torch.randn(B, S, K, generator=g)
    W_q, W_k, v = (
        torch.randn(A, Q, generator=g),
        torch.randn(A, K, generator=g),
        torch.randn(A, generator=g),
    )
    mask = torch.tensor([[True] * 4, [True, True, True, False]])
    context, weights = additive_attention(query, keys, mask, W_q, W_k, v)
    for b in range(B):
        scores = torch.stack([v @ torch.tanh(W_q @ query[b] + W_k @ keys[b, j]) for j in range(S)])
        scores[~mask[b]] = -float("inf")
        expected = torch.softmax(scores, dim=0)
        torch.testing.assert_close(weights[b], expected)
        torch.testing.assert_close(context[b], expected @ keys[b])
    assert weights[1, 3] == 0


def test_exact_match_compares_up_to_the_first_end_token():
    eos = 2
    target = torch.tensor([[5, 6, eos, 0], [7, eos, 0, 0]])
    assert exact_match(torch.tensor([[5, 6, eos, 9], [7, 8, eos, 0]]), target, eos) == 0.5
    assert exact_match(torch.tensor([[5, 6, eos], [7, eos, 3]]), target, eos) == 1.0


@pytest.mark.slow  # trains two models to a target (make check leaves it out)
def test_attention_model_learns_to_translate_and_aligns_digits_with_words():
    source, target = vocabularies()
    torch.manual_seed(0)
    model = Seq2Seq(len(source), len(target), target.stoi[BOS], dim=32, attention=True)
    rng = np.random.default_rng(0)
    train(
        model,
        lambda: encode_batch(number_pairs(64, rng, "train", max_value=999), source, target),
        TrainConfig(
            max_iters=300,
            learning_rate=5e-3,
            warmup_iters=20,
            weight_decay=0.0,
            progress=False,
            eval_interval=0,
            device="cpu",
        ),
    )
    src, tgt = encode_batch(
        number_pairs(150, np.random.default_rng(1), "test", max_value=999, distinct=True),
        source,
        target,
    )
    predicted, maps = model.translate(src, target.stoi[EOS])
    assert exact_match(predicted, tgt, target.stoi[EOS]) > 0.9
    assert maps.shape[:2] == predicted.shape and maps.shape[2] == src.shape[1]
    torch.testing.assert_close(maps.sum(dim=-1), torch.ones(maps.shape[:2]))
    assert (maps[src[:, None, :].expand_as(maps) == 0] == 0).all()  # never on padding
    logits, loss = model(src, tgt)
    assert logits.shape == (*tgt.shape, len(target)) and loss.item() < 0.5


def test_a_rows_translation_does_not_depend_on_the_padding_of_its_batch():
    source, target = vocabularies()
    torch.manual_seed(0)
    model = Seq2Seq(len(source), len(target), target.stoi[BOS], dim=16)
    short = [(number_to_words(7), ["7"])]
    long = [(number_to_words(777777), list("777777"))]
    alone, _ = encode_batch(short, source, target)
    padded, _ = encode_batch(short + long, source, target)
    states_alone = model.encode(alone)[0][0]
    states_padded = model.encode(padded)[0][0, : alone.size(1)]
    torch.testing.assert_close(states_alone, states_padded)


def test_the_summary_is_the_final_state_of_both_directions():
    """Without attention the decoder sees only the summary: each direction's state after it has
    read the whole sentence, not the backward state at </s> (which has read only </s>)."""
    source, target = vocabularies()
    torch.manual_seed(0)
    model = Seq2Seq(len(source), len(target), target.stoi[BOS], dim=8, attention=False)
    pairs = [(number_to_words(n), list(str(n))) for n in (7, 312005, 20019)]
    src, _ = encode_batch(pairs, source, target)
    states, mask, _, summary = model.encode(src)
    lengths = mask.sum(dim=1)
    torch.testing.assert_close(summary[:, :8], states[torch.arange(3), lengths - 1, :8])
    torch.testing.assert_close(summary[:, 8:], states[:, 0, 8:])
    changed = src.clone()
    changed[1, 0] = source.stoi["nine"]  # another first word changes both halves
    other = model.encode(changed)[3][1]
    assert not torch.allclose(other[:8], summary[1, :8])
    assert not torch.allclose(other[8:], summary[1, 8:])
