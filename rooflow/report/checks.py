"""The report's self-checks: one row per failed check, with the run it concerns and the likely cause.

Nothing a check flags is hidden: the run stays in every table and figure (the roofline rings it). Checks:

- **above the roof**: achieved FLOP/s over the attainable FLOP/s at the run's intensity > 100% — a bug:
  a wrong peak (a sparse headline?), over-counted FLOPs, an under-measured time, or FLOPs of a precision
  the roof does not cover. Also above the *measured* roof where a datasheet roof exists (a warning: the
  ceiling microbenchmark may simply have reached less than the device can do).
- **estimate above the roof** (where the point's FLOPs or bytes were measured): the estimate's FLOPs over
  the measured time exceed the roof — the counters may have missed work of a faster precision (TF32 tensor
  cores under an "FP32" run) that keeps the measured point under its roof. Where the FLOP reconciliation
  explains why the counters saw fewer FLOPs (Winograd, FFT, tensor-core work not collected), that is the cause.
- **measured/estimated FLOPs** outside ``summary.FLOPS_RATIO_BAND``: an error unless the reconciliation
  found the kernels that explain it (then a warning that shows the explanation).
- **unexplained FLOP gap** (error): measured and estimated FLOPs differ by more than the reconciliation's
  tolerance (±20%) and no evidence in the kernels explains it (the reconciliation starts "Unexplained").
- **explanation contradicts the per-class counts** (error): the explanation blames one side — the
  convolution/matmul kernels (tensor cores, padding, FFT, Winograd) or the other ops (elementwise,
  normalization, pooling) — while the per-class FLOPs show the gap is on the other side.
- **timed vs profiled kernels** (error where a convolution/GEMM kernel differs: another algorithm, other
  FLOPs; a warning otherwise): the timing job's kernel timeline and the ncu profile, two processes, ran
  different kernels, so the roofline point divides one process's FLOPs by another's time.
- **forward:backward** (training runs): the estimator's backward:forward matmul FLOP ratio against the
  ratio the layers imply, ``2 − s`` where ``s`` is the first conv/linear layer's share of the forward
  matmul FLOPs (every conv/linear backward computes an input gradient and a weight gradient, each the
  forward's cost, except the first layer, whose input needs no gradient — DESIGN.md); and the measured
  backward:forward latency ratio against the same implied ratio.
- **noisy**: interquartile range over ``rooflow.conventions.NOISY_SPREAD`` of the median time.
- **predicted vs measured time / memory**: the measurement outside the time model's band, or the memory
  prediction off by more than 15% (a warning naming what carries most of the predicted time: an op class,
  cuDNN's layout transposes, or the host).
- **throttled**: NVML saw the GPU slow itself down (power cap, thermal slowdown) during the timed
  iterations; the value is the reading (reasons, SM clock range, temperature, power).
- **out of memory**: a result, not a failure, listed so it is never mistaken for a missing run.
- **uncounted ops**: aten ops the estimator has no formula for (their FLOPs are not in the estimate).
- **cache roof at or below DRAM** (per device, from its measured ceilings): a failed cache microbenchmark
  (it measured DRAM or launch overhead); the roof is not drawn (``rooflow.hardware.roofs.invalid_cache_roofs``).
- **guards** (:func:`guard_checks`): what a GPU job found that its tests did not expect and fell back from,
  as recorded in its output (``guards`` in ncu.json: a distinct-mode profile replaced by an exhaustive one).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

from rooflow.conventions import NOISY_SPREAD
from rooflow.io import read_json
from rooflow.profilers.reconcile import UNEXPLAINED
from rooflow.report.summary import FLOPS_RATIO_BAND, RUN_KEYS

RUN_COLUMNS = ["device", "model", "batch", "precision", "mode"]
CHECK_COLUMNS = ["run", *RUN_COLUMNS, "severity", "check", "value", "expected", "likely_cause"]
SEVERITIES = ("error", "warning", "result")

# The estimator's backward:forward matmul FLOP ratio must match the ratio its own layers imply within this
# relative tolerance: both are computed from the same per-layer counts, so only a wrong backward formula
# (FlopCounterMode's grouped-convolution weight gradient: 3.7× to 50×), a layer counted without one of its
# gradients, or frozen parameters move them apart by more than rounding.
FB_FLOPS_TOLERANCE = 0.03
# The measured backward:forward latency ratio may sit within this factor of the implied FLOP ratio: equal
# FLOP/s in both passes gives exactly the FLOP ratio; a backward at under half the forward's FLOP/s
# (memory-bound gradient kernels at small batch, slow depthwise weight-gradient kernels) or over twice it
# (a forward timing that includes one-off work, an unsynchronised backward timer) needs a look.
FB_LATENCY_FACTOR = 2.0

FORWARD_BACKWARD_COLUMNS = [
    *RUN_COLUMNS, "first_layer", "first_layer_share", "implied_flops_ratio", "estimated_matmul_flops_ratio",
    "estimated_total_flops_ratio", "forward_seconds", "backward_seconds", "latency_ratio",
    "latency_ratio_low", "latency_ratio_high",
]


def run_label(row: Any) -> str:
    """'cpu resnet18 b8 fp32 training': the run a check concerns, as the report shows it."""
    device = row.get("device") if hasattr(row, "get") else row["device"]
    parts = [device] if isinstance(device, str) and device else []
    return " ".join(parts + [str(row["model"]), f"b{int(row['batch'])}", str(row["precision"]), str(row["mode"])])


def _finite(value: Any) -> bool:
    try:
        return value is not None and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _cause(text: str | None) -> str | None:
    """'12% of the median time (over 5%): other load ...' → 'other load ...': the summary's messages read
    '<check>: <value>: <cause>'; the value has its own column here."""
    if text and ": " in text:
        return text.split(": ", 1)[1].strip() or text
    return text


def _message(row: Any, prefix: str) -> str | None:
    """The part of the summary's `checks` text that starts with `prefix`, up to the next known check."""
    text = row.get("checks")
    if not isinstance(text, str) or prefix not in text:
        return None
    start = text.index(prefix) + len(prefix)
    rest = text[start:]
    ends = [rest.find(f"; {p}") for p in ("noisy:", "out of memory:", "measured/estimated FLOPs", "above the roof:",
                                          "predicted time:", "predicted memory:", "does not fit:", "throttled:")]
    ends = [e for e in ends if e >= 0]
    return rest[: min(ends)].strip(" :") if ends else rest.strip(" :")


