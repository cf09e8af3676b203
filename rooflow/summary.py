"""One tidy table: a row per device × model × batch × precision × mode, joining the analytic estimate,
the measured time, the profiler aggregates (where a GPU was profiled) and the device's roofs.

Which FLOPs and bytes place a point on the roofline: measured ones (ncu) where they exist, else the
estimate (total FLOPs of the mode; fusion-aware DRAM bytes). `flops_source`/`bytes_source` say which.
"""

from __future__ import annotations

import argparse
import logging
import math
from pathlib import Path
from typing import Any

import pandas as pd

from rooflow.devices import Device, load_devices
from rooflow.environment import throttle_reading
from rooflow.errors import RooflowError
from rooflow.io import read_json
from rooflow.roofline import attainable_flops_per_second, ridge_intensity

log = logging.getLogger(__name__)

KEYS = ["device", "model", "batch", "precision", "mode"]
RUN_KEYS = KEYS[1:]
# A measurement whose interquartile range exceeds this share of its median is flagged as noisy.
NOISY_SPREAD = 0.05
# Measured/estimated FLOPs outside this band need an explanation.
FLOPS_RATIO_BAND = (0.5, 2.0)

COLUMNS = [
    *KEYS, "device_kind", "status", "input_size", "params",
    "estimated_flops", "estimated_forward_flops", "estimated_backward_flops", "estimated_optimizer_flops",
    "estimated_matmul_flops", "estimated_min_bytes", "estimated_fused_bytes", "estimated_unfused_bytes",
    "estimated_peak_memory_bytes", "forward_backward_flops_ratio",
    "measured_seconds", "seconds_spread", "forward_seconds", "backward_seconds", "images_per_second",
    "timing_rounds", "throttle", "memory_requested_bytes", "memory_available_bytes",
    "measured_flops", "measured_dram_bytes", "measured_tensor_flops", "kernel_seconds", "memcpy_seconds",
    "flops", "flops_source", "bytes", "bytes_source", "arithmetic_intensity",
    "achieved_flops_per_second", "peak_flops_per_second", "bandwidth_bytes_per_second", "roof_source",
    "ridge_intensity", "attainable_flops_per_second", "percent_of_roofline", "bound",
    "measured_peak_flops_per_second", "measured_bandwidth_bytes_per_second",
    "attainable_flops_per_second_measured_roof", "percent_of_measured_roofline",
    "predicted_seconds", "measured_over_predicted", "flops_ratio", "bytes_ratio", "reconciliation",
    "checks",
]


def _key(record: dict[str, Any], device: str | None = None) -> tuple:
    return (device if device is not None else record.get("device"), record["model"], int(record["batch"]),
            record["precision"], record["mode"])


def _predicted_seconds(ops: pd.DataFrame | None, device: Device, precision: str) -> float | None:
    if ops is None:
        return None
    try:
        from rooflow.estimate import predict_seconds
    except ImportError:
        return None
    # Datasheet roofs where the device has them; a CPU has only its measured ones.
    result = predict_seconds(ops, device, precision, measured=not device.peak_flops_per_second)
    return result.get("predicted_seconds") if result else None


def _reconcile(measured: dict, estimate: dict, precision: str, mode: str, device: Device) -> dict[str, Any]:
    from rooflow.profilers.reconcile import reconcile

    # Kernel names let the diagnosis cite Winograd/FFT kernels; the aggregate lists them beside its totals.
    kernels = pd.DataFrame({"name": measured["kernel_names"]}) if measured.get("kernel_names") else None
    return reconcile(measured, estimate, precision=precision, mode=mode,
                     tensor_metrics_collected=bool(measured.get("tensor_metrics_collected")),
                     architecture=device.architecture, kernels=kernels)


