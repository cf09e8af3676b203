import pandas as pd

from rooflow.hardware.devices import load_device
from rooflow.io import read_json
from rooflow.logs import step_logging
from rooflow.report.checks import flagged_runs
from rooflow.report.plots import theoretical_roofs
from rooflow.report.sweep import device_roofline

i = snakemake.input
with step_logging(snakemake.log[0], "plot_roofline") as log:
    ceilings = i.ceilings[0] if i.ceilings else None
    device = load_device(snakemake.params.devices_file, snakemake.wildcards.device, ceilings)
    # Cache bytes for the hierarchical points: each ncu aggregate names its run.
    hierarchy = pd.DataFrame([{**read_json(path), "device": snakemake.wildcards.device} for path in i.ncu])
    drawn = device_roofline(pd.read_csv(i.summary), device, snakemake.output.figure,
                            flags=flagged_runs(pd.read_csv(i.checks)), hierarchy=hierarchy,
                            extra_roofs=theoretical_roofs(read_json(ceilings) if ceilings else None))
    log.info("%d roofs, %d points, %d cache-level points, %d estimate points, flagged: %s", len(drawn["roofs"]),
             len(drawn["points"]), len(drawn["levels"]), len(drawn["estimates"]), drawn["flagged"])
