"""``estimate()``: one model, one batch, one precision and mode → totals, a per-layer and a per-op table.

Bytes — three models of DRAM traffic, from the same recorded ops (rooflow.estimate.counter):

- ``unfused_bytes``: eager execution, every non-view aten op reads its inputs (broadcast dimensions once) and
  writes its outputs at their element size; in-place ops read and write their tensor. This is what eager
  PyTorch does, one kernel per op, when tensors do not fit in cache (they do not, at batch 256).
- ``fused_bytes``: fusion-aware. An intermediate tensor that has exactly one consumer, whose consumer is an
  elementwise op (ReLU, add, a cast, dropout, …; not a reduction such as global average pooling) or an
  inference BatchNorm (folded), and that is not kept for a later phase (not saved for backward) never
  reaches DRAM: its producer's write and its consumer's read are dropped (the consumer runs in the
  producer's epilogue; a consumer absorbs one producer, the latest). A folded BatchNorm also drops the
  reads of its parameters and running statistics. In-place ops create a new version of their tensor, so
  conv → BN → ReLU_ fuses in inference and BN → ReLU_ fuses in training. Outputs that nothing reads and
  nothing keeps (max-pool indices in inference) are not written. With these rules the batch-256 fp32
  forward lands on the figures measured for this project (DESIGN.md): resnet18 6,651 MB, alexnet 1,609 MB,
  vgg16 31,656 MB.
- ``min_bytes``: the compulsory floor — input + the parameters (+ buffers) the step reads + output; in
  training also the labels, the gradients written once, the momentum read and written and the parameters
  written.

Element sizes follow the dtypes the ops run in (fp16 activations under autocast, int64 max-pool indices,
which the meta device writes as CUDA does).
"""

from __future__ import annotations

import re
import time
import warnings
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from rooflow.conventions import MATMUL_OP_CLASSES, MODES, PRECISIONS
from rooflow.estimate import formulas
from rooflow.estimate.counter import LOSS, Trace, run_step, trace_step
from rooflow.estimate.memory import memory_totals
from rooflow.workload.step import rejected_run_message

FLOP_CLASSES = ("matmul", "elementwise", "normalization", "pooling", "softmax", "attention")
FUSIBLE_CONSUMERS = {"elementwise"}
FUSIBLE_MEMORY = {"_to_copy"}
# Reductions (global average pooling as ``mean``, sums) and scans are not fused into a producer's epilogue.
NOT_FUSED_CONSUMERS = {*formulas.REDUCTIONS, "cumsum"}

LAYER_COLUMNS = ["layer", "type", "output_shape", "forward_flops", "backward_input_flops",
                 "backward_weight_flops", "backward_flops", "optimizer_flops", "loss_flops", "forward_matmul_flops",
                 "implied_backward_matmul_flops",
                 "params", "activation_bytes", "weight_bytes", "gradient_bytes", "min_bytes",
                 "fused_bytes", "unfused_bytes"]
OP_COLUMNS = ["layer", "type", "phase", "op", "op_class", "compute_precision", "calls", "flops",
              "bytes_read", "bytes_written", "fused_bytes_read", "fused_bytes_written", "large_allocated_bytes",
              "gemms", "call", "cuda_op"]
# glibc's largest mmap threshold (DEFAULT_MMAP_THRESHOLD_MAX, 64-bit): a CPU tensor at least this large is
# mapped fresh on every allocation and unmapped when freed, so writing it first costs a page fault per page
# (the time model charges it: rooflow.estimate.timemodel). PyTorch's CUDA caching allocator has no such cost.
LARGE_ALLOCATION_BYTES = 32 * 2**20


# the ops table's GEMM views, written and read back (formulas: the attention module reads them below core)
format_gemms = formulas.format_gemms
parse_gemms = formulas.parse_gemms


def parse_call(text) -> tuple[int, ...]:
    """A call shape as the ops table writes it ('4x96x56', '' or NaN once read back from ops.csv): its ints
    (formulas.call_shape)."""
    return tuple(int(d) for d in text.split("x") if d) if isinstance(text, str) else ()


