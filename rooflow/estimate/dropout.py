"""Dropout as a GPU runs it: one kernel and a one-byte mask, not the decomposition the estimate counts.

The estimate records a step on the meta device, where ``F.dropout`` in training (``at::dropout``,
aten/src/ATen/native/Dropout.cpp) takes ``_dropout_impl``: ``noise = empty_like(input)``, ``noise.bernoulli_(1 -
p)``, ``noise.div_(1 - p)``, ``input * noise`` — three kernels, a noise tensor in the input's dtype saved for
backward, and a backward ``grad * noise``. A CPU runs exactly that. On a CUDA tensor (``is_fused_kernel_acceptable``:
0 < p < 1, not empty) the same call is ``at::native_dropout``: one kernel reads the input and writes the output
and a bool mask (one byte per element, what autograd saves); backward is ``native_dropout_backward`` (reads the
gradient and the mask, writes the gradient). ``dropout_`` (``nn.Dropout(inplace=True)``) takes ``_dropout_impl``
on a GPU too (its ``mul_`` is left as recorded).

Per element of an fp32 input that is 24 bytes forward and 12 backward as recorded, 9 and 9 as a GPU runs it, and a
saved mask of 1 byte where the meta device saves 4 (bf16: 12 and 6, 5 and 5, 1 for 2).

Feature dropout (``nn.Dropout2d``: noise of one element per channel), alpha dropout (more ops on the noise) and
torchvision's stochastic depth (noise of one element per sample) run as recorded on a GPU too: only a noise
tensor the size of its input, drawn by ``bernoulli_``, scaled at most once by ``div_`` and multiplied into a new
tensor (``mul``) with the input, is taken for ``native_dropout``.
"""

from __future__ import annotations

from collections import defaultdict

import pandas as pd

from rooflow.estimate.formulas import ELEMENT_BYTES, ELEMENTWISE_FLOPS_PER_ELEMENT

NATIVE = "native_dropout"  # the forward kernel (its ``bernoulli_``, ``div_`` and ``mul`` rows are part of it)
NATIVE_BACKWARD = "native_dropout_backward"
APPLY = "mul"  # the row of a forward chain that carries the kernel
MASK_BYTES = 1  # a bool per element
# modules whose dropout is _dropout_impl's decomposition on a GPU too (feature and alpha dropout)
DECOMPOSED_MODULES = {"Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"}


def _same_size_product(record, nbytes: int) -> bool:
    """Whether a record multiplies two tensors of ``nbytes`` into one (the noise into its input)."""
    return (record.op == APPLY and len(record.reads) == 2
            and all(size == nbytes for _, size in record.reads + record.writes))


def native_dropout_records(records, layer_types: dict[str, str] | None = None) -> tuple[dict[int, str], dict[int, int]]:
    """(record index → the CUDA op the record is part of, noise storage key → the bytes of the mask a GPU saves
    instead) for the dropout calls of a recorded step (rooflow.estimate.counter.OpRecord each) that a GPU runs
    as ``native_dropout`` (module docstring). ``layer_types``: layer → module class; a feature dropout module's
    noise is left as recorded even where it has its input's size (a 2-D input to ``nn.Dropout2d``)."""
    touching: dict[int, list] = defaultdict(list)
    for record in records:
        for key in {key for key, _ in record.reads} | {key for key, _ in record.writes}:
            touching[key].append(record)
    cuda_ops: dict[int, str] = {}
    masks: dict[int, int] = {}
    for record in records:
        if (record.op != "bernoulli_" or record.phase != "forward" or len(record.writes) != 1 or record.reads
                or (layer_types or {}).get(record.layer) in DECOMPOSED_MODULES):
            continue
        key, nbytes = record.writes[0]
        others = [other for other in touching[key] if other is not record]
        scales = [other for other in others if other.op == "div_" and other.phase == "forward"
                  and other.reads == [(key, nbytes)] and other.writes == [(key, nbytes)]]
        applies = [other for other in others if other.phase == "forward" and _same_size_product(other, nbytes)]
        grads = [other for other in others if other.phase == "backward" and other.op == "mul"
                 and _same_size_product(other, nbytes)]
        if len(applies) != 1 or len(scales) > 1 or len(scales) + len(applies) + len(grads) != len(others):
            continue
        for part in [record, *scales, *applies]:
            cuda_ops[part.index] = NATIVE
        for part in grads:
            cuda_ops[part.index] = NATIVE_BACKWARD
        masks[key] = nbytes // ELEMENT_BYTES.get(record.dtype, 4) * MASK_BYTES
    return cuda_ops, masks


def as_cuda_runs(ops: pd.DataFrame, leave=()) -> pd.DataFrame:
    """An ops table (rooflow.estimate.core.OP_COLUMNS) with its dropout calls as a GPU runs them: the rows of
    each forward ``native_dropout`` but its product dropped, the product and the backward's ``mul`` renamed to
    the kernels and priced at their bytes (module docstring) and FLOPs (formulas.ELEMENTWISE_FLOPS_PER_ELEMENT).
    Index labels are kept; the rows labelled in ``leave`` stay as recorded (a dropout of attention scores that a
    fused attention kernel applies: rooflow.estimate.attention.fused_rows). The table itself where it has no
    such calls (or no ``cuda_op`` column)."""
    if "cuda_op" not in ops or ops.empty:
        return ops
    cuda_op = ops["cuda_op"].fillna("").astype(str)
    cuda_op[cuda_op.index.isin(list(leave))] = ""
    if not cuda_op.isin([NATIVE, NATIVE_BACKWARD]).any():
        return ops
    absorbed = (cuda_op == NATIVE) & (ops["op"] != APPLY)
    result = ops.drop(index=ops.index[absorbed]).copy()
    priced = [column for column in ("flops", "bytes_read", "bytes_written", "fused_bytes_read", "fused_bytes_written")
              if column in result]
    result[priced] = result[priced].astype(float)
    for index in result.index[cuda_op.loc[result.index].isin([NATIVE, NATIVE_BACKWARD])]:
        row = result.loc[index]
        kernel = cuda_op.at[index]
        tensor_bytes = float(row["bytes_written"])  # the output (or the input's gradient): calls × elements × size
        mask_bytes = tensor_bytes / ELEMENT_BYTES.get(str(row["compute_precision"]), 4) * MASK_BYTES
        if kernel == NATIVE:  # reads the input; writes the output and the mask
            read, written = tensor_bytes, tensor_bytes + mask_bytes
        else:  # reads the gradient and the mask, writes the input's gradient
            read, written = tensor_bytes + mask_bytes, tensor_bytes
        result.at[index, "op"] = kernel
        result.at[index, "flops"] = mask_bytes / MASK_BYTES * ELEMENTWISE_FLOPS_PER_ELEMENT[kernel]
        if "fused_bytes_read" in result:  # fused: the saved mask is always written, and read back in backward
            fused_read, fused_written = float(row["fused_bytes_read"]), float(row["fused_bytes_written"])
            if kernel == NATIVE:
                fused_read, fused_written = min(fused_read, read), min(fused_written, tensor_bytes) + mask_bytes
            else:  # the noise it read (saved for backward, so in DRAM) is the mask
                fused_read = max(fused_read - tensor_bytes, 0.0) + mask_bytes
            result.at[index, "fused_bytes_read"], result.at[index, "fused_bytes_written"] = fused_read, fused_written
        result.at[index, "bytes_read"], result.at[index, "bytes_written"] = read, written
    return result
