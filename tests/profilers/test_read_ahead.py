"""The file's blocks read in a thread of their own (rooflow.profilers._text.read_ahead, used for the CSV pages):
the same blocks in the same order, the reading thread's exceptions raised in the caller's thread after the
blocks before them, no thread left behind when the caller stops early or fails, and the same result."""

from __future__ import annotations

import threading
import time

import pytest
from support import DETAILS_FILES, _same_result, real

from rooflow.errors import ParseError
from rooflow.profilers import ncu
from rooflow.profilers._text import read_ahead, read_blocks
from rooflow.profilers.ncu import aggregate_ncu


def _reading_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "rooflow-read"]


def test_the_blocks_come_in_order():
    path = real(DETAILS_FILES[0])
    assert list(read_ahead(read_blocks(path, 3_000), depth=2)) == list(read_blocks(path, 3_000))
    assert not _reading_threads()


@pytest.mark.parametrize("error", [ParseError("x.csv: the gzip data is corrupt"), KeyboardInterrupt()])
def test_an_exception_in_the_reading_thread_is_raised_after_the_blocks_before_it(error):
    def blocks():
        yield b"a\n"
        yield b"b\n"
        raise error

    got = []
    with pytest.raises(type(error)) as raised:
        for block in read_ahead(blocks(), depth=1):
            got.append(block)
    assert got == [b"a\n", b"b\n"] and raised.value is error
    assert not _reading_threads()


def test_a_caller_that_stops_early_stops_the_reading_thread():
    closed = threading.Event()

    def endless():
        try:
            while True:
                yield b"x\n" * 1000
        finally:
            closed.set()

    blocks = read_ahead(endless(), depth=2)
    assert next(blocks) == b"x\n" * 1000
    start = time.monotonic()
    blocks.close()
    assert time.monotonic() - start < 5 and closed.is_set() and not _reading_threads()


def test_a_caller_that_fails_stops_the_reading_thread(tmp_path, monkeypatch):
    path = tmp_path / "ncu.csv"
    text = real(DETAILS_FILES[0]).read_bytes()
    if text[:2] == b"\x1f\x8b":
        import gzip

        text = gzip.decompress(text)
    path.write_bytes(text + b'"7","not","a","row"\n' * 3)  # a short row: the reader stops at it
    monkeypatch.setattr(ncu, "BLOCK_BYTES", 5_000)
    with pytest.raises(ParseError):
        aggregate_ncu(path)
    assert not _reading_threads()


@pytest.mark.parametrize("relative", DETAILS_FILES[:3])
def test_a_page_read_ahead_reads_as_one_read_in_its_parsing_thread(relative, monkeypatch):
    path = real(relative)
    monkeypatch.setattr(ncu, "BLOCK_BYTES", 20_000)
    ahead = aggregate_ncu(path)
    monkeypatch.setattr(ncu, "READ_AHEAD", False)
    _same_result(ahead, aggregate_ncu(path))


def test_memory_is_released_with_or_without_glibc(monkeypatch):
    import ctypes

    from rooflow.profilers._text import release_memory

    release_memory()

    def missing(name):
        raise OSError(name)

    monkeypatch.setattr(ctypes, "CDLL", missing)
    release_memory()  # not glibc: pyarrow's pool alone


@pytest.mark.parametrize(("relative", "ahead"), [
    (DETAILS_FILES[0], True), (DETAILS_FILES[-1], True),  # details pages (the per-metric one: output first)
    ("h100-rooflow/resnet50-b64-fp32-training-ncu-raw-no-sass.csv", False),  # the raw page reads the file itself
    ("anoushka21-cloudml/proj1/a100/vgg11/ncu-log-vgg11.txt", False)])  # a text log: its parser holds the GIL
def test_only_a_details_page_is_read_ahead(relative, ahead, monkeypatch):
    started = []

    def counting(blocks, depth=2):
        started.append(relative)
        return read_ahead(blocks, depth)

    monkeypatch.setattr(ncu, "BLOCK_BYTES", 50_000)  # more than one block: something to read ahead
    monkeypatch.setattr(ncu, "read_ahead", counting)
    assert aggregate_ncu(real(relative)).totals["kernels"] > 0
    assert bool(started) == ahead and not _reading_threads()
