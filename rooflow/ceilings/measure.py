"""Empirical roofs of this machine, measured by microbenchmarks in the manner of the Empirical Roofline Toolkit.

A datasheet peak is what a vendor promises; a roofline is only as right as its roofs, so rooflow measures
them as well and shows both (datasheet roofs solid, measured ones dashed):

- **compute**: large square GEMMs through torch (``torch.mm``), one per precision path, and on a CPU also
  the convolutions the models run (``torch.nn.functional.conv2d``: oneDNN, which can outrun MKL's SGEMM —
  a GEMM-only roof sat under resnet18/vgg11 on a Zen 4 VM). CPU: fp32, and bf16 where the CPU runs it fast
  enough to measure quickly. GPU: fp32 with TF32 off (CUDA cores), TF32, FP16 and BF16 (tensor cores, FP32
  accumulate) and FP64 (tensor-core DMMA on sm_80/sm_90, recorded as ``fp64_tensor`` there so it sits
  beside the right datasheet roof). The roof of a precision is the best over all its kernels.
- **memory**: a STREAM-style copy (``a.copy_(b)``) and triad (``a = b + s·c``) over fp32 arrays much larger
  than the last-level cache (device-to-device on a GPU), and on a GPU an L2 read test: a Triton kernel sums
  a resident buffer of L2/4 (L2/8) many times per launch with L2-only loads (:func:`l2_read_kernel`).
  A cache roof at or below the DRAM roof is a failed measurement (:func:`invalid_cache_roofs`): the result
  marks it invalid with its numbers, and figures never draw it.

Conventions (stated once, used everywhere, tested in tests/test_ceilings.py):

- one FMA = 2 FLOPs, so an n×n by n×n GEMM is ``2·n³`` FLOPs (:func:`gemm_flops`) and a convolution
  ``2·C·R·R·K·Hout·Wout·N`` (:func:`conv2d_flops`);
- bytes are bytes *read + written* as the program states them: copy ``2·N·size`` (read b, write a), triad
  ``3·N·size`` (read b and c, write a) — the STREAM convention. The write-allocate read a CPU cache does
  for each store is not counted, as STREAM does not count it. The L2 read test reads ``passes·N·size``
  (checked by the sum it returns) and writes one fp32 per program (:func:`l2_read_bytes`).

Every measurement is several sizes × several repeats after warm-up; on a CPU each case is repeated until
stable (its best stops improving, within a time budget: :class:`Plan`). Each timing is kept in ``runs``,
and the summary keeps the best (max over every run: the roof) and the median (the median over repeats at
the best case). GPU timing uses CUDA events around ``inner`` back-to-back calls (sized so one timed batch
lasts ≥ 1 ms); CPU timing uses ``time.perf_counter_ns`` around each call, at a fixed
``torch.set_num_threads``. The CPU's theoretical peak comes from its microarchitecture
(:func:`theoretical_cpu_peak`), with the assumptions written out.

The GPU path takes the ``torch.cuda`` module as a parameter (``cuda=``), so tests without a GPU run it
through a clearly labelled stub (a fake event clock over CPU tensors) that checks the FLOP and byte
accounting, not speed. On a GPU node the same code runs for real.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rooflow.errors import RooflowError

log = logging.getLogger(__name__)

GIGA = 1e9
TERA = 1e12
MIB = 1 << 20
SCHEMA_VERSION = 2  # 2: l2_read replaces l2_copy; compute_tests, peak_kernel, stability, invalid_roofs
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


# --- clocks ------------------------------------------------------------------------------------------

class CpuClock:
    """Wall-clock timing of synchronous CPU work: time.perf_counter_ns around each call."""

    batches = False

    def time(self, fn: Callable[[], Any], warmup: int, repeats: int, inner: int = 1) -> list[float]:
        for _ in range(warmup):
            fn()
        seconds = []
        for _ in range(repeats):
            start = time.perf_counter_ns()
            for _ in range(inner):
                fn()
            seconds.append((time.perf_counter_ns() - start) / 1e9 / inner)
        return seconds


class CudaClock:
    """CUDA-event timing after warm-up: events recorded around `inner` back-to-back launches, so launch
    overhead is amortised; returns seconds per call. `cuda` is torch.cuda (or a test stub of it)."""

    batches = True

    def __init__(self, cuda: Any):
        self.cuda = cuda

    def time(self, fn: Callable[[], Any], warmup: int, repeats: int, inner: int = 1) -> list[float]:
        for _ in range(warmup):
            fn()
        self.cuda.synchronize()
        seconds = []
        for _ in range(repeats):
            start = self.cuda.Event(enable_timing=True)
            end = self.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(inner):
                fn()
            end.record()
            end.synchronize()
            seconds.append(start.elapsed_time(end) / 1e3 / inner)  # elapsed_time is in milliseconds
        return seconds

    def calls_per_batch(self, fn: Callable[[], Any], min_batch_seconds: float) -> int:
        """How many back-to-back calls make one timed batch last at least `min_batch_seconds`."""
        one = min(self.time(fn, warmup=1, repeats=2))
        if one <= 0:
            return 1
        return max(1, min(1000, math.ceil(min_batch_seconds / one)))


# --- theoretical CPU peak ----------------------------------------------------------------------------

# Sources for the per-core FP32 throughput of each microarchitecture (FLOP per cycle per core, one FMA = 2).
# Counted: the FMA units only. GEMMs and convolutions are FMA work, so the two extra FADD pipes of AMD Zen 2-4
# (which would allow FMA + ADD mixes above this number) are not counted.
AGNER = "https://www.agner.org/optimize/microarchitecture.pdf"  # Agner Fog, "The microarchitecture of ..."
INTEL_OPT = "Intel 64 and IA-32 Architectures Optimization Reference Manual (order 248966), per-core FLOP table"
AMD_ZEN2 = "AMD Software Optimization Guide for AMD Family 17h Models 30h and Greater (pub. 56305)"
AMD_ZEN3 = "AMD Software Optimization Guide for AMD Family 19h Processors (pub. 56665)"
AMD_ZEN4 = ("AMD Software Optimization Guide for the AMD Zen4 Microarchitecture (pub. 57647): 512-bit ops "
            "execute on the 256-bit datapaths")
AMD_ZEN5 = "AMD Software Optimization Guide for the AMD Zen5 Microarchitecture (pub. 58455)"
ARM_NEOVERSE = "Arm Neoverse N1/V1/N2/V2 Software Optimization Guides (Arm developer documentation)"


@dataclass(frozen=True)
class Microarchitecture:
    """One CPU core design: how many FP32 FLOPs one core can retire per cycle at most, and why."""

    name: str
    fp32_flops_per_cycle: int  # per core: FMA units × FP32 lanes per unit × 2 (or add + multiply lanes)
    datapath: str  # the execution units behind the number
    source: str


def _intel(name: str, flops: int, datapath: str) -> Microarchitecture:
    return Microarchitecture(name, flops, datapath, f"{INTEL_OPT}; {AGNER}")


_AVX_NO_FMA = "1x256-bit add + 1x256-bit multiply per cycle (AVX, no FMA): 8 + 8 FP32 FLOP"
_TWO_256_FMA = "2x256-bit FMA units (AVX2): 2 x 8 lanes x 2"
_ONE_512_FMA = "1x512-bit FMA (ports 0+1 fused; client parts have no port-5 FMA): 16 lanes x 2"
_TWO_512_FMA = "2x512-bit FMA units (AVX-512): 2 x 16 lanes x 2"
_SKYLAKE_SP = "Skylake-SP / Cascade Lake / Cooper Lake"

# Intel family 6 model numbers (Intel SDM vol. 4, table 2-1, and the Linux kernel's intel-family.h).
INTEL_FAMILY6: dict[int, Microarchitecture] = {
    **{m: _intel("Sandy Bridge", 16, _AVX_NO_FMA) for m in (0x2A, 0x2D)},
    **{m: _intel("Ivy Bridge", 16, _AVX_NO_FMA) for m in (0x3A, 0x3E)},
    **{m: _intel("Haswell", 32, _TWO_256_FMA) for m in (0x3C, 0x3F, 0x45, 0x46)},
    **{m: _intel("Broadwell", 32, _TWO_256_FMA) for m in (0x3D, 0x47, 0x4F, 0x56)},
    **{m: _intel("Skylake (client)", 32, _TWO_256_FMA) for m in (0x4E, 0x5E)},
    **{m: _intel("Kaby/Coffee/Comet Lake", 32, _TWO_256_FMA) for m in (0x8E, 0x9E, 0xA5, 0xA6)},
    **{m: _intel("Cannon/Ice/Tiger/Rocket Lake (client)", 32, _ONE_512_FMA)
       for m in (0x66, 0x7D, 0x7E, 0x8C, 0x8D, 0xA7)},
    **{m: _intel("Ice Lake-SP", 64, _TWO_512_FMA) for m in (0x6A, 0x6C)},
    **{m: _intel("Sapphire/Emerald/Granite Rapids", 64, _TWO_512_FMA) for m in (0x8F, 0xCF, 0xAD, 0xAE)},
    **{m: _intel("Alder/Raptor/Meteor/Arrow/Lunar Lake (P-core)", 32,
                 _TWO_256_FMA + "; E-cores have 2x128-bit: half")
       for m in (0x97, 0x9A, 0xB7, 0xBA, 0xBF, 0xAA, 0xAC, 0xC5, 0xC6, 0xBD)},
    **{m: _intel("Knights Landing/Mill (Xeon Phi)", 64, _TWO_512_FMA) for m in (0x57, 0x85)},
}


def _skylake_sp(model_name: str) -> Microarchitecture:
    """Skylake-SP/Cascade Lake parts differ by SKU: Platinum, Gold 6xxx, Xeon W and the HEDT Core i7/i9 have
    two 512-bit FMA units; Silver, Bronze and most Gold 5xxx one (Intel ARK, "# of AVX-512 FMA Units")."""
    one_unit = re.search(r"\b(Silver|Bronze)\b", model_name) or (
        re.search(r"\bGold\s+5\d{3}", model_name) and not re.search(r"\bGold\s+5122\b", model_name))
    if one_unit:
        return _intel(f"{_SKYLAKE_SP} (one 512-bit FMA unit: Silver/Bronze/Gold 5xxx)", 32,
                      "1x512-bit FMA unit (port 0+1 fused; no port-5 FMA on this SKU): 16 lanes x 2")
    return _intel(f"{_SKYLAKE_SP} (two 512-bit FMA units)", 64, _TWO_512_FMA + " (Platinum, Gold 6xxx, W, HEDT)")


def _amd(family: int, model: int, flags: set[str]) -> Microarchitecture | None:
    if family == 0x17:
        if model < 0x30:
            return Microarchitecture("AMD Zen / Zen+", 16, "2x128-bit FMA units: 2 x 4 lanes x 2",
                                     f"AMD Software Optimization Guide for AMD Family 17h (pub. 55723); {AGNER}")
        return Microarchitecture("AMD Zen 2", 32, _TWO_256_FMA, AMD_ZEN2)
    if family == 0x19:
        if "avx512f" in flags:
            return Microarchitecture(
                "AMD Zen 4", 32, "AVX-512 executed on 256-bit datapaths (each 512-bit op issues twice): "
                "2x256-bit FMA units, 2 x 8 lanes x 2", AMD_ZEN4)
        return Microarchitecture("AMD Zen 3", 32, _TWO_256_FMA, AMD_ZEN3)
    if family == 0x1A:
        if model <= 0x1F or 0x40 <= model <= 0x4F:  # Turin (server), Granite Ridge (desktop)
            return Microarchitecture("AMD Zen 5 (server/desktop)", 64, "full 512-bit datapaths: " + _TWO_512_FMA,
                                     AMD_ZEN5)
        if 0x20 <= model <= 0x2F:  # Strix Point (mobile)
            return Microarchitecture("AMD Zen 5 (mobile)", 32, "AVX-512 on 256-bit datapaths: 2x256-bit FMA",
                                     AMD_ZEN5)
    return None


# Arm Neoverse cores by `CPU implementer` 0x41 and `CPU part` (Arm technical reference manuals).
ARM_PARTS: dict[int, Microarchitecture] = {
    0xD0C: Microarchitecture("Arm Neoverse N1 (e.g. AWS Graviton2)", 16, "2x128-bit NEON FMA: 2 x 4 lanes x 2",
                             ARM_NEOVERSE),
    0xD40: Microarchitecture("Arm Neoverse V1 (e.g. AWS Graviton3)", 32,
                             "4x128-bit NEON FMA (or 2x256-bit SVE): 4 x 4 lanes x 2", ARM_NEOVERSE),
    0xD49: Microarchitecture("Arm Neoverse N2", 16, "2x128-bit NEON/SVE2 FMA: 2 x 4 lanes x 2", ARM_NEOVERSE),
    0xD4F: Microarchitecture("Arm Neoverse V2 (e.g. AWS Graviton4, NVIDIA Grace)", 32,
                             "4x128-bit NEON/SVE2 FMA: 4 x 4 lanes x 2", ARM_NEOVERSE),
}


def _isa_upper_bound(flags: set[str]) -> tuple[int, str]:
    """FP32 FLOP/cycle/core an unknown core could reach at most with its widest ISA and two FMA units."""
    if "avx512f" in flags:
        return 64, "avx512f: 2 x 16 lanes x 2 (two 512-bit FMA units)"
    if ("avx2" in flags or "avx" in flags) and "fma" in flags:
        return 32, "avx2+fma: 2 x 8 lanes x 2 (two 256-bit FMA units)"
    if "avx" in flags:
        return 16, "avx without fma: 8 add + 8 multiply lanes"
    if "asimd" in flags:
        return 16, "asimd (NEON): 2 x 4 lanes x 2 (two 128-bit FMA units)"
    if "sse2" in flags:
        return 8, "sse2: 4 add + 4 multiply lanes"
    return 2, "scalar: one FMA"


def _cpuinfo_fields(cpuinfo: str) -> dict[str, Any]:
    """The first processor's fields of a /proc/cpuinfo text, plus the physical core count where known."""
    fields: dict[str, str] = {}
    packages: set[str] = set()
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "physical id":
            packages.add(value)
        if key == "Features":
            key = "flags"
        fields.setdefault(key, value)
    out: dict[str, Any] = dict(fields)
    out["flag_set"] = set(fields.get("flags", "").split())
    out["packages"] = max(1, len(packages))
    return out


