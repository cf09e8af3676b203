"""The timed process's kernel timeline (torch.profiler / Kineto, CUPTI underneath), and whether it ran the same
kernels as the process Nsight Compute profiled.

A roofline point divides one process's FLOPs (ncu) by another process's time (CUDA events): it is right only
when both ran the same kernels. The timing job therefore records the kernels of ONE extra iteration after its
timed ones, in the same process (:func:`capture_iteration`), as a table beside timing.json; the summary
compares it with the ncu profile's kernels (:func:`compare_kernels`) and a check flags a mismatch.

The trace is read from the Chrome-trace JSON that ``torch.profiler`` exports (:func:`parse_trace`): the same
code reads the recorded fixtures and what :func:`capture_iteration` exports. Kernel rows come from the
``kernel`` events (name, GPU duration, grid, block, stream); ``gpu_memcpy``/``gpu_memset`` rows are kept as
memory rows (time, not kernels ncu profiles). A kernel's phase is the ``phase:<name>`` range
(``torch.profiler.record_function``) around the CPU call that launched it — matched through CUPTI's
correlation id, so backward kernels launched from autograd's own thread land in ``phase:backward`` too;
where no phase range was recorded, ``Optimizer.step#...`` ranges still mark the optimizer.
"""

from __future__ import annotations

import gzip
import json
import logging
import math
import os
import tempfile
import time
from bisect import bisect_right
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd

from rooflow.errors import ParseError
from rooflow.profilers.kernels import (
    MATMUL_KERNEL_CLASSES,
    TRACE_KERNEL_CATEGORIES,
    abbreviate_kernel_name,
    classify_launches,
    short_kernel_name,
)
from rooflow.profilers.nvtx import PHASE_RANGE

log = logging.getLogger(__name__)

TIMELINE_COLUMNS = ["name", "kernel_class", "kind", "phase", "seconds", "start_seconds", "grid", "block", "stream"]
_KERNEL_CATEGORIES = TRACE_KERNEL_CATEGORIES
_MEMORY_CATEGORIES = {"gpu_memcpy": "memcpy", "Memcpy": "memcpy", "gpu_memset": "memset", "Memset": "memset"}
_LAUNCH_CATEGORIES = {"cuda_runtime", "cuda_driver", "Runtime", "Driver"}
_ANNOTATION_CATEGORIES = {"user_annotation", "cpu_op"}
# How many differing kernel names a mismatch message lists on each side.
LISTED_NAMES = 4


def _phase_of_annotation(name: str) -> str | None:
    if name.startswith(PHASE_RANGE):
        return name[len(PHASE_RANGE):]
    if name.startswith("Optimizer.step"):
        return "optimizer"
    return None


def parse_trace(source: str | Path | dict) -> pd.DataFrame:
    """A Chrome-trace JSON exported by torch.profiler (a path, ``.gz`` allowed, or the loaded dict) -> one row
    per GPU activity (:data:`TIMELINE_COLUMNS`), in start order; seconds are GPU durations."""
    path = None
    if isinstance(source, dict):
        trace = source
    else:
        path = Path(source)
        try:
            opener = gzip.open if path.suffix == ".gz" else open
            with opener(path, "rt") as handle:
                trace = json.load(handle)
        except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ParseError(f"{path}: not a readable torch.profiler Chrome trace ({error}); export it with "
                             f"prof.export_chrome_trace(path) and give the file as written.") from None
    events = trace.get("traceEvents") if isinstance(trace, dict) else trace if isinstance(trace, list) else None
    if not isinstance(events, list):
        raise ParseError(f"{path or 'trace'}: no 'traceEvents' list, so this is not a torch.profiler Chrome trace; "
                         f"export it with prof.export_chrome_trace(path).")
    # CPU launch time of every correlation id, and the phase ranges
    launched: dict[Any, float] = {}
    ranges: list[tuple[float, float, str]] = []
    for event in events:
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        category = event.get("cat")
        if category in _LAUNCH_CATEGORIES:
            correlation = (event.get("args") or {}).get("correlation")
            if correlation is not None:
                launched[correlation] = float(event.get("ts", 0.0))
        elif category in _ANNOTATION_CATEGORIES:
            phase = _phase_of_annotation(str(event.get("name", "")))
            if phase:
                start = float(event.get("ts", 0.0))
                ranges.append((start, start + float(event.get("dur", 0.0)), phase))
    ranges.sort()
    starts = [r[0] for r in ranges]

    def phase_at(moment: float | None) -> str:
        if moment is None:
            return ""
        index = bisect_right(starts, moment) - 1
        while index >= 0:  # ranges do not nest, but a short one may start inside a long one
            start, end, phase = ranges[index]
            if start <= moment <= end:
                return phase
            index -= 1
        return ""

    rows = []
    for event in events:
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        category = event.get("cat")
        if category in _KERNEL_CATEGORIES:
            kind = "kernel"
        elif category in _MEMORY_CATEGORIES:
            kind = _MEMORY_CATEGORIES[category]
        else:
            continue
        args = event.get("args") or {}
        name = str(event.get("name", ""))
        rows.append({
            "name": name, "kernel_class": "memory", "kind": kind,
            "phase": phase_at(launched.get(args.get("correlation"))),
            "seconds": float(event.get("dur", 0.0)) * 1e-6, "start_seconds": float(event.get("ts", 0.0)) * 1e-6,
            "grid": _dims(args.get("grid")), "block": _dims(args.get("block")), "stream": args.get("stream"),
        })
    frame = pd.DataFrame(rows, columns=TIMELINE_COLUMNS)
    if len(frame):
        frame = frame.sort_values("start_seconds", kind="stable").reset_index(drop=True)
        frame["start_seconds"] -= frame["start_seconds"].iloc[0]
        kernel = frame["kind"] == "kernel"  # in launch order: a Winograd/FFT convolution's GEMMs are booked to it
        frame.loc[kernel, "kernel_class"] = classify_launches(frame.loc[kernel, "name"])
    return frame


