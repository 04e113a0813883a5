"""Broken and hostile submissions, each built from the released and the solution notebook.

Every case is a function ``(kit) -> Expect`` that writes one student's submission folder and
says what an honest grader must report: the score, computed from the assignment's own
metadata (``kit.total``, ``kit.points_before(...)``, ``kit.points_of(...)``), never typed in,
and a phrase that the summary line or the feedback must contain.

A "correct" learner below is the release with every answer cell filled in with the
reference code (the solution markers removed), so the metadata is the learner's copy's.
"""

from __future__ import annotations

import copy
import json
import os
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import nbformat

ASSIGNMENT = "ch01_bigrams"


@dataclass
class Expect:
    score: float
    says: str  # in the student's summary line or feedback (case-insensitive)


class Kit:
    """The assignment's notebooks and the metadata arithmetic the cases need."""

    def __init__(self, course: Path, source, release):
        self.course, self.source, self.release = course, source, release
        meta = [c.metadata.get("nbgrader", {}) for c in source.cells]
        self.order = [m.get("grade_id") for m in meta]
        self.tests = {
            m["grade_id"]: float(m["points"])
            for m in meta
            if m.get("grade") and not m.get("solution") and m.get("points")
        }
        self.answers = [m["grade_id"] for m in meta if m.get("solution") and not m.get("grade")]
        self.written = [m["grade_id"] for m in meta if m.get("solution") and m.get("grade")]
        self.total = sum(self.tests.values())
        self.written_points = sum(
            float(m["points"]) for m in meta if m.get("solution") and m.get("grade")
        )
        """points of the written answers, pending in the summary until a person grades them"""

    def points_before(self, grade_id: str) -> float:
        """Points of the test cells above ``grade_id``: what survives a crash there."""
        limit = self.order.index(grade_id)
        return sum(p for g, p in self.tests.items() if self.order.index(g) < limit)

    def points_of(self, answer_id: str) -> float:
        """Points of the tests between this answer cell and the next: that part's tests."""
        start = self.order.index(answer_id)
        later = [self.order.index(a) for a in self.answers if self.order.index(a) > start]
        end = min(later, default=len(self.order))
        return sum(p for g, p in self.tests.items() if start < self.order.index(g) < end)

    @property
    def last(self) -> str:
        return self.answers[-1]

    def function_of(self, answer_id: str) -> str:
        return answer_id.removesuffix("_impl")

    # -- notebooks
    def solved(self):
        nb = copy.deepcopy(self.release)
        for cell in nb.cells:
            gid = cell.metadata.get("nbgrader", {}).get("grade_id")
            if gid in self.answers or gid in self.written:
                cell.source = self.reference(gid)
        return nb

    def reference(self, grade_id: str) -> str:
        cell = next(
            c
            for c in self.source.cells
            if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id
        )
        return "\n".join(
            line
            for line in cell.source.splitlines()
            if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION")
        )

    @staticmethod
    def cell(nb, grade_id: str):
        return next(
            c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id
        )

    def buggy_last(self):
        """Correct except the last part, whose function returns a wrong constant."""
        nb = self.solved()
        name = self.function_of(self.last)
        wrong_constant = f"\n\n_right = {name}\ndef {name}(*args, **kwargs):\n    return 12345.0\n"
        self.cell(nb, self.last).source += wrong_constant
        return nb

    def folder(self, student: str) -> Path:
        path = self.course / "submitted" / student / ASSIGNMENT
        path.mkdir(parents=True, exist_ok=True)
        return path

    def hand_in(self, student: str, nb) -> Path:
        path = self.folder(student) / f"{ASSIGNMENT}.ipynb"
        nbformat.write(nb, path)
        return path


def _prepend(kit: Kit, nb, grade_id: str, code: str):
    kit.cell(nb, grade_id).source = code + kit.cell(nb, grade_id).source
    return nb


def _append(kit: Kit, nb, grade_id: str, code: str):
    kit.cell(nb, grade_id).source += "\n" + code
    return nb


