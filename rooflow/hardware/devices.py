"""The device catalogue (config/devices.yaml) in SI units, and the roofs a device offers.

Datasheet values live in the catalogue; empirically measured ceilings (results/ceilings/{device}.json,
written by `measure_ceilings`) are merged in beside them, never over them, so figures show both
(`Device.roofs()`: datasheet roofs solid, measured ones dashed). config/DEVICES.md explains the catalogue.

Estimate-only devices (``estimate_only: true``: a TPU, a phone SoC, old Xeons, a Xeon Phi) have no SLURM
resources: rooflow cannot run on them, so the workflow's ``devices:`` rejects them, but ``rooflow estimate
--device`` and the rooflines of imported profiles use them. Their roofs are datasheet arithmetic, kept in
``derivation`` and checked on loading (:func:`derived_roofs`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rooflow.config_io import close_matches, load_schema, read_yaml, validate
from rooflow.errors import RooflowError
from rooflow.io import missing, read_json_object
from rooflow.units import format_quantity, positive_number

TERA = 1e12
GIGA = 1e9

# Which datasheet roof bounds the matmul/convolution work of a run at each precision. Elementwise work
# always runs on CUDA cores at fp32 (or packed fp16), so its roof is `fp32` (see compute_peak).
MATMUL_ROOF = {"fp32": "fp32", "tf32": "tf32", "fp16": "fp16", "bf16": "bf16"}

# Compute roofs in the order figures and tables list them, with their display names. `fp64_tensor` is
# DMMA on sm_80/sm_90; `fp16` is tensor cores with FP32 accumulate where a GPU has them (packed half2 on
# the CUDA cores of a P100).
COMPUTE_ROOFS = {
    "fp64": "FP64",
    "fp64_tensor": "FP64 tensor",
    "fp32": "FP32",
    "tf32": "TF32 tensor",
    "fp16": "FP16 tensor",
    "bf16": "BF16 tensor",
    "fp8": "FP8 tensor",
}
MEMORY_LEVELS = ("dram", "l2", "l1")
# A CPU's 16-bit roofs are its matrix instructions' (AMX, AVX512-BF16), not tensor cores: named so on its roofline
CPU_MATRIX_UNIT = "matmul"


def compute_roof_name(key: str, kind: str = "cuda") -> str:
    """The display name of compute roof ``key`` on a device of ``kind`` ("BF16 tensor"; a CPU's "BF16 matmul")."""
    name = COMPUTE_ROOFS.get(key, key.upper())
    return name.replace(" tensor", f" {CPU_MATRIX_UNIT}") if kind == "cpu" else name


@dataclass(frozen=True)
class Roof:
    """One roof of a roofline: a flat compute roof (FLOP/s) or a slanted memory roof (bytes/s)."""

    name: str  # display name: "FP32", "TF32 tensor", "HBM2e", "L2", ...
    kind: Literal["compute", "memory"]
    value: float  # FLOP/s for a compute roof, bytes/s for a memory roof (SI units)
    source: Literal["datasheet", "measured", "theoretical"]
    precision_or_level: str  # a COMPUTE_ROOFS key (fp32, tf32, ...) or a MEMORY_LEVELS key (dram, l2, l1)

    @property
    def label(self) -> str:
        """Legend text, e.g. "TF32 tensor (datasheet)"."""
        return f"{self.name} ({self.source})"

    @property
    def linestyle(self) -> str:
        """Datasheet roofs are drawn solid, measured ones dashed (DESIGN.md, the roofline figure)."""
        return "-" if self.source == "datasheet" else "--"


@dataclass
class Device:
    key: str
    kind: str
    name: str
    architecture: str | None = None
    sm_count: int | None = None
    memory_bytes: float | None = None
    memory_type: str | None = None
    # Datasheet roofs (SI units); empty/None where the datasheet has none (the CPU).
    peak_flops_per_second: dict[str, float] = field(default_factory=dict)
    dram_bytes_per_second: float | None = None
    l2_bytes_per_second: float | None = None
    l1_bytes_per_second: float | None = None
    # Measured roofs from measure_ceilings, same keys as the datasheet ones.
    measured_peak_flops_per_second: dict[str, float] = field(default_factory=dict)
    measured_dram_bytes_per_second: float | None = None
    measured_l2_bytes_per_second: float | None = None
    # Measured cache roofs that failed (at or below the DRAM roof): {level: {bytes_per_second,
    # dram_bytes_per_second, dram_source, reason}} — never drawn, reported by rooflow.report.checks.
    invalid_measured_roofs: dict[str, dict[str, Any]] = field(default_factory=dict)
    # the threads the measured roofs ran with (a CPU's roofs are those of that many cores)
    measured_threads: int | None = None
    source: str | None = None
    references: list[str] = field(default_factory=list)
    notes: str | None = None
    slurm: dict[str, Any] = field(default_factory=dict)
    # Estimate-only devices: rooflow cannot run there (no SLURM resources); `assumptions` says what their
    # roofs rest on, `derivation` holds the datasheet arithmetic (sockets, core groups, memory channels).
    estimate_only: bool = False
    assumptions: str | None = None
    derivation: dict[str, Any] = field(default_factory=dict)
    # Datasheet arithmetic of the kernel model (rooflow.estimate.kernel_calibration): L2 size, board power.
    l2_cache_bytes: float | None = None
    tdp_watts: float | None = None
    # Base and boost clocks (MHz): under its power limit a board's clock falls no lower than its base clock.
    base_clock_mhz: float | None = None
    boost_clock_mhz: float | None = None
    # What renting it costs (optional; rooflow.estimate.whatif turns it into a cost per 1,000 images).
    price_per_hour_usd: float | None = None

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

    def matmul_roof(self, precision: str) -> str:
        """The compute roof PyTorch's matrix products and convolutions of `precision` can reach here: its
        MATMUL_ROOF, but FP32 for fp16 on a GPU without tensor cores (before sm_70), where PyTorch asks cuBLAS
        and cuDNN for FP32 arithmetic on 16-bit operands: the P100's packed-half2 `fp16` roof is the
        hardware's, never theirs (rooflow.estimate.kernel_ops.fp32_arithmetic)."""
        roof = MATMUL_ROOF.get(precision, "fp32")
        capability = self.compute_capability if self.is_cuda else None
        return "fp32" if roof == "fp16" and capability and capability < (7, 0) else roof

    def roof_for_precision(self, precision: str, measured: bool = False) -> tuple[float | None, float | None]:
        """(peak FLOP/s, DRAM bytes/s) of the roofline a run at `precision` is held to: the matmul roof
        of that precision (:meth:`matmul_roof`), datasheet or measured, falling back to the other when one
        is missing."""
        roof = self.matmul_roof(precision)
        peak = self.compute_peak(roof, measured)
        bandwidth = self.bandwidth(measured)
        if not measured:
            peak = peak or self.compute_peak(roof, True)
            bandwidth = bandwidth or self.bandwidth(True)
        return peak, bandwidth

    def with_measured(self, ceilings: dict[str, Any]) -> Device:
        """This device with the measured roofs of a measure_ceilings JSON merged in. A measured cache roof
        at or below the measured or datasheet DRAM roof is a failed measurement: it is left out (kept in
        `invalid_measured_roofs`), also from JSONs written before rooflow marked it."""
        from rooflow.hardware.roofs import invalid_cache_roofs

        self.measured_peak_flops_per_second = dict(ceilings.get("peak_flops_per_second") or {})
        self.measured_dram_bytes_per_second = ceilings.get("dram_bytes_per_second")
        self.measured_threads = ceilings.get("threads")
        self.invalid_measured_roofs = invalid_cache_roofs(ceilings, self.dram_bytes_per_second)
        self.measured_l2_bytes_per_second = (None if "l2" in self.invalid_measured_roofs
                                             else ceilings.get("l2_bytes_per_second"))
        return self

    def ridge_point(self, roof: str = "fp32", measured: bool = False) -> float | None:
        """Arithmetic intensity (FLOP/byte) where the DRAM roof meets compute roof `roof`: peak / bandwidth."""
        peak = self.compute_peak(roof, measured)
        bandwidth = self.bandwidth(measured)
        if not peak or not bandwidth:
            return None
        return peak / bandwidth

    def roofs(self) -> list[Roof]:
        """Every roof this device has, datasheet first then measured, compute roofs (COMPUTE_ROOFS order,
        then any other measured precision) before memory roofs (DRAM, L2, L1). Nothing is filled in: a roof
        the datasheet or the measurement lacks is absent, never borrowed from another precision."""
        dram_name = self.memory_type or "DRAM"
        out: list[Roof] = []
        for source, peaks, levels in (
            ("datasheet", self.peak_flops_per_second,
             {"dram": self.dram_bytes_per_second, "l2": self.l2_bytes_per_second, "l1": self.l1_bytes_per_second}),
            ("measured", self.measured_peak_flops_per_second,
             {"dram": self.measured_dram_bytes_per_second, "l2": self.measured_l2_bytes_per_second}),
        ):
            ordered = [k for k in COMPUTE_ROOFS if k in peaks] + sorted(k for k in peaks if k not in COMPUTE_ROOFS)
            for key in ordered:
                if peaks[key]:
                    out.append(Roof(compute_roof_name(key, self.kind), "compute", float(peaks[key]), source, key))
            for level in MEMORY_LEVELS:
                value = levels.get(level)
                if value:
                    name = dram_name if level == "dram" else level.upper()
                    out.append(Roof(name, "memory", float(value), source, level))
        return out


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
        memory_type=entry.get("memory_type"),
        peak_flops_per_second={k: float(v) * TERA for k, v in (entry.get("peak_tflops_per_second") or {}).items()},
        dram_bytes_per_second=scaled("memory_bandwidth_gbytes_per_second", GIGA),
        l2_bytes_per_second=scaled("l2_bandwidth_gbytes_per_second", GIGA),
        l1_bytes_per_second=scaled("l1_bandwidth_gbytes_per_second", GIGA),
        source=entry.get("source"),
        references=list(entry.get("references") or []),
        notes=entry.get("notes"),
        slurm=dict(entry.get("slurm") or {}),
        estimate_only=bool(entry.get("estimate_only")),
        assumptions=entry.get("assumptions"),
        derivation=dict(entry.get("derivation") or {}),
        l2_cache_bytes=scaled("l2_cache_mbytes", 2**20),
        tdp_watts=scaled("tdp_watts", 1.0),
        base_clock_mhz=scaled("base_clock_mhz", 1.0),
        boost_clock_mhz=scaled("boost_clock_mhz", 1.0),
        price_per_hour_usd=scaled("price_per_hour_usd", 1.0),
    )


