"""Figures: the roofline of one device with every run as a point, and the cost bar charts.

Conventions for every figure (rooflow.report.figures follows them too): labelled axes with units, a legend,
readable at report size, SVG. Encodings shared by all figures: marker = model, colour = batch size (on a
roofline with several precisions: colour = the precision, i.e. the colour of the roof that bounds the run,
and marker size = batch), filled = training step, hollow = inference; a ring = a failed self-check (red:
an error such as a point above its roof; orange: a warning such as a noisy time) — flagged runs are
plotted like all others, never dropped. Roofs: datasheet solid, measured dashed; each compute roof joins
its memory roof at the ridge in ONE line.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import EngFormatter

from rooflow.hardware.devices import MATMUL_ROOF, Device, Roof, compute_roof_name
from rooflow.hardware.roofs import intensity_range, roof_polyline
from rooflow.report.findings import estimated_bytes, variant_label
from rooflow.report.summary import UNSEEN_BOUND
from rooflow.units import format_si

# SVG text stays text (small files, searchable, crisp at any zoom), not paths.
plt.rcParams["svg.fonttype"] = "none"
# Readable at report size: Snakemake's report shows an SVG at its own size (72 px per inch).
plt.rcParams.update({"font.size": 11, "axes.titlesize": 11.5, "axes.labelsize": 11.5, "legend.fontsize": 9.5,
                     "xtick.labelsize": 10, "ytick.labelsize": 10})

MARKERS = ["o", "s", "^", "D", "v", "P", "X", "<", ">", "h", "*", "p", "8", "H", "d"]
MODE_SHORT = {"inference": "inf", "training": "train"}
ROOF_COLOURS = {"fp64": "#7f7f7f", "fp64_tensor": "#bcbd22", "fp32": "#1f77b4", "tf32": "#2ca02c",
                "fp16": "#d62728", "bf16": "#9467bd", "fp8": "#8c564b"}
MEMORY_STYLES = {"l2": (0, (5, 1.5)), "l1": (0, (1, 1.2))}
FLAG_STYLES = {
    "error": {"color": "#d00000", "linestyle": "-", "label": "ring: failed a self-check (error)"},
    "warning": {"color": "#f08c00", "linestyle": "--", "label": "ring: self-check warning"},
    "result": {"color": "#7048e8", "linestyle": ":", "label": "ring: noted result (e.g. out of memory)"},
}
# The compute roofs a roofline draws by default; FP64 only where asked (no run of rooflow computes in FP64).
DEFAULT_COMPUTE_ROOFS = ("fp32", "tf32", "fp16", "bf16")


LOG_SPAN_DECADES = 2.0


def axis_scale(values) -> tuple[str, str]:
    """('log', 'log scale: data span 3.2 decades') when the positive values span more than
    LOG_SPAN_DECADES decades, else ('linear', '')."""
    finite = [float(v) for v in values if v is not None and np.isfinite(v) and v > 0]
    if len(finite) < 2:
        return "linear", ""
    span = math.log10(max(finite) / min(finite))
    if span > LOG_SPAN_DECADES:
        return "log", f"log scale: data span {span:.1f} decades"
    return "linear", ""


def model_markers(models) -> dict[str, str]:
    """One marker per model, stable across figures (sorted names)."""
    return {m: MARKERS[i % len(MARKERS)] for i, m in enumerate(sorted(set(models)))}


def batch_colours(batches) -> dict[int, tuple]:
    """One colour per batch size (viridis, small batches dark), stable across figures."""
    palette = plt.get_cmap("viridis")
    ordered = sorted({int(b) for b in batches})
    return {b: palette(0.12 + 0.72 * i / max(1, len(ordered) - 1)) for i, b in enumerate(ordered)}


def fill_handles(modes, size: float = 8) -> list[Line2D]:
    """Legend entries for the fill encoding of the modes drawn: filled = training, hollow = inference."""
    handles, modes = [], set(modes)
    if "training" in modes:
        handles.append(Line2D([], [], linestyle="", marker="o", color="#444444", markersize=size,
                              label="filled: training step"))
    if "inference" in modes:
        handles.append(Line2D([], [], linestyle="", marker="o", color="#444444", markerfacecolor="white",
                              markersize=size, label="hollow: inference"))
    return handles


def ring_handles(severities) -> list[Line2D]:
    """Legend entries for the self-check rings drawn, worst first (``severities``: any iterable, read once)."""
    drawn = set(severities)  # once: a generator read per entry left every ring but the first out of the legend
    return [Line2D([], [], linestyle="", marker="o", markersize=13, markerfacecolor="none",
                   markeredgecolor=FLAG_STYLES[s]["color"], markeredgewidth=2, label=FLAG_STYLES[s]["label"])
            for s in ("error", "warning", "result") if s in drawn]


def point_label(row) -> str:
    return (f"{row['model']} b{int(row['batch'])} {row['precision']} {MODE_SHORT.get(row['mode'], row['mode'])}"
            + variant_label(row))


def scatter_run(ax, x, y, marker, colour, filled: bool, severity: str | None = None, size: float = 80,
                zorder: int = 5) -> None:
    """One run with the shared encodings (filled = training) and, when a check flagged it, a ring."""
    ax.scatter([x], [y], marker=marker, s=size, zorder=zorder, facecolors=colour if filled else "white",
               edgecolors=colour, linewidths=1.8)
    if severity:
        style = FLAG_STYLES[severity]
        ax.scatter([x], [y], marker="o", s=size * 3.6, facecolors="none", edgecolors=style["color"],
                   linewidths=2.0, linestyle=style["linestyle"], zorder=zorder + 1)



def _gap_label(roof: Roof, roofs: list[Roof], name: str | None = None) -> str:
    """'FP32 1.1 TFLOP/s (87% of datasheet)' — the share where a datasheet roof of the same kind exists."""
    text = f"{name or roof.name} {format_si(roof.value, 'FLOP/s' if roof.kind == 'compute' else 'B/s')}"
    if roof.source == "measured":
        twin = [r for r in roofs if r.source in ("datasheet", "theoretical") and r.kind == roof.kind
                and r.precision_or_level == roof.precision_or_level]
        if twin:
            text += f" ({100 * roof.value / twin[0].value:.0f}% of {twin[0].source})"
    return text


def compute_roofs_to_draw(device: Device, show_fp64: bool = False, extra_roofs=()) -> list[tuple[Roof, str]]:
    """(roof, display name) of the compute roofs to draw: FP32, TF32, FP16/BF16 tensor (merged into one line
    where equal), FP64 where asked; datasheet, theoretical (`extra_roofs`) and measured alike."""
    wanted = set(DEFAULT_COMPUTE_ROOFS) | ({"fp64", "fp64_tensor"} if show_fp64 else set())
    roofs = [r for r in [*device.roofs(), *extra_roofs] if r.kind == "compute" and r.precision_or_level in wanted]
    out: list[tuple[Roof, str]] = []
    for roof in roofs:
        if roof.precision_or_level == "bf16":
            twin = next((r for r in roofs if r.precision_or_level == "fp16" and r.source == roof.source
                         and math.isclose(r.value, roof.value, rel_tol=1e-6)), None)
            if twin is not None:
                continue  # drawn once, as FP16/BF16
        name = roof.name
        if roof.precision_or_level == "fp16" and any(
                r.precision_or_level == "bf16" and r.source == roof.source
                and math.isclose(r.value, roof.value, rel_tol=1e-6) for r in roofs):
            name = roof.name.replace("FP16", "FP16/BF16")  # "FP16/BF16 tensor" (a CPU's: matmul)
        out.append((roof, name))
    return out


def roof_lines(device: Device, x_min: float, x_max: float, show_fp64: bool = False, extra_roofs=()) -> list[dict]:
    """Every roof line of the device's roofline, as drawn: each compute roof joined at its ridge to the DRAM
    roof of the same source (datasheet with datasheet, measured with measured; the other where one is
    missing), and each cache roof (L2, L1) joined to the highest compute roof of its source — unless it is at
    or below a DRAM roof, which makes it a failed measurement that is never drawn. `extra_roofs`:
    theoretical roofs (a CPU's cores × clock × SIMD lanes × FMA), drawn solid like datasheet ones."""
    roofs = [*device.roofs(), *extra_roofs]
    memory = [r for r in roofs if r.kind == "memory"]
    dram = {r.source: r for r in memory if r.precision_or_level == "dram"}
    lines = []
    computes = compute_roofs_to_draw(device, show_fp64, extra_roofs)
    for roof, name in computes:
        mem = dram.get(roof.source) or next(iter(dram.values()), None)
        if mem is None:
            continue
        xs, ys = roof_polyline(roof.value, mem.value, x_min, x_max)
        # a memory roof of another source (a CPU's theoretical compute roof on its measured bandwidth) says so
        other = f" ({mem.source})" if mem.source != roof.source else ""
        label = (f"{roof.source}: {_gap_label(roof, roofs, name)} | {_gap_label(mem, roofs)}{other} | ridge "
                 f"{roof.value / mem.value:.3g} FLOP/B")
        lines.append({"compute": name, "compute_key": roof.precision_or_level, "memory": mem.name,
                      "memory_level": "dram", "source": roof.source, "peak": roof.value, "bandwidth": mem.value,
                      "ridge": roof.value / mem.value, "xs": xs, "ys": ys,
                      "linestyle": "--" if roof.source == "measured" else "-",
                      "colour": ROOF_COLOURS.get(roof.precision_or_level, "black"), "label": label})
    for mem in memory:
        if mem.precision_or_level == "dram":
            continue
        if any(mem.value <= d.value for d in dram.values()):
            continue  # a cache roof at or below DRAM is a failed measurement: never drawn (rooflow.report.checks flags it)
        same = [r for r, _ in computes if r.source == mem.source] or [r for r, _ in computes]
        if not same:
            continue
        top = max(same, key=lambda r: r.value)
        xs, ys = roof_polyline(top.value, mem.value, x_min, x_max)
        lines.append({"compute": top.name, "compute_key": top.precision_or_level, "memory": mem.name,
                      "memory_level": mem.precision_or_level, "source": mem.source, "peak": top.value,
                      "bandwidth": mem.value, "ridge": top.value / mem.value, "xs": xs, "ys": ys,
                      "linestyle": MEMORY_STYLES.get(mem.precision_or_level, ":") if mem.source == "datasheet"
                      else (0, (4, 2, 1, 2)),
                      "colour": "#555555", "label": f"{mem.source}: {_gap_label(mem, roofs)} (cache roof)"})
    return lines


def theoretical_roofs(ceilings: dict | None) -> list[Roof]:
    """The theoretical compute roofs of a measure_ceilings JSON (a CPU: cores × clock × SIMD lanes × FMA
    units × 2), which a device without a datasheet draws solid beside its measured (dashed) roofs."""
    peaks = (ceilings or {}).get("theoretical_peak_flops_per_second") or {}
    kind = (ceilings or {}).get("device_kind") or "cpu"
    return [Roof(compute_roof_name(key, kind), "compute", float(value), "theoretical", key)
            for key, value in peaks.items() if value]


# Label placement: candidate offsets (points) around the anchor, nearest first: 8 directions at growing
# distances; beyond the first rings a thin leader line ties the label to its point.
_DIRECTIONS = [(1, 0), (1, 1), (0, 1), (-1, 1), (-1, 0), (-1, -1), (0, -1), (1, -1)]
_RADII = (7, 12, 18, 26, 36, 50, 68, 90, 120, 160, 210, 280)
_LEADER_FROM = 20  # points


def _boxes_overlap(a, b, margin: float = 1.0) -> bool:
    return a.x0 < b.x1 + margin and b.x0 < a.x1 + margin and a.y0 < b.y1 + margin and b.y0 < a.y1 + margin


def _inside(inner, outer) -> bool:
    return inner.x0 >= outer.x0 and inner.x1 <= outer.x1 and inner.y0 >= outer.y0 and inner.y1 <= outer.y1


def _marker_box(ax, x: float, y: float, size_pt2: float):
    """Pixel box of a scatter marker of area `size_pt2` (points²) centred on data (x, y)."""
    from matplotlib.transforms import Bbox

    px, py = ax.transData.transform((x, y))
    half = math.sqrt(size_pt2) / 2 * ax.figure.dpi / 72
    return Bbox.from_extents(px - half, py - half, px + half, py + half)


def _place_labels(ax, labels: list[dict], obstacles: list[tuple[float, float, float]], radii=_RADII,
                  drop_crowded: bool = False, laid_out: bool = False) -> list:
    """Annotate points so that no label overlaps another label or any marker, and every label lies inside
    the axes. ``labels``: dicts with x, y (data), text, and optional fontsize, colour, weight; ``obstacles``:
    (x, y, marker area in points²) of every marker drawn. Each label takes the nearest free candidate
    position (_DIRECTIONS × ``radii``); far ones get a leader line. A label with no free position is put at
    the nearest spot and marked ``crowded``, or, with ``drop_crowded``, left out and marked ``dropped``.
    ``laid_out``: the caller has drawn the figure's final layout already (several axes share one draw).
    Returns the Annotation artists placed."""
    from matplotlib import patheffects

    fig = ax.figure
    if not laid_out:
        fig.draw_without_rendering()  # the layout first: boxes are computed in final pixels
    renderer = fig.canvas.get_renderer()
    axes_box = ax.get_window_extent(renderer)
    blocked = [_marker_box(ax, x, y, size) for x, y, size in obstacles]
    placed = []
    artists = []
    for label in labels:
        text = ax.annotate(label["text"], (label["x"], label["y"]), textcoords="offset points", xytext=(0, 0),
                           fontsize=label.get("fontsize", 9.5), color=label.get("colour", "#111111"),
                           fontweight=label.get("weight", "normal"), zorder=7,
                           path_effects=[patheffects.withStroke(linewidth=2.5, foreground="white")])
        best = None
        for radius in radii:
            for dx, dy in _DIRECTIONS:
                norm = math.hypot(dx, dy)
                offset = (radius * dx / norm, radius * dy / norm)
                text.set_position(offset)
                text.set_ha("left" if dx > 0 else "right" if dx < 0 else "center")
                text.set_va("bottom" if dy > 0 else "top" if dy < 0 else "center")
                box = text.get_window_extent(renderer)
                if _inside(box, axes_box) and not any(_boxes_overlap(box, b) for b in placed + blocked):
                    best = (offset, box, radius)
                    break
            if best:
                break
        if best is None and drop_crowded:
            text.remove()
            label["dropped"] = True
            continue
        if best is None:  # nowhere free (should not happen on a report-size figure): nearest spot, flagged
            text.set_position((_RADII[0], 0))
            text.set_ha("left")
            text.set_va("center")
            best = ((_RADII[0], 0), text.get_window_extent(renderer), _RADII[0])
            label["crowded"] = True
        offset, box, radius = best
        if radius >= _LEADER_FROM:
            text.remove()
            text = ax.annotate(label["text"], (label["x"], label["y"]), textcoords="offset points",
                               xytext=offset, fontsize=label.get("fontsize", 9.5),
                               color=label.get("colour", "#111111"), fontweight=label.get("weight", "normal"),
                               ha="left" if offset[0] > 0 else "right" if offset[0] < 0 else "center",
                               va="bottom" if offset[1] > 0 else "top" if offset[1] < 0 else "center",
                               zorder=7, path_effects=[patheffects.withStroke(linewidth=2.5, foreground="white")],
                               arrowprops={"arrowstyle": "-", "color": "#777777", "linewidth": 0.6,
                                           "shrinkA": 0, "shrinkB": 4})
        placed.append(box)
        artists.append(text)
    return artists


def _roof_legend(fig, roof_handles: list) -> None:
    """The roof legend under the axes: two columns where they fit inside the figure, else one."""
    title = "roofs (compute | memory | ridge)"
    if len(roof_handles) >= 5:
        legend = fig.legend(handles=roof_handles, loc="outside lower center", ncols=2, frameon=False, title=title)
        fig.draw_without_rendering()
        box = legend.get_window_extent(fig.canvas.get_renderer())
        if box.x0 >= 0 and box.x1 <= fig.bbox.width:
            return
        legend.remove()
    fig.legend(handles=roof_handles, loc="outside lower center", ncols=1, frameon=False, title=title)


def _ok(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value)) and value > 0


