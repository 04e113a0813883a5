"""The ``mini-llm`` command end to end, and the clear errors it gives for bad input."""

import importlib.metadata
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import torch

from mini_llm import cli
from mini_llm.cli import COMMANDS, main
from mini_llm.corpus import CORPORA
from mini_llm.engine import configs, cpu_linear
from mini_llm.engine.checkpoint import load_checkpoint
from mini_llm.engine.data import RandomBatches, load_meta, prepare
from mini_llm.engine.train import TrainResult

# Small, yet big enough that the q,k,v and MLP products take cpu_linear's oneDNN path, which
# the command-line runs below are forced to use (MINI_LLM_ONEDNN=on) on any x86 CPU.
TINY = [
    "n_layer=1",
    "n_head=2",
    "n_embd=64",
    "block_size=32",
    "batch_size=8",
    "eval_interval=10",
    "eval_iters=2",
    "warmup_iters=2",
    "progress=false",
]


ONEDNN = {cpu_linear.ENVIRONMENT_VARIABLE: "on"}


def mini_llm(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "mini_llm.cli", *args],
        cwd=cwd,
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ | ONEDNN,
    )


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
    trained = mini_llm(
        "train",
        "--config",
        "shakespeare-char-cpu",
        "--data",
        "data",
        "--out",
        "run",
        "--device",
        "cpu",
        "max_iters=20",
        *TINY,
        cwd=work,
    )
    assert trained.returncode == 0, trained.stderr
    assert "done: step 20, val loss" in trained.stdout
    return work


def test_prepare_train_sample_end_to_end(trained_run):
    written = {p.name for p in (trained_run / "run").iterdir()}
    assert written >= {"ckpt.pt", "metrics.jsonl", "loss.png"}
    sampled = mini_llm(
        "sample",
        "--checkpoint",
        "run/ckpt.pt",
        "--prompt",
        "ROMEO:",
        "--max-new-tokens",
        "40",
        "--device",
        "cpu",
        cwd=trained_run,
    )
    assert sampled.returncode == 0, sampled.stderr
    assert sampled.stdout.startswith("ROMEO:") and len(sampled.stdout) >= 46
    assert sampled.stdout.endswith("\n")  # the shell prompt starts on a line of its own
    again = mini_llm(
        "sample",
        "--checkpoint",
        "run/ckpt.pt",
        "--prompt",
        "ROMEO:",
        "--no-cache",
        "--max-new-tokens",
        "40",
        "--device",
        "cpu",
        cwd=trained_run,
    )
    assert again.stdout == sampled.stdout  # same seed, with or without the KV cache


def test_resume_keeps_the_runs_own_settings_and_schedule_or_says_why_not(
    trained_run, capsys, monkeypatch
):
    # Only the new overrides are given: the run's own (TINY, max_iters=20) come from its checkpoint.
    def resume(*args):
        return mini_llm(
            "train", "--out", "run", "--device", "cpu", "--resume", *args, cwd=trained_run
        )

    monkeypatch.chdir(trained_run)  # the run's cosine ended at step 20:
    assert main(["train", "--out", "run", "--device", "cpu", "--resume", "max_iters=25"]) == 2
    captured = capsys.readouterr()
    assert "resuming shakespeare-char-cpu at step 20 of 20" in captured.out
    own = captured.out.split("the run's own settings (")[1].split(");")[0].split(", ")
    assert set(own) == {
        f"{key} {before} -> {after}"
        for key, before, after in (
            ("max_iters", 2000, 20),
            ("n_layer", 4, 1),
            ("n_head", 4, 2),
            ("n_embd", 128, 64),
            ("block_size", 64, 32),
            ("batch_size", 12, 8),
            ("eval_interval", 250, 10),
            ("eval_iters", 20, 2),
            ("warmup_iters", 100, 2),
            ("progress", True, False),
        )
    }
    assert "changed by this command: max_iters 20 -> 25" in captured.out
    refused = captured.err
    assert "resume refused" in refused and "max_iters 20 -> 25" in refused
    assert "lr_decay_iters=20" in refused and "--new-schedule" in refused
    on_the_saved_schedule = resume("max_iters=25", "lr_decay_iters=20")
    assert on_the_saved_schedule.returncode == 0, on_the_saved_schedule.stderr
    assert "lr_decay_iters None -> 20, max_iters 20 -> 25" in on_the_saved_schedule.stdout
    assert "done: step 25" in on_the_saved_schedule.stdout
    on_a_new_schedule = resume("max_iters=28", "--new-schedule")
    assert on_a_new_schedule.returncode == 0, on_a_new_schedule.stderr
    assert "done: step 28" in on_a_new_schedule.stdout
    already_done = resume()
    assert already_done.returncode == 2 and "already at step 28" in already_done.stderr