def first_matmul_layer(layers: pd.DataFrame) -> tuple[str | None, float]:
    """(name, forward matmul FLOPs) of the first layer, in execution order, that does matmul/conv work."""
    if layers is None or layers.empty or "forward_matmul_flops" not in layers:
        return None, 0.0
    matmul = layers[pd.to_numeric(layers["forward_matmul_flops"], errors="coerce").fillna(0) > 0]
    if matmul.empty:
        return None, 0.0
    first = matmul.iloc[0]
    return str(first["layer"]), float(first["forward_matmul_flops"])


def implied_backward_forward_ratio(layers: pd.DataFrame, forward_matmul_flops: float | None = None
                                   ) -> tuple[str | None, float | None, float | None]:
    """(first layer, its share of the forward matmul FLOPs, implied backward:forward ratio 2 − share)."""
    name, first = first_matmul_layer(layers)
    total = forward_matmul_flops
    if not total:
        total = float(pd.to_numeric(layers["forward_matmul_flops"], errors="coerce").fillna(0).sum()) \
            if layers is not None and "forward_matmul_flops" in layers else 0.0
    if name is None or not total:
        return None, None, None
    share = first / total
    return name, share, 2.0 - share


def forward_backward_table(summary: pd.DataFrame, totals: dict[tuple, dict], layers: dict[tuple, pd.DataFrame]
                           ) -> pd.DataFrame:
    """One row per training run of the summary (per device): the FLOP ratios and the latency ratio.

    ``totals``/``layers`` are keyed by (model, batch, precision, mode) — the estimator's totals.json and
    layers.csv of that run."""
    rows = []
    training = summary[summary["mode"] == "training"] if len(summary) else summary
    for _, run in training.iterrows():
        key = (run["model"], int(run["batch"]), run["precision"], run["mode"])
        total = totals.get(key) or {}
        layer_table = layers.get(key)
        forward_matmul = total.get("forward_matmul_flops")
        first, share, implied = implied_backward_forward_ratio(layer_table, forward_matmul)
        estimated = total.get("matmul_backward_forward_ratio")
        if estimated is None and forward_matmul and total.get("backward_matmul_flops") is not None:
            estimated = total["backward_matmul_flops"] / forward_matmul
        forward_total = total.get("forward_flops") or run.get("estimated_forward_flops")
        backward_total = total.get("backward_flops") or run.get("estimated_backward_flops")
        total_ratio = backward_total / forward_total if _finite(forward_total) and forward_total and \
            _finite(backward_total) else None
        fwd_s, bwd_s = run.get("forward_seconds"), run.get("backward_seconds")
        latency = bwd_s / fwd_s if _finite(fwd_s) and _finite(bwd_s) and fwd_s > 0 else None
        rows.append({
            "device": run["device"], "model": run["model"], "batch": int(run["batch"]),
            "precision": run["precision"], "mode": run["mode"], "first_layer": first, "first_layer_share": share,
            "implied_flops_ratio": implied, "estimated_matmul_flops_ratio": estimated,
            "estimated_total_flops_ratio": total_ratio,
            "forward_seconds": fwd_s if _finite(fwd_s) else None,
            "backward_seconds": bwd_s if _finite(bwd_s) else None, "latency_ratio": latency,
            "latency_ratio_low": implied / FB_LATENCY_FACTOR if implied else None,
            "latency_ratio_high": implied * FB_LATENCY_FACTOR if implied else None,
        })
    return pd.DataFrame(rows, columns=FORWARD_BACKWARD_COLUMNS)


