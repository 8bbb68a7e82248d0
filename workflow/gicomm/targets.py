"""Target lists of the figure, claim and report rules (the Snakefile reads this when it loads, so
it imports nothing heavy). `layout` is the pipeline's gicomm.layout.Layout; every path is spelled
by gicomm.layout's patterns."""

from __future__ import annotations

from typing import Protocol

from gicomm.catalogue import FIGURE_IDS, PAPER_EXPERIMENTS, TABLE_IDS
from gicomm.layout import (
    COMBINED_FIGURE,
    COMBINED_REPORT,
    MODEL_BLIND,
    MODEL_DIR,
    MODEL_FIGURE,
    MODEL_FIGURES,
    MODEL_OUTPUTS,
    MODEL_PREDICTIONS,
    MODEL_VALIDATION,
    PAPER_FIGURE,
    REPORT_FIGURE,
    REPORT_TABLE,
    figure_files,
)

# A campaign wildcard that never captures the folders shared by campaigns (results/combined/,
# results/model/).
ONE_CAMPAIGN = r"(?!(?:combined|model)/)[A-Za-z0-9][A-Za-z0-9_.-]*"


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
    own = figure_files(REPORT_FIGURE, campaign, layout.experiments_of(campaign))
    return own + figure_files(PAPER_FIGURE, campaign, FIGURE_IDS)


def model_figures(campaign: str) -> list[str]:
    return figure_files(MODEL_FIGURE, campaign, MODEL_FIGURES)


def model_predictions(platform: str) -> str:
    return MODEL_PREDICTIONS.format(platform=platform)


def model_tables(campaign: str, platform: str) -> dict[str, str]:
    """The model's CSVs a campaign report shows, by name: the campaign's calibration and the model
    at its points, the shared validation, the platform's predictions and the blind check."""
    own = {f.removesuffix(".csv"): MODEL_DIR.format(campaign=campaign) + f for f in MODEL_OUTPUTS
           if f.endswith(".csv")}  # fmt: skip
    return own | {
        "validation": MODEL_VALIDATION,
        "predictions": model_predictions(platform),
        "blind": MODEL_BLIND.format(campaign=campaign),
    }


def campaign_tables(campaign: str) -> list[str]:
    return [REPORT_TABLE.format(campaign=campaign, name=t) for t in TABLE_IDS]


def combined_index(campaign: str) -> str:
    """The page that sets the campaign beside every archived one (only the configured campaign
    has one, so a side campaign never overwrites another's)."""
    return COMBINED_REPORT.format(campaign=campaign)


def comparison_figures(layout: LayoutLike, campaign: str) -> list[str]:
    return figure_files(COMBINED_FIGURE, campaign, all_experiments(layout))


def per_campaign(layout: LayoutLike, pattern: str) -> list[str]:
    """`pattern` (a gicomm.layout pattern) for every reported campaign."""
    return [pattern.format(campaign=c) for c in layout.reported_campaigns()]


def rule_name(prefix: str, campaign: str) -> str:
    """A rule name for a per-campaign rule (campaign names may hold '-' and '.')."""
    return prefix + "_" + "".join(ch if ch.isalnum() else "_" for ch in campaign)
