"""The kernel model inside a step: which ops of an estimate it prices, and the latency of a step of one op.

The kernel model (rooflow.estimate.kernel_calibration) was fitted on single FP32 calls — nn.Conv2d, nn.Linear,
torch.bmm, elementwise ops, LayerNorm, softmax — each timed alone on an idle GPU with CUDA events around it
(the public NeuSight data set's method). :func:`kernel_rows` turns the rows of an estimate's ops table that
are such calls (FP32 on CUDA cores: precision fp32, where rooflow turns TF32 off) into the measurement layout,
and :func:`kernel_seconds` prices them on a device:

- ``seconds``: one call alone, as measured — the launch floor (the host's dispatch of that operator and the
  events around it) plus the kernels' time. A step that is one such call (``rooflow.estimate_module`` of one
  layer, inference) takes exactly this.
- ``device_seconds``: the kernels' part, without the floor — what the op adds to a step whose host runs ahead
  of the GPU (the time model's device work; its host costs stay the time model's).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rooflow.estimate import kernel_calibration
from rooflow.estimate.core import parse_call, parse_gemms

CONVOLUTION_OPS = ("convolution", "_convolution")
GEMM_OPS = {"mm": "linear", "addmm": "linear", "bmm": "bmm", "baddbmm": "bmm"}
# elementwise aten ops → the measured operator whose launch floor they share (its scalar form where the op
# reads one tensor: torch.add(x, 0.5) is "addu"); any other elementwise op gets its class's floor
ELEMENTWISE_OPS = {"add": ("add", "addu"), "sub": ("add", "addu"), "mul": ("mul", "mulu"),
                   "div": ("div", "divu"), "pow": ("pow", "powu"), "relu": ("relu", "relu"),
                   "threshold": ("relu", "relu"), "clamp": ("relu", "relu"), "gelu": ("gelu", "gelu"),
                   "tanh": ("tanh", "tanh")}
FP32_BYTES = 4


def kernel_rows(ops: pd.DataFrame, precision: str) -> pd.DataFrame:
    """The rows of ``ops`` (an estimate's ops table) the kernel model prices, in its measurement layout
    (``operator``, ``op_class`` and the shape columns), indexed like ``ops``. FP32 calls only: the model's
    measurements ran on FP32 CUDA cores (TF32 off)."""
    records = {}
    if precision != "fp32":
        return pd.DataFrame()
    for index, row in ops.iterrows():
        if row.get("compute_precision") != "fp32":
            continue
        op, phase = row["op"], row["phase"]
        calls = max(1, int(row["calls"]))
        call = parse_call(row.get("call"))
        if op in CONVOLUTION_OPS and phase != "backward" and len(call) == 7:
            b, cin, size, cout, kernel, stride, padding = call
            records[index] = {"operator": "conv", "B": b, "Input_Channel": cin, "Output_Channel": cout,
                              "Kernel_Szie": kernel, "Input_Size": size, "Stride": stride, "Padding": padding}
        elif op in GEMM_OPS and row["op_class"] in ("matmul", "attention"):
            views = parse_gemms(row.get("gemms"))
            if len(views) == 1:
                m, n, k, count = views[0][:4]
                operator = GEMM_OPS[op]
                # nn.Linear(N, K) on (B, M, N); torch.bmm (B, M, N) @ (B, N, K)
                records[index] = {"operator": operator, "B": count if operator == "bmm" else 1, "M": m, "N": k,
                                  "K": n}
        elif row["op_class"] == "elementwise" and row["bytes_written"] > 0:
            written = float(row["bytes_written"]) / calls
            operands = max(1, round(float(row["bytes_read"]) / calls / written))
            names = ELEMENTWISE_OPS.get(op.rstrip("_").removesuffix("_backward"), (op, op))
            operator = names[0] if operands >= 2 else names[1]
            records[index] = {"operator": operator, "op_class": "elementwise", "operands": min(operands, 2),
                              "B": 1, "H": written / FP32_BYTES}
        elif op == "native_layer_norm" and phase == "forward" and len(call) == 2:
            records[index] = {"operator": "ln", "B": call[0], "H": call[1]}
        elif op == "_softmax" and phase == "forward" and len(call) == 2:
            records[index] = {"operator": "softmax", "B": call[0], "H": call[1]}
    if not records:
        return pd.DataFrame()
    rows = pd.DataFrame.from_dict(records, orient="index")
    known = rows["operator"].map(lambda o: kernel_calibration.OPERATORS.get(o, ("", 0))[0])
    rows["op_class"] = rows["op_class"].where(rows["op_class"].notna(), known) if "op_class" in rows else known
    if "operands" in rows:
        rows["operands"] = rows["operands"].fillna(rows["operator"].map(
            lambda o: kernel_calibration.OPERATORS.get(o, ("", 1))[1]))
    return rows


def kernel_seconds(ops: pd.DataFrame, precision: str, device) -> pd.DataFrame:
    """Per row of ``ops`` the kernel model prices on ``device`` (a catalogue GPU): ``seconds`` (one call alone,
    launch floor included) and ``device_seconds`` (its kernels: without the floor), indexed like ``ops``;
    empty where the device has no kernel calibration or no row is covered."""
    found = kernel_calibration.for_gpu(device)
    rows = kernel_rows(ops, precision)
    if found is None or rows.empty:
        return pd.DataFrame(columns=["seconds", "device_seconds"])
    calibration, gpu = found
    seconds = kernel_calibration.predict_seconds(rows, gpu, calibration)
    floors = kernel_calibration.launch_floors(rows, gpu, calibration)
    device_seconds = np.maximum(seconds - floors, 0.0)
    return pd.DataFrame({"seconds": seconds, "device_seconds": device_seconds}, index=rows.index)
