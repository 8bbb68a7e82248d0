"""A CUDA MPS control daemon private to one group of points: started before their program, stopped
after it, bounded in both directions, and never left behind.

Why: a library whose two PEs share one GPU (NVSHMEM's two processes on a one-GPU host, over the
emulated NIC) needs their kernels to run at the same time. Without MPS the GPU time-slices the two
processes, and every wait on the peer (a round trip, the emulation's copies into the peer's
memory) advances once per time slice, milliseconds instead of microseconds. With a control daemon
listening in CUDA_MPS_PIPE_DIRECTORY, CUDA runs the processes that name that directory through
one MPS server, concurrently.

The daemon runs in the foreground (`nvidia-cuda-mps-control -f`) as a child of the runner (and dies
with it), in a session of its own, with its pipe and log directories in a fresh temporary
directory: only the processes given `env` use it, the GPU's compute mode is left alone, and
stopping it is `quit` through the control program, then SIGKILL to its process group if it is
still there. Where the control program is missing or the daemon does not come up, the points run
without MPS and their records say so (the harness records `mps: off`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from gicomm.process import die_with_parent

CONTROL = "nvidia-cuda-mps-control"
START_S = 10.0  # the daemon's control pipe appears within this, or it is given up
STOP_S = 10.0  # `quit` ends it within this, or its process group is killed


@dataclass
class Daemon:
    """A running daemon (`proc` None: not running, `why` says why)."""

    root: Path | None = None
    proc: subprocess.Popen[bytes] | None = None
    control: str = ""
    why: str = ""
    env: dict[str, str] = field(default_factory=dict)


def _die_with_runner() -> None:  # runs in the child between fork and exec
    die_with_parent(signal.SIGTERM)


def _wait(done: Callable[[], bool], timeout_s: float) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if done():
            return True
        time.sleep(0.05)
    return done()


def start(control: str = CONTROL, timeout_s: float = START_S) -> Daemon:
    """Start a private daemon; on failure a Daemon without `proc` whose `why` says what failed."""
    exe = shutil.which(control)
    if exe is None:
        return Daemon(why=f"{control} is not on PATH")
    root = Path(tempfile.mkdtemp(prefix="gicomm-mps-"))
    pipe, logs = root / "pipe", root / "log"
    pipe.mkdir()
    logs.mkdir()
    env = {"CUDA_MPS_PIPE_DIRECTORY": str(pipe), "CUDA_MPS_LOG_DIRECTORY": str(logs)}
    proc = subprocess.Popen(
        [exe, "-f"],
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        # a runner killed outright takes its daemon along (SIGTERM: it may still stop its server)
        preexec_fn=_die_with_runner,  # noqa: PLW1509 (started before the runner starts threads)
    )
    d = Daemon(root, proc, exe, "", env)
    if _wait(lambda: (pipe / "control").exists() or proc.poll() is not None, timeout_s) and (
        proc.poll() is None
    ):
        return d
    why = (
        f"{exe} -f exited with code {proc.returncode}"
        if proc.poll() is not None
        else f"{exe} -f made no control pipe in {pipe} within {timeout_s:g} s"
    )
    tail = log_tail(root)
    stop(d)
    return Daemon(why=f"{why}{tail}")


def log_tail(root: Path | None, lines: int = 5) -> str:
    """The last lines of the daemon's control log, for a message ('' when there are none)."""
    if root is None:
        return ""
    with contextlib.suppress(OSError):
        text = (root / "log" / "control.log").read_text(errors="replace").strip().splitlines()
        if text:
            return " (control.log: " + " | ".join(text[-lines:]) + ")"
    return ""


def stop(d: Daemon, timeout_s: float = STOP_S) -> str:
    """Stop the daemon and remove its directories; returns how it ended ('' when it quit)."""
    how = ""
    if d.proc is not None and d.proc.poll() is None:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(
                [d.control],
                input=b"quit\n",
                env={**os.environ, **d.env},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=timeout_s,
                check=False,
            )
        try:
            d.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            how = f"did not quit within {timeout_s:g} s: killed"
            # with whatever it started (its MPS server): its session's process group, while the
            # daemon (the group's leader) is not yet reaped, so the group id is still its own
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(d.proc.pid, signal.SIGKILL)
            d.proc.wait()
    if d.root is not None:
        shutil.rmtree(d.root, ignore_errors=True)
    return how


@contextlib.contextmanager
def running(
    wanted: bool, log: Callable[[str], None], control: str = CONTROL
) -> Iterator[dict[str, str]]:
    """The environment that puts a program under a private daemon for the block ({} when not
    wanted, or when it could not start: `log` says why), stopped when the block ends."""
    if not wanted:
        yield {}
        return
    d = start(control)
    if d.proc is None:
        log(f"MPS: not started ({d.why}); the PEs sharing a GPU run time-sliced (records: mps off)")
        yield {}
        return
    log(f"MPS: control daemon {d.proc.pid} started (pipe {d.env['CUDA_MPS_PIPE_DIRECTORY']})")
    try:
        yield dict(d.env)
    finally:
        tail = log_tail(d.root)
        how = stop(d)
        log(f"MPS: control daemon {d.proc.pid} stopped{': ' + how if how else ''}{tail}")