def _dims(value: Any) -> str:
    """[1568, 1, 64] -> "(1568, 1, 64)", the way ncu writes grid and block sizes."""
    if isinstance(value, (list, tuple)) and value:
        return "(" + ", ".join(str(int(v)) for v in value) + ")"
    return ""


def read_timeline(path: str | Path) -> pd.DataFrame:
    """A timeline CSV written by the timing job (empty on a CPU run)."""
    frame = pd.read_csv(path, keep_default_na=False, na_values={"seconds": [""], "start_seconds": [""]})
    missing = [c for c in ("name", "kernel_class", "kind", "seconds") if c not in frame.columns]
    if missing:
        raise ParseError(f"{path}: a kernel timeline needs the columns {', '.join(missing)}; write it with "
                         f"rooflow.measure.timeline (the timing job's kernels.csv).")
    return frame


class _PhaseRanges:
    """A stand-in for the timing clock: Runner.step() calls mark() at its phase boundaries; each mark closes
    the previous ``phase:<name>`` range and opens the next."""

    def __init__(self, phases: list[str]):
        self.phases = list(phases)
        self.open: Any = None

    def mark(self) -> None:
        import torch

        if self.open is not None:
            self.open.__exit__(None, None, None)
            self.open = None
        if self.phases:
            self.open = torch.profiler.record_function(f"phase:{self.phases.pop(0)}")
            self.open.__enter__()