@dataclass(eq=False)
class Estimate(Mapping):
    """The analytic estimate of one step, and a read-only mapping of its ``totals`` (``dict(estimate)`` is one
    element of ``rooflow estimate --format json``). ``totals`` is JSON-serialisable; ``layers`` has one row per module
    that ran ops (every leaf module, plus containers that run ops of their own — a residual add — and the
    ``(root)`` model and ``(loss)``); ``ops`` aggregates the recorded aten ops per (layer, phase, op).

    Totals worth a definition:
    - ``forward_flops``/``backward_flops``: the model's own ops; the loss (cross-entropy forward and its
      gradient) is ``loss_flops``; ``total_flops`` = forward + loss + backward + optimizer.
    - ``backward_input_flops``/``backward_weight_flops``: backward work producing activation gradients /
      parameter gradients (weights, biases, norm affine); with ``recomputed_flops`` they sum to ``backward_flops``.
    - ``recomputed_flops``/``recomputed_matmul_flops``: forward ops that activation checkpointing
      (torch.utils.checkpoint) runs again in backward (0 without it).
    - ``forward_matmul_flops``: convolutions, linears, matmuls and attention bmms, with their bias adds;
      ``forward_macs``: the same without bias adds, in multiply-adds (torchvision's ``_ops`` unit).
    - ``{class}_flops``: all phases, by op class; attention = the QK^T/AV bmms (or fused SDPA kernels).
    - ``activation_bytes``: bytes written by the forward ops (every activation produced, once).
    - ``forward_fused_bytes``/``forward_unfused_bytes``: the forward phase alone (DESIGN.md's anchors).
    - ``matmul_backward_forward_ratio``: backward/forward of the matmul classes (1.935 for resnet18).
    """

    totals: dict[str, Any]
    layers: pd.DataFrame
    ops: pd.DataFrame
    seconds: float = 0.0
    trace: Trace | None = field(default=None, repr=False)
    # the totals a device's prediction added (rooflow.estimate.api.predict): a prediction on another device
    # replaces them, so none of the first device's numbers stay behind where the second has none
    predicted_keys: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    def __getitem__(self, key: str) -> Any:
        return self.totals[key]

    def __iter__(self):
        return iter(self.totals)

    def __len__(self) -> int:
        return len(self.totals)


def compute_precision(precision: str, op_class: str, dtype: str) -> str:
    """The roof an op hits: matmul-class ops in fp32 tensors run on TF32 tensor cores in tf32 mode; under
    autocast they run in their (cast) dtype; every other op runs in the dtype of its output."""
    if op_class in MATMUL_OP_CLASSES and precision == "tf32" and dtype == "fp32":
        return "tf32"
    return dtype


def _fused_traffic(trace: Trace) -> tuple[list[int], list[int]]:
    """Per record: (bytes read, bytes written) under the fusion-aware model (see the module docstring)."""
    records = trace.records
    storages = trace.storages
    version: dict[int, int] = defaultdict(int)
    read_versions: list[list[tuple[int, int]]] = []
    write_versions: list[list[tuple[int, int]]] = []
    consumers: dict[tuple[int, int], list[int]] = defaultdict(list)
    producer: dict[tuple[int, int], int] = {}
    overwritten_at: dict[tuple[int, int], int] = {}
    for record in records:
        reads = [(key, version[key]) for key, _ in record.reads]
        for kv in set(reads):
            consumers[kv].append(record.index)
        writes = []
        for key, _ in record.writes:
            storage = storages[key]
            if storage.alloc_index != record.index or (key, version[key]) in producer:
                overwritten_at[(key, version[key])] = record.index
                version[key] += 1
            kv = (key, version[key])
            producer[kv] = record.index
            writes.append(kv)
        read_versions.append(reads)
        write_versions.append(writes)

    phase_end: dict[str, int] = {}
    for record in records:
        phase_end[record.phase] = record.index

    def dead_within_phase(kv: tuple[int, int], phase: str) -> bool:
        end = phase_end[phase]
        if kv in overwritten_at:
            return overwritten_at[kv] <= end
        free = storages[kv[0]].free_index
        return free is not None and free <= end + 1

    drop_read = [set() for _ in records]
    drop_write = [set() for _ in records]
    # A consumer runs in the epilogue of one producer: of several fusible inputs, the latest-made one.
    candidates: dict[int, tuple[int, tuple[int, int]]] = {}
    for kv, producer_index in producer.items():
        users = consumers.get(kv, [])
        if len(users) != 1:
            continue
        consumer = records[users[0]]
        prod = records[producer_index]
        fusible = ((consumer.op_class in FUSIBLE_CONSUMERS and consumer.op not in NOT_FUSED_CONSUMERS)
                   or consumer.foldable or consumer.op in FUSIBLE_MEMORY)
        if not fusible or prod.op_class == "memory" or prod.phase != consumer.phase \
                or consumer.index <= producer_index or not dead_within_phase(kv, prod.phase):
            continue
        if candidates.get(consumer.index, (-1, None))[0] < producer_index:
            candidates[consumer.index] = (producer_index, kv)
    for consumer_index, (producer_index, kv) in candidates.items():
        drop_write[producer_index].add(kv)
        drop_read[consumer_index].add(kv)
    # An output nobody reads and nothing keeps (max-pool indices in inference) is not written at all by a
    # fused (specialised) kernel.
    for kv, producer_index in producer.items():
        if not consumers.get(kv) and dead_within_phase(kv, records[producer_index].phase):
            drop_write[producer_index].add(kv)

    fused_read, fused_write = [], []
    for record, reads, writes in zip(records, read_versions, write_versions):
        folded = record.foldable and drop_read[record.index]
        total_read = 0
        for (key, nbytes), kv in zip(record.reads, reads):
            if kv in drop_read[record.index] or (folded and key in trace.param_keys):
                continue
            total_read += nbytes
        total_write = sum(nbytes for (key, nbytes), kv in zip(record.writes, writes)
                          if kv not in drop_write[record.index])
        fused_read.append(total_read)
        fused_write.append(total_write)
    return fused_read, fused_write


