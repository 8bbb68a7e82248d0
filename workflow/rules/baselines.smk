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
        "build/baselines/{source}/manifest.json",
    log:
        "build/baselines/{source}.log",
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
        "results/{campaign}/upstream/{experiment}/{host}/run{run}/{tool}.log",
    output:
        "results/{campaign}/raw/{experiment}/{host}/run{run}/upstream-{tool}.jsonl",
    log:
        "results/{campaign}/logs/upstream/{experiment}/{host}/run{run}/{tool}.log",
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
        "results/{campaign}/tidy/nvlink_dissection.csv",
    log:
        "results/{campaign}/logs/nvlink_dissection.log",
    conda:
        "../../envs/pipeline.yaml"
    script:
        "../scripts/baseline_dissection.py"