def build_row(device: Device, estimate: dict[str, Any], timing: dict[str, Any] | None,
              ncu: dict[str, Any] | None = None, nsys: dict[str, Any] | None = None,
              ops: pd.DataFrame | None = None) -> dict[str, Any]:
    """One summary row; every derived number is computed here, from named inputs, so it can be explained."""
    row: dict[str, Any] = dict(zip(KEYS, _key(estimate, device.key)))
    row["device_kind"] = device.kind
    row["input_size"] = estimate.get("input_size")
    row["params"] = estimate.get("params")
    row["estimated_flops"] = estimate.get("total_flops")
    row["estimated_forward_flops"] = estimate.get("forward_flops")
    row["estimated_backward_flops"] = estimate.get("backward_flops")
    row["estimated_optimizer_flops"] = estimate.get("optimizer_flops")
    row["estimated_matmul_flops"] = (estimate.get("forward_matmul_flops") or 0) + (
        estimate.get("backward_matmul_flops") or 0)
    row["estimated_min_bytes"] = estimate.get("min_bytes")
    row["estimated_fused_bytes"] = estimate.get("fused_bytes")
    row["estimated_unfused_bytes"] = estimate.get("unfused_bytes")
    row["estimated_peak_memory_bytes"] = estimate.get("peak_memory_bytes")
    fwd = estimate.get("forward_flops")
    row["forward_backward_flops_ratio"] = (estimate.get("backward_flops") / fwd
                                           if row["mode"] == "training" and fwd else None)
    checks: list[str] = []

    status = "ok"
    if timing is not None:
        status = timing.get("status", "ok")
        if status == "ok":
            row["measured_seconds"] = timing["median_seconds"]
            row["seconds_spread"] = timing.get("spread")
            row["forward_seconds"] = timing.get("forward_median_seconds")
            row["backward_seconds"] = timing.get("backward_median_seconds")
            row["images_per_second"] = timing.get("images_per_second")
            row["timing_rounds"] = timing.get("timing_rounds")
            if (row["seconds_spread"] or 0) > NOISY_SPREAD:
                rounds = timing.get("timing_rounds")
                after = f" after {rounds} round{'s' if rounds > 1 else ''}" if rounds else ""
                checks.append(
                    f"noisy: interquartile range is {100 * row['seconds_spread']:.0f}% of the median time "
                    f"(over {100 * NOISY_SPREAD:.0f}%){after}: other load on the machine, too few iterations, "
                    f"or clock changes; rerun on an idle node or raise profiling.timed_iterations")
            if timing.get("throttled"):
                row["throttle"] = throttle_reading(timing.get("gpu_during_timing"))
                checks.append(
                    f"throttled: {row['throttle']}: the GPU lowered its clocks while it was timed (power cap, "
                    f"temperature), so the time is longer than the device's roof assumes; rerun on an idle, "
                    f"cooled GPU or hold the point against a measured roof taken under the same conditions")
        elif status == "oom":
            row["memory_requested_bytes"] = timing.get("memory_requested_bytes")
            row["memory_available_bytes"] = timing.get("memory_available_bytes")
            message = str(timing.get("message") or "the run did not fit in device memory")
            checks.append(f"out of memory: {message.removeprefix('out of memory: ')}")
    elif nsys is None and ncu is None:
        status = "not-measured"
    row["status"] = status

    if ncu:
        row["measured_flops"] = ncu.get("flops_total")
        row["measured_dram_bytes"] = ncu.get("dram_bytes")
        row["measured_tensor_flops"] = ncu.get("flops_tensor")
    if nsys:
        row["kernel_seconds"] = nsys.get("kernel_seconds")
        row["memcpy_seconds"] = nsys.get("memcpy_seconds")
        if row.get("measured_seconds") is None and nsys.get("kernel_seconds"):
            # Imported profiles without an event timing: the kernel time of the one profiled iteration.
            row["measured_seconds"] = nsys["kernel_seconds"]
            row["status"] = "ok"

    if row.get("measured_flops"):
        row["flops"], row["flops_source"] = row["measured_flops"], "ncu"
    else:
        row["flops"], row["flops_source"] = row["estimated_flops"], "estimate"
    if row.get("measured_dram_bytes"):
        row["bytes"], row["bytes_source"] = row["measured_dram_bytes"], "ncu-dram"
    else:
        fused = row["estimated_fused_bytes"] or row["estimated_min_bytes"]
        row["bytes"] = fused
        row["bytes_source"] = "estimate-fused" if row["estimated_fused_bytes"] else "estimate-floor"
    if row["flops"] and row["bytes"]:
        row["arithmetic_intensity"] = row["flops"] / row["bytes"]

    if ncu:
        reconciliation = _reconcile(ncu, estimate, row["precision"], row["mode"], device)
        row["flops_ratio"] = reconciliation.get("flops_ratio")
        row["bytes_ratio"] = reconciliation.get("bytes_ratio")
        row["reconciliation"] = reconciliation.get("cause")
        ratio = row["flops_ratio"]
        if ratio and not FLOPS_RATIO_BAND[0] <= ratio <= FLOPS_RATIO_BAND[1]:
            checks.append(f"measured/estimated FLOPs = {ratio:.2f}, outside "
                          f"[{FLOPS_RATIO_BAND[0]}, {FLOPS_RATIO_BAND[1]}]: "
                          f"{reconciliation.get('cause') or 'no explanation found'}")

    seconds = row.get("measured_seconds")
    if seconds and row["flops"]:
        row["achieved_flops_per_second"] = row["flops"] / seconds

    for measured in (False, True):
        peak, bandwidth = device.roof_for_precision(row["precision"], measured=measured)
        if not (peak and bandwidth):
            continue
        intensity = row.get("arithmetic_intensity")
        attainable = attainable_flops_per_second(intensity, peak, bandwidth) if intensity else None
        achieved = row.get("achieved_flops_per_second")
        percent = 100 * achieved / attainable if achieved and attainable else None
        if not measured:
            row["peak_flops_per_second"], row["bandwidth_bytes_per_second"] = peak, bandwidth
            row["roof_source"] = "datasheet" if device.peak_flops_per_second else "measured"
            row["ridge_intensity"] = ridge_intensity(peak, bandwidth)
            row["attainable_flops_per_second"] = attainable
            row["percent_of_roofline"] = percent
            if intensity:
                row["bound"] = "memory-bound" if intensity < row["ridge_intensity"] else "compute-bound"
            if percent and percent > 100:
                checks.append(
                    f"above the roof: {percent:.0f}% of the attainable {attainable / 1e12:.3g} TFLOP/s "
                    f"({row['roof_source']} {row['precision']} roof): a wrong peak (a sparse headline?), "
                    f"over-counted FLOPs, an under-measured time, or FLOPs of a precision this roof does not cover")
        else:
            row["measured_peak_flops_per_second"] = peak
            row["measured_bandwidth_bytes_per_second"] = bandwidth
            row["attainable_flops_per_second_measured_roof"] = attainable
            row["percent_of_measured_roofline"] = percent

    predicted = _predicted_seconds(ops, device, row["precision"])
    row["predicted_seconds"] = predicted
    if predicted and seconds:
        row["measured_over_predicted"] = seconds / predicted
    row["checks"] = "; ".join(checks)
    return row