def _variant(record) -> str:
    """A summary row's or ncu aggregate's variant (eager where it has none: written before variants)."""
    variant = record.get("variant")
    return variant if isinstance(variant, str) and variant else "eager"


def roofline_figure(summary: pd.DataFrame, device: Device, path: str | Path, flags: dict | None = None,
                    hierarchy: pd.DataFrame | None = None, show_fp64: bool = False, extra_roofs=(),
                    keep_open: bool = False) -> dict:
    """Draw one device's roofline with its runs; return what was drawn (for tests and captions).

    ``flags``: rooflow.report.checks.flagged_runs — flagged points get a ring. ``hierarchy``: per run (device,
    model, batch, precision, mode) the ncu totals ``flops_total``, ``dram_bytes``, ``l2_bytes``,
    ``l1_bytes``: the same kernels are also placed at their L2 and L1 intensity (hierarchical roofline).
    Where a point's FLOPs or bytes were measured, the estimate's point (estimated FLOPs over estimated
    bytes, at the same time) is drawn beside it. ``extra_roofs``: theoretical roofs (see roof_lines).

    Every run is numbered on the plot (its cache-level points "N·L2", "N·L1") and named in the key beside
    the axes; labels are placed so that none overlaps another label or a marker (_place_labels). The roof
    legend under the plot takes two columns where they fit the figure's width, else one.
    ``keep_open``: return the figure (drawn["figure"]) and the label artists instead of closing it (tests
    measure the layout with the renderer); the caller closes it."""
    from rooflow.report.checks import severity_of

    rows = summary[(summary["device"] == device.key) & summary["arithmetic_intensity"].notna()
                   & summary["achieved_flops_per_second"].notna()].copy()
    levels: dict[tuple, dict[str, float]] = {}
    if hierarchy is not None and len(hierarchy):
        for _, h in hierarchy[hierarchy["device"] == device.key].iterrows():
            key = (h["model"], int(h["batch"]), h["precision"], h["mode"], _variant(h))
            levels[key] = {lvl: h[f"{lvl}_bytes"] for lvl in ("l2", "l1") if _ok(h.get(f"{lvl}_bytes"))}
            levels[key]["flops"] = h.get("flops_total")

    # x range: every point (DRAM, cache and estimate intensities) and every ridge, a decade either side
    xs_all = list(rows["arithmetic_intensity"])
    for _, row in rows.iterrows():
        key = (row["model"], int(row["batch"]), row["precision"], row["mode"], _variant(row))
        for lvl, value in levels.get(key, {}).items():
            if lvl != "flops" and _ok(levels[key].get("flops")):
                xs_all.append(levels[key]["flops"] / value)
        if _ok(row.get("estimated_flops")) and _ok(estimated_bytes(row)):
            xs_all.append(row["estimated_flops"] / estimated_bytes(row))
    all_roofs = [*device.roofs(), *extra_roofs]
    ridges = [c.value / m.value for c in all_roofs if c.kind == "compute" for m in all_roofs if m.kind == "memory"]
    x_min, x_max = intensity_range(xs_all, ridges)

    fig, ax = plt.subplots(figsize=(13.5, 10), layout="constrained")
    drawn: dict = {"roofs": [], "points": [], "flagged": [], "estimates": [], "levels": []}
    roof_handles: list = []
    labels_to_place: list[dict] = []
    lines = roof_lines(device, x_min, x_max, show_fp64, extra_roofs)
    top_peak = max((line["peak"] for line in lines), default=1.0)
    for line in lines:
        # lower compute roofs above higher ones, so every roof stays visible along the shared memory slope
        zorder = 3.5 - 0.4 * line["peak"] / top_peak if line["memory_level"] == "dram" else 3.0
        width = 2.4 if line["memory_level"] == "dram" else 1.3
        (handle,) = ax.plot(line["xs"], line["ys"], linestyle=line["linestyle"], color=line["colour"],
                            linewidth=width, label=line["label"], zorder=zorder)
        roof_handles.append(handle)
        drawn["roofs"].append({k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in line.items()})

    # encodings from the runs this figure draws, so that its key matches its points
    markers = model_markers(rows["model"])
    precisions = sorted(set(rows["precision"]))
    by_precision = len(precisions) > 1
    colours = batch_colours(rows["batch"])
    batches = sorted({int(b) for b in rows["batch"]})
    sizes = {b: 55 + 75 * i / max(1, len(batches) - 1) for i, b in enumerate(batches)}
    obstacles: list[tuple[float, float, float]] = []  # every marker: (x, y, area in points²)
    key_handles: list = []
    for number, (_, row) in enumerate(rows.sort_values(["arithmetic_intensity", "achieved_flops_per_second"])
                                      .iterrows(), start=1):
        x, y = row["arithmetic_intensity"], row["achieved_flops_per_second"]
        batch = int(row["batch"])
        colour = ROOF_COLOURS.get(MATMUL_ROOF.get(row["precision"], "fp32"), "black") if by_precision \
            else colours.get(batch, "black")
        size = sizes[batch] if by_precision else 80
        severity = severity_of(flags or {}, device.key, row["model"], batch, row["precision"], row["mode"],
                               _variant(row))
        filled = row["mode"] == "training"
        attainable = row.get("attainable_flops_per_second")
        unseen = row.get("bound") == UNSEEN_BOUND  # counted FLOPs a floor: no headroom can be read at this AI
        if unseen:
            attainable = None
        if _ok(attainable):
            # The point's AI line, up to the roof that bounds it: the gap is the headroom at this intensity.
            ax.plot([x, x], [y, attainable], linestyle=":", color=colour, linewidth=1.3, zorder=4)
            ax.scatter([x], [attainable], marker="_", s=140, color=colour, linewidths=2, zorder=4)
            obstacles.append((x, attainable, 140))
        scatter_run(ax, x, y, markers[row["model"]], colour, filled, severity, size=size)
        obstacles.append((x, y, size * 3.6 if severity else size))
        label = point_label(row)
        short = f"{row['model']} b{batch}" + (f" {row['precision']}" if by_precision else "") + \
            f" {MODE_SHORT.get(row['mode'], row['mode'])}" + variant_label(row) + \
            (" (tensor-core FLOPs not counted)" if unseen else "")
        if severity:
            drawn["flagged"].append({"label": label, "severity": severity})
        # Points are numbered on the plot and named in the key beside it: a number fits where a name
        # would collide with the cache-level markers and the other points.
        labels_to_place.append({"x": x, "y": y, "text": str(number), "weight": "bold", "fontsize": 10})
        key_handles.append(Line2D([], [], linestyle="", marker=markers[row["model"]], markersize=7,
                                  markeredgecolor=colour, markerfacecolor=colour if filled else "white",
                                  markeredgewidth=1.5, label=f"{number}  {short}"))
        drawn["points"].append({"label": label, "number": number, "x": x, "y": y, "attainable": attainable,
                                "severity": severity, "marker": markers[row["model"]], "filled": filled})
        key = (row["model"], batch, row["precision"], row["mode"], _variant(row))
        # Hierarchical points: the same kernels (same FLOPs, same time) at their L2 and L1 intensity.
        flops = levels.get(key, {}).get("flops")
        chain = [(x, "DRAM")]
        for lvl in ("l2", "l1"):
            moved = levels.get(key, {}).get(lvl)
            if _ok(flops) and _ok(moved):
                lx, ly = flops / moved, (flops / row["flops"]) * y if _ok(row.get("flops")) else y
                chain.append((lx, lvl.upper()))
                ax.scatter([lx], [ly], marker=markers[row["model"]], s=size * 0.6, facecolors="none",
                           edgecolors=colour, linewidths=1.2, alpha=0.8, zorder=5)
                obstacles.append((lx, ly, size * 0.6))
                labels_to_place.append({"x": lx, "y": ly, "text": f"{number}·{lvl.upper()}", "fontsize": 8.5,
                                        "colour": colour})
                drawn["levels"].append({"label": label, "level": lvl, "x": lx, "y": ly})
        if len(chain) > 1:
            ax.plot([c[0] for c in chain], [y] * len(chain), color=colour, linewidth=0.8, alpha=0.6, zorder=4)
        # The estimate beside a measured point: estimated FLOPs over the estimate's bytes for the way the step
        # ran (unfused eager, fusion-aware compiled traffic), at the measured time.
        measured = row.get("flops_source") == "ncu" or str(row.get("bytes_source", "")).startswith("ncu")
        if measured and _ok(row.get("estimated_flops")) and _ok(estimated_bytes(row)) \
                and _ok(row.get("measured_seconds")):
            ex = row["estimated_flops"] / estimated_bytes(row)
            ey = row["estimated_flops"] / row["measured_seconds"]
            ax.plot([x, ex], [y, ey], color="#888888", linewidth=0.9, linestyle="--", zorder=4)
            ax.scatter([ex], [ey], marker=markers[row["model"]], s=size * 0.8, facecolors="#dddddd",
                       edgecolors="#666666", linewidths=1.2, zorder=5)
            obstacles.append((ex, ey, size * 0.8))
            drawn["estimates"].append({"label": label, "x": ex, "y": ey})

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_min, x_max)
    ys_all = [p["y"] for p in drawn["points"]] + [p["y"] for p in drawn["estimates"]] + \
        [v for r in drawn["roofs"] for v in r["ys"]]
    ys_all = [v for v in ys_all if _ok(v)]
    if ys_all:
        ax.set_ylim(10 ** (math.floor(math.log10(min(ys_all))) - 0.3),
                    10 ** (math.ceil(math.log10(max(ys_all))) + 0.3))
    ax.set_xlabel("Arithmetic intensity [FLOP/byte]")
    ax.set_ylabel("Performance [FLOP/s]")
    ax.yaxis.set_major_formatter(EngFormatter(unit="FLOP/s"))
    ax.grid(True, which="major", alpha=0.35)
    ax.grid(True, which="minor", alpha=0.1)
    solid = sorted({r.source for r in all_roofs if r.source != "measured"})
    roof_note = f"{' and '.join(solid)} roofs solid, measured dashed" if solid \
        else "measured roofs, dashed (no datasheet for this device)"
    colour_note = "colour = precision (its roof's colour), size = batch" if by_precision else "colour = batch size"
    ax.set_title(f"Roofline: {device.name} ({device.key})\n{roof_note}; marker = model, {colour_note};\n"
                 "filled = training, hollow = inference; dotted line up to the roof = the point's headroom",
                 fontsize=11)

    # Legends: the roofs under the plot (long entries), the encodings beside it (models, colours, fill,
    # extra point kinds, rings).
    handles = [Line2D([], [], linestyle="", marker=markers[m], color="#444444", markersize=8, label=m)
                for m in sorted(set(rows["model"]))]
    if by_precision:
        handles += [Line2D([], [], linestyle="", marker="o", markersize=8, label=f"{p} run",
                           color=ROOF_COLOURS.get(MATMUL_ROOF.get(p, "fp32"), "black")) for p in precisions]
    else:
        handles += [Line2D([], [], linestyle="", marker="o", markersize=8, color=colours[b], label=f"batch {b}")
                    for b in batches]
    handles += fill_handles(rows["mode"])
    if drawn["levels"]:
        handles.append(Line2D([], [], linestyle="-", marker="o", color="#444444", markerfacecolor="none",
                              markersize=6, linewidth=0.8, label="same kernels at L2 / L1 intensity"))
    if drawn["estimates"]:
        handles.append(Line2D([], [], linestyle="--", marker="o", color="#666666", markerfacecolor="#dddddd",
                              markersize=7, linewidth=0.9, label="estimate (estimated FLOPs and bytes)"))
    handles += ring_handles(f["severity"] for f in drawn["flagged"])
    if roof_handles:
        _roof_legend(fig, roof_handles)
    if key_handles:
        handles.append(Line2D([], [], linestyle="", label=""))
        handles.append(Line2D([], [], linestyle="", label="points (number on the plot):"))
        handles += key_handles
    if handles:
        rows_fit = 40  # entries per column that fit beside the axes at report size
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0,
                  frameon=False, ncols=1 + (len(handles) - 1) // rows_fit, handletextpad=0.4)
    if rows.empty:
        ax.text(0.5, 0.5, "no measured runs on this device", transform=ax.transAxes, ha="center")
    placed = _place_labels(ax, labels_to_place, obstacles)
    drawn["labels"] = [{"text": lbl["text"], "crowded": lbl.get("crowded", False)} for lbl in labels_to_place]
    fig.savefig(path)
    if keep_open:
        drawn["figure"], drawn["label_artists"] = fig, placed
    else:
        plt.close(fig)
    return drawn


