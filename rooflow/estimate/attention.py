"""Scaled-dot-product attention as a GPU runs it: one fused kernel, not the math decomposition the estimate counts.

The estimate counts attention at its math decomposition (rooflow.estimate.formulas: QK^T and AV as ``bmm``,
the scaling ``mul``, the softmax; under autocast the math path also up-casts q, k and v to fp32). On a CUDA
GPU, ``F.scaled_dot_product_attention`` picks a fused kernel instead (PyTorch's ``select_sdp_backend``,
aten/src/ATen/native/transformers/cuda/sdp_utils.cpp: flash, then memory-efficient, then math):

- **flash** for fp16/bf16 on sm_80 and newer (head dimension ≤ 256, a multiple of 8): tensor cores at the
  dtype's peak;
- **memory-efficient** (CUTLASS, from xFormers) otherwise, for fp16 and fp32 (bf16 only on sm_80 and newer:
  ``less_than_sm80_mem_efficient_dtypes`` is half and float; a bf16 run before sm_80 takes the **math** path, its
  products in fp32). Its GEMMs (``gemm_kernel_utils.h``, ``DefaultGemmType``): fp32 on sm_80 and newer on tensor
  cores as three TF32 products per product (``OpMultiplyAddFastF32``: fp32 accuracy, whatever ``allow_tf32``
  says); fp16 on tensor cores from sm_70 (Volta's 8×8×4, then 16×8×8); anything else on FP32 FMA units (SIMT).

Either kernel keeps the L × L score matrix on chip: it reads q, k, v and writes the output (backward: reads
those and the output gradient, writes dq, dk, dv), so the scaling and the softmax are not separate kernels,
and backward recomputes the scores (five products where the math path runs four).
"""

from __future__ import annotations

from rooflow.estimate.formulas import parse_gemms

BACKWARD_RECOMPUTE = 5 / 4  # backward products of a fused kernel / those of the math path (QK^T again)
SDPA_SOFTMAX = "_safe_softmax"
KERNEL_PREFIX = "sdpa_"  # time-model compute paths of fused attention: sdpa_<backend>_<phase>_<path>
FAST_FP32_PRODUCTS = 3  # memory-efficient fp32 on sm_80+: three TF32 products per product


def backend(precision: str, capability: tuple[int, int] | None) -> str:
    """``flash``, ``efficient`` or ``math``: the kernel PyTorch picks for a run's attention (module docstring)."""
    if not capability:
        return "math"
    if precision in ("fp16", "bf16") and capability >= (8, 0):
        return "flash"
    if precision == "bf16":  # the memory-efficient kernel takes bf16 from sm_80 only
        return "math"
    return "efficient" if capability >= (5, 0) else "math"


def fused(precision: str, capability: tuple[int, int] | None) -> bool:
    """Whether a run's SDPA calls run as a fused kernel (flash or memory-efficient), not the math path counted."""
    return backend(precision, capability) != "math"


def kernel_path(precision: str, capability: tuple[int, int] | None) -> tuple[str, float]:
    """(compute path, products per product) of the fused attention kernel: its peak is the path's ÷ products."""
    chosen = backend(precision, capability)
    if chosen == "flash":
        return precision, 1.0
    if chosen == "efficient" and precision == "fp16" and capability >= (7, 0):
        return "fp16", 1.0
    if chosen == "efficient" and capability >= (8, 0):
        return "tf32", float(FAST_FP32_PRODUCTS)
    return "fp32", 1.0


def fused_bytes(views, element_bytes: int) -> float:
    """Bytes a fused kernel moves for the attention products ``views`` ((m, n, k, count, ...) each): the
    operands of each product but its largest, the L × L score (or probability) matrix kept on chip."""
    total = 0.0
    for m, n, k, count, *_ in views:
        operands = sorted((m * k, k * n, m * n))
        total += (operands[0] + operands[1]) * count * element_bytes
    return total


def _absorbed(op: str, op_class: str, phase: str, dtype: str) -> bool:
    """Whether an op of an attention layer is part of the math path that a fused kernel absorbs."""
    cast = op == "_to_copy" and ((phase == "forward" and dtype == "fp32")
                                 or (phase == "backward" and dtype in ("fp16", "bf16")))
    return op_class == "softmax" or op == "mul" or cast


def _writes_scores(gemms) -> bool:
    """Whether an attention product (its first view (m, n, k, count)) writes the L × L score matrix (or its
    gradient): its output is its largest operand."""
    if not gemms:
        return False
    m, n, k = gemms[0][:3]
    return m * n >= max(m * k, k * n)


def _score_bytes(ops) -> dict[str, set[float]]:
    """Per SDPA layer, the bytes one forward call of its score product writes: the size of the L × L matrix."""
    sizes: dict[str, set[float]] = {}
    for _, row in ops[(ops["op_class"] == "attention") & (ops["phase"] == "forward")].iterrows():
        if _writes_scores(parse_gemms(row["gemms"])):
            sizes.setdefault(row["layer"], set()).add(float(row["bytes_written"]) / max(1, int(row["calls"])))
    return sizes


