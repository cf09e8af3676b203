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
    monkeypatch.setattr(ncu, "_parse_whole", None)  # streamed, not read whole
    streamed = ncu._parse_file(path)
    assert streamed.source_format == whole.source_format == "ncu-text"
    assert len(streamed.info) > 100
    pd.testing.assert_frame_equal(streamed.info, whole.info)
    pd.testing.assert_frame_equal(streamed.wide, whole.wide)
    assert streamed.bad_units == whole.bad_units and streamed.seen == whole.seen
