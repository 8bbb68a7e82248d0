# gicomm doctor (docs/doctor.md): the campaign's verdict table against the floors it measured,
# the model's expectations and the checks of the host the rule runs on. `snakemake doctor` makes
# it for the configured campaign (add "floors" to its experiments to measure the floors with it).
import sys  # noqa: E402


rule doctor_page:
    input:
        records="results/{campaign}/tidy/records.csv",
        table="config/floors.yaml",
    output:
        page="results/{campaign}/report/doctor.html",
        verdicts="results/{campaign}/report/data/doctor_verdicts.csv",
    log:
        "results/{campaign}/logs/doctor.log",
    wildcard_constraints:
        campaign=ONE_CAMPAIGN,
    conda:
        "../../envs/pipeline.yaml"
    params:
        python=sys.executable,
    shell:
        "{params.python} -m gicomm.doctor --records results/{wildcards.campaign}"
        " --campaign {wildcards.campaign} > {log} 2>&1"


rule doctor:
    input:
        f"results/{CAMPAIGN.name}/report/doctor.html",
