"""`rooflow devices`: the device catalogue with its datasheet roofs."""

from __future__ import annotations

import argparse
import json

from rooflow.hardware.devices import GIGA, TERA, Device, default_catalogue_path, load_devices


def _cmd_devices(args: argparse.Namespace) -> int:
    devices = load_devices(args.catalogue)
    if args.format == "json":
        print(json.dumps({k: vars(d) for k, d in devices.items()}, indent=2))
        return 0
    columns = ("fp64", "fp64_tensor", "fp32", "tf32", "fp16", "bf16", "fp8")
    heads = ("FP64", "FP64TC", "FP32", "TF32", "FP16", "BF16", "FP8")
    header = (f"{'device':18} {'arch':6} {'SMs':>4} " + " ".join(f"{h:>7}" for h in heads)
              + f" {'DRAM GB/s':>9} {'mem GB':>6} {'ridge':>6}  name")
    print(header)
    print("-" * len(header))

    def tf(d: Device, roof: str) -> str:
        value = d.peak_flops_per_second.get(roof)
        return f"{value / TERA:7.5g}" if value else f"{'-':>7}"

    def number(value: float | None, width: int, digits: str) -> str:
        return f"{value:{width}{digits}}" if value else f"{'-':>{width}}"

    for key, d in devices.items():
        bw = number(d.dram_bytes_per_second and d.dram_bytes_per_second / GIGA, 9, ".4g") \
            if d.dram_bytes_per_second else f"{'measured':>9}"
        mem = number(d.memory_bytes and d.memory_bytes / GIGA, 6, ".0f")
        ridge_text = number(d.ridge_point("fp32"), 6, ".1f")
        name = d.name + ("  [estimate only]" if d.estimate_only else "")
        print(f"{key:18} {d.architecture or '-':6} {d.sm_count or '-':>4} "
              + " ".join(tf(d, c) for c in columns) + f" {bw} {mem} {ridge_text}  {name}")
    print("\nPeaks in TFLOP/s (10^12 FLOP/s), DENSE datasheet values (sparsity headlines halved); DRAM in GB/s")
    print("(10^9 B/s); memory in GB (10^9 B); ridge = FP32 peak / DRAM bandwidth in FLOP/byte. CPU roofs come")
    print("from `rooflow ceilings`. [estimate only]: no SLURM resources, rooflow cannot run there; use it with")
    print("`rooflow estimate --device KEY` or as the device of imported profiles (its roofs are datasheet")
    print("arithmetic: `rooflow devices --format json` shows the derivation and assumptions). Sources: --format json;")
    print("how to add a device: config/DEVICES.md.")
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("devices", help="list the device catalogue (datasheet roofs)",
                                   description="List the devices of the catalogue with their datasheet roofs.")
    # --devices-file, as in estimate, calibrate, checks and doctor; --catalogue is its former name here
    parser.add_argument("--devices-file", "--catalogue", dest="catalogue", metavar="DEVICES_FILE",
                        default=str(default_catalogue_path()),
                        help="device catalogue (default: %(default)s)")
    parser.add_argument("--format", choices=["table", "json"], default="table",
                        help="table (display units), or json (every field, SI units) (default: %(default)s)")
    parser.set_defaults(func=_cmd_devices)
