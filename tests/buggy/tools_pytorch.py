"""Known-buggy answers to the tools_pytorch exercise: mistakes learners really make.

Same layout as ``ch01_bigrams.py``: each function (or class) carries the name of the exercise
part it answers and is registered in ``BUGS[name]`` with a one-line description; the hidden
tests of the notebook must fail every one of them while the reference passes. No answer here
calls the reference of a part of this assignment (``mini_llm.neural_bigram`` or
``mini_llm.gradients``): the grader refuses those to answers.
"""

from __future__ import annotations

import itertools

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ._registry import new_registry

REFERENCE = ("mini_llm.neural_bigram", "mini_llm.gradients")
"""the mini_llm modules that hold the reference of each graded part"""

BUGS, ALTERNATIVES, bug, correct = new_registry()


# -------------------------------------------------------------------------------- one_hot


def _checked(ids, vocab_size):
    """The contract's refusals: ValueError for a size below 1 or an id out of range,
    TypeError for float ids."""
    if not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError("vocab_size must be >= 1")
    if ids.is_floating_point():
        raise TypeError("ids must be integers")
    if ids.numel() and (ids.min() < 0 or ids.max() >= vocab_size):
        raise ValueError("id outside the vocabulary")


@bug("one_hot", "int64_result", "F.one_hot(ids, V) returned as it is: int64, not float32")
def _(ids, vocab_size):
    _checked(ids, vocab_size)
    return F.one_hot(ids.long(), vocab_size)


@bug("one_hot", "width_from_data", "F.one_hot(ids) without num_classes: width max(ids) + 1")
def _(ids, vocab_size):
    _checked(ids, vocab_size)
    if ids.numel() == 0:
        return torch.zeros(*ids.shape, vocab_size)
    return F.one_hot(ids.long()).float()


@bug("one_hot", "one_dimensional_only", "rows[arange(len(ids)), ids] = 1: 1-D ids only")
def _(ids, vocab_size):
    _checked(ids, vocab_size)
    flat = ids.reshape(-1).long()
    rows = torch.zeros(len(flat), vocab_size)
    rows[torch.arange(len(flat)), flat] = 1.0
    return rows


@bug("one_hot", "float64_rows", "np.eye(V)[ids] turned into a tensor: float64")
def _(ids, vocab_size):
    _checked(ids, vocab_size)
    return torch.from_numpy(np.eye(vocab_size)[ids.numpy()])


@bug.input("one_hot", "no_range_check", "torch.eye(V)[ids] unchecked: -1 reads the last row")
def _(ids, vocab_size):
    if ids.is_floating_point():
        raise TypeError("ids must be integers")
    if vocab_size < 1:
        raise ValueError("vocab_size must be >= 1")
    return torch.eye(vocab_size)[ids.long()]


@bug.input("one_hot", "id_equal_to_size_allowed", "checks ids.max() > vocab_size: off by one")
def _(ids, vocab_size):
    if vocab_size < 1:
        raise ValueError("vocab_size must be >= 1")
    if ids.is_floating_point():
        raise TypeError("ids must be integers")
    if ids.numel() and (ids.min() < 0 or ids.max() > vocab_size):
        raise ValueError("id outside the vocabulary")
    rows = torch.zeros(*ids.shape, vocab_size + 1)  # room for the id that slips through
    return rows.scatter_(-1, ids.long().unsqueeze(-1), 1.0)[..., :vocab_size]


@bug.input("one_hot", "float_ids_converted", "float ids quietly turned into ints with .long()")
def _(ids, vocab_size):
    ids = ids.long()
    _checked(ids, vocab_size)
    return torch.zeros(*ids.shape, vocab_size).scatter_(-1, ids.unsqueeze(-1), 1.0)


