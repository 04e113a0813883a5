"""The trusted replay's sandbox (mini_llm.grading.verify, .jail), on a tiny assignment.

The replay runs the answer cells in bubblewrap's sandbox and the tests here; these checks need
no nbgrader course, so they are quick: what the sandbox can see, what survives it, and what a
call does to its arguments."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest
from _exercise_helpers import BIN, SOLUTIONS

from mini_llm.grading import jail, limits
from mini_llm.grading.notebook import Assignment, Cell, Submission
from mini_llm.grading.verify import verify

SANDBOX = jail.check(trusted_cohort=False)
LIMIT = limits.Limits(memory_mb=1024, cpu_s=60)


def _replay(tmp_path, answer: str, test: str, files=()):
    cells = [
        Cell("setup", "setup", "import numpy as np\n", "code"),
        Cell("answer", "f_impl", "def f(x):\n    return x\n", "code"),
        Cell("test", "f_tests", test, "code", points=1.0),
    ]
    assignment = Assignment("tiny", "tiny", cells, {})
    return verify(
        assignment,
        Submission(answers={"f_impl": [answer]}),
        tmp_path,
        LIMIT,
        60,
        20,
        list(files),
        SANDBOX,
    )


def _passed(outcome) -> bool:
    test = next(c for c in outcome.cells if c.kind == "test")
    assert test.passed or test.message, test
    return bool(test.passed)


def test_a_call_that_changes_its_arguments_in_place_is_seen_by_the_test(tmp_path):
    answer = (
        "def f(a, items, table):\n    a /= a.sum()\n    items.append(3)\n"
        "    table['k'] = 1\n    return None\n"
    )
    test = (
        "a, items, table = np.array([1.0, 3.0]), [1], {}\nf(a, items, table)\n"
        "assert a.tolist() == [0.25, 0.75], a\nassert items == [1, 3], items\n"
        "assert table == {'k': 1}, table\n"
    )
    assert _passed(_replay(tmp_path, answer, test))
    honest = "def f(a, items, table):\n    return None\n"
    assert not _passed(_replay(tmp_path / "honest", honest, test))


def test_a_call_that_reshapes_its_argument_in_place_is_seen_by_the_test(tmp_path):
    """unsqueeze_/a.shape = ... change only the shape: the test sees that too (a learner's
    causal_mask once changed the caller's padding mask this way and kept its points)."""
    answer = "def f(a, t):\n    a.shape = (1, 2)\n    t.unsqueeze_(0)\n    return None\n"
    test = (
        "import torch\na, t = np.array([1.0, 3.0]), torch.tensor([True, False])\nf(a, t)\n"
        "assert a.shape == (1, 2) and a.tolist() == [[1.0, 3.0]], a\n"
        "assert t.shape == (1, 2) and t.tolist() == [[True, False]], t\n"
    )
    assert _passed(_replay(tmp_path, answer, test))
    honest = "def f(a, t):\n    return None\n"
    assert not _passed(_replay(tmp_path / "honest", honest, test))


def test_the_sandbox_sees_no_course_file_and_no_grader_process(tmp_path):
    secret = tmp_path / "course" / "solutions.txt"
    secret.parent.mkdir()
    secret.write_text("the answers")
    answer = (
        f"import os\ndef f(x):\n    seen = [p for p in os.listdir('/proc') if p.isdigit()]\n"
        f"    return (os.path.exists({str(secret)!r}), os.getuid(), len(seen),\n"
        f"            os.path.exists({str(SOLUTIONS)!r}))\n"
    )
    # 2 processes: bwrap's init and this Python. The venv is visible (read-only), the reference
    # solutions beside it are not.
    test = "assert f(0) == (False, 65534, 2, False), f(0)\n"
    assert _passed(_replay(tmp_path / "replay", answer, test))


def test_nothing_the_submission_started_outlives_its_sandbox(tmp_path):
    marker = f"outlives-{os.getpid()}-{time.time_ns()}"
    answer = (
        "import os, subprocess\n"
        "if os.fork() == 0:\n    os.setsid()\n"
        f"    subprocess.Popen(['sh', '-c', 'exec -a {marker} sleep 300'])\n"
        "    os._exit(0)\n"
        "def f(x):\n    return x\n"
    )
    assert _passed(_replay(tmp_path, answer, "assert f(2) == 2\n"))
    time.sleep(0.5)
    survivors = [
        p for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])
    ]
    assert not survivors, survivors


def test_without_bubblewrap_the_grader_refuses_unless_the_cohort_is_trusted(tmp_path):
    env = {**os.environ, "PATH": str(BIN)}  # this environment, and no bwrap
    command = [
        sys.executable,
        "-m",
        "mini_llm.grading",
        "ch01_bigrams",
        "--course-dir",
        str(tmp_path),
    ]
    refused = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    assert refused.returncode == 2 and "apt-get install bubblewrap" in refused.stderr
    assert "--trusted-cohort" in refused.stderr
    trusted = subprocess.run(
        [*command, "--trusted-cohort"], capture_output=True, text=True, env=env, check=False
    )
    assert trusted.returncode == 2 and "apt-get install bubblewrap" not in trusted.stderr
    assert "no assignment 'ch01_bigrams'" in trusted.stderr


@pytest.mark.parametrize("trusted_cohort", [False, True])
def test_the_data_files_of_the_assignment_are_in_the_working_folder(tmp_path, trusted_cohort):
    data = tmp_path / "words.txt"
    data.write_text("alpha beta")
    cells = [
        Cell("answer", "f_impl", "def f(x):\n    return x\n", "code"),
        Cell("test", "f_tests", "assert f(0) == 'alpha beta', f(0)\n", "code", points=1.0),
    ]
    answer = "def f(x):\n    return open('words.txt').read()\n"
    outcome = verify(
        Assignment("tiny", "tiny", cells, {}),
        Submission(answers={"f_impl": [answer]}),
        tmp_path / "replay",
        LIMIT,
        60,
        20,
        [data],
        jail.check(trusted_cohort),
    )
    assert _passed(outcome)
