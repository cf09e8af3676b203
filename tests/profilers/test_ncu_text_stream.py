"""ncu's text output read as it streams (never the whole file as a list of lines): the same kernels, values
and line numbers as the whole-file parser, whatever the block size."""

from __future__ import annotations

import pandas as pd
import pytest
from support import ANOUSHKA, real

from rooflow.profilers import ncu


@pytest.mark.parametrize("relative", [f"{ANOUSHKA}/{gpu}/vgg11/ncu-log-vgg11.txt" for gpu in ("a100", "v100")])
def test_streamed_text_reads_as_the_whole_file_parser(relative, monkeypatch):
    path = real(relative)
    whole = ncu._parse_whole(path)
    monkeypatch.setattr(ncu, "BLOCK_BYTES", 3_000)  # many blocks, each cut at a line break
    monkeypatch.setattr(ncu._TextKernels, "CHUNK", 7)  # values in many small arrays, kernels across them
    monkeypatch.setattr(ncu, "_parse_whole", None)  # streamed, not read whole
    streamed = ncu._parse_file(path)
    assert streamed.source_format == whole.source_format == "ncu-text"
    assert len(streamed.info) > 100
    pd.testing.assert_frame_equal(streamed.info, whole.info)
    pd.testing.assert_frame_equal(streamed.wide, whole.wide)
    assert streamed.bad_units == whole.bad_units and streamed.seen == whole.seen


EDGE_HEADERS = [
    "  void k<1, 2>(int, float) (128, 1, 1)x(256, 1, 1), Context 1, Stream 7, Device 0, CC 8.0",
    "  void k<1, 2>(int, float), 2023-Oct-29 22:56:31, Context 1, Stream 7",
    "  k (1, 1, 1)x(2, 2, 2), 2023-Oct-29 22:56:31, Context 1, Stream 7  ",
    "  (1, 1, 1)x(2, 2, 2), Context 1, Stream 7",  # the launch alone: it is the name
    "  , 2023-Oct-29 22:56:31, Context 1, Stream 7",  # the time alone: it is the name
    "  k, Context 5, Stream 3x, Context 1, Stream 7",  # ", Context" inside the name
    "  k, Context 1, Stream 7, Device 0",  # a tail that does not match
    "  k (1, 1)x(2, 2, 2), Context 1, Stream 7",
    "  k (1, 1, 1)x(2, 2, 2)y, Context 1, Stream 7",
    "  k, 2023-Oct-29 22:56, Context 1, Stream 7",
    "   k, Context 1, Stream 7", "  \u00a0k, Context 1, Stream 7", "  k\u00a0, Context 12, Stream 0 \t",
    "  , Context 1, Stream 7", "  k,Context 1, Stream 7", "  x, Context 1, Stream 7, Device 1, CC 9.0",
]


def test_kernel_lines_are_read_as_the_header_pattern_reads_them():
    """_kernel_header finds the parts of a kernel line from its end; the result is the pattern's, on every kernel
    line of the recorded logs and on lines built to trip it."""
    lines = list(EDGE_HEADERS)
    for gpu in ("a100", "v100"):
        for model in ("vgg11", "vgg13", "vgg19"):
            path = real(f"{ANOUSHKA}/{gpu}/{model}/ncu-log-{model}.txt")
            lines += [line for line in ncu.read_text(path).splitlines() if "Context " in line]
    assert len(lines) > 500
    for line in lines:
        match = ncu._KERNEL_HEADER.match(line)
        expected = match and (match.group("name"), match.group("grid"), match.group("block"), match.group("cc"))
        assert ncu._kernel_header(line) == expected, line


def test_a_metric_twice_in_a_kernel_keeps_its_first_value(tmp_path, monkeypatch):
    lines = ncu.read_text(real(f"{ANOUSHKA}/a100/vgg11/ncu-log-vgg11.txt")).splitlines()
    at = next(i for i, line in enumerate(lines) if line.lstrip().startswith("dram__bytes.sum"))
    first = ncu._parse_whole(real(f"{ANOUSHKA}/a100/vgg11/ncu-log-vgg11.txt")).wide["dram__bytes.sum"].iloc[0]
    lines.insert(at + 1, lines[at].rsplit(" ", 1)[0] + " 99.99")
    path = tmp_path / "twice.txt"
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(ncu._TextKernels, "CHUNK", 3)
    parsed = ncu._parse_file(path)
    assert parsed.wide["dram__bytes.sum"].iloc[0] == first != 99.99e6


# Rows the fast path of a text table must leave to _table_row and _TextKernels.store: n/a, an exponent, a
# unit that is not a power of ten or unknown, a value wider than its column, names with spaces,
# a unit with a space, a blank row, a misaligned row, a separator-like row, and a metric twice in a kernel.
ODD_ROWS = [
    "    dram__bytes.sum                                   Mbyte                         n/a",
    "    dram__sectors.sum                                sector                      1.5e+03",
    "    gpu__time_duration.sum                          msecond                        1,234.5678",
    "    sm__cycles_elapsed.avg.per_second             cycle/usecond                      876.95",
    "    l1tex__t_bytes.sum                               furlong                             12",
    "    Elapsed Cycles                                    cycle                          4,593",
    "    Memory Throughput                            Kbyte/s econd                      12.5",
    "    ",
    "    smsp__sass_thread_inst_executed_op_ffma_pred_on.sum inst 7",
    "    smsp__x.sum                                         ---                          9",
    "    dram__bytes.sum                                   Mbyte                         99.99",
    "    lts__t_sectors.sum                                sector   12345678901234567890123",
]


