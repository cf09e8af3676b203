"""Streaming reader of Nsight Compute's ``--csv --page raw``: one wide row per kernel, any size.

The raw page holds one row per kernel and several hundred columns (rooflow's H100 recordings: 309 columns,
2.4 kB a row; a B200 page: 475). Reading it as text and splitting it with the ``csv`` module cost 16 bytes of
memory per byte of file and 0.7 s per MB. Here pyarrow's CSV reader (a well-kept C++ tokenizer, already
installed with pandas) streams the rows in batches of a few MB, every column as text, and each batch's
values become SI floats in one vectorised pass (:func:`rooflow.profilers._details._plain_numbers`: exact, the
digits as an integer M and the value M × 10^e with one rounding, as ``float(Decimal(text) * factor)``).
Values it leaves (``n/a``, an exponent, a text value, a unit whose factor is not a power of ten) take
:func:`rooflow.profilers._text.to_si` once per distinct (value, unit).

Memory: a column whose value is the same for every kernel (the ``device__attribute_*`` columns: most of a
raw page) is kept as one number, not one per kernel (a sparse column whose fill value is that number), so
what the result holds grows with the kernels times the columns that vary; of those, a metric rooflow derives
nothing from is held in float32 where that holds each of its values exactly (integer counters below 2^24:
37 of the 49 varying columns of the H100 recordings), the metrics rooflow adds up stay float64. The columns
are converted :data:`COLUMNS_AT_ONCE` at a time, so the conversion's temporaries stay small.

This reader is strict by refusing: anything it does not expect (a row with another number of fields, a
second header, a non-integer ID, a repeated ID, a line that is not a CSV row, a value rooflow needs that is
not a number) raises :class:`Unusual`, and the caller reads the file with the whole-file parser, whose error
names the line.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from rooflow.profilers import metrics as m
from rooflow.profilers._details import _POW10, _plain_numbers, _power_of_ten
from rooflow.profilers._text import read_blocks, to_si

BATCH_BYTES = 8 << 20


class Unusual(Exception):
    """The file is not in the shape this reader handles: read it with the whole-file parser."""


def read_raw_page(path: Path, header: list[str], header_line: int, descriptive: set[str],
                  nvtx_prefix: str) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, tuple[str, int]], set[str]]:
    """(info, wide, bad_units, seen) of a raw page whose header is line `header_line` (1-based)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    column = {name: position for position, name in enumerate(header)}
    if len(column) != len(header) or "ID" not in column or "Kernel Name" not in column:
        raise Unusual("duplicate or missing columns")
    metric_positions = [p for p, name in enumerate(header) if name not in descriptive]
    metric_names = [header[p] for p in metric_positions]
    nvtx = next((name for name in header if name.startswith(nvtx_prefix)), None)
    names = [f"c{p}" for p in range(len(header))]
    parse = pacsv.ParseOptions(ignore_empty_lines=False)
    convert = pacsv.ConvertOptions(column_types={f"c{p}": pa.string() for p in range(len(header))},
                                   strings_can_be_null=False, quoted_strings_can_be_null=False)
    ids = _Integers()
    texts = {key: _Texts() for key in ("name", "cc", "grid_size", "block_size", "nvtx_stack")}
    sources = {"name": "Kernel Name", "cc": "CC", "grid_size": "Grid Size", "block_size": "Block Size",
               "nvtx_stack": nvtx}
    columns = [_Column() for _ in metric_names]  # per metric: its values, batch after batch
    first = np.full(len(metric_names), -1, dtype=np.int64)  # the first row holding a value, per metric
    units: list[str] | None = None
    exponents = None
    cache: dict[tuple[str, str], float | None | str] = {}
    bad: dict[str, tuple[str, int]] = {}
    row = 0  # data rows read so far
    try:
        # Blocks of whole lines read here, one at a time: pyarrow's own streaming reader reads a Python file
        # object far ahead of the batches it has handed out (most of a 200 MB file).
        skip = header_line  # the lines before the units row
        for block in read_blocks(path, BATCH_BYTES):
            if skip:
                lines = block.count(b"\n") + (not block.endswith(b"\n"))
                if skip >= lines:
                    skip -= lines
                    continue
            read = pacsv.ReadOptions(skip_rows=skip, column_names=names, block_size=1 << 20, use_threads=False)
            skip = 0
            table = pacsv.read_csv(pa.py_buffer(block), read_options=read, parse_options=parse,
                                   convert_options=convert).combine_chunks()
            if not row:  # room for the rows the file holds at this block's bytes per row (never touched: free)
                capacity = _rows_estimate(path, len(block), table.num_rows)
            del block
            pa.default_memory_pool().release_unused()  # the last block's buffers, which its allocator would keep
            for batch in table.to_batches():
                if units is None:
                    if not batch.num_rows or batch.column(column["ID"])[0].as_py() != "":
                        raise Unusual("no units row")
                    units = [batch.column(p)[0].as_py() for p in metric_positions]
                    exponents = np.array([_exponent(unit) for unit in units], dtype=np.int64)
                    batch = batch.slice(1)
                count = batch.num_rows
                if not count:
                    continue
                try:
                    batch_ids = np.array(batch.column(column["ID"]).to_numpy(zero_copy_only=False), dtype=np.int64)
                except (ValueError, OverflowError):
                    raise Unusual("an ID that is not an integer") from None
                if (np.diff(batch_ids) <= 0).any() or (ids.rows and batch_ids[0] <= ids.array[ids.rows - 1]):
                    raise Unusual("kernel IDs out of order or repeated")
                ids.add(batch_ids, capacity)
                for key, source in sources.items():
                    texts[key].add(batch.column(column[source]) if source in column else None, count, capacity)
                parts, firsts = _convert(batch, metric_positions, metric_names, units, exponents, cache, bad,
                                         header_line + 2 + row)
                for j, part in enumerate(parts):
                    columns[j].add(part, count, capacity)
                unseen = (first < 0) & (firsts >= 0)
                first[unseen] = firsts[unseen] + row
                row += count
    except pa.ArrowInvalid as error:
        raise Unusual(str(error)) from None
    if units is None or not row:
        raise Unusual("no kernel rows")
    index = pd.Index(ids.values(), name="id")
    cc = np.asarray(texts["cc"].values(), dtype=object)
    cc[(cc == "") | pd.isna(cc)] = None  # as the whole-file parser: None where the page has no CC
    info = pd.DataFrame({"name": texts["name"].values(), "line": header_line + 2 + np.arange(row, dtype=np.int64),
                         "cc": cc, "grid_size": texts["grid_size"].values(),
                         "block_size": texts["block_size"].values(),
                         "nvtx_stack": texts["nvtx_stack"].values(strip=True)}, index=index)
    # Columns in the order pandas' from_records gives the per-kernel dictionaries of the whole-file parser:
    # by the first kernel that holds a value, then by position.
    kept = sorted(np.flatnonzero(first >= 0).tolist(), key=lambda j: (first[j], j))
    data = {}
    for j in kept:  # the frame keeps the arrays as they are
        data[metric_names[j]] = columns[j].values(row)
        columns[j] = None
    wide = pd.DataFrame(data, index=index, copy=False)
    pa.default_memory_pool().release_unused()  # the batches' buffers, which pyarrow's allocator would keep
    return info, wide, bad, set(metric_names)