def _layer_min_bytes(trace: Trace) -> dict[str, int]:
    """Per layer: the traffic if each (layer, phase) ran as one kernel — tensors it reads that were made
    elsewhere (or before the step) and tensors it writes that are used elsewhere or outlive the step."""
    made_by: dict[int, tuple[str, str]] = {}
    used_by: dict[int, set[tuple[str, str]]] = defaultdict(set)
    sizes: dict[int, int] = {}
    for record in trace.records:
        for key, nbytes in record.reads:
            used_by[key].add((record.layer, record.phase))
            sizes[key] = max(sizes.get(key, 0), nbytes)
        for key, nbytes in record.writes:
            made_by.setdefault(key, (record.layer, record.phase))
            sizes[key] = max(sizes.get(key, 0), nbytes)
    result: dict[str, int] = defaultdict(int)
    seen_reads: set[tuple[str, str, int]] = set()
    for record in trace.records:
        unit = (record.layer, record.phase)
        for key, nbytes in record.reads:
            if made_by.get(key) != unit and (unit, key) not in seen_reads:
                seen_reads.add((unit, key))
                result[record.layer] += nbytes
    for key, unit in made_by.items():
        outside = used_by[key] - {unit}
        outlives = trace.storages[key].free_index is None
        if outside or outlives:
            result[unit[0]] += sizes[key]
    return dict(result)


def _unread_weight_bytes(trace: Trace) -> tuple[int, int]:
    """(bytes of the parameters and buffers no op of the step reads, bytes of the parameters among them)."""
    read = {key for record in trace.records for key, _ in record.reads}
    unread = [key for key in trace.param_keys if key not in read]
    return (sum(trace.storages[key].nbytes for key in unread),
            sum(trace.storages[key].nbytes for key in unread if key not in trace.buffer_keys))


def _implied_backward_flops(record, reentrant_layers: set[str]) -> float:
    """The backward FLOPs a matmul-class op implies by the rule of gradients, independent of the backward
    formulas (the FLOP check holds them to it): its products' FLOPs once per operand that takes a gradient as a
    product, its bias add's once where its own backward sums the bias's gradient; its FLOPs twice where the op is
    no product of that rule (counter.OpRecord.gradient_operands None); 0 for any other op. The products
    differentiated are the forward's, but for a layer whose forward ran under no_grad and again in backward
    (``reentrant_layers``: a reentrant checkpoint): its recomputed ones."""
    if record.op_class not in MATMUL_OP_CLASSES:
        return 0.0
    if not (record.phase == "forward" and record.grad_mode or record.recompute and record.layer in reentrant_layers):
        return 0.0
    if record.gradient_operands is None:
        return 2 * record.flops
    products = record.flops - record.bias_flops
    return products * record.gradient_operands + (record.bias_flops if record.bias_gradient else 0.0)


