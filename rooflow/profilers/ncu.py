"""Nsight Compute output -> per-kernel FLOPs, bytes and time, and their totals for one profiled run.

One job, however long: recognise and read ncu's output in every shape it takes into one per-kernel table
(the details page's streaming reader is _details/_details_arrow, the raw page's _raw; counters become
FLOPs and bytes in metrics).

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
  "Device","CC", ...``), either followed by ``"Rule Name","Rule Type","Rule Description"`` (and, newer,
  ``"Estimated Speedup Type","Estimated Speedup"``) when sections and rules ran. ncu writes the metric rows of
  such a page WITHOUT the trailing rule fields (13 fields under a header of 15): a row may have fewer fields
  than the header as long as it reaches every column rooflow reads (up to "Metric Value"), and is padded; a
  row with more fields than the header, a row that stops before "Metric Value" with CSV rows after it, or a
  second, different header is refused (two outputs mixed, or an edited file); a last row cut mid-line, before
  "Metric Value", or after a comma without a line break, and a last kernel with fewer metrics than every other
  kernel, are truncation. Rule rows (empty metric fields) are skipped; application output and
  ``==PROF==``/``==WARNING==`` lines before or between the CSV lines too. The page is streamed
  (:mod:`rooflow.profilers._details`; its common blocks tokenised by pyarrow, :mod:`rooflow.profilers._details_arrow`):
  its size does not matter.
- **raw page CSV** (``--csv --page raw``): one wide row per kernel, a units row under the header. Streamed
  with pyarrow's CSV reader (:mod:`rooflow.profilers._raw`); a page in a shape that reader does not expect is
  read whole, by the parser that names the line of what is wrong.
- **one metric per file** sets (NERSC's ``out.<metric>``). Files that hold the same kernels (the same IDs and
  names) are ONE ncu run: they are merged by kernel ID, and a metric they both hold must agree kernel by kernel.
  Files whose kernel lists differ are SEPARATE ncu runs of the step (one run per metric, as NERSC profiles:
  cuDNN's autotuner or a differently truncated kernel name makes the lists differ by a few kernels). Their
  totals are sums over each file's own kernels; ``totals["runs"]`` and ``totals["kernels_per_run"]`` and a note
  ("12 files from 12 separate ncu runs: 797–801 kernels ...") say so; the per-kernel table then stacks the
  runs (kernel IDs restart with each run; a row holds only what its own run measured, so every additive column
  still sums to its total, and a quantity that needs metrics of two runs in one kernel — time from cycles and
  cycles per second — is not reported). Refused: runs whose kernel counts differ by more than
  :data:`SEPARATE_RUNS_TOLERANCE` (not the same step), and one metric in two runs with different totals (which
  one counts?); the same metric with the same total is counted once. A run whose kernels are exactly the first
  ones of another's is accepted with a note (it may be a file cut at a line boundary).

Which metrics each total needs (any one of the options; ``rooflow.profilers.metrics`` names them):

=================  ==================================================================================
``flops_fp32``     fadd, fmul, ffma SASS counters (``flops_fp64``: dadd, dmul, dfma; ``flops_fp16``: hadd, hmul, hfma)
``flops_tensor``   the ``sm__ops_path_tensor_src_*`` counters, or ``sm__inst_executed_pipe_tensor.sum`` on sm_70
``dram_bytes``     ``dram__bytes.sum``, or read + write, or 32 × ``dram__sectors.sum`` (or read + write sectors)
``l2_bytes``       ``lts__t_bytes.sum`` or 32 × ``lts__t_sectors.sum``
``l1_bytes``       ``l1tex__t_bytes.sum`` or 32 × ``l1tex__t_sectors.sum``
``seconds``        ``gpu__time_duration.sum``, or ``sm__cycles_elapsed.avg`` / its ``.per_second`` per kernel
=================  ==================================================================================

Without ``required_metrics`` every metric is optional: a total none of whose metrics was collected is None
(null in JSON), never zero, and a total missing some of its counters (fadd and fmul without ffma) says so in
the notes. With ``required_metrics`` (the list ncu was asked for: the workflow's
:func:`~rooflow.profilers.metrics.metrics_for_architecture`), every metric of the list must be in the input:
one that is not is an error naming it, because a metric the GPU lacks makes ncu fail with "Failed to find
metric", so a missing one means the file is not that run's output or was cut.

Units are converted per value to SI base units (bytes, seconds, counts, per-second rates) before anything
is added; rates are never summed across kernels (per-kernel time is cycles / cycles-per-second, then summed).
Anything else — a truncated file, an HTML page, a binary file (an ``.ncu-rep`` report: export it with
``ncu --import``), ``==ERROR==`` lines (ERR_NVGPUCTRPERM), "No kernels were profiled", an empty, foreign or
unreadable file, a directory — raises :class:`rooflow.errors.ParseError` with one sentence naming the file, the
line, the cause and the fix.
"""

from __future__ import annotations

import csv
import math
import re
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rooflow.errors import ParseError
from rooflow.profilers import metrics as m
from rooflow.profilers._details import (
    BLOCK_BYTES,
    ERROR_MARKERS,
    NVTX_STACK_COLUMN_PREFIX,
    DetailsReader,
    _power_of_ten,
    kernel_id_of,
)
from rooflow.profilers._details_arrow import feeder
from rooflow.profilers._raw import Unusual, read_raw_page
from rooflow.profilers._text import (
    check_head,
    first_content_line,
    looks_like_nsys_report,
    not_a_number,
    other_tool,
    profiler_error_numbered,
    profiler_lines,
    read_ahead,
    read_blocks,
    read_text,
    release_memory,
    to_si,
)
from rooflow.profilers.kernels import launch_class_codes, only_wide_float_types, short_kernel_name
from rooflow.units import format_flops

KERNEL_COLUMNS = ["id", "name", "kernel_class", "flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor",
                  "flops_total", "dram_bytes", "l2_bytes", "l1_bytes", "seconds", "grid_size", "block_size",
                  "nvtx_stack"]
# The launch configuration and NVTX columns: text, "" where the output does not carry them (ncu 2020's
# text output has no grid/block; only `ncu --nvtx` writes the push/pop stack).
TEXT_COLUMNS = ["grid_size", "block_size", "nvtx_stack"]
# (ncu --nvtx adds a column to the details page whose name starts with NVTX_STACK_COLUMN_PREFIX: the thread's
# NVTX push/pop stack when the kernel launched.)
TOTAL_KEYS = ["kernels", "flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor", "flops_total",
              "dram_bytes", "l2_bytes", "l1_bytes"]
