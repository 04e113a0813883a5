"""Run an exported package's parts on their visible tests and compare them with the reference.

The learner's code runs in a child process (:func:`run`), never in the caller's: under the
grader's resource limits always, and inside the grader's OS sandbox (bubblewrap, no network, no
view of the course's files) with ``sandbox=True``, as an instructor must when checking a
student's export. The child (``python -m mini_llm.learner.probe FOLDER [--compare]``):

1. imports each chapter module (an import error marks that chapter's parts as ``error``);
2. runs each present part's visible tests with the part bound to its name, recording the
   arguments of every call -- the tests' own inputs are the probe inputs, and the parts the GPT
   calls get a few more at the GPT's own shapes (:func:`model_shaped_calls`);
3. with ``--compare``, calls the learner's part and the reference on copies of each recorded
   call, from the same random state, and measures the largest difference of the results.

It prints one JSON report after a marker line; everything the learner's code prints is kept
out of it.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import io
import json
import math
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from mini_llm.grading.limits import CELL_CPU_S
from mini_llm.learner import adapters
from mini_llm.learner.export import LearnerError, read_manifest
from mini_llm.learner.registry import PARTS

MARKER = "=== mini-llm learner probe report ==="
RTOL, ATOL = 1e-4, 1e-6
"""a result deviates where |yours - reference| > ATOL + RTOL·|reference| anywhere"""
INSIDE = "/home/student/learner"
"""where the exported folder is visible inside the sandbox"""
PART_CPU_S = CELL_CPU_S
"""CPU seconds a part may use for its visible tests, and again for the comparison (as a test
cell when graded): a part that never returns is named, and the others still run"""


class PartTimeout(BaseException):
    """A part ran past its CPU time. Not an ``Exception``: the learner's ``except Exception``
    must not swallow it."""


@contextlib.contextmanager
def _cpu_limit(seconds: float):
    """Raise :class:`PartTimeout` in the code inside once the process has used ``seconds``
    more CPU time (a Python loop is stopped between two of its steps)."""

    def stop(signum, frame):
        raise PartTimeout

    previous = signal.signal(signal.SIGPROF, stop)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def _too_long(seconds: float) -> str:
    return f"did not return within {seconds:g} s of CPU time (a loop that never ends?)"


# ------------------------------------------------------------------------------ the child
def _load(folder: Path, assignment: str):
    from mini_llm.learner.swap import load_modules

    return load_modules(folder, {"files": [f"{assignment}.py"]})[assignment]


def _recording(function, calls: list):
    """``function``, keeping a copy of the arguments of every call (classes are not wrapped:
    tests use them with ``isinstance``)."""
    if inspect.isclass(function):
        return function

    @functools.wraps(function)
    def recorded(*args, **kwargs):
        try:
            calls.append(copy.deepcopy((args, kwargs)))
        except Exception:  # noqa: BLE001 - an argument that cannot be copied: not compared
            calls.append(None)
        return function(*args, **kwargs)

    return recorded


def _visible_tests(name: str, function, code: str) -> tuple[str, str, list]:
    """(outcome, message, recorded calls) of the part's visible tests."""
    calls: list = []
    if not code.strip():
        return "no tests", "", calls
    namespace = {"__name__": "__exercise__", name: _recording(function, calls)}
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed), np.errstate(all="ignore"):
            exec(compile(code, f"<{name}_tests>", "exec"), namespace)  # noqa: S102 - their tests
    except NotImplementedError:
        return "missing", "raises NotImplementedError", calls
    except AssertionError as err:
        return "fail", str(err).strip().splitlines()[0] if str(err).strip() else "", calls
    except Exception as err:  # noqa: BLE001 - the learner's code may raise anything
        return "error", f"{type(err).__name__}: {err}", calls
    return "pass", "", calls


def _outcome(function, call):
    """The result of ``function`` on a copy of ``call``, or the exception it raised, from a
    fixed random state (so that parts that draw random numbers are compared fairly)."""
    args, kwargs = copy.deepcopy(call)
    torch.manual_seed(0)
    np.random.seed(0)
    try:
        with contextlib.redirect_stdout(io.StringIO()), np.errstate(all="ignore"):
            return function(*args, **kwargs), None
    except Exception as err:  # noqa: BLE001 - compared with what the reference does
        return None, type(err).__name__


