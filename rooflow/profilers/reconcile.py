"""Do measured FLOPs and bytes agree with the estimate, and if not, what is the likely cause?

A pure function of two dicts, so the summary, the report and the tests call it alike. FLOPs agree when
measured / estimated lies within ±``tolerance`` (20%). When they do not, ``cause`` names the likeliest
reason, from what is known to go wrong (DESIGN.md, "Measurement"):

- measured ≪ estimated, no tensor-core metric collected, on a precision cuDNN runs on tensor cores (TF32 by
  default for FP32 convolutions on Ampere and newer; FP16/BF16 always): the counters cannot see that work
  (an A100 "FP32" VGG shows 19–46× too few FLOPs);
- measured < estimated with tensor metrics present (or on CUDA cores only): Winograd/FFT convolution
  algorithms, which do fewer multiplications than direct convolution;
- measured > estimated: elementwise/normalisation/pooling work the estimate left out; otherwise padding of
  GEMM tiles and im2col/implicit-GEMM overheads; a whole multiple of the estimate means the profiled range
  held several iterations;
- training, a few percent short: the first layer has no input gradient, so backward < 2 × forward.

Keys read from ``measured`` (rooflow's ncu totals): ``flops_total``, ``dram_bytes``. Keys read from
``estimated`` (rooflow's estimate JSON, or plain names): ``total_flops`` or ``flops``; ``forward_matmul_flops``
+ ``backward_matmul_flops`` or ``matmul_flops``; ``fused_bytes`` or ``bytes``; ``min_bytes`` and
``unfused_bytes`` for the range of DRAM traffic; ``forward_flops`` and ``first_layer_flops`` for the
training note. Missing keys just leave the corresponding check out.
"""

from __future__ import annotations

import math
import re
from typing import Any

TENSOR_PRECISIONS = {"tf32", "fp16", "bf16"}
DEFAULT_TOLERANCE = 0.2


def _number(mapping: dict, *keys: str) -> float | None:
    for key in keys:
        value = mapping.get(key)
        if value is not None:
            try:
                value = float(value)
            except (TypeError, ValueError):
                continue
            if not math.isnan(value):
                return value
    return None


def _cc(architecture: Any) -> int | None:
    if architecture is None:
        return None
    match = re.match(r"^(?:sm_?)?(\d)\.?(\d)", str(architecture).strip(), re.IGNORECASE)
    return int(match.group(1)) * 10 + int(match.group(2)) if match else None


def _kernel_launches(kernels: Any, pattern: str) -> int | None:
    """How many kernels of a per-kernel table match `pattern` (None without a table).

    A count, not a share of FLOPs or time: non-fused Winograd runs its transformed products as ordinary
    sgemm kernels, so the Winograd-named transform kernels carry few of the FLOPs the algorithm changed.
    """
    if kernels is None or "name" not in getattr(kernels, "columns", ()):
        return None
    return int(kernels["name"].astype(str).str.lower().str.contains(pattern, regex=True).sum())


def reconcile(measured: dict, estimated: dict, precision: str, mode: str, tensor_metrics_collected: bool,
              *, architecture: str | int | None = None, kernels: Any = None,
              tolerance: float = DEFAULT_TOLERANCE) -> dict[str, Any]:
    """Compare measured with estimated FLOPs and bytes; name the likely cause of a FLOP gap.

    ``architecture`` ("sm_80") sharpens the tensor-core diagnosis for FP32 (TF32 exists from sm_80 on);
    ``kernels`` (a per-kernel table with ``name``) lets the Winograd/FFT diagnosis cite the kernels it saw.
    Returns ``flops_measured, flops_estimated, flops_ratio`` (measured / estimated), ``flops_agree`` (within
    ±tolerance), ``bytes_measured, bytes_estimated, bytes_ratio, bytes_agree``, ``cause`` (a sentence, or
    None when the FLOPs agree or cannot be compared), ``bytes_cause``, ``notes`` and ``tolerance``.
    """
    precision = (precision or "").lower()
    mode = (mode or "").lower()
    flops_measured = _number(measured, "flops_total", "flops")
    flops_estimated = _number(estimated, "total_flops", "flops")
    matmul = _number(estimated, "matmul_flops")
    if matmul is None:
        forward_mm = _number(estimated, "forward_matmul_flops")
        backward_mm = _number(estimated, "backward_matmul_flops")
        if forward_mm is not None:
            matmul = forward_mm + (backward_mm or 0.0)
    bytes_measured = _number(measured, "dram_bytes", "bytes")
    bytes_estimated = _number(estimated, "fused_bytes", "bytes", "dram_bytes")
    bytes_floor = _number(estimated, "min_bytes", "bytes_floor")
    bytes_unfused = _number(estimated, "unfused_bytes", "bytes_unfused")

    result: dict[str, Any] = {
        "flops_measured": flops_measured, "flops_estimated": flops_estimated, "flops_ratio": None,
        "flops_agree": None, "bytes_measured": bytes_measured, "bytes_estimated": bytes_estimated,
        "bytes_ratio": None, "bytes_agree": None, "cause": None, "bytes_cause": None, "notes": [],
        "tolerance": tolerance,
    }
    notes: list[str] = result["notes"]

    if flops_measured is not None and flops_estimated:
        ratio = flops_measured / flops_estimated
        result["flops_ratio"] = ratio
        result["flops_agree"] = abs(ratio - 1.0) <= tolerance
        if not result["flops_agree"]:
            result["cause"] = _flops_cause(ratio, precision, mode, tensor_metrics_collected, _cc(architecture),
                                           flops_estimated, matmul, kernels, tolerance)
        elif mode == "training" and ratio < 1.0:
            first = _number(estimated, "first_layer_flops")
            forward = _number(estimated, "forward_flops")
            share = f" (the first layer is {100 * first / forward:.1f}% of forward FLOPs)" if first and forward else ""
            notes.append(f"Measured is {100 * (1 - ratio):.1f}% below the estimate: in training the first layer "
                         f"computes no input gradient, so backward is less than 2× forward{share}.")
    if not tensor_metrics_collected and precision in TENSOR_PRECISIONS | {"fp32"} and result["flops_agree"]:
        notes.append("No tensor-core metric was collected; if cuDNN used tensor cores, their FLOPs are missing.")

    if bytes_measured is not None and bytes_estimated:
        result["bytes_ratio"] = bytes_measured / bytes_estimated
    if bytes_measured is not None and (bytes_floor or bytes_unfused or bytes_estimated):
        low = (bytes_floor or bytes_estimated or 0.0) * (1 - tolerance)
        high = (bytes_unfused or bytes_estimated or float("inf")) * (1 + tolerance)
        result["bytes_agree"] = low <= bytes_measured <= high
        if bytes_measured < low:
            result["bytes_cause"] = (
                "Measured DRAM traffic is below the estimated floor: data that fits in L2 is read from DRAM once "
                "however often kernels reuse it, or the profiled range missed part of the step.")
        elif bytes_measured > high:
            result["bytes_cause"] = (
                "Measured DRAM traffic exceeds even the unfused estimate: layout transposes (nchwToNhwc), "
                "cuDNN workspaces and Winograd transforms move data the estimate does not model, and ncu flushes "
                "the caches before each kernel (--cache-control all), so every kernel starts cold.")
    return result