def derived_roofs(derivation: dict[str, Any]) -> tuple[dict[str, float], float | None]:
    """(peak FLOP/s per precision, DRAM bytes/s or None) of a catalogue `derivation`: peak = sockets × Σ over
    core groups (count × clock × FLOP per cycle); bandwidth = sockets × channels × transfer rate × bytes per
    transfer. A precision counts only where every core group gives it (a group without it has no such path)."""
    sockets = derivation.get("sockets", 1)
    groups = derivation["core_groups"]
    precisions = set.intersection(*(set(g["flops_per_cycle"]) for g in groups))
    peaks = {p: sockets * sum(g["count"] * g["clock_ghz"] * GIGA * g["flops_per_cycle"][p] for g in groups)
             for p in sorted(precisions)}
    memory = derivation.get("memory")
    bandwidth = None
    if memory:
        bandwidth = sockets * memory["channels"] * memory["transfer_rate_mts"] * 1e6 * memory["bytes_per_transfer"]
    return peaks, bandwidth


# A listed peak or bandwidth must be its derivation's arithmetic to this relative precision (the listed
# value is the exact product, written out: a slip such as 61 x 1.238 x 16 = 1207.9 instead of 1208.3 fails).
DERIVATION_TOLERANCE = 1e-4


def _check_derivation(key: str, entry: dict[str, Any], source: str) -> None:
    peaks, bandwidth = derived_roofs(entry["derivation"])
    listed = {p: v * TERA for p, v in (entry.get("peak_tflops_per_second") or {}).items()}
    if set(peaks) != set(listed):
        raise RooflowError(
            f"{source}: device '{key}' lists peaks for {', '.join(sorted(listed))} but its derivation gives "
            f"{', '.join(sorted(peaks)) or 'none'}: list exactly the precisions every core group has")
    for precision, value in peaks.items():
        if abs(listed[precision] / value - 1) > DERIVATION_TOLERANCE:
            raise RooflowError(
                f"{source}: device '{key}' lists peak_tflops_per_second.{precision} {listed[precision] / TERA:g} "
                f"but its derivation (sockets × count × clock × FLOP/cycle) gives {value / TERA:.6g}: fix one")
    listed_bandwidth = entry.get("memory_bandwidth_gbytes_per_second")
    if bandwidth is not None and abs(listed_bandwidth * GIGA / bandwidth - 1) > DERIVATION_TOLERANCE:
        raise RooflowError(
            f"{source}: device '{key}' lists memory_bandwidth_gbytes_per_second {listed_bandwidth:g} but its "
            f"derivation (sockets × channels × transfer rate × bytes) gives {bandwidth / GIGA:.6g}: fix one")


