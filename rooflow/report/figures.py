"""The report's companion figures: pure functions, DataFrames in, an SVG out, the plotted data returned.

Every figure uses the encodings of the roofline (rooflow.report.plots): marker = model, colour = batch size,
filled = training step, hollow = inference; a run a self-check flagged keeps its place and gets a ring.
Axes are linear unless the data span more than ``rooflow.report.plots.LOG_SPAN_DECADES`` decades; a log axis says so in its
label, with the span that justifies it.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D

from rooflow.conventions import PHASE_LAYER_TYPES
from rooflow.hardware.devices import Device
from rooflow.report.plots import (
    axis_scale,
    batch_colours,
    fill_handles,
    model_markers,
    ring_handles,
    scatter_run,
)
from rooflow.report.summary import eager_rows

# An axis goes logarithmic only when its data span more than this many decades (factor 100): below that,
# a linear axis shows differences as they are.
# Layer types the time-by-layer-type figures name; the rest of a run's time is "other".
MAX_LAYER_TYPES = 9




def _apply_scale(ax, axis: str, values, label: str) -> str:
    scale, why = axis_scale(values)
    text = f"{label}\n({why})" if why else label
    finite = [float(v) for v in values if pd.notna(v) and np.isfinite(v) and v > 0]
    # a linear axis from 0 to 6% past the largest value: set_*lim(left=0) alone froze the far end at the
    # largest point, whose marker the frame then cut in half
    top = 1.06 * max(finite) if finite else None
    if axis == "x":
        ax.set_xscale(scale)
        ax.set_xlabel(text)
        if scale == "linear":
            ax.set_xlim(0, top)
    else:
        ax.set_yscale(scale)
        ax.set_ylabel(text)
        if scale == "linear":
            ax.set_ylim(0, top)
    return scale


def measured_runs(summary: pd.DataFrame, device: str | None = None) -> pd.DataFrame:
    """The summary rows with a measured time (status ok), on one device or all; eager runs only (these
    figures compare models, batches and devices; the variants are in the summary and on the roofline)."""
    summary = eager_rows(summary)
    rows = summary[(summary["status"] == "ok") & summary["measured_seconds"].notna()]
    if device is not None:
        rows = rows[rows["device"] == device]
    return rows.copy()


def _groups(frame: pd.DataFrame) -> list[tuple[str, str]]:
    """(mode, precision) panels present, inference first."""
    order = {"inference": 0, "training": 1}
    pairs = {(m, p) for m, p in zip(frame["mode"], frame["precision"])}
    return sorted(pairs, key=lambda mp: (order.get(mp[0], 2), mp[1]))


def legend_handles(models, batches, modes=("inference", "training"), flags=()) -> list[Line2D]:
    """Legend entries for the shared encodings: one per model marker, batch colour, mode fill, flag ring."""
    markers, colours = model_markers(models), batch_colours(batches)
    handles = [Line2D([], [], linestyle="", marker=markers[m], color="#444444", markerfacecolor="#444444",
                      markersize=8, label=m) for m in sorted(set(models))]
    handles += [Line2D([], [], linestyle="", marker="o", color=c, markersize=8, label=f"batch {b}")
                for b, c in colours.items()]
    return handles + fill_handles(modes) + ring_handles(flags)


def _flag(flags: dict | None, row) -> str | None:
    if not flags:
        return None
    from rooflow.report.checks import severity_of

    return severity_of(flags, row["device"], row["model"], int(row["batch"]), row["precision"], row["mode"],
                       row.get("variant"))


def _scatter_panel(ax, frame: pd.DataFrame, x: str, y: str, markers, colours, flags=None,
                   connect: bool = True) -> list[str]:
    """Points of `frame` at (x, y) with the shared encodings; a thin line per batch size through the models
    in x order shows the trend. Returns the flag severities drawn."""
    drawn = []
    if connect:
        for batch, group in frame.sort_values(x).groupby("batch"):
            if len(group) > 1:
                ax.plot(group[x], group[y], color=colours[int(batch)], linewidth=0.9, alpha=0.5, zorder=2)
    for _, row in frame.iterrows():
        severity = _flag(flags, row)
        scatter_run(ax, row[x], row[y], markers[row["model"]], colours[int(row["batch"])],
                    row["mode"] == "training", severity)
        if severity:
            drawn.append(severity)
    ax.grid(True, alpha=0.3)
    return drawn


def _finish(fig, handles, path, title: str | None = None) -> None:
    """Title (left-aligned, over the panels), the legend beside the panels — or under them where the title
    would run into it — and the file."""
    if title:
        fig.suptitle(title, fontsize=12.5, x=0.01, ha="left")
    if handles:
        legend = fig.legend(handles=handles, loc="outside right upper", fontsize=9.5, frameon=False)
        if title:
            fig.draw_without_rendering()
            renderer = fig.canvas.get_renderer()
            if fig.get_suptitle() and legend.get_window_extent(renderer).overlaps(
                    fig._suptitle.get_window_extent(renderer)):
                legend.remove()
                fig.legend(handles=handles, loc="outside lower center", fontsize=9.5, frameon=False,
                           ncols=min(4, len(handles)))
    fig.savefig(path)
    plt.close(fig)


def _no_data(path: str | Path, text: str, title: str) -> None:
    fig, ax = plt.subplots(figsize=(7, 2.5), layout="constrained")
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=11, wrap=True)
    ax.set_title(title, fontsize=12.5)
    fig.savefig(path)
    plt.close(fig)


def _encodings(drawn: pd.DataFrame):
    """Markers and colours over the runs a figure DRAWS, so that its legend lists only those, in the colours
    of its points (a palette over every device's batches gave a CPU figure colours of GPU-only batches)."""
    return model_markers(drawn["model"]), batch_colours(drawn["batch"])


def timed_as(runs: pd.DataFrame) -> str:
    """How a panel's times were taken, for its axis: the median of the timed steps, or (an imported profile
    without a timing) the kernel time of its one profiled step, which has no median and no host time."""
    from rooflow.report.findings import KERNEL_TIMER

    profiled = runs["timer"].eq(KERNEL_TIMER) if "timer" in runs else pd.Series(False, index=runs.index)
    if profiled.all() and len(runs):
        return "kernel time of one profiled step"
    return "median; imported: one step's kernels" if profiled.any() else "median"


def latency_figure(summary: pd.DataFrame, device: str, path: str | Path, flags: dict | None = None
                   ) -> pd.DataFrame:
    """Latency vs estimated FLOPs and vs parameters, one colour per batch size, on one device; one row of
    panels per mode (and precision). Returns the plotted points."""
    data = measured_runs(summary, device)
    data["gflop"] = data["estimated_flops"] / 1e9
    data["mparams"] = data["params"] / 1e6
    data["milliseconds"] = data["measured_seconds"] * 1e3
    title = f"Latency vs work and vs parameters on {device}"
    if data.empty:
        _no_data(path, f"no measured runs on {device}", title)
        return data
    markers, colours = _encodings(data)
    groups = _groups(data)
    fig, axes = plt.subplots(len(groups), 2, figsize=(12, 0.6 + 4.2 * len(groups)), squeeze=False,
                             layout="constrained")
    flagged: set[str] = set()
    scales = {}
    for i, (mode, precision) in enumerate(groups):
        sub = data[(data["mode"] == mode) & (data["precision"] == precision)]
        for j, (x, label) in enumerate((("gflop", "Estimated work per step [GFLOP]"),
                                        ("mparams", "Parameters [millions]"))):
            ax = axes[i, j]
            flagged |= set(_scatter_panel(ax, sub, x, "milliseconds", markers, colours, flags, connect=True))
            scales[(mode, precision, x)] = _apply_scale(ax, "x", sub[x], label)
            scales[(mode, precision, "milliseconds")] = _apply_scale(ax, "y", sub["milliseconds"],
                                                                     "Latency per step [ms]" + (" (median)" if timed_as(sub) == "median"
                                                                                      else f"\n({timed_as(sub)})"))
            ax.set_title(f"{mode} ({precision}): latency vs {'FLOPs' if x == 'gflop' else 'parameters'}",
                         fontsize=11)
    handles = legend_handles(data["model"], data["batch"], data["mode"], sorted(flagged))
    _finish(fig, handles, path, title + " (lines join the models of one batch size)")
    out = data[["device", "model", "batch", "precision", "mode", "gflop", "mparams", "milliseconds"]].copy()
    out.attrs["scales"] = scales  # {(mode, precision, column): "linear" | "log"}
    return out


def throughput_figure(summary: pd.DataFrame, device: str, path: str | Path, flags: dict | None = None
                      ) -> pd.DataFrame:
    """Throughput (images/s = batch / median latency; an imported profile's: batch / its one step's kernel
    time, the axis says which) vs parameters, one colour per batch size."""
    data = measured_runs(summary, device)
    data["images_per_second"] = data["batch"] / data["measured_seconds"]
    data["mparams"] = data["params"] / 1e6
    title = f"Throughput vs parameters on {device}"
    if data.empty:
        _no_data(path, f"no measured runs on {device}", title)
        return data
    markers, colours = _encodings(data)
    groups = _groups(data)
    fig, axes = plt.subplots(1, len(groups), figsize=(1.5 + 5.2 * len(groups), 4.8), squeeze=False,
                             layout="constrained")
    flagged: set[str] = set()
    for j, (mode, precision) in enumerate(groups):
        ax = axes[0, j]
        sub = data[(data["mode"] == mode) & (data["precision"] == precision)]
        flagged |= set(_scatter_panel(ax, sub, "mparams", "images_per_second", markers, colours, flags))
        _apply_scale(ax, "x", sub["mparams"], "Parameters [millions]")
        _apply_scale(ax, "y", sub["images_per_second"], "Throughput [images/s]"
                     + ("" if timed_as(sub) == "median" else f"\n(batch / {timed_as(sub)})"))
        ax.set_title(f"{mode} ({precision})", fontsize=11)
    handles = legend_handles(data["model"], data["batch"], data["mode"], sorted(flagged))
    _finish(fig, handles, path, title)
    return data[["device", "model", "batch", "precision", "mode", "mparams", "images_per_second"]]


def correlation_data(summary: pd.DataFrame) -> dict[tuple[str, str, int], pd.DataFrame]:
    """{(mode, precision, batch): the per-model table the rank correlation is computed over}: one latency
    column per device ('latency cpu', 'latency a100-sxm4-40gb', ...), 'FLOPs' and 'parameters'."""
    data = measured_runs(summary)
    out = {}
    devices = sorted(set(data["device"]), key=lambda d: (d != "cpu", d))
    for (mode, precision, batch), group in data.groupby(["mode", "precision", "batch"]):
        table = group.pivot_table(index="model", columns="device", values="measured_seconds")
        table = table.reindex(columns=[d for d in devices if d in table.columns])
        table.columns = [f"latency {d}" for d in table.columns]
        per_model = group.groupby("model")[["estimated_flops", "params"]].first()
        table["FLOPs"] = per_model["estimated_flops"]
        table["parameters"] = per_model["params"]
        out[(mode, precision, int(batch))] = table
    return out


def correlation_figure(summary: pd.DataFrame, path: str | Path) -> dict[tuple[str, str, int], pd.DataFrame]:
    """Spearman rank correlation of latency on each device, FLOPs and parameters across the models, one
    annotated matrix per mode × precision × batch. Returns the matrices (NaN where fewer than 3 models)."""
    tables = correlation_data(summary)
    title = "Spearman rank correlation across models: latency per device, FLOPs, parameters"
    if not tables:
        _no_data(path, "no measured runs", title)
        return {}
    order = {"inference": 0, "training": 1}
    row_keys = sorted({(k[0], k[1]) for k in tables}, key=lambda mp: (order.get(mp[0], 2), mp[1]))
    batches = sorted({k[2] for k in tables})
    size = max(len(t.columns) for t in tables.values())
    fig, axes = plt.subplots(len(row_keys), len(batches),
                             figsize=(0.5 + len(batches) * (1.3 + 1.05 * size), 0.6 + len(row_keys) * (1.0 + 0.95 * size)),
                             squeeze=False, layout="constrained")
    cells = {(mp, b): axes[i, j] for i, mp in enumerate(row_keys) for j, b in enumerate(batches)}
    keys = [k for k in ((mp[0], mp[1], b) for mp in row_keys for b in batches) if k in tables]
    matrices = {}
    for key in keys:
        ax = cells[((key[0], key[1]), key[2])]
        table = tables[key].dropna(axis=1, how="all")
        n = int(table.dropna().shape[0])
        matrix = table.corr(method="spearman", min_periods=3) if n >= 3 else \
            pd.DataFrame(np.nan, index=table.columns, columns=table.columns)
        matrices[key] = matrix
        mode, precision, batch = key
        with warnings.catch_warnings():  # seaborn 0.13 calls a colormap method matplotlib 3.11 deprecates
            warnings.simplefilter("ignore", PendingDeprecationWarning)
            sns.heatmap(matrix, ax=ax, vmin=-1, vmax=1, center=0, cmap="vlag", annot=True, fmt=".2f",
                        square=True, cbar=False, linewidths=0.5, annot_kws={"fontsize": 10.5})
        ax.set_title(f"{mode}, {precision}, batch {batch} (n = {n} models)", fontsize=10)
        ax.tick_params(axis="x", rotation=30, labelsize=8)
        ax.tick_params(axis="y", rotation=0, labelsize=8)
        if n < 3:
            ax.text(0.5, 0.5, f"n = {n}: a rank correlation needs\nat least 3 models", transform=ax.transAxes,
                    ha="center", va="center", fontsize=10, color="#aa0000")
    for (mp, batch), ax in cells.items():
        if (mp[0], mp[1], batch) not in tables:
            ax.axis("off")
    _finish(fig, [], path, title)
    return matrices


def forward_backward_figure(table: pd.DataFrame, path: str | Path) -> pd.DataFrame:
    """Backward:forward FLOP ratio (estimated, and implied by the layers) and measured latency ratio per
    model. ``table``: rooflow.report.checks.forward_backward_table."""
    title = "Training: backward vs forward pass, per model"
    if table is None or table.empty:
        _no_data(path, "no training runs", title)
        return pd.DataFrame()
    flops = (table.groupby("model")[["implied_flops_ratio", "estimated_matmul_flops_ratio",
                                     "estimated_total_flops_ratio"]].median().sort_index())
    latency = table.dropna(subset=["latency_ratio"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5), layout="constrained")
    x = np.arange(len(flops))
    width = 0.38
    bars = left.bar(x - width / 2, flops["estimated_matmul_flops_ratio"], width, color="#4c72b0",
                    label="estimated, conv/linear FLOPs")
    left.bar_label(bars, fmt="%.3f", fontsize=8.5, padding=2)
    bars = left.bar(x + width / 2, flops["estimated_total_flops_ratio"], width, color="#a1c9f4",
                    label="estimated, all FLOPs")
    left.bar_label(bars, fmt="%.3f", fontsize=8.5, padding=2)
    left.scatter(x - width / 2, flops["implied_flops_ratio"], marker="_", s=600, color="black", zorder=5,
                 linewidths=2.2, label="implied by the layers: 2 gradients per product, 1 where an operand takes none")
    left.axhline(2.0, color="#999999", linestyle=":", linewidth=1)
    left.set_xticks(x, flops.index, rotation=25, ha="right")
    left.set_ylabel("Backward FLOPs / forward FLOPs")
    left.set_ylim(0, max(2.9, float(np.nanmax(flops.to_numpy(dtype=float))) * 1.3))
    left.set_title("FLOP ratio (from the estimate; batch-independent)", fontsize=11)
    left.legend(fontsize=9.5, loc="upper center", ncols=1, frameon=False)
    if latency.empty:
        right.axis("off")
        right.text(0.5, 0.5, "no measured forward/backward times", ha="center", va="center")
    else:
        latency = latency.assign(series=[f"{d} b{b} {p}" for d, b, p in
                                         zip(latency["device"], latency["batch"], latency["precision"])])
        series = sorted(set(latency["series"]))
        models = list(flops.index)
        step = 0.8 / len(series)
        palette = dict(zip(series, sns.color_palette("viridis", len(series))))
        for k, name in enumerate(series):
            sub = latency[latency["series"] == name].set_index("model").reindex(models)
            bars = right.bar(np.arange(len(models)) + (k - (len(series) - 1) / 2) * step, sub["latency_ratio"],
                             step, color=palette[name], label=name)
            right.bar_label(bars, fmt="%.2f", fontsize=8.5, padding=2)
        for i, model in enumerate(models):
            band = table[table["model"] == model][["latency_ratio_low", "latency_ratio_high",
                                                    "implied_flops_ratio"]].median()
            right.fill_between([i - 0.45, i + 0.45], band["latency_ratio_low"], band["latency_ratio_high"],
                               color="#dddddd", zorder=0, label="expected band" if i == 0 else None)
            right.plot([i - 0.45, i + 0.45], [band["implied_flops_ratio"]] * 2, color="black", linewidth=1.5,
                       label="implied FLOP ratio" if i == 0 else None)
        right.set_xticks(np.arange(len(models)), models, rotation=25, ha="right")
        right.set_ylabel("Backward time / forward time (medians)")
        right.set_ylim(bottom=0)
        right.set_title("Measured latency ratio per device, batch, precision", fontsize=11)
        right.legend(fontsize=8.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    _finish(fig, [], path, title)
    return table


def op_seconds(ops: pd.DataFrame, device: Device, precision: str = "fp32") -> pd.Series:
    """Per op row: max(FLOPs / peak, bytes / bandwidth) on `device` — the estimator's per-op roofline
    (rooflow.estimate.predict.op_times, eager unfused bytes: the same numbers as the summary's
    predicted_seconds). Datasheet roofs where the device has them, measured ones otherwise (a CPU)."""
    from rooflow.estimate.predict import op_times

    for measured in (False, True):
        times = op_times(ops, device, precision, measured=measured)
        if times is not None:
            return times["seconds"]
    return pd.Series(np.nan, index=ops.index)


def layer_type_of(ops: pd.DataFrame) -> pd.Series:
    """The layer type an op's time is booked to: the module type (Conv2d, BatchNorm2d, ...), except the
    optimizer step ('SGD update') and the loss ('loss')."""
    kind = ops["type"].fillna("").astype(str).replace("", "(model)")
    for phase, name in PHASE_LAYER_TYPES.items():
        kind = kind.where(ops["phase"] != phase, name)
    return kind


def estimated_time_by_layer_type(ops: pd.DataFrame, device: Device, precision: str = "fp32") -> pd.Series:
    """Predicted seconds per layer type on `device` (the per-op roofline, summed)."""
    seconds = op_seconds(ops, device, precision)
    return seconds.groupby(layer_type_of(ops)).sum().sort_values(ascending=False)


def _stacked(ax, shares: pd.DataFrame, totals: pd.Series, colours: dict, unit_note: str,
             starred: frozenset = frozenset()) -> None:
    left = np.zeros(len(shares))
    y = np.arange(len(shares))
    for column in shares.columns:
        values = shares[column].fillna(0).to_numpy()
        ax.barh(y, values, left=left, color=colours[column], label=column, edgecolor="white", linewidth=0.5)
        for yi, (start, value) in enumerate(zip(left, values)):
            if value >= 7:
                ax.text(start + value / 2, yi, f"{value:.0f}%", ha="center", va="center", fontsize=8.5,
                        color="white" if sum(colours[column][:3]) < 1.6 else "black")
        left += values
    for yi, (run, total) in enumerate(totals.items()):
        text = f"{total:.3g} s" if total >= 1 else f"{total * 1e3:.3g} ms"
        ax.text(101, yi, text + ("*" if run in starred else ""), va="center", fontsize=8.5)
    ax.set_yticks(y, shares.index, fontsize=9.5)
    ax.invert_yaxis()
    ax.set_xlim(0, 115)
    ax.set_xlabel(f"Share of the step's time [%] ({unit_note})")


def _top(frame: pd.DataFrame, limit: int) -> pd.DataFrame:
    """Keep the `limit` largest columns (by total), fold the rest into 'other'; columns of no time are left
    out, so that the legend lists only what the bars show."""
    totals = frame.sum()
    order = totals[totals > 0].sort_values(ascending=False).index
    keep = list(order[:limit])
    out = frame[keep].copy()
    rest = list(order[limit:])
    if rest:
        out["other"] = frame[rest].sum(axis=1) + out.get("other", 0)
    return out


def time_by_layer_figure(estimated: dict[str, pd.Series], kernels: dict[str, dict[str, float]] | None,
                         device: str, path: str | Path, kernel_source: str = "Nsight Systems",
                         measured: dict[str, dict[str, float]] | None = None) -> dict[str, pd.DataFrame]:
    """Where a step's time goes, as 100%-stacked bars, one bar per run: by layer type as measured (the timing
    job's profiled iteration, torch.profiler: on the CPU as on a GPU) beside the estimator's per-op roofline
    prediction, and by kernel class from Nsight Systems, or the timing job's kernel timeline, where a GPU run
    was profiled.

    ``estimated``/``measured``: {run label: seconds per layer type}; ``kernels``: {run label: seconds per
    kernel class}; ``kernel_source`` names where the kernel times come from. Returns the share tables
    (percent) drawn: ``measured``, ``estimate``, ``kernels``."""
    title = f"Where the time goes on {device}"
    kernels = {k: v for k, v in (kernels or {}).items() if v}
    measured = {k: v for k, v in (measured or {}).items() if v}
    panels = ([("measured", measured, "measured by layer type: torch.profiler, one profiled iteration")]
              if measured else [])
    panels.append(("estimate", estimated, "per-op roofline by layer type (a lower bound, not the time model)"))
    if kernels:
        panels.append(("kernels", kernels, f"measured by kernel class: {kernel_source}"))
    panels = [(name, data, note) for name, data, note in panels if data]
    if not panels:
        _no_data(path, f"no estimate or kernel profile for {device}", title)
        return {}
    tables = {}
    for name, data, _ in panels:
        frame = pd.DataFrame({run: pd.Series(v, dtype=float) for run, v in data.items()}).T.fillna(0)
        tables[name] = frame
    # a bound its measurement beats (an FP32 run's TF32 tensor-core kernels, a Winograd or FFT convolution that
    # multiplies less): starred, not shown as a floor under a step that ran faster
    timed = next((tables[name].sum(axis=1) for name in ("kernels", "measured") if name in tables), pd.Series())
    bound = tables["estimate"].sum(axis=1) if "estimate" in tables else pd.Series()
    beaten = frozenset(run for run in bound.index if timed.get(run, 0) > 0 and bound[run] > timed[run])
    if beaten:
        panels = [(name, data, note if name != "estimate" else
                   "per-op roofline by layer type (a lower bound, not the time model;\n* measured under it: the "
                   "checks say why)") for name, data, note in panels]
    categories = sorted({c for f in tables.values() for c in _top(f, MAX_LAYER_TYPES).columns})
    palette = sns.color_palette("tab20", max(20, len(categories)))
    colours = {c: palette[i % len(palette)] for i, c in enumerate(c for c in categories if c != "other")}
    colours["other"] = (0.75, 0.75, 0.75)
    height = max(len(f) for f in tables.values())
    fig, axes = plt.subplots(1, len(panels), figsize=(7.5 * len(panels) + 2.2, 1.4 + 0.42 * height),
                             squeeze=False, layout="constrained")
    shares_out = {}
    for ax, (name, _, note) in zip(axes.flat, panels):
        frame = _top(tables[name], MAX_LAYER_TYPES)
        totals = frame.sum(axis=1)
        shares = frame.div(totals.where(totals > 0), axis=0) * 100
        _stacked(ax, shares, totals, colours, note.replace("\n", " "), beaten if name == "estimate" else frozenset())
        ax.set_title(note, fontsize=11)
        shares_out[name] = shares
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[c], label=c) for c in categories]
    # the profiled iteration, not the timed median the summary gives; the roofline panel, not the prediction
    _finish(fig, handles, path, title + " (each bar's total at its right: that panel's iteration or bound)")
    return shares_out