def _flops_cause(ratio: float, precision: str, mode: str, tensor_collected: bool, cc: int | None,
                 estimated: float, matmul: float | None, kernels: Any, tolerance: float) -> str:
    factor = f"measured/estimated = {ratio:.3g}"
    if ratio < 1 - tolerance:
        # FP16 tensor cores exist from Volta (sm_70); TF32/BF16 — and with them cuDNN's default TF32 for
        # FP32 convolutions — from Ampere (sm_80). An unknown architecture is given the benefit of the doubt.
        tensor_capable = ((precision == "fp16" and (cc is None or cc >= 70))
                          or (precision in {"fp32", "tf32", "bf16"} and (cc is None or cc >= 80)))
        if not tensor_collected and tensor_capable:
            why = ("cuDNN runs FP32 convolutions in TF32 on tensor cores by default on Ampere and newer"
                   if precision == "fp32" else f"{precision.upper()} convolutions and GEMMs run on tensor cores")
            return (f"Measured FLOPs are {1 / ratio:.1f}× below the estimate ({factor}) because no tensor-core "
                    f"metric was collected: {why}, and the fadd/fmul/ffma counters cannot see that work; "
                    f"profile again with the sm__ops_path_tensor_src_* metrics "
                    f"(rooflow.profilers.metrics.metrics_for_architecture).")
        if ratio < 0.25:
            return (f"Measured FLOPs are {1 / ratio:.1f}× below the estimate ({factor}), more than Winograd or FFT "
                    f"algorithms can save: the profiled range probably held only part of the step, or a kernel "
                    f"filter (--kernel-name, --launch-count) left kernels out; check where the driver calls "
                    f"torch.cuda.profiler.start()/stop().")
        launches = _kernel_launches(kernels, r"winograd|fft")
        evidence = (f" (the profile holds {launches} Winograd/FFT transform kernels; their products run as "
                    f"ordinary sgemm kernels)" if launches else "")
        return (f"Measured FLOPs are {100 * (1 - ratio):.0f}% below the estimate ({factor}): cuDNN chose Winograd "
                f"or FFT convolution algorithms{evidence}, which do fewer multiplications than the direct "
                f"convolution the estimate counts.")
    nearest = round(ratio)
    if nearest >= 2 and abs(ratio - nearest) <= 0.1 * nearest:
        return (f"Measured FLOPs are {ratio:.2f}× the estimate ({factor}), close to a whole multiple: the profiled "
                f"range probably held {nearest} iterations instead of one; check where the driver calls "
                f"torch.cuda.profiler.start()/stop().")
    other = (estimated - matmul) if matmul is not None else None
    if other is not None and other <= 0.01 * estimated:
        return (f"Measured FLOPs are {100 * (ratio - 1):.0f}% above the estimate ({factor}): the estimate counts "
                f"only convolution/matmul FLOPs, while the counters also see the elementwise, normalisation, "
                f"pooling, softmax and optimizer work; compare with an estimate that includes them.")
    return (f"Measured FLOPs are {100 * (ratio - 1):.0f}% above the estimate ({factor}): GEMM and convolution "
            f"kernels compute whole tiles (padding to tile multiples), implicit-GEMM/im2col recomputes "
            f"overlapping windows, and split-K adds reduction passes — work the closed-form count does not "
            f"include{'' if mode != 'training' else ' (in training, for the backward kernels too)'}.")
