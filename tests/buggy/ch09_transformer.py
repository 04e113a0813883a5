"""Known-buggy answers to the ch09_transformer exercise: mistakes learners really make.

Same layout as ``ch08_self_attention.py``: each function carries the name of the exercise part
it answers and is registered in ``BUGS[name]`` with a one-line description; the hidden tests of
the notebook must fail every one of them while the reference passes. Among them are the
mistakes issue 11 lists: normalising over the wrong axis, the unbiased variance, ε outside the
square root, the residual added after the norm in pre-LN, cross-attention with keys from the
decoder, and a warm-up off by one; and, for the encoder layer (issue 37), the residual or the
norm in the wrong place, the mask ignored, dropout in evaluation mode or on the stream, one
LayerNorm used twice and the feed-forward network reading the layer's input. ``ALTERNATIVES`` (at the end) holds correct answers written
differently, which the hidden tests must accept.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from mini_llm import transformer
from mini_llm.self_attention import MultiHeadAttention, multi_head_attention
from mini_llm.transformer import LayerNorm, PositionWiseFeedForward

from ._registry import new_registry

REFERENCE = ("mini_llm.transformer",)
"""the mini_llm modules that hold the reference of each graded part"""

BUGS, ALTERNATIVES, bug, correct = new_registry()
derived = bug.derived


# ------------------------------------------------------------------------------------ layer_norm


def _layer_norm(x, gamma, beta, eps=1e-5, *, dim=-1):
    """The right LayerNorm (without the reference's check of the shapes), over ``dim``."""
    mean = x.mean(dim=dim, keepdim=True)
    variance = ((x - mean) ** 2).mean(dim=dim, keepdim=True)
    return gamma * (x - mean) / torch.sqrt(variance + eps) + beta


bug.variant(
    "layer_norm",
    "wrong_axis",
    "mean and variance over the positions (dim=-2), not the features",
    _layer_norm,
    like=transformer.layer_norm,
    dim=-2,
)


@bug("layer_norm", "unbiased_variance", "x.var(-1) divides by d - 1 (unbiased), not by d")
def _(x, gamma, beta, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    return gamma * (x - mean) / torch.sqrt(x.var(dim=-1, keepdim=True) + eps) + beta


@bug("layer_norm", "eps_outside_sqrt", "(x - mean) / (sqrt(var) + eps): eps outside the root")
def _(x, gamma, beta, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    std = x.std(dim=-1, keepdim=True, unbiased=False)
    return gamma * (x - mean) / (std + eps) + beta


bug.variant(
    "layer_norm",
    "no_gain_bias",
    "gamma and beta are ignored",
    _layer_norm,
    like=transformer.layer_norm,
    gamma=1.0,
    beta=0.0,
)


@bug("layer_norm", "centres_x_in_place", "x -= mean: right result, the caller's x is centred too")
def _(x, gamma, beta, eps=1e-5):
    x -= x.mean(dim=-1, keepdim=True)
    return gamma * x / torch.sqrt((x**2).mean(dim=-1, keepdim=True) + eps) + beta


@bug("layer_norm", "through_numpy", "computed in NumPy and wrapped back: no gradient for gamma")
def _(x, gamma, beta, eps=1e-5):
    a = x.detach().numpy()
    centred = a - a.mean(axis=-1, keepdims=True)
    normed = centred / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + eps)
    return torch.from_numpy(normed) * gamma.detach() + beta.detach()


bug.variant(
    "layer_norm",
    "float64_eps",
    "eps as a float64 tensor of shape (1,): float32 x comes out float64",
    _layer_norm,
    like=transformer.layer_norm,
    eps=derived(lambda a: torch.tensor([a.eps], dtype=torch.float64)),
)


# ---------------------------------------------------------------------------------- feed_forward


@bug("feed_forward", "no_relu", "two linear maps with nothing between them")
def _(x, W1, b1, W2, b2):
    return (x @ W1.T + b1) @ W2.T + b2


@bug("feed_forward", "relu_on_output_too", "a ReLU after the second map as well")
def _(x, W1, b1, W2, b2):
    return torch.relu(torch.relu(x @ W1.T + b1) @ W2.T + b2)


@bug("feed_forward", "bias_after_relu", "b1 added after the ReLU")
def _(x, W1, b1, W2, b2):
    return (torch.relu(x @ W1.T) + b1) @ W2.T + b2


@bug("feed_forward", "transposes_in_place", "W1.t_() and W2.t_(): the caller's weights turn")
def _(x, W1, b1, W2, b2):
    result = torch.relu(x @ W1.t_() + b1) @ W2.t_() + b2
    return result


@bug(
    "feed_forward",
    "float64_hidden",
    "hidden units in a new float64 buffer: float32 in, float64 out",
)
def _(x, W1, b1, W2, b2):
    hidden = torch.zeros(*x.shape[:-1], W1.shape[0], dtype=torch.float64)
    hidden += x @ W1.T + b1
    return torch.relu(hidden) @ W2.T.double() + b2


@bug("feed_forward", "detached_hidden", "hidden units .detach()ed: W1 and b1 never learn")
def _(x, W1, b1, W2, b2):
    return torch.relu(x @ W1.T + b1).detach() @ W2.T.detach() + b2.detach()


# ---------------------------------------------------------------------------- attention_sublayer


def _parts(W_q, W_k, W_v, W_o, gamma, beta, n_heads, mask):
    def norm(h):
        return F.layer_norm(h, h.shape[-1:], gamma, beta)

    def attend(h, source):
        return multi_head_attention(h, W_q, W_k, W_v, W_o, n_heads, mask, source=source)[0]

    return norm, attend


def _sublayer(x, source, W_q, W_k, W_v, W_o, gamma, beta, n_heads, mask, norm_first, *, body):
    """``body(x, source, norm, attend, norm_first)``, given the sub-layer's LayerNorm
    ``norm(h)`` and attention ``attend(h, source)`` (``_parts``)."""
    return body(x, source, *_parts(W_q, W_k, W_v, W_o, gamma, beta, n_heads, mask), norm_first)


def _right(x, source, norm, attend, norm_first):
    """The correct sub-layer, from its norm and attention."""
    return x + attend(norm(x), source) if norm_first else norm(x + attend(x, source))


_sublayer_variant = bug.variants(
    "attention_sublayer", _sublayer, like=transformer.attention_sublayer
)


def _sublayer_bug(bug_id, description):
    """Register the decorated ``body`` (see ``_sublayer``) as a buggy attention_sublayer."""

    def register(body):
        _sublayer_variant(bug_id, description, body=body)
        return body

    return register


@bug(
    "attention_sublayer",
    "cross_keys_from_decoder",
    "cross-attention with keys from the decoder's x (values from the source)",
)
def _(x, source, W_q, W_k, W_v, W_o, gamma, beta, n_heads, mask=None, norm_first=False):
    norm, _ = _parts(W_q, W_k, W_v, W_o, gamma, beta, n_heads, mask)

    def attend(h):
        if source is None:
            return multi_head_attention(h, W_q, W_k, W_v, W_o, n_heads, mask)[0]
        # keys from h: (T, T) scores; the mask is over the source, so it is dropped
        scores = (h @ W_q.T) @ (h @ W_k.T).transpose(-2, -1) / math.sqrt(h.shape[-1])
        values = (source @ W_v.T)[:, : h.shape[1]]
        return torch.softmax(scores, dim=-1) @ values @ W_o.T

    return x + attend(norm(x)) if norm_first else norm(x + attend(x))


_sublayer_variant(
    "cross_all_from_decoder",
    "cross-attention computed as self-attention: source is never used",
    body=_right,
    source=None,
    mask=None,
)


@_sublayer_bug(
    "pre_ln_residual_after_norm",
    "pre-LN adds the output to LN(x) instead of x: LN(x) + MHA(LN(x))",
)
def _(x, source, norm, attend, norm_first):
    if norm_first:
        h = norm(x)
        return h + attend(h, source)
    return norm(x + attend(x, source))


@_sublayer_bug(
    "post_ln_norm_inside_residual",
    "post-LN written as x + LN(MHA(x)): the norm is applied to the sub-layer only",
)
def _(x, source, norm, attend, norm_first):
    return x + attend(norm(x), source) if norm_first else x + norm(attend(x, source))


@_sublayer_bug(
    "pre_ln_normalises_the_source",
    "pre-LN also passes the encoder's output through this sub-layer's LayerNorm",
)
def _(x, source, norm, attend, norm_first):
    if norm_first:
        return x + attend(norm(x), None if source is None else norm(source))
    return norm(x + attend(x, source))


@_sublayer_bug(
    "residual_in_place",
    "pre-LN as x += MHA(LN(x)): the right output, and the caller's x changes too",
)
def _(x, source, norm, attend, norm_first):
    if norm_first:
        x += attend(norm(x), source)
        return x
    return norm(x + attend(x, source))


@_sublayer_bug(
    "under_no_grad",
    "the whole sub-layer inside torch.no_grad() (copied from an evaluation loop): no gradient",
)
def _(x, source, norm, attend, norm_first):
    with torch.no_grad():
        return _right(x, source, norm, attend, norm_first)


@_sublayer_bug(
    "float32_buffer", "the result copied into torch.zeros(x.shape): float64 in, float32 out"
)
def _(x, source, norm, attend, norm_first):
    out = torch.zeros(x.shape)
    out[:] = _right(x, source, norm, attend, norm_first)
    return out


# ---------------------------------------------------------------------------------- EncoderLayer


class _Encoder(nn.Module):
    """The layers the answer cell's ``__init__`` makes (written here: when an answer is graded,
    the package's EncoderLayer cannot be subclassed from it); each bug below writes
    ``forward`` with one mistake."""

    def __init__(self, d_model, n_heads, d_ff=None, norm_first=False, dropout=0.0):
        super().__init__()
        self.norm_first = norm_first
        self.self_attention = MultiHeadAttention(d_model, n_heads)
        self.feed_forward = PositionWiseFeedForward(d_model, d_ff)
        self.norm1, self.norm2 = LayerNorm(d_model), LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)


@bug(
    "EncoderLayer",
    "pre_ln_residual_from_norm",
    "pre-LN adds each sub-layer's output to LN(x) instead of x: the residual in the wrong place",
)
class _(_Encoder):
    def forward(self, x, src_mask=None):
        if self.norm_first:
            h = self.norm1(x)
            out, weights = self.self_attention(h, src_mask)
            x = h + self.dropout(out)
            h = self.norm2(x)
            return h + self.dropout(self.feed_forward(h)), weights
        out, weights = self.self_attention(x, src_mask)
        x = self.norm1(x + self.dropout(out))
        return self.norm2(x + self.dropout(self.feed_forward(x))), weights


@bug(
    "EncoderLayer",
    "post_ln_norm_inside_residual",
    "post-LN written as x + LN(f(x)): the norm on the sub-layer's output, not on the sum",
)
class _(_Encoder):
    def forward(self, x, src_mask=None):
        if self.norm_first:
            out, weights = self.self_attention(self.norm1(x), src_mask)
            x = x + self.dropout(out)
            return x + self.dropout(self.feed_forward(self.norm2(x))), weights
        out, weights = self.self_attention(x, src_mask)
        x = x + self.norm1(self.dropout(out))
        return x + self.norm2(self.dropout(self.feed_forward(x))), weights


@bug(
    "EncoderLayer",
    "norm_first_swapped",
    "if not self.norm_first: norm_first=True computes post-LN and False pre-LN",
)
class _(_Encoder):
    def forward(self, x, src_mask=None):
        if not self.norm_first:
            out, weights = self.self_attention(self.norm1(x), src_mask)
            x = x + self.dropout(out)
            return x + self.dropout(self.feed_forward(self.norm2(x))), weights
        out, weights = self.self_attention(x, src_mask)
        x = self.norm1(x + self.dropout(out))
        return self.norm2(x + self.dropout(self.feed_forward(x))), weights


@bug("EncoderLayer", "mask_ignored", "self.self_attention(h): src_mask never reaches attention")
class _(_Encoder):
    def forward(self, x, src_mask=None):
        if self.norm_first:
            out, weights = self.self_attention(self.norm1(x))
            x = x + self.dropout(out)
            return x + self.dropout(self.feed_forward(self.norm2(x))), weights
        out, weights = self.self_attention(x)
        x = self.norm1(x + self.dropout(out))
        return self.norm2(x + self.dropout(self.feed_forward(x))), weights


@bug(
    "EncoderLayer",
    "dropout_in_eval",
    "F.dropout(out, p) without training=: drops at random after .eval() too",
)
class _(_Encoder):
    def forward(self, x, src_mask=None):
        p = self.dropout.p
        if self.norm_first:
            out, weights = self.self_attention(self.norm1(x), src_mask)
            x = x + F.dropout(out, p)
            return x + F.dropout(self.feed_forward(self.norm2(x)), p), weights
        out, weights = self.self_attention(x, src_mask)
        x = self.norm1(x + F.dropout(out, p))
        return self.norm2(x + F.dropout(self.feed_forward(x), p)), weights


@bug(
    "EncoderLayer",
    "dropout_on_the_sum",
    "dropout on the residual sum x + f(x), not on f(x): the stream itself is dropped",
)
class _(_Encoder):
    def forward(self, x, src_mask=None):
        if self.norm_first:
            out, weights = self.self_attention(self.norm1(x), src_mask)
            x = self.dropout(x + out)
            return self.dropout(x + self.feed_forward(self.norm2(x))), weights
        out, weights = self.self_attention(x, src_mask)
        x = self.norm1(self.dropout(x + out))
        return self.norm2(self.dropout(x + self.feed_forward(x))), weights


@bug(
    "EncoderLayer",
    "same_norm_twice",
    "norm1 for both sub-layers: norm2's gain and bias are never used (nor learned)",
)
class _(_Encoder):
    def forward(self, x, src_mask=None):
        if self.norm_first:
            out, weights = self.self_attention(self.norm1(x), src_mask)
            x = x + self.dropout(out)
            return x + self.dropout(self.feed_forward(self.norm1(x))), weights
        out, weights = self.self_attention(x, src_mask)
        x = self.norm1(x + self.dropout(out))
        return self.norm1(x + self.dropout(self.feed_forward(x))), weights


@bug(
    "EncoderLayer",
    "ffn_reads_layer_input",
    "the feed-forward network reads the layer's input x, not the stream after the attention",
)
class _(_Encoder):
    def forward(self, x, src_mask=None):
        if self.norm_first:
            out, weights = self.self_attention(self.norm1(x), src_mask)
            h = x + self.dropout(out)
            return h + self.dropout(self.feed_forward(self.norm2(x))), weights
        out, weights = self.self_attention(x, src_mask)
        h = self.norm1(x + self.dropout(out))
        return self.norm2(h + self.dropout(self.feed_forward(x))), weights


@bug(
    "EncoderLayer",
    "residual_in_place",
    "pre-LN as x += ...: the right output, and the caller's x changes too",
)
class _(_Encoder):
    def forward(self, x, src_mask=None):
        if self.norm_first:
            out, weights = self.self_attention(self.norm1(x), src_mask)
            x += self.dropout(out)
            x += self.dropout(self.feed_forward(self.norm2(x)))
            return x, weights
        out, weights = self.self_attention(x, src_mask)
        x = self.norm1(x + self.dropout(out))
        return self.norm2(x + self.dropout(self.feed_forward(x))), weights


@bug(
    "EncoderLayer",
    "norm_weights_through_data",
    "LayerNorm computed from norm.weight.data and .bias.data: gamma and beta never learn",
)
class _(_Encoder):
    def forward(self, x, src_mask=None):
        def norm(module, h):
            return F.layer_norm(h, h.shape[-1:], module.weight.data, module.bias.data)

        if self.norm_first:
            out, weights = self.self_attention(norm(self.norm1, x), src_mask)
            x = x + self.dropout(out)
            return x + self.dropout(self.feed_forward(norm(self.norm2, x))), weights
        out, weights = self.self_attention(x, src_mask)
        x = norm(self.norm1, x + self.dropout(out))
        return norm(self.norm2, x + self.dropout(self.feed_forward(x))), weights


# ---------------------------------------------------------------------------- noam_learning_rate


def _noam(step, d_model, warmup, *, offset=0, warm_offset=0, exponent=-1.5, pick=min):
    """The schedule with its checks; knobs: ``offset`` added to the step after the checks,
    ``warm_offset`` to the step of the warm-up term only, the warm-up term's ``exponent`` and
    the function that ``pick``s one of the two terms."""
    if step < 1 or d_model < 1 or warmup < 1:
        raise ValueError("step, d_model and warmup must be >= 1")
    step = step + offset
    return d_model**-0.5 * pick(step**-0.5, (step + warm_offset) * warmup**exponent)


_noam_bug = bug.variants("noam_learning_rate", _noam, like=transformer.noam_learning_rate)


_noam_bug("step_plus_one", "warm-up off by one: step + 1 used (counted from 0)", offset=1)
_noam_bug("step_minus_one", "warm-up off by one: the rate of step 1 is 0", warm_offset=-1)
_noam_bug("warmup_exponent", "warm-up term step · warmup^-0.5 (not ^-1.5)", exponent=-0.5)


@bug.input("noam_learning_rate", "no_error_at_zero", "step 0 gives 0.0 instead of an error")
def _(step, d_model, warmup):
    if step == 0:
        return 0.0
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


@bug.input(
    "noam_learning_rate",
    "checks_step_only",
    "only step is checked: warmup = 0 raises ZeroDivisionError, d_model = 0 too",
)
def _(step, d_model, warmup):
    if step < 1:
        raise ValueError("step must be >= 1")
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


_noam_bug("max_not_min", "max() of the two terms: the rate starts huge", pick=max)


# ------------------------------------------------------------------- transformer_parameter_count


def _count(
    vocab_size,
    d_model,
    d_ff,
    encoder_layers,
    decoder_layers,
    *,
    target_vocab_size=None,
    cross_attention=True,
    learned_positions=0,
    final_norms=0,
    attention=None,
    ffn=None,
    norm=None,
):
    """The right count (without the reference's checks of the sizes), with the sizes of an
    attention, a feed-forward network and a LayerNorm as knobs for the bugs below."""
    d = d_model
    attention = 4 * d * d + 4 * d if attention is None else attention
    ffn = 2 * d * d_ff + d_ff + d if ffn is None else ffn
    norm = 2 * d if norm is None else norm
    encoder_layer = attention + ffn + 2 * norm
    decoder_layer = 2 * attention + ffn + 3 * norm if cross_attention else encoder_layer
    return (
        (vocab_size + (target_vocab_size or 0) + learned_positions) * d
        + encoder_layers * encoder_layer
        + decoder_layers * decoder_layer
        + final_norms * norm
    )


_miscounted = bug.variants(
    "transformer_parameter_count", _count, like=transformer.transformer_parameter_count
)


_miscounted(
    "no_biases",
    "attention and feed-forward biases left out",
    attention=derived(lambda a: 4 * a.d_model * a.d_model),
    ffn=derived(lambda a: 2 * a.d_model * a.d_ff),
)
_miscounted("norm_d_not_2d", "a LayerNorm counted as d, not 2d", norm=derived(lambda a: a.d_model))
_miscounted("no_cross_attention", "decoder layers counted like encoders", cross_attention=False)
_miscounted(
    "untied_output",
    "a separate output matrix (V x d) counted",
    returns=lambda n, a: n + (a.target_vocab_size or a.vocab_size) * a.d_model,
)
_miscounted(
    "float_result",
    "the count computed in floating point (d_model ** 2.0, d_ff / 1): a float back, not an int",
    returns=lambda n, a: float(n),
)
_miscounted(
    "target_defaults_to_source",
    "target_vocab_size=None read as a second table of vocab_size rows",
    target_vocab_size=derived(lambda a: a.target_vocab_size or a.vocab_size),
)
_miscounted(
    "three_norms_without_cross",
    "cross_attention=False drops the cross-attention but keeps its LayerNorm (three norms)",
    returns=lambda n, a: n + (0 if a.cross_attention else a.decoder_layers * 2 * a.d_model),
)
_miscounted(
    "final_norms_as_flag",
    "final_norms read as yes or no: one final LayerNorm however many are asked for",
    final_norms=derived(lambda a: min(a.final_norms, 1)),
)


# --------------------------------------------------------- issue 31: mistakes the old tests missed


@bug("layer_norm", "width_from_shape_1", "d read as x.shape[1]: right for a 2-D x only")
def _(x, gamma, beta, eps=1e-5):
    d = x.shape[1] if x.dim() > 1 else x.shape[0]
    mean = x.sum(dim=-1, keepdim=True) / d
    variance = ((x - mean) ** 2).sum(dim=-1, keepdim=True) / d
    return gamma * (x - mean) / torch.sqrt(variance + eps) + beta


@bug(
    "layer_norm",
    "flag_without_graph",
    "computed under torch.no_grad(), then .requires_grad_(): the flag is set, the graph is gone",
)
def _(x, gamma, beta, eps=1e-5):
    with torch.no_grad():
        out = _layer_norm(x, gamma, beta, eps)
    return out.requires_grad_(x.requires_grad or gamma.requires_grad or beta.requires_grad)


@bug(
    "feed_forward",
    "numpy_with_requires_grad",
    "computed in NumPy and wrapped with torch.tensor(..., requires_grad=True): no graph",
)
def _(x, W1, b1, W2, b2):
    a = [t.detach().numpy() for t in (x, W1, b1, W2, b2)]
    hidden = np.maximum(a[0] @ a[1].T + a[2], 0)
    wants = any(t.requires_grad for t in (x, W1, b1, W2, b2))
    return torch.tensor(hidden @ a[3].T + a[4], dtype=x.dtype, requires_grad=wants)


@bug(
    "feed_forward",
    "einsum_two_axes",
    'einsum("td,fd->tf", ...): right for an x of shape (T, d) only',
)
def _(x, W1, b1, W2, b2):
    hidden = torch.relu(torch.einsum("td,fd->tf", x, W1) + b1)
    return torch.einsum("tf,df->td", hidden, W2) + b2


_sublayer_variant(
    "mask_only_for_cross",
    "the mask is passed only to cross-attention: a mask given with self-attention is ignored",
    body=_right,
    mask=derived(lambda a: a.mask if a.source is not None else None),
)


_sublayer_variant(
    "heads_fixed_at_two",
    "n_heads=2 written in the call: right only when the layer has two heads",
    body=_right,
    n_heads=2,
)


@bug(
    "attention_sublayer",
    "norm_through_numpy",
    "the LayerNorm computed in NumPy and wrapped back: no gradient reaches x, gamma or beta",
)
def _(x, source, W_q, W_k, W_v, W_o, gamma, beta, n_heads, mask=None, norm_first=False):
    def norm(h):
        a = h.detach().numpy()
        centred = a - a.mean(axis=-1, keepdims=True)
        normed = centred / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + 1e-5)
        return torch.from_numpy(normed * gamma.detach().numpy() + beta.detach().numpy())

    def attend(h):
        return multi_head_attention(h, W_q, W_k, W_v, W_o, n_heads, mask, source=source)[0]

    return x + attend(norm(x)) if norm_first else norm(x + attend(x))


