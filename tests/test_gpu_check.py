"""benchmarks/gpu_check.sh runs end to end on the CPU with a tiny override, and its results file
reads back through mini_llm.gpu_results, which refuses it as a GPU result."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mini_llm.gpu_results import (
    ResultsError,
    describe_gpu_results,
    plot_gpu_results,
    read_gpu_results,
)

ROOT = Path(__file__).resolve().parents[1]
TINY = [
    "device=cpu",
    "n_layer=1",
    "n_head=2",
    "n_embd=32",
    "block_size=32",
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
    for label in ("tokens/s", "MFU", "val loss", "peak memory", "20 steps of 4x32 tokens"):
        assert label in done.stdout
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
    figure = plot_gpu_results(smoke)  # what chapter 12 draws from a GPU file
    loss, comparisons, attention = figure.axes
    assert [list(p) for p in zip(*loss.lines[0].get_data())] == smoke["train"]["val_losses"]
    assert len(comparisons.patches) == len(smoke["ablations"])
    assert [line.get_label() for line in attention.lines] == ["fused", "explicit"]
    assert smoke["hardware"]["name"] in figure.get_suptitle()


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
    return {
        "peak_flops": 1e15,
        "train": {
            "steps": 100,
            "train_seconds": 30.0,
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


def test_the_description_words_each_comparison_by_the_numbers():
    results = recorded_run()
    text = describe_gpu_results(results)
    assert "fell from 4.00 to 1.500" in text and "an evaluation every 50 steps" in text
    assert "only 8.0 ms of it (53%)" in text and "one every 30 µs" in text
    assert "the step falls to 12.0 ms" in text
    assert "2.5 times as fast as eager and 2.0 times as fast as compiled" in text
    assert "15.0 and 20.0 ms, 33% apart" in text and "took 17.0 ms, between the two" in text
    assert (
        "6.0 times as much" in text
        and "memory grows 4.0-fold and the fused step's 2.0-fold" in text
    )
    results["ablations"][0]["ms_per_step"] = 16.0  # compiled slower than eager
    results["ablations"][4]["ms_per_step"] = 25.0  # TF32 outside the two bf16 timings
    text = describe_gpu_results(results)
    assert "the step rises to 16.0 ms" in text and "took 25.0 ms, outside them" in text


def test_the_description_leaves_out_what_the_file_does_not_measure():
    results = recorded_run()
    results["ablations"] = [row for row in results["ablations"] if row["what"] == "precision"]
    results["attention"] = []
    text = describe_gpu_results(results)
    assert "fell from 4.00 to 1.500" in text
    for absent in ("kernels", "CUDA graphs", "timed twice", "explicit attention"):
        assert absent not in text
