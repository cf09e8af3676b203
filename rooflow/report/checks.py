"""The report's self-checks: one row per failed check, with the run it concerns and the likely cause.

Nothing a check flags is hidden: the run stays in every table and figure (the roofline rings it). Checks:

- **above the roof**: achieved FLOP/s over the attainable FLOP/s at the run's intensity > 100% — a bug:
  a wrong peak (a sparse headline?), over-counted FLOPs, an under-measured time, or FLOPs of a precision
  the roof does not cover. Also above the *measured* roof where a datasheet roof exists (a warning: the
  ceiling microbenchmark may simply have reached less than the device can do).
- **estimate above the roof** (where the point's FLOPs or bytes were measured): the estimate's FLOPs over
  the measured time exceed the roof — the counters may have missed work of a faster precision (TF32 tensor
  cores under an "FP32" run) that keeps the measured point under its roof. Where the kernels' names show an FP32
  profile ran TF32 on tensor cores and the TF32 roof covers the estimate's point, that is the cause (with the
  point's share of the TF32 roof); else where the FLOP reconciliation explains why the counters saw fewer FLOPs
  (Winograd, FFT, tensor-core work not collected), that is. A run whose counters missed its tensor-core work has
  no bound in the summary ("unknown: tensor-core FLOPs not counted") and no headroom line on the roofline.
- **measured/estimated FLOPs** outside ``findings.FLOPS_RATIO_BAND``: an error unless the reconciliation
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
  ratio the layers imply: every conv/linear/matmul backward computes a gradient of each product operand that
  takes one, each the forward's cost (DESIGN.md) — two inside a trained network, one for the first layer (its
  input needs none) or a frozen layer behind a trained one, none in a frozen stem; a convolution's bias gradient
  one add per output element, a linear's a sum of its own; the operands rooflow.estimate.formulas registers per
  op — read per layer from which operands took a gradient as the step ran (the layers table's
  ``implied_backward_matmul_flops``; from a table
  without it, ``2 − s`` where ``s`` is the first conv/linear layer's share of the forward matmul FLOPs);
  nn.Bilinear layers, which take three gradients, left out of both sides by name; and the measured
  backward:forward latency ratio against the same implied ratio; its cause names the parts of the time model's
  predicted backward that carry the excess where the model predicts the ratio too (FB_PREDICTED_FACTOR), and
  the layers whose measured backward carries it (the timing job's profiled iteration, rooflow.measure.optime),
  or says "unexplained".
- **noisy**: interquartile range over ``rooflow.conventions.NOISY_SPREAD`` of the median time; its cause read
  from the other processes' work and a hypervisor's steal beside the slowest and the fastest timed iterations
  (rooflow.measure.load), or "unexplained" where they had no more beside the slow ones — on a CPU then said
  further from the process's own CPU time beside them: the step waiting off the CPU, the kernel carrying the
  extra CPU time beside page faults (its memory mapping, named with the caching allocator that removes it), or
  the step running slower on the CPU, whose cause is not recorded.
- **predicted vs measured time / memory**: the measurement outside the time model's band, or the memory
  prediction off by more than 15% (a warning naming what carries most of the predicted time: an op class,
  cuDNN's layout transposes, or the host).
- **host-bound step off its prediction**: a result, not a warning: a step the model has host-bound outside ±25%
  of its prediction but inside its range, which adds the host's run-to-run scatter
  (``rooflow.estimate.timemodel.step_spread``); its cause names what carries the difference, as the warning's,
  and either names the step's FP32/TF32 twin where it was timed host-bound too (the same host work timed again:
  ``rooflow.report.summary._host_twins``).
- **predicted vs measured kernel time**: an imported nsys profile's kernel sum outside the predicted kernel
  time's band (a warning naming the side of the kernels that carries the miss, or the TF32 tensor-core kernels
  an FP32 profile ran, with the time priced as it ran).
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

import json
from pathlib import Path
from typing import Any

import pandas as pd

from rooflow.conventions import PAGE_FAULT_PART
from rooflow.errors import RooflowError
from rooflow.io import read_json, read_json_object
from rooflow.report.findings import (  # CHECK_COLUMNS and run_label: also importable from here
    CHECK_COLUMNS,  # noqa: F401
    RUN_COLUMNS,
    SEVERITIES,
    Check,
    _finite,
    checks_frame,
    for_run,
    run_checks,
    run_label,  # noqa: F401
)
from rooflow.report.summary import RUN_KEYS, eager_rows, read_summary

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
# The time model accounts for a latency ratio outside that band where it predicts one outside it too, on the
# same side, and the measured ratio sits within this factor of its own: each phase's prediction within ±20% of
# the measurement moves their ratio by up to 1.2/0.8 = 1.5.
FB_PREDICTED_FACTOR = 1.5
# How much of the predicted backward's excess over implied × forward the named parts must carry.
FB_CARRIED_SHARE = 0.8
# Words for the time model's parts (rooflow.estimate.timemodel) a reader would not know by name.
PART_WORDS = {PAGE_FAULT_PART: "page faults (a CPU tensor of 32 MiB or more is freshly mapped at each allocation: "
                             "a page fault per page)"}

FORWARD_BACKWARD_COLUMNS = [
    *RUN_COLUMNS, "first_layer", "first_layer_share", "trainable_before_first_layer", "layers_one_gradient",
    "layers_no_gradient", "recomputed_flops_ratio",
    "implied_flops_ratio", "estimated_matmul_flops_ratio", "layers_apart",
    "estimated_total_flops_ratio", "forward_seconds", "backward_seconds", "latency_ratio",
    "latency_ratio_low", "latency_ratio_high", "predicted_forward_seconds", "predicted_backward_seconds",
    "predicted_latency_ratio", "predicted_seconds_by_phase_part",
]


def first_matmul_layer(layers: pd.DataFrame) -> tuple[str | None, float]:
    """(name, forward matmul FLOPs) of the first layer, in execution order, that does matmul/conv work."""
    if layers is None or layers.empty or "forward_matmul_flops" not in layers:
        return None, 0.0
    matmul = layers[pd.to_numeric(layers["forward_matmul_flops"], errors="coerce").fillna(0) > 0]
    if matmul.empty:
        return None, 0.0
    first = matmul.iloc[0]
    return str(first["layer"]), float(first["forward_matmul_flops"])


def trainable_before(layers: pd.DataFrame, name: str | None) -> str | None:
    """The first layer with trainable parameters that runs before layer ``name`` (execution order), as 'name
    (Type)'; None where none does. Its gradient reaches it through ``name``'s input (an nn.Embedding before a
    Transformer's first attention), so ``name`` computes its input gradient like every later layer. Trainable:
    parameters that take a gradient (the layers table's ``gradient_bytes``; ``params`` where a table has none),
    so a frozen embedding is not one."""
    column = "gradient_bytes" if layers is not None and "gradient_bytes" in layers else "params"
    if name is None or layers is None or column not in layers:
        return None
    names = layers["layer"].astype(str).tolist()
    if name not in names:
        return None
    before = layers.iloc[:names.index(name)]
    trainable = before[pd.to_numeric(before[column], errors="coerce").fillna(0) > 0]
    if trainable.empty:
        return None
    first = trainable.iloc[0]
    return f"{first['layer']} ({first['type']})" if "type" in trainable else str(first["layer"])


# the estimator's layers-table column of the backward each layer's forward products imply, by the operands that
# took a gradient as the step ran (rooflow.estimate.core._implied_backward_flops); a table written before it has
# none, and the check falls back to 2 − the first layer's share
IMPLIED_COLUMN = "implied_backward_matmul_flops"


def implied_backward_forward_ratio(layers: pd.DataFrame, forward_matmul_flops: float | None = None
                                   ) -> tuple[str | None, float | None, float | None]:
    """(first layer, its share of the forward matmul FLOPs, implied backward:forward ratio). The ratio: each
    forward product's FLOPs once per operand that took a gradient as the step ran (the layers table's
    :data:`IMPLIED_COLUMN`), over the forward's; from a table without it, 2 − share, the first matmul layer
    skipping its input gradient only where nothing trainable runs before it (behind an embedding,
    :func:`trainable_before`, its share is 0 and the ratio 2)."""
    name, first = first_matmul_layer(layers)
    total = forward_matmul_flops
    if not total:
        total = float(pd.to_numeric(layers["forward_matmul_flops"], errors="coerce").fillna(0).sum()) \
            if layers is not None and "forward_matmul_flops" in layers else 0.0
    if name is None or not total:
        return None, None, None
    share = 0.0 if trainable_before(layers, name) else first / total
    if IMPLIED_COLUMN in layers:
        return name, share, float(pd.to_numeric(layers[IMPLIED_COLUMN], errors="coerce").fillna(0).sum()) / total
    return name, share, 2.0 - share


def layers_taking_fewer_gradients(layers: pd.DataFrame | None) -> tuple[list[str], list[str]]:
    """(layers whose forward products took one operand's gradient, layers whose took none), in execution order:
    the first layer (its input takes none), a frozen layer behind a trained one, a frozen stem. Read from the
    layers table's :data:`IMPLIED_COLUMN` against its forward matmul FLOPs; empty without that column."""
    if layers is None or IMPLIED_COLUMN not in layers or "forward_matmul_flops" not in layers:
        return [], []
    forward = pd.to_numeric(layers["forward_matmul_flops"], errors="coerce").fillna(0)
    per_flop = pd.to_numeric(layers[IMPLIED_COLUMN], errors="coerce").fillna(0) / forward.where(forward > 0)
    names = layers["layer"].astype(str)
    # a layer's products may mix (its bias add is no product): the nearest whole number of gradients
    return names[per_flop.round() == 1].tolist(), names[per_flop.round() == 0].tolist()


# Layers of a product of three operands (nn.Bilinear: aten._trilinear, rooflow.estimate.formulas.trilinear_slices),
# whose backward takes a gradient of each — three, where the check's rule has every conv/linear layer take two —
# with the muls of its loop: the FLOP check leaves them out of both sides of the ratio, by name
TERNARY_PRODUCT_LAYERS = ("Bilinear",)


def without_ternary_products(layers: pd.DataFrame | None, forward_matmul: float | None,
                             backward_matmul: float | None) -> tuple[pd.DataFrame | None, float | None,
                                                                     float | None, str]:
    """The layers table, forward and backward matmul FLOPs less the layers of :data:`TERNARY_PRODUCT_LAYERS`
    (their forward matmul FLOPs; their backward FLOPs, all of which but a bias gradient's sum are their products),
    and those layers' names ("" where there are none)."""
    if layers is None or not {"type", "backward_flops"} <= set(layers) or not forward_matmul or backward_matmul is None:
        return layers, forward_matmul, backward_matmul, ""
    apart = layers["type"].isin(TERNARY_PRODUCT_LAYERS)
    if not apart.any():
        return layers, forward_matmul, backward_matmul, ""
    rows = layers[apart]
    forward = float(pd.to_numeric(rows["forward_matmul_flops"], errors="coerce").fillna(0).sum())
    backward = float(pd.to_numeric(rows["backward_flops"], errors="coerce").fillna(0).sum())
    return (layers[~apart], forward_matmul - forward, backward_matmul - backward,
            ", ".join(rows["layer"].astype(str)))


def forward_backward_table(summary: pd.DataFrame, totals: dict[tuple, dict], layers: dict[tuple, pd.DataFrame]
                           ) -> pd.DataFrame:
    """One row per training run of the summary (per device): the FLOP ratios and the latency ratio.

    ``totals``/``layers`` are keyed by (model, batch, precision, mode) — the estimator's totals.json and
    layers.csv of that run."""
    rows = []
    summary = eager_rows(summary)  # the forward:backward split of the eager step, as the profiles are
    training = summary[summary["mode"] == "training"] if len(summary) else summary
    for _, run in training.iterrows():
        key = (run["model"], int(run["batch"]), run["precision"], run["mode"])
        total = totals.get(key) or {}
        layer_table = layers.get(key)
        forward_matmul = total.get("forward_matmul_flops")
        layer_table, rest_forward, rest_backward, apart = without_ternary_products(
            layer_table, forward_matmul, total.get("backward_matmul_flops"))
        first, share, implied = implied_backward_forward_ratio(layer_table, rest_forward)
        # activation checkpointing runs forward matmuls again in backward: the layers imply them too
        recomputed = (total.get("recomputed_matmul_flops") or 0.0) / rest_forward if rest_forward else 0.0
        if implied is not None:
            implied += recomputed
        upstream = trainable_before(layer_table, first)
        one, none = layers_taking_fewer_gradients(layer_table)
        estimated = total.get("matmul_backward_forward_ratio")
        if (estimated is None or apart) and rest_forward and rest_backward is not None:
            estimated = rest_backward / rest_forward
        if apart and not rest_forward:
            implied = estimated = None  # its products are all ternary: nothing the rule covers
        forward_total = total.get("forward_flops") or run.get("estimated_forward_flops")
        backward_total = total.get("backward_flops") or run.get("estimated_backward_flops")
        total_ratio = backward_total / forward_total if _finite(forward_total) and forward_total and \
            _finite(backward_total) else None
        fwd_s, bwd_s = run.get("forward_seconds"), run.get("backward_seconds")
        latency = bwd_s / fwd_s if _finite(fwd_s) and _finite(bwd_s) and fwd_s > 0 else None
        predicted_fwd, predicted_bwd = run.get("predicted_forward_seconds"), run.get("predicted_backward_seconds")
        predicted = predicted_bwd / predicted_fwd if _finite(predicted_fwd) and _finite(predicted_bwd) \
            and predicted_fwd > 0 else None
        parts = run.get("predicted_seconds_by_phase_part")
        rows.append({
            "device": run["device"], "model": run["model"], "batch": int(run["batch"]),
            "precision": run["precision"], "mode": run["mode"], "first_layer": first, "first_layer_share": share,
            "trainable_before_first_layer": upstream, "layers_one_gradient": ", ".join(one),
            "layers_no_gradient": ", ".join(none), "recomputed_flops_ratio": recomputed,
            "implied_flops_ratio": implied, "estimated_matmul_flops_ratio": estimated, "layers_apart": apart,
            "estimated_total_flops_ratio": total_ratio,
            "forward_seconds": fwd_s if _finite(fwd_s) else None,
            "backward_seconds": bwd_s if _finite(bwd_s) else None, "latency_ratio": latency,
            "latency_ratio_low": implied / FB_LATENCY_FACTOR if implied else None,
            "latency_ratio_high": implied * FB_LATENCY_FACTOR if implied else None,
            "predicted_forward_seconds": predicted_fwd if predicted is not None else None,
            "predicted_backward_seconds": predicted_bwd if predicted is not None else None,
            "predicted_latency_ratio": predicted,
            "predicted_seconds_by_phase_part": parts if isinstance(parts, str) else None,
        })
    return pd.DataFrame(rows, columns=FORWARD_BACKWARD_COLUMNS)


def summary_checks(summary: pd.DataFrame) -> list[Check]:
    """The checks that read only the summary, one row at a time (rooflow.report.findings.run_checks): roof,
    FLOP ratio and its explanation, timed vs profiled kernels, noise, throttling, predictions, out of memory."""
    return [check for _, run in summary.iterrows() for check in run_checks(run)]


def latency_cause(latency: float, implied: float, low: float, high: float, ops: pd.DataFrame | None
                  ) -> tuple[str, str]:
    """(cause, evidence) of a backward:forward latency ratio outside [low, high], from the measured time per
    layer of the run's profiled iteration (rooflow.measure.optime): the layers whose backward carries the
    excess over ``implied`` × their forward, or "unexplained" where that iteration does not show it."""
    from rooflow.measure.optime import backward_excess

    pace = "under half" if latency > high else "over twice"
    what = f"the backward ran at {pace} the forward's FLOP/s"
    profiled, carriers = backward_excess(ops, implied)
    if profiled is None:
        return (f"unexplained: {what}, and no per-op time of this run was recorded (the timing job records one "
                "profiled iteration; rerun it)"), ""
    if not low <= profiled <= high and (profiled > high) == (latency > high) and carriers:
        named = ", ".join(f"{c['name']} {c['excess_seconds'] * 1e3:+.3g} ms" for c in carriers)
        share = sum(c["share"] for c in carriers if c["share"] is not None)
        evidence = "; ".join(f"{c['name']}: backward {c['backward_seconds'] * 1e3:.3g} ms, forward "
                             f"{c['forward_seconds'] * 1e3:.3g} ms" for c in carriers)
        return (f"{what}; in the profiled iteration (backward/forward {_ratio(profiled)}) the excess over "
                f"{_ratio(implied)} × forward is in {named} ({_share_words(share, 'layers')})"), evidence
    return (f"unexplained: {what} in the timed iterations, but the profiled iteration's ops give backward/forward "
            f"{_ratio(profiled)}, inside [{_ratio(low)}, {_ratio(high)}]: the excess is not in the ops (noise, or "
            f"one-off work in the timing)"), ""


def predicted_latency_cause(latency: float, implied: float, low: float, high: float, run) -> str | None:
    """The time model's account of a backward:forward latency ratio outside [low, high]: where it predicts a
    ratio outside that band on the same side, within ``FB_PREDICTED_FACTOR`` of the measured one, the parts of
    its predicted backward (rooflow.estimate.timemodel: an op class, page faults, the host) that carry the
    excess over ``implied`` × their forward. None where it does not predict the ratio."""
    predicted = run.get("predicted_latency_ratio")
    if not _finite(predicted) or not predicted > 0 or low <= predicted <= high \
            or (predicted > high) != (latency > high) \
            or not 1 / FB_PREDICTED_FACTOR <= latency / predicted <= FB_PREDICTED_FACTOR:
        return None
    try:
        phases = json.loads(run.get("predicted_seconds_by_phase_part") or "{}")
    except (TypeError, ValueError):
        phases = {}
    forward, backward = phases.get("forward") or {}, phases.get("backward") or {}
    sign = 1.0 if latency > high else -1.0  # a slow backward: its excess parts; a fast one: its shortfall
    excess = {part: sign * (backward.get(part, 0.0) - implied * forward.get(part, 0.0))
              for part in set(forward) | set(backward)}
    positive = sorted(((part, value) for part, value in excess.items() if value > 0), key=lambda kv: -kv[1])
    total = sum(value for _, value in positive)
    net = sum(excess.values())  # what the named parts are a share of: other parts may go the other way
    said = (f"the time model predicts it: backward/forward {_ratio(predicted)} (forward "
            f"{run['predicted_forward_seconds'] * 1e3:.3g} ms, backward {run['predicted_backward_seconds'] * 1e3:.3g} ms; "
            f"measured {_ratio(latency)}, {latency / predicted:.2f}x of it)")
    if not total > 0:
        return said
    named, carried = [], 0.0
    for part, value in positive:
        named.append(f"{PART_WORDS.get(part, part)} {sign * value * 1e3:+.3g} ms")
        carried += value
        if carried >= FB_CARRIED_SHARE * total:
            break
    where = "excess over" if sign > 0 else "shortfall under"
    share = f" ({_share_words(carried / net, 'parts')})" if net > 0 else ""
    return f"{said}, its backward's {where} {_ratio(implied)} × forward in {', '.join(named)}{share}"


def _ratio(value: float, decimals: int = 2) -> str:
    """A ratio in words: to `decimals` places, or two significant figures under 0.1 (a frozen backbone's
    backward:forward FLOP ratio, 7e-06, printed as 0.00, made its band "[0.00, 0.00]")."""
    return f"{value:.{decimals}f}" if abs(value) >= 0.1 or value == 0 else f"{value:.2g}"


def _share_words(share: float, others: str) -> str:
    """The named carriers' share of a net excess, in words: over 100% where other carriers go the other way
    (a share printed as "100% of it" of +79 ms had carried a 72 ms excess)."""
    if share > 1.005:
        return f"more than all of it: the other {others} offset {100 * (share - 1):.0f}% of it"
    return f"{100 * share:.0f}% of it"


def forward_backward_checks(table: pd.DataFrame, op_times: dict[tuple, pd.DataFrame] | None = None
                            ) -> list[Check]:
    """The forward:backward FLOP check (once per run) and latency check (per device). ``op_times``: {(device,
    model, batch, precision, mode): measured time per layer of the run's profiled iteration}."""
    out = []
    seen_flops: set[tuple] = set()
    for _, run in table.iterrows():
        implied, estimated = run.get("implied_flops_ratio"), run.get("estimated_matmul_flops_ratio")
        key = tuple(run[k] for k in RUN_KEYS)
        if _finite(implied) and _finite(estimated) and key not in seen_flops \
                and abs(estimated / implied - 1) > FB_FLOPS_TOLERANCE:
            seen_flops.add(key)  # a property of the estimate: once per run, not once per device
            if estimated > 2.0 + (run.get("recomputed_flops_ratio") or 0.0):
                cause = ("backward counted at more than twice the forward: a backward formula that over-counts "
                         "(FlopCounterMode's grouped/depthwise convolution weight gradient ignores `groups`)")
            elif estimated < implied:
                # a table with the implied column counts frozen parameters on both sides already
                frozen = "" if _names(run.get("layers_one_gradient")) or _names(run.get("layers_no_gradient")) \
                    else ", or frozen parameters (requires_grad False)"
                cause = ("backward counted short of the layers: a conv/linear layer counted without its input "
                         f"or weight gradient{frozen}")
            else:
                cause = ("backward counted above what the layers imply: a gradient counted twice, or a layer "
                         "before the first conv/linear layer that has a matmul backward")
            out.append(for_run({**{k: run[k] for k in RUN_KEYS}, "device": ""}, "error", "forward:backward FLOPs",
                               f"backward/forward matmul FLOPs {_ratio(estimated, 3)}",
                               f"{_ratio(implied, 3)} ± {100 * FB_FLOPS_TOLERANCE:.0f}% ({_implied_words(run)})", cause))
        latency = run.get("latency_ratio")
        low, high = run.get("latency_ratio_low"), run.get("latency_ratio_high")
        if _finite(latency) and _finite(low) and _finite(high) and not low <= latency <= high:
            ops = (op_times or {}).get(tuple(run[k] for k in RUN_COLUMNS))
            cause, evidence = latency_cause(latency, implied, low, high, ops)
            modelled = predicted_latency_cause(latency, implied, low, high, run)
            if modelled:  # the time model accounts for it; the profiled ops add what they show
                cause = f"{modelled}; per op: {cause.removeprefix('unexplained: ')}"
            if _finite(run.get("predicted_latency_ratio")):
                evidence = "; ".join(filter(None, [evidence, (
                    f"predicted forward {run['predicted_forward_seconds'] * 1e3:.3g} ms, backward "
                    f"{run['predicted_backward_seconds'] * 1e3:.3g} ms (backward/forward "
                    f"{_ratio(run['predicted_latency_ratio'])})")]))
            out.append(for_run(run, "warning", "forward:backward latency", f"backward/forward time {_ratio(latency)}",
                               f"[{_ratio(low)}, {_ratio(high)}] (implied FLOP ratio "
                               f"{_ratio(run['implied_flops_ratio'], 3)} ÷/× {FB_LATENCY_FACTOR:g})", cause, evidence))
    return out


def _implied_words(run) -> str:
    """How a run's implied backward:forward FLOP ratio comes about, in words."""
    upstream = run.get("trainable_before_first_layer")
    recomputed = run.get("recomputed_flops_ratio")
    again = (f" + {recomputed:.3f}: the forward matmuls activation checkpointing runs again in backward"
             if _finite(recomputed) and recomputed > 0 else "")
    apart = run.get("layers_apart")
    apart = (f"; nn.Bilinear layers {apart} apart on both sides (three operands' gradients, and their loop's muls)"
             if isinstance(apart, str) and apart else "")
    one, none = (_names(run.get("layers_one_gradient")), _names(run.get("layers_no_gradient")))
    first = run.get("first_layer")
    if (one or none) and not (one == [first] and not none):  # more than the first layer's input goes without
        fewer = "; ".join(filter(None, [
            f"one in {_listed(one)}" if one else "", f"none in {_listed(none)}" if none else ""]))
        return (f"each forward product's FLOPs once per operand that takes a gradient: two, but {fewer}"
                f"{again}{apart}")
    if isinstance(upstream, str) and upstream:
        return (f"2: {upstream} runs before the first matmul layer {first}, which therefore "
                f"computes its input gradient too{again}{apart}")
    return f"2 − first layer {first}'s share {run.get('first_layer_share'):.3f}{again}{apart}"


def _names(text) -> list[str]:
    return [name for name in text.split(", ") if name] if isinstance(text, str) else []


def _listed(names: list[str], shown: int = 3) -> str:
    """Layer names in a sentence: all of a few, or the first few and how many."""
    if len(names) <= shown:
        return ", ".join(names)
    return f"{len(names)} layers ({', '.join(names[:shown])}, …)"


def estimate_checks(totals: dict[tuple, dict]) -> list[Check]:
    """Ops with no formula in the estimator: their FLOPs are missing from the estimate, never silently."""
    out = []
    for key, total in sorted(totals.items()):
        unsupported = total.get("unsupported_ops") or {}
        if unsupported:
            run = dict(zip(RUN_KEYS, key), device="")
            names = ", ".join(sorted(unsupported))
            out.append(for_run(run, "warning", "uncounted ops", f"{len(unsupported)} op(s) without a formula",
                               "every op counted", f"no FLOP formula for {names}: the estimate is a lower bound"))
    return out


def ceilings_checks(ceilings: dict[str, dict], datasheet_dram: dict[str, float | None] | None = None
                    ) -> list[Check]:
    """One error per measured cache roof at or below its DRAM roof. ``ceilings``: {device key: its
    measure_ceilings JSON}; ``datasheet_dram``: {device key: datasheet DRAM bytes/s}, where known. The row
    concerns the device, not a run: model "(ceilings)", batch 0."""
    from rooflow.hardware.roofs import invalid_cache_roofs

    out = []
    for device, result in sorted(ceilings.items()):
        for level, why in invalid_cache_roofs(result, (datasheet_dram or {}).get(device)).items():
            value, floor = why.get("bytes_per_second"), why.get("dram_bytes_per_second")
            run = {"device": device, "model": "(ceilings)", "batch": 0, "precision": "", "mode": ""}
            out.append(for_run(
                run, "error", "cache roof at or below DRAM",
                f"{level.upper()} {value / 1e9:.0f} GB/s" if _finite(value) else level.upper(),
                f"> {why.get('dram_source', 'measured')} DRAM {floor / 1e9:.0f} GB/s" if _finite(floor) else "> DRAM",
                f"{why.get('reason', 'a failed cache measurement')}; re-measure with `rooflow ceilings` on the device "
                "(its L2 test reads an L2-resident buffer many times per kernel)", label=f"{device} {level.upper()} ceiling"))
        out += theoretical_roof_checks(device, result)
    return out


def guard_checks(outputs: dict[str, dict[str, Any]]) -> list[Check]:
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
            out.append(for_run(run, record.get("severity", "error"), record["check"], str(record.get("value", "")),
                               str(record.get("expected", "")), record.get("cause", ""),
                               json.dumps(record.get("evidence") or {}, sort_keys=True, default=str),
                               label=None if "model" in data else f"{run['device']} ceilings"))
    return out


def theoretical_roof_checks(device: str, ceilings: dict) -> list[Check]:
    """One warning per theoretical compute roof (a CPU's cores × clock × FLOP/cycle) below the roof the
    ceilings job measured: a "theoretical" roof the machine beats is not a roof."""
    out = []
    theory = ceilings.get("theoretical") or {}
    measured = ceilings.get("peak_flops_per_second") or {}
    for key, peak in sorted((ceilings.get("theoretical_peak_flops_per_second") or {}).items()):
        reached = measured.get(key)
        if not (_finite(peak) and _finite(reached) and reached > peak):
            continue
        clock = theory.get("clock_hz")
        why = ("the clock was measured under load, so the microarchitecture does more FP32 FLOP per cycle than "
               f"assumed ({theory.get('fp32_flops_per_cycle_per_core')} for {theory.get('microarchitecture')}), "
               "or the clock rose after it was measured" if theory.get("clock_measured") else
               f"the cores ran above the {clock / 1e9:.3g} GHz it assumes (turbo: /proc/cpuinfo gives the nominal "
               "clock, and no clock was measured under load here)" if _finite(clock) else
               "the clock or FLOP/cycle it assumes is too low")
        run = {"device": device, "model": "(ceilings)", "batch": 0, "precision": key, "mode": ""}
        out.append(for_run(run, "warning", "theoretical roof below a measured one",
                           f"measured {key.upper()} {reached / 1e9:.4g} GFLOP/s = {100 * reached / peak:.0f}% of "
                           f"the theoretical {peak / 1e9:.4g} GFLOP/s", "≤ 100% of the theoretical roof",
                           f"{why}; the theoretical roof is not a roof here: read the runs against the measured "
                           "one (dashed)", theory.get("basis") or "", label=f"{device} theoretical {key.upper()} roof"))
    return out


def check_records(summary: pd.DataFrame, totals: dict[tuple, dict] | None = None,
                  layers: dict[tuple, pd.DataFrame] | None = None, ceilings: dict[str, dict] | None = None,
                  datasheet_dram: dict[str, float | None] | None = None,
                  op_times: dict[tuple, pd.DataFrame] | None = None, guards: dict[str, dict] | None = None
                  ) -> tuple[list[Check], pd.DataFrame]:
    """(every failed check as a record, forward:backward table): errors first, then warnings, then results;
    within each, by run. ``ceilings``/``datasheet_dram``: see :func:`ceilings_checks`; ``op_times``: see
    :func:`forward_backward_checks`; ``guards``: job outputs with guard records, see :func:`guard_checks`."""
    totals, layers = totals or {}, layers or {}
    fb = forward_backward_table(summary, totals, layers)
    records = summary_checks(summary) + forward_backward_checks(fb, op_times) + estimate_checks(totals) + \
        ceilings_checks(ceilings or {}, datasheet_dram) + guard_checks(guards or {})
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    records.sort(key=lambda c: (rank[c.severity], c.device, c.model, c.batch, c.precision, c.mode, c.check))
    return records, fb


def build_checks(summary: pd.DataFrame, totals: dict[tuple, dict] | None = None,
                 layers: dict[tuple, pd.DataFrame] | None = None, ceilings: dict[str, dict] | None = None,
                 datasheet_dram: dict[str, float | None] | None = None,
                 op_times: dict[tuple, pd.DataFrame] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(checks table, forward:backward table): :func:`check_records` as one row per failed check
    (:data:`CHECK_COLUMNS`)."""
    records, fb = check_records(summary, totals, layers, ceilings, datasheet_dram, op_times)
    return checks_frame(records), fb


def flagged_runs(checks: pd.DataFrame) -> dict[tuple, str]:
    """{(device, model, batch, precision, mode, variant): worst severity} of the runs a check flagged on a
    device (estimate-only checks, with no device and no variant, flag that run on every device and variant;
    a checks table written before variants flags eager runs)."""
    out: dict[tuple, str] = {}
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    for _, row in checks.iterrows():
        device = row["device"] if isinstance(row["device"], str) else ""
        variant = row.get("variant")
        variant = variant if isinstance(variant, str) and variant else ("eager" if device else "")
        key = (device, row["model"], int(row["batch"]), row["precision"], row["mode"], variant if device else "")
        if key not in out or rank[row["severity"]] < rank[out[key]]:
            out[key] = row["severity"]
    return out


def severity_of(flags: dict[tuple, str], device: str, model: str, batch: int, precision: str, mode: str,
                variant: str | None = "eager") -> str | None:
    """The worst flag on a run on `device` as `variant` ran it, counting estimate-only flags (device '') too."""
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    variant = variant if isinstance(variant, str) and variant else "eager"
    found = [flags.get((d, model, int(batch), precision, mode, variant if d else "")) for d in (device, "")]
    found = [f for f in found if f]
    return min(found, key=rank.__getitem__) if found else None


# what an estimate folder's MODEL/bBATCH-PRECISION-MODE/totals.json is
TOTALS_FILE = "an estimate's totals (the totals.json the workflow's estimate_model step writes)"


def load_estimates(totals_paths, layers_paths=()) -> tuple[dict[tuple, dict], dict[tuple, pd.DataFrame]]:
    """The estimator's totals.json (every run) and layers.csv (training runs: the forward:backward check
    needs them), keyed by (model, batch, precision, mode). `layers_paths` pairs with `totals_paths`."""
    totals: dict[tuple, dict] = {}
    layers: dict[tuple, pd.DataFrame] = {}
    layers_paths = list(layers_paths) or [None] * len(list(totals_paths))
    for totals_path, layers_path in zip(totals_paths, layers_paths):
        total = read_json_object(totals_path, TOTALS_FILE)
        missing = [k for k in RUN_KEYS if k not in total]
        if missing:  # another JSON in the estimate folder: a KeyError traceback
            raise RooflowError(f"{totals_path}: not {TOTALS_FILE}: no {', '.join(missing)}; write it again "
                               f"(`snakemake --forcerun estimate_model`), or move it out of the estimate folder")
        key = (total["model"], int(total["batch"]), total["precision"], total["mode"])
        totals[key] = total
        if layers_path and total["mode"] == "training":
            layers[key] = _read_layers(layers_path)
    return totals, layers


# what an estimate folder's MODEL/bBATCH-PRECISION-MODE/layers.csv is, and the columns the checks read of it
LAYERS_FILE = "an estimate's per-layer table (the layers.csv the workflow's estimate_model step writes)"
LAYERS_COLUMNS = ("layer", "forward_matmul_flops")


def _read_layers(path: str | Path) -> pd.DataFrame:
    """A training run's layers.csv; an empty, binary or foreign one (a traceback, or the forward:backward check
    skipped without a word) ends in one sentence naming it."""
    why = None
    try:
        table = pd.read_csv(path)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as error:
        why = ("empty" if isinstance(error, pd.errors.EmptyDataError) else
               "not a CSV table (not text)" if isinstance(error, UnicodeDecodeError) else
               "not a CSV table (its lines do not parse as CSV)")
    else:
        if absent := [c for c in LAYERS_COLUMNS if c not in table]:
            why = f"no {', '.join(absent)} column"
    if why:
        raise RooflowError(f"{path}: not {LAYERS_FILE}: {why}; write it again (`snakemake --forcerun estimate_model`), "
                           f"or move it out of the estimate folder")
    return table


def check_files(summary_path: str | Path, totals_paths=(), layers_paths=(), ceilings_paths=(),
                devices_file: str | Path | None = None, timings_paths=(), guard_paths=()
                ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """build_checks over a workflow's files (:func:`check_file_records`, as tables)."""
    records, fb = check_file_records(summary_path, totals_paths, layers_paths, ceilings_paths, devices_file,
                                     timings_paths, guard_paths)
    return checks_frame(records), fb


# what a profile folder's DEVICE/MODEL/bBATCH-PRECISION-MODE/timing.json is
TIMING_FILE = "a timing record (the timing.json the workflow's timing step writes)"


def load_op_times(timings_paths) -> dict[tuple, pd.DataFrame]:
    """{(device, model, batch, precision, mode): measured time per layer} from the timing records that hold
    one (rooflow.measure.optime)."""
    from rooflow.measure.optime import from_record

    out = {}
    for path in timings_paths:
        record = read_json_object(path, TIMING_FILE)
        rows = record.get("op_times")
        if rows is not None and not (isinstance(rows, list) and all(
                isinstance(row, dict) and {"layer", "layer_type", "phase", "seconds"} <= set(row) for row in rows)):
            raise RooflowError(f"{path}: not {TIMING_FILE}: its op_times is not a list of {{layer, layer_type, phase, "
                               f"seconds}}; time the run again (`snakemake --forcerun profile_time`), or move it out of "
                               f"the profile folder")
        if rows and record.get("device"):
            key = (record["device"], record["model"], int(record["batch"]), record["precision"], record["mode"])
            out[key] = from_record(record)
    return out


def _read_ceilings(path: str | Path) -> dict[str, Any]:
    """A measured ceilings JSON of the results tree; a foreign or hand-broken one (a list, a string roof: a
    traceback in the checks) ends in one sentence naming it."""
    from rooflow.hardware.devices import CEILINGS_FILE, ceilings_roofs_problem

    ceilings = read_json_object(path, CEILINGS_FILE)
    problem = ceilings_roofs_problem(ceilings)
    if problem:
        raise RooflowError(f"ceilings file {path}: {problem}: measure it again (`rooflow ceilings --device "
                           f"{Path(path).stem} --output {path}` on that device), or move it out of the ceilings folder")
    return ceilings


def check_file_records(summary_path: str | Path, totals_paths=(), layers_paths=(), ceilings_paths=(),
                       devices_file: str | Path | None = None, timings_paths=(), guard_paths=()
                       ) -> tuple[list[Check], pd.DataFrame]:
    """check_records over a workflow's files: results/summary.csv, the estimate's totals/layers, the measured
    ceilings (results/ceilings/{device}.json: the device is the file's stem) with the catalogue's datasheet
    DRAM roofs where `devices_file` is given, the timing records (their measured time per layer) and the ncu
    aggregates (ncu.json), whose guard records become checks."""
    totals, layers = load_estimates(totals_paths, layers_paths)
    ceilings = {Path(p).stem: _read_ceilings(p) for p in ceilings_paths}
    datasheet_dram = None
    if devices_file:  # read even with no ceilings to compare: a foreign file given passed without a word
        from rooflow.hardware.devices import load_devices

        datasheet_dram = {k: d.dram_bytes_per_second for k, d in load_devices(devices_file).items()}
    guards = {str(p): read_json(p) for p in guard_paths}
    return check_records(read_summary(summary_path), totals, layers, ceilings, datasheet_dram,
                         load_op_times(timings_paths), guards)


def records_path(summary_path: str | Path) -> Path:
    """Where the workflow writes the checks as records: results/checks/checks.json beside results/summary.csv."""
    return Path(summary_path).parent / "checks" / "checks.json"

