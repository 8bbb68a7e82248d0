"""Locks of our own: an advisory lock (flock) on a file, held by a live process and released by the
kernel when the process dies, so a killed holder never leaves a stale lock behind and
`snakemake --unlock` (which removes Snakemake's lock files only) cannot take it away. The file
names its holder, for the message that refuses a second one."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from gicomm.errors import GicommError


class LockHeld(GicommError):
    """Another live process holds the lock."""


class FileLock:
    """An exclusive flock on `path`, taken without waiting. `fd` stays open (and the lock held)
    until release() or the end of the process; a child given the fd keeps it alive too."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.fd: int | None = None

    def try_acquire(self, what: str) -> bool:
        """Take the lock and write who holds it; False if another live process holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except OSError as exc:  # a file system without locks (some NFS setups): say so, go on
            print(
                f"gicomm: warning: cannot lock {self.path} ({exc.strerror}); {what} runs "
                "without the lock that refuses a second writer",
                file=sys.stderr,
            )
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": time.strftime("%Y-%m-%d %H:%M:%S"),
            "what": what,
            "command": " ".join(sys.argv)[:300],
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
        self.fd = fd
        return True

    def acquire(self, what: str, refusal: str) -> FileLock:
        """Take the lock or raise LockHeld: `refusal` says what is refused, the holder is named."""
        if not self.try_acquire(what):
            raise LockHeld(f"{refusal}: {describe_holder(self.path)}")
        return self

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> FileLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def holder_of(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def describe_holder(path: Path) -> str:
    h = holder_of(path)
    if not h:
        return f"another live process holds {path}"
    return (
        f"{h.get('what', 'a process')} (pid {h.get('pid')} on {h.get('host')}, since "
        f"{h.get('since')}) holds {path}"
    )
