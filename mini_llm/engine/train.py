"""The course's one training loop, for every model from the MLP language model to the GPT.

Anything can be trained that has

* a model: an ``nn.Module`` whose ``forward(x, y)`` returns ``(logits, loss)``, and
* a batch function: a callable that returns ``(x, y)``; if it also has ``state_dict`` and
  ``load_state_dict`` (like :class:`mini_llm.engine.data.RandomBatches`), it is checkpointed too.

Example, in a notebook::

    result = train(model, train_batches, TrainConfig(max_iters=2000, learning_rate=1e-3),
                   val_batches=val_batches)
    result.train_losses   # [(step, loss), ...] every step
    result.val_losses     # [(step, loss), ...] every eval_interval steps

What one step does: for each of ``grad_accum_steps`` micro-batches, forward and backward (the
gradients add up), then clip the gradient norm, set the learning rate of this step (linear
warm-up, then cosine decay to ``min_lr``), and take an AdamW step. Weight decay applies to
weight matrices only, not to biases, LayerNorm gains or embeddings. On a CPU with several
threads, a GPT's forward and backward run as one share of the batch's rows per core
(:mod:`mini_llm.engine.cpu_parallel`, ``split_across_cores``): the same gradient, sooner.

With ``out_dir`` set, the loop also writes ``ckpt.pt`` (atomically; resume with
``resume=True`` continues exactly where the run stopped), ``metrics.jsonl`` and ``loss.png``.
A resumed run must keep the learning-rate schedule it was started with (a longer ``max_iters``
would otherwise redraw the cosine and make the rate jump): a changed schedule is refused with
the keys that changed, unless ``new_schedule=True`` accepts it. It must also keep its number of
processes, since each process continues its own stream of batches.
Launched with ``torchrun --nproc_per_node N``, it trains with DistributedDataParallel; only
rank 0 logs and writes files.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from tqdm.auto import tqdm

from mini_llm import schedules
from mini_llm.engine import cpu_parallel
from mini_llm.engine.checkpoint import (
    CheckpointError,
    load_checkpoint,
    rng_states,
    save_checkpoint,
    set_rng_states,
)
from mini_llm.engine.device import pick_device

Batches = Callable[[], tuple[torch.Tensor, torch.Tensor]]


@dataclass
class TrainConfig:
    """How to train. Defaults suit a small model on a CPU."""

    max_iters: int = 2000  # optimizer steps
    learning_rate: float = 1e-3  # peak, reached at the end of warm-up
    min_lr: float = 1e-4  # where the cosine ends
    warmup_iters: int = 100
    lr_decay_iters: int | None = None  # step where the cosine reaches min_lr (None: max_iters)
    # "cosine": linear warm-up, then cosine decay to min_lr. "noam": the Transformer paper's
    # warm-up then 1/sqrt(step) decay, peaking at learning_rate at step warmup_iters.
    schedule: str = "cosine"
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.99
    grad_clip: float = 1.0  # largest gradient norm; 0 turns clipping off
    grad_accum_steps: int = 1  # micro-batches per optimizer step
    eval_interval: int = 250  # steps between validation estimates (0: only at the end)
    eval_iters: int = 20  # batches per validation estimate
    log_interval: int = 10  # steps between log lines
    checkpoint_interval: int | None = None  # steps between checkpoints (None: eval_interval)
    out_dir: str | None = None  # where checkpoint, metrics and plot go; None writes nothing
    resume: bool = False  # continue from out_dir/ckpt.pt
    new_schedule: bool = False  # on resume, accept a learning-rate schedule unlike the saved one
    device: str = "auto"
    # "auto": bf16 autocast on a CUDA GPU that supports it, fp32 elsewhere; or "bf16", "fp32"
    dtype: str = "auto"
    compile: bool = False  # torch.compile the model
    # CPU threads for PyTorch during training (None: PyTorch's default, one per core). On a
    # machine busy with other work, 1 can be many times faster: idle threads spin waiting.
    threads: int | None = None
    # On a CPU with several threads, each core runs forward and backward for its share of the
    # batch's rows, one thread each (mini_llm.engine.cpu_parallel); False runs every batch whole.
    split_across_cores: bool = True
    seed: int = 1337
    progress: bool = True  # show a tqdm bar (in a notebook built into the book, pass False)

    def __post_init__(self):
        at_least_one = ("max_iters", "grad_accum_steps", "eval_iters", "log_interval")
        for name in at_least_one:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be at least 1 (or None), got {self.threads}")
        for name in ("warmup_iters", "eval_interval", "weight_decay", "grad_clip", "min_lr"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, got {getattr(self, name)}")
        if self.schedule not in ("cosine", "noam"):
            raise ValueError(f"schedule must be 'cosine' or 'noam', got {self.schedule!r}")
        if self.schedule == "noam" and self.warmup_iters < 1:
            raise ValueError("the noam schedule needs warmup_iters >= 1")
        if self.dtype not in ("auto", "bf16", "fp32"):
            raise ValueError(f"dtype must be 'auto', 'bf16' or 'fp32', got {self.dtype!r}")


@dataclass
class TrainResult:
    """Loss history of a run, for plotting, and where it ended."""

    train_losses: list[tuple[int, float]] = field(default_factory=list)
    val_losses: list[tuple[int, float]] = field(default_factory=list)
    step: int = 0
    tokens_per_s: float = 0.0
    checkpoint: str | None = None
    core_split: str = ""  # whether batches were split across CPU cores, and why (or why not)


class TrainingDivergedError(FloatingPointError):
    """The loss became NaN or infinite."""


SCHEDULE_KEYS = (
    "learning_rate",
    "min_lr",
    "warmup_iters",
    "lr_decay_iters",
    "max_iters",
    "schedule",
)


def learning_rate_at(step: int, config: TrainConfig) -> float:
    """Linear warm-up from ~0 to ``learning_rate``, then cosine decay down to ``min_lr``.

    With ``schedule="noam"``: chapter 9's :func:`mini_llm.schedules.noam_learning_rate` (steps
    counted from 1; looked up when called, so that ``mini-llm train --learner`` uses the
    learner's), rescaled so that its peak, at step ``warmup_iters``, is ``learning_rate``.
    """
    if config.schedule == "noam":
        warmup = config.warmup_iters
        return (
            config.learning_rate * schedules.noam_learning_rate(step + 1, 1, warmup) * warmup**0.5
        )
    return warmup_cosine_learning_rate(
        step,
        config.learning_rate,
        config.min_lr,
        config.warmup_iters,
        config.lr_decay_iters or config.max_iters,
    )


def warmup_cosine_learning_rate(
    step: int, max_lr: float, min_lr: float, warmup_iters: int, decay_iters: int
) -> float:
    """The rate at optimizer step ``step`` (counted from 0), from plain numbers.

    Linear warm-up: step 0 already gets ``max_lr / warmup_iters`` (a rate of 0 would waste a
    step), and step ``warmup_iters - 1`` gets ``max_lr``. Then a half cosine from ``max_lr``
    down to ``min_lr``, reached at step ``decay_iters`` and kept after it.
    """
    if step < 0 or warmup_iters < 0:
        raise ValueError(f"step and warmup_iters must not be negative, got {step}, {warmup_iters}")
    if step < warmup_iters:
        return max_lr * (step + 1) / warmup_iters
    if step >= decay_iters:
        return min_lr
    progress = (step - warmup_iters) / max(1, decay_iters - warmup_iters)
    cosine = 0.5 * (1 + math.cos(math.pi * progress))  # 1 → 0
    return min_lr + cosine * (max_lr - min_lr)


def _decay_end(settings: dict) -> int:
    """The step where the cosine reaches ``min_lr``."""
    return settings["lr_decay_iters"] or settings["max_iters"]


def schedule_changes(saved: dict, config: TrainConfig) -> list[str]:
    """What makes ``config``'s learning rates differ from those of the ``saved`` settings.

    ``max_iters`` and ``lr_decay_iters`` count only through the step where the cosine ends
    (``lr_decay_iters``, or ``max_iters`` when it is unset): with that step kept, a run can be
    made longer without touching its schedule.
    """
    ours = asdict(config)
    saved = {"schedule": "cosine", **saved}  # checkpoints from before the noam option
    changed = [
        f"{key} {saved[key]} -> {ours[key]}"
        for key in ("schedule", "learning_rate", "min_lr", "warmup_iters")
        if saved[key] != ours[key]
    ]
    if _decay_end(saved) != _decay_end(ours):
        keys = [
            f"{key} {saved[key]} -> {ours[key]}"
            for key in ("lr_decay_iters", "max_iters")
            if saved[key] != ours[key]
        ]
        changed.append(
            f"{' and '.join(keys)}: the cosine would end at step {_decay_end(ours)}, "
            f"not {_decay_end(saved)}"
        )
    return changed


def _check_schedule(saved: dict, config: TrainConfig, step: int) -> None:
    changed = schedule_changes(saved, config)
    if not changed or config.new_schedule:
        return
    saved = {"schedule": "cosine", **saved}
    before = learning_rate_at(step, replace(config, **{k: saved[k] for k in SCHEDULE_KEYS}))
    put_back = [
        f"{key}={saved[key]}"
        for key in ("schedule", "learning_rate", "min_lr", "warmup_iters")
        if saved[key] != getattr(config, key)
    ]
    if _decay_end(saved) != _decay_end(asdict(config)):
        put_back.append(f"lr_decay_iters={_decay_end(saved)} (after it the rate stays at min_lr)")
    raise CheckpointError(
        f"resume refused: the learning-rate schedule differs from the checkpoint's "
        f"({'; '.join(changed)}), so at step {step} the rate would jump from {before:.1e} to "
        f"{learning_rate_at(step, config):.1e}. To train on with the saved schedule, set "
        f"{', '.join(put_back)}; to use the new schedule anyway, pass new_schedule=True "
        "(mini-llm train --new-schedule)"
    )


def use_tf32_products(device: torch.device) -> None:
    """On a CUDA GPU, let float32 matrix products run as TF32 on the tensor cores (10-bit
    mantissa, float32 range): what trains wherever bf16 autocast is off. Elsewhere nothing."""
    if device.type == "cuda":
        torch.set_float32_matmul_precision("high")


def autocast_dtype(device: torch.device, dtype: str) -> torch.dtype | None:
    """bfloat16 where ``dtype`` asks for it, or ``"auto"`` finds a GPU with native bf16; else
    None (float32). Asking for bf16 where it is not supported is an error, not a slow emulation.
    """
    supported = device.type == "cuda" and torch.cuda.is_bf16_supported(including_emulation=False)
    if dtype == "bf16" and not supported:
        where = "this GPU" if device.type == "cuda" else f"device {device.type!r}"
        raise ValueError(
            f"dtype='bf16' needs a CUDA GPU with bfloat16 support, not {where}; "
            "use dtype='auto' or 'fp32'"
        )
    return torch.bfloat16 if supported and dtype in ("auto", "bf16") else None


def make_optimizer(
    model: nn.Module, config: TrainConfig, device: torch.device
) -> torch.optim.AdamW:
    """AdamW with weight decay on weight matrices only.

    The fused kernel (one pass over all parameters) is used on CUDA and on the CPU, where it
    measured about 4x faster than the default for this model size.
    """
    embeddings = {
        id(p)
        for module in model.modules()
        if isinstance(module, nn.Embedding)
        for p in module.parameters()
    }
    decay, no_decay = [], []
    for p in model.parameters():  # a tied parameter is listed once
        if p.requires_grad:
            (decay if p.dim() >= 2 and id(p) not in embeddings else no_decay).append(p)
    groups = [
        {"params": decay, "weight_decay": config.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(
        groups,
        lr=config.learning_rate,
        betas=(config.beta1, config.beta2),
        fused=device.type in ("cuda", "cpu"),
    )


def plot_losses(result: TrainResult, path: str | Path, title: str = "loss") -> None:
    """Save train and validation loss curves as a PNG (no display needed)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4))
    axes = figure.add_subplot()
    if result.train_losses:
        axes.plot(*zip(*result.train_losses), label="train", alpha=0.6)
    if result.val_losses:
        axes.plot(*zip(*result.val_losses), "o-", label="validation")
    axes.set(xlabel="step", ylabel="cross-entropy loss", title=title)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)


