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

Attention on a CUDA GPU is priced as the kernel that runs, not the math decomposition the estimate counts
(rooflow.estimate.attention): a layer that calls ``F.scaled_dot_product_attention`` runs one fused kernel, at
its kernel's path (flash: the 16-bit dtype's tensor roof, where the math path up-casts q, k, v to fp32; the
memory-efficient kernel's fp32: three TF32 products per product on sm_80 and newer), moving q, k, v and the
output only, and its softmax, scaling and casts are not separate kernels. Priced as counted, ViT-H/14 b32
bf16 training's roofline time on an H100 was 1.42x the time model's prediction, no lower bound at all.

The counted FLOPs of a convolution are direct convolution's. cuDNN's Winograd and FFT algorithms multiply
less: 3×3 stride-1 FP32 convolutions of the single-op data set ran at up to 2.24x the FP32 roof in those
FLOPs (a V100), and rooflow's H100 VGG16 b256 FP32 training step at 1.01x its roofline time. Where the time
model prices such convolutions below their roof, :func:`below_roofline` says so.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from rooflow.conventions import MATMUL_OP_CLASSES
from rooflow.estimate import attention, dropout
from rooflow.estimate.core import parse_gemms

BYTES_COLUMNS = {"unfused": ("bytes_read", "bytes_written"), "fused": ("fused_bytes_read", "fused_bytes_written")}


def _roof(device, op_class: str, compute_precision: str, measured: bool) -> float | None:
    roof = compute_precision if op_class in MATMUL_OP_CLASSES else "fp32"
    if roof not in ("fp32", "tf32", "fp16", "bf16"):
        roof = "fp32"
    return device.compute_peak(device.matmul_roof(roof), measured)  # fp16 without tensor cores: FP32


def op_times(ops: pd.DataFrame, device, precision: str, measured: bool = False,
             bytes_model: str = "unfused") -> pd.DataFrame | None:
    """``ops`` with ``seconds``, ``compute_seconds``, ``memory_seconds`` and ``bound`` (compute/memory) per
    row; None when the device lacks a compute roof or a bandwidth (a CPU before measure_ceilings ran)."""
    bandwidth = device.bandwidth(measured)
    if not bandwidth:
        return None
    # on a GPU: the rows a fused attention kernel absorbs (once: the dropout below leaves them, and
    # _fused_attention prices them at no time), every other dropout as native_dropout
    cuda = bool(getattr(device, "is_cuda", False) and device.compute_capability)
    absorbed = attention.fused_rows(ops) if cuda and attention.fused(precision, device.compute_capability) else set()
    if getattr(device, "is_cuda", False):
        ops = dropout.as_cuda_runs(ops, leave=absorbed)
    read, written = BYTES_COLUMNS[bytes_model]
    peaks = [_roof(device, c, p, measured) for c, p in zip(ops["op_class"], ops["compute_precision"])]
    if any(not peak for peak in peaks):
        return None
    result = ops.copy()
    result["compute_seconds"] = result["flops"] / pd.Series(peaks, index=result.index, dtype=float)
    result["memory_seconds"] = (result[read] + result[written]) / bandwidth
    if cuda:
        _fused_attention(result, device, precision, measured, bandwidth, read, written, absorbed)
    result["seconds"] = result[["compute_seconds", "memory_seconds"]].max(axis=1)
    result["bound"] = (result["compute_seconds"] >= result["memory_seconds"]).map({True: "compute",
                                                                                    False: "memory"})
    return result


def _fused_attention(result: pd.DataFrame, device, precision: str, measured: bool, bandwidth: float,
                     read: str, written: str, absorbed: set) -> None:
    """Price the attention of layers that call SDPA as their fused kernel runs it (module docstring), in place:
    its products' FLOPs at the kernel's path, its operands' bytes; the rows it absorbs (``absorbed``:
    attention.fused_rows) at no time."""
    if not attention.fused(precision, device.compute_capability):
        return  # the math path runs as counted
    layers = attention.sdpa_layers(result["layer"], result["op"])
    if not layers:
        return
    path, products = attention.kernel_path(precision, device.compute_capability)
    peak = device.compute_peak(path, measured)
    if not peak:
        return
    element_bytes = 2 if path in ("fp16", "bf16") else 4
    result.loc[list(absorbed), ["compute_seconds", "memory_seconds"]] = 0.0
    products_rows = result.index[(result["op_class"] == "attention") & result["layer"].isin(layers)]
    for index in products_rows:
        views = parse_gemms(result.at[index, "gemms"])
        if not views:
            continue
        calls = max(1, int(result.at[index, "calls"]))
        result.at[index, "compute_seconds"] = float(result.at[index, "flops"]) / (peak / products)
        fused = calls * attention.fused_bytes(views, element_bytes)
        unfused = float(result.at[index, read] + result.at[index, written])
        result.at[index, "memory_seconds"] = min(fused, unfused) / bandwidth


