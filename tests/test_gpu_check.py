"""benchmarks/gpu_check.sh runs end to end on the CPU with a tiny override, and its results file
reads back through mini_llm.engine.results, which refuses it as a GPU result; chapter 12's
table, figure and text of it (book/booklib/gpu_results.py) are made from it."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from booklib.gpu_results import (
    describe_gpu_results,
    plot_gpu_results,
    step_mfu,
    summary_rows,
    summary_sentence,
    timing_spread,
)

from mini_llm.engine.results import ResultsError, read_gpu_results
from mini_llm.flops import mfu

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
    loss, comparisons, times, memory = figure.axes
    assert [list(p) for p in zip(*loss.lines[0].get_data())] == smoke["train"]["val_losses"]
    assert len(comparisons.containers[0]) == len(smoke["ablations"])
    for axes in (times, memory):
        assert [line.get_label() for line in axes.lines] == ["fused", "explicit"]
    assert smoke["hardware"]["name"] in figure.get_suptitle()
    assert summary_sentence(smoke).startswith("the recorded GPU run has no profiled step")
    assert "short run: eager, fp32, timed again" in dict(summary_rows(smoke))  # the repeat


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


def test_the_description_words_each_comparison_by_the_numbers():
    results = recorded_run()
    text = " ".join(describe_gpu_results(results).split())
    assert "fell from 4.00 to 1.500" in text and "3 evaluations" in text
    assert "(one every 50 steps)" in text and "30 s of wall clock" in text
    # the compiled step alone: 100 steps of 12 ms are 1.2 s, 4% of the run's 30 s
    assert "takes 12.0 ms: 100 of them make 1 s, 4% of the run's wall clock" in text
    step = mfu(4 * 8 / 0.012, 6000.0, 1e15)
    assert "1.0% over the wall clock" in text and f"{step:.1%} for the training step" in text
    assert "only 8.0 ms of it (53%)" in text and "one every 30 µs" in text
    assert "the step falls to 12.0 ms" in text and "default mode" in text
    assert "2.5 times as fast as eager and 2.0 times as fast as compiled" in text
    # the spread of the same step timed twice decides which effects are worded as real
    assert "15.0 and 20.0 ms, 33% apart" in text
    assert "compilation's 1.25× over eager is within it" in text
    assert "CUDA graphs' 2.50× over eager is beyond it" in text
    assert "took 17.0 ms, between the two: this run cannot tell" in text
    assert (
        "6.0 times as much" in text
        and "memory grows 4.0-fold and the fused step's 2.0-fold" in text
    )
    assert "The fused step took 20.0 ms at 1,024 tokens and 20.0 ms at 2,048" in text
    assert "twice the tokens in no more time, a difference within the spread" in text
    results["ablations"][0]["ms_per_step"] = 16.0  # compiled slower than eager
    results["ablations"][4]["ms_per_step"] = 25.0  # TF32 outside the two bf16 timings
    results["attention"][2]["ms_per_step"] = 40.0  # fused: twice the time at twice the tokens
    text = " ".join(describe_gpu_results(results).split())
    assert "the step rises to 16.0 ms" in text and "took 25.0 ms, slower than both" in text
    assert "compilation's" not in text  # no gain to word
    assert "2.00 times the time, a difference beyond the spread" in text
    assert "waits on something other than its arithmetic" not in text
    results["ablations"][4]["ms_per_step"] = 10.0
    assert "took 10.0 ms, faster than both" in describe_gpu_results(results)


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


def test_the_summary_sentence_says_which_gains_stand_out_of_the_spread():
    text = summary_sentence(recorded_run())
    assert "kept the GPU busy for 53% of its time" in text
    assert "compilation made it 1.25 times as fast (within the spread" in text
    assert "CUDA graphs made it 2.50 times as fast" in text
    assert text.count("within the spread") == 1


def test_the_figure_draws_the_file_in_labelled_units():
    results = recorded_run()
    figure = plot_gpu_results(results)
    _, comparisons, times, memory = figure.axes
    assert figure.get_suptitle() == "GPU X, PyTorch 2.0"  # no timestamp
    assert comparisons.get_xlabel().startswith("M tokens/s")
    bars = comparisons.containers[0]
    labels = [tick.get_text() for tick in comparisons.get_yticklabels()]
    shown = dict(zip(labels, (bar.get_width() for bar in bars), strict=True))
    assert shown["eager, bf16"] == pytest.approx(32 / 15.0 / 1000)  # M tokens/s
    assert shown["compiled with CUDA graphs, bf16"] == pytest.approx(32 / 6.0 / 1000)
    repeat = labels.index("eager, bf16, timed again")
    assert bars[repeat].get_hatch() == ".."  # the repeat is marked
    assert "timed twice" in comparisons.get_legend().get_texts()[0].get_text()
    for axes, key in ((times, "ms_per_step"), (memory, "peak_memory_gib")):
        assert axes.get_xscale() == axes.get_yscale() == "log"
        explicit = [r[key] for r in results["attention"] if r["attention"] == "explicit"]
        assert list(axes.lines[1].get_ydata()) == explicit


def test_the_description_leaves_out_what_the_file_does_not_measure():
    results = recorded_run()
    results["ablations"] = [row for row in results["ablations"] if row["what"] == "precision"]
    results["attention"] = []
    text = describe_gpu_results(results)
    assert "fell from 4.00 to 1.500" in text
    for absent in ("kernels", "CUDA graphs", "timed twice", "explicit attention"):
        assert absent not in text