def _number(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text, 0)  # "25", "0xd0c"
    except ValueError:
        return None


def cpu_microarchitecture(cpuinfo: str) -> dict[str, Any]:
    """The core design of a /proc/cpuinfo text: {name, fp32_flops_per_cycle (per core), datapath, source,
    known, how} — from vendor_id, cpu family, model, model name and flags (x86) or CPU implementer and
    CPU part (Arm). An unknown core gets an UPPER BOUND from its widest ISA (two FMA units) and says so."""
    fields = _cpuinfo_fields(cpuinfo)
    flags = fields["flag_set"]
    vendor = fields.get("vendor_id", "")
    family, model = _number(fields.get("cpu family")), _number(fields.get("model"))
    model_name = fields.get("model name", "")
    found: Microarchitecture | None = None
    identity = f"vendor {vendor or '?'}, family {family}, model {model}"
    if vendor == "GenuineIntel" and family == 6 and model is not None:
        found = _skylake_sp(model_name) if model == 0x55 else INTEL_FAMILY6.get(model)
    elif vendor == "AuthenticAMD" and family is not None and model is not None:
        found = _amd(family, model, flags)
    elif _number(fields.get("CPU implementer")) == 0x41:
        part = _number(fields.get("CPU part"))
        identity = f"Arm CPU part {fields.get('CPU part')}"
        found = ARM_PARTS.get(part) if part is not None else None
    if found is not None:
        return {"name": found.name, "fp32_flops_per_cycle": found.fp32_flops_per_cycle,
                "datapath": found.datapath, "source": found.source, "known": True,
                "how": f"{identity} ({model_name or 'no model name'})"}
    flops, why = _isa_upper_bound(flags)
    return {"name": "unknown", "fp32_flops_per_cycle": flops, "datapath": why, "source": None, "known": False,
            "how": (f"{identity} ({model_name or 'no model name'}) is not in rooflow's table "
                    "(rooflow.ceilings.measure.INTEL_FAMILY6, _amd, ARM_PARTS): assumed two FMA units of the widest ISA, "
                    "an UPPER bound (many cores have one)")}