# False: the raw page is read whole, as before the streaming reader (the tests compare both on every recording).
RAW_STREAMED = True
# Separate ncu runs of one step (one metric per run) may differ by this share of their kernels, no more.
SEPARATE_RUNS_TOLERANCE = 0.10

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
# _KERNEL_HEADER's parts, matched from the end of the line (its lazy name retried the rest of the pattern at every
# character of a 700-character template name): see _kernel_header.
_HEADER_CONTEXT = re.compile(r", Context (?P<context>\d+), Stream (?P<stream>\d+)"
                             r"(?:, Device (?P<device>\d+), CC (?P<cc>\d+\.\d+))?\s*$")
_HEADER_TIME = re.compile(r", (?P<time>\d{4}-[A-Za-z]{3}-\d{1,2} \d{1,2}:\d{2}:\d{2})")
_HEADER_LAUNCH = re.compile(r" \((?P<grid>\d+, \d+, \d+)\)x\((?P<block>\d+, \d+, \d+)\)")
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


class _TextKernels:
    """The kernels of a text output as they stream, held compactly (a big log holds millions of values): per
    kernel its line and the codes of its name, CC and launch configuration (each distinct text held once), per
    value its kernel, metric code and SI value in flat arrays of at most :data:`CHUNK` values (no big array is
    copied as it grows). A metric's first value in a kernel counts, as before (one dictionary per kernel,
    ``setdefault``)."""

    CHUNK = 1 << 20

    def __init__(self, path: Path, seen: set[str]):
        self.path, self.seen = path, seen
        self.lines = array("q")
        self.texts: dict[str, dict[str | None, int]] = {column: {} for column in ("name", "cc", "grid", "block")}
        self.codes: dict[str, array] = {column: array("i") for column in self.texts}
        self.chunks: list[tuple[array, array, array]] = []
        self._new_chunk()
        # Codes in the order of each metric's first value: the order of the per-kernel dictionaries' keys.
        self.metrics: dict[str, int] = {}
        self.bad_units: dict[str, tuple[str, int]] = {}

    def _new_chunk(self) -> None:
        self.kernel_of, self.metric_of, self.values = array("i"), array("i"), array("d")
        self.chunks.append((self.kernel_of, self.metric_of, self.values))

    def __len__(self) -> int:
        return len(self.lines)

    def add(self, name: str, line: int, cc: str | None, grid: str, block: str) -> int:
        """A new kernel (its ID: the number of kernels before it)."""
        for column, text in (("name", name), ("cc", cc), ("grid", grid), ("block", block)):
            known = self.texts[column]
            self.codes[column].append(known.setdefault(text, len(known)))
        self.lines.append(line)
        return len(self.lines) - 1

    def store(self, kernel: int, metric: str, unit: str, value: str, number: int) -> None:
        """One metric row's value (as ``_store`` reads it) for `kernel`."""
        self.seen.add(metric)
        si = _fast_si(value, unit)
        if si is None:
            try:
                si = to_si(value, unit)
            except ValueError:
                if m.is_used_metric(metric):
                    raise not_a_number(self.path, number, metric, value) from None
                return  # a text value (a device name, an enum): not a metric rooflow adds up
            except KeyError:
                self.bad_units.setdefault(metric, (unit, number))
                return
            si = math.nan if si is None else si
        if len(self.values) == self.CHUNK:
            self._new_chunk()
        self.kernel_of.append(kernel)
        self.metric_of.append(self.metrics.setdefault(metric, len(self.metrics)))
        self.values.append(si)

    def to_file(self, source_format: str) -> _File:
        count = len(self.lines)
        index = pd.Index(np.arange(count, dtype=np.int64), name="id")

        def codes(column: str) -> np.ndarray:
            return np.frombuffer(self.codes[column], dtype=np.int32) if count else np.empty(0, dtype=np.int32)

        def categorical(column: str) -> pd.Categorical:
            return pd.Categorical.from_codes(codes(column), categories=pd.Index(list(self.texts[column]), dtype=object))

        info = pd.DataFrame({"name": categorical("name"), "line": np.frombuffer(self.lines, dtype=np.int64),
                             "cc": np.array(list(self.texts["cc"]), dtype=object)[codes("cc")],
                             "grid_size": categorical("grid"), "block_size": categorical("block"),
                             "nvtx_stack": pd.Categorical.from_codes(np.zeros(count, dtype=np.int8),
                                                                     categories=pd.Index([""], dtype=object))},
                            index=index)
        width = len(self.metrics)
        matrix = np.full(count * width, np.nan)
        present = np.zeros(count * width, dtype=bool)
        for kernels, metrics, values in self.chunks:
            if not len(values):
                continue
            cells = np.frombuffer(kernels, dtype=np.int32).astype(np.int64) * width + np.frombuffer(metrics,
                                                                                                   dtype=np.int32)
            values = np.frombuffer(values, dtype=np.float64)
            if np.bincount(cells - cells.min()).max() > 1:  # a metric twice in a kernel: its first value counts
                _, first = np.unique(cells, return_index=True)
                first.sort()
                cells, values = cells[first], values[first]
            new = ~present[cells]
            matrix[cells[new]] = values[new]
            present[cells] = True
        self.chunks = []
        wide = pd.DataFrame(matrix.reshape(count, width), index=index,
                            columns=sorted(self.metrics, key=self.metrics.get))
        return _File(self.path, source_format, info, wide, dict(self.bad_units), self.seen)


# False: a CSV page's blocks are read in the parsing thread (True: in a thread of their own, see _blocks).
READ_AHEAD = True
# False: every text-table row goes through _table_row and _TextKernels.store (the tests compare both).
TEXT_FAST = True
# Distinct value texts per unit kept converted while reading a text log (a recorded log holds 352 distinct
# (unit, value) pairs in 1,870 rows: zeros and repeated counters); the cache is emptied when full.
_TEXT_CACHE = 1 << 14
# A plain decimal as ``parse_number`` reads it (digits, thousands separators every three digits, a decimal point):
# its value in a unit whose factor is a power of ten is computed exactly with integers, as float(Decimal * factor)
# rounds it (once); anything else goes through ``to_si``.
_PLAIN_TEXT = re.compile(r"^([0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.([0-9]*))?$")
_UNIT_EXPONENTS: dict[str, int | None] = {}


def _fast_si(text: str, unit: str) -> float | None:
    match = _PLAIN_TEXT.match(text)
    if match is None:
        return None
    exponent = _UNIT_EXPONENTS.get(unit, _UNIT_EXPONENTS)
    if exponent is _UNIT_EXPONENTS:
        exponent = _UNIT_EXPONENTS[unit] = _power_of_ten(unit)
    if exponent is None:
        return None
    whole, fraction = match.groups()
    digits = whole.replace(",", "") + (fraction or "")
    if len(digits) > 18:  # Decimal's 28 digits always hold the product: kept well inside them
        return None
    power = exponent - len(fraction or "")
    mantissa = int(digits)
    # int → float and int / int are correctly rounded in Python: one rounding of the exact value.
    return float(mantissa * 10 ** power) if power >= 0 else mantissa / 10 ** -power


