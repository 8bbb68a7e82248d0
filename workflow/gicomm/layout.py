"""Where every file of a campaign lives, and which files each stage needs: the one place that spells
a path. Rules use the patterns below (with Snakemake wildcards); Python code formats them.

results/<campaign>/hosts/<host>/hardware.json     host probe and provenance
results/<campaign>/raw/<exp>/<host>/run<r>/batch<b>.jsonl   raw records (one job each)
results/<campaign>/partial/...                    per-point progress of running jobs (kept on kill)
results/<campaign>/history/...                    records of earlier measurements (kept, not used)
results/<campaign>/tidy/records.csv               tidy table
results/<campaign>/aggregate/{summary,ratios,clock_fits}.csv   aggregates over runs
results/<campaign>/report/                        HTML report, figures
results/<campaign>/logs/                          every job's log
results/archive/<campaign>/{hosts,raw}/           committed campaigns (same layout for raw/hosts)
results/combined/records.csv                      every reported campaign in one table
results/<campaign>/report/combined/               the page across campaigns, per configured campaign
build/<host>/                                     native build per host type
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gicomm import REPO_ROOT
from gicomm.config import Campaign
from gicomm.errors import ConfigError
from gicomm.needs import unmet_needs
from gicomm.ranks import is_nic_point, needs_here

RESULTS = Path("results")
# ---- path patterns ({campaign}, {host}, {experiment}, {run}, {batch} are Snakemake wildcards) ----
HARDWARE = "results/{campaign}/hosts/{host}/hardware.json"
BUILD_SUMMARY = "build/{host}/gicomm_build.json"
BUILD_LOG = "build/{host}.log"
BATCH = "{experiment}/{host}/run{run}/batch{batch}"
RAW_BATCH = "results/{campaign}/raw/" + BATCH + ".jsonl"
PARTIAL_BATCH = "results/{campaign}/partial/" + BATCH + ".jsonl"
HISTORY_BATCH = "results/{campaign}/history/" + BATCH
BENCH_LOG = "results/{campaign}/logs/bench/" + BATCH + ".log"
PROBE_LOG = "results/{campaign}/logs/probe/{host}.log"
# An upstream tool's log of one run, the records parsed from it, and the parser's own log.
UPSTREAM_RUN = "{experiment}/{host}/run{run}/{tool}"
UPSTREAM_LOG = "results/{campaign}/upstream/" + UPSTREAM_RUN + ".log"
UPSTREAM_RAW = "results/{campaign}/raw/{experiment}/{host}/run{run}/upstream-{tool}.jsonl"
UPSTREAM_PARSE_LOG = "results/{campaign}/logs/upstream/" + UPSTREAM_RUN + ".log"
BASELINE_MANIFEST = "build/baselines/{source}/manifest.json"
BASELINE_LOG = "build/baselines/{source}.log"
TIDY_RECORDS = "results/{campaign}/tidy/records.csv"
NVLINK_TABLE = "results/{campaign}/tidy/nvlink_dissection.csv"  # the NVLink dissection's table
SUMMARY = "results/{campaign}/aggregate/summary.csv"
RATIOS = "results/{campaign}/aggregate/ratios.csv"
CLOCK_FITS = "results/{campaign}/aggregate/clock_fits.csv"
REPORT_INDEX = "results/{campaign}/report/index.html"
EXPORT_ZIP = "results/{campaign}/export/{campaign}-report.zip"
CLAIMS = "results/{campaign}/claims/claims.csv"
CAMPAIGN_LOG = "results/{campaign}/logs/{name}.log"
# The report's figures ({name}: an experiment; paper/<figure id>; model/<model figure>) and tables.
REPORT_FIGURE = "results/{campaign}/report/figures/{name}.{ext}"
PAPER_FIGURE = "results/{campaign}/report/figures/paper/{name}.{ext}"
MODEL_FIGURE = "results/{campaign}/report/figures/model/{name}.{ext}"
REPORT_TABLE = "results/{campaign}/report/tables/{name}.csv"
FIGURE_FORMATS = ("png", "svg")
COMBINED_RECORDS = "results/combined/records.csv"
COMBINED_LOG = "results/combined/logs/combine.log"
COMBINED_REPORT = "results/{campaign}/report/combined/index.html"  # beside the configured campaign
COMBINED_FIGURE = "results/{campaign}/report/combined/figures/{name}.{ext}"
# Every job of the local profile takes one share of the host (profiles/local/profile.yaml declares
# this many); a timing job that measures here takes them all, so it never runs beside another job.
HOST_SHARES = 100
# A raw file of a campaign (current or archived): what its path says its records are.
_RAW_PATH = re.compile(
    r"(?:^|/)results/(?:archive/)?(?P<campaign>[^/]+)/raw/(?P<experiment>[^/]+)/(?P<host>[^/]+)/"
    r"run(?P<run>\d+)(?:/[^/]+)?\.jsonl$"
)
NATIVE_SOURCE_SUFFIXES = {".h", ".hpp", ".cuh", ".c", ".cc", ".cpp", ".cu", ".cmake", ".in"}
# The performance model's outputs per campaign (workflow/rules/model.smk; the validation and the
# platform's predictions are made once, under results/model/, and every computed table is kept by
# its inputs in the store).
MODEL_DIR = "results/{campaign}/model/"
MODEL_OUTPUTS = ("params.json", "calibration.csv", "beside_measured.csv")
MODEL_PARAMS, MODEL_CALIBRATION, MODEL_BESIDE = (MODEL_DIR + f for f in MODEL_OUTPUTS)
MODEL_VALIDATION = "results/model/validation.csv"
MODEL_PREDICTIONS = "results/model/{platform}/predictions.csv"
MODEL_STORE = "results/model/store"
MODEL_LOG = "results/model/logs/{name}.log"
# Published tables of other work the model's blind check predicts (gicomm.model.blind).
PUBLISHED_TABLES = "config/published"
MODEL_BLIND = MODEL_DIR + "blind_check.csv"
# ... and its figures in the campaign's report (gicomm.model.figures.FIGURES draws them).
MODEL_FIGURES = ("model_validation", "model_beside_measured", "model_predictions")
ARCHIVE = RESULTS / "archive"


class _Wildcards(dict[str, object]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def fill(pattern: str, **values: object) -> str:
    """`pattern` with the given fields filled in and every other field left as a Snakemake
    wildcard: fill(REPORT_TABLE, name="t3") is "results/{campaign}/report/tables/t3.csv"."""
    return pattern.format_map(_Wildcards(values))


def figure_files(pattern: str, campaign: str, names: Iterable[str]) -> list[str]:
    """Each figure of `names` in every format, by one of the figure patterns above."""
    return [
        pattern.format(campaign=campaign, name=n, ext=ext) for n in names for ext in FIGURE_FORMATS
    ]


@dataclass(frozen=True)
class RawFile:
    """A raw record file and what its path says about its records (None: the path does not say);
    `points`: the point ids a batch file must hold."""

    path: Path
    campaign: str | None = None
    experiment: str | None = None
    host: str | None = None
    run_index: int | None = None
    points: tuple[str, ...] | None = None


def raw_file_of(path: str | Path, points: list[str] | None = None) -> RawFile:
    m = _RAW_PATH.search(Path(path).as_posix())
    if not m:
        return RawFile(Path(path), points=tuple(points) if points is not None else None)
    return RawFile(
        Path(path),
        campaign=m["campaign"],
        experiment=m["experiment"],
        host=m["host"],
        run_index=int(m["run"]),
        points=tuple(points) if points is not None else None,
    )


class Layout:
    def __init__(self, campaign: Campaign, root: Path = REPO_ROOT) -> None:
        self.c = campaign
        self.root = root

    def check_folders(self, workdir: Path) -> None:
        """Every folder a campaign writes (under Snakemake's working directory) must be a folder
        or not exist yet: a file in the way is refused here, with one line, instead of failing
        deep in Snakemake."""
        folders = [
            RESULTS,
            RESULTS / self.c.name,
            RESULTS / "combined",
            Path("build"),
            Path("build") / self.c.host,
        ]
        for f in folders:
            path = workdir / f
            if path.exists() and not path.is_dir():
                raise ConfigError(
                    f"{f} is a file, but campaign {self.c.name} writes its results into a folder "
                    "of that name: move the file away (or choose another campaign or host name)"
                )

    # ---- per-job paths ------------------------------------------------------------------------
    def batch_paths(self, experiment: str, host: str, run: str, batch: str) -> dict[str, str]:
        """The runner's own files of one batch: its partial records and its history folder."""
        w = {"campaign": self.c.name, "experiment": experiment, "host": host}
        w |= {"run": run, "batch": batch}
        return {"partial": PARTIAL_BATCH.format(**w), "history": HISTORY_BATCH.format(**w)}

    def host_share(self, experiment: str, batch: int, hardware: str, build: str) -> int:
        """The host shares a bench job takes: all of them when it will measure on this host (a
        point of its batch has what it needs here, by the probe and the build), so it runs alone;
        one when it only records skipped points, so it runs beside other jobs."""
        e = self.c.experiments[experiment]
        node = json.loads(Path(hardware).read_text())
        built = json.loads(Path(build).read_text())
        for p in e.batches(self.c.sweep)[batch]:
            needs = needs_here(e.needs_of(p), self.c.nic, p.nic_backend, node, p.transport)
            if not unmet_needs(needs, node, built, self.c.max_nodes, self.c.may_lock_clocks):
                return HOST_SHARES
        return 1

    def bench_nodes(self, experiment: str, batch: int) -> int:
        """Nodes a bench job asks for: two (one task each) where the platform gives two and the
        batch has points that need two nodes, or NIC points between two ranks on the platform's
        real NICs (the runner starts them with srun); otherwise one. Emulated ranks are local."""
        from gicomm.baselines.dispatch import DISPATCHER  # it imports this module

        if self.c.max_nodes < 2:
            return 1
        e = self.c.experiments[experiment]
        two_ranks = (
            self.c.nic.topology == "two-rank"
            and bool(self.c.platform_spec.get("nics"))
            and e.driver != DISPATCHER  # the library harnesses start their own ranks
        )
        for p in e.batches(self.c.sweep)[batch]:
            if e.needs_of(p).get("nodes", 1) >= 2 or (two_ranks and is_nic_point(p.nic_backend)):
                return 2
        return 1

    def bench_params(self, experiment: str, batch: int) -> dict[str, Any]:
        """What a bench job measures under, besides the native build: the batch's points, warm-up
        and iterations, the timeouts and what the platform declares per node. Snakemake runs the
        job again (and it measures again) when any of these change."""
        e = self.c.experiments[experiment]
        spec = self.c.platform_spec
        points = e.batches(self.c.sweep)[batch]
        params: dict[str, Any] = {
            "experiment": experiment,
            "driver": e.driver,
            "sweep": self.c.sweep,
            "batch": batch,
            "points": [p.point_id for p in points],
            "warmup": e.warmup,
            "iters": e.iters,
            "wait_ms": self.c.timeouts["wait_ms"],
            "point_s": e.point_s or self.c.timeouts["point_s"],
            "platform": self.c.platform,
            "max_nodes": self.c.max_nodes,
            "may_lock_clocks": self.c.may_lock_clocks,
            "declared": {
                **({"template": spec["template"]} if "template" in spec else {}),
                "gpu": {"per_node": (spec.get("gpu") or {}).get("per_node") or 0},
                "nics": [n.get("name") for n in spec.get("nics") or []],
            },
        }
        # Present only where they apply, so the batches of other campaigns keep their params.
        if experiment in self.c.raw.get("sweeps", {}):
            params["campaign_sweep"] = self.c.raw["sweeps"][experiment]
        if any(is_nic_point(p.nic_backend) for p in points):
            params["nic"] = self.c.nic.as_params()
        return params

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
        return list(self.batch_points(campaign))

    def batch_points(self, campaign: str) -> dict[str, list[str]]:
        """Every raw batch file of the configured campaign and the point ids it must hold."""
        if self.is_archived(campaign):
            return {}
        files = {}
        for name, e in self.c.experiments.items():
            for run in range(self.c.runs_of(e)):
                for batch, points in enumerate(e.batches(self.c.sweep)):
                    w = {"campaign": campaign, "experiment": name, "host": self.c.host}
                    path = RAW_BATCH.format(**w, run=run, batch=batch)
                    files[path] = [p.point_id for p in points]
        return files

    def hardware_files(self, campaign: str) -> list[str]:
        if self.is_archived(campaign):
            return sorted(
                str(p.relative_to(self.root))
                for p in (self.root / ARCHIVE / campaign / "hosts").glob("*/hardware.json")
            )
        return [HARDWARE.format(campaign=campaign, host=self.c.host)]

    def experiments_of(self, campaign: str) -> list[str]:
        if self.is_archived(campaign):
            raw = self.root / ARCHIVE / campaign / "raw"
            return sorted(p.name for p in raw.iterdir() if p.is_dir())
        return sorted(self.c.experiments)

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

    def published_tables(self) -> list[str]:
        """The published tables of the blind model check, one YAML file each."""
        folder = self.root / PUBLISHED_TABLES
        return sorted(str(p.relative_to(self.root)) for p in folder.glob("*.yaml"))

    def all_targets(self) -> list[str]:
        # The campaign's raw batch files are targets themselves: one that is missing (deleted, or
        # its job killed while a forced rerun measured it again) is measured even where the
        # tables made from it are still there.
        targets = self.raw_files(self.c.name)
        for c in self.reported_campaigns():
            targets.append(EXPORT_ZIP.format(campaign=c))
            targets += [MODEL_DIR.format(campaign=c) + f for f in MODEL_OUTPUTS]
            if "nvlink_dissection" in self.experiments_of(c):
                targets.append(NVLINK_TABLE.format(campaign=c))
        return [*targets, COMBINED_RECORDS, COMBINED_REPORT.format(campaign=self.c.name)]

    def describe(self) -> dict[str, Any]:
        return {"campaign": self.c.name, "host": self.c.host, "archived": list(self.c.archived)}