def _row(run: Any, severity: str, check: str, value: str, expected: str, cause: str) -> dict[str, Any]:
    out = {k: run.get(k) for k in RUN_COLUMNS}
    out["batch"] = int(out["batch"])
    out.update(run=run_label(out), severity=severity, check=check, value=value, expected=expected,
               likely_cause=cause)
    return out


def estimate_percent_of_roof(run: Any) -> float | None:
    """Where a run's point comes from measured FLOPs or bytes: the ESTIMATE's point (estimated FLOPs over
    estimated fusion-aware bytes, at the measured time) as a percentage of the attainable FLOP/s of the
    run's roof. None where the point is the estimate already, or a value is missing."""
    if run.get("flops_source") == "estimate" and str(run.get("bytes_source", "")).startswith("estimate"):
        return None
    flops, seconds = run.get("estimated_flops"), run.get("measured_seconds")
    nbytes = run.get("estimated_fused_bytes") if _finite(run.get("estimated_fused_bytes")) \
        else run.get("estimated_min_bytes")
    peak, bandwidth = run.get("peak_flops_per_second"), run.get("bandwidth_bytes_per_second")
    if not all(_finite(v) and v > 0 for v in (flops, seconds, nbytes, peak, bandwidth)):
        return None
    attainable = min(peak, bandwidth * flops / nbytes)
    return 100 * (flops / seconds) / attainable


