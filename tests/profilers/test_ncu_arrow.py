"""The details page through pyarrow's CSV reader (rooflow.profilers._details_arrow): the same result as the
numpy reader, to the bit, on every recorded details page; the same errors, naming the same lines."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as compute
import pytest
from support import (
    DEEPCAM,
    DETAILS_FILES,
    REAL,
    _old_row,
    _same_result,
    _short_rows_file,
    assert_one_sentence,
    real,
)

from rooflow.errors import ParseError
from rooflow.profilers import _details, _details_arrow, ncu
from rooflow.profilers.ncu import aggregate_ncu


@pytest.fixture
def committed(monkeypatch):
    """Small blocks, so that a recording spans many; counts the blocks the pyarrow path read."""
    monkeypatch.setattr(ncu, "BLOCK_BYTES", 20_000)
    blocks = []
    commit = _details_arrow.ArrowBlocks.commit

    def counting(self, block, first_line, parsed):
        blocks.append(first_line)
        return commit(self, block, first_line, parsed)

    monkeypatch.setattr(_details_arrow.ArrowBlocks, "commit", counting)
    return blocks


def _numpy_only(path, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(_details_arrow, "ARROW", False)
        return aggregate_ncu(path)


@pytest.mark.parametrize("relative", DETAILS_FILES)
def test_pyarrow_and_numpy_readers_agree_on_every_recorded_details_page(relative, committed, monkeypatch):
    path = real(relative)
    through_arrow = aggregate_ncu(path)
    assert len(committed) >= 5  # most blocks went through pyarrow, not back to the numpy reader
    _same_result(through_arrow, _numpy_only(path, monkeypatch))


def test_rule_rows_odd_values_and_units_read_alike(tmp_path, committed, monkeypatch):
    """ncu 2021's 13-field metric rows under 15 columns, rule rows with doubled quotes, and per kernel values
    the vectorised conversion leaves (n/a, an exponent, a binary prefix, a text value, an unknown unit)."""
    path, lines = _short_rows_file(tmp_path, kernels=600)
    odd = [("lts__t_bytes.sum", "Kibyte", "2"), ("l1tex__t_bytes.sum", "byte", "1.5e+03"),
           ("sm__cycles_elapsed.avg", "cycle", "n/a"), ("launch__cache_config", "", "CachePreferNone"),
           ("sm__warps_launched.sum", "warp", "12,34"), ("sm__foo.sum", "furlong", "3")]
    for kernel_id in range(0, 600, 7):
        metric, unit, value = odd[kernel_id % len(odd)]
        lines.append(_old_row(kernel_id, metric, unit, value))
    path.write_text("\n".join(lines) + "\n")
    through_arrow = aggregate_ncu(path)
    assert len(committed) >= 5
    assert through_arrow.totals["kernels"] == 600
    _same_result(through_arrow, _numpy_only(path, monkeypatch))


@pytest.mark.parametrize(("change", "message"), [
    (lambda row: row.replace('"2,048"', '"2,0x8"'), r"line 1204: dram__bytes_write.sum is '2,0x8', not a number"),
    (lambda row: row + ',"","","extra"', r"line 1204: a CSV row with 16 fields under a header of 15"),
    (lambda row: row[: row.rindex(',"', 0, row.rindex(',"'))], r"line 1204: a CSV row with 11 fields where ncu "
                                                                r"writes at least 12"),
    (lambda row: '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"', r"line 1204: a second CSV header"),
])
def test_an_error_in_a_block_pyarrow_reads_names_its_line(tmp_path, committed, change, message):
    path, lines = _short_rows_file(tmp_path, kernels=600)
    assert '"2,048"' in lines[1203]
    lines[1203] = change(lines[1203])
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ParseError, match=message) as error:
        aggregate_ncu(path)
    assert_one_sentence(str(error.value), path)
    assert committed  # blocks before the bad one went through pyarrow


def test_plain_numbers_match_the_numpy_conversion():
    texts = ["0", "7", "007", "12.", "1.5", "1,234.50", "0,123", "000,123", "12,345,678.25", "123456789012345",
             "1234567890123456", "1,2", "1234,567", "1,2345", "12,34", "1.2.3", ".5", "-3", "+3", "1e5", "1.5e+03",
             "n/a", "", " 1", "1 ", "١٢", "1,000,000,000,000", "99999999999999.9", "1,234,5", "1,,234"]
    mantissa, decimals, ok = _details_arrow.plain_numbers(compute, pa.array(texts))
    data = "".join(texts).encode() + bytes(32)
    lengths = np.array([len(text.encode()) for text in texts], dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    words = np.ndarray((len(data) - 7,), dtype="<u8", buffer=data, strides=(1,))
    expected_mantissa, expected_decimals, expected_ok = _details._plain_numbers(words, starts, lengths)
    assert ok.tolist() == expected_ok.tolist()
    assert ok.sum() == 13  # "1234,567" too, as the numpy conversion reads it
    assert mantissa[ok].tolist() == expected_mantissa[ok].tolist()
    assert decimals[ok].tolist() == expected_decimals[ok].tolist()


def test_bytes_that_are_not_utf8_are_read_as_the_numpy_reader_reads_them(tmp_path, committed, monkeypatch):
    """pyarrow checks UTF-8 after its read (dictionaries, values): a block with a kernel name or a value whose
    bytes are not UTF-8 goes to the numpy reader, which replaces them; the other blocks stay with pyarrow."""
    path, lines = _short_rows_file(tmp_path, kernels=600)
    data = ("\n".join(lines) + "\n").encode()
    first = _old_row(300, "dram__bytes_read.sum", "Mbyte", "301,000.5").encode()  # kernel 300's first row
    assert first in data
    # A byte no UTF-8 text holds, in the kernel's name.
    path.write_bytes(data.replace(first, first.replace(b"volta_sgemm", b"volta\xffsgemm"), 1))
    through_arrow = aggregate_ncu(path)
    assert len(committed) >= 5
    assert through_arrow.kernels["name"][300] == "volta\ufffdsgemm_128x64_nt"
    _same_result(through_arrow, _numpy_only(path, monkeypatch))
    value = _old_row(450, "dram__bytes_write.sum", "byte", "2,048").encode()
    path.write_bytes(data.replace(value, value.replace(b'"2,048"', b'"2,04\xff"'), 1))
    with pytest.raises(ParseError, match=r"dram__bytes_write.sum is '2,04\ufffd', not a number"):
        aggregate_ncu(path)



# --------------------------------------------------------------------------------------------------
# Per-metric files (NERSC out.<metric>, ncu 2020: 12 columns, one row per kernel, 700-byte kernel names)

PER_METRIC_FILES = sorted((REAL / DEEPCAM / "PT-fp32-O1-AdamW-fw-733731").glob("out.*"))
PER_METRIC_HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Kernel Time","Context","Stream",'
                     '"Section Name","Metric Name","Metric Unit","Metric Value"')


def _outcome_of(path, monkeypatch, **switches):
    with monkeypatch.context() as patch:
        for name, value in switches.items():
            patch.setattr(_details_arrow, name, value)
        try:
            return aggregate_ncu(path)
        except ParseError as error:
            return str(error)


def _readers_agree(path, monkeypatch):
    """The pyarrow path's result (or error) is the numpy reader's, to the bit."""
    through_arrow, numpy_only = _outcome_of(path, monkeypatch), _outcome_of(path, monkeypatch, ARROW=False)
    if isinstance(through_arrow, str) or isinstance(numpy_only, str):
        assert through_arrow == numpy_only
    else:
        _same_result(through_arrow, numpy_only)
    return through_arrow


@pytest.mark.parametrize("path", PER_METRIC_FILES, ids=lambda path: path.name)
def test_every_recorded_per_metric_file_reads_alike_through_pyarrow_and_numpy(path, committed, monkeypatch):
    """All 12 recorded per-metric files in 20 kB blocks (~27 rows each, cut after any row)."""
    assert len(PER_METRIC_FILES) == 12
    result = _readers_agree(path, monkeypatch)
    assert not isinstance(result, str) and result.totals["kernels"] == 797
    assert len(committed) >= 20


def _per_metric_lines(kernels: int) -> list[str]:
    name = "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<{}>(at::TensorIterator&)"
    return ["==PROF== Connected to process 11 (/usr/bin/python3)", PER_METRIC_HEADER] + [
        f'"{kernel_id}","11","python","h","{name.format(kernel_id % 7)}","2020-Jun-10 02:09:46","1","7",'
        f'"Command line profiler metrics","dram__bytes.sum","Kbyte","{kernel_id % 13},{kernel_id % 1000:03d}.5"'
        for kernel_id in range(kernels)]


# Each: (what, a change to one row's line): rows not in the common shape (their block goes to the numpy reader or
# is read by pyarrow with its checks), values converted otherwise, IDs written otherwise, fields read as they are.
ODD_ROWS = [
    ("a doubled quote in a name", lambda line: line.replace("kernel<128", 'kernel<""128""')),
    ("a line break in a name", lambda line: line.replace("kernel<128", "kernel<\n128")),
    ("a carriage return before the line feed", lambda line: line + "\r"),
    ("an application's output line", lambda line: "step is 6\n" + line),
    ("a blank line", lambda line: "\n" + line),
    ("a rule row of the same width", lambda line: line.replace('"dram__bytes.sum","Kbyte"', '"",""')),
    ("a short row", lambda line: line[: line.rindex(',"')]),
    ("an unquoted field", lambda line: line.replace('"11"', "11", 1)),
    ("bytes that are not UTF-8 in a name", lambda line: line.replace("gpu_kernel", "gpu\udcffkernel")),
    ("a value n/a", lambda line: line[: line.rindex(',"')] + ',"n/a"'),
    ("a value with an exponent", lambda line: line[: line.rindex(',"')] + ',"1.5e+03"'),
    ("an ID with leading zeros", lambda line: line.replace('"', '"00', 1)),
    ("an ID of 9 digits", lambda line: line.replace('"', '"100000', 1)),
    ("an ID with a sign", lambda line: line.replace('"', '"+', 1)),
    ("an empty field", lambda line: line.replace('"h"', '""')),
    ("a field holding a comma", lambda line: line.replace('"h"', '"h,h"')),
]


@pytest.mark.parametrize(("what", "change"), ODD_ROWS, ids=[what for what, _ in ODD_ROWS])
def test_an_odd_row_of_a_per_metric_file_reads_alike_through_pyarrow_and_numpy(tmp_path, committed, monkeypatch,
                                                                              what, change):
    lines = _per_metric_lines(600)
    lines[300] = change(lines[300])
    path = tmp_path / "out.dram__bytes.sum"
    path.write_bytes("\n".join(lines).encode("utf-8", errors="surrogateescape") + b"\n")
    _readers_agree(path, monkeypatch)
    assert len(committed) >= 3  # the blocks around it stayed with pyarrow


def test_a_per_metric_file_reads_alike_at_every_block_size(tmp_path, committed, monkeypatch):
    """Blocks of several sizes, each cut after a different row: the same result as the numpy reader's."""
    path = tmp_path / "out.dram__bytes.sum"
    path.write_text("\n".join(_per_metric_lines(400)) + "\n")
    expected = _outcome_of(path, monkeypatch, ARROW=False)
    for size in (1_000, 4_321, 9_999, 20_000):
        monkeypatch.setattr(ncu, "BLOCK_BYTES", size)
        _same_result(_outcome_of(path, monkeypatch), expected)
    assert len(committed) >= 10
