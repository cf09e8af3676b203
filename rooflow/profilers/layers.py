"""Which layer and phase each profiled kernel belongs to, and the per-layer table of measured vs estimated
FLOPs and DRAM bytes.

**From NVTX ranges** (``ncu --nvtx``; :func:`attribute_by_nvtx`). ncu writes each kernel's NVTX push/pop
stack when it launched (``NcuResult.kernels["nvtx_stack"]``): the thread id, then one quoted
``"<domain>:<message>:<payload fields>"`` item per level, outermost first. rooflow's profiling driver pushes,
on the main thread, ``phase:forward``/``phase:loss``/``phase:backward``/``phase:optimizer`` around the phases
and ``layer:<qualified module name>`` around every module (forward pre/post hooks; containers too, so the
innermost layer item is the layer), and runs the step under ``torch.autograd.profiler.emit_nvtx()``, whose
op ranges carry autograd's sequence number (``aten::conv2d, seq = 360, op_id = 1``). Backward kernels run on
autograd's own thread, outside every range the main thread pushed; their node's range
(``ConvolutionBackward0, seq = 360``) carries the sequence number of the forward op that recorded it, so a
backward kernel belongs to the layer of the forward op with the same ``seq`` — the correlation NVIDIA's
PyProf made. Kernels with no layer (a residual add outside leaf modules, gradient accumulation, the
optimizer's fused updates) go to explicit rows (``(outside layers)``, ``(loss)``, ``(optimizer)``); no kernel
is dropped, so the rows sum to ncu's totals.

**From launch order** (:func:`attribute_by_launch_order`), for profiles without NVTX ranges, and only for the
convolution/matmul kernels: autograd runs the same graph in the same order on the GPU as on the meta device
where the estimate was counted, so the k-th run of consecutive convolution/GEMM kernels (layout copies and
fills between them do not end a run; any other kernel does) belongs to the k-th convolution/matmul op of the
estimate (ops.csv, in execution order). Used only when the number of runs equals the number of ops exactly.

Estimated values per (layer, phase) come from the estimate's ``ops.csv`` (FLOPs; fusion-aware and unfused
bytes), the layer's type from ``layers.csv``.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pandas as pd

from rooflow.conventions import MATMUL_OP_CLASSES
from rooflow.profilers.kernels import GLUE_KERNEL_CLASSES, MATMUL_KERNEL_CLASSES, short_kernel_name
from rooflow.profilers.nvtx import LAYER_RANGE, PHASE_RANGE, innermost, parse_nvtx_stack

OUTSIDE = "(outside layers)"
LOSS = "(loss)"
OPTIMIZER = "(optimizer)"
# The estimate's op classes that count as convolution/matmul work.

LAYER_TABLE_COLUMNS = [
    "layer", "type", "phase", "kernels", "estimated_flops", "estimated_matmul_flops", "measured_flops",
    "measured_tensor_flops", "measured_cuda_core_flops", "flops_ratio", "estimated_fused_bytes",
    "estimated_unfused_bytes", "measured_dram_bytes", "bytes_ratio", "top_kernel", "attribution", "note",
]

_SEQ = re.compile(r"\bseq\s*=\s*(\d+)")
_BACKWARD_NODE = re.compile(r"^([\w:]+Backward\d*)\s*,\s*seq\s*=\s*(\d+)")
_LOSS_OP = re.compile(r"loss|log_softmax|cross_entropy", re.IGNORECASE)




def attribute_by_nvtx(kernels: pd.DataFrame) -> pd.DataFrame:
    """(layer, phase) of every kernel of an ncu table with ``nvtx_stack`` (see the module docstring).

    Returns a frame on the kernels' index with ``layer`` (a module name, ``(loss)``, ``(optimizer)`` or
    ``(outside layers)``), ``phase`` (forward, loss, backward, optimizer or ``(none)``) and ``how``
    (``range``: inside the layer's range; ``seq``: a backward kernel tied to its forward op; ``none``)."""
    stacks = [parse_nvtx_stack(text) for text in kernels.get("nvtx_stack", pd.Series("", index=kernels.index))]
    # seq -> layer of the forward op that recorded the autograd node. An op that creates no node shares its
    # seq with the next op that does, so the last op seen with a seq is the one whose node carries it.
    seq_layer: dict[str, str] = {}
    for _, messages in stacks:
        layer = innermost(messages, LAYER_RANGE)
        phase = innermost(messages, PHASE_RANGE)
        for message in messages:
            match = _SEQ.search(message)
            if match and not _BACKWARD_NODE.match(message):
                if layer:
                    seq_layer[match.group(1)] = layer
                elif phase == "loss" or _LOSS_OP.search(message.split(",", 1)[0]):
                    seq_layer[match.group(1)] = LOSS
    rows = []
    for _, messages in stacks:
        layer = innermost(messages, LAYER_RANGE)
        phase = innermost(messages, PHASE_RANGE)
        node = next((m for m in (_BACKWARD_NODE.match(message) for message in messages) if m), None)
        in_autograd = node is not None or any(m.startswith("autograd::engine::evaluate_function") for m in messages)
        if layer:  # (a backward hook's range on autograd's thread has no phase item: it is the backward)
            rows.append((layer, phase or ("backward" if in_autograd else "(none)"), "range"))
        elif node is not None:
            owner = seq_layer.get(node.group(2))
            if owner == LOSS:
                rows.append((LOSS, "loss", "seq"))
            elif owner:
                rows.append((owner, "backward", "seq"))
            else:
                rows.append((OUTSIDE, "backward", "none"))
        elif in_autograd:
            rows.append((OUTSIDE, "backward", "none"))
        elif phase == "optimizer":
            rows.append((OPTIMIZER, "optimizer", "range"))
        elif phase == "loss" or any(_LOSS_OP.search(m.split(",", 1)[0]) for m in messages if _SEQ.search(m)):
            rows.append((LOSS, "loss", "range"))
        else:
            rows.append((OUTSIDE, phase or "(none)", "none"))
    return pd.DataFrame(rows, columns=["layer", "phase", "how"], index=kernels.index)


def has_nvtx(kernels: pd.DataFrame | None) -> bool:
    """Whether an ncu kernel table carries rooflow's layer ranges (``layer:`` items in its NVTX stacks)."""
    if kernels is None or "nvtx_stack" not in kernels.columns:
        return False
    return bool(kernels["nvtx_stack"].fillna("").astype(str).str.contains('layer:', regex=False).any())


def matmul_flops_per_kernel(kernels: pd.DataFrame) -> pd.Series:
    """The FLOPs a kernel contributes to the convolution/matmul side: its tensor-core FLOPs, plus its CUDA-core
    FLOPs when it is a convolution/GEMM kernel (an FP32 convolution on CUDA cores, FFT/Winograd transforms,
    epilogues)."""
    tensor = _column(kernels, "flops_tensor")
    return tensor + cuda_core_flops(kernels).where(kernels["kernel_class"].isin(MATMUL_KERNEL_CLASSES), 0.0)


def cuda_core_flops(kernels: pd.DataFrame) -> pd.Series:
    return sum(_column(kernels, c) for c in ("flops_fp32", "flops_fp16", "flops_fp64"))


def _column(kernels: pd.DataFrame, name: str) -> pd.Series:
    if name not in kernels.columns:
        return pd.Series(0.0, index=kernels.index)
    return pd.to_numeric(kernels[name], errors="coerce").fillna(0.0)


def matmul_runs(kernels: pd.DataFrame) -> list[list[Any]]:
    """Runs of consecutive convolution/GEMM kernels (index labels, launch order); glue kernels (layout copies,
    fills, cuDNN helpers: :data:`GLUE_KERNEL_CLASSES`) between them do not end a run, any other kernel does."""
    runs: list[list[Any]] = []
    current: list[Any] | None = None
    order = kernels.sort_values("id").index if "id" in kernels.columns else kernels.index
    for label in order:
        kernel_class = kernels.at[label, "kernel_class"]
        if kernel_class in MATMUL_KERNEL_CLASSES:
            if current is None:
                current = []
                runs.append(current)
            current.append(label)
        elif kernel_class not in GLUE_KERNEL_CLASSES:
            current = None
    return runs


def matmul_ops(ops: pd.DataFrame) -> pd.DataFrame:
    """The estimate's convolution/matmul ops in execution order (ops.csv rows, one per layer × phase × op)."""
    if ops is None or ops.empty or "op_class" not in ops.columns:
        return pd.DataFrame(columns=["layer", "phase", "op", "flops"])
    matmul = ops[ops["op_class"].isin(MATMUL_OP_CLASSES)]
    # ops.csv splits one layer's op by GEMM shape (a linear's two backward mm): one row per layer × phase × op
    numeric = [c for c in matmul.columns if c not in ("layer", "type", "phase", "op", "op_class",
                                                        "compute_precision", "gemms")
               and pd.api.types.is_numeric_dtype(matmul[c])]
    keys = [c for c in ("layer", "phase", "op") if c in matmul.columns]
    first = matmul.groupby(keys, sort=False).first().reset_index()
    first[numeric] = matmul.groupby(keys, sort=False)[numeric].sum().reset_index()[numeric]
    return first


def attribute_by_launch_order(kernels: pd.DataFrame, ops: pd.DataFrame) -> pd.DataFrame | None:
    """(layer, phase) of the convolution/GEMM kernels by launch order (module docstring), or None when the
    runs of such kernels do not pair one-to-one with the estimate's convolution/matmul ops."""
    runs = matmul_runs(kernels)
    targets = matmul_ops(ops)
    if not runs or len(runs) != len(targets):
        return None
    rows = {}
    for run, (_, op) in zip(runs, targets.iterrows()):
        for label in run:
            rows[label] = (op["layer"], op["phase"], "order")
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=["layer", "phase", "how"])
    return frame.reindex(kernels.index)


