"""benchmarks/gpu_check.sh runs end to end on the CPU with a tiny override."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # the whole script: prepare, train, sample (make check leaves it out)
def test_gpu_check_script_runs_on_cpu_with_a_tiny_override(tmp_path):
    done = subprocess.run(
        [
            "bash",
            str(ROOT / "benchmarks" / "gpu_check.sh"),
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
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable, "OUT": str(tmp_path / "run")},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for label in ("tokens/s", "MFU", "val loss", "peak memory"):
        assert label in done.stdout
    assert "20 steps of 4x32 tokens" in done.stdout
    assert (tmp_path / "run" / "ckpt.pt").exists()
