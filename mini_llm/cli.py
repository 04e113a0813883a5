"""The ``mini-llm`` command: prepare data, train, sample and benchmark from the shell.

Every subcommand is one row of ``COMMANDS``: a help line, a function that adds its arguments and
a function that runs it. Adding a subcommand means writing those two functions and one row.
Errors the user can fix (bad input, missing files) print one clear line and exit with status 2.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import NamedTuple

import torch

from mini_llm import gpt  # gpt.GPT, looked up when a model is built: --learner swaps it
from mini_llm.bpe_fast import BPETokenizer
from mini_llm.corpus import CORPORA, CorpusError, load_text
from mini_llm.engine import configs, cpu_linear, cpu_parallel, recorded
from mini_llm.engine.checkpoint import CheckpointError, load_checkpoint
from mini_llm.engine.data import (
    SPLITS,
    RandomBatches,
    check_val_fraction,
    load_meta,
    load_split,
    prepare,
    training_text,
)
from mini_llm.engine.device import pick_device
from mini_llm.engine.resume import first_difference
from mini_llm.engine.train import (
    TrainingDivergedError,
    autocast_dtype,
    make_optimizer,
    train,
    use_tf32_products,
)
from mini_llm.gpt import GPTConfig
from mini_llm.grading import cli as grading_cli
from mini_llm.learner import cli as learner_cli
from mini_llm.tokenizer import tokenizer_from_dict

# OSError: a folder that cannot be made or written, a full disk, a missing file.
USER_ERRORS = (ValueError, OSError, CheckpointError, CorpusError, TrainingDivergedError)


def check_out_folder(out: Path) -> None:
    """``--out`` names a folder, made where missing; a file there is a mistake, not a folder."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file, not a folder; give a folder for the output")


def default_data_dir(
    corpus: str, val_fraction: float = 0.1, tokenizer: str = "char", vocab_size: int | None = None
) -> Path:
    """``data/prepared/<corpus>-char`` or ``<corpus>-bpe<vocab_size>``, with ``-val<fraction>``
    for another validation share: the name says what the folder holds."""
    suffix = "" if val_fraction == 0.1 else f"-val{val_fraction:g}"
    kind = "char" if tokenizer == "char" else f"{tokenizer}{vocab_size}"
    return Path("data/prepared") / f"{corpus}-{kind}{suffix}"


def describe_tokenizer(tokenizer: dict) -> str:
    """A tokenizer as saved in meta.json or a checkpoint, in a few words for messages."""
    if tokenizer.get("kind") == "char":
        return f"char ({len(tokenizer['chars'])} characters)"
    if tokenizer.get("kind") == "bpe":
        size = 256 + len(tokenizer["merges"]) + len(tokenizer.get("specials", []))
        return f"byte-level BPE ({size} tokens)"
    return str(tokenizer.get("kind"))


# ---------------------------------------------------------------------------------- threads
def add_threads_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads for PyTorch (default: the CPUs not busy with other "
        "work, from the load average; at least 1)",
    )


def default_threads() -> tuple[int, str]:
    """PyTorch's CPU threads, fewer where other work keeps CPUs busy, and why.

    Idle threads of PyTorch's pool spin while they wait, so a thread that shares its CPU with
    another process slows every step down: on a busy 2-core machine 100 steps of
    shakespeare-char-cpu took several times longer with 2 threads than with 1 (README).
    """
    if "OMP_NUM_THREADS" in os.environ:
        return torch.get_num_threads(), "OMP_NUM_THREADS"
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    free = max(1, min(torch.get_num_threads(), (cpus or 1) - round(load)))
    return free, f"{cpus} CPUs, load average {load:.1f}"


def chosen_threads(args) -> tuple[int, str]:
    """``--threads``, or :func:`default_threads`, and why."""
    if args.threads is None:
        threads, why = default_threads()
        return threads, f"{why}; --threads sets it"
    if args.threads < 1:
        raise ValueError(f"--threads must be at least 1, got {args.threads}")
    return args.threads, "--threads"


