# Library baselines (config/baselines.yaml, or the file the `baselines_file` key names). Each source
# (a pip package at a pinned version, a git commit with its build steps, or an existing install) is
# prepared into build/baselines/<source>/, whose manifest.json names the prepared root; `snakemake
# baselines` prepares every source in `use`. Upstream benchmark logs (nccl-tests, NVSHMEM perftest,
# DeepEP, UCCL-EP, MSCCL++, perftest, fabric-debug) become records through their parsers. The
# library_baselines points themselves are measured by bench_batch (gicomm.baselines.dispatch).
from gicomm.baselines.parsers import parser_names  # noqa: E402
from gicomm.baselines.sources import load_baselines  # noqa: E402

BASELINES = load_baselines(CAMPAIGN.baselines_file)


rule baselines:
    input:
        BASELINES.targets(),


rule baseline_source:
    input:
        lambda w: BASELINES.dependency_manifests(w.source),
    output:
        paths.BASELINE_MANIFEST,
    log:
        paths.BASELINE_LOG,
    wildcard_constraints:
        source=r"[a-z0-9][a-z0-9_.+-]*",
    conda:
        "../../envs/native.yaml"
    threads: 2
    params:
        baselines_file=str(CAMPAIGN.baselines_file),
        cuda_archs=CAMPAIGN.native["cuda_archs"],
    script:
        "../scripts/baseline_source.py"


rule baseline_parse_log:
    input:
        paths.UPSTREAM_LOG,
    output:
        paths.UPSTREAM_RAW,
    log:
        paths.UPSTREAM_PARSE_LOG,
    wildcard_constraints:
        tool="|".join(parser_names()),
    conda:
        "../../envs/pipeline.yaml"
    params:
        platform=CAMPAIGN.platform,
    script:
        "../scripts/baseline_parse.py"


rule nvlink_dissection_table:
    input:
        paths.SUMMARY,
    output:
        paths.NVLINK_TABLE,
    log:
        paths.fill(paths.CAMPAIGN_LOG, name="nvlink_dissection"),
    conda:
        "../../envs/pipeline.yaml"
    script:
        "../scripts/baseline_dissection.py"
