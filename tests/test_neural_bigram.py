"""Chapter 1's bigram model as one layer of weights: one-hot rows pick rows of the table,
and gradient descent on the mean negative log-likelihood reaches the counted probabilities."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from mini_llm.neural_bigram import (
    NeuralBigram,
    bigram_training_step,
    one_hot,
    train_neural_bigram,
)
from mini_llm.ngram import average_nll, bigram_probabilities, count_bigrams


def test_one_hot_rows_times_a_table_are_its_rows():
    ids = torch.tensor([[2, 0], [1, 2]])
    rows = one_hot(ids, 3)
    assert rows.shape == (2, 2, 3) and rows.dtype == torch.float32
    assert torch.equal(rows.sum(-1), torch.ones(2, 2))
    table = torch.arange(9.0).reshape(3, 3)
    assert torch.equal(rows @ table, table[ids])
    assert one_hot(torch.tensor([], dtype=torch.int64), 4).shape == (0, 4)


@pytest.mark.parametrize(
    ("ids", "size", "error"),
    [
        (torch.tensor([0, 3]), 3, ValueError),
        (torch.tensor([-1]), 3, ValueError),
        (torch.tensor([0]), 0, ValueError),
        (torch.tensor([0.0]), 3, TypeError),
    ],
)
def test_one_hot_refuses_what_has_no_row(ids, size, error):
    with pytest.raises(error):
        one_hot(ids, size)


def test_a_new_model_is_the_uniform_model():
    model = NeuralBigram(5)
    logits = model(torch.tensor([0, 4, 2]))
    assert logits.shape == (3, 5)
    loss = torch.nn.functional.cross_entropy(logits, torch.tensor([1, 1, 3]))
    assert loss.item() == pytest.approx(math.log(5))


def test_a_step_returns_the_loss_before_it_and_clears_old_gradients():
    model = NeuralBigram(4)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    inputs, targets = torch.tensor([0, 1, 1, 2]), torch.tensor([1, 2, 2, 3])
    first = bigram_training_step(model, optimizer, inputs, targets)
    assert isinstance(first, float) and first == pytest.approx(math.log(4))
    model.logits_table.weight.grad = None  # the first step's gradient is still there
    expected = torch.nn.functional.cross_entropy(model(inputs), targets)
    expected.backward()
    grad = model.logits_table.weight.grad.clone()
    model.logits_table.weight.grad = torch.full_like(grad, 100.0)  # a stale gradient
    weight = model.logits_table.weight.detach().clone()
    second = bigram_training_step(model, optimizer, inputs, targets)
    assert second == pytest.approx(expected.item())
    assert torch.allclose(model.logits_table.weight.detach(), weight - grad)  # not 2 * grad


def test_gradient_descent_reaches_the_counting_score():
    rng = np.random.default_rng(0)
    sequences = [rng.integers(0, 6, size=30) for _ in range(40)]
    counted = average_nll(sequences, bigram_probabilities(count_bigrams(sequences, 6)))
    pairs = torch.from_numpy(np.concatenate([np.stack([s[:-1], s[1:]], 1) for s in sequences]))
    losses = train_neural_bigram(NeuralBigram(6), pairs[:, 0], pairs[:, 1], 5.0, 300)
    assert losses[0] == pytest.approx(math.log(6))
    assert counted - 1e-5 < losses[-1] < counted + 0.01  # float32 may dip a hair below
    assert all(b <= a + 1e-6 for a, b in itertools.pairwise(losses))