def repeated_steps(kernels: pd.DataFrame, ops: pd.DataFrame) -> int | None:
    """k ≥ 2 when the profile holds k times the convolution/matmul kernel runs of one step (several profiled
    iterations); None otherwise."""
    runs, targets = len(matmul_runs(kernels)), len(matmul_ops(ops))
    if targets and runs > targets and runs % targets == 0:
        return runs // targets
    return None


def _estimate_rows(ops: pd.DataFrame) -> pd.DataFrame:
    """Estimated FLOPs and bytes per (layer, phase) in execution order; the loss and the optimizer as one
    row each (the optimizer's fused kernels update every layer at once)."""
    frame = ops.copy()
    frame["layer"] = np.where(frame["phase"] == "loss", LOSS,
                              np.where(frame["phase"] == "optimizer", OPTIMIZER, frame["layer"]))
    frame["matmul"] = frame["flops"].where(frame["op_class"].isin(MATMUL_OP_CLASSES), 0.0)
    frame["fused"] = frame["fused_bytes_read"] + frame["fused_bytes_written"]
    frame["unfused"] = frame["bytes_read"] + frame["bytes_written"]
    grouped = frame.groupby(["layer", "phase"], sort=False).agg(
        estimated_flops=("flops", "sum"), estimated_matmul_flops=("matmul", "sum"),
        estimated_fused_bytes=("fused", "sum"), estimated_unfused_bytes=("unfused", "sum"))
    return grouped.reset_index()


