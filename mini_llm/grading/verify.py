"""The trusted score: run the instructor's tests here, against answers computed elsewhere.

The notebook is replayed in the assignment's order. Set-up cells and the learner's answer
cells run in a separate, resource-limited sandbox process (:mod:`.sandbox`) that never receives
a test's checks. Test cells run *here*, in the grader's own interpreter, with pristine NumPy,
torch and :mod:`mini_llm.checks`; each name the reference solution defines (``count_bigrams``
...) is bound to a :class:`Remote` whose calls are executed in the sandbox and whose results
come back as plain data (:mod:`.wire`); a test's own models and optimizers, and its helpers
marked ``beside_the_answers``, are lent to those calls (:mod:`.lending`). So a submission can
only influence the *answers*; the expected values, the comparisons and the verdict are computed
where it cannot reach.

Replay follows a notebook run: an error in a cell does not stop later cells; a cell that runs
past its time is interrupted; if the sandbox dies (``os._exit``, a segfault, a kill after an
ignored interrupt) nothing after that point runs, so no later test can pass.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from mini_llm.checks import error_name
from mini_llm.grading import lending, limits, wire
from mini_llm.grading.jail import Jail
from mini_llm.grading.notebook import Assignment, Cell, Submission
from mini_llm.grading.sandbox import TRUNCATED, CappedText
from mini_llm.learner.registry import part_tested_by, parts_of

WALL_FACTOR = 4
"""A cell is interrupted when the student's process has used ``cell_timeout_s`` of CPU time,
or when WALL_FACTOR times that has passed on the clock (a cell that sleeps or waits): CPU
time, because on a busy machine a correct cell's wall time grows with everyone else's load."""

INTERRUPT_GRACE_S = 10.0
"""Seconds an interrupted cell gets to report its KeyboardInterrupt. Generous on purpose: on a
loaded machine a fresh process formatting its first traceback can take seconds, and a sandbox
that answers late is killed and loses every later test."""


def carry_back(mine: Any, theirs: Any) -> Any:
    """Make the caller's argument ``mine`` equal to its copy ``theirs`` after the student's
    call changed it, in place, keeping the identity of ``mine`` and of what it holds. Returns
    the value to put where ``mine`` was (``mine`` itself unless it cannot change in place)."""
    torch = sys.modules.get("torch")  # no torch object exists here unless the tests imported it
    # An in-place reshape (a.shape = ..., t.unsqueeze_(0)) changes only the shape: it is carried
    # back too where the array keeps its number of elements and its memory stays contiguous.
    if isinstance(mine, np.ndarray) and isinstance(theirs, np.ndarray):
        if mine.shape != theirs.shape and mine.size == theirs.size:
            with contextlib.suppress(AttributeError, ValueError):
                mine.shape = theirs.shape
        if mine.shape == theirs.shape and mine.flags.writeable:
            with contextlib.suppress(TypeError, ValueError):
                mine[...] = theirs
        return mine
    if torch is not None and isinstance(mine, torch.Tensor) and isinstance(theirs, torch.Tensor):
        with torch.no_grad(), contextlib.suppress(RuntimeError, TypeError):
            if mine.shape != theirs.shape and mine.numel() == theirs.numel():
                mine.resize_(theirs.shape)
            if mine.shape == theirs.shape:
                mine.copy_(theirs.to(mine.dtype))
        return mine
    if isinstance(mine, np.random.Generator) and isinstance(theirs, np.random.Generator):
        mine.bit_generator.state = theirs.bit_generator.state
        return mine
    if (
        torch is not None
        and isinstance(mine, torch.Generator)
        and isinstance(theirs, torch.Generator)
    ):
        mine.set_state(theirs.get_state())
        return mine
    if isinstance(mine, list) and isinstance(theirs, list):
        kept = [carry_back(a, b) for a, b in zip(mine, theirs)]
        mine[:] = kept + theirs[len(kept) :]
        return mine
    if isinstance(mine, tuple) and isinstance(theirs, tuple) and len(mine) == len(theirs):
        for a, b in zip(mine, theirs):
            carry_back(a, b)
        return mine
    if isinstance(mine, dict) and isinstance(theirs, dict):
        kept = {k: carry_back(mine[k], v) if k in mine else v for k, v in theirs.items()}
        mine.clear()
        mine.update(kept)
        return mine
    if isinstance(mine, set) and isinstance(theirs, set):
        mine.clear()
        mine.update(theirs)
        return mine
    return theirs


class StudentError(Exception):
    """An exception raised in the student's process that has no trusted counterpart here."""


