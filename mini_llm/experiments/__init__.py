"""The named experiments of ``mini-llm record NAME``: runs too long to train while a page builds.

Each is a module here with ``NAME``, ``SUMMARY`` (one line for ``--list``) and
``run(out_dir, tiny=False) -> Recorded``: it trains, measures and saves its checkpoints into
``out_dir``, and returns what :func:`mini_llm.engine.recorded.write_recording` stores.
``tiny=True`` runs the same code end to end at a tiny size, for the tests.
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

MODULES = ["ch09_transformer_vs_gru", "ch11_gpt_cpu", "ch11_sweep", "ch14_adapt"]


class Recorded(NamedTuple):
    results: dict  # what the page renders: settings, metrics, curves, samples
    checkpoints: dict[str, str]  # key -> file name in out_dir
    device: str = "cpu"


def experiments() -> dict:
    """``{name: module}`` of every experiment, in the order of ``MODULES``."""
    modules = [importlib.import_module(f"mini_llm.experiments.{name}") for name in MODULES]
    return {module.NAME: module for module in modules}