# ---------------------------------------------------------------------------------- prepare
def add_prepare_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--corpus",
        default="shakespeare",
        choices=sorted(CORPORA),
        help="corpus to encode: %(choices)s (default: %(default)s)",
    )
    parser.add_argument(
        "--tokenizer",
        default="char",
        choices=("char", "bpe"),
        help="char: one token per character; bpe: byte-level BPE learned from the training "
        "share (default: %(default)s)",
    )
    parser.add_argument(
        "--vocab-size",
        type=int,
        default=None,
        help=f"BPE vocabulary size (default: {DEFAULT_BPE_VOCAB})",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="output folder (default: data/prepared/<corpus>-char or <corpus>-bpe<vocab-size>)",
    )
    parser.add_argument("--val-fraction", type=float, default=0.1, help="share kept for validation")


DEFAULT_BPE_VOCAB = 4096


def run_prepare(args) -> None:
    text = load_text(args.corpus)
    tokenizer = None
    if args.tokenizer == "char":
        if args.vocab_size is not None:
            raise ValueError("--vocab-size applies to --tokenizer bpe only (char: the text's)")
    else:
        args.vocab_size = args.vocab_size or DEFAULT_BPE_VOCAB
        if not 256 < args.vocab_size <= 2**16:
            raise ValueError(f"--vocab-size must be in 257…65536, got {args.vocab_size}")
    out = args.out or default_data_dir(
        args.corpus, args.val_fraction, args.tokenizer, args.vocab_size
    )
    check_out_folder(out)
    if args.tokenizer == "bpe":
        start = time.perf_counter()
        tokenizer = BPETokenizer.train(training_text(text, args.val_fraction), args.vocab_size)
        print(f"learned {len(tokenizer.merges):,} merges in {time.perf_counter() - start:.1f} s")
        if tokenizer.vocab_size < args.vocab_size:
            print(
                f"the training text has no pair left to merge: {tokenizer.vocab_size:,} tokens, "
                f"not the {args.vocab_size:,} asked for"
            )
    meta = prepare(text, out, args.val_fraction, tokenizer, corpus=args.corpus)
    characters = meta["train_characters"] + meta["val_characters"]
    tokens = meta["train_tokens"] + meta["val_tokens"]
    print(
        f"wrote {out}: {meta['train_tokens']:,} train and {meta['val_tokens']:,} val tokens, "
        f"{describe_tokenizer(meta['tokenizer'])}, {characters / tokens:.2f} characters per token"
    )


