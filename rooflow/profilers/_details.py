"""Streaming reader of Nsight Compute's ``--csv`` details page: one row per kernel × metric, any size.

A details page grows with kernels × metrics (rooflow's own H100 files: 350 bytes a row, 19 rows a kernel);
concatenated runs reach gigabytes. This reader never holds the file: it reads blocks of ~4 MB of whole
lines and keeps only, per metric row, the kernel ID, a metric code, the value in SI units and the line
number (29 bytes), and per kernel its descriptive fields (name, launch configuration, NVTX stack).

Two paths, one result (and a third before them: most blocks of a page are tokenised by pyarrow,
:mod:`rooflow.profilers._details_arrow`, which leaves this reader any block not in the common shape):

- **the common shape, vectorised**: a line that starts and ends with ``"``, whose fields are separated by
  ``","`` and contain no ``"`` themselves (checked exactly: the line holds 2 + 2 × separators quotes and no
  two separators overlap), with as many fields as the header or fewer (ncu omits trailing rule columns),
  a decimal ID, and a plain value (digits, thousands separators in their places, at most one decimal point,
  at most 15 digits) in a unit whose factor is a power of ten. Such rows are split and converted with numpy,
  a block at a time. Values are exact: the digits become an integer M and the value M × 10^e (or M / 10^-e)
  with one correctly rounded operation, which is what ``float(Decimal(text) * factor)`` gives.
- **everything else, strictly**: a row with quotes inside a field, "n/a", an exponent, a unit ncu prints
  with a non-decimal factor or that rooflow does not know, a short or long row, a repeated header, a
  truncated last line: Python's ``csv`` module, one row at a time, exactly as before this reader existed.

Metric names and units are identified per block by a 64-bit hash of their bytes, then checked byte for
byte against the row that introduced the hash (a collision sends the block to the strict path). Lines that
are not CSV rows (application output, ``==PROF==``/``==WARNING==``/``==ERROR==`` lines) are skipped; the
ones that can report a profiler error are kept with their line numbers for
:func:`rooflow.profilers._text.profiler_error_numbered`.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from rooflow.errors import ParseError
from rooflow.profilers import metrics as m
from rooflow.profilers._text import not_a_number, to_si, unit_factor

BLOCK_BYTES = 4 << 20
# False: every row takes the strict path (the tests compare both paths on every recorded file).
VECTORISED = True
# Substrings of a non-CSV line that may report a profiler error (see _text.profiler_error_numbered).
ERROR_MARKERS = ("ERR_NVGPUCTRPERM", "==ERROR==", "No kernels were profiled", "No reports were generated",
                 "does not contain CUDA")
NVTX_STACK_COLUMN_PREFIX = "thread Domain:Push/Pop_Range"
INFO_COLUMNS = ["name", "line", "cc", "grid_size", "block_size", "nvtx_stack"]

_QUOTE, _COMMA, _DOT, _NEWLINE, _CR = 34, 44, 46, 10, 13
_MAX_DIGITS = 15  # below 2**53: the integer M is exact in a float
_POW10 = np.array([10.0 ** k for k in range(23)])  # exact doubles
_POW10_INT = np.array([10 ** k for k in range(19)], dtype=np.int64)
# The kind of each byte of a value: 0 (zero: past the end of the span), digit, thousands separator, decimal
# point, anything else.
_DIGIT, _SEPARATOR, _POINT, _OTHER = 1, 2, 3, 4
_CHAR_KIND = np.full(256, _OTHER, dtype=np.uint8)
_CHAR_KIND[0] = 0
_CHAR_KIND[48:58] = _DIGIT
_CHAR_KIND[_COMMA] = _SEPARATOR
_CHAR_KIND[_DOT] = _POINT
_MASKS = np.array([0] + [(1 << (8 * k)) - 1 for k in range(1, 8)] + [(1 << 64) - 1], dtype=np.uint64)
_HASH_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)


@dataclass
class _Key:
    """What a (metric, unit) pair means: its metric code (None: a rule row), the unit's power of ten
    (None: not a power of ten, or unknown: such rows take the strict path)."""
    metric: str
    unit: str
    code: int | None
    exponent: int | None


@dataclass
class DetailsPage:
    """One parsed details page: ``info`` (index: kernel ID, sorted; :data:`INFO_COLUMNS`), ``wide`` (index:
    kernel ID; one column per metric with a numeric or n/a value, SI units), ``bad_units`` (metric ->
    (unit, line) of a unit rooflow cannot convert), ``seen`` (every metric name in the file), ``notices``
    ((line, text) of the non-CSV lines that may report a profiler error)."""
    info: pd.DataFrame
    wide: pd.DataFrame
    bad_units: dict[str, tuple[str, int]]
    seen: set[str]
    notices: list[tuple[int, str]] = field(default_factory=list)


def _power_of_ten(unit: str) -> int | None:
    factor = unit_factor(unit)
    if factor is None or factor <= 0:
        return None
    exponent = factor.normalize().as_tuple()
    if exponent.digits != (1,):
        return None
    return int(exponent.exponent)


class DetailsReader:
    """Feed it the blocks that follow the header line (:meth:`feed`), then :meth:`finish`."""

    def __init__(self, path: Path, header: list[str], header_line: int):
        self.path = path
        self.header = header
        self.header_line = header_line
        self.width = len(header)
        column = {name: position for position, name in enumerate(header)}
        for needed in ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value"):
            if needed not in column:
                raise ParseError(f"{path}: line {header_line}: the ncu CSV header has no {needed!r} column; "
                                 f"run ncu with --csv --page details (or --page raw).")
        self.c_id, self.c_name = column["ID"], column["Kernel Name"]
        self.c_metric, self.c_unit, self.c_value = column["Metric Name"], column["Metric Unit"], column["Metric Value"]
        self.c_cc, self.c_grid, self.c_block = column.get("CC"), column.get("Grid Size"), column.get("Block Size")
        self.c_nvtx = next((p for name, p in column.items() if name.startswith(NVTX_STACK_COLUMN_PREFIX)), None)
        descriptive = [c for c in (self.c_id, self.c_name, self.c_cc, self.c_grid, self.c_block, self.c_nvtx)
                       if c is not None]
        # A row must reach every column rooflow reads; the columns after them (ncu's "Rule Name", "Rule
        # Type", "Rule Description", "Estimated Speedup ...") may be left out: ncu writes metric rows without
        # them (13 fields under a header of 15), so such rows are padded.
        self.need = max(descriptive + [self.c_metric, self.c_unit, self.c_value]) + 1
        # The vectorised path reads metric, unit and value as one span and the descriptive fields as another.
        self.vectorised = VECTORISED and (self.c_unit == self.c_metric + 1 and self.c_value == self.c_unit + 1
                                          and self.c_id == 0 and 0 < min(descriptive[1:] or [1])
                                          and max(descriptive) < self.c_metric)
        self.keys: dict[bytes, _Key] = {}
        self.codes: dict[str, int] = {}
        # Kernel descriptions (name, cc, grid, block, NVTX stack), each stored once: kernels repeat.
        self.description_codes: dict[bytes | tuple[str, ...], int] = {}
        self.descriptions: list[tuple[str, str | None, str, str, str]] = []
        self.known: set[int] | None = None  # built only if IDs ever come out of order
        self.max_known = -1
        self.kernels: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (ids, lines, description codes)
        # Every block's kernels × metrics (NaN where absent or n/a), in a few arrays that grow by doubling:
        # one big allocation instead of a small one per block that would pin the heap.
        self.store = _Rows()
        self.rows: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self.stored_codes: set[int] = set()
        self.bad_units: dict[str, tuple[str, int]] = {}
        self.seen: set[str] = set()
        self.notices: list[tuple[int, str]] = []
        self.pending_short: tuple[int, int] | None = None
        self.last_id = -1
        self.slow_last_id = -1

    # ----------------------------------------------------------------------------------------------
    # Blocks

    def feed(self, block: bytes, first_line: int, final: bool) -> int:
        """Read one block of whole lines whose first line is line `first_line` of the file (1-based);
        `final`: the last block of the file (it may end without a line break). Returns its number of lines."""
        if not block:
            return 0
        a = np.frombuffer(block, dtype=np.uint8)
        breaks = np.flatnonzero(a == _NEWLINE)
        unterminated = not block.endswith(b"\n")
        count = len(breaks) + unterminated
        starts = np.empty(count, dtype=np.int64)
        ends = np.empty(count, dtype=np.int64)
        starts[0] = 0
        starts[1:] = breaks[: count - 1] + 1
        ends[: len(breaks)] = breaks
        if unterminated:
            ends[-1] = len(block)
        nonblank = ends > starts
        ends -= nonblank & (a[np.maximum(ends - 1, 0)] == _CR)
        nonblank = ends > starts
        is_csv = nonblank & (a[np.minimum(starts, len(block) - 1)] == _QUOTE)

        other = np.flatnonzero(nonblank & ~is_csv)
        if len(other) and any(marker.encode() in block for marker in ERROR_MARKERS):
            for index in other.tolist():
                text = block[starts[index]:ends[index]].decode("utf-8", errors="replace")
                if any(marker in text for marker in ERROR_MARKERS):
                    self.notices.append((first_line + index, text))

        csv_lines = np.flatnonzero(is_csv)
        if not len(csv_lines):
            return count
        self.rows = []
        if self.pending_short is not None:
            self._raise_short(*self.pending_short, truncated=False)
        fast_rows, fast_kernels = (self._fast_rows(block, a, starts, ends, csv_lines, first_line)
                                   if self.vectorised else (None, None))
        if fast_rows is None:
            slow_rows = csv_lines.tolist()
        else:
            slow = np.ones(count, dtype=bool)
            slow[fast_rows] = False
            slow_rows = csv_lines[slow[csv_lines]].tolist()

        registrations = [fast_kernels] if fast_kernels is not None else []
        if slow_rows:
            last_line = -1
            if final:
                last_line = first_line + int(np.flatnonzero(nonblank)[-1])
            registrations += self.strict_rows(
                (block[starts[row]:ends[row]], first_line + row, first_line + row == last_line,
                 unterminated and row == count - 1) for row in slow_rows)
            if self.pending_short is not None and csv_lines[-1] + first_line > self.pending_short[0]:
                self._raise_short(*self.pending_short, truncated=False)
        self._register(registrations)
        self._accumulate()
        return count

    def strict_rows(self, lines: Iterable[tuple[bytes, int, bool, bool]]
                    ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Read (line, number, last, unterminated) rows with the csv module into :attr:`rows`; returns the
        registrations of the kernels they start (none or one)."""
        values: list[tuple[int, int, int, bool, float]] = []
        kernels: list[tuple[int, int, int]] = []
        for line, number, last, unterminated in lines:
            stored = self._slow_row(line, number, last, unterminated, kernels)
            if stored is not None:
                values.append(stored)
        if values:
            ids, codes, numbers, kept, si = (np.array(column) for column in zip(*values))
            self.rows.append((ids.astype(np.int64), codes.astype(np.int64), si.astype(np.float64),
                              numbers.astype(np.int64), kept.astype(bool)))
        if not kernels:
            return []
        return [tuple(np.array(column, dtype=np.int64) for column in zip(*kernels))]

    def _accumulate(self) -> None:
        """This block's values as one small matrix: its kernels × the metrics known so far. Nothing per row
        outlives the block, so memory follows the number of kernels, not the size of the file."""
        if not self.rows:
            return
        if len(self.rows) == 1:
            ids, codes, values, lines, stored = self.rows[0]
        else:
            ids, codes, values, lines, stored = (np.concatenate(column) for column in zip(*self.rows))
        self.rows = []
        width = len(self.codes)
        if len(ids) and (ids[1:] >= ids[:-1]).all():  # as ncu writes them: np.unique's result without its sort
            starts = np.empty(len(ids), dtype=bool)
            starts[0] = True
            np.not_equal(ids[1:], ids[:-1], out=starts[1:])
            kernel_ids, rows = ids[starts], np.cumsum(starts) - 1
        else:
            kernel_ids, rows = np.unique(ids, return_inverse=True)
        cells = rows * width + codes
        if np.bincount(cells).max() > 1:  # a kernel with a metric twice: the first row counts, where they agree
            order = np.lexsort((lines, cells))
            starts = np.r_[True, cells[order][1:] != cells[order][:-1]]
            group_first = order[starts][np.cumsum(starts) - 1]  # per row (in cell order): its cell's first row
            differs = (values[order] != values[group_first]) & ~(np.isnan(values[order]) & np.isnan(values[group_first]))
            if differs.any():  # two runs in one file (an appended --log-file): their kernels' values merged
                row, first = order[np.argmax(differs)], group_first[np.argmax(differs)]
                metric = next(name for name, code in self.codes.items() if code == codes[row])
                raise ParseError(f"{self.path}: line {lines[row]}: kernel ID {kernel_ids[rows[row]]} gives {metric} "
                                 f"again, with another value than on line {lines[first]}: two runs in one file (a log "
                                 f"appended to by a second ncu run?); give one run per file.")
            first = order[starts]
            cells, codes, values, stored = cells[first], codes[first], values[first], stored[first]
        present = np.zeros(len(kernel_ids) * width, dtype=bool)
        present[cells] = True
        matrix = np.full(len(kernel_ids) * width, np.nan)
        matrix[cells[stored]] = values[stored]
        self.stored_codes.update(np.flatnonzero(np.bincount(codes[stored], minlength=width)).tolist())
        self.store.append(kernel_ids, matrix.reshape(-1, width), present.reshape(-1, width))

    def _register(self, registrations: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> None:
        """Keep the kernels first seen in this block: the row with the lowest line of each new ID."""
        if not registrations:
            return
        if len(registrations) == 1:
            ids, numbers, descriptions = registrations[0]
        else:
            ids, numbers, descriptions = (np.concatenate(c) for c in zip(*registrations))
            order = np.argsort(numbers, kind="stable")
            ids, numbers, descriptions = ids[order], numbers[order], descriptions[order]
        if not len(ids):
            return
        if not (ids[0] > self.max_known and (len(ids) == 1 or (np.diff(ids) > 0).all())):
            # IDs out of order or seen before (not how ncu writes them, but legal): one at a time.
            if self.known is None:
                self.known = set(np.concatenate([k[0] for k in self.kernels]).tolist()) if self.kernels else set()
            new = []
            for index, kernel_id in enumerate(ids.tolist()):
                if kernel_id not in self.known:
                    self.known.add(kernel_id)
                    new.append(index)
            ids, numbers, descriptions = ids[new], numbers[new], descriptions[new]
        elif self.known is not None:
            self.known.update(ids.tolist())
        if len(ids):
            self.max_known = max(self.max_known, int(ids.max()))
            self.kernels.append((ids, numbers, descriptions))

    # ----------------------------------------------------------------------------------------------
    # The vectorised path

    def _fast_rows(self, block: bytes, a: np.ndarray, starts: np.ndarray, ends: np.ndarray, csv_lines: np.ndarray,
                   first_line: int) -> tuple[np.ndarray | None, tuple[np.ndarray, np.ndarray, np.ndarray] | None]:
        """(rows read here, (kernel IDs, lines, description codes) of their kernel-start rows)."""
        size = len(block)
        if size < 32:
            return None, None
        # The quotes are the whole structure of a row in the common shape: a quote opens the row, one
        # closes it, and every other quote is half of a '","' separator (gap 2, a comma between).
        quotes = np.flatnonzero(a == _QUOTE)
        if len(quotes) < 2:
            return None, None
        s, e = starts[csv_lines], ends[csv_lines]
        low, high = np.searchsorted(quotes, s), np.searchsorted(quotes, e)
        count = high - low
        separator = (np.diff(quotes) == 2) & (a[quotes[:-1] + 1] == _COMMA)
        before = np.zeros(len(quotes) + 1, dtype=np.int64)
        np.cumsum(separator, out=before[1:len(quotes)])
        before[len(quotes)] = before[len(quotes) - 1]
        n_seps = before[np.maximum(high - 1, low)] - before[low]
        fields = n_seps + 1
        candidate = ((count == 2 * fields) & (fields >= self.need) & (fields <= self.width)
                     & (quotes[np.minimum(low, len(quotes) - 1)] == s)
                     & (quotes[np.maximum(high - 1, 0)] == e - 1))
        overlapping = np.flatnonzero(separator[:-1] & separator[1:])  # '",","': two separators share a quote
        if len(overlapping):
            candidate[np.searchsorted(s, quotes[overlapping], side="right") - 1] = False
        keep = np.flatnonzero(candidate)
        if not len(keep):
            return None, None
        rows, low = csv_lines[keep], low[keep]
        # Field j of a row lies between its quotes 2j and 2j + 1.
        def start_of(j: int) -> np.ndarray:
            return quotes[low + 2 * j] + 1

        def end_of(j: int) -> np.ndarray:
            return quotes[low + 2 * j + 1]

        # 8-byte little-endian words at every byte offset: gathers of whole spans in a few steps.
        words = np.ndarray((size - 7,), dtype="<u8", buffer=block, strides=(1,))

        # IDs: a row whose ID bytes equal the previous row's continues its kernel; only the others are parsed.
        id_start = start_of(0)
        id_length = end_of(0) - id_start
        id_word = words[np.minimum(id_start, size - 8)] & _MASKS[np.clip(id_length, 0, 8)]
        changed = np.ones(len(keep), dtype=bool)
        changed[1:] = (id_word[1:] != id_word[:-1]) | (id_length[1:] != id_length[:-1]) | (id_length[1:] > 8)
        boundary = np.flatnonzero(changed)
        boundary_ids, id_ok = _digits(a, id_start[boundary], id_length[boundary], 18)
        run = np.cumsum(changed) - 1
        ids = boundary_ids[run]
        ok = id_ok[run]

        key_start, key_end = start_of(self.c_metric), end_of(self.c_unit)
        key_length = key_end - key_start
        key_words = max(1, int((key_length.max() + 7) // 8))
        value_start = start_of(self.c_value)
        value_length = end_of(self.c_value) - value_start
        ok &= (key_start + 8 * key_words <= size) & (value_start + 24 <= size)  # else: the strict path

        gathered, digest = _words_and_hash(words, key_start, np.where(ok, key_length, 0), key_words)
        key_codes, uniques = pd.factorize(digest)
        firsts = first_occurrences(key_codes)
        representative = firsts[key_codes]
        if not ((gathered == gathered[representative]).all() and (key_length == key_length[representative])[ok].all()):
            return None, None  # a hash collision: this block takes the strict path
        metric_code = np.empty(len(uniques), dtype=np.int64)
        exponent = np.zeros(len(uniques), dtype=np.int64)
        usable = np.zeros(len(uniques), dtype=bool)
        rule = np.zeros(len(uniques), dtype=bool)
        for unique, row in enumerate(firsts.tolist()):
            if not ok[row]:
                continue  # the rows of this hash are unreadable here anyway
            key = self._key(block[key_start[row]:key_end[row]])
            rule[unique] = key.code is None
            usable[unique] = key.exponent is not None and key.code is not None
            metric_code[unique] = -1 if key.code is None else key.code
            exponent[unique] = 0 if key.exponent is None else key.exponent
        is_rule = rule[key_codes] & ok

        mantissa, decimals, plain = _plain_numbers(words, value_start, np.where(ok, value_length, 0))
        power = exponent[key_codes] - decimals
        ok &= plain & usable[key_codes] & (np.abs(power) <= 22)
        ok |= is_rule  # a rule row needs only a readable ID: it is skipped
        keep = np.flatnonzero(ok)
        fast_rows = rows[keep]
        keep = keep[~is_rule[keep]]
        if not len(keep):
            return fast_rows, None
        ids, rows, codes = ids[keep], rows[keep], metric_code[key_codes[keep]]
        mantissa, power = mantissa[keep].astype(np.float64), power[keep]
        values = np.where(power >= 0, mantissa * _POW10[np.clip(power, 0, 22)],
                          mantissa / _POW10[np.clip(-power, 0, 22)])
        numbers = rows + first_line
        self.rows.append((ids, codes, values, numbers, np.ones(len(keep), dtype=bool)))

        # Kernel-start rows: the ID differs from the previous metric row's (the previous block's last ID too).
        starting = np.flatnonzero(ids != np.concatenate(([self.last_id], ids[:-1])))
        self.last_id = int(ids[-1])
        description_start = start_of(1)[keep][starting].tolist()
        description_end = end_of(self.c_metric - 1)[keep][starting].tolist()
        get = self.description_codes.get
        raws = [block[begin:end] for begin, end in zip(description_start, description_end)]
        descriptions = [get(raw) for raw in raws]
        for index, code in enumerate(descriptions):
            if code is None:
                fields = ["ID"] + raws[index].decode("utf-8", errors="replace").split('","')
                descriptions[index] = self._description(raws[index], fields)
        return fast_rows, (ids[starting], numbers[starting], np.array(descriptions, dtype=np.int64))

    def _description(self, raw: bytes, fields: list[str]) -> int:
        code = self.description_codes.get(raw)
        if code is None:
            def get(column: int | None) -> str:
                return fields[column] if column is not None else ""
            code = self.description(raw, fields[self.c_name], get(self.c_cc), get(self.c_grid), get(self.c_block),
                                    get(self.c_nvtx))
        return code

    def description(self, key: bytes | tuple[str, ...], name: str, cc: str, grid: str, block: str, nvtx: str) -> int:
        """The code of a kernel description (its fields as the page holds them) found under `key`."""
        code = self.description_codes.get(key)
        if code is None:
            code = self.description_codes[key] = len(self.descriptions)
            self.descriptions.append((name, cc or None, grid, block, nvtx.strip()))
        return code

    def _key(self, raw: bytes) -> _Key:
        key = self.keys.get(raw)
        if key is None:
            metric, _, unit = raw.decode("utf-8", errors="replace").partition('","')
            key = self.keys[raw] = self.key(metric, unit)
        return key

    def key(self, metric: str, unit: str) -> _Key:
        """What a (metric, unit) pair means (a rule row: no metric)."""
        return _Key(metric, unit, self._code(metric) if metric else None, _power_of_ten(unit) if metric else None)

    def _code(self, metric: str) -> int:
        code = self.codes.get(metric)
        if code is None:
            code = self.codes[metric] = len(self.codes)
            self.seen.add(metric)
        return code

    # ----------------------------------------------------------------------------------------------
    # The strict path

    def _slow_row(self, line: bytes, number: int, last: bool, unterminated: bool,
                  kernels: list[tuple[int, int, int]]) -> tuple[int, int, int, bool, float] | None:
        """(kernel ID, metric code, line, stored, value) of one row read with the csv module; a new kernel's
        (ID, line, description code) goes to `kernels`."""
        path = self.path
        text = line.decode("utf-8", errors="replace")
        try:
            fields = next(csv.reader([text], strict=True))
        except csv.Error as error:
            raise ParseError(f"{path}: line {number}: malformed CSV ({error})"
                             f"{': the file is truncated' if last else ''}; profile again or copy the whole file.")
        if last and unterminated and text.endswith(","):
            raise ParseError(f"{path}: line {number}: the last line ends inside a row (after a comma, without a "
                             f"line break), so the file is truncated; profile again or copy the whole file.")
        if fields == self.header:
            return None  # ncu repeats the header (one per process under --target-processes all)
        if fields and fields[0] == "ID":
            raise ParseError(f"{path}: line {number}: a second CSV header with other columns than the one on line "
                             f"{self.header_line}: the file mixes two ncu outputs, so give each ncu run's file "
                             f"on its own.")
        if len(fields) > self.width:
            raise ParseError(f"{path}: line {number}: a CSV row with {len(fields)} fields under a header of "
                             f"{self.width}; the file mixes two ncu outputs or was edited, so give the file exactly "
                             f"as ncu wrote it.")
        if len(fields) < self.need:
            if self.pending_short is None:
                self.pending_short = (number, len(fields))
            return None
        if self.pending_short is not None:
            self._raise_short(*self.pending_short, truncated=False)
        fields += [""] * (self.width - len(fields))
        metric = fields[self.c_metric]
        if not metric:
            return None  # a rule row: "Rule Name"/"Rule Description" filled, metric fields empty
        kernel_id = kernel_id_of(path, number, fields[self.c_id])
        if kernel_id != self.slow_last_id:  # a candidate: _register keeps the first row of each new ID
            raw = "\x00".join(fields[: self.c_metric]).encode()
            kernels.append((kernel_id, number, self._description(raw, fields)))
        self.slow_last_id = self.last_id = kernel_id
        code = self._code(metric)
        unit, value = fields[self.c_unit], fields[self.c_value]
        try:
            si = to_si(value, unit)
        except ValueError:
            if m.is_used_metric(metric):
                raise not_a_number(path, number, metric, value) from None
            return None  # a text value (a device name, an enum): not a metric rooflow adds up
        except KeyError:
            self.bad_units.setdefault(metric, (unit, number))
            return kernel_id, code, number, False, math.nan
        return kernel_id, code, number, True, math.nan if si is None else si

    def _raise_short(self, number: int, fields: int, truncated: bool) -> None:
        if truncated:
            raise ParseError(f"{self.path}: line {number}: the last CSV row has {fields} of the header's {self.width} "
                             f"fields, so the file is truncated; profile again or copy the whole file.")
        raise ParseError(f"{self.path}: line {number}: a CSV row with {fields} fields where ncu writes at least "
                         f"{self.need} (every column up to {self.header[self.need - 1]!r}) under a header of "
                         f"{self.width}; the file mixes two ncu outputs or was edited, so give the file exactly as "
                         f"ncu wrote it.")

    # ----------------------------------------------------------------------------------------------
    # The result

    def finish(self) -> DetailsPage:
        if self.pending_short is not None:
            self._raise_short(*self.pending_short, truncated=True)
        path = self.path
        if not self.kernels:
            raise ParseError(f"{path}: line {self.header_line}: the ncu CSV has a header but no metric rows, so the "
                             f"file is truncated or nothing was profiled; read the profiling log and profile again.")
        kernel_ids, kernel_lines, kernel_descriptions = (np.concatenate(c) for c in zip(*self.kernels))
        self.kernels = []
        if not _ascending(kernel_ids):  # as ncu writes them, the IDs ascend: no sorted copy of a million kernels
            order = np.argsort(kernel_ids, kind="stable")
            kernel_ids, kernel_lines, kernel_descriptions = (kernel_ids[order], kernel_lines[order],
                                                             kernel_descriptions[order])
        # Kernel descriptions repeat (the same kernel launched again): the text columns are categorical.
        columns = {}
        for position, column in enumerate(("name", "cc", "grid_size", "block_size", "nvtx_stack")):
            codes, uniques = pd.factorize(np.array([d[position] for d in self.descriptions], dtype=object),
                                          use_na_sentinel=True)
            if column == "cc":  # few values, compared and filled across files: plain objects, None where absent
                lookup = np.empty(len(uniques) + 1, dtype=object)  # the last one for code -1 (absent)
                lookup[:-1] = uniques
                columns[column] = lookup[codes[kernel_descriptions]]
                continue
            columns[column] = pd.Categorical.from_codes(codes[kernel_descriptions],
                                                        categories=pd.Index(uniques, dtype=object))
        index = pd.Index(kernel_ids, name="id")
        info = pd.DataFrame({"name": columns["name"], "line": kernel_lines, "cc": columns["cc"],
                             "grid_size": columns["grid_size"], "block_size": columns["block_size"],
                             "nvtx_stack": columns["nvtx_stack"]}, index=index)

        names = sorted(self.codes, key=self.codes.get)
        width = len(names)
        ids, matrix, present = self.store.arrays(width)
        self.store = _Rows()
        if not _ascending(ids):  # a kernel cut by a block boundary (repeated ID): earlier block first
            order = np.argsort(ids, kind="stable")
            ids, matrix, present = ids[order], matrix[order], present[order]
        repeated = np.flatnonzero(ids[1:] == ids[:-1]) + 1
        if len(repeated):
            for row in repeated.tolist()[::-1]:  # fold each repeat into the row before it, last first
                fill = present[row] & ~present[row - 1]
                matrix[row - 1, fill] = matrix[row, fill]
                present[row - 1] |= present[row]
            kept = np.ones(len(ids), dtype=bool)
            kept[repeated] = False
            ids, matrix, present = ids[kept], matrix[kept], present[kept]
        if not np.array_equal(ids, kernel_ids):  # pragma: no cover - every value row registers its kernel
            raise AssertionError("kernel registry and values disagree")
        with_values = np.zeros(width, dtype=bool)
        with_values[sorted(self.stored_codes)] = True
        wide = pd.DataFrame(matrix[:, with_values], index=index,
                            columns=[name for name, kept in zip(names, with_values) if kept])
        counts = present

        # A details page cut at a line boundary leaves its last kernel with fewer metrics than any other.
        if width and len(kernel_ids) >= 2:
            metric_count = counts.sum(axis=1)
            usual = int(metric_count[:-1].min())
            if metric_count[-1] < usual:
                raise ParseError(f"{path}: line {int(kernel_lines[-1])}: the last kernel (ID {kernel_ids[-1]}) "
                                 f"has {int(metric_count[-1])} metrics where the others have {usual}, so the file "
                                 f"is truncated; profile again or copy the whole file.")
        return DetailsPage(info=info, wide=wide, bad_units=dict(self.bad_units), seen=set(self.seen),
                           notices=list(self.notices))


class _Rows:
    """Kernel IDs with their row of metric values and presence flags, in arrays that grow by doubling."""

    def __init__(self):
        self.count = 0
        self.ids = np.empty(0, dtype=np.int64)
        self.matrix = np.empty((0, 0))
        self.present = np.empty((0, 0), dtype=bool)

    def append(self, ids: np.ndarray, matrix: np.ndarray, present: np.ndarray) -> None:
        rows, width = matrix.shape
        if self.count + rows > len(self.ids) or width > self.matrix.shape[1]:
            capacity = max(2 * len(self.ids), self.count + rows, 1024)
            columns = max(width, self.matrix.shape[1])
            grown = np.full((capacity, columns), np.nan)
            grown[: self.count, : self.matrix.shape[1]] = self.matrix[: self.count]
            flags = np.zeros((capacity, columns), dtype=bool)
            flags[: self.count, : self.present.shape[1]] = self.present[: self.count]
            identities = np.empty(capacity, dtype=np.int64)
            identities[: self.count] = self.ids[: self.count]
            self.ids, self.matrix, self.present = identities, grown, flags
        end = self.count + rows
        self.ids[self.count:end] = ids
        self.matrix[self.count:end, :width] = matrix
        self.present[self.count:end, :width] = present
        self.count = end

    def arrays(self, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(IDs, values, present), `width` metric columns (those first seen late: NaN / absent before)."""
        ids = self.ids[: self.count]
        if self.matrix.shape[1] == width:
            return ids, self.matrix[: self.count], self.present[: self.count]
        matrix = np.full((self.count, width), np.nan)
        present = np.zeros((self.count, width), dtype=bool)
        known = min(width, self.matrix.shape[1])
        matrix[:, :known] = self.matrix[: self.count, :known]
        present[:, :known] = self.present[: self.count, :known]
        return ids, matrix, present


# --------------------------------------------------------------------------------------------------
# Vectorised helpers


def kernel_id_of(path: Path, number: int, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ParseError(f"{path}: line {number}: kernel ID {text!r} is not an integer; this is not an ncu CSV "
                         f"page as ncu writes it, so give the file exactly as ncu wrote it.") from None


def _ascending(values: np.ndarray) -> bool:
    """Whether `values` never decrease (equal neighbours allowed: a stable sort would not move them)."""
    return bool((values[1:] >= values[:-1]).all())


def first_occurrences(codes: np.ndarray) -> np.ndarray:
    """Index of the first row of each code, for codes numbered in order of first appearance (pd.factorize)."""
    if not len(codes):
        return np.empty(0, dtype=np.int64)
    running = np.maximum.accumulate(codes)
    new = np.empty(len(codes), dtype=bool)
    new[0] = True
    new[1:] = codes[1:] > running[:-1]
    return np.flatnonzero(new)


def _gather_words(words: np.ndarray, start: np.ndarray, length: np.ndarray, count: int) -> np.ndarray:
    """(rows, count) little-endian 8-byte words of each span, bytes past its end zeroed (spans of length 0:
    all zero)."""
    out = np.empty((len(start), count), dtype=np.uint64)
    limit = len(words) - 1
    for w in range(count):
        valid = np.clip(length - 8 * w, 0, 8)
        out[:, w] = words[np.minimum(start + 8 * w, limit)] & _MASKS[valid]
    return out


def _words_and_hash(words: np.ndarray, start: np.ndarray, length: np.ndarray, count: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    gathered = _gather_words(words, start, length, count)
    digest = length.astype(np.uint64)
    for w in range(count):
        digest = (digest ^ gathered[:, w]) * _HASH_MULTIPLIER
        digest ^= digest >> np.uint64(29)
    return gathered, digest


def _digits(a: np.ndarray, start: np.ndarray, length: np.ndarray, most: int) -> tuple[np.ndarray, np.ndarray]:
    """(value, ok) of spans that are 1..`most` decimal digits; value -1 where not."""
    width = int(min(max(length.max(), 1), most)) if len(length) else 1
    columns = np.arange(width)
    index = np.minimum(start[:, None] + columns, len(a) - 1)
    digits = (a[index] - np.uint8(48)).astype(np.int64)
    inside = columns < length[:, None]
    ok = ((digits <= 9) | ~inside).all(axis=1) & (length >= 1) & (length <= most)
    place = np.clip(length[:, None] - 1 - columns, 0, 18)
    value = np.where(inside, digits * _POW10_INT[place], 0).sum(axis=1)
    return np.where(ok, value, -1), ok


def _plain_numbers(words: np.ndarray, start: np.ndarray, length: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(integer of the digits, digits after the point, ok) of values such as "77,214,464" or "1,234.50":
    digits, thousands separators exactly every three digits of the integer part, at most one decimal
    point, at most 15 digits; ok False for anything else ("n/a", "1.2e+06", "-3", "1,2", "")."""
    width = 8 * max(1, min(3, int((length.max() + 7) // 8))) if len(length) else 8
    fits = (length >= 1) & (length <= width)
    raw = _gather_words(words, start, np.where(fits, length, 0), width // 8)
    kind = _CHAR_KIND[raw.view(np.uint8).reshape(len(start), width)]  # 0 past the end, digit, comma, point, other
    digit = kind == _DIGIT
    commas = (kind == _SEPARATOR).sum(axis=1)
    points = kind == _POINT
    n_points = points.sum(axis=1)
    n_digits = digit.sum(axis=1)
    ok = fits & digit[:, 0] & (n_points <= 1) & (n_digits + commas + n_points == length) & (n_digits <= _MAX_DIGITS)
    point = np.where(n_points == 1, points.argmax(axis=1), length)
    if commas.any():
        # Thousands separators: exactly at point - 4, point - 8, ... (and so none elsewhere).
        expected = (point - 1) // 4
        found = np.zeros(len(start), dtype=np.int64)
        rows = np.arange(len(start))
        for k in range(1, 1 + int(expected.max(initial=0))):
            column = point - 4 * k
            found += (column >= 1) & (kind[rows, np.clip(column, 0, width - 1)] == _SEPARATOR)
        ok &= (commas == 0) | ((commas == expected) & (found == expected))
    place = np.clip(n_digits[:, None] - np.cumsum(digit, axis=1), 0, 18)  # digits to the right of each digit
    value = (np.where(digit, raw.view(np.uint8).reshape(len(start), width) - np.uint8(48), 0).astype(np.int64)
             * _POW10_INT[place]).sum(axis=1)
    decimals = np.where(n_points == 1, length - point - 1, 0)
    return value, decimals, ok