class TimeLimitExceeded(Exception):
    """The student's code did not finish within the time it was given (``reply``: the
    sandbox's answer after the interrupt)."""

    def __init__(self, message: str, reply: dict):
        super().__init__(message)
        self.reply = reply


class SandboxDied(Exception):
    """The student's process is gone; nothing more can run in it."""


MAX_PROCESSES = 32
"""processes a sandbox may hold: a fork bomb is stopped, while a DataLoader's workers fit
(the kernel's process limit does not apply inside the user namespace)"""
WATCH_S = 0.25
"""how often a long wait looks at the sandbox's CPU time and processes"""


@dataclass
class CellResult:
    """The outcome of one cell. ``message`` is for the instructor; ``learner_message`` may be
    shown to the learner (no hidden test code, inputs or expected values)."""

    grade_id: str
    kind: str
    points: float = 0.0
    max_points: float = 0.0
    passed: bool | None = None
    message: str = ""
    learner_message: str = ""
    output: str = ""


@dataclass
class Verification:
    cells: list[CellResult] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def auto_score(self) -> float:
        return sum(c.points for c in self.cells if c.kind == "test")


# --------------------------------------------------------------------------- the sandbox
class SandboxClient:
    """Starts the sandbox process (inside the OS sandbox of :mod:`.jail`) and exchanges
    requests with it under deadlines."""

    def __init__(self, workdir: Path, limit: limits.Limits, files: list[Path], jail: Jail):
        self.limit = limit
        request_read, self.requests = os.pipe()
        self.replies, reply_write = os.pipe()
        start = (
            f"import sys; sys.path.insert(0, {jail.package_path()!r}); "
            "from mini_llm.grading.sandbox import main; main()"
        )
        home = jail.home(workdir / "home")
        command = jail.wrap(
            [*jail.python(), "-c", start, str(request_read), str(reply_write)],
            files={p.name: p for p in files},
        )
        if not jail.enabled:  # trusted cohort: limits only, a private folder on the grader's disk
            for path in files:
                shutil.copy(path, home)
        self.process = subprocess.Popen(
            command,
            cwd=None if jail.enabled else home,
            env=limits.student_environment(home),
            pass_fds=(request_read, reply_write),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=limit.preexec,  # noqa: PLW1509 - grading workers are single-threaded
        )
        os.close(request_read)
        os.close(reply_write)
        self.death: str | None = None
        self.crashed = False  # it died, broke the protocol or ran too many processes
        self.jailed = jail.enabled
        self._interpreter: int | None = None
        self._process: psutil.Process | None = None

    def interpreter_pid(self) -> int:
        """The host pid of the Python process that runs the cells (inside bwrap's namespace),
        found before any student code has run: the first process there that is not bwrap."""
        if self._interpreter is None:
            self._interpreter = self.process.pid
            end = time.monotonic() + 10
            while self.jailed and time.monotonic() < end:
                with contextlib.suppress(psutil.Error):
                    inner = [
                        p
                        for p in psutil.Process(self.process.pid).children(recursive=True)
                        if p.name() != "bwrap"
                    ]
                    if inner:
                        self._interpreter = inner[0].pid
                        break
                time.sleep(0.005)
        return self._interpreter

    def cpu_seconds(self) -> float:
        """CPU time used so far by the process that runs the cells, its waited children and
        every process it has running now (a busy child is the student's time too)."""
        try:
            if self._process is None:
                self._process = psutil.Process(self.interpreter_pid())
            used = self._process.cpu_times()
            children = self._process.children(recursive=True)
        except psutil.Error:
            return 0.0
        total = used.user + used.system + used.children_user + used.children_system
        for child in children:
            with contextlib.suppress(psutil.Error):
                total += sum(child.cpu_times()[:2])
        if len(children) > MAX_PROCESSES:  # looked at before each cell and in long waits
            self.close(f"was stopped: it started more than {MAX_PROCESSES} processes", crash=True)
        return total

    def request(self, message: dict, budget: Budget) -> dict:
        """Send one request; the reply, or ``TimeLimitExceeded``/``SandboxDied``."""
        if self.death:
            raise SandboxDied(self.death)
        interpreter = self.interpreter_pid()
        try:
            wire.send(self.requests, message)
            self._wait(budget)
            return self._reply(budget.wall_deadline)
        except TimeoutError:
            with contextlib.suppress(OSError):  # like Jupyter's interrupt
                os.kill(interpreter, signal.SIGINT)
            try:
                reply = self._reply(time.monotonic() + INTERRUPT_GRACE_S)
            except (TimeoutError, EOFError, OSError, wire.WireError):
                self.close("was stopped: it ignored an interrupt at its time limit")
                raise SandboxDied(self.death) from None
            raise TimeLimitExceeded(
                f"did not finish in time and was interrupted; output: {reply.get('output', '')}"[
                    :500
                ],
                reply,
            ) from None
        except (EOFError, OSError, wire.WireError) as err:
            try:
                code = self.process.wait(timeout=0 if isinstance(err, wire.WireError) else 5)
            except subprocess.TimeoutExpired:
                code = None
            if self.jailed and code is not None and code > 128:  # bwrap: 128 + the signal
                code = 128 - code
            self.close(
                f"died ({limits.signal_name(code)})"
                if code is not None
                else f"broke the protocol: {err}",
                crash=True,
            )
            raise SandboxDied(self.death) from None

    def _wait(self, budget: Budget) -> None:
        """Until a reply starts to arrive; ``TimeoutError`` when the cell's budget is spent.
        A wait looks up the CPU time and the number of processes every ``WATCH_S`` seconds
        (a quick reply costs neither)."""
        while True:
            now = time.monotonic()
            left = budget.cpu_s - budget.spent
            if left <= 0 or now >= budget.wall_deadline:
                raise TimeoutError("the cell's time is up")
            ready, _, _ = select.select(
                [self.replies], [], [], min(left, budget.wall_deadline - now, WATCH_S)
            )
            if ready:
                return
            budget.spent = self.cpu_seconds() - budget.cpu_start
            if self.death:
                raise SandboxDied(self.death)

    def _reply(self, deadline: float) -> dict:
        reply = wire.receive(self.replies, deadline)
        if "failure" in reply:
            raise wire.WireError(str(reply["failure"]))
        return reply

    def close(self, reason: str = "was closed", crash: bool = False) -> None:
        """End the process; ``crash``: the learner's code ended it (not the grader, for time)."""
        if self.death is None:
            self.death, self.crashed = reason, crash
        limits.kill_tree(self.process.pid)
        self.process.wait()
        for fd in (self.requests, self.replies):
            with contextlib.suppress(OSError):
                os.close(fd)


