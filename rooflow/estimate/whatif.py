"""What to change next: one run's alternatives, each predicted by the time model and ranked by throughput.

For one model, batch, precision and mode on a device, :func:`what_if` lists the run itself and its
alternatives — the other precisions the device has a roof for, half, double and four times the batch (and,
for a run that does not fit, the largest batch that does), the
variants (channels_last, torch.compile) and every catalogue GPU — each with its predicted step time and
range (rooflow.estimate.timemodel, the device's calibration from rooflow.estimate.calibration), images per
second, predicted memory and fit verdict (rooflow.estimate.predict.predict_memory), the calibration it rests
on and, where the catalogue gives ``price_per_hour_usd``, the cost of 1,000 images.

From a measurement (Habitat's idea, Yu et al., USENIX ATC 2021: scale a step measured on one GPU by the
predicted ratio): with a timing record of the same run on device A, every alternative's time is the
measured step × (its prediction / the prediction of the measured run on A). The timing record has no
per-class times, so the whole step is scaled.

Variants are listed but not predicted: ``channels_last`` removes cuDNN's NCHW ↔ NHWC transposes, which the
time model prices (its ``layout`` part) at a few per cent of a step, while an H200 measured it 25-49% faster
(CHANNELS_LAST_EVIDENCE): NHWC changes more kernels than the transposes, so the row says how much the model
would give and why it is not ranked; ``compile`` (inductor's fused kernels are not in the time model) is
listed with its fused-traffic roofline bound.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from rooflow.conventions import VARIANTS, bytes_model
from rooflow.errors import RooflowError
from rooflow.estimate.calibration import for_device
from rooflow.estimate.predict import predict_memory, predict_seconds
from rooflow.estimate.timemodel import predict_step, step_spread, unpriced_precision
from rooflow.hardware.devices import unknown_device_error
from rooflow.units import positive_number

CHANGES = ("precision", "batch", "variant", "device")
BATCH_FACTORS = (0.5, 2, 4)
RUN_KEYS = ("model", "batch", "precision", "mode")
# Why channels_last is not predicted: tests/data/real/gpu-2026-11-25/h200-variants-b64-bf16.jsonl
CHANNELS_LAST_EVIDENCE = ("H200, bf16, batch 64, 2026-11-25: resnet50 7.77 -> 5.11 ms inference and 30.43 -> 22.72 ms "
                          "training, mobilenet_v2 9.41 -> 4.82 ms inference")

Estimator = Callable[[int, str], Any]  # (batch, precision) -> rooflow.estimate.core.Estimate


def supported_precisions(device) -> list[str]:
    """The precisions a device has a datasheet roof for (fp32 always; tf32, fp16, bf16 where listed)."""
    from rooflow.conventions import PRECISIONS

    return [p for p in PRECISIONS if p == "fp32" or p in device.peak_flops_per_second]


def _batches(batch: int) -> list[int]:
    """The batches to try beside ``batch``: its BATCH_FACTORS multiples a run accepts (1 to MAX_BATCH)."""
    from rooflow.arguments import MAX_BATCH

    return sorted({int(batch * f) for f in BATCH_FACTORS if 1 <= int(batch * f) <= MAX_BATCH} - {batch})


def _largest_fitting_batch(estimate: Estimator, batch: int, precision: str, device) -> int | None:
    """Where ``batch`` does not fit ``device``'s memory: the largest batch under it that does, or 1 where none does
    (its row then says so); None where ``batch`` fits or the device has no memory size. Its memory is fixed plus
    per sample: the batch where the predictions at 1 and at ``batch`` meet the device's memory, then steps of
    1, 2, 4, ... from it while the prediction agrees, then halves (the peak is piecewise linear in the batch: an
    optimizer's or a workspace's peak may take over). ResNet-50 training at 1024 on a T4: 6 estimates, VGG16's
    at 512 on an L4 8."""
    from rooflow.estimate.predict import CONTEXT_BYTES, FIT_MARGIN

    def fits(b: int) -> bool:
        return bool(predict_memory(estimate(b, precision).totals, device)["fits"])

    last = predict_memory(estimate(batch, precision).totals, device)
    if batch <= 1 or last["fits"] is not False:
        return None
    first = predict_memory(estimate(1, precision).totals, device)
    if not first["fits"]:
        return 1
    low, high = 1, batch  # fits, does not
    usable = (last["memory_capacity_bytes"] - CONTEXT_BYTES) / (1 + FIT_MARGIN)
    slope = (last["predicted_memory_bytes"] - first["predicted_memory_bytes"]) / (batch - 1)
    guess = int(1 + (usable - first["predicted_memory_bytes"]) / slope) if slope > 0 else low
    if low < guess < high:
        step, up = 1, fits(guess)
        low, high = (guess, high) if up else (low, guess)
        while high - low > step:  # gallop away from the guess while the prediction agrees with it
            probe = low + step if up else high - step
            if fits(probe) != up:
                low, high = (low, probe) if up else (probe, high)
                break
            low, high = (probe, high) if up else (low, probe)
            step *= 2
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low


def _prediction(estimate, device, calibration, variant: str = "eager") -> dict[str, Any]:
    """Time, range, memory and fit of ``estimate`` on ``device`` (None times where the device has no roofs)."""
    totals = estimate.totals
    row: dict[str, Any] = {"predicted_seconds": None, "predicted_seconds_low": None, "predicted_seconds_high": None,
                           "calibration_source": calibration.source, "modelled": True}
    if unpriced := unpriced_precision(device, totals["precision"]):
        row.update(calibration_source=unpriced, note=unpriced.split(": ", 1)[1])
    elif variant == "compile":
        traffic = bytes_model(variant)
        bound = predict_seconds(estimate.ops, device, totals["precision"], bytes_model=traffic)
        fused = bound.get(f"predicted_seconds_{traffic}")
        row.update(modelled=False, note="not modelled: torch.compile's fused kernels are not in the time model"
                   + ("" if fused is None else f"; its fused-traffic roofline bound is {fused * 1e3:.2f} ms"))
    elif variant == "channels_last" and (device.bandwidth(True) or device.bandwidth(False)):
        eager = predict_step(estimate.ops, totals, device, calibration).seconds
        nhwc = predict_step(estimate.ops, totals, device, calibration.with_(layout_bytes_per_byte={})).seconds
        row.update(modelled=False, note=f"not modelled: the time model's NCHW <-> NHWC transposes alone are "
                                        f"{1 - nhwc / eager:.0%} of this step, far less than measured "
                                        f"({CHANNELS_LAST_EVIDENCE})")
    elif device.bandwidth(True) or device.bandwidth(False):
        step = predict_step(estimate.ops, totals, device, calibration)
        row.update(predicted_seconds=step.seconds, predicted_seconds_low=step.low_seconds,
                   predicted_seconds_high=step.high_seconds, predicted_bound=step.bound,
                   calibration_source=step.calibration_source)  # with its notes, as `rooflow estimate` prints it
    else:
        row["note"] = "no roofs: the device's ceilings were not measured"
    memory = predict_memory(totals, device)
    row.update({k: memory[k] for k in ("predicted_memory_bytes", "fits", "fit_verdict")})
    return row


def _measured_anchor(measured: dict[str, Any], base: dict[str, Any], devices: dict, estimate,
                     calibrations: dict, device_key: str) -> dict[str, Any]:
    """The scale every prediction is multiplied by: measured seconds / predicted seconds of the measured run."""
    source = measured.get("source", "the timing record")
    if not all(k in measured for k in RUN_KEYS):  # another JSON (a ceilings file): not "a run that differs"
        raise RooflowError(f"{source}: not a timing record (no {', '.join(k for k in RUN_KEYS if k not in measured)}): "
                           f"pass the timing.json `rooflow time --output` (the workflow's timing job) wrote")
    different = [k for k in RUN_KEYS if str(measured.get(k)) != str(base[k])]
    # and of the same images, run the same way: a 224-px timing scaled a 112-px what-if, a compiled one the eager run
    size = estimate.totals.get("input_size")
    if measured.get("input_size") is not None and size is not None and str(measured["input_size"]) != str(size):
        different.append("input_size")
        base = {**base, "input_size": size}
    if (measured.get("variant") or "eager") != "eager":
        different.append("variant")
        base = {**base, "variant": "eager"}
    if different:
        raise RooflowError(f"{source}: the measured run differs from the what-if's in "
                           f"{', '.join(f'{k} ({measured.get(k)} vs {base[k]})' for k in different)}: "
                           f"pass a timing record of the same model, batch, precision and mode, eager, at the "
                           f"what-if's input size")
    key = measured.get("device")
    if key is None and measured.get("device_type") == devices[device_key].kind:
        # `rooflow time` names the torch device it ran on, not a catalogue key: the what-if's device is the one
        key = device_key
    if key is None:
        raise RooflowError(f"{source}: it names no catalogue device, and it ran on a {measured.get('device_type')}, "
                           f"not on {device_key} ({devices[device_key].kind}): give --device the device it ran on, "
                           f"or a timing record of {device_key}")
    if key not in devices:
        raise RooflowError(f"{source}: its device '{key}' is not in the catalogue: pass a timing record "
                           f"written by rooflow's timing job on a catalogue device")
    seconds = measured.get("median_seconds")
    if seconds and not positive_number(seconds):  # it scales every prediction: a negative one, negative throughputs
        raise RooflowError(f"{source}: its median_seconds is {seconds!r}, not a positive number of seconds: pass the "
                           f"timing record `rooflow time` wrote, unedited")
    if not seconds or measured.get("status", "ok") != "ok":
        raise RooflowError(f"{source}: it has no median_seconds (status {measured.get('status')}): pass the "
                           f"timing record of a run that completed")
    predicted = _prediction(estimate, devices[key], calibrations[key])["predicted_seconds"]
    if not predicted:
        raise RooflowError(f"{source}: rooflow cannot predict the run on '{key}' (no roofs), so it cannot scale "
                           f"from it: measure the device's ceilings first")
    return {"device": key, "kind": devices[key].kind, "measured_seconds": float(seconds),
            "predicted_seconds": predicted, "scale": float(seconds) / predicted}


def what_if(estimator: Estimator, batch: int, precision: str, mode: str, device_key: str, devices: dict, *,
            ceilings: dict[str, Any] | None = None, measured: dict[str, Any] | None = None,
            variants: tuple[str, ...] = VARIANTS, changes: tuple[str, ...] = CHANGES) -> dict[str, Any]:
    """The run and its alternatives, ranked (module docstring). ``estimator(batch, precision)`` returns the
    estimate of the model at that batch and precision (``mode`` fixed); ``devices`` is the catalogue
    (rooflow.hardware.devices.load_devices); ``ceilings`` the measured ceilings of ``device_key``;
    ``measured`` a timing record of the same run (rooflow.measure.timing), to start from it; ``changes``
    which kinds of alternative to list (CHANGES).

    Returns ``{"run": {...}, "measured_from": anchor or None, "alternatives": [rows, best first]}``; each row
    has ``change`` (run, precision, batch, variant, device), the run's keys, ``variant``, the predicted
    seconds with ``_low``/``_high``, ``images_per_second``, memory and fit, ``calibration_source``, ``basis``
    and, priced, ``cost_per_1000_images_usd``."""
    if device_key not in devices:
        raise unknown_device_error(device_key, devices, "the catalogue")
    if ceilings:  # its measured roofs: a CPU has no others (its what-if predicted nothing with them given)
        devices = {**devices, device_key: copy.copy(devices[device_key]).with_measured(ceilings)}
    device = devices[device_key]
    cache: dict[tuple[int, str], Any] = {}

    def estimate(b: int, p: str):
        if (b, p) not in cache:
            cache[b, p] = estimator(b, p)
        return cache[b, p]

    calibrations: dict[str, Any] = {}

    def calibration(key: str):
        if key not in calibrations:
            calibrations[key] = for_device(devices[key], ceilings if key == device_key else None)
        return calibrations[key]

    base_estimate = estimate(batch, precision)
    model = base_estimate.totals["model"]
    base = {"model": model, "batch": batch, "precision": precision, "mode": mode}
    gpus = [k for k, d in devices.items() if d.is_cuda]
    for key in {device_key, *gpus, *([measured.get("device")] if measured else [])} & set(devices):
        calibration(key)
    anchor = _measured_anchor(measured, base, devices, base_estimate, calibrations, device_key) if measured else None

    candidates: list[tuple[str, str, int, str, str]] = [("run", device_key, batch, precision, "eager")]
    candidates += [("precision", device_key, batch, p, "eager") for p in supported_precisions(device) if p != precision]
    batches = _batches(batch)
    if "batch" in changes and (fitting := _largest_fitting_batch(estimate, batch, precision, device)):
        batches = sorted({*batches, fitting})  # a run that does not fit: the largest batch that does
    candidates += [("batch", device_key, b, precision, "eager") for b in batches]
    candidates += [("variant", device_key, batch, precision, v) for v in variants if v != "eager"]
    candidates += [("device", k, batch, precision, "eager") for k in gpus if k != device_key]

    rows = []
    candidates = [c for c in candidates if c[0] == "run" or c[0] in changes]
    for change, key, b, p, variant in candidates:
        target = devices[key]
        row = {"change": change, "device": key, "model": model, "batch": b, "precision": p, "mode": mode,
               "variant": variant, **_prediction(estimate(b, p), target, calibration(key), variant)}
        if p not in supported_precisions(target) and target.is_cuda:  # a CPU's: no time (_prediction says why)
            row["note"] = f"{target.key} has no {p} roof: its matmuls run at its fp32 roof"
        row["basis"] = "time model"
        # a measurement scales the predictions of its own device, and a GPU's those of the other GPUs (Habitat):
        # a CPU's miss says nothing of a GPU's, nor a GPU's of a CPU's
        if anchor and row["predicted_seconds"] and target.kind == devices[anchor["device"]].kind:
            same = (key, b, p, variant) == (anchor["device"], batch, precision, "eager")
            factor = 1.0 if same else anchor["scale"]
            seconds = anchor["measured_seconds"] if same else row["predicted_seconds"] * factor
            spread = 0.0 if same else step_spread(calibration(key).relative_uncertainty, row.get("predicted_bound"))
            row.update(predicted_seconds=seconds, predicted_seconds_low=seconds * (1 - spread),
                       predicted_seconds_high=seconds * (1 + spread),
                       basis="measured" if same else
                       f"from the measured {anchor['device']} run × predicted ratio")
        seconds = row["predicted_seconds"]
        row["images_per_second"] = b / seconds if seconds else None
        price = getattr(target, "price_per_hour_usd", None)
        row["price_per_hour_usd"] = price
        row["cost_per_1000_images_usd"] = price / 3600.0 * seconds / b * 1000.0 if price and seconds else None
        rows.append(row)
    rows.sort(key=rank_key)
    return {"run": {**base, "device": device_key}, "measured_from": anchor, "alternatives": rows}


def rank_key(row: dict[str, Any]) -> tuple:
    """Predicted throughput, best first; runs that do not fit, then those without a prediction, last."""
    rate = row["images_per_second"]
    rate = None if rate is None or rate != rate else rate  # a table's missing value (NaN) is no prediction
    return (rate is None, row["fits"] is False, -(rate or 0.0))


def format_table(result: dict[str, Any]) -> str:
    """The ranked alternatives as a text table, with what each prediction rests on."""
    run = result["run"]
    lines = [f"What to try next: {run['model']} b{run['batch']} {run['precision']} {run['mode']} on {run['device']} "
             f"(predictions, ranked by predicted images/s)",
             f"{'change':9} {'device':16} {'batch':>5} {'prec':4} {'variant':13} {'pred ms':>9} {'range ms':>17} "
             f"{'img/s':>8} {'mem GB':>7} {'fits':>4} {'$/1k img':>8}"]
    lines.append("-" * len(lines[-1]))
    for row in result["alternatives"]:
        seconds = row["predicted_seconds"]
        span = "-" if seconds is None else \
            f"{row['predicted_seconds_low'] * 1e3:.2f}–{row['predicted_seconds_high'] * 1e3:.2f}"
        cost, rate = row["cost_per_1000_images_usd"], row["images_per_second"]
        fits = {True: "yes", False: "NO", None: "-"}[row["fits"]]
        lines.append(
            f"{row['change']:9} {row['device']:16} {row['batch']:>5} {row['precision']:4} {row['variant']:13} "
            f"{'-' if seconds is None else f'{seconds * 1e3:.2f}':>9} {span:>17} "
            f"{'-' if rate is None else f'{rate:,.0f}':>8} {row['predicted_memory_bytes'] / 1e9:>7.2f} {fits:>4} "
            f"{'-' if cost is None else f'{cost:.4f}':>8}")
    anchor = result.get("measured_from")
    if anchor:
        lines.append(f"Times start from the measured {anchor['device']} run ({anchor['measured_seconds'] * 1e3:.2f} ms; "
                     f"the time model predicted {anchor['predicted_seconds'] * 1e3:.2f} ms): each on a "
                     f"{'GPU' if anchor.get('kind') == 'cuda' else anchor.get('kind', 'device').upper()} is the "
                     f"measured step × its predicted ratio to that run, the others the time model's.")
    for source in sorted({row["calibration_source"] for row in result["alternatives"]}):
        lines.append(f"Calibration: {source}")
    for row in result["alternatives"]:
        if row.get("note"):
            lines.append(f"{row['change']} {row['device']} b{row['batch']} {row['precision']} {row['variant']}: "
                         f"{row['note']}")
    return "\n".join(lines) + "\n"
