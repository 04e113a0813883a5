"""Skip-gram with negative sampling: pairs, noise, loss, model, batches, neighbours, analogies."""

import math
from collections import Counter

import numpy as np
import pytest
import torch

from mini_llm.embeddings import (
    SkipGram,
    SkipGramBatches,
    analogy,
    frequent_words,
    nearest_neighbours,
    negative_sampling_loss,
    noise_distribution,
    skipgram_pairs,
    subsample_frequent,
)
from mini_llm.engine.train import TrainConfig, train


def pair_set(centers, contexts):
    return Counter(zip(centers.tolist(), contexts.tolist(), strict=True))


def test_frequent_words_keeps_words_seen_min_count_times_most_frequent_first():
    documents = ["the cat and the dog", "The dog, the end."]
    vocab, counts, ids = frequent_words(documents, min_count=2)
    assert vocab.itos == ["the", "dog"]
    assert counts.tolist() == [4, 2]
    assert [vocab.decode(d) for d in ids] == [["the", "the", "dog"], ["the", "dog", "the"]]
    with pytest.raises(ValueError, match="min_count"):
        frequent_words(documents, min_count=0)
    with pytest.raises(ValueError, match="lower min_count"):
        frequent_words(documents, min_count=10)


def test_subsampling_thins_frequent_words_at_the_expected_rate():
    counts = np.array([900, 100])  # word 0 makes up 90 % of the text
    ids = np.array([0] * 9000 + [1] * 1000)
    kept = subsample_frequent(ids, counts, np.random.default_rng(0), threshold=0.1)
    # keep probability min(1, sqrt(t / f)): sqrt(0.1 / 0.9) = 1/3 for word 0, 1 for word 1
    assert (kept == 1).sum() == 1000
    assert (kept == 0).sum() == pytest.approx(3000, rel=0.05)
    assert subsample_frequent(ids, counts, np.random.default_rng(0), threshold=1.0).size == 10000


def test_skipgram_pairs_are_every_pair_within_the_window_both_ways():
    centers, contexts = skipgram_pairs([10, 11, 12, 13], window=2)
    assert centers.dtype == contexts.dtype == np.int64
    expected = Counter(
        [
            (10, 11),
            (11, 10),
            (11, 12),
            (12, 11),
            (12, 13),
            (13, 12),
            (10, 12),
            (12, 10),
            (11, 13),
            (13, 11),
        ]
    )
    assert pair_set(centers, contexts) == expected


@pytest.mark.parametrize(("n", "window"), [(0, 1), (1, 3), (2, 5), (7, 1), (7, 3), (30, 4)])
def test_number_of_pairs_follows_the_formula(n, window):
    centers, contexts = skipgram_pairs(np.arange(n), window)
    assert len(centers) == len(contexts) == 2 * sum(max(n - d, 0) for d in range(1, window + 1))
    assert (np.abs(centers - contexts) <= window).all() and (centers != contexts).all()


def test_skipgram_window_must_be_positive():
    with pytest.raises(ValueError, match="window"):
        skipgram_pairs([1, 2, 3], 0)


def test_noise_distribution_is_counts_to_the_power_normalised():
    counts = np.array([16, 1, 0, 81])
    probs = noise_distribution(counts, power=0.75)
    expected = np.array([8, 1, 0, 27]) / 36
    np.testing.assert_allclose(probs, expected)
    np.testing.assert_allclose(noise_distribution(counts, power=0.0), [1 / 3, 1 / 3, 0, 1 / 3])
    np.testing.assert_allclose(noise_distribution(counts, power=1.0), counts / counts.sum())
    for bad in ([], [0, 0], [3, -1], [[1, 2]]):
        with pytest.raises(ValueError, match="counts"):
            noise_distribution(bad)


def test_negative_sampling_loss_matches_the_formula_and_stays_finite():
    scores = torch.tensor([[2.0, -1.0, 0.5], [-0.3, 0.2, -4.0]])
    sigmoid = torch.sigmoid
    rows = [-(math.log(sigmoid(r[0])) + sum(math.log(sigmoid(-s)) for s in r[1:])) for r in scores]
    assert negative_sampling_loss(scores).item() == pytest.approx(sum(rows) / 2, rel=1e-6)
    extreme = torch.tensor([[-200.0, 200.0]])  # a naive log(sigmoid(x)) gives inf here
    assert negative_sampling_loss(extreme).item() == pytest.approx(400.0, rel=1e-6)