class Remote:
    """A name (or an object) that lives in the student's process; calling it calls it there."""

    def __init__(self, runner: Replay, token: dict, label: str):
        self._runner, self._token, self.__name__ = runner, token, label

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._runner.call(self, args, kwargs)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return self._runner.remote_value(
            {"op": "getattr", "target": self._token, "attr": attr}, f"{self.__name__}.{attr}"
        )

    def __repr__(self) -> str:
        return f"<{self.__name__} in the student's notebook>"


def rebuild_exception(raised: Any) -> Exception:
    """The student's exception as a trusted one (for ``expect_raises``): the first built-in
    exception type in its ancestry, by name. Nothing the submission names is ever imported."""
    types = raised.get("types") if isinstance(raised, dict) else None
    message = str(raised.get("message", ""))[:2000] if isinstance(raised, dict) else ""
    types = [t for t in types if isinstance(t, str)] if isinstance(types, list) else []
    for qualified in types:
        module, _, name = qualified.rpartition(".")
        cls = getattr(builtins, name, None) if module == "builtins" else None
        if cls is AssertionError:  # only the grader's checks fail with their own messages
            continue
        if isinstance(cls, type) and issubclass(cls, Exception):
            with contextlib.suppress(TypeError):
                return cls(message)
    first = types[0].rpartition(".")[2] if types else "Error"
    name = first if first.isidentifier() else "Error"
    return type(name, (StudentError,), {})(message)