# ----------------------------------------------------------------------------- the cases
SUBMITTED_AT = "2026-11-29 10:00:00.000000 UTC"


def honest(kit: Kit, student: str) -> Expect:
    kit.hand_in(student, kit.solved())
    (kit.folder(student) / "timestamp.txt").write_text(SUBMITTED_AT)  # as nbgrader collect writes
    return Expect(kit.total, "-")


def blank(kit: Kit, student: str) -> Expect:
    kit.hand_in(student, kit.release)
    return Expect(0.0, "not answered")


def infinite_loop(kit: Kit, student: str) -> Expect:
    kit.hand_in(student, _prepend(kit, kit.solved(), kit.last, "while True:\n    pass\n"))
    return Expect(kit.total - kit.points_of(kit.last), "ran past its time limit")


def sys_exit(kit: Kit, student: str) -> Expect:
    first = kit.answers[0]
    kit.hand_in(student, _append(kit, kit.solved(), first, "import sys\nsys.exit()"))
    return Expect(kit.total, "SystemExit")


def os_exit(kit: Kit, student: str) -> Expect:
    middle = kit.answers[len(kit.answers) // 2]
    kit.hand_in(student, _prepend(kit, kit.solved(), middle, "import os\nos._exit(1)\n"))
    return Expect(kit.points_before(middle), "died")


def segfault(kit: Kit, student: str) -> Expect:
    second = kit.answers[1]
    kit.hand_in(
        student, _prepend(kit, kit.solved(), second, "import ctypes\nctypes.string_at(0)\n")
    )
    return Expect(kit.points_before(second), "SIGSEGV")


def memory_hog(kit: Kit, student: str) -> Expect:
    """6 GiB in 128 MiB pieces: far past the limit, freed again when the error unwinds."""
    code = (
        "def _hog():\n    import numpy\n    return [numpy.ones(2**24) for _ in range(48)]\n_hog()"
    )
    kit.hand_in(student, _append(kit, kit.solved(), kit.answers[0], code))
    return Expect(kit.total, "MemoryError")


def print_50mb(kit: Kit, student: str) -> Expect:
    kit.hand_in(student, _append(kit, kit.solved(), kit.answers[0], "print('x' * 50_000_000)"))
    return Expect(kit.total, "more characters of output not shown")


def deleted_test(kit: Kit, student: str) -> Expect:
    nb = kit.buggy_last()
    test = f"{kit.function_of(kit.last)}_tests"
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") != test]
    kit.hand_in(student, nb)
    return Expect(kit.total - kit.points_of(kit.last), f"test cell '{test}' was deleted")


def test_edited_to_pass(kit: Kit, student: str) -> Expect:
    nb = kit.buggy_last()
    test = f"{kit.function_of(kit.last)}_tests"
    kit.cell(nb, test).source = "pass"
    kit.hand_in(student, nb)
    return Expect(kit.total - kit.points_of(kit.last), f"test cell '{test}' was edited")


def points_raised(kit: Kit, student: str) -> Expect:
    nb = kit.buggy_last()
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") in kit.tests:
            cell.metadata["nbgrader"]["points"] = 100
    kit.hand_in(student, nb)
    return Expect(kit.total - kit.points_of(kit.last), "points")


def grade_id_renamed(kit: Kit, student: str) -> Expect:
    nb = kit.solved()
    kit.cell(nb, kit.last).metadata["nbgrader"]["grade_id"] = "my_own_cell"
    kit.hand_in(student, nb)
    return Expect(kit.total - kit.points_of(kit.last), "'my_own_cell' is not part of the")


def solution_marked_as_test(kit: Kit, student: str) -> Expect:
    nb = kit.buggy_last()
    kit.cell(nb, kit.last).metadata["nbgrader"].update(
        grade=True, solution=False, points=50, locked=True
    )
    kit.hand_in(student, nb)
    return Expect(kit.total - kit.points_of(kit.last), "flag")


def renamed_function(kit: Kit, student: str) -> Expect:
    nb = kit.solved()
    name = kit.function_of(kit.last)
    cell = kit.cell(nb, kit.last)
    cell.source = cell.source.replace(f"def {name}(", f"def my_{name}(")
    kit.hand_in(student, nb)
    return Expect(kit.total - kit.points_of(kit.last), f"name '{name}' is not defined")


def changed_signature(kit: Kit, student: str) -> Expect:
    nb = kit.solved()
    name = kit.function_of(kit.last)
    _append(kit, nb, kit.last, f"_real = {name}\ndef {name}(only_one):\n    return 0.0")
    kit.hand_in(student, nb)
    return Expect(kit.total - kit.points_of(kit.last), "TypeError")


def patch_checks(kit: Kit, student: str) -> Expect:
    """Every expect_* helper passes, the differential ones too: enough to fool the notebook's
    own (in-kernel) tests."""
    code = (
        "import mini_llm.checks, mini_llm.differential\n"
        "for _c in (mini_llm.checks, mini_llm.differential):\n"
        "    for _name in [n for n in dir(_c) if n.startswith('expect_')]:\n"
        "        setattr(_c, _name, lambda *a, **k: None)\n"
    )
    kit.hand_in(student, _append(kit, kit.buggy_last(), kit.answers[0], code))
    return Expect(kit.total - kit.points_of(kit.last), "tests were fooled")


def patch_libraries(kit: Kit, student: str) -> Expect:
    """numpy.allclose/isclose, numpy.testing, torch.allclose, builtins, and IPython's errors."""
    code = (
        "import builtins, numpy, numpy.testing, torch\n"
        "numpy.allclose = torch.allclose = lambda *a, **k: True\n"
        "numpy.isclose = lambda a, b, **k: numpy.ones(numpy.shape(a), bool)\n"
        "numpy.testing.assert_allclose = numpy.testing.assert_array_equal = "
        "lambda *a, **k: None\n"
        "builtins.AssertionError = type('AssertionError', (Exception,), {})\n"
        "get_ipython().set_custom_exc((BaseException,), lambda *a, **k: None)\n"
    )
    kit.hand_in(student, _append(kit, kit.buggy_last(), kit.answers[0], code))
    return Expect(
        kit.total - kit.points_of(kit.last), f"check failed: {kit.function_of(kit.last)}("
    )


def writes_course_files(kit: Kit, student: str) -> Expect:
    """Overwrites the gradebook, another student's submission and the solutions: the sandbox
    has no view of the course, so the first write fails."""
    targets = [
        kit.course / "gradebook.db",
        kit.course / "submitted" / "honest" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb",
        kit.course / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb",
    ]
    code = "".join(f"open({str(t)!r}, 'wb').write(b'pwned')\n" for t in targets)
    kit.hand_in(student, _append(kit, kit.solved(), kit.answers[0], code))
    return Expect(kit.total, "FileNotFoundError")


def kills_other_students(kit: Kit, student: str) -> Expect:
    """After a correct answer, SIGKILLs every other grading sandbox it can see, for 5 s.

    Its PID namespace shows no other sandbox (only bubblewrap's init, whose command line names
    the sandbox and which the kernel protects from its own namespace), so it kills nothing (it
    would say so) and whoever was graded at the same time is unharmed."""
    code = (
        "import os, signal, time\n"
        "_end, _killed = time.time() + 5, set()\n"
        "while time.time() < _end:\n"
        "    for _pid in filter(str.isdigit, os.listdir('/proc')):\n"
        "        try:\n"
        "            _cmd = open(f'/proc/{_pid}/cmdline', 'rb').read()\n"
        "            if b'mini_llm.grading.sandbox' in _cmd and int(_pid) != os.getpid():\n"
        "                os.kill(int(_pid), signal.SIGKILL)\n"
        "                _killed.add(_pid)\n"
        "        except OSError:\n"
        "            pass\n"
        "    time.sleep(0.1)\n"
        "_killed = [p for p in _killed if not os.path.exists(f'/proc/{p}')]  # died of it\n"
        "if _killed:\n"
        "    raise RuntimeError(f'killed {len(_killed)} other sandboxes')\n"
    )
    kit.hand_in(student, _append(kit, kit.solved(), kit.answers[0], code))
    return Expect(kit.total, "-")


def not_json(kit: Kit, student: str) -> Expect:
    (kit.folder(student) / f"{ASSIGNMENT}.ipynb").write_bytes(b"\x00 this is not JSON {")
    return Expect(0.0, "not a readable notebook")


def nbformat_v3(kit: Kit, student: str) -> Expect:
    old = nbformat.convert(kit.solved(), 3)
    (kit.folder(student) / f"{ASSIGNMENT}.ipynb").write_text(json.dumps(old))
    return Expect(kit.total, "format v3")


def missing_notebook(kit: Kit, student: str) -> Expect:
    (kit.folder(student) / "notes.txt").write_text("I forgot the notebook")
    return Expect(0.0, "no notebook")


def extra_files(kit: Kit, student: str) -> Expect:
    """A numpy.py next to the notebook would shadow NumPy in nbgrader's own kernel."""
    kit.hand_in(student, kit.buggy_last())
    (kit.folder(student) / "numpy.py").write_text("raise SystemExit('shadowed')\n")
    return Expect(kit.total - kit.points_of(kit.last), "extra files ignored: numpy.py")


def kernel_name(kit: Kit, student: str) -> Expect:
    nb = kit.solved()
    nb.metadata["kernelspec"] = {"name": "evil", "display_name": "Evil", "language": "python"}
    kit.hand_in(student, nb)
    return Expect(kit.total, "kernel 'evil'")


def prefilled_outputs(kit: Kit, student: str) -> Expect:
    nb = copy.deepcopy(kit.release)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="all passed\n")]
            cell.execution_count = 1
    kit.hand_in(student, nb)
    return Expect(0.0, "not answered")