def _predicted_panel(ax, data: pd.DataFrame, predicted: str, measured: str, low: str, high: str, band: float,
                     markers, colours, flags, unit: str, what: str) -> list:
    """One panel of predicted (x) vs measured (y): the predicted range as a horizontal bar, the diagonal,
    and the ±band lines that a measurement must fall between."""
    flagged = _scatter_panel(ax, data, predicted, measured, markers, colours, flags, connect=False)
    if low in data and high in data:
        span = data[[predicted, low, high, measured]].dropna()
        ax.errorbar(span[predicted], span[measured], xerr=[span[predicted] - span[low], span[high] - span[predicted]],
                    fmt="none", ecolor="#999999", elinewidth=0.8, capsize=2, zorder=1)
    values = pd.concat([data[predicted], data[measured]]).dropna()
    scale, why = axis_scale(values)
    lo, hi = float(values.min()), float(values.max())
    lo, hi = (lo / 3, hi * 3) if scale == "log" else (0.0, hi * 1.15)
    line = np.geomspace(max(lo, hi * 1e-6), hi, 50) if scale == "log" else np.linspace(lo, hi, 50)
    ax.plot(line, line, color="black", linewidth=1.2, label=f"measured = predicted ({what})")
    ax.fill_between(line, line * (1 - band), line * (1 + band), color="#4c72b0", alpha=0.12,
                    label=f"±{100 * band:.0f}% band ({what})")
    ax.set_xscale(scale)
    ax.set_yscale(scale)
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    note = f"\n({why})" if why else ""
    ax.set_xlabel(f"Predicted {what} [{unit}] (bar: predicted range){note}")
    ax.set_ylabel(f"Measured {what} [{unit}]{note}")
    return flagged