def build_estimate(trace: Trace, model: str, batch: int, precision: str, mode: str, input_size: int,
                   params: int, weight_bytes: int, param_bytes: int) -> Estimate:
    records = trace.records
    fused_read, fused_write = _fused_traffic(trace)
    rows = []
    no_grad_layers = {r.layer for r in records if r.phase == "forward" and not r.grad_mode}
    reentrant_layers = {r.layer for r in records if r.recompute and r.layer in no_grad_layers}
    for record, f_read, f_write in zip(records, fused_read, fused_write):
        rows.append((record.layer, record.phase, record.op, record.op_class,
                     compute_precision(precision, record.op_class, record.dtype), record.role,
                     record.backward_input_flops, record.backward_weight_flops, record.flops,
                     sum(b for _, b in record.reads), sum(b for _, b in record.writes), f_read, f_write,
                     sum(b for _, b in record.writes) if record.phase == "forward" else 0, record.bias_flops,
                     format_gemms(record.gemms), "x".join(str(d) for d in record.call),
                     sum(trace.storages[key].nbytes for key, _ in record.writes
                         if trace.storages[key].alloc_index == record.index
                         and trace.storages[key].category != "input"  # allocated before the step: no fault
                         and trace.storages[key].nbytes >= LARGE_ALLOCATION_BYTES),
                     record.cuda_op, _implied_backward_flops(record, reentrant_layers)))
    raw = pd.DataFrame(rows, columns=["layer", "phase", "op", "op_class", "compute_precision", "role",
                                      "backward_input_flops", "backward_weight_flops", "flops",
                                      "bytes_read", "bytes_written", "fused_bytes_read",
                                      "fused_bytes_written", "activation_bytes", "bias_flops", "gemms", "call",
                                      "large_allocated_bytes", "cuda_op", "implied_backward_flops"])
    raw["type"] = raw["layer"].map(lambda layer: _layer_type(trace, layer))
    raw["calls"] = 1

    ops = (raw.groupby(["layer", "type", "phase", "op", "op_class", "compute_precision", "gemms", "call", "cuda_op"],
                       sort=False,
                       as_index=False)
           [["calls", "flops", "bytes_read", "bytes_written", "fused_bytes_read", "fused_bytes_written",
             "large_allocated_bytes"]]
           .sum())
    ops = ops[OP_COLUMNS]

    def flops_where(mask) -> float:
        return float(raw.loc[mask, "flops"].sum())

    phase = raw["phase"]
    matmul = raw["op_class"].isin(MATMUL_OP_CLASSES)
    forward_flops = flops_where(phase == "forward")
    backward_flops = flops_where(phase == "backward")
    loss_flops = flops_where(phase == "loss")
    optimizer_flops = flops_where(phase == "optimizer")
    unfused_bytes = float(raw["bytes_read"].sum() + raw["bytes_written"].sum())
    fused_bytes = float(raw["fused_bytes_read"].sum() + raw["fused_bytes_written"].sum())
    forward = raw[phase == "forward"]
    training = mode == "training"
    # weights the step never reads (GoogLeNet's and Inception's auxiliary heads in inference) are no part of
    # its floor: counted, the floor exceeded the fused traffic at a small input
    unread_weight_bytes, unread_param_bytes = _unread_weight_bytes(trace)
    read_weight_bytes = weight_bytes - unread_weight_bytes
    if training:
        # parameters read, gradients written, momentum read and written, parameters written
        min_bytes = (trace.input_bytes + trace.target_bytes + trace.output_bytes + read_weight_bytes
                     + 4 * (param_bytes - unread_param_bytes))
    else:
        min_bytes = trace.input_bytes + read_weight_bytes + trace.output_bytes
    total_flops = forward_flops + loss_flops + backward_flops + optimizer_flops

    totals: dict[str, Any] = {
        "model": model, "batch": batch, "precision": precision, "mode": mode, "input_size": input_size,
        "forward_flops": forward_flops, "backward_flops": backward_flops, "loss_flops": loss_flops,
        "optimizer_flops": optimizer_flops, "total_flops": total_flops,
        "forward_matmul_flops": flops_where((phase == "forward") & matmul),
        "backward_matmul_flops": flops_where((phase == "backward") & matmul),
        # pure multiply-adds of the forward matmuls/convolutions/attention (no bias adds): the unit of
        # torchvision's published weights.meta["_ops"]
        "forward_macs": (flops_where((phase == "forward") & matmul)
                         - float(raw.loc[phase == "forward", "bias_flops"].sum())) / 2,
        "backward_input_flops": float(raw["backward_input_flops"].sum()),
        "backward_weight_flops": float(raw["backward_weight_flops"].sum()),
        # activation checkpointing's forward ops run again in backward (counted in backward_flops)
        "recomputed_flops": float(sum(r.flops for r in trace.records if r.recompute)),
        "recomputed_matmul_flops": float(sum(r.flops for r in trace.records
                                             if r.recompute and r.op_class in MATMUL_OP_CLASSES)),
    }
    for op_class in FLOP_CLASSES:
        totals[f"{op_class}_flops"] = flops_where(raw["op_class"] == op_class)
    totals.update({
        "params": int(params),
        "weight_bytes": int(weight_bytes),
        "activation_bytes": int(forward["bytes_written"].sum()),
        "gradient_bytes": int(param_bytes if training else 0),
        "input_bytes": int(trace.input_bytes),
        "output_bytes": int(trace.output_bytes),
        "min_bytes": int(min_bytes),
        "fused_bytes": fused_bytes,
        "unfused_bytes": unfused_bytes,
        "forward_fused_bytes": float(forward["fused_bytes_read"].sum() + forward["fused_bytes_written"].sum()),
        "forward_unfused_bytes": float(forward["bytes_read"].sum() + forward["bytes_written"].sum()),
        "arithmetic_intensity": total_flops / min_bytes if min_bytes else None,
        "arithmetic_intensity_fused": total_flops / fused_bytes if fused_bytes else None,
        "arithmetic_intensity_unfused": total_flops / unfused_bytes if unfused_bytes else None,
        **memory_totals(trace),
        "unsupported_ops": dict(sorted(trace.unsupported.items())),
        "module_calls": dict(trace.module_calls),
        "mha_fast_path_layers": sorted(trace.mha_fast_path),
        "recurrent_calls": {layer: list(calls) for layer, calls in trace.recurrent_calls.items()},
        "param_tensors": int(trace.param_tensors),
        "forward_backward_ratio": backward_flops / forward_flops if training and forward_flops else None,
        "matmul_backward_forward_ratio": None,
        "counting_convention": formulas.COUNTING_CONVENTION,
    })
    if training and totals["forward_matmul_flops"]:
        totals["matmul_backward_forward_ratio"] = totals["backward_matmul_flops"] / totals["forward_matmul_flops"]

    layers = _layers_table(trace, raw)
    return Estimate(totals=totals, layers=layers, ops=ops, trace=trace)