def split_cells(kit: Kit, student: str) -> Expect:
    """An answer split in two cells that share one grade_id and one cell id; both halves
    are needed (written as raw JSON: nbformat would renumber the duplicated id)."""
    nb = kit.solved()
    first = kit.answers[0]
    index = nb.cells.index(kit.cell(nb, first))
    half = copy.deepcopy(nb.cells[index])
    half.source = "_HALF = 'first half'\n"
    nb.cells[index].source = "assert _HALF\n" + nb.cells[index].source
    nb.cells.insert(index, half)
    (kit.folder(student) / f"{ASSIGNMENT}.ipynb").write_text(json.dumps(nb))
    return Expect(kit.total, f"'{first}' appears 2 times")


def reordered(kit: Kit, student: str) -> Expect:
    """The last part's answer moved to the top of the notebook."""
    nb = kit.solved()
    last = kit.cell(nb, kit.last)
    nb.cells.remove(last)
    nb.cells.insert(1, last)
    kit.hand_in(student, nb)
    return Expect(kit.total, "were moved")


CASES = [
    honest,
    blank,
    infinite_loop,
    sys_exit,
    os_exit,
    segfault,
    memory_hog,
    print_50mb,
    deleted_test,
    test_edited_to_pass,
    points_raised,
    grade_id_renamed,
    solution_marked_as_test,
    renamed_function,
    changed_signature,
    patch_checks,
    patch_libraries,
    writes_course_files,
    kills_other_students,
    not_json,
    nbformat_v3,
    missing_notebook,
    extra_files,
    kernel_name,
    prefilled_outputs,
    split_cells,
    reordered,
]


