"""Known-buggy answers to the ch14_adapting_gpt exercise: mistakes learners really make.

Same layout as ``ch13_vision_transformer.py``: each function or class carries the name of the
exercise part it answers and is registered in ``BUGS[name]`` with a one-line description; the
hidden tests of the notebook must fail every one of them while the reference passes.
``ALTERNATIVES`` (at the end) holds correct answers written differently, which the hidden tests
must accept.

In the batch: targets not shifted, the response starting one position late or early, the
prompt's last position left out or the whole text trained on, padding written as ``IGNORE`` in
the inputs, the block size compared with the text and not the inputs. In the loss: the mean over
every position, a sum, probabilities of the wrong axis. In LoRA: α instead of α/r, A and B
swapped at the start, the base left trainable, ``merged()`` without the bias or the scaling.
In the step: the gradients cleared after ``backward``, clipping after the step, the loss after
the update, clipping every parameter of the model.

Nothing here calls the package's version of a part of this notebook at run time.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from mini_llm import instruct

from ._registry import new_registry

REFERENCE = ("mini_llm.instruct", "mini_llm.lora")
"""the mini_llm modules that hold the reference of each graded part"""

BUGS, ALTERNATIVES, bug, correct = new_registry()
IGNORE = -100


# ------------------------------------------------------------------------------- encode_examples


def _encode(examples, tokenizer, block_size=None, *, shift=1, offset=0, pad=0, check="inputs"):
    """The right batch; knobs: how far the targets are ``shift``-ed, where the response starts
    (``offset`` positions late, or "all" to train on the whole text), the ``pad`` id of the
    inputs, and what the block size is ``check``-ed against ("inputs", "text", "none")."""
    ids = [tokenizer.encode(example.text) for example in examples]
    T = max(len(row) for row in ids) - 1
    if check == "inputs" and block_size is not None and T > block_size:
        raise ValueError("an example does not fit")
    if check == "text" and block_size is not None and T + 1 > block_size:
        raise ValueError("an example does not fit")
    inputs = torch.full((len(ids), T), pad, dtype=torch.long)
    targets = torch.full((len(ids), T), IGNORE, dtype=torch.long)
    for row, (example, tokens) in enumerate(zip(examples, ids)):
        n = len(tokens) - 1
        inputs[row, :n] = torch.tensor(tokens[:-1])
        start = 0 if offset == "all" else len(tokenizer.encode(example.prompt)) - 1 + offset
        start = max(start, 0)
        for t in range(start, n):
            if 0 <= t + shift < len(tokens):
                targets[row, t] = tokens[t + shift]
    return inputs, targets, targets != IGNORE


enc_bug = bug.variants("encode_examples", _encode, like=instruct.encode_examples)
enc_bug("targets_not_shifted", "targets[t] = tokens[t]: the input copied", shift=0)
enc_bug(
    "response_one_late",
    "start = len(prompt): the first response token never a target",
    offset=1,
)
enc_bug(
    "prompt_last_token_in_mask",
    "start = len(prompt) - 2: the prompt's last token is a target too",
    offset=-1,
)
enc_bug("whole_text_trained", "targets everywhere: the prompt is trained on too", offset="all")
enc_bug("padding_with_ignore", "inputs padded with IGNORE (-100), not a real id", pad=IGNORE)


@bug.input("encode_examples", "block_size_against_text", "T + 1 > block_size: a fit refused")
def _(examples, tokenizer, block_size=None):
    return _encode(examples, tokenizer, block_size, check="text")


@bug.input("encode_examples", "no_block_size_check", "block_size ignored: no ValueError")
def _(examples, tokenizer, block_size=None):
    return _encode(examples, tokenizer, block_size, check="none")


@bug("encode_examples", "mask_is_int", "mask = (targets != IGNORE).long(): not a bool mask")
def _(examples, tokenizer, block_size=None):
    inputs, targets, mask = _encode(examples, tokenizer, block_size)
    return inputs, targets, mask.long()


@correct("encode_examples", "pad_sequence")
def _(examples, tokenizer, block_size=None):
    """Rows built whole, then padded by torch.nn.utils.rnn.pad_sequence."""
    rows_in, rows_out = [], []
    for example in examples:
        prompt, response = tokenizer.encode(example.prompt), tokenizer.encode(example.response)
        tokens = prompt + response
        rows_in.append(torch.tensor(tokens[:-1], dtype=torch.long))
        rows_out.append(torch.tensor([IGNORE] * (len(prompt) - 1) + response, dtype=torch.long))
    inputs = nn.utils.rnn.pad_sequence(rows_in, batch_first=True, padding_value=0)
    targets = nn.utils.rnn.pad_sequence(rows_out, batch_first=True, padding_value=IGNORE)
    if block_size is not None and inputs.shape[1] > block_size:
        raise ValueError("too long")
    return inputs, targets, targets != IGNORE


@correct("encode_examples", "shifted_mask")
def _(examples, tokenizer, block_size=None):
    """A mask over the whole text (True on the response), shifted by one, then torch.where."""
    texts = [tokenizer.encode(example.text) for example in examples]
    length = max(map(len, texts))
    if block_size is not None and length - 1 > block_size:
        raise ValueError("too long")
    ids = torch.zeros(len(texts), length, dtype=torch.long)
    response = torch.zeros(len(texts), length, dtype=torch.bool)
    for row, (example, tokens) in enumerate(zip(examples, texts)):
        ids[row, : len(tokens)] = torch.tensor(tokens)
        response[row, len(tokenizer.encode(example.prompt)) : len(tokens)] = True
    mask = response[:, 1:]
    return ids[:, :-1], torch.where(mask, ids[:, 1:], IGNORE), mask


# ----------------------------------------------------------------------------------- masked_loss


def _nll(logits, targets):
    return -F.log_softmax(logits, dim=-1).gather(-1, targets.clamp(min=0)[..., None])[..., 0]


@bug("masked_loss", "mean_over_all", "the masked terms zeroed, then .mean() over every position")
def _(logits, targets):
    return (_nll(logits, targets) * (targets != IGNORE)).mean()


@bug("masked_loss", "sum_not_mean", "the sum over the response tokens, not their mean")
def _(logits, targets):
    return _nll(logits, targets)[targets != IGNORE].sum()


@bug("masked_loss", "no_ignore", "F.cross_entropy without ignore_index: IGNORE ids clamped")
def _(logits, targets):
    return F.cross_entropy(logits.flatten(0, 1), targets.clamp(min=0).flatten())


@bug("masked_loss", "softmax_wrong_axis", "log_softmax over the positions (dim=1)")
def _(logits, targets):
    logp = F.log_softmax(logits, dim=1)
    mask = targets != IGNORE
    return -logp.gather(-1, targets.clamp(min=0)[..., None])[..., 0][mask].mean()


@bug("masked_loss", "mean_per_row", "each row's mean, then the mean of the rows")
def _(logits, targets):
    mask = (targets != IGNORE).to(logits.dtype)
    per_row = (_nll(logits, targets) * mask).sum(1) / mask.sum(1).clamp(min=1)
    return per_row.mean()


@bug("masked_loss", "float32_always", "the logits cast to float32 first")
def _(logits, targets):
    return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=IGNORE)


@correct("masked_loss", "manual_log_softmax")
def _(logits, targets):
    """log-sum-exp written out, a boolean index."""
    mask = targets != IGNORE
    picked = logits[mask]
    chosen = picked.gather(-1, targets[mask][:, None])[:, 0]
    return (torch.logsumexp(picked, dim=-1) - chosen).mean()


@correct("masked_loss", "weighted_sum")
def _(logits, targets):
    """The sum of the kept terms divided by their number."""
    mask = (targets != IGNORE).to(logits.dtype)
    return (_nll(logits, targets) * mask).sum() / mask.sum()


# ------------------------------------------------------------------------------------ LoRALinear


class _LoRA(nn.Module):
    """The right layer; knobs: the ``scale`` (alpha / rank or alpha), A and B ``swapped`` at
    the start, the base ``frozen``, ``merge_bias`` and ``merge_scaled`` in merged()."""

    scale, swapped, frozen, merge_bias, merge_scaled, transposed = (
        "r",
        False,
        True,
        True,
        True,
        False,
    )

    def __init__(self, base, rank=4, alpha=8.0):
        super().__init__()
        if rank < 1:
            raise ValueError("rank must be at least 1")
        self.base = base.requires_grad_(False) if self.frozen else base
        self.rank, self.alpha = rank, alpha
        self.scaling = alpha / rank if self.scale == "r" else alpha
        a = torch.randn(rank, base.in_features) / math.sqrt(base.in_features)
        b = torch.zeros(base.out_features, rank)
        if self.swapped:
            a, b = torch.zeros(rank, base.in_features), torch.randn(base.out_features, rank)
        self.A, self.B = nn.Parameter(a), nn.Parameter(b)

    def forward(self, x):
        return self.base(x) + self.scaling * ((x @ self.A.T) @ self.B.T)

    def delta_weight(self):
        return self.scaling * (self.B @ self.A)

    @torch.no_grad()
    def merged(self):
        base = self.base
        linear = nn.Linear(base.in_features, base.out_features, bias=base.bias is not None)
        linear = linear.to(base.weight.dtype)
        delta = self.delta_weight() if self.merge_scaled else self.B @ self.A
        linear.weight.copy_(base.weight + delta)
        if base.bias is not None and self.merge_bias:
            linear.bias.zero_()
            linear.bias.copy_(base.bias)
        elif base.bias is not None:
            linear.bias.zero_()
        return linear


@bug("LoRALinear", "alpha_not_over_rank", "scaling = alpha, not alpha / rank")
class _(_LoRA):
    scale = "alpha"


@bug(
    "LoRALinear",
    "A_zero_B_random",
    "A zero and B random: the update starts at nothing, but not as asked",
)
class _(_LoRA):
    swapped = True


@bug("LoRALinear", "base_not_frozen", "self.base = base: the base still trains")
class _(_LoRA):
    frozen = False


@bug("LoRALinear", "merged_without_bias", "merged() leaves the bias out")
class _(_LoRA):
    merge_bias = False


@bug("LoRALinear", "merged_unscaled", "merged() adds B @ A without the scaling")
class _(_LoRA):
    merge_scaled = False


@bug("LoRALinear", "delta_transposed", "delta_weight = scaling · A^T B^T: (in, out)")
class _(_LoRA):
    def delta_weight(self):
        return self.scaling * (self.A.T @ self.B.T)

    @torch.no_grad()
    def merged(self):
        linear = super().merged()
        return linear


@bug("LoRALinear", "B_not_parameter", "self.B a plain tensor: it never trains")
class _(_LoRA):
    def __init__(self, base, rank=4, alpha=8.0):
        super().__init__(base, rank, alpha)
        b = self.B.detach().clone()
        del self.B
        self.register_buffer("B", b)


@bug.input("LoRALinear", "no_rank_check", "rank 0 accepted (a ZeroDivisionError or nothing)")
class _(_LoRA):
    def __init__(self, base, rank=4, alpha=8.0):
        nn.Module.__init__(self)
        self.base = base.requires_grad_(False)
        self.rank, self.alpha = rank, alpha
        self.scaling = alpha / rank if rank else alpha
        self.A = nn.Parameter(torch.randn(max(rank, 1), base.in_features) / base.in_features**0.5)
        self.B = nn.Parameter(torch.zeros(base.out_features, max(rank, 1)))


@correct("LoRALinear", "functional")
class _(nn.Module):
    """F.linear throughout, the base's parameters frozen one by one, merged by a deep copy."""

    def __init__(self, base, rank=4, alpha=8.0):
        super().__init__()
        if not rank >= 1:
            raise ValueError("rank < 1")
        for p in base.parameters():
            p.requires_grad = False
        self.base, self.rank, self.alpha, self.scaling = base, rank, alpha, alpha / rank
        self.A = nn.Parameter(torch.empty(rank, base.in_features))
        nn.init.normal_(self.A, std=base.in_features**-0.5)
        self.B = nn.Parameter(torch.zeros(base.out_features, rank))

    def forward(self, x):
        return F.linear(x, self.base.weight, self.base.bias) + F.linear(
            F.linear(x, self.A), self.B * self.scaling
        )

    def delta_weight(self):
        return torch.einsum("or,ri->oi", self.B, self.A) * self.scaling

    def merged(self):
        import copy

        linear = copy.deepcopy(self.base)
        with torch.no_grad():
            linear.weight += self.delta_weight()
        return linear.requires_grad_(True)