@dataclass
class _File:
    """One parsed file: ``info`` (index: kernel ID, sorted; name, line, cc, grid_size, block_size, nvtx_stack),
    ``wide`` (index: kernel ID; one column per numeric metric, SI units), the metrics whose unit rooflow
    cannot convert, and every metric name the file holds."""
    path: Path
    source_format: str
    info: pd.DataFrame
    wide: pd.DataFrame
    bad_units: dict[str, tuple[str, int]]
    seen: set[str]


@dataclass
class NcuResult:
    """One profiled run, aggregated.

    ``kernels``: one row per kernel (:data:`KERNEL_COLUMNS`), SI units, NaN where the run did not collect
    what a column needs. ``totals``: the JSON the workflow writes — :data:`TOTAL_KEYS` (None where not
    collected), ``seconds`` when a duration metric exists, ``metrics_collected`` (the collected metrics
    rooflow uses), ``tensor_metrics_collected`` and ``source_format``. ``metrics``: every numeric metric per
    kernel in SI units (index: kernel ID), for anyone who needs a metric rooflow does not derive (the raw
    page's: float32 for a metric rooflow does not use whose every value float32 holds exactly, so memory
    stays low; a value read from it is the same number).
    ``notes``: how each quantity was obtained, in sentences.
    """

    kernels: pd.DataFrame
    totals: dict[str, Any]
    metrics: pd.DataFrame
    paths: list[Path]
    notes: list[str]
    runs: list[list[Path]] = field(default_factory=list)
    # the compute capabilities its kernels ran on ("9.0"), where the file says (ncu's old text logs do not)
    compute_capabilities: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------------------------------
# Reading one file

OUTPUT = "the text or CSV output of Nsight Compute (ncu)"
EMPTY_CAUSE = "the profiler wrote nothing (it failed, or its output went elsewhere)"
AGAIN = "profile again"
_HEADER_START = b'"ID",'


def _parse_file(path: Path, along: bool = True) -> _File:
    """One file, in whichever shape it is. A details page is streamed (:mod:`rooflow.profilers._details`);
    text output and the raw page (one row per kernel: small) are read whole. `along`: a file that starts as
    text output is parsed as its blocks are checked (:func:`_text_along`), not after."""
    blocks = _with_final(_blocks(path))
    notices: list[tuple[int, str]] = []
    line, first, capture = 1, True, False
    for block, final in blocks:
        if first:
            block = block.removeprefix(b"\xef\xbb\xbf")  # a byte-order mark would hide the CSV header
            check_head(path, block[:8192], OUTPUT, EMPTY_CAUSE, AGAIN, whole=final and len(block) <= 8192)
            first = False
        at = 0 if block.startswith(_HEADER_START) else block.find(b"\n" + _HEADER_START) + 1
        if not at and not block.startswith(_HEADER_START):
            notices += _notices(block, line)
            capture = capture or b".qdstrm" in block  # an nsys log: profiler_error's other case
            line += block.count(b"\n")
            if along and TEXT_FAST and not notices and not capture:  # (the first block: ncu's text output?)
                parsed = _text_along(path, block, blocks)
                return parsed if parsed is not None else _parse_file(path, along=False)
            continue
        notices += _notices(block[:at], line)
        line += block.count(b"\n", 0, at)
        return _parse_details(path, blocks, block, at, final, line, notices)
    if first:
        check_head(path, b"", OUTPUT, EMPTY_CAUSE, AGAIN, whole=True)  # raises: the file is empty
    if notices or capture:
        return _parse_whole(path)  # the profiler's own error lines: the whole-file parser names them
    # No CSV header anywhere: ncu's text output (or not ncu output at all), read line by line as it streams.
    return _parse_text(path, _text_lines(path), set()).to_file("ncu-text")


def _blocks(path: Path) -> Iterator[bytes]:
    """The file's blocks. Where the first holds a details page's CSV header, those after it are read ahead in a
    thread of their own (:func:`rooflow.profilers._text.read_ahead`): pyarrow and numpy parse them with the GIL
    released. Not the raw page (its own reader reads the file) nor a text log (its parser holds the GIL)."""
    source = read_blocks(path, BLOCK_BYTES)
    first = next(source, None)
    if first is None:
        return
    yield first
    at = first.find(_HEADER_START)
    end = first.find(b"\n", at)
    header = first[at:] if end < 0 else first[at:end]
    details = (at >= 0 and (at == 0 or first[at - 1:at] == b"\n" or first[:at] == b"\xef\xbb\xbf")
               and b'"Metric Name"' in header)
    yield from read_ahead(source) if READ_AHEAD and details else source


class _NotText(Exception):
    """A later block of what began as text output holds a CSV header or what may be the profiler's own lines."""


def _unusual(block: bytes) -> bool:
    """Whether a block may hold what :func:`_parse_file` reads otherwise than as text output: a CSV header, a
    profiler error marker, an nsys capture (more blocks than it sends elsewhere: a marker inside a CSV row)."""
    return (block.startswith(_HEADER_START) or b"\n" + _HEADER_START in block or b".qdstrm" in block
            or any(marker.encode() in block for marker in ERROR_MARKERS))


def _text_along(path: Path, block: bytes, blocks: Iterator[tuple[bytes, bool]]) -> _File | None:
    """Text output parsed from its first block (`block`, already checked) as the following blocks are checked,
    in one pass over the file; None where a block is :func:`_unusual` (the caller reads the file as before).
    The lines are :func:`_text_lines`' (the same blocks, decoded alike); an error of the text parser stands
    only once the rest of the file is checked."""
    def lines() -> Iterator[str]:
        yield from block.decode("utf-8", errors="replace").splitlines()
        for following, _ in blocks:
            if _unusual(following):
                raise _NotText
            yield from following.decode("utf-8", errors="replace").splitlines()

    try:
        kernels = _parse_text(path, lines(), set())
    except _NotText:
        return None
    except ParseError:
        if any(_unusual(following) for following, _ in blocks):
            return None
        raise
    return kernels.to_file("ncu-text")


def _text_lines(path: Path) -> Iterator[str]:
    """The file's lines as :func:`rooflow.profilers._text.read_text` and ``splitlines`` give them, a block at a
    time (blocks end at a line break, so no character or line is cut)."""
    first = True
    for block in read_blocks(path, BLOCK_BYTES):
        if first:
            block, first = block.removeprefix(b"\xef\xbb\xbf"), False
        yield from block.decode("utf-8", errors="replace").splitlines()