def _per_model(summary: pd.DataFrame) -> pd.DataFrame:
    """FLOPs per image (forward and training step) at each model's largest batch (``batch``) and parameters per
    model, from the summary. One batch: a training step's optimizer update is per step, not per image, so
    batches differ per image (AlexNet training 4.51 GFLOP at batch 1, 4.24 at 4), and a median of two is
    neither."""
    frame = summary.dropna(subset=["estimated_flops"]).copy()
    frame = frame[frame["batch"] == frame.groupby("model")["batch"].transform("max")]
    frame["flops_per_image"] = frame["estimated_flops"] / frame["batch"]
    per_image = frame.groupby(["model", "mode"])["flops_per_image"].median().unstack("mode")
    params = frame.groupby("model")["params"].first()
    batch = frame.groupby("model")["batch"].first().astype(int)
    return per_image.join(params).join(batch)


def _bar_scale(ax, values, label: str) -> None:

    scale, why = axis_scale(values)
    ax.set_yscale(scale)
    ax.set_ylabel(f"{label}\n({why})" if why else label)


def flops_figure(summary: pd.DataFrame, path: str | Path) -> pd.DataFrame:
    data = _per_model(summary).sort_values("params")
    modes = [m for m in ("inference", "training") if m in data.columns]
    fig, ax = plt.subplots(figsize=(9, 5.5), layout="constrained")
    width = 0.8 / max(1, len(modes))
    positions = np.arange(len(data))
    for i, mode in enumerate(modes):
        bars = ax.bar(positions + (i - (len(modes) - 1) / 2) * width, data[mode] / 1e9, width,
                      color={"inference": "#a1c9f4", "training": "#4c72b0"}[mode],
                      label={"inference": "inference (forward)", "training": "training step "
                             "(forward + loss + backward + SGD)"}[mode])
        ax.bar_label(bars, fmt="%.3g", fontsize=7, padding=2)
    ax.set_xticks(positions, [f"{model} (batch {batch})" for model, batch in data["batch"].items()], rotation=30,
                  ha="right")
    _bar_scale(ax, pd.concat([data[m] for m in modes]) / 1e9, "Estimated work per image [GFLOP] (1 FMA = 2 FLOP)")
    ax.set_xlabel("Model at its largest batch (sorted by parameter count)")
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
    _bar_scale(ax, data["params"] / 1e6, "Parameters [millions]")
    ax.set_xlabel("Model (sorted by parameter count)")
    ax.set_title("Trainable parameters per model")
    fig.savefig(path)
    plt.close(fig)
    return data