@bug.input("one_hot", "zero_size_allowed", "checks vocab_size < 0 only: a vocabulary of 0")
def _(ids, vocab_size):
    if vocab_size < 0:
        raise ValueError("vocab_size must not be negative")
    if ids.is_floating_point():
        raise TypeError("ids must be integers")
    if ids.numel() and (ids.min() < 0 or ids.max() >= vocab_size):
        raise ValueError("id outside the vocabulary")
    return torch.zeros(*ids.shape, vocab_size).scatter_(-1, ids.long().unsqueeze(-1), 1.0)


@correct("one_hot", "eye_rows")
def _(ids, vocab_size):
    _checked(ids, vocab_size)
    return torch.eye(vocab_size, dtype=torch.float32)[ids.long()]


@correct("one_hot", "functional_one_hot")
def _(ids, vocab_size):
    _checked(ids, vocab_size)
    return F.one_hot(ids.long(), num_classes=vocab_size).to(torch.float32)


@correct("one_hot", "comparison_with_arange")
def _(ids, vocab_size):
    _checked(ids, vocab_size)
    return (ids.unsqueeze(-1) == torch.arange(vocab_size)).float()


# --------------------------------------------------------------------- numerical_gradient


def _gradient_checks(x, eps):
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError("x must be a floating-point tensor")
    if not eps > 0:
        raise ValueError("eps must be positive")


def _differences(f, x, eps, *, one_sided=False, all_at_once=False, in_place=False):
    """Finite differences with one thing changed: a forward difference, every entry moved
    at once, or x itself perturbed and restored by arithmetic (not exactly)."""
    _gradient_checks(x, eps)
    point = x if in_place else x.detach().clone()
    flat = point.view(-1)
    gradient = torch.zeros_like(point)
    for i in range(flat.numel()):
        if all_at_once:
            gradient.view(-1)[i] = (float(f(point + eps)) - float(f(point - eps))) / (2 * eps)
            continue
        with torch.no_grad():
            flat[i] += eps
            above = float(f(point))
            flat[i] -= eps if one_sided else 2 * eps
            below = float(f(point))
            flat[i] += 0 if one_sided else eps
        gradient.view(-1)[i] = (above - below) / (eps if one_sided else 2 * eps)
    return gradient


@bug("numerical_gradient", "one_sided", "(f(x + eps e_i) - f(x)) / eps: only first-order")
def _(f, x, eps=1e-6):
    return _differences(f, x, eps, one_sided=True)


@bug("numerical_gradient", "all_entries_at_once", "moves every entry by eps together")
def _(f, x, eps=1e-6):
    return _differences(f, x, eps, all_at_once=True)


@bug("numerical_gradient", "x_changed_in_place", "perturbs x itself, restores it by + eps")
def _(f, x, eps=1e-6):
    return _differences(f, x, eps, in_place=True)


@bug("numerical_gradient", "float64_result", "the differences in a NumPy float64 array's dtype")
def _(f, x, eps=1e-6):
    _gradient_checks(x, eps)
    point = x.detach().clone().double()
    gradient = np.zeros(tuple(x.shape))
    for index in np.ndindex(*x.shape):
        original = point[index].item()
        point[index] = original + eps
        above = float(f(point.to(x.dtype)))
        point[index] = original - eps
        below = float(f(point.to(x.dtype)))
        point[index] = original
        gradient[index] = (above - below) / (2 * eps)
    return torch.from_numpy(gradient)


@bug("numerical_gradient", "first_axis_only", "loops over range(len(x)): 1-D x only")
def _(f, x, eps=1e-6):
    _gradient_checks(x, eps)
    point = x.detach().clone()
    gradient = torch.zeros_like(point)
    for i in range(len(point)):
        original = point[i].item()
        point[i] = original + eps
        above = float(f(point))
        point[i] = original - eps
        below = float(f(point))
        point[i] = original
        gradient[i] = (above - below) / (2 * eps)
    return gradient


