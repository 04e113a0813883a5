"""Known-buggy answers to the ch11_gpt exercise: mistakes learners really make.

Same layout as ``ch09_transformer.py``: each function carries the name of the exercise part it
answers and is registered in ``BUGS[name]`` with a one-line description; the hidden tests of the
notebook must fail every one of them while the reference passes. Among them are the mistakes
issue 13 lists: the causal mask off by one (the diagonal excluded, one future key seen), the
KV-cache offset off by one or ignored, top-p keeping one token too few or one too many, and the
temperature applied after the softmax; and those of issue 37 in the block and the model's
forward pass: post-LN or the residual around the LayerNorm, the second LayerNorm replaced by
the first, the MLP fed the block's input, the KV cache not handed on, the targets shifted a
second time, the padding targets (-1) counted in the mean or the mean taken per sequence, the
positions restarted at 0 after a cache, an untied output layer, dropout in eval mode, no final
LayerNorm, logits for the last position only. ``ALTERNATIVES`` (at the end) holds correct
answers written differently, which the hidden tests must accept.

``Block`` and ``GPT`` are classes: the learner writes their ``forward``, the answer cell gives
the layers (``_BlockLayers`` and ``_GPTLayers`` below make the same ones), so each version below
is one of those with a ``forward`` (and one with a layer added). Nothing here calls or
subclasses the package's version of a part of this notebook at run time (when the notebook is
graded, those are withheld from answers): the filters are ``_filter``, written again, and the
model's blocks are the ``Block`` of the namespace the model is built in (``_block_class``).

Issue 31 added, from the classes of mistakes it lists: faked autograd (NumPy weights wrapped
with ``requires_grad=True``), a finite mask fill, float32 results for float64 inputs (the
weights, the block's output, the loss, the filtered logits), a scale by the wrong axis, the
LayerNorms' eps ignored, ``ignore_index=0``, dropout on the token embeddings only, a full
window refused, the length check without the cached tokens or as an ``assert`` (input checks,
graded apart), ``top_p=0`` masking every logit (the filter and the sampler), top-p's softmax by
hand (nan for large logits), ties with the k-th logit dropped, a greedy argmax over the whole
batch, squeezed ids, and bias=False removing the LayerNorms' gains.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from mini_llm import generate, gpt

from ._registry import new_registry

REFERENCE = ("mini_llm.gpt", "mini_llm.generate")
"""the mini_llm modules that hold the reference of each graded part"""

BUGS, ALTERNATIVES, bug, correct = new_registry()
derived = bug.derived


# ---------------------------------------------------------------------- causal_attention_weights


def _masked_softmax(q, k, diagonal, scale=True):
    """Softmax of the scores with keys j allowed where j <= i + diagonal (query row i)."""
    scores = q @ k.transpose(-2, -1)
    if scale:
        scores = scores / math.sqrt(q.size(-1))
    allowed = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool).tril(diagonal=diagonal)
    return torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)


def _weights(q, k, offset=0, *, ahead=0, scale=True):
    """The right weights; knobs: keys seen ``ahead`` of the query's position (-1: not even
    its own) and the ``scale`` by 1/sqrt(d)."""
    return _masked_softmax(q, k, offset + ahead, scale=scale)


_weights_bug = bug.variants("causal_attention_weights", _weights, like=gpt.causal_attention_weights)
_weights_bug("diagonal_excluded", "tril(-1): a query may not see itself", ahead=-1)
_weights_bug("one_future_key", "tril(+1): each query sees one key ahead", ahead=1)
_weights_bug(
    "offset_ignored",
    "the mask starts at the top left: new queries are treated as positions 0, 1, ...",
    offset=0,
)
_weights_bug(
    "offset_minus_one",
    "cache offset off by one: the first new query is put at position offset - 1",
    offset=derived(lambda a: max(a.offset - 1, 0)),
)
_weights_bug("no_scaling", "scores not divided by sqrt(d)", scale=False)


@bug(
    "causal_attention_weights",
    "mask_after_softmax",
    "softmax over all keys, then the future weights zeroed: rows no longer sum to 1",
)
def _(q, k, offset=0):
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    allowed = torch.ones(q.size(-2), k.size(-2)).tril(diagonal=offset)
    return weights * allowed


@bug(
    "causal_attention_weights",
    "numpy_wrapped",
    "the weights computed in NumPy and wrapped with requires_grad=True: no graph back to q, k",
)
def _(q, k, offset=0):
    import numpy as np

    scores = q.detach().numpy() @ np.swapaxes(k.detach().numpy(), -1, -2) / math.sqrt(q.size(-1))
    rows, cols = np.arange(q.size(-2))[:, None] + offset, np.arange(k.size(-2))[None, :]
    scores = np.where(cols <= rows, scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights = weights / weights.sum(-1, keepdims=True)
    return torch.tensor(weights, dtype=q.dtype, requires_grad=True)


@bug(
    "causal_attention_weights",
    "finite_mask_fill",
    "masked_fill(-1e4), not -inf: when every allowed score is lower still, the future wins",
)
def _(q, k, offset=0):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    allowed = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool).tril(diagonal=offset)
    return torch.softmax(scores.masked_fill(~allowed, -1e4), dim=-1)


@bug(
    "causal_attention_weights",
    "float32_weights",
    "the weights built in a new float32 tensor: float64 queries get float32 weights",
)
def _(q, k, offset=0):
    out = torch.zeros(*q.shape[:-1], k.size(-2))
    weights = _masked_softmax(q, k, offset)
    return out + weights.to(out.dtype)


@bug(
    "causal_attention_weights",
    "scale_by_query_count",
    "scores divided by the square root of q.size(-2) (the number of queries), not of d",
)
def _(q, k, offset=0):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-2))
    allowed = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool).tril(diagonal=offset)
    return torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)


# ----------------------------------------------------------------------------------------- Block


class _BlockLayers(nn.Module):
    """The layers the answer cell of Block makes (its ``__init__``): a Block without its
    forward, which each version below writes."""

    def __init__(self, config):
        super().__init__()
        d, eps, bias = config.n_embd, config.layer_norm_eps, config.bias
        self.ln_1 = nn.LayerNorm(d, eps=eps, bias=bias)
        self.attn = gpt.CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(d, eps=eps, bias=bias)
        self.mlp = gpt.MLP(config)


# First: a mistake only other widths of eps show, which no other part's tests meet (plain
# nbgrader runs part 3 with the learner's own Block, and tests/test_autograde.py hands in
# the first of these bugs that gets past the visible tests).
@bug(
    "Block",
    "default_eps",
    "F.layer_norm on the LayerNorms' weights without their eps: config.layer_norm_eps ignored",
)
class _(_BlockLayers):
    def forward(self, x, cache=None):
        shape = x.shape[-1:]
        h = F.layer_norm(x, shape, self.ln_1.weight, self.ln_1.bias)
        x = x + self.attn(h, cache)
        return x + self.mlp(F.layer_norm(x, shape, self.ln_2.weight, self.ln_2.bias))


@bug(
    "Block", "post_ln", "post-LN (the 2017 paper's order): ln_1(x + attn(x)), then ln_2(h + mlp(h))"
)
class _(_BlockLayers):
    def forward(self, x, cache=None):
        x = self.ln_1(x + self.attn(x, cache))
        return self.ln_2(x + self.mlp(x))


@bug(
    "Block",
    "residual_around_norm",
    "the LayerNorm's output becomes the stream: x = ln_1(x); x = x + attn(x) (the same for ln_2)",
)
class _(_BlockLayers):
    def forward(self, x, cache=None):
        x = self.ln_1(x)
        x = x + self.attn(x, cache)
        x = self.ln_2(x)
        return x + self.mlp(x)


@bug("Block", "ln_1_reused", "the first LayerNorm used before the MLP as well: ln_2 never used")
class _(_BlockLayers):
    def forward(self, x, cache=None):
        x = x + self.attn(self.ln_1(x), cache)
        return x + self.mlp(self.ln_1(x))


@bug(
    "Block",
    "mlp_reads_block_input",
    "the MLP fed the block's input, not the stream after attention: x + attn(ln_1(x)) + mlp(ln_2(x))",
)
class _(_BlockLayers):
    def forward(self, x, cache=None):
        return x + self.attn(self.ln_1(x), cache) + self.mlp(self.ln_2(x))


@bug("Block", "no_mlp_residual", "the MLP's output replaces the stream: mlp(ln_2(h)), not h + ...")
class _(_BlockLayers):
    def forward(self, x, cache=None):
        x = x + self.attn(self.ln_1(x), cache)
        return self.mlp(self.ln_2(x))


@bug(
    "Block",
    "cache_not_passed",
    "the KV cache not handed to the attention: new tokens see only themselves",
)
class _(_BlockLayers):
    def forward(self, x, cache=None):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


@bug("Block", "in_place_residual", "x += attn(ln_1(x)): the caller's tensor is changed in place")
class _(_BlockLayers):
    def forward(self, x, cache=None):
        x += self.attn(self.ln_1(x), cache)
        return x + self.mlp(self.ln_2(x))


@bug("Block", "float_output", "the output cast with .float() (for mixed precision): float64 lost")
class _(_BlockLayers):
    def forward(self, x, cache=None):
        x = x + self.attn(self.ln_1(x), cache)
        return (x + self.mlp(self.ln_2(x))).float()


# ------------------------------------------------------------------------------------------- GPT


def _block_class():
    """Part 2's ``Block`` where the model is built: the learner's (while GPT is graded, the
    reference's, which the grader puts in the learner's namespace); in this file, the
    package's."""
    return globals().get("Block") or gpt.Block


