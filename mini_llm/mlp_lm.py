"""Chapter 3 -- A neural language model.

A neural language model in the style of Bengio et al. (2003): embeddings, a hidden layer, softmax.

Chapter 3 replaces the count table of an n-gram model by a function with learned parameters.
The model still reads a fixed window of the ``context_length`` previous tokens, but

1. each token becomes a learned vector (its *embedding*), so similar tokens can share evidence;
2. the concatenated vectors go through a ``tanh`` hidden layer;
3. a linear layer gives one score (logit) per token of the vocabulary; softmax turns them into
   P(next token | context).

Training minimises the cross-entropy, the average negative log-likelihood of chapter 1, with the
course's one training loop, :func:`mini_llm.engine.train.train`: ``forward(x, y)`` returns
``(logits, loss)`` like every model of the course.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from mini_llm.ngram import SequenceLike, ngram_windows
from mini_llm.smoothing import pad_sequences


def context_target_pairs(
    sequences: Sequence[SequenceLike], context_length: int, bos_id: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Training pairs ``(x, y)``: ``x[i]`` holds ``context_length`` tokens, ``y[i]`` the next one.

    Sequences in the ``<s> ... </s>`` form are padded with ``context_length`` begin tokens, as an
    n-gram model of order ``context_length + 1`` is (chapter 2), so both kinds of model predict
    exactly the same tokens and their perplexities compare.
    """
    if not isinstance(context_length, (int, np.integer)) or context_length < 1:
        raise ValueError(f"context_length must be a whole number >= 1, got {context_length!r}")
    windows = ngram_windows(
        pad_sequences(sequences, context_length + 1, bos_id), context_length + 1
    )
    windows = torch.from_numpy(np.ascontiguousarray(windows))
    return windows[:, :-1].clone(), windows[:, -1].clone()


class MLPLanguageModel(nn.Module):
    """P(next token | the ``context_length`` previous tokens) from embeddings and a tanh layer."""

    def __init__(
        self, vocab_size: int, context_length: int, embedding_dim: int = 16, hidden_dim: int = 128
    ):
        super().__init__()
        self.vocab_size, self.context_length = vocab_size, context_length
        self.embedding = nn.Embedding(vocab_size, embedding_dim)  # C in Bengio et al.
        self.hidden = nn.Linear(context_length * embedding_dim, hidden_dim)
        self.output = nn.Linear(hidden_dim, vocab_size)

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None):
        """``(logits, loss)``: logits ``(B, V)`` for contexts ``x`` ``(B, context_length)``.

        ``loss`` is the mean cross-entropy against the next tokens ``y`` ``(B,)``, or ``None``.
        """
        if x.dim() != 2 or x.shape[1] != self.context_length or x.dtype != torch.long:
            raise ValueError(
                f"x must be a (batch, {self.context_length}) tensor of token ids "
                f"(torch.long), got shape {tuple(x.shape)} and dtype {x.dtype}"
            )
        vectors = self.embedding(x)  # (B, context_length, embedding_dim)
        hidden = torch.tanh(self.hidden(vectors.flatten(start_dim=1)))  # (B, hidden_dim)
        logits = self.output(hidden)  # (B, vocab_size)
        loss = None if y is None else F.cross_entropy(logits, y)
        return logits, loss


def training_step(
    model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor
) -> float:
    """One step of minibatch gradient descent on ``(x, y)``; returns the loss before the step.

    This is the step that :func:`mini_llm.engine.train.train` repeats (with learning-rate schedule,
    clipping and checkpoints around it), written out on its own to be read and tested.
    """
    model.train()
    optimizer.zero_grad(set_to_none=True)  # gradients add up across backward calls: reset them
    _, loss = model(x, y)
    loss.backward()  # autograd: d loss / d parameter for every parameter
    optimizer.step()  # move every parameter against its gradient
    return loss.item()


@torch.no_grad()
def evaluate_perplexity(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = 4096
) -> float:
    """exp(average cross-entropy) over all pairs ``(x, y)``, the perplexity of chapter 2.

    Runs in evaluation mode without gradients, in batches so memory stays small, and sums the
    losses (rather than averaging batch means) so that a short last batch is weighted correctly.
    """
    if len(x) == 0 or len(x) != len(y):
        raise ValueError(
            f"need as many targets as contexts, and at least one: got {len(x)} "
            f"contexts and {len(y)} targets"
        )
    was_training = model.training
    model.eval()
    total = 0.0
    for start in range(0, len(x), batch_size):
        logits, _ = model(x[start : start + batch_size])
        total += F.cross_entropy(logits, y[start : start + batch_size], reduction="sum").item()
    model.train(was_training)
    return math.exp(total / len(x))


class RandomPairBatches:
    """Random minibatches of ``(context, target)`` pairs, for :func:`mini_llm.engine.train.train`.

    Each call draws ``batch_size`` pairs with its own seeded generator, whose state is saved in
    checkpoints (``state_dict``), so a resumed run draws the same batches.
    """

    def __init__(self, x: torch.Tensor, y: torch.Tensor, batch_size: int, seed: int = 0):
        if len(x) != len(y) or len(x) == 0:
            raise ValueError(
                f"need as many targets as contexts, and at least one: got {len(x)} and {len(y)}"
            )
        self.x, self.y, self.batch_size = x, y, batch_size
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self) -> tuple[torch.Tensor, torch.Tensor]:
        rows = torch.randint(len(self.x), (self.batch_size,), generator=self.generator)
        return self.x[rows], self.y[rows]

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])


@torch.no_grad()
def sample(
    model: MLPLanguageModel,
    bos_id: int,
    eos_id: int,
    generator: torch.Generator,
    max_length: int = 30,
) -> list[int]:
    """Token ids drawn one at a time from the model until ``eos_id`` (neither boundary returned).

    The context starts as ``context_length`` begin tokens and slides by one after every draw:
    the model never sees further back than its window.
    """
    was_training = model.training
    model.eval()
    context = [bos_id] * model.context_length
    out: list[int] = []
    for _ in range(max_length):
        logits, _ = model(torch.tensor([context]))
        token = int(torch.multinomial(F.softmax(logits[0], dim=-1), 1, generator=generator))
        if token == eos_id:
            break
        out.append(token)
        context = context[1:] + [token]
    model.train(was_training)
    return out
