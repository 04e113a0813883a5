"""Chapter 12 -- Training on a GPU: how much arithmetic a GPT step is, and how much of the
hardware it uses.

A step's FLOPs follow from the model's shape alone (:func:`flops_per_token`); divided into the
hardware's peak FLOP/s at a measured throughput they give the model FLOPs utilisation
(:func:`mfu`), the figure that says whether a run is limited by arithmetic or by everything else.
"""

from __future__ import annotations


def flops_per_token(n_params: int, n_layer: int, block_size: int, n_embd: int) -> float:
    """Training FLOPs per token (forward + backward) of a GPT with ``n_params`` parameters in
    matrix multiplies (all but the position embedding; the tied token embedding counts once,
    as the output head).

    Each such weight takes part in one multiply-add per token going forward (2 FLOPs) and two
    going backward (the gradients of its input and of itself, 4 FLOPs): 6·N. Attention has no
    weights but multiplies too: per layer, Q·Kᵀ and weights·V over a window of T cost
    2·2·T·d going forward and twice that going backward, 12·T·d per layer: 12·L·T·d in all.
    """
    sizes = {"n_params": n_params, "n_layer": n_layer, "block_size": block_size, "n_embd": n_embd}
    negative = {name: value for name, value in sizes.items() if value < 0}
    if negative:
        raise ValueError(f"sizes must not be negative, got {negative}")
    return 6 * n_params + 12 * n_layer * block_size * n_embd


def gpt_flops_per_token(config) -> float:
    """:func:`flops_per_token` of a :class:`~mini_llm.gpt.GPTConfig`."""
    d, L, T = config.n_embd, config.n_layer, config.block_size
    return flops_per_token(config.parameter_count() - T * d, L, T, d)


def mfu(tokens_per_second: float, flops_per_token: float, peak_flops: float) -> float:
    """Model FLOPs utilisation: the fraction (0 to 1, not a percentage) of the hardware's peak
    FLOP/s that the model's own arithmetic uses at this throughput.

    Counted from the model's FLOPs, not the hardware's: recomputation (activation
    checkpointing) costs time but adds nothing here, so it lowers the MFU, as it should.
    """
    if peak_flops <= 0:
        raise ValueError(f"peak_flops must be positive, got {peak_flops}")
    if tokens_per_second < 0 or flops_per_token < 0:
        raise ValueError("tokens_per_second and flops_per_token must not be negative")
    return tokens_per_second * flops_per_token / peak_flops
