"""Figures: the roofline of one device with every run as a labelled point, and the cost bar charts.

Conventions for every figure: labelled axes with units, a legend, readable at report size, SVG. Roofs:
datasheet solid, measured dashed; each compute roof joins its memory roof at the ridge in ONE line.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import EngFormatter  # noqa: E402

from rooflow.devices import Device  # noqa: E402
from rooflow.roofline import intensity_range, roof_polyline  # noqa: E402

MARKERS = ["o", "s", "^", "D", "v", "P", "X", "<", ">", "h", "*", "p", "8", "H", "d"]
MODE_SHORT = {"inference": "inf", "training": "train"}
ROOF_COLOURS = {"fp64": "#7f7f7f", "fp32": "#1f77b4", "tf32": "#2ca02c", "fp16": "#d62728",
                "bf16": "#9467bd", "fp8": "#8c564b", "fp64_tensor": "#bcbd22"}
MEMORY_STYLES = {"dram": "-", "l2": (0, (5, 1)), "l1": (0, (1, 1))}


def model_markers(models) -> dict[str, str]:
    """One marker per model, stable across figures (sorted names)."""
    return {m: MARKERS[i % len(MARKERS)] for i, m in enumerate(sorted(set(models)))}


def batch_colours(batches) -> dict[int, tuple]:
    palette = plt.get_cmap("viridis")
    ordered = sorted(set(int(b) for b in batches))
    return {b: palette(0.15 + 0.7 * i / max(1, len(ordered) - 1)) for i, b in enumerate(ordered)}


def point_label(row) -> str:
    return f"{row['model']} b{row['batch']} {row['precision']} {MODE_SHORT.get(row['mode'], row['mode'])}"


def _roofs(device: Device):
    """(compute roofs, memory roofs) to draw: the datasheet ones and the measured ones."""
    roofs = device.roofs()
    return [r for r in roofs if r.kind == "compute"], [r for r in roofs if r.kind == "memory"]


def _gap_label(roof, roofs) -> str:
    """'measured FP32 1.1 TFLOP/s (87% of datasheet)' where a datasheet roof of the same name exists."""
    unit = "FLOP/s" if roof.kind == "compute" else "B/s"
    text = f"{roof.source} {roof.precision_or_level.upper()} {EngFormatter(unit=unit, places=3)(roof.value)}"
    if roof.source == "measured":
        twin = [r for r in roofs if r.source == "datasheet" and r.kind == roof.kind
                and r.precision_or_level == roof.precision_or_level]
        if twin:
            text += f" ({100 * roof.value / twin[0].value:.0f}% of datasheet)"
    return text


def roofline_figure(summary: pd.DataFrame, device: Device, path: str | Path) -> dict:
    """Draw one device's roofline with its runs; return what was drawn (for tests and captions)."""
    rows = summary[(summary["device"] == device.key) & summary["arithmetic_intensity"].notna()
                   & summary["achieved_flops_per_second"].notna()].copy()
    compute, memory = _roofs(device)
    fig, ax = plt.subplots(figsize=(10, 7), layout="constrained")
    drawn = {"roofs": [], "points": [], "flagged": []}
    dram = {r.source: r for r in memory if r.precision_or_level == "dram"}
    ridges = [c.value / m.value for c in compute for m in memory]
    x_min, x_max = intensity_range(rows["arithmetic_intensity"], ridges)
    precisions = set(rows["precision"]) | {"fp32"}
    wanted = {"fp32": "fp32", "tf32": "tf32", "fp16": "fp16", "bf16": "bf16"}
    for roof in compute:
        # Draw the roofs that can bound these runs (fp32 always; tf32/fp16/bf16 when such runs exist; fp64 shown
        # only for reference where nothing else is known).
        if roof.precision_or_level not in {wanted.get(p) for p in precisions}:
            continue
        mem = dram.get(roof.source) or next(iter(dram.values()), None)
        if mem is None:
            continue
        xs, ys = roof_polyline(roof.value, mem.value, x_min, x_max)
        style = "-" if roof.source == "datasheet" else "--"
        colour = ROOF_COLOURS.get(roof.precision_or_level, "black")
        ax.plot(xs, ys, linestyle=style, color=colour, linewidth=2.2 if roof.source == "datasheet" else 1.8,
                label=f"{_gap_label(roof, compute)} with {_gap_label(mem, memory)} (ridge at "
                      f"{roof.value / mem.value:.3g} FLOP/B)")
        drawn["roofs"].append({"compute": roof.name, "memory": mem.name, "ridge": roof.value / mem.value,
                               "xs": xs.tolist(), "ys": ys.tolist(), "style": style})
    # Cache roofs (L2/L1) under the top drawn fp32-or-run-precision compute roof.
    top = max((r for r in compute if r.precision_or_level in {wanted.get(p) for p in precisions}),
              key=lambda r: r.value, default=None)
    for mem in memory:
        if mem.precision_or_level == "dram" or top is None:
            continue
        xs, ys = roof_polyline(top.value, mem.value, x_min, x_max)
        ax.plot(xs, ys, linestyle=MEMORY_STYLES.get(mem.precision_or_level, ":"), color="#555555", linewidth=1.2,
                label=f"{_gap_label(mem, memory)} roof")
        drawn["roofs"].append({"compute": top.name, "memory": mem.name, "ridge": top.value / mem.value,
                               "xs": xs.tolist(), "ys": ys.tolist(), "style": "cache"})

    markers = model_markers(summary["model"])
    colours = batch_colours(summary["batch"]) if len(summary) else {}
    for _, row in rows.iterrows():
        x, y = row["arithmetic_intensity"], row["achieved_flops_per_second"]
        flagged = isinstance(row.get("checks"), str) and "above the roof" in row["checks"]
        filled = row["mode"] == "training"
        colour = colours.get(int(row["batch"]), "black")
        ax.scatter([x], [y], marker=markers[row["model"]], s=90, zorder=5,
                   facecolors=colour if filled else "white", edgecolors=colour, linewidths=1.8,
                   label=point_label(row))
        attainable = row.get("attainable_flops_per_second")
        if attainable and not math.isnan(attainable):
            # The point's AI line up to the roof: the gap is the headroom at this intensity.
            ax.plot([x, x], [y, attainable], linestyle=":", color=colour, linewidth=1.2, zorder=4)
            ax.scatter([x], [attainable], marker="_", s=120, color=colour, zorder=5)
        if flagged:
            ax.scatter([x], [y], marker="o", s=320, facecolors="none", edgecolors="red", linewidths=2.2, zorder=6)
            drawn["flagged"].append(point_label(row))
        ax.annotate(point_label(row), (x, y), textcoords="offset points", xytext=(7, -11), fontsize=8)
        drawn["points"].append({"label": point_label(row), "x": x, "y": y, "attainable": attainable})

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_min, x_max)
    ys_all = [p["y"] for p in drawn["points"]] + [v for r in drawn["roofs"] for v in r["ys"]]
    if ys_all:
        ax.set_ylim(10 ** math.floor(math.log10(min(ys_all)) - 0.3), 10 ** math.ceil(math.log10(max(ys_all)) + 0.2))
    ax.set_xlabel("Arithmetic intensity [FLOP/byte]")
    ax.set_ylabel("Performance [FLOP/s]")
    ax.yaxis.set_major_formatter(EngFormatter(unit="FLOP/s"))
    ax.grid(True, which="major", alpha=0.35)
    ax.grid(True, which="minor", alpha=0.1)
    roof_note = "datasheet roofs solid, measured dashed" if any(r.source == "datasheet" for r in compute) \
        else "measured roofs (no datasheet for this device)"
    ax.set_title(f"Roofline: {device.name} ({device.key}) — {roof_note}\n"
                 "filled marker = training step, hollow = inference; colour = batch size; "
                 "dotted line = headroom to the roof", fontsize=10)
    if not rows.empty or drawn["roofs"]:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    if rows.empty:
        ax.text(0.5, 0.5, "no measured runs on this device", transform=ax.transAxes, ha="center")
    fig.savefig(path)
    plt.close(fig)
    return drawn


