# Host probe: what this host is (CPU, NUMA, GPUs, NVLink, RDMA NICs, tools, git), for provenance and
# for deciding what can run here.


rule probe_host:
    output:
        paths.HARDWARE,
    log:
        paths.PROBE_LOG,
    conda:
        "../../envs/pipeline.yaml"
    resources:
        **platform_resources("probe"),
    script:
        "../scripts/probe_host.py"
