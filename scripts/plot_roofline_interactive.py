from pathlib import Path

import pandas as pd

from rooflow.hardware.devices import load_device
from rooflow.io import read_json
from rooflow.logs import step_logging
from rooflow.report.interactive import interactive_roofline
from rooflow.report.plots import theoretical_roofs

i, params = snakemake.input, snakemake.params
with step_logging(snakemake.log[0], "plot_roofline_interactive") as log:
    ceilings = {Path(path).stem: path for path in i.ceilings}  # results/ceilings/{device}.json
    devices = [load_device(params.devices_file, key, ceilings.get(key)) for key in params.devices]
    extra = {key: theoretical_roofs(read_json(path)) for key, path in ceilings.items()}
    drawn = interactive_roofline(pd.read_csv(i.summary), devices, snakemake.output.page,
                                 checks=pd.read_csv(i.checks), extra_roofs=extra)
    log.info("%d traces, %d points; selectors: %s", drawn["traces"], drawn["points"], drawn["options"])
