"""Known-buggy answers to the ch03_neural_lm exercise: mistakes learners really make.

Same layout as ``ch01_bigrams.py``: each function (or class) carries the name of the exercise
part it answers and is registered in ``BUGS[name]`` with a one-line description; the hidden
tests of the notebook must fail every one of them while the reference passes.
"""

from __future__ import annotations

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
    windows = [np.lib.stride_tricks.sliding_window_view(p, context_length + 1)
               for p in padded_sequences if len(p) > context_length]
    windows = (np.concatenate(windows) if windows
               else np.empty((0, context_length + 1), dtype=np.int64))
    windows = torch.from_numpy(np.ascontiguousarray(windows, dtype=np.int64))
    return windows[:, :-1], windows[:, -1]


def _pad(sequence, context_length, bos_id):
    return np.concatenate([np.full(context_length, bos_id),
                           np.asarray(sequence, dtype=np.int64)[1:]])


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
    windows = [np.lib.stride_tricks.sliding_window_view(_pad(s, context_length, bos_id),
                                                        context_length + 1) for s in sequences]
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


@bug("MLPLanguageModel", "interleaved_concat", "transposes before flattening: dims, not tokens, in order")
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


@bug("evaluate_perplexity", "mean_of_batch_means", "averages the batch means: short batch overweighted")
def _(model, x, y, batch_size=4096):
    _sizes(x, y)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        means = [F.cross_entropy(model(x[i:i + batch_size])[0], y[i:i + batch_size]).item()
                 for i in range(0, len(x), batch_size)]
    model.train(was_training)
    return float(np.exp(np.mean(means)))


@bug("evaluate_perplexity", "no_exp", "returns the average cross-entropy, not its exponential")
def _(model, x, y, batch_size=4096):
    _sizes(x, y)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        total = sum(F.cross_entropy(model(x[i:i + batch_size])[0], y[i:i + batch_size],
                                    reduction="sum").item() for i in range(0, len(x), batch_size))
    model.train(was_training)
    return total / len(x)


@bug("evaluate_perplexity", "no_eval_mode", "never calls model.eval(): dropout stays on")
def _(model, x, y, batch_size=4096):
    _sizes(x, y)
    with torch.no_grad():
        total = sum(F.cross_entropy(model(x[i:i + batch_size])[0], y[i:i + batch_size],
                                    reduction="sum").item() for i in range(0, len(x), batch_size))
    return float(np.exp(total / len(x)))


@bug("evaluate_perplexity", "leaves_eval_mode", "switches to eval mode and never back")
def _(model, x, y, batch_size=4096):
    _sizes(x, y)
    model.eval()
    with torch.no_grad():
        total = sum(F.cross_entropy(model(x[i:i + batch_size])[0], y[i:i + batch_size],
                                    reduction="sum").item() for i in range(0, len(x), batch_size))
    return float(np.exp(total / len(x)))


@bug("evaluate_perplexity", "drops_last_batch", "range(len(x) // batch_size): the short batch is lost")
def _(model, x, y, batch_size=4096):
    _sizes(x, y)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        batches = max(1, len(x) // batch_size)
        total = sum(F.cross_entropy(model(x[b * batch_size:(b + 1) * batch_size])[0],
                                    y[b * batch_size:(b + 1) * batch_size], reduction="sum").item()
                    for b in range(batches))
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
        loss = F.cross_entropy(model(x[i:i + batch_size])[0], y[i:i + batch_size], reduction="sum")
        loss.backward()
        total += loss.item()
    model.train(was_training)
    return float(np.exp(total / len(x)))