class _Texts:
    """A text column of the kernels, each distinct text held once (kernel names repeat)."""

    def __init__(self):
        self.codes: dict[str, int] = {}
        self.kernels = _Integers()

    def add(self, column, count: int, capacity: int) -> None:
        import pyarrow.compute as pc

        if column is None:
            self.kernels.add(np.full(count, self.codes.setdefault("", len(self.codes)), dtype=np.int64), capacity)
            return
        encoded = pc.dictionary_encode(column)
        if hasattr(encoded, "combine_chunks"):
            encoded = encoded.combine_chunks()
        mapping = np.array([self.codes.setdefault(text, len(self.codes)) for text in encoded.dictionary.to_pylist()],
                           dtype=np.int64)
        self.kernels.add(mapping[encoded.indices.to_numpy(zero_copy_only=False)], capacity)

    def values(self, strip: bool = False) -> pd.Categorical:
        texts = [text.strip() if strip else text for text in self.codes]
        codes, uniques = pd.factorize(np.array(texts, dtype=object))
        return pd.Categorical.from_codes(codes[self.kernels.values()], categories=pd.Index(uniques, dtype=object))


class _Integers:
    """Integers appended batch by batch into one array with room for the whole file (as _Column)."""

    def __init__(self):
        self.array = np.empty(0, dtype=np.int64)
        self.rows = 0

    def add(self, values: np.ndarray, capacity: int) -> None:
        end = self.rows + len(values)
        if end > len(self.array):
            grown = np.empty(max(capacity, end, 2 * len(self.array)), dtype=np.int64)
            grown[: self.rows] = self.array[: self.rows]
            self.array = grown
        self.array[self.rows:end] = values
        self.rows = end

    def values(self) -> np.ndarray:
        return self.array[: self.rows]