def _ratio(measured: float, estimated: float) -> float:
    return measured / estimated if estimated and not math.isnan(measured) else math.nan


# Why a profile's kernels are not split by layer: no NVTX ranges, or a compiled step (profiled whole).
NO_LAYER_RANGES = ("the ncu profile has no NVTX layer ranges (ncu --nvtx with rooflow's profiling driver records "
                   "them; imported profiles usually lack them): measured FLOPs and bytes cannot be split by layer")
WHOLE_STEP = ("a compiled step (torch.compile) is profiled whole: inductor's kernels fuse ops across layers, so "
              "measured FLOPs and bytes are the step's, not split by layer")


def layer_table(kernels: pd.DataFrame, ops: pd.DataFrame, layers: pd.DataFrame | None = None,
                by_layer: bool = True) -> pd.DataFrame:
    """One row per (layer, phase): estimated vs measured FLOPs and DRAM bytes (:data:`LAYER_TABLE_COLUMNS`).

    Rows: every (layer, phase) of the estimate in execution order, then kernels that no estimated row takes
    (``(outside layers)`` per phase). Without NVTX ranges in the ncu table, or for a compiled step
    (``by_layer`` False), the measured columns stay empty, one ``(all kernels)`` row holds the totals and
    ``note`` says why."""
    estimate = _estimate_rows(ops)
    types = dict(zip(layers["layer"], layers["type"])) if layers is not None and "type" in layers else {}
    if kernels is None or not has_nvtx(kernels) or not by_layer:
        table = estimate.assign(layer_type=[types.get(name, "") for name in estimate["layer"]])
        table = table.rename(columns={"layer_type": "type"})
        table["attribution"] = "none"
        table["note"] = ""
        extra = {"layer": "(all kernels)", "type": "", "phase": "(all)", "attribution": "none",
                 "note": NO_LAYER_RANGES if by_layer else WHOLE_STEP}
        if kernels is not None and len(kernels):
            extra.update(kernels=len(kernels), measured_flops=float(_total_flops(kernels).sum()),
                         measured_tensor_flops=float(_column(kernels, "flops_tensor").sum()),
                         measured_cuda_core_flops=float(cuda_core_flops(kernels).sum()),
                         measured_dram_bytes=float(_column(kernels, "dram_bytes").sum()))
        table = pd.concat([table, pd.DataFrame([extra])], ignore_index=True)
        return table.reindex(columns=LAYER_TABLE_COLUMNS)

    where = attribute_by_nvtx(kernels)
    measured = pd.DataFrame({
        "layer": where["layer"], "phase": where["phase"], "flops": _total_flops(kernels),
        "tensor": _column(kernels, "flops_tensor"), "cuda_core": cuda_core_flops(kernels),
        "dram": _column(kernels, "dram_bytes"), "name": kernels["name"].map(short_kernel_name),
    })
    # a layer's kernels in a phase the estimate does not have for it (e.g. no phase range) stay on that layer
    by_row = measured.groupby(["layer", "phase"], sort=False)
    sums = by_row[["flops", "tensor", "cuda_core", "dram"]].sum()
    counts = by_row.size()
    top = measured.sort_values("flops", ascending=False).groupby(["layer", "phase"], sort=False)["name"].first()

    keys = list(zip(estimate["layer"], estimate["phase"]))
    extra_keys = [key for key in sums.index if key not in set(keys)]
    rows = []
    for position, key in enumerate(keys + extra_keys):
        layer, phase = key
        est = estimate.iloc[position] if position < len(keys) else None
        got = sums.loc[key] if key in sums.index else None
        row = {"layer": layer, "type": types.get(layer, ""), "phase": phase,
               "kernels": int(counts.get(key, 0)), "attribution": "nvtx", "note": ""}
        for column in ("estimated_flops", "estimated_matmul_flops", "estimated_fused_bytes",
                       "estimated_unfused_bytes"):
            row[column] = float(est[column]) if est is not None else 0.0
        row["measured_flops"] = float(got["flops"]) if got is not None else 0.0
        row["measured_tensor_flops"] = float(got["tensor"]) if got is not None else 0.0
        row["measured_cuda_core_flops"] = float(got["cuda_core"]) if got is not None else 0.0
        row["measured_dram_bytes"] = float(got["dram"]) if got is not None else 0.0
        row["flops_ratio"] = _ratio(row["measured_flops"], row["estimated_flops"])
        # rows by layer are of eager steps (a compiled one is profiled whole): held to the unfused traffic, as the
        # run's own DRAM-byte reconciliation is (rooflow.conventions.bytes_model)
        row["bytes_ratio"] = _ratio(row["measured_dram_bytes"], row["estimated_unfused_bytes"])
        row["top_kernel"] = top.get(key, "")
        if est is None:
            row["note"] = ("kernels outside every layer range (a residual add outside leaf modules, gradient "
                           "accumulation, kernels before or after the phases)" if layer == OUTSIDE else
                           "kernels in a layer/phase the estimate has no ops for")
        rows.append(row)
    return pd.DataFrame(rows, columns=LAYER_TABLE_COLUMNS)


