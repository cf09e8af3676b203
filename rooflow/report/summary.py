"""One tidy table: a row per device × model × batch × precision × mode, joining the analytic estimate,
the measured time, the profiler aggregates (where a GPU was profiled) and the device's roofs.

Which FLOPs and bytes place a point on the roofline: measured ones (ncu) where they exist, else the
estimate: total FLOPs of the mode over the DRAM bytes of the traffic model the run's variant follows
(rooflow.conventions.bytes_model: unfused for an eager or channels_last step, fusion-aware for a compiled one,
so fusion moves a compiled point right). `flops_source`/`bytes_source` say which; `estimated_bytes` and
`estimated_arithmetic_intensity` are that estimate, also where the point itself was measured.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

from rooflow.conventions import VARIANTS, bytes_model
from rooflow.errors import RooflowError
from rooflow.hardware.devices import Device, load_devices
from rooflow.hardware.environment import throttle_reading
from rooflow.hardware.roofs import attainable_flops_per_second, ridge_intensity
from rooflow.io import read_json
from rooflow.report.findings import KERNEL_TIMER, TIMED_HERE, render, run_checks

log = logging.getLogger(__name__)

KEYS = ["device", "model", "batch", "precision", "mode"]
RUN_KEYS = KEYS[1:]
# The bound of a run whose FLOP counters missed its tensor-core work (reconcile's tensor_work_unseen).
UNSEEN_BOUND = "unknown: tensor-core FLOPs not counted"


def read_summary(path: str | Path) -> pd.DataFrame:
    """A summary table the workflow's summarize step wrote; an empty, cut or foreign CSV ends in one sentence."""
    fix = "give the results/summary.csv the workflow writes (`snakemake --cores all` makes it)"
    try:
        frame = pd.read_csv(path)
        records = list(csv.reader(io.StringIO(Path(path).read_text())))
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError, csv.Error) as error:
        fields = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(error))
        why = ("the file is empty" if isinstance(error, pd.errors.EmptyDataError) else
               "not text" if isinstance(error, UnicodeDecodeError) else
               f"its line {fields[2]} has {fields[3]} fields, its header {fields[1]}" if fields else
               "its lines do not parse as CSV")
        raise RooflowError(f"{path}: not a readable summary table ({why}): {fix}") from None
    missing = [key for key in [*KEYS, "status"] if key not in frame.columns]
    if missing:
        raise RooflowError(f"{path}: not a rooflow summary table (no column {', '.join(missing)}): {fix}")
    if frame.empty:  # the workflow writes a row per run: a header alone is a write cut short
        raise RooflowError(f"{path}: a summary table without a row (only its header): {fix}")
    short = [number for number, record in enumerate(records[1:], 1) if record and len(record) < len(records[0])]
    if short:  # pandas fills a row cut short with NaN: its measured numbers would read as not collected
        raise RooflowError(f"{path}: its row {short[0]} has {len(records[short[0]])} of the header's "
                           f"{len(records[0])} fields, so the table is cut short: {fix}")
    rows = pd.util.hash_pandas_object(frame, index=False).to_numpy()  # NaN hashes alike: a row as its fields
    repeated = pd.Series(rows).duplicated().to_numpy().nonzero()[0]
    if len(repeated):  # every check and table row twice, silently: tables joined or appended to one another
        row = int(repeated[0])
        first = int((rows == rows[row]).nonzero()[0][0])
        run = " ".join(str(frame.iloc[row][key]) for key in KEYS)
        raise RooflowError(f"{path}: its row {row + 1} repeats row {first + 1} field for field ({run}), so "
                           f"two tables were joined or one appended to itself: {fix}")
    for column in NUMERIC_COLUMNS:  # a word where a number belongs read as text: tables and checks would fail on it
        if column in frame.columns and not pd.api.types.is_numeric_dtype(frame[column]):
            numbers = pd.to_numeric(frame[column], errors="coerce")
            row = int((numbers.isna() & frame[column].notna()).to_numpy().nonzero()[0][0])
            raise RooflowError(f"{path}: its row {row + 1} has {frame[column].iloc[row]!r} in column {column}, where "
                               f"a number belongs: {fix}")
    for column in NUMERIC_COLUMNS:  # a negative time or count, an infinite one, a batch of -1: printed as results
        if column not in frame.columns:
            continue
        values = pd.to_numeric(frame[column], errors="coerce")
        bad = (values < 0) | (values.abs() == float("inf"))
        if column == "batch":
            bad |= (values < 1) | (values % 1 != 0)
        if bad.any():
            row = int(bad.to_numpy().nonzero()[0][0])
            written = records[row + 1][records[0].index(column)]  # as the file has it (pandas reads 1e400 as inf)
            wanted = "a whole number of 1 or more" if column == "batch" else "a finite number of 0 or more"
            raise RooflowError(f"{path}: its row {row + 1} has {written!r} in column {column}, where {wanted} "
                               f"belongs: {fix}")
    return frame