def predict_seconds(ops: pd.DataFrame, device, precision: str, measured: bool = False,
                    bytes_model: str = "unfused") -> dict[str, Any]:
    """Predicted seconds of the step whose ops are ``ops`` on ``device`` (a rooflow.hardware.devices.Device), with
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


# A row priced under its roof by less than this share is not flagged: the kernel model holds a GEMM to its
# product's FLOPs and bytes, the roofline to the op's as counted (an addmm's bias, its output's bytes), a few
# percent apart (the A100's classifier addmm rows at 0.95-1.0 of their roof)
BELOW_ROOF_TOLERANCE = 0.05
# The fastest FP32 convolution of the single-op data set against its direct FLOPs' roof: a V100's non-fused Winograd
# call (452 → 621 channels, 12×12, batch 63). A row priced faster than this is the kernel model's extrapolation to a
# larger shape than any measured, which the note says
FASTEST_MEASURED_FAST_CONVOLUTION = 2.24
BELOW_ROOF_CAUSES = {
    "fast convolutions": "priced on cuDNN's Winograd/FFT algorithms, which multiply less than the direct convolution "
                         f"whose FLOPs the roofline counts (measured on the single-op data set's V100: up to "
                         f"{FASTEST_MEASURED_FAST_CONVOLUTION}x the FP32 roof in those FLOPs)",
    "cache": "memory-bound, priced with their working set partly or wholly in cache where the roofline moves every "
             "byte from DRAM (the kernel model's L2 share, fitted to the single-op data set's back-to-back calls; a "
             "working set within half the calibration's cache, at the rate measured there)",
    "unexplained": "unexplained: priced above its roofs (the roofline's peak and bandwidth)",
}


def below_roofline(ops: pd.DataFrame, row_seconds: dict, device, precision: str, measured: bool = False,
                   cache_bytes: float | None = None) -> dict[str, dict[str, Any]]:
    """The rows a prediction prices below their own roofline time (:func:`op_times`) by more than
    :data:`BELOW_ROOF_TOLERANCE`, by cause (:data:`BELOW_ROOF_CAUSES`): ``fast convolutions`` (a 2-D kernel cuDNN
    may run by Winograd or FFT), ``cache`` (a memory-bound row the kernel model prices, part of its bytes in L2, or
    one whose bytes per call are within half the time model's ``cache_bytes``: priced at the cache's rate),
    ``unexplained`` (anything else). Per cause: ``rows``, ``roofline_seconds``, ``predicted_seconds``, ``ops``
    (their names) and ``most_under_roof`` (the largest roof / predicted of a row). ``row_seconds``: the predicted
    seconds per row label (rooflow.estimate.timemodel.StepPrediction.row_seconds)."""
    from rooflow.estimate import kernel_ops
    from rooflow.estimate.timemodel import cache_resident

    times = op_times(ops, device, precision, measured)
    result: dict[str, dict[str, Any]] = {}
    if times is None or not row_seconds:
        return result
    ops = times  # the rows as the device runs them (a GPU's dropout: rooflow.estimate.dropout), with their times
    kernel_model = set(kernel_ops.kernel_rows(ops, device).index) if getattr(device, "is_cuda", False) else set()
    bytes_per_call = (ops["bytes_read"] + ops["bytes_written"]) / ops["calls"].clip(lower=1)
    for index, predicted in row_seconds.items():
        roof = float(times.at[index, "seconds"]) if index in times.index else 0.0
        if not predicted < roof * (1 - BELOW_ROOF_TOLERANCE):
            continue
        op = str(ops.at[index, "op"])
        if op.startswith("convolution") and any(view[4] for view in parse_gemms(ops.at[index, "gemms"])):
            cause = "fast convolutions"
        elif times.at[index, "bound"] == "memory" and ops.at[index, "op_class"] not in MATMUL_OP_CLASSES and (
                index in kernel_model or cache_resident(bytes_per_call[index], cache_bytes)):
            cause = "cache"
        else:
            cause = "unexplained"
        entry = result.setdefault(cause, {"rows": 0, "roofline_seconds": 0.0, "predicted_seconds": 0.0, "ops": [],
                                          "most_under_roof": 0.0})
        entry["rows"] += 1
        entry["most_under_roof"] = max(entry["most_under_roof"], roof / float(predicted) if predicted > 0 else 0.0)
        entry["roofline_seconds"] += roof
        entry["predicted_seconds"] += float(predicted)
        if op not in entry["ops"]:
            entry["ops"].append(op)
    return result


def below_roofline_note(causes: dict[str, dict[str, Any]], predicted_seconds: float,
                        roofline_seconds: float | None) -> str | None:
    """One sentence on a prediction with rows under their roofline time (None where none is): the step's time
    against its per-op roofline time, and per cause the rows, their times and why (:func:`below_roofline`)."""
    if not causes or not roofline_seconds:
        return None
    parts = [f"{entry['rows']} {'/'.join(entry['ops'])} row(s) at {entry['predicted_seconds'] * 1e3:.3g} ms against "
             f"{entry['roofline_seconds'] * 1e3:.3g} ms at their roof, {BELOW_ROOF_CAUSES[cause]}"
             + (f"; one at {entry['most_under_roof']:.2f}x its roof, beyond any measured call: the kernel model's "
                f"extrapolation to a larger shape, which nothing here measured"
                if cause == "fast convolutions" and entry.get("most_under_roof", 0.0) > FASTEST_MEASURED_FAST_CONVOLUTION
                else "")
             for cause, entry in causes.items()]
    where = "under" if predicted_seconds < roofline_seconds else "over"
    return (f"predicted {predicted_seconds * 1e3:.4g} ms, {where} its per-op roofline time of "
            f"{roofline_seconds * 1e3:.4g} ms: " + "; ".join(parts))


def below_roofline_flag(ops: pd.DataFrame, step, device, precision: str, roofline_seconds: float | None,
                        measured: bool = False, cache_bytes: float | None = None) -> str | None:
    """The note a prediction ``step`` (rooflow.estimate.timemodel.StepPrediction) carries where it is under its
    per-op roofline time, or prices a row under its roof without a known cause (:func:`below_roofline_note`);
    None otherwise. A time under the roofline's bound is flagged with its rows' cause, never printed quietly.
    ``cache_bytes``: the calibration's (rooflow.estimate.timemodel.Calibration.cache_bytes)."""
    causes = below_roofline(ops, step.row_seconds, device, precision, measured, cache_bytes)
    if step.seconds < (roofline_seconds or 0.0) or "unexplained" in causes:
        return below_roofline_note(causes, step.seconds, roofline_seconds)
    return None


