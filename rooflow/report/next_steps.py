"""What to try next on each device, for the report: the what-if (rooflow.estimate.whatif) of the runs measured
there, as two tables — the run's own alternatives (precisions, batches, variants) and the cross-GPU table
(the run on every catalogue GPU).

One what-if per model, precision and mode: of its eager runs that completed, the largest batch (the batch
alternatives already cover half, double and four times it). On a GPU the predictions start from the
measured step (Habitat's scaling from a source GPU); a CPU's measured step is not scaled onto GPUs (a CPU's
efficiency says nothing about a GPU's), so there every row is the time model's own prediction."""

from __future__ import annotations

from typing import Any

import pandas as pd

from rooflow.hardware.devices import load_devices
from rooflow.io import read_json

RUN_COLUMNS = ["model", "mode", "run_batch", "run_precision"]
COLUMNS = [*RUN_COLUMNS, "change", "device", "batch", "precision", "variant", "predicted_seconds",
           "predicted_seconds_low", "predicted_seconds_high", "images_per_second", "predicted_memory_bytes",
           "fits", "fit_verdict", "cost_per_1000_images_usd", "basis", "calibration_source", "note"]
CROSS_GPU = ("run", "device")


def runs_to_try(timings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The timing records the what-ifs start from: per model, precision and mode, the eager run of the
    largest batch that completed."""
    chosen: dict[tuple, dict[str, Any]] = {}
    for record in timings:
        if record.get("status", "ok") != "ok" or (record.get("variant") or "eager") != "eager" \
                or not record.get("median_seconds"):
            continue
        key = (record["model"], record["precision"], record["mode"])
        if key not in chosen or int(record["batch"]) > int(chosen[key]["batch"]):
            chosen[key] = record
    return [chosen[key] for key in sorted(chosen)]


def what_to_try(timing_files: list[str], specs: dict[str, Any], device_key: str, devices_file: str,
                ceilings: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the alternatives on ``device_key``, the cross-GPU table) of the runs timed there (runs_to_try), each
    ranked by predicted throughput; ``specs`` maps a model name to its config entry
    (rooflow.workload.spec.spec_from_entry); ``ceilings`` the device's measured ceilings (a CPU's roofs)."""
    from rooflow.estimate.api import estimate_run
    from rooflow.estimate.whatif import what_if
    from rooflow.workload.spec import spec_from_entry

    devices = load_devices(devices_file)
    measured_roofs = read_json(ceilings) if ceilings else None
    if measured_roofs:
        devices[device_key].with_measured(measured_roofs)
    rows = []
    for record in runs_to_try([read_json(p) for p in timing_files]):
        model, batch, precision, mode = record["model"], int(record["batch"]), record["precision"], record["mode"]
        spec = spec_from_entry(specs.get(model) or model)
        result = what_if(lambda b, p, spec=spec, mode=mode: estimate_run(spec, b, p, mode), batch, precision, mode,
                         device_key, devices, ceilings=measured_roofs,
                         measured=record if devices[device_key].is_cuda else None)
        rows += [{"run_batch": batch, "run_precision": precision, **row} for row in result["alternatives"]]
    table = pd.DataFrame(rows, columns=COLUMNS)
    return (table[table["change"] != "device"].reset_index(drop=True),
            table[table["change"].isin(CROSS_GPU)].reset_index(drop=True))
