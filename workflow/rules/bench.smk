# Benchmarks: one job per (experiment, independent process run, batch of sweep points). Each job
# runs many points in one process; finished points survive a killed job (workflow/gicomm/bench.py).


rule bench_batch:
    input:
        hardware=LAYOUT.hardware_json(),
        build=LAYOUT.build_summary(),
    output:
        "results/{campaign}/raw/{experiment}/{host}/run{run}/batch{batch}.jsonl",
    log:
        "results/{campaign}/logs/bench/{experiment}/{host}/run{run}/batch{batch}.log",
    conda:
        "../../envs/pipeline.yaml"
    resources:
        **platform_resources("gpu"),
        gpu_jobs=lambda w: LAYOUT.gpu_jobs(w.experiment),
    params:
        partial=lambda w: LAYOUT.partial(w.experiment, w.host, w.run, w.batch),
    script:
        "../scripts/bench_batch.py"