def fused_rows(ops, fused: bool = True) -> set:
    """Index labels of the rows of an ops table that a fused attention kernel absorbs: in each layer and phase
    that has attention products, the softmax, the scaling ``mul`` and the math path's casts of q, k, v (to fp32
    in forward, back in backward), and the math path's other elementwise ops on the L × L scores — the mask it
    adds and the dropout of the probabilities (``bernoulli_``, ``div_``, and the gradient's ``mul`` in backward),
    which flash and memory-efficient attention apply inside the kernel (the mask from its own indices or the bias
    it reads, the dropout from a Philox seed it regenerates in backward: no mask tensor). None where the run takes the math path (``fused``
    False: :func:`fused`)."""
    layers = sdpa_layers(ops["layer"], ops["op"]) if fused else set()
    if not layers:
        return set()
    scores = _score_bytes(ops[ops["layer"].isin(layers)])
    return {index for index, row in ops.iterrows() if row["layer"] in layers
            and (_absorbed(row["op"], row["op_class"], row["phase"], row["compute_precision"])
                 or (row["phase"] in ("forward", "backward") and row["op_class"] == "elementwise"
                     and float(row["bytes_written"]) / max(1, int(row["calls"])) in scores.get(row["layer"], ())))}


def fast_path_rows(ops, precision: str, mode: str, layers) -> set:
    """Index labels of the rows ``nn.MultiheadAttention``'s fast path does not run on a GPU. In inference without
    autocast (fp32, tf32) the module calls ``torch._native_multi_head_attention``, which projects q, k and v in
    one ``addmm`` with the bias and hands the heads to the fused kernel as strided views: the math path's bias
    ``add`` and its ``contiguous()`` copies (``clone``) of q, k, v are not launched. ``layers``: the estimate's
    ``mha_fast_path_layers``, the calls the module's own conditions admit (counter.mha_fast_path_eligible);
    autocast, gradients and training refuse the rest. The H200's ViT-B/16 b256 TF32 inference trace
    (tests/data/real/gpu-2026-11-27) ran ``aten::_native_multi_head_attention``: 48 ``addmm`` kernels and no
    clone or broadcast add; its bf16 inference (autocast) ran both."""
    layers = set(layers or ())
    if mode != "inference" or precision not in ("fp32", "tf32") or not layers:
        return set()
    return {index for index, row in ops.iterrows() if row["layer"] in layers
            and row["phase"] == "forward" and row["op"] in ("add", "clone")}


def sdpa_layers(layers, ops) -> set[str]:
    """The layers that call ``F.scaled_dot_product_attention``: its math path (what the meta device runs)
    normalises with ``_safe_softmax``, where a model's own ``softmax`` call (Swin's, MaxViT's attention: eager
    products and softmax on a GPU too) runs ``_softmax``."""
    return {layer for layer, op in zip(layers, ops) if op == SDPA_SOFTMAX}


def on_chip_storages(records) -> set[int]:
    """Storage keys of a recorded step (rooflow.estimate.counter.OpRecord) that a fused attention kernel never
    allocates: the L × L scores and probabilities (and their gradients) the math path writes, their casts, and
    the forward's copies of q, k, v that the time model's fused kernel absorbs too (its scaling ``mul`` and its
    casts to fp32: a fused kernel reads q, k, v as they are — rooflow.estimate.memory.fused_attention_peak
    keeps those alive as long as the copies were, since the kernel saves them for backward)."""
    layers = sdpa_layers([r.layer for r in records], [r.op for r in records])
    keys: set[int] = set()
    # per layer, the bytes of its forward score matrices: the math path's elementwise ops on them and on their
    # gradients (the mask add, the probabilities' dropout noise and its gradient: fused_rows) write tensors a
    # fused kernel never allocates
    scores: dict[str, set[int]] = {}
    for record in records:
        if record.layer in layers and record.phase == "forward" and record.op_class == "attention" \
                and _writes_scores(record.gemms):
            scores.setdefault(record.layer, set()).update(size for _, size in record.writes)
    for record in records:
        if record.layer not in layers:
            continue
        if record.op_class == "attention" and record.gemms:
            if _writes_scores(record.gemms):  # the product writes the score matrix (or its gradient)
                keys.update(key for key, _ in record.writes)
        elif (record.phase in ("forward", "backward") and record.op_class == "elementwise"
              and any(size in scores.get(record.layer, ()) for _, size in record.writes)):
            keys.update(key for key, _ in record.writes)
        elif record.op_class == "softmax":
            keys.update(key for key, _ in record.writes)
        elif record.op == "_to_copy" and any(key in keys for key, _ in record.reads):
            keys.update(key for key, _ in record.writes)  # a cast of the probabilities
        elif record.phase == "forward" and _absorbed(record.op, record.op_class, record.phase, record.dtype):
            keys.update(key for key, _ in record.writes)
    return keys
