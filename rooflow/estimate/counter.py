"""Record every aten op of one training (or inference) step on the meta device.

``OpRecorder`` is a ``TorchDispatchMode``: it sits below autograd, so it sees the forward ops, the backward
ops autograd runs and the optimizer's ops, each with its input/output shapes and dtypes. For each op it
records the module path (``layer``) and the phase, the FLOPs from the formula registry
(rooflow.estimate.formulas), and the bytes read and written (by storage, so views cost nothing and a
tensor read twice by one op counts once). Nothing is allocated: meta tensors carry shapes only, so
batch 256 costs the same seconds as batch 1.

Attribution:
- forward: the innermost module whose ``forward`` is running (module pre/post hooks keep a stack);
- backward: the module whose forward created the autograd node now executing
  (``torch._C._current_autograd_node()``; nodes are matched to modules by their sequence numbers, which
  autograd hands out in creation order; we record the counter at every module boundary);
- optimizer: the module owning the parameter being updated;
- a forward that activation checkpointing (torch.utils.checkpoint) runs again in backward: its module, in
  the backward phase (:class:`CheckpointRecompute`).

Memory: every storage's allocation and release (a weakref finalizer on the storage) is an event, so the
live bytes over the step can be replayed afterwards (rooflow.estimate.memory) — the technique of torch's
MemTracker, on plain meta tensors.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import sys
import weakref
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils.checkpoint
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from rooflow.estimate import formulas
from rooflow.estimate.autocast import FP32, LOWER, AutocastEmulation, aten_policy, redispatch, tensors_in
from rooflow.estimate.dropout import native_dropout_records
from rooflow.workload import step

aten = torch.ops.aten

ROOT = "(root)"
LOSS = "(loss)"

DTYPE_NAMES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64"}

# Ops whose first (mutated) argument is only written, never read.
WRITE_ONLY_OPS = {aten.copy_, aten.zero_, aten.fill_, aten.normal_, aten.uniform_, aten.bernoulli_,
                  aten.random_, aten.set_}
# Ops that do nothing to data or are bookkeeping: not recorded at all.
IGNORED_OPS = {aten.detach, aten.alias, aten.lift_fresh, aten._local_scalar_dense, aten.empty,
               aten.empty_like, aten.empty_strided, aten.new_empty, aten.new_empty_strided,
               aten._has_compatible_shallow_copy_type, aten.is_same_size, aten.sym_size, aten.sym_stride,
               aten.sym_numel, aten.sym_storage_offset, aten.resize_, aten.as_strided_,
               aten._unsafe_view}  # _unsafe_view: a reshape that shares storage (a view untracked by autograd)
# views autograd does not track and in-place metadata changes (an RNN cell's gate split, a transpose_): storage
# shared, no data moved
IGNORED_OPS |= {getattr(aten, name) for name in ("unsafe_split", "unsafe_split_with_sizes", "unsafe_chunk",
                                                 "transpose_", "t_", "squeeze_", "unsqueeze_")
                if hasattr(aten, name)}
# the profiler's markers (torch.autograd.profiler.record_function in a model, nn.DataParallel's forward): no data
IGNORED_OPS |= {torch.ops.profiler._record_function_enter, torch.ops.profiler._record_function_enter_new,
                torch.ops.profiler._record_function_exit}

MATMUL_LIKE = {aten.mm, aten.addmm, aten.bmm, aten.baddbmm, aten.addbmm, aten.mv, aten.dot}
# Ops whose meta kernels accept integer operands beside floating ones that every device's kernel refuses (an
# nn.Linear fed token ids): the estimate would count a model that cannot run.
SAME_KIND_OPS = MATMUL_LIKE | {aten.addmv, aten.convolution, aten._convolution}


def _check_operand_kinds(packet, args) -> None:
    """Raise the RuntimeError a device's kernel raises where integer and floating tensors meet in a matmul or a
    convolution (torch's meta kernels let it pass)."""
    operands = [a for a in tensors_in(args, []) if a.dtype != torch.bool]
    integral = [a.dtype for a in operands if not (a.is_floating_point() or a.is_complex())]
    floating = [a.dtype for a in operands if a.is_floating_point()]
    if integral and floating:
        raise RuntimeError(f"{str(packet).removeprefix('aten.')}: expected its operands to have the same dtype, "
                           f"but got {integral[0]} and {floating[0]}")


@dataclass
class OpRecord:
    index: int
    layer: str
    phase: str  # forward | loss | backward | optimizer
    op: str  # aten name, e.g. "convolution" (overload packet)
    op_class: str
    flops: float
    flops_input: float | None  # backward ops that split their work (conv, norm); None: decided later
    flops_weight: float | None
    dtype: str  # compute dtype: fp32/fp16/bf16 (matmul: of its operands; others: of its output)
    reads: list[tuple[int, int]]  # (storage key, bytes)
    writes: list[tuple[int, int]]
    supported: bool = True
    foldable: bool = False  # an inference BatchNorm: folds into the preceding convolution
    bias_flops: float = 0.0  # the bias-add part of a matmul-class op's flops
    role: str = ""  # forward | loss | backward | optimizer (filled by finish())
    backward_input_flops: float = 0.0  # backward work for activation gradients (filled by finish())
    backward_weight_flops: float = 0.0  # backward work for parameter gradients
    gemms: tuple = ()  # the matrix products a matmul-class op runs: (m, n, k, count) each (formulas.gemm_views)
    call: tuple = ()  # the call's geometry where the kernel model needs it (formulas.call_shape)
    cuda_op: str = ""  # the op a GPU runs this record as, where it is not the record's own (rooflow.estimate.dropout)
    recompute: bool = False  # a forward op activation checkpointing runs again in backward (no gradient)
    # a forward (or recomputed) product's operands that take a gradient (formulas.Formula.product_operands): 0
    # under torch.no_grad; None: no product of that rule
    gradient_operands: int | None = None
    bias_gradient: bool = False  # its bias takes a gradient its own backward computes (formulas.Formula.bias_operand)
    grad_mode: bool = True  # torch.is_grad_enabled() as it ran: off in a reentrant checkpoint's first forward


@dataclass
class Storage:
    key: int
    nbytes: int
    category: str  # params | optimizer_state | input | forward | loss | backward | optimizer
    alloc_index: int  # op index at which it appeared (-1: before the step)
    free_index: int | None = None


@dataclass
class Trace:
    records: list[OpRecord] = field(default_factory=list)
    storages: dict[int, Storage] = field(default_factory=dict)
    layer_types: dict[str, str] = field(default_factory=dict)
    layer_output_shapes: dict[str, list[int]] = field(default_factory=dict)
    layer_params: dict[str, int] = field(default_factory=dict)
    layer_weight_bytes: dict[str, int] = field(default_factory=dict)
    layer_gradient_bytes: dict[str, int] = field(default_factory=dict)
    gradient_keys: set[int] = field(default_factory=set)
    param_keys: set[int] = field(default_factory=set)  # parameters and buffers
    buffer_keys: set[int] = field(default_factory=set)  # the buffers among them
    input_bytes: int = 0
    output_bytes: int = 0
    target_bytes: int = 0
    unsupported: dict[str, int] = field(default_factory=dict)
    module_calls: dict[str, int] = field(default_factory=dict)  # phase -> nn.Module forward calls (host work)
    # nn.MultiheadAttention layers called the way its fast path accepts (mha_fast_path_eligible): in inference
    # without autocast or gradients a GPU runs them as torch._native_multi_head_attention
    mha_fast_path: set[str] = field(default_factory=set)
    # nn.LSTM/GRU/RNN calls per layer (recurrent_call): a GPU runs each as cuDNN's RNN kernels
    recurrent_calls: dict[str, list[dict]] = field(default_factory=dict)
    param_tensors: int = 0  # parameter tensors that require grad (the optimizer's tensor lists)
    # storages a GPU allocates at another size (key -> bytes): dropout's noise as native_dropout's bool mask
    cuda_storage_bytes: dict[int, int] = field(default_factory=dict)


def _touched_bytes(t: torch.Tensor) -> int:
    """Bytes one read of ``t`` moves: broadcast (stride-0) dimensions are read once."""
    elements = 1
    for size, stride in zip(t.shape, t.stride()):
        if stride != 0:
            elements *= size
    return elements * t.element_size()


def mha_fast_path_eligible(module: torch.nn.MultiheadAttention, args: tuple) -> bool:
    """The conditions of ``nn.MultiheadAttention``'s fast path that a call's module and arguments fix
    (MultiheadAttention.forward's ``why_not_fast_path``): self-attention on one batched tensor, batch_first, an
    even number of heads, packed q/k/v projection weights, no bias_k/bias_v or zero attention. The run's own
    (eval, no autocast, no gradients) are the time model's (rooflow.estimate.attention.fast_path_rows)."""
    if len(args) < 3 or not (args[0] is args[1] is args[2]) or not isinstance(args[0], torch.Tensor):
        return False
    return (args[0].dim() == 3 and module.batch_first and module.num_heads % 2 == 0 and module._qkv_same_embed_dim
            and module.in_proj_weight is not None and module.bias_k is None and module.bias_v is None
            and not module.add_zero_attn)


def recurrent_call(module: torch.nn.Module, args: tuple) -> dict | None:
    """A call of an nn.LSTM / nn.GRU / nn.RNN on ``args`` as rooflow.estimate.recurrent.RecurrentCall's fields
    (what cuDNN's kernels depend on); None for any other module, or a PackedSequence input (its timesteps vary per
    sequence)."""
    if not isinstance(module, torch.nn.RNNBase) or not args or not isinstance(args[0], torch.Tensor):
        return None
    x = args[0]
    if x.dim() == 2:  # unbatched: (T, I)
        batch, steps = 1, int(x.shape[0])
    elif x.dim() == 3:
        batch, steps = (int(x.shape[0]), int(x.shape[1])) if module.batch_first else (int(x.shape[1]), int(x.shape[0]))
    else:
        return None
    return {"mode": str(module.mode), "input_size": int(module.input_size), "hidden_size": int(module.hidden_size),
            "proj_size": int(getattr(module, "proj_size", 0) or 0), "num_layers": int(module.num_layers),
            "directions": 2 if module.bidirectional else 1, "batch": batch, "steps": steps, "bias": bool(module.bias),
            "weights": sum(p.numel() for p in module.parameters())}


class OpRecorder(TorchDispatchMode):
    """Records the aten ops of a run on meta tensors (see the module docstring).

    ``autocast_dtype`` (fp16/bf16) emulates ``torch.autocast(device_type="cuda")`` together with
    :class:`rooflow.estimate.autocast.AutocastEmulation`, which casts at the functions a model calls (above
    autograd, as autocast does); this mode applies the same policies to the aten ops that unlisted
    composites decompose into (``cross_entropy`` → ``_log_softmax``), only in the forward and loss phases
    (autocast is not active in backward or in the optimizer step) and not while a listed op runs
    (``autocast_excluded``). Every other op runs in the dtype of its inputs (batch_norm, ReLU and add on
    fp16 conv outputs stay fp16, as under CUDA autocast).
    """

    def __init__(self, model: torch.nn.Module, autocast_dtype: torch.dtype | None = None):
        super().__init__()
        self.trace = Trace()
        self.phase = "forward"
        self.autocast_dtype = autocast_dtype
        self._stack: list[str] = [ROOT]
        self._transitions: list[tuple[int, str]] = [(0, ROOT)]
        self._live: dict[int, int] = {}  # StorageImpl address -> key, while alive
        self._keys = itertools.count()
        self._index = 0
        self._param_layer: dict[int, str] = {}  # id(param) -> layer
        self._attention_nodes: set[int] = set()
        self._cast_cache: dict[tuple, torch.Tensor] = {}
        self._param_tensors: dict[int, torch.Tensor] = {}
        self._finalizers: list[weakref.finalize] = []
        self._hooks: list[Any] = []
        self.autocast_excluded = 0  # > 0 while AutocastEmulation runs a listed op
        self.recomputing = 0  # > 0 while activation checkpointing recomputes a forward in backward
        self._geometry: dict[tuple, tuple] = {}  # call signature -> outputs' geometry (see _run)
        self._counts: dict[tuple, Any] = {}  # call signature -> formula result
        self._model = model
        self._install_hooks(model)

    # ------------------------------------------------------------------ module hooks
    def _install_hooks(self, model: torch.nn.Module) -> None:
        for name, module in model.named_modules():
            layer = name or ROOT
            self.trace.layer_types.setdefault(layer, type(module).__name__)
            own = list(module.parameters(recurse=False))
            own_buffers = list(module.buffers(recurse=False))
            self.trace.layer_params[layer] = sum(p.numel() for p in own)
            self.trace.layer_weight_bytes[layer] = sum(t.numel() * t.element_size() for t in own + own_buffers)
            self.trace.layer_gradient_bytes[layer] = sum(p.numel() * p.element_size() for p in own
                                                         if p.requires_grad)
            for p in own:
                self._param_layer[id(p)] = layer
            self._hooks.append(module.register_forward_pre_hook(self._make_pre_hook(layer)))
            self._hooks.append(module.register_forward_hook(self._make_post_hook(layer), always_call=True))

    def _seq(self) -> int:
        return torch.autograd._get_sequence_nr()

    def _enter_layer(self, layer: str) -> None:
        self._stack.append(layer)
        self._transitions.append((self._seq(), layer))

    def _exit_layer(self) -> None:
        self._stack.pop()
        self._transitions.append((self._seq(), self._stack[-1]))

    def _make_pre_hook(self, layer: str):
        def hook(module, args):
            self.trace.module_calls[self.phase] = self.trace.module_calls.get(self.phase, 0) + 1
            if isinstance(module, torch.nn.MultiheadAttention) and mha_fast_path_eligible(module, args):
                self.trace.mha_fast_path.add(layer)
            call = recurrent_call(module, args) if self.phase == "forward" else None
            if call is not None:
                self.trace.recurrent_calls.setdefault(layer, []).append(call)
            self._enter_layer(layer)
        return hook

    def _make_post_hook(self, layer: str):
        def hook(module, args, output):
            if layer not in self.trace.layer_output_shapes:
                first = next((t for t in tree_flatten(output)[0] if isinstance(t, torch.Tensor)), None)
                if first is not None:
                    self.trace.layer_output_shapes[layer] = list(first.shape)
            self._exit_layer()
        return hook

    def remove_hooks(self) -> None:
        for handle in self._hooks:
            handle.remove()
        self._hooks.clear()

    def enter_loss(self) -> None:
        self.phase = "loss"
        self._enter_layer(LOSS)

    def exit_loss(self) -> None:
        self._exit_layer()

    # ------------------------------------------------------------------ storages
    def register(self, tensor: torch.Tensor, category: str) -> int:
        """Key of ``tensor``'s storage; a storage seen for the first time is an allocation event."""
        storage = tensor.untyped_storage()
        address = storage._cdata
        key = self._live.get(address)
        if key is None:
            key = next(self._keys)
            self._live[address] = key
            self.trace.storages[key] = Storage(key, storage.nbytes(), category,
                                               self._index if category not in ("params", "optimizer_state")
                                               else -1)
            self._finalizers.append(weakref.finalize(storage, self._release, address, key))
        return key

    def _release(self, address: int, key: int) -> None:
        if self._live.get(address) == key:
            del self._live[address]
        self.trace.storages[key].free_index = self._index

    def mark_params(self, model: torch.nn.Module) -> None:
        buffers = {id(b) for b in model.buffers()}
        for p in itertools.chain(model.parameters(), model.buffers()):
            key = self.register(p, "params")
            self.trace.param_keys.add(key)
            if id(p) in buffers:
                self.trace.buffer_keys.add(key)
            self._param_tensors[key] = p

    # ------------------------------------------------------------------ attribution
    def _layer_of_backward_op(self) -> str:
        node = torch._C._current_autograd_node()
        if node is None:
            return self._stack[-1] if self.phase != "backward" else LOSS
        variable = getattr(node, "variable", None)  # AccumulateGrad
        if variable is not None:
            return self._param_layer.get(id(variable), ROOT)
        seq = node._sequence_nr()
        position = bisect.bisect_right(self._transitions, (seq, "\uffff")) - 1
        return self._transitions[max(position, 0)][1]

    # ------------------------------------------------------------------ autocast emulation
    def _cast(self, t: torch.Tensor, dtype: torch.dtype, layer: str, phase: str, cache: bool) -> torch.Tensor:
        storage_key = self.register(t, phase)
        base = self._param_tensors.get(storage_key)
        if base is not None:
            # A weight: cast whole, once per step (autocast's weight cache); views of it (W.t() in a
            # linear's backward) are views of the one cast copy.
            cached = self._cast_cache.get((storage_key, dtype))
            if cached is None:
                cached = aten._to_copy.default(base, dtype=dtype)
                self._record(aten._to_copy.default, (base,), {"dtype": dtype}, cached, layer, phase)
                self.trace.param_keys.add(self.register(cached, phase))
                self._cast_cache[(storage_key, dtype)] = cached
            return cached.as_strided(t.shape, t.stride(), t.storage_offset() - base.storage_offset())
        key = (storage_key, tuple(t.shape), tuple(t.stride()), t.storage_offset(), dtype)
        cached = self._cast_cache.get(key)
        if cached is not None:
            return cached
        out = aten._to_copy.default(t, dtype=dtype)
        self._record(aten._to_copy.default, (t,), {"dtype": dtype}, out, layer, phase)
        if cache and torch.is_grad_enabled() or (cache and phase == "backward"):
            self._cast_cache[key] = out
        return out

    def mark_weight_copy(self, tensor: torch.Tensor) -> None:
        """A low-precision copy of a weight that autocast caches for its region: memory counts it with the
        parameters (rooflow.estimate.memory)."""
        self.trace.param_keys.add(self.register(tensor, self.phase))

    def _autocast_args(self, packet, args, kwargs, layer: str, phase: str):
        if self.autocast_excluded:
            return args, kwargs
        policy = aten_policy(packet)
        if phase not in ("forward", "loss") and not self.recomputing:
            # Autocast is off in backward and in the optimizer step. A matmul whose operands mix the low
            # dtype and fp32 there can only come from a forward op cast below autograd (the aten-level
            # fallback): cast like its forward did, so the step stays runnable.
            dtypes = {t.dtype for t in tensors_in(kwargs, tensors_in(args, [])) if t.is_floating_point()}
            if policy != LOWER or not (self.autocast_dtype in dtypes and torch.float32 in dtypes):
                return args, kwargs
        if policy == LOWER:
            source, target, cache = (torch.float32,), self.autocast_dtype, True
        elif policy == FP32:
            source, target, cache = (torch.float16, torch.bfloat16), torch.float32, False
        else:
            return args, kwargs

        def convert(value):
            if isinstance(value, torch.Tensor) and value.dtype in source:
                return self._cast(value, target, layer, phase, cache)
            return value

        return tuple(convert(a) for a in args), {k: convert(v) for k, v in kwargs.items()}

    def _contiguous_operands(self, packet, args: tuple, layer: str, phase: str) -> tuple:
        """``args`` with the operands its kernel copies dense (formulas.CONTIGUOUS_OPERANDS) copied, each copy
        recorded: its bytes and its memory, alive while the op runs."""
        args = list(args)
        for position in formulas.CONTIGUOUS_OPERANDS[packet]:
            if position < len(args) and formulas.copied_contiguous(args[position]):
                kwargs = {"memory_format": torch.contiguous_format}
                copy = aten.clone.default(args[position], **kwargs)
                self._record(aten.clone.default, (args[position],), kwargs, copy, layer, phase)
                args[position] = copy
        return tuple(args)

    def clear_cast_cache(self) -> None:
        self._cast_cache.clear()

    # ------------------------------------------------------------------ dispatch
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        packet = func.overloadpacket
        if packet in IGNORED_OPS or func.is_view or packet is torch.ops.prim.device:
            try:
                return func(*args, **kwargs)
            except Exception as error:  # a view of shapes that do not fit (MaxViT's windows of a 100×100 input)
                if not hasattr(error, "rooflow_op"):
                    error.rooflow_op = str(packet).removeprefix("aten.")
                    error.rooflow_layer = self._stack[-1] if self.phase != "backward" else ""
                raise
        if self.phase == "backward" and self.recomputing and len(self._stack) > 1:
            layer, phase = self._stack[-1], "backward"  # a checkpointed module's forward, run again
        elif self.phase == "backward":
            layer = self._layer_of_backward_op()
            phase = "loss" if layer == LOSS else "backward"
        else:
            layer, phase = self._stack[-1], self.phase
        # read before autocast's casts, which are made below autograd and so take no gradient
        grad_mode = torch.is_grad_enabled()
        taking, bias = (None, False) if phase != "forward" and not self.recomputing else \
            _operands_taking_gradients(packet, args) if grad_mode else (0, False)
        if self.autocast_dtype is not None:
            args, kwargs = self._autocast_args(packet, args, kwargs, layer, phase)
        if packet in formulas.CONTIGUOUS_OPERANDS:
            args = self._contiguous_operands(packet, args, layer, phase)
        if packet in SAME_KIND_OPS:
            _check_operand_kinds(packet, args)
        seq_before = self._seq()
        signature = _call_signature(func, args, kwargs)
        try:
            out = self._run(func, args, kwargs, signature)
        except Exception as error:
            # the op that cannot run on meta (a detector's box filtering: nonzero, boolean indexing): named by
            # rooflow.estimate.core.not_countable
            if not hasattr(error, "rooflow_op"):
                error.rooflow_op = str(packet).removeprefix("aten.")
                error.rooflow_layer = layer
            raise
        if packet in formulas.LAYOUT_OPERANDS:
            out = _conv_output_layout(packet, args, out)
        record = self._record(func, args, kwargs, out, layer, phase, signature)
        record.gradient_operands, record.bias_gradient, record.grad_mode = taking, bias, grad_mode
        if packet in MATMUL_LIKE and record.op_class == "attention" and self._seq() == seq_before \
                and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            # The autograd node of this op was created just before it ran: remember it, so that its
            # backward bmms count as attention too.
            self._attention_nodes.add(seq_before - 1)
        return out

    def _run(self, func, args, kwargs, signature):
        """``func(*args, **kwargs)``, or, for a functional op already run on arguments of the same shapes,
        strides and dtypes, fresh meta tensors of the outputs' recorded geometry: shape propagation (torch's
        Python meta kernels and decompositions) is most of an estimate's cost, and a network repeats its
        blocks, so most calls are repeats. Only ops whose schema neither mutates nor aliases (their outputs
        are new tensors) take this path."""
        if signature is None:
            return func(*args, **kwargs)
        geometry = self._geometry.get(signature)
        if geometry is not None:
            return _from_geometry(geometry)
        out = func(*args, **kwargs)
        geometry = _geometry_of(out)
        if geometry is not None:
            self._geometry[signature] = geometry
        return out

    def _record(self, func, args, kwargs, out, layer: str, phase: str, signature=None) -> OpRecord:
        packet = func.overloadpacket
        flat_args = tensors_in(kwargs, tensors_in(args, []))
        flat_out = tensors_in(out, [])
        reads: dict[tuple, tuple[int, int]] = {}
        param_operand = False
        write_only = packet in WRITE_ONLY_OPS
        for position, t in enumerate(flat_args):
            if write_only and position == 0:
                continue
            key = self.register(t, phase)
            param_operand = param_operand or key in self.trace.param_keys
            geometry = (key, tuple(t.shape), tuple(t.stride()), t.storage_offset())
            reads.setdefault(geometry, (key, _touched_bytes(t)))
        writes = []
        for t in flat_out:
            writes.append((self.register(t, phase), t.numel() * t.element_size()))

        known = self._counts.get(signature, _MISSING) if signature is not None else _MISSING
        if known is _MISSING:
            known = (formulas.count(func, args, kwargs, out), formulas.gemm_views(func, args, kwargs, out),
                     formulas.call_shape(func, args, kwargs))
            if signature is not None:
                self._counts[signature] = known
        counted, gemms, call = known
        supported = counted is not None
        if counted is None:
            flops, op_class = 0.0, "other"
            name = str(packet).removeprefix("aten.")
            self.trace.unsupported[name] = self.trace.unsupported.get(name, 0) + 1
        else:
            flops, op_class = counted
        flops_input = flops_weight = None
        if isinstance(flops, dict):
            flops_input, flops_weight = float(flops.get("input", 0.0)), float(flops.get("weight", 0.0))
            flops = flops_input + flops_weight
        if packet in MATMUL_LIKE:
            if phase == "backward":
                node = torch._C._current_autograd_node()
                if node is not None and node._sequence_nr() in self._attention_nodes:
                    op_class = "attention"
            elif not param_operand:
                op_class = "attention"  # activation × activation: QK^T, AV
        if op_class == "elementwise" and packet is aten.mean and "Pool" in self.trace.layer_types.get(layer, ""):
            op_class = "pooling"  # adaptive average pooling to 1×1 runs as mean on meta
        dtype_source = flat_args if op_class in ("matmul", "attention") else (flat_out or flat_args)
        dtype = next((DTYPE_NAMES[t.dtype] for t in dtype_source if t.dtype in DTYPE_NAMES), "fp32")
        record = OpRecord(self._index, layer, phase, str(packet).removeprefix("aten."), op_class,
                          float(flops), flops_input, flops_weight, dtype, list(reads.values()), writes,
                          supported, foldable=_is_inference_batch_norm(packet, args),
                          bias_flops=formulas.bias_flops(func, args, kwargs, out) if op_class == "matmul" else 0.0,
                          gemms=gemms, call=call, recompute=phase == "backward" and self.recomputing > 0)
        self.trace.records.append(record)
        self._index += 1
        return record

    # ------------------------------------------------------------------ after the run
    def finish(self) -> Trace:
        """Decide the role of every op (forward/loss/input-grad/weight-grad/optimizer) and detach."""
        self.remove_hooks()
        for finalizer in self._finalizers:
            finalizer.detach()
        self._finalizers.clear()
        trace = self.trace
        # Gradients flow into p.grad through copies and casts; the ops that write those storages (or their
        # sources) compute parameter gradients. So do the ops writing what only an elementwise op that writes one
        # reads: autograd sums one partial gradient per use (a recurrent layer's weights at every step, a layer
        # called twice), and a broadcast parameter's over the dimensions it was broadcast along (a layer scale's
        # gamma: Σ grad·x). A tensor another op also reads (the gradient a bias sums, which flows on to the
        # layer's input) stays the activation gradient it is.
        weight_keys = set(trace.gradient_keys)
        backward = [record for record in trace.records if record.phase == "backward"]
        readers: dict[int, list[OpRecord]] = {}
        for record in backward:
            for key, _ in record.reads:
                readers.setdefault(key, []).append(record)
        for record in reversed(backward):
            if not any(k in weight_keys for k, _ in record.writes):
                continue
            if record.op_class == "memory":
                weight_keys.update(k for k, _ in record.reads if k not in trace.param_keys)
            elif record.op_class == "elementwise":
                weight_keys.update(k for k, _ in record.reads if k not in trace.param_keys
                                   and len(readers[k]) == 1 and readers[k][0] is record)
        for record in trace.records:
            record.role = record.phase
            if record.phase != "backward" or record.recompute:
                continue
            if record.flops_input is not None:
                record.backward_input_flops = record.flops_input
                record.backward_weight_flops = record.flops_weight
            elif any(k in weight_keys for k, _ in record.writes):
                record.backward_weight_flops = record.flops
            else:
                record.backward_input_flops = record.flops
        cuda_ops, trace.cuda_storage_bytes = native_dropout_records(trace.records, trace.layer_types)
        for record in trace.records:
            record.cuda_op = cuda_ops.get(record.index, "")
        return trace


def _operands_taking_gradients(packet, args) -> tuple[int | None, bool]:
    """(how many of a product's operands take a gradient, whether its bias does): formulas.Formula's
    product_operands and bias_operand read against the call's arguments. Two operands inside a trained network,
    one for the first layer (its input takes none) or a frozen layer behind a trained one, none in a frozen stem;
    (None, False) for an op that is not a product of that rule."""
    formula = formulas.FORMULAS.get(packet)
    if formula is None or formula.product_operands is None:
        return None, False

    def takes(i) -> bool:
        return i < len(args) and isinstance(args[i], torch.Tensor) and args[i].requires_grad

    return (sum(1 for i in formula.product_operands if takes(i)),
            formula.bias_operand is not None and takes(formula.bias_operand))


_MISSING = object()
_FUNCTIONAL: dict[Any, bool] = {}
_PLAIN = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.memory_format, torch.layout)


