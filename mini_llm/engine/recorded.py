"""Recorded runs: experiments too long to train while a page builds, run once by one command
(``mini-llm record NAME``) and kept as a results file that the page renders.

A recording is ``book/results/NAME.json``; beside it may sit small checkpoints
(``NAME*.safetensors``, float16, each at most ``MAX_CHECKPOINT_BYTES``). The JSON's layout
(``schema`` 1)::

    {"schema": 1, "name": "ch11-gpt-cpu", "command": "mini-llm record ch11-gpt-cpu",
     "commit": "4f17547... (+ uncommitted changes)", "date": "2026-12-01T12:00:00Z",
     "hardware": {"device": "cpu", "name": "AMD EPYC ...", "driver": "n/a", "capability": "AVX2",
                  "cores": 2, "torch": "2.13.0+cpu", "python": "3.11.2"},
     "wall_seconds": 171.2, "tiny": false,
     "results": {...what the experiment measured: settings, metrics, curves, samples...},
     "checkpoints": {"model": "ch11-gpt-cpu.safetensors"}}

Pages read recordings with :func:`read_recording`, which refuses a damaged file, another
layout or a tiny (smoke-test) recording, naming the file; no number on a page is typed in.
"""

from __future__ import annotations

import copy
import json
import os
import platform
import subprocess
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import torch

SCHEMA = 1
RESULTS_DIR = Path(__file__).resolve().parents[2] / "book" / "results"
MAX_CHECKPOINT_BYTES = 5 * 1024 * 1024
REQUIRED = ("schema", "name", "command", "commit", "date", "hardware", "wall_seconds", "results")


class RecordingError(ValueError):
    """A recording that is missing, damaged, of another layout, or only a smoke test."""


def commit(named_by: str = "MINI_LLM_COMMIT") -> str:
    """The repository's commit, marked when tracked files have changes. A tree copied to
    another machine without its ``.git`` (or with a stale one) names it in ``$named_by``."""
    if os.environ.get(named_by):
        return f"{os.environ[named_by]} (named by the caller)"
    root = Path(__file__).resolve().parents[2]

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, timeout=30, check=True
        ).stdout.strip()

    try:
        head, dirty = git("rev-parse", "HEAD"), git("status", "--porcelain", "-uno")
    except (OSError, subprocess.SubprocessError):
        return "unknown (not a git checkout)"
    return f"{head} (+ uncommitted changes)" if dirty else head


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_driver() -> str:
    try:
        return subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown (nvidia-smi failed)"


def hardware(device: torch.device | str = "cpu") -> dict:
    """What a run's speed and rounding depend on: the processor and its vector units, or the
    GPU and its driver, and the versions."""
    device = torch.device(device)
    common = {"torch": torch.__version__, "python": platform.python_version()}
    if device.type == "cuda":
        return {
            "device": "cuda",
            "name": torch.cuda.get_device_name(device),
            "driver": gpu_driver(),
            "cuda": torch.version.cuda,
            "cpu": cpu_name(),
            **common,
        }
    return {
        "device": device.type,
        "name": cpu_name(),
        "driver": "n/a",
        "capability": torch.backends.cpu.get_cpu_capability(),
        "cores": os.cpu_count(),
        **common,
    }


