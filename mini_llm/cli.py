"""The ``mini-llm`` command: prepare data, train, sample and benchmark from the shell.

Every subcommand is one row of ``COMMANDS``: a help line, a function that adds its arguments and
a function that runs it. Adding a subcommand means writing those two functions and one row.
Errors the user can fix (bad input, missing files) print one clear line and exit with status 2.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import NamedTuple

import torch

from mini_llm import configs, cpu_linear
from mini_llm.checkpoint import CheckpointError, load_checkpoint
from mini_llm.corpus import CorpusError, load_text
from mini_llm.data import RandomBatches, load_meta, load_split, prepare
from mini_llm.device import pick_device
from mini_llm.gpt import GPT, GPTConfig
from mini_llm.grading import cli as grading_cli
from mini_llm.tokenizer import tokenizer_from_dict
from mini_llm.train import TrainingDivergedError, make_optimizer, train

USER_ERRORS = (ValueError, FileNotFoundError, CheckpointError, CorpusError, TrainingDivergedError)


def default_data_dir(corpus: str) -> Path:
    return Path("data/prepared") / f"{corpus}-char"


# ---------------------------------------------------------------------------------- prepare
def add_prepare_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", default="shakespeare", help="corpus name")
    parser.add_argument("--out", type=Path,
                        help="output folder (default: data/prepared/<corpus>-char)")
    parser.add_argument("--val-fraction", type=float, default=0.1, help="share kept for validation")


def run_prepare(args) -> None:
    out = args.out or default_data_dir(args.corpus)
    meta = prepare(load_text(args.corpus), out, val_fraction=args.val_fraction)
    print(f"wrote {out}: {meta['train_tokens']:,} train and {meta['val_tokens']:,} val tokens, "
          f"vocabulary of {meta['vocab_size']} characters")


# ------------------------------------------------------------------------------------ train
def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default="shakespeare-char-cpu", choices=sorted(configs.CONFIGS))
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help="override config keys, e.g. n_layer=2 max_iters=100")
    parser.add_argument("--data", type=Path, help="prepared data folder (default: from the corpus)")
    parser.add_argument("--out", type=Path, help="run folder for checkpoint, metrics, plot "
                        "(default: runs/<config>)")
    parser.add_argument("--device", default="auto",
                        help="auto (CUDA, then MPS, then CPU), cpu, cuda or mps")
    parser.add_argument("--resume", action="store_true", help="continue from <out>/ckpt.pt")
    parser.add_argument("--new-schedule", action="store_true",
                        help="with --resume: accept a learning-rate schedule (learning_rate, "
                        "min_lr, warmup_iters, where the cosine ends) unlike the checkpoint's")


def run_train(args) -> None:
    run = configs.resolve(args.config, args.overrides)
    data_dir = args.data or default_data_dir(run.data["corpus"])
    if not (data_dir / "meta.json").exists() and args.data is None:
        if "RANK" in os.environ:  # several processes must not write the same files at once
            raise ValueError(f"no prepared data in {data_dir}; under torchrun run "
                             f"`mini-llm prepare --corpus {run.data['corpus']}` first")
        print(f"preparing {run.data['corpus']} into {data_dir} (once)")
        prepare(load_text(run.data["corpus"]), data_dir, run.data["val_fraction"])
    meta = load_meta(data_dir)
    out = args.out or Path("runs") / run.name
    train_config = replace(run.train, out_dir=str(out), device=args.device, resume=args.resume,
                           new_schedule=args.new_schedule)
    model_config = GPTConfig(vocab_size=meta["vocab_size"], **run.model)
    torch.manual_seed(train_config.seed)
    model = GPT(model_config)
    rank = int(os.environ.get("RANK", "0"))  # under torchrun each process draws its own batches
    seed = train_config.seed + 1000 * rank
    batch = {"block_size": model_config.block_size, "batch_size": run.data["batch_size"]}
    train_batches = RandomBatches(load_split(data_dir, "train"), seed=seed, **batch)
    val_batches = RandomBatches(load_split(data_dir, "val"), seed=seed + 1, **batch)
    if rank == 0:
        print(f"{run.name}: {model.num_parameters():,} parameters, training on "
              f"{pick_device(args.device) if 'RANK' not in os.environ else 'torchrun'}")
    start = time.perf_counter()
    result = train(model, train_batches, train_config, val_batches,
                   checkpoint_extra={"model_config": asdict(model_config),
                                     "tokenizer": meta["tokenizer"], "config_name": run.name})
    if rank == 0:
        print(f"done: step {result.step}, val loss {result.val_losses[-1][1]:.4f}, "
              f"{time.perf_counter() - start:.1f} s, {result.tokens_per_s:,.0f} tokens/s; "
              f"checkpoint {result.checkpoint}")


# ----------------------------------------------------------------------------------- sample
def add_sample_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", type=Path,
                        default=Path("runs/shakespeare-char-cpu/ckpt.pt"))
    parser.add_argument("--prompt", default="\n", help="text to continue")
    parser.add_argument("--max-new-tokens", type=int, default=500)
    parser.add_argument("--temperature", type=float, default=0.8, help="0 = greedy")
    parser.add_argument("--top-k", type=int, default=None)
    parser.add_argument("--top-p", type=float, default=None)
    parser.add_argument("--num-samples", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1337)
    parser.add_argument("--no-cache", action="store_true",
                        help="recompute the whole window for each token")
    parser.add_argument("--device", default="auto")


def load_model(checkpoint: Path, device: torch.device):
    """The GPT and tokenizer stored in a checkpoint written by ``mini-llm train``."""
    state = load_checkpoint(checkpoint, map_location=device)
    if "model_config" not in state or "tokenizer" not in state:
        raise CheckpointError(f"{checkpoint} holds no GPT (no model_config/tokenizer); "
                              "use a checkpoint written by mini-llm train")
    model = GPT(GPTConfig(**state["model_config"]))
    model.load_state_dict(state["model"])
    return model.to(device).eval(), tokenizer_from_dict(state["tokenizer"])


def run_sample(args) -> None:
    device = pick_device(args.device)
    model, tokenizer = load_model(args.checkpoint, device)
    if not args.prompt:
        raise ValueError("the prompt is empty; give at least one character, e.g. --prompt $'\\n'")
    prompt = torch.tensor([tokenizer.encode(args.prompt)], device=device)
    generator = torch.Generator(device=device).manual_seed(args.seed)
    for i in range(args.num_samples):
        ids = model.generate(prompt, args.max_new_tokens, temperature=args.temperature,
                             top_k=args.top_k, top_p=args.top_p, generator=generator,
                             use_cache=not args.no_cache)
        if i:
            print("-" * 40)
        print(tokenizer.decode(ids[0].tolist()))


# ------------------------------------------------------------------------------------ bench
def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default="shakespeare-char-cpu", choices=sorted(configs.CONFIGS))
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    parser.add_argument("--steps", type=int, default=30, help="timed training steps")
    parser.add_argument("--new-tokens", type=int, default=256, help="tokens to generate")
    parser.add_argument("--device", default="auto")


def run_bench(args) -> None:
    from mini_llm.bench import generation_tokens_per_s, train_step_times

    run = configs.resolve(args.config, args.overrides)
    device = pick_device(args.device)
    torch.manual_seed(0)
    model_config = GPTConfig(vocab_size=96, **run.model)
    model = GPT(model_config).to(device)
    if device.type == "cpu":
        print(cpu_linear.decision())
    B, T = run.data["batch_size"], model_config.block_size
    batches = [(torch.randint(96, (B, T), device=device),) * 2 for _ in range(args.steps + 5)]
    ms = train_step_times(model, batches, make_optimizer(model, run.train, device))
    step_ms = statistics.median(ms)
    print(f"train  {run.name} on {device}: {step_ms:.1f} ms/step (median of {len(ms)}), "
          f"{B * T / step_ms * 1000:,.0f} tokens/s")
    prompt = torch.zeros((1, 1), dtype=torch.long, device=device)
    new = min(args.new_tokens, T - 1)
    with_cache = generation_tokens_per_s(model, prompt, new, use_cache=True)
    without = generation_tokens_per_s(model, prompt, new, use_cache=False)
    print(f"sample {new} tokens: {with_cache:,.0f} tokens/s with KV cache, {without:,.0f} without "
          f"({with_cache / without:.1f}x)")


class Command(NamedTuple):
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], None]


COMMANDS: dict[str, Command] = {
    "prepare": Command("encode a corpus into train/val token files",
                       add_prepare_arguments, run_prepare),
    "train": Command("train a GPT from a named config", add_train_arguments, run_train),
    "sample": Command("generate text from a checkpoint", add_sample_arguments, run_sample),
    "bench": Command("time training steps and generation", add_bench_arguments, run_bench),
    "grade": Command(grading_cli.HELP, grading_cli.add_arguments, grading_cli.run),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mini-llm", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="command")
    for name, command in COMMANDS.items():
        subparser = subparsers.add_parser(name, help=command.help, description=command.help)
        command.add_arguments(subparser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        COMMANDS[args.command].run(args)
    except USER_ERRORS as err:
        print(f"mini-llm {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"mini-llm {args.command}: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