def _text_log(tmp_path, name: str, rows: list[str]) -> object:
    lines = ncu.read_text(real(f"{ANOUSHKA}/a100/vgg11/ncu-log-vgg11.txt")).splitlines()
    at = next(i for i, line in enumerate(lines) if line.lstrip().startswith("dram__bytes.sum"))
    lines[at + 1: at + 1] = rows
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def _both_paths(path, monkeypatch):
    monkeypatch.setattr(ncu, "TEXT_FAST", False)
    try:
        slow = ncu._parse_file(path)
    except Exception as error:  # noqa: BLE001 - the same error either way
        slow = error
    monkeypatch.setattr(ncu, "TEXT_FAST", True)
    try:
        fast = ncu._parse_file(path)
    except Exception as error:  # noqa: BLE001
        fast = error
    return slow, fast


@pytest.mark.parametrize("relative", [f"{ANOUSHKA}/{gpu}/{model}/ncu-log-{model}.txt" for gpu in ("a100", "v100")
                                      for model in ("vgg11", "vgg13", "vgg19")] + ["odd rows", "new text"])
def test_the_text_tables_fast_path_reads_as_the_row_by_row_path(relative, tmp_path, monkeypatch):
    """TEXT_FAST (the common row read inline, each distinct value converted once): the same kernels, values,
    units and lines as _table_row + _TextKernels.store on every recorded log and on rows it must leave to them."""
    from test_ncu import NEW_TEXT

    if relative == "odd rows":
        path = _text_log(tmp_path, "odd.txt", ODD_ROWS)
        monkeypatch.setattr(ncu._TextKernels, "CHUNK", 5)  # chunks begun by both paths
        monkeypatch.setattr(ncu, "_TEXT_CACHE", 3)  # the cache emptied as it fills
    elif relative == "new text":
        path = tmp_path / "new.txt"
        path.write_text(NEW_TEXT)
    else:
        path = real(relative)
    slow, fast = _both_paths(path, monkeypatch)
    assert not isinstance(slow, Exception), slow
    assert len(fast.info) >= 2 and fast.wide.notna().any().any()
    pd.testing.assert_frame_equal(fast.info, slow.info)
    pd.testing.assert_frame_equal(fast.wide, slow.wide)
    assert fast.bad_units == slow.bad_units and fast.seen == slow.seen
    if relative == "odd rows":
        assert fast.bad_units and "Elapsed Cycles" in fast.seen


@pytest.mark.parametrize("row", ["    dram__bytes.sum                                   Mbyte                      abc",
                                 "    dram__bytes.sum", "    lts__t_bytes.sum       byte        1234,567"])
def test_the_fast_path_leaves_a_bad_row_to_the_row_by_row_paths_error(row, tmp_path, monkeypatch):
    path = _text_log(tmp_path, "bad.txt", ["    dram__sectors.sum      sector     12", row])
    slow, fast = _both_paths(path, monkeypatch)
    assert isinstance(slow, ncu.ParseError) and str(fast) == str(slow) and "line " in str(fast)


@pytest.mark.parametrize("late", ["nothing", "an error line", "a capture", "a CSV header after a damaged row"])
def test_a_text_log_parsed_as_it_is_checked_reads_as_checked_first(late, tmp_path, monkeypatch):
    """_text_along (one pass: the text parsed as the blocks are checked) gives what the two passes gave (the
    whole file checked for a CSV header and the profiler's own lines, then parsed), whatever a later block holds."""
    lines = ncu.read_text(real(f"{ANOUSHKA}/a100/vgg11/ncu-log-vgg11.txt")).splitlines()
    if late == "an error line":
        lines.append("==ERROR== The application returned an error code (1).")
    elif late == "a capture":
        lines.append("Generated: /tmp/report1.qdstrm")
    elif late == "a CSV header after a damaged row":
        at = next(i for i, line in enumerate(lines) if line.lstrip().startswith("dram__bytes.sum"))
        lines.insert(at + 1, "    dram__bytes.sum        Mbyte        abc")
        lines += ['"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Section Name",'
                  '"Metric Name","Metric Unit","Metric Value"',
                  '"0","1","python","h","k","1","7","S","dram__bytes.sum","byte","12"']
    path = tmp_path / "log.txt"
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(ncu, "BLOCK_BYTES", 5_000)
    outcomes = []
    for along in (False, True):
        try:
            parsed = ncu._parse_file(path, along=along)
            outcomes.append((parsed.source_format, parsed.info.to_dict(), parsed.wide.to_dict(), parsed.seen))
        except ncu.ParseError as error:
            outcomes.append(str(error))
    assert outcomes[0] == outcomes[1]
    assert isinstance(outcomes[0], str) == (late == "an error line"), outcomes[0]