def write_recording(
    name: str,
    results: dict,
    *,
    command: str,
    wall_seconds: float,
    device: torch.device | str = "cpu",
    tiny: bool = False,
    checkpoints: dict[str, str] | None = None,
    out_dir: str | Path = RESULTS_DIR,
    at_commit: str | None = None,
) -> Path:
    """Write ``out_dir/NAME.json`` atomically (a crash leaves the earlier file whole).

    ``at_commit`` is :func:`commit` as it was when the run started (the code that ran)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    recording = {
        "schema": SCHEMA,
        "name": name,
        "command": command,
        "commit": at_commit or commit(),
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "hardware": hardware(device),
        "wall_seconds": round(wall_seconds, 1),
        "tiny": tiny,
        "results": results,
        "checkpoints": checkpoints or {},
    }
    path = out_dir / f"{name}.json"
    with tempfile.NamedTemporaryFile("w", dir=out_dir, suffix=".tmp", delete=False) as file:
        json.dump(recording, file, indent=1)
        file.write("\n")
    os.chmod(file.name, 0o644)
    os.replace(file.name, path)
    return path


def read_recording(name: str, results_dir: str | Path = RESULTS_DIR, allow_tiny=False) -> dict:
    """The recording ``NAME`` from ``results_dir``, checked; ``RecordingError`` names the file
    and what is wrong with it (and how to make it, when it is missing)."""
    path = Path(results_dir) / f"{name}.json"
    if not path.exists():
        raise RecordingError(f"{path} is missing: record it with `mini-llm record {name}`")
    try:
        recording = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise RecordingError(f"{path} is not a readable JSON recording: {err}") from err
    if not isinstance(recording, dict) or recording.get("schema") != SCHEMA:
        found = recording.get("schema") if isinstance(recording, dict) else None
        raise RecordingError(
            f"{path} has schema {found!r}, not {SCHEMA}: it was written by another version of "
            f"mini_llm; record it again with `mini-llm record {name}`"
        )
    missing = [key for key in REQUIRED if key not in recording]
    if missing:
        raise RecordingError(f"{path} lacks {', '.join(missing)}")
    if recording["name"] != name:
        raise RecordingError(f"{path} records {recording['name']!r}, not {name!r}")
    if recording.get("tiny") and not allow_tiny:
        raise RecordingError(
            f"{path} is a tiny smoke-test recording (`--tiny`), not a result: record it with "
            f"`mini-llm record {name}`"
        )
    return recording


def checkpoint_path(recording: dict, key: str, results_dir: str | Path = RESULTS_DIR) -> Path:
    """Where the recording's checkpoint ``key`` is; ``RecordingError`` when it is missing."""
    try:
        path = Path(results_dir) / recording["checkpoints"][key]
    except KeyError:
        raise RecordingError(f"the recording {recording['name']!r} has no checkpoint {key!r}")
    if not path.exists():
        raise RecordingError(
            f"{path} is missing: record it with `mini-llm record {recording['name']}`"
        )
    return path


def save_weights(model: torch.nn.Module, path: str | Path) -> int:
    """Save ``model``'s weights in float16 safetensors (tied tensors once); return the bytes.

    Float16 halves the file; a model read back from it is the one a page evaluates, so its
    recorded losses are those of these very weights."""
    from safetensors.torch import save_model

    path = Path(path)
    with tempfile.TemporaryDirectory(dir=path.parent) as folder:
        staged = Path(folder) / path.name
        save_model(_half_copy(model), str(staged))  # save_model stores tied tensors once
        size = staged.stat().st_size
        if size > MAX_CHECKPOINT_BYTES:
            raise RecordingError(
                f"{path.name} would be {size / 2**20:.1f} MiB, over the "
                f"{MAX_CHECKPOINT_BYTES / 2**20:.0f} MiB a committed checkpoint may take"
            )
        os.chmod(staged, 0o644)
        os.replace(staged, path)
    return size


def _half_copy(model: torch.nn.Module) -> torch.nn.Module:
    return copy.deepcopy(model).half()


def load_weights(model: torch.nn.Module, path: str | Path) -> torch.nn.Module:
    """Load weights saved by :func:`save_weights` into ``model`` (kept in its own dtype)."""
    from safetensors.torch import load_model

    half = _half_copy(model)
    try:
        load_model(half, str(path))
    except (OSError, RuntimeError, ValueError) as err:
        raise RecordingError(f"{path} does not hold this model's weights: {err}") from err
    dtypes = {name: tensor.dtype for name, tensor in model.state_dict().items()}
    model.load_state_dict({k: v.to(dtypes[k]) for k, v in half.state_dict().items()})
    return model
