"""Known-buggy answers to the ch03_neural_lm exercise: mistakes learners really make.

Same layout as ``ch01_bigrams.py``: each function (or class) carries the name of the exercise
part it answers and is registered in ``BUGS[name]`` with a one-line description; the hidden
tests of the notebook must fail every one of them while the reference passes.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
import torch
import torch.nn.functional as F

from mini_llm.mlp_lm import MLPLanguageModel as Reference
from mini_llm.mlp_lm import context_target_pairs, evaluate_perplexity, training_step

from ._registry import new_registry

REFERENCE = ("mini_llm.mlp_lm",)
"""the mini_llm modules that hold the reference of each graded part"""

BUGS, ALTERNATIVES, bug, correct = new_registry()


# -------------------------------------------------------------------- context_target_pairs


def _pairs(padded_sequences, context_length):
    """Every window of ``context_length + 1`` tokens as (context, next token) tensors."""
    windows = [
        np.lib.stride_tricks.sliding_window_view(p, context_length + 1)
        for p in padded_sequences
        if len(p) > context_length
    ]
    windows = (
        np.concatenate(windows) if windows else np.empty((0, context_length + 1), dtype=np.int64)
    )
    windows = torch.from_numpy(np.ascontiguousarray(windows, dtype=np.int64))
    return windows[:, :-1], windows[:, -1]


def _pad(sequence, context_length, bos_id):
    return np.concatenate(
        [np.full(context_length, bos_id), np.asarray(sequence, dtype=np.int64)[1:]]
    )


def _length(context_length):
    if context_length < 1:
        raise ValueError("context_length must be >= 1")


@bug("context_target_pairs", "no_padding", "windows of the unpadded sequence: first letters lost")
def _(sequences, context_length, bos_id=0):
    _length(context_length)
    return _pairs([np.asarray(s, dtype=np.int64) for s in sequences], context_length)


@bug("context_target_pairs", "across_sequences", "pads once and concatenates: pairs span names")
def _(sequences, context_length, bos_id=0):
    _length(context_length)
    joined = np.concatenate([np.asarray(s, dtype=np.int64)[1:] for s in sequences])
    return _pairs([np.concatenate([np.full(context_length, bos_id), joined])], context_length)


def _context_pairs(sequences, context_length, bos_id=0, *, short=0):
    """The right pairs (with the bug file's check of the length), padded ``short`` begin tokens
    short."""
    _length(context_length)
    return _pairs([_pad(s, context_length - short, bos_id) for s in sequences], context_length)


bug.variant(
    "context_target_pairs",
    "pads_one_short",
    "pads with context_length - 1 extra <s> only",
    _context_pairs,
    like=context_target_pairs,
    short=1,
)


@bug("context_target_pairs", "context_includes_target", "x = window[:, 1:]: the target leaks in")
def _(sequences, context_length, bos_id=0):
    _length(context_length)
    windows = [
        np.lib.stride_tricks.sliding_window_view(
            _pad(s, context_length, bos_id), context_length + 1
        )
        for s in sequences
    ]
    windows = torch.from_numpy(np.ascontiguousarray(np.concatenate(windows), dtype=np.int64))
    return windows[:, 1:], windows[:, -1]


bug.variant(
    "context_target_pairs",
    "float_tensors",
    "torch.Tensor(...) makes float32, not long",
    _context_pairs,
    like=context_target_pairs,
    returns=lambda xy, a: tuple(torch.Tensor(t.numpy()) for t in xy),
)


# ------------------------------------------------------------------------ MLPLanguageModel


def _check(model, x):
    if x.dim() != 2 or x.shape[1] != model.context_length:
        raise ValueError("x must have shape (batch, context_length)")


class _Forward(Reference):
    """The right forward pass in steps, each of which a bug below overrides."""

    def check(self, x):
        _check(self, x)

    def vectors(self, x):
        return self.embedding(x).flatten(start_dim=1)

    def logits(self, vectors):
        return self.output(torch.tanh(self.hidden(vectors)))

    def loss(self, logits, y):
        return F.cross_entropy(logits, y)

    def forward(self, x, y=None):
        self.check(x)
        logits = self.logits(self.vectors(x))
        return logits, None if y is None else self.loss(logits, y)


@bug("MLPLanguageModel", "no_tanh", "hidden layer without tanh: a linear model")
class _(_Forward):
    def logits(self, vectors):
        return self.output(self.hidden(vectors))


@bug("MLPLanguageModel", "softmax_then_cross_entropy", "returns softmax probabilities as logits")
class _(_Forward):
    def logits(self, vectors):
        return F.softmax(super().logits(vectors), dim=-1)


@bug(
    "MLPLanguageModel",
    "interleaved_concat",
    "transposes before flattening: dims, not tokens, in order",
)
class _(_Forward):
    def vectors(self, x):
        return self.embedding(x).transpose(1, 2).flatten(start_dim=1)


@bug("MLPLanguageModel", "summed_loss", "F.cross_entropy(..., reduction='sum'): not the mean")
class _(_Forward):
    def loss(self, logits, y):
        return F.cross_entropy(logits, y, reduction="sum")


@bug("MLPLanguageModel", "detached_embeddings", "embeddings read with .detach(): never learned")
class _(_Forward):
    def vectors(self, x):
        return self.embedding(x).detach().flatten(start_dim=1)


@bug("MLPLanguageModel", "no_shape_check", "any x is fed in; a short context crashes or broadcasts")
class _(_Forward):
    def check(self, x):
        pass


# --------------------------------------------------------------------------- training_step

_STEPS = ("train", "zero_grad", "forward", "backward", "step")
"""the calls of a training step, in the right order"""


def _training_step(model, optimizer, x, y, *, steps=_STEPS, item=True):
    """The calls named in ``steps``, in that order; the loss (``.item()`` with ``item``)."""
    loss = None
    for call in steps:
        if call == "train":
            model.train()
        elif call == "zero_grad":
            optimizer.zero_grad()
        elif call == "forward":
            _, loss = model(x, y)
        elif call == "backward":
            loss.backward()
        else:
            getattr(optimizer, call)()
    return loss.item() if item else loss


_step_bug = bug.variants("training_step", _training_step, like=training_step)


_step_bug(
    "no_zero_grad",
    "never resets the gradients: each step adds the old ones",
    steps=("train", "forward", "backward", "step"),
)
_step_bug(
    "step_before_backward",
    "optimizer.step() before loss.backward()",
    steps=("train", "zero_grad", "forward", "step", "backward"),
)
_step_bug(
    "loss_after_step",
    "returns a fresh loss computed after the update",
    returns=lambda _, a: a.model(a.x, a.y)[1].item(),
)
_step_bug("returns_tensor", "returns the loss tensor instead of loss.item()", item=False)
_step_bug(
    "no_train_mode",
    "never calls model.train()",
    steps=("zero_grad", "forward", "backward", "step"),
)


# --------------------------------------------------------------------- evaluate_perplexity


def _sizes(x, y):
    if len(x) == 0 or len(x) != len(y):
        raise ValueError("bad pairs")


def _perplexity(
    model,
    x,
    y,
    batch_size=4096,
    *,
    eval_mode=True,
    restore=True,
    no_grad=True,
    backward=False,
    mean_of_means=False,
    last_batch=True,
    exp=True,
):
    """The right perplexity (with the bug file's check of the sizes), and a knob for each bug:
    ``eval_mode`` (model.eval() first), ``restore`` (the mode back after), ``no_grad``,
    ``backward`` (each batch's loss backpropagated), ``mean_of_means`` (the batch means
    averaged), ``last_batch`` (False: a short last batch left out) and ``exp``."""
    _sizes(x, y)
    was_training = model.training
    if eval_mode:
        model.eval()
    stop = len(x) if last_batch else min(len(x), max(1, len(x) // batch_size) * batch_size)
    losses = []
    with torch.no_grad() if no_grad else contextlib.nullcontext():
        for i in range(0, stop, batch_size):
            loss = F.cross_entropy(
                model(x[i : i + batch_size])[0],
                y[i : i + batch_size],
                reduction="mean" if mean_of_means else "sum",
            )
            if backward:
                loss.backward()
            losses.append(loss.item())
    if restore:
        model.train(was_training)
    nll = np.mean(losses) if mean_of_means else sum(losses) / stop
    return float(np.exp(nll)) if exp else nll


_perplexity_bug = bug.variants("evaluate_perplexity", _perplexity, like=evaluate_perplexity)


_perplexity_bug(
    "mean_of_batch_means", "averages the batch means: short batch overweighted", mean_of_means=True
)
_perplexity_bug("no_exp", "returns the average cross-entropy, not its exponential", exp=False)
_perplexity_bug(
    "no_eval_mode", "never calls model.eval(): dropout stays on", eval_mode=False, restore=False
)
_perplexity_bug("leaves_eval_mode", "switches to eval mode and never back", restore=False)
_perplexity_bug(
    "drops_last_batch", "range(len(x) // batch_size): the short batch is lost", last_batch=False
)
_perplexity_bug(
    "with_gradients",
    "no torch.no_grad(); backpropagates the loss",
    no_grad=False,
    backward=True,
)
_perplexity_bug(
    "graph_kept",
    "no torch.no_grad() (and no backward): every batch's autograd graph is built and kept",
    no_grad=False,
)


# ------------------------ special tokens, the caller's data, autograd, stale gradients (issue 18)


bug.variant(
    "context_target_pairs",
    "pads_with_zero",
    "pads the contexts with a hard-coded 0, not bos_id",
    _context_pairs,
    like=context_target_pairs,
    bos_id=0,
)


@bug(
    "context_target_pairs", "pads_the_callers_lists", "inserts the padding into the caller's lists"
)
def _(sequences, context_length, bos_id=0):
    _length(context_length)
    padded = []
    for sequence in sequences:
        ids = sequence if isinstance(sequence, list) else list(sequence)
        ids[:0] = [bos_id] * (context_length - 1)
        padded.append(np.asarray(ids, dtype=np.int64))
    return _pairs(padded, context_length)


@bug(
    "MLPLanguageModel",
    "loss_outside_autograd",
    "cross-entropy computed in NumPy: the right value, but no gradient flows",
)
class _(Reference):
    def forward(self, x, y=None):
        logits, _ = super().forward(x)
        if y is None:
            return logits, None
        probs = F.softmax(logits, dim=-1).detach().numpy()
        return logits, torch.tensor(-np.log(probs[np.arange(len(y)), y.numpy()]).mean())


_step_bug(
    "zero_grad_after_step",
    "optimizer.zero_grad() after step(): stale gradients join the first update",
    steps=("train", "forward", "backward", "step", "zero_grad"),
)


# ------------------------------------------------------- correct, but not like the reference
# Answers a learner may well write: Python lists or Tensor.unfold for the pairs, the parameter
# matrices used by hand, cross-entropy from log-softmax, a perplexity loop of its own. The hidden
# tests must accept them too.


@correct("context_target_pairs", "python_lists")
def _(sequences, context_length, bos_id=0):
    if context_length < 1:
        raise ValueError("the context needs at least one token")
    contexts, targets = [], []
    for sequence in sequences:
        padded = [bos_id] * context_length + [int(t) for t in sequence][1:]
        for i in range(context_length, len(padded)):
            contexts.append(padded[i - context_length : i])
            targets.append(padded[i])
    x = torch.tensor(contexts, dtype=torch.long).reshape(-1, context_length)
    return x, torch.tensor(targets, dtype=torch.long)


@correct("context_target_pairs", "unfold")
def _(sequences, context_length, bos_id=0):
    if context_length < 1:
        raise ValueError(f"context_length = {context_length}: must be >= 1")
    windows = [torch.zeros((0, context_length + 1), dtype=torch.long)]
    for sequence in sequences:
        ids = torch.as_tensor(np.asarray(sequence), dtype=torch.long)
        padded = torch.cat([torch.full((context_length,), bos_id, dtype=torch.long), ids[1:]])
        windows.append(padded.unfold(0, context_length + 1, 1))  # (len - context_length, n)
    windows = torch.cat(windows)
    return windows[:, :context_length].contiguous(), windows[:, context_length].contiguous()


def _given_init(self, vocab_size, context_length, embedding_dim=16, hidden_dim=128):
    """The ``__init__`` the exercise gives (the learner writes ``forward`` only)."""
    torch.nn.Module.__init__(self)
    self.vocab_size, self.context_length = vocab_size, context_length
    self.embedding = torch.nn.Embedding(vocab_size, embedding_dim)
    self.hidden = torch.nn.Linear(context_length * embedding_dim, hidden_dim)
    self.output = torch.nn.Linear(hidden_dim, vocab_size)


@correct("MLPLanguageModel", "parameter_matrices")
class _(torch.nn.Module):
    __init__ = _given_init

    def forward(self, x, y=None):
        if len(x.shape) != 2 or x.shape[1] != self.context_length:
            raise ValueError(f"x has shape {tuple(x.shape)}: need (B, {self.context_length})")
        rows = self.embedding.weight[x]  # (B, n - 1, d): the rows of C
        joined = rows.reshape(x.shape[0], -1)  # first token's vector first
        h = torch.tanh(joined @ self.hidden.weight.T + self.hidden.bias)
        logits = h @ self.output.weight.T + self.output.bias
        if y is None:
            return logits, None
        log_probs = torch.log_softmax(logits, dim=1)
        loss = -log_probs.gather(1, y.view(-1, 1)).mean()
        return logits, loss


@correct("MLPLanguageModel", "cat_per_position")
class _(torch.nn.Module):
    __init__ = _given_init

    def forward(self, x, y=None):
        if x.ndim != 2 or x.size(1) != self.context_length:
            raise ValueError("x must be (batch, context_length)")
        vectors = torch.cat([self.embedding(x[:, i]) for i in range(self.context_length)], dim=1)
        logits = self.output(self.hidden(vectors).tanh())
        loss = None
        if y is not None:
            picked = logits[torch.arange(len(y)), y]
            loss = (torch.logsumexp(logits, dim=1) - picked).mean()
        return logits, loss


@correct("training_step", "grads_to_none")
def _(model, optimizer, x, y):
    model.train(True)
    for parameter in model.parameters():
        parameter.grad = None
    loss = model(x, y)[1]
    value = float(loss.detach())
    loss.backward()
    optimizer.step()
    return value


@correct("training_step", "model_zero_grad")
def _(model, optimizer, x, y):
    model.train()
    model.zero_grad()
    _, loss = model(x, y)
    loss.backward()
    optimizer.step()
    return loss.item()


@correct("evaluate_perplexity", "log_softmax_gather")
def _(model, x, y, batch_size=4096):
    n = len(x)
    if n == 0 or len(y) != n:
        raise ValueError("x and y must hold the same, non-zero number of pairs")
    mode = model.training
    model.eval()
    nll = 0.0
    try:
        with torch.no_grad():
            for xb, yb in zip(torch.split(x, batch_size), torch.split(y, batch_size)):
                log_probs = F.log_softmax(model(xb)[0].double(), dim=-1)
                nll -= log_probs.gather(1, yb.unsqueeze(1)).sum().item()
    finally:
        model.train(mode)
    return math.exp(nll / n)


@correct("evaluate_perplexity", "inference_mode_mean_weighted")
def _(model, x, y, batch_size=4096):
    if len(x) != len(y) or len(y) == 0:
        raise ValueError(f"{len(x)} contexts, {len(y)} targets")
    was_training = model.training
    model.eval()
    with torch.inference_mode():
        weighted = []  # each batch mean times its size
        for start in range(0, len(x), batch_size):
            xb, yb = x[start : start + batch_size], y[start : start + batch_size]
            weighted.append(F.cross_entropy(model(xb)[0], yb).item() * len(yb))
    if was_training:
        model.train()
    return float(np.exp(sum(weighted) / len(y)))
