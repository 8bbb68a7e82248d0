"""Print where the reports of the default campaign are (the last step of `make run`)."""

from __future__ import annotations

from gicomm import CONFIG_DIR, REPO_ROOT
from gicomm.config import load_campaign_file


def main() -> int:
    campaign = load_campaign_file(CONFIG_DIR / "config.yaml")
    for name in [campaign.name, *campaign.archived]:
        index = REPO_ROOT / "results" / name / "report" / "index.html"
        state = "" if index.exists() else " (missing: the run did not finish)"
        print(f"report of campaign {name}: {index}{state}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
