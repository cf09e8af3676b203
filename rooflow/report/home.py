"""The report's home page: the answer first — per device, a compact table of its runs (achieved FLOP/s, % of
the attainable roof, bound, what takes most of the time, measured vs predicted time, checks) beside the
device's roofline. An HTML fragment that ``report/workflow.rst`` includes above the checks' summary.
"""

from __future__ import annotations

import base64
import html
import math
from pathlib import Path
from typing import Any

import pandas as pd

from rooflow.report.findings import SEVERITIES, run_label
from rooflow.report.summary import UNSEEN_BOUND

# Rows shown per device before the rest fold away (a sweep has hundreds): the furthest from their roof first.
SHOWN_RUNS = 12
ANSWER_COLUMNS = ["run", "GFLOP/s", "% of roof", "bound", "most time", "measured ms", "predicted ms", "checks"]


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _shown(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:,.{digits}g}" if abs(value) < 10 ** digits else f"{value:,.0f}"


def answer_table(summary: pd.DataFrame, device: str, checks: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per run of ``device``: :data:`ANSWER_COLUMNS`, display units, furthest from its roof first
    (runs without a point last). ``checks``: the checks table (its worst severity per run and the count)."""
    runs = summary[summary["device"] == device]
    flagged: dict[str, list[str]] = {}
    if checks is not None and len(checks):
        for _, check in checks.iterrows():
            for label in {str(check["run"]), f"{device} {check['run']}"}:
                flagged.setdefault(label, []).append(str(check["severity"]))
    rows = []
    for _, run in runs.iterrows():
        label = run_label(run)
        achieved = _number(run.get("achieved_flops_per_second"))
        percent = _number(run.get("percent_of_roofline"))
        if run.get("bound") == UNSEEN_BOUND:
            # counters blind to the tensor-core work: what they saw is a floor, its share of a roof nothing
            percent = None
        measured, predicted = _number(run.get("measured_seconds")), _number(run.get("predicted_seconds"))
        top = run.get("top_time") if isinstance(run.get("top_time"), str) else None
        source = run.get("top_time_source") if isinstance(run.get("top_time_source"), str) else ""
        severities = flagged.get(label, [])
        worst = min(severities, key=SEVERITIES.index) if severities else ""
        status = str(run.get("status", "ok"))
        rows.append({
            "run": label.removeprefix(f"{device} "),
            "GFLOP/s": ("≥ " if run.get("bound") == UNSEEN_BOUND and achieved else "") + _shown(achieved and achieved / 1e9),
            "% of roof": _shown(percent, 2),
            "bound": run.get("bound") if isinstance(run.get("bound"), str) else status,
            "most time": f"{top} ({source})" if top else "–",
            "measured ms": _shown(measured and measured * 1e3),
            "predicted ms": _shown(predicted and predicted * 1e3),
            "checks": f"{len(severities)} ({worst})" if severities else "",
            "_percent": percent if percent is not None else math.inf,
            "_worst": worst,
        })
    frame = pd.DataFrame(rows, columns=[*ANSWER_COLUMNS, "_percent", "_worst"])
    return frame.sort_values("_percent", kind="stable").reset_index(drop=True)


def _svg(path: str | Path | None, device: str = "") -> str:
    """An SVG file as an image (a data URI: its ids and styles stay its own, apart from the page's and the
    other figures'), scaled to the column it sits in; '' where there is none."""
    if not path or not Path(path).is_file():
        return ""
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return (f'<img alt="roofline of {html.escape(device)}" style="width:100%;height:auto" '
            f'src="data:image/svg+xml;base64,{data}">')


def _rows_html(frame: pd.DataFrame) -> str:
    colour = {"error": "#ffe3e3", "warning": "#fff4e0", "result": "#f1ecff"}
    out = []
    for _, row in frame.iterrows():
        style = f' style="background:{colour[row["_worst"]]}"' if row["_worst"] in colour else ""
        cells = "".join(f'<td style="{"text-align:right;" if c not in ("run", "bound", "most time") else ""}'
                        f'padding:1px 6px;white-space:nowrap">{html.escape(str(row[c]))}</td>' for c in ANSWER_COLUMNS)
        out.append(f"<tr{style}>{cells}</tr>")
    return "".join(out)


def home_page(summary: pd.DataFrame, rooflines: dict[str, str | Path], checks: pd.DataFrame | None = None,
              shown: int = SHOWN_RUNS) -> str:
    """The home page's fragment: per device (in ``rooflines``' order), its answer table and its roofline."""
    head = "".join(f'<th style="text-align:left;padding:1px 6px;border-bottom:1px solid #999">{html.escape(c)}</th>'
                   for c in ANSWER_COLUMNS)
    sections = []
    for device, figure in rooflines.items():
        table = answer_table(summary, device, checks)
        if table.empty:
            continue
        first, rest = table.iloc[:shown], table.iloc[shown:]
        folded = (f"<details><summary>{len(rest)} more runs</summary><table style=\"border-collapse:collapse\">"
                  f"<tr>{head}</tr>{_rows_html(rest)}</table></details>") if len(rest) else ""
        kind = summary.loc[summary["device"] == device, "device_kind"].dropna()
        roof = summary.loc[summary["device"] == device, "roof_source"].dropna()
        note = (f"{len(table)} run{'s' if len(table) > 1 else ''}"
                + (f", {kind.iloc[0]}" if len(kind) else "")
                + (f", % of the {roof.iloc[0]} roof" if len(roof) else ""))
        sections.append(
            f'<div style="margin:6px 0 14px"><h3 style="margin:4px 0">{html.escape(device)} '
            f'<span style="font-weight:normal;color:#555;font-size:85%">({html.escape(note)}; furthest from the '
            f'roof first)</span></h3><div style="display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start">'
            f'<div style="flex:1 1 430px;min-width:360px;font-size:80%;overflow-x:auto">'
            f'<table style="border-collapse:collapse"><tr>{head}</tr>{_rows_html(first)}</table>{folded}</div>'
            f'<div style="flex:1 1 420px;max-width:620px">{_svg(figure, device)}</div></div></div>')
    if not sections:
        return "<p><strong>No run was measured</strong>: the summary has no row with a time.</p>\n"
    return ('<div><p style="margin:2px 0 6px">Per device: how fast each run went (achieved FLOP/s), how far it is '
            'from what the roofline allows at its arithmetic intensity (% of roof), whether memory or compute bounds '
            'it, what takes most of its time (measured by torch.profiler where recorded, else predicted), and the '
            'measured vs predicted step time. Rows tinted by their worst check.</p>'
            + "".join(sections) + "</div>\n")