# ------------------------------------------------------------------------------------ train
DEFAULT_CONFIG = "shakespeare-char-cpu"
RUN_FILES = ("ckpt.pt", "metrics.jsonl", "loss.png")  # what a run writes into --out


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        choices=sorted(configs.CONFIGS),
        help=f"named config (default: {DEFAULT_CONFIG}; with --resume: the run's)",
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="override config keys, e.g. n_layer=2 max_iters=100; with --resume, "
        "on top of the run's own settings",
    )
    parser.add_argument(
        "--data",
        type=Path,
        help="prepared data folder (default: from the corpus; with --resume: the run's)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="run folder for checkpoint, metrics, plot (default: runs/<config>; with --data "
        "another prepared folder: runs/<config>-<folder name>)",
    )
    parser.add_argument(
        "--device", default="auto", help="auto (CUDA, then MPS, then CPU), cpu, cuda or mps"
    )
    add_threads_argument(parser)
    start = parser.add_mutually_exclusive_group()
    start.add_argument(
        "--resume", action="store_true", help="continue the run in --out as it was configured"
    )
    start.add_argument(
        "--overwrite",
        action="store_true",
        help=f"start over in an --out that holds a run, deleting its {', '.join(RUN_FILES)}",
    )
    parser.add_argument(
        "--new-schedule",
        action="store_true",
        help="with --resume: accept a learning-rate schedule (learning_rate, "
        "min_lr, warmup_iters, where the cosine ends) unlike the checkpoint's",
    )
    learner_cli.add_learner_argument(parser)
    learner_cli.add_deviating_argument(parser)


def default_run_folder(config: str, data: Path | None) -> Path:
    """``runs/<config>``, or ``runs/<config>-<data folder>`` when ``--data`` names another
    prepared folder than the config's own: a BPE run then neither lands in nor resumes the
    character run of the same config."""
    settings = configs.resolve(config, []).data
    own = default_data_dir(settings["corpus"], settings["val_fraction"])
    if data is None or Path(data).resolve() == own.resolve():
        return Path("runs") / config
    return Path("runs") / f"{config}-{Path(data).resolve().name}"


def resume_command(args, out: Path) -> str:
    """The shell command that continues the run in ``out`` (it remembers its own settings)."""
    if "WORLD_SIZE" in os.environ:
        launcher = f"torchrun --nproc_per_node {os.environ['WORLD_SIZE']} -m mini_llm.cli"
    elif Path(sys.argv[0]).name == "mini-llm":
        launcher = shlex.quote(sys.argv[0])
    else:
        launcher = f"{shlex.quote(sys.executable)} -m mini_llm.cli"
    flags = ["--out", str(out), "--resume"]
    if args.device != "auto":
        flags += ["--device", args.device]
    if args.threads is not None:
        flags += ["--threads", str(args.threads)]
    return f"{launcher} train {shlex.join(flags)}"


def refuse_to_overwrite(args, out: Path) -> None:
    """A new run must not replace another run's files unless ``--overwrite`` says so."""
    found = [name for name in RUN_FILES if (out / name).exists()]
    if found and not args.overwrite:
        raise ValueError(
            f"{out} already holds a run ({', '.join(found)}); continue it with "
            f"`{resume_command(args, out)}`, start over there with --overwrite, or train into "
            "another folder with --out"
        )


def remove_earlier_run(out: Path) -> None:
    """``--overwrite``: the earlier run's files go, only once everything else has been checked
    (settings, data, model), so that a mistake in the command does not cost the old run."""
    if int(os.environ.get("RANK", "0")) == 0:
        for name in RUN_FILES:
            (out / name).unlink(missing_ok=True)


# What `mini-llm train` writes into a checkpoint and needs to continue it.
RESUMABLE_KEYS = ("model_config", "train_config", "optimizer", "step", "ranks", "history")


def check_resumable(checkpoint: dict, path: Path) -> None:
    """A checkpoint from elsewhere (``mini_llm.engine.train.train`` called from Python, another
    program) lacks what a resumed run needs; say so instead of failing on a missing key."""
    missing = [key for key in RESUMABLE_KEYS if key not in checkpoint]
    if missing:
        raise CheckpointError(
            f"{path} was not written by mini-llm train (it has no {', '.join(missing)}), so "
            "this command cannot continue it; start a new run with another --out"
        )


def check_data_settings(data: dict) -> None:
    """``batch_size`` and ``val_fraction``, before any data is prepared or read."""
    if data["batch_size"] < 1:
        raise ValueError(f"batch_size must be at least 1, got {data['batch_size']}")
    check_val_fraction(data["val_fraction"])


def continued_run(args, checkpoint: dict) -> configs.RunConfig:
    """The run's own settings from its checkpoint, with this command's overrides on top; prints
    what it continues and what this command changes."""
    name = checkpoint.get("config_name", DEFAULT_CONFIG)
    if args.config not in (None, name):
        raise ValueError(
            f"the run in {args.out} was trained with --config {name}, not "
            f"{args.config}; drop --config to continue it, or start a new run with "
            "--out"
        )
    saved = configs.settings_of(configs.resolve(name, base=configs.saved_settings(checkpoint)))
    run = configs.resolve(name, args.overrides, base=saved)
    own = configs.differences(configs.settings_of(configs.resolve(name)), saved)
    changed = configs.differences(saved, configs.settings_of(run))
    if int(os.environ.get("RANK", "0")) == 0:
        print(
            f"resuming {name} at step {checkpoint['step']} of {saved['max_iters']}, with the "
            f"run's own settings ({', '.join(own) or 'none beyond the config'}); "
            f"changed by this command: {', '.join(changed) or 'nothing'}"
        )
    return run


def check_data(data_dir: Path, meta: dict, data: dict, explicit: set[str]) -> None:
    """The prepared data must be what the run's ``corpus`` and ``val_fraction`` ask for."""
    corpus = meta.get("corpus")
    if corpus is None and "corpus" in explicit:
        raise ValueError(
            f"{data_dir} does not record its corpus, so corpus={data['corpus']} "
            "cannot be checked; prepare it again with mini-llm prepare"
        )
    if corpus is not None and corpus != data["corpus"]:
        raise ValueError(
            f"{data_dir} holds the corpus {corpus!r}, not {data['corpus']!r}; "
            f"pass corpus={corpus} or another --data"
        )
    total = meta["train_tokens"] + meta["val_tokens"]
    if "val_fraction" in meta:
        kept, matches = meta["val_fraction"], meta["val_fraction"] == data["val_fraction"]
    else:  # folders prepared before meta.json recorded it: tell from the sizes
        kept = meta["val_tokens"] / total
        matches = int(total * (1 - data["val_fraction"])) == meta["train_tokens"]
    if not matches:
        raise ValueError(
            f"{data_dir} keeps {kept:.3g} of its text for validation, "
            f"not val_fraction={data['val_fraction']}; prepare it again (mini-llm prepare "
            f"--val-fraction {data['val_fraction']} --out DIR) and pass --data DIR"
        )


def prepared_data(args, run: configs.RunConfig, checkpoint: dict | None) -> tuple[Path, dict]:
    """The data folder of this run, prepared first where it is the default and missing."""
    saved_dir = (checkpoint or {}).get("data_dir")
    data_dir = args.data or (Path(saved_dir) if saved_dir else None)
    if data_dir is None:
        data_dir = default_data_dir(run.data["corpus"], run.data["val_fraction"])
        if not (data_dir / "meta.json").exists():
            if "RANK" in os.environ:  # several processes must not write the same files at once
                raise ValueError(
                    f"no prepared data in {data_dir}; under torchrun run "
                    f"`mini-llm prepare --corpus {run.data['corpus']} "
                    f"--val-fraction {run.data['val_fraction']}` first"
                )
            if run.data["corpus"] not in CORPORA:
                raise CorpusError(
                    f"unknown corpus {run.data['corpus']!r}; choose one of: "
                    f"{', '.join(sorted(CORPORA))}"
                )
            print(f"preparing {run.data['corpus']} into {data_dir} (once)")
            prepare(
                load_text(run.data["corpus"]),
                data_dir,
                run.data["val_fraction"],
                corpus=run.data["corpus"],
            )
    meta = load_meta(data_dir)
    explicit = set(configs.parse_overrides(args.overrides))
    check_data(data_dir, meta, run.data, explicit)
    if checkpoint is not None and checkpoint.get("tokenizer") != meta["tokenizer"]:
        raise ValueError(
            f"the data in {data_dir} is encoded with {describe_tokenizer(meta['tokenizer'])}, "
            f"the run in {args.out} with another tokenizer, "
            f"{describe_tokenizer(checkpoint.get('tokenizer') or {})}; "
            "resume with the data it was trained on (--data)"
        )
    return data_dir, meta


def check_model_shape(model: gpt.GPT, checkpoint: dict, args) -> None:
    """A resumed model must have the checkpoint's shape; say which settings changed it."""
    ours = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    theirs = {name: tuple(t.shape) for name, t in checkpoint["model"].items()}
    if ours == theirs:
        return
    changed = configs.differences(
        {k: v for k, v in checkpoint["model_config"].items() if k != "vocab_size"},
        {k: v for k, v in asdict(model.config).items() if k != "vocab_size"},
    )
    raise ValueError(
        f"resume refused: the run in {args.out} has another model shape "
        f"({', '.join(changed) or 'its tensors differ'}); drop those overrides to continue it, "
        "or start a new run with another --out"
    )


def run_train(args) -> None:
    if args.new_schedule and not args.resume:
        raise ValueError("--new-schedule only applies with --resume")
    device = pick_device(args.device)  # a device that cannot be used is named before the data
    threads, why = chosen_threads(args)
    args.out = args.out or default_run_folder(args.config or DEFAULT_CONFIG, args.data)
    check_out_folder(args.out)
    if int(os.environ.get("RANK", "0")) == 0:
        learner_cli.check_before_training(args)
    swapped = learner_cli.use_learner(args)
    checkpoint = load_checkpoint(args.out / "ckpt.pt") if args.resume else None
    if checkpoint is not None:
        check_resumable(checkpoint, args.out / "ckpt.pt")
        args.overrides = learner_cli.resumed_overrides(args, args.overrides)
        run = continued_run(args, checkpoint)
        note = learner_cli.feed_forward_note(run.model["activation"]) if args.learner else None
        if note and int(os.environ.get("RANK", "0")) == 0:
            print(note)
    else:
        overrides = learner_cli.learner_overrides(args, args.overrides)
        run = configs.resolve(args.config or DEFAULT_CONFIG, overrides)
        refuse_to_overwrite(args, args.out)
    check_data_settings(run.data)
    data_dir, meta = prepared_data(args, run, checkpoint)
    train_config = replace(
        run.train,
        out_dir=str(args.out),
        device=args.device,
        resume=args.resume,
        new_schedule=args.new_schedule,
        threads=threads,
    )
    model_config = GPTConfig(vocab_size=meta["vocab_size"], **run.model)
    rank = int(os.environ.get("RANK", "0"))  # under torchrun each process draws its own batches
    seed = train_config.seed + 1000 * rank
    batch = {"block_size": model_config.block_size, "batch_size": run.data["batch_size"]}
    train_batches, val_batches = (
        RandomBatches(
            load_split(data_dir, split),
            seed=seed + i,
            name=f"the {split} split of {data_dir}",
            **batch,
        )
        for i, split in enumerate(SPLITS)
    )  # before the model: a block_size longer than the data is named, not allocated
    torch.manual_seed(train_config.seed)
    model = gpt.GPT(model_config)
    if checkpoint is not None:
        check_model_shape(model, checkpoint, args)
    if args.overwrite:
        remove_earlier_run(args.out)
    if rank == 0:
        print(
            f"{run.name}: {model.num_parameters():,} parameters, training on "
            f"{device if 'RANK' not in os.environ else 'torchrun'}, "
            f"{threads} CPU thread(s) ({why})"
        )
        if device.type == "cpu" and run.name.endswith("-gpu"):
            print(
                f"warning: {run.name} is sized for a GPU and this run is on the CPU, where its "
                f"{train_config.max_iters:,} steps take many hours; {DEFAULT_CONFIG} is the "
                "same task at CPU size"
            )
    start = time.perf_counter()
    try:
        result = train(
            model,
            train_batches,
            train_config,
            val_batches,
            checkpoint_extra={
                "model_config": asdict(model_config),
                "tokenizer": meta["tokenizer"],
                "config_name": run.name,
                "data": run.data,
                "data_dir": str(data_dir),
            },
        )
    except KeyboardInterrupt:
        if rank:
            raise
        raise KeyboardInterrupt(interrupted_message(args, train_config.max_iters)) from None
    if rank == 0:
        print(
            f"done: step {result.step}, val loss {result.val_losses[-1][1]:.4f}, "
            f"{time.perf_counter() - start:.1f} s, {result.tokens_per_s:,.0f} tokens/s; "
            f"checkpoint {result.checkpoint}"
        )
        if swapped is not None:
            print(swapped.used())


def interrupted_message(args, max_iters: int) -> str:
    """What Ctrl-C kept: the step of the checkpoint on disk, and the command that resumes it."""
    path = args.out / "ckpt.pt"
    try:
        step = load_checkpoint(path)["step"]
    except CheckpointError:
        return f"stopped before the first checkpoint, so there is nothing in {path} to resume"
    return (
        f"the kept checkpoint {path} holds step {step} of {max_iters}; resume with\n"
        f"  {resume_command(args, args.out)}"
    )


# ----------------------------------------------------------------------------------- sample
def add_sample_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--checkpoint",
        type=Path,
        default=Path("runs/shakespeare-char-cpu/ckpt.pt"),
        help="a checkpoint written by mini-llm train",
    )
    parser.add_argument("--prompt", default="\n", help="text to continue (default: a newline)")
    parser.add_argument("--max-new-tokens", type=int, default=500, help="tokens to generate")
    parser.add_argument("--temperature", type=float, default=0.8, help="0 = greedy")
    parser.add_argument("--top-k", type=int, default=None, help="keep the k likeliest tokens")
    parser.add_argument(
        "--top-p", type=float, default=None, help="keep the likeliest tokens up to this mass"
    )
    parser.add_argument("--num-samples", type=int, default=1, help="samples to print")
    parser.add_argument("--seed", type=int, default=1337, help="seed of the sampling")
    parser.add_argument(
        "--no-cache", action="store_true", help="recompute the whole window for each token"
    )
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or mps")
    add_threads_argument(parser)
    learner_cli.add_learner_argument(parser)


