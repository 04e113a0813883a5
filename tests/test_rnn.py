"""The hand-written RNN: equal to PyTorch's, its BPTT equal to autograd, and a working model."""

import math

import pytest
import torch
import torch.nn.functional as F

from mini_llm.engine.train import TrainConfig, train
from mini_llm.rnn import (
    RNNLanguageModel,
    clip_by_global_norm,
    hidden_gradient_norms,
    rnn_backward,
    rnn_forward,
    rnn_step,
)

B, T, D, H = 3, 7, 4, 5


def weights(seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=g, dtype=dtype) * 0.5 for shape in ((H, D), (H, H), (H,))]


def test_one_step_equals_torch_rnn_cell():
    W_xh, W_hh, b_h = weights()
    cell = torch.nn.RNNCell(D, H).double()
    with torch.no_grad():
        cell.weight_ih.copy_(W_xh)
        cell.weight_hh.copy_(W_hh)
        cell.bias_ih.copy_(b_h)
        cell.bias_hh.zero_()
    x, h = torch.randn(B, D, dtype=torch.float64), torch.randn(B, H, dtype=torch.float64)
    torch.testing.assert_close(rnn_step(x, h, W_xh, W_hh, b_h), cell(x, h))


def test_unrolled_pass_equals_torch_rnn():
    W_xh, W_hh, b_h = weights()
    rnn = torch.nn.RNN(D, H, batch_first=True).double()
    with torch.no_grad():
        rnn.weight_ih_l0.copy_(W_xh)
        rnn.weight_hh_l0.copy_(W_hh)
        rnn.bias_ih_l0.copy_(b_h)
        rnn.bias_hh_l0.zero_()
    xs, h0 = torch.randn(B, T, D, dtype=torch.float64), torch.randn(B, H, dtype=torch.float64)
    expected, last = rnn(xs, h0[None])
    hs = rnn_forward(xs, h0, W_xh, W_hh, b_h)
    assert hs.shape == (B, T, H)
    torch.testing.assert_close(hs, expected)
    torch.testing.assert_close(hs[:, -1], last[0])


def test_backprop_through_time_by_hand_equals_autograd():
    params = [w.requires_grad_(True) for w in weights(1)]
    xs = torch.randn(B, T, D, dtype=torch.float64)
    h0 = torch.randn(B, H, dtype=torch.float64, requires_grad=True)
    upstream = torch.randn(B, T, H, dtype=torch.float64)
    hs = rnn_forward(xs, h0, *params)
    hs.retain_grad()
    (hs * upstream).sum().backward()
    grads = rnn_backward(xs, h0.detach(), *(p.detach() for p in params), upstream)
    for name, p in zip(("W_xh", "W_hh", "b_h"), params, strict=True):
        torch.testing.assert_close(grads[name], p.grad, msg=name)
    torch.testing.assert_close(grads["h0"], h0.grad)
    # the full gradient of each hidden state: its own upstream plus what comes from later steps
    torch.testing.assert_close(grads["hs"][:, -1], upstream[:, -1])
    assert not torch.allclose(grads["hs"][:, 0], upstream[:, 0])


def test_clipping_caps_the_joint_norm_and_keeps_the_direction():
    grads = [torch.tensor([3.0, 0.0]), torch.tensor([[0.0, 4.0]])]  # joint norm 5
    clipped, norm = clip_by_global_norm(grads, 1.0)
    assert norm == pytest.approx(5.0)
    joint = math.sqrt(sum(float((g**2).sum()) for g in clipped))
    assert joint == pytest.approx(1.0, rel=1e-5)
    torch.testing.assert_close(clipped[0], torch.tensor([0.6, 0.0]))
    small, norm = clip_by_global_norm(grads, 10.0)
    assert norm == pytest.approx(5.0)
    assert all(torch.equal(a, b) for a, b in zip(small, grads, strict=True))
    with pytest.raises(ValueError, match="max_norm"):
        clip_by_global_norm(grads, 0.0)


def test_model_shapes_initial_loss_and_causality():
    torch.manual_seed(0)
    model = RNNLanguageModel(vocab_size=11, embedding_dim=6, hidden_dim=16)
    idx = torch.randint(11, (2, 9))
    logits, loss = model(idx, torch.randint(11, (2, 9)))
    assert logits.shape == (2, 9, 11)
    assert loss.item() == pytest.approx(math.log(11), abs=0.3)
    assert model(idx)[1] is None
    changed = idx.clone()
    changed[:, 5] = (changed[:, 5] + 1) % 11
    new = model(changed)[0]
    torch.testing.assert_close(new[:, :5], logits[:, :5])  # the past does not see the future
    assert not torch.allclose(new[:, 8], logits[:, 8])  # and there is no window: it reaches on


def test_training_learns_a_repeating_sequence_and_generation_continues_it():
    pattern = torch.tensor([0, 1, 2, 3, 4, 5] * 20)

    def batches():
        start = torch.randint(0, 6, (8,))
        rows = torch.stack([pattern[s : s + 13] for s in start.tolist()])
        return rows[:, :-1], rows[:, 1:]

    torch.manual_seed(0)
    model = RNNLanguageModel(vocab_size=6, embedding_dim=4, hidden_dim=16)
    result = train(
        model,
        batches,
        TrainConfig(
            max_iters=150,
            learning_rate=0.02,
            warmup_iters=5,
            progress=False,
            eval_interval=0,
            device="cpu",
        ),
    )
    assert result.train_losses[-1][1] < 0.1
    out = model.generate([2, 3], 8, torch.Generator().manual_seed(0), temperature=0.5)
    assert out == [2, 3, 4, 5, 0, 1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="prompt"):
        model.generate([], 3, torch.Generator())


def test_gradient_norms_through_time_vanish_without_recurrence_and_match_autograd():
    torch.manual_seed(0)
    model = RNNLanguageModel(vocab_size=7, embedding_dim=4, hidden_dim=8)
    idx, targets = torch.randint(7, (4, 10)), torch.randint(7, (4, 10))
    norms = hidden_gradient_norms(model, idx, targets)
    assert norms.shape == (10,) and norms[-1] > 0
    # the same numbers from autograd: restart the recurrence at step t from a leaf h_t
    xs = model.embedding(idx).detach()
    hs = rnn_forward(xs, model.initial_state(4), model.W_xh, model.W_hh, model.b_h).detach()
    for t in (0, 4, 9):
        h_t = hs[:, t].clone().requires_grad_(True)
        last = (
            h_t
            if t == 9
            else rnn_forward(xs[:, t + 1 :], h_t, model.W_xh, model.W_hh, model.b_h)[:, -1]
        )
        F.cross_entropy(model.head(last), targets[:, -1]).backward()
        assert norms[t].item() == pytest.approx(h_t.grad.norm(dim=-1).mean().item(), rel=1e-5)
    with torch.no_grad():
        model.W_hh.zero_()  # no recurrence: nothing flows back from the last step
    assert (hidden_gradient_norms(model, idx, targets)[:-1] == 0).all()


def test_a_model_converted_to_float64_runs_in_float64():
    """The initial state follows the weights' dtype: chapter 5 measures gradients in float64."""
    model = RNNLanguageModel(10, embedding_dim=4, hidden_dim=6).double()
    idx = torch.randint(10, (2, 5))
    logits, loss = model(idx, idx)
    assert logits.dtype == loss.dtype == torch.float64
    assert hidden_gradient_norms(model, idx, idx).dtype == torch.float64