def _is_functional(func) -> bool:
    """Whether an op's schema neither mutates nor aliases any argument and returns new tensors only."""
    known = _FUNCTIONAL.get(func)
    if known is None:
        schema = func._schema
        known = (not any(a.alias_info is not None for a in schema.arguments)
                 and not any(r.alias_info is not None for r in schema.returns)
                 and not func.is_view and torch.Tag.nondeterministic_seeded not in func.tags)
        _FUNCTIONAL[func] = known
    return known


class _Unhashable(Exception):
    pass


def _signature_of(value):
    if isinstance(value, torch.Tensor):
        return (tuple(value.shape), tuple(value.stride()), value.dtype)
    if isinstance(value, (list, tuple)):
        return tuple(_signature_of(item) for item in value)
    if isinstance(value, _PLAIN):
        return (type(value), value)
    raise _Unhashable


def _call_signature(func, args, kwargs) -> tuple | None:
    """A hashable key of a functional op's call: the op and every argument's geometry or value."""
    if not _is_functional(func):
        return None
    try:
        return (func, _signature_of(args), tuple(sorted((k, _signature_of(v)) for k, v in kwargs.items())))
    except _Unhashable:
        return None


def _geometry_of(out) -> tuple | None:
    """(is_tuple, [(shape, stride, dtype) or None per output]) of an op's result, when it is tensors only."""
    items = out if isinstance(out, (list, tuple)) else [out]
    geometry = []
    for item in items:
        if item is None:
            geometry.append(None)
        elif isinstance(item, torch.Tensor) and item.device.type == "meta" and type(item) is torch.Tensor:
            geometry.append((tuple(item.shape), tuple(item.stride()), item.dtype))
        else:
            return None
    return (type(out) if isinstance(out, (list, tuple)) else None, geometry)


