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


def _given_init(self, vocab_size, context_length, embedding_dim=16, hidden_dim=128):
    """The ``__init__`` the exercise gives (the learner writes ``forward`` only)."""
    torch.nn.Module.__init__(self)
    self.vocab_size, self.context_length = vocab_size, context_length
    self.embedding = torch.nn.Embedding(vocab_size, embedding_dim)
    self.hidden = torch.nn.Linear(context_length * embedding_dim, hidden_dim)
    self.output = torch.nn.Linear(hidden_dim, vocab_size)


class _Forward(torch.nn.Module):
    """The right forward pass in steps, each of which a bug below overrides (written here, not
    derived from the package's class: an answer may not use the reference of its own part)."""

    __init__ = _given_init

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


@bug.input(
    "MLPLanguageModel", "no_shape_check", "any x is fed in; a short context crashes or broadcasts"
)
class _(_Forward):
    def check(self, x):
        pass


# --------------------------------------------------------------------------- training_step

_STEPS = ("train", "zero_grad", "forward", "backward", "step")
"""the calls of a training step, in the right order"""


def _training_step(model, optimizer, x, y, *, steps=_STEPS, item=True):
    """The calls named in ``steps``, in that order (``restore``: the mode the model was in);
    the loss (``.item()`` with ``item``)."""
    loss, was_training = None, model.training
    for call in steps:
        if call == "restore":
            model.train(was_training)
        elif call == "train":
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
    batches=None,
    full_batches=False,
):
    """The right perplexity (with the bug file's check of the sizes), and a knob for each bug:
    ``eval_mode`` (model.eval() first), ``restore`` (the mode back after), ``no_grad``,
    ``backward`` (each batch's loss backpropagated), ``mean_of_means`` (the batch means
    averaged), ``last_batch`` (False: a short last batch left out), ``exp`` (True: e ** the
    mean, a number: that base), ``batches`` (only that many batches read), ``full_batches``
    (divided by the number of batches times batch_size); ``restore="train"``: train() after."""
    _sizes(x, y)
    was_training = model.training
    if eval_mode:
        model.eval()
    stop = len(x) if last_batch else min(len(x), max(1, len(x) // batch_size) * batch_size)
    if batches is not None:
        stop = min(stop, batches * batch_size)
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
    if restore == "train":
        model.train()
    elif restore:
        model.train(was_training)
    nll = np.mean(losses) if mean_of_means else sum(losses) / stop
    if full_batches:
        nll = sum(losses) / (len(losses) * batch_size)
    if exp is True:
        return float(np.exp(nll))
    return float(exp**nll) if exp else nll


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
class _(_Forward):
    def forward(self, x, y=None):
        self.check(x)
        logits = self.logits(self.vectors(x))
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


# ---------------------------------- the classes of issue 31: kinds of input the tests never tried


@bug.input(
    "context_target_pairs",
    "refuses_zero_only",
    "if context_length == 0: raise ...: a negative context length quietly gives pairs",
)
def _(sequences, context_length, bos_id=0):
    if context_length == 0:
        raise ValueError("context_length must not be 0")
    contexts, targets = [], []
    for sequence in sequences:
        padded = [bos_id] * context_length + [int(t) for t in sequence][1:]
        for end in range(max(context_length, 0), len(padded)):
            contexts.append(padded[end - context_length : end])
            targets.append(padded[end])
    x = torch.tensor(contexts, dtype=torch.long).reshape(len(targets), -1)
    return x, torch.tensor(targets, dtype=torch.long)


@bug(
    "context_target_pairs",
    "skips_short_sequences",
    "if len(sequence) <= context_length: continue: a name shorter than the context is lost",
)
def _(sequences, context_length, bos_id=0):
    _length(context_length)
    kept = [s for s in sequences if len(s) > context_length]
    if not kept:
        empty = torch.zeros((0, context_length), dtype=torch.long)
        return empty, torch.zeros(0, dtype=torch.long)
    return _pairs([_pad(s, context_length, bos_id) for s in kept], context_length)


@bug("MLPLanguageModel", "relu", "F.relu instead of tanh in the hidden layer")
class _(_Forward):
    def logits(self, vectors):
        return self.output(F.relu(self.hidden(vectors)))


@bug(
    "MLPLanguageModel",
    "log_softmax_logits",
    "returns log_softmax(logits): the loss is right, the logits are not",
)
class _(_Forward):
    def logits(self, vectors):
        return F.log_softmax(super().logits(vectors), dim=-1)


@bug(
    "MLPLanguageModel",
    "hidden_without_bias",
    "vectors @ self.hidden.weight.T by hand, the hidden layer's bias forgotten",
)
class _(_Forward):
    def logits(self, vectors):
        return self.output(torch.tanh(vectors @ self.hidden.weight.T))


@bug(
    "MLPLanguageModel",
    "loss_flag_without_graph",
    "torch.tensor(loss.item(), requires_grad=True): the flag is set, but no gradient flows",
)
class _(_Forward):
    def loss(self, logits, y):
        return torch.tensor(F.cross_entropy(logits, y).item(), requires_grad=True)


@bug.input(
    "MLPLanguageModel",
    "checks_dim_only",
    "checks x.dim() == 2 but not the number of columns: the layers crash with RuntimeError",
)
class _(_Forward):
    def check(self, x):
        if x.dim() != 2:
            raise ValueError("x must be 2-D")


@bug(
    "training_step",
    "update_by_hand",
    "p -= lr * p.grad with the optimizer's lr: momentum, weight decay and Adam are ignored",
)
def _(model, optimizer, x, y):
    model.train()
    optimizer.zero_grad()
    _, loss = model(x, y)
    loss.backward()
    lr = optimizer.param_groups[0]["lr"]
    with torch.no_grad():
        for parameter in model.parameters():
            parameter -= lr * parameter.grad
    return loss.item()


@bug(
    "training_step",
    "own_cross_entropy",
    "F.cross_entropy(model(x)[0], y) instead of the model's own loss",
)
def _(model, optimizer, x, y):
    model.train()
    optimizer.zero_grad()
    logits, _ = model(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    optimizer.step()
    return loss.item()


@bug(
    "training_step",
    "clips_gradients",
    "clip_grad_norm_(model.parameters(), 1.0) copied from the training loop: large steps shrink",
)
def _(model, optimizer, x, y):
    model.train()
    optimizer.zero_grad()
    _, loss = model(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss.item()


@bug(
    "training_step",
    "training_flag_only",
    "model.training = True: the layers inside the model stay in evaluation mode",
)
def _(model, optimizer, x, y):
    model.training = True
    optimizer.zero_grad()
    _, loss = model(x, y)
    loss.backward()
    optimizer.step()
    return loss.item()


_step_bug(
    "restores_the_mode",
    "model.train(was_training) at the end, as in evaluate_perplexity: an eval model stays so",
    steps=("train", "zero_grad", "forward", "backward", "step", "restore"),
)


_perplexity_bug("base_two", "2 ** (mean cross-entropy): the cross-entropy is in nats", exp=2)


@bug("evaluate_perplexity", "returns_tensor", "torch.exp(total / n): a tensor, not a float")
def _(model, x, y, batch_size=4096):
    _sizes(x, y)
    was_training = model.training
    model.eval()
    total = torch.zeros(())
    with torch.no_grad():
        for start in range(0, len(x), batch_size):
            logits = model(x[start : start + batch_size])[0]
            total += F.cross_entropy(logits, y[start : start + batch_size], reduction="sum")
    model.train(was_training)
    return torch.exp(total / len(x))


_perplexity_bug(
    "first_batch_only", "no loop: x[:batch_size] only, the other batches are never read", batches=1
)
_perplexity_bug(
    "divides_by_full_batches",
    "total / (batches * batch_size): a short last batch is counted as full",
    full_batches=True,
)
_perplexity_bug(
    "always_back_to_training", "model.train() at the end, whatever mode it was in", restore="train"
)


@bug.input(
    "evaluate_perplexity",
    "refuses_no_pairs_only",
    "checks len(x) == 0 only: more targets than contexts slip through when the batches fit",
)
def _(model, x, y, batch_size=4096):
    if len(x) == 0:
        raise ValueError("no pairs")
    return _perplexity(model, x, y[: len(x)], batch_size)


@bug.input(
    "evaluate_perplexity",
    "no_empty_check",
    "checks len(x) != len(y) only: no pairs divides by 0 (ZeroDivisionError)",
)
def _(model, x, y, batch_size=4096):
    if len(x) != len(y):
        raise ValueError("x and y differ in length")
    if len(x) == 0:
        return math.exp(0.0 / len(x))
    return _perplexity(model, x, y, batch_size)


# ------------------------------------------------------------------ more correct rewrites


@correct("context_target_pairs", "sliding_deque")
def _(sequences, context_length, bos_id=0):
    from collections import deque

    if context_length < 1:
        raise ValueError("context_length < 1")
    contexts, targets = [], []
    for sequence in sequences:
        window = deque([bos_id] * context_length, maxlen=context_length)
        for token in list(sequence)[1:]:
            contexts.append(list(window))
            targets.append(int(token))
            window.append(int(token))
    x = torch.as_tensor(np.array(contexts, dtype=np.int64).reshape(-1, context_length))
    return x, torch.as_tensor(np.array(targets, dtype=np.int64))


@correct("MLPLanguageModel", "einsum_nll")
class _(torch.nn.Module):
    __init__ = _given_init

    def forward(self, x, y=None):
        if not (x.ndim == 2 and x.shape[-1] == self.context_length):
            raise ValueError(f"expected (B, {self.context_length}) ids, got {list(x.shape)}")
        e = self.embedding(x)  # (B, n, d)
        w = self.hidden.weight.view(self.hidden.out_features, self.context_length, -1)
        h = torch.tanh(torch.einsum("bnd,hnd->bh", e, w) + self.hidden.bias)
        logits = F.linear(h, self.output.weight, self.output.bias)
        loss = None if y is None else F.nll_loss(F.log_softmax(logits, dim=-1), y)
        return logits, loss


@correct("training_step", "float_of_loss")
def _(model, optimizer, x, y):
    model.train(mode=True)
    optimizer.zero_grad(set_to_none=False)
    loss = model.forward(x, y)[1]
    loss.backward()
    optimizer.step()
    return float(loss)


@correct("evaluate_perplexity", "per_pair_python")
def _(model, x, y, batch_size=4096):
    if len(x) < 1 or len(y) != len(x):
        raise ValueError("need equally many contexts and targets, at least one")
    mode = model.training
    model.train(False)
    nll = []
    with torch.no_grad():
        for start in range(0, len(x), batch_size):
            logits = model(x[start : start + batch_size])[0]
            log_p = logits.log_softmax(dim=1)
            nll += [-float(log_p[i, int(t)]) for i, t in enumerate(y[start : start + batch_size])]
    model.train(mode)
    return math.exp(math.fsum(nll) / len(nll))
