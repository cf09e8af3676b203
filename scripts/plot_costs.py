import pandas as pd

from rooflow.logs import step_logging
from rooflow.report.plots import flops_figure, params_figure

with step_logging(snakemake.log[0], "plot_costs"):
    summary = pd.read_csv(snakemake.input.summary)
    flops_figure(summary, snakemake.output.flops)
    params_figure(summary, snakemake.output.params)
