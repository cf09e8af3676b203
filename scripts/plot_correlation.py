import pandas as pd

from rooflow.logs import step_logging
from rooflow.report.figures import correlation_figure

with step_logging(snakemake.log[0], "plot_correlation") as log:
    matrices = correlation_figure(pd.read_csv(snakemake.input.summary), snakemake.output.figure)
    for key, matrix in matrices.items():
        log.info("%s:\n%s", key, matrix.round(2).to_string())