def load_model(checkpoint: Path, device: torch.device, learner: bool = False):
    """The GPT and tokenizer stored in a checkpoint written by ``mini-llm train``.

    With ``learner``, attention is written out (``attention=explicit``: the same weights and
    formula as PyTorch's fused kernel), so that the learner's attention functions are called.
    """
    state = load_checkpoint(checkpoint, map_location=device)
    if "model_config" not in state or "tokenizer" not in state:
        raise CheckpointError(
            f"{checkpoint} holds no GPT (no model_config/tokenizer); "
            "use a checkpoint written by mini-llm train"
        )
    settings = {**state["model_config"], **({"attention": "explicit"} if learner else {})}
    model = gpt.GPT(GPTConfig(**settings))
    try:
        model.load_state_dict(state["model"])
    except RuntimeError:
        raise CheckpointError(
            f"{checkpoint}: its weights do not fit its model_config "
            f"({first_difference(state['model'], model.state_dict())}); use a checkpoint "
            "written by mini-llm train"
        ) from None
    return model.to(device).eval(), tokenizer_from_dict(state["tokenizer"])


def run_sample(args) -> None:
    device = pick_device(args.device)
    threads, why = chosen_threads(args)
    if args.num_samples < 1:
        raise ValueError(f"--num-samples must be at least 1, got {args.num_samples}")
    torch.set_num_threads(threads)
    swapped = learner_cli.use_learner(args, report=sys.stderr)  # stdout is the text alone
    model, tokenizer = load_model(args.checkpoint, device, learner=swapped is not None)
    note = learner_cli.feed_forward_note(model.config.activation) if swapped else None
    if note:
        print(note, file=sys.stderr)
    print(
        f"read {args.checkpoint} ({model.num_parameters():,} parameters); "
        f"threads: {threads} ({why})",
        file=sys.stderr,
    )
    if not args.prompt:
        raise ValueError("the prompt is empty; give at least one character, e.g. --prompt $'\\n'")
    prompt = torch.tensor([tokenizer.encode(args.prompt)], device=device)
    generator = torch.Generator(device=device).manual_seed(args.seed)
    for i in range(args.num_samples):
        ids = model.generate(
            prompt,
            args.max_new_tokens,
            temperature=args.temperature,
            top_k=args.top_k,
            top_p=args.top_p,
            generator=generator,
            use_cache=not args.no_cache,
        )
        if i:
            print("-" * 40)
        print(tokenizer.decode(ids[0].tolist()))
    if swapped is not None:
        print(swapped.used(), file=sys.stderr)


