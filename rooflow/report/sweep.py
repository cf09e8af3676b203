"""A device's roofline at sweep scale: hundreds of runs (models × batches × precisions × modes) as small
multiples, one panel per precision × mode, instead of one crowded plot with a numbered key.

Encodings (one legend per figure, built from the runs it draws): colour + marker = model, unique within the
figure for up to len(MODEL_COLOURS) × len(SWEEP_MARKERS) = 130 models (10 colours against 13 markers: the
pair repeats only after their least common multiple); marker size = batch; filled = training, hollow =
inference; a thin line joins one model's batches in a panel. Only flagged runs and the outliers of each
panel (the runs furthest from the panel's median share of the roof) are labelled, and only where the label
collides with no other label and no marker (rooflow.report.plots._place_labels); the rest are named on
hover in the interactive roofline (rooflow.report.interactive).
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from rooflow.hardware.devices import MATMUL_ROOF, Device
from rooflow.report.plots import (
    FLAG_STYLES,
    _ok,
    _place_labels,
    _roof_legend,
    fill_handles,
    ring_handles,
    roof_lines,
    roofline_figure,
)

# Above this many runs on one device, its roofline is drawn as small multiples: the detailed figure names
# every point in a key beside the plot, which stays readable to about this many entries.
SWEEP_POINTS = 40
MODEL_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                 "#bcbd22", "#17becf"]
SWEEP_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "<", ">", "h", "*", "p", "d"]
# Labels per panel besides the flagged runs: the runs furthest from the panel's median share of the roof.
OUTLIERS_PER_PANEL = 3
# Label positions tried around a point (points): near ones only, a sweep panel has no room for long leaders.
SWEEP_RADII = (6, 10, 15, 22, 30, 40)
MODE_ORDER = {"inference": 0, "training": 1}


def model_styles(models) -> dict[str, tuple[str, str]]:
    """{model: (colour, marker)} over the sorted models of one figure: distinct pairs for up to 130 models."""
    return {m: (MODEL_COLOURS[i % len(MODEL_COLOURS)], SWEEP_MARKERS[i % len(SWEEP_MARKERS)])
            for i, m in enumerate(sorted(set(models)))}


def batch_sizes(batches) -> dict[int, float]:
    """{batch: marker area in points²}: small batches small."""
    ordered = sorted({int(b) for b in batches})
    return {b: 22 + 58 * i / max(1, len(ordered) - 1) for i, b in enumerate(ordered)}


def measured_points(summary: pd.DataFrame, device: str) -> pd.DataFrame:
    """The runs a device's roofline places: measured on `device`, with an intensity and a FLOP rate."""
    return summary[(summary["device"] == device) & summary["arithmetic_intensity"].notna()
                   & summary["achieved_flops_per_second"].notna()].copy()


def device_roofline(summary: pd.DataFrame, device: Device, path: str | Path, flags: dict | None = None,
                    hierarchy: pd.DataFrame | None = None, extra_roofs=(), keep_open: bool = False) -> dict:
    """The device's roofline: the detailed figure (every run numbered, cache levels, estimates) up to
    SWEEP_POINTS runs, small multiples beyond."""
    if len(measured_points(summary, device.key)) > SWEEP_POINTS:
        return sweep_roofline_figure(summary, device, path, flags=flags, extra_roofs=extra_roofs,
                                     keep_open=keep_open)
    return roofline_figure(summary, device, path, flags=flags, hierarchy=hierarchy, extra_roofs=extra_roofs,
                           keep_open=keep_open)


def _panel_roofs(lines: list[dict], precision: str) -> list[dict]:
    """The DRAM-joined roof lines a precision's panel draws: its own matmul roof (FP16/BF16 drawn as one
    line) and FP32 for reference; every compute roof where the device has none for this precision."""
    key = MATMUL_ROOF.get(precision, "fp32")
    dram = [line for line in lines if line["memory_level"] == "dram"]
    own = [line for line in dram if line["compute_key"] == key
           or (key == "bf16" and "BF16" in line["compute"])]
    if not own:
        return dram
    return own + [line for line in dram if line["compute_key"] == "fp32" and line not in own]