def theoretical_cpu_peak(cpuinfo: str, cores: int, sustained: dict[str, Any] | None = None) -> dict[str, Any]:
    """fp32 peak of `cores` cores from a /proc/cpuinfo text: cores × clock × FP32 FLOP/cycle/core of the
    core's microarchitecture (:func:`cpu_microarchitecture`: AMD Zen 4 runs AVX-512 on 256-bit datapaths,
    32 FLOP/cycle, not 64; a Xeon Silver has one 512-bit FMA unit, a Platinum two; Ivy Bridge has no FMA).

    Clock: the clock the cores sustain under load where it was measured (``sustained``:
    rooflow.ceilings.clock.sustained_clock, a chain of dependent adds on every thread), else the nominal (base)
    clock in the model name ("@ 2.60GHz") where there is one, else the highest `cpu MHz` (a VM's model name
    often has none); with a nominal clock, turbo is not modelled, so a measured peak above this one means the
    cores ran above that clock (a check flags it). `cores` beyond the physical cores
    (SMT siblings) are not counted: a sibling thread shares its core's FMA units. Returns
    {"flops_per_second": {"fp32": x} or {}, "basis": how it was derived, "microarchitecture": name, ...}.
    """
    fields = _cpuinfo_fields(cpuinfo)
    uarch = cpu_microarchitecture(cpuinfo)
    model = fields.get("model name", "")
    mhz = []
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "cpu MHz":
            try:
                mhz.append(float(value))
            except ValueError:
                pass
    nominal = re.search(r"@\s*([\d.]+)\s*GHz", model)
    if nominal:
        clock_hz, clock_from = float(nominal.group(1)) * 1e9, "the nominal (base) clock in the model name"
    elif mhz:
        clock_hz, clock_from = max(mhz) * 1e6, "the highest 'cpu MHz' in /proc/cpuinfo"
    else:
        clock_hz, clock_from = None, None
    nominal_clock_hz = clock_hz
    if sustained and sustained.get("clock_hz"):
        clock_hz = float(sustained["clock_hz"])
        clock_from = (f"the clock the cores sustained under load ({sustained.get('how', 'measured')}"
                      + (f"; nominal {nominal_clock_hz / 1e9:.3f} GHz" if nominal_clock_hz else "") + ")")

    counted, smt_note = cores, ""
    siblings, per_package = _number(fields.get("siblings")), _number(fields.get("cpu cores"))
    if siblings and per_package and siblings > per_package:
        physical = per_package * fields["packages"]
        if cores > physical:
            counted = physical
            smt_note = (f"; {cores} threads run on {physical} physical cores (SMT: {siblings} logical CPUs share "
                        f"{per_package} cores per package), and sibling threads share their core's FMA units, "
                        f"so {physical} cores are counted")
        else:
            smt_note = f"; SMT: {siblings} logical CPUs share {per_package} cores, so threads beyond cores add no FMA units"

    flops_per_cycle = uarch["fp32_flops_per_cycle"]
    result: dict[str, Any] = {
        "cores": counted, "threads": cores, "clock_hz": clock_hz, "nominal_clock_hz": nominal_clock_hz,
        "clock_measured": bool(sustained and sustained.get("clock_hz")), "model_name": model or None,
        "microarchitecture": uarch["name"], "microarchitecture_known": uarch["known"],
        "fp32_flops_per_cycle_per_core": flops_per_cycle, "datapath": uarch["datapath"],
        "microarchitecture_source": uarch["source"], "identified_from": uarch["how"],
    }
    if clock_hz is None:
        result["flops_per_second"] = {}
        result["basis"] = f"no clock in /proc/cpuinfo: no theoretical peak (microarchitecture {uarch['name']})"
        return result
    peak = counted * clock_hz * flops_per_cycle
    result["flops_per_second"] = {"fp32": peak}
    known = (f"microarchitecture {uarch['name']} ({uarch['how']}; source {uarch['source']})" if uarch["known"]
             else f"microarchitecture UNKNOWN: {uarch['how']}")
    result["basis"] = (
        f"{counted} cores x {clock_hz / 1e9:.3f} GHz x {flops_per_cycle} FP32 FLOP/cycle/core "
        f"[{uarch['datapath']}] = {peak / GIGA:.1f} GFLOP/s; {known}; clock from {clock_from}"
        + ("" if result["clock_measured"] else "; turbo and AVX frequency licences ignored") + smt_note)
    return result

