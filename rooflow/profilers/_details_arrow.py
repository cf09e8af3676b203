"""The details page's common blocks, tokenised by pyarrow's CSV reader.

:class:`rooflow.profilers._details.DetailsReader` finds each row's fields with numpy (several passes over
the bytes); pyarrow's C++ tokenizer (installed with pandas) does it in one and converts only the columns
rooflow reads. Blocks of whole lines are tokenised in two worker threads ahead of the one being committed,
and each gives the reader what its numpy path would have given: per metric row the kernel ID, metric code,
exact SI value and line number, per new kernel its description. The result is the same to the bit:

- values go through the same exact conversion (:func:`plain_numbers` gives the digits and decimals that
  :func:`rooflow.profilers._details._plain_numbers` gives, then one rounding); a value it leaves ("n/a", an
  exponent, a text value, a unit that is not a power of ten) goes through
  :func:`rooflow.profilers._text.to_si` once per distinct (metric, unit, text), as the strict path would;
- pyarrow is told the field count of the page's metric rows (13 under ncu 2021's 15-column header with Rule
  columns); the rows it hands back with another count must all be rule rows (read again by pyarrow under the
  full header: the header's fields, empty metric fields), and their lines are skipped in the numbering.

A block is left to the numpy reader whole when it is not in this shape, so errors still name their line: a
line that is not a CSV row (application output, a blank line, a value holding a line break), a handed-back
row that is not a rule row (a short or long row), a quote inside a field that is not doubled, an ID that is
not an integer (a repeated header), a value that would be an error, or anything pyarrow refuses. The last
block of the file always is, so the truncation checks stay the reader's.
"""

from __future__ import annotations

import csv
import math
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rooflow.profilers import metrics as m
from rooflow.profilers._details import _MAX_DIGITS, _NEWLINE, _POW10, _QUOTE, DetailsReader, first_occurrences
from rooflow.profilers._text import to_si

_SAMPLE_LINES = 200
# Blocks tokenised at once: pyarrow's tokenizer runs outside the GIL, so two use both cores of a login node.
WORKERS = 2
# False: the numpy reader alone (the tests compare both on every recorded file).
ARROW = True


