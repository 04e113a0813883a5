"""Train on every core of a CPU by giving each core its own rows of the batch.

Why: by default PyTorch splits every operation across the cores (intra-op threads). A small
model is made of small operations, a few hundred microseconds each, and every one of them pays
for handing work to the other cores and waiting until all are done. Splitting the *batch*
instead costs one hand-off per step: each core runs forward and backward for its share of the
rows on its own, one thread, and the gradients are added up at the end. For
``shakespeare-char-cpu`` on two cores that made the typical training step faster, with AVX-512
and with AVX2 alike (``benchmarks/train_throughput.py``; the figures are in
``benchmarks/README.md``).

The result is the whole batch's gradient, equal to rounding, when the loss is the mean over the
batch's targets: each share's loss is weighted by its share of the targets
(:func:`counted_targets`). That holds for the models of :data:`MEAN_OVER_TARGETS` (the GPT,
whose loss skips targets of -1); other models run their batch whole. The shares' gradients
are added in a fixed order, so a run is as reproducible as one without these threads.
:func:`decide` says where the split applies, and why not where it does not.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from concurrent.futures import Future, wait
from dataclasses import dataclass
from queue import SimpleQueue

import torch
from torch import nn

MEAN_OVER_TARGETS = {"mini_llm.gpt.GPT"}
"""Models (and their subclasses) whose ``forward(x, y)`` returns the mean cross-entropy over
the targets that are not -1, so that a batch's loss is its shares' losses weighted by their
counted targets. Named, not imported: a chapter that trains another model does not depend on
the GPT's code."""


def loss_is_mean_over_targets(model: nn.Module) -> bool:
    return any(f"{c.__module__}.{c.__qualname__}" in MEAN_OVER_TARGETS for c in type(model).mro())


def counted_targets(targets: torch.Tensor) -> int:
    """How many targets such a loss averages over: all but the -1s."""
    return int((targets != -1).sum())


@dataclass(frozen=True)
class Decision:
    """How many cores share each batch's rows (0: the batch runs whole), and why."""

    workers: int
    reason: str

    def __str__(self) -> str:
        if self.workers:
            return f"batch rows split across {self.workers} cores: {self.reason}"
        return f"batch rows not split across cores: {self.reason}"


def draws_random_numbers(model: nn.Module) -> bool:
    """Whether training the model draws random numbers (dropout above zero).

    Two threads would draw them from the one global generator in an order that changes from
    run to run, and a run could no longer be repeated exactly.
    """
    return any(isinstance(module, nn.Dropout) and module.p > 0 for module in model.modules())


def decide(
    model: nn.Module,
    device: torch.device,
    *,
    compiled: bool = False,
    distributed: bool = False,
    low_precision: torch.dtype | None = None,
    enabled: bool = True,
) -> Decision:
    """Whether to split batches across this process's CPU threads when training ``model``.

    ``enabled`` is the training config's ``split_across_cores``: False says no outright.
    """
    threads = torch.get_num_threads()
    reasons = [
        (not enabled, "split_across_cores=False"),
        (device.type != "cpu", f"the model trains on {device.type}, not on the CPU"),
        (threads < 2, "PyTorch has one thread here"),
        (distributed, "each process of a distributed run is already one worker"),
        (compiled, "a torch.compile'd model runs its batch whole"),
        (low_precision is not None, "autocast is set per thread"),
        (
            not loss_is_mean_over_targets(model),
            f"{type(model).__name__}'s loss is not known to be a mean over counted targets",
        ),
        (draws_random_numbers(model), "dropout draws random numbers, in no fixed order"),
    ]
    for applies, reason in reasons:
        if applies:
            return Decision(0, reason)
    return Decision(threads, f"one thread each, out of {threads} PyTorch threads")