# --- measurement -------------------------------------------------------------------------------------

def _dtype(torch: Any, precision: str) -> Any:
    return {"fp64": torch.float64, "fp32": torch.float32, "tf32": torch.float32,
            "fp16": torch.float16, "bf16": torch.bfloat16}[precision]


@contextmanager
def _tf32(torch: Any, enabled: bool) -> Iterator[None]:
    """TF32 for cuBLAS matmuls on or off, restored afterwards. Uses the legacy `allow_tf32` flag, the one
    rooflow.hardware.environment records: torch refuses to read it once the new `fp32_precision` API was used."""
    matmul = torch.backends.cuda.matmul
    before = matmul.allow_tf32
    matmul.allow_tf32 = enabled
    try:
        yield
    finally:
        matmul.allow_tf32 = before


def _summarise(runs: list[dict[str, Any]], rate_key: str) -> tuple[float | None, float | None]:
    """(best, median) of a group of runs: best = max over every run; median = the median over repeats at
    the case (size or shape) whose median is highest (so best >= median always)."""
    if not runs:
        return None, None
    by_case: dict[Any, list[float]] = {}
    for run in runs:
        by_case.setdefault(run.get("case", run.get("size")), []).append(run[rate_key])
    best = max(run[rate_key] for run in runs)
    median = max(statistics.median(rates) for rates in by_case.values())
    return best, median


def window_gain(seconds: list[float], window: int) -> float | None:
    """How much the last `window` timings improved the best rate of the ones before them (0.02 = 2% faster);
    None while there are not more than `window` timings."""
    if len(seconds) <= window:
        return None
    return min(seconds[:-window]) / min(seconds) - 1.0


def is_stable(seconds: list[float], window: int, tolerance: float) -> bool:
    """True when the best of the last `window` timings beats the best before them by less than `tolerance`."""
    gain = window_gain(seconds, window)
    return gain is not None and gain < tolerance


# The L2 read kernel (GPU): rooflow/ceilings/l2_read.py, a Triton grid-stride sum over a resident fp32 buffer,
# `passes` times per launch, with L2-only loads. Triton ships with torch's CUDA wheels; the module is loaded
# on first use, so a process without Triton still imports this one (and the L2 roof is skipped, with why).
L2_NUM_WARPS = 8
_L2_KERNELS: dict[bool, Any] = {}


def l2_read_kernel() -> Any:
    """The Triton L2 read kernel (ImportError where Triton is missing). A fresh copy of rooflow.ceilings.l2_read is
    loaded per mode, compiled or interpreted (TRITON_INTERPRET=1, the tests without a GPU): Triton decides
    which when the decorator runs."""
    import importlib.util

    interpret = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
    if interpret not in _L2_KERNELS:
        spec = importlib.util.find_spec("rooflow.ceilings.l2_read")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _L2_KERNELS[interpret] = module.l2_read
    return _L2_KERNELS[interpret]