# ------------------------------------------------------------------------------------ bench
def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default="shakespeare-char-cpu", choices=sorted(configs.CONFIGS))
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    parser.add_argument("--steps", type=int, default=30, help="timed training steps")
    parser.add_argument("--new-tokens", type=int, default=256, help="tokens to generate")
    parser.add_argument("--device", default="auto")
    add_threads_argument(parser)


def run_bench(args) -> None:
    from mini_llm.engine.bench import generation_tokens_per_s, train_step_times

    run = configs.resolve(args.config, args.overrides)
    if args.steps < 1 or args.new_tokens < 1:
        raise ValueError(
            f"--steps and --new-tokens must be at least 1 (something to time), got "
            f"--steps {args.steps} --new-tokens {args.new_tokens}"
        )
    check_data_settings(run.data)
    device = pick_device(args.device)
    threads, why = chosen_threads(args)
    torch.set_num_threads(threads)
    print(f"threads: {threads} ({why})")
    torch.manual_seed(0)
    model_config = GPTConfig(vocab_size=96, **run.model)
    model = gpt.GPT(model_config).to(device)
    if device.type == "cpu":  # as train() does
        cpu_linear.accelerate(model)
        print(cpu_linear.decision())
    use_tf32_products(device)  # the step as train() runs it
    low_precision = autocast_dtype(device, run.train.dtype)
    runner = torch.compile(model) if run.train.compile else model
    B, T = run.data["batch_size"], model_config.block_size
    batches = [(torch.randint(96, (B, T), device=device),) * 2 for _ in range(args.steps + 5)]
    optimizer = make_optimizer(model, run.train, device)
    split = cpu_parallel.decide(
        model,
        device,
        compiled=run.train.compile,
        low_precision=low_precision,
        enabled=run.train.split_across_cores,
    )
    if device.type == "cpu":
        print(split)
    with cpu_parallel.workers_for(split) as cores:
        ms = train_step_times(runner, batches, optimizer, autocast_to=low_precision, cores=cores)
    step_ms = statistics.median(ms)
    how = [str(low_precision).removeprefix("torch.") if low_precision else "float32"]
    how += ["torch.compile"] if run.train.compile else []
    print(
        f"train  {run.name} on {device} ({', '.join(how)}): {step_ms:.1f} ms/step "
        f"(median of {len(ms)}), {B * T / step_ms * 1000:,.0f} tokens/s"
    )
    prompt = torch.zeros((1, 1), dtype=torch.long, device=device)
    new = min(args.new_tokens, T - 1)
    with_cache = generation_tokens_per_s(model, prompt, new, use_cache=True)
    without = generation_tokens_per_s(model, prompt, new, use_cache=False)
    print(
        f"sample {new} tokens: {with_cache:,.0f} tokens/s with KV cache, {without:,.0f} without "
        f"({with_cache / without:.1f}x)"
    )