class _Core(threading.Thread):
    """A thread that runs PyTorch on one core, one job after another."""

    def __init__(self):
        super().__init__(daemon=True, name="mini_llm-core")
        self.jobs: SimpleQueue = SimpleQueue()
        self.ready = threading.Event()

    def run(self):
        torch.get_num_threads()  # this thread's own set-up first, so that it is not redone later
        torch.set_num_threads(1)  # per thread: the caller keeps its own count
        self.ready.set()
        while (job := self.jobs.get()) is not None:
            function, future = job
            try:
                future.set_result(function())
            except Exception as error:  # noqa: BLE001 - the caller raises it, whatever it is
                future.set_exception(error)

    def submit(self, function) -> Future:
        future = Future()
        self.jobs.put((function, future))
        return future


def _share_gradients(model, x, y, weight, scale, parameters):
    """Forward and backward of one share: its weighted loss and the parameters' gradients of
    ``scale`` times that."""
    _, loss = model(x, y)
    loss = loss * weight
    return loss.detach(), torch.autograd.grad(loss * scale, parameters, allow_unused=True)


def workers_for(decision: Decision):
    """:class:`CoreWorkers` for ``decision``, or ``None`` where it says no (a context either way)."""
    if decision.workers:
        return CoreWorkers(decision.workers)
    return contextlib.nullcontext(None)


class CoreWorkers:
    """The calling thread and one helper thread per other core, each on one core, for
    :meth:`forward_backward`. Use as a context manager (or call :meth:`close`).

    While it is open the calling thread, too, runs PyTorch on one thread: left at several, its
    idle threads would spin, waiting for work, on the cores the helpers need (that made a step
    slower than no split at all). :meth:`all_threads` lends it all of them back for a while.
    """

    def __init__(self, cores: int):
        self.threads = torch.get_num_threads()
        self.helpers = [_Core() for _ in range(cores - 1)]
        for helper in self.helpers:
            helper.start()
            helper.ready.wait()
        torch.set_num_threads(1)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def close(self) -> None:
        for helper in self.helpers:
            helper.jobs.put(None)
        for helper in self.helpers:
            helper.join()
        torch.set_num_threads(self.threads)

    @contextlib.contextmanager
    def all_threads(self):
        """Within the block the calling thread has all its threads again (say, to evaluate)."""
        torch.set_num_threads(self.threads)
        try:
            yield
        finally:
            torch.set_num_threads(1)

    def forward_backward(
        self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, scale: float = 1.0
    ) -> torch.Tensor:
        """What ``model(x, y)[1]`` then ``(scale * loss).backward()`` do, the rows shared out.

        The gradients are added to the parameters' ``.grad``; returns the whole batch's loss
        (the mean over all its counted targets), detached.
        """
        cores = len(self.helpers) + 1
        shares = [
            (xs, ys, counted_targets(ys))
            for xs, ys in zip(x.tensor_split(cores), y.tensor_split(cores))
        ]
        total = sum(count for _, _, count in shares)
        if total == 0:  # nothing to weight by: the whole batch's (undefined) loss, as without us
            _, loss = model(x, y)
            (loss * scale).backward()
            return loss.detach()
        parameters = [p for p in model.parameters() if p.requires_grad]
        jobs = [
            functools.partial(_share_gradients, model, xs, ys, count / total, scale, parameters)
            for xs, ys, count in shares
            if count > 0
        ]
        futures = [helper.submit(job) for helper, job in zip(self.helpers, jobs[1:])]
        try:
            mine = jobs[0]()  # this thread takes the first share itself
        finally:
            wait(futures)  # all of them, before any error is raised: no thread left running
        results = [mine] + [future.result() for future in futures]
        for i, parameter in enumerate(parameters):
            gradients = [grads[i] for _, grads in results if grads[i] is not None]
            if not gradients:
                continue
            if parameter.grad is None:
                # In the parameter's own layout, as backward() would leave it: autograd.grad
                # may hand back a transposed one, which fused optimizers would misread.
                parameter.grad = torch.empty_like(parameter).copy_(gradients.pop(0))
            for gradient in gradients:
                parameter.grad += gradient
        return sum(loss for loss, _ in results)
