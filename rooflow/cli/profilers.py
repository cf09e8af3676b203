"""``rooflow ncu`` and ``rooflow nsys``: aggregate profiler output by hand, as the workflow's rules do.

    rooflow ncu ncu-log-vgg11.txt                 # table: FLOPs by precision, DRAM/L2/L1 bytes, time
    rooflow ncu out.* --format json               # one file per metric (NERSC style), one run or one run each
    rooflow nsys run_cuda_gpu_trace.csv           # kernel time, memcpy time apart, by kernel class

JSON output is exactly the ``totals`` the workflow writes (see :mod:`rooflow.profilers.ncu` and
:mod:`rooflow.profilers.nsys`); tables are for people, with units.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rooflow.profilers.ncu import aggregate_ncu
from rooflow.profilers.nsys import aggregate_nsys
from rooflow.units import format_quantity


def _ncu_table(result) -> str:
    totals = result.totals
    files = ", ".join(str(p) for p in result.paths[:3]) + (" ..." if len(result.paths) > 3 else "")
    counted = f"{totals['kernels']} kernels"
    if totals.get("runs", 1) > 1:
        per_run = totals["kernels_per_run"]
        counted = f"{totals['runs']} separate ncu runs of {min(per_run)}–{max(per_run)} kernels"
    lines = [f"Nsight Compute: {counted} from {files} ({totals['source_format']})", ""]
    rows = [("FLOPs fp64 (CUDA cores)", totals["flops_fp64"], "FLOP"),
            ("FLOPs fp32 (CUDA cores)", totals["flops_fp32"], "FLOP"),
            ("FLOPs fp16 (CUDA cores)", totals["flops_fp16"], "FLOP"),
            ("FLOPs tensor cores", totals["flops_tensor"], "FLOP"),
            ("FLOPs total", totals["flops_total"], "FLOP"),
            ("DRAM traffic", totals["dram_bytes"], "B"),
            ("L2 traffic", totals["l2_bytes"], "B"),
            ("L1 traffic", totals["l1_bytes"], "B")]
    if "seconds" in totals:
        rows.append(("kernel time (ncu, clocks locked)", totals["seconds"], "s"))
    width = max(len(name) for name, _, _ in rows)
    lines += [f"  {name:<{width}}  {format_quantity(value, unit)}" for name, value, unit in rows]
    if totals["flops_total"] and totals["dram_bytes"]:
        lines.append(f"  {'arithmetic intensity':<{width}}  {totals['flops_total'] / totals['dram_bytes']:.3g} "
                     f"FLOP/B (DRAM)")
    if not totals["tensor_metrics_collected"]:
        lines += ["", "  No tensor-core metric was collected: TF32/FP16/BF16 tensor-core work is NOT in these FLOPs."]
    kernels = result.kernels
    if len(kernels):
        lines += ["", "By kernel class:"]
        grouped = kernels.groupby("kernel_class").agg(
            kernels=("id", "size"), flops=("flops_total", lambda s: s.sum(min_count=1)),
            dram=("dram_bytes", lambda s: s.sum(min_count=1)), seconds=("seconds", lambda s: s.sum(min_count=1)))
        grouped = grouped.sort_values("kernels", ascending=False)
        lines.append(f"  {'class':<14}{'kernels':>8}  {'FLOPs':>14}  {'DRAM':>12}  {'time':>12}")
        for name, row in grouped.iterrows():
            lines.append(f"  {name:<14}{int(row['kernels']):>8}  {format_quantity(row['flops'], 'FLOP'):>14}  "
                         f"{format_quantity(row['dram'], 'B'):>12}  {format_quantity(row['seconds'], 's'):>12}")
    lines += ["", "How:"] + [f"  - {note}" for note in result.notes]
    return "\n".join(lines)


def _nsys_table(result) -> str:
    totals = result.totals
    kernel, memcpy, every = totals["kernel_seconds"], totals["memcpy_seconds"], totals["all_rows_seconds"]
    memset = totals["memset_seconds"]
    memcpy_text = format_quantity(memcpy, "s") if memcpy is not None else "not in report"
    memset_text = format_quantity(memset, "s") if memset is not None else "not in report"
    lines = [f"Nsight Systems: {totals['kernels']} kernel launches ({totals['source_format']})", "",
             f"  kernel time          {format_quantity(kernel, 's'):>12}   kernel rows only: the GPU time of the step",
             f"  memcpy time          {memcpy_text:>12}   kept apart: copies are not kernel time",
             f"  memset time          {memset_text:>12}   kept apart: fills are not kernel time",
             f"  all rows             {format_quantity(every, 's'):>12}   a naive sum of every row, NOT the step's time",
             "", "Kernel time by class:"]
    for name, seconds in totals["by_class"].items():
        share = 100 * seconds / kernel if kernel else 0.0
        lines.append(f"  {name:<14}{format_quantity(seconds, 's'):>12}  {share:5.1f}%")
    lines += ["", result.note]
    return "\n".join(lines)


def _run(aggregate, table):
    """A sub-command: aggregate the files, optionally keep the per-kernel table, print totals."""

    def run(args: argparse.Namespace) -> int:
        from rooflow.io import check_distinct

        check_distinct({"--kernels-csv": args.kernels_csv}, {"FILE": args.files})
        result = aggregate(args.files)
        if args.kernels_csv:
            from rooflow.io import write_csv
            write_csv(args.kernels_csv, result.kernels)
        print(json.dumps(result.totals, indent=2) if args.format == "json" else table(result))
        return 0

    return run


_run_ncu = _run(aggregate_ncu, _ncu_table)
_run_nsys = _run(aggregate_nsys, _nsys_table)


def register(subparsers: Any) -> None:
    ncu = subparsers.add_parser(
        "ncu", help="aggregate Nsight Compute output: FLOPs by precision, DRAM/L2/L1 bytes, time",
        description="Aggregate the Nsight Compute output of ONE profiled step (text output, --csv details page, "
                    "--csv --page raw, or one file per metric: files holding the same kernels are merged by "
                    "kernel ID, files of separate ncu runs are each summed over their own kernels) into "
                    "per-precision FLOPs, DRAM/L2/L1 bytes and kernel time.")
    ncu.add_argument("files", nargs="+", metavar="FILE", help="ncu output file(s) of one run (.gz accepted)")
    ncu.add_argument("--format", choices=("table", "json"), default="table",
                     help="table for people (default) or the totals as JSON")
    ncu.add_argument("--kernels-csv", metavar="PATH", help="also write the per-kernel table (SI units) here")
    ncu.set_defaults(func=_run_ncu)

    nsys = subparsers.add_parser(
        "nsys", help="sum kernel time from nsys stats reports (memcpy time kept apart)",
        description="Sum kernel time over the `nsys stats --format csv` reports of ONE profiled run "
                    "(cuda_gpu_trace/gputrace, cuda_gpu_kern_sum/gpukernsum), keeping memcpy/memset rows apart.")
    nsys.add_argument("files", nargs="+", metavar="FILE", help="nsys stats CSV report(s) of one run")
    nsys.add_argument("--format", choices=("table", "json"), default="table",
                      help="table for people (default) or the totals as JSON")
    nsys.add_argument("--kernels-csv", metavar="PATH", help="also write the per-kernel table (SI units) here")
    nsys.set_defaults(func=_run_nsys)
