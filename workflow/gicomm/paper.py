"""The paper's own numbers, read from its typed tables (report/paper/*.csv) by cell.

A cell is {table, row: {column: value, ...}, column}; its text becomes a number as the catalogue
says (report/paper/catalogue.yaml): the first number, the `pick`-th, a range "a-b" (its middle,
with the span), `scale`d, or the `complement` of a loss in percent (the fraction retained). The
figures draw these as reference markers; the tables and claims cite the same cells.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gicomm.catalogue import PAPER_DIR
from gicomm.errors import ConfigError

# A number, or a range of two ("11-15", "73-79"); thousands separators allowed ("1,350").
NUMBER = re.compile(r"(\d[\d,]*(?:\.\d+)?)(?:\s*[-\u2013]\s*(\d[\d,]*(?:\.\d+)?))?")


@cache
def paper_table(csv: str, paper_dir: Path = PAPER_DIR) -> pd.DataFrame:
    """One typed table of the paper, every cell as text ('' where the paper reports nothing)."""
    return pd.read_csv(paper_dir / csv, dtype=str, keep_default_na=False)


def cell_text(cell: dict[str, Any], paper_dir: Path = PAPER_DIR) -> str:
    """The text of one cell, selected by column values of its row."""
    df = paper_table(cell["table"], paper_dir)
    for col, val in cell["row"].items():
        if col not in df:
            raise ConfigError(f"{cell}: column {col!r} is not in {cell['table']}")
        df = df[df[col] == str(val)]
    if len(df) != 1:
        raise ConfigError(f"{cell}: selects {len(df)} rows of {cell['table']}, expected one")
    if cell["column"] not in df:
        raise ConfigError(f"{cell}: column {cell['column']!r} is not in {cell['table']}")
    return str(df[cell["column"]].iloc[0])


def numbers(text: str) -> list[tuple[float, float]]:
    """Every number of a text as (lo, hi): equal for a single number, the span for a range."""
    out = []
    for m in NUMBER.finditer(text):
        lo = float(m.group(1).replace(",", ""))
        hi = float(m.group(2).replace(",", "")) if m.group(2) else lo
        out.append((lo, hi))
    return out


def leading_number(text: str) -> float:
    """The first number of a cell ('~2x' -> 2, '80 / 85' -> 80, '1,350' -> 1350)."""
    found = numbers(text)
    if not found:
        raise ValueError(f"no number in {text!r}")
    return found[0][0]


@dataclass(frozen=True)
class PaperValue:
    value: float
    lo: float
    hi: float
    text: str  # the cell as the paper prints it


def cell_value(cell: dict[str, Any], paper_dir: Path = PAPER_DIR) -> PaperValue:
    """A cell's number as the catalogue asks for it (pick, range, scale, complement)."""
    text = cell_text(cell, paper_dir)
    found = numbers(text)
    pick = int(cell.get("pick", 0))
    if len(found) <= pick:
        raise ConfigError(f"{cell}: the cell {text!r} has no number #{pick}")
    lo, hi = found[pick]
    scale = float(cell.get("scale", 1.0))
    lo, hi = lo * scale, hi * scale
    if cell.get("complement"):
        lo, hi = 1.0 - hi / 100.0, 1.0 - lo / 100.0
    return PaperValue((lo + hi) / 2.0, lo, hi, text)


def _value(v: Any) -> PaperValue:
    """A coordinate of a reference: a literal number, or a cell."""
    if isinstance(v, dict):
        return cell_value(v)
    return PaperValue(float(v), float(v), float(v), str(v))


@dataclass(frozen=True)
class Reference:
    """One of the paper's numbers as drawn: markers at points (with their span), or a line."""

    kind: str  # point | bar | series | hline | vline | slope | clock_fit
    label: str
    marker: str
    x: tuple[Any, ...]  # numbers, or bar categories
    y: tuple[float, ...]
    y_lo: tuple[float, ...]
    y_hi: tuple[float, ...]

    @property
    def n_points(self) -> int:
        """How many of the paper's numbers this reference draws (each gets its own marker)."""
        return len(self.y) if self.kind not in ("hline", "vline", "slope") else 1


def reference(ref: dict[str, Any]) -> Reference:
    """Resolve one `paper:` entry of a figure panel into the numbers it draws."""
    kind, label, marker = ref["kind"], str(ref["label"]), str(ref.get("marker", "o"))
    if kind in ("point", "bar"):
        x = ref["x"] if kind == "bar" else _value(ref["x"]).value
        y = _value(ref["y"])
        return Reference(kind, label, marker, (x,), (y.value,), (y.lo,), (y.hi,))
    if kind == "hline":
        y = _value(ref["y"])
        return Reference(kind, label, marker, (), (y.value,), (y.lo,), (y.hi,))
    if kind == "vline":
        x = _value(ref["x"])
        return Reference(kind, label, marker, (x.value,), (), (), ())
    if kind == "series":
        t = paper_table(ref["table"])
        t = t[t[ref["y_column"]].str.strip() != ""]
        xs = tuple(leading_number(v) for v in t[ref["x_column"]])
        ys = tuple(leading_number(v) for v in t[ref["y_column"]])
        return Reference(kind, label, marker, xs, ys, ys, ys)
    if kind == "slope":
        x0, x1 = float(ref["x"]), float(ref["x_end"])
        y0, dy = _value(ref["y"]).value, _value(ref["dy"]).value
        y1 = y0 + dy * (x1 - x0) / float(ref["per"])
        return Reference(kind, label, marker, (x0, x1), (y0, y1), (y0, y1), (y0, y1))
    if kind == "clock_fit":
        c = leading_number(cell_text({**ref, "column": "C_cycles"}))
        b_us = leading_number(cell_text({**ref, "column": "B_us"}))
        f = np.array([float(ref["f_min"]), float(ref["f_max"])])
        t_us = c / f + b_us  # cycles / MHz = us
        ys = tuple(float(v) for v in t_us)
        return Reference(kind, label, marker, tuple(float(v) for v in f), ys, ys, ys)
    raise ConfigError(f"paper reference {ref}: unknown kind {kind!r}")


def clock_fit_curve(ref: Reference, points: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """The paper's fit T(f) = C/f + B between its two clocks, as a curve."""
    f0, f1 = ref.x
    c = (ref.y[0] - ref.y[1]) / (1.0 / f0 - 1.0 / f1)
    b = ref.y[0] - c / f0
    f = np.linspace(f0, f1, points)
    return f, c / f + b
