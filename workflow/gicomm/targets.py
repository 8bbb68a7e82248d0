"""Target lists of the figure, claim and report rules (the Snakefile reads this when it loads, so
it imports nothing heavy). `layout` is the pipeline's gicomm.layout.Layout."""

from __future__ import annotations

from typing import Protocol

from gicomm.catalogue import FIGURE_IDS, PAPER_EXPERIMENTS, TABLE_IDS
from gicomm.layout import MODEL_FIGURES, MODEL_OUTPUTS

# A campaign wildcard that never captures the folders shared by campaigns (results/combined/,
# results/model/).
ONE_CAMPAIGN = r"(?!(?:combined|model)/)[A-Za-z0-9][A-Za-z0-9_.-]*"
# The model's outputs made once: its validation against the paper, and per platform its sweeps.
MODEL_VALIDATION = "results/model/validation.csv"


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


def model_predictions(platform: str) -> str:
    return f"results/model/{platform}/predictions.csv"


def model_tables(campaign: str, platform: str) -> dict[str, str]:
    """The model's CSVs a campaign report shows, by name: the campaign's calibration and the model
    at its points, the shared validation, and the platform's predictions."""
    own = {f.removesuffix(".csv"): f"results/{campaign}/model/{f}" for f in MODEL_OUTPUTS
           if f.endswith(".csv")}  # fmt: skip
    return own | {"validation": MODEL_VALIDATION, "predictions": model_predictions(platform)}


def campaign_tables(campaign: str) -> list[str]:
    return [f"results/{campaign}/report/tables/{t}.csv" for t in TABLE_IDS]


def combined_index(campaign: str) -> str:
    """The page that sets the campaign beside every archived one (only the configured campaign
    has one, so a side campaign never overwrites another's)."""
    return f"results/{campaign}/report/combined/index.html"


def comparison_figures(layout: LayoutLike, campaign: str) -> list[str]:
    return [
        f"results/{campaign}/report/combined/figures/{e}.{ext}"
        for e in all_experiments(layout)
        for ext in ("png", "svg")
    ]


def per_campaign(layout: LayoutLike, pattern: str) -> list[str]:
    """`pattern` with {c} filled in for every reported campaign."""
    return [pattern.format(c=c) for c in layout.reported_campaigns()]


def rule_name(prefix: str, campaign: str) -> str:
    """A rule name for a per-campaign rule (campaign names may hold '-' and '.')."""
    return prefix + "_" + "".join(ch if ch.isalnum() else "_" for ch in campaign)
