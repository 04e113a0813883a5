"""Known-buggy answers to the ch06_lstm exercise: mistakes learners really make.

Same layout as ``ch05_rnn.py``: each function carries the name of the exercise part it answers
and is registered in ``BUGS[name]`` with a one-line description; the hidden tests of the notebook
must fail every one of them while the reference passes. ``ALTERNATIVES`` (at the end) holds
correct answers written differently (slices instead of ``chunk``, one weight slice per gate,
``torch.addmm``, NumPy, other draw orders for the task), which the hidden tests must accept.
"""

from __future__ import annotations

import numpy as np
import torch

from ._registry import new_registry

REFERENCE = ("mini_llm.lstm",)
"""the mini_llm modules that hold the reference of each graded part"""

BUGS, ALTERNATIVES, bug, correct = new_registry()


def _pre(x_t, h_prev, W_ih, W_hh, b):
    """The four LSTM pre-activations i, f, g, o."""
    return (x_t @ W_ih.T + h_prev @ W_hh.T + b).chunk(4, dim=-1)


def _step(x_t, h, c, W_ih, W_hh, b):
    """A correct LSTM step (the forward bugs share it)."""
    i, f, g, o = _pre(x_t, h, W_ih, W_hh, b)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


# ------------------------------------------------------------------------------- lstm_step


@bug(
    "lstm_step",
    "gate_order_ifog",
    "blocks read as i, f, o, g (the order of some papers), not torch's i, f, g, o",
)
def _(x_t, h_prev, c_prev, W_ih, W_hh, b):
    i, f, o, g = _pre(x_t, h_prev, W_ih, W_hh, b)
    c = torch.sigmoid(f) * c_prev + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


@bug("lstm_step", "tanh_forget_gate", "tanh instead of the sigmoid on the forget gate")
def _(x_t, h_prev, c_prev, W_ih, W_hh, b):
    i, f, g, o = _pre(x_t, h_prev, W_ih, W_hh, b)
    c = torch.tanh(f) * c_prev + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


@bug("lstm_step", "no_tanh_on_c", "h_t = o * c_t: the cell state is shown without its tanh")
def _(x_t, h_prev, c_prev, W_ih, W_hh, b):
    i, f, g, o = _pre(x_t, h_prev, W_ih, W_hh, b)
    c = torch.sigmoid(f) * c_prev + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * c, c


@bug("lstm_step", "no_forget_gate", "c_t = c_prev + i * g: the old memory is added unscaled")
def _(x_t, h_prev, c_prev, W_ih, W_hh, b):
    i, _, g, o = _pre(x_t, h_prev, W_ih, W_hh, b)
    c = c_prev + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


@bug(
    "lstm_step", "sigmoid_candidate", "sigmoid on the candidate g, so new content is never negative"
)
def _(x_t, h_prev, c_prev, W_ih, W_hh, b):
    i, f, g, o = _pre(x_t, h_prev, W_ih, W_hh, b)
    c = torch.sigmoid(f) * c_prev + torch.sigmoid(i) * torch.sigmoid(g)
    return torch.sigmoid(o) * torch.tanh(c), c


@bug("lstm_step", "returns_c_h", "returns (c_t, h_t): the pair swapped")
def _(x_t, h_prev, c_prev, W_ih, W_hh, b):
    h, c = _step(x_t, h_prev, c_prev, W_ih, W_hh, b)
    return c, h


# ---------------------------------------------------------------------------- lstm_forward


@bug(
    "lstm_forward",
    "ignores_h0_c0",
    "every sequence starts from zero states: the given h0 and c0 are ignored",
)
def _(xs, h0, c0, W_ih, W_hh, b):
    h, c, states = torch.zeros_like(h0), torch.zeros_like(c0), []
    for t in range(xs.shape[1]):
        h, c = _step(xs[:, t], h, c, W_ih, W_hh, b)
        states.append(h)
    return torch.stack(states, dim=1), (h, c)


@bug(
    "lstm_forward",
    "c_not_carried",
    "the cell state is reset to c0 at every step; only h is carried",
)
def _(xs, h0, c0, W_ih, W_hh, b):
    h, c, states = h0, c0, []
    for t in range(xs.shape[1]):
        h, c = _step(xs[:, t], h, c0, W_ih, W_hh, b)
        states.append(h)
    return torch.stack(states, dim=1), (h, c)


@bug(
    "lstm_forward",
    "cell_states_as_hs",
    "hs collects the cell states c_t instead of the hidden states",
)
def _(xs, h0, c0, W_ih, W_hh, b):
    h, c, states = h0, c0, []
    for t in range(xs.shape[1]):
        h, c = _step(xs[:, t], h, c, W_ih, W_hh, b)
        states.append(c)
    return torch.stack(states, dim=1), (h, c)


