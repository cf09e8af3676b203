"""Empirical roofs of this machine, measured by microbenchmarks in the manner of the Empirical Roofline Toolkit.

A datasheet peak is what a vendor promises; a roofline is only as right as its roofs, so rooflow measures
them as well and shows both (datasheet roofs solid, measured ones dashed):

- **compute**: large square GEMMs through torch (``torch.mm``), one per precision path. CPU: fp32, and
  bf16 where the CPU runs it fast enough to measure quickly. GPU: fp32 with TF32 off (CUDA cores), TF32,
  FP16 and BF16 (tensor cores, FP32 accumulate) and FP64 (tensor-core DMMA on sm_80/sm_90, recorded as
  ``fp64_tensor`` there so it sits beside the right datasheet roof).
- **memory**: a STREAM-style copy (``a.copy_(b)``) and triad (``a = b + s·c``) over fp32 arrays much larger
  than the last-level cache (device-to-device on a GPU), and on a GPU a sweep of L2-resident working sets
  for the L2 roof.

Conventions (stated once, used everywhere, tested in tests/test_ceilings.py):

- one FMA = 2 FLOPs, so an n×n by n×n GEMM is ``2·n³`` FLOPs (:func:`gemm_flops`);
- bytes are bytes *read + written* as the program states them: copy ``2·N·size`` (read b, write a), triad
  ``3·N·size`` (read b and c, write a) — the STREAM convention. The write-allocate read a CPU cache does
  for each store is not counted, as STREAM does not count it.

Every measurement is several sizes × several repeats after warm-up; each run is kept in ``runs``, and the
summary keeps the best (max over every run) and the median (the median over repeats at the best size).
GPU timing uses CUDA events around ``inner`` back-to-back calls (sized so one timed batch lasts ≥ 1 ms);
CPU timing uses ``time.perf_counter_ns`` around each call, at a fixed ``torch.set_num_threads``.

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
SCHEMA_VERSION = 1
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


# --- the plan: sizes, repeats ------------------------------------------------------------------------

@dataclass
class Plan:
    """What to run. Built by :func:`default_plan`; tests pass a tiny one."""

    precisions: tuple[str, ...]
    gemm_sizes: tuple[int, ...]
    stream_elements: tuple[int, ...]  # elements per fp32 array of the copy/triad (DRAM) tests
    l2_elements: tuple[int, ...] = ()  # elements per fp32 array of the L2-resident copy sweep (GPU)
    warmup: int = 2
    repeats: int = 5
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

    CPU: GEMMs of 512, 1024 and 2048 (+4096 in the full run); copy/triad over arrays whose triad footprint is
    2× the last-level cache (+4× in the full run), at least 256 MiB, at most a quarter of free memory.
    GPU: GEMMs of 4096 (2048, 4096, 8192 in the full run); arrays of 16× L2 and at least 256 MiB each, at
    most 1/8 of free device memory; L2 working sets of 1/8 to 1/2 of L2 (1/16 to 1/2 in the full run).
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
            gemm_sizes=(512, 1024, 2048) if quick else (512, 1024, 2048, 4096),
            stream_elements=tuple(f // (3 * STREAM_ELEMENT_BYTES) for f in footprints),
            warmup=2,
            repeats=5 if quick else 10,
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
    fractions = (8, 4, 2) if quick else (16, 8, 4, 2)  # copy footprint (src + dst) = L2 / fraction
    precisions = ["fp32", "tf32", "fp16", "bf16", "fp64"]
    if capability and capability < (8, 0):
        precisions = [p for p in precisions if p not in ("tf32", "bf16")]
    return Plan(
        precisions=tuple(precisions),
        gemm_sizes=(4096,) if quick else (2048, 4096, 8192),
        stream_elements=tuple(a // STREAM_ELEMENT_BYTES for a in arrays),
        l2_elements=tuple(l2 // f // (2 * STREAM_ELEMENT_BYTES) for f in fractions),
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

def theoretical_cpu_peak(cpuinfo: str, cores: int) -> dict[str, Any]:
    """fp32 peak of `cores` cores from a /proc/cpuinfo text: cores × clock × SIMD lanes × FMA units × 2.

    Lanes: avx512f → 16 fp32 lanes, avx/avx2 → 8, sse2 or asimd (NEON) → 4. Two FMA units per core are
    ASSUMED (server cores since Skylake-SP Gold/Platinum and Zen 2 have two; some Xeon Silver/Bronze have
    one 512-bit FMA unit: half this). Without `fma`, one add and one multiply per lane per cycle. Clock:
    the nominal clock in the model name ("@ 2.60GHz") where there is one, else the highest `cpu MHz`; turbo
    and AVX-512 frequency licences are not modelled. Returns {"flops_per_second": {"fp32": x} or {},
    "basis": how it was derived, ...}.
    """
    flags: set[str] = set()
    model = ""
    mhz: list[float] = []
    siblings = physical = None
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key in ("flags", "Features") and not flags:
            flags = set(value.split())
        elif key == "model name" and not model:
            model = value
        elif key == "cpu MHz":
            try:
                mhz.append(float(value))
            except ValueError:
                pass
        elif key == "siblings" and siblings is None:
            siblings = int(value) if value.isdigit() else None
        elif key == "cpu cores" and physical is None:
            physical = int(value) if value.isdigit() else None

    nominal = re.search(r"@\s*([\d.]+)\s*GHz", model)
    if nominal:
        clock_hz, clock_from = float(nominal.group(1)) * 1e9, "the nominal clock in the model name"
    elif mhz:
        clock_hz, clock_from = max(mhz) * 1e6, "the highest 'cpu MHz' in /proc/cpuinfo"
    else:
        clock_hz, clock_from = None, None

    if "avx512f" in flags:
        lanes, isa = 16, "avx512f"
    elif "avx2" in flags or "avx" in flags:
        lanes, isa = 8, "avx2" if "avx2" in flags else "avx"
    elif "sse2" in flags or "asimd" in flags:
        lanes, isa = 4, "sse2" if "sse2" in flags else "asimd"
    else:
        lanes, isa = 1, "scalar"
    has_fma = "fma" in flags or "avx512f" in flags or "asimd" in flags
    units = 2
    flops_per_lane = 2 * units if has_fma else 2  # FMA: 2 FLOPs per unit; else one add + one multiply

    result: dict[str, Any] = {"cores": cores, "clock_hz": clock_hz, "fp32_lanes": lanes, "isa": isa,
                              "fma": has_fma, "fma_units_assumed": units if has_fma else 0,
                              "model_name": model or None}
    if clock_hz is None:
        result["flops_per_second"] = {}
        result["basis"] = "no clock in /proc/cpuinfo: no theoretical peak"
        return result
    peak = cores * clock_hz * lanes * flops_per_lane
    result["flops_per_second"] = {"fp32": peak}
    if has_fma:
        how = (f"{cores} cores x {clock_hz / 1e9:.3f} GHz x {lanes} fp32 lanes ({isa}) x {units} FMA units "
               f"(assumed: server cores have two; some Xeon Silver/Bronze have one) x 2 FLOP per FMA")
    else:
        how = (f"{cores} cores x {clock_hz / 1e9:.3f} GHz x {lanes} fp32 lanes ({isa}) x 2 FLOP "
               f"(one add + one multiply per cycle, no FMA)")
    basis = f"{how} = {peak / GIGA:.1f} GFLOP/s; clock from {clock_from}; turbo and AVX frequency licences ignored"
    if siblings and physical and siblings > physical:
        basis += f"; SMT: {siblings} logical CPUs share {physical} cores, so threads beyond cores add no FMA units"
    result["basis"] = basis
    return result


# --- measurement -------------------------------------------------------------------------------------

def _dtype(torch: Any, precision: str) -> Any:
    return {"fp64": torch.float64, "fp32": torch.float32, "tf32": torch.float32,
            "fp16": torch.float16, "bf16": torch.bfloat16}[precision]


@contextmanager
def _tf32(torch: Any, enabled: bool) -> Iterator[None]:
    """TF32 for cuBLAS matmuls on or off, restored afterwards. Uses the legacy `allow_tf32` flag, the one
    rooflow.environment records: torch refuses to read it once the new `fp32_precision` API was used."""
    matmul = torch.backends.cuda.matmul
    before = matmul.allow_tf32
    matmul.allow_tf32 = enabled
    try:
        yield
    finally:
        matmul.allow_tf32 = before


def _summarise(runs: list[dict[str, Any]], rate_key: str) -> tuple[float | None, float | None]:
    """(best, median) of a group of runs: best = max over every run; median = the median over repeats at
    the size whose median is highest (so best >= median always)."""
    if not runs:
        return None, None
    by_size: dict[int, list[float]] = {}
    for run in runs:
        by_size.setdefault(run["size"], []).append(run[rate_key])
    best = max(run[rate_key] for run in runs)
    median = max(statistics.median(rates) for rates in by_size.values())
    return best, median


class _Session:
    """One measurement: the tensors' device, the clock, the plan, and every run recorded."""

    def __init__(self, torch: Any, clock: CpuClock | CudaClock, device: str, plan: Plan):
        self.torch, self.clock, self.device, self.plan = torch, clock, device, plan
        self.runs: list[dict[str, Any]] = []
        self.skipped: dict[str, str] = {}

    def _time(self, fn: Callable[[], Any]) -> tuple[list[float], int]:
        inner = 1
        if isinstance(self.clock, CudaClock):
            inner = self.clock.calls_per_batch(fn, self.plan.min_batch_seconds)
        return self.clock.time(fn, self.plan.warmup, self.plan.repeats, inner), inner

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
            seconds, inner = self._time(lambda a=a, b=b, c=c: torch.mm(a, b, out=c))
            flops = gemm_flops(n)
            for repeat, s in enumerate(seconds):
                self.runs.append({"test": "gemm", "precision": key, "size": n, "repeat": repeat,
                                  "calls_per_timing": inner, "seconds": s, "flops": flops,
                                  "flops_per_second": flops / s})
            del a, b, c
            # The next size costs (m/n)^3 as much per call: stop before one call would exceed the limit.
            if i + 1 < len(sizes) and min(seconds) * (sizes[i + 1] / n) ** 3 > self.plan.max_call_seconds:
                self.skipped[f"gemm_{key}_n{sizes[i + 1]}"] = (
                    f"one {key} call at n={n} took {min(seconds):.3g} s: n={sizes[i + 1]} would take about "
                    f"{min(seconds) * (sizes[i + 1] / n) ** 3:.3g} s per call, over the "
                    f"{self.plan.max_call_seconds:g} s limit")
                break

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
                seconds, inner = self._time(fn)
                for repeat, s in enumerate(seconds):
                    self.runs.append({"test": test, "level": level, "size": n,
                                      "footprint_bytes": nbytes, "repeat": repeat, "calls_per_timing": inner,
                                      "seconds": s, "bytes": nbytes, "bytes_per_second": nbytes / s})
        del a, b, c

    def summary(self) -> dict[str, Any]:
        peaks: dict[str, float] = {}
        medians: dict[str, float] = {}
        for key in dict.fromkeys(r["precision"] for r in self.runs if r["test"] == "gemm"):
            best, median = _summarise([r for r in self.runs if r["test"] == "gemm" and r["precision"] == key],
                                      "flops_per_second")
            peaks[key], medians[key] = best, median
        memory: dict[str, dict[str, float | None]] = {}
        for level in ("dram", "l2"):
            for test in ("copy", "triad"):
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
            "dram_bytes_per_second": dram,
            "median_dram_bytes_per_second": dram_median,
            "l2_bytes_per_second": l2,
            "median_l2_bytes_per_second": l2_median,
            "memory_tests_bytes_per_second": memory,
        }


