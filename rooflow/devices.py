"""The device catalogue (config/devices.yaml) in SI units, and the roofs a device offers.

Datasheet values live in the catalogue; empirically measured ceilings (results/ceilings/{device}.json,
written by `measure_ceilings`) are merged in beside them, never over them, so figures show both.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rooflow.config_io import load_schema, read_yaml, validate
from rooflow.errors import RooflowError

TERA = 1e12
GIGA = 1e9

# Which datasheet roof bounds the matmul/convolution work of a run at each precision. Elementwise work
# always runs on CUDA cores at fp32 (or packed fp16), so its roof is `fp32` (see compute_peak).
MATMUL_ROOF = {"fp32": "fp32", "tf32": "tf32", "fp16": "fp16", "bf16": "bf16"}


@dataclass
class Device:
    key: str
    kind: str
    name: str
    architecture: str | None = None
    sm_count: int | None = None
    memory_bytes: float | None = None
    # Datasheet roofs (SI units); empty/None where the datasheet has none (the CPU).
    peak_flops_per_second: dict[str, float] = field(default_factory=dict)
    dram_bytes_per_second: float | None = None
    l2_bytes_per_second: float | None = None
    l1_bytes_per_second: float | None = None
    # Measured roofs from measure_ceilings, same keys as the datasheet ones.
    measured_peak_flops_per_second: dict[str, float] = field(default_factory=dict)
    measured_dram_bytes_per_second: float | None = None
    measured_l2_bytes_per_second: float | None = None
    source: str | None = None
    notes: str | None = None
    slurm: dict[str, Any] = field(default_factory=dict)

    @property
    def is_cuda(self) -> bool:
        return self.kind == "cuda"

    @property
    def compute_capability(self) -> tuple[int, int] | None:
        if not self.architecture:
            return None
        digits = self.architecture.removeprefix("sm_")
        return int(digits[:-1]), int(digits[-1])

    def compute_peak(self, roof: str, measured: bool = False) -> float | None:
        """Peak FLOP/s of one compute roof (`fp32`, `tf32`, ...), falling back to fp32 where the device
        has no such path (a V100 has no TF32: its TF32 runs are fp32 runs). Measured or datasheet."""
        peaks = self.measured_peak_flops_per_second if measured else self.peak_flops_per_second
        return peaks.get(roof) or peaks.get("fp32")

    def bandwidth(self, measured: bool = False) -> float | None:
        return self.measured_dram_bytes_per_second if measured else self.dram_bytes_per_second

    def roof_for_precision(self, precision: str, measured: bool = False) -> tuple[float | None, float | None]:
        """(peak FLOP/s, DRAM bytes/s) of the roofline a run at `precision` is held to: the matmul roof
        of that precision, datasheet or measured, falling back to the other when one is missing."""
        roof = MATMUL_ROOF[precision]
        peak = self.compute_peak(roof, measured)
        bandwidth = self.bandwidth(measured)
        if not measured:
            peak = peak or self.compute_peak(roof, True)
            bandwidth = bandwidth or self.bandwidth(True)
        return peak, bandwidth

    def with_measured(self, ceilings: dict[str, Any]) -> Device:
        """This device with the measured roofs of a measure_ceilings JSON merged in."""
        self.measured_peak_flops_per_second = dict(ceilings.get("peak_flops_per_second") or {})
        self.measured_dram_bytes_per_second = ceilings.get("dram_bytes_per_second")
        self.measured_l2_bytes_per_second = ceilings.get("l2_bytes_per_second")
        return self


def _from_entry(key: str, entry: dict[str, Any]) -> Device:
    def scaled(name: str, factor: float) -> float | None:
        value = entry.get(name)
        return None if value is None else float(value) * factor

    return Device(
        key=key,
        kind=entry["kind"],
        name=entry["name"],
        architecture=entry.get("architecture"),
        sm_count=entry.get("sm_count"),
        memory_bytes=scaled("memory_gbytes", GIGA),
        peak_flops_per_second={k: float(v) * TERA for k, v in (entry.get("peak_tflops_per_second") or {}).items()},
        dram_bytes_per_second=scaled("memory_bandwidth_gbytes_per_second", GIGA),
        l2_bytes_per_second=scaled("l2_bandwidth_gbytes_per_second", GIGA),
        l1_bytes_per_second=scaled("l1_bandwidth_gbytes_per_second", GIGA),
        source=entry.get("source"),
        notes=entry.get("notes"),
        slurm=dict(entry.get("slurm") or {}),
    )


def validate_catalogue(data: Any, source: str) -> dict[str, Any]:
    validate(data, load_schema("devices.schema.yaml"), source)
    for key, entry in data.items():
        if entry["kind"] == "cuda":
            missing = [k for k in ("architecture", "memory_bandwidth_gbytes_per_second", "peak_tflops_per_second")
                       if not entry.get(k)]
            if missing:
                raise RooflowError(
                    f"{source}: CUDA device '{key}' lacks {', '.join(missing)}: add the datasheet values")
    return data


def load_devices(path: str | Path) -> dict[str, Device]:
    """All devices of a catalogue file, validated, in SI units."""
    data = read_yaml(path)
    validate_catalogue(data, str(path))
    return {key: _from_entry(key, entry) for key, entry in data.items()}


def load_device(path: str | Path, key: str, ceilings_path: str | Path | None = None) -> Device:
    devices = load_devices(path)
    if key not in devices:
        raise RooflowError(f"device '{key}' is not in {path}: use one of {', '.join(sorted(devices))}")
    device = devices[key]
    if ceilings_path and Path(ceilings_path).is_file():
        device.with_measured(json.loads(Path(ceilings_path).read_text()))
    return device


def default_catalogue_path() -> Path:
    """config/devices.yaml of the checkout rooflow runs from."""
    return Path(__file__).resolve().parent.parent / "config" / "devices.yaml"


def _cmd_devices(args: argparse.Namespace) -> int:
    devices = load_devices(args.catalogue)
    if args.format == "json":
        print(json.dumps({k: vars(d) for k, d in devices.items()}, indent=2))
        return 0
    header = f"{'device':18} {'kind':5} {'arch':6} {'FP32':>7} {'TF32':>7} {'FP16':>7} {'BW GB/s':>8}  name"
    print(header)
    print("-" * len(header))
    for key, d in devices.items():
        def tf(roof: str) -> str:
            value = d.peak_flops_per_second.get(roof)
            return f"{value / TERA:7.1f}" if value else f"{'-':>7}"
        bw = f"{d.dram_bytes_per_second / GIGA:8.0f}" if d.dram_bytes_per_second else f"{'measured':>8}"
        print(f"{key:18} {d.kind:5} {d.architecture or '-':6} {tf('fp32')} {tf('tf32')} {tf('fp16')} {bw}  {d.name}")
    print("\nPeaks in TFLOP/s (dense datasheet values); CPU roofs come from `rooflow ceilings`.")
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("devices", help="list the device catalogue (datasheet roofs)",
                                   description="List the devices of the catalogue with their datasheet roofs.")
    parser.add_argument("--catalogue", default=str(default_catalogue_path()), help="devices YAML (default: %(default)s)")
    parser.add_argument("--format", choices=["table", "json"], default="table")
    parser.set_defaults(func=_cmd_devices)