def _parse_details(path: Path, blocks: Iterator[tuple[bytes, bool]], block: bytes, at: int, final: bool, line: int,
                   notices: list[tuple[int, str]]) -> _File:
    end = block.find(b"\n", at)
    header_text = (block[at:] if end < 0 else block[at:end]).decode("utf-8", errors="replace").rstrip("\r")
    header = _csv_fields(path, [header_text], 0, line, final and end < 0)
    if "Metric Name" not in header or "Metric Value" not in header:
        return _parse_raw_page(path, header, line, notices)  # the raw page: one wide row per kernel
    reader = DetailsReader(path, header, line)
    rest = block[end + 1:] if end >= 0 else b""
    feed, blocks = feeder(reader, rest, blocks)
    line += 1
    try:
        while True:
            line += feed(rest, line, final)
            if final:
                break
            rest, final = next(blocks)
        release_memory()  # the blocks' buffers and arrays, before the page's tables are built
        page = reader.finish()
    except ParseError as error:
        # The profiler's own error lines explain a damaged file better than the damage does.
        line += rest.count(b"\n") + (not rest.endswith(b"\n"))
        for rest, _ in blocks:
            reader.notices += _notices(rest, line)
            line += rest.count(b"\n")
        raise _profiler_error(path, notices + reader.notices) or error from None
    error = _profiler_error(path, notices + page.notices)
    if error:
        raise error
    return _File(path, "ncu-csv-details", page.info, page.wide, page.bad_units, page.seen)


def _parse_raw_page(path: Path, header: list[str], line: int, notices: list[tuple[int, str]]) -> _File:
    """The raw page, streamed (:mod:`rooflow.profilers._raw`); a file in a shape that reader does not handle
    (or with the profiler's error lines) is read whole, whose parser names the line of what is wrong."""
    if RAW_STREAMED and not notices:
        try:
            info, wide, bad_units, seen = read_raw_page(path, header, line, _DESCRIPTIVE_COLUMNS,
                                                        NVTX_STACK_COLUMN_PREFIX)
        except Unusual:
            pass
        else:
            return _File(path, "ncu-csv-raw", info, wide, bad_units, seen)
    return _parse_whole(path)


def _with_final(blocks: Iterable[bytes]) -> Iterator[tuple[bytes, bool]]:
    """(block, whether it is the last one)."""
    iterator = iter(blocks)
    current = next(iterator, None)
    while current is not None:
        following = next(iterator, None)
        yield current, following is None
        current = following


def _notices(block: bytes, first_line: int) -> list[tuple[int, str]]:
    """(line, text) of the non-CSV lines of a block that may report a profiler error."""
    if not any(marker.encode() in block for marker in ERROR_MARKERS):
        return []
    found = []
    for number, raw in enumerate(block.split(b"\n"), start=first_line):
        if not raw.startswith(b'"'):
            text = raw.decode("utf-8", errors="replace")
            if any(marker in text for marker in ERROR_MARKERS):
                found.append((number, text))
    return found


def _profiler_error(path: Path, notices: list[tuple[int, str]]) -> ParseError | None:
    return profiler_error_numbered(path, notices) if notices else None


def _parse_whole(path: Path) -> _File:
    """Text output or a raw page: the whole file, as ncu wrote it."""
    lines = profiler_lines(path, read_text(path), OUTPUT, EMPTY_CAUSE, AGAIN)
    header_index = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    seen: set[str] = set()
    if header_index is not None:
        header = _csv_fields(path, [lines[header_index]], 0, header_index + 1, header_index == len(lines) - 1)
        return _from_kernels(path, "ncu-csv-raw", _parse_raw(path, lines, header_index, header, seen), seen)
    return _parse_text(path, lines, seen).to_file("ncu-text")


def _categorical(texts: list[str]) -> pd.Categorical:
    """Texts of the kernels, each distinct one held once, in order of appearance (as the streamed readers)."""
    codes, uniques = pd.factorize(np.array(texts, dtype=object))
    return pd.Categorical.from_codes(codes, categories=pd.Index(uniques, dtype=object))


def _from_kernels(path: Path, source_format: str, kernels: dict[int, _Kernel], seen: set[str]) -> _File:
    ids = sorted(kernels)
    index = pd.Index(ids, name="id")
    info = pd.DataFrame({"name": _categorical([kernels[i].name for i in ids]),
                         "line": [kernels[i].line for i in ids], "cc": [kernels[i].cc for i in ids],
                         "grid_size": _categorical([kernels[i].grid_size for i in ids]),
                         "block_size": _categorical([kernels[i].block_size for i in ids]),
                         "nvtx_stack": _categorical([kernels[i].nvtx_stack for i in ids])}, index=index)
    wide = pd.DataFrame.from_records([kernels[i].values for i in ids], index=index).astype(float)
    bad: dict[str, tuple[str, int]] = {}
    for i in ids:
        for metric, where in kernels[i].bad_units.items():
            bad.setdefault(metric, where)
    return _File(path, source_format, info, wide, bad, seen)


def _csv_fields(path: Path, lines: list[str], index: int, number: int | None = None, last: bool | None = None
                ) -> list[str]:
    number = index + 1 if number is None else number
    last = index == len(lines) - 1 if last is None else last
    try:
        return next(csv.reader([lines[index]], strict=True))
    except csv.Error as error:
        raise ParseError(f"{path}: line {number}: malformed CSV ({error})"
                         f"{': the file is truncated' if last else ''}; profile again or copy the whole file.")


def _csv_rows(path: Path, lines: list[str], header_index: int, header: list[str]) -> Iterable[tuple[int, list[str]]]:
    """(1-based line, fields) of the raw page's rows after the header; other lines (application output,
    ==PROF==, ==WARNING==) are skipped, and so are repeated headers."""
    for index in range(header_index + 1, len(lines)):
        line = lines[index]
        if not line.startswith('"'):
            continue
        fields = _csv_fields(path, lines, index)
        if fields == header:
            continue
        if len(fields) != len(header):
            if index == len(lines) - 1 or not any(line.startswith('"') for line in lines[index + 1:]):
                raise ParseError(f"{path}: line {index + 1}: the last CSV row has {len(fields)} of the header's "
                                 f"{len(header)} fields, so the file is truncated; profile again or copy the "
                                 f"whole file.")
            raise ParseError(f"{path}: line {index + 1}: a CSV row with {len(fields)} fields under a header of "
                             f"{len(header)}; the file mixes two ncu outputs or was edited, so give the file "
                             f"exactly as ncu wrote it.")
        yield index + 1, fields


