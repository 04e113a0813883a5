"""The trusted replay's sandbox (mini_llm.grading.verify, .jail), on a tiny assignment.

The replay runs the answer cells in bubblewrap's sandbox and the tests here; these checks need
no nbgrader course, so they are quick: what the sandbox can see, what survives it, and what a
call does to its arguments."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import psutil
import pytest
from _exercise_helpers import BIN, SOLUTIONS
from conftest import require_bubblewrap

from mini_llm.grading import jail, limits
from mini_llm.grading.notebook import Assignment, Cell, Submission
from mini_llm.grading.verify import verify

LIMIT = limits.Limits(memory_mb=1024, cpu_s=60)


def _replay(sandbox: jail.Jail, tmp_path, answer: str, test: str, files=()):
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
        sandbox,
    )


def _passed(outcome) -> bool:
    test = next(c for c in outcome.cells if c.kind == "test")
    assert test.passed or test.message, test
    return bool(test.passed)


def _seen(sandbox, tmp_path, answer: str, test: str, honest: str) -> None:
    """``test`` passes ``answer``, which changes its arguments, and fails ``honest``, which does
    not: the test sees what the call did to them."""
    assert _passed(_replay(sandbox, tmp_path, answer, test))
    assert not _passed(_replay(sandbox, tmp_path / "honest", honest, test))


def test_a_call_that_changes_its_arguments_in_place_is_seen_by_the_test(bubblewrap, tmp_path):
    answer = (
        "def f(a, items, table):\n    a /= a.sum()\n    items.append(3)\n"
        "    table['k'] = 1\n    return None\n"
    )
    test = (
        "a, items, table = np.array([1.0, 3.0]), [1], {}\nf(a, items, table)\n"
        "assert a.tolist() == [0.25, 0.75], a\nassert items == [1, 3], items\n"
        "assert table == {'k': 1}, table\n"
    )
    _seen(bubblewrap, tmp_path, answer, test, honest="def f(a, items, table):\n    return None\n")


def test_a_call_that_reshapes_its_argument_in_place_is_seen_by_the_test(bubblewrap, tmp_path):
    """unsqueeze_/a.shape = ... change only the shape: the test sees that too (a learner's
    causal_mask once changed the caller's padding mask this way and kept its points)."""
    answer = "def f(a, t):\n    a.shape = (1, 2)\n    t.unsqueeze_(0)\n    return None\n"
    test = (
        "import torch\na, t = np.array([1.0, 3.0]), torch.tensor([True, False])\nf(a, t)\n"
        "assert a.shape == (1, 2) and a.tolist() == [[1.0, 3.0]], a\n"
        "assert t.shape == (1, 2) and t.tolist() == [[True, False]], t\n"
    )
    _seen(bubblewrap, tmp_path, answer, test, honest="def f(a, t):\n    return None\n")


LENT_STEP_TEST = """
import copy, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Tanh()).eval()
weight = model[0].weight
optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
x = torch.randn(4, 3)
model(x).sum().backward()   # stale gradients: the learner's code must see them too
expected = copy.deepcopy(model)
by_hand = torch.optim.SGD(expected.parameters(), lr=0.5, momentum=0.9)
for _ in range(2):
    f(model, optimizer, x)
    expected.train(); by_hand.zero_grad(); expected(x).sum().backward(); by_hand.step()
assert model[0].weight is weight and optimizer.param_groups[0]["params"][0] is weight
assert torch.allclose(weight, expected[0].weight), (weight, expected[0].weight)
assert torch.allclose(weight.grad, expected[0].weight.grad)
assert model.training and model[1].training
momentum = optimizer.state[weight]["momentum_buffer"]
assert torch.allclose(momentum, by_hand.state[expected[0].weight]["momentum_buffer"])
"""


def test_a_model_and_optimizer_lent_to_the_learners_code_come_back_as_it_left_them(
    bubblewrap, tmp_path
):
    """A test's own model and optimizer, handed to a learner's training step, come back with
    the weights, gradients, training flags and momentum the step gave them, and keep their
    identity (the optimizer still holds the model's parameters)."""
    answer = (
        "def f(model, optimizer, x):\n    model.train()\n    optimizer.zero_grad()\n"
        "    model(x).sum().backward()\n    optimizer.step()\n"
    )
    assert _passed(_replay(bubblewrap, tmp_path, answer, LENT_STEP_TEST))
    stale = answer.replace("    optimizer.zero_grad()\n", "")  # adds the stale gradients
    assert not _passed(_replay(bubblewrap, tmp_path / "stale", stale, LENT_STEP_TEST))
    honest = "def f(model, optimizer, x):\n    return None\n"
    assert not _passed(_replay(bubblewrap, tmp_path / "honest", honest, LENT_STEP_TEST))


def test_a_lent_model_changed_beyond_its_numbers_fails_the_test(bubblewrap, tmp_path):
    answer = (
        "import torch\ndef f(model):\n    model.weight = torch.nn.Parameter(torch.zeros(5, 5))\n"
    )
    test = "import torch\nmodel = torch.nn.Linear(2, 2)\nf(model)\n"
    outcome = _replay(bubblewrap, tmp_path, answer, test)
    assert not _passed(outcome)
    message = next(c for c in outcome.cells if c.kind == "test").message
    assert "changed the Linear it was given beyond its numbers" in message, message


def test_a_lent_model_that_holds_a_learners_object_reaches_it_in_the_sandbox(bubblewrap, tmp_path):
    """A test's module that wraps the learner's object (which lives in the sandbox) is lent
    with a handle in its place, and the learner's code finds its own object there."""
    answer = (
        "import torch\nclass Net(torch.nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.w = torch.nn.Parameter(torch.ones(2))\n"
        "def f(wrapper=None):\n"
        "    return Net() if wrapper is None else (type(wrapper.inner).__name__, wrapper.scale)\n"
    )
    test = (
        "import torch\nclass Wrapper(torch.nn.Module):\n    def __init__(self, inner):\n"
        "        super().__init__()\n        self.inner, self.scale = inner, 3\n"
        "assert f(Wrapper(f())) == ('Net', 3), f(Wrapper(f()))\n"
    )
    assert _passed(_replay(bubblewrap, tmp_path, answer, test))


def test_a_submission_that_sends_objects_back_for_a_lent_model_fails_and_sends_nothing(
    bubblewrap, tmp_path
):
    """The submission's process is the submission's: here it replaces what reports a lent
    model's state by the model itself (a handle, which the grader would have to call into).
    The grader decodes lent state as plain data only, so the test fails and the grader's model
    keeps its weights."""
    answer = (
        "from mini_llm.grading import lending\n"
        "lending.state_of = lambda value: {'tensors': value, 'grads': {}, 'training': {}}\n"
        "def f(model):\n    return None\n"
    )
    test = (
        "import torch\nmodel = torch.nn.Linear(2, 2)\nbefore = model.weight.detach().clone()\n"
        "try:\n    f(model)\nfinally:\n    assert torch.equal(model.weight, before)\n"
    )
    outcome = _replay(bubblewrap, tmp_path, answer, test)
    assert not _passed(outcome)
    message = next(c for c in outcome.cells if c.kind == "test").message
    assert "beyond its numbers: unknown value on the wire" in message, message


@pytest.mark.parametrize("marked", [True, False])
def test_a_helper_marked_beside_the_answers_runs_on_the_learners_own_model(
    bubblewrap, tmp_path, marked
):
    """backward() through the learner's model needs the model itself, which stays in the
    sandbox: a marked helper runs there and returns data; unmarked, it sees a copy."""
    answer = (
        "import torch\nclass Net(torch.nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.w = torch.nn.Parameter(torch.ones(2))\n"
        "    def forward(self, x):\n        return (self.w * x).sum()\n"
        "def f():\n    return Net()\n"
    )
    test = (
        "import torch\nfrom mini_llm.grading.lending import beside_the_answers\n"
        + ("@beside_the_answers\n" if marked else "")
        + "def gradient(model, x):\n    model(x).backward()\n"
        "    return None if model.w.grad is None else model.w.grad.tolist()\n"
        "assert gradient(f(), torch.tensor([2.0, 3.0])) == [2.0, 3.0]\n"
    )
    assert _passed(_replay(bubblewrap, tmp_path, answer, test)) == marked


def test_the_sandbox_sees_no_course_file_and_no_grader_process(bubblewrap, tmp_path):
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
    assert _passed(_replay(bubblewrap, tmp_path / "replay", answer, test))


def test_nothing_the_submission_started_outlives_its_sandbox(bubblewrap, tmp_path):
    marker = f"outlives-{os.getpid()}-{time.time_ns()}"
    answer = (
        "import os, subprocess\n"
        "if os.fork() == 0:\n    os.setsid()\n"
        f"    subprocess.Popen(['sh', '-c', 'exec -a {marker} sleep 300'])\n"
        "    os._exit(0)\n"
        "def f(x):\n    return x\n"
    )
    assert _passed(_replay(bubblewrap, tmp_path, answer, "assert f(2) == 2\n"))
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
def test_the_data_files_of_the_assignment_are_in_the_working_folder(
    request, tmp_path, trusted_cohort
):
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
        jail.check(trusted_cohort) if trusted_cohort else request.getfixturevalue("bubblewrap"),
    )
    assert _passed(outcome)


