"""The operating system's sandbox around every process that runs student code (bubblewrap).

A submission is untrusted code; in-process checks cannot stop code that runs as the grader's
user with the grader's view of the disk. So each student process starts inside ``bwrap``:

* its own user namespace (uid 65534, no capabilities) and PID namespace -- it sees no other
  process, and everything it started dies with it (no daemon outlives the run);
* its own network namespace (loopback only);
* a read-only view of the system folders, the Python environment and the ``mini_llm`` package,
  and nothing else: not ``solutions/``, the gradebook, the course config, other submissions or
  the grader's files (``/proc`` shows only its own processes);
* a private, size-capped, writable home and ``/tmp`` (memory, gone when it exits).

Where user namespaces are unavailable, :func:`check` says why, and the grader refuses to run
untrusted code unless the instructor declares the cohort trusted.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import mini_llm

HOME = "/home/student"
"""The student's working folder inside the sandbox (a tmpfs)."""
PACKAGE_ROOT = "/opt/mini-llm"
"""Where the grader's own ``mini_llm`` package is visible (read-only) inside the sandbox."""
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")


SHM_MB = 64
"""the sandbox's /dev/shm (shared memory, in RAM like its /tmp and home): enough for
multiprocessing's semaphores, too small to hold memory outside the address-space limit"""


class SandboxUnavailable(ValueError):
    """The OS sandbox cannot be made here (no bwrap, or no user namespaces): like a missing
    folder, something the instructor must fix before grading."""


@dataclass(frozen=True)
class Jail:
    """How to wrap a command in the sandbox. ``enabled=False`` is the trusted-cohort mode:
    limits only, no isolation."""

    enabled: bool = True
    tmpfs_mb: int = 256

    def python(self) -> list[str]:
        """The interpreter to start inside the sandbox (the grader's own environment)."""
        if not self.enabled:
            return [sys.executable, "-I"]
        return [str(_environment_python()), "-I"]

    def package_path(self) -> str:
        """The folder to put first on ``sys.path`` so that the grader's ``mini_llm`` is used."""
        return PACKAGE_ROOT if self.enabled else str(Path(mini_llm.__file__).parent.parent)

    def home(self, private: Path) -> str:
        """The student's home: the sandbox's own, or (no sandbox) the folder ``private``."""
        if self.enabled:
            return HOME
        private.mkdir(mode=0o700, parents=True, exist_ok=True)
        return str(private)

    def wrap(
        self,
        command: list[str],
        files: dict[str, Path] = (),
        writable: dict[str, Path] = (),
        read_only: dict[str, Path] = (),
        cwd: str = HOME,
        scratch: tuple[str, ...] = (),
    ) -> list[str]:
        """``command`` inside a fresh sandbox; ``files`` (name in home -> host file) are visible
        read-only in the home, ``writable`` and ``read_only`` (sandbox path -> host folder)
        read-write and read-only; each ``scratch`` path is a tmpfs of its own, as large as
        the home (what the sandbox writes there costs no host disk beyond it)."""
        if not self.enabled:
            return command
        size = str(self.tmpfs_mb * 2**20)
        argv = [
            "bwrap",
            "--unshare-user",
            "--uid",
            "65534",
            "--gid",
            "65534",
            "--unshare-pid",
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--die-with-parent",
            "--new-session",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--size",
            str(SHM_MB * 2**20),
            "--tmpfs",
            "/dev/shm",
            "--remount-ro",
            "/dev",  # its own tmpfs has no size limit: only the devices and the sized /dev/shm
            "--size",
            size,
            "--tmpfs",
            "/tmp",
            "--size",
            size,
            "--tmpfs",
            HOME,
        ]
        for folder in SYSTEM:
            argv += ["--ro-bind-try", folder, folder]
        for folder in _python_folders():
            argv += ["--ro-bind", str(folder), str(folder)]
        package = Path(mini_llm.__file__).resolve().parent
        argv += ["--ro-bind", str(package), f"{PACKAGE_ROOT}/mini_llm"]
        for name, host in dict(files).items():
            argv += ["--ro-bind", str(host), f"{HOME}/{name}"]
        for inside in scratch:
            argv += ["--size", size, "--tmpfs", inside]
        for inside, host in dict(writable).items():
            argv += ["--bind", str(host), inside]
        for inside, host in dict(read_only).items():
            argv += ["--ro-bind", str(host), inside]
        return [*argv, "--chdir", cwd, "--", *command]


def _environment_python() -> Path:
    """This environment's interpreter, by a path that is valid inside the sandbox."""
    return Path(sys.prefix).resolve() / "bin" / Path(sys.executable).name


def _python_folders() -> list[Path]:
    """The Python installation and the environment (venv) this grader runs in."""
    folders = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()}
    return sorted(f for f in folders if not any(p in folders for p in f.parents))


def check(trusted_cohort: bool) -> Jail:
    """The sandbox to use; ``SandboxUnavailable`` (with the reason) if it cannot be made and
    the cohort is not declared trusted."""
    if trusted_cohort:
        return Jail(enabled=False)
    jail = Jail()
    if shutil.which("bwrap") is None:
        raise SandboxUnavailable(
            "bubblewrap (bwrap) is not installed, so student code cannot be isolated from the "
            "course files and the grader. Install it (Debian: apt-get install bubblewrap), or, "
            "only for a cohort you trust, pass --trusted-cohort to grade without isolation."
        )
    probe = subprocess.run(
        jail.wrap([*jail.python(), "-c", "import numpy"]),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if probe.returncode != 0:
        raise SandboxUnavailable(
            "bubblewrap cannot make a sandbox here (user namespaces may be disabled): "
            f"{probe.stderr.strip()[-500:]}. Enable unprivileged user namespaces, or, only for "
            "a cohort you trust, pass --trusted-cohort to grade without isolation."
        )
    return jail