@bug("lstm_forward", "last_state_only", "hs is only h_T, shape (B, H)")
def _(xs, h0, c0, W_ih, W_hh, b):
    h, c = h0, c0
    for t in range(xs.shape[1]):
        h, c = _step(xs[:, t], h, c, W_ih, W_hh, b)
    return h, (h, c)


@bug("lstm_forward", "includes_h0", "h0 stacked in front of the states: T + 1 of them")
def _(xs, h0, c0, W_ih, W_hh, b):
    h, c, states = h0, c0, [h0]
    for t in range(xs.shape[1]):
        h, c = _step(xs[:, t], h, c, W_ih, W_hh, b)
        states.append(h)
    return torch.stack(states, dim=1), (h, c)


@bug(
    "lstm_forward",
    "final_c_one_step_early",
    "the final pair is (h_T, c_{T-1}): c saved before the last update",
)
def _(xs, h0, c0, W_ih, W_hh, b):
    h, c, states = h0, c0, []
    for t in range(xs.shape[1]):
        c_before = c
        h, c = _step(xs[:, t], h, c, W_ih, W_hh, b)
        states.append(h)
    return torch.stack(states, dim=1), (h, c_before)


# -------------------------------------------------------------------------------- gru_step


def _gru_parts(x_t, h_prev, W_ih, W_hh, b_ih, b_hh):
    return (x_t @ W_ih.T + b_ih).chunk(3, dim=-1), (h_prev @ W_hh.T + b_hh).chunk(3, dim=-1)


@bug(
    "gru_step",
    "reset_after_bias",
    "n = tanh(x_n + r * (h W_hnᵀ) + b_hn): the reset gate leaves out the recurrent bias",
)
def _(x_t, h_prev, W_ih, W_hh, b_ih, b_hh):
    (x_r, x_z, x_n), (u_r, u_z, _) = _gru_parts(x_t, h_prev, W_ih, W_hh, b_ih, b_hh)
    H = h_prev.shape[1]
    r, z = torch.sigmoid(x_r + u_r), torch.sigmoid(x_z + u_z)
    n = torch.tanh(x_n + r * (h_prev @ W_hh[2 * H :].T) + b_hh[2 * H :])
    return (1 - z) * n + z * h_prev


@bug("gru_step", "z_swapped", "h_t = z * n + (1 - z) * h_prev: the update gate's roles swapped")
def _(x_t, h_prev, W_ih, W_hh, b_ih, b_hh):
    (x_r, x_z, x_n), (u_r, u_z, u_n) = _gru_parts(x_t, h_prev, W_ih, W_hh, b_ih, b_hh)
    r, z = torch.sigmoid(x_r + u_r), torch.sigmoid(x_z + u_z)
    n = torch.tanh(x_n + r * u_n)
    return z * n + (1 - z) * h_prev


@bug(
    "gru_step",
    "reset_before_matmul",
    "n = tanh(x_n + (r * h) W_hnᵀ + b_hn): the paper's variant, not torch's GRU",
)
def _(x_t, h_prev, W_ih, W_hh, b_ih, b_hh):
    (x_r, x_z, x_n), (u_r, u_z, _) = _gru_parts(x_t, h_prev, W_ih, W_hh, b_ih, b_hh)
    H = h_prev.shape[1]
    r, z = torch.sigmoid(x_r + u_r), torch.sigmoid(x_z + u_z)
    n = torch.tanh(x_n + (r * h_prev) @ W_hh[2 * H :].T + b_hh[2 * H :])
    return (1 - z) * n + z * h_prev


@bug("gru_step", "chunk_order_zrn", "blocks read as z, r, n instead of r, z, n")
def _(x_t, h_prev, W_ih, W_hh, b_ih, b_hh):
    (x_z, x_r, x_n), (u_z, u_r, u_n) = _gru_parts(x_t, h_prev, W_ih, W_hh, b_ih, b_hh)
    r, z = torch.sigmoid(x_r + u_r), torch.sigmoid(x_z + u_z)
    n = torch.tanh(x_n + r * u_n)
    return (1 - z) * n + z * h_prev


@bug(
    "gru_step", "no_reset_gate", "n = tanh(x_n + u_n): the reset gate is computed but never applied"
)
def _(x_t, h_prev, W_ih, W_hh, b_ih, b_hh):
    (_, x_z, x_n), (_, u_z, u_n) = _gru_parts(x_t, h_prev, W_ih, W_hh, b_ih, b_hh)
    z = torch.sigmoid(x_z + u_z)
    n = torch.tanh(x_n + u_n)
    return (1 - z) * n + z * h_prev


# ------------------------------------------------------------------------ first_token_task


def _checked(length, n_classes):
    if length < 1 or n_classes < 2:
        raise ValueError("need length >= 1 and n_classes >= 2")