# ------------------------------------------------------------------------------------------ memory
MIB = 2**20
# The CUDA context, cuDNN/cuBLAS code and handles live outside PyTorch's allocator: kept free on the device
# when deciding whether a run fits (a few hundred MB on current drivers; the allowance errs high).
CONTEXT_BYTES = 1.0e9
FIT_MARGIN = 0.10  # a run fits when its predicted steady peak + 10% + the context is on the device


def cublas_workspace_bytes(device) -> int:
    """The workspaces PyTorch gives each thread that runs matrix products, allocated through its caching
    allocator, so they count in max_memory_allocated: cuBLAS's (32 MiB on Hopper and newer, 4 MiB × 2 +
    16 KiB × 8 before: cuBLAS's recommendation, PyTorch's CUBLAS_WORKSPACE_CONFIG default) and cuBLASLt's
    (1 MiB, PyTorch's CUBLASLT_WORKSPACE_SIZE default). On the H100 and the H200 a process holds 33 MiB more
    after its first inference step and another 33 MiB after its first training step (autograd's backward
    thread: a handle of its own) — 34,603,008 bytes each in both sweeps' at-rest records."""
    capability = device.compute_capability if device is not None else None
    lt = 1 * MIB
    if capability and capability[0] >= 9:
        return 32 * MIB + lt
    return 8 * MIB + 128 * 1024 + lt


