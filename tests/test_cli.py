"""The ``mini-llm`` command end to end, and the clear errors it gives for bad input."""

import os
import shutil
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import torch

from mini_llm import configs, cpu_linear
from mini_llm.cli import COMMANDS, main

# Small, yet big enough that the q,k,v and MLP products take cpu_linear's oneDNN path, which
# the command-line runs below are forced to use (MINI_LLM_ONEDNN=on) on any x86 CPU.
TINY = ["n_layer=1", "n_head=2", "n_embd=64", "block_size=32", "batch_size=8", "eval_interval=10",
        "eval_iters=2", "warmup_iters=2", "progress=false"]


def mini_llm(*args, cwd):
    return subprocess.run([sys.executable, "-m", "mini_llm.cli", *args], cwd=cwd, check=False,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, cpu_linear.ENVIRONMENT_VARIABLE: "on"})


def test_the_command_line_runs_take_the_fast_path(monkeypatch):
    monkeypatch.setattr(cpu_linear, "_decision", cpu_linear.Decision(True, "as MINI_LLM_ONEDNN=on"))
    rows, width = 8 * 32, 64
    assert cpu_linear.uses_onednn(torch.empty(rows, width), torch.empty(3 * width, width))


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """prepare → train 20 steps → a run folder, all through the command line."""
    work = tmp_path_factory.mktemp("cli")
    prepared = mini_llm("prepare", "--corpus", "shakespeare", "--out", "data", cwd=work)
    assert prepared.returncode == 0, prepared.stderr
    assert "train and" in prepared.stdout and (work / "data" / "train.bin").exists()
    trained = mini_llm("train", "--config", "shakespeare-char-cpu", "--data", "data",
                       "--out", "run", "--device", "cpu", "max_iters=20", *TINY, cwd=work)
    assert trained.returncode == 0, trained.stderr
    assert "done: step 20, val loss" in trained.stdout
    return work


def test_prepare_train_sample_end_to_end(trained_run):
    written = {p.name for p in (trained_run / "run").iterdir()}
    assert written >= {"ckpt.pt", "metrics.jsonl", "loss.png"}
    sampled = mini_llm("sample", "--checkpoint", "run/ckpt.pt", "--prompt", "ROMEO:",
                       "--max-new-tokens", "40", "--device", "cpu", cwd=trained_run)
    assert sampled.returncode == 0, sampled.stderr
    assert sampled.stdout.startswith("ROMEO:") and len(sampled.stdout) >= 46
    again = mini_llm("sample", "--checkpoint", "run/ckpt.pt", "--prompt", "ROMEO:", "--no-cache",
                     "--max-new-tokens", "40", "--device", "cpu", cwd=trained_run)
    assert again.stdout == sampled.stdout  # same seed, with or without the KV cache


def test_resume_from_the_command_line_keeps_the_schedule_or_says_why_not(
        trained_run, capsys, monkeypatch):
    def resume(*args):
        return mini_llm("train", "--data", "data", "--out", "run", "--device", "cpu", "--resume",
                        *TINY, *args, cwd=trained_run)

    monkeypatch.chdir(trained_run)  # the run's cosine ended at step 20:
    assert main(["train", "--data", "data", "--out", "run", "--device", "cpu", "--resume",
                 *TINY, "max_iters=25"]) == 2
    refused = capsys.readouterr().err
    assert "resume refused" in refused and "max_iters 20 -> 25" in refused
    assert "lr_decay_iters=20" in refused and "--new-schedule" in refused
    on_the_saved_schedule = resume("max_iters=25", "lr_decay_iters=20")
    assert on_the_saved_schedule.returncode == 0, on_the_saved_schedule.stderr
    assert "done: step 25" in on_the_saved_schedule.stdout
    on_a_new_schedule = resume("max_iters=28", "--new-schedule")
    assert on_a_new_schedule.returncode == 0, on_a_new_schedule.stderr
    assert "done: step 28" in on_a_new_schedule.stdout