def validate_catalogue(data: Any, source: str) -> dict[str, Any]:
    if isinstance(data, dict) and data and not any(isinstance(v, dict) and "kind" in v for v in data.values()):
        # another YAML file (the experiment config, a profile): the schema's first complaint named one of its keys
        shown = ", ".join(str(k) for k in list(data)[:3])
        raise RooflowError(
            f"{source} is not a devices catalogue: none of its entries ({shown}{', ...' if len(data) > 3 else ''}) "
            "is a device with a kind: point the devices file (devices_file: in the config, --devices-file) at "
            "config/devices.yaml or a copy of it")
    validate(data, load_schema("devices.schema.yaml"), source)
    for key, entry in data.items():
        if entry["kind"] == "cuda":
            missing = [k for k in ("architecture", "memory_bandwidth_gbytes_per_second", "peak_tflops_per_second")
                       if not entry.get(k)]
            if missing:
                raise RooflowError(
                    f"{source}: CUDA device '{key}' lacks {', '.join(missing)}: add the datasheet values")
        if entry.get("estimate_only") and entry.get("slurm"):
            raise RooflowError(
                f"{source}: device '{key}' is estimate_only but has a slurm block: remove the slurm block "
                "(rooflow cannot run on an estimate-only device) or set estimate_only to false")
        if entry.get("kind") == "tpu" and not entry.get("estimate_only"):
            raise RooflowError(f"{source}: TPU device '{key}' must be estimate_only: true (rooflow runs on CUDA "
                               "GPUs and CPUs only)")
        if entry.get("derivation"):
            _check_derivation(key, entry, source)
        base, boost = entry.get("base_clock_mhz"), entry.get("boost_clock_mhz")
        if (base is None) != (boost is None) or (base and base > boost):
            raise RooflowError(
                f"{source}: device '{key}' has base_clock_mhz {base} and boost_clock_mhz {boost}: give both, the "
                "base clock at most the boost clock (the GPU's clocks, e.g. from TechPowerUp's GPU database)")
    return data


