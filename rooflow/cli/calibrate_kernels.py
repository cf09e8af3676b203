"""`rooflow calibrate-kernels`: per-GPU kernel calibrations fitted on measured single-op latencies, the
held-out checks of the kernel model, and the shipped calibrations scored on other measurements."""

from __future__ import annotations

import json
from pathlib import Path

from rooflow.errors import RooflowError
from rooflow.hardware.devices import check_ceilings, default_catalogue_path, load_devices
from rooflow.io import check_writable, inside, missing, read_json

# rooflow.estimate's modules are imported by the commands themselves: importing any of them imports torch
# (rooflow/estimate/__init__.py), seconds that every other `rooflow` command would pay for parsing its arguments.


def _roofs(specs: list[str]) -> dict:
    """``KEY=CEILINGS.json`` → measured roofs by catalogue key."""
    from rooflow.estimate.kernel_calibration import roof_from_ceilings

    devices = load_devices(default_catalogue_path())
    roofs = {}
    for spec in specs:
        key, _, path = spec.partition("=")
        if not path or key not in devices:
            raise RooflowError(f"--ceilings {spec!r}: expected KEY=FILE with KEY a catalogue device "
                               f"(`rooflow devices` lists them) and FILE a `rooflow ceilings` JSON")
        if why := missing(path):
            raise RooflowError(f"--ceilings {spec!r}: {path}: {why}: give the JSON `rooflow ceilings "
                               f"--device {key} --output FILE` wrote on that device")
        ceilings = read_json(path)
        if isinstance(ceilings, dict):  # anything else: roof_from_ceilings says it holds no FP32 rate
            check_ceilings(ceilings, devices[key], path, same_model=True)
        roofs[key] = roof_from_ceilings(ceilings, devices[key])
    return roofs


def _check_operator_folders(root: Path, operators) -> None:
    """A folder of measurements under ``root`` that is no operator rooflow fits: refused where it is one spelt
    otherwise (``Add/``: its calls were left out without a word, the class fitted on the others or not at all), else
    named on stderr as not fitted."""
    import sys

    def key(name: str) -> str:
        return "".join(character for character in name.lower() if character.isalnum())

    others = sorted(path.name for path in root.iterdir() if path.is_dir() and path.name not in (*operators,
                    "device_configs") and any(path.glob("*.csv*"))) if root.is_dir() else []
    for name in others:
        meant = next((operator for operator in operators if key(operator) == key(name)), None)
        if meant:
            raise RooflowError(f"--data {root}: its folder {name}/ is no operator rooflow reads, and {meant}/ is: "
                               f"rename it {meant}/ (operator folders are lower case)")
    if others:
        print(f"not fitted (no model of these operators): {', '.join(f'{name}/' for name in others)} — rooflow "
              f"models {', '.join(operators)}", file=sys.stderr)