class _Column:
    """One metric's values over the batches, written as they come into one array with room for the whole file
    (pages never written are never resident). Joining per-batch parts at the end held every column twice, and
    the parts left the heap full of holes the allocator kept: at 1 GB, 170 MB of the peak. The result is what
    joining the parts gave: a number that every batch holds for every kernel is held once (a sparse column);
    else float32 where every batch's values were float32 (see _compact) and each batch's one number is exact in
    it, float64 otherwise."""

    def __init__(self):
        self.array: np.ndarray | None = None
        self.runs: list[tuple[float | None, int]] = []  # batches of one number each, before any array came
        self.rows = 0
        self.narrow = True

    def add(self, part: np.ndarray | float | None, count: int, capacity: int) -> None:
        if isinstance(part, np.ndarray):
            self.narrow &= part.dtype == np.float32
        elif part is not None:
            self.narrow &= float(np.float32(part)) == part
        if self.array is None:
            if not isinstance(part, np.ndarray):
                self.runs.append((part, count))
                self.rows += count
                return
            self.array = self._room(max(capacity, self.rows + count))
            at = 0
            for value, run in self.runs:
                self.array[at:at + run] = np.nan if value is None else value
                at += run
            self.runs = []
        if self.rows + count > len(self.array) or (not self.narrow and self.array.dtype == np.float32):
            grown = self._room(max(self.rows + count, len(self.array) * (2 if self.rows + count > len(self.array)
                                                                         else 1)))
            grown[: self.rows] = self.array[: self.rows]
            self.array = grown
        self.array[self.rows:self.rows + count] = np.nan if part is None else part
        self.rows += count

    def _room(self, rows: int) -> np.ndarray:
        return np.empty(rows, dtype=np.float32 if self.narrow else np.float64)

    def values(self, rows: int) -> np.ndarray | pd.arrays.SparseArray:
        if self.array is not None:
            return self.array[:rows]
        numbers = {value for value, _ in self.runs}
        if len(numbers) == 1 and None not in numbers:
            (value,) = numbers
            return pd.arrays.SparseArray(np.full(rows, value), fill_value=value)
        return np.concatenate([np.full(run, np.nan if value is None else value,
                                       dtype=np.float32 if self.narrow else np.float64) for value, run in self.runs])


def _rows_estimate(path: Path, block_bytes: int, rows: int) -> int:
    """The rows of a file whose first block of `block_bytes` holds `rows` (a compressed file: its own size, so
    the arrays grow by doubling past it)."""
    try:
        size = path.stat().st_size
    except OSError:
        size = block_bytes
    return int(size / max(block_bytes, 1) * rows * 1.02) + rows + 1024


def _exponent(unit: str) -> int:
    exponent = _power_of_ten(unit)
    return -999 if exponent is None else exponent


