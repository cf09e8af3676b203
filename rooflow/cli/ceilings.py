"""`rooflow ceilings`: measure this machine's roofs (and, with --calibrate, the time model's calibration)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from rooflow.arguments import thread_count
from rooflow.ceilings.measure import measure_ceilings
from rooflow.ceilings.plan import GIGA, TERA
from rooflow.errors import RooflowError
from rooflow.io import write_json

NAME_WIDTH = 18  # "  gemm_fp64_tensor", the longest roof name


def format_table(result: dict[str, Any], datasheet: Any = None) -> str:
    """Measured roofs (and the datasheet's beside them when `datasheet` is a rooflow Device)."""
    lines = [f"{result['device_kind']} ceilings of {result['device_name']}"
             + (f", {result['threads']} threads" if result.get("threads") else "")
             + (" (quick)" if result.get("quick") else "") + f", {result['seconds_total']:.1f} s"]
    header = f"{'roof':{NAME_WIDTH}} {'best':>12} {'median':>12} {'datasheet':>12} {'best/datasheet':>14}"
    lines += [header, "-" * len(header)]

    def row(name: str, best: float | None, median: float | None, sheet: float | None, scale: float, unit: str):
        def fmt(v: float | None) -> str:
            return f"{v / scale:8.4g} {unit}" if v else f"{'-':>12}"
        ratio = f"{best / sheet:14.0%}" if best and sheet else f"{'-':>14}"
        lines.append(f"{name:{NAME_WIDTH}} {fmt(best):>12} {fmt(median):>12} {fmt(sheet):>12} {ratio}")

    keys = list(result["peak_flops_per_second"])
    if datasheet is not None:
        keys += [k for k in datasheet.peak_flops_per_second if k not in keys]
    for key in keys:
        sheet = datasheet.peak_flops_per_second.get(key) if datasheet is not None else None
        scale, unit = (TERA, "TF/s") if max(result["peak_flops_per_second"].get(key) or 0, sheet or 0) >= TERA \
            else (GIGA, "GF/s")
        row(key, result["peak_flops_per_second"].get(key), result["median_peak_flops_per_second"].get(key),
            sheet, scale, unit)
    for test, values in (result.get("compute_tests_flops_per_second") or {}).items():
        scale, unit = (TERA, "TF/s") if (values["best"] or 0) >= TERA else (GIGA, "GF/s")
        row(f"  {test}", values["best"], values["median"], None, scale, unit)
    sheet_dram = datasheet.dram_bytes_per_second if datasheet is not None else None
    row("dram", result["dram_bytes_per_second"], result["median_dram_bytes_per_second"], sheet_dram, GIGA, "GB/s")
    invalid = result.get("invalid_roofs") or {}
    if result.get("l2_bytes_per_second") or "l2" in invalid or (datasheet is not None and datasheet.l2_bytes_per_second):
        name = "l2 INVALID" if "l2" in invalid else "l2"
        row(name, result.get("l2_bytes_per_second"), result.get("median_l2_bytes_per_second"),
            datasheet.l2_bytes_per_second if datasheet is not None else None, GIGA, "GB/s")
    for test, values in result.get("memory_tests_bytes_per_second", {}).items():
        row(f"  {test}", values["best"], values["median"], None, GIGA, "GB/s")
    for key, kernel in (result.get("peak_kernel") or {}).items():
        lines.append(f"{key} roof set by: {kernel}")
    for level, why in invalid.items():
        lines.append(f"INVALID {level} roof (not drawn): {why['reason']}")
    theory = result.get("theoretical_peak_flops_per_second") or {}
    for key, value in theory.items():
        fraction = result.get("fraction_of_theoretical", {}).get(key)
        lines.append(f"\ntheoretical {key}: {value / GIGA:.1f} GFLOP/s"
                     + (f"; measured best = {fraction:.0%} of it" if fraction else ""))
        lines.append(f"  ({result['theoretical_basis']})")
    stability = result.get("stability") or {}
    if stability:
        unstable = {case: s for case, s in stability.items() if s["stopped"] not in ("stable", "fixed repeats")}
        lines.append(f"repeats: {sum(s['timings'] for s in stability.values())} timings over {len(stability)} "
                     f"cases; {len(stability) - len(unstable)} stopped stable or at their fixed count"
                     + (f", {len(unstable)} at a limit: " + "; ".join(
                         f"{case} ({s['stopped']}, spread {s['spread']:.0%})" for case, s in unstable.items())
                        if unstable else ""))
    for what, why in result.get("skipped", {}).items():
        lines.append(f"skipped {what}: {why}")
    lines.append("TF/s = 1e12 FLOP/s, GF/s = 1e9 FLOP/s, GB/s = 1e9 bytes/s; bytes = read + written.")
    return "\n".join(lines)


def _cmd_ceilings(args: argparse.Namespace) -> int:
    import torch

    from rooflow.hardware.devices import estimate_only_error, load_devices, unknown_device_error

    device = None
    if args.device:
        devices = load_devices(args.catalogue)
        if args.device not in devices:
            raise unknown_device_error(args.device, devices, args.catalogue)
        device = devices[args.device]
        if device.estimate_only:
            raise estimate_only_error(args.device, "rooflow ceilings --device",
                                      "measure the machine you are on (without --device, or with its own key)")
        kind = device.kind
    else:
        kind = "cuda" if torch.cuda.is_available() else "cpu"
    if kind == "cuda" and not torch.cuda.is_available():
        raise RooflowError(f"device '{args.device}' is a CUDA GPU but none is visible here: run this on a node "
                           "with that GPU (the workflow submits it through SLURM)")
    if args.single_ops and (device is None or kind != "cuda"):
        given = f"--device {args.device} is not a GPU" if device is not None else "no --device given"
        raise RooflowError(f"--single-ops measures a GPU's single ops for its kernel calibration, and {given}: "
                           "give --device, the catalogue key of the GPU here (the kernel model takes its datasheet "
                           "from it)")
    result = measure_ceilings(kind, threads=args.threads, quick=args.quick)
    result["device_key"] = args.device
    if args.calibrate:
        from rooflow.ceilings.calibrate import measure_calibration
        from rooflow.hardware.devices import load_devices

        if device is None and kind == "cuda":
            raise RooflowError("--calibrate on a GPU needs --device (the catalogue key of this GPU): its SM count "
                               "and roofs enter the calibration")
        target = device or load_devices(args.catalogue)["cpu"]
        result["calibration"] = measure_calibration(target.with_measured(result), result,
                                                    threads=args.threads).to_json()
    if device is not None and kind == "cuda" and device.name.lower() not in result["device_name"].lower():
        message = (f"the GPU here is '{result['device_name']}', not the catalogue's '{device.name}' "
                   f"({args.device}): its datasheet roofs do not apply")
        result.setdefault("warnings", []).append(message)
        print(f"rooflow ceilings: warning: {message}", file=sys.stderr)
    if args.single_ops:
        from rooflow.ceilings.single_ops import collect, shape_counts

        counts = shape_counts(args.quick)
        collect(torch, device, args.single_ops, counts, log=lambda line: print(line, file=sys.stderr, flush=True))
        result["single_ops"] = {"folder": str(args.single_ops), "shapes_per_operator": counts}
        print(f"rooflow ceilings: single ops of {device.name} in {args.single_ops}/; how the shipped kernel model "
              f"predicts them: rooflow calibrate-kernels --check {args.single_ops}; this GPU's own calibration: "
              f"rooflow calibrate-kernels --data {args.single_ops} -o kernels-{args.device}.json", file=sys.stderr)
    if args.output:
        write_json(args.output, result)  # atomic: a killed job leaves no half-written roofs
    if args.format == "json":
        print(json.dumps(result, indent=2))
    else:
        print(format_table(result, device))
    return 0


def register(subparsers) -> None:
    from rooflow.hardware.devices import default_catalogue_path

    parser = subparsers.add_parser(
        "ceilings", help="measure this machine's compute and memory roofs (ERT-style microbenchmarks)",
        description="Measure this machine's roofs: peak FLOP/s per precision with large GEMMs, DRAM bandwidth "
                    "with a copy/triad larger than the caches, and on a GPU the L2 bandwidth. With --device, "
                    "the catalogue's datasheet roofs are printed beside the measured ones.")
    parser.add_argument("--device", help="catalogue key of this machine (e.g. cpu, a100-sxm4-40gb); selects "
                                         "cpu or cuda and prints its datasheet roofs beside the measured ones")
    # --devices-file, as in estimate, calibrate, checks and doctor; --catalogue is its former name here
    parser.add_argument("--devices-file", "--catalogue", dest="catalogue", metavar="DEVICES_FILE",
                        default=str(default_catalogue_path()),
                        help="device catalogue (default: %(default)s)")
    parser.add_argument("--threads", type=thread_count, help="CPU threads (torch.set_num_threads); default: torch's")
    parser.add_argument("--quick", action="store_true", help="the short run (fewer sizes and repeats)")
    parser.add_argument("--calibrate", action="store_true",
                        help="also measure the time model's calibration (host costs, kernel efficiencies by "
                             "class) and store it in the JSON beside the roofs")
    parser.add_argument("--single-ops", metavar="DIR",
                        help="on a GPU (with --device): also time single FP32 ops (conv, linear, bmm, elementwise, "
                             "LayerNorm, softmax; 500 shapes of each GEMM and convolution, 40 of the others, a quarter "
                             "with --quick) as the public NeuSight data set "
                             "did and write them under DIR in its layout, for `rooflow calibrate-kernels --data DIR`")
    parser.add_argument("--format", choices=["table", "json"], default="table", help="what to print")
    parser.add_argument("--output", help="also write the full result (JSON, SI units) to this file")
    parser.set_defaults(func=_cmd_ceilings)


if __name__ == "__main__":  # pragma: no cover - `python -m rooflow.ceilings.measure` as a shortcut
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    from rooflow.cli import main

    raise SystemExit(main(["ceilings", *sys.argv[1:]]))