@bug(
    "EncoderLayer",
    "float32_stream",
    "the sub-layer outputs added into torch.zeros(x.shape): a float64 layer returns float32",
)
class _(_Encoder):
    def forward(self, x, src_mask=None):
        stream = torch.zeros(x.shape)
        stream[:] = x
        if self.norm_first:
            out, weights = self.self_attention(self.norm1(x), src_mask)
            stream = stream + self.dropout(out)
            stream = stream + self.dropout(self.feed_forward(self.norm2(stream)))
            return stream, weights
        out, weights = self.self_attention(x, src_mask)
        stream = self.norm1(stream + self.dropout(out))
        return self.norm2(stream + self.dropout(self.feed_forward(stream))), weights


@bug(
    "EncoderLayer",
    "weights_without_the_mask",
    "the weights returned come from a second self-attention call without src_mask",
)
class _(_Encoder):
    def forward(self, x, src_mask=None):
        h = self.norm1(x) if self.norm_first else x
        _, weights = self.self_attention(h)
        if self.norm_first:
            out, _ = self.self_attention(h, src_mask)
            x = x + self.dropout(out)
            return x + self.dropout(self.feed_forward(self.norm2(x))), weights
        out, _ = self.self_attention(x, src_mask)
        x = self.norm1(x + self.dropout(out))
        return self.norm2(x + self.dropout(self.feed_forward(x))), weights