class _Distributed:
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


def _state_of(batches) -> dict | None:
    return batches.state_dict() if hasattr(batches, "state_dict") else None


def train(
    model: nn.Module,
    train_batches: Batches,
    config: TrainConfig | None = None,
    val_batches: Batches | None = None,
    checkpoint_extra: dict | None = None,
) -> TrainResult:
    """Train ``model`` in place on batches from ``train_batches``; return the loss history.

    ``checkpoint_extra`` is stored in every checkpoint as is (e.g. the model config and the
    tokenizer, so ``mini-llm sample`` can rebuild the model from the checkpoint alone).
    """
    config = config or TrainConfig()
    threads_before = torch.get_num_threads()
    if config.threads:
        torch.set_num_threads(config.threads)
    world = _Distributed(config.device)
    try:
        return _train(model, train_batches, config, val_batches, checkpoint_extra, world)
    finally:
        world.close()
        torch.set_num_threads(threads_before)


def _train(model, train_batches, config, val_batches, checkpoint_extra, world) -> TrainResult:
    device = world.device
    out_dir = Path(config.out_dir) if config.out_dir else None
    writes_files = out_dir is not None and world.is_main
    checkpoint_path = out_dir / "ckpt.pt" if out_dir else None
    checkpoint_interval = config.checkpoint_interval or config.eval_interval or config.max_iters

    torch.manual_seed(config.seed + world.rank)
    use_tf32_products(device)
    model.to(device)
    optimizer = make_optimizer(model, config, device)
    result = TrainResult()
    if config.resume:
        if checkpoint_path is None:
            raise ValueError("resume=True needs out_dir, the folder that holds ckpt.pt")
        _resume(
            load_checkpoint(checkpoint_path, map_location=device),
            config,
            model,
            optimizer,
            result,
            world,
            train_batches,
            val_batches,
        )
    if result.step >= config.max_iters:
        raise ValueError(f"the run is already at step {result.step}; raise max_iters to train more")

    low_precision = autocast_dtype(device, config.dtype)
    autocast = (
        (lambda: torch.autocast(device.type, dtype=low_precision))
        if low_precision
        else contextlib.nullcontext
    )
    compute_model = torch.compile(model) if config.compile else model
    if world.enabled:
        compute_model = nn.parallel.DistributedDataParallel(
            compute_model, device_ids=[device.index] if device.type == "cuda" else None
        )

    def evaluate() -> float:
        compute_model.eval()
        with torch.no_grad(), autocast():
            losses = torch.stack(
                [
                    compute_model(*(t.to(device) for t in val_batches()))[1].float()
                    for _ in range(config.eval_iters)
                ]
            )
        compute_model.train()
        return world.mean(losses.mean()).item()

    def save():
        ranks = world.gather(
            {
                "rng": rng_states(),
                "train_batches": _state_of(train_batches),
                "val_batches": _state_of(val_batches),
            }
        )
        if writes_files:
            save_checkpoint(
                {
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "step": result.step,
                    "train_config": asdict(config),
                    "ranks": ranks,
                    "history": {"train": result.train_losses, "val": result.val_losses},
                    **(checkpoint_extra or {}),
                },
                checkpoint_path,
            )
            plot_losses(result, out_dir / "loss.png")

    def log(record: dict):
        if writes_files:
            with open(out_dir / "metrics.jsonl", "a", encoding="utf-8") as file:
                file.write(json.dumps(record) + "\n")

    if writes_files:
        out_dir.mkdir(parents=True, exist_ok=True)
    if val_batches is not None and result.step == 0:
        result.val_losses.append((0, evaluate()))
        log({"step": 0, "val_loss": result.val_losses[-1][1]})

    bar = tqdm(
        total=config.max_iters,
        initial=result.step,
        desc="train",
        dynamic_ncols=True,
        disable=not (config.progress and world.is_main),
    )
    split = cpu_parallel.decide(
        model,
        device,
        compiled=config.compile,
        distributed=world.enabled,
        low_precision=low_precision,
        enabled=config.split_across_cores,
    )
    result.core_split = str(split)
    if device.type == "cpu" and config.progress and world.is_main:
        bar.write(result.core_split)
    pending: list[torch.Tensor] = []  # losses not yet copied to the CPU (a copy waits for the GPU)
    tokens_since, time_since = 0, time.perf_counter()
    compute_model.train()
    with cpu_parallel.workers_for(split) as cores:
        while result.step < config.max_iters:
            lr = learning_rate_at(result.step, config)
            for group in optimizer.param_groups:
                group["lr"] = lr
            step_loss = torch.zeros((), device=device)
            for micro in range(config.grad_accum_steps):
                x, y = (t.to(device, non_blocking=True) for t in train_batches())
                last = micro == config.grad_accum_steps - 1
                # Under DDP, gradients are averaged across ranks only after the last micro-batch.
                sync = (
                    contextlib.nullcontext()
                    if last or not world.enabled
                    else compute_model.no_sync()
                )
                if cores:
                    loss = cores.forward_backward(model, x, y, scale=1 / config.grad_accum_steps)
                else:
                    with sync:
                        with autocast():
                            _, loss = compute_model(x, y)
                        (loss / config.grad_accum_steps).backward()
                step_loss += loss.detach().float() / config.grad_accum_steps
                tokens_since += y.numel() * world.world_size
            if config.grad_clip:
                # foreach: one pass over all gradients (the CPU default is a loop over tensors;
                # measured 0.35 ms instead of 0.48 ms per step for shakespeare-char-cpu)
                nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip, foreach=True)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            result.step += 1
            pending.append(step_loss)
            bar.update()

            finished = result.step == config.max_iters
            evaluate_now = val_batches is not None and (
                finished or (config.eval_interval and result.step % config.eval_interval == 0)
            )
            save_now = checkpoint_path is not None and (
                finished or result.step % checkpoint_interval == 0
            )
            if finished or evaluate_now or save_now or result.step % config.log_interval == 0:
                losses = world.mean(torch.stack(pending)).tolist()
                first = result.step - len(losses) + 1
                pending.clear()
                bad = [(first + i, v) for i, v in enumerate(losses) if not math.isfinite(v)]
                if bad:
                    bar.close()
                    kept = (
                        f"the last good checkpoint is kept at {checkpoint_path}"
                        if checkpoint_path and checkpoint_path.exists()
                        else "no checkpoint was written"
                    )
                    raise TrainingDivergedError(
                        f"the loss became {bad[0][1]} at step {bad[0][0]}; {kept}. Lower the learning "
                        "rate, lengthen the warm-up or check the data"
                    )
                result.train_losses.extend((first + i, v) for i, v in enumerate(losses))
                elapsed = time.perf_counter() - time_since
                result.tokens_per_s = tokens_since / elapsed
                tokens_since, time_since = 0, time.perf_counter()
                bar.set_postfix(
                    loss=f"{losses[-1]:.4f}", lr=f"{lr:.1e}", tok_s=f"{result.tokens_per_s:,.0f}"
                )
                log(
                    {
                        "step": result.step,
                        "train_loss": losses[-1],
                        "lr": lr,
                        "tokens_per_s": round(result.tokens_per_s, 1),
                    }
                )
            if evaluate_now:
                with cores.all_threads() if cores else contextlib.nullcontext():
                    result.val_losses.append((result.step, evaluate()))
                log({"step": result.step, "val_loss": result.val_losses[-1][1]})
                if config.progress and world.is_main:
                    bar.write(f"step {result.step}: val loss {result.val_losses[-1][1]:.4f}")
            if save_now:
                save()
                result.checkpoint = str(checkpoint_path)
    bar.close()
    return result


