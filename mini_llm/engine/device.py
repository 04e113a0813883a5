"""Where tensors live: ``"auto"`` picks CUDA, then Apple's MPS, then the CPU."""

from __future__ import annotations

import torch


def pick_device(device: str = "auto") -> torch.device:
    """The ``torch.device`` for ``device``; ``"auto"`` takes the fastest one available."""
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    unknown = ValueError(f"unknown device {device!r}; use auto, cpu, cuda or mps")
    try:
        chosen = torch.device(device)
    except RuntimeError as err:
        raise unknown from err
    if chosen.type not in ("cpu", "cuda", "mps"):  # torch knows more (meta, hip, xla, ...)
        raise unknown
    if chosen.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device {device!r} was asked for but no CUDA GPU is available; use --device auto"
        )
    if chosen.type == "cuda" and (chosen.index or 0) >= torch.cuda.device_count():
        raise ValueError(
            f"device {device!r} was asked for but this machine has "
            f"{torch.cuda.device_count()} CUDA GPU(s), numbered from 0"
        )
    if chosen.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError("device 'mps' was asked for but MPS is not available; use --device auto")
    return chosen
