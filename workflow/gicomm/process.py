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
    """How a program run ended (one rank of it, when `rank` is set)."""

    program: str
    code: int | None  # None: killed at the deadline, or stopped after a peer rank ended
    deadline_s: float
    elapsed_s: float
    tail: list[str] = field(default_factory=list)
    rank: int | None = None
    stopped_after: str = ""  # why it was stopped before the deadline (a peer rank ended)

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
        if self.code is None and self.stopped_after:
            what = f"{self.program} was stopped {self.stopped_after}"
        elif self.code is None:
            what = f"{self.program} did not finish within {self.deadline_s:.0f} s (the point limit)"
        elif self.code < 0:
            what = f"{self.program} was killed by signal {signal.Signals(-self.code).name}"
        else:
            what = f"{self.program} exited with code {self.code} ({exit_meaning(self.code)})"
        last = self.last_line()
        who = f"rank {self.rank}: " if self.rank is not None else ""
        return f"{who}{what} after {self.elapsed_s:.1f} s" + (f": {last}" if last else "")


@dataclass(frozen=True)
class Command:
    """One process of a run: its argv, the variables it adds to ours, and its rank (if any)."""

    argv: Sequence[str]
    env: dict[str, str] = field(default_factory=dict)
    rank: int | None = None
    name: str = ""  # what failure messages call it (default: the program's file name)


def run_logged(
    argv: Sequence[str],
    *,
    deadline_s: float,
    env: dict[str, str] | None = None,
    pass_fds: Sequence[int] = (),
    log: TextIO | None = None,
) -> Ended:
    """Run `argv` (no shell), copying its output to `log` (default: our stderr)."""
    cmd = Command(list(argv), dict(env or {}))
    return run_group([cmd], deadline_s=deadline_s, pass_fds=pass_fds, log=log)[0]


def run_group(
    commands: Sequence[Command],
    *,
    deadline_s: float,
    grace_s: float = 30.0,
    pass_fds: Sequence[int] = (),
    log: TextIO | None = None,
) -> list[Ended]:
    """Run the processes of one measurement together (the ranks of a two-rank point): each copies
    its output to `log` (prefixed with its rank), and none outlives the deadline. Once one of them
    ends, the others get `grace_s` to end too and are then killed, so a rank that died or never
    connected never leaves its peer waiting until the deadline."""
    out = log or sys.stderr
    t0 = time.monotonic()
    running = [_Running.start(c, pass_fds, out) for c in commands]
    first_end: _Running | None = None
    stop_at = t0 + deadline_s
    while True:
        now = time.monotonic()
        live = [r for r in running if r.code is None and r.poll(now - t0)]
        if not live:
            break
        ended = [r for r in running if r.code is not None]
        if ended and first_end is None:
            first_end = min(ended, key=lambda r: r.elapsed)
            stop_at = min(stop_at, now + grace_s)
        if now >= stop_at:
            for r in live:
                r.kill(now - t0)
                if first_end is not None and now < t0 + deadline_s:
                    r.stopped_after = f"{grace_s:.0f} s after {first_end.who()} ended" + (
                        " (it failed)" if first_end.code != 0 else ""
                    )
            break
        time.sleep(0.05)
    return [r.finish(deadline_s) for r in running]


class _Running:
    def __init__(self, cmd: Command, proc: subprocess.Popen[bytes], reader: threading.Thread,
                 tail: collections.deque[str]) -> None:  # fmt: skip
        self.cmd, self.proc, self.reader, self.tail = cmd, proc, reader, tail
        self.code: int | None = None
        self.elapsed = 0.0
        self.stopped_after = ""

    @staticmethod
    def start(cmd: Command, pass_fds: Sequence[int], out: TextIO) -> _Running:
        tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        prefix = f"[rank {cmd.rank}] " if cmd.rank is not None else ""
        proc = subprocess.Popen(
            list(cmd.argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **cmd.env},
            pass_fds=tuple(pass_fds),
            start_new_session=True,  # its own process group: killed whole at the deadline
            preexec_fn=_die_with_parent,  # noqa: PLW1509 (no thread of ours runs yet for it)
        )
        assert proc.stdout is not None

        def copy() -> None:
            assert proc.stdout is not None
            for raw in proc.stdout:
                line = raw.decode("utf-8", errors="replace").rstrip("\n")
                tail.append(line)
                out.write(prefix + line + "\n")
                out.flush()

        reader = threading.Thread(target=copy, daemon=True)
        reader.start()
        return _Running(cmd, proc, reader, tail)

    def poll(self, elapsed: float) -> bool:
        """True while it runs."""
        code = self.proc.poll()
        if code is None:
            return True
        self.code, self.elapsed = code, elapsed
        return False

    def kill(self, elapsed: float) -> None:
        _kill_group(self.proc)
        self.elapsed = elapsed

    def who(self) -> str:
        return f"rank {self.cmd.rank}" if self.cmd.rank is not None else "its peer"

    def finish(self, deadline_s: float) -> Ended:
        if self.proc.poll() is None:
            _kill_group(self.proc)
        self.reader.join(timeout=10)
        name = self.cmd.name or str(self.cmd.argv[0]).rsplit("/", 1)[-1]
        return Ended(name, self.code, deadline_s, self.elapsed, list(self.tail), self.cmd.rank,
                     self.stopped_after)  # fmt: skip


def first_failure(ended: Sequence[Ended]) -> Ended:
    """The run's outcome as one: the rank that failed first (its peers were stopped after it),
    else the first rank."""
    bad = [e for e in ended if not e.ok and not e.stopped_after]
    bad = bad or [e for e in ended if not e.ok]
    return min(bad, key=lambda e: e.elapsed_s) if bad else ended[0]


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
