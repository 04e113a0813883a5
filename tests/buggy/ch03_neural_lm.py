"""Known-buggy answers to the ch03_neural_lm exercise: mistakes learners really make.

Same layout as ``ch01_bigrams.py``: each function (or class) carries the name of the exercise
part it answers and is registered in ``BUGS[name]`` with a one-line description; the hidden
tests of the notebook must fail every one of them while the reference passes.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from mini_llm.mlp_lm import MLPLanguageModel as Reference

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


@bug("context_target_pairs", "pads_one_short", "pads with context_length - 1 extra <s> only")
def _(sequences, context_length, bos_id=0):
    _length(context_length)
    return _pairs([_pad(s, context_length - 1, bos_id) for s in sequences], context_length)


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


@bug("context_target_pairs", "float_tensors", "torch.Tensor(...) makes float32, not long")
def _(sequences, context_length, bos_id=0):
    _length(context_length)
    x, y = _pairs([_pad(s, context_length, bos_id) for s in sequences], context_length)
    return torch.Tensor(x.numpy()), torch.Tensor(y.numpy())


# ------------------------------------------------------------------------ MLPLanguageModel


def _check(model, x):
    if x.dim() != 2 or x.shape[1] != model.context_length:
        raise ValueError("x must have shape (batch, context_length)")


@bug("MLPLanguageModel", "no_tanh", "hidden layer without tanh: a linear model")
class _(Reference):
    def forward(self, x, y=None):
        _check(self, x)
        logits = self.output(self.hidden(self.embedding(x).flatten(start_dim=1)))
        return logits, None if y is None else F.cross_entropy(logits, y)


@bug("MLPLanguageModel", "softmax_then_cross_entropy", "returns softmax probabilities as logits")
class _(Reference):
    def forward(self, x, y=None):
        _check(self, x)
        hidden = torch.tanh(self.hidden(self.embedding(x).flatten(start_dim=1)))
        probs = F.softmax(self.output(hidden), dim=-1)
        return probs, None if y is None else F.cross_entropy(probs, y)


@bug(
    "MLPLanguageModel",
    "interleaved_concat",
    "transposes before flattening: dims, not tokens, in order",
)
class _(Reference):
    def forward(self, x, y=None):
        _check(self, x)
        vectors = self.embedding(x).transpose(1, 2).flatten(start_dim=1)
        logits = self.output(torch.tanh(self.hidden(vectors)))
        return logits, None if y is None else F.cross_entropy(logits, y)


@bug("MLPLanguageModel", "summed_loss", "F.cross_entropy(..., reduction='sum'): not the mean")
class _(Reference):
    def forward(self, x, y=None):
        _check(self, x)
        logits = self.output(torch.tanh(self.hidden(self.embedding(x).flatten(start_dim=1))))
        return logits, None if y is None else F.cross_entropy(logits, y, reduction="sum")


@bug("MLPLanguageModel", "detached_embeddings", "embeddings read with .detach(): never learned")
class _(Reference):
    def forward(self, x, y=None):
        _check(self, x)
        vectors = self.embedding(x).detach().flatten(start_dim=1)
        logits = self.output(torch.tanh(self.hidden(vectors)))
        return logits, None if y is None else F.cross_entropy(logits, y)


@bug("MLPLanguageModel", "no_shape_check", "any x is fed in; a short context crashes or broadcasts")
class _(Reference):
    def forward(self, x, y=None):
        logits = self.output(torch.tanh(self.hidden(self.embedding(x).flatten(start_dim=1))))
        return logits, None if y is None else F.cross_entropy(logits, y)


# --------------------------------------------------------------------------- training_step


@bug("training_step", "no_zero_grad", "never resets the gradients: each step adds the old ones")
def _(model, optimizer, x, y):
    model.train()
    _, loss = model(x, y)
    loss.backward()
    optimizer.step()
    return loss.item()


@bug("training_step", "step_before_backward", "optimizer.step() before loss.backward()")
def _(model, optimizer, x, y):
    model.train()
    optimizer.zero_grad()
    _, loss = model(x, y)
    optimizer.step()
    loss.backward()
    return loss.item()


@bug("training_step", "loss_after_step", "returns a fresh loss computed after the update")
def _(model, optimizer, x, y):
    model.train()
    optimizer.zero_grad()
    _, loss = model(x, y)
    loss.backward()
    optimizer.step()
    return model(x, y)[1].item()


@bug("training_step", "returns_tensor", "returns the loss tensor instead of loss.item()")
def _(model, optimizer, x, y):
    model.train()
    optimizer.zero_grad()
    _, loss = model(x, y)
    loss.backward()
    optimizer.step()
    return loss


@bug("training_step", "no_train_mode", "never calls model.train()")
def _(model, optimizer, x, y):
    optimizer.zero_grad()
    _, loss = model(x, y)
    loss.backward()
    optimizer.step()
    return loss.item()


# --------------------------------------------------------------------- evaluate_perplexity


def _sizes(x, y):
    if len(x) == 0 or len(x) != len(y):
        raise ValueError("bad pairs")


@bug(
    "evaluate_perplexity",
    "mean_of_batch_means",
    "averages the batch means: short batch overweighted",
)
def _(model, x, y, batch_size=4096):
    _sizes(x, y)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        means = [
            F.cross_entropy(model(x[i : i + batch_size])[0], y[i : i + batch_size]).item()
            for i in range(0, len(x), batch_size)
        ]
    model.train(was_training)
    return float(np.exp(np.mean(means)))


@bug("evaluate_perplexity", "no_exp", "returns the average cross-entropy, not its exponential")
def _(model, x, y, batch_size=4096):
    _sizes(x, y)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        total = sum(
            F.cross_entropy(
                model(x[i : i + batch_size])[0], y[i : i + batch_size], reduction="sum"
            ).item()
            for i in range(0, len(x), batch_size)
        )
    model.train(was_training)
    return total / len(x)


@bug("evaluate_perplexity", "no_eval_mode", "never calls model.eval(): dropout stays on")
def _(model, x, y, batch_size=4096):
    _sizes(x, y)
    with torch.no_grad():
        total = sum(
            F.cross_entropy(
                model(x[i : i + batch_size])[0], y[i : i + batch_size], reduction="sum"
            ).item()
            for i in range(0, len(x), batch_size)
        )
    return float(np.exp(total / len(x)))


@bug("evaluate_perplexity", "leaves_eval_mode", "switches to eval mode and never back")
def _(model, x, y, batch_size=4096):
    _sizes(x, y)
    model.eval()
    with torch.no_grad():
        total = sum(
            F.cross_entropy(
                model(x[i : i + batch_size])[0], y[i : i + batch_size], reduction="sum"
            ).item()
            for i in range(0, len(x), batch_size)
        )
    return float(np.exp(total / len(x)))


@bug(
    "evaluate_perplexity",
    "drops_last_batch",
    "range(len(x) // batch_size): the short batch is lost",
)
def _(model, x, y, batch_size=4096):
    _sizes(x, y)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        batches = max(1, len(x) // batch_size)
        total = sum(
            F.cross_entropy(
                model(x[b * batch_size : (b + 1) * batch_size])[0],
                y[b * batch_size : (b + 1) * batch_size],
                reduction="sum",
            ).item()
            for b in range(batches)
        )
        count = min(len(x), batches * batch_size)
    model.train(was_training)
    return float(np.exp(total / count))


@bug("evaluate_perplexity", "with_gradients", "no torch.no_grad(); backpropagates the loss")
def _(model, x, y, batch_size=4096):
    _sizes(x, y)
    was_training = model.training
    model.eval()
    total = 0.0
    for i in range(0, len(x), batch_size):
        loss = F.cross_entropy(
            model(x[i : i + batch_size])[0], y[i : i + batch_size], reduction="sum"
        )
        loss.backward()
        total += loss.item()
    model.train(was_training)
    return float(np.exp(total / len(x)))


@bug(
    "evaluate_perplexity",
    "graph_kept",
    "no torch.no_grad() (and no backward): every batch's autograd graph is built and kept",
)
def _(model, x, y, batch_size=4096):
    _sizes(x, y)
    was_training = model.training
    model.eval()
    total = 0.0
    for i in range(0, len(x), batch_size):
        loss = F.cross_entropy(
            model(x[i : i + batch_size])[0], y[i : i + batch_size], reduction="sum"
        )
        total += loss.item()
    model.train(was_training)
    return float(np.exp(total / len(x)))


# ------------------------ special tokens, the caller's data, autograd, stale gradients (issue 18)


@bug("context_target_pairs", "pads_with_zero", "pads the contexts with a hard-coded 0, not bos_id")
def _(sequences, context_length, bos_id=0):
    _length(context_length)
    return _pairs([_pad(s, context_length, 0) for s in sequences], context_length)


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


@bug(
    "training_step",
    "zero_grad_after_step",
    "optimizer.zero_grad() after step(): stale gradients join the first update",
)
def _(model, optimizer, x, y):
    model.train()
    _, loss = model(x, y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss.item()


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
