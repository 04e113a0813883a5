"""N-gram tables of any order, add-k smoothing, interpolation and perplexity (chapter 2)."""

import collections

import numpy as np
import pytest

from mini_llm.evaluation import perplexity, split_documents
from mini_llm.ngram import average_nll, bigram_probabilities, count_bigrams
from mini_llm.smoothing import (
    NGramModel,
    add_k_probabilities,
    fit_interpolation_weights,
    interpolate,
    lookup_counts,
    ngram_counts,
    pad_sequences,
    unseen_ngram_fraction,
)
from mini_llm.vocab import BOS, Vocabulary

SEED_TEXT = ["datawhale agent learns", "datawhale agent works"]


def random_sequences(rng, count=30, vocab_size=6):
    """Sequences in the <s> ... </s> form (ids 0 and 1) over a small vocabulary."""
    return [
        np.concatenate([[0], rng.integers(2, vocab_size, size=rng.integers(0, 9)), [1]])
        for _ in range(count)
    ]


@pytest.fixture
def seed():
    vocab = Vocabulary.from_sequences([s.split() for s in SEED_TEXT] + [["robot"]])
    return vocab, [vocab.encode_with_boundaries(s.split()) for s in SEED_TEXT]


def test_padding_gives_every_order_the_same_targets():
    ids = np.array([0, 5, 6, 1])
    assert pad_sequences([ids], 1, 0)[0].tolist() == [5, 6, 1]
    assert pad_sequences([ids], 2, 0)[0].tolist() == [0, 5, 6, 1]
    assert pad_sequences([ids], 4, 0)[0].tolist() == [0, 0, 0, 5, 6, 1]


def test_padding_refuses_sequences_without_a_begin_token():
    with pytest.raises(ValueError, match="begin token"):
        pad_sequences([np.array([5, 6, 1])], 3, 0)
    with pytest.raises(ValueError, match="n must be"):
        pad_sequences([np.array([0, 1])], 0, 0)
    with pytest.raises(ValueError, match="empty"):
        pad_sequences([], 2, 0)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_counts_match_a_counter_over_padded_windows(n):
    rng = np.random.default_rng(n)
    sequences = random_sequences(rng)
    expected = collections.Counter()
    for s in sequences:
        padded = [0] * (n - 1) + s[1:].tolist()
        for i in range(len(padded) - n + 1):
            expected[tuple(padded[i : i + n])] += 1
    contexts, counts = ngram_counts(sequences, n, 6)
    assert contexts.shape == (len({g[:-1] for g in expected}), n - 1)
    assert counts.shape == (len(contexts), 6)
    got = {(*map(int, contexts[r]), int(w)): int(counts[r, w]) for r, w in zip(*np.nonzero(counts))}
    assert got == dict(expected)
    assert [tuple(c) for c in contexts] == sorted(tuple(c) for c in contexts)


def test_lookup_returns_counts_of_seen_contexts_and_zeros_for_unseen():
    contexts, counts = ngram_counts([np.array([0, 2, 3, 2, 3, 1])], 3, 5)
    queries = np.array([[2, 3], [4, 4], [0, 0]])
    found = lookup_counts(contexts, counts, queries)
    assert found[0].tolist() == [0, 1, 1, 0, 0]  # "2 3" is followed by 2 once and by </s> once
    assert found[1].tolist() == [0] * 5
    assert found[2].tolist() == [0, 0, 1, 0, 0]
    with pytest.raises(ValueError, match="shape"):
        lookup_counts(contexts, counts, np.array([[2, 3, 4]]))