class ArrowBlocks:
    """``feed(block, first_line, final)`` like :meth:`DetailsReader.feed`, through pyarrow where it can."""

    def __init__(self, reader: DetailsReader, fields: int):
        import pyarrow as pa
        import pyarrow.compute as compute
        import pyarrow.csv as pacsv

        self.reader, self.fields = reader, fields
        self.pa, self.pacsv, self.compute = pa, pacsv, compute
        self.queue: deque[tuple[bytes, object]] = deque()
        self.stopped = False
        names = [f"c{position}" for position in range(fields)]
        r = reader
        wanted = {"id": r.c_id, "name": r.c_name, "cc": r.c_cc, "grid": r.c_grid, "block": r.c_block,
                  "nvtx": r.c_nvtx, "metric": r.c_metric, "unit": r.c_unit, "value": r.c_value}
        self.column = {key: names[position] for key, position in wanted.items() if position is not None}
        # Every text column is dictionary-encoded by the tokenizer: a 700-byte kernel name that a block repeats
        # (one row per metric, or a kernel launched again) is hashed there, never copied per row, and a value
        # text that a block repeats (zero counters, the same kernel launched again) is converted once.
        types = {key: pa.dictionary(pa.int32(), pa.string()) for key in self.column}
        types.update(id=pa.int64())
        self.names = names
        self.convert = pacsv.ConvertOptions(
            include_columns=list(self.column.values()),
            column_types={self.column[key]: kind for key, kind in types.items() if key in self.column},
            strings_can_be_null=False, quoted_strings_can_be_null=False,
            # UTF-8 is checked after the read, on each dictionary's distinct texts (see
            # _valid_utf8): checked per row, it cost 40% of the tokenizer's time on 700-byte kernel names.
            check_utf8=False)

    @classmethod
    def for_page(cls, reader: DetailsReader, block: bytes) -> ArrowBlocks | None:
        """A feeder for the page whose first block (after the header) is `block`, or None where pyarrow
        cannot help (no metric row among the first lines, or pyarrow missing)."""
        try:
            import pyarrow.csv  # noqa: F401
        except ImportError:  # pragma: no cover - installed with pandas
            return None
        lines = block[: 1 << 20].split(b"\n")[:_SAMPLE_LINES]
        for row in csv.reader(line.decode("utf-8", errors="replace").rstrip("\r") for line in lines[:-1]
                              if line.startswith(b'"')):
            if reader.need <= len(row) <= reader.width and row[reader.c_metric]:
                return cls(reader, len(row))
        return None

    # ----------------------------------------------------------------------------------------------
    # Reading ahead: blocks are tokenised in worker threads (pyarrow and numpy release the GIL), kept in
    # order, and committed to the reader one at a time by :meth:`feed`.

    def ahead(self, blocks: Iterator[tuple[bytes, bool]]) -> Iterator[tuple[bytes, bool]]:
        """`blocks`, each handed to a worker as it is read."""
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="rooflow-ncu")
        waiting: list[tuple[bytes, bool]] = []
        try:
            for block, final in blocks:
                if not final and not self.stopped:
                    self.queue.append((block, pool.submit(self.parse, block)))
                waiting.append((block, final))
                if len(waiting) > WORKERS or final:
                    while waiting:
                        yield waiting.pop(0)
                        if not final:
                            break
        finally:
            self.queue.clear()
            pool.shutdown(wait=True, cancel_futures=True)

    def feed(self, block: bytes, first_line: int, final: bool) -> int:
        if final or not block:
            return self.reader.feed(block, first_line, final)
        if self.queue and self.queue[0][0] is block:
            parsed = self.queue.popleft()[1].result()
        else:
            parsed = self.parse(block)
        try:
            if parsed is None:
                return self.reader.feed(block, first_line, final)
            return self.commit(block, first_line, parsed)
        except Exception:
            self.stopped = True  # the caller reads the rest for the profiler's error lines only
            raise

    def parse(self, block: bytes) -> _Parsed | None:
        """What a block holds, tokenised and converted as far as it can be without the reader's state; None:
        the block is not in the shape this path reads (the numpy reader reads it)."""
        handed_back: list[tuple[int, str]] = []

        def handler(row) -> str:
            handed_back.append((row.number, row.text))
            return "skip"

        pa = self.pa
        try:
            table = self._read(block, self.names, self.convert, handler)
            self._valid_utf8(table)
        except (pa.ArrowException, ValueError):
            return None
        a = np.frombuffer(block, dtype=np.uint8)
        count = int(np.count_nonzero(a == _NEWLINE))  # every block but the last ends with a line break
        rows = table.num_rows
        # Each line is a row pyarrow kept or one it handed back, each handed back a CSV row (so no blank line,
        # line of application output or value holding a line break); every field of the kept rows is
        # quoted: 2 quotes per field, and 2 more per quote inside (NVTX stacks hold some).
        if rows + len(handed_back) != count or any(number is None or not text.startswith('"')
                                                   for number, text in handed_back):
            return None
        quotes = int(np.count_nonzero(a == _QUOTE)) - sum(text.count('"') for _, text in handed_back)
        if quotes != 2 * self.fields * rows and quotes != 2 * self.fields * rows + 2 * sum(
                self._inner_quotes(table.column(self.column[key]))
                for key in ("name", "cc", "grid", "block", "nvtx", "value") if key in self.column):
            return None
        ids = table.column(self.column["id"])
        if ids.null_count:
            return None
        rule_lines = self._rule_rows(sorted(handed_back))
        if rule_lines is None:
            return None
        metric, unit = table.column(self.column["metric"]).chunk(0), table.column(self.column["unit"]).chunk(0)
        units = max(len(unit.dictionary), 1)
        pair = metric.indices.to_numpy().astype(np.int64) * units + unit.indices.to_numpy().astype(np.int64)
        pair_codes, pairs = pd.factorize(pair)
        metric_names, unit_names = metric.dictionary.to_pylist(), unit.dictionary.to_pylist()
        value = table.column(self.column["value"]).chunk(0)
        mantissa, decimals, plain = plain_numbers(self.compute, value.dictionary)  # each distinct text once
        at = value.indices.to_numpy().astype(np.int64)
        return _Parsed(table, count, rule_lines, ids.to_numpy(), pair_codes,
                       [(metric_names[p // units], unit_names[p % units]) for p in pairs.tolist()],
                       mantissa[at], decimals[at], plain[at])

    def _valid_utf8(self, table) -> None:
        """Raises ArrowInvalid where a text column holds bytes that are not UTF-8 (the numpy reader then reads
        the block and replaces them, as it always has): each dictionary once."""
        for column in table.columns:
            for chunk in column.chunks:
                if self.pa.types.is_dictionary(chunk.type):
                    chunk.dictionary.validate(full=True)
                elif self.pa.types.is_string(chunk.type):
                    chunk.validate(full=True)

    def _inner_quotes(self, column) -> int:
        """The quotes inside the fields of a column (a dictionary column: counted once per distinct text)."""
        compute = self.compute
        if not self.pa.types.is_dictionary(column.type):
            return compute.sum(compute.count_substring(column, '"')).as_py() or 0
        total = 0
        for chunk in column.chunks:
            counts = compute.count_substring(chunk.dictionary, '"').to_numpy(zero_copy_only=False)
            if counts.any():
                total += int(counts[chunk.indices.to_numpy(zero_copy_only=False)].sum())
        return total

    def _read(self, data: bytes, names: list[str], convert, handler):
        pacsv = self.pacsv
        return pacsv.read_csv(self.pa.py_buffer(data),
                              read_options=pacsv.ReadOptions(column_names=names, use_threads=False,
                                                             block_size=len(data) + 1),
                              parse_options=pacsv.ParseOptions(invalid_row_handler=handler),
                              convert_options=convert).combine_chunks()

    def _rule_rows(self, handed_back: list[tuple[int, str]]) -> list[int] | None:
        """The lines (in the block) of the rows pyarrow handed back, all rule rows: the header's fields, the
        metric fields empty, quotes only around fields or doubled inside them. None: some are not."""
        if not handed_back:
            return []
        width, compute = self.reader.width, self.compute
        names = [f"c{position}" for position in range(width)]
        strange = []
        text = "\n".join(text for _, text in handed_back) + "\n"
        try:
            table = self._read(text.encode(), names, self.pacsv.ConvertOptions(
                column_types={name: self.pa.string() for name in names}, strings_can_be_null=False,
                quoted_strings_can_be_null=False), lambda row: strange.append(row) or "skip")
        except (self.pa.ArrowException, ValueError):
            return None
        if strange or table.num_rows != len(handed_back):
            return None
        inner = sum(compute.sum(compute.count_substring(table.column(name), '"')).as_py() or 0 for name in names)
        metric = table.column(names[self.reader.c_metric])
        if text.count('"') != 2 * width * table.num_rows + 2 * inner or compute.any(
                compute.not_equal(compute.binary_length(metric), 0)).as_py():
            return None
        return [number for number, _ in handed_back]

    def commit(self, block: bytes, first_line: int, parsed: _Parsed) -> int:
        reader, table, count = self.reader, parsed.table, parsed.count
        keys = [reader.key(metric, unit) for metric, unit in parsed.pairs]
        metric_code = np.array([-1 if k.code is None else k.code for k in keys], dtype=np.int64)
        exponent = np.array([0 if k.exponent is None else k.exponent for k in keys], dtype=np.int64)
        usable = np.array([k.code is not None and k.exponent is not None for k in keys], dtype=bool)
        pair_codes = parsed.pair_codes
        rule = np.array([k.code is None for k in keys], dtype=bool)[pair_codes]
        power = exponent[pair_codes] - parsed.decimals
        fast = parsed.plain & usable[pair_codes] & (np.abs(power) <= 22)
        # The line of each row pyarrow kept: the block's lines less the rule rows it handed back, in order.
        numbers = np.arange(first_line, first_line + count, dtype=np.int64)
        if parsed.rule_lines:
            numbers = np.delete(numbers, np.array(parsed.rule_lines, dtype=np.int64) - 1)

        values = np.full(len(fast), np.nan)
        mantissa = parsed.mantissa[fast].astype(np.float64)
        power = power[fast]
        values[fast] = np.where(power >= 0, mantissa * _POW10[np.clip(power, 0, 22)],
                                mantissa / _POW10[np.clip(-power, 0, 22)])
        stored, kept = fast.copy(), fast.copy()
        bad_units: dict[str, tuple[str, int]] = {}
        other = np.flatnonzero(~fast & ~rule)
        if len(other):  # values the vectorised conversion leaves: n/a, text, other units (once per text)
            outcomes: dict[tuple[int, str], float | str] = {}
            texts = table.column(self.column["value"]).take(self.pa.array(other)).to_pylist()
            for row, text in zip(other.tolist(), texts):
                pair = int(pair_codes[row])
                outcome = outcomes.get((pair, text))
                if outcome is None:
                    outcome = outcomes[pair, text] = _outcome(keys[pair].metric, keys[pair].unit, text)
                if outcome == "error":
                    return reader.feed(block, first_line, False)  # the reader's strict path names the line
                if outcome == "bad unit":
                    bad_units.setdefault(keys[pair].metric, (keys[pair].unit, int(numbers[row])))
                    kept[row] = True
                elif outcome != "text":
                    values[row] = outcome
                    stored[row] = kept[row] = True

        if reader.pending_short is not None:
            reader._raise_short(*reader.pending_short, truncated=False)
        for metric, found in bad_units.items():
            reader.bad_units.setdefault(metric, found)
        metric_rows = np.flatnonzero(~rule)
        registrations = []
        reader.rows = []
        if len(metric_rows):
            ids = parsed.ids[metric_rows]
            # Kernel-start rows: the ID differs from the previous metric row's (the previous block's too).
            starting = np.flatnonzero(ids != np.concatenate(([reader.last_id], ids[:-1])))
            reader.last_id = reader.slow_last_id = int(ids[-1])
            registrations.append((ids[starting], numbers[metric_rows[starting]],
                                  self._descriptions(table, metric_rows[starting])))
            keep = np.flatnonzero(kept)
            reader.rows.append((parsed.ids[keep], metric_code[pair_codes[keep]], values[keep], numbers[keep],
                                stored[keep]))
        reader._register(registrations)
        reader._accumulate()
        return count


    def _descriptions(self, table, rows: np.ndarray) -> np.ndarray:
        """The description codes of the kernels that start at `rows`. Each description column is dictionary
        encoded, so a description is a tuple of small integers: those are numbered per block without touching
        the text, and only each distinct description of the block is looked up (in Python) by its texts."""
        keys = [key for key in DESCRIPTION_KEYS if key in self.column]
        chunks = [table.column(self.column[key]).chunk(0) for key in keys]
        indices = [chunk.indices.to_numpy(zero_copy_only=False)[rows].astype(np.int64) for chunk in chunks]
        combined = np.zeros(len(rows), dtype=np.int64)
        radixes = [max(len(chunk.dictionary), 1) for chunk in chunks]
        if math.prod(radixes) < 2**62:  # a block's few distinct texts: one mixed-radix number, numbered once
            for index, radix in zip(indices, radixes):
                combined = combined * radix + index
            combined, _ = pd.factorize(combined)
        else:
            for index, radix in zip(indices, radixes):  # renumbered each step so it cannot overflow
                combined, _ = pd.factorize(combined * radix + index)
        firsts = first_occurrences(combined)
        texts = [chunk.dictionary.take(self.pa.array(index[firsts])).to_pylist()
                 for index, chunk in zip(indices, chunks)]
        described = dict(zip(keys, texts))
        known = self.reader.description_codes
        tuples = list(zip(*texts))
        found = [known.get(key) for key in tuples]  # most were seen in an earlier block
        if None in found:
            for unique, key in enumerate(tuples):
                if found[unique] is None:
                    found[unique] = self.reader.description(key, *(described[name][unique] if name in described
                                                                   else "" for name in DESCRIPTION_KEYS))
        return np.array(found, dtype=np.int64)[combined]


DESCRIPTION_KEYS = ("name", "cc", "grid", "block", "nvtx")


def _outcome(metric: str, unit: str, text: str) -> float | str:
    """What the strict path makes of a metric row's value: a number (NaN: n/a), "text" (a text value of a
    metric rooflow does not use: skipped), "bad unit", or "error"."""
    try:
        si = to_si(text, unit)
    except ValueError:
        return "error" if m.is_used_metric(metric) else "text"
    except KeyError:
        return "bad unit"
    return math.nan if si is None else si


@dataclass
class _Parsed:
    """One block as pyarrow read it: the kept rows' table, the block's line count, the lines (in the block,
    1-based) of the rule rows it handed back, and per kept row its kernel ID, (metric, unit) code (into `pairs`)
    and value as digits, decimals and whether it is a plain decimal."""
    table: object
    count: int
    rule_lines: list[int]
    ids: np.ndarray
    pair_codes: np.ndarray
    pairs: list[tuple[str, str]]
    mantissa: np.ndarray
    decimals: np.ndarray
    plain: np.ndarray


# A plain decimal as :func:`rooflow.profilers._details._plain_numbers` accepts one: digits, thousands separators
# every three digits of the integer part (its first group may have 4), at most one decimal point.
PLAIN = r"^(?:[0-9]{1,4}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]*)?$"


def plain_numbers(compute, values) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(integer of the digits, digits after the point, ok) of a pyarrow string array, as
    :func:`rooflow.profilers._details._plain_numbers` gives them (ok: a plain decimal of at most 15 digits)."""
    ok = compute.match_substring_regex(values, PLAIN)
    stripped = compute.replace_substring(values, ",", "")
    point = compute.find_substring(stripped, ".").to_numpy().astype(np.int64)
    length = compute.binary_length(stripped).to_numpy().astype(np.int64)
    digits = compute.replace_substring(stripped, ".", "")
    ok = ok.to_numpy(zero_copy_only=False) & (compute.binary_length(digits).to_numpy() <= _MAX_DIGITS)
    import pyarrow as pa

    mantissa = compute.cast(compute.if_else(pa.array(ok), digits, "0"), "int64").to_numpy()
    decimals = np.where(point >= 0, length - point - 1, 0)
    return mantissa, decimals, ok


def feeder(reader: DetailsReader, first_block: bytes, blocks: Iterator[tuple[bytes, bool]]
           ) -> tuple[Callable[[bytes, int, bool], int], Iterator[tuple[bytes, bool]]]:
    """(the function that reads the page's blocks, the blocks it reads): through pyarrow where it helps, else
    the reader's own."""
    arrow = ArrowBlocks.for_page(reader, first_block) if ARROW else None
    if arrow is None:
        return reader.feed, blocks
    return arrow.feed, arrow.ahead(blocks)
