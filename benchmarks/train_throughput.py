"""Training speed of the course GPT against Hugging Face's GPT2LMHeadModel of the same shape.

All models get the same shape (the ``shakespeare-char-cpu`` config unless overridden), the same
batches, the same AdamW settings (the trainer's ``make_optimizer``) and the same step (forward,
backward, gradient clipping, optimizer step). The peer runs twice: as GPT-2 ships
(``activation_function="gelu_new"``, written as a chain of elementwise ops) and with
``"gelu"``, the same function and kernel as the course model's default, so that what is left
is the course model's own engineering. Where this process decided to run the linear layers'
products in oneDNN (``mini_llm/engine/cpu_linear.py``, ``cpu_matmul.py``), mini_llm also runs a second
time with plain ``nn.Linear`` products: what it does on a CPU where oneDNN does not help.
Where the trainer would split each batch's rows across the CPU's cores
(``mini_llm/engine/cpu_parallel.py``), mini_llm runs so, and once more with its batches whole
(``--whole`` turns the split off). The peers run their batches whole: the trainer splits
only models whose loss it knows to be a mean over counted targets (``MEAN_OVER_TARGETS``). They take turns in rounds,
so load from other processes hits all alike; the script prints the CPU, its capability, the
linear-layer and split decisions, the load average before and after, and the median ms/step
of each with the ratios, and the same for each one's fastest step (on a busy machine other
processes only ever add time, so the fastest steps are the least disturbed).
``--device cuda`` runs the same contest on a GPU, as the trainer runs there (bf16 autocast,
TF32 products), with ``--config shakespeare-char-gpu`` for the GPU's shape.

    .venv/bin/python benchmarks/train_throughput.py                 # eager
    .venv/bin/python benchmarks/train_throughput.py --compile       # both torch.compile'd
    .venv/bin/python benchmarks/train_throughput.py --also-compiled # + mini_llm compiled, peers eager
    .venv/bin/python benchmarks/train_throughput.py --profile       # and where mini_llm's step goes
    python3 benchmarks/train_throughput.py --device cuda --config shakespeare-char-gpu
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics

import torch
import torch.nn.functional as F
from transformers import GPT2Config, GPT2LMHeadModel

from mini_llm.engine import configs, cpu_linear, cpu_parallel
from mini_llm.engine.bench import train_step_times
from mini_llm.engine.train import autocast_dtype, make_optimizer, use_tf32_products
from mini_llm.gpt import GPT, GPTConfig


class HFWithLoss(torch.nn.Module):
    """GPT2LMHeadModel behind the course interface: forward(x, y) -> (logits, loss)."""

    def __init__(self, config: GPTConfig, activation_function: str):
        super().__init__()
        self.hf = GPT2LMHeadModel(
            GPT2Config(
                vocab_size=config.vocab_size,
                n_positions=config.block_size,
                n_embd=config.n_embd,
                n_layer=config.n_layer,
                n_head=config.n_head,
                resid_pdrop=config.dropout,
                embd_pdrop=config.dropout,
                attn_pdrop=config.dropout,
                activation_function=activation_function,
                bos_token_id=0,
                eos_token_id=0,
                attn_implementation="sdpa",
            )
        )

    def forward(self, x, y):
        logits = self.hf(input_ids=x).logits
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), y.reshape(-1))


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            names = [
                line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")
            ]
    except OSError:
        names = []
    return names[0] if names else platform.processor() or platform.machine()


def load_average() -> str:
    return (
        " ".join(f"{value:.1f}" for value in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    )


def print_profile(model, batches, optimizer, grad_clip: float, rows: int = 15):
    """Where mini_llm's step goes (its batches whole, on all threads): the operators that take
    the most time of their own."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        train_step_times(model, batches, optimizer, warmup=0, grad_clip=grad_clip)
    print(f"mini_llm, {len(batches)} steps profiled:")
    print(profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="shakespeare-char-cpu")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--compile", action="store_true", help="torch.compile both models")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument(
        "--also-compiled",
        action="store_true",
        help="in an eager run, also time mini_llm torch.compile'd (against the peers as run)",
    )
    parser.add_argument("--profile", action="store_true", help="then profile mini_llm's steps")
    parser.add_argument(
        "--whole", action="store_true", help="run mini_llm's batches whole, not split across cores"
    )
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    args = parser.parse_args()
    device = torch.device(args.device)
    use_tf32_products(device)  # as train() runs there, with bf16 autocast
    low_precision = autocast_dtype(device, "auto")
    if args.threads:
        torch.set_num_threads(args.threads)

    run = configs.resolve(args.config, args.overrides)
    config = GPTConfig(vocab_size=82, **run.model)  # 82 = characters of the Shakespeare corpus
    B, T = run.data["batch_size"], config.block_size
    loads = [load_average()]
    torch.manual_seed(0)
    ours = GPT(config)
    decision = None
    if device.type == "cpu":  # the engine's linear layers, as train() gives them on a CPU
        decision = cpu_linear.decision()
        cpu_linear.accelerate(ours)
    models = {
        "mini_llm": ours,
        "transformers, gelu_new (GPT-2 default)": HFWithLoss(config, "gelu_new"),
        "transformers, gelu (same as mini_llm)": HFWithLoss(config, "gelu"),
    }
    split = cpu_parallel.decide(
        ours, device, compiled=args.compile, low_precision=low_precision, enabled=not args.whole
    )
    paths = {name: contextlib.nullcontext for name in models}  # its products' library
    split_rows = {"mini_llm"}  # the contenders whose rows the cores share, as the trainer would
    if decision and decision.use_onednn:
        torch.manual_seed(0)
        models["mini_llm, plain nn.Linear products"] = GPT(config)  # not accelerated
        paths["mini_llm, plain nn.Linear products"] = contextlib.nullcontext
        split_rows.add("mini_llm, plain nn.Linear products")
    if split.workers:
        torch.manual_seed(0)
        models["mini_llm, batch whole (not split)"] = cpu_linear.accelerate(GPT(config))
        paths["mini_llm, batch whole (not split)"] = contextlib.nullcontext
    if args.also_compiled and not args.compile:
        torch.manual_seed(0)
        models["mini_llm, torch.compile"] = cpu_linear.accelerate(GPT(config))
        paths["mini_llm, torch.compile"] = contextlib.nullcontext
    for model in models.values():
        model.to(device)
    optimizers = {name: make_optimizer(model, run.train, device) for name, model in models.items()}
    runners = {
        name: torch.compile(m) if args.compile or name.endswith("torch.compile") else m
        for name, m in models.items()
    }
    batches = [
        (torch.randint(config.vocab_size, (B, T), device=device),) * 2 for _ in range(args.steps)
    ]
    batches = [(x, torch.roll(x, -1, dims=1)) for x, _ in batches]

    times = {name: [] for name in models}
    for round_ in range(args.rounds):
        for name, model in runners.items():
            warmup = 5 if round_ == 0 else 2
            whole = cpu_parallel.Decision(0, "runs its batches whole")
            with (
                paths[name](),
                cpu_parallel.workers_for(split if name in split_rows else whole) as cores,
            ):
                times[name] += train_step_times(
                    model,
                    batches[:warmup] + batches,
                    optimizers[name],
                    warmup=warmup,
                    grad_clip=run.train.grad_clip,
                    autocast_to=low_precision,
                    cores=cores,
                )
    loads.append(load_average())
    median = {name: statistics.median(t) for name, t in times.items()}
    fastest = {name: min(t) for name, t in times.items()}
    mode = "torch.compile" if args.compile else "eager"
    print(
        f"CPU {cpu_model()}, capability {torch.backends.cpu.get_cpu_capability()}; "
        f"load average (1, 5, 15 min) {loads[0]} before, {loads[1]} after"
    )
    if device.type == "cuda":
        print(f"GPU {torch.cuda.get_device_name(device)}, {low_precision} autocast, TF32 products")
    else:
        print(decision)
        print(split)
    print(
        f"shape {args.config} {' '.join(args.overrides)}: batch {B}x{T}, "
        f"{ours.num_parameters():,} parameters, {mode}, {torch.get_num_threads()} threads, "
        f"{len(times['mini_llm'])} steps each"
    )
    print("  median ms/step (tokens/s), and the fastest step: other processes only ever add time")
    for name, value in median.items():
        print(
            f"  {name:40s} {value:7.2f} ms/step  {B * T / value * 1000:8,.0f} tokens/s"
            f"   fastest {fastest[name]:7.2f} ms"
        )
    for ours_name in [name for name in median if name.startswith("mini_llm")]:
        for peer in [name for name in median if name.startswith("transformers")]:
            print(
                f"  {ours_name} is {median[peer] / median[ours_name]:.2f}x as fast as {peer}"
                f" (fastest steps: {fastest[peer] / fastest[ours_name]:.2f}x)"
            )
    if args.profile:
        print_profile(runners["mini_llm"], batches, optimizers["mini_llm"], run.train.grad_clip)


if __name__ == "__main__":
    main()
