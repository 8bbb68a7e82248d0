import json
from pathlib import Path

import gicomm_path  # noqa: F401

from gicomm.bench import BatchJob, run_batch
from gicomm.config import load_campaign
from gicomm.smk import logged

with logged(snakemake):
    w = snakemake.wildcards
    campaign = load_campaign(snakemake.config)
    experiment = campaign.experiments[w.experiment]
    job = BatchJob(
        experiment=experiment,
        points=experiment.batches(campaign.sweep)[int(w.batch)],
        campaign=w.campaign,
        host=w.host,
        platform=campaign.platform,
        run_index=int(w.run),
        build_dir=Path(snakemake.input.build).parent,
        hardware=json.loads(Path(snakemake.input.hardware).read_text()),
        partial=Path(snakemake.params.partial),
        output=Path(snakemake.output[0]),
        wait_ms=campaign.timeouts["wait_ms"],
        point_s=experiment.point_s or campaign.timeouts["point_s"],
        max_nodes=campaign.max_nodes,
        may_lock_clocks=campaign.may_lock_clocks,
        platform_spec=campaign.platform_spec,
    )
    run_batch(job)
