"""`rooflow estimate` prints the arithmetic intensities the report plots where nothing was measured — an eager
step's (FLOPs over the unfused bytes) and a compiled step's (over the fusion-aware bytes) — and the compulsory
floor's beside them, each labelled."""

from __future__ import annotations

import pytest

from rooflow import cli
from rooflow.estimate import estimate


def test_the_printed_intensities_are_the_eager_and_fused_ones_and_the_floor_is_labelled(capsys):
    totals = estimate("alexnet", 2, "fp32", "training").totals
    assert cli.main(["estimate", "alexnet", "--batch", "2", "--mode", "training"]) == 0
    header, _, line = capsys.readouterr().out.splitlines()[:3]

    def column(title: str) -> str:  # right-aligned under its title
        end = header.index(title) + len(title)
        return line[end - len(title) - 1:end].strip()

    eager, ai, floor = column("eager AI"), column("fused AI"), column("floor AI")
    unfused = totals["total_flops"] / totals["unfused_bytes"]
    fused = totals["total_flops"] / totals["fused_bytes"]
    floor_intensity = totals["total_flops"] / totals["min_bytes"]
    assert float(eager.replace(",", "")) == pytest.approx(unfused, rel=0.03)  # shown to 2-3 significant digits
    assert float(ai.replace(",", "")) == pytest.approx(fused, rel=0.03)
    assert float(floor.replace(",", "")) == pytest.approx(floor_intensity, rel=0.03)
    # alexnet training at batch 2: far enough apart that no two columns can be confused
    assert unfused * 1.1 < fused and floor_intensity > 2 * fused
