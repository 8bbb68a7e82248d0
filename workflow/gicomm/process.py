"""Run a measuring program (a native driver or harness) under the batch runner: its stdout and
stderr go line by line to ours (the job's log), its last lines are kept for the failure message, it
is killed with its whole process group at the deadline, and it dies with the runner (a killed job
leaves no driver behind writing into a batch)."""

from __future__ import annotations

import collections
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TextIO

TAIL_LINES = 20
PR_SET_PDEATHSIG = 1
# What the drivers' exit codes mean (native/bench/README.md).
EXIT_MEANINGS = {
    1: "an error outside any point",
    2: "it refused its arguments or points file",
    3: "the hardware it needs is missing",
}


def exit_meaning(code: int) -> str:
    if code in EXIT_MEANINGS:
        return EXIT_MEANINGS[code]
    if 128 < code < 160:  # how a shell reports a child killed by a signal
        try:
            return f"128 + {code - 128}: killed by signal {signal.Signals(code - 128).name}"
        except ValueError:
            pass
    return "an exit code the driver contract does not define"


def die_with_parent(signum: int = signal.SIGKILL) -> None:
    """Have the kernel send `signum` to this process when its parent dies (Linux; elsewhere a
    no-op). A bench job calls it so that a killed Snakemake leaves no job measuring on behind it
    (the rerun resumes instead); a driver gets it between fork and exec."""
    parent = os.getppid()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signum)
    if os.getppid() != parent:  # the parent died before the request was in place
        os.kill(os.getpid(), signum)


def _die_with_parent() -> None:  # runs in the child between fork and exec
    die_with_parent(signal.SIGKILL)


@dataclass
class Ended:
    """How a program run ended."""

    program: str
    code: int | None  # None: killed at the deadline
    deadline_s: float
    elapsed_s: float
    tail: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.code == 0

    def last_line(self) -> str:
        """The last line it printed that is not a progress line."""
        for line in reversed(self.tail):
            if line.strip() and not line.startswith("[gicomm] point"):
                return line.strip()
        return ""

    def describe(self) -> str:
        if self.code is None:
            what = f"{self.program} did not finish within {self.deadline_s:.0f} s (the point limit)"
        elif self.code < 0:
            what = f"{self.program} was killed by signal {signal.Signals(-self.code).name}"
        else:
            what = f"{self.program} exited with code {self.code} ({exit_meaning(self.code)})"
        last = self.last_line()
        return f"{what} after {self.elapsed_s:.1f} s" + (f": {last}" if last else "")


def run_logged(
    argv: Sequence[str],
    *,
    deadline_s: float,
    env: dict[str, str] | None = None,
    pass_fds: Sequence[int] = (),
    log: TextIO | None = None,
) -> Ended:
    """Run `argv` (no shell), copying its output to `log` (default: our stderr)."""
    out = log or sys.stderr
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    t0 = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
        pass_fds=tuple(pass_fds),
        start_new_session=True,  # its own process group: killed whole at the deadline
        preexec_fn=_die_with_parent,  # noqa: PLW1509 (single-threaded here; the reader starts after)
    )
    assert proc.stdout is not None

    def copy() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            tail.append(line)
            out.write(line + "\n")
            out.flush()

    reader = threading.Thread(target=copy, daemon=True)
    reader.start()
    code: int | None
    try:
        code = proc.wait(timeout=deadline_s)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        if proc.poll() is None:
            _kill_group(proc)
    reader.join(timeout=10)
    return Ended(argv[0].rsplit("/", 1)[-1], code, deadline_s, time.monotonic() - t0, list(tail))


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
