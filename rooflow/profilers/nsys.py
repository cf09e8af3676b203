"""``nsys stats`` CSV reports -> kernel time, kept apart from memcpy/memset time.

Accepted reports (recognised from their header, not the file name; several tables in one file — ``nsys stats``
printing to stdout — are read one by one, the notices nsys prints around them skipped):

- ``gputrace`` of nsys 2020 (``Start(sec),Duration(nsec),CorrId,GrdX,...,Name``) and 2021
  (``Start (ns),Duration (ns),...``), and ``cuda_gpu_trace`` (2022+; 2024+ adds ``GreenCtx`` and
  ``Throughput (MB/s)``): one row per kernel launch or memory operation. Memory operations are the rows
  named ``[CUDA memcpy HtoD]``/``[CUDA memcpy Host-to-Device]`` (and ``[CUDA Unified Memory memcpy ...]``),
  summed as ``memcpy_seconds``, and ``[CUDA memset]``, summed apart as ``memset_seconds``; neither is kernel
  time.
- ``gpukernsum`` (2021: ``Time(%),Total Time (ns),Instances,Average,...,Name``) and ``cuda_gpu_kern_sum``
  (``Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name``): one row per
  kernel name, kernels only.
- ``nvtx_sum`` / ``nvtxsum``: NVTX ranges, kept in :attr:`NsysResult.nvtx` (not kernel time).

What the totals cover: every row of the files given. rooflow's own runs profile with
``--capture-range=cudaProfilerApi`` (:func:`rooflow.profilers.commands.nsys_commands`), so the trace holds
exactly the one iteration between ``torch.cuda.profiler.start()`` and ``stop()``; a CSV says nothing about
how it was captured, so that cannot be checked here. Traces taken without a capture range — such as the
2020 study's ``tmp_nsys_gputrace.csv`` fixtures — are WHOLE-PROGRAM traces: start-up copies, warm-up and
every iteration. Summing every row of such a trace (141 ms for a VGG11 iteration whose kernels took 20.95 ms)
is the methodology error rooflow exists to avoid, which is why ``all_rows_seconds`` is reported beside
``kernel_seconds``, ``memcpy_seconds`` and ``memset_seconds``, each labelled.
"""

from __future__ import annotations

import csv
import hashlib
import math
import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rooflow.errors import ParseError
from rooflow.profilers._text import (
    first_content_line,
    looks_like_ncu_output,
    other_tool,
    parse_number,
    profiler_lines,
    read_text,
    unit_factor,
)
from rooflow.profilers.kernels import classify_kernel, classify_launches

TOTAL_KEYS = ["kernels", "kernel_seconds", "memcpy_seconds", "memset_seconds", "all_rows_seconds", "by_class",
              "source_format"]
KERNEL_COLUMNS = ["name", "kernel_class", "instances", "seconds"]
CAPTURE_NOTE = ("Totals cover every row of the given reports: with rooflow's --capture-range=cudaProfilerApi "
                "that is the one profiled iteration; a trace taken without a capture range covers the whole "
                "program.")

# "Duration(nsec)", "Duration (ns)", "Total Time (ns)", "Start(sec)", "Avg (us)": name, then a time unit.
_TIMED = re.compile(r"^(?P<name>[A-Za-z][A-Za-z ]*?)\s*\((?P<unit>nsec|usec|msec|sec|ns|us|ms|s)\)$")
_MEMORY_ROW = re.compile(r"^\[CUDA (memcpy|memset|Unified Memory)", re.IGNORECASE)
_MEMSET_ROW = re.compile(r"^\[CUDA memset", re.IGNORECASE)
# kern_sum and gputrace agree on kernel time to the nanosecond; allow rounding of a printed total only.
_CROSS_CHECK_TOLERANCE = 0.01