def workspace_threads(mode: str | None) -> int:
    """Threads that hold cuBLAS workspaces in a step: the caller's, and in training autograd's backward one."""
    return 2 if mode == "training" else 1


def held_workspace_threads(at_rest_bytes: int, device, run_bytes: int = 0) -> int:
    """How many threads' cuBLAS workspaces a process already holds: what it had allocated at rest before the
    step (``at_rest_bytes``) beyond the run's own tensors (``run_bytes``: its weights and input where those
    were allocated already). A sweep that runs its runs one after another in one process keeps the
    workspaces of its earlier steps (an inference run after a training run holds two)."""
    return max(0, round((at_rest_bytes - run_bytes) / cublas_workspace_bytes(device)))


def fft_workspace_bytes(batch: int, in_channels: int, out_channels: int, transform: int) -> int:
    """cuDNN's workspace for one convolution it runs by FFT: its input, filter and output transformed to
    ``transform`` × ``transform`` complex frequencies, 8 bytes each (N·Cin + Cout·Cin + N·Cout planes). Read
    from rooflow's H100 and H200 sweeps: VGG16's FP32 batch-32 steps hold 1.70 GB (inference, H100) and 2.35
    (training) more than their tensors, what this gives at its 28×28 layers (512 channels, 32×32 transforms):
    1.70 and 2.32 GB (benchmarks/README.md, "memory prediction")."""
    planes = batch * in_channels + out_channels * in_channels + batch * out_channels
    return int(8 * transform * transform * planes)


def fft_workspace_peak(totals: dict[str, Any], device) -> int:
    """The live bytes plus cuDNN's FFT workspace (:func:`fft_workspace_bytes`) at the FP32 convolution where
    their sum is largest, among those the device's kernel model runs by FFT (its fastest algorithm there:
    rooflow.estimate.kernel_calibration.fft_sizes, Hopper only); 0 where none does."""
    convolutions = totals.get("fp32_convolutions") or []
    if not convolutions:
        return 0
    from rooflow.estimate.kernel_calibration import fft_sizes

    sizes = fft_sizes([row[:7] for row in convolutions], device)
    return max([0] + [int(row[7]) + fft_workspace_bytes(row[0], row[1], row[3], int(size))
                      for row, size in zip(convolutions, sizes) if size])


def tensor_core_convolutions(device, precision: str) -> bool:
    """Whether convolutions run on tensor cores (NHWC kernels, so cuDNN transposes NCHW tensors)."""
    capability = device.compute_capability if device is not None and device.is_cuda else None
    if not capability:
        return False
    cc = capability[0] * 10 + capability[1]
    return (precision == "fp16" and cc >= 70) or (precision in ("tf32", "bf16") and cc >= 80)


