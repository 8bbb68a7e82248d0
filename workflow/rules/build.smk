# Native build: the CMake project under native/, built out of tree once per host type. Host-only
# targets always; CUDA targets per native.cuda (auto: where a GPU is); rdma-core targets when present.


rule build_native:
    input:
        LAYOUT.native_sources(),
    output:
        summary=paths.BUILD_SUMMARY,
    log:
        paths.BUILD_LOG,
    conda:
        "../../envs/native.yaml"
    threads: CAMPAIGN.native["build_jobs"]
    resources:
        **platform_resources("build"),
    params:
        cuda=CAMPAIGN.native["cuda"],
        cuda_archs=CAMPAIGN.native["cuda_archs"],
        build_type=CAMPAIGN.native["build_type"],
        targets=CAMPAIGN.native["targets"],
    script:
        "../scripts/build_native.py"
