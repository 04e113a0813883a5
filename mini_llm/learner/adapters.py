"""Small adapters between a learner's signature and the package's, named in the registry.

``also`` adapters take the learner's function (and the reference they replace) and return a
function with the package's signature; ``stand_in`` adapters compute a reference that is not in
the package yet, in the learner's signature.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

import torch


def layer_norm_module(layer_norm: Callable, reference: type) -> type:
    """A ``torch.nn.LayerNorm`` (same parameters and state dict) that computes chapter 9's
    ``layer_norm(x, gamma, beta, eps)``: the GPT builds its LayerNorms from it."""

    class LayerNorm(reference):
        def forward(self, x):
            if self.weight is None:  # no learned gain and bias: nothing of the learner's
                return super().forward(x)
            return layer_norm(x, self.weight, _bias_or_zeros(self), self.eps)

    return LayerNorm


def feed_forward_module(feed_forward: Callable, reference: type) -> type:
    """``gpt.MLP`` that computes chapter 9's ``feed_forward(x, W1, b1, W2, b2)`` where the GPT's
    activation is the ReLU (chapter 9's network); other activations keep the reference's."""

    class MLP(reference):
        def forward(self, x):
            if self.activation is not torch.relu:
                return super().forward(x)
            fc, proj = self.fc, self.proj
            out = feed_forward(x, fc.weight, _bias_or_zeros(fc), proj.weight, _bias_or_zeros(proj))
            return self.dropout(out)

    return MLP


def _bias_or_zeros(layer) -> torch.Tensor:
    """The layer's bias, or zeros where it has none: chapter 9's functions always take one."""
    if layer.bias is not None:
        return layer.bias
    return torch.zeros(layer.weight.shape[0], device=layer.weight.device, dtype=layer.weight.dtype)


def schedule_of_config(learning_rate_at: Callable, reference: Callable) -> Callable:
    """``schedule.learning_rate_at(step, config)`` from chapter 12's
    ``learning_rate_at(step, max_lr, min_lr, warmup_iters, decay_iters)``; the noam schedule
    stays the reference's (chapter 9's ``noam_learning_rate`` is swapped on its own)."""

    def scheduled(step, config):
        if config.schedule != "cosine":
            return reference(step, config)
        decay_end = config.lr_decay_iters or config.max_iters
        return learning_rate_at(
            step, config.learning_rate, config.min_lr, config.warmup_iters, decay_end
        )

    return scheduled


def cosine_of_config(step, max_lr, min_lr, warmup_iters, decay_iters):
    """The warm-up and cosine schedule of ``schedule.learning_rate_at``, from plain numbers."""
    from mini_llm.engine.schedule import learning_rate_at
    from mini_llm.engine.train import TrainConfig

    config = TrainConfig(
        learning_rate=max_lr,
        min_lr=min_lr,
        warmup_iters=warmup_iters,
        lr_decay_iters=decay_iters,
        max_iters=max(1, decay_iters),
    )
    return learning_rate_at(step, config)


def parameter_count_of_config(vocab_size, block_size, n_layer, n_embd, bias=True):
    """``GPTConfig.parameter_count`` of that shape (one head: the count does not depend on it)."""
    from mini_llm.gpt import GPTConfig

    config = GPTConfig(vocab_size, block_size, n_layer, 1, n_embd, bias=bias)
    return config.parameter_count()


def resolve(path: str):
    """``module:name`` -> the object, or None where the module or name does not exist (yet)."""
    module_name, _, name = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError:
        return None
    return getattr(module, name, None)


def by_name(name: str) -> Callable:
    found = globals().get(name)
    if not callable(found) or name.startswith("_") or name in ("resolve", "by_name"):
        raise KeyError(f"no adapter named {name!r} in mini_llm.learner.adapters")
    return found
