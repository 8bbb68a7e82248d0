"""Target lists of the figure, claim and report rules (the Snakefile reads this when it loads, so
it imports nothing heavy). `layout` is the pipeline's gicomm.layout.Layout."""

from __future__ import annotations

from typing import Protocol

from gicomm.layout import MODEL_FIGURES, MODEL_OUTPUTS
from gicomm.paper import FIGURE_IDS, PAPER_EXPERIMENTS, TABLE_IDS

# A campaign wildcard that never captures the cross-campaign folder results/combined/.
ONE_CAMPAIGN = r"(?!combined/)[A-Za-z0-9][A-Za-z0-9_.-]*"


class LayoutLike(Protocol):
    def experiments_of(self, campaign: str) -> list[str]: ...
    def reported_campaigns(self) -> list[str]: ...


def report_experiments(layout: LayoutLike, campaign: str) -> list[str]:
    """Every experiment a campaign report has a page for: the paper's and the campaign's own."""
    return sorted(set(PAPER_EXPERIMENTS) | set(layout.experiments_of(campaign)))


def all_experiments(layout: LayoutLike) -> list[str]:
    names = set(PAPER_EXPERIMENTS)
    for c in layout.reported_campaigns():
        names |= set(layout.experiments_of(c))
    return sorted(names)


def campaign_figures(layout: LayoutLike, campaign: str) -> list[str]:
    """The paper figures, and one figure per experiment the campaign has (configured or
    archived); a paper experiment the campaign lacks has a page but no figure of its own."""
    own = [
        f"results/{campaign}/report/figures/{e}.{ext}"
        for e in layout.experiments_of(campaign)
        for ext in ("png", "svg")
    ]
    paper = [
        f"results/{campaign}/report/figures/paper/{f}.{ext}"
        for f in FIGURE_IDS
        for ext in ("png", "svg")
    ]
    return own + paper


def model_figures(campaign: str) -> list[str]:
    return [
        f"results/{campaign}/report/figures/model/{f}.{ext}"
        for f in MODEL_FIGURES
        for ext in ("png", "svg")
    ]


def model_tables(campaign: str) -> list[str]:
    """The model stage's CSVs a campaign report shows (every output but params.json)."""
    return [f"results/{campaign}/model/{f}" for f in MODEL_OUTPUTS if f.endswith(".csv")]


def campaign_tables(campaign: str) -> list[str]:
    return [f"results/{campaign}/report/tables/{t}.csv" for t in TABLE_IDS]


def comparison_figures(layout: LayoutLike) -> list[str]:
    return [
        f"results/combined/report/figures/{e}.{ext}"
        for e in all_experiments(layout)
        for ext in ("png", "svg")
    ]


def per_campaign(layout: LayoutLike, pattern: str) -> list[str]:
    """`pattern` with {c} filled in for every reported campaign."""
    return [pattern.format(c=c) for c in layout.reported_campaigns()]


def rule_name(prefix: str, campaign: str) -> str:
    """A rule name for a per-campaign rule (campaign names may hold '-' and '.')."""
    return prefix + "_" + "".join(ch if ch.isalnum() else "_" for ch in campaign)
