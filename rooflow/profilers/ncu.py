"""Nsight Compute output -> per-kernel FLOPs, bytes and time, and their totals for one profiled run.

Accepted shapes (DESIGN.md, "Profiler output formats the parsers must accept"), recognised from the content,
never from the file name:

- **text** (ncu without ``--csv``): ``==PROF==`` lines, ``[pid] process@host`` lines, kernel header lines
  ``  <demangled name>, 2023-Oct-29 22:56:31, Context 1, Stream 7`` (ncu 2020) or
  ``  <name> (grid)x(block), Context 1, Stream 7, Device 0, CC 8.0`` (newer), then ``Section:`` blocks whose
  tables hold ``metric  unit  value`` rows; units auto-scaled (byte/Kbyte/Mbyte/Gbyte,
  nsecond/usecond/msecond/second, rates such as Gbyte/second), values with or without thousands separators.
- **details page CSV** (``--csv``, the default page): one row per kernel × metric, the ncu ≤ 2021 header
  (``"ID","Process ID","Process Name","Host Name","Kernel Name","Kernel Time","Context","Stream",
  "Section Name","Metric Name","Metric Unit","Metric Value"``) or the newer one (``... "Block Size","Grid Size",
  "Device","CC", ...`` and ``"Rule Name", ..., "Estimated Speedup"``); rule rows (empty metric fields) are
  skipped; application output and ``==PROF==``/``==WARNING==`` lines before or between the CSV lines too.
- **raw page CSV** (``--csv --page raw``): one wide row per kernel, a units row under the header.
- **one metric per file** sets (NERSC's ``out.<metric>``): every file given to :func:`aggregate_ncu` belongs
  to ONE run; they are merged by kernel ID, and the IDs and kernel names must agree.

Units are converted per value to SI base units (bytes, seconds, counts, per-second rates) before anything
is added; rates are never summed across kernels (per-kernel time is cycles / cycles-per-second, then summed).
Anything else — a truncated file, an HTML page, ``==ERROR==`` lines (ERR_NVGPUCTRPERM), "No kernels were
profiled", an empty or foreign file — raises :class:`rooflow.errors.ParseError` with one sentence naming the
file, the line, the cause and the fix.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rooflow.errors import ParseError
from rooflow.profilers import metrics as m
from rooflow.profilers._text import (
    first_content_line,
    looks_like_nsys_report,
    profiler_lines,
    read_text,
    to_si,
)
from rooflow.profilers.kernels import classify_kernel

KERNEL_COLUMNS = ["id", "name", "kernel_class", "flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor",
                  "flops_total", "dram_bytes", "l2_bytes", "l1_bytes", "seconds", "grid_size", "block_size",
                  "nvtx_stack"]
# The launch configuration and NVTX columns: text, "" where the output does not carry them (ncu 2020's
# text output has no grid/block; only `ncu --nvtx` writes the push/pop stack).
TEXT_COLUMNS = ["grid_size", "block_size", "nvtx_stack"]
# ncu --nvtx adds this column to the details page: the thread's NVTX push/pop stack when the kernel launched.
NVTX_STACK_COLUMN_PREFIX = "thread Domain:Push/Pop_Range"
TOTAL_KEYS = ["kernels", "flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor", "flops_total",
              "dram_bytes", "l2_bytes", "l1_bytes"]

# Columns of the CSV pages that describe the kernel rather than hold a metric.
_DESCRIPTIVE_COLUMNS = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time",
                        "Context", "Stream", "Block Size", "Grid Size", "Device", "CC", "Section Name",
                        "Metric Name", "Metric Unit", "Metric Value", "Rule Name", "Rule Type",
                        "Rule Description", "Estimated Speedup Type", "Estimated Speedup", "Function Name",
                        "Demangled Name", "Mangled Name"}

_KERNEL_HEADER = re.compile(
    r"^  (?P<name>\S.*?)"
    r"(?: \((?P<grid>\d+, \d+, \d+)\)x\((?P<block>\d+, \d+, \d+)\))?"
    r"(?:, (?P<time>\d{4}-[A-Za-z]{3}-\d{1,2} \d{1,2}:\d{2}:\d{2}))?"
    r", Context (?P<context>\d+), Stream (?P<stream>\d+)"
    r"(?:, Device (?P<device>\d+), CC (?P<cc>\d+\.\d+))?\s*$")
_SEPARATOR = re.compile(r"^\s+-{3,}( -{3,})+\s*$")
_SECTION = re.compile(r"^\s+Section: ")
_PROFILING = re.compile(r'^==PROF== Profiling "')


@dataclass
class _Kernel:
    id: int
    name: str
    line: int
    cc: str | None = None
    values: dict[str, float] = field(default_factory=dict)
    bad_units: dict[str, tuple[str, int]] = field(default_factory=dict)
    grid_size: str = ""
    block_size: str = ""
    nvtx_stack: str = ""


@dataclass
class _File:
    path: Path
    source_format: str
    kernels: dict[int, _Kernel]


@dataclass
class NcuResult:
    """One profiled run, aggregated.

    ``kernels``: one row per kernel (:data:`KERNEL_COLUMNS`), SI units, NaN where the run did not collect
    what a column needs. ``totals``: the JSON the workflow writes — :data:`TOTAL_KEYS` (None where not
    collected), ``seconds`` when a duration metric exists, ``metrics_collected`` (the collected metrics
    rooflow uses), ``tensor_metrics_collected`` and ``source_format``. ``metrics``: every numeric metric per
    kernel in SI units (index: kernel ID), for anyone who needs a metric rooflow does not derive.
    ``notes``: how each quantity was obtained, in sentences.
    """

    kernels: pd.DataFrame
    totals: dict[str, Any]
    metrics: pd.DataFrame
    paths: list[Path]
    notes: list[str]


# --------------------------------------------------------------------------------------------------
# Reading one file


def _parse_file(path: Path) -> _File:
    lines = profiler_lines(path, read_text(path), "Nsight Compute output",
                           "the profiler wrote nothing (it failed, or its output went elsewhere)", "profile again")
    header_index = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if header_index is not None:
        header = _csv_fields(path, lines, header_index)
        if "Metric Name" in header and "Metric Value" in header:
            return _File(path, "ncu-csv-details", _parse_details(path, lines, header_index, header))
        return _File(path, "ncu-csv-raw", _parse_raw(path, lines, header_index, header))
    return _File(path, "ncu-text", _parse_text(path, lines))


def _csv_fields(path: Path, lines: list[str], index: int) -> list[str]:
    try:
        return next(csv.reader([lines[index]], strict=True))
    except csv.Error as error:
        last = index == len(lines) - 1
        raise ParseError(f"{path}: line {index + 1}: malformed CSV ({error})"
                         f"{': the file is truncated' if last else ''}; profile again or copy the whole file.")


def _check_width(path: Path, lines: list[str], index: int, fields: list[str], width: int) -> None:
    if len(fields) == width:
        return
    if index == len(lines) - 1 or not any(line.startswith('"') for line in lines[index + 1:]):
        raise ParseError(f"{path}: line {index + 1}: the last CSV row has {len(fields)} of the header's {width} "
                         f"fields, so the file is truncated; profile again or copy the whole file.")
    raise ParseError(f"{path}: line {index + 1}: a CSV row with {len(fields)} fields under a header of {width}; "
                     f"the file mixes two ncu outputs or was edited, so give the file exactly as ncu wrote it.")


def _csv_rows(path: Path, lines: list[str], header_index: int, header: list[str]) -> Iterable[tuple[int, list[str]]]:
    """(1-based line, fields) of the CSV rows after the header; other lines (application output, ==PROF==,
    ==WARNING==) are skipped, and so are repeated headers."""
    for index in range(header_index + 1, len(lines)):
        line = lines[index]
        if not line.startswith('"'):
            continue
        fields = _csv_fields(path, lines, index)
        if fields == header:
            continue
        _check_width(path, lines, index, fields, len(header))
        yield index + 1, fields


def _kernel_id(path: Path, number: int, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ParseError(f"{path}: line {number}: kernel ID {text!r} is not an integer; this is not an ncu CSV "
                         f"page as ncu writes it, so give the file exactly as ncu wrote it.") from None


def _store(path: Path, kernel: _Kernel, metric: str, unit: str, value: str, number: int) -> None:
    try:
        si = to_si(value, unit)
    except ValueError:
        if m.is_used_metric(metric):
            raise ParseError(f"{path}: line {number}: {metric} is {value[:40]!r}, not a number; rooflow needs one "
                             f"value per kernel, so profile without --print-metric-instances and give the file "
                             f"as ncu wrote it.") from None
        return  # a text value (a device name, an enum): not a metric rooflow adds up
    except KeyError:
        kernel.bad_units.setdefault(metric, (unit, number))
        return
    kernel.values.setdefault(metric, math.nan if si is None else si)


def _parse_details(path: Path, lines: list[str], header_index: int, header: list[str]) -> dict[int, _Kernel]:
    column = {name: position for position, name in enumerate(header)}
    for needed in ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value"):
        if needed not in column:
            raise ParseError(f"{path}: line {header_index + 1}: the ncu CSV header has no {needed!r} column; "
                             f"run ncu with --csv --page details (or --page raw).")
    kernels: dict[int, _Kernel] = {}
    for number, fields in _csv_rows(path, lines, header_index, header):
        metric = fields[column["Metric Name"]]
        if not metric:
            continue  # a rule row: "Rule Name"/"Rule Description" filled, metric fields empty
        kernel_id = _kernel_id(path, number, fields[column["ID"]])
        kernel = kernels.get(kernel_id)
        if kernel is None:
            cc = fields[column["CC"]] if "CC" in column else None
            kernel = kernels[kernel_id] = _Kernel(kernel_id, fields[column["Kernel Name"]], number, cc or None,
                                                  **_launch_fields(fields, column))
        _store(path, kernel, metric, fields[column["Metric Unit"]], fields[column["Metric Value"]], number)
    if not kernels:
        raise ParseError(f"{path}: line {header_index + 1}: the ncu CSV has a header but no metric rows, so the "
                         f"file is truncated or nothing was profiled; read the profiling log and profile again.")
    _check_last_kernel_complete(path, kernels)
    return kernels


def _launch_fields(fields: list[str], column: dict[str, int]) -> dict[str, str]:
    """Grid and block size and, under ``ncu --nvtx``, the NVTX push/pop stack of one CSV row."""
    nvtx = next((position for name, position in column.items() if name.startswith(NVTX_STACK_COLUMN_PREFIX)), None)
    return {"grid_size": fields[column["Grid Size"]] if "Grid Size" in column else "",
            "block_size": fields[column["Block Size"]] if "Block Size" in column else "",
            "nvtx_stack": fields[nvtx].strip() if nvtx is not None else ""}


def _parse_raw(path: Path, lines: list[str], header_index: int, header: list[str]) -> dict[int, _Kernel]:
    if "Kernel Name" not in header:
        raise ParseError(f"{path}: line {header_index + 1}: the CSV header starts like ncu's but has no "
                         f"'Kernel Name' column; run ncu with --csv --page details or --page raw.")
    column = {name: position for position, name in enumerate(header)}
    rows = list(_csv_rows(path, lines, header_index, header))
    if not rows or rows[0][1][column["ID"]] != "":
        raise ParseError(f"{path}: line {header_index + 2}: a wide ncu CSV (--page raw) needs the units row "
                         f"under its header (a row with an empty ID); give the file exactly as ncu wrote it.")
    units = rows[0][1]
    metric_columns = [(position, name) for position, name in enumerate(header) if name not in _DESCRIPTIVE_COLUMNS]
    kernels: dict[int, _Kernel] = {}
    for number, fields in rows[1:]:
        kernel_id = _kernel_id(path, number, fields[column["ID"]])
        cc = fields[column["CC"]] if "CC" in column else None
        kernel = kernels[kernel_id] = _Kernel(kernel_id, fields[column["Kernel Name"]], number, cc or None,
                                              **_launch_fields(fields, column))
        for position, name in metric_columns:
            _store(path, kernel, name, units[position], fields[position], number)
    if not kernels:
        raise ParseError(f"{path}: line {header_index + 2}: the wide ncu CSV has a header and units but no kernel "
                         f"rows, so nothing was profiled or the file is truncated; profile again.")
    return kernels


def _check_last_kernel_complete(path: Path, kernels: dict[int, _Kernel]) -> None:
    """A details page cut at a line boundary leaves its last kernel with fewer metrics than any other.

    (Text output needs no such check: a cut inside a table is caught there, a cut between kernels by the
    ==PROF== Profiling lines.)"""
    if len(kernels) < 2:
        return
    last = kernels[max(kernels)]
    usual = min(len(k.values) + len(k.bad_units) for k in kernels.values() if k is not last)
    if len(last.values) + len(last.bad_units) < usual:
        raise ParseError(f"{path}: line {last.line}: the last kernel (ID {last.id}) has "
                         f"{len(last.values) + len(last.bad_units)} metrics where the others have {usual}, "
                         f"so the file is truncated; profile again or copy the whole file.")


def _parse_text(path: Path, lines: list[str]) -> dict[int, _Kernel]:
    kernels: dict[int, _Kernel] = {}
    current: _Kernel | None = None
    spans: list[tuple[int, int]] | None = None
    in_table = False
    rows_in_table = 0
    table_start = 0
    profiled = 0
    saw_prof = False
    for number, line in enumerate(lines, start=1):
        if line.startswith("=="):
            saw_prof = saw_prof or line.startswith("==PROF==")
            profiled += bool(_PROFILING.match(line))
            continue
        if not line.strip():
            continue
        header = None
        if line.startswith("  ") and not line.startswith("   ") and "Context " in line:
            header = _KERNEL_HEADER.match(line)
        if header:
            if in_table and rows_in_table:
                raise ParseError(f"{path}: line {number}: a kernel line inside the metric table opened on line "
                                 f"{table_start}: the file is damaged or two logs were pasted together; profile "
                                 f"again and give the file exactly as ncu wrote it.")
            kernel_id = len(kernels)
            current = kernels[kernel_id] = _Kernel(
                kernel_id, header.group("name"), number, header.group("cc"),
                grid_size=f"({header.group('grid')})" if header.group("grid") else "",
                block_size=f"({header.group('block')})" if header.group("block") else "")
            in_table = False
            continue
        if in_table:
            if _SEPARATOR.match(line):
                if rows_in_table == 0:  # the rule under a "Metric Name  Metric Unit  Metric Value" row
                    spans = _spans(line)
                else:
                    in_table = False
                continue
            if not line.startswith("    "):
                continue  # application output that landed between ncu's lines
            if rows_in_table == 0 and line.split()[:2] == ["Metric", "Name"]:
                continue
            metric, unit, value = _table_row(path, number, line, spans)
            assert current is not None
            _store(path, current, metric, unit, value, number)
            rows_in_table += 1
            continue
        if _SEPARATOR.match(line) and current is not None:
            spans = _spans(line)
            if len(spans) != 3:
                raise ParseError(f"{path}: line {number}: a metric table with {len(spans)} columns (ncu "
                                 f"--print-summary?); rooflow needs one value per kernel, so run ncu without "
                                 f"--print-summary.")
            in_table, rows_in_table, table_start = True, 0, number
            continue
        # Section titles, [pid] process lines, rule text ("WRN", "OPT"), application output: nothing to read.
    if in_table:
        raise ParseError(f"{path}: line {len(lines)}: the file ends inside the metric table opened on line "
                         f"{table_start}, so it is truncated; profile again or copy the whole file.")
    if not kernels:
        where = first_content_line(lines)
        if saw_prof:
            raise ParseError(f"{path}: line {len(lines)}: ncu ran (==PROF== lines) but the file holds no kernel "
                             f"results, so it is truncated or ncu wrote them elsewhere (--log-file/--export); "
                             f"give the file that holds the results.")
        first = lines[where - 1].strip()[:80]
        if looks_like_nsys_report(lines):
            raise ParseError(f"{path}: line {where}: this is an nsys stats report, not Nsight Compute output; "
                             f"aggregate it with `rooflow nsys` (rooflow.profilers.nsys.aggregate_nsys).")
        raise ParseError(f"{path}: line {where}: not Nsight Compute output (it starts {first!r}); rooflow "
                         f"expects ncu's text output (kernel lines '  <name>, Context N, Stream N' with metric "
                         f"tables) or its --csv details or raw page (a header starting \"ID\",\"Process ID\").")
    if profiled > len(kernels):
        raise ParseError(f"{path}: line {len(lines)}: ncu profiled {profiled} kernels (==PROF== Profiling lines) "
                         f"but the file holds results for {len(kernels)}, so it is truncated; profile again or "
                         f"copy the whole file.")
    return kernels


def _spans(separator: str) -> list[tuple[int, int]]:
    return [(match.start(), match.end()) for match in re.finditer(r"-+", separator)]


def _table_row(path: Path, number: int, line: str, spans: list[tuple[int, int]] | None) -> tuple[str, str, str]:
    """(metric, unit, value) of one text-table row, by the dashed rule's columns; by whitespace otherwise."""
    if spans and len(spans) == 3 and len(line) >= spans[1][0]:
        name = line[: spans[1][0]].strip()
        unit = line[spans[1][0]: spans[2][0]].strip()
        value = line[spans[2][0]:].strip()
        # A unit wider than its column (or a misaligned row) shows as a split word: fall back to whitespace.
        if name and value and " " not in unit and "  " not in name and _is_value(value):
            return name, unit, value
    tokens = line.split()
    if len(tokens) == 2 and _is_value(tokens[1]):
        return tokens[0], "", tokens[1]
    if len(tokens) >= 3 and _is_value(tokens[-1]):
        return " ".join(tokens[:-2]), tokens[-2], tokens[-1]
    raise ParseError(f"{path}: line {number}: expected a 'metric  unit  value' row inside the metric table, "
                     f"found {line.strip()[:80]!r}; the file is damaged, so profile again.")