@correct("LoRALinear", "loop_over_rank")
class _(_LoRA):
    """The update as a sum of rank-one terms."""

    def forward(self, x):
        out = self.base(x)
        for k in range(self.rank):
            out = out + self.scaling * (x @ self.A[k])[..., None] * self.B[:, k]
        return out


# --------------------------------------------------------------------------------- finetune_step


def _step(
    model, optimizer, inputs, targets, grad_clip=1.0, *, order="right", clip="held", after=False
):
    """The right step; knobs: the ``order`` of the calls, which parameters to ``clip``
    ("held", "model"), and the loss returned ``after`` the update."""
    loss = F.cross_entropy(model(inputs)[0].flatten(0, 1), targets.flatten(), ignore_index=IGNORE)
    if order == "zero_after_backward":
        loss.backward()
        optimizer.zero_grad()
    elif order == "no_zero":
        loss.backward()
    else:
        optimizer.zero_grad()
        loss.backward()
    held = [p for group in optimizer.param_groups for p in group["params"]]
    chosen = held if clip == "held" else list(model.parameters())
    if order == "clip_after_step":
        optimizer.step()
        if grad_clip is not None:
            nn.utils.clip_grad_norm_(chosen, grad_clip)
    else:
        if grad_clip is not None:
            if clip == "value":
                nn.utils.clip_grad_value_(chosen, grad_clip)
            else:
                nn.utils.clip_grad_norm_(chosen, grad_clip)
        optimizer.step()
    if after:
        with torch.no_grad():
            loss = F.cross_entropy(
                model(inputs)[0].flatten(0, 1), targets.flatten(), ignore_index=IGNORE
            )
    return loss.item()