# ------------------------------------------------------------------------------- replay
class _NoMagics:
    """``get_ipython()`` for the trusted side: instructor cells' magics are not needed there."""

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: None


def _trusted_code(source: str) -> str:
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(source)


@dataclass
class Budget:
    """The time a cell may still take: CPU seconds of the student's process since
    ``cpu_start``, and a wall-clock deadline (monotonic)."""

    cpu_start: float
    cpu_s: float
    wall_deadline: float
    spent: float = 0.0  # CPU seconds used since cpu_start, as last looked up


class Replay:
    """One replay of a notebook: the sandbox, the trusted namespace, the deadlines."""

    def __init__(
        self,
        assignment: Assignment,
        workdir: Path,
        limit: limits.Limits,
        timeout_s: float,
        cell_timeout_s: float,
        files: list[Path],
        jail: Jail,
    ):
        self.assignment = assignment
        self.sandbox = SandboxClient(workdir, limit, files, jail)
        self.namespace: dict[str, Any] = {"__name__": "__main__", "get_ipython": _NoMagics}
        self.notebook_deadline = time.monotonic() + timeout_s
        self.timeout_s, self.cell_timeout_s = timeout_s, cell_timeout_s
        self.budget = Budget(0.0, cell_timeout_s, self.notebook_deadline)
        self.kinds: dict[str, str] = {}
        self.parts = {p.name: p.reference for p in parts_of(assignment.name)}
        self.focused: str | None = None  # the part whose tests are running

    # -- talking to the sandbox
    def start_cell(self) -> None:
        wall = min(self.notebook_deadline, time.monotonic() + WALL_FACTOR * self.cell_timeout_s)
        self.budget = Budget(self.sandbox.cpu_seconds(), self.cell_timeout_s, wall)

    def _send(self, message: dict) -> dict:
        if time.monotonic() >= self.notebook_deadline:
            self.sandbox.close(
                f"was stopped: the notebook's time limit ({self.timeout_s:g} s) was used up"
            )
        return self.sandbox.request(message, self.budget)

    def _encode(self, value: Any, lent: list) -> Any:
        """``value`` as plain data; a torch model or optimizer of the tests is added to ``lent``
        (sent once per call, however often it appears) and crosses as its place there."""

        def ref(obj: Any) -> dict:
            if isinstance(obj, Remote):
                return obj._token
            if lending.lendable(obj):
                place = next((i for i, o in enumerate(lent) if o is obj), None)
                if place is None:
                    place = len(lent)
                    lent.append(obj)
                return {"$obj": place}
            raise TypeError(f"a {type(obj).__name__} cannot be passed to the student's code")

        return wire.encode(value, ref)

    def _decode(self, value: Any, label: str) -> Any:
        def handle(token: dict) -> Remote:
            if "$ref" not in token:  # names and lent objects are the grader's to send, not to get
                raise wire.WireError(f"unknown value on the wire: {sorted(token)[:3]}")
            return Remote(self, {"$ref": token["$ref"]}, f"<object from {label}>")

        return wire.decode(value, handle)

    def _answer(self, reply: dict, label: str) -> Any:
        if "raised" in reply:
            raise rebuild_exception(reply["raised"])
        try:
            return self._decode(reply.get("value"), label)
        except wire.WireError as err:
            raise StudentError(
                f"{label} returned something that is not plain data: {err}"
            ) from None

    def call(self, target: Remote, args: tuple, kwargs: dict) -> Any:
        return self._call(target._token, target.__name__, args, kwargs, [])

    def call_beside(self, helper: Callable, args: tuple, kwargs: dict) -> Any:
        """A test helper marked :func:`~.lending.beside_the_answers`, lent to the
        student's process and run there on the learner's objects."""
        return self._call({"$obj": 0}, helper.__name__, args, kwargs, [helper])

    def _call(self, target: dict, label: str, args: tuple, kwargs: dict, lent: list) -> Any:
        message = {
            "op": "call",
            "target": target,
            "args": self._encode(list(args), lent),
            "kwargs": self._encode(dict(kwargs), lent),
        }
        if lent:
            message["lent"] = lending.pack(
                lent, lambda obj: obj._token if isinstance(obj, Remote) else None
            )
        reply = self._send(message)
        value = self._answer(reply, label)
        changed = reply.get("arguments")
        for key, state in changed.items() if isinstance(changed, dict) else ():
            mine = args[int(key)] if key.isdigit() and int(key) < len(args) else kwargs.get(key)
            with contextlib.suppress(wire.WireError, TypeError, ValueError, RuntimeError):
                carry_back(mine, self._decode(state, label))
        states = reply.get("lent")
        if lent and not (isinstance(states, list) and len(states) == len(lent)):
            raise StudentError(f"{label} did not give back what the grader lent it")
        for mine, state in zip(lent, states or ()):
            try:  # plain data only: no handle to the student's objects is taken back here
                lending.restore(mine, wire.decode(state))
            except (wire.WireError, ValueError) as err:
                raise StudentError(
                    f"{label} changed the {type(mine).__name__} it was given "
                    f"beyond its numbers: {err}"
                ) from None
        return value

    def remote_value(self, message: dict, label: str) -> Any:
        return self._answer(self._send(message), label)

    # -- the cells
    def run_in_sandbox(
        self, source: str, setup: bool = False, part: str | None = None
    ) -> tuple[bool, str, str]:
        """Run a cell in the sandbox: the learner's (or, ``setup``, the instructor's, which may
        use the references the answers may not); ``part``: the part whose answer cell it is."""
        try:
            reply = self._send(
                {
                    "op": "cell",
                    "source": source,
                    "names": self.assignment.graded_names,
                    "setup": setup,
                    "part": part,
                }
            )
        except TimeLimitExceeded as err:  # what the cell defined before the interrupt counts
            self._note_kinds(err.reply)
            raise
        self._note_kinds(reply)
        output = str(reply.get("output", ""))
        if "raised" in reply:
            return False, str(rebuild_exception(reply["raised"])), output
        return bool(reply.get("ok")), str(reply.get("error") or ""), output

    def withhold(self) -> None:
        """Refuse answers the installed reference of this assignment's parts (:mod:`.withhold`)."""
        if self.parts:
            with contextlib.suppress(SandboxDied, TimeLimitExceeded):
                reply = self._send({"op": "withhold", "parts": self.parts})
                if "raised" in reply:
                    self.sandbox.close(f"could not withhold the references: {reply['raised']}")

    def focus(self, part: str | None) -> None:
        """While ``part``'s tests run, the other parts in the learner's namespace are the
        references (one mistake costs one part); ``None``: the learner's own again (the
        sandbox also gives them back before it runs a learner's cell)."""
        part = part if part in self.parts else None
        if part != self.focused:
            self.focused = None
            self._send({"op": "focus", "part": part})
            self.focused = part

    def _note_kinds(self, reply: dict) -> None:
        kinds = reply.get("names")
        if isinstance(kinds, dict):
            self.kinds = {k: v for k, v in kinds.items() if k in self.assignment.graded_names}

    def bind_graded_names(self) -> None:
        """Point the trusted namespace at the learner's current definitions."""
        for name in self.assignment.graded_names:
            kind = self.kinds.get(name, "missing")
            if kind == "callable":
                self.namespace[name] = Remote(self, {"$name": name}, name)
            elif kind == "value":
                self.namespace[name] = self.remote_value(
                    {"op": "get", "target": {"$name": name}}, name
                )
            else:
                self.namespace.pop(name, None)

    def run_trusted(self, code: str, label: str) -> None:
        """Run instructor code (set-up or tests) in the trusted namespace; its helpers marked
        ``beside_the_answers`` run in the student's process."""
        lending.beside = self.call_beside
        try:
            exec(compile(_trusted_code(code), f"<{label}>", "exec"), self.namespace)  # noqa: S102
        finally:
            lending.beside = None


