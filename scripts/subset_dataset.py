from rooflow.dataset import SubsetSpec, build_subset
from rooflow.logs import step_logging

with step_logging(snakemake.log[0], "subset_dataset"):
    build_subset(SubsetSpec(**snakemake.params.dataset), snakemake.output.tensor, snakemake.output.manifest)