@bug(
    "EncoderLayer",
    "post_ln_attends_to_the_norm",
    "post-LN attends to norm1(x), not x: norm1(x + MHA(norm1(x)))",
)
class _(_Encoder):
    def forward(self, x, src_mask=None):
        out, weights = self.self_attention(self.norm1(x), src_mask)
        if self.norm_first:
            x = x + self.dropout(out)
            return x + self.dropout(self.feed_forward(self.norm2(x))), weights
        x = self.norm1(x + self.dropout(out))
        return self.norm2(x + self.dropout(self.feed_forward(x))), weights


@bug.input(
    "noam_learning_rate",
    "refuses_only_zero",
    "== 0 checks: a negative step, d_model or warmup gives a number (or a complex one)",
)
def _(step, d_model, warmup):
    if step == 0 or d_model == 0 or warmup == 0:
        raise ValueError("step, d_model and warmup must not be 0")
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


@bug.input(
    "noam_learning_rate",
    "assert_not_raise",
    "assert step >= 1 ...: AssertionError, not ValueError",
)
def _(step, d_model, warmup):
    assert step >= 1 and d_model >= 1 and warmup >= 1, "arguments must be >= 1"
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


@bug(
    "noam_learning_rate",
    "exponent_precedence",
    "warmup ** -3 / 2 for warmup^-1.5: the power binds first, warmup^-3 halved",
)
def _(step, d_model, warmup):
    if step < 1 or d_model < 1 or warmup < 1:
        raise ValueError("step, d_model and warmup must be >= 1")
    return d_model**-0.5 * min(step**-0.5, step * warmup**-3 / 2)