def predict_memory(totals: dict[str, Any], device, held_threads: int = 0) -> dict[str, Any]:
    """The steady-state peak of ``torch.cuda.max_memory_allocated`` for one step (after warm-up), its range,
    and whether the run fits the device.

    Point: the estimator's live-tensor peak (parameters, gradients, momentum, saved activations, autocast's
    weight copies, temporaries; in training the previous step's gradients through the forward; dropout's saved
    masks one byte per element, as native_dropout keeps them), without the L × L
    matrices of attention's math path (a GPU runs it fused); at least the optimizer's peak under SGD's foreach
    update (a GPU's default: a copy of every gradient at once);
    with cuDNN's NHWC copies of each convolution's activations while it runs
    where convolutions use tensor cores, else with cuDNN's FFT workspace while each FP32 forward convolution the
    device's kernel model runs by FFT runs (:func:`fft_workspace_peak`: Hopper's 3×3 convolutions of 28×28 and
    14×14 inputs); plus the cuBLAS/cuBLASLt workspaces (the caller's thread; in training
    autograd's too). Range: low = the tensors alone (without the math path's L × L matrices, as the point);
    high = the point plus an FFT workspace of twice the largest convolution's activations (cuDNN's autotuner
    may pick FFT for other FP32 convolutions, backward ones included, whose workspace holds their activations in
    the frequency domain — which it picks beyond the model's cannot be known before it runs). ``fits`` compares point × (1 + margin) + the CUDA context with the
    device's memory. ``held_threads``: threads whose workspaces the process already holds from earlier steps
    (held_workspace_threads; 0: a fresh process, as each of the workflow's timing jobs)."""
    tensors = int(totals.get("peak_memory_bytes") or 0)
    if device is None or not device.is_cuda:
        return {"predicted_memory_bytes": tensors, "predicted_memory_bytes_low": tensors,
                "predicted_memory_bytes_high": tensors, "fits": None, "fit_verdict": None}
    tensors = int(totals.get("peak_memory_bytes_cuda") or tensors)  # as a GPU allocates them (dropout's masks)
    precision, mode = totals.get("precision"), totals.get("mode")
    layout = tensor_core_convolutions(device, precision)
    base = int(totals.get("peak_memory_bytes_layout_workspace") or tensors) if layout else tensors
    # a GPU runs attention as one fused kernel: the math path's L × L matrices are never allocated (but where
    # PyTorch takes the math path: bf16 before sm_80)
    fused = (int(totals.get("peak_memory_bytes_fused_attention") or tensors)
             if attention.fused(precision, device.compute_capability) else tensors)
    base -= tensors - fused
    # SGD's foreach update holds a copy of every gradient at once (the optimizer's peak; no convolution runs)
    base = max(base, int(totals.get("peak_memory_bytes_foreach_optimizer") or 0))
    if not layout:  # FP32 convolutions cuDNN runs by FFT hold their transforms while they run
        base = max(base, fft_workspace_peak(totals, device))
    point = base + max(workspace_threads(mode), held_threads) * cublas_workspace_bytes(device)
    high = point + (0 if layout else 2 * int(totals.get("largest_conv_activation_bytes") or 0))
    capacity = device.memory_bytes
    # low: the tensors alone as the GPU holds them (no attention score matrices), never above the point
    result = {"predicted_memory_bytes": point, "predicted_memory_bytes_low": min(fused, point),
              "predicted_memory_bytes_high": high, "memory_capacity_bytes": capacity, "fits": None,
              "fit_verdict": None}
    if capacity:
        needed = point * (1 + FIT_MARGIN) + CONTEXT_BYTES
        result["fits"] = needed <= capacity
        gb = 1e9
        if needed <= capacity:
            verdict = f"fits: needs {point / gb:.1f} GB (+{FIT_MARGIN:.0%} and {CONTEXT_BYTES / gb:.0f} GB context) of {capacity / gb:.0f} GB"
            if high * (1 + FIT_MARGIN) + CONTEXT_BYTES > capacity:
                verdict += f"; an FFT workspace (up to {high / gb:.1f} GB) would not"
        else:
            verdict = (f"does not fit: needs {point / gb:.1f} GB (+{FIT_MARGIN:.0%} and {CONTEXT_BYTES / gb:.0f} GB "
                       f"context) of {capacity / gb:.0f} GB")
        result["fit_verdict"] = verdict
    return result


def unfit_record(totals: dict[str, Any], device) -> dict[str, Any]:
    """The result row of a run the workflow does not submit because it cannot fit the device (the timing
    job's record, status ``does-not-fit``)."""
    memory = predict_memory(totals, device)
    return {"status": "does-not-fit", "device": device.key,
            **{k: totals[k] for k in ("model", "batch", "precision", "mode")},
            "message": f"not run: {memory['fit_verdict']} (rooflow's memory prediction; the run was not submitted)",
            "predicted_memory_bytes": memory["predicted_memory_bytes"],
            "memory_capacity_bytes": memory.get("memory_capacity_bytes")}


def fit_table(devices: dict, pairs: list[str], estimates: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """{'device/model/bBATCH-PRECISION-MODE': {fits, verdict, predicted_memory_bytes}} for each pair, from the
    estimates' totals (the workflow's predict_fit checkpoint)."""
    by_run = {f"{t['model']}/b{t['batch']}-{t['precision']}-{t['mode']}": t for t in estimates}
    table = {}
    for pair in pairs:
        device, run = pair.split("/", 1)
        memory = predict_memory(by_run[run], devices[device])
        table[pair] = {"fits": memory["fits"], "verdict": memory["fit_verdict"],
                       "predicted_memory_bytes": memory["predicted_memory_bytes"]}
    return table
