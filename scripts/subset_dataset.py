from rooflow.logs import step_logging
from rooflow.workload.dataset import SubsetSpec, build_subset

with step_logging(snakemake.log[0], "subset_dataset"):
    build_subset(SubsetSpec(**snakemake.params.dataset), snakemake.output.tensor, snakemake.output.manifest)