@bug(
    "noam_learning_rate",
    "step_and_warmup_swapped",
    "min(step^-0.5, warmup · step^-1.5): right at step = warmup only",
)
def _(step, d_model, warmup):
    if step < 1 or d_model < 1 or warmup < 1:
        raise ValueError("step, d_model and warmup must be >= 1")
    return d_model**-0.5 * min(step**-0.5, warmup * step**-1.5)


_miscounted(
    "positions_per_stack",
    "learned positions counted once per stack: a model with an encoder and a decoder pays twice",
    returns=lambda n, a: (
        n + a.learned_positions * a.d_model * ((a.encoder_layers > 0) + (a.decoder_layers > 0) - 1)
    ),
)
_miscounted(
    "two_norms_with_cross",
    "a decoder layer with cross-attention counted with two norms, not three",
    returns=lambda n, a: n - (a.decoder_layers * 2 * a.d_model if a.cross_attention else 0),
)
_miscounted(
    "ffn_biases_both_d",
    "both feed-forward biases counted as d: 2·d·d_ff + 2d, right only when d_ff = d",
    ffn=derived(lambda a: 2 * a.d_model * a.d_ff + 2 * a.d_model),
)
_miscounted(
    "final_norm_as_d",
    "a final LayerNorm counted as d, not 2d (the layers' norms right)",
    returns=lambda n, a: n - a.final_norms * a.d_model,
)


