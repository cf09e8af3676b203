"""`rooflow summary`: results/summary.csv with display units."""

from __future__ import annotations

import argparse

from rooflow.report.summary import format_table, read_summary


def _cmd_summarize(args: argparse.Namespace) -> int:
    frame = read_summary(args.summary)
    print(format_table(frame))
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("summary", help="print results/summary.csv with display units",
                                   description="Print a workflow's summary table (SI units in the file) "
                                               "with display units: GFLOP, ms, GFLOP/s, % of roofline.")
    parser.add_argument("summary", nargs="?", default="results/summary.csv",
                        help="the workflow's summary table (default: %(default)s)")
    parser.set_defaults(func=_cmd_summarize)