def add_record_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="the experiment to record (--list names them)")
    parser.add_argument("--list", action="store_true", help="list the experiments and exit")
    parser.add_argument(
        "--out",
        type=Path,
        default=recorded.RESULTS_DIR,
        help="folder for NAME.json and its checkpoints (default: book/results)",
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="run the same code at a tiny size, a smoke test (needs --out outside book/results)",
    )


def run_record(args) -> None:
    from mini_llm.experiments import experiments

    known = experiments()
    if args.list or not args.name:
        for name, module in known.items():
            print(f"{name:28} {module.SUMMARY}")
        return
    if args.name not in known:
        raise ValueError(f"unknown experiment {args.name!r}; choose one of: {', '.join(known)}")
    if args.tiny and args.out.resolve() == recorded.RESULTS_DIR.resolve():
        raise ValueError(
            "a --tiny run is a smoke test, not a result: give it --out outside book/results"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    at_commit, started = recorded.commit(), time.perf_counter()
    outcome = known[args.name].run(args.out, tiny=args.tiny)
    path = recorded.write_recording(
        args.name,
        outcome.results,
        command=shlex.join(["mini-llm", "record", args.name, *(["--tiny"] if args.tiny else [])]),
        wall_seconds=time.perf_counter() - started,
        device=outcome.device,
        tiny=args.tiny,
        checkpoints=outcome.checkpoints,
        out_dir=args.out,
        at_commit=at_commit,
    )
    print(f"recorded {args.name} in {time.perf_counter() - started:.0f} s: {path}")


# ----------------------------------------------------------------------------------- config
def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="a named config (none: list them)")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="as for train")