def estimate_only_error(key: str, source: str, fix: str = "remove it from devices") -> RooflowError:
    """The one-sentence error for an estimate-only device where rooflow would have to run on it."""
    return RooflowError(
        f"{source}: device '{key}' is estimate-only (no SLURM resources: rooflow cannot run on it), so it "
        f"cannot be measured or profiled: {fix}, and use it with `rooflow estimate --device {key}` or as the "
        "device of an imported profile")


def load_devices(path: str | Path) -> dict[str, Device]:
    """All devices of a catalogue file, validated, in SI units."""
    data = read_yaml(path)
    validate_catalogue(data, str(path))
    return {key: _from_entry(key, entry) for key, entry in data.items()}


# what a --ceilings / `ceilings:` file is, for the sentence that refuses another kind of JSON
CEILINGS_FILE = "a ceilings file (the JSON `rooflow ceilings --output` writes)"


VENDOR_WORDS = ("NVIDIA", "TESLA", "GEFORCE", "QUADRO")


def gpu_model(name: str) -> str | None:
    """The model a GPU's name gives (H100, A100, L40S, T4): its first word of letters then digits, the vendor's
    words aside; None where it has none."""
    for word in re.split(r"[^A-Z0-9]+", name.upper()):
        if word not in VENDOR_WORDS and re.fullmatch(r"[A-Z]+[0-9]+[A-Z]*", word):
            return word
    return None


def model_boards(name: str, devices: dict[str, Device]) -> list[str]:
    """The keys of the catalogue's GPUs of the model ``name`` gives (:func:`gpu_model`), sorted: [] where none."""
    model = gpu_model(name)
    return sorted(key for key, device in devices.items()
                  if model and device.is_cuda and gpu_model(device.name) == model)