def predicted_figure(summary: pd.DataFrame, device: str, path: str | Path, flags: dict | None = None
                     ) -> pd.DataFrame:
    """Predicted vs measured per run on one device: step time (the time model: host and GPU work per op,
    rooflow.estimate.timemodel) and, on a GPU, the steady-state memory peak (rooflow.estimate.predict), each
    with its band; runs outside it are flagged in Checks."""
    data = measured_runs(summary, device)
    if "predicted_seconds" not in data:
        data = data.assign(predicted_seconds=np.nan)
    data = data[data["predicted_seconds"].notna() & (data["predicted_seconds"] > 0)]
    title = f"Predicted vs measured time and memory on {device}"
    if data.empty:
        _no_data(path, f"no run on {device} has both a prediction and a measurement", title)
        return data
    what = "time per step"
    if "timer" in data and "predicted_device_seconds" in data:
        # an imported nsys profile's time is its kernels' sum: against the predicted kernel time, its band scaled
        from rooflow.report.findings import KERNEL_TIMER, held_prediction

        kernels = data["timer"].eq(KERNEL_TIMER) & data["predicted_device_seconds"].notna()
        if kernels.any():
            columns = ["predicted_seconds", "predicted_seconds_low", "predicted_seconds_high"]
            held = data.apply(lambda run: pd.Series(held_prediction(run), index=columns), axis=1)
            data = data.assign(**{column: held[column] for column in columns})
            what = "kernel time per step" if kernels.all() else "time per step (imported profiles: kernel time)"
    data = data.assign(predicted_ms=data["predicted_seconds"] * 1e3, measured_ms=data["measured_seconds"] * 1e3)
    for column in ("predicted_seconds_low", "predicted_seconds_high"):
        if column in data:
            data[column.replace("seconds", "ms")] = data[column] * 1e3
    has_memory = "measured_memory_bytes" in data and data["measured_memory_bytes"].notna().any()
    markers, colours = _encodings(data)
    fig, axes = plt.subplots(1, 2 if has_memory else 1, figsize=(14 if has_memory else 9.5, 6.5),
                             layout="constrained", squeeze=False)
    band = float((data["predicted_seconds_high"] / data["predicted_seconds"] - 1).median()) \
        if "predicted_seconds_high" in data and data["predicted_seconds_high"].notna().any() else 0.25
    flagged = _predicted_panel(axes[0][0], data, "predicted_ms", "measured_ms", "predicted_ms_low",
                               "predicted_ms_high", band, markers, colours, flags, "ms", what)
    axes[0][0].set_title("outside the band: the Checks name what carries the predicted time", fontsize=10)
    columns = ["device", "model", "batch", "precision", "mode", "predicted_ms", "measured_ms"]
    if has_memory:
        from rooflow.report.findings import MEMORY_BAND

        memory = data[data["measured_memory_bytes"].notna() & data["predicted_memory_bytes"].notna()].copy()
        for column in ("predicted_memory_bytes", "predicted_memory_bytes_low", "predicted_memory_bytes_high",
                       "measured_memory_bytes"):
            memory[column.replace("bytes", "gb")] = memory[column] / 1e9
        flagged += _predicted_panel(axes[0][1], memory, "predicted_memory_gb", "measured_memory_gb",
                                    "predicted_memory_gb_low", "predicted_memory_gb_high", MEMORY_BAND, markers,
                                    colours, flags, "GB", "steady-state memory peak")
        axes[0][1].set_title("bar: tensors alone … with an FFT workspace (autotuner's choice)", fontsize=10)
        data = data.merge(memory[["model", "batch", "precision", "mode", "predicted_memory_gb",
                                  "measured_memory_gb"]], how="left", on=["model", "batch", "precision", "mode"])
        columns += ["predicted_memory_gb", "measured_memory_gb"]
    handles = [*axes[0][0].get_legend_handles_labels()[0]]
    if has_memory:
        handles += axes[0][1].get_legend_handles_labels()[0]
    handles += legend_handles(data["model"], data["batch"], data["mode"], sorted(set(flagged)))
    _finish(fig, handles, path, title)
    return data[columns]
