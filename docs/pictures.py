"""Redraw the README's sweep pictures: the roofline of a 480-run sweep on the H100 SXM5, static
(docs/roofline-sweep.png) and interactive (the report's page, written to a temp file and not committed).

The sweep is the real H100 summary rows of tests/data/real/h100-rooflow, relabelled across 20 models,
4 batches, 3 precisions and 2 modes (rooflow.report.sweep.relabelled_sweep) — the tests draw the same.

    python docs/pictures.py            # from the repository root, with the environment active
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pandas as pd

from rooflow.hardware.devices import default_catalogue_path, load_device
from rooflow.report.checks import build_checks, flagged_runs
from rooflow.report.interactive import interactive_roofline
from rooflow.report.sweep import device_roofline, relabelled_sweep

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "tests" / "data" / "real" / "h100-rooflow"


def main() -> int:
    device = load_device(default_catalogue_path(), "h100-sxm5-80gb", REAL / "ceilings-h100.json")
    summary = relabelled_sweep(pd.read_csv(REAL / "summary-tf32.csv"), device)
    checks, _ = build_checks(summary)
    drawn = device_roofline(summary, device, ROOT / "docs" / "roofline-sweep.png", flags=flagged_runs(checks))
    page = Path(tempfile.gettempdir()) / "rooflow-roofline-sweep.html"
    interactive_roofline(summary, [device], page, checks=checks)
    print(f"docs/roofline-sweep.png: {len(drawn['points'])} runs, {len(drawn['panels'])} panels, "
          f"{sum(not lbl['dropped'] for lbl in drawn['labels'])} labels; interactive page: {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
