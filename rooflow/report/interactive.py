"""The interactive roofline: every device's runs in one self-contained HTML page (Plotly, its basic JavaScript
bundle embedded: it opens offline, inside the Snakemake report or on its own).

Hovering a point names its run with its FLOP rate, intensity, share of the roof, bound and failed checks;
selectors above the plot pick the device and filter the runs by model, batch, precision and mode. Encodings
as the sweep roofline (rooflow.report.sweep): colour + symbol = model, size = batch, filled = training,
hollow = inference; roofs datasheet solid, measured dashed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from rooflow.hardware.devices import Device
from rooflow.io import atomic_path
from rooflow.report.findings import variant_label
from rooflow.report.plots import roof_lines
from rooflow.report.summary import UNSEEN_BOUND
from rooflow.report.sweep import batch_sizes, measured_points, model_styles


def plotly_basic_js() -> str:
    """plotly.js's basic bundle (scatter, bar, pie), shipped in rooflow/data/js (its README says why and how
    to refresh it): a quarter of the full bundle, so the page stays under the 2 MB that Chromium shows as a data
    URL, which is how the Snakemake report embeds it."""
    from importlib import resources

    return resources.files("rooflow.data").joinpath("js/plotly-basic.min.js").read_text(encoding="utf-8")


# matplotlib marker → Plotly symbol, for the same encodings as the static figures
SYMBOLS = {"o": "circle", "s": "square", "^": "triangle-up", "D": "diamond", "v": "triangle-down", "P": "cross",
           "X": "x", "<": "triangle-left", ">": "triangle-right", "h": "hexagon", "*": "star", "p": "pentagon",
           "d": "diamond-tall"}
FILTERS = ("model", "batch", "precision", "mode")
HOVER = ("<b>%{customdata[0]}</b><br>%{y:.3s}FLOP/s at %{x:.3g} FLOP/byte<br>%{customdata[1]} of the roof "
         "(%{customdata[2]}-bound)<br>checks: %{customdata[3]}<extra></extra>")


def run_checks(checks: pd.DataFrame | None) -> dict[tuple, str]:
    """{(device, model, batch, precision, mode): 'severity: check; ...'} from the checks table."""
    out: dict[tuple, list[str]] = {}
    for _, row in (checks if checks is not None else pd.DataFrame()).iterrows():
        device = row["device"] if isinstance(row["device"], str) else ""
        key = (device, row["model"], int(row["batch"]), row["precision"], row["mode"])
        out.setdefault(key, []).append(f"{row['severity']}: {row['check']}")
    return {key: "; ".join(values) for key, values in out.items()}


def _percent(value) -> str:
    return f"{value:.0f}%" if pd.notna(value) else "n/a"


def roofline_traces(summary: pd.DataFrame, devices: list[Device], checks: pd.DataFrame | None = None,
                    extra_roofs: dict[str, list] | None = None) -> list[dict]:
    """Plotly traces (plain dicts): per device its roof lines, then one trace per model with its runs;
    each trace's ``meta`` names its device and kind ('roof' or 'runs')."""
    notes = run_checks(checks)
    traces: list[dict] = []
    styles = model_styles(summary.loc[summary["device"].isin([d.key for d in devices]), "model"])
    for device in devices:
        rows = measured_points(summary, device.key)
        extra = (extra_roofs or {}).get(device.key, [])
        all_roofs = [*device.roofs(), *extra]
        ridges = [c.value / m.value for c in all_roofs if c.kind == "compute" for m in all_roofs if m.kind == "memory"]
        intensities = [*rows["arithmetic_intensity"], *ridges] or [1.0]
        for line in roof_lines(device, min(intensities) / 3, max(intensities) * 3, extra_roofs=extra):
            traces.append({"type": "scatter", "mode": "lines", "x": list(map(float, line["xs"])),
                           "y": list(map(float, line["ys"])), "name": line["label"], "hoverinfo": "name",
                           "line": {"color": line["colour"], "width": 2 if line["memory_level"] == "dram" else 1.2,
                                    "dash": "solid" if line["linestyle"] == "-" else "dash"},
                           "legendgroup": "roofs", "meta": {"device": device.key, "kind": "roof"}})
        sizes = batch_sizes(rows["batch"])
        for model, group in rows.sort_values(["batch", "precision", "mode"]).groupby("model", sort=True):
            colour, marker = styles[model]
            symbol = SYMBOLS.get(marker, "circle")
            custom = []
            for _, row in group.iterrows():
                key = (int(row["batch"]), row["precision"], row["mode"])
                note = notes.get((device.key, model, *key)) or notes.get(("", model, *key)) or "none failed"
                custom.append([f"{device.key} {model} b{key[0]} {key[1]} {key[2]}{variant_label(row)}",
                               _percent(None if row.get("bound") == UNSEEN_BOUND else row.get("percent_of_roofline")),
                               row.get("bound") or "n/a", note,
                               model, key[0], key[1], key[2]])
            traces.append({
                "type": "scatter", "mode": "markers", "name": model, "legendgroup": model,
                "x": [float(v) for v in group["arithmetic_intensity"]],
                "y": [float(v) for v in group["achieved_flops_per_second"]], "customdata": custom,
                "hovertemplate": HOVER,
                "marker": {"color": colour, "symbol": [symbol if m == "training" else f"{symbol}-open"
                                                       for m in group["mode"]],
                           "size": [round(float(sizes[int(b)]) ** 0.5 * 1.25, 2) for b in group["batch"]],
                           "line": {"color": colour, "width": 1.2}},
                "meta": {"device": device.key, "kind": "runs"}})
    return traces


