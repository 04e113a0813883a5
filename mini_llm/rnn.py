"""Chapter 5 -- Recurrent networks.

A recurrent neural network, written out: one step, the unrolled pass, and its backward pass.

A recurrent network reads a sequence one token at a time and keeps a hidden state
h_t, a vector that summarises everything read so far. Every step applies the *same* weights:

    h_t = tanh(x_t W_xhᵀ + h_{t−1} W_hhᵀ + b_h)

so the network has no window: in principle h_t depends on every earlier token. The weights use
the layout of ``torch.nn.RNNCell`` (``weight_ih`` is W_xh of shape (H, D), ``weight_hh`` is
W_hh of shape (H, H)), so the two can be compared on the same numbers.

Training unrolls the loop over the sequence and backpropagates through it ("backpropagation
through time", :func:`rnn_backward`): the gradient that reaches h_t from step T has been
multiplied by W_hh and by tanh's slope T − t times, which is why it vanishes or explodes.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def rnn_step(
    x_t: torch.Tensor,
    h_prev: torch.Tensor,
    W_xh: torch.Tensor,
    W_hh: torch.Tensor,
    b_h: torch.Tensor,
) -> torch.Tensor:
    """One step: the new hidden state (B, H) from the input x_t (B, D) and h_prev (B, H)."""
    return torch.tanh(x_t @ W_xh.T + h_prev @ W_hh.T + b_h)


def rnn_forward(
    xs: torch.Tensor, h0: torch.Tensor, W_xh: torch.Tensor, W_hh: torch.Tensor, b_h: torch.Tensor
) -> torch.Tensor:
    """Every hidden state (B, T, H) for inputs xs (B, T, D), starting from h0 (B, H).

    The input part x_t W_xhᵀ + b_h does not depend on the past, so it is computed for all T
    steps in one matrix multiply; only h_{t−1} W_hhᵀ has to wait for the previous step.
    """
    inputs = xs @ W_xh.T + b_h  # (B, T, H)
    h, states = h0, []
    for t in range(xs.size(1)):
        h = torch.tanh(inputs[:, t] + h @ W_hh.T)
        states.append(h)
    return torch.stack(states, dim=1)


@torch.no_grad()
def rnn_backward(
    xs: torch.Tensor,
    h0: torch.Tensor,
    W_xh: torch.Tensor,
    W_hh: torch.Tensor,
    b_h: torch.Tensor,
    grad_hs: torch.Tensor,
) -> dict[str, torch.Tensor]:
    """Backpropagation through time, by hand.

    ``grad_hs`` (B, T, H) is ∂L/∂h_t as seen from the layers above (the output head) at each
    step. Going backwards, the gradient of h_t is that plus what flows back from step t + 1::

        dh_t = grad_hs[t] + da_{t+1} W_hh       da_t = dh_t ⊙ (1 − h_t²)     (tanh' = 1 − tanh²)

    and each step adds its share to the weights' gradients. Returns the gradients of ``W_xh``,
    ``W_hh``, ``b_h`` and ``h0``, and ``hs``: the full gradient dh_t of every hidden state.
    """
    hs = rnn_forward(xs, h0, W_xh, W_hh, b_h)
    previous = torch.cat([h0[:, None], hs[:, :-1]], dim=1)  # h_{t−1} for every t
    grads = {
        name: torch.zeros_like(p) for name, p in (("W_xh", W_xh), ("W_hh", W_hh), ("b_h", b_h))
    }
    dhs = torch.zeros_like(hs)
    from_later = torch.zeros_like(h0)  # gradient reaching h_t through step t + 1
    for t in reversed(range(xs.size(1))):
        dhs[:, t] = grad_hs[:, t] + from_later
        da = dhs[:, t] * (1 - hs[:, t] ** 2)  # through tanh
        grads["W_xh"] += da.T @ xs[:, t]
        grads["W_hh"] += da.T @ previous[:, t]
        grads["b_h"] += da.sum(dim=0)
        from_later = da @ W_hh
    grads["h0"] = from_later
    grads["hs"] = dhs
    return grads


def clip_by_global_norm(
    grads: list[torch.Tensor], max_norm: float
) -> tuple[list[torch.Tensor], float]:
    """Scale all gradients together so that their joint norm is at most ``max_norm``.

    Returns the (possibly) scaled gradients and the norm before clipping. The direction of the
    update is kept; only its length is capped, so one exploding step cannot throw the weights
    far away. (``torch.nn.utils.clip_grad_norm_`` does the same in place.)
    """
    if max_norm <= 0:
        raise ValueError(f"max_norm must be positive, got {max_norm}")
    norm = math.sqrt(sum(float((g.double() ** 2).sum()) for g in grads))
    scale = min(1.0, max_norm / (norm + 1e-6))
    return [g * scale for g in grads], norm


class RNNLanguageModel(nn.Module):
    """Embedding -> a tanh RNN over the sequence -> a linear layer to next-token logits.

    ``forward(idx, targets=None, h0=None)`` returns ``(logits, loss)`` like every model of the
    course: position t predicts token t + 1 from everything up to t.
    """

    def __init__(self, vocab_size: int, embedding_dim: int = 32, hidden_dim: int = 128):
        super().__init__()
        self.hidden_dim = hidden_dim
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        bound = 1 / math.sqrt(hidden_dim)  # torch.nn.RNN's initialisation
        self.W_xh = nn.Parameter(torch.empty(hidden_dim, embedding_dim).uniform_(-bound, bound))
        self.W_hh = nn.Parameter(torch.empty(hidden_dim, hidden_dim).uniform_(-bound, bound))
        self.b_h = nn.Parameter(torch.zeros(hidden_dim))
        self.head = nn.Linear(hidden_dim, vocab_size)

    def initial_state(self, batch_size: int) -> torch.Tensor:
        """Zeros, on the weights' device and in their dtype (so ``model.double()`` works)."""
        return torch.zeros(
            batch_size, self.hidden_dim, device=self.W_hh.device, dtype=self.W_hh.dtype
        )

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None, h0: torch.Tensor | None = None
    ):
        h0 = self.initial_state(idx.size(0)) if h0 is None else h0
        hs = rnn_forward(self.embedding(idx), h0, self.W_xh, self.W_hh, self.b_h)
        logits = self.head(hs)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss

    @torch.no_grad()
    def generate(
        self,
        prompt: list[int],
        max_new_tokens: int,
        generator: torch.Generator,
        temperature: float = 1.0,
    ) -> list[int]:
        """Continue ``prompt`` (token ids) by sampling: the hidden state carries the whole past,
        so each new token costs one step, with no window to crop."""
        if not prompt:
            raise ValueError("the prompt needs at least one token")
        h = self.initial_state(1)
        tokens = list(prompt)
        for token in tokens[:-1]:  # read the prompt
            h = self._step(token, h)
        for _ in range(max_new_tokens):
            h = self._step(tokens[-1], h)
            probs = F.softmax(self.head(h)[0] / temperature, dim=-1)
            tokens.append(int(torch.multinomial(probs, 1, generator=generator)))
        return tokens

    def _step(self, token: int, h: torch.Tensor) -> torch.Tensor:
        x = self.embedding(torch.tensor([token], device=h.device))
        return rnn_step(x, h, self.W_xh, self.W_hh, self.b_h)


def hidden_gradient_norms(
    model: RNNLanguageModel, idx: torch.Tensor, targets: torch.Tensor
) -> torch.Tensor:
    """‖∂L/∂h_t‖ for every step t (averaged over the batch), when only the LAST prediction is
    scored: how much of the final loss's gradient still reaches each earlier step."""
    h0 = model.initial_state(idx.size(0))
    xs = model.embedding(idx).detach()
    hs = rnn_forward(xs, h0, model.W_xh, model.W_hh, model.b_h).detach().requires_grad_(True)
    loss = F.cross_entropy(model.head(hs[:, -1]), targets[:, -1])
    (grad_last,) = torch.autograd.grad(loss, hs)
    grads = rnn_backward(
        xs, h0, model.W_xh.detach(), model.W_hh.detach(), model.b_h.detach(), grad_last
    )
    return grads["hs"].norm(dim=-1).mean(dim=0)
