"""Import paths of the previous release, kept for one release as aliases of the new ones.

The training engine moved into :mod:`mini_llm.engine` and chapter 8's module was renamed
:mod:`mini_llm.self_attention`. A notebook written against the old layout
(``from mini_llm.train import train``) still runs: importing an old name gives the very module
object of the new one (so a swap made through either name is seen through both) and warns
with the new name.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

MOVED = {
    **{
        f"mini_llm.{name}": f"mini_llm.engine.{name}"
        for name in (
            "train",
            "data",
            "checkpoint",
            "device",
            "configs",
            "cpu_linear",
            "cpu_parallel",
            "bench",
        )
    },
    "mini_llm.attention": "mini_llm.self_attention",
}
"""old module name -> the module it now is"""


class _OldNameFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        new = MOVED[spec.name]
        warnings.warn(
            f"{spec.name} is now {new}; the old name goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(new)

    def exec_module(self, module):
        """Nothing to run: the module is the new one, already imported."""


def install() -> None:
    if not any(isinstance(finder, _OldNameFinder) for finder in sys.meta_path):
        sys.meta_path.append(_OldNameFinder())
