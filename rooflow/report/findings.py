"""Checks are records: :class:`Check` (run, check, severity, value, expected, cause, evidence) from the function
that finds it to the summary table, the checks file and the report — never a sentence joined by one function
and split by another.

:func:`run_checks` finds every check that one summary row can tell (a point above its roof, a FLOP gap, a
noisy or throttled timing, a prediction the measurement misses, out of memory, ...). The summary calls it on
each row it builds and renders the records into its readable ``checks`` column; the self-checks step calls it
on the rows of ``results/summary.csv`` (the same function over the same columns: the same records) and adds
the checks that need other files (rooflow.report.checks), then writes them all to ``results/checks/checks.json``,
which the report and ``rooflow checks`` read.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import pandas as pd

from rooflow.conventions import NOISY_SPREAD, PAGE_FAULT_PART, bytes_model
from rooflow.errors import RooflowError
from rooflow.io import read_json, write_json
from rooflow.profilers.reconcile import DEFAULT_TOLERANCE, UNEXPLAINED

RUN_COLUMNS = ["device", "model", "batch", "precision", "mode"]
CHECK_COLUMNS = ["run", *RUN_COLUMNS, "variant", "severity", "check", "value", "expected", "likely_cause",
                 "evidence"]
SEVERITIES = ("error", "warning", "result")

# Measured/estimated FLOPs outside this band need an explanation.
FLOPS_RATIO_BAND = (0.5, 2.0)
# A memory prediction is flagged when the measured steady-state peak is off by more than this share.
MEMORY_BAND = 0.15
# The time model's target band: a host-bound step beyond it but inside its range (which adds the host's run-to-run
# scatter: rooflow.estimate.timemodel.step_spread) is noted as a result, with what carries the difference.
HOST_BOUND_NOTE_BAND = 0.25
# How a time was taken: a step timed here is held to the predicted step; an imported nsys profile's time is the
# sum of its kernels (KERNEL_TIMER), held to the predicted kernel time; a step time a config entry gives ("imported")
# to neither: how it was taken is not known.
TIMED_HERE = ("cuda-events", "perf_counter_ns")
# Fewer timed iterations than this make a "median" one or two samples: one preempted iteration decides it
MIN_TIMED_ITERATIONS = 3
KERNEL_TIMER = "nsys-kernels"
# Time-model classes (rooflow.estimate.timemodel) whose kernels are convolutions and matrix products, beside the
# kernel classes (rooflow.profilers.kernels) of an nsys trace; "kernel gaps" are no kernel's time
PREDICTED_MATMUL_CLASSES = ("matmul", "depthwise", "attention")
MEASURED_MATMUL_CLASSES = ("convolution", "gemm")


@dataclass(frozen=True)
class Check:
    """One failed check. ``cause``: one sentence (what is behind it, or "unexplained"); ``evidence``: the
    numbers behind the cause (kernel lists, per-layer times), folded away in the report until asked for."""

    run: str
    device: str
    model: str
    batch: int
    precision: str
    mode: str
    severity: str
    check: str
    value: str
    expected: str
    cause: str
    evidence: str = ""
    # how the step ran (rooflow.conventions.VARIANTS); "" for a check of the estimate, which every variant shares
    variant: str = "eager"

    def __getitem__(self, column: str) -> Any:
        """A record reads like a row of the checks table: ``check["likely_cause"]``."""
        return self.as_row()[column]

    def as_row(self) -> dict[str, Any]:
        """The row of the checks table (:data:`CHECK_COLUMNS`; the cause under ``likely_cause``)."""
        row = asdict(self)
        row["likely_cause"] = row.pop("cause")
        return {c: row[c] for c in CHECK_COLUMNS}


def variant_label(row: Any) -> str:
    """' channels_last' or ' compile' after a run's label; nothing for an eager run (or a row without one)."""
    variant = row.get("variant") if hasattr(row, "get") else None
    return f" {variant}" if isinstance(variant, str) and variant not in ("", "eager") else ""


def run_label(row: Any) -> str:
    """'cpu resnet18 b8 fp32 training' (then its variant unless eager): the run a check concerns, as the report
    shows it."""
    device = row.get("device") if hasattr(row, "get") else row["device"]
    parts = [device] if isinstance(device, str) and device else []
    return " ".join(parts + [str(row["model"]), f"b{int(row['batch'])}", str(row["precision"]),
                             str(row["mode"])]) + variant_label(row)


def for_run(run: Any, severity: str, check: str, value: str, expected: str, cause: str, evidence: str = "",
            label: str | None = None) -> Check:
    """A :class:`Check` about ``run`` (a summary row or a mapping with the run's keys)."""
    keys = {k: run.get(k) for k in RUN_COLUMNS}
    keys["device"] = keys["device"] if isinstance(keys["device"], str) else ""
    keys["batch"] = int(keys["batch"])
    keys["variant"] = _text(run.get("variant")) or ("eager" if keys["device"] else "")
    return Check(run=label or run_label(keys), severity=severity, check=check, value=value, expected=expected,
                 cause=cause, evidence=evidence, **keys)


def render(checks: list[Check]) -> str:
    """The summary's readable ``checks`` column: one 'check: value (expected ...): cause' per record, ' | '
    between them. For people only: programs read the records (:func:`read_checks`)."""
    return " | ".join(f"{c.check}: {c.value} (expected {c.expected}): {c.cause}" for c in checks)


def checks_frame(checks: list[Check]) -> pd.DataFrame:
    return pd.DataFrame([c.as_row() for c in checks], columns=CHECK_COLUMNS)