def hidden_failure(kit: Kit, student: str) -> Expect:
    """Passes the visible checks of part 2 and its input checks, fails a hidden one (rows
    without counts -> nan)."""
    part = kit.answers[1]
    name = kit.function_of(part)
    nb = kit.solved()
    kit.cell(nb, part).source = (
        f"def {name}(counts):\n    counts = np.asarray(counts, float)\n"
        "    if counts.ndim != 2 or counts.shape[0] != counts.shape[1] or (counts < 0).any():\n"
        "        raise ValueError('a square matrix of counts, none negative')\n"
        "    return counts / counts.sum(axis=1, keepdims=True)\n"
    )
    kit.hand_in(student, nb)
    return Expect(kit.total - kit.tests[f"{name}_tests"], "A hidden check failed")


CASES.append(hidden_failure)


# -------------------------------------------------- attacks on the grader itself (issue 17)
GRADER_MODULE = "mini_llm.grading.__main__"  # importing it runs the grader's CLI: sys.exit
DAEMON_MARKER = "hostile-daemon-outlives-the-run"


def exception_names_grader_module(kit: Kit, student: str) -> Expect:
    """The first function raises an exception whose class claims to live in a grader module:
    rebuilding it by importing that module used to stop the whole run. (It is a ValueError,
    so the part's input checks, which only ask for a refusal, keep their point.)"""
    first = kit.answers[0]
    name = kit.function_of(first)
    code = (
        f"class Boom(ValueError):\n    pass\nBoom.__module__ = {GRADER_MODULE!r}\n"
        f"def {name}(*args, **kwargs):\n    raise Boom('no counts today')\n"
    )
    kit.hand_in(student, _append(kit, kit.solved(), first, code))
    lost = kit.tests[f"{name}_tests"]
    return Expect(kit.total - lost, "failed: " + f"{name}_tests")


