"""Resource limits for every process that runs a submission's code.

A student process (the nbgrader kernel, the verification sandbox) starts in a session of its
own -- and, unless the cohort is declared trusted, inside the OS sandbox of :mod:`.jail` --
with these limits set before it runs any of the learner's code:

* ``RLIMIT_AS`` -- address space, so a huge allocation is a ``MemoryError`` in that process;
* ``RLIMIT_CPU`` -- a backstop that kills a runaway process even if it escapes its parent;
* ``RLIMIT_FSIZE``, ``RLIMIT_CORE`` -- no disk-filling files, no core dumps.

Wall-clock limits are enforced by the parent, which kills the process, its descendants and its
session when time is up (the sandbox's PID namespace takes everything else with it).

``python -m mini_llm.grading.limits --memory-mb N --cpu-s S --file-mb F -- CMD`` applies the
limits and then executes ``CMD``: the nbgrader kernel is started through it (:mod:`.nbglue`).
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import time
from dataclasses import dataclass

import psutil

CELL_CPU_S = 30.0
"""CPU seconds a test cell may use when graded (``mini-llm grade --cell-timeout``), and a
part of a learner's package when checked (``mini-llm learner check``)"""


@dataclass(frozen=True)
class Limits:
    """What one student process may use."""

    memory_mb: int = 2048
    cpu_s: int = 660
    file_mb: int = 64

    def argv(self) -> list[str]:
        """Command-line form, for ``python -m mini_llm.grading.limits``."""
        return [
            "--memory-mb",
            str(self.memory_mb),
            "--cpu-s",
            str(self.cpu_s),
            "--file-mb",
            str(self.file_mb),
        ]

    def apply(self) -> None:
        """Set the limits on this process (before it runs anything untrusted)."""

        def cap(which: int, value: int) -> None:
            hard = resource.getrlimit(which)[1]
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (value, value))

        cap(resource.RLIMIT_AS, self.memory_mb * 2**20)
        cap(resource.RLIMIT_CPU, self.cpu_s)
        cap(resource.RLIMIT_FSIZE, self.file_mb * 2**20)
        cap(resource.RLIMIT_CORE, 0)

    def preexec(self) -> None:
        """For ``subprocess.Popen(preexec_fn=...)``: a session of its own, then the limits."""
        if os.getsid(0) != os.getpid():
            os.setsid()
        self.apply()


def student_environment(home: str) -> dict[str, str]:
    """A small environment for student processes: no secrets, one thread, private home."""
    keep = ("PATH", "LANG", "LC_ALL", "VIRTUAL_ENV", "JUPYTER_PATH")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(
        HOME=home,
        TMPDIR=home,
        IPYTHONDIR=os.path.join(home, ".ipython"),
        MPLCONFIGDIR=os.path.join(home, ".matplotlib"),
        MPLBACKEND="Agg",
        OMP_NUM_THREADS="1",
        OPENBLAS_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        MALLOC_ARENA_MAX="2",
        PYTHONDONTWRITEBYTECODE="1",
    )
    return env


def kill_tree(pid: int) -> None:
    """Kill ``pid``, its descendants and everything left in its session."""
    victims: set[psutil.Process] = set()
    try:
        root = psutil.Process(pid)
        victims.update([root, *root.children(recursive=True)])
    except psutil.NoSuchProcess:
        pass
    for process in psutil.process_iter():
        try:
            if os.getsid(process.pid) == pid:
                victims.add(process)
        except (psutil.Error, OSError):
            continue
    for process in victims:
        try:
            process.kill()
        except psutil.Error:
            pass
    deadline = time.monotonic() + 5
    while any(map(_running, victims)) and time.monotonic() < deadline:
        time.sleep(0.002)


def _running(process: psutil.Process) -> bool:
    """Still able to run code. A killed process whose parent has not reaped it yet (a zombie)
    cannot: waiting for the reaping costs 1.5 s for the processes inside bubblewrap, which
    only the machine's init reaps once their parent is gone."""
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_or_kill(process, deadline: float) -> bool:
    """Wait for a Popen until ``deadline`` (monotonic); kill its tree if late. True if in time."""
    while process.poll() is None:
        if time.monotonic() >= deadline:
            kill_tree(process.pid)
            process.wait()
            return False
        time.sleep(0.05)
    kill_tree(process.pid)  # anything it left behind
    return True


def signal_name(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit status {returncode}"


def main(argv: list[str] | None = None) -> None:
    """Apply limits, then execute the command after ``--`` (the nbgrader kernel)."""
    parser = argparse.ArgumentParser(prog="python -m mini_llm.grading.limits")
    parser.add_argument("--memory-mb", type=int, required=True)
    parser.add_argument("--cpu-s", type=int, required=True)
    parser.add_argument("--file-mb", type=int, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    Limits(args.memory_mb, args.cpu_s, args.file_mb).preexec()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
