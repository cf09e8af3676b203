"""`rooflow checks`: the self-checks a workflow's results fail."""

from __future__ import annotations

import argparse
from pathlib import Path

from rooflow.report.checks import check_files


def _cmd_checks(args: argparse.Namespace) -> int:
    root = Path(args.estimates)
    totals_paths = sorted(root.glob("*/*/totals.json"))
    layers_paths = [p.with_name("layers.csv") for p in totals_paths]
    checks, _ = check_files(args.summary, totals_paths, [p if p.is_file() else None for p in layers_paths],
                            sorted(Path(args.ceilings).glob("*.json")), args.devices_file)
    if checks.empty:
        print("all self-checks passed")
        return 0
    for _, row in checks.iterrows():
        print(f"{row['severity']:7} {row['run']}: {row['check']}: {row['value']} (expected {row['expected']})"
              f"\n        likely cause: {row['likely_cause']}")
    return 1 if (checks["severity"] == "error").any() else 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "checks", help="list the self-checks a workflow's results fail",
        description="Self-checks over results/summary.csv and the estimates: points above their roof, "
                    "unexplained measured/estimated FLOP ratios, forward:backward ratios outside what the "
                    "layers imply, noisy measurements, out-of-memory runs, measured cache roofs at or below DRAM. "
                    "Exit status 1 when any is an error.")
    parser.add_argument("summary", nargs="?", default="results/summary.csv")
    parser.add_argument("--estimates", default="results/estimate",
                        help="the estimate folder (MODEL/bBATCH-PRECISION-MODE/{totals.json,layers.csv})")
    parser.add_argument("--ceilings", default="results/ceilings",
                        help="the measured ceilings folder ({device}.json): cache roofs at or below DRAM")
    parser.add_argument("--devices-file", default=None,
                        help="device catalogue, to compare measured cache roofs with the datasheet DRAM roof too")
    parser.set_defaults(func=_cmd_checks)