def _from_geometry(geometry: tuple):
    container, items = geometry
    tensors = [None if g is None else torch.empty_strided(g[0], g[1], dtype=g[2], device="meta") for g in items]
    return container(tensors) if container is not None else tensors[0]


def _conv_output_layout(packet, args, out):
    """``out`` of a convolution (its input gradient, of a convolution's backward) in the layout the eager
    kernels give it: channels_last where an operand is (cuDNN's and the CPU's convolutions follow
    cudnn_conv_suggest_memory_format). Meta kernels leave every convolution output contiguous, which would
    hand the next layer an NCHW tensor a GPU never sees (ConvNeXt's depthwise convolutions after a
    downsampling one)."""
    if not formulas.channels_last_operands(packet, args):
        return out

    def channels_last(t):
        if not isinstance(t, torch.Tensor) or t.dim() != 4 or formulas.suggests_channels_last(t):
            return t
        return torch.empty(t.shape, dtype=t.dtype, device=t.device, memory_format=torch.channels_last)

    if isinstance(out, (tuple, list)):  # convolution_backward: (grad_input, grad_weight, grad_bias)
        return type(out)((channels_last(out[0]), *out[1:]))
    return channels_last(out)


def _is_inference_batch_norm(packet, args) -> bool:
    if packet is aten._native_batch_norm_legit_no_training:
        return True
    if packet in (aten.native_batch_norm, aten.cudnn_batch_norm, aten.miopen_batch_norm):
        return len(args) > 5 and args[5] is False
    return False


