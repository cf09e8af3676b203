"""``torch.autocast("cuda", dtype)`` on meta tensors, for the estimator.

Real autocast cannot run here: its CUDA kernels cast only CUDA tensors (meta tensors carry no autocast
dispatch key), and ``torch.autocast("cuda")`` disables itself without a GPU. So rooflow applies CUDA
autocast's policies itself, at the two levels where autocast acts:

- **the op a user calls** (``F.conv2d``, ``F.linear``, ``x @ w``, ``F.layer_norm``, ``x.softmax(dim)``, …):
  :class:`AutocastEmulation`, a ``TorchFunctionMode``, sees these calls above autograd, as autocast's
  ``Autocast`` dispatch key does (autocast_mode.h: "patch the Python-exposed surface of calls, to make 100%
  sure autograd history recording can't sneak in ahead of autocast"). Its casts are ordinary ``.to()``
  calls, so autograd records them (backward casts gradients back to fp32, and a convolution saves its
  fp16 input for backward, not the fp32 one), and the cast copies of weights (leaf tensors that require
  grad) are cached for the autocast region, as autocast caches them. While a listed op runs, autocast is
  excluded for what it decomposes into (``conv2d`` → ``convolution``, ``scaled_dot_product_attention`` →
  its inner softmax, which therefore stays fp16): the mode tells the recorder so.
- **ops reached by decomposing an op autocast does not list** (``cross_entropy`` → ``_log_softmax`` +
  ``nll_loss_forward``): these never pass the function level, so the recorder
  (:class:`rooflow.estimate.counter.OpRecorder`) applies the same policies at the aten level, through
  :func:`aten_policy`.

The policy lists are CUDA autocast's own (``AT_FORALL_LOWER_PRECISION_FP``, ``AT_FORALL_FP32``,
``AT_FORALL_FP32_SET_OPT_DTYPE``, ``AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE`` and the promote list of
aten/src/ATen/autocast_mode.{h,cpp}); ``tests/estimate/test_autocast.py`` checks that every op the installed torch
registers an ``AutocastCUDA`` kernel for has a policy here.
https://pytorch.org/docs/stable/amp.html#cuda-ops-that-can-autocast-to-float16
"""

from __future__ import annotations

from typing import Any

import torch
import torch.overrides
from torch.overrides import TorchFunctionMode

aten = torch.ops.aten

LOWER = "lower_precision_fp"  # floating inputs cast to fp16/bf16
FP32 = "fp32"  # floating inputs cast to fp32
FP32_SET_OPT_DTYPE = "fp32_set_opt_dtype"  # computed (and returned) in fp32 via the op's dtype argument
PROMOTE = "promote"  # inputs cast to the widest floating type among them
BANNED = "banned"  # autocast raises: the op is unsafe in fp16

# Op base names (the aten name without overload) by policy, from autocast_mode.h.
POLICIES: dict[str, str] = {}
for _name in ("_convolution conv1d conv2d conv3d conv_tbc conv_transpose1d conv_transpose2d conv_transpose3d "
              "convolution cudnn_convolution cudnn_convolution_transpose prelu addmm addmv addr matmul einsum "
              "mm mv linalg_vecdot linear addbmm baddbmm bmm chain_matmul linalg_multi_dot "
              "_thnn_fused_lstm_cell _thnn_fused_gru_cell lstm_cell gru_cell rnn_tanh_cell rnn_relu_cell "
              "_scaled_dot_product_flash_attention scaled_dot_product_attention _cudnn_rnn").split():
    POLICIES[_name] = LOWER
for _name in ("acos asin cosh erfinv exp expm1 log log10 log2 log1p reciprocal rsqrt sinh tan pow softplus "
              "layer_norm native_layer_norm group_norm rms_norm frobenius_norm nuclear_norm cosine_similarity "
              "poisson_nll_loss cosine_embedding_loss nll_loss nll_loss2d hinge_embedding_loss kl_div l1_loss "
              "smooth_l1_loss huber_loss mse_loss margin_ranking_loss multilabel_margin_loss soft_margin_loss "
              "triplet_margin_loss multi_margin_loss binary_cross_entropy_with_logits dist pdist cdist renorm "
              "logsumexp upsample_nearest1d _upsample_nearest_exact1d upsample_nearest2d "
              "_upsample_nearest_exact2d upsample_nearest3d _upsample_nearest_exact3d upsample_linear1d "
              "upsample_bilinear2d _upsample_bilinear2d_aa upsample_trilinear3d upsample_bicubic2d "
              "_upsample_bicubic2d_aa norm linalg_matrix_sqrth").split():
    POLICIES[_name] = FP32  # norm: fp32_append_dtype, the same effect