# ---------------------------------------------------------------------------------- alternatives


@correct("layer_norm", "loop_rows")
def _(x, gamma, beta, eps=1e-5):
    rows = []
    for row in x.reshape(-1, x.shape[-1]):
        centred = row - row.sum() / row.numel()
        rows.append(centred / torch.sqrt((centred * centred).sum() / row.numel() + eps))
    return torch.stack(rows).reshape(x.shape) * gamma + beta


@correct("layer_norm", "var_mean")
def _(x, gamma, beta, eps=1e-5):
    variance, mean = torch.var_mean(x, dim=-1, unbiased=False, keepdim=True)
    return (x - mean) * torch.rsqrt(variance + eps) * gamma + beta


@correct("feed_forward", "functional_linear")
def _(x, W1, b1, W2, b2):
    return F.linear(F.relu(F.linear(x, W1, b1)), W2, b2)


@correct("feed_forward", "einsum_clamp")
def _(x, W1, b1, W2, b2):
    hidden = (torch.einsum("...d,fd->...f", x, W1) + b1).clamp(min=0)
    return torch.einsum("...f,df->...d", hidden, W2) + b2


@correct("attention_sublayer", "torch_sdpa_by_hand")
def _(x, source, W_q, W_k, W_v, W_o, gamma, beta, n_heads, mask=None, norm_first=False):
    def attend(h):
        memory = h if source is None else source
        B, T, d = h.shape
        S = memory.shape[1]

        def heads(t, length):
            return t.view(B, length, n_heads, d // n_heads).permute(0, 2, 1, 3)

        q, k, v = heads(h @ W_q.T, T), heads(memory @ W_k.T, S), heads(memory @ W_v.T, S)
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=None if mask is None else mask.unsqueeze(-3)
        )
        return out.permute(0, 2, 1, 3).reshape(B, T, d) @ W_o.T

    d = x.shape[-1]
    if norm_first:
        return x + attend(F.layer_norm(x, (d,), gamma, beta))
    return F.layer_norm(x + attend(x), (d,), gamma, beta)