def _cpu_bf16_probe(session: _Session, budget_seconds: float) -> str | None:
    """Why bf16 should be skipped on this CPU, or None: one 1024³ bf16 GEMM must run and be fast enough
    that the planned bf16 sizes fit in `budget_seconds` (without AMX/AVX512-BF16 it is emulated, slowly)."""
    torch = session.torch
    n = 1024
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
    default torch's current count. quick: the short run the workflow's default uses (about 5-20 s on two
    cores; the full run ≤ ~90 s). plan: override sizes/repeats (tests). cuda: the torch.cuda module to use
    (default torch.cuda; tests pass a labelled stub with `tensor_device = "cpu"`).

    Keys: device_kind, device_name, quick, threads, peak_flops_per_second {precision: best FLOP/s},
    median_peak_flops_per_second, dram_bytes_per_second (best of copy/triad), median_dram_bytes_per_second,
    l2_bytes_per_second / median_l2_bytes_per_second (GPU; None on CPU), memory_tests_bytes_per_second
    {dram_copy|dram_triad|l2_copy: {best, median}}, theoretical_peak_flops_per_second {fp32: x} (CPU),
    theoretical_basis, fraction_of_theoretical, skipped {what: why}, notes, plan, runs (every
    measurement: test, precision or level, size, repeat, seconds, flops or bytes, and the rate in
    flops_per_second or bytes_per_second), seconds_total, environment (rooflow.environment.describe).
    """
    import torch

    from rooflow.environment import describe

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
    from rooflow.environment import cpu_model

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
    session.stream("dram", plan.stream_elements, ("copy", "triad"))
    session.skipped["l2"] = "the L2 roof is measured on GPUs only"

    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    theory = theoretical_cpu_peak(cpuinfo, threads)
    result = _header("cpu", cpu_model(), quick, threads, llc)
    result.update(session.summary())
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
                f"nominal clock read from /proc/cpuinfo (turbo), so the theoretical peak is a floor, not a roof")
    return result


def _measure_cuda(torch: Any, quick: bool, plan: Plan | None, cuda: Any) -> dict[str, Any]:
    if not cuda.is_available():
        raise RooflowError("no CUDA GPU is visible here: run `rooflow ceilings` on a GPU node (the workflow's "
                           "measure_ceilings rule submits it through SLURM), or measure the CPU")
    device = getattr(cuda, "tensor_device", "cuda")  # a test stub keeps its tensors on the CPU
    props = cuda.get_device_properties(0)
    capability = (props.major, props.minor)
    l2 = int(getattr(props, "L2_cache_size", 0) or 0) or None
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
        session.stream("l2", plan.l2_elements, ("copy",))
    l2_runs = [r for r in session.runs if r.get("level") == "l2"]
    if l2_runs:
        fastest = max(l2_runs, key=lambda r: r["bytes_per_second"])
        if fastest["seconds"] < 10e-6:
            plan.notes.append(
                f"the best L2 copy kernel lasted {fastest['seconds'] * 1e6:.1f} us per call: launch overhead "
                "may dominate, so the L2 roof is a lower bound")
    result = _header("cuda", props.name, quick, None, l2)
    result["gpu_compute_capability"] = f"sm_{capability[0]}{capability[1]}"
    result["gpu_sm_count"] = getattr(props, "multi_processor_count", None)
    result.update(session.summary())
    result["theoretical_peak_flops_per_second"] = {}
    result["theoretical_basis"] = "GPU: compare with the catalogue's datasheet peaks (`rooflow devices`)"
    result["fraction_of_theoretical"] = {}
    _finish(result, session, plan)
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
    result["notes"] = [
        "FLOPs: an n x n by n x n GEMM counts 2*n^3 (one FMA = 2 FLOPs)",
        ("bytes: copy counts read + write (2 x array bytes), triad a = b + s*c counts 2 reads + 1 write "
         "(3 x array bytes), the STREAM convention; a CPU's write-allocate reads are not counted"),
        "best = max over every run; median = median over repeats at the best size",
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
    sheet_dram = datasheet.dram_bytes_per_second if datasheet is not None else None
    row("dram", result["dram_bytes_per_second"], result["median_dram_bytes_per_second"], sheet_dram, GIGA, "GB/s")
    if result.get("l2_bytes_per_second") or (datasheet is not None and datasheet.l2_bytes_per_second):
        row("l2", result.get("l2_bytes_per_second"), result.get("median_l2_bytes_per_second"),
            datasheet.l2_bytes_per_second if datasheet is not None else None, GIGA, "GB/s")
    for test, values in result.get("memory_tests_bytes_per_second", {}).items():
        row(f"  {test}", values["best"], values["median"], None, GIGA, "GB/s")
    theory = result.get("theoretical_peak_flops_per_second") or {}
    for key, value in theory.items():
        fraction = result.get("fraction_of_theoretical", {}).get(key)
        lines.append(f"\ntheoretical {key}: {value / GIGA:.1f} GFLOP/s"
                     + (f"; measured best = {fraction:.0%} of it" if fraction else ""))
        lines.append(f"  ({result['theoretical_basis']})")
    for what, why in result.get("skipped", {}).items():
        lines.append(f"skipped {what}: {why}")
    lines.append("TF/s = 1e12 FLOP/s, GF/s = 1e9 FLOP/s, GB/s = 1e9 bytes/s; bytes = read + written.")
    return "\n".join(lines)


def _cmd_ceilings(args: argparse.Namespace) -> int:
    import torch

    from rooflow.devices import load_devices

    device = None
    if args.device:
        devices = load_devices(args.catalogue)
        if args.device not in devices:
            raise RooflowError(f"device '{args.device}' is not in {args.catalogue}: use one of "
                               f"{', '.join(sorted(devices))}")
        device = devices[args.device]
        kind = device.kind
    else:
        kind = "cuda" if torch.cuda.is_available() else "cpu"
    if kind == "cuda" and not torch.cuda.is_available():
        raise RooflowError(f"device '{args.device}' is a CUDA GPU but none is visible here: run this on a node "
                           "with that GPU (the workflow submits it through SLURM)")
    result = measure_ceilings(kind, threads=args.threads, quick=args.quick)
    result["device_key"] = args.device
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
    from rooflow.devices import default_catalogue_path

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
    parser.add_argument("--format", choices=["table", "json"], default="table", help="what to print")
    parser.add_argument("--output", help="also write the full result (JSON, SI units) to this file")
    parser.set_defaults(func=_cmd_ceilings)


if __name__ == "__main__":  # pragma: no cover - `python -m rooflow.ceilings` as a shortcut
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    from rooflow.cli import main

    raise SystemExit(main(["ceilings", *sys.argv[1:]]))
