import math

import numpy as np
import pytest

from rooflow.hardware.roofs import (
    attainable_flops_per_second,
    bound,
    intensity_range,
    ridge_intensity,
    roof_polyline,
)


def test_ridge_is_peak_over_bandwidth():
    # A100 SXM4 40GB: 19.5 TFLOP/s FP32, 1555 GB/s
    assert ridge_intensity(19.5e12, 1555e9) == pytest.approx(12.54, rel=1e-3)


def test_polyline_is_one_connected_line_with_the_ridge_as_a_vertex():
    peak, bw = 1e12, 1e11  # ridge at 10 FLOP/B
    xs, ys = roof_polyline(peak, bw, 0.01, 1000)
    assert xs.tolist() == [0.01, 10.0, 1000.0]
    assert ys.tolist() == pytest.approx([1e9, 1e12, 1e12])
    # slope 1 on log-log left of the ridge, 0 right of it
    slope_left = (math.log10(ys[1]) - math.log10(ys[0])) / (math.log10(xs[1]) - math.log10(xs[0]))
    slope_right = (math.log10(ys[2]) - math.log10(ys[1])) / (math.log10(xs[2]) - math.log10(xs[1]))
    assert slope_left == pytest.approx(1.0)
    assert slope_right == pytest.approx(0.0)


def test_polyline_without_ridge_in_range_stays_on_one_roof():
    xs, ys = roof_polyline(1e12, 1e11, 100, 1000)  # all right of the ridge
    assert np.allclose(ys, 1e12) and len(xs) == 2


def test_attainable_and_bound():
    assert attainable_flops_per_second(2, 1e12, 1e11) == pytest.approx(2e11)
    assert attainable_flops_per_second(50, 1e12, 1e11) == pytest.approx(1e12)
    assert bound(2, 1e12, 1e11) == "memory-bound"
    assert bound(50, 1e12, 1e11) == "compute-bound"


def test_intensity_range_holds_points_and_ridges():
    low, high = intensity_range([0.5, 30], [12.5])
    assert low <= 0.05 and high >= 1000
