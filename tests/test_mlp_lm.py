"""The MLP language model of chapter 3: pairs, forward pass, one step, perplexity, sampling."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mini_llm.corpus import load_corpus
from mini_llm.engine.train import TrainConfig, train
from mini_llm.evaluation import split_documents
from mini_llm.mlp_lm import (
    MLPLanguageModel,
    RandomPairBatches,
    context_target_pairs,
    evaluate_perplexity,
    sample,
    training_step,
)
from mini_llm.smoothing import ngram_counts
from mini_llm.vocab import BOS, EOS, Vocabulary


@pytest.fixture
def model():
    torch.manual_seed(0)
    return MLPLanguageModel(vocab_size=7, context_length=3, embedding_dim=4, hidden_dim=8)


def test_pairs_are_padded_windows_that_stay_inside_each_sequence():
    x, y = context_target_pairs([[0, 2, 3, 1], np.array([0, 4, 1])], 2)
    assert x.dtype == y.dtype == torch.long
    assert x.tolist() == [[0, 0], [0, 2], [2, 3], [0, 0], [0, 4]]
    assert y.tolist() == [2, 3, 1, 4, 1]


def test_pairs_are_the_ngrams_that_the_counting_model_counts():
    rng = np.random.default_rng(0)
    sequences = [
        np.concatenate([[0], rng.integers(2, 6, size=rng.integers(0, 7)), [1]]) for _ in range(30)
    ]
    x, y = context_target_pairs(sequences, 3)
    contexts, counts = ngram_counts(sequences, 4, 6)
    grams = {
        (*map(int, contexts[r]), int(w)): int(counts[r, w]) for r, w in zip(*np.nonzero(counts))
    }
    pairs: dict[tuple, int] = {}
    for context, target in zip(x.tolist(), y.tolist()):
        pairs[(*context, target)] = pairs.get((*context, target), 0) + 1
    assert pairs == grams


def test_pairs_refuse_a_context_of_zero_tokens():
    with pytest.raises(ValueError, match="context_length"):
        context_target_pairs([[0, 2, 1]], 0)


def test_forward_returns_logits_and_the_mean_cross_entropy(model):
    x, y = torch.tensor([[0, 1, 2], [3, 4, 5]]), torch.tensor([6, 0])
    logits, loss = model(x, y)
    assert logits.shape == (2, 7)
    by_hand = -torch.log_softmax(logits, dim=-1)[torch.arange(2), y].mean()
    assert loss.item() == pytest.approx(by_hand.item())
    assert model(x)[1] is None


def test_forward_is_the_formula_of_the_chapter(model):
    x = torch.tensor([[0, 1, 2]])
    concatenated = torch.cat([model.embedding.weight[t] for t in (0, 1, 2)])
    hidden = torch.tanh(model.hidden.weight @ concatenated + model.hidden.bias)
    expected = model.output.weight @ hidden + model.output.bias
    torch.testing.assert_close(model(x)[0][0], expected)


def test_forward_refuses_contexts_of_the_wrong_shape_or_type(model):
    for bad in (torch.tensor([[0, 1]]), torch.tensor([0, 1, 2]), torch.zeros(1, 3)):
        with pytest.raises(ValueError, match="x must be"):
            model(bad)


def test_training_step_returns_the_loss_before_the_step_and_lowers_it(model):
    x, y = torch.tensor([[0, 1, 2], [3, 4, 5]]), torch.tensor([6, 0])
    before = model(x, y)[1].item()
    returned = training_step(model, torch.optim.SGD(model.parameters(), lr=0.5), x, y)
    assert isinstance(returned, float) and returned == pytest.approx(before)
    assert model(x, y)[1].item() < before


def test_two_training_steps_equal_two_plain_gradient_steps(model):
    reference = MLPLanguageModel(7, 3, 4, 8)
    reference.load_state_dict(model.state_dict())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2)
    batches = [
        (torch.tensor([[0, 1, 2]]), torch.tensor([3])),
        (torch.tensor([[4, 5, 6]]), torch.tensor([0])),
    ]
    for x, y in batches:
        training_step(model, optimizer, x, y)
        reference.zero_grad()
        reference(x, y)[1].backward()
        with torch.no_grad():
            for p in reference.parameters():
                p -= 0.2 * p.grad
    for got, expected in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(got, expected)


def test_perplexity_of_a_uniform_model_is_the_vocabulary_size():
    uniform = MLPLanguageModel(28, 2, 3, 4)
    with torch.no_grad():
        for p in uniform.parameters():
            p.zero_()
    x, y = torch.randint(0, 28, (50, 2)), torch.randint(0, 28, (50,))
    assert evaluate_perplexity(uniform, x, y, batch_size=7) == pytest.approx(28.0)


def test_perplexity_does_not_depend_on_the_batch_size_and_keeps_the_mode(model):
    x, y = torch.randint(0, 7, (23, 3)), torch.randint(0, 7, (23,))
    exact = math.exp(F.cross_entropy(model(x)[0], y).item())
    model.train()
    for batch_size in (1, 5, 23, 100):
        assert evaluate_perplexity(model, x, y, batch_size) == pytest.approx(exact, rel=1e-6)
    assert model.training
    model.eval()
    evaluate_perplexity(model, x, y)
    assert not model.training
    with pytest.raises(ValueError, match="at least one"):
        evaluate_perplexity(model, x[:0], y[:0])
    with pytest.raises(ValueError, match="as many targets"):
        evaluate_perplexity(model, x, y[:3])


def test_random_batches_are_seeded_and_resume_from_their_state():
    x, y = torch.arange(100).reshape(50, 2), torch.arange(50)
    first, second = RandomPairBatches(x, y, 8, seed=3), RandomPairBatches(x, y, 8, seed=3)
    assert torch.equal(first()[0], second()[0])
    state = first.state_dict()
    expected = first()
    second.load_state_dict(state)
    got = second()
    assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])
    assert torch.equal(got[0][:, 0] // 2, got[1])  # rows of x and y stay paired
    with pytest.raises(ValueError, match="as many targets"):
        RandomPairBatches(x, y[:10], 8)


def test_samples_are_seeded_and_never_contain_the_boundary_tokens(model):
    draw = [sample(model, 0, 1, torch.Generator().manual_seed(5), max_length=12) for _ in range(2)]
    assert draw[0] == draw[1]
    many = [sample(model, 0, 1, torch.Generator().manual_seed(s), max_length=12) for s in range(20)]
    assert all(len(s) <= 12 and 1 not in s for s in many)
    model.train()
    sample(model, 0, 1, torch.Generator().manual_seed(0))
    assert model.training


def test_trains_with_the_course_training_loop_on_names():
    torch.manual_seed(0)
    names = load_corpus("names")
    vocab = Vocabulary.from_sequences(names)
    train_names, val_names, _ = split_documents(names, seed=0)
    x, y = context_target_pairs([vocab.encode_with_boundaries(n) for n in train_names], 3)
    x_val, y_val = context_target_pairs([vocab.encode_with_boundaries(n) for n in val_names], 3)
    model = MLPLanguageModel(len(vocab), 3, 8, 64)
    before = evaluate_perplexity(model, x_val, y_val)
    train(
        model,
        RandomPairBatches(x, y, 128),
        TrainConfig(
            max_iters=300, learning_rate=0.01, eval_interval=0, progress=False, device="cpu"
        ),
    )
    after = evaluate_perplexity(model, x_val, y_val)
    assert before > 20 and after < 11
    generator = torch.Generator().manual_seed(0)
    ids = sample(model, vocab.stoi[BOS], vocab.stoi[EOS], generator)
    assert all(vocab.itos[i] not in (BOS, EOS) for i in ids)
