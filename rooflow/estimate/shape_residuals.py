"""What a library's heuristics do by shape, as measured: the kernel model's residuals near a shape.

cuBLAS and cuDNN pick a kernel per call from the shape (tile size, split-K, Winograd or implicit GEMM, the
transform kernels around it), by heuristics and, with ``cudnn.benchmark``, by timing candidates. The kernel
model (rooflow.estimate.kernel_calibration) prices the hardware — tiles, waves over the SMs, mainloop fill,
power — with a few parameters per GPU; what it cannot follow is which kernel the library picked for that
shape. Those picks are deterministic functions of the shape on one architecture (one library build), and the
measurements show them: close shapes take close times (in the public NeuSight data set, the nearest measured
neighbour of a GEMM differs by 3–10% in time per FLOP, while the model's residuals spread by 20–45%).

So a GPU's calibration keeps, per class, each measured shape's residual — log(measured / modelled seconds)
— in a log2 feature space of the shape (:func:`features`). A new shape takes the inverse-distance weighted
mean of its :data:`NEIGHBOURS` nearest measured shapes' residuals, shrunk toward zero when they are far
(:data:`PRIOR_WEIGHT`: a shape beyond the measured ones gets the model alone). The residuals carry to another
GPU of the **same architecture** whole (same kernels, same heuristics: an A100 80GB takes the A100 40GB's).

Across architectures only cuDNN's convolution picks carry (:data:`ACROSS_ARCHITECTURES`, :func:`pooled`): which
algorithm and transform kernels its autotuner takes for a shape (Winograd or implicit GEMM, the im2col and
offset kernels of a small image, a 1×1's GEMM) is largely shared by Pascal, Volta and Turing, while each
board's level (its power limit, its library's SGEMM efficiency) is not: each measured GPU's residuals less
their median, pooled. Held one GPU out this took the V100's convolutions from 65% to 86% within ±25% and the
P100's from 50% to 61%, the T4's and P4's unchanged; cuBLAS's GEMM picks did not carry (the A100's GEMMs from
83% to 64%, the V100's from 82% to 60% with the others' residuals: its tiles and split-K by shape are each
architecture's own). Within a family a full-power board's carry (rooflow.estimate.kernel_calibration.
family_calibration): held one GPU out, the P4's GEMMs went from 52% to 68% within ±25% with the P100's residuals,
the T4's from 69% to 74% with the V100's (they share the volta_sgemm kernels, though they picked the same one for
27% of shapes). A power-limited board's do not: the V100's GEMMs fell from 87% to 76% with the T4's, and the
P100's — the 75 W P4 ran the same maxwell_sgemm kernel for 88% of the shapes both measured — went from 85% to 80%
with the P4's once the model tiled cuBLAS's output the way its kernels do (60% to 72% before, when the P4's
residuals had been correcting the model's transposed Pascal bmm tile).
A GEMM residual is read where a call fills the board's SMs as the measured shape filled its own
(:func:`in_waves_of`): held one GPU out, the T4's GEMMs went from 76% to 80% within ±25% with the V100's residuals so
placed, the P4's from 76% to 79% with the P100's.
On an architecture where cuDNN has no forward Winograd (Hopper), the 3×3 stride-1 shapes, which the measured
GPUs ran as Winograd, are left out (:func:`without_winograd_shapes`): with them, the H100's VGG16 convolutions
(implicit GEMM) were 10 of 13 within ±25%, 12 without.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

NEIGHBOURS = 8
# Inverse-distance weights 1 / (distance + DISTANCE_OFFSET), distance in octaves summed over the features;
# PRIOR_WEIGHT is a zero residual's weight: at 1/PRIOR_WEIGHT − DISTANCE_OFFSET octaves from all measured
# shapes the correction is halved.
DISTANCE_OFFSET = 0.25
PRIOR_WEIGHT = 0.25
# Categorical features (kernel size, stride, batched or not) are scaled so that a different value is as far
# as this many octaves: shapes of another kernel size or stride run other kernels.
CATEGORY_OCTAVES = 3.0
CLASSES = ("gemm", "convolution")
ACROSS_ARCHITECTURES = ("convolution",)  # classes whose measured shapes carry to another architecture (pooled)
BLOCK = 64  # queries per distance block (64 × 24,000 points × 4 bytes: 6 MB, within the L3: 1.75x faster than 512)


def features(rows: pd.DataFrame, op_class: str) -> np.ndarray:
    """The shape of each row of the measurement layout (rooflow.estimate.kernel_calibration.load_measurements)
    in log2 units: GEMM (nn.Linear on (B, M, N) → K, torch.bmm (B, M, N) @ (B, N, K)) as output rows, output
    columns, reduction depth, batch count and batched-or-not; convolution as output pixels (N·Ho·Wo),
    output channels, input channels, output size, kernel size and stride."""
    if op_class == "gemm":
        b, m, n, k = (rows[c].to_numpy(float) for c in ("B", "M", "N", "K"))
        batched = (rows["operator"].to_numpy() == "bmm").astype(float)
        rows_out = np.where(batched > 0, m, b * m)
        count = np.where(batched > 0, b, 1.0)
        return np.column_stack([np.log2(rows_out), np.log2(k), np.log2(n), np.log2(count),
                                batched * CATEGORY_OCTAVES])
    if op_class == "convolution":
        b, cin, cout, kernel, size, stride, padding = (rows[c].to_numpy(float) for c in (
            "B", "Input_Channel", "Output_Channel", "Kernel_Szie", "Input_Size", "Stride", "Padding"))
        out = np.maximum(np.floor((size + 2 * padding - kernel) / stride) + 1, 1.0)
        return np.column_stack([np.log2(b * out * out), np.log2(cout), np.log2(cin), np.log2(out),
                                kernel * CATEGORY_OCTAVES, stride * CATEGORY_OCTAVES])
    raise ValueError(f"no shape features for op class {op_class!r}")


@dataclass(frozen=True)
class ShapeResiduals:
    """One GPU's measured shapes of one class (``points``, :func:`features`) and their residuals."""

    points: np.ndarray
    residuals: np.ndarray

    def correction(self, query: np.ndarray) -> np.ndarray:
        """The factor (measured / modelled seconds) to apply to each row of ``query`` (features)."""
        if not len(self.points) or not len(query):
            return np.ones(len(query))
        k = min(NEIGHBOURS, len(self.points))
        points = self.points.astype(np.float32).T  # features × points: one contiguous row per feature
        result = np.empty(len(query))
        for start in range(0, len(query), BLOCK):  # distances of BLOCK queries × points, in float32
            block = query[start:start + BLOCK].astype(np.float32)
            distance = np.abs(block[:, :1] - points[0])
            for feature in range(1, points.shape[0]):
                distance += np.abs(block[:, feature:feature + 1] - points[feature])
            nearest = np.argpartition(distance, k - 1, axis=1)[:, :k]
            weight = 1.0 / (np.take_along_axis(distance, nearest, axis=1) + DISTANCE_OFFSET)
            result[start:start + BLOCK] = (weight * self.residuals[nearest]).sum(axis=1) / (weight.sum(axis=1)
                                                                                            + PRIOR_WEIGHT)
        return np.exp(result)

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        # half precision: log2 shapes up to 2^16 to 0.01 octave, residuals to 0.1%
        return {f"{prefix}/points": self.points.astype(np.float16),
                f"{prefix}/residuals": self.residuals.astype(np.float16)}

    @classmethod
    def from_arrays(cls, arrays, prefix: str) -> ShapeResiduals:
        return cls(np.asarray(arrays[f"{prefix}/points"], float), np.asarray(arrays[f"{prefix}/residuals"], float))


