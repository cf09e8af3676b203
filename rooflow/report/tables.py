"""The report's tables as self-contained HTML: sortable by any column (click its header), filterable by
text, no network access. Snakemake's report shows an HTML result in the page; a CSV is only a download.

Numbers keep their exact value for sorting (``data-sort``) and show 4 significant digits.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from rooflow.io import atomic_path

_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;font-size:13px;margin:12px;color:#222}
h1{font-size:17px;margin:0 0 4px} p.note{margin:2px 0 10px;color:#444;max-width:70em}
input{font-size:13px;padding:3px 6px;width:24em;margin-bottom:8px}
table{border-collapse:collapse} th,td{border:1px solid #ccc;padding:3px 6px;vertical-align:top}
th{background:#f0f0f0;cursor:pointer;position:sticky;top:0;white-space:nowrap;user-select:none}
th.asc::after{content:" \\25B2"} th.desc::after{content:" \\25BC"}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.error td{background:#ffe3e3} tr.warning td{background:#fff4e0} tr.result td{background:#f1ecff}
.count{color:#666;margin-left:8px}
"""

_SCRIPT = """
(function(){
  const table=document.querySelector('table'); const body=table.tBodies[0];
  const rows=()=>Array.from(body.rows);
  table.querySelectorAll('th').forEach((th,i)=>th.addEventListener('click',()=>{
    const asc=!th.classList.contains('asc');
    table.querySelectorAll('th').forEach(h=>h.classList.remove('asc','desc'));
    th.classList.add(asc?'asc':'desc');
    const key=r=>{const c=r.cells[i]; const v=c.dataset.sort; return v===undefined?c.textContent:Number(v);};
    const sorted=rows().sort((a,b)=>{const x=key(a),y=key(b);
      if(typeof x==='number'&&typeof y==='number'){if(isNaN(x))return 1; if(isNaN(y))return -1; return asc?x-y:y-x;}
      return asc?String(x).localeCompare(String(y)):String(y).localeCompare(String(x));});
    sorted.forEach(r=>body.appendChild(r));
  }));
  const filter=document.querySelector('input'); const count=document.querySelector('.count');
  const update=()=>{const t=filter.value.toLowerCase(); let n=0;
    rows().forEach(r=>{const show=r.textContent.toLowerCase().includes(t); r.style.display=show?'':'none'; n+=show;});
    count.textContent=n+' of '+rows().length+' rows';};
  filter.addEventListener('input',update); update();
})();
"""


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return '<td class="num" data-sort="NaN"></td>'
    if isinstance(value, bool):
        return f"<td>{value}</td>"
    if isinstance(value, int) or (hasattr(value, "dtype") and "int" in str(getattr(value, "dtype", ""))):
        return f'<td class="num" data-sort="{int(value)}">{int(value):,}</td>'
    if isinstance(value, float) or hasattr(value, "dtype"):
        number = float(value)
        shown = f"{number:,.0f}" if abs(number) >= 1e4 and number == int(number) and abs(number) < 1e15 \
            else f"{number:.4g}"
        return f'<td class="num" data-sort="{number!r}">{shown}</td>'
    return f"<td>{html.escape(str(value))}</td>"


def html_table(frame: pd.DataFrame, title: str, note: str = "", row_class: Iterable[str] | None = None) -> str:
    """A whole HTML page: title, note, a text filter and the sortable table."""
    classes = list(row_class) if row_class is not None else [""] * len(frame)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = []
    for css, (_, row) in zip(classes, frame.iterrows()):
        cells = "".join(_cell(v) for v in row.tolist())
        body.append(f'<tr class="{html.escape(css or "")}">{cells}</tr>')
    empty = "" if len(frame) else f'<tr><td colspan="{max(1, len(frame.columns))}">no rows</td></tr>'
    return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>"
            f"<p class=\"note\">{html.escape(note)}</p>"
            f"<input type=\"search\" placeholder=\"filter rows, e.g. resnet18 b8\"><span class=\"count\"></span>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}{empty}</tbody></table>"
            f"<script>{_SCRIPT}</script></body></html>\n")


def config_page(config: dict[str, Any], digest: str) -> str:
    """The report's page of the configuration the results were made with (validated: the defaults filled in)."""
    import yaml

    text = yaml.safe_dump(config, sort_keys=False, default_flow_style=None, width=110)
    return (f"<html><head><meta charset='utf-8'><title>Configuration {digest}</title></head><body>"
            f"<h3>Configuration of these results ({html.escape(digest)})</h3>"
            "<p>The config the workflow ran with, its defaults filled in (config/README.md says what each key does). "
            "Its digest names this page: after a config change, <code>snakemake --report</code> stops until a run "
            "has made the new configuration's results.</p>"
            f"<pre style='font-size:90%'>{html.escape(text)}</pre></body></html>\n")