def capture_iteration(runner: Any) -> tuple[pd.DataFrame, float, pd.DataFrame, dict[str, int]]:
    """Run ONE iteration of ``runner`` (rooflow.measure.timing.Runner) under torch.profiler (CPU activity, and
    CUDA on a GPU), every module in a ``module:`` range, and return (its GPU timeline — empty on a CPU —,
    the capture's wall-clock cost in seconds: profiling, export and parsing, the measured time per op
    and layer: rooflow.measure.optime, and the minor page faults of each leaf layer's forward). Call it after the
    timed iterations: the profiler's overhead never touches the timing."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from rooflow.measure.optime import module_ranges, op_times

    if not runner.cuda:
        # without a GPU, Kineto logs "ERROR: ... gpuGetDeviceCount failed with code 35" to the job's log at every
        # capture, and (torch 2.14) "USDT: ... profiler_start"/"profiler_stop": not messages of the run. Its log
        # level is read when the first capture starts; 6 is past its last level (VERBOSE 0 … ERROR 4, USDT 5).
        # A GPU's stay.
        os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    started = time.perf_counter()
    phases = ["forward"] if runner.spec.mode == "inference" else ["forward", "backward", "optimizer"]
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if runner.cuda else [])
    runner.synchronize()
    with module_ranges(runner.model) as faults_by_layer, profile(activities=activities) as profiler:
        runner.step(_PhaseRanges(phases))
        runner.synchronize()
    with tempfile.TemporaryDirectory(prefix="rooflow-trace-") as folder:
        path = Path(folder) / "trace.json"
        profiler.export_chrome_trace(str(path))
        trace = json.loads(path.read_text())
    timeline, ops = parse_trace(trace), op_times(trace)
    del torch  # imported for its side effect of loading the CUDA profiler
    return timeline, time.perf_counter() - started, ops, faults_by_layer


def kernels_only(frame: pd.DataFrame) -> pd.DataFrame:
    """The kernel rows of a timeline (or an ncu table, which holds kernels only)."""
    return frame[frame["kind"] == "kernel"] if "kind" in frame.columns else frame


def seconds_by_class(timeline: pd.DataFrame) -> dict[str, float]:
    """GPU seconds per kernel class (memcpy/memset rows as "memory"): the time-by-kernel-class input."""
    if timeline is None or timeline.empty:
        return {}
    grouped = timeline.groupby("kernel_class")["seconds"].agg(math.fsum)
    return {str(k): float(v) for k, v in grouped.sort_values(ascending=False).items()}


def launches(kernels: pd.DataFrame) -> pd.DataFrame:
    """A per-kernel-name table with launch counts (``instances``: an nsys kernel summary) as one row per launch."""
    if "instances" not in kernels.columns:
        return kernels
    return kernels.loc[kernels.index.repeat(kernels["instances"].astype(int))].reset_index(drop=True)


def compare_kernels(timed: pd.DataFrame, profiled: pd.DataFrame, timed_by: str = "the timed iteration ran"
                    ) -> dict[str, Any]:
    """Did the timed process run the kernels the ncu process profiled? Compared by short kernel name
    (:func:`rooflow.profilers.kernels.short_kernel_name`: ncu and CUPTI demangle differently) and count.

    Returns ``timed_kernels``, ``profiled_kernels``, ``by_class`` ({class: [timed, profiled]} where they
    differ), ``only_timed``/``only_profiled`` ([[short name, count], ...] of the count differences, largest
    first), ``algorithms_differ`` (a convolution/GEMM kernel differs: another algorithm, other FLOPs),
    ``match`` and ``message`` (one sentence naming what differs, "" when they match)."""
    timed = kernels_only(timed)
    profiled = kernels_only(profiled)
    timed_names = Counter(short_kernel_name(n) for n in timed["name"])
    profiled_names = Counter(short_kernel_name(n) for n in profiled["name"])
    only_timed = sorted((timed_names - profiled_names).items(), key=lambda kv: (-kv[1], kv[0]))
    only_profiled = sorted((profiled_names - timed_names).items(), key=lambda kv: (-kv[1], kv[0]))
    timed_classes = Counter(timed["kernel_class"])
    profiled_classes = Counter(profiled["kernel_class"])
    by_class = {c: [timed_classes.get(c, 0), profiled_classes.get(c, 0)]
                for c in sorted(set(timed_classes) | set(profiled_classes))
                if timed_classes.get(c, 0) != profiled_classes.get(c, 0)}
    matmul_names = {short_kernel_name(n) for frame in (timed, profiled)
                    for n, c in zip(frame["name"], frame["kernel_class"]) if c in MATMUL_KERNEL_CLASSES}
    algorithms_differ = any(name in matmul_names for name, _ in only_timed + only_profiled)
    match = not only_timed and not only_profiled
    result = {"timed_kernels": int(len(timed)), "profiled_kernels": int(len(profiled)), "by_class": by_class,
              "only_timed": [[n, int(c)] for n, c in only_timed], "only_profiled": [[n, int(c)] for n, c in only_profiled],
              "algorithms_differ": bool(algorithms_differ), "match": bool(match), "message": ""}
    if not match:
        classes = ", ".join(f"{c} {t} vs {p}" for c, t, p in ((c, *v) for c, v in by_class.items()))
        result["message"] = (
            f"{timed_by} {len(timed)} kernels, ncu profiled {len(profiled)}"
            f"{f' ({classes})' if classes else ''}; only timed: {_listed(only_timed)}; only profiled: "
            f"{_listed(only_profiled)}")
    return result


def _listed(items: list[tuple[str, int]]) -> str:
    if not items:
        return "none"
    shown = ", ".join(f"{abbreviate_kernel_name(name, 60)} ×{count}" for name, count in items[:LISTED_NAMES])
    return shown + (f" and {len(items) - LISTED_NAMES} more" if len(items) > LISTED_NAMES else "")