def _layer_type(trace: Trace, layer: str) -> str:
    if layer == LOSS:
        return "Loss"
    return trace.layer_types.get(layer, "")


def _layers_table(trace: Trace, raw: pd.DataFrame) -> pd.DataFrame:
    min_bytes = _layer_min_bytes(trace)
    forward = raw["phase"] == "forward"
    columns = pd.DataFrame({
        "layer": raw["layer"],
        "forward_flops": raw["flops"].where(forward, 0.0),
        "backward_input_flops": raw["backward_input_flops"],
        "backward_weight_flops": raw["backward_weight_flops"],
        "backward_flops": raw["flops"].where(raw["phase"] == "backward", 0.0),
        "optimizer_flops": raw["flops"].where(raw["phase"] == "optimizer", 0.0),
        # the (loss) row's cross-entropy forward and gradient: what totals' loss_flops sums
        "loss_flops": raw["flops"].where(raw["phase"] == "loss", 0.0),
        "forward_matmul_flops": raw["flops"].where(forward & raw["op_class"].isin(MATMUL_OP_CLASSES), 0.0),
        "implied_backward_matmul_flops": raw["implied_backward_flops"],
        "activation_bytes": raw["bytes_written"].where(forward, 0),
        "fused_bytes": raw["fused_bytes_read"] + raw["fused_bytes_written"],
        "unfused_bytes": raw["bytes_read"] + raw["bytes_written"],
    })
    sums = columns.groupby("layer", sort=False).sum()
    order = list(dict.fromkeys(list(sums.index) + [k for k, v in trace.layer_params.items() if v]))
    sums = sums.reindex(order, fill_value=0)
    layers = sums.reset_index().rename(columns={"index": "layer"})
    layers["type"] = [_layer_type(trace, layer) for layer in order]
    layers["output_shape"] = [trace.layer_output_shapes.get(layer) for layer in order]
    layers["params"] = [int(trace.layer_params.get(layer, 0)) for layer in order]
    layers["weight_bytes"] = [int(trace.layer_weight_bytes.get(layer, 0)) for layer in order]
    layers["gradient_bytes"] = [int(trace.layer_gradient_bytes.get(layer, 0)) if trace.gradient_keys else 0
                                for layer in order]
    layers["min_bytes"] = [int(min_bytes.get(layer, 0)) for layer in order]
    layers["activation_bytes"] = layers["activation_bytes"].astype("int64")
    for column in ("forward_flops", "backward_input_flops", "backward_weight_flops", "backward_flops",
                   "optimizer_flops", "loss_flops", "forward_matmul_flops", "implied_backward_matmul_flops",
                   "fused_bytes", "unfused_bytes"):
        layers[column] = layers[column].astype(float)
    return layers[LAYER_COLUMNS]


