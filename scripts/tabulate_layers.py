import pandas as pd

from rooflow.logs import step_logging
from rooflow.report.tables import write_html_table

w = snakemake.wildcards
with step_logging(snakemake.log[0], "tabulate_layers"):
    layers = pd.read_csv(snakemake.input.layers)
    write_html_table(snakemake.output.table, layers,
                     f"Per-layer estimate: {w.model}, batch {w.batch}, {w.precision}, {w.mode}",
                     "One row per module that ran ops, in execution order; FLOPs (1 FMA = 2 FLOP) and bytes "
                     "in SI units. Sort by forward_flops or fused_bytes to find the costly layers.")
