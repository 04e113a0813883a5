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
the layers (``Block``'s ``__init__`` is ``gpt.Block``'s, ``GPT``'s calls ``gpt.GPT``'s), so each
version below is the package's class with another ``forward`` (and one with a layer added).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from mini_llm import generate, gpt
from mini_llm.generate import filter_logits as reference_filter

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


# ----------------------------------------------------------------------------------------- Block
@bug(
    "Block", "post_ln", "post-LN (the 2017 paper's order): ln_1(x + attn(x)), then ln_2(h + mlp(h))"
)
class _(gpt.Block):
    def forward(self, x, cache=None):
        x = self.ln_1(x + self.attn(x, cache))
        return self.ln_2(x + self.mlp(x))


@bug(
    "Block",
    "residual_around_norm",
    "the LayerNorm's output becomes the stream: x = ln_1(x); x = x + attn(x) (the same for ln_2)",
)
class _(gpt.Block):
    def forward(self, x, cache=None):
        x = self.ln_1(x)
        x = x + self.attn(x, cache)
        x = self.ln_2(x)
        return x + self.mlp(x)


@bug("Block", "ln_1_reused", "the first LayerNorm used before the MLP as well: ln_2 never used")
class _(gpt.Block):
    def forward(self, x, cache=None):
        x = x + self.attn(self.ln_1(x), cache)
        return x + self.mlp(self.ln_1(x))


@bug(
    "Block",
    "mlp_reads_block_input",
    "the MLP fed the block's input, not the stream after attention: x + attn(ln_1(x)) + mlp(ln_2(x))",
)
class _(gpt.Block):
    def forward(self, x, cache=None):
        return x + self.attn(self.ln_1(x), cache) + self.mlp(self.ln_2(x))


@bug("Block", "no_mlp_residual", "the MLP's output replaces the stream: mlp(ln_2(h)), not h + ...")
class _(gpt.Block):
    def forward(self, x, cache=None):
        x = x + self.attn(self.ln_1(x), cache)
        return self.mlp(self.ln_2(x))


@bug(
    "Block",
    "cache_not_passed",
    "the KV cache not handed to the attention: new tokens see only themselves",
)
class _(gpt.Block):
    def forward(self, x, cache=None):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


@bug("Block", "in_place_residual", "x += attn(ln_1(x)): the caller's tensor is changed in place")
class _(gpt.Block):
    def forward(self, x, cache=None):
        x += self.attn(self.ln_1(x), cache)
        return x + self.mlp(self.ln_2(x))


# ------------------------------------------------------------------------------------------- GPT


class _GPT(gpt.GPT):
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


@bug(
    "GPT", "too_long_accepted", "no check of the length: too long a sequence fails in the embedding"
)
class _(_GPT):
    def check(self, start, T):
        pass


# --------------------------------------------------------------------------------- filter_logits


def _top_k(logits, top_k):
    if top_k is not None and top_k < logits.size(-1):
        kth_best = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth_best, float("-inf"))
    return logits


def _keep_first(logits, order, n_keep):
    """Keep the first ``n_keep`` (B, 1) tokens of each row's ``order``; -inf for the rest."""
    ranks = torch.arange(logits.size(-1)).expand_as(logits)
    keep_sorted = ranks < n_keep
    keep = keep_sorted.scatter(-1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))


def _nucleus_size(logits, top_p, extra):
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
    cumulative = torch.softmax(sorted_logits, dim=-1).cumsum(-1)
    n_keep = (cumulative < top_p).sum(-1, keepdim=True) + extra
    return order, n_keep.clamp(max=logits.size(-1))


def _filter(logits, top_k=None, top_p=None, *, extra=1):
    """The right filter; ``extra``: the tokens kept after those below the mass top_p (1: the
    token that reaches it)."""
    logits = _top_k(logits, top_k)
    if top_p is not None and top_p < 1.0:
        order, n_keep = _nucleus_size(logits, top_p, extra)
        logits = _keep_first(logits, order, n_keep.clamp(min=1))
    return logits


_filter_bug = bug.variants("filter_logits", _filter, like=reference_filter)
_filter_bug(
    "top_p_one_too_few",
    "top-p keeps the tokens whose cumulative mass is below p: the token that reaches p is lost",
    extra=0,
)
_filter_bug("top_p_one_too_many", "top-p keeps one token after the one that reaches p", extra=2)


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
        logits = reference_filter(logits, top_k=min(top_k + 1, logits.size(-1)))
    return reference_filter(logits, top_p=top_p)


@bug(
    "filter_logits",
    "top_p_before_top_k",
    "top-p measured on the unfiltered probabilities, then top-k: the order reversed",
)
def _(logits, top_k=None, top_p=None):
    return reference_filter(reference_filter(logits, top_p=top_p), top_k=top_k)