@bug("numerical_gradient", "item_of_f", "f(point).item(): fails when f returns a float")
def _(f, x, eps=1e-6):
    _gradient_checks(x, eps)
    point = x.detach().clone()
    flat = point.view(-1)
    gradient = torch.zeros_like(point)
    for i in range(flat.numel()):
        original = flat[i].item()
        flat[i] = original + eps
        above = f(point).item()
        flat[i] = original - eps
        below = f(point).item()
        flat[i] = original
        gradient.view(-1)[i] = (above - below) / (2 * eps)
    return gradient


@bug.input("numerical_gradient", "eps_zero_only", "checks eps == 0: negative steps accepted")
def _(f, x, eps=1e-6):
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError("x must be a floating-point tensor")
    if eps == 0:
        raise ValueError("eps must not be zero")
    return _differences(f, x, abs(eps))


@bug.input("numerical_gradient", "no_type_check", "integer x accepted: differences truncated")
def _(f, x, eps=1e-6):
    if not eps > 0:
        raise ValueError("eps must be positive")
    point = x.detach().clone()
    flat = point.view(-1)
    gradient = torch.zeros_like(point)
    for i in range(flat.numel()):
        original = flat[i].item()
        flat[i] = original + eps
        above = float(f(point))
        flat[i] = original - eps
        below = float(f(point))
        flat[i] = original
        gradient.view(-1)[i] = (above - below) / (2 * eps)
    return gradient


@correct("numerical_gradient", "basis_vectors")
def _(f, x, eps=1e-6):
    _gradient_checks(x, eps)
    x = x.detach()
    gradient = torch.empty_like(x)
    for index in itertools.product(*(range(n) for n in x.shape)):
        step = torch.zeros_like(x)
        step[index] = eps
        gradient[index] = (float(f(x + step)) - float(f(x - step))) / (2 * eps)
    return gradient


@correct("numerical_gradient", "flat_copies")
def _(f, x, eps=1e-6):
    _gradient_checks(x, eps)
    flat = x.detach().reshape(-1)
    values = []
    for i in range(flat.numel()):
        above, below = flat.clone(), flat.clone()
        above[i] = flat[i] + eps
        below[i] = flat[i] - eps
        values.append((float(f(above.view(x.shape))) - float(f(below.view(x.shape)))) / (2 * eps))
    return torch.tensor(values, dtype=x.dtype).reshape(x.shape)


# ---------------------------------------------------------------------- gradient_descent


def _descent_checks(learning_rate, steps):
    if not isinstance(steps, int) or steps < 0:
        raise ValueError("steps must be a whole number >= 0")
    if not learning_rate > 0:
        raise ValueError("learning_rate must be positive")


@bug("gradient_descent", "uphill", "x + learning_rate * slope: gradient ascent")
def _(derivative, start, learning_rate, steps):
    _descent_checks(learning_rate, steps)
    points = [float(start)]
    for _ in range(steps):
        points.append(points[-1] + learning_rate * float(derivative(points[-1])))
    return points


@bug("gradient_descent", "slope_at_start", "derivative(start) every step: a straight line")
def _(derivative, start, learning_rate, steps):
    _descent_checks(learning_rate, steps)
    points = [float(start)]
    for _ in range(steps):
        points.append(points[-1] - learning_rate * float(derivative(start)))
    return points


@bug("gradient_descent", "no_start", "returns the steps points after the start, without it")
def _(derivative, start, learning_rate, steps):
    _descent_checks(learning_rate, steps)
    x, points = float(start), []
    for _ in range(steps):
        x = x - learning_rate * float(derivative(x))
        points.append(x)
    return points


@bug("gradient_descent", "tensor_points", "the derivative's 0-d tensors kept: points are tensors")
def _(derivative, start, learning_rate, steps):
    _descent_checks(learning_rate, steps)
    points = [float(start)]
    for _ in range(steps):
        points.append(points[-1] - learning_rate * derivative(points[-1]))
    return points


@bug("gradient_descent", "start_not_float", "[start] as given: an int start stays an int")
def _(derivative, start, learning_rate, steps):
    _descent_checks(learning_rate, steps)
    points = [start]
    for _ in range(steps):
        points.append(points[-1] - learning_rate * float(derivative(points[-1])))
    return points


