"""`rooflow estimate` prints as its arithmetic intensity the fusion-aware one the report plots (FLOPs over the
fused bytes), the compulsory floor's beside it and labelled."""

from __future__ import annotations

import pytest

from rooflow import cli
from rooflow.estimate import estimate


def test_the_printed_intensity_is_the_fused_one_and_the_floor_is_labelled(capsys):
    totals = estimate("alexnet", 2, "fp32", "training").totals
    assert cli.main(["estimate", "alexnet", "--batch", "2", "--mode", "training"]) == 0
    header, _, line = capsys.readouterr().out.splitlines()[:3]

    def column(title: str) -> str:  # right-aligned under its title
        end = header.index(title) + len(title)
        return line[end - len(title) - 1:end].strip()

    ai, floor = column("AI F/B"), column("floor AI")
    fused = totals["total_flops"] / totals["fused_bytes"]
    floor_intensity = totals["total_flops"] / totals["min_bytes"]
    assert float(ai.replace(",", "")) == pytest.approx(fused, rel=0.03)  # shown to 2-3 significant digits
    assert float(floor.replace(",", "")) == pytest.approx(floor_intensity, rel=0.03)
    assert floor_intensity > 2 * fused  # so the two cannot be confused
    assert totals["min_bytes"] < totals["fused_bytes"]  # so the floor's intensity is the larger