def from_frame(frame: pd.DataFrame) -> list[Check]:
    names = {f.name for f in fields(Check)}
    out = []
    for row in frame.to_dict("records"):
        row = {("cause" if k == "likely_cause" else k): ("" if isinstance(v, float) and math.isnan(v) else v)
               for k, v in row.items()}
        row.setdefault("variant", "eager" if row.get("device") else "")  # a table written before variants
        out.append(Check(**{k: v for k, v in row.items() if k in names}))
    return out


def write_checks(path: str | Path, checks: list[Check]) -> None:
    write_json(path, [asdict(c) for c in checks])


def read_checks(path: str | Path) -> list[Check]:
    data = read_json(path)
    if not isinstance(data, list):  # a JSON object iterated as no records: "all self-checks passed"
        raise RooflowError(f"{path}: not a checks file written by rooflow (a JSON {type(data).__name__}, not a list of "
                           "checks); rerun the check_runs step (or `rooflow checks` without --records)")
    try:
        return [Check(**record) for record in data]
    except TypeError as error:
        raise RooflowError(f"{path}: not a checks file written by rooflow ({error}); rerun the check_runs step "
                           "(or `rooflow checks` without --records)") from None


def _finite(value: Any) -> bool:
    try:
        return value is not None and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _count(value: Any) -> str:
    return str(int(value)) if _finite(value) else "?"


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def estimated_bytes(run: Any) -> Any:
    """The estimate's DRAM bytes for how the run executed (the summary's ``estimated_bytes``: unfused for an
    eager step, fusion-aware for a compiled one); a summary written before that column: the fusion-aware
    bytes, else the floor."""
    for column in ("estimated_bytes", "estimated_fused_bytes", "estimated_min_bytes"):
        if _finite(run.get(column)):
            return run.get(column)
    return None


def estimate_percent_of_roof(run: Any, tf32: bool = False) -> float | None:
    """Where a run's point comes from measured FLOPs or bytes: the ESTIMATE's point (estimated FLOPs over
    the estimate's bytes for the run's variant, at the measured time) as a percentage of the attainable
    FLOP/s of the run's roof (``tf32``: of the device's TF32 roof, where an FP32 profile's kernels ran TF32).
    None where the point is the estimate already, or a value is missing."""
    if run.get("flops_source") == "estimate" and str(run.get("bytes_source", "")).startswith("estimate"):
        return None
    flops, seconds = run.get("estimated_flops"), run.get("measured_seconds")
    nbytes = estimated_bytes(run)
    peak = run.get("tf32_peak_flops_per_second" if tf32 else "peak_flops_per_second")
    bandwidth = run.get("bandwidth_bytes_per_second")
    if not all(_finite(v) and v > 0 for v in (flops, seconds, nbytes, peak, bandwidth)):
        return None
    attainable = min(peak, bandwidth * flops / nbytes)
    return 100 * (flops / seconds) / attainable


# Words an explanation uses for each side (rooflow's reconciliation names the side; older or imported texts
# are read by what they blame).
_MATMUL_WORDS = r"tensor[- ]core|winograd|\bfft\b|gemm|tile|im2col|split-k|channel padding|convolution algorithm"
_OTHER_WORDS = r"elementwise|normali[sz]ation|pooling|softmax|optimizer"


def claimed_side(run: Any) -> str | None:
    """The side (``convolution/matmul`` or ``other ops``) a run's reconciliation says carries its FLOP gap."""
    import re

    from rooflow.profilers.reconcile import MATMUL_SIDE, OTHER_SIDE

    side = run.get("reconciliation_side")
    if isinstance(side, str) and side in (MATMUL_SIDE, OTHER_SIDE):
        return side
    text = run.get("reconciliation")
    if not isinstance(text, str) or not text.strip() or text.startswith(UNEXPLAINED):
        return None
    if "convolution/matmul kernels carry the gap" in text:
        return MATMUL_SIDE
    if "other kernels carry the gap" in text:
        return OTHER_SIDE
    matmul = len(re.findall(_MATMUL_WORDS, text, re.IGNORECASE))
    other = len(re.findall(_OTHER_WORDS, text, re.IGNORECASE))
    if matmul == other:
        return None
    return MATMUL_SIDE if matmul > other else OTHER_SIDE


def explanation_contradiction(run: Any) -> tuple[str, str, str] | None:
    """(value, side claimed, cause) where the explanation blames a side the per-class FLOPs clear: the gap
    (measured − estimated) is carried by the side whose difference has its sign and is the larger."""
    from rooflow.profilers.reconcile import MATMUL_SIDE, OTHER_SIDE

    claimed = claimed_side(run)
    values = [run.get(k) for k in ("measured_flops", "estimated_flops", "measured_matmul_flops",
                                   "measured_other_flops", "estimated_other_flops")]
    if claimed is None or not all(_finite(v) for v in values):
        return None
    measured, estimated, matmul, other, estimated_other = (float(v) for v in values)
    gap = measured - estimated
    differences = {MATMUL_SIDE: matmul - (estimated - estimated_other), OTHER_SIDE: other - estimated_other}
    same_sign = [side for side, d in differences.items() if d * gap > 0] or list(differences)
    carrier = max(same_sign, key=lambda side: abs(differences[side]))
    if carrier == claimed:
        return None
    value = (f"{carrier} {differences[carrier] / 1e9:+.4g} GFLOP, {claimed} {differences[claimed] / 1e9:+.4g} "
             f"GFLOP of a {gap / 1e9:+.4g} GFLOP gap")
    return value, claimed, (f"the reconciliation blames the {claimed} side, but the per-class counts put the gap "
                            f"on the {carrier} side: the explanation is wrong (an old or imported text, or a "
                            f"reconciliation bug)")


