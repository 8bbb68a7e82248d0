# Performance model (issue 9): calibrate from the campaign's tidy records (paper numbers where a
# campaign has none), predict the platform's sweeps, and validate the paper-calibrated model
# against the paper's other headline numbers. Logic in workflow/gicomm/model; docs/model.md.

# Needs CAMPAIGN from common.smk (the campaign's platform name and spec) and ONE_CAMPAIGN from
# claims.smk; the figures are shown on the campaign report's model page (report.smk).
from gicomm.layout import MODEL_FIGURES  # noqa: E402


rule model_calibrate:
    input:
        records="results/{campaign}/tidy/records.csv",
        code=LAYOUT.model_sources(),
    output:
        params="results/{campaign}/model/params.json",
        table="results/{campaign}/model/calibration.csv",
    log:
        "results/{campaign}/logs/model_calibrate.log",
    conda:
        "../../envs/model.yaml"
    params:
        platform=lambda w: {
            "platform": CAMPAIGN.platform,
            "platform_spec": CAMPAIGN.platform_spec,
        },
    script:
        "../scripts/model_calibrate.py"


rule model_predict:
    input:
        params="results/{campaign}/model/params.json",
        records="results/{campaign}/tidy/records.csv",
        code=LAYOUT.model_sources(),
    output:
        predictions="results/{campaign}/model/predictions.csv",
        beside="results/{campaign}/model/beside_measured.csv",
    log:
        "results/{campaign}/logs/model_predict.log",
    conda:
        "../../envs/model.yaml"
    params:
        platform=lambda w: {
            "platform": CAMPAIGN.platform,
            "platform_spec": CAMPAIGN.platform_spec,
        },
    script:
        "../scripts/model_predict.py"


rule model_validate:
    input:
        code=LAYOUT.model_sources(),
    output:
        "results/{campaign}/model/validation.csv",
    log:
        "results/{campaign}/logs/model_validate.log",
    conda:
        "../../envs/model.yaml"
    script:
        "../scripts/model_validate.py"


rule model_figures:
    input:
        validation="results/{campaign}/model/validation.csv",
        beside_measured="results/{campaign}/model/beside_measured.csv",
        predictions="results/{campaign}/model/predictions.csv",
    output:
        png=[
            report(
                f"results/{{campaign}}/report/figures/model/{f}.png",
                caption="../../report/captions/model.rst",
                category="{campaign}",
                subcategory="Performance model",
            )
            for f in MODEL_FIGURES
        ],
        svg=[
            f"results/{{campaign}}/report/figures/model/{f}.svg" for f in MODEL_FIGURES
        ],
    log:
        "results/{campaign}/logs/figures/model.log",
    wildcard_constraints:
        campaign=ONE_CAMPAIGN,
    conda:
        "../../envs/pipeline.yaml"
    script:
        "../scripts/model_figures.py"