def run_config(args) -> None:
    """Every setting of a named config, as ``mini-llm train --config NAME`` would train it."""
    if not args.name:
        for name in sorted(configs.CONFIGS):
            print(name)
        return
    if args.name not in configs.CONFIGS:
        raise ValueError(
            f"unknown config {args.name!r}; choose one of: {', '.join(sorted(configs.CONFIGS))}"
        )
    for key, value in configs.settings_of(configs.resolve(args.name, args.overrides)).items():
        print(f"{key}={value}")


class Command(NamedTuple):
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], None]


COMMANDS: dict[str, Command] = {
    "prepare": Command(
        "encode a corpus into train/val token files", add_prepare_arguments, run_prepare
    ),
    "train": Command("train a GPT from a named config", add_train_arguments, run_train),
    "config": Command(
        "print every setting of a named config (train's key=value)",
        add_config_arguments,
        run_config,
    ),
    "sample": Command("generate text from a checkpoint", add_sample_arguments, run_sample),
    "bench": Command("time training steps and generation", add_bench_arguments, run_bench),
    "record": Command(
        "run a named experiment and write its results file", add_record_arguments, run_record
    ),
    "grade": Command(grading_cli.HELP, grading_cli.add_arguments, grading_cli.run),
    "learner": Command(learner_cli.HELP, learner_cli.add_arguments, learner_cli.run),
}


