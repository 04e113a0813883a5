"""benchmarks/gpu_check.sh runs end to end on the CPU with a tiny override, and its results file
reads back through mini_llm.engine.results, which refuses it as a GPU result; chapter 12's
table and figures of it (book/booklib/gpu_results.py) are made from it."""

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from booklib.gpu_results import (
    ablation_label,
    plot_attention,
    plot_curves_in_bits,
    plot_step_comparisons,
    step_mfu,
    summary_rows,
    timing_spread,
)

from mini_llm.engine.data import load_split
from mini_llm.engine.results import ResultsError, interval_means, read_gpu_results
from mini_llm.experiments import ch11_gpt_cpu
from mini_llm.experiments.shakespeare import held_out_windows
from mini_llm.flops import mfu

ROOT = Path(__file__).resolve().parents[1]
TINY = [
    "device=cpu",
    "n_layer=1",
    "n_head=2",
    "n_embd=32",
    "block_size=64",  # chapter 11's held-out windows are read at 64 characters
    "batch_size=4",
    "max_iters=20",
    "eval_interval=10",
    "eval_iters=2",
    "compile=false",
    "dropout=0",
]


def run_check(results: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), *TINY, *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHON": sys.executable,
            "RESULTS": str(results),
            "ABLATION_STEPS": "2",
        },
    )


@pytest.mark.slow  # the whole script: prepare, train, short comparisons (make check leaves it out)
def test_gpu_check_script_runs_on_cpu_and_writes_one_results_file(tmp_path):
    results = tmp_path / "smoke.json"
    done = run_check(results)
    assert done.returncode == 0, done.stderr[-3000:]
    for label in ("tokens/s", "MFU", "val loss", "peak memory", "20 steps of 4x64 tokens"):
        assert label in done.stdout
    assert "on chapter 11's held-out windows" in done.stdout
    assert list(tmp_path.iterdir()) == [results]  # one file, nothing else
    with pytest.raises(ResultsError, match="not on a CUDA GPU"):
        read_gpu_results(results)
    smoke = read_gpu_results(results, require_gpu=False)
    assert smoke["hardware"]["device"] == "cpu" and smoke["peak_flops"] is None
    assert smoke["train"]["steps"] == 20 and smoke["train"]["mfu"] is None
    assert [step for step, _ in smoke["train"]["val_losses"]] == [0, 10, 20]
    assert smoke["command"].startswith("benchmarks/gpu_check.sh device=cpu")
    assert len(smoke["commit"]) >= 40 or smoke["commit"].startswith("unknown")
    assert [(a["what"], a["setting"]) for a in smoke["ablations"]] == [
        ("compile", "off"),  # compile=false: no compiled run
        ("precision", "auto (fp32 on CPU)"),
        ("precision", "fp32"),
    ]
    lengths = [(row["block_size"], row["attention"]) for row in smoke["attention"]]
    assert lengths == [(1024, "fused"), (1024, "explicit"), (2048, "fused"), (2048, "explicit")]
    assert all(row["ms_per_step"] > 0 for row in smoke["attention"] + smoke["ablations"])
    check_the_language_model(smoke)
    check_the_figures(smoke)
    assert "short run: eager, fp32, timed again" in dict(summary_rows(smoke))  # the repeat


def check_the_language_model(smoke: dict) -> None:
    """The smoke file records the trained model as chapter 12 shows it: bits per character on
    chapter 11's windows and at its own context, chapter 11's samples, the training curve."""
    run, bits = smoke["train"], smoke["bits_per_character"]
    val_ids = load_split(ROOT / "data" / "prepared" / "shakespeare-char", "val")
    held_out = held_out_windows(val_ids)  # the windows chapter 11 scores every model on
    assert (bits["held_out"]["windows"], bits["held_out"]["window"]) == tuple(held_out.shape)
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    assert bits["held_out"]["sha256"] == gpu_check.windows_digest(held_out)
    own = bits["own_context"]
    assert own["window"] == run["block_size"] + 1 and own["val_characters"] == len(val_ids)
    assert own["windows"] == len(val_ids) // own["window"]  # they tile the validation text
    # in bits, not nats: both scores are near the run's last validation estimate over ln 2
    last = run["val_losses"][-1][1] / math.log(2)
    for score in (bits["held_out"]["bits_per_character"], own["bits_per_character"]):
        assert score == pytest.approx(last, abs=0.15)
    assert bits["precision"] == "float32"
    samples = smoke["samples"]
    assert samples["settings"] == ch11_gpt_cpu.SAMPLE_SETTINGS  # chapter 11's, to compare
    assert [s["prompt"] for s in samples["texts"]] == ch11_gpt_cpu.PROMPTS
    assert [s["seed"] for s in samples["texts"]] == [
        ch11_gpt_cpu.SEED + number for number in range(len(ch11_gpt_cpu.PROMPTS))
    ]
    for sample in samples["texts"]:  # one character a token: the prompt, then the new ones
        assert sample["text"].startswith(sample["prompt"])
        assert len(sample["text"]) == len(sample["prompt"]) + samples["settings"]["max_new_tokens"]
    assert len({s["text"][len(s["prompt"]) :] for s in samples["texts"]}) == 3
    means = run["train_loss_means"]
    assert [step for step, _ in means] == [10, 20]
    assert all(math.isfinite(loss) and 0 < loss < 10 for _, loss in means)