def _total_flops(kernels: pd.DataFrame) -> pd.Series:
    if "flops_total" in kernels.columns:
        return pd.to_numeric(kernels["flops_total"], errors="coerce").fillna(0.0)
    return _column(kernels, "flops_tensor") + cuda_core_flops(kernels)


def biggest_gaps(table: pd.DataFrame, count: int = 5) -> pd.DataFrame:
    """The rows whose measured FLOPs differ most from their estimate (absolute difference)."""
    gap = (table["measured_flops"] - table["estimated_flops"]).abs()
    return table.assign(flops_gap=table["measured_flops"] - table["estimated_flops"]).loc[
        gap.sort_values(ascending=False).index[:count]]


def read_kernel_table(path) -> pd.DataFrame:
    """An ncu per-kernel table as the workflow writes it (ncu_kernels.csv): text columns stay text."""
    frame = pd.read_csv(path, dtype={"name": str, "kernel_class": str, "grid_size": str, "block_size": str,
                                     "nvtx_stack": str}, keep_default_na=False, na_values={
        c: [""] for c in ("flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor", "flops_total", "dram_bytes",
                          "l2_bytes", "l1_bytes", "seconds")})
    return frame


def layer_table_note(table: pd.DataFrame, cause: str | None, bytes_cause: str | None = None) -> str:
    """The sentence above the per-layer HTML table: how kernels were attributed, the biggest gaps, the causes
    of a FLOP and a DRAM-byte gap."""
    if (table["attribution"] == "nvtx").any():
        gaps = biggest_gaps(table[table["estimated_flops"] > 0], 3)
        shown = "; ".join(f"{r.layer} {r.phase} {r.measured_flops / 1e9:.4g} vs {r.estimated_flops / 1e9:.4g} GFLOP"
                          for r in gaps.itertuples())
        how = (f"Kernels attributed by NVTX ranges (backward kernels through autograd's sequence number); "
               f"the biggest FLOP gaps: {shown}.")
    elif (table["note"] == WHOLE_STEP).any():
        how = f"{WHOLE_STEP[0].upper()}{WHOLE_STEP[1:]} (last row: all kernels)."
    else:
        how = ("This profile has no NVTX layer ranges, so measured values are not split by layer (last row: all "
               "kernels).")
    return (f"{how} FLOPs: 1 FMA = 2 FLOP; bytes: DRAM (ncu) vs the estimate's fusion-aware and unfused traffic; "
            f"ratios are measured / estimated; sort by flops_gap to rank layers."
            + (f" Reconciliation: {cause}" if cause else "") + (f" DRAM bytes: {bytes_cause}" if bytes_cause else ""))
