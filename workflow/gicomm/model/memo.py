"""A content-addressed store of the model's outputs: a table computed from the same inputs (the
model's code, the parameters, the platform, the records it reads) is computed once and reused,
however often Snakemake reruns the rule (e.g. when a campaign's tidy table is rewritten with the
same content)."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

import pandas as pd

from gicomm import REPO_ROOT
from gicomm.fsutil import write_atomic

MODEL_CODE = REPO_ROOT / "workflow" / "gicomm" / "model"


def code_digest() -> str:
    """sha256 over the model's sources (the drawing code aside): any change is a new input."""
    h = hashlib.sha256()
    for p in sorted(MODEL_CODE.glob("*.py")):
        if p.name != "figures.py":
            h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def key(parts: Iterable[bytes | str]) -> str:
    h = hashlib.sha256(code_digest().encode())
    for part in parts:
        h.update(b"\0" + (part if isinstance(part, bytes) else part.encode()))
    return h.hexdigest()[:24]


def memo_csv(
    parts: Iterable[bytes | str], store: Path, out: Path, compute: Callable[[], pd.DataFrame]
) -> bool:
    """Write `out` from the store when the same inputs were computed before (True), else compute,
    keep and write it (False)."""
    kept = store / f"{key(parts)}.csv"
    if kept.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(kept, out)
        return True
    frame = compute()
    text = frame.to_csv(index=False)
    write_atomic(kept, text)
    write_atomic(out, text)
    return False
