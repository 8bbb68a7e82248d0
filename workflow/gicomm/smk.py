"""Glue for Snakemake scripts: logging into the rule's log file and reading its objects."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gicomm.errors import GicommError
from gicomm.locks import FileLock, LockHeld, describe_holder


@contextlib.contextmanager
def logged(snakemake: Any) -> Iterator[None]:
    """Send the script's output, and that of every program it starts (a driver's progress lines
    and errors), to the rule's first log file. A gicomm error ends the job with its one-line
    message (in the log and on the console); anything else with its traceback in the log."""
    if not snakemake.log:
        yield
        return
    with open(snakemake.log[0], "w") as log:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = (os.dup(1), os.dup(2))
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                yield
        except GicommError as exc:
            print(f"gicomm: {exc}", file=log, flush=True)
            os.write(saved[1], f"gicomm: {exc}\n".encode())
            raise SystemExit(1) from None
        except BaseException:
            # The reason a job failed belongs in its log (on a cluster, the only file a user reads).
            traceback.print_exc(file=log)
            raise
        finally:
            log.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


# ---- one live run per working directory ----------------------------------------------------------
RUN_LOCK = Path(".snakemake/gicomm/run.lock")
SNAKEMAKE_LOCKS = Path(".snakemake/locks")
_run_lock: FileLock | None = None


def claim_run_lock(workdir: Path) -> bool:
    """Called when the main Snakemake process loads the Snakefile. Takes gicomm's run lock (held
    until the process ends; the kernel drops it when the process dies, however it dies). Holding it
    proves no other gicomm run is alive in this directory, so Snakemake lock files found here were
    left by a killed run: they are removed, and the run goes on without `snakemake --unlock`."""
    global _run_lock
    lock = FileLock(workdir / RUN_LOCK)
    if not lock.try_acquire("a snakemake run of gicomm"):
        return False
    _run_lock = lock
    stale = workdir / SNAKEMAKE_LOCKS
    if stale.is_dir() and any(stale.iterdir()):
        shutil.rmtree(stale)
        print(
            f"gicomm: removed Snakemake's lock files in {SNAKEMAKE_LOCKS} left by a run that was "
            f"killed (no live run holds {RUN_LOCK})",
            file=sys.stderr,
        )
    return True


def refuse_second_run(workdir: Path) -> None:
    """Called when jobs are about to start: a run that could not take the run lock at load is a
    second live run in this directory (even where `snakemake --unlock` removed the first one's
    Snakemake locks), and is refused before it starts a job."""
    if _run_lock is None:
        raise LockHeld(
            "another snakemake run of gicomm is alive in this directory; wait for it to end or "
            f"stop it (snakemake --unlock does not end it): {describe_holder(workdir / RUN_LOCK)}"
        )
