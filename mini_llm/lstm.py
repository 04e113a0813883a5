"""Chapter 6 -- LSTM and GRU.

Gated recurrent networks, written out: the LSTM and the GRU, and a task that needs memory.

A plain RNN (``mini_llm.rnn``) rewrites its whole state at every step, through a squashing
tanh, so what it read long ago fades and the gradients that should reach it vanish. The LSTM
(Hochreiter & Schmidhuber, 1997) keeps a separate **cell state** c_t that is changed only by
addition, under the control of **gates**, numbers between 0 and 1 computed from the input and
the previous hidden state:

    i, f, g, o = σ(·), σ(·), tanh(·), σ(·)   of  x_t W_ihᵀ + h_{t−1} W_hhᵀ + b   (4 blocks of H)
    c_t = f ⊙ c_{t−1} + i ⊙ g          forget some of the old memory, write some new
    h_t = o ⊙ tanh(c_t)                 show part of the memory to the rest of the network

With f near 1 the memory and its gradient pass through a step almost unchanged. The GRU (Cho et
al., 2014) does the same with two gates and no separate cell. Weights and gate order follow
``torch.nn.LSTMCell`` / ``torch.nn.GRUCell``, so the two can be compared on the same numbers.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from mini_llm.rnn import rnn_forward


def lstm_step(
    x_t: torch.Tensor,
    h_prev: torch.Tensor,
    c_prev: torch.Tensor,
    W_ih: torch.Tensor,
    W_hh: torch.Tensor,
    b: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One LSTM step: ``(h_t, c_t)``, each (B, H), from x_t (B, D) and the previous (h, c).

    W_ih is (4H, D), W_hh is (4H, H) and b is (4H,), stacked in the gate order i, f, g, o.
    """
    i, f, g, o = (x_t @ W_ih.T + h_prev @ W_hh.T + b).chunk(4, dim=-1)
    c_t = torch.sigmoid(f) * c_prev + torch.sigmoid(i) * torch.tanh(g)
    h_t = torch.sigmoid(o) * torch.tanh(c_t)
    return h_t, c_t