def device_hint(key: str, devices: dict[str, Device]) -> str:
    """Words that point a device key the catalogue lacks at the one meant: the key of a device it is the name of
    (what `torch.cuda.get_device_name()` and nvidia-smi print), the boards of its GPU model, else the closest keys
    ("" where nothing is close)."""
    named = [k for k, device in devices.items() if device.name.lower() == key.lower()]
    if named:
        return f" ('{key}' is the name of catalogue device {named[0]}: give its key, {named[0]})"
    boards = model_boards(key, devices)
    if boards:
        return f" (its {gpu_model(key)} boards: {', '.join(boards)})"
    closest = close_matches(key, sorted(devices))
    return f" (closest: {', '.join(closest)})" if closest else ""


def unknown_device_error(key: str, devices: dict[str, Device], where: str | Path) -> RooflowError:
    """The one-sentence error for a device key that ``where`` (a catalogue) does not have."""
    return RooflowError(f"device '{key}' is not in {where}{device_hint(key, devices)}: use one of "
                        f"{', '.join(sorted(devices))} (`rooflow devices` lists them)")


def ceilings_mismatch(ceilings: dict[str, Any], device: Device, same_model: bool = False) -> str | None:
    """Why a ceilings JSON was not measured on ``device``, in words; None where it may have been. A CPU's roofs
    for a GPU (or a GPU's for a CPU) never are; with ``same_model``, nor a GPU of another model than the device's
    (a T4's roofs for a V100): what derives a calibration from the roofs asks that. Files that do not say what they
    measured (written before `device_kind`) pass."""
    kind = ceilings.get("device_kind")
    name = ceilings.get("device_name") or "?"
    if kind and kind != device.kind:
        return f"it holds the roofs of a {kind.upper()} ({name}), and {device.key} is a {device.kind.upper()}"
    measured, catalogued = gpu_model(str(name)), gpu_model(device.name)
    if same_model and device.is_cuda and measured and catalogued and measured != catalogued:
        return f"it holds the roofs of a {measured} ({name}), and {device.key} is a {catalogued} ({device.name})"
    return None


# The ceilings JSON's layout (`schema_version`) this rooflow writes and reads: 2, l2_read in place of l2_copy;
# compute_tests, peak_kernel, stability, invalid_roofs
CEILINGS_SCHEMA_VERSION = 2
# What no one device measures (FLOP/s, bytes/s): a roof outside these is a broken or hand-edited file, not a
# machine (the largest GPUs reach about 2e15 FLOP/s dense and 3e13 bytes/s summed over their SMs' L1s; a CPU core
# with no vector unit still runs 1e8 FLOP/s)
ROOF_BOUNDS = {"FLOP/s": (1e6, 1e18), "B/s": (1e6, 1e16)}
# A GPU's measured roof over this multiple of its datasheet's: no board runs so far above its boost clock or its
# memory's datasheet rate (a measured roof above the datasheet's by less — a factory-overclocked card — is kept;
# an H100 SXM's measured 3.03 TB/s is 1.52x an H100 PCIe's 2.0: another board's)
DATASHEET_EXCESS = 1.5


def ceilings_roofs_problem(ceilings: dict[str, Any]) -> str | None:
    """What makes a ceilings JSON's roofs unusable — none measured, one not a positive number, or outside what any
    one device measures (:data:`ROOF_BOUNDS`), or a file of a newer rooflow — or None."""
    version = ceilings.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > CEILINGS_SCHEMA_VERSION:
        # a newer rooflow's fields would be read as this one's (or not at all) without a word
        return (f"was written by a newer rooflow (schema_version {version}; this one reads up to {CEILINGS_SCHEMA_VERSION}: "
                "upgrade rooflow to read it)")
    if not ceilings.get("peak_flops_per_second") and not ceilings.get("dram_bytes_per_second"):
        # `{}` or another JSON: it was ignored without a word, and the advice then said to pass --ceilings
        return "holds no measured roof (no peak_flops_per_second, no dram_bytes_per_second)"
    peaks = ceilings.get("peak_flops_per_second")
    roofs = [(f"peak_flops_per_second.{k}", v) for k, v in (peaks.items() if isinstance(peaks, dict) else [])]
    roofs += [(key, ceilings.get(key)) for key in ("dram_bytes_per_second", "l2_bytes_per_second",
                                                   "l1_bytes_per_second") if ceilings.get(key) is not None]
    bad = (("peak_flops_per_second", peaks) if peaks is not None and not isinstance(peaks, dict) else
           next(((key, value) for key, value in roofs if value is not None and not positive_number(value)), None))
    if bad:  # a hand-edited or foreign value: a TypeError traceback, or a NaN/negative roof under every prediction
        return f"{bad[0]} is {bad[1]!r}, not a positive number (its peak_flops_per_second a mapping of them)"
    for key, value in roofs:  # 1e300 FLOP/s priced every run at 0 s; 0.001 bytes/s at hours
        unit = "FLOP/s" if key.startswith("peak_flops") else "B/s"
        low, high = ROOF_BOUNDS[unit]
        if value is not None and not low <= value <= high:
            return (f"{key} is {value!r} {unit}, {'past' if value > high else 'below'} what any one device measures "
                    f"({format_quantity(low, unit)} to {format_quantity(high, unit)})")
    return None


