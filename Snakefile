# rooflow: where a network's time goes on a machine, and how far it is from the roofline.
# Stages (one rule file each): dataset → estimate → ceilings → profile → aggregate → summarize → plots;
# common.smk holds the config checks and input functions, resources.smk the per-job resources.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/resources.smk"
include: "rules/hooks.smk"
include: "rules/dataset.smk"
include: "rules/estimate.smk"
include: "rules/ceilings.smk"
include: "rules/profile.smk"
include: "rules/aggregate.smk"
include: "rules/summarize.smk"
include: "rules/plots.smk"
include: "rules/doctor.smk"


rule all:
    default_target: True
    input:
        get_final_outputs,