@correct("EncoderLayer", "functional")
class _(_Encoder):
    """The parts written out with torch.nn.functional: F.layer_norm with the norms' weights,
    F.linear for the feed-forward network, F.dropout that follows the layer's mode."""

    def forward(self, x, src_mask=None):
        d = x.shape[-1]
        ffn = self.feed_forward

        def norm(module, h):
            return F.layer_norm(h, (d,), module.weight, module.bias, module.eps)

        def drop(h):
            return F.dropout(h, self.dropout.p, self.training)

        def feed(h):
            hidden = F.relu(F.linear(h, ffn.linear1.weight, ffn.linear1.bias))
            return F.linear(hidden, ffn.linear2.weight, ffn.linear2.bias)

        if not self.norm_first:
            attended, weights = self.self_attention(x, src_mask)
            x = norm(self.norm1, x + drop(attended))
            return norm(self.norm2, x + drop(feed(x))), weights
        attended, weights = self.self_attention(norm(self.norm1, x), src_mask)
        x = x + drop(attended)
        return x + drop(feed(norm(self.norm2, x))), weights


@correct("EncoderLayer", "sublayer_loop")
class _(_Encoder):
    """One loop over the two sub-layers, each with its norm."""

    def forward(self, x, src_mask=None):
        kept = {}

        def attend(h):
            out, kept["weights"] = self.self_attention(h, mask=src_mask)
            return out

        for norm, sublayer in ((self.norm1, attend), (self.norm2, self.feed_forward)):
            if self.norm_first:
                x = x + self.dropout(sublayer(norm(x)))
            else:
                x = norm(x + self.dropout(sublayer(x)))
        return x, kept["weights"]


