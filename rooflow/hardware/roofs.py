"""Roofline geometry: a slanted memory roof (FLOP/s = bandwidth × intensity) meeting a flat compute roof
(FLOP/s = peak) at the ridge (intensity = peak / bandwidth), and where a point sits under it.

Williams, Waterman, Patterson, "Roofline: an insightful visual performance model", CACM 52(4), 2009.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def ridge_intensity(peak_flops_per_second: float, bytes_per_second: float) -> float:
    """FLOP/byte where the memory roof meets the compute roof."""
    return peak_flops_per_second / bytes_per_second


def attainable_flops_per_second(intensity: float, peak_flops_per_second: float, bytes_per_second: float) -> float:
    """min(peak, bandwidth × intensity): the roof above a point at this arithmetic intensity."""
    return min(peak_flops_per_second, bytes_per_second * intensity)


def bound(intensity: float, peak_flops_per_second: float, bytes_per_second: float) -> str:
    return "memory-bound" if intensity < ridge_intensity(peak_flops_per_second, bytes_per_second) else "compute-bound"


def roof_polyline(peak_flops_per_second: float, bytes_per_second: float,
                  x_min: float, x_max: float) -> tuple[np.ndarray, np.ndarray]:
    """The roof as ONE connected line: (x_min, bw·x_min) → ridge → (x_max, peak). The ridge is a vertex
    (clipped to the range when it falls outside), so the kink is drawn exactly where it is."""
    ridge = ridge_intensity(peak_flops_per_second, bytes_per_second)
    xs = [x_min]
    if x_min < ridge < x_max:
        xs.append(ridge)
    xs.append(x_max)
    xs = np.array(xs, dtype=float)
    ys = np.minimum(peak_flops_per_second, bytes_per_second * xs)
    return xs, ys


def intensity_range(intensities, ridges, pad_decades: float = 1.0) -> tuple[float, float]:
    """A log-x range that holds every point and every ridge with `pad_decades` on each side."""
    values = [v for v in list(intensities) + list(ridges) if v and v > 0 and math.isfinite(v)]
    if not values:
        return 0.01, 1e4
    low, high = min(values), max(values)
    return 10 ** (math.floor(math.log10(low)) - pad_decades), 10 ** (math.ceil(math.log10(high)) + pad_decades)


GIGA = 1e9

CACHE_LEVELS = ("l2", "l1")


def invalid_cache_roofs(ceilings: dict[str, Any], datasheet_dram_bytes_per_second: float | None = None
                        ) -> dict[str, dict[str, Any]]:
    """The cache roofs of a measure_ceilings result that are failed measurements, {level: why, with the
    numbers}: a cache is faster than the DRAM behind it, so a cache roof at or below the measured DRAM roof
    (or the datasheet's, where given) measured DRAM or launch overhead, not the cache. Levels the result
    already marks invalid (`invalid_roofs`) are returned as marked. Such a roof is never drawn."""
    marked = dict(ceilings.get("invalid_roofs") or {})
    out: dict[str, dict[str, Any]] = {}
    floors = [(ceilings.get("dram_bytes_per_second"), "measured"), (datasheet_dram_bytes_per_second, "datasheet")]
    for level in CACHE_LEVELS:
        if level in marked:
            out[level] = marked[level]
            continue
        value = ceilings.get(f"{level}_bytes_per_second")
        if not value:
            continue
        for floor, source in floors:
            if floor and value <= floor:
                out[level] = {
                    "bytes_per_second": value, "dram_bytes_per_second": floor, "dram_source": source,
                    "reason": (f"the measured {level.upper()} roof ({value / GIGA:.0f} GB/s) is at or below the "
                               f"{source} DRAM roof ({floor / GIGA:.0f} GB/s): its microbenchmark measured DRAM "
                               "or launch overhead, not the cache (a working set that did not stay in the cache, "
                               "or kernels too short to time), so it is a failed measurement and is not drawn"),
                }
                break
    return out