class ShowDefaults(argparse.HelpFormatter):
    """``--help`` gives each option's default, except where its help already says it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        hidden = (None, False, [], argparse.SUPPRESS)
        if "default" in text or not action.option_strings or action.default in hidden:
            return text
        return f"{text} (default: %(default)s)".lstrip()


def build_parser() -> argparse.ArgumentParser:
    description = __doc__.splitlines()[0].replace("``", "")  # the docstring's markup
    parser = argparse.ArgumentParser(prog="mini-llm", description=description)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="command")
    for name, command in COMMANDS.items():
        subparser = subparsers.add_parser(
            name, help=command.help, description=command.help, formatter_class=ShowDefaults
        )
        command.add_arguments(subparser)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mini_llm")
    except PackageNotFoundError:  # run from a copy that was never installed
        return "(not installed)"


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, with ``key=value`` overrides anywhere among the flags.

    argparse gives a positional that takes any number of words only the first run of them:
    in ``train max_iters=100 --device cpu eval_iters=1`` it would refuse ``eval_iters=1``. The
    later ones are added here, in order, so the last value of a key still wins."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if hasattr(args, "overrides"):
        args.overrides += [word for word in extra if _is_override(word)]
        extra = [word for word in extra if not _is_override(word)]
    if extra:
        (subcommands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        subcommands.choices[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _is_override(word: str) -> bool:
    return not word.startswith("-") and "=" in word


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    try:
        COMMANDS[args.command].run(args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
    except BrokenPipeError:  # `mini-llm sample | head`: the reader has taken all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # for the exit's flush
        return 141  # as a shell reports a command ended by SIGPIPE
    except USER_ERRORS as err:
        print(f"mini-llm {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:
        print(  # on a line of its own, not after a progress bar's
            f"\nmini-llm {args.command}: interrupted{f'; {err}' if err.args else ''}",
            file=sys.stderr,
        )
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