def _per_model(summary: pd.DataFrame) -> pd.DataFrame:
    """FLOPs per image (forward and training step) and parameters per model, from the summary."""
    frame = summary.dropna(subset=["estimated_flops"]).copy()
    frame["flops_per_image"] = frame["estimated_flops"] / frame["batch"]
    per_image = frame.groupby(["model", "mode"])["flops_per_image"].median().unstack("mode")
    params = frame.groupby("model")["params"].first()
    return per_image.join(params)


def flops_figure(summary: pd.DataFrame, path: str | Path) -> pd.DataFrame:
    data = _per_model(summary).sort_values("params")
    modes = [m for m in ("inference", "training") if m in data.columns]
    fig, ax = plt.subplots(figsize=(9, 5.5), layout="constrained")
    width = 0.8 / max(1, len(modes))
    positions = np.arange(len(data))
    for i, mode in enumerate(modes):
        bars = ax.bar(positions + (i - (len(modes) - 1) / 2) * width, data[mode] / 1e9, width,
                      label={"inference": "inference (forward)", "training": "training step "
                             "(forward + loss + backward + SGD)"}[mode])
        ax.bar_label(bars, fmt="%.3g", fontsize=7, padding=2)
    ax.set_xticks(positions, data.index, rotation=30, ha="right")
    ax.set_ylabel("Estimated work per image [GFLOP] (1 FMA = 2 FLOP)")
    ax.set_xlabel("Model (sorted by parameter count)")
    ax.set_title("Analytic FLOPs per image, by model and mode")
    ax.legend()
    fig.savefig(path)
    plt.close(fig)
    return data


def params_figure(summary: pd.DataFrame, path: str | Path) -> pd.DataFrame:
    data = _per_model(summary).sort_values("params")
    fig, ax = plt.subplots(figsize=(9, 5.5), layout="constrained")
    bars = ax.bar(data.index, data["params"] / 1e6, color="#4c72b0")
    ax.bar_label(bars, fmt="%.3g", fontsize=8, padding=2)
    ax.set_xticks(range(len(data)), data.index, rotation=30, ha="right")
    ax.set_ylabel("Parameters [millions]")
    ax.set_xlabel("Model (sorted by parameter count)")
    ax.set_title("Trainable parameters per model")
    fig.savefig(path)
    plt.close(fig)
    return data