def check_run(precision: str, mode: str, batch: int, where: str) -> None:
    """One sentence naming `where` for a precision, mode or batch rooflow does not know."""
    from rooflow.errors import RooflowError

    if precision not in PRECISIONS:
        raise RooflowError(f"{where}: unknown precision '{precision}': use one of {', '.join(PRECISIONS)}")
    if mode not in MODES:
        raise RooflowError(f"{where}: unknown mode '{mode}': use one of {', '.join(MODES)}")
    if batch < 1:
        raise RooflowError(f"{where}: batch must be a positive integer, not {batch}")


def estimate(model: str, batch: int, precision: str = "fp32", mode: str = "inference",
             input_size: int | None = None) -> Estimate:
    """Count FLOPs, bytes and peak memory of one step of a torchvision model on the meta device."""
    from rooflow.errors import RooflowError
    from rooflow.workload.models import build_meta_model, check_model_names, task
    from rooflow.workload.models import input_size as default_input_size

    check_model_names([model], "estimate")
    check_run(precision, mode, batch, "estimate")
    size = int(input_size or default_input_size(model))
    start = time.perf_counter()
    net = build_meta_model(model)
    params = sum(p.numel() for p in net.parameters())
    param_bytes = sum(p.numel() * p.element_size() for p in net.parameters())
    weight_bytes = param_bytes + sum(b.numel() * b.element_size() for b in net.buffers())
    if mode == "training" and task(model) == "detection":
        raise RooflowError(f"estimate: {model} is a detection model, which trains on box targets that rooflow "
                           f"does not generate: estimate it in mode inference")
    default = int(default_input_size(model))
    if task(model) == "optical_flow" and size != default:  # its two frames are 520×960, not a square
        from rooflow.workload.models import OPTICAL_FLOW_SIZE

        height, width = OPTICAL_FLOW_SIZE
        raise RooflowError(f"estimate: {model} is an optical-flow model, which rooflow runs on two {height}×{width} "
                           f"frames, and --input-size sets a square image's side: leave --input-size out")
    resize = f"give the --input-size it takes (the default, {default}, does)" if size != default else ""
    try:
        trace = run_step(net, model, batch, size, precision, mode)
    except ValueError as error:  # what the model itself rejects, e.g. training BatchNorm on one value
        raise RooflowError(f"estimate: {rejected_run_message(model, mode, batch, size, error)}") from error
    except AssertionError as error:  # a fixed input size: ViT's "Wrong image height! Expected 224 but got 64!"
        raise RooflowError(f"estimate: {model} rejects a {size}×{size} input ({error}): "
                           f"{resize or 'an input it does not take'}") from error
    except (NotImplementedError, RuntimeError) as error:
        raise not_countable(model, error, f"its layers do not fit a {size}×{size} input: {resize}"
                            if resize else None) from error
    result = build_estimate(trace, model, batch, precision, mode, size, params, weight_bytes, param_bytes)
    result.seconds = time.perf_counter() - start
    return result