@bug.input("gradient_descent", "zero_rate_allowed", "checks learning_rate < 0: a rate of 0 runs")
def _(derivative, start, learning_rate, steps):
    if not isinstance(steps, int) or steps < 0:
        raise ValueError("steps must be a whole number >= 0")
    if learning_rate < 0:
        raise ValueError("learning_rate must not be negative")
    points = [float(start)]
    for _ in range(steps):
        points.append(points[-1] - learning_rate * float(derivative(points[-1])))
    return points


@bug.input("gradient_descent", "steps_sign_only", "checks steps < 0 only: 2.5 steps is a TypeError")
def _(derivative, start, learning_rate, steps):
    if steps < 0:
        raise ValueError("steps must not be negative")
    if not learning_rate > 0:
        raise ValueError("learning_rate must be positive")
    points = [float(start)]
    for _ in range(steps):
        points.append(points[-1] - learning_rate * float(derivative(points[-1])))
    return points


@bug.input(
    "gradient_descent", "checks_inside_the_loop", "checks the rate in the loop: 0 steps pass"
)
def _(derivative, start, learning_rate, steps):
    if not isinstance(steps, int) or steps < 0:
        raise ValueError("steps must be a whole number >= 0")
    points = [float(start)]
    for _ in range(steps):
        if not learning_rate > 0:
            raise ValueError("learning_rate must be positive")
        points.append(points[-1] - learning_rate * float(derivative(points[-1])))
    return points


@correct("gradient_descent", "while_loop")
def _(derivative, start, learning_rate, steps):
    _descent_checks(learning_rate, steps)
    x, points = float(start), [float(start)]
    while len(points) <= steps:
        slope = derivative(x)
        x = x - learning_rate * (slope.item() if isinstance(slope, torch.Tensor) else slope)
        points.append(float(x))
    return points


@correct("gradient_descent", "accumulate")
def _(derivative, start, learning_rate, steps):
    _descent_checks(learning_rate, steps)
    step = lambda x, _: x - learning_rate * float(derivative(x))
    return list(itertools.accumulate(range(steps), step, initial=float(start)))


# -------------------------------------------------------------------------- NeuralBigram


class _Table(nn.Module):
    """The contract's __init__: one zero nn.Embedding(V, V) named logits_table."""

    def __init__(self, vocab_size):
        super().__init__()
        self.logits_table = nn.Embedding(vocab_size, vocab_size)
        nn.init.zeros_(self.logits_table.weight)


@bug("NeuralBigram", "random_init", "nn.Embedding's own N(0, 1) weights: not zero at the start")
class _(nn.Module):
    def __init__(self, vocab_size):
        super().__init__()
        self.logits_table = nn.Embedding(vocab_size, vocab_size)

    def forward(self, ids):
        return self.logits_table(ids)


@bug("NeuralBigram", "linear_layer", "nn.Linear(V, V, bias=False) on one-hot rows: transposed")
class _(nn.Module):
    def __init__(self, vocab_size):
        super().__init__()
        self.vocab_size = vocab_size
        self.logits_table = nn.Linear(vocab_size, vocab_size, bias=False)
        nn.init.zeros_(self.logits_table.weight)

    def forward(self, ids):
        return self.logits_table(F.one_hot(ids, self.vocab_size).float())


@bug("NeuralBigram", "softmax_output", "forward returns softmax probabilities, not logits")
class _(_Table):
    def forward(self, ids):
        return F.softmax(self.logits_table(ids), dim=-1)


@bug(
    "NeuralBigram", "detached_table", "rows read from weight.detach(): autograd never reaches them"
)
class _(_Table):
    def forward(self, ids):
        return self.logits_table.weight.detach()[ids]


@bug("NeuralBigram", "numpy_lookup", "rows looked up in NumPy, wrapped with requires_grad=True")
class _(_Table):
    def forward(self, ids):
        rows = self.logits_table.weight.detach().numpy()[ids.numpy()]
        return torch.tensor(rows, requires_grad=True)