def write_html_table(path: str | Path, frame: pd.DataFrame, title: str, note: str = "",
                     row_class: Iterable[str] | None = None) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(html_table(frame, title, note, row_class), encoding="utf-8")


def checks_overview(checks: pd.DataFrame) -> str:
    """An HTML fragment for the report's front page: one line per kind of check (errors first) with how many
    runs failed it; its runs, values, causes and evidence fold open on demand (``<details>``)."""
    if checks.empty:
        return ('<div style="border-left:4px solid #2b8a3e;padding:4px 10px;background:#ebfbee">'
                "<strong>Self-checks: all passed.</strong> No point above its roof, no unexplained FLOP "
                "mismatch, no forward:backward ratio outside its band, no noisy measurement.</div>\n")
    counts = checks["severity"].value_counts()
    summary = ", ".join(f"{counts[s]} {s}{'s' if counts[s] > 1 else ''}" for s in ("error", "warning", "result")
                        if s in counts)
    colour = "#c92a2a" if "error" in counts else "#e67700"
    mark = {"error": "#c92a2a", "warning": "#e67700", "result": "#7048e8"}
    evidence = checks["evidence"] if "evidence" in checks.columns else pd.Series([""] * len(checks), index=checks.index)
    items = []
    for (severity, check), group in checks.groupby(["severity", "check"], sort=False):
        rows = []
        for index, run in group.iterrows():
            more = evidence.loc[index]
            more = f'<div style="color:#555">{html.escape(str(more))}</div>' if isinstance(more, str) and more else ""
            rows.append(f'<tr><td style="font-family:monospace;white-space:nowrap">{html.escape(str(run["run"]))}</td>'
                        f'<td>{html.escape(str(run["value"]))}</td><td>{html.escape(str(run["expected"]))}</td>'
                        f'<td>{html.escape(str(run["likely_cause"]))}{more}</td></tr>')
        causes = set(group["likely_cause"].astype(str))
        expected = set(group["expected"].astype(str))  # one expectation for the line only where all runs share it
        expected = f" (expected {html.escape(next(iter(expected)))})" if len(expected) == 1 else ""
        one_cause = f" — {html.escape(next(iter(causes)))}" if len(causes) == 1 and len(next(iter(causes))) < 90 else ""
        items.append(
            f'<details style="margin:2px 0"><summary><span style="color:{mark.get(severity, "#444")}">'
            f"{html.escape(severity)}</span> <strong>{html.escape(check)}</strong>: {len(group)} "
            f"run{'s' if len(group) > 1 else ''}{expected}{one_cause}"
            f'</summary><table style="border-collapse:collapse;font-size:90%;margin:4px 0 8px 16px">'
            f"<tr><th align=left>run</th><th align=left>value</th><th align=left>expected</th>"
            f"<th align=left>cause</th></tr>{''.join(rows)}"
            f"</table></details>")
    return (f'<div style="border-left:4px solid {colour};padding:4px 10px;background:#fff8f0">'
            f"<strong>Self-checks: {len(checks)} flagged ({summary}).</strong> One line per check: click it for "
            f"its runs and causes. Flagged runs stay in every figure and table, ringed on the roofline; the full "
            f"table is under <em>Checks</em>.{''.join(items)}</div>\n")


def environment_table(timings: list[dict]) -> pd.DataFrame:
    """One row per measurement: the run, its status, and the environment it ran in (versions, host, CPU,
    GPU, driver, clocks and temperature before, during (throttling) and after, TF32 flags, threads, SLURM
    job, timing rounds, and for an out-of-memory run the memory asked for and available)."""
    rows = []
    for record in timings:
        row = {k: record.get(k) for k in ("device", "model", "batch", "precision", "mode", "status")}
        for key, value in (record.get("environment") or {}).items():
            row[key] = value if not isinstance(value, (dict, list)) else str(value)
        for key, value in (record.get("environment_after") or {}).items():
            row[f"after_{key}"] = value if not isinstance(value, (dict, list)) else str(value)
        # what NVML saw during the timed iterations (GPU runs): throttle reasons, clock, temperature, power
        for key, value in (record.get("gpu_during_timing") or {}).items():
            row[f"during_{key}"] = value if not isinstance(value, (dict, list)) else ", ".join(map(str, value))
        for key in ("warmup_iterations", "timed_iterations", "timing_rounds", "peak_rss_bytes",
                    "max_memory_allocated_bytes", "warmup_peak_allocated_bytes", "steady_peak_allocated_bytes",
                    "steady_peak_reserved_bytes", "memory_requested_bytes", "memory_available_bytes", "message"):
            if key in record:
                row[key] = record[key]
        rows.append(row)
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    return frame.sort_values(["device", "model", "batch", "precision", "mode"], kind="stable").reset_index(drop=True)