# The selectors: the page's own small script over Plotly's API (the filter transforms of plotly.js 1 are
# gone from 2 on). It keeps every trace's full data and restyles the visible subset.
CONTROLS = """
const gd = document.getElementById('{plot_id}');
const full = gd.data.map(t => JSON.parse(JSON.stringify(t)));
const options = %(options)s;
const bar = document.createElement('div');
bar.id = 'rooflow-filters';
bar.style.cssText = 'font: 14px sans-serif; margin: 6px 0 4px 60px; display: flex; gap: 18px; flex-wrap: wrap';
const selects = {};
for (const [name, values] of Object.entries(options)) {
  const label = document.createElement('label');
  label.textContent = name + ' ';
  const select = document.createElement('select');
  select.name = name;
  for (const value of (name === 'device' ? values : ['all', ...values])) {
    const option = document.createElement('option');
    option.value = option.textContent = String(value);
    select.appendChild(option);
  }
  select.addEventListener('change', apply);
  label.appendChild(select);
  bar.appendChild(label);
  selects[name] = select;
}
gd.parentNode.insertBefore(bar, gd);
const column = {model: 4, batch: 5, precision: 6, mode: 7};
function apply() {
  const device = selects.device.value;
  const data = full.map(t => {
    const trace = JSON.parse(JSON.stringify(t));
    trace.visible = t.meta.device === device;
    if (t.meta.kind !== 'runs' || !trace.visible) return trace;
    const keep = t.customdata.map(c => Object.entries(column).every(
      ([name, i]) => selects[name].value === 'all' || String(c[i]) === selects[name].value));
    const pick = values => Array.isArray(values) ? values.filter((_, i) => keep[i]) : values;
    for (const field of ['x', 'y', 'customdata']) trace[field] = pick(t[field]);
    trace.marker.symbol = pick(t.marker.symbol);
    trace.marker.size = pick(t.marker.size);
    trace.visible = trace.x.length > 0;
    return trace;
  });
  const layout = gd.layout;
  layout.title.text = 'Roofline: ' + device + ' (hover a point for its run)';
  layout.xaxis.autorange = true;
  layout.yaxis.autorange = true;
  Plotly.react(gd, data, layout);
}
apply();
window.rooflowSelect = (name, value) => { selects[name].value = String(value); apply(); };
"""


def interactive_roofline(summary: pd.DataFrame, devices: list[Device], path: str | Path,
                         checks: pd.DataFrame | None = None, extra_roofs: dict[str, list] | None = None) -> dict:
    """Write the interactive roofline page; return its traces' counts and the selector options."""
    import plotly.graph_objects as go
    import plotly.io as pio

    traces = roofline_traces(summary, devices, checks, extra_roofs)
    runs = pd.concat([measured_points(summary, d.key) for d in devices]) if devices else summary.iloc[:0]
    with_runs = [d.key for d in devices if (runs["device"] == d.key).any()]
    options = {"device": with_runs + [d.key for d in devices if d.key not in with_runs],
               "model": sorted(set(runs["model"])), "batch": sorted({int(b) for b in runs["batch"]}),
               "precision": sorted(set(runs["precision"])), "mode": sorted(set(runs["mode"]))}
    figure = go.Figure(data=traces)
    figure.update_layout(
        title={"text": "Roofline"}, template="plotly_white", height=900, hovermode="closest",
        margin={"t": 50, "b": 30},
        xaxis={"type": "log", "title": {"text": "Arithmetic intensity [FLOP/byte]"}},
        yaxis={"type": "log", "title": {"text": "Performance [FLOP/s]"}, "tickformat": "~s",
               "ticksuffix": "FLOP/s"},
        # under the plot, so that the long roof names do not squeeze it
        legend={"title": {"text": "roofs, then models (click one to hide it)"}, "font": {"size": 11},
                "orientation": "h", "x": 0, "y": -0.12, "yanchor": "top"})
    html = pio.to_html(figure, include_plotlyjs=False, full_html=True, div_id="roofline",
                       post_script=CONTROLS % {"options": json.dumps(options)},
                       config={"displaylogo": False, "responsive": True})
    html = html.replace("<head>", f"<head><script type=\"text/javascript\">{plotly_basic_js()}</script>", 1)
    with atomic_path(path) as tmp:
        Path(tmp).write_text(html, encoding="utf-8")
    return {"traces": len(traces), "points": int(sum(len(t["x"]) for t in traces if t["meta"]["kind"] == "runs")),
            "options": options}