@bug("NeuralBigram", "flattened_ids", "self.logits_table(ids.view(-1)): (N, V) for every shape")
class _(_Table):
    def forward(self, ids):
        return self.logits_table(ids.reshape(-1))


@bug("NeuralBigram", "with_bias", "an embedding table and a bias: a second parameter")
class _(_Table):
    def __init__(self, vocab_size):
        super().__init__(vocab_size)
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, ids):
        return self.logits_table(ids) + self.bias


@correct("NeuralBigram", "one_hot_product")
class _(_Table):
    def forward(self, ids):
        weight = self.logits_table.weight
        return F.one_hot(ids.long(), weight.shape[0]).to(weight.dtype) @ weight


@correct("NeuralBigram", "pretrained_zeros_indexed")
class _(nn.Module):
    def __init__(self, vocab_size):
        super().__init__()
        self.logits_table = nn.Embedding.from_pretrained(
            torch.zeros(vocab_size, vocab_size), freeze=False
        )

    def forward(self, ids):
        return self.logits_table.weight[ids]


# ------------------------------------------------------------------ bigram_training_step


@bug("bigram_training_step", "no_zero_grad", "never clears the gradients: they pile up")
def _(model, optimizer, inputs, targets):
    loss = F.cross_entropy(model(inputs), targets)
    loss.backward()
    optimizer.step()
    return loss.item()


@bug("bigram_training_step", "loss_after_step", "returns a second forward pass after the step")
def _(model, optimizer, inputs, targets):
    optimizer.zero_grad()
    F.cross_entropy(model(inputs), targets).backward()
    optimizer.step()
    with torch.no_grad():
        return F.cross_entropy(model(inputs), targets).item()


@bug("bigram_training_step", "summed_loss", "reduction='sum': gradients N times too large")
def _(model, optimizer, inputs, targets):
    loss = F.cross_entropy(model(inputs), targets, reduction="sum")
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


@bug("bigram_training_step", "step_before_backward", "optimizer.step() before loss.backward()")
def _(model, optimizer, inputs, targets):
    loss = F.cross_entropy(model(inputs), targets)
    optimizer.zero_grad()
    optimizer.step()
    loss.backward()
    return loss.item()


@bug("bigram_training_step", "returns_tensor", "returns the loss tensor, detached, not a float")
def _(model, optimizer, inputs, targets):
    loss = F.cross_entropy(model(inputs), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach()


@bug("bigram_training_step", "softmax_first", "F.cross_entropy of softmax probabilities")
def _(model, optimizer, inputs, targets):
    loss = F.cross_entropy(F.softmax(model(inputs), dim=-1), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


@bug("bigram_training_step", "update_by_hand", "p -= 0.1 * p.grad by hand: the optimizer ignored")
def _(model, optimizer, inputs, targets):
    loss = F.cross_entropy(model(inputs), targets)
    model.zero_grad()
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= 0.1 * p.grad
    return loss.item()


@bug("bigram_training_step", "zero_grad_after_step", "zero_grad() after step(): stale grads get in")
def _(model, optimizer, inputs, targets):
    loss = F.cross_entropy(model(inputs), targets)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss.item()


@correct("bigram_training_step", "log_softmax_by_hand")
def _(model, optimizer, inputs, targets):
    optimizer.zero_grad(set_to_none=True)
    log_probs = F.log_softmax(model(inputs), dim=-1)
    loss = -log_probs[torch.arange(len(targets)), targets].mean()
    loss.backward()
    optimizer.step()
    return float(loss)


@correct("bigram_training_step", "model_zero_grad_nll")
def _(model, optimizer, inputs, targets):
    model.zero_grad()
    logits = model(inputs)
    loss = F.nll_loss(F.log_softmax(logits, dim=1), targets)
    loss.backward()
    optimizer.step()
    return loss.item()