def test_add_k_rows_are_distributions_and_match_the_formula():
    counts = np.array([[3, 0, 1], [0, 0, 0]])
    probs = add_k_probabilities(counts, 0.5)
    assert probs[0] == pytest.approx([3.5 / 5.5, 0.5 / 5.5, 1.5 / 5.5])
    assert probs.sum(axis=1) == pytest.approx([1, 1])
    assert probs[1] == pytest.approx([1 / 3] * 3)
    assert add_k_probabilities(counts, 0)[0] == pytest.approx([0.75, 0, 0.25])
    with pytest.raises(ValueError, match="k must be"):
        add_k_probabilities(counts, -1)
    with pytest.raises(ValueError, match="negative"):
        add_k_probabilities(-counts, 1)


def test_interpolation_is_a_weighted_mixture_and_checks_its_weights():
    low, high = np.array([[0.5, 0.5]]), np.array([[1.0, 0.0]])
    assert interpolate([low, high], [0.2, 0.8]) == pytest.approx(np.array([[0.9, 0.1]]))
    with pytest.raises(ValueError, match="sum to 1"):
        interpolate([low, high], [0.5, 0.6])
    with pytest.raises(ValueError, match="one weight per"):
        interpolate([low, high], [1.0])


def test_perplexity_is_exp_of_the_average_nll():
    assert perplexity([0.5, 0.5]) == pytest.approx(2.0)
    assert perplexity([0.25, 1.0]) == pytest.approx(2.0)  # geometric mean 1/2
    assert perplexity([0.5, 0.0]) == np.inf
    with pytest.raises(ValueError, match="at least one"):
        perplexity([])
    with pytest.raises(ValueError, match="between 0 and 1"):
        perplexity([1.5])


def test_bigram_perplexity_equals_exp_of_chapter_one_nll():
    rng = np.random.default_rng(0)
    sequences = random_sequences(rng, count=50)
    model = NGramModel(sequences, 2, 6)
    nll = average_nll(sequences, bigram_probabilities(count_bigrams(sequences, 6)))
    assert perplexity(model.probabilities_of_next(sequences)) == pytest.approx(np.exp(nll))


def test_robot_learns_gets_zero_then_smoothing_treats_robot_like_any_unseen_word(seed):
    vocab, sequences = seed
    model = NGramModel(sequences, 2, len(vocab), vocab.stoi[BOS])

    def prob(sentence, k):
        ids = vocab.encode_with_boundaries(sentence.split())
        return np.prod(model.probabilities_of_next([ids], k=k))

    assert prob("datawhale agent learns", 0) == pytest.approx(0.5)
    assert prob("datawhale robot learns", 0) == 0.0
    assert 0 < prob("datawhale robot learns", 1) == pytest.approx(prob("datawhale robot works", 1))


def test_interpolated_model_has_no_zeros_and_fitted_weights_beat_uniform_weights():
    rng = np.random.default_rng(3)
    train, val = random_sequences(rng, 200), random_sequences(rng, 50)
    model = NGramModel(train, 3, 6)
    probs = model.probabilities_by_order(val)
    weights = fit_interpolation_weights(probs)
    assert weights.sum() == pytest.approx(1) and (weights >= 0).all()
    fitted = perplexity(model.interpolated_probabilities_of_next(val, weights))
    assert np.isfinite(fitted)
    assert fitted <= perplexity(model.interpolated_probabilities_of_next(val, [1 / 3] * 3))


def test_sparsity_grows_with_the_order():
    rng = np.random.default_rng(4)
    train, val = random_sequences(rng, 100), random_sequences(rng, 100)
    fractions = [unseen_ngram_fraction(train, val, n, 6) for n in range(1, 6)]
    assert fractions[0] == 0.0
    assert fractions == sorted(fractions) and fractions[-1] > 0.2


def test_split_is_disjoint_seeded_and_complete():
    items = list(range(100))
    train, val, test = split_documents(items, (0.8, 0.1, 0.1), seed=1)
    assert (len(train), len(val), len(test)) == (80, 10, 10)
    assert sorted(train + val + test) == items
    assert split_documents(items, seed=1) == (train, val, test)
    with pytest.raises(ValueError, match="sum to 1"):
        split_documents(items, (0.5, 0.2))
