"""Tools -- Tensors, gradients and a training loop.

Chapter 1's bigram model as a neural network: one layer of weights, trained by gradient
descent until it scores what counting scored.

The layer is a ``vocab_size x vocab_size`` table of logits: row ``i`` holds the scores of every
next token after token ``i``, and softmax turns a row into probabilities. Looking a row up is
the same as multiplying a one-hot vector by the table, which is why ``nn.Embedding`` is a
linear layer in disguise. Started at zero, every row is the uniform distribution; minimising
the mean negative log-likelihood moves each row towards the counted frequencies, the answer
chapter 1 computed in one pass.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def one_hot(ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Float32 rows of zeros with a single 1 at each id: shape ``(*ids.shape, vocab_size)``."""
    if not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError(f"vocab_size must be a whole number >= 1, got {vocab_size!r}")
    if ids.is_floating_point():
        raise TypeError("ids must be an integer tensor")
    if ids.numel() and (ids.min() < 0 or ids.max() >= vocab_size):
        raise ValueError(f"every id must lie in 0..{vocab_size - 1}")
    rows = torch.zeros(*ids.shape, vocab_size)
    return rows.scatter_(-1, ids.long().unsqueeze(-1), 1.0)


class NeuralBigram(nn.Module):
    """Logits of the next token given the current one: a row of one learned table."""

    def __init__(self, vocab_size: int):
        super().__init__()
        self.logits_table = nn.Embedding(vocab_size, vocab_size)
        nn.init.zeros_(self.logits_table.weight)  # every row starts uniform

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.logits_table(ids)


def bigram_training_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: torch.Tensor,
    targets: torch.Tensor,
) -> float:
    """One step of gradient descent on the mean negative log-likelihood; the loss before it.

    The four lines every training loop of the course repeats: forward, clear old gradients,
    backward, step.
    """
    loss = F.cross_entropy(model(inputs), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def train_neural_bigram(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    learning_rate: float,
    steps: int,
) -> list[float]:
    """Full-batch gradient descent (plain SGD) for ``steps`` steps; the loss before each."""
    optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)
    return [bigram_training_step(model, optimizer, inputs, targets) for _ in range(steps)]
