# Benchmarks: one job per (experiment, independent process run, batch of sweep points). Each job
# runs many points in one process; finished points survive a killed job, and a job that Snakemake
# runs again measures again (workflow/gicomm/bench.py). A job that measures here takes the whole
# host share, so under the local profile it never runs beside another job.


rule bench_batch:
    input:
        hardware=paths.HARDWARE,
        build=paths.BUILD_SUMMARY,
    output:
        paths.RAW_BATCH,
    log:
        paths.BENCH_LOG,
    conda:
        "../../envs/pipeline.yaml"
    resources:
        **bench_resources(),
        host_share=lambda w, input: LAYOUT.host_share(
            w.experiment, int(w.batch), input.hardware, input.build
        ),
    params:
        files=lambda w: LAYOUT.batch_paths(w.experiment, w.host, w.run, w.batch),
        measure=lambda w: LAYOUT.bench_params(w.experiment, int(w.batch)),
    script:
        "../scripts/bench_batch.py"
