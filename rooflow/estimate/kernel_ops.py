"""The kernel model inside a step: which ops of an estimate it prices, and the latency of a step of one op.

The kernel model (rooflow.estimate.kernel_calibration) was fitted on single FP32 calls — nn.Conv2d, nn.Linear,
torch.bmm, elementwise ops, LayerNorm, softmax — each timed alone on an idle GPU with CUDA events around it
(the public NeuSight data set's method). :func:`kernel_rows` turns the rows of an estimate's ops table that
are such calls (FP32 on CUDA cores: an op of dtype fp32, whatever the run's precision; the convolutions and
products a GPU runs as FP32 arithmetic in fp16 or bf16, :func:`fp32_arithmetic`; a TF32 convolution's FP32
algorithms as a candidate) into the measurement layout, and :func:`kernel_seconds` prices them on a device:

- ``seconds``: one call alone, as measured — the launch floor (the host's dispatch of that operator and the
  events around it) plus the kernels' time. A step that is one such call (``rooflow.estimate_module`` of one
  layer, inference) takes exactly this.
- ``device_seconds``: the kernels' part, without the floor — what the op adds to a step whose host runs ahead
  of the GPU (the time model's device work; its host costs stay the time model's).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rooflow.estimate import dropout, formulas, kernel_calibration
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


def fp32_arithmetic(device, dtype: str) -> bool:
    """Whether ``device`` runs PyTorch's ``dtype`` (fp16, bf16) matrix products in FP32 arithmetic on its CUDA
    cores, having no tensor cores for that dtype:

    - fp16 before sm_70 (no tensor cores): PyTorch's half GEMMs ask cuBLAS for FP32 compute
      (CUBLAS_COMPUTE_32F) and its half convolutions give cuDNN an FP32 math type (``ConvolutionDescriptor::set``:
      cuDNN's pseudo-half configuration), so the P100's packed-half2 roof is never theirs. Third-party FP32 and
      fp16 torch.mm rates say so: P100 8.63 and 8.39 TFLOP/s, P4 4.96 and 4.80.
    - bf16 before sm_80 (no bf16 units): cuBLAS converts the operands to FP32 (``torch.cuda.is_bf16_supported``
      says so only with ``including_emulation``). Third-party bf16 torch.mm ran at 0.46–0.74 of the same GPUs'
      FP32 rate (T4, V100, P100 and six other pre-Ampere boards): these kernels are not cuBLAS's tuned SGEMMs, so
      the FP32 run's time is a lower bound on theirs (benchmarks/bench_kernel_calibration.py). Its convolutions
      skip cuDNN (``supportsBFloat16ConvolutionWithCuDNNv8`` needs sm_80) for PyTorch's im2col fallback, which no
      measurement here shows: they are priced as the FP32 run's cuDNN convolutions, a lower bound too."""
    if not getattr(device, "is_cuda", False):
        return False
    if dtype == "fp16":  # the roof the catalogue holds such a run to says it (one rule: Device.matmul_roof)
        return device.matmul_roof("fp16") == "fp32"
    return dtype == "bf16" and bool(device.compute_capability) and device.compute_capability < (8, 0)


def kernel_rows(ops: pd.DataFrame, device=None) -> pd.DataFrame:
    """The rows of ``ops`` (an estimate's ops table) the kernel model prices, in its measurement layout
    (``operator``, ``op_class`` and the shape columns), indexed like ``ops``. FP32 calls only, whatever the run's
    precision (a TF32 or autocast run's FP32 ops are the same kernels): the model's measurements ran on FP32
    CUDA cores (TF32 off). Also, on a ``device`` that runs them in FP32 arithmetic (:func:`fp32_arithmetic`), the
    convolutions and matrix products of an fp16 or bf16 run, on 16-bit operands (``element_bytes`` 2); and a TF32
    run's forward convolutions as ``candidate`` rows: cuDNN's FP32 algorithms, which its autotuner takes where
    they beat the TF32 ones (the time model compares)."""
    records = {}
    arithmetic = {"fp32"} | {dtype for dtype in ("fp16", "bf16") if fp32_arithmetic(device, dtype)}
    for index, row in ops.iterrows():
        dtype = row.get("compute_precision")
        op, phase = row["op"], row["phase"]
        # a TF32 convolution: cuDNN's autotuner has the FP32 algorithms too (a candidate, not the pick)
        candidate = dtype == "tf32" and op in CONVOLUTION_OPS
        if dtype not in arithmetic and not candidate:
            continue
        calls = max(1, int(row["calls"]))
        call = parse_call(row.get("call"))
        if op in CONVOLUTION_OPS and phase != "backward" and len(call) == 7:
            records[index] = {**kernel_calibration.convolution_row(call), "candidate": candidate}
        elif candidate:
            continue
        elif op in GEMM_OPS and row["op_class"] in ("matmul", "attention"):
            views = parse_gemms(row.get("gemms"))
            if len(views) == 1:
                m, n, k, count = views[0][:4]
                operator = GEMM_OPS[op]
                # nn.Linear(N, K) on (B, M, N); torch.bmm (B, M, N) @ (B, N, K)
                records[index] = {"operator": operator, "B": count if operator == "bmm" else 1, "M": m, "N": k,
                                  "K": n}
        elif dtype != "fp32":  # 16-bit elementwise and reductions: PyTorch's own half kernels, not measured
            continue
        elif row["op_class"] == "elementwise" and row["bytes_written"] > 0 and op not in formulas.NOT_POINTWISE:
            written = float(row["bytes_written"]) / calls
            operands = max(1, round(float(row["bytes_read"]) / calls / written))
            names = ELEMENTWISE_OPS.get(op.rstrip("_").removesuffix("_backward"), (op, op))
            operator = names[0] if operands >= 2 else names[1]
            elements = written / FP32_BYTES
            if op in (dropout.NATIVE, dropout.NATIVE_BACKWARD):  # a tensor and a 1-byte mask: as one operand's bytes
                elements = (float(row["bytes_read"]) / calls + written) / (2 * FP32_BYTES)
            records[index] = {"operator": operator, "op_class": "elementwise", "operands": min(operands, 2),
                              "B": 1, "H": elements}
        elif op == "native_layer_norm" and phase == "forward" and len(call) == 2:
            records[index] = {"operator": "ln", "B": call[0], "H": call[1]}
        elif op == "_softmax" and phase == "forward" and len(call) == 2:
            records[index] = {"operator": "softmax", "B": call[0], "H": call[1]}
        if len(arithmetic) > 1 and index in records:
            records[index]["element_bytes"] = FP32_BYTES if dtype == "fp32" else 2
    if not records:
        return pd.DataFrame()
    rows = pd.DataFrame.from_dict(records, orient="index")
    known = rows["operator"].map(lambda o: kernel_calibration.OPERATORS.get(o, ("", 0))[0])
    rows["op_class"] = rows["op_class"].where(rows["op_class"].notna(), known) if "op_class" in rows else known
    if "operands" in rows:
        rows["operands"] = rows["operands"].fillna(rows["operator"].map(
            lambda o: kernel_calibration.OPERATORS.get(o, ("", 1))[1]))
    return rows


def kernel_seconds(ops: pd.DataFrame, device) -> pd.DataFrame:
    """Per row of ``ops`` the kernel model prices on ``device`` (a catalogue GPU): ``seconds`` (one call alone,
    launch floor included), ``device_seconds`` (its kernels: without the floor) and ``candidate`` (a TF32
    convolution's FP32 algorithms, which cuDNN's autotuner takes only where faster), indexed like ``ops``;
    empty where the device has no kernel calibration or no row is covered."""
    found = kernel_calibration.for_gpu(device)
    rows = kernel_rows(ops, device)
    if found is None or rows.empty:
        return pd.DataFrame(columns=["seconds", "device_seconds", "candidate"])
    calibration, gpu = found
    seconds = kernel_calibration.predict_seconds(rows, gpu, calibration)
    device_seconds = kernel_calibration.kernel_seconds(rows, gpu, calibration)
    candidate = rows["candidate"].eq(True).to_numpy() if "candidate" in rows else np.zeros(len(rows), bool)
    return pd.DataFrame({"seconds": seconds, "device_seconds": device_seconds, "candidate": candidate},
                        index=rows.index)
