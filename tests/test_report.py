"""The HTML report: index with the claims table (paper value | this campaign | verdict), a page
per experiment with figures, tables beside the paper's, claim checks, sweep, provenance, the
commands that regenerate it and a tidy CSV; the report across campaigns; every local link and
image resolves. And the pipeline: Snakemake builds an archived campaign's report and
`snakemake --report` carries the figures."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from urllib.parse import urldefrag

import pytest
from conftest import REPO
from test_report_synth import synthetic_report_copy, write_archived_campaign

from gicomm.catalogue import PAPER_EXPERIMENTS, TABLE_IDS

LINK = re.compile(r"""(?:href|src)="([^"]+)\"""")


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic_report_copy(tmp_path_factory.mktemp("report"))


def local_links(page: Path) -> list[Path]:
    out = []
    for href in LINK.findall(page.read_text()):
        if href.startswith(("http:", "https:", "mailto:", "data:")):
            continue
        target = urldefrag(href)[0]
        out.append((page.parent / target).resolve() if target else page)
    return out


def test_index_has_the_claims_table_with_verdicts_and_runs(results: Path):
    index = (results / "synth" / "report" / "index.html").read_text()
    assert "paper value" in index and "this campaign" in index
    for verdict in ("reproduced", "not reproduced", "not measurable here"):
        assert f'<td class="verdict">{verdict}</td>' in index
    assert "5 runs:" in index and "max/min" in index  # each decided claim shows its runs
    assert "Noise the probe recorded" in index
    assert "needs an mlx5 NIC" in index or "needs H100" in index
    assert "0.7 us (P-IB)" in index  # the paper's value, from config/claims.yaml
    assert "Hosts and provenance" in index and "h1-prov" in index


def test_every_paper_experiment_has_a_page_with_everything(results: Path):
    report = results / "synth" / "report"
    for name in PAPER_EXPERIMENTS:
        page = (report / "experiments" / f"{name}.html").read_text()
        assert f"../figures/{name}.png" in page
        assert f"../data/{name}.csv" in page
        assert "snakemake --profile profiles/local" in page
        assert (report / "data" / f"{name}.csv").exists()
    one_op = (report / "experiments" / "one_op.html").read_text()
    assert "Table 3" in one_op and "P-IB issue [us]" in one_op  # the paper's table, ours under it
    assert "t3-minigda-issue" in one_op  # the claim checks of this experiment
    assert "ci95_lo" in one_op and "run_spread" in one_op  # the sweep over runs
    assert "figures/paper/fig05.png" in (report / "experiments" / "sm_clock.html").read_text()
    assert "C=" not in one_op and "c_cycles" in (report / "experiments/sm_clock.html").read_text()
    for tab in TABLE_IDS:
        assert (report / "tables" / f"{tab}.csv").exists()


def test_model_page_shows_validation_parameters_and_predictions(results: Path):
    report = results / "synth" / "report"
    index = " ".join((report / "index.html").read_text().split())
    assert 'href="model.html"' in index
    assert "1 of 2 headline checks and 1 of 1 other checks within tolerance" in index
    assert "1 of 2 parameters fitted from this campaign's records" in index
    page = (report / "model.html").read_text()
    for fig in ("model_validation", "model_beside_measured", "model_predictions"):
        assert f"figures/model/{fig}.png" in page
        assert (report / "figures" / "model" / f"{fig}.png").stat().st_size > 5000
    assert "blow-up mini-proxy" in page and "paths.mini-gda.issue_ns" in page
    assert "gda_msg_rate" in page  # the beside-measured table
    for name in ("validation", "calibration", "beside_measured", "predictions"):
        assert (report / "data" / f"model_{name}.csv").exists()


def test_blind_check_page_is_linked_and_shows_every_point(results: Path):
    report = results / "synth" / "report"
    index = " ".join((report / "index.html").read_text().split())
    assert 'href="blind.html"' in index
    assert "2 published numbers of 1 tables" in index and "1 of them never fitted" in index
    page = (report / "blind.html").read_text()
    assert "minigda.issue" in page and "baseline.rtt" in page  # fitted and blind rows both shown
    assert "https://example.org/paper" in page  # each table's source
    assert 'href="data/model_blind.csv"' in page
    assert (report / "data" / "model_blind.csv").exists()


def test_model_figures_say_so_when_there_is_nothing_to_draw(tmp_path: Path):
    import pandas as pd

    from gicomm.model.figures import FIGURES

    empty = {
        "model_validation": pd.DataFrame(columns=["check", "role", "paper", "predicted",
                                                  "tolerance", "passed"]),
        "model_beside_measured": pd.DataFrame(columns=["experiment", "metric", "p50",
                                                       "predicted", "nic_backend"]),
        "model_predictions": pd.DataFrame(columns=["sweep", "metric", "value"]),
    }  # fmt: skip
    for name, frame in empty.items():
        FIGURES[name][0](frame, [tmp_path / f"{name}.png"])
        assert (tmp_path / f"{name}.png").stat().st_size > 1000


def test_not_measured_experiment_page_says_why(results: Path):
    page = (results / "synth" / "report" / "experiments" / "goodput.html").read_text()
    assert "not runnable here" in page and "needs an RDMA NIC" in page


def test_every_local_link_and_image_resolves(results: Path):
    pages = list(results.rglob("*.html"))
    assert len(pages) > 2 * len(PAPER_EXPERIMENTS)
    missing = [f"{p.relative_to(results)} -> {t}" for p in pages for t in local_links(p)
               if not t.exists()]  # fmt: skip
    assert not missing, missing[:10]


def test_combined_report_sets_campaigns_side_by_side_with_a_tally(results: Path):
    page = (results / "synth" / "report" / "combined" / "index.html").read_text()
    assert "../index.html" in page and "../../../other/report/index.html" in page
    assert "figures/one_op.png" in page
    assert page.count("t3-minigda-issue") == 1  # one row per claim, one column per campaign
    # a tally of verdicts per campaign, and the platform as declared plus what the probe found
    assert '<th class="num verdict-too-few-runs">too few runs</th>' in page
    assert "local: 1 x NVIDIA H200, no RDMA NIC" in page


def workflow_copy(dst: Path) -> Path:
    """Just what Snakemake needs to report an archived campaign (no native tree, no other
    archived campaigns): quicker than a copy of the whole working tree."""
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.nbi", "*.nbc")
    for name in ("workflow", "config", "report", "profiles", "envs"):
        shutil.copytree(REPO / name, dst / name, ignore=ignore)
    for name in ("Snakefile", "pyproject.toml", "requirements.txt"):
        shutil.copy2(REPO / name, dst / name)
    return dst


@pytest.mark.slow
def test_snakemake_builds_an_archived_campaign_report_and_the_snakemake_report(tmp_path: Path):
    repo_copy = workflow_copy(tmp_path / "repo")
    write_archived_campaign(repo_copy, "synth")
    cfg = repo_copy / "test-config.yaml"
    cfg.write_text("campaign: citest\nnative: {cuda: 'off', build_jobs: 2}\n")
    target = "results/synth/report/index.html"
    base = [sys.executable, "-m", "snakemake", "--profile", "profiles/local", "--configfile",
            str(cfg), "--cores", "2"]  # fmt: skip
    out = subprocess.run([*base, target], cwd=repo_copy, capture_output=True, text=True,
                         timeout=600, check=False)  # fmt: skip
    assert out.returncode == 0, out.stderr[-4000:]
    report = repo_copy / "results/synth/report"
    assert "claims of the paper" in (report / "index.html").read_text().lower()
    for fig in ("fig03", "fig05", "fig10", "fig11"):
        assert (report / "figures/paper" / f"{fig}.png").stat().st_size > 5000
        assert (report / "figures/paper" / f"{fig}.svg").exists()
    claims = (repo_copy / "results/synth/claims/claims.csv").read_text()
    assert "reproduced" in claims
    zipped = repo_copy / "report.zip"
    out = subprocess.run([*base, target, "--report", str(zipped)], cwd=repo_copy,
                         capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert out.returncode == 0, out.stderr[-4000:]
    names = zipfile.ZipFile(zipped).namelist()
    assert any(n.endswith("fig05.png") for n in names), names[:20]
    assert any(n.endswith("claims.csv") for n in names)


def test_statuses_are_green_only_where_records_are_ok():
    import pandas as pd

    from gicomm.report import experiment_status

    df = pd.DataFrame({"experiment": ["gda_one_op"], "status": ["ok"], "error": [None]})
    s = experiment_status("one_op", df, current=False)
    assert s.status == "archived as gda_one_op"
    assert experiment_status("goodput", df, current=False).status == "not in this campaign"
    # a backing experiment whose points were all skipped does not make the paper's one green
    why = "not runnable on this host: needs 1 GPU(s), found 0"
    skipped = pd.DataFrame({"experiment": ["gda_one_op", "one_op"], "status": ["skipped"] * 2,
                            "error": [why] * 2})  # fmt: skip
    s = experiment_status("one_op", skipped, current=True)
    assert s.status == "not runnable here" and "needs 1 GPU(s), found 0" in s.detail
    assert "nvcc" not in s.detail


def test_a_campaign_with_no_records_still_gets_every_page(tmp_path: Path):
    import pandas as pd

    from gicomm.aggregate import summarize_runs, transport_ratios
    from gicomm.claims import check_claims
    from gicomm.fits import clock_fits
    from gicomm.paper_figures import plot_paper_figure
    from gicomm.report import CampaignReport, render_campaign_report
    from gicomm.tables import write_tables
    from gicomm.tidy import tidy_frame

    records = tidy_frame([])
    summary = summarize_runs(records)
    d = tmp_path / "data"
    d.mkdir()
    tables = {"records": records, "summary": summary, "ratios": transport_ratios(records),
              "fits": clock_fits(summary), "claims": check_claims(summary, records, [])}  # fmt: skip
    for name, frame in tables.items():
        frame.to_csv(d / f"{name}.csv", index=False)
    assert set(tables["claims"]["verdict"]) == {"not measurable here"}
    out = tmp_path / "report"
    write_tables(pd.read_csv(d / "summary.csv"), pd.read_csv(d / "records.csv"),
                 pd.read_csv(d / "fits.csv"), out / "tables")  # fmt: skip
    plot_paper_figure(pd.read_csv(d / "summary.csv"), pd.read_csv(d / "records.csv"), "empty",
                      "fig05", [out / "figures/paper/fig05.png"])  # fmt: skip
    render_campaign_report(
        CampaignReport("empty", d / "records.csv", d / "summary.csv", d / "claims.csv",
                       d / "fits.csv", d / "ratios.csv", out / "tables", [],
                       out / "index.html", current=True)
    )  # fmt: skip
    assert "0 reproduced" in (out / "index.html").read_text()
    assert (out / "index.html").stat().st_mode & 0o777 == 0o644  # readable by everyone
    for name in PAPER_EXPERIMENTS:
        assert "not in this campaign" in (out / "experiments" / f"{name}.html").read_text()


def test_tables_are_paper_first_and_none_is_a_copy_of_another(results: Path):
    import pandas as pd

    tables = results / "synth" / "report" / "tables"
    frames = {t: pd.read_csv(tables / f"{t}.csv", dtype=str, keep_default_na=False)
              for t in TABLE_IDS}  # fmt: skip
    texts = [f.to_csv() for f in frames.values()]
    assert len(set(texts)) == len(texts)  # no table is a byte copy of another (Table 8 was)
    t3 = frames["tab03"]
    assert t3["source"].iloc[0] == "paper (P-IB)" and t3["path"].iloc[0] == "mini-gda inline"
    ours = t3[(t3["source"] == "this campaign") & (t3["path"] == "mini-gda inline")]
    assert set(ours["measured on"].str.split(",").str[0]) == {
        "softnic-cpu (software NIC)", "mlx5 (real NIC)"}  # fmt: skip
    assert ours["pib_issue_us"].astype(float).between(0.6, 0.8).all()  # ns shown in us
    t8 = frames["tab08"]
    assert (t8.loc[t8["source"] == "this campaign", "note"].str.startswith(
        "not measurable here: needs NVSHMEM's DC transport")).all()  # fmt: skip
    page = (results / "synth" / "report" / "tables.html").read_text()
    assert "cold (proxy core at 2.5 GHz)" in page  # Table 9 in the paper's terms
    assert "ours: worker slept before the op" in page


def test_every_table_row_of_the_catalogue_names_one_paper_row():
    from gicomm.catalogue import TABLES
    from gicomm.paper import paper_table
    from gicomm.tables import _matches

    for spec in TABLES.values():
        paper = paper_table(spec.paper_csv)
        for row in spec.rows:
            hits = sum(_matches(p, row["row"]) for _, p in paper.iterrows())
            assert hits == 1, (spec.tab_id, row["row"], hits)


def test_export_zip_stands_alone(results: Path, tmp_path: Path):
    from gicomm.export import export_campaign

    out = tmp_path / "synth.zip"
    export_campaign("synth", results / "synth" / "report", [], [], out)
    assert out.stat().st_mode & 0o777 == 0o644
    z = zipfile.ZipFile(out)
    names = set(z.namelist())
    assert "synth/report/combined/index.html" in names
    for name in names:
        if not name.endswith(".html"):
            continue
        assert z.getinfo(name).external_attr >> 16 & 0o044 == 0o044  # world-readable inside too
        for href in LINK.findall(z.read(name).decode()):
            target = urldefrag(href)[0]
            if not target or target.startswith(("http:", "https:", "mailto:", "data:")):
                continue
            resolved = str(Path(name).parent / target)
            resolved = str(Path(resolved).resolve().relative_to(Path("/").resolve())) \
                if resolved.startswith("/") else os.path.normpath(resolved)  # fmt: skip
            assert resolved in names, (name, href)
    combined = z.read("synth/report/combined/index.html").decode()
    assert "not in this export: results/other/report/index.html" in combined


def test_why_cuda_is_missing_is_what_was_checked():
    from gicomm.needs import unmet_needs

    needs = {"gpus": 1, "cuda_build": True}
    no_gpu = {"gpus": {"devices": []}, "tools": {"nvcc": "13.0"}}
    (gpu, cuda) = unmet_needs(needs, no_gpu, {"cuda": False})
    assert gpu == "needs 1 GPU(s), found 0"
    assert "no GPU on this host (nvcc 13.0 is installed" in cuda and "not found" not in cuda
    no_nvcc = {"gpus": {"devices": [{"name": "H200"}]}, "tools": {"nvcc": None}}
    assert unmet_needs(needs, no_nvcc, {"cuda": False}) == [
        "needs the CUDA build; the native build has none: nvcc was not found on this host"
    ]


def test_emulated_nic_rows_are_labelled_and_never_mixed_with_real_nic_rows():
    import pandas as pd
    from conftest import make_record

    from gicomm.aggregate import summarize_runs
    from gicomm.catalogue import TABLES
    from gicomm.tables import paper_first
    from gicomm.tidy import tidy_frame

    recs = [make_record(experiment="one_op", transport="mini-gda", nic_backend="mlx5",
                        metric="issue_ns", run_index=r, stats={"n": 5, "p50": 700.0},
                        params={"payload": "inline", "size": 8}) for r in range(5)]  # fmt: skip
    records = tidy_frame(recs)
    real = summarize_runs(records).assign(rdma_provider="")
    emulated = real.assign(rdma_provider="emulated", p50=350.0, p50_min=350.0, p50_max=350.0)
    t = paper_first(pd.concat([real, emulated]), records, pd.DataFrame(), TABLES["tab03"])
    ours = t[(t["source"] == "this campaign") & (t["path"] == "mini-gda inline")]
    assert sorted(ours["measured on"].str.split(",").str[0]) == [
        "mlx5 (emulated NIC)", "mlx5 (real NIC)"]  # fmt: skip
    values = dict(zip(ours["measured on"].str.split(",").str[0], ours["pib_issue_us"],
                      strict=True))  # fmt: skip
    assert values == {"mlx5 (emulated NIC)": "0.35", "mlx5 (real NIC)": "0.7"}


def test_rates_near_the_engine_ceiling_are_marked_in_tables():
    import pandas as pd
    from conftest import make_record

    from gicomm.aggregate import summarize_runs
    from gicomm.catalogue import TABLES
    from gicomm.tables import BOUND_MARK, paper_first
    from gicomm.tidy import tidy_frame

    recs = [make_record(experiment="proxy_msg_rate", transport="mini-proxy",
                        nic_backend="softnic-cpu", metric="msg_rate", unit="Mmsg/s", run_index=r,
                        stats={"n": 5, "p50": 14.0},
                        params={"enqueue": "tuned", "workers": 1, "batch": 16, "state": "cold"})
            for r in range(5)]  # fmt: skip
    records = tidy_frame(recs)
    summary = summarize_runs(records).assign(engine_ceiling=20.0)  # 14 is within 2x of 20
    t = paper_first(summary, records, pd.DataFrame(), TABLES["tab10"])
    row = t[(t["source"] == "this campaign") & (t["path"] == "mini-proxy B=16")].iloc[0]
    assert row["mmsg_per_s_cold"] == f"14{BOUND_MARK}" and "model-NIC bound" in row["note"]
