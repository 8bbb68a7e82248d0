"""Glue for Snakemake scripts: logging into the rule's log file and reading its objects."""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def logged(snakemake: Any) -> Iterator[None]:
    """Send the script's stdout and stderr to the rule's first log file (if it has one)."""
    if not snakemake.log:
        yield
        return
    with (
        open(snakemake.log[0], "w") as log,
        contextlib.redirect_stdout(log),
        contextlib.redirect_stderr(log),
    ):
        try:
            yield
        except BaseException:
            # The reason a job failed belongs in its log (on a cluster, the only file a user reads).
            traceback.print_exc(file=log)
            raise