def _is_value(text: str) -> bool:
    try:
        to_si(text, "")
    except ValueError:
        return False
    return True


# --------------------------------------------------------------------------------------------------
# Several files of one run


def _merge(files: list[_File]) -> dict[int, _Kernel]:
    if len(files) == 1:
        return files[0].kernels
    first = files[0]
    merged = {i: _Kernel(k.id, k.name, k.line, k.cc, dict(k.values), dict(k.bad_units), k.grid_size,
                         k.block_size, k.nvtx_stack)
              for i, k in first.kernels.items()}
    for other in files[1:]:
        if set(other.kernels) != set(first.kernels):
            raise ParseError(
                f"{other.path}: holds {_describe_ids(other.kernels)} but {first.path} holds "
                f"{_describe_ids(first.kernels)}; files given together must be ONE ncu run (e.g. one file per "
                f"metric), so give the files of one run only, or profile again the one that is truncated.")
        for kernel_id, kernel in other.kernels.items():
            target = merged[kernel_id]
            if kernel.name != target.name:
                raise ParseError(
                    f"{other.path}: line {kernel.line}: kernel ID {kernel_id} is {kernel.name[:60]!r} but in "
                    f"{first.path} it is {target.name[:60]!r}; files given together must be ONE ncu run, so "
                    f"give the files of one run only.")
            target.cc = target.cc or kernel.cc
            for metric, value in kernel.values.items():
                known = target.values.get(metric)
                if known is not None and not _same(known, value):
                    raise ParseError(
                        f"{other.path}: line {kernel.line}: {metric} of kernel ID {kernel_id} is {value:g} but "
                        f"{known:g} in an earlier file; each metric must come from one file of one run, so "
                        f"drop the duplicate file.")
                target.values[metric] = value
            for metric, bad in kernel.bad_units.items():
                target.bad_units.setdefault(metric, bad)
    return merged


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0)