class _Session:
    """One measurement: the tensors' device, the clock, the plan, and every run recorded."""

    def __init__(self, torch: Any, clock: CpuClock | CudaClock, device: str, plan: Plan):
        self.torch, self.clock, self.device, self.plan = torch, clock, device, plan
        self.runs: list[dict[str, Any]] = []
        self.skipped: dict[str, str] = {}
        self.stability: dict[str, dict[str, Any]] = {}
        self.started = time.perf_counter()

    def _time(self, fn: Callable[[], Any], case: str) -> tuple[list[float], int]:
        """Seconds per call of `fn`: `repeats` timings, then more until stable (see Plan), within budget."""
        plan = self.plan
        inner = 1
        if isinstance(self.clock, CudaClock):
            inner = self.clock.calls_per_batch(fn, plan.min_batch_seconds)
        started = time.perf_counter()
        seconds = self.clock.time(fn, plan.warmup, plan.repeats, inner)
        limit = max(plan.repeats, plan.max_repeats or plan.repeats)
        budget = plan.case_budget_seconds
        if plan.total_budget_seconds is not None:
            left = plan.total_budget_seconds - (started - self.started)
            budget = left if budget is None else min(budget, left)
        stop = "fixed repeats" if limit == plan.repeats else None
        while stop is None:
            if is_stable(seconds, plan.stable_window, plan.stable_tolerance):
                stop = "stable"
            elif len(seconds) >= limit:
                stop = "max repeats"
            elif budget is not None and time.perf_counter() - started >= budget:
                stop = "time budget"
            else:
                seconds += self.clock.time(fn, 0, 1, inner)
        self.stability[case] = {"timings": len(seconds), "stopped": stop,
                                "last_window_gain": window_gain(seconds, plan.stable_window),
                                "spread": (max(seconds) - min(seconds)) / statistics.median(seconds)}
        return seconds, inner

    def _record(self, base: dict[str, Any], seconds: list[float], inner: int, count_key: str, count: int) -> None:
        rate_key = "flops_per_second" if count_key == "flops" else "bytes_per_second"
        for repeat, s in enumerate(seconds):
            self.runs.append({**base, "repeat": repeat, "calls_per_timing": inner, "seconds": s,
                              count_key: count, rate_key: count / s})

    def gemm(self, precision: str, key: str, sizes: tuple[int, ...] | None = None) -> None:
        """Square GEMMs at each size, smallest first; stops before a size whose one call would take longer
        than plan.max_call_seconds (recorded in `skipped`)."""
        torch = self.torch
        dtype = _dtype(torch, precision)
        sizes = sorted(sizes or self.plan.gemm_sizes)
        for i, n in enumerate(sizes):
            a = torch.randn(n, n, device=self.device, dtype=torch.float32).to(dtype)
            b = torch.randn(n, n, device=self.device, dtype=torch.float32).to(dtype)
            c = torch.empty(n, n, device=self.device, dtype=dtype)
            case = f"gemm {key} n={n}"
            seconds, inner = self._time(lambda a=a, b=b, c=c: torch.mm(a, b, out=c), case)
            self._record({"test": "gemm", "precision": key, "case": case, "size": n}, seconds, inner,
                         "flops", gemm_flops(n))
            del a, b, c
            # The next size costs (m/n)^3 as much per call: stop before one call would exceed the limit.
            if i + 1 < len(sizes) and min(seconds) * (sizes[i + 1] / n) ** 3 > self.plan.max_call_seconds:
                self.skipped[f"gemm_{key}_n{sizes[i + 1]}"] = (
                    f"one {key} call at n={n} took {min(seconds):.3g} s: n={sizes[i + 1]} would take about "
                    f"{min(seconds) * (sizes[i + 1] / n) ** 3:.3g} s per call, over the "
                    f"{self.plan.max_call_seconds:g} s limit")
                break

    def conv(self, shapes: tuple[ConvShape, ...], precision: str = "fp32") -> None:
        """torch.nn.functional.conv2d (oneDNN on a CPU, cuDNN on a GPU) at each shape, no bias, no autograd."""
        torch = self.torch
        dtype = _dtype(torch, precision)
        with torch.no_grad():
            for shape in shapes:
                x = torch.randn(shape.batch, shape.in_channels, shape.size, shape.size, device=self.device,
                                dtype=torch.float32).to(dtype)
                w = torch.randn(shape.out_channels, shape.in_channels, shape.kernel, shape.kernel,
                                device=self.device, dtype=torch.float32).to(dtype)
                pad = shape.kernel // 2 if shape.padding is None else shape.padding
                case = f"conv {precision} {shape.name}"
                seconds, inner = self._time(
                    lambda x=x, w=w, s=shape.stride, p=pad: torch.nn.functional.conv2d(x, w, stride=s, padding=p),
                    case)
                self._record({"test": "conv", "precision": precision, "case": case, "shape": asdict(shape)},
                             seconds, inner, "flops", shape.flops())
                del x, w

    def stream(self, level: str, elements: tuple[int, ...], tests: tuple[str, ...]) -> None:
        """Copy and/or triad over fp32 arrays of each size (one allocation at the largest size)."""
        torch = self.torch
        largest = max(elements)
        a = torch.zeros(largest, device=self.device, dtype=torch.float32)  # zeros: pages touched now
        b = torch.full((largest,), 1.0, device=self.device, dtype=torch.float32)
        c = torch.full((largest,), 2.0, device=self.device, dtype=torch.float32)
        for n in elements:
            av, bv, cv = a[:n], b[:n], c[:n]
            cases = {
                "copy": (lambda av=av, bv=bv: av.copy_(bv), copy_bytes(n)),
                "triad": (lambda av=av, bv=bv, cv=cv: torch.add(bv, cv, alpha=TRIAD_SCALAR, out=av), triad_bytes(n)),
            }
            for test in tests:
                fn, nbytes = cases[test]
                case = f"{level} {test} n={n}"
                seconds, inner = self._time(fn, case)
                self._record({"test": test, "level": level, "case": case, "size": n, "footprint_bytes": nbytes},
                             seconds, inner, "bytes", nbytes)
        del a, b, c

    def l2_read(self, elements: tuple[int, ...], programs: int) -> None:
        """The L2 roof: :func:`l2_read_kernel` over resident buffers of each size, `passes` reads of every
        element per launch (plan.l2_read_bytes_per_call). The partial sums are checked against
        passes × elements (the buffer holds ones) before timing: the bytes counted are the bytes read."""
        torch = self.torch
        try:
            kernel = l2_read_kernel()
        except ImportError as error:
            self.skipped["l2"] = f"the L2 read kernel needs Triton, which is not importable here ({error})"
            return
        x = torch.ones(max(elements), device=self.device, dtype=torch.float32)
        out = torch.zeros(programs, device=self.device, dtype=torch.float32)
        for n in sorted(elements):
            passes = max(1, math.ceil(self.plan.l2_read_bytes_per_call / (n * STREAM_ELEMENT_BYTES)))
            xv = x[:n]

            def launch(xv=xv, out=out, n=n, passes=passes):
                kernel[(programs,)](xv, out, n, passes, BLOCK=self.plan.l2_block, num_warps=L2_NUM_WARPS)

            try:
                launch()
                total = float(out.double().sum().item())
            except Exception as error:  # a Triton compile or launch failure has many types: report, draw no roof
                self.skipped["l2"] = (f"the Triton L2 read kernel failed ({type(error).__name__}: "
                                      f"{str(error).splitlines()[0] if str(error) else ''})")
                return
            if total != float(passes * n):
                self.skipped["l2"] = (f"the L2 read kernel summed {total:.0f}, not passes x elements = {passes * n}: "
                                      "its byte count would be wrong, so no L2 roof")
                return
            case = f"l2 read n={n}"
            seconds, inner = self._time(launch, case)
            self._record({"test": "read", "level": "l2", "case": case, "size": n,
                          "footprint_bytes": n * STREAM_ELEMENT_BYTES, "passes": passes, "programs": programs},
                         seconds, inner, "bytes", l2_read_bytes(n, passes, programs))
        del x, out

    def summary(self) -> dict[str, Any]:
        compute: dict[str, dict[str, Any]] = {}
        peaks: dict[str, float] = {}
        medians: dict[str, float] = {}
        peak_cases: dict[str, str] = {}
        for test in ("gemm", "conv"):
            for key in dict.fromkeys(r["precision"] for r in self.runs if r["test"] == test):
                group = [r for r in self.runs if r["test"] == test and r["precision"] == key]
                best, median = _summarise(group, "flops_per_second")
                top = max(group, key=lambda r: r["flops_per_second"])["case"]
                compute[f"{test}_{key}"] = {"best": best, "median": median, "best_case": top}
                if best > peaks.get(key, 0.0):
                    peaks[key], medians[key], peak_cases[key] = best, median, top
        memory: dict[str, dict[str, float | None]] = {}
        for level, tests in (("dram", ("copy", "triad")), ("l2", ("read", "copy"))):
            for test in tests:
                group = [r for r in self.runs if r.get("level") == level and r["test"] == test]
                if group:
                    best, median = _summarise(group, "bytes_per_second")
                    memory[f"{level}_{test}"] = {"best": best, "median": median}

        def level_best(level: str) -> tuple[float | None, float | None]:
            tests = [v for k, v in memory.items() if k.startswith(level + "_")]
            if not tests:
                return None, None
            top = max(tests, key=lambda v: v["best"] or 0)
            return top["best"], top["median"]

        dram, dram_median = level_best("dram")
        l2, l2_median = level_best("l2")
        return {
            "peak_flops_per_second": peaks,
            "median_peak_flops_per_second": medians,
            "peak_kernel": peak_cases,
            "compute_tests_flops_per_second": compute,
            "dram_bytes_per_second": dram,
            "median_dram_bytes_per_second": dram_median,
            "l2_bytes_per_second": l2,
            "median_l2_bytes_per_second": l2_median,
            "memory_tests_bytes_per_second": memory,
        }