# Activation checkpointing (torch.utils.checkpoint) runs a checkpointed forward again during backward, with the
# forward's autocast state restored: its recompute_fn (non-reentrant) or CheckpointFunction.backward (reentrant)
# re-enters torch.autocast around it. rooflow's autocast is an emulation that torch's checkpoint cannot restore,
# so a mode active through backward finds those frames and applies it there, as autocast would.
_CHECKPOINT_FILE = torch.utils.checkpoint.__file__
_RECOMPUTE_FUNCTIONS = frozenset({"recompute_fn", "backward"})


def in_checkpoint_recompute() -> bool:
    """Whether the caller runs inside torch.utils.checkpoint's recomputation of a forward."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name in _RECOMPUTE_FUNCTIONS and code.co_filename == _CHECKPOINT_FILE:
            return True
        frame = frame.f_back
    return False


class CheckpointRecompute(TorchFunctionMode):
    """Active through backward: the functions a checkpointed forward calls again there are attributed to their
    module (the recorder's module stack) and, under fp16/bf16, cast by ``autocast`` as in the forward."""

    def __init__(self, recorder: OpRecorder, autocast: AutocastEmulation | None):
        super().__init__()
        self.recorder, self.autocast = recorder, autocast

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.Tensor.backward, torch.autograd.backward):
            with self:  # the whole backward runs inside this call: stay active in it, one hop on
                return redispatch(func, types, args, kwargs)
        if not in_checkpoint_recompute():
            return func(*args, **kwargs)
        self.recorder.recomputing += 1
        try:
            with self.autocast if self.autocast is not None else contextlib.nullcontext():
                return func(*args, **kwargs)
        finally:
            self.recorder.recomputing -= 1


# ---------------------------------------------------------------------------------------------- the step
# The step's definition (loss, optimizer, autocast, loss scaling) is rooflow.workload.step's; trace_step
# writes the same step out on meta tensors.


def run_step(model: torch.nn.Module, name: str, batch: int, input_size: int, precision: str = "fp32",
             mode: str = "inference") -> Trace:
    """One step of a torchvision model on meta inputs of its shapes (an image batch of ``input_size``; a
    clip for video, two images for optical flow: rooflow.workload.models.input_shapes) with the step's loss
    (rooflow.workload.step: cross-entropy against meta labels for classification)."""
    from rooflow.workload.models import input_shapes, task

    kind = task(name)
    inputs = tuple(torch.empty(batch, *shape, device="meta") for shape in input_shapes(name, input_size))
    target = torch.empty(batch, dtype=torch.long, device="meta")
    loss = step.make_loss(name, target, classification=kind in ("classification", "video"))
    return trace_step(model, inputs, precision, mode, loss_fn=loss, extra_inputs=(target,) if mode == "training" else (),
                      name=name)


def trace_step(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], precision: str = "fp32",
               mode: str = "inference", loss_fn=None, extra_inputs: tuple[torch.Tensor, ...] = (),
               name: str = "") -> Trace:
    """Run one step of ``model`` (parameters on meta) on meta ``inputs`` under an OpRecorder.

    inference: ``model.eval()`` and ``torch.no_grad()``, one forward. training: ``model.train()``, forward,
    ``loss_fn(output)`` (default: rooflow.workload.step.default_loss, the sum of the floating outputs),
    the loss scaled (fp16: GradScaler's multiply before backward, its unscale of every gradient in the
    optimizer phase), backward, and a steady-state
    SGD-with-momentum step (momentum buffers exist from the previous step; gradients are set to None
    afterwards, as ``optimizer.zero_grad()`` does), written out as torch.optim.SGD's single-tensor update
    so that each parameter's update is attributed to its layer:
    ``d = g + wd·p; buf = momentum·buf + d; p = p − lr·buf``.
    Inputs that require grad get an input gradient (a layer tested alone); a real first layer gets none.
    """
    training = mode == "training"
    model.train(training)
    recorder = OpRecorder(model, step.autocast_dtype(precision))
    recorder.mark_params(model)
    trace = recorder.trace
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    trace.param_tensors = len(params)
    momentum = {}
    if training:
        for n, p in params:
            momentum[n] = torch.zeros_like(p)
            recorder.register(momentum[n], "optimizer_state")
    for x in inputs:
        recorder.register(x, "input")
        trace.input_bytes += x.numel() * x.element_size()
    for extra in extra_inputs:
        recorder.register(extra, "input")
        trace.target_bytes += extra.numel() * extra.element_size()
    loss_fn = loss_fn or step.default_loss
    scaled = step.uses_grad_scaler(precision, mode)

    def output_bytes(output) -> int:
        """The bytes of the output's main tensor (its first, else none: a forward that returns no tensor)."""
        main = step.main_output(output)
        main = main if main is not None else next(
            (o for o in tree_flatten(output)[0] if isinstance(o, torch.Tensor)), None)  # it was a StopIteration
        return 0 if main is None else main.numel() * main.element_size()

    low = step.autocast_dtype(precision)
    autocast = AutocastEmulation(low, recorder) if low is not None else contextlib.nullcontext()
    try:
        if not training:
            with torch.no_grad(), recorder:
                with autocast:
                    out = model(*inputs)
            trace.output_bytes = output_bytes(out)
        else:
            with recorder:
                with autocast:  # forward and loss, as `with torch.autocast(...)` in a training loop
                    out = model(*inputs)
                    trace.output_bytes = output_bytes(out)
                    recorder.enter_loss()
                    loss = step.scalar_loss(loss_fn(out), loss_fn)
                    if scaled:  # GradScaler.scale(loss): outside autocast in a training loop, same op
                        loss = loss * step.GRAD_SCALE
                    recorder.exit_loss()
                del out
                recorder.phase = "backward"
                try:
                    with CheckpointRecompute(recorder, autocast if low is not None else None):
                        loss.backward()
                except RuntimeError as error:  # PyTorch refuses this model's backward: not its inputs' fault
                    raise step.backward_failure(error, name) from error
                del loss
                trace.gradient_keys = {recorder.register(p.grad, "backward") for _, p in params
                                       if p.grad is not None}
                recorder.phase = "optimizer"
                recorder.clear_cast_cache()
                with torch.no_grad():
                    for n, p in params:
                        if p.grad is None:
                            continue
                        recorder._stack.append(recorder._param_layer[id(p)])
                        if scaled:  # GradScaler.unscale_: every gradient times 1/scale
                            p.grad.mul_(1.0 / step.GRAD_SCALE)
                        d_p = p.grad.add(p, alpha=step.SGD_WEIGHT_DECAY)
                        momentum[n].mul_(step.SGD_MOMENTUM).add_(d_p)
                        p.add_(momentum[n], alpha=-step.SGD_LR)
                        del d_p
                        recorder._stack.pop()
                for _, p in params:
                    p.grad = None
                for x in inputs:
                    x.grad = None
    finally:
        recorder.clear_cast_cache()
        trace = recorder.finish()
    return trace