@dataclass
class _Table:
    kind: str  # "trace", "kern_sum", "nvtx_sum"
    source_format: str
    path: Path
    line: int
    rows: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class NsysResult:
    """Kernel time of one profiled run.

    ``kernels``: one row per kernel launch (trace) or per kernel name (kern_sum) — ``name, kernel_class,
    instances, seconds``. ``memops``: the memcpy/memset rows of a trace, apart. ``nvtx``: NVTX ranges when
    an ``nvtx_sum`` report was given. ``totals``: ``kernels`` (launches), ``kernel_seconds`` (kernel rows
    only), ``memcpy_seconds`` (memcpy rows) and ``memset_seconds`` (memset rows), both None when only a kernel
    summary was given, ``all_rows_seconds`` (every row, what a naive sum gives), ``by_class`` (kernel seconds per class) and
    ``source_format``. ``note``: what the totals cover (see the module docstring).
    """

    kernels: pd.DataFrame
    memops: pd.DataFrame
    nvtx: pd.DataFrame
    totals: dict[str, Any]
    paths: list[Path]
    note: str = CAPTURE_NOTE


def _time_factor(header: str) -> tuple[str, Decimal] | None:
    match = _TIMED.match(header.strip())
    if not match:
        return None
    return match.group("name").strip(), unit_factor(match.group("unit"))


def _classify_header(columns: list[str]) -> tuple[str, str] | None:
    """(kind, source format) of a report from its header, or None when it is not one rooflow reads."""
    names = {(_time_factor(c) or (c.strip(), None))[0] for c in columns}
    stripped = {c.strip() for c in columns}
    if "Name" in stripped and "Duration" in names and "Start" in names:
        if "Start(sec)" in stripped:
            return "trace", "nsys-gputrace-2020"
        if "GreenCtx" in stripped:
            return "trace", "nsys-cuda_gpu_trace"
        return "trace", "nsys-gputrace"
    if "Total Time" in names and "Instances" in stripped:
        if "Range" in stripped:
            return "nvtx_sum", "nsys-nvtx_sum"
        if "Name" in stripped and "Category" not in stripped and "Operation" not in stripped:
            return ("kern_sum", "nsys-cuda_gpu_kern_sum" if "Med" in names else "nsys-gpukernsum")
    return None


def _looks_like_header(line: str) -> bool:
    return "," in line and ("Duration (" in line or "Duration(" in line or "Total Time (" in line)


def _read_tables(path: Path, text: str) -> list[_Table]:
    lines = profiler_lines(path, text, "an nsys stats report",
                           "nsys stats wrote nothing (no report of that name, or it failed)", "run nsys stats again")
    tables: list[_Table] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if not _looks_like_header(line):
            index += 1
            continue
        header = next(csv.reader([line]))
        kind = _classify_header(header)
        if kind is None:
            raise ParseError(f"{path}: line {index + 1}: an nsys stats table rooflow does not read (header "
                             f"{line.strip()[:70]!r}); give the cuda_gpu_kern_sum or cuda_gpu_trace report "
                             f"(gpukernsum or gputrace before nsys 2022).")
        table = _Table(kind[0], kind[1], path, index + 1)
        index = _read_rows(path, lines, index + 1, header, table)
        for earlier in tables:  # `nsys stats ... >> report.csv` run twice: its kernels were summed twice
            if earlier.kind == table.kind and _without_lines(earlier.rows) == _without_lines(table.rows):
                raise ParseError(f"{path}: line {table.line}: the same {table.kind} table as on line {earlier.line} "
                                 f"again, so its kernels would be counted twice (was the file appended to twice?); "
                                 f"give each report once.")
        tables.append(table)
    if not tables:
        where = first_content_line(lines)
        if looks_like_ncu_output(lines):
            raise ParseError(f"{path}: line {where}: this is Nsight Compute (ncu) output, not an nsys stats report; "
                             f"aggregate it with `rooflow ncu` (rooflow.profilers.ncu.aggregate_ncu).")
        tool = other_tool(lines)
        if tool:
            raise ParseError(f"{path}: line {where}: this is {tool}, not an nsys stats report; profile with nsys "
                             f"(the workflow's profile_nsys rule) and give the CSV reports of `nsys stats`.")
        raise ParseError(f"{path}: line {where}: not an nsys stats CSV report (it starts "
                         f"{lines[where - 1].strip()[:70]!r}); rooflow reads the cuda_gpu_kern_sum and "
                         f"cuda_gpu_trace reports of `nsys stats --format csv` (gpukernsum/gputrace before 2022).")
    return tables


