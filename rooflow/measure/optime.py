"""Measured time per op and per layer, from the torch.profiler trace of one extra iteration — on the CPU as on a
GPU: where the time goes, measured, beside the per-op prediction, and the evidence behind a forward:backward
latency ratio outside its band (rooflow.report.checks).

The trace's top-level ``cpu_op`` events on each thread are the ops a step runs: forward ops on the main thread
(``aten::conv2d``, ``aten::relu_``, ...), backward nodes as autograd evaluates them
(``autograd::engine::evaluate_function: ConvolutionBackward0``, on autograd's worker thread on a GPU), the
optimizer's ops inside ``Optimizer.step#...``. An op's time is the GPU time of the kernels it launched (CUPTI's
correlation ids) where the trace has kernels, else its own CPU duration (a CPU run: the op IS the work).

Its layer: the innermost ``module:<name>:<type>`` range the capture pushes around every module's forward
(:func:`module_ranges`); a backward node carries the forward op's sequence number (``Sequence number``, as
``torch.autograd.profiler.emit_nvtx`` numbers them), which names the layer of its forward op. Where no module
range was recorded (older traces), the layer type comes from the op's name (:data:`OP_LAYER_TYPES`); an op no
table knows keeps its own name, never dropped.
"""

from __future__ import annotations

import contextlib
import math
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pandas as pd

from rooflow.conventions import PHASE_LAYER_TYPES
from rooflow.profilers.kernels import TRACE_KERNEL_CATEGORIES

OP_TIME_COLUMNS = ["layer", "layer_type", "op", "phase", "seconds"]
BACKWARD_PREFIX = "autograd::engine::evaluate_function: "
MODULE_PREFIX = "module:"

# The layer type (the module's class, as the estimate's layers.csv names it) of an op seen without a module
# range: forward aten ops, and backward nodes by their name without the trailing version digit.
OP_LAYER_TYPES = {
    "aten::conv2d": "Conv2d", "aten::convolution": "Conv2d", "ConvolutionBackward": "Conv2d",
    "CudnnConvolutionBackward": "Conv2d", "MkldnnConvolutionBackward": "Conv2d",
    "aten::linear": "Linear", "aten::addmm": "Linear", "AddmmBackward": "Linear", "MmBackward": "Linear",
    "TBackward": "Linear",
    "aten::batch_norm": "BatchNorm2d", "CudnnBatchNormBackward": "BatchNorm2d",
    "NativeBatchNormBackward": "BatchNorm2d",
    "aten::relu": "ReLU", "aten::relu_": "ReLU", "ReluBackward": "ReLU",
    "aten::hardtanh": "ReLU6", "aten::hardtanh_": "ReLU6", "HardtanhBackward": "ReLU6",
    "aten::max_pool2d": "MaxPool2d", "MaxPool2DWithIndicesBackward": "MaxPool2d",
    "aten::adaptive_avg_pool2d": "AdaptiveAvgPool2d", "AdaptiveAvgPool2DBackward": "AdaptiveAvgPool2d",
    "MeanBackward": "AdaptiveAvgPool2d",
    "aten::dropout": "Dropout", "NativeDropoutBackward": "Dropout",
    "aten::cross_entropy_loss": "loss", "aten::ones_like": "loss", "NllLossBackward": "loss", "LogSoftmaxBackward": "loss",
    "aten::add": "add (residual)", "aten::add_": "add (residual)", "AddBackward": "add (residual)",
    "torch::autograd::AccumulateGrad": "gradient accumulation",
    "aten::flatten": "(model)", "ViewBackward": "(model)", "ReshapeAliasBackward": "(model)",
}
_KERNEL_CATEGORIES = TRACE_KERNEL_CATEGORIES | {"gpu_memcpy", "gpu_memset", "Memcpy", "Memset"}
_LAUNCH_CATEGORIES = {"cuda_runtime", "cuda_driver", "Runtime", "Driver"}


