"""The last step of `make run`: where each campaign's report is, the tally of its verdicts, and the
page that sets them side by side."""

from __future__ import annotations

import pandas as pd

from gicomm import CONFIG_DIR, REPO_ROOT
from gicomm.claims import VERDICTS
from gicomm.config import load_campaign_file


def tally(campaign: str) -> str:
    """'2 reproduced, 0 not reproduced, ...' from a campaign's claims.csv (or why there is none)."""
    path = REPO_ROOT / "results" / campaign / "claims" / "claims.csv"
    if not path.exists():
        return "no verdicts (the run did not finish)"
    counts = pd.read_csv(path)["verdict"].value_counts()
    return ", ".join(f"{int(counts.get(v, 0))} {v}" for v in VERDICTS)


def main() -> int:
    campaign = load_campaign_file(CONFIG_DIR / "config.yaml")
    names = [campaign.name, *campaign.archived]
    width = max(map(len, names))
    for name in names:
        index = REPO_ROOT / "results" / name / "report" / "index.html"
        state = "" if index.exists() else " (missing: the run did not finish)"
        print(f"report of campaign {name}: {index}{state}")
    print("\nverdicts per campaign:")
    for name in names:
        print(f"  {name:<{width}}  {tally(name)}")
    combined = REPO_ROOT / "results" / campaign.name / "report" / "combined" / "index.html"
    state = "" if combined.exists() else " (missing: the run did not finish)"
    print(f"\nall campaigns side by side: {combined}{state}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
