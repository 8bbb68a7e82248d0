# Performance model (workflow/gicomm/model, docs/model.md). It runs once per input, not once per
# campaign: the validation against the paper's headline numbers once per checkout
# (results/model/validation.csv), the platform's predicted sweeps once per platform
# (results/model/<platform>/predictions.csv), and per campaign only what reads its records: the
# calibration, the model at each measured point, and the blind check (the model against published
# tables it was never fitted to, config/published/). Every computed table is also kept by its inputs
# (results/model/store/), so a rerun with the same inputs reuses it.

# Needs CAMPAIGN from common.smk and ONE_CAMPAIGN from claims.smk; the figures are shown on the
# campaign report's model page (report.smk).
from gicomm.layout import MODEL_FIGURES  # noqa: E402

PLATFORM_CONFIG = {
    "platform": CAMPAIGN.platform,
    "platform_spec": CAMPAIGN.platform_spec,
}


rule model_calibrate:
    input:
        records=paths.TIDY_RECORDS,
        code=LAYOUT.model_sources(),
    output:
        params=paths.MODEL_PARAMS,
        table=paths.MODEL_CALIBRATION,
    log:
        paths.fill(paths.CAMPAIGN_LOG, name="model_calibrate"),
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
        params=paths.MODEL_PARAMS,
        records=paths.TIDY_RECORDS,
        code=LAYOUT.model_sources(),
    output:
        beside=paths.MODEL_BESIDE,
    log:
        paths.fill(paths.CAMPAIGN_LOG, name="model_beside"),
    wildcard_constraints:
        campaign=ONE_CAMPAIGN,
    conda:
        "../../envs/model.yaml"
    params:
        platform=PLATFORM_CONFIG,
        store=paths.MODEL_STORE,
    script:
        "../scripts/model_beside.py"


rule model_blind:
    input:
        params=paths.MODEL_PARAMS,
        published=LAYOUT.published_tables(),
        code=LAYOUT.model_sources(),
    output:
        blind=paths.MODEL_BLIND,
    log:
        paths.fill(paths.CAMPAIGN_LOG, name="model_blind"),
    wildcard_constraints:
        campaign=ONE_CAMPAIGN,
    conda:
        "../../envs/model.yaml"
    params:
        platform=PLATFORM_CONFIG,
        store=paths.MODEL_STORE,
    script:
        "../scripts/model_blind.py"


rule model_predict:
    input:
        code=LAYOUT.model_sources(),
    output:
        predictions=paths.MODEL_PREDICTIONS,
    log:
        paths.fill(paths.MODEL_LOG, name="predict-{platform}"),
    wildcard_constraints:
        platform=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    conda:
        "../../envs/model.yaml"
    params:
        platform=PLATFORM_CONFIG,
        store=paths.MODEL_STORE,
    script:
        "../scripts/model_predict.py"


rule model_validate:
    input:
        code=LAYOUT.model_sources(),
    output:
        paths.MODEL_VALIDATION,
    log:
        paths.fill(paths.MODEL_LOG, name="validate"),
    conda:
        "../../envs/model.yaml"
    script:
        "../scripts/model_validate.py"


rule model_figures:
    input:
        validation=paths.MODEL_VALIDATION,
        beside_measured=paths.MODEL_BESIDE,
        predictions=targets.model_predictions(CAMPAIGN.platform),
    output:
        png=[
            report(
                paths.fill(paths.MODEL_FIGURE, name=f, ext="png"),
                caption="../../report/captions/model.rst",
                category="{campaign}",
                subcategory="Performance model",
            )
            for f in MODEL_FIGURES
        ],
        svg=[paths.fill(paths.MODEL_FIGURE, name=f, ext="svg") for f in MODEL_FIGURES],
    log:
        paths.fill(paths.CAMPAIGN_LOG, name="figures/model"),
    wildcard_constraints:
        campaign=ONE_CAMPAIGN,
    conda:
        "../../envs/pipeline.yaml"
    script:
        "../scripts/model_figures.py"
