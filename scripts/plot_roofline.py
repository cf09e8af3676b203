import pandas as pd

from rooflow.devices import load_device
from rooflow.logs import step_logging
from rooflow.plots import roofline_figure

with step_logging(snakemake.log[0], "plot_roofline") as log:
    ceilings = snakemake.input.ceilings[0] if snakemake.input.ceilings else None
    device = load_device(snakemake.params.devices_file, snakemake.wildcards.device, ceilings)
    drawn = roofline_figure(pd.read_csv(snakemake.input.summary), device, snakemake.output.figure)
    log.info("%d roofs, %d points, flagged: %s", len(drawn["roofs"]), len(drawn["points"]), drawn["flagged"])