for _name in ("prod softmax log_softmax cumprod cumsum linalg_vector_norm linalg_matrix_norm sum").split():
    POLICIES[_name] = FP32_SET_OPT_DTYPE
for _name in ("addcdiv addcmul atan2 bilinear cross dot vdot grid_sampler index_put tensordot "
              "scatter_add").split():
    POLICIES[_name] = PROMOTE
POLICIES["binary_cross_entropy"] = BANNED

# Python-level spellings of listed ops: Tensor methods and operators.
FUNCTION_ALIASES = {"__matmul__": "matmul", "__rmatmul__": "matmul", "__pow__": "pow", "__rpow__": "pow",
                    "_convolution_mode": "convolution", "multi_dot": "linalg_multi_dot",
                    "vecdot": "linalg_vecdot", "vector_norm": "linalg_vector_norm",
                    "matrix_norm": "linalg_matrix_norm"}

# The same policies at the level the recorder sees, below autograd, after composite ops decompose: the
# ops that unlisted composites decompose into (cross_entropy → _log_softmax, nll_loss_forward).
ATEN_POLICIES: dict[Any, str] = {
    **{op: LOWER for op in (aten.convolution, aten._convolution, aten.mm, aten.addmm, aten.bmm, aten.baddbmm,
                            aten.addbmm, aten.mv, aten._prelu_kernel)},
    **{op: FP32 for op in (aten._softmax, aten._log_softmax, aten.native_layer_norm, aten.native_group_norm,
                           aten.nll_loss_forward, aten.nll_loss2d_forward, aten.exp, aten.log, aten.log10,
                           aten.log2, aten.log1p, aten.pow, aten.rsqrt, aten.reciprocal, aten.acos, aten.asin,
                           aten.cosh, aten.sinh, aten.tan, aten.erfinv, aten.expm1, aten.softplus, aten.cumsum,
                           aten.cumprod, aten.prod, aten.linalg_vector_norm, aten.norm, aten.sum,
                           aten.binary_cross_entropy_with_logits, aten.mse_loss, aten.l1_loss,
                           aten.smooth_l1_loss, aten.huber_loss, aten.kl_div, aten.upsample_nearest2d,
                           aten.upsample_bilinear2d, aten.upsample_bicubic2d, aten._upsample_bilinear2d_aa,
                           aten._upsample_bicubic2d_aa, aten._upsample_nearest_exact2d, aten.logsumexp)},
}

FLOATING = (torch.float16, torch.bfloat16, torch.float32)


_DISPATCH_CHECKS = ("has_torch_function", "has_torch_function_unary", "has_torch_function_variadic")


def redispatch(func, types, args, kwargs):
    """Call ``func`` one ``__torch_function__`` hop on, so that a mode active around the call sees the ops
    inside it (F.multi_head_attention_forward calls linear and scaled_dot_product_attention).
    torch.overrides.redispatch_function does it from torch 2.14 (here); torch 2.11, on rooflow's lent
    H100/H200 image, has neither it nor its C hook, and there a Python function's first dispatch check
    (``if has_torch_function(...)``, the top line of every overridable torch function) answers False once."""
    hop = getattr(torch.overrides, "redispatch_function", None) or getattr(torch._C, "_skip_one_hop_torch_function",
                                                                            None)
    if hop is not None:
        return hop(func, types, args, kwargs)
    namespace = getattr(func, "__globals__", None) or {}
    saved = {name: namespace[name] for name in _DISPATCH_CHECKS if name in namespace}

    def once(*_args, **_kwargs):
        namespace.update(saved)  # nested functions dispatch to the mode again
        return False

    namespace.update(dict.fromkeys(saved, once))
    try:
        return func(*args, **kwargs)  # a C function: the mode's plain-call branch takes it
    finally:
        namespace.update(saved)


def function_policy(func) -> str | None:
    """The autocast policy of a function or Tensor method called in Python (None: autocast leaves it)."""
    name = getattr(func, "__name__", None)
    if not isinstance(name, str):
        return None
    return POLICIES.get(FUNCTION_ALIASES.get(name, name))


def aten_policy(packet) -> str | None:
    """The autocast policy of an aten op reached below the function level (None: autocast leaves it)."""
    return ATEN_POLICIES.get(packet)


