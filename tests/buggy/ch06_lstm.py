"""Known-buggy answers to the ch06_lstm exercise: mistakes learners really make.

Same layout as ``ch05_rnn.py``: each function carries the name of the exercise part it answers
and is registered in ``BUGS[name]`` with a one-line description; the hidden tests of the notebook
must fail every one of them while the reference passes. ``ALTERNATIVES`` (at the end) holds
correct answers written differently (slices instead of ``chunk``, one weight slice per gate,
``torch.addmm``, ``F.linear`` and ``torch.lerp``, other draw orders for the task), which the
hidden tests must accept. The cells must be differentiable by autograd, so a NumPy step (even one
wrapped with ``requires_grad=True``) is a bug here. No entry calls the reference of a part of
this assignment: the grader withholds those (``like=`` only borrows a signature).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from mini_llm.lstm import first_token_task, gru_step, lstm_forward, lstm_step

from ._registry import new_registry

REFERENCE = ("mini_llm.lstm",)
"""the mini_llm modules that hold the reference of each graded part"""

BUGS, ALTERNATIVES, bug, correct = new_registry()
derived = bug.derived


def _pre(x_t, h_prev, W_ih, W_hh, b):
    """The four LSTM pre-activations i, f, g, o."""
    return (x_t @ W_ih.T + h_prev @ W_hh.T + b).chunk(4, dim=-1)


def _lstm_step(
    x_t,
    h_prev,
    c_prev,
    W_ih,
    W_hh,
    b,
    *,
    order="ifgo",
    forget=torch.sigmoid,
    candidate=torch.tanh,
    shown=torch.tanh,
):
    """A correct LSTM step (the forward bugs share it); knobs: the ``order`` of the four blocks
    and the functions applied to the forget gate, to the candidate and to the cell state."""
    gates = dict(zip(order, _pre(x_t, h_prev, W_ih, W_hh, b), strict=True))
    c = forget(gates["f"]) * c_prev + torch.sigmoid(gates["i"]) * candidate(gates["g"])
    return torch.sigmoid(gates["o"]) * shown(c), c


# ------------------------------------------------------------------------------- lstm_step


_step_bug = bug.variants("lstm_step", _lstm_step, like=lstm_step)


_step_bug(
    "gate_order_ifog",
    "blocks read as i, f, o, g (the order of some papers), not torch's i, f, g, o",
    order="ifog",
)
_step_bug("tanh_forget_gate", "tanh instead of the sigmoid on the forget gate", forget=torch.tanh)
_step_bug(
    "no_tanh_on_c",
    "h_t = o * c_t: the cell state is shown without its tanh",
    shown=lambda c: c,
)
_step_bug(
    "no_forget_gate",
    "c_t = c_prev + i * g: the old memory is added unscaled",
    forget=lambda f: 1,
)
_step_bug(
    "sigmoid_candidate",
    "sigmoid on the candidate g, so new content is never negative",
    candidate=torch.sigmoid,
)
_step_bug("returns_c_h", "returns (c_t, h_t): the pair swapped", returns=lambda hc, a: hc[::-1])


# ---------------------------------------------------------------------------- lstm_forward


def _lstm_forward(
    xs,
    h0,
    c0,
    W_ih,
    W_hh,
    b,
    *,
    carry_c=True,
    collect="h",
    with_h0=False,
    stacked=True,
    c_early=False,
):
    """The right forward pass; knobs: ``carry_c`` (False: every step starts from c0), which
    state ``collect`` gathers, ``with_h0`` in front of the states, ``stacked`` (False: h_T
    alone) and ``c_early`` (the final c is the one before the last step)."""
    h, c = h0, c0
    states, c_before = [h0] if with_h0 else [], c0
    for t in range(xs.shape[1]):
        c_before = c
        h, c = _lstm_step(xs[:, t], h, c if carry_c else c0, W_ih, W_hh, b)
        states.append(c if collect == "c" else h)
    return torch.stack(states, dim=1) if stacked else h, (h, c_before if c_early else c)


_forward_bug = bug.variants("lstm_forward", _lstm_forward, like=lstm_forward)


_forward_bug(
    "ignores_h0_c0",
    "every sequence starts from zero states: the given h0 and c0 are ignored",
    h0=derived(lambda a: torch.zeros_like(a.h0)),
    c0=derived(lambda a: torch.zeros_like(a.c0)),
)
_forward_bug(
    "c_not_carried", "the cell state is reset to c0 at every step; only h is carried", carry_c=False
)
_forward_bug(
    "cell_states_as_hs", "hs collects the cell states c_t instead of the hidden states", collect="c"
)
_forward_bug("last_state_only", "hs is only h_T, shape (B, H)", stacked=False)
_forward_bug("includes_h0", "h0 stacked in front of the states: T + 1 of them", with_h0=True)
_forward_bug(
    "final_c_one_step_early",
    "the final pair is (h_T, c_{T-1}): c saved before the last update",
    c_early=True,
)


# -------------------------------------------------------------------------------- gru_step


def _gru_step(x_t, h_prev, W_ih, W_hh, b_ih, b_hh, *, order="rzn", candidate=None, swap_z=False):
    """The right GRU step; knobs: the ``order`` of the three blocks, the ``candidate`` n as
    ``candidate(x_n, r, u_n, h_prev, W_hn, b_hn)``, and ``swap_z`` (the update gate's roles)."""
    x_parts = (x_t @ W_ih.T + b_ih).chunk(3, dim=-1)
    u_parts = (h_prev @ W_hh.T + b_hh).chunk(3, dim=-1)
    x, u = dict(zip(order, x_parts, strict=True)), dict(zip(order, u_parts, strict=True))
    r, z = torch.sigmoid(x["r"] + u["r"]), torch.sigmoid(x["z"] + u["z"])
    if candidate is None:
        n = torch.tanh(x["n"] + r * u["n"])
    else:
        H = h_prev.shape[1]
        n = candidate(x["n"], r, u["n"], h_prev, W_hh[2 * H :], b_hh[2 * H :])
    return z * n + (1 - z) * h_prev if swap_z else (1 - z) * n + z * h_prev


_gru_bug = bug.variants("gru_step", _gru_step, like=gru_step)


_gru_bug(
    "reset_after_bias",
    "n = tanh(x_n + r * (h W_hnᵀ) + b_hn): the reset gate leaves out the recurrent bias",
    candidate=lambda x_n, r, u_n, h, W_hn, b_hn: torch.tanh(x_n + r * (h @ W_hn.T) + b_hn),
)
_gru_bug(
    "z_swapped",
    "h_t = z * n + (1 - z) * h_prev: the update gate's roles swapped",
    swap_z=True,
)
_gru_bug(
    "reset_before_matmul",
    "n = tanh(x_n + (r * h) W_hnᵀ + b_hn): the paper's variant, not torch's GRU",
    candidate=lambda x_n, r, u_n, h, W_hn, b_hn: torch.tanh(x_n + (r * h) @ W_hn.T + b_hn),
)
_gru_bug("chunk_order_zrn", "blocks read as z, r, n instead of r, z, n", order="zrn")
_gru_bug(
    "no_reset_gate",
    "n = tanh(x_n + u_n): the reset gate is computed but never applied",
    candidate=lambda x_n, r, u_n, h, W_hn, b_hn: torch.tanh(x_n + u_n),
)


# ------------------------------------------------------------------------ first_token_task


def _task(batch_size, length, n_classes, generator, *, checked=True, low=None, extra=0, last=False):
    """The right batch (with the bug file's checks, ``checked``); knobs: the ``low``est
    distractor, ``extra`` distractors, and the class put ``last``."""
    if checked and (length < 1 or n_classes < 2):
        raise ValueError("need length >= 1 and n_classes >= 2")
    classes = torch.randint(n_classes, (batch_size,), generator=generator)
    low = n_classes if low is None else low
    shape = (batch_size, max(length - 1 + extra, 0))
    rest = torch.randint(low, 2 * n_classes, shape, generator=generator)
    return torch.cat([rest, classes[:, None]] if last else [classes[:, None], rest], dim=1), classes


_task_bug = bug.variants("first_token_task", _task, like=first_token_task)


_task_bug(
    "distractors_in_class_range",
    "distractors drawn from 0 .. 2K - 1, so they include the classes",
    low=0,
)
_task_bug("class_at_the_end", "the class token is put last instead of first", last=True)
_task_bug("length_plus_one", "length distractors after the class: length + 1 tokens", extra=1)
_task_bug(
    "ignores_generator",
    "draws from torch's global generator: the seed is ignored",
    generator=None,
)
_task_bug(
    "own_fixed_seed",
    "makes its own generator with seed 0: every seed gives the same batch",
    generator=derived(lambda a: torch.Generator().manual_seed(0)),
)
_task_bug(
    "label_is_last_token",
    "y = x[:, -1]: the target is the last token, not the class",
    returns=lambda xy, a: (xy[0], xy[0][:, -1]),
)


@bug.input("first_token_task", "no_input_check", "length 0 and a single class are not refused")
def _(batch_size, length, n_classes, generator):
    return _task(batch_size, length, n_classes, generator, checked=False)


# ------------------------------------------------------ dtypes and a batch of one (issue 18)


@bug("lstm_forward", "float32_buffer", "states stored in torch.zeros(B, T, H): float32, rounded")
def _(xs, h0, c0, W_ih, W_hh, b):
    B, T, _ = xs.shape
    hs = torch.zeros(B, T, h0.shape[1])
    h, c = h0, c0
    for t in range(T):
        h, c = _lstm_step(xs[:, t], h, c, W_ih, W_hh, b)
        hs[:, t] = h
    return hs, (h, c)


_task_bug(
    "squeezed_classes",
    "y = x[:, :1].squeeze(): a batch of one gets a 0-d y",
    returns=lambda xy, a: (xy[0], xy[0][:, :1].squeeze()),
)


# ---------------------------------------------------------------------------- alternatives


@correct("lstm_step", "slices_and_addmm")
def _(x_t, h_prev, c_prev, W_ih, W_hh, b):
    H = h_prev.shape[1]
    a = torch.addmm(b, x_t, W_ih.t()) + torch.mm(h_prev, W_hh.t())
    i = torch.sigmoid(a[:, :H])
    f = torch.sigmoid(a[:, H : 2 * H])
    g = torch.tanh(a[:, 2 * H : 3 * H])
    o = torch.sigmoid(a[:, 3 * H :])
    c = f * c_prev + i * g
    return o * torch.tanh(c), c


@correct("lstm_step", "per_gate_weights")
def _(x_t, h_prev, c_prev, W_ih, W_hh, b):
    H = h_prev.shape[1]

    def gate(k):
        rows = slice(k * H, (k + 1) * H)
        return F.linear(x_t, W_ih[rows], b[rows]) + F.linear(h_prev, W_hh[rows])

    c_new = torch.sigmoid(gate(1)) * c_prev + torch.sigmoid(gate(0)) * torch.tanh(gate(2))
    return torch.sigmoid(gate(3)) * torch.tanh(c_new), c_new


@correct("lstm_forward", "per_sequence_preallocated")
def _(xs, h0, c0, W_ih, W_hh, b):
    B, T, _ = xs.shape
    H = h0.shape[1]
    hs = torch.empty(B, T, H, dtype=xs.dtype)
    h_last, c_last = torch.empty_like(h0), torch.empty_like(c0)
    for s in range(B):  # one sequence at a time
        h, c = h0[s : s + 1], c0[s : s + 1]
        for t in range(T):
            a = xs[s : s + 1, t] @ W_ih.T + h @ W_hh.T + b
            i, f, g, o = (
                torch.sigmoid(a[:, :H]),
                torch.sigmoid(a[:, H : 2 * H]),
                torch.tanh(a[:, 2 * H : 3 * H]),
                torch.sigmoid(a[:, 3 * H :]),
            )
            c = f * c + i * g
            h = o * torch.tanh(c)
            hs[s, t] = h[0]
        h_last[s], c_last[s] = h[0], c[0]
    return hs, (h_last, c_last)


@correct("gru_step", "slices_and_per_gate_weights")
def _(x_t, h_prev, W_ih, W_hh, b_ih, b_hh):
    H = h_prev.shape[1]
    blocks = [slice(0, H), slice(H, 2 * H), slice(2 * H, 3 * H)]
    x_r, x_z, x_n = (x_t @ W_ih[k].T + b_ih[k] for k in blocks)
    u_r, u_z, u_n = (torch.addmm(b_hh[k], h_prev, W_hh[k].T) for k in blocks)
    r = 1 / (1 + torch.exp(-(x_r + u_r)))
    z = 1 / (1 + torch.exp(-(x_z + u_z)))
    n = torch.tanh(x_n + r * u_n)
    return h_prev + (1 - z) * (n - h_prev)  # = (1 - z) n + z h_prev


@correct("first_token_task", "distractors_first_then_offset")
def _(batch_size, length, n_classes, generator):
    if length < 1:
        raise ValueError("length must be at least 1")
    if n_classes < 2:
        raise ValueError("n_classes must be at least 2")
    x = torch.randint(0, n_classes, (batch_size, length), generator=generator)  # one draw
    x[:, 1:] += n_classes  # distractors moved into their own range
    return x, x[:, 0].clone()


@correct("first_token_task", "multinomial_per_column")
def _(batch_size, length, n_classes, generator):
    if length < 1 or n_classes < 2:
        raise ValueError("need length >= 1 and n_classes >= 2")
    uniform = torch.ones(n_classes)
    columns = [
        torch.multinomial(uniform, batch_size, replacement=True, generator=generator)
        + (n_classes if t > 0 else 0)
        for t in range(length - 1, -1, -1)
    ]
    x = torch.stack(columns[::-1], dim=1)
    return x, x[:, 0].clone()


# ------------------------------------------ generated inputs and autograd (issue 31): new bugs


@bug(
    "lstm_step",
    "numpy_wrapped_requires_grad",
    "the step in NumPy, wrapped in torch.tensor(..., requires_grad=True): a flag, no graph",
)
def _(x_t, h_prev, c_prev, W_ih, W_hh, b):
    x, h, c = (t.detach().numpy() for t in (x_t, h_prev, c_prev))
    a = x @ W_ih.detach().numpy().T + h @ W_hh.detach().numpy().T + b.detach().numpy()
    i, f, g, o = np.split(a, 4, axis=-1)

    def sig(v):
        return 1 / (1 + np.exp(-v))

    c_new = sig(f) * c + sig(i) * np.tanh(g)
    h_new = sig(o) * np.tanh(c_new)
    return torch.tensor(h_new, requires_grad=True), torch.tensor(c_new, requires_grad=True)


_step_bug(
    "detaches_c_prev",
    "c_prev.detach(): the memory is kept out of the graph, no gradient reaches c_prev",
    c_prev=derived(lambda a: a.c_prev.detach()),
)
_step_bug(
    "sigmoid_from_exp_ratio",
    "forget gate as exp(a) / (1 + exp(a)): nan once a is large",
    forget=lambda a: torch.exp(a) / (1 + torch.exp(a)),
)
_step_bug(
    "casts_to_float32",
    "the cell state computed in .float(): float64 inputs give float32 results",
    shown=lambda c: torch.tanh(c.float()),
    returns=lambda hc, a: (hc[0], hc[1].float()),
)


@bug(
    "lstm_forward",
    "detaches_between_steps",
    "h, c = h.detach(), c.detach() after every step: right states, no gradient through time",
)
def _(xs, h0, c0, W_ih, W_hh, b):
    h, c, states = h0, c0, []
    for t in range(xs.shape[1]):
        h, c = _lstm_step(xs[:, t], h, c, W_ih, W_hh, b)
        states.append(h)
        if t < xs.shape[1] - 1:
            h, c = h.detach(), c.detach()
    return torch.stack(states, dim=1), (h, c)


@bug(
    "lstm_forward",
    "updates_c0_in_place",
    "c = c0, then c *= f; c += i * g: changes the caller's c0",
)
def _(xs, h0, c0, W_ih, W_hh, b):
    h, c, states = h0, c0, []
    for t in range(xs.shape[1]):
        i, f, g, o = _pre(xs[:, t], h, W_ih, W_hh, b)
        c *= torch.sigmoid(f)
        c += torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        states.append(h)
    return torch.stack(states, dim=1), (h, c)


@bug(
    "lstm_forward",
    "float64_buffer",
    "states stored in torch.zeros(..., dtype=torch.float64): float32 inputs come back float64",
)
def _(xs, h0, c0, W_ih, W_hh, b):
    B, T, _ = xs.shape
    hs = torch.zeros(B, T, h0.shape[1], dtype=torch.float64)
    h, c = h0, c0
    for t in range(T):
        h, c = _lstm_step(xs[:, t], h, c, W_ih, W_hh, b)
        hs[:, t] = h
    return hs, (h, c)


@bug(
    "gru_step",
    "numpy_wrapped_requires_grad",
    "the step in NumPy, wrapped in torch.tensor(..., requires_grad=True): a flag, no graph",
)
def _(x_t, h_prev, W_ih, W_hh, b_ih, b_hh):
    x, h = x_t.detach().numpy(), h_prev.detach().numpy()
    x_r, x_z, x_n = np.split(x @ W_ih.detach().numpy().T + b_ih.detach().numpy(), 3, axis=-1)
    u_r, u_z, u_n = np.split(h @ W_hh.detach().numpy().T + b_hh.detach().numpy(), 3, axis=-1)
    r, z = 1 / (1 + np.exp(-(x_r + u_r))), 1 / (1 + np.exp(-(x_z + u_z)))
    n = np.tanh(x_n + r * u_n)
    return torch.tensor((1 - z) * n + z * h, requires_grad=True)


@bug(
    "gru_step",
    "split_not_chunk",
    "torch.split(a, 3, dim=-1): blocks of 3 columns, right only when H = 3",
)
def _(x_t, h_prev, W_ih, W_hh, b_ih, b_hh):
    x_r, x_z, x_n = torch.split(x_t @ W_ih.T + b_ih, 3, dim=-1)[:3]
    u_r, u_z, u_n = torch.split(h_prev @ W_hh.T + b_hh, 3, dim=-1)[:3]
    r, z = torch.sigmoid(x_r + u_r), torch.sigmoid(x_z + u_z)
    n = torch.tanh(x_n + r * u_n)
    return (1 - z) * n + z * h_prev


_gru_bug(
    "tanh_from_exponentials",
    "the candidate's tanh as (e^2a - 1) / (e^2a + 1): nan once a is large",
    candidate=lambda x_n, r, u_n, h, W_hn, b_hn: (
        (torch.exp(2 * (x_n + r * u_n)) - 1) / (torch.exp(2 * (x_n + r * u_n)) + 1)
    ),
)
_gru_bug(
    "casts_to_float32",
    "h_prev.float() in the mix: float64 inputs give a float32 state",
    returns=lambda h, a: h.float(),
)


def _task_checked(check):
    """``_task`` behind the learner's own ``check(length, n_classes)`` instead of the right one."""

    def task(batch_size, length, n_classes, generator):
        check(length, n_classes)
        return _task(batch_size, length, n_classes, generator, checked=False)

    return task


def _only_zero_length(length, n_classes):
    if length == 0 or n_classes < 2:
        raise ValueError("need length >= 1 and n_classes >= 2")


def _only_one_class(length, n_classes):
    if length < 1 or n_classes == 1:
        raise ValueError("need length >= 1 and n_classes >= 2")


def _asserted(length, n_classes):
    assert length >= 1 and n_classes >= 2, "need length >= 1 and n_classes >= 2"


bug.input(
    "first_token_task", "refuses_only_length_zero", "if length == 0: negative lengths slip by"
)(_task_checked(_only_zero_length))
bug.input("first_token_task", "refuses_only_one_class", "if n_classes == 1: 0 or fewer slip by")(
    _task_checked(_only_one_class)
)
bug.input(
    "first_token_task",
    "assert_not_valueerror",
    "assert length >= 1 ...: AssertionError, not ValueError",
)(_task_checked(_asserted))


@bug.input(
    "first_token_task",
    "checks_after_drawing",
    "draws first, checks after: torch.randint's own RuntimeError comes first for bad sizes",
)
def _(batch_size, length, n_classes, generator):
    classes = torch.randint(n_classes, (batch_size,), generator=generator)
    rest = torch.randint(n_classes, 2 * n_classes, (batch_size, length - 1), generator=generator)
    if length < 1 or n_classes < 2:
        raise ValueError("need length >= 1 and n_classes >= 2")
    return torch.cat([classes[:, None], rest], dim=1), classes


@bug(
    "first_token_task",
    "classes_from_one",
    "torch.randint(1, n_classes, ...): class 0 never appears",
)
def _(batch_size, length, n_classes, generator):
    if length < 1 or n_classes < 2:
        raise ValueError("need length >= 1 and n_classes >= 2")
    classes = torch.randint(1, n_classes, (batch_size,), generator=generator)
    rest = torch.randint(n_classes, 2 * n_classes, (batch_size, length - 1), generator=generator)
    return torch.cat([classes[:, None], rest], dim=1), classes


@bug(
    "first_token_task",
    "high_off_by_one",
    "distractors from torch.randint(K, 2K - 1): the largest distractor never appears",
)
def _(batch_size, length, n_classes, generator):
    if length < 1 or n_classes < 2:
        raise ValueError("need length >= 1 and n_classes >= 2")
    classes = torch.randint(n_classes, (batch_size,), generator=generator)
    rest = torch.randint(
        n_classes, 2 * n_classes - 1, (batch_size, length - 1), generator=generator
    )
    return torch.cat([classes[:, None], rest], dim=1), classes


# ------------------------------------------------- correct, written differently (issue 31)


@correct("lstm_forward", "linear_then_unbind")
def _(xs, h0, c0, W_ih, W_hh, b):
    h, c, states = h0, c0, []
    for a_x in F.linear(xs, W_ih, b).unbind(dim=1):
        i, f, g, o = torch.addmm(a_x, h, W_hh.t()).chunk(4, dim=1)
        c = torch.addcmul(torch.sigmoid(f) * c, torch.sigmoid(i), torch.tanh(g))
        h = torch.sigmoid(o) * torch.tanh(c)
        states.append(h.unsqueeze(1))
    return torch.cat(states, dim=1), (h, c)


@correct("gru_step", "linear_and_lerp")
def _(x_t, h_prev, W_ih, W_hh, b_ih, b_hh):
    gx = F.linear(x_t, W_ih, b_ih)
    gh = F.linear(h_prev, W_hh, b_hh)
    H = h_prev.shape[-1]
    r = torch.sigmoid(gx[..., :H] + gh[..., :H])
    z = torch.sigmoid(gx[..., H : 2 * H] + gh[..., H : 2 * H])
    n = torch.tanh(gx[..., 2 * H :] + r * gh[..., 2 * H :])
    return torch.lerp(n, h_prev, z)  # n + z * (h_prev - n)


@correct("first_token_task", "row_by_row")
def _(batch_size, length, n_classes, generator):
    if length < 1 or n_classes < 2:
        raise ValueError("need length >= 1 and n_classes >= 2")
    rows, classes = [], []
    for _ in range(batch_size):
        k = int(torch.randint(n_classes, (), generator=generator))
        rest = torch.randint(n_classes, 2 * n_classes, (length - 1,), generator=generator)
        rows.append(torch.cat([torch.tensor([k]), rest]))
        classes.append(k)
    return torch.stack(rows), torch.tensor(classes, dtype=torch.int64)