CACHE_LEVELS = ("l2", "l1")


def invalid_cache_roofs(ceilings: dict[str, Any], datasheet_dram_bytes_per_second: float | None = None
                        ) -> dict[str, dict[str, Any]]:
    """The cache roofs of a measure_ceilings result that are failed measurements, {level: why, with the
    numbers}: a cache is faster than the DRAM behind it, so a cache roof at or below the measured DRAM roof
    (or the datasheet's, where given) measured DRAM or launch overhead, not the cache. Levels the result
    already marks invalid (`invalid_roofs`) are returned as marked. Such a roof is never drawn."""
    marked = dict(ceilings.get("invalid_roofs") or {})
    out: dict[str, dict[str, Any]] = {}
    floors = [(ceilings.get("dram_bytes_per_second"), "measured"), (datasheet_dram_bytes_per_second, "datasheet")]
    for level in CACHE_LEVELS:
        if level in marked:
            out[level] = marked[level]
            continue
        value = ceilings.get(f"{level}_bytes_per_second")
        if not value:
            continue
        for floor, source in floors:
            if floor and value <= floor:
                out[level] = {
                    "bytes_per_second": value, "dram_bytes_per_second": floor, "dram_source": source,
                    "reason": (f"the measured {level.upper()} roof ({value / GIGA:.0f} GB/s) is at or below the "
                               f"{source} DRAM roof ({floor / GIGA:.0f} GB/s): its microbenchmark measured DRAM "
                               "or launch overhead, not the cache (a working set that did not stay in the cache, "
                               "or kernels too short to time), so it is a failed measurement and is not drawn"),
                }
                break
    return out


def _cpu_bf16_probe(session: _Session, budget_seconds: float) -> str | None:
    """Why bf16 should be skipped on this CPU, or None: one 256³ bf16 GEMM must run and be fast enough that
    the planned bf16 sizes, extrapolated by n³, fit in `budget_seconds` (without AMX/AVX512-BF16 it is
    emulated, slowly: a 1024³ probe alone took 4.6 s on a Zen 3 core)."""
    torch = session.torch
    n = 256
    try:
        a = torch.randn(n, n).to(torch.bfloat16)
        b = torch.randn(n, n).to(torch.bfloat16)
        torch.mm(a, b)
        start = time.perf_counter_ns()
        torch.mm(a, b)
        seconds = (time.perf_counter_ns() - start) / 1e9
    except RuntimeError as error:
        return f"bf16 matmul failed on this CPU ({error.__class__.__name__}: {error})"
    calls = (session.plan.warmup + session.plan.repeats)
    planned = sum(seconds * (size / n) ** 3 * calls for size in session.plan.gemm_sizes)
    if planned > budget_seconds:
        return (f"a {n}^3 bf16 GEMM took {seconds:.3f} s ({gemm_flops(n) / seconds / GIGA:.1f} GFLOP/s): the "
                f"planned bf16 sizes would take ~{planned:.0f} s, over the {budget_seconds:.0f} s budget "
                "(no fast bf16 path on this CPU)")
    return None