def _store(path: Path, kernel: _Kernel, metric: str, unit: str, value: str, number: int, seen: set[str]) -> None:
    seen.add(metric)
    try:
        si = to_si(value, unit)
    except ValueError:
        if m.is_used_metric(metric):
            raise not_a_number(path, number, metric, value) from None
        return  # a text value (a device name, an enum): not a metric rooflow adds up
    except KeyError:
        kernel.bad_units.setdefault(metric, (unit, number))
        return
    kernel.values.setdefault(metric, math.nan if si is None else si)


def _launch_fields(fields: list[str], column: dict[str, int]) -> dict[str, str]:
    """Grid and block size and, under ``ncu --nvtx``, the NVTX push/pop stack of one CSV row."""
    nvtx = next((position for name, position in column.items() if name.startswith(NVTX_STACK_COLUMN_PREFIX)), None)
    return {"grid_size": fields[column["Grid Size"]] if "Grid Size" in column else "",
            "block_size": fields[column["Block Size"]] if "Block Size" in column else "",
            "nvtx_stack": fields[nvtx].strip() if nvtx is not None else ""}


def _parse_raw(path: Path, lines: list[str], header_index: int, header: list[str], seen: set[str]
               ) -> dict[int, _Kernel]:
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
        kernel_id = kernel_id_of(path, number, fields[column["ID"]])
        cc = fields[column["CC"]] if "CC" in column else None
        kernel = kernels[kernel_id] = _Kernel(kernel_id, fields[column["Kernel Name"]], number, cc or None,
                                              **_launch_fields(fields, column))
        for position, name in metric_columns:
            _store(path, kernel, name, units[position], fields[position], number, seen)
    if not kernels:
        raise ParseError(f"{path}: line {header_index + 2}: the wide ncu CSV has a header and units but no kernel "
                         f"rows, so nothing was profiled or the file is truncated; profile again.")
    return kernels


def _parse_text(path: Path, lines: Iterable[str], seen: set[str]) -> _TextKernels:
    """The kernels of a text output; `lines` may stream (a list only where the file is not ncu output)."""
    kernels = _TextKernels(path, seen)
    current: int | None = None
    spans: list[tuple[int, int]] | None = None
    in_table = False
    rows_in_table = 0
    table_start = 0
    profiled = 0
    saw_prof = False
    number = 0
    columns: tuple[int, int] | None = None  # where unit and value start in the current table (TEXT_FAST)
    converted: dict[str, dict[str, float]] = {}  # unit -> value text -> SI value
    codes, chunk = kernels.metrics, kernels.CHUNK
    kernel_of, metric_of, values = kernels.chunks[-1]  # the chunk being filled
    for number, line in enumerate(lines, start=1):
        if (in_table and columns is not None and line.startswith("    ") and len(line) >= columns[0]
                and "---" not in line and (rows_in_table or line.split()[:2] != ["Metric", "Name"])):
            # The common row of a metric table (where the steps below would reach _table_row), read as
            # _table_row and _TextKernels.store read it without their calls: a plain value in a power-of-ten
            # unit, converted once per distinct text and unit (see _TEXT_CACHE). Any other row: the steps below.
            unit_at, value_at = columns
            name, unit, value = line[:unit_at].strip(), line[unit_at:value_at].strip(), line[value_at:].strip()
            if name and " " not in unit and "  " not in name:
                known = converted.get(unit)
                if known is None:
                    known = converted[unit] = {}
                si = known.get(value)
                if si is None:
                    si = _fast_si(value, unit)  # not None: a plain decimal, so _is_value holds too
                    if si is not None:
                        if len(known) >= _TEXT_CACHE:
                            known.clear()
                        known[value] = si
                if si is not None:
                    code = codes.get(name)
                    if code is None:
                        kernels.seen.add(name)
                        code = codes[name] = len(codes)
                    if len(values) == chunk:
                        kernels._new_chunk()
                        kernel_of, metric_of, values = kernels.chunks[-1]
                    kernel_of.append(current)
                    metric_of.append(code)
                    values.append(si)
                    rows_in_table += 1
                    continue
        if line.startswith("=="):
            saw_prof = saw_prof or line.startswith("==PROF==")
            profiled += bool(_PROFILING.match(line))
            continue
        if not line.strip():
            continue
        header = None
        if line.startswith("  ") and not line.startswith("   ") and "Context " in line:
            header = _kernel_header(line)
        if header:
            if in_table and rows_in_table:
                raise ParseError(f"{path}: line {number}: a kernel line inside the metric table opened on line "
                                 f"{table_start}: the file is damaged or two logs were pasted together; profile "
                                 f"again and give the file exactly as ncu wrote it.")
            name, grid, block, cc = header
            current = kernels.add(name, number, cc, f"({grid})" if grid else "", f"({block})" if block else "")
            in_table = False
            continue
        if in_table:
            if "---" in line and _SEPARATOR.match(line):
                if rows_in_table == 0:  # the rule under a "Metric Name  Metric Unit  Metric Value" row
                    spans = _spans(line)
                    columns = _columns(spans)
                else:
                    in_table = False
                continue
            if not line.startswith("    "):
                continue  # application output that landed between ncu's lines
            if rows_in_table == 0 and line.split()[:2] == ["Metric", "Name"]:
                continue
            rows_in_table += 1
            metric, unit, value = _table_row(path, number, line, spans)
            assert current is not None
            kernels.store(current, metric, unit, value, number)
            kernel_of, metric_of, values = kernels.chunks[-1]  # store may have begun a chunk
            continue
        if current is not None and "---" in line and _SEPARATOR.match(line):
            spans = _spans(line)
            if len(spans) != 3:
                raise ParseError(f"{path}: line {number}: a metric table with {len(spans)} columns (ncu "
                                 f"--print-summary?); rooflow needs one value per kernel, so run ncu without "
                                 f"--print-summary.")
            in_table, rows_in_table, table_start = True, 0, number
            columns = _columns(spans)
            continue
        # Section titles, [pid] process lines, rule text ("WRN", "OPT"), application output: nothing to read.
    if in_table:
        raise ParseError(f"{path}: line {number}: the file ends inside the metric table opened on line "
                         f"{table_start}, so it is truncated; profile again or copy the whole file.")
    if not kernels:
        # Not ncu output: what it is comes from the whole file (its first lines, the tool that wrote it).
        lines = profiler_lines(path, read_text(path), OUTPUT, EMPTY_CAUSE, AGAIN)
        where = first_content_line(lines)
        if saw_prof:
            raise ParseError(f"{path}: line {number}: ncu ran (==PROF== lines) but the file holds no kernel "
                             f"results, so it is truncated or ncu wrote them elsewhere (--log-file/--export); "
                             f"give the file that holds the results.")
        first = lines[where - 1].strip()[:80]
        if looks_like_nsys_report(lines):
            raise ParseError(f"{path}: line {where}: this is an nsys stats report, not Nsight Compute output; "
                             f"aggregate it with `rooflow nsys` (rooflow.profilers.nsys.aggregate_nsys).")
        tool = other_tool(lines)
        if tool:
            raise ParseError(f"{path}: line {where}: this is {tool}, not Nsight Compute output; profile with ncu "
                             f"(the workflow's profile_ncu rule) and give its output.")
        raise ParseError(f"{path}: line {where}: not Nsight Compute output (it starts {first!r}); rooflow "
                         f"expects ncu's text output (kernel lines '  <name>, Context N, Stream N' with metric "
                         f"tables) or its --csv details or raw page (a header starting \"ID\",\"Process ID\").")
    if profiled > len(kernels):
        raise ParseError(f"{path}: line {number}: ncu profiled {profiled} kernels (==PROF== Profiling lines) "
                         f"but the file holds results for {len(kernels)}, so it is truncated; profile again or "
                         f"copy the whole file.")
    return kernels