def _describe_ids(kernels: dict[int, _Kernel]) -> str:
    return f"{len(kernels)} kernels (IDs {min(kernels)}–{max(kernels)})"


# --------------------------------------------------------------------------------------------------
# Derived quantities


def _weighted(wide: pd.DataFrame, weights: dict[str, float]) -> pd.Series | None:
    """Σ weight × metric per kernel over the metrics present; NaN for a kernel where all of them are NaN."""
    present = {name: weight for name, weight in weights.items() if name in wide.columns}
    if not present:
        return None
    values = wide[list(present)]
    total = sum(values[name].fillna(0.0) * weight for name, weight in present.items())
    return total.where(~values.isna().all(axis=1))


def _derive(wide: pd.DataFrame, cc: pd.Series, bad_units: dict[str, tuple[str, int, Path]]
            ) -> tuple[pd.DataFrame, dict[str, Any], list[str]]:
    columns = set(wide.columns)
    derived = pd.DataFrame(index=wide.index)
    used: list[str] = []
    notes: list[str] = []

    for precision, weights in m.CUDA_CORE_FLOP_WEIGHTS.items():
        names = {m.sass_metric(columns, op): weight for op, weight in weights.items()}
        names = {name: weight for name, weight in names.items() if name}
        series = _weighted(wide, names)
        derived[f"flops_{precision}"] = series if series is not None else np.nan
        used += list(names)
        missing = [op for op in weights if not m.sass_metric(columns, op)]
        if names and missing:
            notes.append(f"flops_{precision} lacks the {', '.join(missing)} counters: it undercounts.")
        if names and precision == "fp16":
            notes.append("fp16 CUDA-core FLOPs count half2 instructions: 2·hadd + 2·hmul + 4·hfma.")

    tensor_names = m.tensor_flop_metrics(columns)
    tensor_collected = bool(tensor_names)
    if tensor_names:
        derived["flops_tensor"] = _weighted(wide, {name: 1 for name in tensor_names})
        used += tensor_names
        notes.append(f"Tensor-core FLOPs = Σ {', '.join(tensor_names)} (these counters count FLOPs).")
    elif m.VOLTA_TENSOR_INSTRUCTIONS in columns:
        capabilities = {str(value) for value in cc.dropna()}
        if capabilities and not all(value.startswith(("7.0", "7.2")) for value in capabilities):
            derived["flops_tensor"] = np.nan
            notes.append(f"{m.VOLTA_TENSOR_INSTRUCTIONS} was collected on compute capability "
                         f"{', '.join(sorted(capabilities))}, where 512 FLOPs per instruction does not hold: "
                         f"tensor-core FLOPs not counted; collect sm__ops_path_tensor_src_* instead.")
        else:
            derived["flops_tensor"] = wide[m.VOLTA_TENSOR_INSTRUCTIONS] * m.VOLTA_FLOPS_PER_TENSOR_INSTRUCTION
            used.append(m.VOLTA_TENSOR_INSTRUCTIONS)
            tensor_collected = True
            notes.append(f"Tensor-core FLOPs = {m.VOLTA_FLOPS_PER_TENSOR_INSTRUCTION} × "
                         f"{m.VOLTA_TENSOR_INSTRUCTIONS} (Volta HMMA, FP32 accumulate).")
    else:
        derived["flops_tensor"] = np.nan
        notes.append("No tensor-core metric was collected: tensor-core work (TF32/FP16/BF16 convolutions and "
                     "GEMMs) is invisible to these totals.")

    flop_columns = ["flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor"]
    derived["flops_total"] = derived[flop_columns].sum(axis=1, min_count=1)

    def pick(label: str, options: list[tuple[dict[str, float], str]]) -> None:
        for weights, how in options:
            if all(name in columns for name in weights):
                derived[label] = _weighted(wide, weights)
                used.extend(weights)
                notes.append(f"{label} = {how}.")
                return
        derived[label] = np.nan

    pick("dram_bytes", [({m.DRAM_BYTES: 1}, m.DRAM_BYTES),
                        ({m.DRAM_BYTES_READ: 1, m.DRAM_BYTES_WRITE: 1}, f"{m.DRAM_BYTES_READ} + {m.DRAM_BYTES_WRITE}"),
                        ({m.DRAM_SECTORS: m.SECTOR_BYTES}, f"{m.SECTOR_BYTES} × {m.DRAM_SECTORS}"),
                        ({m.DRAM_SECTORS_READ: m.SECTOR_BYTES, m.DRAM_SECTORS_WRITE: m.SECTOR_BYTES},
                         f"{m.SECTOR_BYTES} × ({m.DRAM_SECTORS_READ} + {m.DRAM_SECTORS_WRITE})")])
    pick("l2_bytes", [({m.L2_BYTES: 1}, m.L2_BYTES), ({m.L2_SECTORS: m.SECTOR_BYTES}, f"{m.SECTOR_BYTES} × {m.L2_SECTORS}")])
    pick("l1_bytes", [({m.L1_BYTES: 1}, m.L1_BYTES), ({m.L1_SECTORS: m.SECTOR_BYTES}, f"{m.SECTOR_BYTES} × {m.L1_SECTORS}")])

    has_seconds = True
    if m.DURATION in columns:
        derived["seconds"] = wide[m.DURATION]
        used.append(m.DURATION)
        notes.append(f"seconds = {m.DURATION} (ncu locks clocks to base: use nsys or CUDA events for time).")
    elif m.CYCLES in columns and m.CYCLES_PER_SECOND in columns:
        # Per kernel, then summed: a rate is never added across kernels.
        derived["seconds"] = wide[m.CYCLES] / wide[m.CYCLES_PER_SECOND]
        used += [m.CYCLES, m.CYCLES_PER_SECOND]
        notes.append(f"seconds = {m.CYCLES} / {m.CYCLES_PER_SECOND} per kernel.")
    else:
        derived["seconds"] = np.nan
        has_seconds = False

    _check_units(bad_units)
    info = {"tensor_metrics_collected": tensor_collected, "has_seconds": has_seconds,
            "metrics_collected": sorted(set(used))}
    return derived, info, notes