def measure_ceilings(kind: str = "cpu", threads: int | None = None, quick: bool = False, *,
                     plan: Plan | None = None, cuda: Any = None) -> dict[str, Any]:
    """Measure this machine's compute and memory roofs; returns a JSON-serialisable dict in SI units.

    kind: "cpu" or "cuda" (GPU 0). threads: torch.set_num_threads for the run (restored afterwards);
    default torch's current count. quick: the short run the workflow's default uses (CPU: at most ~40 s of
    timing plus set-up, under 60 s in all; the full run a few minutes). plan: override sizes/repeats (tests).
    cuda: the torch.cuda module to use (default torch.cuda; tests pass a labelled stub with
    `tensor_device = "cpu"`).

    Keys: device_kind, device_name, quick, threads, peak_flops_per_second {precision: best FLOP/s over the
    GEMMs and convolutions}, median_peak_flops_per_second, peak_kernel {precision: the case that set it},
    compute_tests_flops_per_second {gemm_fp32|conv_fp32|...: {best, median, best_case}},
    dram_bytes_per_second (best of copy/triad), median_dram_bytes_per_second, l2_bytes_per_second /
    median_l2_bytes_per_second (GPU: the L2 read test; None on a CPU, and None where the measurement failed),
    invalid_roofs {level: {bytes_per_second, dram_bytes_per_second, reason}} (cache roofs at or below DRAM),
    memory_tests_bytes_per_second {dram_copy|dram_triad|l2_read: {best, median}},
    theoretical_peak_flops_per_second {fp32: x} (CPU), theoretical_basis, theoretical (the
    microarchitecture and its assumptions), fraction_of_theoretical, stability {case: timings, why it
    stopped, last window's gain, spread}, skipped {what: why}, notes, plan, runs (every timing: test,
    case, precision or level, size, repeat, seconds, flops or bytes, and the rate), seconds_total,
    environment (rooflow.hardware.environment.describe).
    """
    import torch

    from rooflow.hardware.environment import describe

    started = time.perf_counter()
    previous_threads = torch.get_num_threads()
    if threads is not None:
        if threads < 1:
            raise RooflowError(f"--threads must be a positive number of threads, not {threads}")
        torch.set_num_threads(threads)
    threads_used = torch.get_num_threads()
    try:
        if kind == "cpu":
            result = _measure_cpu(torch, threads_used, quick, plan)
        elif kind == "cuda":
            result = _measure_cuda(torch, quick, plan, cuda if cuda is not None else torch.cuda)
        else:
            raise RooflowError(f"unknown device kind '{kind}': use cpu or cuda")
        result["environment"] = describe(threads_used)
    finally:
        torch.set_num_threads(previous_threads)
    result["seconds_total"] = time.perf_counter() - started
    return result


def _measure_cpu(torch: Any, threads: int, quick: bool, plan: Plan | None) -> dict[str, Any]:
    from rooflow.hardware.environment import cpu_model

    llc = last_level_cache_bytes()
    plan = plan or default_plan("cpu", quick, llc_bytes=llc, memory_bytes=available_memory_bytes())
    session = _Session(torch, CpuClock(), "cpu", plan)
    for precision in plan.precisions:
        if precision == "bf16":
            reason = _cpu_bf16_probe(session, budget_seconds=5.0 if quick else 20.0)
            if reason:
                session.skipped["bf16"] = reason
                continue
        if precision in ("tf32", "fp16"):
            session.skipped[precision] = f"{precision} is a GPU tensor-core path: not measured on the CPU"
            continue
        session.gemm(precision, precision)
        if precision == "fp32" and plan.conv_shapes:
            session.conv(plan.conv_shapes, "fp32")
    session.stream("dram", plan.stream_elements, ("copy", "triad"))
    session.skipped["l2"] = "the L2 roof is measured on GPUs only"

    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    from rooflow.ceilings.clock import sustained_clock

    # the clock the cores hold under load, on as many threads as the GEMM used: the theoretical roof's clock
    clock = sustained_clock(threads, seconds=0.05 if quick else 0.2, repeats=3 if quick else 5)
    theory = theoretical_cpu_peak(cpuinfo, threads, clock)
    result = _header("cpu", cpu_model(), quick, threads, llc)
    result.update(session.summary())
    result["invalid_roofs"] = {}
    result["theoretical_peak_flops_per_second"] = theory["flops_per_second"]
    result["theoretical_basis"] = theory["basis"]
    result["theoretical"] = theory
    result["fraction_of_theoretical"] = {
        k: result["peak_flops_per_second"][k] / v
        for k, v in theory["flops_per_second"].items() if k in result["peak_flops_per_second"]}
    _finish(result, session, plan)
    for key, fraction in result["fraction_of_theoretical"].items():
        if fraction > 1.0:  # the "theory" is the roof that is wrong here, not the measurement
            result["notes"].append(
                f"measured {key} peak is {100 * fraction:.0f}% of the theoretical one: the cores ran above the "
                f"clock it assumes ({theory['basis'].split('clock from ')[-1]}), or the microarchitecture "
                f"({theory['microarchitecture']}) does more per cycle than assumed, so the theoretical peak is not "
                "a roof here")
    return result