def redact(message: str, error: BaseException) -> str:
    """What a learner may see of a failed hidden check: the function, the kind of failure
    and the hint -- never the inputs, the expected value or the test's code."""
    first = message.splitlines()[0] if message else ""
    # the hint is the check's last line; an error that is not a check's is the answer's own
    # text, which may carry what it saw, so none of it is shown
    last = message.splitlines()[-1].strip() if message else ""
    hint = last if isinstance(error, AssertionError) and last.startswith("Hint:") else ""
    name = re.match(r"\s*([A-Za-z_][\w.]*)\(", first)
    after = None if name else re.search(r"(?<![\w.])([A-Za-z_]\w*)\(", first)  # "w after f(..."
    what = re.search(
        r" (is wrong|has the wrong shape|has the wrong number of items|"
        r"should [^.:(]*?(?= of shape|[.:(]|$)|raised NotImplementedError|"
        r"raised an error|raised the wrong kind of error|raised [A-Z][\w.]*|"
        r"should refuse this input)",
        first,
    )
    if isinstance(error, NameError):
        return f"A hidden check failed: {error}."
    if not isinstance(error, AssertionError):
        return f"A hidden check failed ({error_name(error)}).".strip()
    if after:
        summary = f"a result of {after.group(1)}(…) {what.group(1) if what else 'is wrong'}"
    elif name:
        summary = (
            f"{name.group(1)}(…) {what.group(1)}" if what else f"a check of {name.group(1)}(…)"
        )
    else:
        return f"A hidden check failed. {hint}".strip()
    return f"A hidden check failed: {summary}. {hint}".strip()