def summary_checks(summary: pd.DataFrame) -> list[dict[str, Any]]:
    """The checks that read only the summary: roof, FLOP ratio, noise, out of memory."""
    out = []
    low, high = FLOPS_RATIO_BAND
    for _, run in summary.iterrows():
        percent = run.get("percent_of_roofline")
        if _finite(percent) and percent > 100:
            cause = _cause(_message(run, "above the roof:")) or (
                "a wrong peak (a sparse headline?), over-counted FLOPs, an under-measured time, or FLOPs of a "
                "precision this roof does not cover")
            out.append(_row(run, "error", "above the roof", f"{percent:.0f}% of the attainable FLOP/s",
                            "≤ 100%", cause))
        measured_percent = run.get("percent_of_measured_roofline")
        if run.get("roof_source") == "datasheet" and _finite(measured_percent) and measured_percent > 100:
            out.append(_row(run, "warning", "above the measured roof",
                            f"{measured_percent:.0f}% of the measured-roof attainable FLOP/s", "≤ 100%",
                            "the ceiling microbenchmark reached less than this run (too small a problem, "
                            "clocks throttled while it ran), or this run's FLOPs are over-counted"))
        ratio = run.get("flops_ratio")
        explanation = run.get("reconciliation")
        unexplained = isinstance(explanation, str) and explanation.startswith(UNEXPLAINED)
        estimate_percent = estimate_percent_of_roof(run)
        if estimate_percent is not None and estimate_percent > 100:
            if _finite(ratio) and ratio < 1 and isinstance(explanation, str) and explanation.strip() \
                    and not unexplained:
                # the kernels' own evidence: fewer FLOPs done (Winograd, FFT) or work the counters cannot see
                cause = (f"the counters saw {ratio:.2f}× the estimated FLOPs, and the FLOP reconciliation says "
                         f"why: {explanation}")
            else:
                cause = (f"the step ran faster than the {run.get('precision')} roof allows for the estimated "
                         "work: it ran at a faster precision than the roof assumes (cuDNN runs FP32 "
                         "convolutions in TF32 on tensor cores by default on Ampere and newer), its time is "
                         "under-measured (kernel time of one iteration without host gaps), or the estimate "
                         "over-counts; the measured point may sit under its roof only because the counters "
                         "missed that work")
            out.append(_row(run, "warning", "estimate above the roof",
                            f"estimated FLOPs / measured time = {estimate_percent:.0f}% of the attainable FLOP/s",
                            "≤ 100%", cause))
        if _finite(ratio) and not low <= ratio <= high:
            explained = isinstance(explanation, str) and explanation.strip() and not unexplained
            out.append(_row(run, "warning" if explained else "error", "measured/estimated FLOPs",
                            f"{ratio:.2f}", f"[{low}, {high}]",
                            explanation if explained or unexplained else
                            "no explanation found: tensor-core metrics not collected (FLOPs too low), a "
                            "precision the counters miss, or kernels outside the profiled iteration"))
        elif _finite(ratio) and unexplained:
            out.append(_row(run, "error", "unexplained FLOP gap", f"measured/estimated FLOPs {ratio:.2f}",
                            "within ±20%, or a gap the kernels explain", explanation))
        contradiction = explanation_contradiction(run)
        if contradiction:
            out.append(_row(run, "error", "explanation contradicts the per-class counts", contradiction[0],
                            f"the gap on the side the explanation blames ({contradiction[1]})", contradiction[2]))
        mismatch = run.get("kernel_mismatch")
        if isinstance(mismatch, str) and mismatch.strip():
            differ = str(run.get("kernel_algorithms_differ")).lower() in ("true", "1", "1.0")
            out.append(_row(run, "error" if differ else "warning", "timed vs profiled kernels",
                            f"{_count(run.get('timed_kernels'))} timed vs {_count(run.get('profiled_kernels'))} "
                            f"profiled kernels", "the same kernels in both processes",
                            mismatch + (": another convolution/GEMM algorithm ran in one of them (cuDNN autotuning "
                                        "per process, memory pressure), so FLOPs and time come from different "
                                        "kernels" if differ else
                                        ": the convolution/GEMM kernels match; the difference is in other kernels")))
        spread = run.get("seconds_spread")
        if _finite(spread) and spread > NOISY_SPREAD:
            cause = _cause(_message(run, "noisy:")) or (
                "other load on the machine, too few iterations, or clock changes; rerun on an idle node or "
                "raise profiling.timed_iterations")
            rounds = run.get("timing_rounds")
            after = f" after {int(rounds)} round{'s' if int(rounds) > 1 else ''}" if _finite(rounds) else ""
            out.append(_row(run, "warning", "noisy", f"spread {100 * spread:.1f}% of the median{after}",
                            f"≤ {100 * NOISY_SPREAD:.0f}%", cause))
        ratio = run.get("measured_over_predicted")
        message = _message(run, "predicted time:")
        if message and _finite(ratio):
            out.append(_row(run, "warning", "predicted vs measured time", f"measured/predicted {ratio:.2f}",
                            f"{run.get('predicted_seconds_low', 0) * 1e3:.3g}–{run.get('predicted_seconds_high', 0) * 1e3:.3g} ms",
                            _cause(message)))
        ratio = run.get("measured_over_predicted_memory")
        message = _message(run, "predicted memory:")
        if message and _finite(ratio):
            out.append(_row(run, "warning", "predicted vs measured memory", f"measured/predicted {ratio:.2f}",
                            "within ±15%", _cause(message)))
        throttle = run.get("throttle")
        if isinstance(throttle, str) and throttle:
            cause = _cause(_message(run, "throttled:")) or (
                "the GPU lowered its clocks while it was timed (power cap, temperature)")
            out.append(_row(run, "warning", "throttled", throttle, "no clock slowdown while timed", cause))
        if run.get("status") == "oom":
            cause = _message(run, "out of memory:") or "the run did not fit in device memory"
            out.append(_row(run, "result", "out of memory", "oom", "fits in memory",
                            f"{cause}; a smaller batch or lower precision fits"))
        if run.get("status") == "does-not-fit":
            cause = _message(run, "does not fit:") or "the memory prediction says it cannot fit"
            out.append(_row(run, "result", "does not fit (not submitted)", "not run", "fits in memory",
                            f"{cause}; a smaller batch, a lower precision or a larger GPU fits"))
    return out