def _check_units(bad_units: dict[str, tuple[str, int, Path]]) -> None:
    for metric, (unit, number, path) in bad_units.items():
        if m.is_used_metric(metric):
            raise ParseError(f"{path}: line {number}: {metric} is in unit {unit!r}, which rooflow cannot convert "
                             f"to SI; profile again with ncu's --print-units base, or report the unit as a bug.")


def _total(series: pd.Series) -> float | None:
    if series.isna().all():
        return None
    return math.fsum(series.dropna())  # exactly rounded, so integer counts add up exactly


# --------------------------------------------------------------------------------------------------
# The API the workflow calls


def aggregate_ncu(paths: list[str | Path] | str | Path) -> NcuResult:
    """Parse ncu output files of ONE profiled run and aggregate them per kernel and in total.

    Several files are merged by kernel ID (one metric per file, as NERSC collected them); give files of
    different runs to separate calls.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    paths = [Path(p) for p in paths]
    if not paths:
        raise ParseError("no ncu output file was given; pass the file(s) ncu wrote for one run.")
    files = [_parse_file(path) for path in paths]
    kernels = _merge(files)
    ids = sorted(kernels)
    wide = pd.DataFrame.from_records([kernels[i].values for i in ids], index=pd.Index(ids, name="id"))
    wide = wide.astype(float)
    bad: dict[str, tuple[str, int, Path]] = {}
    for parsed in files:
        for kernel in parsed.kernels.values():
            for metric, (unit, number) in kernel.bad_units.items():
                bad.setdefault(metric, (unit, number, parsed.path))
    cc = pd.Series([kernels[i].cc for i in ids], index=wide.index, dtype=object)
    derived, info, notes = _derive(wide, cc, bad)

    table = pd.DataFrame({"id": ids, "name": [kernels[i].name for i in ids]})
    table["kernel_class"] = [classify_kernel(name) for name in table["name"]]
    for column in KERNEL_COLUMNS[3:]:
        if column in TEXT_COLUMNS:
            table[column] = [getattr(kernels[i], column) for i in ids]
        else:
            table[column] = derived[column].to_numpy(dtype=float)

    totals: dict[str, Any] = {"kernels": len(ids)}
    for key in TOTAL_KEYS[1:]:
        totals[key] = _total(table[key])
    if info["has_seconds"]:
        totals["seconds"] = _total(table["seconds"])
    totals["metrics_collected"] = info["metrics_collected"]
    totals["tensor_metrics_collected"] = info["tensor_metrics_collected"]
    formats = sorted({parsed.source_format for parsed in files})
    totals["source_format"] = "+".join(formats)
    if len(files) > 1:
        notes.append(f"{len(files)} files merged by kernel ID as one run.")
    for key in ("flops_fp32", "dram_bytes"):
        partial = table[key].isna() & table[key].notna().any()
        if partial.any():
            notes.append(f"{key}: {int(partial.sum())} kernels report n/a and are left out of the total.")
    return NcuResult(kernels=table, totals=totals, metrics=wide, paths=paths, notes=notes)