def _map_tensors(value, fn):
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_map_tensors(item, fn) for item in value)
    return value


def tensors_in(value, found: list) -> list:
    """The tensors in an op's arguments or results (lists/tuples/dicts nested), in order, appended to `found`."""
    if isinstance(value, torch.Tensor):
        found.append(value)
    elif isinstance(value, (list, tuple)):
        for item in value:
            tensors_in(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            tensors_in(item, found)
    return found


def widest_dtype(args, kwargs) -> torch.dtype | None:
    """The widest floating dtype among the tensors of a call (autocast's promote policy)."""
    order = {torch.float16: 0, torch.bfloat16: 0, torch.float32: 1, torch.float64: 2}
    found = [t.dtype for t in tensors_in(list(args) + list(kwargs.values()), []) if t.dtype in order]
    return max(found, key=order.__getitem__) if found else None


class AutocastEmulation(TorchFunctionMode):
    """Applies CUDA autocast's policies to the functions a model calls (see the module docstring).

    ``recorder`` (an OpRecorder, or None) is told while a listed op runs, so that it leaves the ops the
    listed one decomposes into alone, and which cast copies are weights (memory accounting).
    """

    def __init__(self, dtype: torch.dtype, recorder: Any = None):
        super().__init__()
        self.dtype = dtype
        self.recorder = recorder
        self._weight_casts: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self._redispatching: list = []
        self._depth = 0  # the mode re-enters itself to redispatch a call (__torch_function__)

    def __enter__(self):
        self._depth += 1
        return super().__enter__()

    def __exit__(self, *exc):
        self._depth -= 1
        if not self._depth:  # autocast clears its cast cache when its region ends, not at a nested re-entry
            self._weight_casts.clear()
        return super().__exit__(*exc)

    def _cast(self, t: torch.Tensor, dtype: torch.dtype, cache: bool) -> torch.Tensor:
        if t.dtype == dtype or t.dtype not in FLOATING:
            return t
        if cache and t.is_leaf and t.requires_grad:
            hit = self._weight_casts.get(id(t))
            if hit is not None and hit[0] is t:
                return hit[1]
            out = t.to(dtype)
            self._weight_casts[id(t)] = (t, out)
            if self.recorder is not None:
                self.recorder.mark_weight_copy(out)
            return out
        return t.to(dtype)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        policy = function_policy(func)
        if policy is None:
            if func in self._redispatching:  # the hop was not skipped (some Python methods): plain call
                return func(*args, **kwargs)
            # Not autocast's business, but what it calls may be (F.multi_head_attention_forward calls
            # linear and scaled_dot_product_attention): run it with this mode active again, one hop on.
            self._redispatching.append(func)
            try:
                with self:
                    return redispatch(func, types, args, kwargs)
            finally:
                self._redispatching.pop()
        if policy == BANNED:
            from rooflow.errors import RooflowError

            raise RooflowError(f"{func.__name__} is unsafe under autocast (CUDA autocast raises for it): use "
                               f"binary_cross_entropy_with_logits, or count this model in fp32")
        if policy == LOWER:
            args, kwargs = (_map_tensors(list(args), lambda t: self._cast(t, self.dtype, True)),
                            {k: _map_tensors(v, lambda t: self._cast(t, self.dtype, True)) for k, v in kwargs.items()})
        elif policy == FP32:
            args, kwargs = (_map_tensors(list(args), lambda t: self._cast(t, torch.float32, False)),
                            {k: _map_tensors(v, lambda t: self._cast(t, torch.float32, False))
                             for k, v in kwargs.items()})
        elif policy == FP32_SET_OPT_DTYPE:
            has_dtype = kwargs.get("dtype") is not None or any(isinstance(a, torch.dtype) for a in args)
            if not has_dtype and any(t.dtype in FLOATING for t in tensors_in(list(args), [])):
                kwargs = {**kwargs, "dtype": torch.float32}
        elif policy == PROMOTE:
            widest = widest_dtype(args, kwargs)
            if widest is not None:
                args, kwargs = (_map_tensors(list(args), lambda t: self._cast(t, widest, False)),
                                {k: _map_tensors(v, lambda t: self._cast(t, widest, False))
                                 for k, v in kwargs.items()})
        # Autocast is excluded while the listed op runs: what it decomposes into is not cast again.
        if self.recorder is not None:
            self.recorder.autocast_excluded += 1
        try:
            return func(*args, **kwargs)
        finally:
            if self.recorder is not None:
                self.recorder.autocast_excluded -= 1