def reads_the_solution(kit: Kit, student: str) -> Expect:
    """A blank notebook whose last answer finds the reference solution on disk -- through
    ``/proc/<ancestor>/cwd`` or the course's own path -- and runs every answer in it."""
    relative = f"solutions/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
    code = (
        "import glob, json, os\n"
        f"_paths = glob.glob('/proc/*/cwd/{relative}') + glob.glob('/proc/*/root/**/"
        f"{relative}', recursive=True) + [{str(kit.course / relative)!r}]\n"
        "_found = [p for p in _paths if os.path.exists(p)]\n"
        "if not _found:\n    raise FileNotFoundError('no solution found')\n"
        "for _cell in json.load(open(_found[0]))['cells']:\n"
        "    if _cell['metadata'].get('nbgrader', {}).get('solution') and "
        "_cell['cell_type'] == 'code':\n"
        "        exec(''.join(_cell['source']))\n"
    )
    nb = copy.deepcopy(kit.release)
    kit.cell(nb, kit.last).source = code
    kit.hand_in(student, nb)
    return Expect(0.0, "no solution found")


def daemon_rewrites_gradebook(kit: Kit, student: str) -> Expect:
    """Correct answers, plus a double-forked daemon that waits for the grader to finish and
    then overwrites the gradebook (tagged, so the test can look for it after the run)."""
    daemon = (
        "import time\n_end = time.time() + 240\n"
        "while time.time() < _end:\n"
        "    try:\n"
        f"        open({str(kit.course / 'gradebook.db')!r}, 'wb').write(b'pwned')\n"
        "    except OSError:\n"
        "        pass\n"
        "    time.sleep(1)\n"
    )
    code = (
        "import os, sys\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execv(sys.executable, [sys.executable, '-c', {daemon!r}, "
        f"{DAEMON_MARKER!r}])\n"
        "    os._exit(0)\n"
    )
    kit.hand_in(student, _append(kit, kit.solved(), kit.answers[0], code))
    return Expect(kit.total, "-")


def plants_code_for_later_steps(kit: Kit, student: str) -> Expect:
    """Plants a ``.pth`` file in the Python environment and appends to the course's
    ``nbgrader_config.py``: code that would run in the grader's later feedback and export
    steps (here it only prints, and only for this course's folder)."""
    boost = (
        f"import sys; {str(kit.course)!r} in ' '.join(sys.argv) and "
        "print('hostile code ran in a grader step')\n"
    )
    config = (str(kit.course / "nbgrader_config.py"), "\nc.Exchange.timezone = 'planted'\n", "a")
    code = (
        "import sysconfig\n"
        f"_pth = sysconfig.get_paths()['purelib'] + '/{planted_pth(kit).name}'\n"
        "_errors = []\n"
        f"for _path, _text, _mode in [(_pth, {boost!r}, 'w'), {config!r}]:\n"
        "    try:\n"
        "        open(_path, _mode).write(_text)\n"
        "    except OSError as _err:\n"
        "        _errors.append(f'{type(_err).__name__}: {_err}')\n"
        "if _errors:\n"
        "    raise OSError(' | '.join(_errors))\n"
    )
    kit.hand_in(student, _append(kit, kit.solved(), kit.answers[0], code))
    return Expect(kit.total, "Read-only file system")