def _kernel_header(line: str) -> tuple[str, str | None, str | None, str | None] | None:
    """(name, grid, block, CC) of a kernel header line, exactly as ``_KERNEL_HEADER.match`` reads it, or None.

    The pattern's parts are found from the end: ", Context ..." at the line's last ", Context " (the rest of the
    line can hold no other), then a time stamp just before it, then a launch configuration just before that;
    the name is what precedes them (the lazy name of the pattern is the shortest that lets the rest match, so
    every part that matches is taken)."""
    if not line.startswith("  ") or line[2:3].isspace() or not line[2:3]:
        return None
    at = line.rfind(", Context ")
    context = _HEADER_CONTEXT.match(line, at) if at > 2 else None
    if context is None:
        return None
    end = at
    cut = line.rfind(", ", 0, end)
    if cut > 2 and _HEADER_TIME.fullmatch(line, cut, end):
        end = cut
    cut = line.rfind(" (", 0, line.rfind(")x(", 0, end) + 1)
    launch = _HEADER_LAUNCH.fullmatch(line, cut, end) if cut > 2 else None
    if launch is not None:
        end = cut
    if end <= 2 or not line[2].isprintable():  # an empty name, or one the pattern's \S may read otherwise
        header = _KERNEL_HEADER.match(line)
        return header and (header.group("name"), header.group("grid"), header.group("block"), header.group("cc"))
    return (line[2:end], launch and launch.group("grid"), launch and launch.group("block"), context.group("cc"))


def _columns(spans: list[tuple[int, int]] | None) -> tuple[int, int] | None:
    """Where a text table's unit and value columns start (the common row's fast path), or None: not a table of
    three columns, or the fast path is off."""
    if TEXT_FAST and spans and len(spans) == 3:
        return spans[1][0], spans[2][0]
    return None


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
    if _PLAIN_TEXT.match(text):
        return True
    try:
        to_si(text, "")
    except ValueError:
        return False
    return True


# --------------------------------------------------------------------------------------------------
# Several files: one run, or separate runs


@dataclass
class _Run:
    """Files that hold the same kernels (the same IDs, the same names): one ncu run, merged by kernel ID."""
    files: list[_File]
    info: pd.DataFrame
    wide: pd.DataFrame


def _same_kernels(a: _File, b: _File) -> bool:
    return a.info.index.equals(b.info.index) and bool((a.info["name"].to_numpy() == b.info["name"].to_numpy()).all())


def _merge_run(files: list[_File]) -> _Run:
    first = files[0]
    if len(files) == 1:  # nothing to merge: no copy (a raw page's metrics are most of what rooflow holds)
        return _Run(files, first.info, first.wide)
    info, wide = first.info.copy(), first.wide.copy()
    for other in files[1:]:
        info["cc"] = info["cc"].where(info["cc"].notna(), other.info["cc"])
        for metric in other.wide.columns:
            new = other.wide[metric]
            if metric in wide.columns:
                known = wide[metric]
                both = known.notna() & new.notna()
                close = np.isclose(known.to_numpy(), new.to_numpy(), rtol=1e-9, atol=0.0)
                differ = np.flatnonzero(both.to_numpy() & ~close)
                if len(differ):
                    kernel_id = wide.index[differ[0]]
                    raise ParseError(
                        f"{other.path}: line {other.info.at[kernel_id, 'line']}: {metric} of kernel ID {kernel_id} "
                        f"is {new[kernel_id]:g} but {known[kernel_id]:g} in {first.path}; each metric must come "
                        f"from one file of one run, so drop the duplicate file.")
                wide[metric] = new.where(new.notna(), known)
            else:
                wide[metric] = new
    return _Run(files, info, wide)


def _group_runs(files: list[_File]) -> list[_Run]:
    """Files with the same kernel list are one run (merged by kernel ID); the others are separate runs."""
    groups: list[list[_File]] = []
    for parsed in files:
        for group in groups:
            if _same_kernels(group[0], parsed):
                group.append(parsed)
                break
        else:
            groups.append([parsed])
    return [_merge_run(group) for group in groups]


def _describe_run(run: _Run) -> str:
    paths = [str(f.path) for f in run.files]
    return paths[0] if len(paths) == 1 else f"{paths[0]} (+{len(paths) - 1} files of its run)"