def _json(run: Any, column: str) -> dict[str, float]:
    try:
        value = json.loads(run.get(column) or "{}")
    except (TypeError, json.JSONDecodeError):
        return {}
    return {str(k): float(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _miss_carriers(run: Any, limit: int = 2) -> str | None:
    """Which layer types carry a time prediction's miss, from the measured time per layer type (the timing job's
    profiled iteration: kernel time on a GPU, op time on a CPU) against the predicted one: the largest
    differences with the sign of the miss. None where either side was not recorded."""
    measured, predicted = _json(run, "measured_seconds_by_layer_type"), _json(run, "predicted_seconds_by_layer_type")
    ratio = run.get("measured_over_predicted")
    if not measured or not predicted or not _finite(ratio):
        return None
    slower = ratio > 1
    kind = "kernel" if run.get("device") != "cpu" else "op"
    profiled, modelled = sum(measured.values()), sum(predicted.values())
    if modelled > 0 and profiled != modelled and (profiled > modelled) != slower:
        # the profiled iteration ran the other way from the timed ones: its layers cannot say what carries the miss
        return (f"the profiled iteration does not reproduce the miss: its layers' {kind} time summed "
                f"{profiled * 1e3:.3g} ms against {modelled * 1e3:.3g} ms predicted ({profiled / modelled:.2f}x), "
                f"where the timed step measured {ratio:.2f}x its prediction: which layers carry it is unexplained")
    differences = {name: measured.get(name, 0.0) - predicted.get(name, 0.0) for name in set(measured) | set(predicted)}
    carriers = sorted((kv for kv in differences.items() if (kv[1] > 0) == slower and kv[1]),
                      key=lambda kv: -abs(kv[1]))[:limit]
    if not carriers:
        return ("no layer type's measured time exceeds its prediction in the miss's direction: the miss is outside "
                "the layers' kernels (the host, launch gaps), or unexplained")
    by_type = (f"by layer type, measured vs predicted {kind} time in the profiled iteration: " + ", ".join(
                   f"{name} {measured.get(name, 0.0) * 1e3:.3g} vs {predicted.get(name, 0.0) * 1e3:.3g} ms "
                   f"({difference * 1e3:+.3g} ms)" for name, difference in carriers))
    layers = _layer_carriers(run, slower, limit)
    return f"{by_type}; {layers}" if layers else by_type


def _layer_carriers(run: Any, slower: bool, limit: int) -> str | None:
    """The layers whose measured time in the profiled iteration departs most from their prediction in the miss's
    direction (the summary's ``layer_departures``), a slower one with the page faults its forward took there
    (``forward_faults_by_layer``); None where not recorded or none does."""
    try:
        departures = json.loads(run.get("layer_departures") or "[]")
    except (TypeError, json.JSONDecodeError):
        return None
    picked = sorted(((layer, kind, measured, predicted) for layer, kind, measured, predicted in departures
                     if (measured > predicted) == slower and measured != predicted),
                    key=lambda d: -abs(d[2] - d[3]))[:limit]
    if not picked:
        return None
    # a slower layer's page faults in that iteration's forward (rooflow.measure.optime.module_ranges)
    faults = _json(run, "forward_faults_by_layer") if slower else {}
    return "by layer: " + ", ".join(
        f"{layer} ({kind}) {measured * 1e3:.3g} vs {predicted * 1e3:.3g} ms"
        + (f" ({faults[layer]:,.0f} page faults in its forward)" if faults.get(layer) else "")
        for layer, kind, measured, predicted in picked)


def _host_twin(run: Any) -> str:
    """A host-bound step's twin as evidence (rooflow.report.summary._host_twins): its FP32/TF32 twin dispatches the
    same ops, so their measured ratio is its host's spread between runs; nothing where none was timed."""
    twin, seconds = run.get("host_twin_seconds"), run.get("measured_seconds")
    if not _finite(twin) or not _finite(seconds) or seconds <= 0:
        return ""
    return (f"; its {run.get('host_twin_precision')} twin, the same host work (TF32 changes only the kernels) and "
            f"host-bound too, measured {twin * 1e3:.3g} ms: {twin / seconds:.2f}x this step on the same machine")


def _phase_carriers(run: Any) -> str | None:
    """A training step's phases as the timing job's clock split it (forward with the loss, backward, optimizer)
    against the time model's split of its prediction, the phase that departs most first. None where either
    side was not recorded."""
    measured = {"forward": run.get("forward_seconds"), "backward": run.get("backward_seconds")}
    predicted = {"forward": run.get("predicted_forward_seconds"), "backward": run.get("predicted_backward_seconds")}
    step, predicted_step = run.get("measured_seconds"), run.get("predicted_seconds")
    if run.get("mode") != "training" or not all(_finite(v) for v in [*measured.values(), *predicted.values(),
                                                                        step, predicted_step]):
        return None
    measured["optimizer"] = step - measured["forward"] - measured["backward"]
    predicted["optimizer"] = predicted_step - predicted["forward"] - predicted["backward"]
    order = sorted(measured, key=lambda phase: -abs(measured[phase] - predicted[phase]))
    return "by phase, measured vs predicted: " + ", ".join(
        f"{phase} {measured[phase] * 1e3:.3g} vs {predicted[phase] * 1e3:.3g} ms" for phase in order)


# How to stop a CPU step's page faults (tests/measure/test_faults.py checks each on a real network)
CACHING_ALLOCATOR_FIX = ("a caching allocator removes them (LD_PRELOAD jemalloc or tcmalloc, or MALLOC_MMAP_THRESHOLD_ "
                         "past the largest tensor together with MALLOC_TRIM_THRESHOLD_: the trim threshold alone "
                         "makes more)")


def _page_faults(run: Any) -> str | None:
    """A step measured slower than its prediction that mapped pages afresh in every timed iteration (the summary's
    ``minor_faults``, rooflow.measure.faults): how many, their seconds at the cost per byte its calibration measured,
    less those the model prices (its tensors of 32 MiB or more: the ``page faults`` part), and that rest's share of
    the excess — the allocator's time, not the ops' — with how to remove it. None where the step was not slower,
    took none, or no cost was measured (a GPU)."""
    faults, seconds, size = run.get("minor_faults"), run.get("minor_fault_seconds"), run.get("minor_fault_bytes")
    measured, predicted = run.get("measured_seconds"), run.get("predicted_seconds")
    if not all(_finite(v) for v in (faults, seconds, size, measured, predicted)) or faults <= 0 \
            or measured <= predicted:
        return None
    priced = _json(run, "predicted_seconds_by_class").get(PAGE_FAULT_PART, 0.0)
    unpriced, excess = max(seconds - priced, 0.0), measured - predicted
    in_model = (f"{priced * 1e3:.3g} ms of it in the prediction (its tensors of 32 MiB or more), the other "
                f"{unpriced * 1e3:.3g} ms" if priced else "none of it in the prediction")
    return (f"each timed iteration took {faults:,.0f} minor page faults ({size / 1e6:.3g} MB mapped afresh), "
            f"{seconds * 1e3:.3g} ms at the cost per byte its calibration measured, {in_model}: "
            f"{min(unpriced / excess, 1.0):.0%} of the {excess * 1e3:.3g} ms over the prediction (without them "
            f"{(measured - unpriced) / predicted:.2f}x it) — glibc's malloc giving freed tensors' memory back to the "
            f"OS and faulting it in again, the allocator's time, not the ops'; {CACHING_ALLOCATOR_FIX}")


def _predicted_time_carrier(run: Any) -> str:
    """What carries a time prediction's miss: whether the model has the step host-bound, the page faults of a step
    measured slower (:func:`_page_faults`), the phases of a training step against their prediction
    (:func:`_phase_carriers`), and the layer types whose measured time departs from their prediction
    (:func:`_miss_carriers`), where measured; else what carries most of the predicted time: the two largest op
    classes."""
    carriers = "; ".join(filter(None, [_page_faults(run), _phase_carriers(run), _miss_carriers(run)])) or None
    host, device = run.get("predicted_host_seconds"), run.get("predicted_device_seconds")
    if run.get("predicted_bound") == "host" and _finite(host) and _finite(device):
        bound = (f"the step is host-bound in the model ({host * 1e3:.3g} ms of host work for {device * 1e3:.3g} ms "
                 f"of kernels)") + _host_twin(run)
        return f"{bound}; {carriers}" if carriers else bound
    if carriers:
        return carriers
    try:
        by_class = json.loads(run.get("predicted_seconds_by_class") or "{}")
    except (TypeError, json.JSONDecodeError):
        by_class = {}
    top = sorted(by_class.items(), key=lambda kv: -kv[1])[:2]
    if not top:
        return "the prediction's split by op class is not recorded"
    return "most predicted time is " + " and ".join(f"{name} ({seconds * 1e3:.3g} ms)" for name, seconds in top)


def _band_words(low: float, high: float, predicted: float) -> str:
    """A prediction's band as a check says it: ±x%, or −x% / +y% where the model names a doubt that widens one
    side (the calibration source says which)."""
    below, above = 100 * (1 - low / predicted), 100 * (high / predicted - 1)
    return f"±{above:.0f}%" if round(below) == round(above) else f"−{below:.0f}% / +{above:.0f}%"


def _kernel_sides(run: Any) -> str | None:
    """An nsys profile's kernel time against the predicted kernel time, convolution/matmul kernels and the others
    apart; None where either split is not recorded."""
    measured, predicted = _json(run, "measured_kernel_seconds_by_class"), _json(run, "predicted_seconds_by_class")
    if not measured or not predicted:
        return None
    sides = {"convolution/matmul kernels": (
        sum(v for k, v in measured.items() if k in MEASURED_MATMUL_CLASSES),
        sum(v for k, v in predicted.items() if k in PREDICTED_MATMUL_CLASSES)),
        "other kernels": (sum(v for k, v in measured.items() if k not in MEASURED_MATMUL_CLASSES),
                          sum(v for k, v in predicted.items() if k not in PREDICTED_MATMUL_CLASSES
                              and k != "kernel gaps"))}
    order = sorted(sides, key=lambda side: -abs(sides[side][0] - sides[side][1]))
    return "by kernel class, measured vs predicted: " + ", ".join(
        f"{side} {sides[side][0] * 1e3:.3g} vs {sides[side][1] * 1e3:.3g} ms" for side in order)


def held_prediction(run: Any) -> tuple[Any, Any, Any]:
    """The predicted seconds a run's measured time is held to, with the low and high ends of its band: the step's,
    or for an imported profile's kernel sum (:data:`KERNEL_TIMER`) the predicted kernel time, the step's band
    scaled to it."""
    step, low, high = (run.get(k) for k in ("predicted_seconds", "predicted_seconds_low", "predicted_seconds_high"))
    device = run.get("predicted_device_seconds")
    if run.get("timer") == KERNEL_TIMER and _finite(device) and _finite(step) and step > 0:
        return device, *(end * device / step if _finite(end) else end for end in (low, high))
    return step, low, high


def _kernel_time_check(run: Any) -> Check | None:
    """An imported nsys profile's kernel time (:data:`KERNEL_TIMER`) outside the band of the predicted kernel time
    (the step's band, scaled). Its cause, where its kernels show it, is TF32: an FP32 profile whose PyTorch ran
    convolutions (products) on TF32 tensor cores, priced as it ran (``predicted_tf32_device_seconds``,
    rooflow.report.summary._as_profiled); then which side of the kernels carries the miss."""
    seconds = run.get("measured_seconds")
    device, low, high = held_prediction(run)
    if run.get("timer") != KERNEL_TIMER or not all(_finite(v) and v > 0 for v in (seconds, device, low, high)):
        return None
    if low <= seconds <= high:
        return None
    band = _band_words(low, high, device)
    causes, explained = [], False
    as_run, names = run.get("predicted_tf32_device_seconds"), _text(run.get("tensor_core_kernels"))
    if _finite(as_run) and as_run > 0 and names:
        explained = inside = low * as_run / device <= seconds <= high * as_run / device
        causes.append(f"the FP32 profile's kernels ran TF32 on tensor cores ({names}): its PyTorch let cuDNN (and "
                      f"cuBLAS before 1.12) take TF32 for FP32 tensors, its default; priced as it ran, the kernels "
                      f"take {as_run * 1e3:.3g} ms (measured/predicted {seconds / as_run:.2f}, "
                      f"{'inside' if inside else 'still outside'} the band): import it as precision tf32, or "
                      f"profile with torch.backends.cudnn.allow_tf32 = False")
    sides = None if explained else _kernel_sides(run)  # against the prediction as configured
    if sides:
        causes.append(sides)
    if not causes:
        causes.append("unexplained: the profile's kernel time by class is not recorded")
    return for_run(run, "warning", "predicted vs measured kernel time",
                   f"{seconds * 1e3:.3g} ms (measured/predicted {seconds / device:.2f})", f"{low * 1e3:.3g}–{high * 1e3:.3g} ms",
                   f"kernel time of the imported profile outside the model's {band} band "
                   f"({run.get('calibration_source')}); " + "; ".join(causes))


def _roof_checks(run: Any) -> list[Check]:
    out = []
    percent = run.get("percent_of_roofline")
    if _finite(percent) and percent > 100:
        attainable = run.get("attainable_flops_per_second")
        roof = (f"{attainable / 1e12:.3g} TFLOP/s of the {run.get('roof_source')} {run.get('precision')} roof"
                if _finite(attainable) else "FLOP/s")
        source = str(run.get("bytes_source", ""))
        traffic = (f"; or, as its bytes are the estimate's {source.removeprefix('estimate-')} traffic, the caches "
                   "kept part of that traffic off DRAM, so the point's true intensity lies further right"
                   if source.startswith("estimate") and run.get("bound") == "memory-bound" else "")
        out.append(for_run(run, "error", "above the roof", f"{percent:.0f}% of the attainable {roof}", "≤ 100%",
                           "a wrong peak (a sparse headline?), over-counted FLOPs, an under-measured time, or FLOPs "
                           "of a precision this roof does not cover" + traffic))
    threads, roof_threads = run.get("threads"), run.get("roof_threads")
    if _finite(threads) and _finite(roof_threads) and int(threads) != int(roof_threads):
        out.append(for_run(run, "warning", "roofs of other threads",
                           f"timed with {int(threads)} thread{'s' * (int(threads) != 1)}, its CPU roofs measured "
                           f"with {int(roof_threads)}",
                           "the same threads", "the ceilings job ran with another core count than this timing "
                           "(an earlier run's --cores, or another machine), so its roofs are not this run's and "
                           "its % of roof compares it with that many cores: re-measure them with "
                           f"`snakemake --forcerun measure_ceilings --cores {int(threads)}`"))
    measured_percent = run.get("percent_of_measured_roofline")
    if run.get("roof_source") == "datasheet" and _finite(measured_percent) and measured_percent > 100:
        out.append(for_run(run, "warning", "above the measured roof",
                           f"{measured_percent:.0f}% of the measured-roof attainable FLOP/s", "≤ 100%",
                           "the ceiling microbenchmark reached less than this run (too small a problem, clocks "
                           "throttled while it ran), or this run's FLOPs are over-counted"))
    ratio = run.get("flops_ratio")
    explanation = _text(run.get("reconciliation"))
    unexplained = bool(explanation) and explanation.startswith(UNEXPLAINED)
    estimate_percent = estimate_percent_of_roof(run)
    if estimate_percent is not None and estimate_percent > 100:
        names, tf32_percent = _text(run.get("tensor_core_kernels")), estimate_percent_of_roof(run, tf32=True)
        counted = (f"; the FLOP counters saw {ratio:.2f}× the estimated FLOPs, as they cannot see tensor-core work"
                   if run.get("tensor_flops_unseen") and _finite(ratio) else "")
        if names and tf32_percent is not None and tf32_percent <= 100:
            # the kernels' names: the work ran on the TF32 units, whose roof covers it
            cause = (f"its FP32 kernels ran TF32 on tensor cores ({names}; PyTorch's default for cuDNN), so the "
                     f"FP32 roof does not bound them: against the TF32 roof "
                     f"({run['tf32_peak_flops_per_second'] / 1e12:.3g} TFLOP/s) the estimate's point is at "
                     f"{tf32_percent:.0f}%{counted}")
        elif _finite(ratio) and ratio < 1 and explanation and not unexplained:
            # the kernels' own evidence: fewer FLOPs done (Winograd, FFT) or work the counters cannot see
            cause = (f"the counters saw {ratio:.2f}× the estimated FLOPs, and the FLOP reconciliation says why: "
                     f"{explanation}")
        else:
            cause = (f"the step ran faster than the {run.get('precision')} roof allows for the estimated work: it "
                     "ran at a faster precision than the roof assumes (cuDNN runs FP32 convolutions in TF32 on "
                     "tensor cores by default on Ampere and newer), its time is under-measured (kernel time of one "
                     "iteration without host gaps), or the estimate over-counts; the measured point may sit under "
                     "its roof only because the counters missed that work")
        out.append(for_run(run, "warning", "estimate above the roof",
                           f"estimated FLOPs / measured time = {estimate_percent:.0f}% of the attainable FLOP/s",
                           "≤ 100%", cause))
    return out


def _flop_checks(run: Any) -> list[Check]:
    out = []
    low, high = FLOPS_RATIO_BAND
    ratio = run.get("flops_ratio")
    explanation = _text(run.get("reconciliation"))
    unexplained = bool(explanation) and explanation.startswith(UNEXPLAINED)
    counts = [run.get(k) for k in ("measured_matmul_flops", "measured_other_flops", "estimated_matmul_flops",
                                   "estimated_other_flops")]
    evidence = (f"convolution/matmul kernels {counts[0] / 1e9:.4g} GFLOP measured vs {counts[2] / 1e9:.4g} estimated (all phases); other kernels "
                f"{counts[1] / 1e9:.4g} vs {counts[3] / 1e9:.4g}"
                if all(_finite(v) for v in counts) else "")
    if _finite(ratio) and not low <= ratio <= high:
        explained = bool(explanation) and not unexplained
        out.append(for_run(run, "warning" if explained else "error", "measured/estimated FLOPs", f"{ratio:.2f}",
                           f"[{low}, {high}]",
                           explanation if explained or unexplained else
                           "no explanation found: tensor-core metrics not collected (FLOPs too low), a precision "
                           "the counters miss, or kernels outside the profiled iteration", evidence))
    elif _finite(ratio) and unexplained:
        out.append(for_run(run, "error", "unexplained FLOP gap", f"measured/estimated FLOPs {ratio:.2f}",
                           "within ±20%, or a gap the kernels explain", explanation, evidence))
    contradiction = explanation_contradiction(run)
    if contradiction:
        out.append(for_run(run, "error", "explanation contradicts the per-class counts", contradiction[0],
                           f"the gap on the side the explanation blames ({contradiction[1]})", contradiction[2]))
    bytes_cause = _text(run.get("bytes_reconciliation"))
    if bytes_cause and _finite(run.get("bytes_ratio")):
        # held to the estimate of the way the step ran (rooflow.profilers.reconcile): ratio to that estimate
        band = (f"within ±{100 * DEFAULT_TOLERANCE:.0f}% of the fusion-aware estimate"
                if bytes_model(_text(run.get("variant"))) == "fused" else
                f"between the floor and the unfused estimate, ±{100 * DEFAULT_TOLERANCE:.0f}%")
        out.append(for_run(run, "error" if bytes_cause.startswith(UNEXPLAINED) else "warning",
                           "measured/estimated DRAM bytes", f"{float(run['bytes_ratio']):.2f}", band, bytes_cause))
    mismatch = _text(run.get("kernel_mismatch"))
    if mismatch:
        differ = str(run.get("kernel_algorithms_differ")).lower() in ("true", "1", "1.0")
        out.append(for_run(run, "error" if differ else "warning", "timed vs profiled kernels",
                           f"{_count(run.get('timed_kernels'))} timed vs {_count(run.get('profiled_kernels'))} "
                           f"profiled kernels", "the same kernels in both processes",
                           mismatch + (": another convolution/GEMM algorithm ran in one of them (cuDNN autotuning "
                                       "per process, memory pressure), so FLOPs and time come from different kernels"
                                       if differ else
                                       ": the convolution/GEMM kernels match; the difference is in other kernels")))
    return out


# Beside its slowest iterations against its fastest, other processes' work that names the machine's load as a noisy
# timing's cause (cores' worth), or a hypervisor's steal (share of the machine's CPU time); and the mean load that
# names it where the iterations are too short to tell slow from fast (a tick is 10 ms)
NOISE_LOAD_CORES = 0.25
NOISE_STEAL_SHARE = 0.05
# On a CPU, the share of the slow iterations' extra time their threads spent on the CPU above which the step ran
# slower there (rather than waited off it)
ON_CPU_SHARE = 0.5
# ...and the share of their extra CPU time in the kernel, beside this many times the fast ones' page faults, above
# which the faults carry it
KERNEL_SHARE = 0.5
FAULTS_RISE = 1.25


def _noise_cause(run: Any) -> str:
    """A noisy timing's cause, read from the machine's load beside its iterations (the timing job's
    ``load_during_timing``: rooflow.measure.load), or "unexplained" where that load does not account for it."""
    from rooflow.measure.load import other_cores, steal_share

    fix = "rerun on an idle node (on SLURM, an exclusive one)"
    # what the timing job does not record, and what the spread means for the number reported
    unrecorded = ("not recorded: the CPU's clock, the caches and memory another guest of the same host shares, a "
                  "hypervisor's pauses it does not report as steal" if run.get("device_kind") == "cpu" else
                  "a GPU's clock changes show in the throttled check, the host's own stalls are not recorded")
    unrecorded += "; the median stands, but runs that differ by less than the spread differ by noise"
    try:
        load = json.loads(run.get("load_during_timing") or "null")
    except (TypeError, json.JSONDecodeError):
        load = None
    if not isinstance(load, dict) or not load.get("wall_seconds"):
        return (f"unexplained: the machine's load while it was timed was not recorded (no /proc/stat, or a timing "
                f"from before rooflow recorded it); {fix}")
    cores = int(load.get("cores") or 1)
    mean = f"{other_cores(load):.2f} of its {cores} cores"
    stolen = steal_share(load, cores)
    steal = f", a hypervisor {100 * stolen:.0f}% of its CPU time" if stolen >= 0.005 else ""
    if load.get("readable"):
        slow, fast = load["slowest"], load["fastest"]
        more = other_cores(slow) - other_cores(fast)
        more_steal = steal_share(slow, cores) - steal_share(fast, cores)
        split = (f"other processes ran on {other_cores(slow):.2f} cores beside its slowest {slow['iterations']} "
                 f"iterations and {other_cores(fast):.2f} beside its fastest {fast['iterations']}"
                 + (f", a hypervisor took {100 * steal_share(slow, cores):.0f}% and "
                    f"{100 * steal_share(fast, cores):.0f}% of the machine's CPU time"
                    if max(steal_share(slow, cores), steal_share(fast, cores)) >= 0.005 else ""))
        if more >= NOISE_LOAD_CORES or more_steal >= NOISE_STEAL_SHARE:
            return f"other load on the machine: {split}; {fix}"
        # what "does not account for it" means: under the thresholds, not necessarily nothing
        split += (": no more beside the slow ones" if more < 0.05 and more_steal < 0.005 else
                  f": less than {NOISE_LOAD_CORES:g} core of other work and {100 * NOISE_STEAL_SHARE:.0f}% steal "
                  f"more beside the slow ones")
        where = _on_or_off_cpu(run, slow, fast)
        if where:
            return f"{where}; other load does not account for it ({split}); {unrecorded}"
        return f"unexplained: the machine's load does not account for it ({split}); {unrecorded}"
    if other_cores(load) >= NOISE_LOAD_CORES or stolen >= NOISE_STEAL_SHARE:
        return (f"other load on the machine: other processes ran on {mean} on average while it was timed{steal} "
                f"(its iterations too short to tell whether the slow ones had more); {fix}")
    short = (f"other processes ran on only {mean} on average while it was timed{steal}, and its iterations are too "
             f"short to tell whether the slow ones had more")
    # the job's own CPU time is counted to the microsecond, not in ticks: it splits short iterations too
    where = _on_or_off_cpu(run, load["slowest"], load["fastest"]) if "slowest" in load else None
    if where:
        return f"{where}; {short}; {unrecorded}"
    return f"unexplained: {short}; {unrecorded}"


def _on_or_off_cpu(run: Any, slow: dict[str, Any], fast: dict[str, Any]) -> str | None:
    """On a CPU, where the slow iterations' extra time went, read from the process's own CPU time beside them
    (rooflow.measure.load.on_cpu_share): waiting off the CPU, or more CPU time — and of that, the kernel's
    share with the page faults beside it, which names the faults where they carry most of it. None on a GPU (the
    host's CPU time is not the kernels') or where the timing did not record it."""
    from rooflow.measure.load import on_cpu_share, own_cores

    share = on_cpu_share(slow, fast) if run.get("device_kind") == "cpu" else None
    if share is None:
        return None

    def each(part, key):
        return part[key] / part["iterations"]

    def ms(seconds):
        return (f"{1e3 * seconds:,.0f}" if seconds >= 0.1 else f"{1e3 * seconds:.3g}" if seconds >= 1e-4
                else "under 0.1")

    cpu = each(slow, "own_cpu_seconds"), each(fast, "own_cpu_seconds")
    kernel, faults, kernel_share = "", None, 0.0
    if "own_system_seconds" in slow and "own_system_seconds" in fast:
        system = each(slow, "own_system_seconds"), each(fast, "own_system_seconds")
        if "minor_faults" in slow and "minor_faults" in fast:
            faults = each(slow, "minor_faults"), each(fast, "minor_faults")
        kernel = (f" ({ms(system[0])} and {ms(system[1])} ms of it in the kernel"
                  + (f", beside {faults[0]:,.0f} and {faults[1]:,.0f} page faults" if faults else "") + ")")
        kernel_share = (system[0] - system[1]) / (cpu[0] - cpu[1]) if cpu[0] > cpu[1] else 0.0
    per = (f"its slowest {slow['iterations']} iterations took {ms(cpu[0])} ms of CPU time each against {ms(cpu[1])} "
           f"ms in its fastest {fast['iterations']}{kernel}, its threads busy on {own_cores(slow):.2f} and "
           f"{own_cores(fast):.2f} cores: {100 * share:.0f}% of their extra time on the CPU")
    if share < ON_CPU_SHARE:
        return f"unexplained waiting: {per}, so the step waited off the CPU for most of it"
    if faults and faults[0] > 0 and kernel_share >= KERNEL_SHARE:
        if not faults[1]:  # the fastest iterations faulted no page in: no ratio (it divided by zero)
            which = (f"with {faults[0]:,.0f} page faults each where the fastest had none — the allocator mapping "
                     f"memory afresh in some iterations and not in others")
        elif faults[0] >= FAULTS_RISE * faults[1]:
            which = (f"with {faults[0] / faults[1]:.2f}x the page faults — the allocator mapping memory afresh in "
                     f"some iterations more than in others")
        else:
            which = (f"beside much the same page faults, {1e6 * system[0] / faults[0]:.3g} µs of kernel time a "
                     f"fault against {1e6 * system[1] / faults[1]:.3g} (what slowed the kernel's work is not "
                     f"recorded)")
        return (f"the kernel's memory mapping: {per}; {100 * kernel_share:.0f}% of the extra CPU time in the kernel, "
                f"{which}; {CACHING_ALLOCATOR_FIX}, with the mapping behind them and the time it varies by")
    return f"unexplained slowness on the CPU: {per}, so the step ran slower rather than waiting"


def _percent_beyond(value: float, limit: float) -> str:
    """``value`` as a percentage with the digits that show it beyond ``limit`` (5.006% against a 5% limit printed
    as "5.0%", which read as inside it)."""
    for digits in range(1, 5):
        shown = f"{100 * value:.{digits}f}"
        if float(shown) != round(100 * limit, digits):
            return f"{shown}%"
    return f"{100 * value:.4g}%"


def _timing_checks(run: Any) -> list[Check]:
    out = []
    spread = run.get("seconds_spread")
    if _finite(spread) and spread > NOISY_SPREAD:
        rounds = run.get("timing_rounds")
        after = f" after {int(rounds)} round{'s' if int(rounds) > 1 else ''}" if _finite(rounds) else ""
        out.append(for_run(run, "warning", "noisy", f"spread {_percent_beyond(spread, NOISY_SPREAD)} of the median{after}",
                           f"≤ {100 * NOISY_SPREAD:.0f}%", _noise_cause(run)))
    timed, warmup = run.get("timed_iterations"), run.get("warmup_iterations")
    if run.get("timer") in TIMED_HERE and _finite(timed) and timed < MIN_TIMED_ITERATIONS:
        out.append(for_run(run, "warning", "too few timed iterations", f"{int(timed)} timed",
                           f"≥ {MIN_TIMED_ITERATIONS}", "its median is of so few samples that one slow iteration "
                           "(another process, a page fault) is the result, and its spread says nothing: raise "
                           "profiling.timed_iterations (`rooflow time --iterations`)"))
    if run.get("timer") in TIMED_HERE and run.get("device_kind") == "cuda" and _finite(warmup) and warmup == 0:
        out.append(for_run(run, "warning", "no warm-up", "0 warm-up iterations", "≥ 1 (10+ on a GPU)",
                           "its first timed iteration ran cuDNN's autotuning and CUDA's lazy initialisation (module "
                           "loading, the allocator's first blocks) with the step: raise profiling.warmup_iterations "
                           "(`rooflow time --warmup`)"))
    throttle = _text(run.get("throttle"))
    if throttle:
        out.append(for_run(run, "warning", "throttled", throttle, "no clock slowdown while timed",
                           "the GPU lowered its clocks while it was timed (power cap, temperature), so the time is "
                           "longer than the device's roof assumes; rerun on an idle, cooled GPU or hold the point "
                           "against a measured roof taken under the same conditions"))
    ratio, seconds = run.get("measured_over_predicted"), run.get("measured_seconds")
    low, high, predicted = (run.get(k) for k in ("predicted_seconds_low", "predicted_seconds_high",
                                                  "predicted_seconds"))
    if run.get("timer") in TIMED_HERE and all(_finite(v) for v in (ratio, seconds, low, high, predicted)):
        band = _band_words(low, high, predicted)
        if not low <= seconds <= high:
            out.append(for_run(run, "warning", "predicted vs measured time",
                               f"{seconds * 1e3:.3g} ms (measured/predicted {ratio:.2f})",
                               f"{low * 1e3:.3g}–{high * 1e3:.3g} ms",
                               f"outside the model's {band} band ({run.get('calibration_source')}); "
                               f"{_predicted_time_carrier(run)}"))
        elif run.get("predicted_bound") == "host" and abs(ratio - 1) > HOST_BOUND_NOTE_BAND:
            from rooflow.estimate.timemodel import host_scatter_words

            out.append(for_run(run, "result", "host-bound step off its prediction", f"measured/predicted {ratio:.2f}",
                               f"within ±{100 * HOST_BOUND_NOTE_BAND:.0f}%",
                               f"inside the model's {band} band for a host-bound step, whose time moves with its "
                               f"host ({host_scatter_words()} in rooflow's sweeps), outside "
                               f"±{100 * HOST_BOUND_NOTE_BAND:.0f}%; {_predicted_time_carrier(run)}"))
    kernel_check = _kernel_time_check(run)
    if kernel_check:
        out.append(kernel_check)
    under = _text(run.get("below_roofline"))
    if under:  # rooflow.estimate.predict.below_roofline_flag: its rows and their causes, read from the model
        out.append(for_run(run, "error" if "unexplained" in under else "warning", "prediction under its roofline",
                           f"predicted {float(run['predicted_seconds']) * 1e3:.3g} ms, roofline "
                           f"{float(run['roofline_seconds']) * 1e3:.3g} ms" if _finite(run.get("predicted_seconds"))
                           and _finite(run.get("roofline_seconds")) else "rows under their roof",
                           "every row at or above its roof", under))
    ratio, measured = run.get("measured_over_predicted_memory"), run.get("measured_memory_bytes")
    low, high = run.get("predicted_memory_bytes_low"), run.get("predicted_memory_bytes_high")
    if run.get("device_kind") == "cuda" and _finite(ratio) and abs(ratio - 1) > MEMORY_BAND:
        within = "inside" if _finite(low) and _finite(high) and low <= measured <= high else "outside"
        span = f" {low / 1e9:.2f}–{high / 1e9:.2f} GB" if _finite(low) and _finite(high) else ""
        out.append(for_run(run, "warning", "predicted vs measured memory", f"measured/predicted {ratio:.2f}",
                           f"within ±{100 * MEMORY_BAND:.0f}%",
                           f"{within} the range{span}: a cuDNN workspace of an algorithm the autotuner picked, the "
                           f"allocator, or memory the estimate does not count"))
    message = _text(run.get("status_message"))
    if run.get("status") == "oom":
        cause = (message or "the run did not fit in device memory").removeprefix("out of memory: ")
        out.append(for_run(run, "result", "out of memory", "oom", "fits in memory",
                           f"{cause}; a smaller batch or lower precision fits"))
    if run.get("status") == "does-not-fit":
        cause = (message or "the memory prediction says it cannot fit").removeprefix("does not fit: ")
        out.append(for_run(run, "result", "does not fit (not submitted)", "not run", "fits in memory",
                           f"{cause}; a smaller batch, a lower precision or a larger GPU fits"))
    return out


def run_checks(run: Any) -> list[Check]:
    """Every check one summary row can tell, as records (a row is a dict or a pandas Series of the summary)."""
    return _roof_checks(run) + _flop_checks(run) + _timing_checks(run)