def not_countable(model: str, error: BaseException, fix: str | None = None):
    """One sentence for a model the meta device cannot run: the op that failed, in which layer, and why;
    ``fix``: what to do where its shapes do not depend on data (the caller knows its inputs)."""
    from rooflow.errors import RooflowError, first_line

    op = getattr(error, "rooflow_op", None)
    if op is None:
        return error
    layer = getattr(error, "rooflow_layer", "")
    if op in VALUE_READING_OPS:
        reason = ("the forward reads a tensor's value in Python (Tensor.item(), `if tensor:`, int(tensor)), which the "
                  "meta device does not have")
        fix = ("rooflow estimates a step from shapes alone: make that branch depend on shapes or a flag of the "
               "module, not on values, or time the model on a device instead (`rooflow time`)")
    elif "data-dependent" in str(error) or op in DATA_DEPENDENT_OPS:
        reason = "its output shape depends on tensor values, which the meta device does not have"
        fix = ("rooflow estimates models whose shapes do not depend on data (a detector's box filtering does): "
               "estimate its backbone as a model of its own")
    else:
        reason = first_line(error) or type(error).__name__
        fix = fix or ("that op refuses these shapes or has no meta kernel: check the inputs' shapes and dtypes, or "
                      "estimate the model without that layer")
    qualified = op if "." in op else f"aten.{op}"  # a library's own op keeps its namespace
    return RooflowError(f"estimate: {model} cannot be counted: op {qualified} (layer {layer}) cannot run on the "
                        f"meta device ({reason}); {fix}")


def made_on_the_cpu(error: BaseException) -> bool:
    """Whether the meta device refused an op for a CPU tensor among its meta ones: one the forward made without
    a device (PyTorch: "Tensor on device cpu is not on the expected device meta!", "expected ... to be in the same
    device, but got (self) cpu, ... (source) meta")."""
    said = str(error)
    return "device" in said and "meta" in said and re.search(r"\bcpu\b", said) is not None


# Ops whose output shape depends on the values of their inputs: the meta device cannot run them.
DATA_DEPENDENT_OPS = {"nonzero", "masked_select", "unique", "_unique2", "unique_consecutive", "index"}
# The op a tensor's value read into Python runs as (.item(), bool(), int(), float()): no value on meta.
VALUE_READING_OPS = {"_local_scalar_dense", "is_nonzero"}


def count_module(module, inputs, precision: str = "fp32", mode: str = "inference", loss_fn=None,
                 name: str = "module") -> Estimate:
    """The estimate of any ``nn.Module`` (parameters on meta, or moved there here) on meta ``inputs``:
    for custom models and for the closed-form tests of single layers. In training the loss is
    ``loss_fn(output)`` (default: the sum of the output)."""
    import torch

    from rooflow.workload import step
    from rooflow.workload.spec import materialize_lazy, refuse_cast_parameters, refuse_untrainable

    refuse_cast_parameters(module, name)
    start = time.perf_counter()
    module = module.to("meta")
    inputs = tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)
    materialize_lazy(module, inputs)
    if mode == "training":
        refuse_untrainable(module, name, inputs)
    params = sum(p.numel() for p in module.parameters())
    param_bytes = sum(p.numel() * p.element_size() for p in module.parameters())
    weight_bytes = param_bytes + sum(b.numel() * b.element_size() for b in module.buffers())
    # the user's loss as the step calls it: what it raises or returns wrongly is one sentence naming it
    user_loss = step.make_loss(name, user_loss=loss_fn) if loss_fn is not None else None
    try:
        trace = trace_step(module, inputs, precision, mode, loss_fn=user_loss, name=name)
    except RuntimeError as error:
        if not made_on_the_cpu(error):
            raise
        # its forward makes a tensor without a device (torch.zeros(n), torch.arange(n)): on the CPU, where the
        # model runs as written; counted on meta as the rest (a GPU run needs it on its device: say so)
        with torch.device("meta"):
            trace = trace_step(module, inputs, precision, mode, loss_fn=user_loss, name=name)
        warnings.warn(f"{name}: its forward makes tensors without a device (op aten.{getattr(error, 'rooflow_op', '?')}"
                      f", layer {getattr(error, 'rooflow_layer', '') or '(root)'}), on the CPU: counted on meta with the "
                      f"rest; a GPU run needs them on its device (device=x.device)", stacklevel=2)
    shape = inputs[0].shape if inputs and isinstance(inputs[0], torch.Tensor) else ()
    result = build_estimate(trace, name, int(shape[0]) if len(shape) else 1, precision, mode,
                            int(shape[-1]) if len(shape) else 0, params, weight_bytes, param_bytes)
    result.seconds = time.perf_counter() - start
    return result