def difference(yours, reference) -> tuple[float, str]:
    """The largest |yours - reference| (scaled: beyond ATOL + RTOL·|reference|) and, where the
    results cannot be compared number by number, why (e.g. another shape)."""
    if isinstance(reference, torch.nn.Module) or isinstance(yours, torch.nn.Module):
        return 0.0, ""
    if isinstance(reference, (list, tuple)) and not _is_numeric_sequence(reference):
        if not isinstance(yours, (list, tuple)) or len(yours) != len(reference):
            return math.inf, f"returns {_describe(yours)}, the reference {_describe(reference)}"
        return _worst(difference(a, b) for a, b in zip(yours, reference, strict=True))
    if isinstance(reference, dict):
        if not isinstance(yours, dict) or set(yours) != set(reference):
            return math.inf, f"returns {_describe(yours)}, the reference {_describe(reference)}"
        return _worst(difference(yours[key], reference[key]) for key in reference)
    if isinstance(reference, (str, bytes, type(None))):
        return (0.0, "") if yours == reference else (math.inf, f"{yours!r} != {reference!r}")
    try:
        a = np.asarray(_numbers(yours), dtype=np.float64)
        b = np.asarray(_numbers(reference), dtype=np.float64)
    except (TypeError, ValueError):
        return (0.0, "") if yours == reference else (math.inf, f"{yours!r} != {reference!r}")
    if a.shape != b.shape:
        return math.inf, f"shape {a.shape}, the reference's {b.shape}"
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    gap = np.where(same, 0.0, np.abs(a - b))
    excess = np.where(same, 0.0, gap - ATOL - RTOL * np.abs(b))
    if not excess.size:
        return 0.0, ""
    return float(np.nan_to_num(gap, nan=math.inf).max()), "" if excess.max() <= 0 else "deviates"


def _numbers(value):
    if isinstance(value, torch.Tensor):
        return value.detach().double().cpu().numpy() if value.dtype != torch.bool else value.cpu()
    return value


def _is_numeric_sequence(value) -> bool:
    return all(isinstance(v, (int, float, bool)) for v in value)


def _describe(value) -> str:
    if isinstance(value, (list, tuple, dict)):
        return f"a {type(value).__name__} of {len(value)}"
    return type(value).__name__


def _worst(pairs) -> tuple[float, str]:
    pairs = list(pairs)
    flagged = [p for p in pairs if p[1]]
    return max(flagged or pairs or [(0.0, "")], key=lambda p: p[0])


def model_shaped_calls() -> dict[str, list[tuple[tuple, dict]]]:
    """(args, kwargs) of extra calls, by part, at the shapes the GPT and its sampler and
    training loop use: (batch, heads, time, features) tensors, a causal mask and the shifted
    mask of a KV cache. Small visible tests can pass where these break."""
    generator = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=generator)

    mask = torch.ones(8, 8, dtype=torch.bool).tril()
    q, k, v, new = randn(2, 4, 8, 16), randn(2, 4, 8, 16), randn(2, 4, 8, 16), randn(2, 4, 3, 16)
    logits = 3 * randn(3, 20)
    return {
        "ch08_self_attention.scaled_dot_product_attention": [
            ((q, k, v, mask), {}),
            ((new, k, v, mask[5:]), {}),
        ],
        "ch08_self_attention.causal_mask": [((8,), {}), ((1,), {})],
        "ch08_self_attention.split_heads": [((randn(2, 8, 32), 4), {})],
        "ch09_transformer.layer_norm": [((3 * randn(2, 8, 32) + 1, randn(32), randn(32)), {})],
        "ch09_transformer.feed_forward": [
            ((randn(2, 8, 32), randn(128, 32) / 6, randn(128), randn(32, 128) / 11, randn(32)), {})
        ],
        "ch11_gpt.causal_attention_weights": [((q, k), {}), ((new, k, 5), {})],
        "ch11_gpt.filter_logits": [((logits, 5, None), {}), ((logits, None, 0.9), {})],
        "ch11_gpt.next_token": [
            ((logits, 0.8, 5, 0.9, torch.Generator().manual_seed(1)), {}),
            ((logits, 0.0), {}),
        ],
        "ch12_gpu_training.learning_rate_at": [
            ((step, 1e-3, 1e-4, 10, 100), {}) for step in (0, 5, 9, 10, 50, 99, 100, 150)
        ],
    }


def _compare(function, reference, calls: list) -> dict:
    """How far the part is from the reference over the recorded calls: the worst call."""
    results = []  # (deviates, difference, call number, why)
    for number, call in enumerate(calls, start=1):
        if call is None:
            continue
        yours, your_error = _outcome(function, call)
        theirs, their_error = _outcome(reference, call)
        if your_error == their_error is not None:
            gap, why = 0.0, ""
        elif your_error or their_error:
            yours_did = f"raises {your_error}" if your_error else "returns a result"
            theirs_did = f"raises {their_error}" if their_error else "returns one"
            gap, why = math.inf, f"{yours_did} where the reference {theirs_did}"
        else:
            gap, why = difference(yours, theirs)
        results.append((bool(why), gap, number, why))
    worst = max(results, key=lambda r: (r[0], r[1], -r[2]), default=(False, 0.0, None, ""))
    deviates, gap, number, why = worst  # the first of the worst calls
    return {
        "calls": len(results),
        "deviates": deviates,
        "difference": gap,
        "call": number,
        "why": why,
    }