def datasheet_excess(ceilings: dict[str, Any], device: Device) -> str | None:
    """A measured roof of a GPU over :data:`DATASHEET_EXCESS` × its datasheet's, in words; None where none is."""
    if not device.is_cuda:
        return None
    peaks = ceilings.get("peak_flops_per_second") or {}
    pairs = [(f"peak_flops_per_second.{key}", value, device.peak_flops_per_second.get(key), "FLOP/s")
             for key, value in peaks.items()]
    pairs.append(("dram_bytes_per_second", ceilings.get("dram_bytes_per_second"), device.dram_bytes_per_second, "B/s"))
    for key, value, datasheet, unit in pairs:
        if positive_number(value) and positive_number(datasheet) and value > DATASHEET_EXCESS * datasheet:
            return (f"its {key} {format_quantity(value, unit)} is {value / datasheet:.3g}× {device.key}'s datasheet "
                    f"{format_quantity(datasheet, unit)}, which no board of it reaches")
    return None


def missing_roof(ceilings: dict[str, Any], device: Device) -> str | None:
    """The roof a device without a datasheet (a CPU) needs from its ceilings file and the file lacks — its FP32
    peak or its DRAM bandwidth — or None: without it a CPU's step was priced at the other roof alone (an empty
    peak_flops_per_second: ResNet-18 b1 in 6.6 ms, 549 GFLOP/s on a CPU of 232 theoretical)."""
    needed = [("peak_flops_per_second.fp32", (ceilings.get("peak_flops_per_second") or {}).get("fp32"),
               device.peak_flops_per_second.get("fp32")),
              ("dram_bytes_per_second", ceilings.get("dram_bytes_per_second"), device.dram_bytes_per_second)]
    absent = [key for key, measured, datasheet in needed if not measured and not datasheet]
    if absent:
        return f"it has no {' and no '.join(absent)}, and {device.key} has no datasheet value in its place"
    return None


def check_ceilings(ceilings: dict[str, Any], device: Device, path: str | Path, same_model: bool = False) -> None:
    """Refuse, in one sentence naming the file and the fix, ceilings whose roofs are unusable
    (:func:`ceilings_roofs_problem`) or :func:`ceilings_mismatch` says are another device's."""
    problem = ceilings_roofs_problem(ceilings)
    if problem:
        raise RooflowError(f"ceilings file {path}{' ' if problem.startswith('holds') else ': '}{problem}: give the "
                           f"JSON `rooflow ceilings --device {device.key} --output FILE` wrote on that device")
    why = (ceilings_mismatch(ceilings, device, same_model) or datasheet_excess(ceilings, device)
           or missing_roof(ceilings, device))
    if why:
        raise RooflowError(f"ceilings file {path}: {why}: give the JSON `rooflow ceilings --device {device.key} "
                           f"--output FILE` wrote on that device")


def load_device(path: str | Path, key: str, ceilings_path: str | Path | None = None) -> Device:
    devices = load_devices(path)
    if key not in devices:
        raise unknown_device_error(key, devices, path)
    device = devices[key]
    if ceilings_path:
        if why := missing(ceilings_path):  # it was passed over without a word: the datasheet's roofs in its place
            raise RooflowError(f"ceilings file {ceilings_path}: {why}: give the JSON `rooflow "
                               f"ceilings --device {key} --output FILE` wrote on that device")
        ceilings = read_json_object(ceilings_path, CEILINGS_FILE)
        check_ceilings(ceilings, device, ceilings_path, same_model=True)  # an H200's roofs moved an H100's estimate
        device.with_measured(ceilings)
    return device


def default_catalogue_path() -> Path:
    """config/devices.yaml of the checkout rooflow runs from."""
    return Path(__file__).resolve().parents[2] / "config" / "devices.yaml"
