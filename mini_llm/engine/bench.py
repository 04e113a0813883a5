"""Timing helpers shared by ``mini-llm bench`` and the scripts under ``benchmarks/``.

Timings on a busy machine are noisy, so every figure is a median over repeats.
"""

from __future__ import annotations

import statistics
import time

import torch
from torch import nn

from mini_llm.engine.cpu_parallel import CoreWorkers


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def train_step_times(
    model: nn.Module,
    batches: list,
    optimizer: torch.optim.Optimizer,
    warmup: int = 5,
    grad_clip: float = 1.0,
    autocast_to: torch.dtype | None = None,
    cores: CoreWorkers | None = None,
) -> list[float]:
    """Milliseconds of each training step (forward, backward, clip, AdamW) over ``batches``.

    The first ``warmup`` batches are run but not timed (allocator and kernel warm-up, and
    compilation when the model is compiled). ``autocast_to`` (e.g. ``torch.bfloat16``) runs the
    forward pass under autocast, as the trainer does on a GPU; ``None`` runs it in float32.
    ``cores`` shares each batch's rows among the CPU's cores, as the trainer does where
    :func:`mini_llm.engine.cpu_parallel.decide` says so.
    """
    device = next(model.parameters()).device
    times = []
    for i, (x, y) in enumerate(batches):
        _sync(device)
        start = time.perf_counter()
        if cores:
            cores.forward_backward(model, x, y)
        else:
            with torch.autocast(device.type, dtype=autocast_to, enabled=autocast_to is not None):
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


def gpu_work_per_step(
    model: nn.Module,
    batches: list,
    optimizer: torch.optim.Optimizer,
    autocast_to: torch.dtype | None = None,
) -> tuple[float, float]:
    """Kernels launched and milliseconds the GPU spends running them, per training step.

    Set beside the step's wall-clock time this says who sets the pace: a GPU busy for most of
    the step is the limit; one idle for most of it waits for Python to launch the next kernel.
    """
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as profiler:
        train_step_times(model, batches, optimizer, warmup=0, autocast_to=autocast_to)
    on_gpu = [
        event for event in profiler.events() if event.device_type == torch.autograd.DeviceType.CUDA
    ]
    busy_ms = sum(event.time_range.elapsed_us() for event in on_gpu) / 1000
    return len(on_gpu) / len(batches), busy_ms / len(batches)


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
