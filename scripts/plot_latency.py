import pandas as pd

from rooflow.logs import step_logging
from rooflow.report.checks import flagged_runs
from rooflow.report.figures import latency_figure, predicted_figure, throughput_figure

i, o, device = snakemake.input, snakemake.output, snakemake.wildcards.device
with step_logging(snakemake.log[0], "plot_latency") as log:
    summary = pd.read_csv(i.summary)
    flags = flagged_runs(pd.read_csv(i.checks))
    log.info("latency: %d points", len(latency_figure(summary, device, o.latency, flags)))
    log.info("throughput: %d points", len(throughput_figure(summary, device, o.throughput, flags)))
    log.info("predicted vs measured: %d points", len(predicted_figure(summary, device, o.predicted, flags)))
