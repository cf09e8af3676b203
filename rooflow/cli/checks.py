"""`rooflow checks`: the self-checks a workflow's results fail."""

from __future__ import annotations

import argparse
from pathlib import Path

from rooflow.errors import RooflowError
from rooflow.io import missing
from rooflow.report.checks import check_file_records, records_path
from rooflow.report.findings import read_checks

# the folders the checks read (given, or when no checks file is newer than the summary): by default the workflow's,
# beside its results/summary.csv
FOLDERS = {"estimates": "estimate", "ceilings": "ceilings", "profiles": "profile"}
# what each folder's checks read (the globs below)
FOLDER_FILES = {"estimates": "*/*/totals.json", "ceilings": "*.json", "profiles": "*/*/*/timing.json"}


def _cmd_checks(args: argparse.Namespace) -> int:
    if args.records and (why := missing(args.records)):  # "all self-checks passed", exit 0, had read nothing
        raise RooflowError(f"--records {args.records}: {why}: give the workflow's results/checks/checks.json, or "
                           "leave --records out to compute the checks")
    unread: list[tuple[str, str]] = []  # (option, why) of the default folders not there: their checks did not run
    records_file = Path(args.records) if args.records else records_path(args.summary)
    summary = Path(args.summary)
    given = {option: getattr(args, option) for option in FOLDERS if getattr(args, option) is not None}
    if args.devices_file is not None and (why := missing(args.devices_file)):  # its cache-roof checks would pass
        raise RooflowError(f"--devices-file {args.devices_file}: {why}: give a device catalogue (config/devices.yaml, "
                           "or the workflow's devices_file), or leave it out")
    if records_file.is_file() and (args.records or not given and args.devices_file is None and (
            not summary.is_file() or records_file.stat().st_mtime >= summary.stat().st_mtime)):
        # the records the workflow's check_runs step wrote: exactly what the report shows
        records = read_checks(records_file)
    else:
        folders = {}
        for option, name in FOLDERS.items():
            if option in given and (why := missing(given[option], folder=True)):  # its checks would all pass
                raise RooflowError(f"--{option} {given[option]}: {why}: give the workflow's results/{name}/ (or leave "
                                   f"--{option} out: the one beside the summary)")
            folders[option] = Path(given.get(option) or summary.parent / name)
            if not folders[option].is_dir():
                unread.append((option, f"no {folders[option]}"))
            elif not next(folders[option].glob(FOLDER_FILES[option]), None):  # nothing of it read: checks skipped
                unread.append((option, f"no {FOLDER_FILES[option]} in {folders[option]}"))
        totals_paths = sorted(folders["estimates"].glob(FOLDER_FILES["estimates"]))
        layers_paths = [p.with_name("layers.csv") for p in totals_paths]
        records, _ = check_file_records(args.summary, totals_paths,
                                        [p if p.is_file() else None for p in layers_paths],
                                        sorted(folders["ceilings"].glob(FOLDER_FILES["ceilings"])), args.devices_file,
                                        sorted(folders["profiles"].glob(FOLDER_FILES["profiles"])))
    # a summary copied off the cluster alone printed "all self-checks passed" having read no estimate, profile or roof
    skipped = (f"not checked: {', '.join(f'{option} ({why})' for option, why in unread)}: give "
               f"--{' / --'.join(option for option, _ in unread)}, or run from the workflow's folder" if unread else "")
    if not records:
        print(f"the summary's self-checks passed; {skipped}" if skipped else "all self-checks passed")
        return 0
    for check in records:
        print(f"{check.severity:7} {check.run}: {check.check}: {check.value} (expected {check.expected})"
              f"\n        likely cause: {check.cause}" + (f"\n        evidence: {check.evidence}" if check.evidence else ""))
    if skipped:
        print(skipped)
    return 1 if any(c.severity == "error" for c in records) else 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "checks", help="list the self-checks a workflow's results fail",
        description="Self-checks over results/summary.csv and the estimates: points above their roof, "
                    "unexplained measured/estimated FLOP ratios, forward:backward ratios outside what the "
                    "layers imply, noisy measurements, out-of-memory runs, measured cache roofs at or below DRAM. "
                    "Exit status 1 when any is an error.")
    parser.add_argument("summary", nargs="?", default="results/summary.csv",
                        help="the workflow's summary table (default: %(default)s)")
    parser.add_argument("--estimates", help="the estimate folder (MODEL/bBATCH-PRECISION-MODE/{totals.json,"
                                            "layers.csv}; default: estimate/ beside the summary)")
    parser.add_argument("--ceilings", help="the measured ceilings folder ({device}.json): cache roofs at or below DRAM "
                                           "(default: ceilings/ beside the summary)")
    parser.add_argument("--profiles", help="the timing records (DEVICE/MODEL/bBATCH-PRECISION-MODE/timing.json): the "
                                           "measured time per layer that explains a forward:backward latency ratio "
                                           "(default: profile/ beside the summary)")
    parser.add_argument("--records", default=None,
                        help="a checks file written by the workflow (results/checks/checks.json, read by default "
                             "when it is newer than the summary and no folder is given); without one, the checks "
                             "are computed")
    parser.add_argument("--devices-file", default=None,
                        help="device catalogue, to compare measured cache roofs with the datasheet DRAM roof too")
    parser.set_defaults(func=_cmd_checks)
