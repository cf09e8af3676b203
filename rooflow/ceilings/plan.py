"""What the ceilings job measures and how much of it: the counting conventions of its microbenchmarks
(one FMA = 2 FLOPs; STREAM's bytes read + written) and the plan of sizes and repeats for this machine's
caches and memory."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from rooflow.errors import RooflowError
from rooflow.hardware.devices import CEILINGS_SCHEMA_VERSION

GIGA = 1e9
TERA = 1e12
MIB = 1 << 20
SCHEMA_VERSION = CEILINGS_SCHEMA_VERSION  # the layout of the JSON `rooflow ceilings` writes
STREAM_ELEMENT_BYTES = 4  # copy/triad run over fp32 arrays
TRIAD_SCALAR = 3.0

# GPUs whose FP64 GEMM runs on tensor cores (DMMA): their measured FP64 roof is `fp64_tensor`.
FP64_TENSOR_CAPABILITIES = {(8, 0), (9, 0)}


# --- counting conventions ----------------------------------------------------------------------------

def gemm_flops(n: int) -> int:
    """FLOPs of an n×n by n×n matrix product: n³ multiply-adds, one FMA = 2 FLOPs."""
    return 2 * n**3


def copy_bytes(elements: int, element_bytes: int = STREAM_ELEMENT_BYTES) -> int:
    """Bytes a copy of `elements` moves: every element read once and written once."""
    return 2 * elements * element_bytes


def triad_bytes(elements: int, element_bytes: int = STREAM_ELEMENT_BYTES) -> int:
    """Bytes the triad a = b + s·c moves: two arrays read, one written (STREAM's convention)."""
    return 3 * elements * element_bytes


def l2_read_bytes(elements: int, passes: int, programs: int, element_bytes: int = STREAM_ELEMENT_BYTES) -> int:
    """Bytes the L2 read kernel moves: `passes` reads of every element of the resident buffer, plus one
    fp32 partial sum written per program."""
    return passes * elements * element_bytes + programs * STREAM_ELEMENT_BYTES


@dataclass(frozen=True)
class ConvShape:
    """One convolution the models run: input N×C×H×W, K filters of R×R, stride, padding (default R // 2)."""

    name: str
    batch: int
    in_channels: int
    out_channels: int
    size: int  # input height = width
    kernel: int
    stride: int = 1
    padding: int | None = None

    @property
    def output_size(self) -> int:
        pad = self.kernel // 2 if self.padding is None else self.padding
        return (self.size + 2 * pad - self.kernel) // self.stride + 1

    def flops(self) -> int:
        """2·C·R·R·K·Hout·Wout·N (DESIGN.md's Conv2d formula, one FMA = 2 FLOPs, no bias)."""
        return conv2d_flops(self.batch, self.in_channels, self.out_channels, self.output_size, self.kernel)


def conv2d_flops(batch: int, in_channels: int, out_channels: int, output_size: int, kernel: int,
                 groups: int = 1) -> int:
    """FLOPs of a square Conv2d without bias: 2·(Cin/groups)·K·K·Cout·Hout·Wout·N."""
    return 2 * (in_channels // groups) * kernel * kernel * out_channels * output_size * output_size * batch


# Convolutions of the shapes the default models run (torchvision ResNet-18/50, VGG-11 at 224x224), at
# batch 4 like the default experiment. oneDNN (torch's CPU convolution) often beats MKL's SGEMM here,
# so a roof measured with GEMMs alone sat under resnet18/vgg11 (issue 11).
CPU_CONV_SHAPES = (
    ConvShape("3x3 64->64 56x56 b4 (ResNet-18 layer1)", 4, 64, 64, 56, 3),
    ConvShape("3x3 256->256 56x56 b4 (VGG-11 conv3_2)", 4, 256, 256, 56, 3),
    ConvShape("1x1 256->64 56x56 b4 (ResNet-50 layer1 bottleneck)", 4, 256, 64, 56, 1),
)
CPU_CONV_SHAPES_FULL = CPU_CONV_SHAPES + (
    ConvShape("3x3 64->128 112x112 b4 (VGG-11 conv2_1)", 4, 64, 128, 112, 3),
    ConvShape("3x3 512->512 28x28 b4 (VGG-11 conv4_2)", 4, 512, 512, 28, 3),
    ConvShape("3x3 256->256 14x14 b4 (ResNet-18 layer3)", 4, 256, 256, 14, 3),
)


# --- the plan: sizes, repeats ------------------------------------------------------------------------

@dataclass
class Plan:
    """What to run. Built by :func:`default_plan`; tests pass a tiny one.

    Repeats: every case runs `warmup` untimed calls, then `repeats` timed ones; where `max_repeats` is larger,
    it goes on until it is stable — the best of the last `stable_window` runs improved the best before them
    by less than `stable_tolerance` — or until `case_budget_seconds` (per case) or `total_budget_seconds`
    (the whole measurement: later cases then run `repeats` only) is spent. The best is kept."""

    precisions: tuple[str, ...]
    gemm_sizes: tuple[int, ...]
    stream_elements: tuple[int, ...]  # elements per fp32 array of the copy/triad (DRAM) tests
    l2_elements: tuple[int, ...] = ()  # elements of the L2-resident fp32 buffer of the L2 read test (GPU)
    l2_read_bytes_per_call: int = 512 * MIB  # GPU: passes over the L2 buffer so one kernel reads this much
    l2_block: int = 2048  # GPU: fp32 elements per program and loop step of the L2 read kernel (8 per thread)
    conv_shapes: tuple[ConvShape, ...] = ()  # fp32 convolutions timed beside the GEMMs (CPU)
    warmup: int = 2
    repeats: int = 5
    max_repeats: int | None = None  # None: exactly `repeats`
    stable_window: int = 3
    stable_tolerance: float = 0.015
    case_budget_seconds: float | None = None
    total_budget_seconds: float | None = None
    max_call_seconds: float = 1.0  # GEMM sizes whose single call would take longer are not run
    min_batch_seconds: float = 1e-3  # GPU: calls per timed batch so that one batch lasts at least this
    notes: list[str] = field(default_factory=list)


def last_level_cache_bytes() -> int | None:
    """Size of the largest cache level (sysfs, else /proc/cpuinfo's `cache size`), or None."""
    best: int | None = None
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            size = _parse_size((index / "size").read_text().strip())
        except OSError:
            continue
        if size and (best is None or size > best):
            best = size
    if best:
        return best
    try:
        match = re.search(r"^cache size\s*:\s*(\S+\s*\S*)", Path("/proc/cpuinfo").read_text(), re.MULTILINE)
    except OSError:
        return None
    return _parse_size(match.group(1)) if match else None


def _parse_size(text: str) -> int | None:
    match = re.fullmatch(r"(\d+)\s*([KMG]?)(?:i?B)?", text.strip(), re.IGNORECASE)
    if not match:
        return None
    return int(match.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[match.group(2).upper()]


def available_memory_bytes() -> int | None:
    try:
        match = re.search(r"^MemAvailable:\s*(\d+) kB", Path("/proc/meminfo").read_text(), re.MULTILINE)
    except OSError:
        return None
    return int(match.group(1)) * 1024 if match else None


def default_plan(kind: str, quick: bool, *, llc_bytes: int | None = None, memory_bytes: int | None = None,
                 l2_bytes: int | None = None, capability: tuple[int, int] | None = None) -> Plan:
    """Sizes and repeats for a CPU or GPU measurement.

    CPU: GEMMs of 1024 and 2048 (512 to 4096 in the full run) and the convolutions of CPU_CONV_SHAPES
    (CPU_CONV_SHAPES_FULL), each repeated until stable: the best of the last 5 timings improves the best
    before them by under 1.5% (at least 5, at most 40 timings, 3 s per case and 40 s in all for the quick
    run; 10, 200, 12 s and 240 s for the full one); copy/triad over arrays whose triad footprint is 2× the
    last-level cache (+4× in the full run), at least 256 MiB, at most a quarter of free memory.
    GPU: GEMMs of 4096 (2048, 4096, 8192 in the full run), fixed repeats; arrays of 16× L2 and at least
    256 MiB each, at most 1/8 of free device memory; the L2 read test over resident buffers of L2/4 and L2/8
    (+L2/16 in the full run) — H100's 50 MB L2 is two partitions, and a working set must fit in one, well
    under half of the total.
    """
    notes: list[str] = []
    if kind == "cpu":
        llc = llc_bytes or 32 * MIB
        footprint = max(2 * llc, 256 * MIB)
        footprints = [footprint] if quick else [footprint, 2 * footprint]
        if memory_bytes:
            cap = memory_bytes // 4
            if max(footprints) > cap:
                notes.append(f"DRAM arrays capped at a quarter of free memory ({cap / GIGA:.2f} GB)")
                footprints = sorted({min(f, cap) for f in footprints})
        if min(footprints) < 2 * llc:
            notes.append("the smallest triad footprint is under 2x the last-level cache: the DRAM roof may "
                         "include cache bandwidth")
        return Plan(
            precisions=("fp32", "bf16"),
            gemm_sizes=(1024, 2048) if quick else (512, 1024, 2048, 4096),
            stream_elements=tuple(f // (3 * STREAM_ELEMENT_BYTES) for f in footprints),
            conv_shapes=CPU_CONV_SHAPES if quick else CPU_CONV_SHAPES_FULL,
            warmup=2,
            repeats=5 if quick else 10,
            max_repeats=40 if quick else 200,
            stable_window=5,
            case_budget_seconds=3.0 if quick else 12.0,
            total_budget_seconds=40.0 if quick else 240.0,
            max_call_seconds=1.0 if quick else 3.0,
            notes=notes,
        )
    if kind != "cuda":
        raise RooflowError(f"unknown device kind '{kind}': use cpu or cuda")
    l2 = l2_bytes or 40 * MIB
    array = max(16 * l2, 256 * MIB)
    arrays = [array] if quick else [array, 2 * array]
    if memory_bytes:
        cap = memory_bytes // 8
        if max(arrays) > cap:
            notes.append(f"DRAM arrays capped at 1/8 of free device memory ({cap / GIGA:.2f} GB each)")
            arrays = sorted({min(a, cap) for a in arrays})
    fractions = (8, 4) if quick else (16, 8, 4)  # resident buffer = L2 / fraction
    precisions = ["fp32", "tf32", "fp16", "bf16", "fp64"]
    if capability and capability < (8, 0):
        precisions = [p for p in precisions if p not in ("tf32", "bf16")]
    return Plan(
        precisions=tuple(precisions),
        gemm_sizes=(4096,) if quick else (2048, 4096, 8192),
        stream_elements=tuple(a // STREAM_ELEMENT_BYTES for a in arrays),
        l2_elements=tuple(l2 // f // STREAM_ELEMENT_BYTES for f in fractions),
        warmup=5 if quick else 10,
        repeats=5 if quick else 10,
        max_call_seconds=0.5 if quick else 2.0,
        notes=notes,
    )

