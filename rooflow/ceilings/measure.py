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

Conventions (stated once, used everywhere, tested in tests/ceilings/test_ceilings.py):

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

import logging
import math
import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rooflow.ceilings.plan import (
    FP64_TENSOR_CAPABILITIES,
    GIGA,
    SCHEMA_VERSION,
    STREAM_ELEMENT_BYTES,
    TRIAD_SCALAR,
    ConvShape,
    Plan,
    available_memory_bytes,
    copy_bytes,
    default_plan,
    gemm_flops,
    l2_read_bytes,
    last_level_cache_bytes,
    triad_bytes,
)
from rooflow.errors import RooflowError, first_line
from rooflow.hardware.cpu import theoretical_cpu_peak
from rooflow.hardware.roofs import invalid_cache_roofs

log = logging.getLogger(__name__)

BF16_PROBE_SIZES = (256, 512, 1024)  # the CPU's bf16 probe: GEMM sizes tried in turn (_cpu_bf16_probe)
BF16_PROBE_CALLS = 3  # timed calls per probe size: the fastest counts

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
                                      f"{first_line(error)})")
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


def cache_roof_guards(invalid: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Guard records (:mod:`rooflow.guards`) of the invalid cache roofs :func:`invalid_cache_roofs` found: the
    measured roof is dropped (the figures draw the datasheet's, where the catalogue has one)."""
    from rooflow.guards import guard

    out = []
    for level, why in invalid.items():
        value, floor = why.get("bytes_per_second"), why.get("dram_bytes_per_second")
        out.append(guard(f"{level.upper()} roof at or below DRAM", "error",
                         f"{level.upper()} {value / GIGA:.0f} GB/s" if value else level.upper(),
                         f"> {why.get('dram_source', 'measured')} DRAM {floor / GIGA:.0f} GB/s" if floor else "> DRAM",
                         f"{why.get('reason', 'a failed cache measurement')}; no measured {level.upper()} roof is "
                         "written (the datasheet's is drawn where the catalogue has one)",
                         {k: v for k, v in why.items() if k != "reason"}))
    return out


def _cpu_bf16_probe(session: _Session, budget_seconds: float) -> str | None:
    """Why bf16 should be skipped on this CPU, or None: bf16 GEMMs of growing size (BF16_PROBE_SIZES, each a warm
    call and the fastest of up to BF16_PROBE_CALLS) must reach a rate at which the planned bf16 sizes fit in
    `budget_seconds`; a bigger probe is run only while the rate so far says it costs under a quarter of the budget.
    Without AMX/AVX512-BF16 bf16 is emulated, slowly (a 1024³ call alone took 4.6 s on a Zen 3 core); with it, a small
    call can still be slow: on a 2-core Zen 4 (AVX512-BF16) 256³, 384³ and 512³ calls each took ~8 ms (4-34
    GFLOP/s) where 1024³ ran at 224 and the planned sizes at 430, so one 256³ timing skipped the roof or not by
    the load of the moment."""
    torch = session.torch
    calls = session.plan.warmup + session.plan.repeats
    planned_flops = sum(gemm_flops(size) * calls for size in session.plan.gemm_sizes)
    rate, probed = 0.0, 0
    try:
        for n in BF16_PROBE_SIZES:
            if n > max(session.plan.gemm_sizes) or (
                    rate and (1 + BF16_PROBE_CALLS) * gemm_flops(n) / rate > budget_seconds / 4):
                break
            a = torch.randn(n, n).to(torch.bfloat16)
            b = torch.randn(n, n).to(torch.bfloat16)
            torch.mm(a, b)
            probed = n
            for _ in range(BF16_PROBE_CALLS):
                start = time.perf_counter_ns()
                torch.mm(a, b)
                rate = max(rate, gemm_flops(n) / max((time.perf_counter_ns() - start) / 1e9, 1e-9))
                if planned_flops / rate <= budget_seconds:
                    return None
    except RuntimeError as error:
        return f"bf16 matmul failed on this CPU ({error.__class__.__name__}: {error})"
    return (f"bf16 GEMMs up to {probed}^3 ran at {rate / GIGA:.1f} GFLOP/s at best: the planned bf16 sizes would "
            f"take ~{planned_flops / rate:.0f} s, over the {budget_seconds:.0f} s budget (no fast bf16 path on this CPU)")


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
    result["guards"] = []
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
    result["guards"] = cache_roof_guards(result["invalid_roofs"])
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

