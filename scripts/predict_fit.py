from rooflow.estimate.predict import fit_table
from rooflow.hardware.devices import load_devices
from rooflow.io import read_json, write_json
from rooflow.logs import step_logging

with step_logging(snakemake.log[0], "predict_fit") as log:
    table = fit_table(load_devices(snakemake.params.devices_file), snakemake.params.pairs,
                      [read_json(path) for path in snakemake.input.totals])
    for key, entry in table.items():
        log.info("%s: %s", key, entry["verdict"])
    write_json(snakemake.output.fits, table)
