"""Timing helpers shared by ``mini-llm bench`` and the scripts under ``benchmarks/``.

Timings on a busy machine are noisy, so every figure is a median over repeats.
"""

from __future__ import annotations

import statistics
import time

import torch
from torch import nn


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def train_step_times(
    model: nn.Module,
    batches: list,
    optimizer: torch.optim.Optimizer,
    warmup: int = 5,
    grad_clip: float = 1.0,
) -> list[float]:
    """Milliseconds of each training step (forward, backward, clip, AdamW) over ``batches``.

    The first ``warmup`` batches are run but not timed (allocator and kernel warm-up, and
    compilation when the model is compiled).
    """
    device = next(model.parameters()).device
    times = []
    for i, (x, y) in enumerate(batches):
        _sync(device)
        start = time.perf_counter()
        _, loss = model(x, y)
        loss.backward()
        if grad_clip:
            nn.utils.clip_grad_norm_(model.parameters(), grad_clip, foreach=True)  # as train()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        _sync(device)
        if i >= warmup:
            times.append((time.perf_counter() - start) * 1000)
    return times


def generation_tokens_per_s(
    model, prompt: torch.Tensor, new_tokens: int, use_cache: bool, repeats: int = 3
) -> float:
    """Median tokens per second of greedy generation of ``new_tokens`` after ``prompt``."""
    rates = []
    for _ in range(repeats):
        _sync(prompt.device)
        start = time.perf_counter()
        model.generate(prompt, new_tokens, temperature=0, use_cache=use_cache)
        _sync(prompt.device)
        rates.append(new_tokens * prompt.size(0) / (time.perf_counter() - start))
    return statistics.median(rates)


def flops_per_token(config) -> float:
    """Training FLOPs per token (forward + backward) of a GPT, from its shape.

    Each weight is used in one multiply-add per token going forward (2 FLOPs) and two going
    backward (4 FLOPs): 6·N for the N parameters in matrix multiplies (all but the position
    embedding; the token embedding counts as the output head). Attention adds, per layer,
    Q·Kᵀ and weights·V over a window of T: 2·2·T·d forward, 6·2·T·d in all, i.e. 12·L·T·d.
    """
    d, L, T = config.n_embd, config.n_layer, config.block_size
    matmul_parameters = config.parameter_count() - T * d
    return 6 * matmul_parameters + 12 * L * T * d
