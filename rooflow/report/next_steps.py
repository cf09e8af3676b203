"""What to try next on each device, for the report: the what-if (rooflow.estimate.whatif) of the runs measured
there, as two tables — the run's own alternatives (precisions, batches, variants) and the cross-GPU table
(the run on every catalogue GPU).

One what-if per model, precision and mode: of its eager runs that completed, the largest batch (the batch
alternatives already cover half, double and four times it). On a GPU the predictions start from the
measured step (Habitat's scaling from a source GPU). On a CPU its own alternatives start from its measured
step, but the GPU rows are the time model's own prediction (a CPU's efficiency says nothing about a GPU's)."""

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
                ceilings: str | None = None, kernel_calibrations: list[str] = ()) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the alternatives on ``device_key``, the cross-GPU table) of the runs timed there (runs_to_try), each
    ranked by predicted throughput; ``specs`` maps a model name to its config entry
    (rooflow.workload.spec.spec_from_entry); ``ceilings`` the device's measured ceilings (a CPU's roofs);
    ``kernel_calibrations``: `rooflow calibrate-kernels -o` files of the user's GPUs, taken instead of the
    shipped calibrations."""
    import functools

    from rooflow.estimate.api import estimate_run
    from rooflow.estimate.kernel_calibration import add_calibrations
    from rooflow.estimate.whatif import CHANGES, what_if
    from rooflow.workload.spec import spec_from_entry

    add_calibrations(*kernel_calibrations)
    devices = load_devices(devices_file)
    device = devices[device_key]
    measured_roofs = read_json(ceilings) if ceilings else None
    if measured_roofs:
        device.with_measured(measured_roofs)
    # The device's own alternatives start from its measurement wherever the time model can predict the run
    # there (roofs); the GPUs do only from a GPU's.
    anchored = device.bandwidth(True) or device.bandwidth(False)
    local = tuple(c for c in CHANGES if c != "device")
    records = [read_json(p) for p in timing_files]
    rows = []
    for record in runs_to_try(records):
        model, batch, precision, mode = record["model"], int(record["batch"]), record["precision"], record["mode"]
        spec = spec_from_entry(specs.get(model) or model)
        estimator = functools.cache(lambda b, p, spec=spec, mode=mode: estimate_run(spec, b, p, mode))
        calls = [(CHANGES, record if anchored else None)] if device.is_cuda else \
            [(local, record if anchored else None), (("device",), None)]
        for changes, measured in calls:
            result = what_if(estimator, batch, precision, mode, device_key, devices, ceilings=measured_roofs,
                             measured=measured, changes=changes)
            # the second call's run row is the unanchored prediction: the first call's measured one stands
            rows += [{"run_batch": batch, "run_precision": precision, **row} for row in result["alternatives"]
                     if changes != ("device",) or row["change"] == "device"]
    table = pd.DataFrame([_measured_variant(row, records) for row in rows], columns=COLUMNS)
    return _ranked(table[table["change"] != "device"]), _ranked(table[table["change"].isin(CROSS_GPU)])


def _measured_variant(row: dict[str, Any], records: list[dict[str, Any]]) -> dict[str, Any]:
    """A variant row of a run whose variant was timed here too: the measured step instead of "not modelled"."""
    if row["change"] != "variant":
        return row
    for record in records:
        if record.get("status", "ok") == "ok" and record.get("median_seconds") and \
                (record["model"], int(record["batch"]), record["precision"], record["mode"], record.get("variant")) \
                == (row["model"], row["batch"], row["precision"], row["mode"], row["variant"]):
            seconds = float(record["median_seconds"])
            return {**row, "predicted_seconds": seconds, "predicted_seconds_low": seconds,
                    "predicted_seconds_high": seconds, "images_per_second": row["batch"] / seconds,
                    "basis": "measured", "note": None}
    return row


def _ranked(table: pd.DataFrame) -> pd.DataFrame:
    """Each run's rows as rooflow.estimate.whatif ranks them (rank_key), runs in order."""
    from rooflow.estimate.whatif import rank_key

    keys = [(*(row[c] for c in RUN_COLUMNS), *rank_key(row)) for row in table.to_dict("records")]
    order = sorted(range(len(keys)), key=keys.__getitem__)
    return table.iloc[order][COLUMNS].reset_index(drop=True)