@correct("noam_learning_rate", "branches")
def _(step, d_model, warmup):
    if min(step, d_model, warmup) < 1:
        raise ValueError("step, d_model and warmup start at 1")
    rate = step / warmup**1.5 if step < warmup else 1 / math.sqrt(step)
    return rate / math.sqrt(d_model)


@correct("transformer_parameter_count", "from_modules")
def _(
    vocab_size,
    d_model,
    d_ff,
    encoder_layers,
    decoder_layers,
    *,
    target_vocab_size=None,
    cross_attention=True,
    learned_positions=0,
    final_norms=0,
):
    from torch import nn

    def numel(module):
        return sum(p.numel() for p in module.parameters())

    encoder = numel(nn.TransformerEncoderLayer(d_model, 1, d_ff))
    if cross_attention:
        decoder = numel(nn.TransformerDecoderLayer(d_model, 1, d_ff))
    else:
        decoder = encoder
    tables = vocab_size + (target_vocab_size or 0) + learned_positions
    return (
        tables * d_model
        + encoder_layers * encoder
        + decoder_layers * decoder
        + final_norms * 2 * d_model
    )


@correct("layer_norm", "two_pass_sums")
def _(x, gamma, beta, eps=1e-5):
    d = x.shape[-1]
    centred = x - x.sum(dim=-1, keepdim=True) / d
    return centred / (centred.square().sum(dim=-1, keepdim=True) / d + eps).sqrt() * gamma + beta


