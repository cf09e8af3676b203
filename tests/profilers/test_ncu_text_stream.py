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
