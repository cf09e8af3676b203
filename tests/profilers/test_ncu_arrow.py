"""The details page through pyarrow's CSV reader (rooflow.profilers._details_arrow): the same result as the
numpy reader, to the bit, on every recorded details page; the same errors, naming the same lines."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as compute
import pytest
from support import DETAILS_FILES, _old_row, _same_result, _short_rows_file, assert_one_sentence, real

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