def test_resuming_with_another_model_shape_is_a_short_error_naming_out(
    trained_run, capsys, monkeypatch
):
    monkeypatch.chdir(trained_run)
    assert (
        main(
            [
                "train",
                "--out",
                "run",
                "--device",
                "cpu",
                "--resume",
                "--new-schedule",
                "max_iters=30",
                "n_embd=32",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "another model shape (n_embd 64 -> 32)" in err and "--out" in err
    assert len(err.splitlines()) == 1 and len(err) < 300  # no list of state-dict keys
    assert main(["train", "--out", "run", "--resume", "--config", "shakespeare-char-gpu"]) == 2
    assert "trained with --config shakespeare-char-cpu" in capsys.readouterr().err


def test_train_refuses_to_overwrite_a_run_unless_told(trained_run, capsys, monkeypatch):
    monkeypatch.chdir(trained_run)
    before = (trained_run / "run" / "ckpt.pt").read_bytes()
    assert main(["train", "--data", "data", "--out", "run", "--device", "cpu", *TINY]) == 2
    err = capsys.readouterr().err
    assert "run already holds a run (ckpt.pt, metrics.jsonl, loss.png)" in err
    assert "--out run --resume" in err and "--overwrite" in err
    assert (trained_run / "run" / "ckpt.pt").read_bytes() == before
    shutil.copytree(trained_run / "run", trained_run / "again")
    assert (
        main(
            [
                "train",
                "--data",
                "data",
                "--out",
                "again",
                "--device",
                "cpu",
                "--overwrite",
                "max_iters=3",
                *TINY,
            ]
        )
        == 0
    )
    metrics = (trained_run / "again" / "metrics.jsonl").read_text().splitlines()
    assert json.loads(metrics[0])["step"] == 0 and json.loads(metrics[-1])["step"] == 3
    assert load_checkpoint(trained_run / "again" / "ckpt.pt")["step"] == 3
    with pytest.raises(SystemExit):  # one or the other
        main(["train", "--out", "run", "--resume", "--overwrite"])
    assert "not allowed with argument" in capsys.readouterr().err
    assert main(["train", "--out", "elsewhere", "--new-schedule"]) == 2
    assert "--new-schedule only applies with --resume" in capsys.readouterr().err


def test_overwrite_keeps_the_earlier_run_when_the_command_is_refused(
    trained_run, capsys, monkeypatch
):
    """--overwrite deletes the earlier run only once the new one can start: a typo in the
    command must not cost it."""
    monkeypatch.chdir(trained_run)
    shutil.copytree(trained_run / "run", trained_run / "kept")
    before = {p.name: p.read_bytes() for p in (trained_run / "kept").iterdir()}
    command = ["train", "--data", "data", "--out", "kept", "--device", "cpu", "--overwrite"]
    refused = {
        ("--threads", "0", *TINY): "--threads must be at least 1, got 0",
        (*TINY, "batch_size=0"): "batch_size must be at least 1, got 0",
        (*TINY, "val_fraction=1"): "val_fraction must be between 0 and 1",
        (*TINY, "corpus=words"): "holds the corpus 'shakespeare', not 'words'",
        (*TINY, "block_size=600000"): "too few for windows of block_size=600000",
    }
    for extra, message in refused.items():
        assert main([*command, *extra]) == 2, extra
        err = capsys.readouterr().err
        assert message in err and len(err.splitlines()) == 1, err
        after = {p.name: p.read_bytes() for p in (trained_run / "kept").iterdir()}
        assert after == before, extra


def test_data_settings_are_checked_before_anything_is_prepared(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    refused = {
        "batch_size=0": "batch_size must be at least 1, got 0",
        "batch_size=-2": "batch_size must be at least 1, got -2",
        "val_fraction=0": "val_fraction must be between 0 and 1",
        "corpus=nope": "unknown corpus 'nope'; choose one of: names, shakespeare, words",
    }
    for override, message in refused.items():
        assert main(["train", "--device", "cpu", override, *TINY[:3]]) == 2, override
        captured = capsys.readouterr()
        assert message in captured.err and "preparing" not in captured.out, override
        assert not (tmp_path / "data").exists() and not (tmp_path / "runs").exists()


def test_resuming_a_checkpoint_not_written_by_train_says_so(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    model = torch.nn.Linear(2, 2)
    torch.save({"model": model.state_dict(), "step": 3}, tmp_path / "run" / "ckpt.pt")
    assert main(["train", "--out", str(tmp_path / "run"), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "was not written by mini-llm train (it has no model_config, train_config" in err
    assert "another --out" in err and len(err.splitlines()) == 1


def test_sample_and_bench_refuse_counts_of_zero(trained_run, capsys):
    checkpoint = str(trained_run / "run" / "ckpt.pt")
    assert main(["sample", "--checkpoint", checkpoint, "--num-samples", "0"]) == 2
    assert "--num-samples must be at least 1, got 0" in capsys.readouterr().err
    for flag in ("--steps", "--new-tokens"):
        assert main(["bench", "--device", "cpu", flag, "0", *TINY[:5]]) == 2, flag
        assert f"{flag} 0" in capsys.readouterr().err
    assert main(["bench", "--device", "cpu", *TINY[:4], "batch_size=0"]) == 2
    assert "batch_size must be at least 1, got 0" in capsys.readouterr().err


def test_overrides_may_come_between_the_flags(trained_run, capsys, monkeypatch):
    """argparse alone takes only the first run of key=value words: `max_iters=3 --out x
    n_layer=1` refused n_layer=1 with the top-level usage."""
    monkeypatch.chdir(trained_run)
    command = ["train", "max_iters=5", "--data", "data", TINY[0], "--out", "mixed"]
    assert main([*command, "--device", "cpu", *TINY[1:], "max_iters=3"]) == 0
    saved = load_checkpoint(trained_run / "mixed" / "ckpt.pt")
    assert saved["step"] == 3 and saved["model_config"]["n_layer"] == 1  # the last value wins
    with pytest.raises(SystemExit):
        main(["train", "max_iters=3", "--out", "x", "n_layer=1", "--bogus"])
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == "mini-llm train: error: unrecognized arguments: --bogus"


def test_an_out_that_is_a_file_or_cannot_be_made_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    for command in (["train", *TINY], ["prepare", "--corpus", "names"]):
        assert main([*command, "--out", "notes.txt"]) == 2, command
        err = capsys.readouterr().err
        assert "--out notes.txt is a file, not a folder" in err and len(err.splitlines()) == 1
        assert main([*command, "--out", "notes.txt/run"]) == 2, command
        err = capsys.readouterr().err
        assert "Not a directory" in err and len(err.splitlines()) == 1, err
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_sample_into_a_pipe_that_closes_early_is_quiet(trained_run):
    """`mini-llm sample ... | head -1` must not end in a BrokenPipeError traceback."""
    sampling = subprocess.Popen(
        [sys.executable, "-m", "mini_llm.cli", "sample", "--checkpoint", "run/ckpt.pt"]
        + ["--device", "cpu", "--max-new-tokens", "200", "--num-samples", "100"],
        cwd=trained_run,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert sampling.stdout.readline()  # what `head -1` reads, then it closes the pipe
    sampling.stdout.close()
    assert sampling.wait(timeout=300) == 141
    err = sampling.stderr.read().decode()
    assert "Traceback" not in err and "Error" not in err, err


def test_devices_the_command_cannot_train_on_are_named(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for device in ("tpu", "meta", "hip"):  # torch accepts the last two, then fails deep inside
        assert main(["train", "--device", device, "--out", "nowhere", *TINY]) == 2, device
        err = capsys.readouterr().err
        assert f"unknown device '{device}'; use auto, cpu, cuda or mps" in err, err
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert main(["sample", "--device", "cuda:3", "--checkpoint", "nowhere.pt"]) == 2
    err = capsys.readouterr().err
    assert "device 'cuda:3' was asked for but this machine has 1 CUDA GPU(s)" in err, err
    assert not (tmp_path / "nowhere").exists() and not (tmp_path / "data").exists()


def test_bpe_says_when_the_text_runs_out_of_merges(tmp_path, capsys):
    bpe = ["prepare", "--corpus", "names", "--tokenizer", "bpe", "--out", str(tmp_path / "b")]
    assert main([*bpe, "--vocab-size", "65536"]) == 0
    out = capsys.readouterr().out
    size = load_meta(tmp_path / "b")["vocab_size"]
    assert size < 65536
    assert f"no pair left to merge: {size:,} tokens, not the 65,536 asked for" in out
    assert main([*bpe, "--vocab-size", "300"]) == 0
    assert "no pair left" not in capsys.readouterr().out


class InterruptedBatches(RandomBatches):
    """Training batches that press Ctrl-C when the 15th is drawn."""

    def __call__(self):
        self.calls = getattr(self, "calls", 0) + 1
        if self.calls == 15:
            raise KeyboardInterrupt
        return super().__call__()


def test_ctrl_c_names_the_kept_step_and_the_command_that_resumes_it(
    trained_run, capsys, monkeypatch
):
    monkeypatch.chdir(trained_run)
    monkeypatch.setattr(
        cli,
        "RandomBatches",
        lambda tokens, **kw: (InterruptedBatches if "train split" in kw["name"] else RandomBatches)(
            tokens, **kw
        ),
    )
    assert (
        main(["train", "--data", "data", "--out", "cut", "--device", "cpu", "max_iters=24", *TINY])
        == 130
    )  # eval_interval=10: a checkpoint at step 10
    err = capsys.readouterr().err
    assert "interrupted; the kept checkpoint cut/ckpt.pt holds step 10 of 24" in err
    command = err.splitlines()[-1].strip()
    assert command.endswith("train --out cut --resume --device cpu")
    resumed = subprocess.run(
        shlex.split(command),
        cwd=trained_run,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=os.environ | ONEDNN,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "done: step 24" in resumed.stdout  # the run's max_iters, not the config's 2,000
    monkeypatch.setattr(cli, "RandomBatches", InterruptedBatches)
    assert (
        main(
            [
                "train",
                "--data",
                "data",
                "--out",
                "early",
                "--device",
                "cpu",
                "max_iters=24",
                "checkpoint_interval=20",
                *TINY,
            ]
        )
        == 130
    )
    assert "before the first checkpoint, so there is nothing in early/ckpt.pt" in (
        capsys.readouterr().err
    )


def test_prompt_character_outside_the_vocabulary(trained_run):
    done = mini_llm(
        "sample", "--checkpoint", "run/ckpt.pt", "--prompt", "ROMEO\u263a", cwd=trained_run
    )
    assert done.returncode == 2
    assert "character '\u263a' (U+263A) is not in the tokenizer's vocabulary" in done.stderr
    assert "Traceback" not in done.stderr


def _as_from_a_terminal() -> None:
    """SIGINT back to its default in the child: a process started with SIGINT ignored (as
    pytest's xdist workers are) passes that on, and Python then never raises KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_a_real_ctrl_c_keeps_the_checkpoint_and_says_how_to_resume(trained_run):
    """SIGINT, as the terminal sends it, once the first checkpoint is on disk."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mini_llm.cli",
            "train",
            "--data",
            "data",
            "--out",
            "signal",
            "--device",
            "cpu",
            "--threads",
            "1",
            "max_iters=100000",
            *TINY,
        ],
        cwd=trained_run,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ | ONEDNN,
        preexec_fn=_as_from_a_terminal,  # noqa: PLW1509 - one signal call, no lock taken
    )
    checkpoint = trained_run / "signal" / "ckpt.pt"
    deadline = time.monotonic() + 240
    while not checkpoint.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    try:
        _, err = process.communicate(timeout=120)
    finally:
        process.kill()  # a training run of 100,000 steps must not outlive a failed test
    kept = load_checkpoint(checkpoint)["step"]
    assert process.returncode == 130, err
    assert f"signal/ckpt.pt holds step {kept} of 100000; resume with" in err
    assert err.rstrip().endswith("train --out signal --resume --device cpu --threads 1")
    assert "Traceback" not in err
    assert "\nmini-llm train: interrupted" in err  # on a line of its own, not after the bar
    resumed = mini_llm("train", "--out", "signal", "--resume", "--new-schedule", "--device",
                       "cpu", "--threads", "1", f"max_iters={kept + 2}", cwd=trained_run)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    metrics = (trained_run / "signal" / "metrics.jsonl").read_text().splitlines()
    logged = [json.loads(line)["step"] for line in metrics if "train_loss" in line]
    assert len(logged) == len(set(logged)) and logged[-1] == kept + 2  # each step once


def test_missing_and_unreadable_checkpoints_say_why(trained_run, tmp_path, capsys):
    assert main(["sample", "--checkpoint", str(tmp_path / "nope.pt")]) == 2
    assert "no checkpoint at" in capsys.readouterr().err
    whole = (trained_run / "run" / "ckpt.pt").read_bytes()
    reasons = {
        b"": "the file is empty (0 bytes)",  # torch: EOFError(), shown as "()"
        b"hello\n": "not a file written by torch.save",  # torch: KeyError(101)
        b"PK\x03\x04 not a whole zip file": "the zip archive has no end (25 bytes)",
        whole[: len(whole) // 2]: "it was cut short",
    }
    for content, reason in reasons.items():
        (tmp_path / "bad.pt").write_bytes(content)
        assert main(["sample", "--checkpoint", str(tmp_path / "bad.pt")]) == 2
        err = capsys.readouterr().err
        assert "cannot be read: " in err and reason in err and "()" not in err
        # a file that never was a checkpoint (a wrong path) is not to be deleted
        assert ("Delete it" in err) == (reason != "not a file written by torch.save"), err
    assert main(["sample", "--checkpoint", str(tmp_path)]) == 2
    assert "is a folder, not a checkpoint file" in capsys.readouterr().err
    mismatched = load_checkpoint(trained_run / "run" / "ckpt.pt")
    mismatched["model_config"]["n_layer"] += 1
    torch.save(mismatched, tmp_path / "mismatched.pt")
    assert main(["sample", "--checkpoint", str(tmp_path / "mismatched.pt")]) == 2
    err = capsys.readouterr().err
    assert "its weights do not fit its model_config (blocks.1." in err and "more)" in err
    assert len(err.splitlines()) == 1 and len(err) < 300, err


def test_too_few_tokens_names_the_split(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    prepare(
        "To be, or not to be, that is the question. " * 5,
        "small",
        val_fraction=0.05,
        corpus="shakespeare",
    )
    assert main(["train", "--data", "small", "val_fraction=0.05", *TINY]) == 2
    err = capsys.readouterr().err
    assert "the val split of small: 11 tokens are too few for windows of block_size=32" in err


def test_unknown_config_key_lists_the_valid_ones(capsys):
    assert main(["train", "n_layers=2"]) == 2
    err = capsys.readouterr().err
    assert "unknown config key 'n_layers'" in err and "n_layer" in err and "learning_rate" in err
    assert main(["train", "dropout=lots"]) == 2
    assert "dropout must be float" in capsys.readouterr().err
    assert main(["train", "n_embd=30", "n_head=4"]) == 2
    assert "divisible by n_head" in capsys.readouterr().err


# One value per valid key, unlike TINY's and the config's, with where the run must show it.
KEY_VALUES = {
    "block_size": "16",
    "n_layer": "2",
    "n_head": "4",
    "n_embd": "32",
    "dropout": "0.1",
    "bias": "false",
    "activation": "gelu_tanh",
    "layer_norm_eps": "1e-06",
    "attention": "explicit",
    "max_iters": "7",
    "learning_rate": "0.002",
    "min_lr": "2e-05",
    "warmup_iters": "3",
    "lr_decay_iters": "5",
    "schedule": "noam",
    "weight_decay": "0.05",
    "beta1": "0.8",
    "beta2": "0.95",
    "grad_clip": "0.5",
    "grad_accum_steps": "2",
    "eval_interval": "5",
    "eval_iters": "3",
    "log_interval": "3",
    "checkpoint_interval": "4",
    "dtype": "fp32",
    "compile": "true",
    "split_across_cores": "false",
    "seed": "7",
    "progress": "true",
    "batch_size": "4",
    "corpus": "words",
    "val_fraction": "0.5",
}


def test_every_config_key_reaches_what_it_configures_or_is_refused(tmp_path, capsys, monkeypatch):
    """For each key the CLI accepts, the override shows in the model, the training settings,
    the batches or the data that ``train`` is handed; each key it sets from a flag is refused,
    naming the flag."""
    assert set(KEY_VALUES) == set(configs.valid_keys())
    monkeypatch.chdir(tmp_path)
    handed = []

    def fake_train(model, train_batches, config, val_batches, checkpoint_extra):
        handed.append(
            {
                "model": asdict(model.config),
                "train": asdict(config),
                "batch_size": train_batches.batch_size,
                "val_share": len(val_batches.tokens)
                / (len(train_batches.tokens) + len(val_batches.tokens)),
                "corpus": load_meta(checkpoint_extra["data_dir"])["corpus"],
            }
        )
        return TrainResult(val_losses=[(0, 1.0)])

    monkeypatch.setattr(cli, "train", fake_train)

    def handed_for(*overrides):
        args = [
            "train",
            "--out",
            "out",
            "--overwrite",
            "--device",
            "cpu",
            "--threads",
            "1",
            "corpus=names",
            *TINY,
            *overrides,
        ]
        assert main(args) == 0, capsys.readouterr().err
        return handed[-1]

    base = handed_for()
    for key, text in KEY_VALUES.items():
        value = configs.parse_overrides([f"{key}={text}"])[key]
        got = handed_for(f"{key}={text}")
        seen = {
            "batch_size": got["batch_size"],
            "corpus": got["corpus"],
            "val_fraction": round(got["val_share"], 2),
        }
        for part in ("model", "train"):
            seen.update({k: v for k, v in got[part].items() if k in KEY_VALUES})
        before = {
            **base["model"],
            **base["train"],
            "batch_size": base["batch_size"],
            "corpus": base["corpus"],
            "val_fraction": round(base["val_share"], 2),
        }
        assert seen[key] == value != before[key], key
    assert handed[-1]["train"]["threads"] == 1  # --threads, the one way to set threads
    for key, flag in configs.COMMAND_LINE_FLAGS.items():
        assert main(["train", f"{key}=1"]) == 2
        assert f"{key} is not a config key: use the flag {flag}" in capsys.readouterr().err
        assert key not in configs.valid_keys()


def test_prepared_data_must_match_corpus_and_val_fraction(trained_run, capsys, monkeypatch):
    monkeypatch.chdir(trained_run)
    assert main(["train", "--data", "data", "--out", "other", "corpus=names", *TINY]) == 2
    assert "data holds the corpus 'shakespeare', not 'names'" in capsys.readouterr().err
    assert main(["train", "--data", "data", "--out", "other", "val_fraction=0.2", *TINY]) == 2
    assert "not val_fraction=0.2; prepare it again" in capsys.readouterr().err


def test_threads_default_to_the_cpus_other_work_leaves_free(monkeypatch, capsys, trained_run):
    monkeypatch.setattr(cpu_linear, "_decision", cpu_linear.Decision(False, "not timed here"))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (8.2, 8.0, 7.5))
    assert cli.default_threads() == (1, "2 CPUs, load average 8.2")
    monkeypatch.setattr(os, "getloadavg", lambda: (0.1, 0.3, 0.2))
    assert cli.default_threads()[0] == 2
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert cli.default_threads() == (2, "OMP_NUM_THREADS")
    # sample takes the same setting
    set_to = []
    monkeypatch.setattr(torch, "set_num_threads", set_to.append)
    sample = [
        "sample",
        "--checkpoint",
        str(trained_run / "run" / "ckpt.pt"),
        "--device",
        "cpu",
        "--max-new-tokens",
        "3",
    ]
    assert main([*sample, "--threads", "1"]) == 0 and set_to == [1]
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setattr(os, "getloadavg", lambda: (8.2, 8.0, 7.5))
    assert main(sample) == 0 and set_to == [1, 1]
    assert "threads: 1 (2 CPUs, load average 8.2; --threads sets it)" in capsys.readouterr().err
    bench_starts = len(set_to)  # bench's first setting is --threads' (its timing may set more)
    assert (
        main(
            [
                "bench",
                "--device",
                "cpu",
                "--steps",
                "1",
                "--new-tokens",
                "2",
                "--threads",
                "1",
                *TINY[:5],
            ]
        )
        == 0
        and set_to[bench_starts] == 1
    )


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
    assert exit_.value.code == 0 and "The mini-llm command: prepare data" in listing
    for name, command in COMMANDS.items():
        assert name in listing
        with pytest.raises(SystemExit) as exit_:
            main([name, "--help"])
        assert exit_.value.code == 0 and command.help in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["prepare", "--help"])
    prepare_help = capsys.readouterr().out
    assert all(name in prepare_help for name in CORPORA)
    with pytest.raises(SystemExit) as exit_:
        main(["no-such-command"])
    assert exit_.value.code == 2 and "invalid choice" in capsys.readouterr().err


def test_version_named_configs_and_defaults_are_one_command_away(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"mini-llm {importlib.metadata.version('mini_llm')}"
    assert main(["config"]) == 0 and capsys.readouterr().out.split() == sorted(configs.CONFIGS)
    assert main(["config", "shakespeare-char-gpu", "n_layer=2"]) == 0
    printed = dict(line.split("=", 1) for line in capsys.readouterr().out.splitlines())
    expected = configs.settings_of(configs.resolve("shakespeare-char-gpu", ["n_layer=2"]))
    assert printed == {key: str(value) for key, value in expected.items()}
    assert printed["n_layer"] == "2" and printed["n_embd"] == "384"
    assert main(["config", "no-such-config"]) == 2
    assert "unknown config 'no-such-config'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["sample", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "tokens to generate (default: 500)" in shown and "(default: 1337)" in shown
    assert "(default: [])" not in shown and "default: None" not in shown


def test_a_config_sized_for_a_gpu_warns_on_the_cpu(trained_run, capsys, monkeypatch):
    monkeypatch.chdir(trained_run)
    command = ["train", "--config", "shakespeare-char-gpu", "--data", "data", "--out", "big"]
    assert main([*command, "--device", "cpu", *TINY, "max_iters=1", "compile=false"]) == 0
    out = capsys.readouterr().out
    assert "warning: shakespeare-char-gpu is sized for a GPU and this run is on the CPU" in out


def test_bench_runs_on_a_tiny_shape(capsys):
    assert main(["bench", "--device", "cpu", "--steps", "3", "--new-tokens", "8", *TINY[:5]]) == 0
    out = capsys.readouterr().out
    assert "ms/step" in out and "tokens/s with KV cache" in out
    assert "on cpu (float32)" in out  # as train() runs this config: float32, not compiled
    assert str(cpu_linear.decision()) in out  # which linear layers were timed, and why


def test_bench_says_whether_it_split_the_batch_across_cores(capsys):
    """Two threads split the rows (as train() would); the config key turns it off, and says so."""
    command = ["bench", "--device", "cpu", "--steps", "2", "--new-tokens", "4", "--threads", "2"]
    assert main([*command, *TINY[:5]]) == 0
    assert "batch rows split across 2 cores: one thread each" in capsys.readouterr().out
    assert main([*command, *TINY[:5], "split_across_cores=false"]) == 0
    assert "batch rows not split across cores: split_across_cores=False" in capsys.readouterr().out


def test_the_installed_mini_llm_command_runs_the_cli():
    (script,) = entry_points(group="console_scripts", name="mini-llm")
    assert script.load() is main
    executable = shutil.which("mini-llm", path=Path(sys.executable).parent)
    done = subprocess.run(
        [executable, "prepare", "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0 and COMMANDS["prepare"].help in done.stdout


def test_a_run_on_other_prepared_data_gets_a_folder_of_its_own(tmp_path, monkeypatch):
    """Without --out, a BPE run must neither land in nor resume the character run of its
    config: its default folder names the data."""
    monkeypatch.chdir(tmp_path)
    config = "shakespeare-char-cpu"
    assert cli.default_run_folder(config, None) == Path("runs") / config
    own = cli.default_data_dir("shakespeare")  # the config's own data, named or not
    assert cli.default_run_folder(config, own) == Path("runs") / config
    bpe = cli.default_data_dir("shakespeare", tokenizer="bpe", vocab_size=4096)
    assert cli.default_run_folder(config, bpe) == Path("runs") / f"{config}-shakespeare-bpe4096"
    # a resume without --out finds the same folder again
    assert cli.default_run_folder(config, bpe) == cli.default_run_folder(config, Path(str(bpe)))