def test_resuming_with_another_model_shape_is_a_clear_error(trained_run, capsys, monkeypatch):
    monkeypatch.chdir(trained_run)
    assert main(["train", "--data", "data", "--out", "run", "--device", "cpu", "--resume",
                 "--new-schedule", "max_iters=30", *TINY, "n_embd=32"]) == 2
    assert "written for a different model" in capsys.readouterr().err


def test_prompt_character_outside_the_vocabulary(trained_run):
    done = mini_llm("sample", "--checkpoint", "run/ckpt.pt", "--prompt", "ROMEO\u263a",
                    cwd=trained_run)
    assert done.returncode == 2
    assert "character '\u263a' (U+263A) is not in the tokenizer's vocabulary" in done.stderr
    assert "Traceback" not in done.stderr


def test_missing_and_truncated_checkpoints(tmp_path, capsys):
    assert main(["sample", "--checkpoint", str(tmp_path / "nope.pt")]) == 2
    assert "no checkpoint at" in capsys.readouterr().err
    broken = tmp_path / "broken.pt"
    broken.write_bytes(b"PK\x03\x04 not a whole zip file")
    assert main(["sample", "--checkpoint", str(broken)]) == 2
    assert "damaged or truncated" in capsys.readouterr().err


def test_unknown_config_key_lists_the_valid_ones(capsys):
    assert main(["train", "n_layers=2"]) == 2
    err = capsys.readouterr().err
    assert "unknown config key 'n_layers'" in err and "n_layer" in err and "learning_rate" in err
    assert main(["train", "dropout=lots"]) == 2
    assert "dropout must be float" in capsys.readouterr().err
    assert main(["train", "n_embd=30", "n_head=4"]) == 2
    assert "divisible by n_head" in capsys.readouterr().err


def test_named_configs_are_the_documented_shapes():
    cpu = configs.resolve("shakespeare-char-cpu")
    assert cpu.model == {"n_layer": 4, "n_head": 4, "n_embd": 128, "block_size": 64, "dropout": 0.0}
    assert (cpu.data["batch_size"], cpu.train.max_iters, cpu.train.warmup_iters) == (12, 2000, 100)
    assert (cpu.train.learning_rate, cpu.train.min_lr, cpu.train.beta2) == (1e-3, 1e-4, 0.99)
    gpu = configs.resolve("shakespeare-char-gpu", ["max_iters=7", "compile=false"])
    assert (gpu.model["n_embd"], gpu.model["dropout"], gpu.data["batch_size"]) == (384, 0.2, 64)
    assert (gpu.train.max_iters, gpu.train.compile) == (7, False)
    with pytest.raises(ValueError, match="unknown config 'tiny'"):
        configs.resolve("tiny")


def test_every_subcommand_is_listed_and_has_help(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    listing = capsys.readouterr().out
    assert exit_.value.code == 0
    for name, command in COMMANDS.items():
        assert name in listing
        with pytest.raises(SystemExit) as exit_:
            main([name, "--help"])
        assert exit_.value.code == 0 and command.help in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        main(["no-such-command"])
    assert exit_.value.code == 2 and "invalid choice" in capsys.readouterr().err


def test_bench_runs_on_a_tiny_shape(capsys):
    assert main(["bench", "--device", "cpu", "--steps", "3", "--new-tokens", "8", *TINY[:5]]) == 0
    out = capsys.readouterr().out
    assert "ms/step" in out and "tokens/s with KV cache" in out
    assert str(cpu_linear.decision()) in out  # which linear layers were timed, and why


def test_the_installed_mini_llm_command_runs_the_cli():
    (script,) = entry_points(group="console_scripts", name="mini-llm")
    assert script.load() is main
    executable = shutil.which("mini-llm", path=Path(sys.executable).parent)
    done = subprocess.run([executable, "prepare", "--help"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0 and COMMANDS["prepare"].help in done.stdout