# summary columns that hold numbers, checked when the table is read (those the terminal table and the checks
# compute with)
NUMERIC_COLUMNS = ("batch", "flops", "measured_seconds", "achieved_flops_per_second", "arithmetic_intensity",
                   "percent_of_roofline", "estimated_flops", "params")

COLUMNS = [
    *KEYS, "variant", "device_kind", "status", "status_message", "timer", "input_size", "params",
    "estimated_flops", "estimated_forward_flops", "estimated_backward_flops", "estimated_optimizer_flops",
    "estimated_matmul_flops", "estimated_min_bytes", "estimated_fused_bytes", "estimated_unfused_bytes",
    "estimated_bytes", "estimated_arithmetic_intensity", "estimated_peak_memory_bytes", "forward_backward_flops_ratio",
    "measured_seconds", "seconds_spread", "forward_seconds", "backward_seconds", "images_per_second",
    "compile_seconds",
    # a CPU run's threads and its measured roofs' (a roof of other cores is not this run's)
    "threads", "roof_threads",
    # pages each timed step mapped afresh (rooflow.measure.faults): their count, bytes, and seconds at the cost per
    # byte the device's calibration measured
    "minor_faults", "minor_fault_bytes", "minor_fault_seconds", "forward_faults_by_layer",
    # the machine's other processes' CPU time and a hypervisor's steal beside the timed iterations (JSON:
    # rooflow.measure.load), what the noisy check reads its cause from
    "warmup_iterations", "timed_iterations", "timing_rounds", "load_during_timing", "throttle",
    "memory_requested_bytes", "memory_available_bytes",
    "measured_flops", "measured_dram_bytes", "measured_tensor_flops", "kernel_seconds", "memcpy_seconds",
    "memset_seconds", "flops", "flops_source", "bytes", "bytes_source", "arithmetic_intensity",
    "achieved_flops_per_second", "peak_flops_per_second", "bandwidth_bytes_per_second", "roof_source",
    "ridge_intensity", "attainable_flops_per_second", "percent_of_roofline", "bound",
    "measured_peak_flops_per_second", "measured_bandwidth_bytes_per_second",
    "attainable_flops_per_second_measured_roof", "percent_of_measured_roofline",
    "predicted_seconds", "predicted_seconds_low", "predicted_seconds_high", "predicted_bound",
    "predicted_host_seconds", "predicted_device_seconds", "predicted_seconds_by_class",
    "predicted_seconds_by_layer_type", "measured_seconds_by_layer_type", "layer_departures",
    "predicted_forward_seconds",
    "predicted_backward_seconds", "predicted_seconds_by_phase_part", "calibration_source",
    # an FP32 profile whose kernels ran TF32 tensor cores (its PyTorch's defaults): their names, and the device
    # time the model predicts for the step run so (rooflow.estimate.timemodel.as_tf32)
    "tensor_core_kernels", "predicted_tf32_device_seconds", "tf32_peak_flops_per_second",
    "measured_kernel_seconds_by_class",
    "top_time", "top_time_source",
    "measured_over_predicted", "roofline_seconds", "below_roofline",
    # a host-bound step's FP32/TF32 twin on the same device, also host-bound: the same host work timed again
    # (TF32 changes only the kernels), the measured spread of its host between runs (_host_twins)
    "host_twin_precision", "host_twin_seconds",
    "predicted_memory_bytes", "predicted_memory_bytes_low", "predicted_memory_bytes_high", "fits", "fit_verdict",
    "measured_memory_bytes", "warmup_memory_bytes", "measured_reserved_bytes", "measured_over_predicted_memory",
    "flops_ratio", "bytes_ratio", "reconciliation", "bytes_reconciliation",
    # the reconciliation found the FLOP counters blind to the step's tensor-core work: its measured FLOPs, and the
    # intensity and bound read from them, are a lower bound, not the step's
    "tensor_flops_unseen",
    # the evidence behind the reconciliation (rooflow.profilers.reconcile) and the timed-vs-profiled kernels
    # (rooflow.measure.timeline), for the checks that test it
    "measured_matmul_flops", "measured_other_flops", "estimated_other_flops", "reconciliation_side",
    "reconciliation_attribution", "timed_kernels", "profiled_kernels", "kernel_algorithms_differ",
    "kernel_mismatch",
    "checks",
]