step_bug = bug.variants("finetune_step", _step, like=instruct.finetune_step)
step_bug("zero_grad_after_backward", "backward, then zero_grad: the step uses no gradient",
         order="zero_after_backward")  # fmt: skip
step_bug("no_zero_grad", "no zero_grad: the gradients of every step add up", order="no_zero")
step_bug("clip_after_step", "clip_grad_norm_ after optimizer.step()", order="clip_after_step")
step_bug("loss_after_step", "the loss recomputed after the update and returned", after=True)
step_bug("clip_whole_model", "clip_grad_norm_(model.parameters()): frozen or unheld too",
         clip="model")  # fmt: skip
step_bug("clip_by_value", "clip_grad_value_ instead of the total norm", clip="value")


@bug("finetune_step", "loss_over_all_tokens", "cross-entropy over every position, prompt too")
def _(model, optimizer, inputs, targets, grad_clip=1.0):
    logits = model(inputs)[0]
    full = torch.where(targets == IGNORE, inputs.roll(-1, 1), targets)
    loss = F.cross_entropy(logits.flatten(0, 1), full.flatten())
    optimizer.zero_grad()
    loss.backward()
    if grad_clip is not None:
        nn.utils.clip_grad_norm_(
            [p for g in optimizer.param_groups for p in g["params"]], grad_clip
        )
    optimizer.step()
    return loss.item()