def lstm_forward(
    xs: torch.Tensor,
    h0: torch.Tensor,
    c0: torch.Tensor,
    W_ih: torch.Tensor,
    W_hh: torch.Tensor,
    b: torch.Tensor,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Every hidden state (B, T, H) for inputs xs (B, T, D), and the final ``(h_T, c_T)``."""
    h, c, states = h0, c0, []
    for t in range(xs.size(1)):
        h, c = lstm_step(xs[:, t], h, c, W_ih, W_hh, b)
        states.append(h)
    return torch.stack(states, dim=1), (h, c)


def gru_step(
    x_t: torch.Tensor,
    h_prev: torch.Tensor,
    W_ih: torch.Tensor,
    W_hh: torch.Tensor,
    b_ih: torch.Tensor,
    b_hh: torch.Tensor,
) -> torch.Tensor:
    """One GRU step: the new hidden state (B, H). Gate order r, z, n (as ``torch.nn.GRUCell``).

        r = σ(·)  how much of the past the candidate may read;  z = σ(·)  how much to keep
        n = tanh(x W_inᵀ + b_in + r ⊙ (h W_hnᵀ + b_hn))            the candidate state
        h_t = (1 − z) ⊙ n + z ⊙ h_{t−1}

    The two biases are separate because the reset gate multiplies the hidden part only.
    """
    x_r, x_z, x_n = (x_t @ W_ih.T + b_ih).chunk(3, dim=-1)
    h_r, h_z, h_n = (h_prev @ W_hh.T + b_hh).chunk(3, dim=-1)
    r = torch.sigmoid(x_r + h_r)
    z = torch.sigmoid(x_z + h_z)
    n = torch.tanh(x_n + r * h_n)
    return (1 - z) * n + z * h_prev


def first_token_task(
    batch_size: int, length: int, n_classes: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """A memory test: remember the first token of a sequence until its end.

    Each sequence starts with a "class" token 0 .. n_classes − 1; the other ``length − 1``
    tokens are random distractors n_classes .. 2·n_classes − 1. The target is the class, to be
    named after the last token. Chance is 1 / n_classes; the gap to remember is length − 1 steps.
    """
    if length < 1 or n_classes < 2:
        raise ValueError("need length >= 1 and n_classes >= 2")
    classes = torch.randint(n_classes, (batch_size,), generator=generator)
    distractors = torch.randint(
        n_classes, 2 * n_classes, (batch_size, length - 1), generator=generator
    )
    return torch.cat([classes[:, None], distractors], dim=1), classes


class SequenceClassifier(nn.Module):
    """Embedding -> a recurrent layer (``"rnn"``, ``"lstm"`` or ``"gru"``) -> a class from the
    last hidden state. ``forward(x, y)`` returns ``(logits, loss)`` for the course's loop.

    The gated cells start out remembering: ``remember_bias`` is added to the bias of the LSTM's
    forget gate and of the GRU's update gate, so that σ(bias) ≈ 0.88 of the memory is kept per
    step before any training (Jozefowicz et al., 2015, found that adding 1 to the forget gate's
    bias closed the gap between the LSTM and the GRU).
    """

    def __init__(
        self,
        cell: str,
        vocab_size: int,
        n_classes: int,
        embedding_dim: int = 16,
        hidden_dim: int = 64,
        remember_bias: float = 2.0,
    ):
        super().__init__()
        gates = {"rnn": 1, "lstm": 4, "gru": 3}
        if cell not in gates:
            raise ValueError(f"cell must be one of {sorted(gates)}, got {cell!r}")
        self.cell, self.hidden_dim = cell, hidden_dim
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        bound = 1 / math.sqrt(hidden_dim)  # PyTorch's initialisation for all three
        size = gates[cell] * hidden_dim
        self.W_ih = nn.Parameter(torch.empty(size, embedding_dim).uniform_(-bound, bound))
        self.W_hh = nn.Parameter(torch.empty(size, hidden_dim).uniform_(-bound, bound))
        self.b_ih = nn.Parameter(torch.empty(size).uniform_(-bound, bound))
        self.b_hh = nn.Parameter(torch.empty(size).uniform_(-bound, bound))
        if cell in ("lstm", "gru"):  # the second block: f of (i, f, g, o), z of (r, z, n)
            with torch.no_grad():
                self.b_ih[hidden_dim : 2 * hidden_dim] += remember_bias
        self.head = nn.Linear(hidden_dim, n_classes)

    def hidden_states(self, xs: torch.Tensor) -> torch.Tensor:
        """The recurrent layer's hidden state at every step, (B, T, H), for embedded inputs."""
        h0 = xs.new_zeros(xs.size(0), self.hidden_dim)
        if self.cell == "rnn":
            return rnn_forward(xs, h0, self.W_ih, self.W_hh, self.b_ih + self.b_hh)
        if self.cell == "lstm":
            return lstm_forward(xs, h0, h0, self.W_ih, self.W_hh, self.b_ih + self.b_hh)[0]
        h, states = h0, []
        for t in range(xs.size(1)):
            h = gru_step(xs[:, t], h, self.W_ih, self.W_hh, self.b_ih, self.b_hh)
            states.append(h)
        return torch.stack(states, dim=1)

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None):
        logits = self.head(self.hidden_states(self.embedding(x))[:, -1])
        loss = None if y is None else F.cross_entropy(logits, y)
        return logits, loss


def gradient_reach(model: SequenceClassifier, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """‖∂L/∂x_t‖ for every step t (mean over the batch): how strongly the final loss's gradient
    reaches the embedded input of each step. For the first-token task, step 0 is what counts."""
    xs = model.embedding(x).detach().requires_grad_(True)
    loss = F.cross_entropy(model.head(model.hidden_states(xs)[:, -1]), y)
    (grad,) = torch.autograd.grad(loss, xs)
    return grad.norm(dim=-1).mean(dim=0)


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Share of sequences whose class the model names correctly."""
    return (model(x)[0].argmax(dim=-1) == y).float().mean().item()


class GRULanguageModel(nn.Module):
    """Embedding -> a GRU over the sequence -> next-token logits, with ``forward(idx, targets)``
    returning ``(logits, loss)`` like :class:`mini_llm.rnn.RNNLanguageModel`.

    It runs ``torch.nn.GRU``, the cell of :func:`gru_step` in one fused kernel, because chapter
    11 trains it for thousands of steps to compare it with the GPT."""

    def __init__(self, vocab_size: int, embedding_dim: int = 64, hidden_dim: int = 256):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        self.gru = nn.GRU(embedding_dim, hidden_dim, batch_first=True)
        self.head = nn.Linear(hidden_dim, vocab_size)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        logits = self.head(self.gru(self.embedding(idx))[0])
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss
