"""nn.LSTM, nn.GRU and nn.RNN as a GPU runs them: cuDNN's RNN kernels, not the per-timestep cells the estimate counts.

The estimate counts a recurrent layer at the decomposition the meta device runs (``aten::lstm`` into per-timestep
``addmm``, ``sigmoid``, ``tanh``, ``mul``, ...: hundreds of ops per call, each a host dispatch). On a CUDA GPU
PyTorch calls cuDNN once per call of the module (``_cudnn_rnn``; ``_cudnn_rnn_backward`` in training:
aten/src/ATen/native/cudnn/RNN.cpp), and cuDNN's standard algorithm runs, per layer and direction (NVIDIA,
"Optimizing Recurrent Neural Networks in cuDNN 5", 2016: the input GEMMs of all timesteps combined into one, the
pointwise operations of a step fused into one kernel):

- forward: one GEMM of the input projections of all T timesteps (T·B × G·H × I), then per timestep the
  recurrent GEMM (B × G·H × H) and one kernel of the cell's pointwise math;
- backward, data: per timestep the recurrent GEMM of the gate gradients (B × H × G·H) and one pointwise kernel,
  then one GEMM of the input gradients of all timesteps (T·B × I × G·H);
- backward, weights: one GEMM each for the input and the recurrent weights over all timesteps (k = T·B).

G is the gates: 4 (LSTM), 3 (GRU), 1 (RNN). The time model prices those kernels as any GEMM and elementwise
kernel, under one host dispatch per call and phase (:func:`kernel_rows`).

PyTorch picks a persistent algorithm instead where ``get_algo`` says so (:func:`algorithm`): one kernel over all
timesteps, with the recurrent weights held on chip. No recording here times one; it is priced as the standard
algorithm, with the range widened by what one public benchmark measured between the two (:data:`PERSISTENT_RATIO`).
"""

from __future__ import annotations

from dataclasses import dataclass

from rooflow.estimate.core import compute_precision, format_gemms

GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}
MODULES = {"LSTM", "GRU", "RNN"}  # the nn.Module types whose calls this prices
DISPATCH_OPS = {"forward": "_cudnn_rnn", "backward": "_cudnn_rnn_backward"}
# CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H over CUDNN_RNN_ALGO_STANDARD, forward, the 20 nn.LSTM shapes (FP32, hidden
# 16-192, 1-4 layers, 1,000-6,000 timesteps) PyTorch PR #62143 timed on one GPU before and after it let get_algo pick
# the persistent kernel (github.com/xwang233/code-snippet, cudnn-rnn-bench-62143/forward/readme.txt): 0.084 to 5.25
PERSISTENT_RATIO = (0.084, 5.25)


@dataclass(frozen=True)
class RecurrentCall:
    """One call of an nn.LSTM / nn.GRU / nn.RNN: what cuDNN's kernels depend on (as the estimate records it:
    rooflow.estimate.counter.recurrent_call)."""

    mode: str  # LSTM, GRU, RNN_TANH, RNN_RELU (nn.RNNBase.mode)
    input_size: int
    hidden_size: int
    proj_size: int
    num_layers: int
    directions: int
    batch: int
    steps: int
    bias: bool
    weights: int  # its parameters' elements (weights and biases of every layer and direction)


def algorithm(call: RecurrentCall, forward: bool, precision: str, capability: tuple[int, int] | None,
              sm_count: int) -> str:
    """``standard``, ``persist_small_h`` or ``persist_static``: cuDNN's algorithm PyTorch's ``get_algo`` (cudnn/
    RNN.cpp) picks for this call. Small-hidden persistence on sm_60 and newer for any non-double dtype (LSTM/GRU
    hidden ≤ 192 forward, ≤ 128 backward; RNN ≤ 384 / ≤ 256); static persistence for fp16 data only, one
    unidirectional layer of hidden ≤ 1024, hidden and input multiples of 128, by device: Volta (not Turing) at
    some batches and lengths, sm_80+ with 98 SMs or more (not sm_86; LSTM at batches ≤ 128, multiples of 8; RNN too
    but for batches ≥ 96 with hidden ≥ 896; never GRU)."""
    if call.proj_size or not capability:
        return "standard"
    recurrent_gates = call.mode in ("LSTM", "GRU")
    small = (192 if forward else 128) if recurrent_gates else (384 if forward else 256)
    if capability >= (6, 0) and call.hidden_size <= small:
        return "persist_small_h"
    if precision != "fp16":
        return "standard"
    if not (call.num_layers == 1 and call.hidden_size <= 1024 and call.directions == 1 and call.hidden_size % 128 == 0
            and call.input_size % 128 == 0):
        return "standard"
    b, t = call.batch, call.steps
    if capability[0] == 7:
        volta = (capability[1] != 5 and ((b % 16 == 0 and b not in (80, 112)) or b == 8)
                 and ((t >= 40 and b <= 128) or (t >= 20 and b <= 96) or (t >= 10 and b <= 32)))
        return "persist_static" if volta else "standard"
    if capability[0] >= 8 and sm_count >= 98 and capability[1] != 6:
        if call.mode == "LSTM":
            return "persist_static" if b % 8 == 0 and b <= 128 else "standard"
        if call.mode.startswith("RNN"):
            return ("persist_static" if b % 8 == 0 and b <= 128 and (b < 96 or call.hidden_size < 896)
                    else "standard")
    return "standard"


def _gemm(m: int, n: int, k: int, calls: int, element_bytes: int) -> dict:
    return {"op": "mm", "op_class": "matmul", "calls": calls, "flops": 2.0 * m * n * k * calls,
            "bytes_read": float(element_bytes * (m * k + k * n) * calls),
            "bytes_written": float(element_bytes * m * n * calls), "gemms": format_gemms([(m, n, k, 1)])}


def _pointwise(elements_read: int, elements_written: int, calls: int, element_bytes: int) -> dict:
    # priced by its bytes, as every elementwise kernel (its few FLOPs per element stay in the estimate's count)
    return {"op": "rnn_cell", "op_class": "elementwise", "calls": calls, "flops": 0.0,
            "bytes_read": float(element_bytes * elements_read * calls),
            "bytes_written": float(element_bytes * elements_written * calls), "gemms": ""}


def kernel_rows(call: RecurrentCall, phase: str, calls: int, element_bytes: int) -> list[dict]:
    """The kernels cuDNN's standard algorithm runs for ``calls`` calls of ``call`` in ``phase`` (forward,
    backward), as ops-table rows (module docstring): GEMMs (``mm``) and the cells' fused pointwise kernels
    (``rnn_cell``), FLOPs and bytes over all calls, ``element_bytes`` per stored element. The host dispatch is
    not among them (:data:`DISPATCH_OPS`)."""
    gates, hidden, steps, batch = GATES[call.mode], call.hidden_size, call.steps, call.batch
    recurrent_k = call.proj_size or hidden  # an LSTM with projections feeds back its projected state
    output = call.directions * (call.proj_size or hidden)
    rows: list[dict] = []
    for layer in range(call.num_layers):
        inputs = call.input_size if layer == 0 else output
        per_direction = calls * call.directions
        # the cell's pointwise elements per step: gates in (and the input projections' share), state in, state out
        cell = batch * hidden
        if phase == "forward":
            rows.append(_gemm(steps * batch, gates * hidden, inputs, per_direction, element_bytes))
            rows.append(_gemm(batch, gates * hidden, recurrent_k, steps * per_direction, element_bytes))
            # reads both gate pre-activations (input and recurrent GEMMs) and the previous cell state; writes the
            # hidden and cell states and the activated gates backward reads (cuDNN's reserve space)
            rows.append(_pointwise(2 * gates * cell + cell, 2 * cell + gates * cell, steps * per_direction, element_bytes))
            if call.proj_size:
                rows.append(_gemm(batch, call.proj_size, hidden, steps * per_direction, element_bytes))
        else:
            rows.append(_gemm(batch, recurrent_k, gates * hidden, steps * per_direction, element_bytes))
            # reads the state gradients, the saved gates and cell state; writes the gate and cell-state gradients
            rows.append(_pointwise(2 * cell + gates * cell + cell, gates * cell + cell, steps * per_direction, element_bytes))
            rows.append(_gemm(steps * batch, inputs, gates * hidden, per_direction, element_bytes))
            rows.append(_gemm(gates * hidden, inputs, steps * batch, per_direction, element_bytes))
            rows.append(_gemm(gates * hidden, recurrent_k, steps * batch, per_direction, element_bytes))
    return rows


def substitute(ops, recurrent_calls: dict[str, list[dict]], precision: str):
    """``ops`` (an estimate's ops table) with the forward and backward rows of each recurrent layer of
    ``recurrent_calls`` (layer: its calls, rooflow.estimate.counter) replaced by the rows of cuDNN's kernels
    (:func:`kernel_rows`), in place of that layer's first row of the phase: per call and phase one host dispatch
    (``_cudnn_rnn``, ``_cudnn_rnn_backward``: no kernel of its own), under autocast the copy of the weights into
    the 16-bit flat buffer cuDNN reads (AutocastRNN.cpp), then the kernels (``host_calls`` 0: launched by the
    dispatch; ``recurrent_call``: the :class:`RecurrentCall` they run)."""
    import pandas as pd

    element_bytes = 2 if precision in ("fp16", "bf16") else 4
    replaced = ops["layer"].isin(list(recurrent_calls)) & ops["phase"].isin(list(DISPATCH_OPS))
    if not replaced.any():
        return ops
    rows, labels, done = [], [], set()
    columns = list(ops.columns)
    for label, row in ops.iterrows():
        key = (row["layer"], row["phase"])
        if not replaced[label]:
            rows.append(row.to_dict())
            labels.append(label)
            continue
        if key in done:
            continue
        done.add(key)
        layer, phase = key
        matmul = ops[replaced & (ops["layer"] == layer) & (ops["phase"] == phase) & (ops["op_class"] == "matmul")]
        compute = str(matmul["compute_precision"].iloc[0]) if len(matmul) else precision
        # the kernels' dtype; which of them run TF32 (the products only) is the counted ops' rule
        dtype = "fp32" if compute == "tf32" else compute
        base = {column: row.get(column) for column in columns}
        base.update(fused_bytes_read=0.0, fused_bytes_written=0.0, large_allocated_bytes=0, call="")
        counted: dict[RecurrentCall, int] = {}
        for spec in recurrent_calls[layer]:
            call = RecurrentCall(**spec)
            counted[call] = counted.get(call, 0) + 1
        for number, (call, calls) in enumerate(counted.items()):
            new = [{**base, "op": DISPATCH_OPS[phase], "op_class": "memory", "calls": calls, "flops": 0.0,
                    "bytes_read": 0.0, "bytes_written": 0.0, "gemms": "", "compute_precision": dtype}]
            if element_bytes == 2 and phase == "forward":
                new.append({**base, "op": "_to_copy", "op_class": "memory", "calls": calls, "flops": 0.0,
                            "bytes_read": 4.0 * call.weights * calls, "bytes_written": 2.0 * call.weights * calls,
                            "gemms": "", "compute_precision": dtype})
            new += [{**base, **kernel, "host_calls": 0, "recurrent_call": call,
                     "compute_precision": compute_precision(precision, kernel["op_class"], dtype)}
                    for kernel in kernel_rows(call, phase, calls, element_bytes)]
            rows += new
            labels += [f"{layer}/{phase}/cudnn_rnn/{number}/{i}" for i in range(len(new))]
    return pd.DataFrame(rows, index=labels)

