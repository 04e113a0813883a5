"""The course's one training loop, for every model from the MLP language model to the GPT.

Anything can be trained that has a model, an ``nn.Module`` whose ``forward(x, y)`` returns
``(logits, loss)``, and a batch function, a callable that returns ``(x, y)`` (one that also has
``state_dict`` and ``load_state_dict``, like :class:`mini_llm.engine.data.RandomBatches`, is
checkpointed too)::

    result = train(model, train_batches, TrainConfig(max_iters=2000, learning_rate=1e-3),
                   val_batches=val_batches)
    result.train_losses   # [(step, loss), ...] every step
    result.val_losses     # [(step, loss), ...] every eval_interval steps

One step: forward and backward for each of ``grad_accum_steps`` micro-batches (the gradients
add up), clip the gradient norm, set the step's learning rate (:mod:`mini_llm.engine.schedule`:
linear warm-up, then cosine decay to ``min_lr``) and take an AdamW step, with weight decay on
weight matrices only, not on biases, LayerNorm gains or embeddings. On a CPU with several
threads, a GPT's forward and backward run as one share of the batch's rows per core
(:mod:`mini_llm.engine.cpu_parallel`, ``split_across_cores``): the same gradient, sooner.

With ``out_dir`` set, the loop also writes ``ckpt.pt`` (atomically; ``resume=True`` continues
exactly where the run stopped: :mod:`mini_llm.engine.resume`), ``metrics.jsonl`` and
``loss.png``. Under ``torchrun --nproc_per_node N`` it trains with DistributedDataParallel;
only rank 0 logs and writes files.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn
from tqdm.auto import tqdm

from mini_llm.engine import cpu_linear, cpu_parallel, resume, schedule
from mini_llm.engine.distributed import World

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
        for name in ("max_iters", "grad_accum_steps", "eval_iters", "log_interval"):
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
    embeddings = [module for module in model.modules() if isinstance(module, nn.Embedding)]
    embedded = {id(p) for module in embeddings for p in module.parameters()}
    decay, no_decay = [], []
    for p in model.parameters():  # a tied parameter is listed once
        if p.requires_grad:
            (decay if p.dim() >= 2 and id(p) not in embedded else no_decay).append(p)
    groups = [
        {"params": decay, "weight_decay": config.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    betas, fused = (config.beta1, config.beta2), device.type in ("cuda", "cpu")
    return torch.optim.AdamW(groups, lr=config.learning_rate, betas=betas, fused=fused)


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
    world = World(config.device)
    try:
        return _Run(model, train_batches, config, val_batches, checkpoint_extra, world).run()
    finally:
        world.close()
        torch.set_num_threads(threads_before)


class _Run:
    """One call of :func:`train`: what its steps, evaluations, logs and checkpoints share."""

    def __init__(self, model, train_batches, config, val_batches, checkpoint_extra, world):
        self.model, self.config, self.world, self.device = model, config, world, world.device
        self.train_batches, self.val_batches = train_batches, val_batches
        self.checkpoint_extra = checkpoint_extra or {}
        self.out_dir = Path(config.out_dir) if config.out_dir else None
        self.checkpoint_path = self.out_dir / "ckpt.pt" if self.out_dir else None
        self.writes_files = self.out_dir is not None and world.is_main
        self.shows_progress = config.progress and world.is_main
        torch.manual_seed(config.seed + world.rank)
        use_tf32_products(self.device)
        model.to(self.device)
        if self.device.type == "cpu":
            cpu_linear.accelerate(model)
        self.optimizer = make_optimizer(model, config, self.device)
        self.result = TrainResult()
        if config.resume:
            resume.restore(self)
        self.low_precision = autocast_dtype(self.device, config.dtype)
        self.compute_model = world.wrap(torch.compile(model) if config.compile else model)
        self.pending: list[torch.Tensor] = []  # losses not copied to the CPU yet (that waits)

    def autocast(self):
        low = self.low_precision
        return torch.autocast(self.device.type, dtype=low) if low else contextlib.nullcontext()

    def run(self) -> TrainResult:
        """Step until ``max_iters``; report, evaluate and save at their intervals."""
        config, result = self.config, self.result
        save_every = config.checkpoint_interval or config.eval_interval or config.max_iters
        if self.writes_files:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            if result.step:  # resumed: steps logged after the checkpoint are trained again
                forget_metrics_after(self.out_dir / "metrics.jsonl", result.step)
        self.bar = tqdm(
            total=config.max_iters,
            initial=result.step,
            desc="train",
            dynamic_ncols=True,
            disable=not self.shows_progress,
        )
        if self.val_batches is not None and result.step == 0:
            if self.shows_progress:
                self.bar.write(f"step 0: validation loss over {config.eval_iters} batches ...")
            loss = self.validate()
            if self.shows_progress:
                self.bar.write(f"step 0: val loss {loss:.4f}")
        if config.compile and self.shows_progress:
            self.bar.write("compile=True: the first steps compile the model, which takes a while")
        split = cpu_parallel.decide(
            self.model,
            self.device,
            compiled=config.compile,
            distributed=self.world.enabled,
            low_precision=self.low_precision,
            enabled=config.split_across_cores,
        )
        result.core_split = str(split)
        if self.device.type == "cpu" and self.shows_progress:
            self.bar.write(result.core_split)
        self.tokens_since, self.time_since = 0, time.perf_counter()
        self.compute_model.train()
        with cpu_parallel.workers_for(split) as cores:
            while result.step < config.max_iters:
                lr = self.step(cores)
                finished = result.step == config.max_iters
                evaluate_now = self.val_batches is not None and (
                    finished or (config.eval_interval and result.step % config.eval_interval == 0)
                )
                save_now = self.out_dir is not None and (finished or result.step % save_every == 0)
                if finished or evaluate_now or save_now or result.step % config.log_interval == 0:
                    self.report(lr)
                if evaluate_now:
                    with cores.all_threads() if cores else contextlib.nullcontext():
                        loss = self.validate()
                    if self.shows_progress:
                        self.bar.write(f"step {result.step}: val loss {loss:.4f}")
                if save_now:
                    resume.save(self)
                    if self.writes_files:
                        plot_losses(result, self.out_dir / "loss.png")
                    result.checkpoint = str(self.checkpoint_path)
        self.bar.close()
        return result

    def step(self, cores: cpu_parallel.CoreWorkers | None) -> float:
        """One optimizer step of ``grad_accum_steps`` micro-batches; returns its learning rate."""
        config, accum = self.config, self.config.grad_accum_steps
        lr = schedule.learning_rate_at(self.result.step, config)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        step_loss = torch.zeros((), device=self.device)
        for micro in range(accum):
            x, y = (t.to(self.device, non_blocking=True) for t in self.train_batches())
            if cores:
                loss = cores.forward_backward(self.model, x, y, scale=1 / accum)
            else:
                with self.world.micro_batch(self.compute_model, last=micro == accum - 1):
                    with self.autocast():
                        _, loss = self.compute_model(x, y)
                    (loss / accum).backward()
            step_loss += loss.detach().float() / accum
            self.tokens_since += y.numel() * self.world.world_size
        if config.grad_clip:
            # foreach: one pass over all gradients (the CPU default is a loop over tensors;
            # measured 0.35 ms instead of 0.48 ms per step for shakespeare-char-cpu)
            nn.utils.clip_grad_norm_(self.model.parameters(), config.grad_clip, foreach=True)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.result.step += 1
        self.pending.append(step_loss)
        self.bar.update()
        return lr

    def report(self, lr: float) -> None:
        """Bring the losses since the last report to the CPU, stop on NaN, log the progress."""
        result = self.result
        losses = self.world.mean(torch.stack(self.pending)).tolist()
        first = result.step - len(losses) + 1
        self.pending.clear()
        bad = [(first + i, v) for i, v in enumerate(losses) if not math.isfinite(v)]
        if bad:
            self.bar.close()
            kept = "no checkpoint was written"
            if self.checkpoint_path and self.checkpoint_path.exists():
                kept = f"the last good checkpoint is kept at {self.checkpoint_path}"
            raise TrainingDivergedError(
                f"the loss became {bad[0][1]} at step {bad[0][0]}; {kept}. Lower the learning "
                "rate, lengthen the warm-up or check the data"
            )
        result.train_losses.extend((first + i, v) for i, v in enumerate(losses))
        now = time.perf_counter()
        result.tokens_per_s = speed = self.tokens_since / (now - self.time_since)
        self.tokens_since, self.time_since = 0, now
        loss, per_s = losses[-1], round(speed, 1)
        self.bar.set_postfix(loss=f"{loss:.4f}", lr=f"{lr:.1e}", tok_s=f"{speed:,.0f}")
        self.log({"step": result.step, "train_loss": loss, "lr": lr, "tokens_per_s": per_s})

    def validate(self) -> float:
        """The validation loss (``eval_iters`` batches, mean over ranks), kept and logged."""
        model, step = self.compute_model, self.result.step
        model.eval()
        with torch.no_grad(), self.autocast():
            losses = [
                model(*(t.to(self.device) for t in self.val_batches()))[1].float()
                for _ in range(self.config.eval_iters)
            ]
        model.train()
        loss = self.world.mean(torch.stack(losses).mean()).item()
        self.result.val_losses.append((step, loss))
        self.log({"step": step, "val_loss": loss})
        return loss

    def log(self, record: dict) -> None:
        if self.writes_files:
            with open(self.out_dir / "metrics.jsonl", "a", encoding="utf-8") as file:
                file.write(json.dumps(record) + "\n")


def forget_metrics_after(path: Path, step: int) -> None:
    """Drop the records of ``metrics.jsonl`` after ``step``: a run resumed from its checkpoint
    at ``step`` logs those steps again, and each step should appear once."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return
    kept = [line for line in lines if _logged_step(line) <= step]
    if len(kept) < len(lines):
        staging = path.with_suffix(".jsonl.tmp")
        staging.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
        staging.replace(path)


def _logged_step(line: str) -> float:
    try:
        return float(json.loads(line).get("step", 0))
    except (ValueError, AttributeError, TypeError):
        return 0  # a line that is not a record is kept as it is
