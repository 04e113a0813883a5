"""Known-buggy answers to the ch04_embeddings exercise: mistakes learners really make.

Same layout as ``ch01_bigrams.py``: each function carries the name of the exercise part it
answers and is registered in ``BUGS[name]`` with a one-line description; the hidden tests of the
notebook must fail every one of them while the reference passes. ``ALTERNATIVES`` (at the end)
holds correct answers written differently (loops, a hand-written stable softplus, NumPy instead
of torch), which the hidden tests must accept.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from mini_llm import embeddings as reference

from ._registry import new_registry

REFERENCE = ("mini_llm.embeddings",)
"""the mini_llm modules that hold the reference of each graded part"""

BUGS, ALTERNATIVES, bug, correct = new_registry()


def _as_pairs(centers, contexts):
    return (
        np.asarray(centers, dtype=np.int64).reshape(-1),
        np.asarray(contexts, dtype=np.int64).reshape(-1),
    )


# -------------------------------------------------------------------------- skipgram_pairs


def _loop_pairs(ids, window, *, partners):
    """Pairs by a double loop over the positions: position i with each j of
    ``partners(i, len(ids), window)``."""
    if window < 1:
        raise ValueError("window must be at least 1")
    ids = list(np.asarray(ids).reshape(-1))
    centers, contexts = [], []
    for i in range(len(ids)):
        for j in partners(i, len(ids), window):
            centers.append(ids[i])
            contexts.append(ids[j])
    return _as_pairs(centers, contexts)


def _skipgram(ids, window, *, checked=True, farthest=0):
    """The right pairs, by distance (``checked``: window >= 1); ``farthest``: added to the
    largest distance."""
    if checked and window < 1:
        raise ValueError("window must be at least 1")
    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    centers, contexts = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for d in range(1, window + 1 + farthest):
        centers += [ids[:-d], ids[d:]]
        contexts += [ids[d:], ids[:-d]]
    return np.concatenate(centers), np.concatenate(contexts)


_loop_bug = bug.variants("skipgram_pairs", _loop_pairs, like=reference.skipgram_pairs)
_skipgram_bug = bug.variants("skipgram_pairs", _skipgram, like=reference.skipgram_pairs)
_loop_bug(
    "one_direction",
    "only (left, right) pairs: a word never sees its left side",
    partners=lambda i, n, window: range(i + 1, min(i + window, n - 1) + 1),
)
_loop_bug(
    "self_pairs",
    "distance 0 included: every word is its own context",
    partners=lambda i, n, window: range(max(0, i - window), min(n, i + window + 1)),
)
_skipgram_bug(
    "window_off_by_one",
    "range(1, window): the words exactly `window` away are missed",
    farthest=-1,
)


@bug("skipgram_pairs", "wraps_around", "np.roll: the last words pair with the first ones")
def _(ids, window):
    if window < 1:
        raise ValueError("window must be at least 1")
    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    centers, contexts = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for d in range(1, window + 1):
        if ids.size > d:
            centers += [ids, ids]
            contexts += [np.roll(ids, -d), np.roll(ids, d)]
    return np.concatenate(centers), np.concatenate(contexts)


@bug(
    "skipgram_pairs",
    "short_sequence_crash",
    "np.concatenate of nothing: crashes on a sequence of one word",
)
def _(ids, window):
    if window < 1:
        raise ValueError("window must be at least 1")
    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    centers, contexts = [], []
    for d in range(1, min(window, ids.size - 1) + 1):
        centers += [ids[:-d], ids[d:]]
        contexts += [ids[d:], ids[:-d]]
    return np.concatenate(centers), np.concatenate(contexts)


@bug.input(
    "skipgram_pairs", "no_window_check", "window 0 quietly gives no pairs instead of ValueError"
)
def _(ids, window):
    return _skipgram(ids, window, checked=False)


# ---------------------------------------------------------------------- noise_distribution


def _checked_counts(counts):
    counts = np.asarray(counts, dtype=np.float64)
    if counts.ndim != 1 or counts.size == 0 or (counts < 0).any() or counts.sum() == 0:
        raise ValueError("bad counts")
    return counts


@bug("noise_distribution", "no_power", "counts / counts.sum(): the power is forgotten")
def _(counts, power=0.75):
    counts = _checked_counts(counts)
    return counts / counts.sum()


@bug(
    "noise_distribution",
    "normalised_before_power",
    "(counts / total) ** power, never renormalised: does not sum to 1",
)
def _(counts, power=0.75):
    counts = _checked_counts(counts)
    return (counts / counts.sum()) ** power


@bug("noise_distribution", "power_hard_coded", "counts ** 0.75 whatever `power` says")
def _(counts, power=0.75):
    counts = _checked_counts(counts)
    weights = counts**0.75
    return weights / weights.sum()


@bug("noise_distribution", "zero_to_the_zero", "0 ** 0 = 1: with power 0 an unseen word is drawn")
def _(counts, power=0.75):
    counts = _checked_counts(counts)
    weights = counts**power
    return weights / weights.sum()


@bug.input(
    "noise_distribution", "nan_for_all_zero", "no check: all-zero counts give nan, not ValueError"
)
def _(counts, power=0.75):
    counts = np.asarray(counts, dtype=np.float64)
    weights = np.where(counts > 0, counts, 0.0) ** power * (counts > 0)
    return weights / weights.sum()


# ------------------------------------------------------------------ negative_sampling_loss


def _ns_loss(scores, *, log_sigmoid=F.logsigmoid, noise_sign=-1, noise="sum", rows="mean", sign=-1):
    """``sign`` · (log σ(real) + the ``noise`` reduction of log σ(noise_sign · noise)), reduced
    over the ``rows``: right with the defaults."""
    real, noise_scores = scores[:, 0], scores[:, 1:]
    per_row = log_sigmoid(real) + getattr(log_sigmoid(noise_sign * noise_scores), noise)(dim=1)
    return sign * getattr(per_row, rows)()


_loss_bug = bug.variants("negative_sampling_loss", _ns_loss, like=reference.negative_sampling_loss)
_loss_bug(
    "log_of_sigmoid",
    "torch.log(torch.sigmoid(x)): log 0 = -inf for scores far from 0",
    log_sigmoid=lambda x: torch.log(torch.sigmoid(x)),
)


@bug(
    "negative_sampling_loss",
    "log_one_plus_exp",
    "log(1 + exp(-x)) written out: exp overflows to inf for large scores",
)
def _(scores):
    softplus = lambda x: torch.log(1 + torch.exp(x))
    return (softplus(-scores[:, 0]) + softplus(scores[:, 1:]).sum(dim=1)).mean()


_loss_bug(
    "epsilon_in_log",
    "log(sigmoid(x) + 1e-10): finite, but wrong by far for scores far from 0",
    log_sigmoid=lambda x: torch.log(torch.sigmoid(x) + 1e-10),
)
_loss_bug("sum_over_rows", "sums over the batch instead of averaging", rows="sum")
_loss_bug("noise_sign", "log σ(s_k) for the noise: rewards noise scores", noise_sign=1)
_loss_bug("mean_over_noise", "averages the K noise terms instead of summing them", noise="mean")
_loss_bug("no_minus", "returns the log-likelihood, not its negative", sign=1)


# ---------------------------------------------------------------------- nearest_neighbours


def _check_id(embeddings, *ids):
    for i in ids:
        if not 0 <= int(i) < len(embeddings):
            raise ValueError(f"id {i} is not a row of the table")


def _rows(embeddings):
    return torch.as_tensor(embeddings, dtype=torch.float64)


def _unit(vectors):
    return vectors / vectors.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def _ranked(similarity, k, exclude):
    order = [int(i) for i in np.argsort(-similarity.numpy(), kind="stable")]
    return [i for i in order if i not in set(exclude)][:k]


@bug("nearest_neighbours", "dot_product", "ranks by dot product: long vectors win")
def _(embeddings, query, k=10):
    _check_id(embeddings, query)
    rows = _rows(embeddings)
    return _ranked(rows @ rows[query], k, [query])


@bug("nearest_neighbours", "query_kept", "the query is not excluded: it comes first, cosine 1")
def _(embeddings, query, k=10):
    _check_id(embeddings, query)
    unit = _unit(_rows(embeddings))
    return _ranked(unit @ unit[query], k, [])


@bug("nearest_neighbours", "ascending", "argsort without the minus: least similar first")
def _(embeddings, query, k=10):
    _check_id(embeddings, query)
    unit = _unit(_rows(embeddings))
    order = [int(i) for i in np.argsort((unit @ unit[query]).numpy(), kind="stable")]
    return [i for i in order if i != query][:k]


@bug("nearest_neighbours", "euclidean", "smallest Euclidean distance instead of highest cosine")
def _(embeddings, query, k=10):
    _check_id(embeddings, query)
    rows = _rows(embeddings)
    return _ranked(-(rows - rows[query]).norm(dim=1), k, [query])


@bug(
    "nearest_neighbours",
    "drop_first",
    "drops the first of the ranking, assuming it is the query: wrong when a word ties with it",
)
def _(embeddings, query, k=10):
    _check_id(embeddings, query)
    unit = _unit(_rows(embeddings))
    order = np.argsort(-(unit @ unit[query]).numpy(), kind="stable")
    return [int(i) for i in order[1 : k + 1]]


@bug.input("nearest_neighbours", "no_range_check", "query -1 quietly means the last word")
def _(embeddings, query, k=10):
    unit = _unit(_rows(embeddings))
    return _ranked(unit @ unit[query], k, [int(query) % len(unit)])


# --------------------------------------------------------------------------------- analogy


@bug("analogy", "a_minus_b", "a − b + c instead of b − a + c")
def _(embeddings, a, b, c, k=1):
    _check_id(embeddings, a, b, c)
    unit = _unit(_rows(embeddings))
    return _ranked(unit @ _unit(unit[a] - unit[b] + unit[c]), k, [a, b, c])


@bug("analogy", "inputs_kept", "a, b and c are not excluded from the answer")
def _(embeddings, a, b, c, k=1):
    _check_id(embeddings, a, b, c)
    unit = _unit(_rows(embeddings))
    return _ranked(unit @ _unit(unit[b] - unit[a] + unit[c]), k, [])


@bug("analogy", "not_normalised", "raw b − a + c: long vectors dominate the target")
def _(embeddings, a, b, c, k=1):
    _check_id(embeddings, a, b, c)
    rows = _rows(embeddings)
    return _ranked(_unit(rows) @ _unit(rows[b] - rows[a] + rows[c]), k, [a, b, c])


@bug("analogy", "dot_product", "ranks the candidates by dot product, not cosine")
def _(embeddings, a, b, c, k=1):
    _check_id(embeddings, a, b, c)
    rows = _rows(embeddings)
    unit = _unit(rows)
    return _ranked(rows @ (unit[b] - unit[a] + unit[c]), k, [a, b, c])


@bug("analogy", "exclude_after_k", "takes the top k, then removes a, b, c: fewer than k answers")
def _(embeddings, a, b, c, k=1):
    _check_id(embeddings, a, b, c)
    unit = _unit(_rows(embeddings))
    top = _ranked(unit @ _unit(unit[b] - unit[a] + unit[c]), k, [])
    return [i for i in top if i not in (a, b, c)]


@bug.input("analogy", "no_range_check", "an id outside the table is not refused")
def _(embeddings, a, b, c, k=1):
    unit = _unit(_rows(embeddings))
    ids = [int(i) % len(unit) for i in (a, b, c)]
    return _ranked(unit @ _unit(unit[b] - unit[a] + unit[c]), k, ids)


# ------------------------------------- the caller's data, autograd, dtypes (the classes of issue 18)


@bug(
    "noise_distribution",
    "power_in_place",
    "counts **= power on np.asarray(counts): a float array of the caller is overwritten",
)
def _(counts, power=0.75):
    counts = np.asarray(counts, dtype=np.float64)
    if counts.ndim != 1 or counts.size == 0 or (counts < 0).any() or counts.sum() == 0:
        raise ValueError("bad counts")
    seen = counts > 0
    counts[seen] **= power
    counts /= counts.sum()
    return counts


def _softplus_loss(scores):
    return (F.softplus(-scores[:, 0]) + F.softplus(scores[:, 1:]).sum(dim=1)).mean()


@bug("negative_sampling_loss", "float32", "scores.float(): a float64 batch comes back float32")
def _(scores):
    return _softplus_loss(scores.float())


@bug(
    "negative_sampling_loss",
    "negates_in_place",
    "scores[:, 1:] *= -1: flips the caller's noise scores",
)
def _(scores):
    scores[:, 1:] *= -1
    return -F.logsigmoid(scores).sum(dim=1).mean()


@bug(
    "negative_sampling_loss",
    "numpy_loss",
    "computed in NumPy and wrapped in torch.tensor: no gradient flows",
)
def _(scores):
    s = scores.detach().numpy()
    per_row = np.logaddexp(0, -s[:, 0]) + np.logaddexp(0, s[:, 1:]).sum(axis=1)
    return torch.tensor(per_row.mean(), dtype=scores.dtype)


@bug(
    "nearest_neighbours",
    "normalises_in_place",
    "embeddings /= norms: the caller's table is changed",
)
def _(embeddings, query, k=10):
    _check_id(embeddings, query)
    embeddings /= embeddings.norm(dim=1, keepdim=True).clamp_min(1e-12)
    return _ranked(_rows(embeddings) @ _rows(embeddings)[query], k, [query])


@bug("analogy", "normalises_in_place", "embeddings /= norms: the caller's table is changed")
def _(embeddings, a, b, c, k=1):
    _check_id(embeddings, a, b, c)
    embeddings /= embeddings.norm(dim=1, keepdim=True).clamp_min(1e-12)
    unit = _rows(embeddings)
    return _ranked(unit @ _unit(unit[b] - unit[a] + unit[c]), k, [a, b, c])


# ---------------------------------------------------------------------------- alternatives


@correct("skipgram_pairs", "double_loop")
def _(ids, window):
    if window < 1:
        raise ValueError(f"window = {window}: must be 1 or more")
    words = [int(w) for w in np.asarray(ids).reshape(-1)]
    pairs = [
        (words[i], words[j])
        for i in range(len(words))
        for j in range(len(words))
        if i != j and abs(i - j) <= window
    ]
    centers = np.array([p[0] for p in pairs], dtype=np.int64)
    contexts = np.array([p[1] for p in pairs], dtype=np.int64)
    return centers, contexts


@correct("noise_distribution", "frequencies_then_power")
def _(counts, power=0.75):
    counts = np.array(counts, dtype=float)
    if counts.ndim != 1 or len(counts) == 0 or counts.min() < 0 or counts.max() == 0:
        raise ValueError("need non-negative counts, not all zero")
    shares = counts / counts.sum()  # normalising first is fine if you renormalise after
    weights = np.zeros_like(shares)
    seen = shares > 0
    weights[seen] = shares[seen] ** power
    return weights / weights.sum()


@correct("noise_distribution", "python_loop")
def _(counts, power=0.75):
    counts = [float(c) for c in counts]
    if not counts or min(counts) < 0 or sum(counts) == 0:
        raise ValueError("counts must be non-negative and not all zero")
    weights = [c**power if c > 0 else 0.0 for c in counts]
    total = sum(weights)
    return np.array([w / total for w in weights])


@correct("negative_sampling_loss", "softplus")
def _(scores):
    # -log σ(x) = softplus(-x) and -log σ(-x) = softplus(x)
    per_row = F.softplus(-scores[:, 0]) + F.softplus(scores[:, 1:]).sum(dim=1)
    return per_row.mean()


@correct("negative_sampling_loss", "hand_written_stable")
def _(scores):
    # a stable softplus by hand: log(1 + e^x) = max(x, 0) + log1p(e^-|x|)
    def softplus(x):
        return torch.clamp(x, min=0) + torch.log1p(torch.exp(-x.abs()))

    signs = torch.ones_like(scores)
    signs[:, 0] = -1  # the real pair: softplus(-s); the noise: softplus(s)
    return softplus(signs * scores).sum() / scores.shape[0]


@correct("negative_sampling_loss", "bce_with_logits")
def _(scores):
    labels = torch.zeros_like(scores)
    labels[:, 0] = 1
    per_entry = F.binary_cross_entropy_with_logits(scores, labels, reduction="none")
    return per_entry.sum(dim=1).mean()


@correct("nearest_neighbours", "numpy_sorted")
def _(embeddings, query, k=10):
    table = np.asarray(embeddings, dtype=np.float64)
    if query < 0 or query >= table.shape[0]:
        raise ValueError(f"no word {query}")
    norms = np.linalg.norm(table, axis=1)
    cosines = table @ table[query] / (norms * norms[query])
    candidates = [i for i in range(len(table)) if i != query]
    return sorted(candidates, key=lambda i: -cosines[i])[:k]


@correct("nearest_neighbours", "cosine_similarity_topk")
def _(embeddings, query, k=10):
    vectors = torch.as_tensor(embeddings).float()
    if not 0 <= query < vectors.shape[0]:
        raise ValueError("query is not a word of the table")
    similarity = F.cosine_similarity(vectors, vectors[query].unsqueeze(0), dim=1)
    similarity[query] = -math.inf
    top = torch.topk(similarity, min(k, vectors.shape[0] - 1))
    return top.indices.tolist()


@correct("analogy", "numpy_loops")
def _(embeddings, a, b, c, k=1):
    table = np.asarray(embeddings, dtype=np.float64)
    for i in (a, b, c):
        if not 0 <= i < len(table):
            raise ValueError(f"word {i} is not in the table")
    unit = [row / np.linalg.norm(row) for row in table]
    target = unit[b] - unit[a] + unit[c]
    target = target / np.linalg.norm(target)
    scored = [(float(unit[i] @ target), i) for i in range(len(table)) if i not in (a, b, c)]
    scored.sort(key=lambda pair: -pair[0])
    return [i for _, i in scored[:k]]


@correct("analogy", "cosine_similarity")
def _(embeddings, a, b, c, k=1):
    vectors = torch.as_tensor(embeddings, dtype=torch.float32)
    if min(a, b, c) < 0 or max(a, b, c) >= len(vectors):
        raise ValueError("a, b and c must be rows of the table")
    unit = F.normalize(vectors, dim=1)
    target = unit[b] - unit[a] + unit[c]  # cosine_similarity normalises it itself
    similarity = F.cosine_similarity(unit, target.unsqueeze(0), dim=1)
    similarity[[a, b, c]] = -2.0
    order = torch.argsort(similarity, descending=True).tolist()
    return [i for i in order if i not in (a, b, c)][:k]


# ---------------------------------- the classes of issue 31: kinds of input the tests never tried


@bug("skipgram_pairs", "unique_pairs", "collects the pairs in a set: a repeated pair counts once")
def _(ids, window):
    if window < 1:
        raise ValueError("window must be at least 1")
    words = [int(w) for w in np.asarray(ids).reshape(-1)]
    pairs = {
        (words[i], words[j])
        for i in range(len(words))
        for j in range(max(0, i - window), min(len(words), i + window + 1))
        if i != j
    }
    return _as_pairs([c for c, _ in sorted(pairs)], [o for _, o in sorted(pairs)])


@bug("skipgram_pairs", "keeps_the_dtype", "np.asarray(ids): int32 ids give int32 pairs")
def _(ids, window):
    if window < 1:
        raise ValueError("window must be at least 1")
    ids = np.asarray(ids).reshape(-1)
    if ids.size < 2:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    centers, contexts = [], []
    for d in range(1, min(window, ids.size - 1) + 1):
        centers += [ids[:-d], ids[d:]]
        contexts += [ids[d:], ids[:-d]]
    return np.concatenate(centers), np.concatenate(contexts)


@bug.input(
    "skipgram_pairs",
    "short_sequence_first",
    "returns the empty pairs of a short sequence before checking the window",
)
def _(ids, window):
    if len(ids) < 2:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return _skipgram(ids, window)


@bug(
    "noise_distribution",
    "float32_weights",
    "np.asarray(counts, dtype=np.float32): the probabilities come back float32",
)
def _(counts, power=0.75):
    counts = np.asarray(_checked_counts(counts), dtype=np.float32)
    weights = np.where(counts > 0, counts**power, 0.0).astype(np.float32)
    return weights / weights.sum()


@bug.input(
    "noise_distribution",
    "negative_not_refused",
    "checks counts.sum() == 0 only: a negative count among positive ones slips through",
)
def _(counts, power=0.75):
    counts = np.asarray(counts, dtype=np.float64)
    if counts.size == 0 or counts.sum() == 0:
        raise ValueError("nothing to draw from")
    weights = np.where(counts > 0, np.abs(counts) ** power, 0.0)
    return weights / weights.sum()


@bug(
    "negative_sampling_loss",
    "flag_without_graph",
    "the loss in NumPy, then torch.tensor(..., requires_grad=True): a flag without a graph",
)
def _(scores):
    s = scores.detach().numpy()
    per_row = np.logaddexp(0, -s[:, 0]) + np.logaddexp(0, s[:, 1:]).sum(axis=1)
    return torch.tensor(per_row.mean(), dtype=scores.dtype, requires_grad=True)


_loss_bug(
    "clamps_scores",
    "scores.clamp(-20, 20) against overflow: scores far from 0 cost too little",
    log_sigmoid=lambda x: F.logsigmoid(x.clamp(-20, 20)),
)


@bug("negative_sampling_loss", "always_float64", "scores.double(): float32 scores give float64")
def _(scores):
    return _softplus_loss(scores.double())


@bug(
    "negative_sampling_loss",
    "squeezes_scores",
    "scores.squeeze() first: a batch without noise words (B, 1) becomes one row",
)
def _(scores):
    s = scores.squeeze()
    if s.dim() < 2:
        s = s.reshape(1, -1)
    return _softplus_loss(s)


@bug(
    "nearest_neighbours",
    "ids_sorted",
    "sorted(set(top ids) - {query}): the ids in increasing order, not most similar first",
)
def _(embeddings, query, k=10):
    _check_id(embeddings, query)
    unit = _unit(_rows(embeddings))
    top = _ranked(unit @ unit[query], k, [query])
    return sorted(set(top))


@bug.input(
    "nearest_neighbours",
    "negative_not_refused",
    "checks query >= len(embeddings) only: -1 quietly means the last word",
)
def _(embeddings, query, k=10):
    if query >= len(embeddings):
        raise ValueError("query outside the table")
    unit = _unit(_rows(embeddings))
    return _ranked(unit @ unit[query], k, [int(query) % len(unit)])


@bug.input(
    "nearest_neighbours",
    "off_by_one_bound",
    "checks query > len(embeddings): the id just past the last row raises IndexError",
)
def _(embeddings, query, k=10):
    if query < 0 or query > len(embeddings):
        raise ValueError("query outside the table")
    unit = _unit(_rows(embeddings))
    return _ranked(unit @ unit[query], k, [query])


@bug("analogy", "ignores_k", "returns the single best word, whatever k is")
def _(embeddings, a, b, c, k=1):
    _check_id(embeddings, a, b, c)
    unit = _unit(_rows(embeddings))
    return _ranked(unit @ _unit(unit[b] - unit[a] + unit[c]), 1, [a, b, c])


@bug("analogy", "returns_tensor", "returns the top-k indices tensor, not a list of ids")
def _(embeddings, a, b, c, k=1):
    _check_id(embeddings, a, b, c)
    unit = _unit(_rows(embeddings))
    scores = unit @ _unit(unit[b] - unit[a] + unit[c])
    scores[[a, b, c]] = -math.inf
    return torch.topk(scores, min(k, len(scores) - len({a, b, c}))).indices


@bug.input(
    "analogy",
    "upper_bound_only",
    "checks max(a, b, c) >= len(embeddings) only: a negative id is read from the end",
)
def _(embeddings, a, b, c, k=1):
    if max(a, b, c) >= len(embeddings):
        raise ValueError("an id outside the table")
    unit = _unit(_rows(embeddings))
    ids = [int(i) % len(unit) for i in (a, b, c)]
    return _ranked(unit @ _unit(unit[ids[1]] - unit[ids[0]] + unit[ids[2]]), k, ids)


# ------------------------------------------------------------------ more correct rewrites


@correct("skipgram_pairs", "index_grid")
def _(ids, window):
    if not window >= 1:
        raise ValueError("the window must be 1 or more")
    ids = np.array(ids, dtype=np.int64).ravel()
    i, j = np.meshgrid(np.arange(ids.size), np.arange(ids.size), indexing="ij")
    near = (np.abs(i - j) >= 1) & (np.abs(i - j) <= window)
    return ids[i[near]], ids[j[near]]


@correct("noise_distribution", "masked_power")
def _(counts, power=0.75):
    c = np.array(counts, dtype=np.float64, copy=True).ravel()
    if c.size == 0 or np.any(c < 0) or not np.any(c > 0):
        raise ValueError("need non-negative counts, at least one of them positive")
    out = np.power(c, power, out=np.zeros_like(c), where=c > 0)
    return out / np.sum(out)


@correct("negative_sampling_loss", "logaddexp_signs")
def _(scores):
    # -log σ(x) = log(1 + e^-x) = logaddexp(0, -x): +1 for the real pair, -1 for the noise
    signs = torch.ones(scores.shape[1], dtype=scores.dtype)
    signs[1:] = -1
    per_entry = torch.logaddexp(torch.zeros((), dtype=scores.dtype), -signs * scores)
    return per_entry.sum(dim=1).mean()


@correct("nearest_neighbours", "numpy_lexsort")
def _(embeddings, query, k=10):
    table = embeddings.detach().numpy().astype(np.float64)
    if query not in range(len(table)):
        raise ValueError(f"{query} is not a word id")
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    cosines = unit @ unit[query]
    order = np.lexsort((np.arange(len(table)), -cosines))  # by cosine, ties by id
    return [int(i) for i in order if i != query][:k]


@correct("analogy", "masked_topk")
def _(embeddings, a, b, c, k=1):
    table = embeddings.to(torch.float64)
    if any(i < 0 or i >= table.shape[0] for i in (a, b, c)):
        raise ValueError("a, b and c must be ids of the table")
    unit = F.normalize(table, dim=1)
    target = F.normalize(unit[b] - unit[a] + unit[c], dim=0)
    cosines = unit @ target
    allowed = torch.ones(len(table), dtype=torch.bool)
    allowed[[a, b, c]] = False
    order = torch.argsort(cosines[allowed], descending=True, stable=True)
    return torch.arange(len(table))[allowed][order][:k].tolist()