@correct("feed_forward", "maximum_with_zero")
def _(x, W1, b1, W2, b2):
    hidden = torch.addmm(b1, x.reshape(-1, x.shape[-1]), W1.T)
    hidden = torch.maximum(hidden, torch.zeros((), dtype=hidden.dtype))
    return torch.addmm(b2, hidden, W2.T).reshape(*x.shape[:-1], W2.shape[0])


@correct("noam_learning_rate", "one_formula")
def _(step, d_model, warmup):
    for name, value in (("step", step), ("d_model", d_model), ("warmup", warmup)):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    return min(1 / math.sqrt(step), step / (warmup * math.sqrt(warmup))) / math.sqrt(d_model)


@correct("transformer_parameter_count", "table_of_parts")
def _(
    vocab_size,
    d_model,
    d_ff,
    encoder_layers,
    decoder_layers,
    *,
    target_vocab_size=None,
    cross_attention=True,
    learned_positions=0,
    final_norms=0,
):
    d = d_model
    parts = {"attention": 4 * (d * d + d), "ffn": d * d_ff + d_ff + d_ff * d + d, "norm": d + d}
    encoder = parts["attention"] + parts["ffn"] + 2 * parts["norm"]
    decoder = encoder + cross_attention * (parts["attention"] + parts["norm"])
    rows = vocab_size + (0 if target_vocab_size is None else target_vocab_size)
    rows += learned_positions
    return (
        rows * d + encoder_layers * encoder + decoder_layers * decoder + final_norms * parts["norm"]
    )


@correct("EncoderLayer", "explicit_residuals")
class _(_Encoder):
    """Both arrangements written as one residual update per sub-layer, the normalisation of
    its input (pre-LN) or of the sum (post-LN) chosen by two small functions."""

    def forward(self, x, src_mask=None):
        def before(norm, h):
            return norm(h) if self.norm_first else h

        def after(norm, h):
            return h if self.norm_first else norm(h)

        attended, weights = self.self_attention(before(self.norm1, x), src_mask)
        x = after(self.norm1, x + self.dropout(attended))
        x = after(self.norm2, x + self.dropout(self.feed_forward(before(self.norm2, x))))
        return x, weights
