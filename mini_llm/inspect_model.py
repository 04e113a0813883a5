"""Chapter 11 -- GPT.

Looking inside a trained GPT: where its heads look, and what each head is worth.

* :func:`head_entropy` and :func:`mean_attention_distance` summarise attention maps
  (``GPT.attention_maps``) per head: how spread out a head's weights are, and how far back it
  looks on average;
* :func:`ablate_heads` silences chosen heads while the model runs, so that the change in the
  validation loss measures what each head contributes;
* :func:`influence_by_distance` repeats chapter 5's experiment: how much the next prediction
  moves when the token k positions back is replaced.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

import torch


def _check_maps(maps: torch.Tensor) -> None:
    if maps.dim() != 4 or maps.size(-1) != maps.size(-2):
        raise ValueError(f"attention maps must be (B, H, T, T), got {tuple(maps.shape)}")


def head_entropy(maps: torch.Tensor) -> torch.Tensor:
    """Mean entropy (nats) of each head's attention rows, (B, H, T, T) → (H,).

    0 means every query puts all its weight on one key; log(t + 1) is the most a query at
    position t can have (its weights spread evenly over all the keys it sees).
    """
    _check_maps(maps)
    logs = torch.log(maps.clamp_min(1e-30))  # 0·log 0 = 0 for the masked keys
    return -(maps * logs).sum(-1).mean(dim=(0, 2))


def mean_attention_distance(maps: torch.Tensor) -> torch.Tensor:
    """How far back each head looks, (B, H, T, T) → (H,): Σⱼ wᵢⱼ·(i − j), averaged over the
    queries i and the batch. 0: every query looks at itself; large: at the distant past."""
    _check_maps(maps)
    T = maps.size(-1)
    positions = torch.arange(T, device=maps.device)
    distance = (positions[:, None] - positions[None, :]).clamp_min(0).to(maps.dtype)
    return (maps * distance).sum(-1).mean(dim=(0, 2))


@contextlib.contextmanager
def ablate_heads(model, heads: Iterable[tuple[int, int]]) -> Iterator[None]:
    """Run ``model`` (a :class:`~mini_llm.gpt.GPT`) with the given (layer, head) pairs silenced.

    A head's output is its slice of the vector that enters the block's output projection; the
    slice is set to zero there, as if the head had attended to values of zero.
    """
    config = model.config
    head_dim = config.n_embd // config.n_head
    chosen: dict[int, list[int]] = {}
    for layer, head in heads:
        if not (0 <= layer < config.n_layer and 0 <= head < config.n_head):
            raise ValueError(
                f"no head ({layer}, {head}) in a model of {config.n_layer} layers "
                f"with {config.n_head} heads each"
            )
        chosen.setdefault(layer, []).append(head)

    def silencer(silenced):
        def hook(_module, inputs):
            (x,) = inputs
            x = x.clone()
            for head in silenced:
                x[..., head * head_dim : (head + 1) * head_dim] = 0
            return (x,)

        return hook

    handles = [
        model.blocks[layer].attn.proj.register_forward_pre_hook(silencer(silenced))
        for layer, silenced in chosen.items()
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@torch.no_grad()
def influence_by_distance(model, windows: torch.Tensor, distances: Iterable[int]) -> list[float]:
    """Mean change of the prediction after the last token of ``windows`` (B, T) when the token
    k positions back is replaced, for each k in ``distances``: half the L1 distance between the
    two next-token distributions (total variation), averaged over the windows.

    The model reads the last ``block_size`` tokens, as generation does, so a change further
    back than its context cannot move the prediction at all.
    """
    context = model.config.block_size
    vocab_size = model.config.vocab_size

    def prediction(idx):
        return torch.softmax(model(idx[:, -context:])[0][:, -1], dim=-1)

    base = prediction(windows)
    shift = 1 + torch.arange(len(windows), device=windows.device) % (vocab_size - 1)
    changes = []
    for k in distances:
        if not 1 <= k <= windows.size(1):
            raise ValueError(f"distance {k} is outside windows of {windows.size(1)} tokens")
        edited = windows.clone()
        edited[:, -k] = (edited[:, -k] + shift) % vocab_size  # always another token
        changes.append(0.5 * (prediction(edited) - base).abs().sum(-1).mean().item())
    return changes
