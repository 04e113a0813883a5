"""Lending the grader's torch models, optimizers and test helpers to the student's process.

A test such as "one ``training_step(model, optimizer, x, y)`` moves the weights like SGD" hands
the learner's function objects made by the test, and then looks at what the call did to them.
Those objects cannot cross :mod:`.wire` as plain data, so they are *lent*:

* out, to the sandbox, as a pickle (:mod:`cloudpickle`, so a class or helper defined in a test
  cell goes by value). Only the grader writes these pickles and only the sandbox reads them:
  the grader trusts its own objects; nothing the student's process sends is ever unpickled.
  Objects the student's process already holds (a :class:`~.verify.Remote`) go as their handle.
* back, after the call, as plain data: a model's tensors, gradients and training flags, an
  optimizer's state. The grader copies them into its own objects, which keep their identity,
  as a notebook would show them -- but only in the shape they went out in, so a submission
  can change the numbers (its answer) and nothing else.

A test helper that must run *beside* the learner's objects (``backward()`` through the
learner's model) is marked with :func:`beside_the_answers`; the grader lends it the same way
and takes back only the plain data it returns.
"""

from __future__ import annotations

import base64
import functools
import io
import pickle
import sys
from collections.abc import Callable
from typing import Any

beside: Callable | None = None
"""Set by `mini-llm grade` while it replays a notebook: ``beside(helper, args, kwargs)`` runs a
helper marked :func:`beside_the_answers` in the student's process."""


def beside_the_answers(helper: Callable) -> Callable:
    """Mark a test helper that must run where the learner's objects live.

    In a notebook this changes nothing. When `mini-llm grade` replays a notebook, the learner's
    code runs in a sandboxed process and the tests see copies of what it returns: a loss
    without its autograd graph, say. A helper that needs the objects themselves (to call
    ``backward()`` through the learner's model) is run in that process, and only the plain data
    it returns comes back to be checked. It is *sent* there, with the globals it uses, where the
    submission could read it: let it compute, and keep expected values and checks outside it.
    """

    @functools.wraps(helper)
    def run_beside(*args: Any, **kwargs: Any) -> Any:
        if beside is None:
            return helper(*args, **kwargs)
        return beside(helper, args, kwargs)

    return run_beside


def lendable(value: Any) -> bool:
    """Objects of the grader that may be lent: torch modules and optimizers."""
    torch = sys.modules.get("torch")  # nothing of torch exists here unless the tests imported it
    return torch is not None and isinstance(value, (torch.nn.Module, torch.optim.Optimizer))


# ------------------------------------------------------------------------------- out
def pack(objects: list, handle: Callable[[Any], dict | None]) -> str:
    """The objects as base64 pickle text; ``handle`` gives the token of an object that lives
    in the student's process (it is sent as that token), None for any other. Gradients go
    too: a model arrives with the ``.grad`` it has here (pickle alone drops them)."""
    import cloudpickle

    class Pickler(cloudpickle.Pickler):
        def persistent_id(self, obj: Any) -> dict | None:
            return handle(obj)

    torch = sys.modules.get("torch")
    gradients = [
        {n: p.grad for n, p in o.named_parameters() if p.grad is not None}
        if torch is not None and isinstance(o, torch.nn.Module)
        else {}
        for o in objects
    ]
    buffer = io.BytesIO()
    Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump((objects, gradients))
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def unpack(text: str, resolve: Callable[[dict], Any]) -> list:
    """(In the student's process.) The lent objects, with their gradients."""

    class Unpickler(pickle.Unpickler):
        def persistent_load(self, token: Any) -> Any:
            return resolve(token)

    objects, gradients = Unpickler(io.BytesIO(base64.b64decode(text))).load()
    for lent, grads in zip(objects, gradients):
        for name, parameter in lent.named_parameters() if grads else ():
            parameter.grad = grads.get(name)
    return objects


# ------------------------------------------------------------------------------- back
def state_of(value: Any) -> dict | None:
    """(In the student's process.) What a call may have changed in a lent object, as data."""
    torch = sys.modules.get("torch")
    if torch is None:  # a lent test helper that does not use torch
        return None
    if isinstance(value, torch.nn.Module):
        return {
            "tensors": {n: t.detach() for n, t in value.state_dict(keep_vars=True).items()},
            "grads": {n: p.grad for n, p in value.named_parameters()},
            "training": {n: m.training for n, m in value.named_modules()},
        }
    if isinstance(value, torch.optim.Optimizer):
        return value.state_dict()
    return None