@bug(
    "first_token_task",
    "distractors_in_class_range",
    "distractors drawn from 0 .. 2K - 1, so they include the classes",
)
def _(batch_size, length, n_classes, generator):
    _checked(length, n_classes)
    classes = torch.randint(n_classes, (batch_size,), generator=generator)
    rest = torch.randint(0, 2 * n_classes, (batch_size, length - 1), generator=generator)
    return torch.cat([classes[:, None], rest], dim=1), classes


@bug("first_token_task", "class_at_the_end", "the class token is put last instead of first")
def _(batch_size, length, n_classes, generator):
    _checked(length, n_classes)
    classes = torch.randint(n_classes, (batch_size,), generator=generator)
    rest = torch.randint(n_classes, 2 * n_classes, (batch_size, length - 1), generator=generator)
    return torch.cat([rest, classes[:, None]], dim=1), classes


@bug("first_token_task", "length_plus_one", "length distractors after the class: length + 1 tokens")
def _(batch_size, length, n_classes, generator):
    _checked(length, n_classes)
    classes = torch.randint(n_classes, (batch_size,), generator=generator)
    rest = torch.randint(n_classes, 2 * n_classes, (batch_size, length), generator=generator)
    return torch.cat([classes[:, None], rest], dim=1), classes


@bug(
    "first_token_task",
    "ignores_generator",
    "draws from torch's global generator: the seed is ignored",
)
def _(batch_size, length, n_classes, generator):
    _checked(length, n_classes)
    classes = torch.randint(n_classes, (batch_size,))
    rest = torch.randint(n_classes, 2 * n_classes, (batch_size, length - 1))
    return torch.cat([classes[:, None], rest], dim=1), classes


@bug(
    "first_token_task",
    "own_fixed_seed",
    "makes its own generator with seed 0: every seed gives the same batch",
)
def _(batch_size, length, n_classes, generator):
    _checked(length, n_classes)
    mine = torch.Generator().manual_seed(0)
    classes = torch.randint(n_classes, (batch_size,), generator=mine)
    rest = torch.randint(n_classes, 2 * n_classes, (batch_size, length - 1), generator=mine)
    return torch.cat([classes[:, None], rest], dim=1), classes


@bug(
    "first_token_task",
    "label_is_last_token",
    "y = x[:, -1]: the target is the last token, not the class",
)
def _(batch_size, length, n_classes, generator):
    _checked(length, n_classes)
    classes = torch.randint(n_classes, (batch_size,), generator=generator)
    rest = torch.randint(n_classes, 2 * n_classes, (batch_size, length - 1), generator=generator)
    x = torch.cat([classes[:, None], rest], dim=1)
    return x, x[:, -1]


@bug("first_token_task", "no_input_check", "length 0 and a single class are not refused")
def _(batch_size, length, n_classes, generator):
    classes = torch.randint(n_classes, (batch_size,), generator=generator)
    rest = torch.randint(
        n_classes, 2 * n_classes, (batch_size, max(length - 1, 0)), generator=generator
    )
    return torch.cat([classes[:, None], rest], dim=1), classes


# ------------------------------------------------------ dtypes and a batch of one (issue 18)


@bug("lstm_forward", "float32_buffer", "states stored in torch.zeros(B, T, H): float32, rounded")
def _(xs, h0, c0, W_ih, W_hh, b):
    B, T, _ = xs.shape
    hs = torch.zeros(B, T, h0.shape[1])
    h, c = h0, c0
    for t in range(T):
        h, c = _step(xs[:, t], h, c, W_ih, W_hh, b)
        hs[:, t] = h
    return hs, (h, c)


@bug("first_token_task", "squeezed_classes", "y = x[:, :1].squeeze(): a batch of one gets a 0-d y")
def _(batch_size, length, n_classes, generator):
    _checked(length, n_classes)
    classes = torch.randint(n_classes, (batch_size, 1), generator=generator)
    rest = torch.randint(n_classes, 2 * n_classes, (batch_size, length - 1), generator=generator)
    x = torch.cat([classes, rest], dim=1)
    return x, x[:, :1].squeeze()


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


@correct("lstm_step", "numpy_per_gate_weights")
def _(x_t, h_prev, c_prev, W_ih, W_hh, b):
    x, h, c = x_t.numpy(), h_prev.numpy(), c_prev.numpy()
    H = h.shape[1]
    Wi, Wh, bb = W_ih.numpy(), W_hh.numpy(), b.numpy()

    def gate(k):
        rows = slice(k * H, (k + 1) * H)
        return x @ Wi[rows].T + h @ Wh[rows].T + bb[rows]

    def sig(a):
        return 1 / (1 + np.exp(-a))

    c_new = sig(gate(1)) * c + sig(gate(0)) * np.tanh(gate(2))
    return torch.from_numpy(sig(gate(3)) * np.tanh(c_new)), torch.from_numpy(c_new)


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