def _no_bwrap(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name, *args, **kwargs: None)


def _no_user_namespaces(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name, *args, **kwargs: f"/usr/bin/{name}")

    def check(trusted_cohort):
        raise jail.SandboxUnavailable("bubblewrap cannot make a sandbox here (test)")

    monkeypatch.setattr(jail, "check", check)


@pytest.mark.parametrize("ci", ["", "true"])
@pytest.mark.parametrize(
    ("breakage", "reason"),
    [
        (_no_bwrap, "bubblewrap is not installed: apt-get install bubblewrap"),
        (_no_user_namespaces, "bubblewrap cannot make a sandbox here"),
    ],
)
def test_without_a_sandbox_its_tests_skip_with_the_reason_but_fail_in_ci(
    monkeypatch, ci, breakage, reason
):
    """conftest.py's ``bubblewrap`` fixture: where the sandbox cannot be made, a test that
    needs it is skipped, saying why and what to install; with CI=true it fails (CI skips no
    test)."""
    breakage(monkeypatch)
    monkeypatch.setenv("CI", ci)
    outcome = pytest.fail.Exception if ci else pytest.skip.Exception
    with pytest.raises(outcome, match=reason) as raised:
        require_bubblewrap()
    assert ("CI=true" in str(raised.value)) == bool(ci)


def test_a_scratch_folder_holds_no_more_than_the_sandbox_allows(bubblewrap, tmp_path):
    """nbgrader's in-kernel run (--in-kernel) works in a copy of the course in such a folder:
    what a submission writes there fills the sandbox's tmpfs, not the grader's disk."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "kept.txt").write_text("copied in")
    (tmp_path / "out").mkdir()
    script = (
        "cp -R /in/. /scratch && cat /scratch/kept.txt && "
        "head -c 400000000 /dev/zero > /scratch/hoard; echo status=$?; "
        "ls -l /scratch/hoard > /out/size.txt"
    )
    command = bubblewrap.wrap(
        ["/bin/sh", "-c", script],
        writable={"/out": tmp_path / "out"},
        read_only={"/in": tmp_path / "in"},
        scratch=("/scratch",),
        cwd="/scratch",
    )
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.stdout.startswith("copied in") and "status=1" in done.stdout, done
    assert "No space left on device" in done.stderr
    written = int((tmp_path / "out" / "size.txt").read_text().split()[4])
    assert written <= bubblewrap.tmpfs_mb * 2**20 < 400_000_000
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["in", "kept.txt", "out", "size.txt"]