class _GPTLayers(nn.Module):
    """The layers the answer cell of GPT makes (its ``__init__``, as ``gpt.GPT`` makes them,
    from part 2's Block), and its two helpers; the forward is the answer."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.token_embedding = nn.Embedding(config.vocab_size, config.n_embd)
        self.position_embedding = nn.Embedding(config.block_size, config.n_embd)
        self.dropout = nn.Dropout(config.dropout)
        block = _block_class()
        self.blocks = nn.ModuleList(block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd, eps=config.layer_norm_eps, bias=config.bias)
        self.head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.head.weight = self.token_embedding.weight

    def num_parameters(self):
        return sum(p.numel() for p in self.parameters())


class _GPT(_GPTLayers):
    """The right forward pass in steps, each of which a bug below overrides."""

    def start(self, caches):
        return caches[0].length if caches else 0

    def check(self, start, T):
        if start + T > self.config.block_size:
            raise ValueError(f"{start + T} tokens, the context holds {self.config.block_size}")

    def positions(self, start, T):
        return torch.arange(start, start + T)

    def embed(self, idx, positions):
        return self.dropout(self.token_embedding(idx) + self.position_embedding(positions))

    def run_blocks(self, x, caches):
        for i, block in enumerate(self.blocks):
            x = block(x, caches[i] if caches else None)
        return x

    def logits(self, x, targets):
        return self.head(self.ln_f(x))

    def loss(self, logits, targets):
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-1)

    def forward(self, idx, targets=None, caches=None):
        start, T = self.start(caches), idx.size(1)
        self.check(start, T)
        x = self.run_blocks(self.embed(idx, self.positions(start, T)), caches)
        logits = self.logits(x, targets)
        return logits, None if targets is None else self.loss(logits, targets)


@bug(
    "GPT",
    "targets_shifted_again",
    "targets shifted once more: logits[:, :-1] scored against targets[:, 1:]",
)
class _(_GPT):
    def loss(self, logits, targets):
        return super().loss(logits[:, :-1], targets[:, 1:])


@bug(
    "GPT",
    "padding_counted",
    "reduction='none' with ignore_index=-1, then .mean(): the -1 targets count in the mean",
)
class _(_GPT):
    def loss(self, logits, targets):
        flat = logits.flatten(0, 1), targets.flatten()
        return F.cross_entropy(*flat, ignore_index=-1, reduction="none").mean()


@bug("GPT", "mean_per_sequence", "the mean over each sequence's tokens, then over the sequences")
class _(_GPT):
    def loss(self, logits, targets):
        per_token = F.cross_entropy(
            logits.transpose(1, 2), targets, ignore_index=-1, reduction="none"
        )
        counted = (targets != -1).sum(dim=1)
        return (per_token.sum(dim=1) / counted).mean()


@bug(
    "GPT",
    "targets_written",
    "the -1 targets overwritten with 0 in the caller's tensor to mask them",
)
class _(_GPT):
    def loss(self, logits, targets):
        counted = targets != -1
        targets[~counted] = 0
        per_token = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none")
        return (per_token * counted.flatten()).sum() / counted.sum()


@bug("GPT", "positions_from_zero", "positions always 0 .. T-1, also after the tokens in the caches")
class _(_GPT):
    def positions(self, start, T):
        return torch.arange(T)


@bug(
    "GPT",
    "cache_size_as_start",
    "start read from the cache's size (caches[0].keys.size(2): the whole context), not its length",
)
class _(_GPT):
    def start(self, caches):
        return caches[0].keys.size(2) if caches else 0


@bug("GPT", "caches_not_passed", "the blocks called without their caches: block(x)")
class _(_GPT):
    def run_blocks(self, x, caches):
        return super().run_blocks(x, None)


@bug("GPT", "untied_head", "a new output layer made in __init__: a separate V x d matrix, not tied")
class _(_GPT):
    def __init__(self, config):
        super().__init__(config)
        self.head = nn.Linear(config.n_embd, config.vocab_size, bias=False)


@bug(
    "GPT", "dropout_in_eval", "F.dropout(x, p) (training=True by default): dropout in eval mode too"
)
class _(_GPT):
    def embed(self, idx, positions):
        x = self.token_embedding(idx) + self.position_embedding(positions)
        return F.dropout(x, self.config.dropout)


@bug("GPT", "no_final_norm", "the final LayerNorm skipped: head(x)")
class _(_GPT):
    def logits(self, x, targets):
        return self.head(x)


@bug(
    "GPT",
    "last_position_only",
    "without targets, logits for the last position only (nanoGPT's shortcut for generation)",
)
class _(_GPT):
    def logits(self, x, targets):
        return super().logits(x if targets is not None else x[:, -1:], targets)


@bug.input(
    "GPT", "too_long_accepted", "no check of the length: too long a sequence fails in the embedding"
)
class _(_GPT):
    def check(self, start, T):
        pass


@bug.input(
    "GPT",
    "cache_not_counted",
    "checks T > block_size only: the tokens already in the caches are not counted",
)
class _(_GPT):
    def check(self, start, T):
        if T > self.config.block_size:
            raise ValueError("too long")


@bug.input(
    "GPT",
    "assert_length",
    "assert start + T <= block_size: an AssertionError, not a ValueError",
)
class _(_GPT):
    def check(self, start, T):
        assert start + T <= self.config.block_size, "too long"


@bug(
    "GPT",
    "full_window_refused",
    "start + T >= block_size refused: a window of exactly block_size tokens raises",
)
class _(_GPT):
    def check(self, start, T):
        if start + T >= self.config.block_size:
            raise ValueError("too long")


@bug(
    "GPT",
    "loss_in_float32",
    "F.cross_entropy(logits.float(), ...): a float64 model gets a float32 loss",
)
class _(_GPT):
    def loss(self, logits, targets):
        return super().loss(logits.float(), targets)


@bug("GPT", "padding_is_zero", "ignore_index=0 (a common padding id), not -1: token 0 not scored")
class _(_GPT):
    def loss(self, logits, targets):
        flat = logits.flatten(0, 1), targets.flatten().clamp(min=0)
        return F.cross_entropy(*flat, ignore_index=0)


@bug(
    "GPT",
    "dropout_on_tokens_only",
    "dropout on the token embeddings alone, before the positions are added",
)
class _(_GPT):
    def embed(self, idx, positions):
        return self.dropout(self.token_embedding(idx)) + self.position_embedding(positions)


# --------------------------------------------------------------------------------- filter_logits


def _top_k(logits, top_k):
    if top_k is not None and top_k < logits.size(-1):
        kth_best = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth_best, float("-inf"))
    return logits


def _filter(logits, top_k=None, top_p=None, *, extra=1, keep_first=True):
    """The right filter (the package's rule, written again); knobs: ``extra``, the tokens kept
    after those whose higher-ranked tokens add up to less than top_p, minus one (1: none more,
    0: one fewer, 2: one more), and ``keep_first``, the most likely token kept whatever top_p."""
    logits = _top_k(logits, top_k)
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        keep_sorted = (probs.cumsum(dim=-1) - probs) < top_p
        if keep_first:
            keep_sorted[:, 0] = True
        if extra != 1:
            n_keep = keep_sorted.sum(-1, keepdim=True) + extra - 1
            ranks = torch.arange(logits.size(-1)).expand_as(logits)
            keep_sorted = ranks < n_keep.clamp(1, logits.size(-1))
        keep = keep_sorted.scatter(-1, order, keep_sorted)
        logits = logits.masked_fill(~keep, float("-inf"))
    return logits


_filter_bug = bug.variants("filter_logits", _filter, like=generate.filter_logits)
_filter_bug(
    "top_p_one_too_few",
    "top-p keeps the tokens whose cumulative mass is below p: the token that reaches p is lost",
    extra=0,
)
_filter_bug("top_p_one_too_many", "top-p keeps one token after the one that reaches p", extra=2)
_filter_bug(
    "top_p_zero_masks_all",
    "no exception for the most likely token: top_p=0 masks every logit",
    keep_first=False,
)


@bug(
    "filter_logits",
    "top_p_unsorted",
    "top-p adds up the probabilities in vocabulary order, not from the most likely down",
)
def _(logits, top_k=None, top_p=None):
    logits = _top_k(logits, top_k)
    if top_p is not None and top_p < 1.0:
        probs = torch.softmax(logits, dim=-1)
        mass_before = probs.cumsum(-1) - probs
        logits = logits.masked_fill(mass_before >= top_p, float("-inf"))
    return logits


@bug("filter_logits", "top_k_keeps_k_plus_one", "top-k keeps k + 1 tokens (topk(k + 1))")
def _(logits, top_k=None, top_p=None):
    if top_k is not None and top_k < logits.size(-1):
        logits = _filter(logits, top_k=min(top_k + 1, logits.size(-1)))
    return _filter(logits, top_p=top_p)


@bug(
    "filter_logits",
    "top_p_before_top_k",
    "top-p measured on the unfiltered probabilities, then top-k: the order reversed",
)
def _(logits, top_k=None, top_p=None):
    return _filter(_filter(logits, top_p=top_p), top_k=top_k)


@bug("filter_logits", "in_place", "masked_fill_ changes the caller's logits")
def _(logits, top_k=None, top_p=None):
    filtered = _filter(logits, top_k, top_p)
    logits.copy_(filtered)
    return logits


@bug(
    "filter_logits",
    "softmax_by_hand",
    "top-p's probabilities as exp(x) / sum(exp(x)), no max subtracted: large logits give nan",
)
def _(logits, top_k=None, top_p=None):
    logits = _top_k(logits, top_k)
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        exps = sorted_logits.exp()
        probs = exps / exps.sum(-1, keepdim=True)
        drop_sorted = probs.cumsum(-1) - probs >= top_p
        drop_sorted[:, 0] = False
        logits = logits.masked_fill(drop_sorted.scatter(-1, order, drop_sorted), float("-inf"))
    return logits


@bug(
    "filter_logits",
    "float32_result",
    "torch.where(keep, logits, torch.full(shape, -inf)): the default float32 for float64 logits",
)
def _(logits, top_k=None, top_p=None):
    kept = torch.isfinite(_filter(logits, top_k, top_p))
    return torch.where(kept, logits, torch.full(logits.shape, float("-inf"))).float()


@bug(
    "filter_logits",
    "top_k_exactly_k",
    "topk's indices scattered into a mask: exactly k kept, a token tied with the k-th dropped",
)
def _(logits, top_k=None, top_p=None):
    if top_k is not None and top_k < logits.size(-1):
        keep = torch.zeros_like(logits, dtype=torch.bool)
        keep.scatter_(-1, torch.topk(logits, top_k, dim=-1).indices, True)
        logits = logits.masked_fill(~keep, float("-inf"))
    return _filter(logits, top_p=top_p)


# ------------------------------------------------------------------------------------ next_token


def _next(logits, temperature=1.0, top_k=None, top_p=None, generator=None, *, probs=None):
    """The right draw; knob: the probabilities ``probs(logits, temperature, top_k, top_p)``."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    if probs is None:
        p = F.softmax(_filter(logits.float() / temperature, top_k, top_p), dim=-1)
    else:
        p = probs(logits.float(), temperature, top_k, top_p)
    return torch.multinomial(p, 1, generator=generator)


_next_bug = bug.variants("next_token", _next, like=generate.next_token)
_next_bug(
    "temperature_after_softmax",
    "the probabilities divided by the temperature: sampling renormalises, so it does nothing",
    probs=lambda x, t, k, p: F.softmax(_filter(x, k, p), dim=-1) / t,
)
_next_bug(
    "temperature_multiplies",
    "logits multiplied by the temperature",
    probs=lambda x, t, k, p: F.softmax(_filter(x * t, k, p), dim=-1),
)
_next_bug(
    "filter_before_temperature",
    "top-k/top-p applied to the logits before the temperature divides them",
    probs=lambda x, t, k, p: F.softmax(_filter(x, k, p) / t, dim=-1),
)
_next_bug(
    "ignores_generator",
    "samples with the global random state, not the generator",
    generator=None,
)
_next_bug(
    "ignores_filters",
    "top_k and top_p are never applied",
    probs=lambda x, t, k, p: F.softmax(x / t, dim=-1),
)
_next_bug(
    "own_filter_masks_all",
    "a filter without the most likely token's exception: top_p=0 leaves nothing to sample",
    probs=lambda x, t, k, p: F.softmax(_filter(x / t, k, p, keep_first=False), dim=-1),
)


@bug("next_token", "greedy_whole_batch", "temperature 0: argmax() of the whole tensor, not per row")
def _(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return (logits.argmax() % logits.size(-1)).expand(logits.size(0), 1)
    return _next(logits, temperature, top_k, top_p, generator)


@bug("next_token", "squeezed", "multinomial(...).squeeze(-1): ids of shape (B,), not (B, 1)")
def _(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    return _next(logits, temperature, top_k, top_p, generator).squeeze(-1)


# ------------------------------------------------------------------------------- parameter_count


def _count(
    V, T, L, d, bias=True, *, head=0, positions=True, final=True, norm_bias=None, gains=True
):
    """The right count; knobs: ``head`` untied output matrices, the ``positions`` table, the
    ``final`` LayerNorm, and LayerNorm biases (``norm_bias``; None: as ``bias`` says)."""
    norm_bias = bias if norm_bias is None else norm_bias
    norm = (d if norm_bias else 0) + (d if gains else 0)
    linear_biases = 9 * d if bias else 0
    block = 12 * d * d + linear_biases + 2 * norm
    return V * d + head * V * d + (T * d if positions else 0) + L * block + (norm if final else 0)


_count_bug = bug.variants("parameter_count", _count, like=gpt.parameter_count)
_count_bug("untied_head", "the output layer counted as a second V x d matrix", head=1)
_count_bug("no_positions", "the position embedding left out", positions=False)
_count_bug("no_final_norm", "the final LayerNorm left out", final=False)
_count_bug(
    "norm_biases_kept",
    "bias=False removes the Linear biases but keeps the LayerNorm biases",
    norm_bias=True,
)
_count_bug(
    "no_norm_gains_without_bias",
    "bias=False removes the LayerNorms altogether, their gains too",
    norm_bias=derived(lambda a: a.bias),
    gains=derived(lambda a: a.bias),
)
_count_bug(
    "float_result",
    "the count computed in floating point (a float back)",
    returns=lambda n, a: float(n),
)


# ---------------------------------------------------------------------------------- alternatives


@correct("causal_attention_weights", "python_loops")
def _(q, k, offset=0):
    """Row by row: each query's softmax over the keys it may see, in a tensor of zeros."""
    B, H, Tq, d = q.shape
    out = torch.zeros(B, H, Tq, k.size(-2), dtype=q.dtype)
    for i in range(Tq):
        seen = offset + i + 1
        scores = (q[:, :, i : i + 1] * k[:, :, :seen]).sum(-1) / math.sqrt(d)
        out[:, :, i, :seen] = torch.softmax(scores, dim=-1)
    return out


@correct("causal_attention_weights", "logsumexp")
def _(q, k, offset=0):
    """exp(score - logsumexp(allowed scores)): the softmax in log space, a -inf mask by where."""
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) * q.size(-1) ** -0.5
    rows = torch.arange(q.size(-2)).unsqueeze(-1) + offset
    allowed = torch.arange(k.size(-2)) <= rows
    scores = torch.where(allowed, scores, torch.tensor(float("-inf"), dtype=q.dtype))
    return torch.exp(scores - torch.logsumexp(scores, dim=-1, keepdim=True))


@correct("causal_attention_weights", "sdpa_on_identity_values")
def _(q, k, offset=0):
    """PyTorch's attention with the identity as values returns the weights themselves."""
    Tq, Tk = q.size(-2), k.size(-2)
    allowed = torch.ones(Tq, Tk, dtype=torch.bool).tril(diagonal=offset)
    identity = torch.eye(Tk, dtype=q.dtype).expand(*k.shape[:-2], Tk, Tk)
    return F.scaled_dot_product_attention(q, k, identity, attn_mask=allowed)


@correct("Block", "functional_calls")
class _(_BlockLayers):
    """LayerNorms and the MLP written with torch.nn.functional, on the layers' weights."""

    def forward(self, x, cache=None):
        mlp, shape = self.mlp, x.shape[-1:]
        h = F.layer_norm(x, shape, self.ln_1.weight, self.ln_1.bias, self.ln_1.eps)
        x = torch.add(x, self.attn(h, cache))
        h = F.layer_norm(x, shape, self.ln_2.weight, self.ln_2.bias, self.ln_2.eps)
        hidden = mlp.activation(F.linear(h, mlp.fc.weight, mlp.fc.bias))
        out = F.linear(hidden, mlp.proj.weight, mlp.proj.bias)
        return torch.add(x, F.dropout(out, mlp.dropout.p, self.training))


@correct("Block", "sublayer_loop")
class _(_BlockLayers):
    def forward(self, x, cache=None):
        sublayers = ((self.ln_1, lambda h: self.attn(h, cache)), (self.ln_2, self.mlp))
        for norm, sublayer in sublayers:
            x = x + sublayer(norm(x))
        return x


@correct("GPT", "log_softmax_gather")
class _(_GPTLayers):
    """Positions sliced from the table, the tied matrix used directly, the loss by hand."""

    def forward(self, idx, targets=None, caches=None):
        start, T = (caches[0].length if caches else 0), idx.size(1)
        if start + T > self.config.block_size:
            raise ValueError("the sequence is longer than the model's context")
        x = self.token_embedding(idx) + self.position_embedding.weight[start : start + T]
        x = self.dropout(x)
        for i, block in enumerate(self.blocks):
            x = block(x, None if caches is None else caches[i])
        logits = self.ln_f(x) @ self.token_embedding.weight.T
        if targets is None:
            return logits, None
        counted = targets != -1
        log_probs = logits.log_softmax(dim=-1)
        picked = log_probs.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        return logits, -(picked * counted).sum() / counted.sum()


@correct("GPT", "one_hot_and_class_axis")
class _(_GPTLayers):
    """Embeddings as one-hot products, the loss with the classes on axis 1 (B, V, T)."""

    def forward(self, idx, targets=None, caches=None):
        start = caches[0].length if caches else 0
        if start + idx.size(1) > self.config.block_size:
            raise ValueError("the sequence is longer than the model's context")
        table = self.token_embedding.weight
        tokens = F.one_hot(idx, table.size(0)).to(table.dtype) @ table
        positions = self.position_embedding(torch.arange(idx.size(1)) + start)
        x = self.dropout(tokens + positions)
        for block, cache in zip(self.blocks, caches or [None] * len(self.blocks)):
            x = block(x, cache)
        logits = self.head(self.ln_f(x))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=-1)


@correct("filter_logits", "loop_over_rows")
def _(logits, top_k=None, top_p=None):
    rows = []
    for row in logits.tolist():
        ranked = sorted(range(len(row)), key=lambda i: -row[i])
        kept = ranked
        if top_k is not None and top_k < len(row):  # ties with the k-th are kept too
            kept = [i for i in ranked if row[i] >= row[ranked[top_k - 1]]]
        if top_p is not None:
            top = max(row[i] for i in kept)
            weights = [math.exp(row[i] - top) for i in kept]
            total, mass, nucleus = sum(weights), 0.0, []
            for i, w in zip(kept, weights, strict=True):
                if mass >= top_p and nucleus:  # the most likely token is always kept
                    break
                nucleus.append(i)
                mass += w / total
            kept = nucleus
        rows.append([x if i in kept else float("-inf") for i, x in enumerate(row)])
    return torch.tensor(rows, dtype=logits.dtype)


@correct("filter_logits", "sorted_threshold")
def _(logits, top_k=None, top_p=None):
    filtered = logits.clone()
    if top_k is not None and top_k < logits.size(-1):
        threshold = logits.sort(dim=-1, descending=True).values[:, top_k - 1 : top_k]
        filtered[filtered < threshold] = float("-inf")
    if top_p is not None and top_p < 1.0:
        probs = torch.softmax(filtered, dim=-1).sort(dim=-1, descending=True).values
        cumulative = probs.cumsum(-1)
        n_keep = (cumulative < top_p).sum(-1, keepdim=True) + 1
        smallest_kept = probs.gather(-1, (n_keep - 1).clamp(max=logits.size(-1) - 1))
        original_probs = torch.softmax(filtered, dim=-1)
        filtered[original_probs < smallest_kept] = float("-inf")
    return filtered


@correct("filter_logits", "rank_of_each_token")
def _(logits, top_k=None, top_p=None):
    """Each token's rank and the mass ranked above it, computed in vocabulary order."""
    out = logits.clone()
    V = logits.size(-1)
    if top_k is not None and top_k < V:
        kth = logits.sort(dim=-1, descending=True).values[:, top_k - 1 :: V]
        out = torch.where(logits >= kth, out, torch.full_like(out, float("-inf")))
    if top_p is not None and top_p < 1.0:
        order = out.argsort(dim=-1, descending=True, stable=True)
        rank = order.argsort(dim=-1)
        probs = out.softmax(dim=-1)
        above = (probs.gather(-1, order).cumsum(-1) - probs.gather(-1, order)).gather(-1, rank)
        keep = (above < top_p) | (rank == 0)
        out = out.masked_fill(~keep, float("-inf"))
    return out


@correct("next_token", "inverse_cdf")
def _(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    probs = F.softmax(_filter(logits.float() / temperature, top_k, top_p), dim=-1)
    u = torch.rand(logits.size(0), 1, generator=generator)
    ids = torch.searchsorted(probs.cumsum(-1), u * probs.sum(-1, keepdim=True))
    return ids.clamp(max=logits.size(-1) - 1)


@correct("next_token", "gumbel_max")
def _(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    scaled = _filter(logits.float() / temperature, top_k, top_p)
    u = torch.rand(scaled.shape, generator=generator).clamp(1e-12, 1 - 1e-12)
    return (scaled - torch.log(-torch.log(u))).argmax(dim=-1, keepdim=True)


@correct("parameter_count", "from_modules")
def _(vocab_size, block_size, n_layer, n_embd, bias=True):
    """The layers made on the meta device (shapes only: no memory, even for GPT-2's 124 M),
    then their parameters counted."""
    d = n_embd
    with torch.device("meta"):
        layers = [nn.Embedding(vocab_size, d), nn.Embedding(block_size, d)]
        for _ in range(n_layer):
            layers += [nn.LayerNorm(d, bias=bias), nn.Linear(d, 3 * d, bias=bias)]
            layers += [nn.Linear(d, d, bias=bias), nn.LayerNorm(d, bias=bias)]
            layers += [nn.Linear(d, 4 * d, bias=bias), nn.Linear(4 * d, d, bias=bias)]
        layers.append(nn.LayerNorm(d, bias=bias))  # the head is the token embedding: tied
    return sum(p.numel() for layer in layers for p in layer.parameters())


@correct("parameter_count", "per_tensor")
def _(vocab_size, block_size, n_layer, n_embd, bias=True):
    d = n_embd
    weights = [vocab_size * d, block_size * d]
    for _ in range(n_layer):
        weights += [d, 3 * d * d, d * d, d, 4 * d * d, 4 * d * d]  # ln_1, qkv, proj, ln_2, mlp
        if bias:
            weights += [d, 3 * d, d, d, 4 * d, d]
    weights += [d] + ([d] if bias else [])
    return sum(weights)