def run_test(replay: Replay, cell: Cell, result: CellResult, hidden: bool) -> None:
    """Run the visible (or the hidden) checks of a test cell into ``result``; a failure sets
    its messages, and the cell passes once both kinds have run without one."""
    captured = CappedText()
    try:
        replay.start_cell()
        try:
            replay.bind_graded_names()
        except (StudentError, TimeLimitExceeded) as err:
            result.message = result.learner_message = f"{type(err).__name__}: {err}"
            result.passed = False
            return
        part = part_tested_by(cell.grade_id or "")
        replay.focus(part)
        try:
            for secret, code in cell.chunks():
                if secret != hidden:
                    continue
                try:
                    with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
                        replay.run_trusted(code, cell.grade_id)
                except SandboxDied:
                    raise
                except Exception as err:  # noqa: BLE001 - a failed check, whatever its type
                    result.message = f"{type(err).__name__}: {err}".strip()
                    if isinstance(err, AssertionError) and str(err):
                        result.message = str(err)
                    result.learner_message = redact(str(err), err) if hidden else result.message
                    result.output += captured.take()
                    result.passed = False
                    return
        finally:
            with contextlib.suppress(SandboxDied, TimeLimitExceeded):
                replay.focus(None)
    except SandboxDied as err:
        result.message = result.learner_message = f"Not run: the notebook's process {err}."
        result.passed = False
        return
    result.output += captured.take()
    if hidden:
        result.points, result.passed = result.max_points, True


def verify(
    assignment: Assignment,
    submission: Submission,
    workdir: Path,
    limit: limits.Limits,
    timeout_s: float,
    cell_timeout_s: float,
    files: list[Path],
    jail: Jail,
) -> Verification:
    """Replay the notebook with the learner's answers; the trusted score of each cell.

    In three passes: the set-up and answer cells in the notebook's order, then the visible
    checks of every test cell, then the hidden ones. So what a learner is shown -- the output
    and errors of their cells, the messages of the visible checks -- comes from a run in which
    no hidden check has yet called their code: nothing their code saw of a hidden input can
    reach the feedback (a hidden check's own failure is shown redacted).

    An answer cell that kills the notebook's process in the first pass would take the points
    of the parts above it with it; the cells above it are then replayed again, in a fresh
    process, and keep what they earn, as in a notebook run from the top."""
    replay = Replay(assignment, workdir, limit, timeout_s, cell_timeout_s, files, jail)
    outcome, fatal = _replay(replay, assignment.cells, submission)
    if fatal is None or fatal == 0:
        return outcome
    retry = Replay(assignment, workdir, limit, timeout_s, cell_timeout_s, files, jail)
    earlier, _ = _replay(retry, assignment.cells[:fatal], submission)
    kept = {c.grade_id for c in earlier.cells}
    earlier.cells += [c for c in outcome.cells if c.grade_id not in kept]
    earlier.problems = outcome.problems + [p for p in earlier.problems if p not in outcome.problems]
    return earlier


