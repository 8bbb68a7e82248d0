# gicomm: measure GPU-initiated communication and set each claim of the paper beside this run.
# Thin on purpose: the stages live in workflow/rules/, the logic in workflow/gicomm/; the default
# campaign (config/config.yaml) is read in common.smk, after gicomm has checked the file.
from snakemake.utils import min_version

min_version("9.27")


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/probe.smk"
include: "workflow/rules/build.smk"
include: "workflow/rules/bench.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/claims.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/export.smk"
include: "workflow/rules/baselines.smk"
include: "workflow/rules/model.smk"
include: "workflow/rules/doctor.smk"


rule all:
    default_target: True
    input:
        all_targets(),
