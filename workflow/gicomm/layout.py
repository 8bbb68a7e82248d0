"""Where every file of a campaign lives, and which files each stage needs.

results/<campaign>/hosts/<host>/hardware.json     host probe and provenance
results/<campaign>/raw/<exp>/<host>/run<r>/batch<b>.jsonl   raw records (one job each)
results/<campaign>/partial/...                    per-point progress of running jobs (kept on kill)
results/<campaign>/tidy/{records,summary}.csv     tidy tables
results/<campaign>/report/                        HTML report, figures
results/archive/<campaign>/{hosts,raw}/           committed campaigns (same layout for raw/hosts)
results/combined/records.csv                      every reported campaign in one table
build/<host>/                                     native build per host type
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gicomm import REPO_ROOT
from gicomm.config import Campaign

RESULTS = Path("results")
NATIVE_SOURCE_SUFFIXES = {".h", ".hpp", ".cuh", ".c", ".cc", ".cpp", ".cu", ".cmake", ".in"}
# The performance model's outputs per campaign (workflow/rules/model.smk; the validation and the
# platform's predictions are made once, under results/model/).
MODEL_OUTPUTS = ("params.json", "calibration.csv", "beside_measured.csv")
# ... and its figures in the campaign's report (gicomm.model.figures.FIGURES draws them).
MODEL_FIGURES = ("model_validation", "model_beside_measured", "model_predictions")
ARCHIVE = RESULTS / "archive"


class Layout:
    def __init__(self, campaign: Campaign, root: Path = REPO_ROOT) -> None:
        self.c = campaign
        self.root = root

    # ---- per-job paths (wildcard functions) -----------------------------------------------
    def hardware_json(self) -> str:
        return "results/{campaign}/hosts/{host}/hardware.json"

    def build_summary(self) -> str:
        return "build/{host}/gicomm_build.json"

    def partial(self, experiment: str, host: str, run: str, batch: str) -> str:
        return f"results/{self.c.name}/partial/{experiment}/{host}/run{run}/batch{batch}.jsonl"

    def gpu_jobs(self, experiment: str) -> int:
        """Jobs that touch a GPU take the `gpu_jobs` resource, so the local profile runs one at a
        time per GPU; CPU-only experiments run in parallel."""
        e = self.c.experiments.get(experiment)
        if e is None:
            return 0
        needs = [e.needs] + [n for _, n in e.needs_when]
        return 1 if any(n.get("gpus", 0) > 0 for n in needs) else 0

    # ---- campaigns ------------------------------------------------------------------------
    def is_archived(self, campaign: str) -> bool:
        return campaign != self.c.name and campaign in self.c.archived

    def reported_campaigns(self) -> list[str]:
        return [self.c.name, *self.c.archived]

    def raw_files(self, campaign: str) -> list[str]:
        if self.is_archived(campaign):
            return sorted(
                str(p.relative_to(self.root))
                for p in (self.root / ARCHIVE / campaign / "raw").rglob("*.jsonl")
            )
        files = []
        for name, e in self.c.experiments.items():
            for run in range(self.c.runs_of(e)):
                for batch in range(len(e.batches(self.c.sweep))):
                    files.append(
                        f"results/{campaign}/raw/{name}/{self.c.host}/run{run}/batch{batch}.jsonl"
                    )
        return files

    def hardware_files(self, campaign: str) -> list[str]:
        if self.is_archived(campaign):
            return sorted(
                str(p.relative_to(self.root))
                for p in (self.root / ARCHIVE / campaign / "hosts").glob("*/hardware.json")
            )
        return [f"results/{campaign}/hosts/{self.c.host}/hardware.json"]

    def experiments_of(self, campaign: str) -> list[str]:
        if self.is_archived(campaign):
            raw = self.root / ARCHIVE / campaign / "raw"
            return sorted(p.name for p in raw.iterdir() if p.is_dir())
        return sorted(self.c.experiments)

    def figure_files(self, campaign: str) -> list[str]:
        return [
            f"results/{campaign}/report/figures/{e}.{ext}"
            for e in self.experiments_of(campaign)
            for ext in ("png", "svg")
        ]

    def native_sources(self) -> list[str]:
        """The files a native build depends on (sources and CMake files, not notes or scripts)."""
        native = self.root / "native"
        return sorted(
            str(p.relative_to(self.root))
            for p in native.rglob("*")
            if p.is_file()
            and "build" not in p.relative_to(native).parts[:1]
            and (p.suffix in NATIVE_SOURCE_SUFFIXES or p.name == "CMakeLists.txt")
        )

    def model_sources(self) -> list[str]:
        """The model's code: its outputs are redone when it changes (validation has no other
        input, and a calibration from unchanged records would otherwise be kept)."""
        model = self.root / "workflow" / "gicomm" / "model"
        return sorted(
            str(p.relative_to(self.root)) for p in model.glob("*.py") if p.name != "figures.py"
        )

    def all_targets(self) -> list[str]:
        targets = []
        for c in self.reported_campaigns():
            targets.append(f"results/{c}/export/{c}-report.zip")
            targets += [f"results/{c}/model/{f}" for f in MODEL_OUTPUTS]
            if "nvlink_dissection" in self.experiments_of(c):
                targets.append(f"results/{c}/tidy/nvlink_dissection.csv")
        combined = f"results/{self.c.name}/report/combined/index.html"
        return [*targets, "results/combined/records.csv", combined]

    def describe(self) -> dict[str, Any]:
        return {"campaign": self.c.name, "host": self.c.host, "archived": list(self.c.archived)}