def build_summary(devices: dict[str, Device], estimates: list[dict], timings: list[dict],
                  ncu: list[dict] = (), nsys: list[dict] = (),
                  ops: dict[tuple, pd.DataFrame] | None = None) -> pd.DataFrame:
    """Join everything on (device, model, batch, precision, mode). Timings and aggregates carry a `device`
    key; estimates are device-independent and joined to every device that measured the run."""
    by_run = {_key(e, "")[1:]: e for e in estimates}
    timing_by_key = {_key(t): t for t in timings}
    ncu_by_key = {_key(r): r for r in ncu}
    nsys_by_key = {_key(r): r for r in nsys}
    keys = sorted(set(timing_by_key) | set(ncu_by_key) | set(nsys_by_key),
                  key=lambda k: (k[0], k[1], k[2], k[3], k[4]))
    rows = []
    for key in keys:
        device_key, run = key[0], key[1:]
        if device_key not in devices:
            raise RooflowError(f"a measurement names device '{device_key}', which is not in the catalogue")
        if run not in by_run:
            raise RooflowError(f"no estimate for {run}: the estimate_model step must run for every measured run")
        rows.append(build_row(devices[device_key], by_run[run], timing_by_key.get(key), ncu_by_key.get(key),
                              nsys_by_key.get(key), (ops or {}).get(run)))
    frame = pd.DataFrame(rows, columns=COLUMNS)
    return frame


def imported_timings(imports: list[dict]) -> list[dict]:
    """Timing records for imported runs whose config entry gives the measured seconds per iteration."""
    return [
        {**{k: entry[k] for k in KEYS}, "status": "ok", "median_seconds": entry["seconds"],
         "images_per_second": entry["batch"] / entry["seconds"], "timer": "imported"}
        for entry in imports if entry.get("seconds")
    ]


def summarize_files(devices_file: str | Path, estimates: list[str], timings: list[str],
                    ceilings: dict[str, str] | None = None, ncu: list[str] = (), nsys: list[str] = (),
                    ops: list[str] = (), imports: list[dict] = ()) -> pd.DataFrame:
    devices = load_devices(devices_file)
    for key, path in (ceilings or {}).items():
        if key in devices and Path(path).is_file():
            devices[key].with_measured(read_json(path))
    estimate_records = [read_json(p) for p in estimates]
    ops_tables = {}
    for estimate, path in zip(estimate_records, ops):
        ops_tables[_key(estimate, "")[1:]] = pd.read_csv(path)
    return build_summary(devices, estimate_records, [read_json(p) for p in timings] + imported_timings(imports),
                         [read_json(p) for p in ncu], [read_json(p) for p in nsys], ops_tables)


def format_table(frame: pd.DataFrame) -> str:
    """A terminal view of the summary with display units (the CSV keeps SI base units)."""
    view = pd.DataFrame({
        "device": frame["device"], "model": frame["model"], "batch": frame["batch"],
        "prec": frame["precision"], "mode": frame["mode"], "status": frame["status"],
        "GFLOP": frame["flops"] / 1e9, "ms": frame["measured_seconds"] * 1e3,
        "GFLOP/s": frame["achieved_flops_per_second"] / 1e9,
        "AI FLOP/B": frame["arithmetic_intensity"], "% roof": frame["percent_of_roofline"],
        "bound": frame["bound"],
    })
    return view.to_string(index=False, float_format=lambda v: "-" if math.isnan(v) else f"{v:,.3g}")


def _cmd_summarize(args: argparse.Namespace) -> int:
    frame = pd.read_csv(args.summary)
    print(format_table(frame))
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("summary", help="print results/summary.csv with display units",
                                   description="Print a workflow's summary table (SI units in the file) "
                                               "with display units: GFLOP, ms, GFLOP/s, % of roofline.")
    parser.add_argument("summary", nargs="?", default="results/summary.csv")
    parser.set_defaults(func=_cmd_summarize)
