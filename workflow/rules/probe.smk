# Host probe: what this host is (CPU, NUMA, GPUs, NVLink, RDMA NICs, tools, git), for provenance and
# for deciding what can run here.


rule probe_host:
    output:
        "results/{campaign}/hosts/{host}/hardware.json",
    log:
        "results/{campaign}/logs/probe/{host}.log",
    conda:
        "../../envs/pipeline.yaml"
    resources:
        **platform_resources("probe"),
        gpu_jobs=0,
    script:
        "../scripts/probe_host.py"
