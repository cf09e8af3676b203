from rooflow.ceilings.calibrate import measure_calibration
from rooflow.ceilings.measure import measure_ceilings
from rooflow.hardware.devices import load_devices
from rooflow.io import write_json
from rooflow.logs import step_logging

w, p = snakemake.wildcards, snakemake.params
with step_logging(snakemake.log[0], "measure_ceilings") as log:
    ceilings = measure_ceilings(p.kind, threads=snakemake.threads, quick=p.quick)
    ceilings["device"] = w.device
    # the time model's calibration, measured here beside the roofs it refines (rooflow.estimate.calibration)
    device = load_devices(p.devices_file)[w.device].with_measured(ceilings)
    calibration = measure_calibration(device, ceilings, threads=snakemake.threads)
    ceilings["calibration"] = calibration.to_json()
    log.info("calibration: host %.1f µs per op; %s", calibration.host_op_seconds * 1e6, calibration.source)
    write_json(snakemake.output.ceilings, ceilings)