def restore(mine: Any, theirs: Any) -> None:
    """Copy the state ``theirs`` (from :func:`state_of`, decoded) into the grader's object.

    Raises ``ValueError`` where the state is not the one that went out with new numbers: other
    names, shapes or types."""
    import torch

    if isinstance(mine, torch.nn.Module):
        _restore_module(mine, _fields(theirs, ("tensors", "grads", "training")))
    elif isinstance(mine, torch.optim.Optimizer):
        _restore_optimizer(mine, _fields(theirs, ("state", "param_groups")))


def _fields(state: Any, names: tuple[str, ...]) -> dict:
    if not isinstance(state, dict) or set(state) != set(names):
        raise ValueError(f"expected the fields {', '.join(names)}")
    return state


def _same_kind(mine: Any, theirs: Any, what: str) -> Any:
    import torch

    if not isinstance(theirs, torch.Tensor):
        raise ValueError(f"{what} is not a tensor")  # noqa: TRY004 - one error for any bad state
    if theirs.shape != mine.shape or theirs.dtype != mine.dtype:
        raise ValueError(
            f"{what} came back as {theirs.dtype} {tuple(theirs.shape)}, "
            f"not {mine.dtype} {tuple(mine.shape)}"
        )
    return theirs


def _restore_module(module: Any, state: dict) -> None:
    import torch

    tensors, grads, training = state["tensors"], state["grads"], state["training"]
    mine = module.state_dict(keep_vars=True)
    if not isinstance(tensors, dict) or set(tensors) != set(mine):
        raise ValueError("the model came back with other parameters than it was lent with")
    parameters = dict(module.named_parameters())
    if not isinstance(grads, dict) or set(grads) != set(parameters):
        raise ValueError("the model's gradients came back for other parameters")
    modules = dict(module.named_modules())
    if not isinstance(training, dict) or set(training) != set(modules):
        raise ValueError("the model came back with other layers than it was lent with")
    checked = {n: _same_kind(mine[n], t, f"{n}") for n, t in tensors.items()}
    new_grads = {
        n: None if g is None else _same_kind(parameters[n], g, f"{n}.grad")
        for n, g in grads.items()
    }
    if not all(isinstance(flag, bool) for flag in training.values()):
        raise ValueError("a training flag is not True or False")
    with torch.no_grad():
        for name, value in checked.items():
            mine[name].copy_(value)
    for name, grad in new_grads.items():
        parameters[name].grad = grad
    for name, flag in training.items():
        modules[name].training = flag


def _same_type(mine: Any, theirs: Any) -> bool:
    """Plain data of the type the grader's value has (a learning rate may turn int or float)."""
    numbers = (int, float)
    if type(mine) in numbers and type(theirs) in numbers:
        return True
    if isinstance(mine, tuple) and isinstance(theirs, tuple) and len(mine) == len(theirs):
        return all(_same_type(a, b) for a, b in zip(mine, theirs))
    return type(mine) is type(theirs) and isinstance(mine, (bool, str, type(None)))


def _restore_optimizer(optimizer: Any, state: dict) -> None:
    """The optimizer's per-parameter state (momentum, Adam's moments), and the numbers of its
    groups (a learning rate the call changed); a group's keys stay the grader's."""
    groups = state["param_groups"]
    if not isinstance(groups, list) or len(groups) != len(optimizer.param_groups):
        raise ValueError("the optimizer came back with another number of parameter groups")
    kept = []
    for mine, theirs in zip(optimizer.param_groups, groups):
        if not isinstance(theirs, dict) or set(theirs) != set(mine):
            raise ValueError("a parameter group came back with other settings")
        plain = {k: v for k, v in mine.items() if k != "params"}
        for key, value in plain.items():
            if not _same_type(value, theirs[key]):
                raise ValueError(
                    f"the optimizer's {key!r} came back as {type(theirs[key]).__name__}"
                )
        kept.append({**{k: theirs[k] for k in plain}, "params": theirs["params"]})
    try:
        optimizer.load_state_dict({"state": state["state"], "param_groups": kept})
    except (KeyError, TypeError, RuntimeError, IndexError) as err:
        raise ValueError(f"the optimizer's state cannot be loaded: {err}") from err