@contextlib.contextmanager
def module_ranges(model: Any) -> Iterator[dict[str, int]]:
    """Push a ``module:<name>:<type>`` profiler range around every module's forward (the model itself aside),
    so the trace names each op's layer: the innermost range, a leaf module's for its ops, a block's (a
    residual add, squeezenet's concatenation) for the ops it runs itself. Yields the minor page faults each leaf
    module's forward takes (rooflow.measure.faults), by layer name, filled as the model runs: a layer whose output
    the allocator maps afresh says so."""
    import torch

    from rooflow.measure.faults import minor_faults

    open_ranges: list[tuple[Any, str, int]] = []
    handles = []
    faults_by_layer: dict[str, int] = {}
    leaves = {name for name, module in model.named_modules() if name and next(module.children(), None) is None}

    def enter(name: str, kind: str):
        def hook(module, args):
            scope = torch.profiler.record_function(f"{MODULE_PREFIX}{name}:{kind}")
            scope.__enter__()
            open_ranges.append((scope, name, minor_faults()))
        return hook

    def leave(module, args, output):
        if open_ranges:
            scope, name, before = open_ranges.pop()
            scope.__exit__(None, None, None)
            if name in leaves:
                faults_by_layer[name] = faults_by_layer.get(name, 0) + minor_faults() - before

    for name, module in model.named_modules():
        if name:
            handles.append(module.register_forward_pre_hook(enter(name, type(module).__name__)))
            handles.append(module.register_forward_hook(leave))
    try:
        yield faults_by_layer
    finally:
        for handle in handles:
            handle.remove()
        while open_ranges:
            open_ranges.pop()[0].__exit__(None, None, None)


def _node_type(name: str) -> str:
    """'autograd::engine::evaluate_function: ConvolutionBackward0' -> 'ConvolutionBackward'."""
    return name.removeprefix(BACKWARD_PREFIX).rstrip("0123456789")


def _phase(name: str, annotation: str | None) -> str:
    if name.startswith(BACKWARD_PREFIX):
        return "backward"
    if annotation:
        return annotation
    return "forward"


def _enclosing(ranges: list[tuple[float, float, str]], start: float, end: float) -> str | None:
    """The innermost (shortest) range holding [start, end]."""
    best = None
    for low, high, name in ranges:
        if low <= start and end <= high and (best is None or high - low < best[0]):
            best = (high - low, name)
    return best[1] if best else None


def op_times(trace: dict | list) -> pd.DataFrame:
    """A torch.profiler Chrome trace (loaded JSON) -> one row per top-level op (:data:`OP_TIME_COLUMNS`)."""
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else trace
    complete = [e for e in events if isinstance(e, dict) and e.get("ph") == "X"]
    by_thread: dict[Any, list[dict]] = defaultdict(list)
    modules: list[tuple[float, float, str]] = []
    phases: list[tuple[float, float, str]] = []
    launched: dict[Any, tuple[Any, float]] = {}
    kernel_seconds: dict[Any, float] = defaultdict(float)
    for event in complete:
        category, name = event.get("cat"), str(event.get("name", ""))
        start = float(event.get("ts", 0.0))
        end = start + float(event.get("dur", 0.0))
        args = event.get("args") or {}
        if category == "cpu_op":
            by_thread[event.get("tid")].append(event)
        elif category == "user_annotation":
            if name.startswith(MODULE_PREFIX):
                modules.append((start, end, name[len(MODULE_PREFIX):]))
            elif name.startswith("phase:"):
                phases.append((start, end, name[len("phase:"):]))
            elif name.startswith("Optimizer."):
                phases.append((start, end, "optimizer"))
        elif category in _LAUNCH_CATEGORIES and args.get("correlation") is not None:
            launched[args["correlation"]] = (event.get("tid"), start)
        elif category in _KERNEL_CATEGORIES and args.get("correlation") is not None:
            kernel_seconds[args["correlation"]] += float(event.get("dur", 0.0)) * 1e-6
    on_gpu = bool(kernel_seconds)
    launches_by_thread: dict[Any, list[tuple[float, float]]] = defaultdict(list)
    for correlation, seconds in kernel_seconds.items():
        if correlation in launched:
            tid, moment = launched[correlation]
            launches_by_thread[tid].append((moment, seconds))
    rows = []
    layer_of_sequence: dict[Any, tuple[str, str]] = {}
    for tid, ops in by_thread.items():
        ops.sort(key=lambda e: (float(e.get("ts", 0.0)), -float(e.get("dur", 0.0))))
        launches = sorted(launches_by_thread.get(tid, []))
        top_end = -math.inf
        top: dict[str, Any] | None = None
        for event in ops:
            start = float(event.get("ts", 0.0))
            end = start + float(event.get("dur", 0.0))
            sequence = (event.get("args") or {}).get("Sequence number")
            if start < top_end:
                # nested in the top-level op: a composite op's parts (aten::linear -> aten::t, aten::addmm)
                # record the autograd nodes, so their sequence numbers name the top-level op's layer too
                if top and top["layer"] and sequence is not None and top["phase"] != "backward":
                    layer_of_sequence.setdefault(sequence, (top["layer"], top["layer_type"]))
                continue
            top_end = end
            name = str(event["name"])
            if on_gpu:
                seconds = math.fsum(s for moment, s in launches if start <= moment <= end)
            else:
                seconds = float(event.get("dur", 0.0)) * 1e-6
            module = _enclosing(modules, start, end)
            layer, layer_type = module.rsplit(":", 1) if module and ":" in module else ("", "")
            top = {"layer": layer, "layer_type": layer_type, "op": name,
                   "phase": _phase(name, _enclosing(phases, start, end)), "seconds": seconds, "_sequence": sequence}
            rows.append(top)
            if layer and sequence is not None and top["phase"] != "backward":
                layer_of_sequence.setdefault(sequence, (layer, layer_type))
    for row in rows:
        if not row["layer_type"] and row["phase"] == "backward" and row["_sequence"] in layer_of_sequence:
            row["layer"], row["layer_type"] = layer_of_sequence[row["_sequence"]]
        if not row["layer_type"]:
            key = _node_type(row["op"]) if row["op"].startswith(BACKWARD_PREFIX) else row["op"]
            row["layer_type"] = (PHASE_LAYER_TYPES["optimizer"] if row["phase"] == "optimizer"
                                 else OP_LAYER_TYPES.get(key, key))
    frame = pd.DataFrame(rows, columns=[*OP_TIME_COLUMNS, "_sequence"]).drop(columns="_sequence")
    return frame