def _replay(
    replay: Replay, cells: list[Cell], submission: Submission
) -> tuple[Verification, int | None]:
    """The three passes over ``cells``; and the index of the answer cell in which the
    notebook's process died during the first pass (None if it did not)."""
    outcome = Verification()
    tests: list[tuple[Cell, CellResult]] = []
    fatal = None
    try:
        replay.withhold()  # a failure closes the process: every cell then says so
        for index, cell in enumerate(cells):
            if cell.kind == "setup":
                _setup(replay, cell, outcome)
            elif cell.kind in ("answer", "manual") and cell.cell_type == "code":
                alive = replay.sandbox.death is None
                _answer(replay, cell, submission, outcome)
                if alive and replay.sandbox.crashed:
                    fatal = index
            elif cell.kind == "test":
                tests.append((cell, CellResult(cell.grade_id, "test", 0.0, cell.points, None)))
                outcome.cells.append(tests[-1][1])
            elif cell.kind == "manual":
                outcome.cells.append(CellResult(cell.grade_id, "manual", 0.0, cell.points))
        after_visible: dict[str, dict] = {}
        for hidden in (False, True):
            for cell, result in tests:
                if result.passed is None:
                    if hidden:  # what the cell's visible checks left, as in a notebook run
                        replay.namespace.update(after_visible.get(cell.grade_id, {}))
                    run_test(replay, cell, result, hidden)
                    if not hidden:
                        after_visible[cell.grade_id] = dict(replay.namespace)
    finally:
        replay.sandbox.close()
    return outcome, fatal


def _setup(replay: Replay, cell: Cell, outcome: Verification) -> None:
    """The instructor's set-up code, in the sandbox and in the grader; what the grader's run
    printed (the instructor's code, no test in it) is the cell's output in the feedback."""
    replay.start_cell()
    with contextlib.suppress(SandboxDied, TimeLimitExceeded):
        replay.run_in_sandbox(cell.source, setup=True)
    printed = CappedText()
    try:
        with contextlib.redirect_stdout(printed):
            replay.start_cell()
            replay.bind_graded_names()
            replay.run_trusted(cell.source, cell.grade_id)
    except SandboxDied:
        pass
    except Exception as err:  # noqa: BLE001 - reported; the tests that need it will fail
        outcome.problems.append(
            f"set-up cell '{cell.grade_id}' failed in the grader: {type(err).__name__}: {err}"
        )
    outcome.cells.append(CellResult(cell.grade_id, "setup", output=printed.take()))


def _answer(replay: Replay, cell: Cell, submission: Submission, outcome: Verification) -> None:
    result = CellResult(cell.grade_id, cell.kind, 0.0, cell.points)
    messages, outputs = [], []
    for source in submission.answers.get(cell.grade_id, []):
        replay.start_cell()
        already_dead = replay.sandbox.death is not None
        try:
            part = (cell.grade_id or "").removesuffix("_impl")
            ok, error, output = replay.run_in_sandbox(source, part=part)
        except TimeLimitExceeded as err:
            messages.append(f"TimeLimitExceeded: the cell {err}")
            outcome.problems.append(
                f"cell '{cell.grade_id}' ran past its time limit and was interrupted"
            )
            continue
        except SandboxDied as err:
            if already_dead:
                messages.append(f"Not run: the notebook's process {err} earlier.")
            else:
                messages.append(f"The notebook's process {err} while running this cell.")
                outcome.problems.append(f"the notebook's process {err} in cell '{cell.grade_id}'")
            break
        outputs.append(output)
        if not ok:
            messages.append(error)
            first_line = error.splitlines()[0][:120] if error else "an error"
            outcome.problems.append(f"error in cell '{cell.grade_id}': {first_line}")
        if TRUNCATED in output:
            outcome.problems.append(f"cell '{cell.grade_id}' printed too much; the output was cut")
    if replay.sandbox.death is None:
        replay.sandbox.cpu_seconds()  # stops the process if the cell left too many running
    result.message = result.learner_message = "\n".join(m for m in messages if m)
    result.output = "\n".join(o for o in outputs if o)
    outcome.cells.append(result)