@bug("finetune_step", "targets_changed_in_place", "0 written over IGNORE in the targets")
def _(model, optimizer, inputs, targets, grad_clip=1.0):
    logits = model(inputs)[0]
    mask = targets != IGNORE
    targets[~mask] = 0  # "harmless": those positions are masked out below
    losses = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none")
    loss = (losses * mask.flatten()).sum() / mask.sum()
    optimizer.zero_grad()
    loss.backward()
    if grad_clip is not None:
        nn.utils.clip_grad_norm_(
            [p for g in optimizer.param_groups for p in g["params"]], grad_clip
        )
    optimizer.step()
    return loss.item()


@correct("finetune_step", "set_to_none_and_float")
def _(model, optimizer, inputs, targets, grad_clip=1.0):
    """Gradients set to None by hand, the loss written out, float() of a detached copy."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            p.grad = None
    logits = model(inputs)[0]
    mask = targets != IGNORE
    loss = -F.log_softmax(logits[mask], -1).gather(-1, targets[mask][:, None]).mean()
    loss.backward()
    if grad_clip is not None:
        params = [p for group in optimizer.param_groups for p in group["params"]]
        nn.utils.clip_grad_norm_(params, max_norm=grad_clip)
    value = float(loss.detach())
    optimizer.step()
    return value


@correct("finetune_step", "manual_clip")
def _(model, optimizer, inputs, targets, grad_clip=1.0):
    """The clipping written out: the total norm of the held gradients, one scale."""
    loss = F.cross_entropy(model(inputs)[0].transpose(1, 2), targets, ignore_index=IGNORE)
    optimizer.zero_grad()
    loss.backward()
    if grad_clip is not None:
        grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        norms = torch.stack([torch.linalg.vector_norm(grad) for grad in grads])
        scale = torch.clamp(grad_clip / (torch.linalg.vector_norm(norms) + 1e-6), max=1.0)
        for grad in grads:
            grad.mul_(scale)
    optimizer.step()
    return loss.item()