def _measure_cuda(torch: Any, quick: bool, plan: Plan | None, cuda: Any) -> dict[str, Any]:
    if not cuda.is_available():
        raise RooflowError("no CUDA GPU is visible here: run `rooflow ceilings` on a GPU node (the workflow's "
                           "measure_ceilings rule submits it through SLURM), or measure the CPU")
    device = getattr(cuda, "tensor_device", "cuda")  # a test stub keeps its tensors on the CPU
    props = cuda.get_device_properties(0)
    capability = (props.major, props.minor)
    l2 = int(getattr(props, "L2_cache_size", 0) or 0) or None
    sm_count = getattr(props, "multi_processor_count", None)
    free = None
    try:
        free, _total = cuda.mem_get_info()
    except (AttributeError, RuntimeError):
        pass
    plan = plan or default_plan("cuda", quick, l2_bytes=l2, memory_bytes=free, capability=capability)
    session = _Session(torch, CudaClock(cuda), device, plan)
    if capability < (8, 0):
        for precision in ("tf32", "bf16"):
            session.skipped[precision] = (f"no {precision.upper()} tensor cores before sm_80 "
                                          f"(this GPU is sm_{capability[0]}{capability[1]})")
    session.skipped["fp8"] = "FP8 GEMMs need scaled-matmul kernels (torch._scaled_mm): not measured"
    for precision in plan.precisions:
        if precision in session.skipped:
            continue
        key = precision
        if precision == "fp64" and capability in FP64_TENSOR_CAPABILITIES:
            key = "fp64_tensor"  # cuBLAS DGEMM runs on the FP64 tensor cores (DMMA) here
        with _tf32(torch, precision == "tf32"):  # fp32 = TF32 off: the CUDA-core roof
            session.gemm(precision, key)
    session.stream("dram", plan.stream_elements, ("copy", "triad"))
    if plan.l2_elements:
        # 8 programs of 256 threads per SM: enough loads in flight to saturate L2 from every SM.
        session.l2_read(plan.l2_elements, programs=8 * (sm_count or 16))
    result = _header("cuda", props.name, quick, None, l2)
    result["gpu_compute_capability"] = f"sm_{capability[0]}{capability[1]}"
    result["gpu_sm_count"] = sm_count
    result.update(session.summary())
    result["invalid_roofs"] = invalid_cache_roofs(result)
    for level in result["invalid_roofs"]:
        result[f"{level}_bytes_per_second"] = None  # the numbers stay in invalid_roofs and the runs
        result[f"median_{level}_bytes_per_second"] = None
    result["theoretical_peak_flops_per_second"] = {}
    result["theoretical_basis"] = "GPU: compare with the catalogue's datasheet peaks (`rooflow devices`)"
    result["fraction_of_theoretical"] = {}
    _finish(result, session, plan)
    for level, why in result["invalid_roofs"].items():
        result["notes"].append(f"INVALID {level.upper()} roof: {why['reason']}")
    return result


def _header(kind: str, name: str, quick: bool, threads: int | None, cache_bytes: int | None) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "device_kind": kind,
        "device_name": name,
        "quick": quick,
        "threads": threads,
        ("last_level_cache_bytes" if kind == "cpu" else "l2_cache_bytes"): cache_bytes,
    }


def _finish(result: dict[str, Any], session: _Session, plan: Plan) -> None:
    result["skipped"] = session.skipped
    result["stability"] = session.stability
    result["notes"] = [
        "FLOPs: an n x n by n x n GEMM counts 2*n^3 and a convolution 2*C*R*R*K*Hout*Wout*N (one FMA = 2 FLOPs)",
        ("bytes: copy counts read + write (2 x array bytes), triad a = b + s*c counts 2 reads + 1 write "
         "(3 x array bytes), the STREAM convention; a CPU's write-allocate reads are not counted; the GPU L2 "
         "read test counts passes x buffer bytes read (checked by its sum) + one fp32 partial sum per program"),
        ("best = max over every run (the roof); median = median over repeats at the best case; a case is "
         "repeated until the best of its last runs improves the best by less than "
         f"{100 * plan.stable_tolerance:g}% (or its budget is spent: see stability)"
         if plan.max_repeats and plan.max_repeats > plan.repeats else
         "best = max over every run (the roof); median = median over repeats at the best case"),
        *plan.notes,
    ]
    result["plan"] = {k: v for k, v in asdict(plan).items() if k != "notes"}
    result["runs"] = session.runs


# --- command line ------------------------------------------------------------------------------------

def format_table(result: dict[str, Any], datasheet: Any = None) -> str:
    """Measured roofs (and the datasheet's beside them when `datasheet` is a rooflow Device)."""
    lines = [f"{result['device_kind']} ceilings of {result['device_name']}"
             + (f", {result['threads']} threads" if result.get("threads") else "")
             + (" (quick)" if result.get("quick") else "") + f", {result['seconds_total']:.1f} s"]
    header = f"{'roof':14} {'best':>12} {'median':>12} {'datasheet':>12} {'best/datasheet':>14}"
    lines += [header, "-" * len(header)]

    def row(name: str, best: float | None, median: float | None, sheet: float | None, scale: float, unit: str):
        def fmt(v: float | None) -> str:
            return f"{v / scale:8.4g} {unit}" if v else f"{'-':>12}"
        ratio = f"{best / sheet:14.0%}" if best and sheet else f"{'-':>14}"
        lines.append(f"{name:14} {fmt(best):>12} {fmt(median):>12} {fmt(sheet):>12} {ratio}")

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

    from rooflow.hardware.devices import estimate_only_error, load_devices

    device = None
    if args.device:
        devices = load_devices(args.catalogue)
        if args.device not in devices:
            raise RooflowError(f"device '{args.device}' is not in {args.catalogue}: use one of "
                               f"{', '.join(sorted(devices))}")
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
    result = measure_ceilings(kind, threads=args.threads, quick=args.quick)
    result["device_key"] = args.device
    if args.calibrate:
        from rooflow.estimate.calibration import measure_calibration
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
    if args.output:
        path = Path(args.output)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=2) + "\n")
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
    parser.add_argument("--catalogue", default=str(default_catalogue_path()), help="devices YAML (default: %(default)s)")
    parser.add_argument("--threads", type=int, help="CPU threads (torch.set_num_threads); default: torch's")
    parser.add_argument("--quick", action="store_true", help="the short run (fewer sizes and repeats)")
    parser.add_argument("--calibrate", action="store_true",
                        help="also measure the time model's calibration (host costs, kernel efficiencies by "
                             "class) and store it in the JSON beside the roofs")
    parser.add_argument("--format", choices=["table", "json"], default="table", help="what to print")
    parser.add_argument("--output", help="also write the full result (JSON, SI units) to this file")
    parser.set_defaults(func=_cmd_ceilings)


if __name__ == "__main__":  # pragma: no cover - `python -m rooflow.ceilings.measure` as a shortcut
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    from rooflow.cli import main

    raise SystemExit(main(["ceilings", *sys.argv[1:]]))