def measured_residuals(rows: pd.DataFrame, modelled_seconds: np.ndarray, op_class: str) -> ShapeResiduals:
    """The residuals of ``rows`` (one GPU, one class) against the model's seconds for them."""
    residuals = np.log(rows["seconds"].to_numpy(float) / modelled_seconds)
    return ShapeResiduals(features(rows, op_class), residuals)


def in_waves_of(residuals: ShapeResiduals, measured_sms: int, sm_count: int) -> ShapeResiduals:
    """GEMM residuals measured on a GPU of ``measured_sms`` SMs, placed where the same waves fall on one of
    ``sm_count``: each shape's parallel extent (a batched product's count, another product's output rows)
    scaled by ``sm_count / measured_sms`` — a T4 (40 SMs) runs a batch of 10 products as full as a V100 (80 SMs)
    runs one of 20. What carries is the model's miss by how full the SMs are, not cuBLAS's pick: the P4 and the
    P100 ran one bmm kernel for over 99% of their calls, yet held out the P4's bmm calls went from 85% to 89%
    within ±25% with the P100's residuals so placed (the T4's from 75% to 79% with the V100's), and a vote of the
    donor's five nearest kernel names agrees with the board's own no more often placed so (T4 bmm 25%, nn.Linear
    33% -> 37%). Not convolutions: cuDNN's autotuner (``cudnn.benchmark``) times its algorithms on the board, and
    pooled over boards their residuals carry better unscaled (held one GPU out, scaled: 0.3-1.7 points fewer
    convolutions within ±25% on each board)."""
    if not measured_sms or not sm_count or measured_sms == sm_count or not len(residuals.points):
        return residuals
    points = residuals.points.copy()
    batched = points[:, 4] > 0  # features(): column 4 flags a batched product
    points[batched, 3] += np.log2(sm_count / measured_sms)
    points[~batched, 0] += np.log2(sm_count / measured_sms)
    return ShapeResiduals(points, residuals.residuals)


def without_winograd_shapes(residuals: ShapeResiduals) -> ShapeResiduals:
    """Convolution residuals less those of 3×3 stride-1 shapes (:func:`features`' kernel and stride columns),
    which cuDNN runs as Winograd where it has a forward Winograd kernel: what they say of its picks does not
    carry to an architecture it runs them on otherwise."""
    kernel, stride = residuals.points[:, 4] / CATEGORY_OCTAVES, residuals.points[:, 5] / CATEGORY_OCTAVES
    keep = ~(np.isclose(kernel, 3.0) & np.isclose(stride, 1.0))
    return ShapeResiduals(residuals.points[keep], residuals.residuals[keep])


def pooled(parts: list[ShapeResiduals]) -> ShapeResiduals:
    """Several GPUs' measured shapes of one class, each GPU's residuals less their median (its level: power
    limit, library efficiency — what the model of another GPU sets from its own datasheet), together: what
    the library's picks do by shape wherever they run."""
    return ShapeResiduals(np.vstack([p.points for p in parts]),
                          np.concatenate([p.residuals - np.median(p.residuals) for p in parts]))