def planted_pth(kit: Kit) -> Path:
    """Where plants_code_for_later_steps tries to put its ``.pth`` file."""
    return Path(sysconfig.get_paths()["purelib"]).resolve() / f"zz_hostile_{kit.course.name}.pth"


def script_in_written_answer(kit: Kit, student: str) -> Expect:
    """The written (markdown) answer carries a script, an event handler and a javascript:
    link, which nbgrader's feedback HTML used to render as live HTML."""
    nb = kit.solved()
    for grade_id in kit.written:
        kit.cell(nb, grade_id).source = (
            "Zero counts <script>window.HOSTILE_SCRIPT = 1</script> "
            '<img src=x onerror="window.HOSTILE_ONERROR = 1"> '
            "[see here](javascript:window.HOSTILE_LINK=1)\n"
        )
    kit.hand_in(student, nb)
    return Expect(kit.total, "-")


CASES += [
    exception_names_grader_module,
    reads_the_solution,
    daemon_rewrites_gradebook,
    plants_code_for_later_steps,
    script_in_written_answer,
]


def symlinked_notebook(kit: Kit, student: str) -> Expect:
    """The 'notebook' is a symbolic link to the reference solution in the course folder."""
    link = kit.folder(student) / f"{ASSIGNMENT}.ipynb"
    link.symlink_to(kit.course / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    return Expect(0.0, "is a symbolic link")


CASES.append(symlinked_notebook)


# --------------------------------------- the submitted tree and what leaves it (issue 32)
def hard_linked_notebook(kit: Kit, student: str) -> Expect:
    """The 'notebook' is a hard link to the reference solution: the same file, not a link."""
    target = kit.folder(student) / f"{ASSIGNMENT}.ipynb"
    os.link(kit.course / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", target)
    return Expect(0.0, "is a hard link")


def named_pipe_notebook(kit: Kit, student: str) -> Expect:
    """The 'notebook' is a named pipe: opening it to read would wait for a writer for ever."""
    os.mkfifo(kit.folder(student) / f"{ASSIGNMENT}.ipynb")
    return Expect(0.0, "is not a regular file")


def malformed_nbgrader_metadata(kit: Kit, student: str) -> Expect:
    """A free cell whose ``metadata.nbgrader`` is a string, not a mapping."""
    nb = kit.solved()
    nb.cells.append(nbformat.v4.new_code_cell("1 + 1", metadata={"nbgrader": "grade me"}))
    kit.hand_in(student, nb)
    return Expect(kit.total, "not a mapping")


def huge_answer_cell(kit: Kit, student: str) -> Expect:
    """The last answer is a megabyte of comment after the correct code."""
    nb = _append(kit, kit.solved(), kit.last, "#" + "x" * 1_000_000)
    kit.hand_in(student, nb)
    return Expect(kit.total - kit.points_of(kit.last), "it was not run")


LEAK_MARKER = "SEEN-BY-MY-CODE:"


def prints_what_its_code_saw(kit: Kit, student: str) -> Expect:
    """The first answer records every call it gets; the last answer cell prints the record,
    hoping the replay shows that output in feedback after the hidden checks ran."""
    first, name = kit.answers[0], kit.function_of(kit.answers[0])
    record = (
        f"\n_seen = []\n_original = {name}\n"
        f"def {name}(*args, **kwargs):\n"
        "    _seen.append(repr((args, kwargs)))\n"
        "    return _original(*args, **kwargs)\n"
    )
    nb = _append(kit, kit.solved(), first, record)
    nb = _append(kit, nb, kit.last, f"print({LEAK_MARKER!r}, len(_seen), _seen)")
    kit.hand_in(student, nb)
    return Expect(kit.total, "-")


def names_its_error_after_what_it_saw(kit: Kit, student: str) -> Expect:
    """After its visible checks, the first answer raises an exception whose class name and
    message spell out the hidden call's arguments (a name a hint used to repeat)."""
    first, name = kit.answers[0], kit.function_of(kit.answers[0])
    code = (
        f"\n_calls = [0]\n_right = {name}\n"
        f"def {name}(*args, **kwargs):\n"
        "    _calls[0] += 1\n"
        "    if _calls[0] <= 3:  # visible: two calls in its tests, one in its input checks\n"
        "        return _right(*args, **kwargs)\n"
        "    size = str(args[1] if len(args) > 1 else kwargs.get('vocab_size'))\n"
        "    leak = type('Leak' + size, (Exception,), {})\n"
        "    raise leak('\\n  Hint: Leak' + size + ' ' + repr(args))\n"
    )
    kit.hand_in(student, _append(kit, kit.solved(), first, code))
    return Expect(kit.total - kit.points_of(first), "A hidden check failed")


def fills_memory_beside_its_limit(kit: Kit, student: str) -> Expect:
    """After a correct first answer: a file in /dev (a tmpfs of half the host's memory) and
    512 MB into /dev/shm, memory that no address-space limit counts."""
    code = (
        "import os\ntry:\n    open('/dev/hoard', 'wb').write(b'x' * 2**20)\n"
        "except OSError as err:\n    print('dev refused:', err)\n"
        "for i in range(32):  # 16 MB files, each under the file-size limit\n"
        "    with open(f'/dev/shm/hoard{i}', 'wb') as f:\n        f.write(b'x' * 2**24)\n"
    )
    kit.hand_in(student, _append(kit, kit.solved(), kit.answers[0], code))
    return Expect(kit.total, "No space left on device")


def fork_bomb(kit: Kit, student: str) -> Expect:
    """The last answer starts a hundred processes that sleep for a minute."""
    code = (
        "import os, time\nfor _ in range(100):\n    if os.fork() == 0:\n"
        "        time.sleep(60)\n        os._exit(0)\n"
    )
    kit.hand_in(student, _append(kit, kit.solved(), kit.last, code))
    return Expect(kit.points_before(kit.last), "more than 32 processes")


def forged_reply(kit: Kit, student: str) -> Expect:
    """The last answer writes its own reply on the grader's channel: two million tiny values,
    which would cost the grader about a hundred times the message's size to decode."""
    code = (
        "import os, struct, sys\nbody = b'{\"value\": [' + b'0,' * 2_000_000 + b'0]}'\n"
        "os.write(int(sys.argv[-1]), struct.pack('!Q', len(body)) + body)\n"
    )
    kit.hand_in(student, _append(kit, kit.solved(), kit.last, code))
    return Expect(kit.points_before(kit.last), "broke the protocol")


CASES += [
    fills_memory_beside_its_limit,
    fork_bomb,
    forged_reply,
    hard_linked_notebook,
    named_pipe_notebook,
    malformed_nbgrader_metadata,
    huge_answer_cell,
    prints_what_its_code_saw,
    names_its_error_after_what_it_saw,
]

REFUSED_FOLDERS = {
    "markup": "<img src=x onerror=window.HOSTILE_ID=1>",
    "terminal": "eve\x1b[2K\x1b[1A\x1b[2Kadmin",
    "linked": "linked_folder",
}
"""submission folders that must not be graded at all: ids outside the safe alphabet, and a
student folder whose assignment folder is a symbolic link into the course's source"""


def refused_folders(kit: Kit) -> None:
    for key, name in REFUSED_FOLDERS.items():
        if key == "linked":
            (kit.course / "submitted" / name).mkdir(parents=True)
            (kit.course / "submitted" / name / ASSIGNMENT).symlink_to(
                kit.course / "solutions" / ASSIGNMENT
            )
        else:
            kit.hand_in(name, kit.solved())
