from rooflow.io import read_json
from rooflow.logs import step_logging
from rooflow.report.tables import environment_table, write_html_table

with step_logging(snakemake.log[0], "tabulate_environment") as log:
    table = environment_table([read_json(path) for path in snakemake.input.timings])
    write_html_table(snakemake.output.table, table, "Environment of every measurement",
                     "One row per timed run: versions (Python, torch, torchvision, CUDA, cuDNN), host, CPU, GPU "
                     "and driver, clocks and temperature, TF32 flags, threads, SLURM job. Device ceilings: "
                     "results/ceilings/*.json.")
    log.info("%d measurements", len(table))