def _check_separate_runs(runs: list[_Run], notes: list[str]) -> None:
    """Separate ncu runs of one step differ by a few kernels (cuDNN's autotuner, a kernel name written
    otherwise); runs whose kernel counts are further apart than SEPARATE_RUNS_TOLERANCE are of different
    programs, and one metric in two runs has two totals: both are refused. A run whose kernels are exactly the
    first ones of another run's is noted: it may be a file cut at a line boundary."""
    counts = [len(run.info) for run in runs]
    small, large = runs[int(np.argmin(counts))], runs[int(np.argmax(counts))]
    if max(counts) - min(counts) > SEPARATE_RUNS_TOLERANCE * max(counts):
        raise ParseError(
            f"{small.files[0].path}: holds {len(small.info)} kernels but {large.files[0].path} holds "
            f"{len(large.info)}: separate ncu runs of one step differ by a few kernels, not by more than "
            f"{SEPARATE_RUNS_TOLERANCE:.0%}, so these files are not runs of the same step; give the files of one "
            f"profiled step (one file per metric), or aggregate each run on its own.")
    for run in runs:
        for other in runs:
            shorter = len(run.info)
            if other is run or shorter >= len(other.info):
                continue
            head = other.info.iloc[:shorter]
            if head.index.equals(run.info.index) and (head["name"].to_numpy() == run.info["name"].to_numpy()).all():
                notes.append(f"{_describe_run(run)} holds exactly the first {shorter} of the {len(other.info)} "
                             f"kernels of {_describe_run(other)}: if it was cut short, its metrics are "
                             f"undercounted.")
    owner: dict[str, tuple[_Run, float]] = {}
    for run in runs:
        for metric in list(run.wide.columns):
            total = math.fsum(run.wide[metric].dropna())
            if metric not in owner:
                owner[metric] = (run, total)
                continue
            first, first_total = owner[metric]
            if not math.isclose(total, first_total, rel_tol=1e-9, abs_tol=0.0):
                raise ParseError(
                    f"{run.files[0].path}: holds {metric} (total {total:g}) and so does {first.files[0].path} "
                    f"(total {first_total:g}), from another ncu run: each metric is summed over the one file that "
                    f"holds it, so give each metric once (drop one of the two files).")
            run.wide = run.wide.drop(columns=metric)
            notes.append(f"{metric} is in {_describe_run(first)} and {_describe_run(run)} with the same total: "
                         f"counted once.")


def _check_signs(parsed: _File) -> None:
    """A counter or duration rooflow adds up is never negative: one that is ends in a sentence naming the file,
    the kernel and the metric (it was summed, lowering a step's bytes and FLOPs)."""
    for metric in parsed.wide.columns:
        if not m.is_used_metric(metric):
            continue
        values = parsed.wide[metric].to_numpy(dtype=np.float64, na_value=np.nan)
        negative = np.flatnonzero(values < 0)
        if len(negative):
            kernel = parsed.wide.index[negative[0]]
            line = parsed.info["line"].get(kernel) if "line" in parsed.info else None
            where = f" (from line {line})" if line is not None and line == line else ""
            count = f"{len(negative)} kernels have" if len(negative) > 1 else "1 kernel has"
            # in SI units ({:,.0f} printed -5 ns as "-0")
            shown = f"{values[negative[0]]:.6g}" + (" s" if "duration" in metric else "")
            raise ParseError(f"{parsed.path}: kernel ID {kernel}{where}: {metric} is {shown}, and "
                             f"no counter or duration is negative ({count} such a value): the file was edited or "
                             f"damaged; profile again or copy the file as ncu wrote it.")


def _check_units(bad_units: dict[str, tuple[str, int, Path]]) -> None:
    for metric, (unit, number, path) in bad_units.items():
        if m.is_used_metric(metric):
            raise ParseError(f"{path}: line {number}: {metric} is in unit {unit!r}, which rooflow cannot convert "
                             f"to SI; profile again with ncu's --print-units base, or report the unit as a bug.")


def _total(series: pd.Series) -> float | None:
    """The exactly rounded sum of the values present (so integer counts add up exactly); None if none is."""
    values = np.asarray(series.to_numpy(dtype=np.float64, na_value=np.nan))
    # Integers whose absolute values add up below 2^53: every partial sum is exact in any order, so numpy's sums
    # (a chunk at a time: few temporaries) add up to the exact sum, which math.fsum (a Python loop over a million
    # kernels) would round to itself.
    sums, magnitude, integral = [], 0.0, True
    for at in range(0, len(values), 1 << 18):
        chunk = values[at:at + (1 << 18)]
        chunk = chunk[~np.isnan(chunk)]
        if len(chunk):
            sums.append(float(chunk.sum()))
            magnitude += float(np.abs(chunk).sum())
            integral = integral and bool((chunk == np.trunc(chunk)).all())
    if not sums:
        return None
    if integral and magnitude < 2.0 ** 53:
        return sum(sums) + 0.0  # + 0.0: fsum's zero is +0.0
    return math.fsum(values[~np.isnan(values)])


# --------------------------------------------------------------------------------------------------
# The API the workflow calls


def check_profiled_device(result: NcuResult, files: list[str], device_key: str, architecture: str | None) -> None:
    """Refuse a profile whose kernels ran on another GPU than the device it is filed under: an H100's CSV (every
    kernel "CC 9.0") imported as an A100's was summarised against the A100's roofs without a word. Only where
    both the file and the catalogue say a compute capability (ncu's old text logs do not)."""
    if not architecture:
        return
    capability = m.parse_architecture(architecture)
    expected = f"{capability // 10}.{capability % 10}"
    found = [cc for cc in result.compute_capabilities if cc != expected]
    if found:
        raise ParseError(f"{', '.join(map(str, files))}: profiled on a GPU of compute capability {', '.join(found)}, "
                         f"but filed under device '{device_key}' ({architecture}, compute capability {expected}): "
                         f"list it under the device it ran on, or profile again on {device_key}")


def _drop_fp16_of_wide_kernels(table: pd.DataFrame, notes: list[str]) -> None:
    """Take out of FLOPs the fp16 CUDA-core count of kernels whose names show only 32/64-bit float types
    (rooflow.profilers.kernels.only_wide_float_types): HFMA2 instructions, not half arithmetic, that made the
    elementwise class of an H100 VGG16 TF32 step 5x its FP32 adds (8.7 GFLOP against 1.7)."""
    fp16 = table["flops_fp16"].to_numpy(dtype=np.float64, na_value=np.nan)
    counted = np.nan_to_num(fp16) > 0
    if not counted.any():
        return
    names = table["name"].astype("category")
    wide = np.asarray([only_wide_float_types(str(name)) for name in names.cat.categories], dtype=bool)
    dropped = counted & wide[names.cat.codes.to_numpy()]
    if not dropped.any():
        return
    flops = float(fp16[dropped].sum())
    biggest = table.loc[dropped].assign(fp16=fp16[dropped]).sort_values("fp16", ascending=False)["name"].iloc[0]
    total = table["flops_total"].to_numpy(dtype=np.float64, na_value=np.nan, copy=True)  # the arrays are read-only
    total[dropped] -= fp16[dropped]
    table["flops_total"] = total
    table["flops_fp16"] = np.where(dropped, 0.0, fp16)
    notes.append(f"fp16 CUDA-core FLOPs of {int(dropped.sum())} kernels whose names show only 32/64-bit float types "
                 f"({format_flops(flops)}, the most in {short_kernel_name(str(biggest))}) are not counted: "
                 f"they are fp16-pipe instructions of FP32 kernels, not half-precision arithmetic.")


