"""The ncu and nsys command lines the workflow runs, and the check of their logs afterwards.

Both profile exactly one iteration: the driver (:mod:`rooflow.measure.driver`) warms up, then calls
``torch.cuda.profiler.start()``/``stop()`` around one step (nsys, and ncu's exhaustive mode) or around the
first call of each distinct aten op of it (ncu's distinct mode, many start/stop pairs). ncu therefore runs with
``--profile-from-start off`` and nsys with ``--capture-range=cudaProfilerApi --capture-range-end=stop``.
``--target-processes all`` follows the driver into child processes (a ``python -m`` launcher, DataLoader
workers). ncu's ``--nvtx`` writes each kernel's NVTX push/pop stack (the driver's ``phase:``/``layer:``
ranges, the op ranges, distinct mode's ``rooflow:sig:<k>``) into the CSV: the per-layer attribution and the
distinct-mode expansion read it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rooflow.profilers._text import profiler_error, read_text

NSYS_REPORTS = ("cuda_gpu_kern_sum", "cuda_gpu_trace")


# The flags each profile command sets itself (ncu_command, nsys_commands): given again in a config's extra_args,
# the later one wins and the output the aggregate job reads is not written where it looks (--log-file, -o) or not
# as it reads it (--csv, --page, --metrics, the capture range)
OWN_FLAGS = {"ncu": ("--profile-from-start", "--target-processes", "--csv", "--page", "--metrics", "--log-file",
                     "-o", "--export", "--print-summary"),
             "nsys": ("--capture-range", "--capture-range-end", "-o", "--output", "--force-overwrite")}


def own_flags_given(tool: str, extra_args: Sequence[str]) -> list[str]:
    """The flags of ``extra_args`` that ``tool``'s profile command sets itself (:data:`OWN_FLAGS`), as given."""
    return [arg for arg in extra_args if str(arg).split("=", 1)[0] in OWN_FLAGS[tool]]


def ncu_command(executable: str, metrics: Sequence[str], log_path: str | Path, driver_argv: Sequence[str],
                extra_args: Sequence[str] = (), nvtx: bool = True) -> list[str]:
    """``ncu --profile-from-start off --target-processes all [--nvtx] --csv --page details --metrics <list>
    --log-file <log_path> [extra_args] <driver_argv>``.

    The CSV goes to ``log_path`` (ncu's ``--log-file``), together with ncu's own ``==PROF==``/``==ERROR==``
    lines, which :func:`rooflow.profilers.ncu.aggregate_ncu` skips and :func:`check_profiler_log` reports.
    """
    if not metrics:
        raise ValueError("ncu_command needs at least one metric (see metrics_for_architecture)")
    if not driver_argv:
        raise ValueError("ncu_command needs the driver's command line")
    return [str(executable), "--profile-from-start", "off", "--target-processes", "all",
            *(["--nvtx"] if nvtx else []), "--csv", "--page", "details", "--metrics", ",".join(metrics),
            "--log-file", str(log_path), *map(str, extra_args), *map(str, driver_argv)]


def nsys_commands(executable: str, report_stem: str | Path, driver_argv: Sequence[str],
                  extra_args: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """(profile command, stats command) for one nsys run.

    ``nsys profile`` writes ``<report_stem>.nsys-rep``; ``nsys stats`` then writes
    ``<report_stem>_cuda_gpu_kern_sum.csv`` and ``<report_stem>_cuda_gpu_trace.csv``
    (:func:`nsys_stats_outputs`). ``--force-export true`` makes ``nsys stats`` rebuild its SQLite export
    instead of reusing one left by an earlier run of the same stem.
    """
    if not driver_argv:
        raise ValueError("nsys_commands needs the driver's command line")
    stem = str(report_stem)
    profile = [str(executable), "profile", "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
               "-t", "cuda,nvtx", "-o", stem, "--force-overwrite", "true", *map(str, extra_args),
               *map(str, driver_argv)]
    stats = [str(executable), "stats", "--report", ",".join(NSYS_REPORTS), "--format", "csv",
             "--force-export", "true", "--output", stem, f"{stem}.nsys-rep"]
    return profile, stats


def nsys_stats_outputs(report_stem: str | Path) -> list[Path]:
    """The CSV files ``nsys stats --output <stem>`` writes for :data:`NSYS_REPORTS`."""
    return [Path(f"{report_stem}_{report}.csv") for report in NSYS_REPORTS]


def check_profiler_log(path: str | Path) -> None:
    """Raise ParseError when a profiler's log reports a failure: ``==ERROR==`` lines (ERR_NVGPUCTRPERM: no
    permission for the GPU performance counters; "Failed to find metric"; the profiled program failing),
    "No kernels were profiled", or an nsys report without CUDA kernels. Rules call it right after the tool
    ran, so the job fails with the cause rather than a parser's complaint about an incomplete file."""
    lines = read_text(path).splitlines()
    error = profiler_error(path, lines)
    if error:
        raise error
