from rooflow.estimate.predict import unfit_record
from rooflow.hardware.devices import load_devices
from rooflow.io import read_json, write_json
from rooflow.logs import step_logging

with step_logging(snakemake.log[0], "record_unfit") as log:
    device = load_devices(snakemake.params.devices_file)[snakemake.wildcards.device]
    record = {**unfit_record(read_json(snakemake.input.totals), device), "variant": snakemake.params.variant}
    log.info("%s", record["message"])
    write_json(snakemake.output.unfit, record)
