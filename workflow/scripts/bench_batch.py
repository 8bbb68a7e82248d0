import json
import signal
from pathlib import Path

import gicomm_path  # noqa: F401

from gicomm import CONFIG_DIR
from gicomm.bench import BatchJob, run_batch
from gicomm.errors import ConfigError
from gicomm.experiments import load_experiment, with_sweep
from gicomm.process import die_with_parent
from gicomm.ranks import NicSetup
from gicomm.smk import logged

die_with_parent(signal.SIGTERM)  # a killed Snakemake ends this job too: the rerun resumes it
with logged(snakemake):
    w, m = snakemake.wildcards, snakemake.params.measure
    experiment = load_experiment(CONFIG_DIR / "experiments" / f"{w.experiment}.yaml")
    if m.get("campaign_sweep"):  # the campaign's own sweep of this experiment (config `sweeps`)
        experiment = with_sweep(experiment, m["campaign_sweep"], "campaign", "sweeps")
    points = experiment.batches(m["sweep"])[int(w.batch)]
    if [p.point_id for p in points] != m["points"]:
        raise ConfigError(
            f"{experiment.path} changed after this run planned batch {w.batch}: start the run again"
        )
    run_batch(
        BatchJob(
            experiment=experiment,
            points=points,
            campaign=w.campaign,
            host=w.host,
            platform=m["platform"],
            run_index=int(w.run),
            build_dir=Path(snakemake.input.build).parent,
            hardware=json.loads(Path(snakemake.input.hardware).read_text()),
            partial=Path(snakemake.params.files["partial"]),
            history=Path(snakemake.params.files["history"]),
            output=Path(snakemake.output[0]),
            wait_ms=m["wait_ms"],
            point_s=m["point_s"],
            max_nodes=m["max_nodes"],
            may_lock_clocks=m["may_lock_clocks"],
            platform_spec=m["declared"],
            nic=NicSetup.from_params(m.get("nic")),
        )
    )
