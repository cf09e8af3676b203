from rooflow.ceilings import measure_ceilings
from rooflow.io import write_json
from rooflow.logs import step_logging

with step_logging(snakemake.log[0], "measure_ceilings"):
    ceilings = measure_ceilings(snakemake.params.kind, threads=snakemake.threads, quick=snakemake.params.quick)
    ceilings["device"] = snakemake.wildcards.device
    write_json(snakemake.output.ceilings, ceilings)