def check_the_figures(smoke: dict) -> None:
    run, tokens = smoke["train"], smoke["train"]["batch_size"] * smoke["train"]["block_size"]
    curves = plot_curves_in_bits(smoke).axes[0]  # what chapter 12 draws from a GPU file
    val, train, star = curves.lines
    assert list(val.get_xdata()) == [10 * tokens, 20 * tokens]  # step 0 read nothing
    assert list(val.get_ydata()) == pytest.approx(
        [loss / math.log(2) for _, loss in run["val_losses"][1:]]
    )
    assert list(train.get_ydata()) == pytest.approx(
        [loss / math.log(2) for _, loss in run["train_loss_means"]]
    )
    assert list(star.get_ydata()) == [smoke["bits_per_character"]["held_out"]["bits_per_character"]]
    assert curves.get_xscale() == "log" and curves.get_ylabel() == "bits per character"
    comparisons = plot_step_comparisons(smoke).axes[0]
    assert len(comparisons.containers[0]) == len(smoke["ablations"])
    for axes in plot_attention(smoke).axes:
        assert [line.get_label() for line in axes.lines] == ["fused", "explicit"]


def test_a_model_that_cannot_read_chapter_11s_windows_is_refused_at_once(tmp_path):
    done = run_check(tmp_path / "smoke.json", "block_size=32")
    assert done.returncode != 0 and "held-out windows of 65 characters" in done.stderr
    assert not (tmp_path / "smoke.json").exists()


def test_a_cpu_run_is_refused_a_place_in_the_book(tmp_path):
    target = ROOT / "book" / "results" / "smoke-test-must-not-exist.json"
    done = run_check(target, "max_iters=1")
    assert done.returncode != 0
    assert "not a GPU result" in done.stderr
    assert not target.exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not a readable JSON"),
        (json.dumps({"schema": 0}), "schema 1"),
        (json.dumps({"schema": 1, "date": "x"}), "lacks command"),
    ],
)
def test_damaged_results_files_are_clear_errors(tmp_path, content, message):
    path = tmp_path / "gpu_check.json"
    path.write_text(content)
    with pytest.raises(ResultsError, match=message):
        read_gpu_results(path)


def test_no_file_means_no_run_recorded(tmp_path):
    assert read_gpu_results(tmp_path / "gpu_check.json") is None


def test_the_commit_named_by_the_caller_wins_over_a_copied_git_folder(monkeypatch):
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    monkeypatch.delenv("GPU_CHECK_COMMIT", raising=False)
    here = gpu_check.commit()
    assert len(here.split()[0]) == 40  # this checkout's own HEAD
    monkeypatch.setenv("GPU_CHECK_COMMIT", "0123abcd")
    assert gpu_check.commit() == "0123abcd (named by the caller)"


def recorded_run() -> dict:
    """A GPU results file with every measurement chapter 12 describes (numbers made up)."""
    ablation = {"kernels_per_step": 500.0, "gpu_busy_ms_per_step": 8.0}
    results = {
        "hardware": {"device": "cuda", "name": "GPU X", "driver": "1", "torch": "2.0"},
        "date": "2026-01-02T03:04:05Z",
        "commit": "abc",
        "peak_flops": 1e15,
        "train": {
            "config": "tiny",
            "steps": 100,
            "train_seconds": 30.0,
            "tokens_per_s": 100 * 4 * 8 / 30.0,
            "peak_memory_gib": 1.0,
            "batch_size": 4,
            "block_size": 8,
            "parameters": 1000,
            "flops_per_token": 6000.0,
            "mfu": 0.01,
            "val_losses": [[0, 4.0], [50, 2.0], [100, 1.5]],
        },
        "ablations": [
            {"what": "compile", "setting": "on", "ms_per_step": 12.0, **ablation},
            {"what": "compile", "setting": "on, CUDA graphs", "ms_per_step": 6.0},
            {"what": "compile", "setting": "off", "ms_per_step": 15.0, **ablation},
            {"what": "precision", "setting": "bf16", "ms_per_step": 20.0},
            {"what": "precision", "setting": "fp32 (TF32 products)", "ms_per_step": 17.0},
        ],
        "attention": [
            {
                "block_size": t,
                "attention": k,
                "batch_size": 8,
                "ms_per_step": ms,
                "peak_memory_gib": gib,
            }
            for t, k, ms, gib in [
                (1024, "fused", 20.0, 1.0),
                (1024, "explicit", 30.0, 3.0),
                (2048, "fused", 20.0, 2.0),
                (2048, "explicit", 70.0, 12.0),
            ]
        ],
    }
    for row in results["ablations"]:  # as gpu_check.py writes it
        row["tokens_per_s"] = 4 * 8 / row["ms_per_step"] * 1000
    return results


