"""`make claim CLAIM=<id>`: run only the experiments a claim reads, then print its verdict.

The campaign is `claim-<id>` on the local profile (or the profile given), so a claim's evidence
lives in its own report: results/claim-<id>/report/index.html. It measures as many independent
runs as a verdict needs (config/claims.yaml decide.min_runs). Exit status: 0 reproduced,
1 not reproduced, 2 bad arguments or a failed pipeline, 3 not measurable here, 4 unstable (the
runs disagree about the verdict), 5 too few runs.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

import pandas as pd

from gicomm import REPO_ROOT
from gicomm.artifact import claim_experiments
from gicomm.claims import (
    NOT_MEASURABLE,
    NOT_REPRODUCED,
    REPRODUCED,
    TOO_FEW_RUNS,
    UNSTABLE,
    decide_settings,
    load_claims,
)
from gicomm.config import available_experiments
from gicomm.layout import CLAIMS, REPORT_INDEX

EXIT = {
    REPRODUCED: 0,
    NOT_REPRODUCED: 1,
    NOT_MEASURABLE: 3,
    UNSTABLE: 4,
    TOO_FEW_RUNS: 5,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("claim", help="claim id from config/claims.yaml (see ARTIFACT.md)")
    ap.add_argument("--sweep", choices=["full", "reduced"], default="full")
    ap.add_argument("--profile", default="profiles/local")
    ap.add_argument("--cores", default="all")
    args = ap.parse_args(argv)
    claims = {c["id"]: c for c in load_claims()}
    if args.claim not in claims:
        print(
            f"unknown claim {args.claim!r}; allowed: {', '.join(sorted(claims))}", file=sys.stderr
        )
        return 2
    claim = claims[args.claim]
    experiments = claim_experiments(claim, set(available_experiments()))
    if not experiments:
        print(f"{args.claim}: not measurable here: no experiment of this repository measures it")
        return EXIT["not measurable here"]
    campaign = f"claim-{args.claim}"
    index = REPORT_INDEX.format(campaign=campaign)
    names = "[" + ",".join(f'"{e}"' for e in experiments) + "]"
    argv_smk = [
        sys.executable, "-m", "snakemake", "--profile", args.profile, "--cores", args.cores,
        "--config", f"campaign={campaign}", f"experiments={names}", f"sweep={args.sweep}",
        f"runs={decide_settings()['min_runs']}",
        "report={archived: []}", "--", CLAIMS.format(campaign=campaign), index,
    ]  # fmt: skip
    print(f"{args.claim}: running {', '.join(experiments)} ({args.sweep} sweep) as {campaign}")
    if subprocess.run(argv_smk, cwd=REPO_ROOT, check=False).returncode != 0:
        return 2
    row = pd.read_csv(REPO_ROOT / CLAIMS.format(campaign=campaign)).set_index("id")
    r = row.loc[args.claim]
    print(f"\n{args.claim}: {r['claim']}")
    print(f"  paper: {r['paper_value']} {r['paper_unit']} ({r['paper_platform']})")
    print(f"  this run: {r['measured_text'] if isinstance(r['measured_text'], str) else 'n/a'}")
    print(f"  runs: {int(r['runs'])} (95% interval {r['ci_lo']:.4g}..{r['ci_hi']:.4g})")
    print(f"  verdict: {r['verdict']} ({r['reason']})")
    print(f"  report: {index}")
    return EXIT.get(str(r["verdict"]), 2)


if __name__ == "__main__":
    raise SystemExit(main())