@bug("filter_logits", "in_place", "masked_fill_ changes the caller's logits")
def _(logits, top_k=None, top_p=None):
    filtered = reference_filter(logits, top_k, top_p)
    logits.copy_(filtered)
    return logits


# ------------------------------------------------------------------------------------ next_token


def _next(logits, temperature=1.0, top_k=None, top_p=None, generator=None, *, probs=None):
    """The right draw; knob: the probabilities ``probs(logits, temperature, top_k, top_p)``."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    if probs is None:
        p = F.softmax(reference_filter(logits.float() / temperature, top_k, top_p), dim=-1)
    else:
        p = probs(logits.float(), temperature, top_k, top_p)
    return torch.multinomial(p, 1, generator=generator)


_next_bug = bug.variants("next_token", _next, like=generate.next_token)
_next_bug(
    "temperature_after_softmax",
    "the probabilities divided by the temperature: sampling renormalises, so it does nothing",
    probs=lambda x, t, k, p: F.softmax(reference_filter(x, k, p), dim=-1) / t,
)
_next_bug(
    "temperature_multiplies",
    "logits multiplied by the temperature",
    probs=lambda x, t, k, p: F.softmax(reference_filter(x * t, k, p), dim=-1),
)
_next_bug(
    "filter_before_temperature",
    "top-k/top-p applied to the logits before the temperature divides them",
    probs=lambda x, t, k, p: F.softmax(reference_filter(x, k, p) / t, dim=-1),
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


# ------------------------------------------------------------------------------- parameter_count


def _count(V, T, L, d, bias=True, *, head=0, positions=True, final=True, norm_bias=None):
    """The right count; knobs: ``head`` untied output matrices, the ``positions`` table, the
    ``final`` LayerNorm, and LayerNorm biases (``norm_bias``; None: as ``bias`` says)."""
    norm_bias = bias if norm_bias is None else norm_bias
    norm = 2 * d if norm_bias else d
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
    "float_result",
    "the count computed in floating point (a float back)",
    returns=lambda n, a: float(n),
)


# ---------------------------------------------------------------------------------- alternatives


@correct("causal_attention_weights", "python_loops")
def _(q, k, offset=0):
    B, H, Tq, d = q.shape
    out = torch.zeros(B, H, Tq, k.size(-2), dtype=q.dtype)
    for b in range(B):
        for h in range(H):
            for i in range(Tq):
                seen = offset + i + 1
                scores = [float(q[b, h, i] @ k[b, h, j]) / math.sqrt(d) for j in range(seen)]
                top = max(scores)
                exps = [math.exp(s - top) for s in scores]
                for j, e in enumerate(exps):
                    out[b, h, i, j] = e / sum(exps)
    return out


@correct("causal_attention_weights", "sdpa_on_identity_values")
def _(q, k, offset=0):
    """PyTorch's attention with the identity as values returns the weights themselves."""
    Tq, Tk = q.size(-2), k.size(-2)
    allowed = torch.ones(Tq, Tk, dtype=torch.bool).tril(diagonal=offset)
    identity = torch.eye(Tk, dtype=q.dtype).expand(*k.shape[:-2], Tk, Tk)
    return F.scaled_dot_product_attention(q, k, identity, attn_mask=allowed)


@correct("Block", "functional_calls")
class _(gpt.Block):
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
class _(gpt.Block):
    def forward(self, x, cache=None):
        sublayers = ((self.ln_1, lambda h: self.attn(h, cache)), (self.ln_2, self.mlp))
        for norm, sublayer in sublayers:
            x = x + sublayer(norm(x))
        return x


@correct("GPT", "log_softmax_gather")
class _(gpt.GPT):
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
class _(gpt.GPT):
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
        kept = ranked[:top_k] if top_k is not None else ranked
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


@correct("next_token", "inverse_cdf")
def _(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    probs = F.softmax(reference_filter(logits.float() / temperature, top_k, top_p), dim=-1)
    u = torch.rand(logits.size(0), 1, generator=generator)
    ids = torch.searchsorted(probs.cumsum(-1), u * probs.sum(-1, keepdim=True))
    return ids.clamp(max=logits.size(-1) - 1)


@correct("next_token", "gumbel_max")
def _(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    scaled = reference_filter(logits.float() / temperature, top_k, top_p)
    u = torch.rand(scaled.shape, generator=generator).clamp(1e-12, 1 - 1e-12)
    return (scaled - torch.log(-torch.log(u))).argmax(dim=-1, keepdim=True)


@correct("parameter_count", "from_modules")
def _(vocab_size, block_size, n_layer, n_embd, bias=True):
    from mini_llm.gpt import GPT, GPTConfig

    config = GPTConfig(vocab_size, block_size, n_layer, 1, n_embd, bias=bias)
    with torch.device("meta"):  # shapes only: no memory, even for GPT-2's 124 M
        model = GPT(config)
    return sum(p.numel() for p in model.parameters())


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