def test_untrained_model_scores_zero_so_its_loss_is_known():
    torch.manual_seed(0)
    model = SkipGram(vocab_size=20, dim=8)
    scores, loss = model(torch.tensor([1, 2, 3]), torch.randint(20, (3, 6)))
    assert scores.shape == (3, 6)
    assert loss.item() == pytest.approx(6 * math.log(2))  # context vectors start at zero
    assert model.vectors().shape == (20, 8) and not model.vectors().requires_grad


def test_batches_pair_each_center_with_its_context_then_noise_and_resume_exactly():
    centers, contexts = skipgram_pairs(np.arange(50), 2)
    noise = noise_distribution(np.r_[np.zeros(40), np.ones(10)])  # noise only from ids 40..49
    batches = SkipGramBatches(centers, contexts, noise, batch_size=64, negatives=3, seed=1)
    x, candidates = batches()
    assert x.shape == (64,) and candidates.shape == (64, 4) and x.dtype == torch.long
    real = set(zip(centers.tolist(), contexts.tolist(), strict=True))
    assert all((c, o) in real for c, o in zip(x.tolist(), candidates[:, 0].tolist(), strict=True))
    assert (candidates[:, 1:] >= 40).all()
    state = batches.state_dict()
    after = batches()
    batches.load_state_dict(state)
    assert all(torch.equal(a, b) for a, b in zip(after, batches(), strict=True))
    with pytest.raises(ValueError, match="non-empty"):
        SkipGramBatches(centers[:0], contexts[:0], noise)


def test_training_puts_words_that_share_contexts_close_together():
    """Two 'topics': words 0-4 only ever appear among each other, words 5-9 likewise."""
    rng = np.random.default_rng(0)
    documents = [rng.integers(0, 5, 40) if i % 2 else rng.integers(5, 10, 40) for i in range(200)]
    pairs = [skipgram_pairs(d, 2) for d in documents]
    centers = np.concatenate([p[0] for p in pairs])
    contexts = np.concatenate([p[1] for p in pairs])
    torch.manual_seed(0)
    model = SkipGram(vocab_size=10, dim=8)
    batches = SkipGramBatches(centers, contexts, noise_distribution(np.ones(10)), 256, 4, seed=0)
    result = train(
        model,
        batches,
        TrainConfig(
            max_iters=300,
            learning_rate=0.05,
            warmup_iters=10,
            weight_decay=0.0,
            progress=False,
            eval_interval=0,
            device="cpu",
        ),
    )
    assert result.train_losses[-1][1] < result.train_losses[0][1] - 0.5
    vectors = model.vectors()
    for word in range(10):
        topic = set(range(5)) if word < 5 else set(range(5, 10))
        assert set(nearest_neighbours(vectors, word, k=4)) == topic - {word}


def test_nearest_neighbours_rank_by_cosine_not_length():
    vectors = torch.tensor([[1.0, 0.0], [10.0, 10.0], [0.9, 0.1], [-1.0, 0.0], [0.0, 1.0]])
    # By dot product the long vector 1 would come first; by angle 2 is closest to 0.
    assert nearest_neighbours(vectors, 0, k=4) == [2, 1, 4, 3]
    assert nearest_neighbours(vectors.numpy(), 0, k=1) == [2]  # NumPy arrays work too
    with pytest.raises(ValueError, match="outside"):
        nearest_neighbours(vectors, 5)


def test_analogy_completes_a_parallelogram_and_skips_the_question_words():
    # man, king, woman, queen, and a distractor close to king
    vectors = torch.tensor(
        [[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 1.0], [1.0, 1.1, 0.0]]
    )
    man, king, woman, queen = 0, 1, 2, 3
    assert analogy(vectors, man, king, woman) == [queen]
    assert analogy(vectors, man, king, woman, k=5)[:1] == [queen]
    assert not {man, king, woman} & set(analogy(vectors, man, king, woman, k=2))
    with pytest.raises(ValueError, match="outside"):
        analogy(vectors, man, king, 9)


def test_excluded_words_stay_out_even_when_k_asks_for_every_word():
    table = torch.eye(3)
    assert nearest_neighbours(table, 0, k=10) == [1, 2]  # ties (cosine 0) go to the lower id
    assert analogy(torch.eye(4), 0, 1, 2, k=10) == [3]
