"""What tokenising a details page costs, per engine: the floor under rooflow's ncu reader (issue 24).

    .venv/bin/python benchmarks/bench_csv_tokenizers.py                      # every CSV format, 40 MB each
    POLARS_MAX_THREADS=1 .venv/bin/python benchmarks/bench_csv_tokenizers.py  # + polars, if installed

Each format's file is built as ``bench_ncu_aggregate.py`` builds it and cut into the 4 MB blocks of whole lines
the reader reads; each way of reading a block runs over the same blocks several times and the table shows the
best CPU time per byte of the process (all threads: polars tokenises in its own pool), so the load of a shared
machine moves it less than a wall time. The blocks are read again and again, so they sit in the CPU's caches:
in the reader, where each block is new, every row costs more (see benchmarks/README.md).

- ``pyarrow``: ``pyarrow.csv.read_csv`` as ``rooflow.profilers._details_arrow`` calls it (the ID as int64, the
  columns rooflow reads dictionary-encoded, UTF-8 unchecked, told the metric rows' field count so that rule rows
  are handed back), and with one string column only (the tokenizer alone: what reading fewer columns could save
  at most);
- ``polars`` (not a rooflow dependency; measured where installed): ``polars.read_csv`` of ID, metric, unit and
  value, then with the kernel description columns as well (what the reader needs of each kernel);
- ``numpy``: the line-break and quote counts the reader checks each block with, and the positions of every
  quote (the first step of a pre-scan that would find the fields without a tokenizer).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ncu_aggregate import build  # noqa: E402

FORMATS = ["details", "details-rules", "per-metric"]
BLOCK = 4 << 20


def blocks_of(path: Path) -> tuple[list[str], int, list[bytes]]:
    """(the header's fields, the fields of a metric row, the file's 4 MB blocks of whole lines after the header)."""
    import csv

    data = path.read_bytes()
    at = data.index(b'"ID",')
    end = data.index(b"\n", at)
    header = next(csv.reader([data[at:end].decode()]))
    fields = len(next(csv.reader([data[end + 1:data.index(b"\n", end + 1)].decode()])))
    body, blocks, position = data[end + 1:], [], 0
    while position < len(body):
        cut = body.rfind(b"\n", position, position + BLOCK) + 1 if position + BLOCK < len(body) else len(body)
        blocks.append(body[position:cut])
        position = cut
    return header, fields, blocks[:-1]  # the last one is short


def readers(header: list[str], fields: int) -> dict[str, object]:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    position = {name: index for index, name in enumerate(header)}
    keys = ["ID", "Metric Name", "Metric Unit", "Metric Value"]
    described = keys + [name for name in ("Kernel Name", "CC", "Grid Size", "Block Size") if name in position]
    # As rooflow reads: pyarrow told the metric rows' field count (13 under ncu 2021's 15 columns with Rule
    # columns), so only the rule rows are handed back.
    names = [f"c{index}" for index in range(fields)]

    def arrow(columns: list[str], types: dict) -> object:
        convert = pacsv.ConvertOptions(include_columns=[names[position[c]] for c in columns],
                                       column_types={names[position[c]]: t for c, t in types.items()},
                                       strings_can_be_null=False, quoted_strings_can_be_null=False,
                                       check_utf8=False)
        parse = pacsv.ParseOptions(invalid_row_handler=lambda row: "skip")  # rule rows: handed back

        def read(block: bytes) -> object:
            return pacsv.read_csv(pa.py_buffer(block), read_options=pacsv.ReadOptions(
                column_names=names, use_threads=False, block_size=len(block) + 1), parse_options=parse,
                convert_options=convert)
        return read

    dictionary = pa.dictionary(pa.int32(), pa.string())
    found = {
        "pyarrow, as rooflow reads": arrow(described, {c: dictionary for c in described} | {"ID": pa.int64()}),
        "pyarrow, one string column": arrow(["ID"], {"ID": pa.string()}),
    }
    try:
        import polars as pl
    except ImportError:
        pass
    else:
        schema = {f"column_{index + 1}": pl.String for index in range(len(header))}
        schema[f"column_{position['ID'] + 1}"] = pl.Int64

        def polars(columns: list[str]) -> object:
            wanted = [f"column_{position[c] + 1}" for c in columns]
            return lambda block: pl.read_csv(block, has_header=False, schema=schema, columns=wanted,
                                             missing_columns="insert")
        found[f"polars {pl.__version__}, ID metric unit value"] = polars(keys)
        found[f"polars {pl.__version__}, + kernel descriptions"] = polars(described)

    def counts(block: bytes) -> tuple[int, int]:
        a = np.frombuffer(block, dtype=np.uint8)
        return int(np.count_nonzero(a == 10)), int(np.count_nonzero(a == 34))

    found["numpy, line-break and quote counts"] = counts
    found["numpy, every quote's position"] = lambda block: np.flatnonzero(np.frombuffer(block, np.uint8) == 34)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--format", nargs="+", choices=FORMATS, default=FORMATS)
    parser.add_argument("--size-mb", type=float, default=40.0)
    parser.add_argument("--rounds", type=int, default=5, help="rounds over the blocks; the best counts")
    args = parser.parse_args()
    print(f"{'format':14} {'method':44} {'ns/byte':>8} {'ms/block':>9}")
    with tempfile.TemporaryDirectory() as scratch:
        for fmt in args.format:
            path = Path(scratch) / f"{fmt}.csv"
            build(path, int(args.size_mb * 1e6), fmt)
            header, fields, blocks = blocks_of(path)
            size = sum(len(block) for block in blocks)
            for method, read in readers(header, fields).items():
                best = float("inf")
                for _ in range(args.rounds):
                    start = time.process_time()
                    for block in blocks:
                        read(block)
                    best = min(best, time.process_time() - start)
                print(f"{fmt:14} {method:44} {best / size * 1e9:>8.2f} {best / len(blocks) * 1e3:>9.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