def _cmd(args) -> int:
    from rooflow.estimate.kernel_calibration import (
        OPERATORS,
        SINGLE_OPS_PROVENANCE,
        calibrate_measured,
        check_shipped,
        config_disagreements,
        dataset_gpu_keys,
        fit_each,
        format_table,
        held_one_out,
        held_out_shapes,
        load_folders,
        load_measurements,
        shapes_path,
        write_shipped,
    )

    # options a mode would drop without a word (exit 0, no file written)
    ignored = ([name for name, given in (("--data", args.data), ("--held-out", args.held_out), ("-o", args.output))
                if given] if args.check else ["-o"] if args.held_out and args.output else [])
    if ignored:
        mode = "--check" if args.check else "--held-out"
        raise RooflowError(f"{mode} scores and prints; it does not use {', '.join(ignored)}: give {mode} alone, "
                           f"or --data DIR -o FILE to fit and write a calibration")
    if args.check:
        devices = load_devices(default_catalogue_path())
        disagreements = config_disagreements(args.check)
        for name, key in dataset_gpu_keys(args.check).items():
            if key and devices[key].name != name and not any(f": {name} is predicted" in line for line in disagreements):
                # a name the catalogue spells otherwise: say which board it is
                print(f"{name}: predicted as the catalogue's {key} ({devices[key].name}), the board of its model "
                      f"that its device config's SMs and bandwidth match")
        for line in disagreements:
            print(line)
        skipped = sorted(path.name for path in Path(args.check).iterdir()
                         if path.is_dir() and path.name not in (*OPERATORS, "device_configs"))
        if skipped:  # scored nothing there: say so rather than let a table look complete
            print(f"not scored (no model of these operators): {', '.join(skipped)}/ — rooflow models "
                  f"{', '.join(OPERATORS)}")
        from rooflow.ceilings.single_ops import stretches

        said = stretches(load_measurements(args.check))
        if said:  # how far the host's slow stretches moved the first pass: what the re-timing took out
            print(said)
        print(format_table(check_shipped(args.check), "GPU (shipped calibration)"))
        print("\n" + format_table(check_shipped(args.check, host_floors=True), "with its host's floors"))
        print("\nThe second table takes each operator's launch floor from the files' fastest calls: a floor is the "
              "measuring host's dispatch path (its CPU, driver and torch), not the GPU's; the first takes a GPU's "
              "own host's where rooflow ships its single ops, else the public data set's hosts'. On the data set's "
              "own GPUs read the first: their convolution floor is fitted with their shapes' residuals, not a "
              "host's.")
        return 0
    if not args.data:
        raise RooflowError("give --data DIR (measurements to fit or hold out) "
                           "or --check DIR (measurements to score the shipped calibrations on)")
    if args.held_out:
        data, gpus = load_folders(args.data)
        fitted = fit_each(data, gpus)
        print(format_table(held_one_out(data, gpus, calibrations=fitted)))
        print("\n" + format_table(held_one_out(data, gpus, calibrations=fitted, whole_family=True), "family held out"))
        print("\n" + format_table(held_out_shapes(data, gpus), "held-out shapes of"))
        return 0
    if args.output:  # before the fit (minutes); the JSON is named, not the shapes written first beside it
        check_writable(args.output)
        check_writable(shapes_path(args.output))
        for folder in args.data:  # -o DIR/add/T4.csv.gz replaced a measurement file with the calibration
            for written in (args.output, shapes_path(args.output)):
                place = inside(written, folder)  # beside the operator folders, a file replaces no measurement
                if place is not None and (len(place.parts) > 1 or place.name == SINGLE_OPS_PROVENANCE):
                    raise RooflowError(f"-o {args.output} writes {written} among the measurements of --data {folder} "
                                       f"(its operator and device_configs folders, its provenance): it could replace "
                                       f"one of them; write the calibration beside them or elsewhere")
    for folder in args.data:
        _check_operator_folders(Path(folder), OPERATORS)
    result, arrays = calibrate_measured(args.data, _roofs(args.ceilings))
    if args.output:
        shapes = write_shipped(result, arrays, args.output)
        print(f"wrote {args.output} and {shapes}")
    else:
        print(json.dumps(result, indent=1))
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "calibrate-kernels", help="fit per-GPU kernel calibrations from measured single-op latencies",
        description="Fit the kernel model (rooflow.estimate.kernel_calibration: GEMM tiles and waves, "
                    "convolution algorithms, elementwise/reduction bandwidth, launch floor, and the measured "
                    "shapes' residuals) on measured single-op latencies laid out as <operator>/<GPU>.csv(.gz) "
                    "with device_configs/<GPU>.json (the public NeuSight data set's layout). rooflow's shipped "
                    "kernels.json and kernels_shapes.npz are made this way.")
    parser.add_argument("--data", metavar="DIR", action="append",
                        help="folder of the measurements (repeatable: rooflow's shipped calibrations are fitted on "
                             "the public data set's folder and rooflow's own H200 single ops)")
    parser.add_argument("--held-out", action="store_true",
                        help="instead: train on all GPUs but one, predict that one; then with its whole architecture "
                             "family held out too; then per GPU hold out 20%% of its shapes; print the tables per "
                             "class")
    parser.add_argument("--check", metavar="DIR",
                        help="instead: predict every measurement under DIR (same layout; GPUs rooflow has no "
                             "measurements of are predicted from their datasheet and family) with the shipped "
                             "calibrations and print, per GPU and class, the fraction within ±25%% and the median "
                             "|error|")
    parser.add_argument("--ceilings", action="append", default=[], metavar="KEY=FILE",
                        help="a `rooflow ceilings` JSON measured on catalogue GPU KEY: its FP32 GEMM roof "
                             "calibrates its family where no single ops of it were measured, its DRAM triad "
                             "the GPU's own elementwise calls (repeatable)")
    parser.add_argument("-o", "--output", help="write the calibrations JSON here, and its measured shapes "
                                               "beside it as <stem>_shapes.npz (default: print the JSON)")
    parser.set_defaults(func=_cmd)
