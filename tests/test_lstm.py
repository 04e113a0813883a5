"""LSTM and GRU written out: equal to PyTorch's on the same weights; the memory task and model."""

import pytest
import torch

from mini_llm.engine.train import TrainConfig, train
from mini_llm.lstm import (
    SequenceClassifier,
    accuracy,
    first_token_task,
    gradient_reach,
    gru_step,
    lstm_forward,
    lstm_step,
)

B, T, D, H = 3, 6, 4, 5


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_lstm_step_equals_torch_lstm_cell():
    W_ih, W_hh, b = randn(4 * H, D, seed=1), randn(4 * H, H, seed=2), randn(4 * H, seed=3)
    cell = torch.nn.LSTMCell(D, H).double()
    with torch.no_grad():
        cell.weight_ih.copy_(W_ih)
        cell.weight_hh.copy_(W_hh)
        cell.bias_ih.copy_(b)
        cell.bias_hh.zero_()
    x, h, c = randn(B, D, seed=4), randn(B, H, seed=5), randn(B, H, seed=6)
    h_t, c_t = lstm_step(x, h, c, W_ih, W_hh, b)
    expected_h, expected_c = cell(x, (h, c))
    torch.testing.assert_close(h_t, expected_h)
    torch.testing.assert_close(c_t, expected_c)


def test_lstm_forward_equals_torch_lstm():
    W_ih, W_hh, b = randn(4 * H, D, seed=1), randn(4 * H, H, seed=2), randn(4 * H, seed=3)
    lstm = torch.nn.LSTM(D, H, batch_first=True).double()
    with torch.no_grad():
        lstm.weight_ih_l0.copy_(W_ih)
        lstm.weight_hh_l0.copy_(W_hh)
        lstm.bias_ih_l0.copy_(b)
        lstm.bias_hh_l0.zero_()
    xs, h0, c0 = randn(B, T, D, seed=7), randn(B, H, seed=8), randn(B, H, seed=9)
    hs, (h_T, c_T) = lstm_forward(xs, h0, c0, W_ih, W_hh, b)
    expected, (expected_h, expected_c) = lstm(xs, (h0[None], c0[None]))
    assert hs.shape == (B, T, H)
    torch.testing.assert_close(hs, expected)
    torch.testing.assert_close(h_T, expected_h[0])
    torch.testing.assert_close(c_T, expected_c[0])


def test_gru_step_equals_torch_gru_cell():
    W_ih, W_hh = randn(3 * H, D, seed=1), randn(3 * H, H, seed=2)
    b_ih, b_hh = randn(3 * H, seed=3), randn(3 * H, seed=4)
    cell = torch.nn.GRUCell(D, H).double()
    with torch.no_grad():
        for p, w in zip(cell.parameters(), (W_ih, W_hh, b_ih, b_hh), strict=True):
            p.copy_(w)
    x, h = randn(B, D, seed=5), randn(B, H, seed=6)
    torch.testing.assert_close(gru_step(x, h, W_ih, W_hh, b_ih, b_hh), cell(x, h))


def test_first_token_task_hides_the_class_at_the_start():
    generator = torch.Generator().manual_seed(0)
    x, y = first_token_task(200, 12, 4, generator)
    assert x.shape == (200, 12) and y.shape == (200,)
    assert torch.equal(x[:, 0], y) and (y < 4).all()
    assert ((x[:, 1:] >= 4) & (x[:, 1:] < 8)).all()
    assert len(set(y.tolist())) == 4
    again = first_token_task(200, 12, 4, torch.Generator().manual_seed(0))
    assert torch.equal(again[0], x)
    with pytest.raises(ValueError, match="n_classes"):
        first_token_task(3, 5, 1, generator)


@pytest.mark.parametrize("cell", ["rnn", "lstm", "gru"])
def test_classifier_shapes_and_gates_start_remembering(cell):
    torch.manual_seed(0)
    model = SequenceClassifier(cell, vocab_size=8, n_classes=4, hidden_dim=16)
    x, y = first_token_task(5, 7, 4, torch.Generator().manual_seed(1))
    logits, loss = model(x, y)
    assert logits.shape == (5, 4) and loss.ndim == 0
    assert model(x)[1] is None
    reach = gradient_reach(model, x, y)
    assert reach.shape == (7,) and (reach > 0).all()
    if cell != "rnn":  # the remembering gate's bias block got +2 on top of a small uniform
        assert (model.b_ih[16:32] > 1.5).all() and (model.b_ih[:16].abs() < 0.5).all()


def test_unknown_cell_is_an_error():
    with pytest.raises(ValueError, match="cell must be one of"):
        SequenceClassifier("transformer", 8, 4)


@pytest.mark.slow  # trains two networks to a target (make check leaves it out)
def test_a_gated_network_learns_a_memory_task_the_plain_rnn_cannot():
    """30 steps between the class and the answer: chance is 25 %."""
    results = {}
    for cell in ("rnn", "lstm"):
        torch.manual_seed(0)
        model = SequenceClassifier(cell, vocab_size=8, n_classes=4)
        generator = torch.Generator().manual_seed(0)
        train(
            model,
            lambda g=generator: first_token_task(64, 30, 4, g),
            TrainConfig(
                max_iters=800,
                learning_rate=5e-3,
                min_lr=5e-4,
                warmup_iters=20,
                weight_decay=0.0,
                progress=False,
                eval_interval=0,
                device="cpu",
            ),
        )
        test_x, test_y = first_token_task(1000, 30, 4, torch.Generator().manual_seed(99))
        results[cell] = accuracy(model, test_x, test_y)
    assert results["lstm"] > 0.95
    assert results["rnn"] < 0.5
