"""The paper's catalogue: its experiments, figures and tables, and the experiments whose records
back each of them (report/paper/catalogue.yaml). The one home that the figures, tables, claims,
report and Snakemake rules read; light on purpose (the Snakefile imports it when it loads).

Every experiment has one name: the name of the experiment (config/experiments/<name>.yaml) that
measures it. `reads` lists the other experiments whose records back a paper experiment, figure or
table (e.g. Table 3 reads gda_one_op, gda_rtt and proxy_one_op beside one_op).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from gicomm import REPO_ROOT
from gicomm.errors import ConfigError
from gicomm.yamlio import load_yaml

PAPER_DIR = REPO_ROOT / "report" / "paper"
CATALOGUE_FILE = PAPER_DIR / "catalogue.yaml"
PANEL_KINDS = ("lines", "bars", "normalized")
REF_KINDS = ("point", "series", "hline", "vline", "slope", "clock_fit", "bar")
SCALES = ("linear", "log", "log2", "symlog")


@dataclass(frozen=True)
class Axis:
    label: str
    unit: str
    scale: str = "linear"
    param: str | None = None  # x: the sweep parameter (param_<name>)
    column: str | None = None  # x: a summary column (e.g. sm_clock_mhz)
    metric: tuple[str, ...] = ()  # y: the metric(s) drawn
    category: tuple[str, ...] = ()  # x of a bar panel: the fields naming a bar

    @property
    def text(self) -> str:
        """The axis label with its unit, as drawn: 'put+completion [us]'."""
        return f"{self.label} [{self.unit}]" if self.unit else self.label


@dataclass(frozen=True)
class Panel:
    id: str
    title: str
    kind: str
    x: Axis
    y: Axis
    select: dict[str, Any]
    series_by: tuple[str, ...]
    paper: tuple[dict[str, Any], ...]
    max_series: int = 8  # more measured series than this: the other parameters are fixed


@dataclass(frozen=True)
class FigureSpec:
    fig_id: str
    paper_ref: str
    title: str
    experiment: str  # the report page that shows it
    reads: tuple[str, ...]
    platform: str  # the paper's platform of its numbers
    panels: tuple[Panel, ...]
    note: str = ""
    columns: int = 3  # panels per row


@dataclass(frozen=True)
class TableSpec:
    tab_id: str
    paper_ref: str
    title: str
    experiment: str
    paper_csv: str
    label_columns: tuple[str, ...]
    columns: dict[str, dict[str, Any]]
    rows: tuple[dict[str, Any], ...]
    extra: tuple[dict[str, Any], ...] = ()
    kind: str = "values"  # values | clock_fits
    not_here: str = ""  # why no row of this table can be measured here
    terms: dict[str, str] = field(default_factory=dict)  # the paper's words in column titles
    platform: str = "P-IB"  # the paper's platform of its numbers


@dataclass(frozen=True)
class Catalogue:
    experiments: dict[str, dict[str, Any]]
    figures: dict[str, FigureSpec]
    tables: dict[str, TableSpec]
    value_labels: dict[str, dict[str, str]] = field(default_factory=dict)


def _need(d: dict[str, Any], key: str, where: str) -> Any:
    if key not in d:
        raise ConfigError(f"{CATALOGUE_FILE}: {where}: '{key}' is missing")
    return d[key]


def _tuple(v: Any) -> tuple[Any, ...]:
    if v is None:
        return ()
    return tuple(v) if isinstance(v, list | tuple) else (v,)


def _axis(d: dict[str, Any], where: str) -> Axis:
    scale = d.get("scale", "linear")
    if scale not in SCALES:
        raise ConfigError(
            f"{CATALOGUE_FILE}: {where}: 'scale': value {scale!r}; allowed: {', '.join(SCALES)}"
        )
    return Axis(
        label=str(_need(d, "label", where)),
        unit=str(_need(d, "unit", where)),
        scale=scale,
        param=d.get("param"),
        column=d.get("column"),
        metric=_tuple(d.get("metric")),
        category=_tuple(d.get("category")),
    )


def _panel(d: dict[str, Any], where: str) -> Panel:
    kind = d.get("kind", "lines")
    if kind not in PANEL_KINDS:
        raise ConfigError(
            f"{CATALOGUE_FILE}: {where}: 'kind': value {kind!r}; allowed: {', '.join(PANEL_KINDS)}"
        )
    for i, ref in enumerate(d.get("paper", [])):
        if ref.get("kind") not in REF_KINDS:
            raise ConfigError(
                f"{CATALOGUE_FILE}: {where}.paper[{i}]: 'kind': value {ref.get('kind')!r}; "
                f"allowed: {', '.join(REF_KINDS)}"
            )
    pid = str(_need(d, "id", where))
    return Panel(
        id=pid,
        title=str(d.get("title", pid)),
        kind=kind,
        x=_axis(_need(d, "x", where), f"{where}.x"),
        y=_axis(_need(d, "y", where), f"{where}.y"),
        select=dict(d.get("select", {})),
        series_by=_tuple(d.get("series_by")),
        paper=tuple(d.get("paper", [])),
        max_series=int(d.get("max_series", 8)),
    )


def _named(d: dict[str, Any], where: str) -> dict[str, str]:
    """What every figure and table of the catalogue has: its reference in the paper, its title,
    and the paper experiment whose report page shows it."""
    return {k: str(_need(d, k, where)) for k in ("paper_ref", "title", "experiment")}


@cache
def load_catalogue(path: Path = CATALOGUE_FILE) -> Catalogue:
    data = load_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    experiments = {
        name: {"paper_ref": str(v.get("paper_ref", "")), "reads": _tuple(v.get("reads"))}
        for name, v in _need(data, "experiments", "top level").items()
    }
    figures = {}
    for fid, f in _need(data, "figures", "top level").items():
        where = f"figures.{fid}"
        figures[fid] = FigureSpec(
            fig_id=fid,
            **_named(f, where),
            reads=_tuple(_need(f, "reads", where)),
            platform=str(f.get("platform", "")),
            panels=tuple(
                _panel(p, f"{where}.panels[{i}]") for i, p in enumerate(_need(f, "panels", where))
            ),
            note=str(f.get("note", "")),
            columns=int(f.get("columns", 3)),
        )
    tables = {}
    for tid, t in _need(data, "tables", "top level").items():
        where = f"tables.{tid}"
        tables[tid] = TableSpec(
            tab_id=tid,
            **_named(t, where),
            paper_csv=str(_need(t, "paper_csv", where)),
            label_columns=_tuple(_need(t, "label_columns", where)),
            columns=dict(t.get("columns") or {}),
            rows=tuple(t.get("rows") or ()),
            extra=tuple(t.get("extra") or ()),
            kind=str(t.get("kind", "values")),
            not_here=str(t.get("not_here", "")),
            terms=dict(t.get("terms") or {}),
            platform=str(t.get("platform", "P-IB")),
        )
    cat = Catalogue(experiments, figures, tables, dict(data.get("value_labels", {})))
    for spec in [*figures.values(), *tables.values()]:
        if spec.experiment not in experiments:
            raise ConfigError(
                f"{path}: {getattr(spec, 'fig_id', getattr(spec, 'tab_id', ''))}: 'experiment': "
                f"value {spec.experiment!r} is not a paper experiment; allowed: "
                f"{', '.join(experiments)}"
            )
    return cat


CATALOGUE = load_catalogue()
PAPER_EXPERIMENTS: dict[str, str] = {k: v["paper_ref"] for k, v in CATALOGUE.experiments.items()}
FIGURE_IDS: tuple[str, ...] = tuple(CATALOGUE.figures)
TABLE_IDS: tuple[str, ...] = tuple(CATALOGUE.tables)
FIGURES: dict[str, FigureSpec] = CATALOGUE.figures
TABLES: dict[str, TableSpec] = CATALOGUE.tables


def experiment_names(name: str) -> list[str]:
    """A paper experiment and the experiments whose records back it."""
    reads = CATALOGUE.experiments.get(name, {}).get("reads", ())
    return [name, *reads]


def value_label(param: str, value: object) -> str:
    """How a parameter's value is shown (the paper's words where ours differ)."""
    return CATALOGUE.value_labels.get(param, {}).get(str(value), str(value))


def paper_place(name: str, title: str) -> str:
    """Where an experiment is in the paper: its own figures and tables, those of the paper
    experiment it backs, or that it stands beside the paper."""
    if name in CATALOGUE.experiments:
        return CATALOGUE.experiments[name]["paper_ref"]
    backs = [n for n, v in CATALOGUE.experiments.items() if name in v["reads"]]
    if backs:
        return "; ".join(f"{CATALOGUE.experiments[n]['paper_ref']} (with `{n}`)" for n in backs)
    return f"beside the paper: {title}"
