"""`rooflow calibrate`: derive a device's time-model calibration from recorded steps."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rooflow.errors import RooflowError
from rooflow.hardware.devices import CEILINGS_FILE, default_catalogue_path, load_device
from rooflow.io import missing, read_json_object, write_json


def _cmd_calibrate(args: argparse.Namespace) -> int:
    # imported here: rooflow.estimate imports torch, which no other `rooflow` command should wait for
    from rooflow.estimate.calibration import (
        check_step_trace,
        derive_from_recordings,
        load_recordings,
        read_trace,
    )

    if why := missing(args.ceilings):
        raise RooflowError(f"--ceilings {args.ceilings}: {why}: give the JSON `rooflow ceilings --device "
                           f"{args.device} --output FILE` wrote on that device")
    if not load_device(args.devices_file, args.device).is_cuda:  # a CPU's calibration: `rooflow ceilings --calibrate`
        raise RooflowError(f"--device {args.device}: not a GPU: recordings of CUDA kernels calibrate a GPU; give the "
                           f"catalogue key of the GPU they were recorded on (a CPU's calibration: `rooflow ceilings "
                           f"--calibrate` on it)")
    device = load_device(args.devices_file, args.device, args.ceilings)  # refuses another GPU model's ceilings
    ceilings = read_json_object(args.ceilings, CEILINGS_FILE)
    folder = Path(args.from_recordings)
    recordings = load_recordings(folder)
    traces = {}
    for mode in ("inference", "training"):
        candidates = sorted(folder.glob(f"torch-profiler-*-{mode}.json*"))
        if candidates:
            traces[mode] = check_step_trace(read_trace(candidates[0]), candidates[0])
    if "training" in traces and "inference" not in traces:  # the host costs start from an inference step's
        print(f"rooflow calibrate: warning: {folder}: a torch.profiler trace of a training step but none of an "
              f"inference step: host costs not derived (the default ones apply); add "
              f"torch-profiler-<model>-b<batch>-<precision>-inference.json(.gz) to derive them", file=sys.stderr)
    calibration = derive_from_recordings(recordings, device, ceilings, traces,
                                         source=args.source or f"derived from the recordings in {folder.name}/")
    data = calibration.to_json()
    if args.output:
        write_json(args.output, data)
    else:
        print(json.dumps(data, indent=2))
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "calibrate", help="derive the time model's calibration of a device from recorded steps",
        description="Derive a device's time-model calibration (kernel efficiencies by class, host costs) from "
                    "per-kernel recordings of real steps on it (Nsight Compute CSVs, torch.profiler traces) and "
                    "its measured ceilings. rooflow's shipped H100 calibration is made this way.")
    parser.add_argument("--from-recordings", required=True, metavar="DIR",
                        help="folder of <model>-b<batch>-<precision>-<mode>-ncu.csv(.gz) and "
                             "torch-profiler-<...>.json(.gz) files (a trace: one step with CPU and CUDA activities "
                             "inside torch.profiler.record_function('rooflow:<model>:b<batch>:<precision>:<mode>'); "
                             "host costs come from an inference step's trace)")
    parser.add_argument("--device", required=True, help="catalogue key of the recorded device")
    parser.add_argument("--ceilings", required=True, help="the device's measured ceilings JSON")
    parser.add_argument("--devices-file", default=str(default_catalogue_path()),
                        help="device catalogue (default: %(default)s)")
    parser.add_argument("--source", help="the calibration's source text")
    parser.add_argument("-o", "--output", help="write the calibration JSON here (default: print)")
    parser.set_defaults(func=_cmd_calibrate)