def first_difference(saved: dict, ours: dict) -> str:
    """One line on how two state dicts differ, where PyTorch lists every tensor."""
    missing, extra = saved.keys() - ours.keys(), ours.keys() - saved.keys()
    shapes = [
        f"{name} is {list(saved[name].shape)} there, {list(ours[name].shape)} here"
        for name in saved.keys() & ours.keys()
        if saved[name].shape != ours[name].shape
    ]
    differences = (
        sorted(shapes)
        + [f"{name} only there" for name in sorted(missing)]
        + [f"{name} only here" for name in sorted(extra)]
    )
    if not differences:
        return "the optimizer's state does not fit the model"
    more = f", and {len(differences) - 1} more" if len(differences) > 1 else ""
    return differences[0] + more


def _resume(state, config, model, optimizer, result, world, train_batches, val_batches):
    """Put model, optimizer, history and every random generator back as the checkpoint left them.

    Refused (:class:`CheckpointError`) where that cannot continue the same run: another model
    or optimizer, another learning-rate schedule, another number of processes.
    """
    ranks = state["ranks"]
    if len(ranks) != world.world_size:
        raise CheckpointError(
            f"the checkpoint was written by {len(ranks)} process(es) and this run has "
            f"{world.world_size}: each process continues its own stream of batches and random "
            f"numbers, so resume with {len(ranks)} (torchrun --nproc_per_node {len(ranks)}), "
            "or train into a new out_dir"
        )
    _check_schedule(state["train_config"], config, state["step"])
    try:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
    except (RuntimeError, ValueError):
        raise CheckpointError(
            f"the checkpoint was written for a different model or optimizer "
            f"({first_difference(state['model'], model.state_dict())}); resume with the settings "
            "it was trained with, or train into a new out_dir (mini-llm train --out)"
        ) from None
    result.step = state["step"]
    result.train_losses = [tuple(pair) for pair in state["history"]["train"]]
    result.val_losses = [tuple(pair) for pair in state["history"]["val"]]
    mine = ranks[world.rank]
    set_rng_states(mine["rng"])
    for batches, name in ((train_batches, "train_batches"), (val_batches, "val_batches")):
        saved = mine[name]
        if saved is not None and hasattr(batches, "load_state_dict"):
            batches.load_state_dict(saved)
