"""Chapter 14 -- Adapting the GPT: instruction tuning and LoRA.

LoRA adapts a trained GPT by training a low-rank update of a few of its weight matrices (Hu
et al., 2021, "LoRA: Low-Rank Adaptation of Large Language Models").

Full fine-tuning changes every weight W. LoRA keeps W frozen and learns ΔW = (α/r)·B·A, with
A (r, in) and B (out, r): r·(in + out) numbers instead of in·out. B starts at zero, so the
adapted model starts as the trained one; A starts random, so B's gradient is not zero. After
training the update is added into W (:func:`merge_lora`) and the model is a plain GPT again,
exactly as fast as before.
"""

from __future__ import annotations

import math

import torch
from torch import nn

# The GPT's linear layers by the end of their names (mini_llm.gpt): attention's Q, K, V and
# output projections, the MLP's two. The tied output head is left alone.
TARGETS = ("attn.qkv", "attn.proj", "mlp.fc", "mlp.proj")


class LoRALinear(nn.Module):
    """A frozen ``nn.Linear`` plus a trainable low-rank update: y = W x + b + (α/r)·B A x."""

    def __init__(self, base: nn.Linear, rank: int = 4, alpha: float = 8.0):
        super().__init__()
        if rank < 1:
            raise ValueError(f"rank must be ≥ 1, got {rank}")
        self.base = base.requires_grad_(False)
        self.rank, self.alpha, self.scaling = rank, alpha, alpha / rank
        # A ~ N(0, 1/in): A x has the scale of x. B = 0: the update starts at nothing.
        self.A = nn.Parameter(torch.randn(rank, base.in_features) / math.sqrt(base.in_features))
        self.B = nn.Parameter(torch.zeros(base.out_features, rank))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x → A x (r numbers) → B (A x): never the full out × in matrix B A.
        return self.base(x) + self.scaling * ((x @ self.A.T) @ self.B.T)

    def delta_weight(self) -> torch.Tensor:
        """ΔW = (α/r)·B A, (out, in): the update as a matrix, of rank at most r."""
        return self.scaling * (self.B @ self.A)

    @torch.no_grad()
    def merged(self) -> nn.Linear:
        """A plain ``nn.Linear`` with weight W + (α/r)·B A: the same function, no extra cost."""
        base = self.base
        linear = nn.Linear(base.in_features, base.out_features, bias=base.bias is not None)
        linear = linear.to(device=base.weight.device, dtype=base.weight.dtype)
        linear.weight.copy_(base.weight + self.delta_weight().to(base.weight.dtype))
        if base.bias is not None:
            linear.bias.copy_(base.bias)
        return linear


def _parent(model: nn.Module, name: str) -> tuple[nn.Module, str]:
    """The module that holds submodule ``name`` ("blocks.0.attn.qkv"), and its attribute."""
    path, _, attribute = name.rpartition(".")
    return (model.get_submodule(path) if path else model), attribute


def add_lora(model: nn.Module, rank: int = 4, alpha: float = 8.0, targets=TARGETS) -> list[str]:
    """Freeze every parameter of ``model``, then wrap each ``nn.Linear`` whose name ends with
    one of ``targets`` in a :class:`LoRALinear`; in place. Returns the wrapped names.

    Afterwards only the A and B matrices train."""
    model.requires_grad_(False)
    names = [
        name
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear)
        and any(name == target or name.endswith("." + target) for target in targets)
    ]
    if not names:
        raise ValueError(f"no nn.Linear of the model has a name ending with one of {targets}")
    for name in names:
        parent, attribute = _parent(model, name)
        setattr(parent, attribute, LoRALinear(getattr(parent, attribute), rank, alpha))
    return names


def merge_lora(model: nn.Module) -> nn.Module:
    """Replace every :class:`LoRALinear` in ``model`` by its :meth:`~LoRALinear.merged`
    linear layer, in place: the same logits from a plain model."""
    names = [name for name, module in model.named_modules() if isinstance(module, LoRALinear)]
    for name in names:
        parent, attribute = _parent(model, name)
        setattr(parent, attribute, getattr(parent, attribute).merged())
    return model


def lora_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """Only the adapters' A and B, by name: what one fine-tuned task costs to keep beside the
    shared base model (load it back with ``load_state_dict(..., strict=False)``)."""
    return {k: v for k, v in model.state_dict().items() if k.endswith((".A", ".B"))}


def trainable_parameters(model: nn.Module) -> int:
    """How many numbers an optimizer would change: the parameters that require gradients."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def lora_parameter_count(config, rank: int, targets=TARGETS) -> int:
    """Trainable parameters of LoRA at ``rank`` on a GPT of shape ``config`` (a GPTConfig):
    r·(in + out) per wrapped matrix, per block. With all four targets, d = n_embd:
    r·(d + 3d) + r·(d + d) + r·(d + 4d) + r·(4d + d) = 16·r·d per block, L·16·r·d in all,
    against :meth:`GPTConfig.parameter_count` for full fine-tuning."""
    d = config.n_embd
    shapes = {"attn.qkv": (d, 3 * d), "attn.proj": (d, d), "mlp.fc": (d, 4 * d),
              "mlp.proj": (4 * d, d)}  # fmt: skip
    unknown = set(targets) - set(shapes)
    if unknown:
        raise ValueError(f"unknown targets {sorted(unknown)}; choose from {sorted(shapes)}")
    return config.n_layer * sum(rank * sum(shapes[target]) for target in targets)
