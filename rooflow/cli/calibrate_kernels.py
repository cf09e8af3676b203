"""`rooflow calibrate-kernels`: per-GPU kernel calibrations fitted on measured single-op latencies."""

from __future__ import annotations

import json

from rooflow.estimate.kernel_calibration import (
    calibrate_measured,
    format_table,
    held_one_out,
    held_out_shapes,
    load_dataset_gpus,
    load_measurements,
)
from rooflow.io import write_json


def _cmd(args) -> int:
    if args.held_out:
        data = load_measurements(args.data)
        gpus = load_dataset_gpus(args.data)
        print(format_table(held_one_out(data, gpus)))
        print("\n" + format_table(held_out_shapes(data, gpus), "held-out shapes of"))
        return 0
    result = calibrate_measured(args.data)
    text = json.dumps(result, indent=1)
    if args.output:
        write_json(args.output, result)
    else:
        print(text)
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "calibrate-kernels", help="fit per-GPU kernel calibrations from measured single-op latencies",
        description="Fit the kernel model (rooflow.estimate.kernel_calibration: GEMM tiles and waves, "
                    "convolution algorithms, elementwise/reduction bandwidth, launch floor) on measured "
                    "single-op latencies laid out as <operator>/<GPU>.csv(.gz) with device_configs/<GPU>.json "
                    "(the public NeuSight data set's layout). rooflow's shipped kernels.json is made this way.")
    parser.add_argument("--data", required=True, metavar="DIR", help="folder of the measurements")
    parser.add_argument("--held-out", action="store_true",
                        help="instead: train on all GPUs but one, predict that one; then per GPU hold out 20%% of "
                             "its shapes; print both tables per class")
    parser.add_argument("-o", "--output", help="write the calibrations JSON here (default: print)")
    parser.set_defaults(func=_cmd)
