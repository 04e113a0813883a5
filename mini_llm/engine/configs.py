"""Named run configurations for ``mini-llm train``, and ``key=value`` overrides on top of them.

A run configuration is one flat set of keys: the model's shape (:class:`GPTConfig` fields but
``vocab_size``, which the tokenizer decides), the training settings (:class:`TrainConfig`
fields) and the data settings in ``DATA_DEFAULTS``. The training settings that say where and how
this process runs rather than what it trains (``out_dir``, ``device``, ...) are command-line
flags, listed in ``COMMAND_LINE_FLAGS``: given as ``key=value`` they are refused, naming the flag.
"""

from __future__ import annotations

import types
import typing
from dataclasses import asdict, dataclass, fields

from mini_llm.engine.train import TrainConfig
from mini_llm.gpt import GPTConfig

DATA_DEFAULTS = {"corpus": "shakespeare", "batch_size": 12, "val_fraction": 0.1}

CONFIGS: dict[str, dict] = {
    # A character-level Shakespeare model that trains in minutes on a laptop CPU.
    "shakespeare-char-cpu": {
        "n_layer": 4,
        "n_head": 4,
        "n_embd": 128,
        "block_size": 64,
        "dropout": 0.0,
        "batch_size": 12,
        "max_iters": 2000,
        "warmup_iters": 100,
        "learning_rate": 1e-3,
        "min_lr": 1e-4,
        "beta2": 0.99,
        "eval_interval": 250,
        "eval_iters": 20,
        "compile": False,
    },
    # The same task at GPU size: ~10.7M parameters, a context of 256 characters.
    "shakespeare-char-gpu": {
        "n_layer": 6,
        "n_head": 6,
        "n_embd": 384,
        "block_size": 256,
        "dropout": 0.2,
        "batch_size": 64,
        "max_iters": 5000,
        "warmup_iters": 100,
        "learning_rate": 1e-3,
        "min_lr": 1e-4,
        "beta2": 0.99,
        "eval_interval": 250,
        "eval_iters": 200,
        "compile": True,
    },
}

# TrainConfig fields that `mini-llm train` sets from its flags, never from key=value.
COMMAND_LINE_FLAGS = {
    "out_dir": "--out",
    "device": "--device",
    "resume": "--resume",
    "new_schedule": "--new-schedule",
    "threads": "--threads",
}

_MODEL_KEYS = {f.name for f in fields(GPTConfig)} - {"vocab_size"}
_TRAIN_KEYS = {f.name for f in fields(TrainConfig)} - set(COMMAND_LINE_FLAGS)


@dataclass
class RunConfig:
    """A resolved configuration, split by who uses each part."""

    name: str
    model: dict  # GPTConfig keyword arguments, without vocab_size
    train: TrainConfig
    data: dict  # corpus, batch_size, val_fraction


def valid_keys() -> list[str]:
    return sorted(_MODEL_KEYS | _TRAIN_KEYS | set(DATA_DEFAULTS))


def _field_types() -> dict[str, object]:
    hints = {**typing.get_type_hints(GPTConfig), **typing.get_type_hints(TrainConfig)}
    hints.update({key: type(value) for key, value in DATA_DEFAULTS.items()})
    return hints


def _parse_value(key: str, text: str, wanted) -> object:
    """``text`` as the type of ``key``: int, float, bool, str, or one of them or None."""
    options = typing.get_args(wanted) if isinstance(wanted, types.UnionType) else (wanted,)
    if type(None) in options and text.lower() in ("none", "null"):
        return None
    kind = next(option for option in options if option is not type(None))
    if kind is bool:
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"{key} must be true or false, got {text!r}")
    try:
        return kind(text)
    except ValueError as err:
        raise ValueError(f"{key} must be {kind.__name__}, got {text!r}") from err


def parse_overrides(pairs: list[str]) -> dict:
    """``["n_layer=2", "dropout=0.1"]`` → ``{"n_layer": 2, "dropout": 0.1}``, types checked."""
    types_of = _field_types()
    overrides = {}
    for pair in pairs:
        key, equals, text = pair.partition("=")
        key = key.strip()
        if not equals:
            raise ValueError(f"override {pair!r} is not of the form key=value")
        if key in COMMAND_LINE_FLAGS:
            raise ValueError(
                f"{key} is not a config key: use the flag {COMMAND_LINE_FLAGS[key]} "
                f"(e.g. mini-llm train {COMMAND_LINE_FLAGS[key]} ...)"
            )
        if key == "vocab_size":
            raise ValueError(
                "vocab_size is not a config key: the prepared data's tokenizer sets it"
            )
        if key not in types_of:
            raise ValueError(f"unknown config key {key!r}; valid keys: {', '.join(valid_keys())}")
        overrides[key] = _parse_value(key, text.strip(), types_of[key])
    return overrides


def resolve(name: str, overrides: list[str] | None = None, base: dict | None = None) -> RunConfig:
    """Named config ``name``, then the settings in ``base`` (a run's own, to resume it), then
    ``key=value`` overrides."""
    if name not in CONFIGS:
        raise ValueError(f"unknown config {name!r}; choose one of: {', '.join(sorted(CONFIGS))}")
    settings = {
        **DATA_DEFAULTS,
        **CONFIGS[name],
        **(base or {}),
        **parse_overrides(overrides or []),
    }
    model = {k: v for k, v in settings.items() if k in _MODEL_KEYS}
    GPTConfig(vocab_size=1, **model)  # checks the shape now, before any data is read
    return RunConfig(
        name=name,
        model=model,
        train=TrainConfig(**{k: v for k, v in settings.items() if k in _TRAIN_KEYS}),
        data={k: settings[k] for k in DATA_DEFAULTS},
    )


def settings_of(run: RunConfig) -> dict:
    """The flat ``key: value`` settings of ``run``, every valid key once (defaults included)."""
    model = {
        k: v for k, v in asdict(GPTConfig(vocab_size=1, **run.model)).items() if k in _MODEL_KEYS
    }
    train = {k: v for k, v in asdict(run.train).items() if k in _TRAIN_KEYS}
    return {**model, **train, **run.data}


def saved_settings(checkpoint: dict) -> dict:
    """The settings a checkpoint written by ``mini-llm train`` was trained with.

    Model and training settings come from its ``model_config`` and ``train_config``; the data
    settings from ``data`` (checkpoints from before it was stored fall back to the config's).
    """
    saved = {
        **checkpoint["model_config"],
        **checkpoint["train_config"],
        **checkpoint.get("data", {}),
    }
    return {k: v for k, v in saved.items() if k in _MODEL_KEYS | _TRAIN_KEYS | set(DATA_DEFAULTS)}


def differences(before: dict, after: dict) -> list[str]:
    """``["max_iters 600 -> 800", ...]``: the keys whose values differ, in sorted order."""
    return [
        f"{k} {before.get(k)} -> {after.get(k)}"
        for k in sorted(before.keys() | after.keys())
        if before.get(k) != after.get(k)
    ]
