import pandas as pd

from rooflow.logs import step_logging
from rooflow.report.figures import forward_backward_figure

with step_logging(snakemake.log[0], "plot_forward_backward") as log:
    table = forward_backward_figure(pd.read_csv(snakemake.input.forward_backward), snakemake.output.figure)
    log.info("%d training runs", len(table))