def _without_lines(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A table's rows without the line each was read from: what two copies of one table share."""
    return [{key: value for key, value in row.items() if key != "line"} for row in rows]


def _read_rows(path: Path, lines: list[str], start: int, header: list[str], table: _Table) -> int:
    """Read the table's rows from `start`; return the index after the table (a blank or non-CSV line ends it)."""
    factors = {position: _time_factor(name) for position, name in enumerate(header)}
    column = {name.strip(): position for position, name in enumerate(header)}
    index = start
    while index < len(lines):
        line = lines[index]
        if not line.strip() or _looks_like_header(line) or line.lstrip().startswith(("**", "Processing", "NOTICE",
                                                                                      "Generating", "SKIPPED")):
            break
        try:
            fields = next(csv.reader([line], strict=True))
        except csv.Error as error:
            raise ParseError(f"{path}: line {index + 1}: malformed CSV ({error}), so the file is truncated or "
                             f"damaged; run nsys stats again.") from None
        if len(fields) != len(header):
            last = index == len(lines) - 1
            cause = "the file is truncated" if last else "this is not a row of the table above"
            raise ParseError(f"{path}: line {index + 1}: a row with {len(fields)} of the header's {len(header)} "
                             f"fields: {cause}; run nsys stats again and give its output unchanged.")
        row: dict[str, Any] = {"name": fields[column["Name"]] if "Name" in column else fields[column["Range"]],
                               "line": index + 1}
        for position, value in enumerate(fields):
            timed = factors[position]
            if timed is None:
                continue
            try:
                number = parse_number(value)
            except ValueError:
                raise ParseError(f"{path}: line {index + 1}: {header[position]!r} is {value!r}, not a finite "
                                 f"number; the report is damaged, so run nsys stats again.") from None
            if number is not None and number < 0:  # it was summed: a step's kernel time fell by it
                raise ParseError(f"{path}: line {index + 1}: {header[position]!r} is {value}, and no time nsys "
                                 f"reports is negative: the report was edited or damaged; run nsys stats again "
                                 f"and give its output unchanged.")
            row[timed[0]] = None if number is None else float(number * timed[1])
        if "Instances" in column:
            try:
                row["instances"] = int(parse_number(fields[column["Instances"]]) or 0)
            except ValueError:
                raise ParseError(f"{path}: line {index + 1}: Instances is {fields[column['Instances']]!r}, not a "
                                 f"count; the report is damaged, so run nsys stats again.") from None
        table.rows.append(row)
        index += 1
    if not table.rows:
        raise ParseError(f"{path}: line {start}: the {table.source_format} table has a header but no rows, so the "
                         f"capture range held no kernels or the file is truncated; profile again.")
    return index


def aggregate_nsys(paths: list[str | Path] | str | Path) -> NsysResult:
    """Sum kernel time (and, apart, memcpy/memset time) over the nsys stats reports of ONE profiled run.

    Give a trace (per launch; memcpy rows kept apart), a kernel summary (per kernel name), or both (the
    trace is used and the summary must agree with it to 1%, else the files are from different runs).
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    paths = [Path(p) for p in paths]
    if not paths:
        raise ParseError("no nsys report was given; pass the CSV file(s) nsys stats wrote for one run.")
    seen: dict[str, Path] = {}
    tables: list[_Table] = []
    for path in paths:
        text = read_text(path)
        digest = hashlib.sha256(text.encode()).hexdigest()
        if digest in seen:
            raise ParseError(f"{path}: has the same content as {seen[digest]}, so its kernels would be counted "
                             f"twice; give each report once.")
        seen[digest] = path
        tables += _read_tables(path, text)

    traces = [t for t in tables if t.kind == "trace"]
    sums = [t for t in tables if t.kind == "kern_sum"]
    nvtx_tables = [t for t in tables if t.kind == "nvtx_sum"]
    if not traces and not sums:
        raise ParseError(f"{paths[0]}: holds only NVTX ranges (nvtx_sum), not kernel times; give the "
                         f"cuda_gpu_kern_sum or cuda_gpu_trace report as well.")

    memops = pd.DataFrame(columns=["name", "seconds"])
    if traces:
        kernel_rows, memory_rows = [], []
        for table in traces:
            for row in table.rows:
                if row.get("Duration") is None:
                    raise ParseError(f"{table.path}: line {row['line']}: the row has no Duration, so the trace is "
                                     f"damaged; run nsys stats again.")
                target = memory_rows if _MEMORY_ROW.match(row["name"]) else kernel_rows
                target.append({"name": row["name"], "seconds": row["Duration"]})
        if not kernel_rows:  # "0 kernel launches", and an import's step time the kernels' sum: 0 s
            raise ParseError(f"{traces[0].path}: the trace lists {len(memory_rows)} memcpy/memset row(s) but no "
                             f"kernel, so the capture range held no kernels or the file is truncated; profile again.")
        kernels = pd.DataFrame(kernel_rows, columns=["name", "seconds"])
        kernels.insert(1, "instances", 1)
        memops = pd.DataFrame(memory_rows, columns=["name", "seconds"])
        memset = np.array([bool(_MEMSET_ROW.match(name)) for name in memops["name"]], dtype=bool)
        memcpy_seconds = math.fsum(memops.loc[~memset, "seconds"])
        memset_seconds = math.fsum(memops.loc[memset, "seconds"])
        used = traces
    else:
        kernels = pd.DataFrame([{"name": r["name"], "instances": r.get("instances", 0),
                                 "seconds": r.get("Total Time")} for t in sums for r in t.rows],
                               columns=["name", "instances", "seconds"])
        memcpy_seconds = memset_seconds = None
        used = sums
    # a trace is in launch order: the GEMMs inside a Winograd/FFT convolution are booked to it (classify_launches)
    kernels.insert(1, "kernel_class", classify_launches(kernels["name"]) if traces
                   else [classify_kernel(name) for name in kernels["name"]])
    kernels = kernels[KERNEL_COLUMNS]
    kernel_seconds = math.fsum(kernels["seconds"])  # exactly rounded: 20.95 ms stays 0.020950006

    if traces and sums:
        summed = math.fsum(r.get("Total Time") or 0.0 for t in sums for r in t.rows)
        if abs(summed - kernel_seconds) > _CROSS_CHECK_TOLERANCE * max(kernel_seconds, 1e-12):
            raise ParseError(
                f"{sums[0].path}: its kernels total {summed * 1e3:.4g} ms but the trace {traces[0].path} sums to "
                f"{kernel_seconds * 1e3:.4g} ms, so the files are from different runs; give the reports of one "
                f"run only.")

    by_class = kernels.groupby("kernel_class")["seconds"].agg(math.fsum).sort_values(ascending=False)
    totals: dict[str, Any] = {
        "kernels": int(kernels["instances"].sum()),
        "kernel_seconds": kernel_seconds,
        "memcpy_seconds": memcpy_seconds,
        "memset_seconds": memset_seconds,
        "all_rows_seconds": math.fsum(list(kernels["seconds"]) + list(memops["seconds"])),
        "by_class": {name: float(value) for name, value in by_class.items()},
        "source_format": "+".join(sorted({t.source_format for t in used})),
    }
    nvtx = pd.DataFrame([{"range": r["name"], "instances": r.get("instances"), "seconds": r.get("Total Time")}
                         for t in nvtx_tables for r in t.rows], columns=["range", "instances", "seconds"])
    return NsysResult(kernels=kernels.reset_index(drop=True), memops=memops, nvtx=nvtx, totals=totals,
                      paths=paths)
