"""Predicted time of a step on a device: a roofline per op, summed.

For every op row of ``Estimate.ops``: ``max(flops / peak, bytes / bandwidth)``, where ``peak`` is the
device's roof for the op's ``compute_precision`` when the op is a matmul/convolution/attention (TF32 or
FP16/BF16 tensor cores where the device has them, falling back to FP32), and the FP32 roof for every
other op (elementwise, normalisation, pooling and softmax run on CUDA cores); ``bandwidth`` is DRAM.
This is more honest than one whole-model ``max()``: a network is a sequence of ops, some bound by
compute and some by memory, and their times add.

Bytes: ``predicted_seconds`` uses the unfused (eager) traffic — eager PyTorch, which rooflow profiles,
runs one kernel per aten op and each kernel reads its inputs and writes its outputs in DRAM (at batch 256
the tensors do not fit in L2). ``predicted_seconds_fused`` uses the fusion-aware traffic (BN folded,
ReLU/add in the epilogue: what a compiler such as TensorRT or torch.compile achieves) as the lower
bound. Launch overheads and tail effects are not modelled: a prediction is a lower bound on time.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

MATMUL_CLASSES = ("matmul", "attention")
BYTES_COLUMNS = {"unfused": ("bytes_read", "bytes_written"), "fused": ("fused_bytes_read", "fused_bytes_written")}


def _roof(device, op_class: str, compute_precision: str, measured: bool) -> float | None:
    roof = compute_precision if op_class in MATMUL_CLASSES else "fp32"
    if roof not in ("fp32", "tf32", "fp16", "bf16"):
        roof = "fp32"
    return device.compute_peak(roof, measured)


def op_times(ops: pd.DataFrame, device, precision: str, measured: bool = False,
             bytes_model: str = "unfused") -> pd.DataFrame | None:
    """``ops`` with ``seconds``, ``compute_seconds``, ``memory_seconds`` and ``bound`` (compute/memory) per
    row; None when the device lacks a compute roof or a bandwidth (a CPU before measure_ceilings ran)."""
    bandwidth = device.bandwidth(measured)
    if not bandwidth:
        return None
    read, written = BYTES_COLUMNS[bytes_model]
    peaks = [_roof(device, c, p, measured) for c, p in zip(ops["op_class"], ops["compute_precision"])]
    if any(not peak for peak in peaks):
        return None
    result = ops.copy()
    result["compute_seconds"] = result["flops"] / pd.Series(peaks, index=result.index, dtype=float)
    result["memory_seconds"] = (result[read] + result[written]) / bandwidth
    result["seconds"] = result[["compute_seconds", "memory_seconds"]].max(axis=1)
    result["bound"] = (result["compute_seconds"] >= result["memory_seconds"]).map({True: "compute",
                                                                                    False: "memory"})
    return result


def predict_seconds(ops: pd.DataFrame, device, precision: str, measured: bool = False,
                    bytes_model: str = "unfused") -> dict[str, Any]:
    """Predicted seconds of the step whose ops are ``ops`` on ``device`` (a rooflow.devices.Device), with
    the datasheet roofs or (``measured=True``) the measured ones. All values None when the device has no
    such roof (a CPU without measured ceilings). ``precision`` is the run's precision; each op's roof
    comes from its own ``compute_precision`` column."""
    keys = ("predicted_seconds", "compute_bound_seconds", "memory_bound_seconds", "ops_compute_bound",
            "ops_memory_bound", "predicted_seconds_fused")
    times = op_times(ops, device, precision, measured, bytes_model)
    if times is None:
        return {**dict.fromkeys(keys), "bytes_model": bytes_model, "precision": precision}
    fused = op_times(ops, device, precision, measured, "fused")
    compute = times["bound"] == "compute"
    return {
        "predicted_seconds": float(times["seconds"].sum()),
        "compute_bound_seconds": float(times.loc[compute, "seconds"].sum()),
        "memory_bound_seconds": float(times.loc[~compute, "seconds"].sum()),
        "ops_compute_bound": int(compute.sum()),
        "ops_memory_bound": int((~compute).sum()),
        "predicted_seconds_fused": float(fused["seconds"].sum()),
        "bytes_model": bytes_model,
        "precision": precision,
    }