def _key(record: dict[str, Any], device: str | None = None) -> tuple:
    return (device if device is not None else record.get("device"), record["model"], int(record["batch"]),
            record["precision"], record["mode"])


def _measured_key(record: dict[str, Any]) -> tuple:
    """A measurement's key: the run's and its variant's (records written before variants are eager)."""
    variant = record.get("variant") or "eager"
    return (*_key(record), VARIANTS.index(variant), variant)


def eager_rows(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary's eager runs (all of a summary written before variants): one row per device and run, for
    the tables and figures that compare runs rather than variants."""
    if "variant" not in summary:
        return summary
    return summary[summary["variant"].isna() | (summary["variant"] == "eager")]


def _roofline_seconds(ops: pd.DataFrame | None, device: Device, precision: str) -> float | None:
    """The per-op roofline time (every op at its roof): a lower bound, beside the time model's prediction."""
    if ops is None:
        return None
    from rooflow.estimate.predict import predict_seconds

    # Datasheet roofs where the device has them; a CPU has only its measured ones.
    result = predict_seconds(ops, device, precision, measured=not device.peak_flops_per_second)
    return result.get("predicted_seconds") if result else None


def phase_columns(prediction, mode: str) -> dict[str, Any]:
    """A training step's predicted forward (the loss in it) and backward seconds, and each phase's priced parts
    (JSON), as the timing job's clock splits the measured step: the forward:backward check compares them."""
    if mode != "training":
        return {}
    return {"predicted_forward_seconds": prediction.phase_seconds.get("forward"),
            "predicted_backward_seconds": prediction.phase_seconds.get("backward"),
            "predicted_seconds_by_phase_part": json.dumps({
                phase: {k: round(v, 9) for k, v in sorted(parts.items(), key=lambda kv: -kv[1])}
                for phase, parts in prediction.phase_class_seconds.items()})}


def _predictions(row: dict[str, Any], estimate: dict[str, Any], ops: pd.DataFrame | None, device: Device,
                 calibration):
    """Predicted time (rooflow.estimate.timemodel) and memory (rooflow.estimate.predict), and their ratios to
    the measurement (rooflow.report.findings holds the checks that compare them); the time prediction, or None."""
    from rooflow.estimate.predict import below_roofline_flag, predict_memory
    from rooflow.estimate.timemodel import predict_step, unpriced_precision

    row["roofline_seconds"] = _roofline_seconds(ops, device, row["precision"])
    seconds = row.get("measured_seconds")
    prediction = None
    if unpriced := unpriced_precision(device, row["precision"]):
        row["calibration_source"] = unpriced
    elif ops is not None and calibration is not None:
        prediction = predict_step(ops, estimate, device, calibration)
        values = prediction.as_dict()
        values["predicted_seconds_by_class"] = json.dumps({k: round(v, 9) for k, v in sorted(
            prediction.by_class_seconds.items(), key=lambda kv: -kv[1])})
        values["predicted_seconds_by_layer_type"] = json.dumps({k: round(v, 9) for k, v in sorted(
            prediction.by_layer_type_seconds.items(), key=lambda kv: -kv[1])})
        values.pop("predicted_seconds_by_phase", None)
        values.update(phase_columns(prediction, row["mode"]))
        row.update(values)
        if row.get("minor_fault_bytes") and calibration.page_fault_seconds_per_byte:
            # the step's measured page faults at the cost per byte its calibration measured (a CPU's)
            row["minor_fault_seconds"] = row["minor_fault_bytes"] * calibration.page_fault_seconds_per_byte
        row["below_roofline"] = below_roofline_flag(ops, prediction, device, row["precision"], row["roofline_seconds"],
                                                    not device.peak_flops_per_second, calibration.cache_bytes)
        # an imported profile's time is its kernels' sum: held to the kernels' predicted time, not the step's
        compared = prediction.device_seconds if row.get("timer") == KERNEL_TIMER else prediction.seconds
        if seconds and compared:
            row["measured_over_predicted"] = seconds / compared
    memory = predict_memory(estimate, device)
    row.update(memory)
    measured = row.get("measured_memory_bytes")
    predicted = memory.get("predicted_memory_bytes")
    if measured and predicted and device.is_cuda:
        row["measured_over_predicted_memory"] = measured / predicted
    return prediction


# the layers listed in each direction: where a time prediction misses, the checks name those carrying it
DEPARTING_LAYERS = 3


def _layer_departures(row: dict[str, Any], measured: pd.DataFrame, ops: pd.DataFrame | None, prediction) -> None:
    """The layers whose measured time (the timing job's profiled iteration, forward and backward) departs most from their
    predicted time, each way: [layer, type, measured seconds, predicted seconds] (JSON), for the time check to
    name the layers that carry a miss — a layer type's excess is often one layer's (MobileNetV2's 16-to-96-channel
    1×1 convolution at 112×112 on a 2-core VM: 19-21 ms at batch 4 where glibc faulted its output's pages in afresh
    at every call, 2.6-3.3 ms where the allocator kept them: rooflow.measure.faults)."""
    if measured.empty or prediction is None or ops is None or not prediction.row_seconds:
        return
    # the optimizer's update of a layer's parameters is the optimizer's time in the profiled iteration, not its layer's
    layers = ops["layer"].fillna("").astype(str).where(ops["phase"].ne("optimizer"), "")
    predicted = pd.Series(prediction.row_seconds).groupby(layers.reindex(list(prediction.row_seconds))).sum()
    named = measured[measured["layer"].astype(str).ne("") & measured["phase"].ne("optimizer")]
    types = named.groupby("layer")["layer_type"].first()
    seconds = named.groupby("layer")["seconds"].sum()
    common = [layer for layer in seconds.index if layer in predicted.index]
    if not common:
        return
    difference = (seconds[common] - predicted[common]).sort_values()
    picked = list(dict.fromkeys([*difference.index[::-1][:DEPARTING_LAYERS], *difference.index[:DEPARTING_LAYERS]]))
    row["layer_departures"] = json.dumps([[layer, str(types[layer]), round(float(seconds[layer]), 9),
                                           round(float(predicted[layer]), 9)] for layer in picked])


def _as_profiled(row: dict[str, Any], estimate: dict[str, Any], ops: pd.DataFrame | None, device: Device,
                 calibration, kernel_names) -> None:
    """An imported FP32 profile (its time its kernels' sum) on a GPU with TF32 units whose kernels' names show
    tensor-core work: PyTorch's defaults let cuDNN (and cuBLAS before 1.12) run FP32 convolutions (products) as TF32,
    which rooflow's own timing turns off. Names those kernels and prices the step as it ran, with TF32 where the
    names show it, for the kernel-time check (rooflow.report.findings) to compare."""
    from rooflow.estimate.timemodel import as_tf32, predict_step
    from rooflow.profilers.kernels import classify_kernel, short_kernel_name, uses_tensor_cores

    if (row.get("timer") != KERNEL_TIMER or row["precision"] != "fp32" or ops is None or calibration is None
            or not device.is_cuda or not (device.peak_flops_per_second or {}).get("tf32")):
        return
    tensor = {kind: sorted(name for name in kernel_names if uses_tensor_cores(name) and classify_kernel(name) == kind)
              for kind in ("convolution", "gemm")}
    if not any(tensor.values()):
        return
    row["tensor_core_kernels"] = ", ".join(
        f"{len(names)} {kind} kernel{'s' if len(names) > 1 else ''} such as {short_kernel_name(names[0])}"
        for kind, names in tensor.items() if names)
    as_run = as_tf32(ops, convolutions=bool(tensor["convolution"]), products=bool(tensor["gemm"]))
    row["predicted_tf32_device_seconds"] = predict_step(as_run, estimate, device, calibration).device_seconds
    row["tf32_peak_flops_per_second"] = device.peak_flops_per_second["tf32"]


def _top_time(row: dict[str, Any], op_times: pd.DataFrame) -> None:
    """What takes most of the step's time, and its share: the layer type, measured (the timing job's profiled
    iteration) where it was recorded, else the kernel class Nsight Systems measured (an imported trace), else
    the op class the time model predicts."""
    from rooflow.measure.optime import seconds_by

    source, seconds = "measured", seconds_by(op_times)
    if seconds:
        row["measured_seconds_by_layer_type"] = json.dumps({k: round(v, 9) for k, v in seconds.items()})
    if not seconds and row.get("measured_kernel_seconds_by_class"):
        source, seconds = "measured kernels", json.loads(row["measured_kernel_seconds_by_class"])
    if not seconds:
        source, seconds = "predicted", json.loads(row.get("predicted_seconds_by_class") or "{}")
    total = math.fsum(seconds.values())
    if total > 0:
        name, value = max(seconds.items(), key=lambda kv: kv[1])
        row["top_time"], row["top_time_source"] = f"{name} {100 * value / total:.0f}%", source


def _reconcile(measured: dict, estimate: dict, precision: str, mode: str, device: Device,
               variant: str) -> dict[str, Any]:
    from rooflow.profilers.reconcile import reconcile

    # Kernel names let the diagnosis cite Winograd/FFT kernels; the aggregate lists them beside its totals.
    kernels = pd.DataFrame({"name": measured["kernel_names"]}) if measured.get("kernel_names") else None
    return reconcile(measured, estimate, precision=precision, mode=mode,
                     tensor_metrics_collected=bool(measured.get("tensor_metrics_collected")),
                     architecture=device.architecture, kernels=kernels, variant=variant)


def build_row(device: Device, estimate: dict[str, Any], timing: dict[str, Any] | None,
              ncu: dict[str, Any] | None = None, nsys: dict[str, Any] | None = None,
              ops: pd.DataFrame | None = None, reconciliation: dict[str, Any] | None = None,
              calibration=None) -> dict[str, Any]:
    """One summary row; every derived number is computed here, from named inputs, so it can be explained.

    ``reconciliation``: the run's reconcile.json (rooflow.profilers.reconcile over the per-kernel table, with
    the timed-vs-profiled kernel comparison under ``kernels_compared``); without it the FLOPs are reconciled
    here from the ncu totals alone. ``calibration``: the device's time-model calibration
    (rooflow.estimate.calibration.for_device when None)."""
    row: dict[str, Any] = dict(zip(KEYS, _key(estimate, device.key)))
    row["variant"] = (timing or {}).get("variant") or "eager"
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
    status = "ok"
    if timing is not None:
        status = timing.get("status", "ok")
        row["timer"] = timing.get("timer")
        if status == "ok":
            row["measured_seconds"] = timing["median_seconds"]
            row["seconds_spread"] = timing.get("spread")
            row["forward_seconds"] = timing.get("forward_median_seconds")
            row["backward_seconds"] = timing.get("backward_median_seconds")
            row["images_per_second"] = timing.get("images_per_second")
            row["compile_seconds"] = timing.get("compile_seconds")
            row["warmup_iterations"] = timing.get("warmup_iterations")
            row["timed_iterations"] = timing.get("timed_iterations")
            if not device.is_cuda:
                row["threads"], row["roof_threads"] = timing.get("threads"), device.measured_threads
            row["measured_memory_bytes"] = timing.get("steady_peak_allocated_bytes")
            row["warmup_memory_bytes"] = timing.get("warmup_peak_allocated_bytes")
            row["measured_reserved_bytes"] = timing.get("steady_peak_reserved_bytes")
            row["timing_rounds"] = timing.get("timing_rounds")
            if timing.get("load_during_timing"):
                row["load_during_timing"] = json.dumps(timing["load_during_timing"])
            row["minor_faults"] = timing.get("median_minor_faults")
            if row["minor_faults"] is not None and timing.get("page_bytes"):
                row["minor_fault_bytes"] = row["minor_faults"] * timing["page_bytes"]
            if timing.get("forward_faults_by_layer"):  # the profiled iteration's, per leaf layer
                row["forward_faults_by_layer"] = json.dumps(timing["forward_faults_by_layer"])
            if timing.get("throttled"):
                row["throttle"] = throttle_reading(timing.get("gpu_during_timing"))
        else:
            # out of memory, or does not fit: the message says how much was asked for and what was free
            row["status_message"] = timing.get("message")
            if status == "oom":
                row["memory_requested_bytes"] = timing.get("memory_requested_bytes")
                row["memory_available_bytes"] = timing.get("memory_available_bytes")
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
        row["memset_seconds"] = nsys.get("memset_seconds")
        if nsys.get("by_class"):
            row["measured_kernel_seconds_by_class"] = json.dumps({k: round(v, 9) for k, v in sorted(
                nsys["by_class"].items(), key=lambda kv: -kv[1])})
        if row.get("measured_seconds") is None and nsys.get("kernel_seconds"):
            # Imported profiles without an event timing: the kernel time of the one profiled iteration.
            row["measured_seconds"] = nsys["kernel_seconds"]
            row["timer"] = KERNEL_TIMER
            row["status"] = "ok"

    if row.get("measured_flops"):
        row["flops"], row["flops_source"] = row["measured_flops"], "ncu"
    else:
        row["flops"], row["flops_source"] = row["estimated_flops"], "estimate"
    # the estimate's traffic for how this variant runs (an estimate without that model: the other, else the floor)
    traffic = next((name for name in (bytes_model(row["variant"]), "fused", "unfused")
                    if row[f"estimated_{name}_bytes"]), "min")
    row["estimated_bytes"] = row[f"estimated_{traffic}_bytes"]
    if row["estimated_flops"] and row["estimated_bytes"]:
        row["estimated_arithmetic_intensity"] = row["estimated_flops"] / row["estimated_bytes"]
    if row.get("measured_dram_bytes"):
        row["bytes"], row["bytes_source"] = row["measured_dram_bytes"], "ncu-dram"
    else:
        row["bytes"] = row["estimated_bytes"]
        row["bytes_source"] = f"estimate-{'floor' if traffic == 'min' else traffic}"
    if row["flops"] and row["bytes"]:
        row["arithmetic_intensity"] = row["flops"] / row["bytes"]

    if ncu:
        if reconciliation is None:
            reconciliation = _reconcile(ncu, estimate, row["precision"], row["mode"], device, row["variant"])
        _evidence_columns(row, reconciliation)
        row["flops_ratio"] = reconciliation.get("flops_ratio")
        row["bytes_ratio"] = reconciliation.get("bytes_ratio")
        row["reconciliation"] = reconciliation.get("cause")
        row["bytes_reconciliation"] = reconciliation.get("bytes_cause")
        row["tensor_flops_unseen"] = bool(reconciliation.get("tensor_work_unseen"))

    seconds = row.get("measured_seconds")
    if seconds and row["flops"]:
        row["achieved_flops_per_second"] = row["flops"] / seconds

    for measured in (False, True):
        peak, bandwidth = device.roof_for_precision(row["precision"], measured=measured)
        if not (peak and bandwidth):
            continue
        intensity = row.get("arithmetic_intensity")
        # an intensity of the FLOPs the counters saw (a few % of the work) places no step under its roof
        attainable = attainable_flops_per_second(intensity, peak, bandwidth) \
            if intensity and not row.get("tensor_flops_unseen") else None
        achieved = row.get("achieved_flops_per_second")
        percent = 100 * achieved / attainable if achieved and attainable else None
        if not measured:
            row["peak_flops_per_second"], row["bandwidth_bytes_per_second"] = peak, bandwidth
            row["roof_source"] = "datasheet" if device.peak_flops_per_second else "measured"
            row["ridge_intensity"] = ridge_intensity(peak, bandwidth)
            row["attainable_flops_per_second"] = attainable
            row["percent_of_roofline"] = percent
            if intensity and row.get("tensor_flops_unseen"):
                row["bound"] = UNSEEN_BOUND
            elif intensity:
                row["bound"] = "memory-bound" if intensity < row["ridge_intensity"] else "compute-bound"
        else:
            row["measured_peak_flops_per_second"] = peak
            row["measured_bandwidth_bytes_per_second"] = bandwidth
            row["attainable_flops_per_second_measured_roof"] = attainable
            row["percent_of_measured_roofline"] = percent

    from rooflow.measure.optime import from_record

    prediction = _predictions(row, estimate, ops, device, calibration)
    op_times = from_record(timing)  # the profiled iteration's time per layer (empty where none was recorded)
    _layer_departures(row, op_times, ops, prediction)
    _as_profiled(row, estimate, ops, device, calibration, (ncu or {}).get("kernel_names") or ())
    _top_time(row, op_times)
    # the checks as records (rooflow.report.findings); the column is their rendering, for people
    row["checks"] = render(run_checks(row))
    return row


def _evidence_columns(row: dict[str, Any], reconciliation: dict[str, Any]) -> None:
    """The per-class FLOPs behind the reconciliation, and the timed-vs-profiled kernel comparison."""
    from rooflow.profilers.reconcile import MATMUL_SIDE, OTHER_SIDE

    sides = reconciliation.get("sides") or {}
    if sides:
        row["measured_matmul_flops"] = sides[MATMUL_SIDE]["measured"]
        row["measured_other_flops"] = sides[OTHER_SIDE]["measured"]
        row["estimated_other_flops"] = sides[OTHER_SIDE]["estimated"]
    row["reconciliation_side"] = reconciliation.get("side")
    row["reconciliation_attribution"] = reconciliation.get("attribution")
    compared = reconciliation.get("kernels_compared")
    if compared:
        row["timed_kernels"] = compared["timed_kernels"]
        row["profiled_kernels"] = compared["profiled_kernels"]
        row["kernel_algorithms_differ"] = compared["algorithms_differ"]
        row["kernel_mismatch"] = compared["message"] or None


def build_summary(devices: dict[str, Device], estimates: list[dict], timings: list[dict],
                  ncu: list[dict] = (), nsys: list[dict] = (),
                  ops: dict[tuple, pd.DataFrame] | None = None,
                  reconciliations: list[dict] = (), calibrations: dict | None = None) -> pd.DataFrame:
    """Join everything on (device, model, batch, precision, mode, variant). Timings and aggregates carry a
    `device` key (and a `variant`, eager where they have none: the profiles are of eager runs); estimates are
    device- and variant-independent and joined to every device and variant that measured the run."""
    by_run = {_key(e, "")[1:]: e for e in estimates}
    timing_by_key = {_measured_key(t): t for t in timings}
    ncu_by_key = {_measured_key(r): r for r in ncu}
    nsys_by_key = {_measured_key(r): r for r in nsys}
    reconciliation_by_key = {_measured_key(r): r for r in reconciliations}
    keys = sorted(set(timing_by_key) | set(ncu_by_key) | set(nsys_by_key), key=lambda k: k[:6])
    rows = []
    for key in keys:
        device_key, run = key[0], key[1:5]
        if device_key not in devices:
            raise RooflowError(f"a measurement names device '{device_key}', which is not in the catalogue")
        if run not in by_run:
            raise RooflowError(f"no estimate for {run}: the estimate_model step must run for every measured run")
        device = devices[device_key]
        calibration = (calibrations or {}).get(device_key)
        if calibration is None:
            from rooflow.estimate.calibration import for_device

            calibration = for_device(device)
        rows.append(build_row(device, by_run[run], timing_by_key.get(key), ncu_by_key.get(key),
                              nsys_by_key.get(key), (ops or {}).get(run), reconciliation_by_key.get(key),
                              calibration))
    _host_twins(rows)
    frame = pd.DataFrame(rows, columns=COLUMNS)
    return frame


HOST_TWINS = {"fp32": "tf32", "tf32": "fp32"}  # precisions whose steps dispatch the same ops: only kernels differ


def _host_twins(rows: list[dict[str, Any]]) -> None:
    """Give each host-bound step timed here its FP32/TF32 twin where that was timed and host-bound too (the same
    model, batch, mode and variant on the same device): the same host work measured again, so their ratio is the
    host's own spread between runs, which a host-bound step's miss can be read against (findings). Re-renders the
    checks of the rows it gives one. In place."""
    def host_bound(row: dict[str, Any]) -> bool:
        return (row.get("predicted_bound") == "host" and row.get("timer") in TIMED_HERE
                and float(row.get("measured_seconds") or 0.0) > 0)  # NaN and None are not

    timed = {(r["device"], r["model"], r["batch"], r["mode"], r["variant"], r["precision"]): r
             for r in rows if host_bound(r)}
    for (*run, precision), row in timed.items():
        twin = timed.get((*run, HOST_TWINS.get(precision)))
        if twin is not None:
            row["host_twin_precision"], row["host_twin_seconds"] = twin["precision"], twin["measured_seconds"]
            row["checks"] = render(run_checks(row))


def imported_timings(imports: list[dict]) -> list[dict]:
    """Timing records for imported runs whose config entry gives the measured seconds per iteration."""
    return [
        {**{k: entry[k] for k in KEYS}, "status": "ok", "median_seconds": entry["seconds"],
         "images_per_second": entry["batch"] / entry["seconds"], "timer": "imported"}
        for entry in imports if entry.get("seconds")
    ]


def summarize_files(devices_file: str | Path, estimates: list[str], timings: list[str],
                    ceilings: dict[str, str] | None = None, ncu: list[str] = (), nsys: list[str] = (),
                    ops: list[str] = (), imports: list[dict] = (),
                    reconciliations: list[str] = (), kernel_calibrations: list[str] = ()) -> pd.DataFrame:
    """The summary table from the stages' files; ``kernel_calibrations``: `rooflow calibrate-kernels -o` files of
    the user's GPUs, which the predicted times take instead of the shipped calibrations."""
    from rooflow.estimate.calibration import for_device
    from rooflow.estimate.kernel_calibration import add_calibrations

    add_calibrations(*kernel_calibrations)
    devices = load_devices(devices_file)
    calibrations = {}
    for key, path in (ceilings or {}).items():
        if key in devices and Path(path).is_file():
            measured = read_json(path)
            devices[key].with_measured(measured)
            calibrations[key] = for_device(devices[key], measured)
    estimate_records = [read_json(p) for p in estimates]
    ops_tables = {}
    for estimate, path in zip(estimate_records, ops):
        ops_tables[_key(estimate, "")[1:]] = pd.read_csv(path)
    return build_summary(devices, estimate_records, [read_json(p) for p in timings] + imported_timings(imports),
                         [read_json(p) for p in ncu], [read_json(p) for p in nsys], ops_tables,
                         [read_json(p) for p in reconciliations], calibrations)


# the columns format_table shows (a summary of an older rooflow may lack some: they show as "-")
TABLE_COLUMNS = ("status", "flops", "measured_seconds", "achieved_flops_per_second", "arithmetic_intensity",
                 "percent_of_roofline", "bound")


def format_table(frame: pd.DataFrame) -> str:
    """A terminal view of the summary with display units (the CSV keeps SI base units)."""
    frame = frame.reindex(columns=list(dict.fromkeys([*frame.columns, *TABLE_COLUMNS])))  # an older summary's
    view = pd.DataFrame({
        "device": frame["device"], "model": frame["model"], "batch": frame["batch"],
        "prec": frame["precision"], "mode": frame["mode"], "status": frame["status"],
        "GFLOP": frame["flops"] / 1e9, "ms": frame["measured_seconds"] * 1e3,
        "GFLOP/s": frame["achieved_flops_per_second"] / 1e9,
        "AI FLOP/B": frame["arithmetic_intensity"], "% roof": frame["percent_of_roofline"],
        "bound": frame["bound"],
    })
    return view.to_string(index=False, float_format=lambda v: "-" if math.isnan(v) else f"{v:,.3g}")
