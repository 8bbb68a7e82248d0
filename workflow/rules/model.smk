# Performance model (workflow/gicomm/model, docs/model.md). It runs once per input, not once per
# campaign: the validation against the paper's headline numbers once per checkout
# (results/model/validation.csv), the platform's predicted sweeps once per platform
# (results/model/<platform>/predictions.csv), and per campaign only what reads its records: the
# calibration and the model at each measured point. Every computed table is also kept by its inputs
# (results/model/store/), so a rerun with the same inputs reuses it.

# Needs CAMPAIGN from common.smk and ONE_CAMPAIGN from claims.smk; the figures are shown on the
# campaign report's model page (report.smk).
from gicomm.layout import MODEL_FIGURES  # noqa: E402

MODEL_STORE = "results/model/store"
PLATFORM_CONFIG = {
    "platform": CAMPAIGN.platform,
    "platform_spec": CAMPAIGN.platform_spec,
}


rule model_calibrate:
    input:
        records="results/{campaign}/tidy/records.csv",
        code=LAYOUT.model_sources(),
    output:
        params="results/{campaign}/model/params.json",
        table="results/{campaign}/model/calibration.csv",
    log:
        "results/{campaign}/logs/model_calibrate.log",
    wildcard_constraints:
        campaign=ONE_CAMPAIGN,
    conda:
        "../../envs/model.yaml"
    params:
        platform=PLATFORM_CONFIG,
    script:
        "../scripts/model_calibrate.py"


rule model_beside:
    input:
        params="results/{campaign}/model/params.json",
        records="results/{campaign}/tidy/records.csv",
        code=LAYOUT.model_sources(),
    output:
        beside="results/{campaign}/model/beside_measured.csv",
    log:
        "results/{campaign}/logs/model_beside.log",
    wildcard_constraints:
        campaign=ONE_CAMPAIGN,
    conda:
        "../../envs/model.yaml"
    params:
        platform=PLATFORM_CONFIG,
        store=MODEL_STORE,
    script:
        "../scripts/model_beside.py"


rule model_predict:
    input:
        code=LAYOUT.model_sources(),
    output:
        predictions="results/model/{platform}/predictions.csv",
    log:
        "results/model/logs/predict-{platform}.log",
    wildcard_constraints:
        platform=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    conda:
        "../../envs/model.yaml"
    params:
        platform=PLATFORM_CONFIG,
        store=MODEL_STORE,
    script:
        "../scripts/model_predict.py"


rule model_validate:
    input:
        code=LAYOUT.model_sources(),
    output:
        targets.MODEL_VALIDATION,
    log:
        "results/model/logs/validate.log",
    conda:
        "../../envs/model.yaml"
    script:
        "../scripts/model_validate.py"


rule model_figures:
    input:
        validation=targets.MODEL_VALIDATION,
        beside_measured="results/{campaign}/model/beside_measured.csv",
        predictions=targets.model_predictions(CAMPAIGN.platform),
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