def test_the_table_gives_both_mfus_and_labels_the_wall_clock():
    results = recorded_run() | {"peak_source": "dense bf16 peak (data sheet)"}
    rows = dict(summary_rows(results))
    assert rows["date"] == "2026-01-02"  # no raw timestamp
    assert rows["MFU, wall clock"] == "1.0% of 1000 TFLOP/s, the dense bf16 peak (data sheet)"
    compiled = results["ablations"][0]
    assert step_mfu(results, compiled) == pytest.approx(mfu(32 / 0.012, 6000.0, 1e15))
    assert rows["MFU, compiled training step alone"] == (
        f"{step_mfu(results, compiled):.1%} (12.0 ms a step)"
    )
    assert "training run, wall clock" in rows and "tokens/s, wall clock" in rows
    # the repeat of the eager step is named as one
    assert "short run: eager, bf16, timed again" in rows
    assert "short run: compiled with CUDA graphs, bf16" in rows
    assert timing_spread(results) == (15.0, 20.0)


def test_the_figures_draw_the_file_in_labelled_units():
    results = recorded_run()
    comparisons = plot_step_comparisons(results).axes[0]
    assert comparisons.get_xlabel().startswith("M tokens/s")
    bars = comparisons.containers[0]
    labels = [tick.get_text() for tick in comparisons.get_yticklabels()]
    shown = dict(zip(labels, (bar.get_width() for bar in bars), strict=True))
    assert shown["eager, bf16"] == pytest.approx(32 / 15.0 / 1000)  # M tokens/s
    assert shown["compiled with CUDA graphs, bf16"] == pytest.approx(32 / 6.0 / 1000)
    repeat = labels.index("eager, bf16, timed again")
    assert bars[repeat].get_hatch() == ".."  # the repeat is marked
    assert sorted(labels) == sorted(ablation_label(results, row) for row in results["ablations"])
    assert labels[:2] == ["eager, bf16", "eager, bf16, timed again"]  # eager rows first
    assert "timed twice" in comparisons.get_legend().get_texts()[0].get_text()
    times, memory = plot_attention(results).axes
    for axes, key in ((times, "ms_per_step"), (memory, "peak_memory_gib")):
        assert axes.get_xscale() == axes.get_yscale() == "log"
        explicit = [r[key] for r in results["attention"] if r["attention"] == "explicit"]
        assert list(axes.lines[1].get_ydata()) == explicit


def test_the_curves_are_in_bits_against_tokens_read_and_draw_what_the_file_holds():
    results = recorded_run()  # recorded before the language-model figures: one line
    (val,) = plot_curves_in_bits(results).axes[0].lines
    assert list(val.get_xdata()) == [50 * 32, 100 * 32]
    assert list(val.get_ydata()) == pytest.approx([2.0 / math.log(2), 1.5 / math.log(2)])
    results["train"]["train_loss_means"] = [[50, 3.0], [100, 1.8]]
    results["bits_per_character"] = {"held_out": {"bits_per_character": 2.5}}
    reference = {
        "label": "CPU",
        "tokens_per_step": 10,
        "val_losses": [[0, 4.0], [20, 3.0]],
        "train_loss_means": [],
        "held_out": 4.2,
    }
    axes = plot_curves_in_bits(results, reference).axes[0]
    assert [line.get_label().split(": ")[-1] for line in axes.lines] == [
        "validation estimate",
        "training loss",
        "held-out windows",
        "validation estimate",
        "held-out windows",
    ]
    assert list(axes.lines[2].get_xdata()) == [100 * 32]  # the star at the run's end
    assert list(axes.lines[3].get_xdata()) == [200] and list(axes.lines[4].get_ydata()) == [4.2]


def test_training_losses_are_averaged_over_each_evaluation_interval():
    losses = [[step, float(step)] for step in range(1, 21)]  # step s: the s-th update's loss
    assert interval_means(losses, [0, 10, 20]) == [[10, 5.5], [20, 15.5]]
    assert interval_means(losses, [0]) == []


def test_a_file_recorded_before_the_language_model_figures_stays_readable(tmp_path):
    committed = read_gpu_results(ROOT / "book" / "results" / "gpu_check.json")
    assert committed is not None
    lacking = {key: value for key, value in committed.items() if key not in ("samples",
               "bits_per_character")}  # fmt: skip
    path = tmp_path / "gpu_check.json"
    path.write_text(json.dumps(lacking))
    assert read_gpu_results(path)["train"] == committed["train"]
    # where the new keys are there, their parts are checked
    partial = lacking | {"bits_per_character": {"held_out": {"bits_per_character": 1.9}}}
    path.write_text(json.dumps(partial))
    with pytest.raises(ResultsError, match="'bits_per_character' lacks own_context"):
        read_gpu_results(path)
    samples = {"settings": {"max_new_tokens": 4, "temperature": 1.0}, "texts": [{"prompt": "A"}]}
    path.write_text(json.dumps(lacking | {"samples": samples}))
    with pytest.raises(ResultsError, match=r"samples.texts\[0\]' lacks seed, text"):
        read_gpu_results(path)
