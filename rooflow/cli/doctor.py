"""``rooflow doctor``: the preflight of a machine (rooflow.measure.doctor)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rooflow.errors import RooflowError
from rooflow.hardware.devices import default_catalogue_path


def _cmd_doctor(args: argparse.Namespace) -> int:
    from rooflow.io import atomic_path, check_writable, write_json
    from rooflow.measure.doctor import exit_status, format_table, run_doctor

    if args.output and args.json and Path(args.output).resolve() == Path(args.json).resolve():
        raise RooflowError(f"--output and --json are both {args.output}: the second would replace the first; give "
                           "each its own file")
    for output in (args.output, args.json):  # before the checks, which profile for minutes on a GPU
        if output:
            check_writable(output)
    rows = run_doctor(args.device, args.devices_file, args.files, args.ncu, args.nsys)
    table = format_table(rows)
    print(table)
    if args.output:
        with atomic_path(args.output) as tmp:
            tmp.write_text(table + "\n", encoding="utf-8")
    if args.json:
        write_json(args.json, {"device": args.device, "checks": rows})
    return exit_status(rows)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "doctor", help="check this machine before a sweep: software, GPU vs catalogue, ncu/nsys, every GPU path",
        description="Preflight checks, one table row each (check, result, what to do). On a machine without a GPU "
                    "the GPU checks say 'skipped: no GPU' (in a SLURM job for a GPU device: a failure); on a GPU node (the workflow's doctor rule submits it "
                    "there) they profile one small real step. Exit status 1 when a check fails.")
    parser.add_argument("--device", help="the catalogue key the jobs on this node will use (config.devices)")
    parser.add_argument("--devices-file", default=str(default_catalogue_path()),
                        help="device catalogue (default: %(default)s)")
    parser.add_argument("--ncu", default="ncu", help="ncu executable (profiling.ncu.executable)")
    parser.add_argument("--nsys", default="nsys", help="nsys executable (profiling.nsys.executable)")
    parser.add_argument("--files", default="results/doctor/files",
                        help="folder for the GPU checks' files (ncu CSVs, plan, timeline)")
    parser.add_argument("--output", help="also write the table to this text file")
    parser.add_argument("--json", help="also write the records to this JSON file")
    parser.set_defaults(func=_cmd_doctor)