def _outliers(panel: pd.DataFrame, count: int) -> list:
    """Index of the `count` runs furthest (in log share of the roof) from the panel's median."""
    share = panel["percent_of_roofline"].where(panel["percent_of_roofline"] > 0)
    if share.notna().sum() < 3:
        return []
    distance = (np.log10(share) - np.log10(share.median())).abs().dropna()
    return list(distance.sort_values(ascending=False, kind="stable").index[:count])


def sweep_roofline_figure(summary: pd.DataFrame, device: Device, path: str | Path, flags: dict | None = None,
                          extra_roofs=(), keep_open: bool = False) -> dict:
    """Draw one device's runs as small multiples (rows: precisions, columns: modes) on shared log axes;
    return what was drawn: per panel its points (label, x, y, colour, marker, size, severity) and labels
    (text, dropped), the roofs, the legend's entries. ``flags``: rooflow.report.checks.flagged_runs.
    ``keep_open``: also return the figure and, per panel, its axes and label artists; the caller closes it."""
    from rooflow.report.checks import severity_of

    rows = measured_points(summary, device.key)
    precisions = sorted(set(rows["precision"]))
    modes = sorted(set(rows["mode"]), key=lambda m: (MODE_ORDER.get(m, 2), m))
    styles = model_styles(rows["model"])
    sizes = batch_sizes(rows["batch"])
    all_roofs = [*device.roofs(), *extra_roofs]
    ridges = [c.value / m.value for c in all_roofs if c.kind == "compute" for m in all_roofs if m.kind == "memory"]
    # a decade's margin would leave most of a panel empty: half a decade beyond the points and the ridges
    intensities = [v for v in [*rows["arithmetic_intensity"], *ridges] if _ok(v)] or [1.0]
    x_min, x_max = min(intensities) / 3, max(intensities) * 3
    lines = roof_lines(device, x_min, x_max, extra_roofs=extra_roofs)

    n_rows, n_cols = max(1, len(precisions)), max(1, len(modes))
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(3.4 + 6.0 * n_cols, 1.6 + 4.3 * n_rows), squeeze=False,
                             sharex=True, sharey=True, layout="constrained")
    drawn: dict = {"panels": [], "roofs": [], "points": [], "flagged": [], "levels": [], "estimates": []}
    roof_handles: dict[str, Line2D] = {}
    severities: set[str] = set()
    pending = []
    for r, precision in enumerate(precisions or ["fp32"]):
        for c, mode in enumerate(modes or ["inference"]):
            ax = axes[r, c]
            panel = rows[(rows["precision"] == precision) & (rows["mode"] == mode)]
            for line in _panel_roofs(lines, precision):
                (handle,) = ax.plot(line["xs"], line["ys"], linestyle=line["linestyle"], color=line["colour"],
                                    linewidth=1.8, zorder=3)
                roof_handles.setdefault(line["label"], Line2D([], [], linestyle=line["linestyle"],
                                                              color=line["colour"], linewidth=1.8,
                                                              label=line["label"]))
            points, obstacles, candidates = [], [], []
            for model, group in panel.sort_values("batch").groupby("model", sort=True):
                colour, marker = styles[model]
                if len(group) > 1:  # one model's batch sizes, joined: the batch trend at a glance
                    ax.plot(group["arithmetic_intensity"], group["achieved_flops_per_second"], color=colour,
                            linewidth=0.8, alpha=0.45, zorder=4)
                area = [sizes[int(b)] for b in group["batch"]]
                filled = mode == "training"
                ax.scatter(group["arithmetic_intensity"], group["achieved_flops_per_second"], s=area,
                           marker=marker, facecolors=colour if filled else "white", edgecolors=colour,
                           linewidths=1.3, zorder=5)
                for (index, row), size in zip(group.iterrows(), area):
                    x, y = row["arithmetic_intensity"], row["achieved_flops_per_second"]
                    severity = severity_of(flags or {}, device.key, model, int(row["batch"]), precision, mode,
                                           row.get("variant"))
                    label = f"{model} b{int(row['batch'])}"
                    if severity:
                        style = FLAG_STYLES[severity]
                        ax.scatter([x], [y], marker="o", s=size * 3.2, facecolors="none", edgecolors=style["color"],
                                   linewidths=1.6, linestyle=style["linestyle"], zorder=6)
                        severities.add(severity)
                        drawn["flagged"].append({"label": f"{label} {precision} {mode}", "severity": severity})
                    obstacles.append((x, y, size * 3.2 if severity else size))
                    point = {"index": index, "label": label, "model": model, "batch": int(row["batch"]),
                             "precision": precision, "mode": mode, "x": x, "y": y, "colour": colour,
                             "marker": marker, "size": size, "filled": filled, "severity": severity}
                    points.append(point)
                    if severity:
                        candidates.append((0 if severity == "error" else 1, point))
            for index in _outliers(panel, OUTLIERS_PER_PANEL):
                point = next(p for p in points if p["index"] == index)
                if not point["severity"]:
                    candidates.append((2, point))
            labels = [{"x": p["x"], "y": p["y"], "text": p["label"], "fontsize": 8.5, "colour": "#222222"}
                      for _, p in sorted(candidates, key=lambda kp: kp[0])]
            pending.append((ax, labels, obstacles))
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.grid(True, which="major", alpha=0.35)
            ax.set_title(f"{precision}, {mode}: {len(panel)} runs, {panel['model'].nunique()} models", fontsize=11)
            if c == 0:
                ax.set_ylabel("Performance [FLOP/s]")
            if r == n_rows - 1:
                ax.set_xlabel("Arithmetic intensity [FLOP/byte]")
            drawn["panels"].append({"precision": precision, "mode": mode, "points": points, "ax": ax})
            drawn["points"] += points

    from matplotlib.ticker import EngFormatter

    axes[0, 0].yaxis.set_major_formatter(EngFormatter(unit="FLOP/s"))
    axes[0, 0].set_xlim(x_min, x_max)
    ys = [p["y"] for p in drawn["points"]] + [v for line in lines for v in line["ys"]]
    ys = [v for v in ys if _ok(v)]
    if ys:
        axes[0, 0].set_ylim(10 ** (math.floor(math.log10(min(ys))) - 0.2), 10 ** (math.ceil(math.log10(max(ys))) + 0.2))
    drawn["roofs"] = [{k: v for k, v in line.items() if k not in ("xs", "ys")} for line in lines
                      if line["label"] in roof_handles]
    solid = sorted({r.source for r in all_roofs if r.source != "measured"})
    roof_note = f"{' and '.join(solid)} roofs solid, measured dashed" if solid else "measured roofs dashed"
    fig.suptitle(f"Roofline: {device.name} ({device.key}), {len(rows)} runs — one panel per precision × mode\n"
                 f"colour + marker = model, size = batch; {roof_note}; labelled: flagged runs and outliers",
                 fontsize=12)

    # One legend per figure, from what it draws: the models, the batch sizes, the fill, the rings; the
    # roofs under the panels.
    handles = [Line2D([], [], linestyle="", marker=marker, color=colour, markersize=7.5, label=model)
               for model, (colour, marker) in styles.items()]
    handles += [Line2D([], [], linestyle="", marker="o", color="#555555", markerfacecolor="white",
                       markersize=math.sqrt(area), label=f"batch {b}") for b, area in sizes.items()]
    handles += fill_handles(modes, size=7.5) + ring_handles(severities)
    per_column = max(12, int((1.6 + 4.3 * n_rows) * 72 / 17))  # entries that fit the figure's height
    legend = fig.legend(handles=handles, loc="outside right upper", frameon=False, fontsize=9,
                        ncols=1 + (len(handles) - 1) // per_column, title="model (colour + marker)")
    _roof_legend(fig, list(roof_handles.values()))
    roofs_legend = fig.legends[-1]
    drawn["legend"] = [t.get_text() for t in legend.get_texts()]
    drawn["legend_handles"] = handles
    if rows.empty:
        axes[0, 0].text(0.5, 0.5, "no measured runs on this device", transform=axes[0, 0].transAxes, ha="center")

    # The layout is final before labels are placed: labels are fitted in pixels, and must not move after.
    fig.draw_without_rendering()
    fig.set_layout_engine("none")
    drawn["labels"] = []
    for (ax, labels, obstacles), panel in zip(pending, drawn["panels"]):
        panel["label_artists"] = _place_labels(ax, labels, obstacles, radii=SWEEP_RADII, drop_crowded=True,
                                                laid_out=True)
        panel["labels"] = [{"text": lbl["text"], "dropped": lbl.get("dropped", False)} for lbl in labels]
        drawn["labels"] += panel["labels"]
    fig.savefig(path)
    if keep_open:
        drawn["figure"], drawn["legends"] = fig, [legend, roofs_legend]
    else:
        plt.close(fig)
        for panel in drawn["panels"]:
            panel.pop("ax")
            panel.pop("label_artists")
    return drawn


# Twenty torchvision models: the README picture's and the tests' sweep (relabelled_sweep).
SWEEP_MODELS = ("alexnet", "convnext_tiny", "densenet121", "efficientnet_b0", "googlenet", "inception_v3",
                "mnasnet1_0", "mobilenet_v2", "mobilenet_v3_large", "regnet_y_400mf", "resnet18", "resnet50",
                "resnext50_32x4d", "shufflenet_v2_x1_0", "squeezenet1_0", "swin_t", "vgg11", "vgg16", "vit_b_16",
                "wide_resnet50_2")


# Columns of a real row that a relabelled run cannot keep (they belong to the real run's own time or roofs).
STALE_COLUMNS = ("forward_seconds", "backward_seconds", "predicted_seconds", "measured_over_predicted",
                 "attainable_flops_per_second_measured_roof", "percent_of_measured_roofline", "kernel_seconds",
                 "memcpy_seconds", "measured_tensor_flops", "estimated_forward_flops", "estimated_backward_flops",
                 "forward_backward_flops_ratio")


def relabelled_sweep(real: pd.DataFrame, device: Device, models=SWEEP_MODELS, batches=(1, 8, 32, 128),
                     precisions=("fp32", "tf32", "bf16"), modes=("inference", "training")) -> pd.DataFrame:
    """A sweep-sized summary (models × batches × precisions × modes rows on `device`) from real summary rows,
    relabelled: each run copies a real row of its mode (cycling through them) and moves it by deterministic
    factors — a model's intensity and efficiency, lower intensity and efficiency at small batches, lower
    FLOP rates in fp32 — then recomputes its roof, share and bound against `device` as the summary does.
    For the README's sweep picture and the tests that draw it; not a measurement."""
    out = []
    for i, model in enumerate(models):
        model_ai = 10 ** ((i * 0.37) % 1.0 - 0.6)
        model_eff = 10 ** ((i * 0.61) % 1.0 - 0.8)
        for b, batch in enumerate(batches):
            for precision in precisions:
                for mode in modes:
                    base = real[real["mode"] == mode]
                    row = base.iloc[(i + b) % len(base)].to_dict()
                    ai = row["arithmetic_intensity"] * model_ai * (batch / row["batch"]) ** 0.3
                    peak, bandwidth = device.roof_for_precision(precision)
                    attainable = min(peak, bandwidth * ai)
                    share = min(0.95, (row["percent_of_roofline"] / 100) * model_eff * (batch / 128) ** 0.25
                                * (1.2 if precision == "fp32" else 1.0))
                    flops = row["flops"] * (0.2 + model_ai) * batch / row["batch"]
                    achieved = share * attainable
                    row.update(model=model, batch=batch, precision=precision, mode=mode, flops=flops,
                               estimated_flops=flops, bytes=flops / ai, arithmetic_intensity=ai,
                               achieved_flops_per_second=achieved, attainable_flops_per_second=attainable,
                               percent_of_roofline=100 * share, measured_seconds=flops / achieved,
                               bound="memory" if bandwidth * ai < peak else "compute",
                               peak_flops_per_second=peak, bandwidth_bytes_per_second=bandwidth,
                               ridge_intensity=peak / bandwidth, measured_flops=flops, measured_dram_bytes=flops / ai,
                               images_per_second=batch * achieved / flops)
                    # what the relabelling does not move is not carried over
                    row.update({c: np.nan for c in STALE_COLUMNS if c in row})
                    out.append(row)
    return pd.DataFrame(out).reset_index(drop=True)