def _count(value: Any) -> str:
    return str(int(value)) if _finite(value) else "?"


# Words an explanation uses for each side (rooflow's reconciliation names the side; older or imported texts
# are read by what they blame).
_MATMUL_WORDS = re.compile(r"tensor[- ]core|winograd|\bfft\b|gemm|tile|im2col|split-k|channel padding|"
                           r"convolution algorithm", re.IGNORECASE)
_OTHER_WORDS = re.compile(r"elementwise|normali[sz]ation|pooling|softmax|optimizer", re.IGNORECASE)


def claimed_side(run: Any) -> str | None:
    """The side (``convolution/matmul`` or ``other ops``) a run's reconciliation says carries its FLOP gap."""
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
    matmul, other = len(_MATMUL_WORDS.findall(text)), len(_OTHER_WORDS.findall(text))
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


def forward_backward_checks(table: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    seen_flops: set[tuple] = set()
    for _, run in table.iterrows():
        implied, estimated = run.get("implied_flops_ratio"), run.get("estimated_matmul_flops_ratio")
        key = tuple(run[k] for k in RUN_KEYS)
        if _finite(implied) and _finite(estimated) and key not in seen_flops \
                and abs(estimated / implied - 1) > FB_FLOPS_TOLERANCE:
            seen_flops.add(key)  # a property of the estimate: once per run, not once per device
            if estimated > 2.0:
                cause = ("backward counted at more than twice the forward: a backward formula that over-counts "
                         "(FlopCounterMode's grouped/depthwise convolution weight gradient ignores `groups`)")
            elif estimated < implied:
                cause = ("backward counted short of the layers: a conv/linear layer counted without its input "
                         "or weight gradient, or frozen parameters (requires_grad False)")
            else:
                cause = ("backward counted above what the layers imply: a gradient counted twice, or a layer "
                         "before the first conv/linear layer that has a matmul backward")
            row = _row(run, "error", "forward:backward FLOPs", f"backward/forward matmul FLOPs {estimated:.3f}",
                       f"{implied:.3f} ± {100 * FB_FLOPS_TOLERANCE:.0f}% (2 − first layer "
                       f"{run.get('first_layer')}'s share {run.get('first_layer_share'):.3f})", cause)
            row["device"], row["run"] = "", run_label({**{k: run[k] for k in RUN_KEYS}, "device": ""})
            out.append(row)
        latency = run.get("latency_ratio")
        low, high = run.get("latency_ratio_low"), run.get("latency_ratio_high")
        if _finite(latency) and _finite(low) and _finite(high) and not low <= latency <= high:
            if latency > high:
                cause = ("the backward ran at under half the forward's FLOP/s: memory-bound gradient kernels "
                         "(BatchNorm/ReLU/pooling backward dominate at small batch), slow depthwise or "
                         "first-layer weight-gradient kernels, or a noisy backward timing")
            else:
                cause = ("the backward ran at over twice the forward's FLOP/s: the forward timing includes "
                         "one-off work (allocation, autotuning after warm-up) or the backward timer does not "
                         "wait for its kernels")
            out.append(_row(run, "warning", "forward:backward latency",
                            f"backward/forward time {latency:.2f}",
                            f"[{low:.2f}, {high:.2f}] (implied FLOP ratio {run['implied_flops_ratio']:.3f} "
                            f"÷/× {FB_LATENCY_FACTOR:g})", cause))
    return out


def estimate_checks(totals: dict[tuple, dict]) -> list[dict[str, Any]]:
    """Ops with no formula in the estimator: their FLOPs are missing from the estimate, never silently."""
    out = []
    for key, total in sorted(totals.items()):
        unsupported = total.get("unsupported_ops") or {}
        if unsupported:
            run = dict(zip(RUN_KEYS, key), device="")
            names = ", ".join(sorted(unsupported))
            out.append(_row(run, "warning", "uncounted ops", f"{len(unsupported)} op(s) without a formula",
                            "every op counted", f"no FLOP formula for {names}: the estimate is a lower bound"))
    return out


def ceilings_checks(ceilings: dict[str, dict], datasheet_dram: dict[str, float | None] | None = None
                    ) -> list[dict[str, Any]]:
    """One error per measured cache roof at or below its DRAM roof. ``ceilings``: {device key: its
    measure_ceilings JSON}; ``datasheet_dram``: {device key: datasheet DRAM bytes/s}, where known. The row
    concerns the device, not a run: model "(ceilings)", batch 0."""
    from rooflow.hardware.roofs import invalid_cache_roofs

    out = []
    for device, result in sorted(ceilings.items()):
        for level, why in invalid_cache_roofs(result, (datasheet_dram or {}).get(device)).items():
            value, floor = why.get("bytes_per_second"), why.get("dram_bytes_per_second")
            run = {"device": device, "model": "(ceilings)", "batch": 0, "precision": "", "mode": ""}
            row = _row(run, "error", "cache roof at or below DRAM",
                       f"{level.upper()} {value / 1e9:.0f} GB/s" if _finite(value) else level.upper(),
                       f"> {why.get('dram_source', 'measured')} DRAM {floor / 1e9:.0f} GB/s" if _finite(floor)
                       else "> DRAM",
                       f"{why.get('reason', 'a failed cache measurement')}; re-measure with `rooflow ceilings` "
                       "on the device (its L2 test reads an L2-resident buffer many times per kernel)")
            row["run"] = f"{device} {level.upper()} ceiling"
            out.append(row)
    return out


def guard_checks(outputs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per guard record (:mod:`rooflow.guards`) in the jobs' output JSON: ``outputs`` maps a label
    (the file) to its JSON — ncu.json (whose device/model/batch/precision/mode name the run) or a ceilings
    result (the device is the label's stem, as in :func:`ceilings_checks`). Each row says what the job found
    and what it did instead (its fallback)."""
    out = []
    for label, data in sorted(outputs.items()):
        records = data.get("guards") or []
        if not records:
            continue
        if "model" in data:
            run = {key: data.get(key, "") for key in RUN_COLUMNS}
        else:
            run = {"device": Path(label).stem, "model": "(ceilings)", "batch": 0, "precision": "", "mode": ""}
        for record in records:
            row = _row(run, record.get("severity", "error"), record["check"], str(record.get("value", "")),
                       str(record.get("expected", "")), record.get("cause", ""))
            if "model" not in data:
                row["run"] = f"{run['device']} ceilings"
            out.append(row)
    return out


def build_checks(summary: pd.DataFrame, totals: dict[tuple, dict] | None = None,
                 layers: dict[tuple, pd.DataFrame] | None = None, ceilings: dict[str, dict] | None = None,
                 datasheet_dram: dict[str, float | None] | None = None, guards: dict[str, dict] | None = None
                 ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(checks, forward:backward table). Checks: one row per failed check (:data:`CHECK_COLUMNS`), errors
    first, then warnings, then results; within each, by run. ``ceilings``/``datasheet_dram``: see
    :func:`ceilings_checks`; ``guards``: job outputs with guard records, see :func:`guard_checks`."""
    totals, layers = totals or {}, layers or {}
    fb = forward_backward_table(summary, totals, layers)
    rows = summary_checks(summary) + forward_backward_checks(fb) + estimate_checks(totals) + \
        ceilings_checks(ceilings or {}, datasheet_dram) + guard_checks(guards or {})
    checks = pd.DataFrame(rows, columns=CHECK_COLUMNS)
    if not checks.empty:
        checks["_severity"] = checks["severity"].map({s: i for i, s in enumerate(SEVERITIES)})
        checks = checks.sort_values(["_severity", "device", "model", "batch", "precision", "mode", "check"],
                                    kind="stable").drop(columns="_severity").reset_index(drop=True)
    return checks, fb


def flagged_runs(checks: pd.DataFrame) -> dict[tuple, str]:
    """{(device, model, batch, precision, mode): worst severity} of the runs a check flagged on a device
    (estimate-only checks, with no device, flag that run on every device)."""
    out: dict[tuple, str] = {}
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    for _, row in checks.iterrows():
        key = (row["device"] if isinstance(row["device"], str) else "", row["model"], int(row["batch"]),
               row["precision"], row["mode"])
        if key not in out or rank[row["severity"]] < rank[out[key]]:
            out[key] = row["severity"]
    return out


def severity_of(flags: dict[tuple, str], device: str, model: str, batch: int, precision: str, mode: str
                ) -> str | None:
    """The worst flag on a run on `device`, counting estimate-only flags (device '') too."""
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    found = [flags.get((d, model, int(batch), precision, mode)) for d in (device, "")]
    found = [f for f in found if f]
    return min(found, key=rank.__getitem__) if found else None


def load_estimates(totals_paths, layers_paths=()) -> tuple[dict[tuple, dict], dict[tuple, pd.DataFrame]]:
    """The estimator's totals.json (every run) and layers.csv (training runs: the forward:backward check
    needs them), keyed by (model, batch, precision, mode). `layers_paths` pairs with `totals_paths`."""
    totals: dict[tuple, dict] = {}
    layers: dict[tuple, pd.DataFrame] = {}
    layers_paths = list(layers_paths) or [None] * len(list(totals_paths))
    for totals_path, layers_path in zip(totals_paths, layers_paths):
        total = read_json(totals_path)
        key = (total["model"], int(total["batch"]), total["precision"], total["mode"])
        totals[key] = total
        if layers_path and total["mode"] == "training":
            layers[key] = pd.read_csv(layers_path)
    return totals, layers


def check_files(summary_path: str | Path, totals_paths=(), layers_paths=(), ceilings_paths=(),
                devices_file: str | Path | None = None, guard_paths=()) -> tuple[pd.DataFrame, pd.DataFrame]:
    """build_checks over a workflow's files: results/summary.csv, the estimate's totals/layers, and the
    measured ceilings (results/ceilings/{device}.json: the device is the file's stem) with the catalogue's
    datasheet DRAM roofs where `devices_file` is given; `guard_paths`: the ncu aggregates (ncu.json), whose
    guard records become checks."""
    totals, layers = load_estimates(totals_paths, layers_paths)
    ceilings = {Path(p).stem: read_json(p) for p in ceilings_paths}
    datasheet_dram = None
    if devices_file and ceilings:
        from rooflow.hardware.devices import load_devices

        datasheet_dram = {k: d.dram_bytes_per_second for k, d in load_devices(devices_file).items()}
    guards = {str(p): read_json(p) for p in guard_paths}
    return build_checks(pd.read_csv(summary_path), totals, layers, ceilings, datasheet_dram, guards)

