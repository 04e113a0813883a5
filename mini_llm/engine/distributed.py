"""This process's place in a ``torchrun`` launch, and the little of DDP the training loop uses.

Outside ``torchrun`` there is one process, rank 0 of 1, and every method does the single-process
thing, so the loop reads the same either way.
"""

from __future__ import annotations

import contextlib
import os

import torch
import torch.distributed as dist
from torch import nn

from mini_llm.engine.device import pick_device


class World:
    """Rank, world size and device of this process, with DDP set up under ``torchrun``.

    A process group this object starts, :meth:`close` ends; one the caller started is left to
    the caller.
    """

    def __init__(self, device_name: str):
        self.enabled = "RANK" in os.environ and "WORLD_SIZE" in os.environ
        self.rank, self.world_size = 0, 1
        self.owns_group = False
        if not self.enabled:
            self.device = pick_device(device_name)
            return
        use_cuda = torch.cuda.is_available() and device_name in ("auto", "cuda")
        if not dist.is_initialized():
            dist.init_process_group("nccl" if use_cuda else "gloo")
            self.owns_group = True
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        if use_cuda:
            local_rank = int(os.environ.get("LOCAL_RANK", "0"))
            torch.cuda.set_device(local_rank)
            self.device = torch.device("cuda", local_rank)
        else:
            self.device = torch.device("cpu")

    def close(self) -> None:
        if self.owns_group and dist.is_initialized():
            dist.destroy_process_group()

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def wrap(self, model: nn.Module) -> nn.Module:
        """``model`` in DistributedDataParallel, which averages the gradients across ranks."""
        if not self.enabled:
            return model
        cuda = self.device.type == "cuda"
        return nn.parallel.DistributedDataParallel(
            model, device_ids=[self.device.index] if cuda else None
        )

    def micro_batch(self, model: nn.Module, last: bool):
        """The context of one micro-batch's backward: under DDP, gradients are averaged across
        ranks only after the last micro-batch of a step."""
        return contextlib.nullcontext() if last or not self.enabled else model.no_sync()

    def mean(self, values: torch.Tensor) -> torch.Tensor:
        """The mean over ranks of a tensor of losses (every rank gets it)."""
        if self.enabled:
            values = values.clone()
            dist.all_reduce(values)
            values /= self.world_size
        return values

    def gather(self, obj) -> list:
        if not self.enabled:
            return [obj]
        gathered = [None] * self.world_size
        dist.all_gather_object(gathered, obj)
        return gathered