def _numbers(strings) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(integer of the digits, digits after the point, ok) of each text of a large_string array."""
    _, offsets_buffer, data_buffer = strings.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64, count=len(strings) + 1, offset=8 * strings.offset)
    size = int(offsets[-1])
    data = np.zeros(size + 32, dtype=np.uint8)  # room for the 8-byte words read past the last text
    if size:
        data[:size] = np.frombuffer(data_buffer, dtype=np.uint8, count=size)
    words = np.ndarray((len(data) - 7,), dtype="<u8", buffer=data, strides=(1,))
    start, length = offsets[:-1], np.diff(offsets)
    parts = [_plain_numbers(words, start[at:at + 65536], length[at:at + 65536])
             for at in range(0, len(start), 65536)]
    if not parts:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), np.empty(0, dtype=bool)
    return tuple(np.concatenate(column) for column in zip(*parts))


# Metric columns converted at once: the conversion's temporaries (a dozen arrays of kernels × columns) stay a
# few MB, whatever the page's width.
COLUMNS_AT_ONCE = 48


def _convert(batch, positions: list[int], names: list[str], units: list[str], exponents: np.ndarray,
             cache: dict, bad: dict[str, tuple[str, int]], first_line: int) -> tuple[list, np.ndarray]:
    """(per metric column: None, one number or its values; the first row holding a value or -1) of one batch,
    :data:`COLUMNS_AT_ONCE` columns at a time."""
    parts, firsts = [], []
    for at in range(0, len(positions), COLUMNS_AT_ONCE):
        group = slice(at, at + COLUMNS_AT_ONCE)
        some, first = _convert_columns(batch, positions[group], names[group], units[group], exponents[group], cache,
                                       bad, first_line)
        parts += some
        firsts.append(first)
    return parts, np.concatenate(firsts) if firsts else np.empty(0, dtype=np.int64)


def _convert_columns(batch, positions: list[int], names: list[str], units: list[str], exponents: np.ndarray,
                     cache: dict, bad: dict[str, tuple[str, int]], first_line: int) -> tuple[list, np.ndarray]:
    """(values, present) of one batch: kernels × metric columns, SI floats; present where the whole-file
    parser stores a value (a number or n/a), False for a text value or a unit it cannot convert."""
    import pyarrow as pa
    import pyarrow.compute as pc

    count, width = batch.num_rows, len(positions)
    strings = pa.concat_arrays([batch.column(p).combine_chunks() if isinstance(batch.column(p), pa.ChunkedArray)
                                else batch.column(p) for p in positions])  # column after column
    # Values repeat (a column of a device attribute holds one value): each distinct text is read once.
    encoded = pc.dictionary_encode(strings)
    dictionary = encoded.dictionary.cast(pa.large_string())
    texts_at = encoded.indices.to_numpy(zero_copy_only=False)
    mantissa, decimals, ok = _numbers(dictionary)
    exponent = np.repeat(exponents, count)
    power = exponent - decimals[texts_at]
    ok = ok[texts_at] & (exponent != -999) & (np.abs(power) <= 22)
    mantissa = mantissa[texts_at].astype(np.float64)
    values = np.where(power >= 0, mantissa * _POW10[np.clip(power, 0, 22)],
                      mantissa / _POW10[np.clip(-power, 0, 22)])
    del mantissa, power, exponent
    present = ok
    left = np.flatnonzero(~ok)
    if len(left):
        # Values the vectorised pass leaves: once per distinct (column, text), not once per kernel.
        pair = (left // count) * len(dictionary) + texts_at[left]
        pairs, firsts, inverse = np.unique(pair, return_index=True, return_inverse=True)
        outcome = np.empty(len(pairs))
        stored = np.zeros(len(pairs), dtype=bool)
        for k, (code, first) in enumerate(zip(pairs.tolist(), firsts.tolist())):
            j, text = divmod(code, len(dictionary))
            text = dictionary[text].as_py()
            key = (text, units[j])
            result = cache.get(key, cache)
            if result is cache:
                try:
                    result = to_si(text, units[j])
                except ValueError:
                    result = "text"
                except KeyError:
                    result = "unit"
                cache[key] = result
            if result == "text":
                if m.is_used_metric(names[j]):
                    raise Unusual(f"{names[j]} is not a number")  # the whole-file parser names the line
            elif result == "unit":
                bad.setdefault(names[j], (units[j], first_line + int(left[first]) % count))
            else:
                outcome[k] = math.nan if result is None else result
                stored[k] = True
        values[left] = outcome[inverse]
        present[left] = stored[inverse]
    values = np.where(present, values, np.nan).reshape(width, count)
    present = present.reshape(width, count)
    # Per column: None (no value here), one number (the same for every kernel here), or the values.
    constant = (values == values[:, :1]).all(axis=1)
    has, first = present.any(axis=1), present.argmax(axis=1)
    parts = [None if not has[j] else float(values[j, 0]) if constant[j] else _compact(values[j], names[j])
             for j in range(width)]
    return parts, np.where(has, first, -1)


def _compact(values: np.ndarray, name: str) -> np.ndarray:
    """One batch of a varying column: float32 where that holds every value exactly (most counters of a raw page
    are integers below 2^24) and rooflow adds nothing up from the metric (its sums stay float64); else float64."""
    if not m.is_used_metric(name):
        narrow = values.astype(np.float32)
        if np.array_equal(narrow, values, equal_nan=True):  # compared in float64: exact, or not taken
            return narrow
    return values.copy()