def _table(info: pd.DataFrame, derived: pd.DataFrame) -> pd.DataFrame:
    # The text columns stay categorical where the reader made them so: a name held once, not once per kernel
    # (a PyTorch template name is ~700 bytes; a big profile has millions of kernels).
    import pyarrow as pa

    names = pd.Categorical(info["name"].array)  # every reader's names are categorical already: no copy
    # Names repeat: each distinct one is classified once, and the per-kernel texts are written by pyarrow from
    # the codes (no Python string object per kernel). In ID order (launch order), so that the GEMMs inside a
    # Winograd/FFT convolution are booked to it (rooflow.profilers.kernels.classify_launches).
    order = np.argsort(info.index.to_numpy(), kind="stable")
    dictionary, ordered = launch_class_codes(list(names.categories), np.asarray(names.codes, dtype=np.int64)[order])
    class_codes = np.empty_like(ordered)
    class_codes[order] = ordered
    kernel_class = pa.DictionaryArray.from_arrays(pa.array(class_codes),
                                                  pa.array(dictionary, type=pa.string())).cast(pa.string())
    columns = {"id": info.index.to_numpy(), "name": info["name"].array,
               "kernel_class": pd.array(kernel_class, dtype="str")}
    for column in KERNEL_COLUMNS[3:]:
        columns[column] = info[column].array if column in TEXT_COLUMNS else derived[column].to_numpy(dtype=float)
    # copy=False: the frame holds the derived arrays as they are (a copy of ~12 float columns per kernel would
    # double what a per-metric file of a million kernels holds at its peak).
    return pd.DataFrame(columns, copy=False)


def _check_required(files: list[_File], required: Iterable[str]) -> None:
    seen = set().union(*(parsed.seen for parsed in files))
    missing = [metric for metric in dict.fromkeys(required) if metric not in seen]
    if not missing:
        return
    names = ", ".join(missing)
    them = "it" if len(missing) == 1 else "them"
    if len(files) == 1:
        where = f"{files[0].path}: ncu was asked for {names} but the file does not hold {them}"
    else:
        more = len(files) - 1
        where = (f"{files[0].path} (and {more} more file{'s' if more > 1 else ''}): ncu was asked for {names} but "
                 f"none of the files holds {them}")
    raise ParseError(f"{where}, so the input is not the output of that ncu run or was cut or edited; profile again "
                     f"with the same metric list (rooflow.profilers.metrics.metrics_for_architecture) and give the "
                     f"file ncu wrote.")


def aggregate_ncu(paths: list[str | Path] | str | Path, required_metrics: Iterable[str] | None = None) -> NcuResult:
    """Parse the ncu output files of one profiled step and aggregate them per kernel and in total.

    Files that hold the same kernels (IDs and names) are ONE run and are merged by kernel ID (one metric per
    file, as NERSC collected them). Files whose kernel lists differ are SEPARATE runs of the step (one ncu run
    per metric): each metric is summed over its own run's kernels, the notes and ``totals["runs"]`` /
    ``totals["kernels_per_run"]`` say so, and the per-kernel table stacks the runs. `required_metrics`: the
    metric list ncu was asked for; a metric of it that no file holds is an error naming it.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    paths = [Path(p) for p in paths]
    if not paths:
        raise ParseError("no ncu output file was given; pass the file(s) ncu wrote for one run.")
    files = [_parse_file(path) for path in paths]
    for parsed in files:
        _check_signs(parsed)
    if required_metrics is not None:
        _check_required(files, required_metrics)
    bad: dict[str, tuple[str, int, Path]] = {}
    for parsed in files:
        for metric, (unit, number) in parsed.bad_units.items():
            bad.setdefault(metric, (unit, number, parsed.path))

    notes: list[str] = []
    runs = _group_runs(files)
    if len(runs) > 1:
        _check_separate_runs(runs, notes)
    columns = list(dict.fromkeys(column for run in runs for column in run.wide.columns))
    tables, info, derived_notes = [], None, []
    for run in runs:
        derived, run_info, run_notes = m.derive_quantities(run.wide.reindex(columns=columns), run.info["cc"])
        _check_units(bad)
        if info is None:
            info, derived_notes = run_info, run_notes
        tables.append(_table(run.info, derived))
    table = tables[0] if len(tables) == 1 else pd.concat(tables, ignore_index=True)
    if len(runs) > 1 and info["has_seconds"] and table["seconds"].isna().all():
        info["has_seconds"] = False
        derived_notes = [note for note in derived_notes if not note.startswith("seconds = ")]
        derived_notes.append(f"seconds not reported: {m.CYCLES} and {m.CYCLES_PER_SECOND} come from separate ncu "
                             f"runs, and a kernel's time needs both from the same kernel (a rate is never summed).")

    _drop_fp16_of_wide_kernels(table, derived_notes)
    counts = [len(run.info) for run in runs]
    totals: dict[str, Any] = {"kernels": max(counts)}
    for key in TOTAL_KEYS[1:]:
        totals[key] = _total(table[key])
    if info["has_seconds"]:
        totals["seconds"] = _total(table["seconds"])
    totals["metrics_collected"] = info["metrics_collected"]
    totals["tensor_metrics_collected"] = info["tensor_metrics_collected"]
    totals["source_format"] = "+".join(sorted({parsed.source_format for parsed in files}))
    notes = derived_notes + notes
    if len(runs) > 1:
        totals["runs"] = len(runs)
        totals["kernels_per_run"] = counts
        span = f"{min(counts)}–{max(counts)} kernels" if min(counts) != max(counts) else f"{counts[0]} kernels each"
        notes.append(f"{len(files)} files from {len(runs)} separate ncu runs: {span} (their kernel lists differ); "
                     f"each metric is summed over the kernels of its own run, and the per-kernel table stacks the "
                     f"runs in the order given, kernel IDs restarting with each run, each row holding only what "
                     f"its own run measured.")
        metrics = pd.concat([run.wide.reindex(columns=columns) for run in runs], keys=range(len(runs)),
                            names=["run", "id"])
    else:
        metrics = runs[0].wide
        if len(files) > 1:
            notes.append(f"{len(files)} files merged by kernel ID as one run.")
    for key in [*TOTAL_KEYS[1:], "seconds"]:  # a kernel's time n/a mid-file was summed as 0 without a word
        # Within each run: a run that did not measure a quantity at all is not "n/a" for it.
        partial = sum(int((part[key].isna() & part[key].notna().any()).sum()) for part in tables if key in part)
        if partial:
            notes.append(f"{key}: {partial} kernels report n/a and are left out of the total.")
    return NcuResult(kernels=table, totals=totals, metrics=metrics, paths=paths, notes=notes,
                     runs=[[parsed.path for parsed in run.files] for run in runs],
                     compute_capabilities=sorted({str(cc) for run in runs for cc in run.info["cc"].dropna().unique()}))