def _reference_of(part):
    found = adapters.resolve(part.reference)
    if found is None and part.stand_in:
        found = adapters.by_name(part.stand_in)
    return found


def probe(folder: Path, compare: bool, part_cpu_s: float = PART_CPU_S) -> list[dict]:
    """The report on every part of the package in ``folder`` (this runs the learner's code)."""
    manifest = read_manifest(folder)
    exported = {(p["assignment"], p["name"]): p for p in manifest["parts"]}
    modules: dict = {}
    extra_calls = model_shaped_calls()
    report = []
    for part in PARTS:
        entry = {"part": part.label, "status": "missing", "detail": "", "tests": "", "message": ""}
        entry.update(
            {
                k: v
                for k, v in exported.get((part.assignment, part.name), {}).items()
                if k in ("status", "detail")
            }
        )
        report.append(entry)
        if entry["status"] != "present":
            continue
        if part.assignment not in modules:
            try:
                modules[part.assignment] = _load(folder, part.assignment)
            except LearnerError as err:
                modules[part.assignment] = err
        module = modules[part.assignment]
        if isinstance(module, LearnerError):
            entry.update(status="error", detail=str(module))
            continue
        function = getattr(module, part.name)
        tests = exported[(part.assignment, part.name)].get("tests", "")
        try:
            with _cpu_limit(part_cpu_s):
                entry["tests"], entry["message"], calls = _visible_tests(part.name, function, tests)
        except PartTimeout:
            entry.update(tests="error", message=_too_long(part_cpu_s), test_calls=0)
            if compare:  # it deviates: the reference returns
                entry["comparison"] = _timed_out(0, part_cpu_s)
            continue
        entry["test_calls"] = len(calls)
        calls += extra_calls.get(part.label, [])
        if entry["tests"] == "missing":
            entry["status"] = "missing"
        reference = _reference_of(part)
        if compare and reference is not None and entry["status"] == "present":
            try:
                with _cpu_limit(part_cpu_s):
                    entry["comparison"] = _compare(function, reference, calls)
            except PartTimeout:
                entry["comparison"] = _timed_out(len(calls), part_cpu_s)
    return report


def _timed_out(calls: int, part_cpu_s: float) -> dict:
    """The comparison of a part that did not return (no call number: it may be any)."""
    why = _too_long(part_cpu_s)
    return {"calls": calls, "deviates": True, "difference": math.inf, "call": None, "why": why}


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    torch.set_num_threads(1)
    part_cpu_s = float(args[args.index("--part-cpu-s") + 1]) if "--part-cpu-s" in args else None
    report = probe(Path(args[0]), compare="--compare" in args, part_cpu_s=part_cpu_s or PART_CPU_S)
    sys.stdout.flush()
    sys.__stdout__.write(f"\n{MARKER}\n{json.dumps(report)}\n")
    sys.__stdout__.flush()


# ----------------------------------------------------------------------------- the parent
def run(
    folder: Path,
    compare: bool = True,
    sandbox: bool = False,
    timeout_s: float = 600,
    part_cpu_s: float = PART_CPU_S,
) -> list:
    """:func:`probe` in a child process under the grader's limits (and sandbox): each part
    may use ``part_cpu_s`` of CPU, the whole ``timeout_s`` on the clock."""
    from mini_llm.grading import jail as grading_jail
    from mini_llm.grading import limits

    folder = Path(folder).resolve()
    read_manifest(folder)  # a clear error here, before any process starts
    jail = grading_jail.check(trusted_cohort=False) if sandbox else grading_jail.Jail(False)
    limit = limits.Limits(cpu_s=int(timeout_s) + 30)  # the memory limit of a graded submission
    start = (
        f"import sys; sys.path.insert(0, {jail.package_path()!r}); "
        "from mini_llm.learner.probe import main; main()"
    )
    with tempfile.TemporaryDirectory(prefix="mini-llm-probe-") as scratch:
        home = jail.home(Path(scratch) / "home")
        where = INSIDE if sandbox else str(folder)
        command = jail.wrap(
            [
                *jail.python(),
                "-c",
                start,
                where,
                *(["--compare"] if compare else []),
                *["--part-cpu-s", str(part_cpu_s)],
            ],
            read_only={INSIDE: folder},
        )
        process = subprocess.Popen(
            command,
            cwd=None if sandbox else home,
            env=limits.student_environment(home),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=limit.preexec,  # noqa: PLW1509 - called from a single-threaded CLI
        )
        try:
            out, err = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            limits.kill_tree(process.pid)
            process.communicate()
            raise LearnerError(
                f"checking {folder} took longer than {timeout_s:.0f} s (a part that never "
                "returns?); stopped"
            ) from None
    if MARKER not in out:
        raise LearnerError(
            f"checking {folder} stopped early ({limits.signal_name(process.returncode)}): "
            f"{err.strip()[-800:] or 'no message'}"
        )
    return json.loads(out.rpartition(MARKER)[2])


if __name__ == "__main__":
    main()