def seconds_by(frame: pd.DataFrame, column: str = "layer_type", phase: str | None = None) -> dict[str, float]:
    """Measured seconds per layer type (or per ``column``), largest first; one phase where given."""
    if frame is None or frame.empty:
        return {}
    rows = frame if phase is None else frame[frame["phase"] == phase]
    grouped = rows.groupby(column)["seconds"].agg(math.fsum).sort_values(ascending=False)
    return {str(k): float(v) for k, v in grouped.items() if v > 0}


def compact(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Seconds per (layer, layer type, phase): what the timing record keeps."""
    if frame.empty:
        return []
    grouped = frame.groupby(["layer", "layer_type", "phase"], sort=False)["seconds"].agg(math.fsum).reset_index()
    return [{"layer": r.layer, "layer_type": r.layer_type, "phase": r.phase, "seconds": float(r.seconds)}
            for r in grouped.itertuples()]


def from_record(record: dict[str, Any]) -> pd.DataFrame:
    """The timing record's ``op_times`` (:func:`compact`) as a frame (empty where none was recorded)."""
    rows = (record or {}).get("op_times") or []
    frame = pd.DataFrame(rows, columns=["layer", "layer_type", "phase", "seconds"])
    frame["layer"] = frame["layer"].fillna("")
    return frame


def backward_excess(frame: pd.DataFrame, implied_ratio: float, share: float = 0.8, limit: int = 4
                    ) -> tuple[float | None, list[dict[str, Any]]]:
    """Which layers' measured backward carries the excess over ``implied_ratio`` × their forward.

    Per layer (its name where the trace has module ranges, else its type): excess = backward − implied ×
    forward. Returns (the profiled iteration's own backward/forward ratio, the layers whose excess has the
    sign of the total and together carry ``share`` of it, at most ``limit``, largest first: {name, forward,
    backward, excess seconds, share of the total excess})."""
    if frame is None or frame.empty:
        return None, []
    key = "layer" if (frame["layer"].astype(str) != "").any() else "layer_type"
    named = frame.assign(name=[f"{layer} ({kind})" if key == "layer" and layer else kind
                               for layer, kind in zip(frame["layer"], frame["layer_type"])])
    forward = named[named["phase"] == "forward"].groupby("name")["seconds"].agg(math.fsum)
    backward = named[named["phase"] == "backward"].groupby("name")["seconds"].agg(math.fsum)
    total_forward, total_backward = math.fsum(forward), math.fsum(backward)
    if total_forward <= 0 or total_backward <= 0:
        return None, []
    names = forward.index.union(backward.index)
    forward, backward = forward.reindex(names, fill_value=0.0), backward.reindex(names, fill_value=0.0)
    excess = backward - implied_ratio * forward
    total = total_backward - implied_ratio * total_forward
    sign = 1 if total >= 0 else -1
    carriers = (excess * sign)[excess * sign > 0].sort_values(ascending=False)
    out, carried = [], 0.0
    for name, value in carriers.items():
        if len(out) >= limit or (total and carried >= share * abs(total)):
            break
        carried += value
        out.append({"name": str(name), "forward_seconds": float(forward[name]),
                    "backward_seconds": float(backward[name]), "excess_seconds": float(sign * value),
                    "share": float(value / abs(total)) if total else None})
    return total_backward / total_forward, out
