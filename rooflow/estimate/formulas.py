"""One registry of per-aten-op FLOP formulas, in the manner of torch/utils/flop_counter.py.

Conventions (stated once, here, and reported with every estimate as ``COUNTING_CONVENTION``):

- **One fused multiply-add = 2 FLOPs.** A GEMM of (m×k)·(k×n) is 2·m·k·n FLOPs; torchvision's published
  ``weights.meta["_ops"]`` (and torchinfo, thop, fvcore) count multiply-adds, i.e. half of this.
- Formulas are pure functions of shapes (``torch.Size``) and the op's non-tensor arguments; they compose:
  ``addmm = mm + bias``, ``baddbmm = bmm + bias``, a convolution adds its bias separately.
- **Attention is counted at the math decomposition** (QK^T and AV as ``bmm``; scaling, softmax as their own
  ops). That is what runs on the meta device. Fused SDPA kernels, if they ever reach the counter, are given
  the same count (4·b·h·Sq·Sk·d forward), so the number does not depend on which kernel PyTorch picks.
- Elementwise work counts the arithmetic of the op's definition per output element (a transcendental
  function — exp, tanh, erf — counts as 1); comparisons (ReLU, max-pool) count as 1. The per-op constants
  are in ``ELEMENTWISE_FLOPS_PER_ELEMENT`` and the normalisation/pooling formulas below, so a test can pin
  each.
- Backward formulas that produce several gradients return a dict ``{"input": ..., "weight": ...}``: the
  input-gradient and the parameter-gradient work (weight and bias), so a layer's backward splits without
  guessing. Every other op returns one number; the counter decides its role from where its output goes.

We do not reuse ``torch.utils.flop_counter``'s formulas: its convolution weight-gradient ignores ``groups``
(3.7× too high for resnext50, 19× for mobilenet_v2); the closed-form tests in
tests/estimate/test_estimate_formulas.py pin every formula here instead.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch._prims_common import suggest_memory_format

from rooflow.conventions import OP_CLASSES

aten = torch.ops.aten

COUNTING_CONVENTION = "1 FMA = 2 FLOPs; attention counted as math-path bmm"

# Classes of work; ``memory`` is data movement with no arithmetic (copies, casts, concatenation, padding).

FlopResult = float | dict[str, float]


@dataclass(frozen=True)
class Formula:
    fn: Callable[..., FlopResult]
    op_class: str
    # The FLOP check's rule of gradients: the positions of the operands whose gradient the backward computes as a
    # product of the forward's cost (addmm: mat1, mat2, not its bias; mv: the vector, the matrix's gradient being
    # an outer product, elementwise; dot: neither); None where no such rule holds (a fused attention kernel's
    # recomputation, a bilinear form's loop: the check takes two)
    product_operands: tuple[int, ...] | None = None
    # the operand whose gradient the op's own backward computes beside its products, one add per output element
    # (a convolution's bias, in convolution_backward; addmm's is a sum of its own)
    bias_operand: int | None = None


# aten OpOverloadPacket -> Formula
FORMULAS: dict[Any, Formula] = {}


def register_formula(ops: Sequence[Any], op_class: str, product_operands: tuple[int, ...] | None = None,
                     bias_operand: int | None = None):
    """Register ``fn(*args, out_shape=..., **kwargs)`` (tensors passed as their shapes) for ``ops``;
    ``product_operands``, ``bias_operand``: see :class:`Formula`."""
    assert op_class in OP_CLASSES, op_class

    def decorator(fn):
        for op in ops:
            packet = getattr(op, "overloadpacket", op)
            FORMULAS[packet] = Formula(fn, op_class, product_operands, bias_operand)
        return fn

    return decorator


def lookup(func) -> Formula | None:
    return FORMULAS.get(getattr(func, "overloadpacket", func))


def numel(shape: Sequence[int] | None) -> int:
    return math.prod(shape) if shape is not None else 0


# --------------------------------------------------------------------------------------------- matmul
@register_formula([aten.mm], "matmul", product_operands=(0, 1))
def mm_flops(a, b, *args, out_shape=None, **kwargs) -> float:
    """(m×k)·(k×n): m·n·k multiply-adds."""
    m, k = a
    k2, n = b
    assert k == k2, (a, b)
    return 2 * m * n * k


@register_formula([aten.addmm], "matmul", product_operands=(1, 2))
def addmm_flops(bias, a, b, *args, out_shape=None, **kwargs) -> float:
    """mm + one add per output element for the bias."""
    return mm_flops(a, b) + numel(out_shape)


@register_formula([aten.bmm], "matmul", product_operands=(0, 1))
def bmm_flops(a, b, *args, out_shape=None, **kwargs) -> float:
    batch, m, k = a
    batch2, k2, n = b
    assert batch == batch2 and k == k2, (a, b)
    return 2 * batch * m * n * k


@register_formula([aten.baddbmm], "matmul", product_operands=(1, 2))
def baddbmm_flops(bias, a, b, *args, out_shape=None, **kwargs) -> float:
    return bmm_flops(a, b) + numel(out_shape)


@register_formula([aten.mv], "matmul", product_operands=(1,))
def mv_flops(a, v, *args, out_shape=None, **kwargs) -> float:
    return 2 * a[0] * a[1]


@register_formula([aten.dot, aten.vdot], "matmul", product_operands=())
def dot_flops(a, b, *args, out_shape=None, **kwargs) -> float:
    return 2 * numel(a)


def conv_macs(x_shape, w_shape, out_shape, transposed: bool = False) -> int:
    """Multiply-adds of a convolution. Weight is [Cout, Cin/groups, *K] (transposed: [Cin, Cout/groups, *K]).
    Each output element of a normal convolution takes (Cin/groups)·prod(K) products:
    N·Cout·prod(out spatial)·(Cin/groups)·prod(K) = numel(out)·prod(w[1:]). A transposed convolution
    scatters each *input* element over (Cout/groups)·prod(K) outputs: numel(x)·prod(w[1:])."""
    per_element = numel(w_shape[1:])
    return (numel(x_shape) if transposed else numel(out_shape)) * per_element


@register_formula([aten.convolution, aten._convolution], "matmul", product_operands=(0, 1),
                  bias_operand=2)
def conv_flops(x, w, bias, stride=None, padding=None, dilation=None, transposed=False, *args,
               out_shape=None, **kwargs) -> float:
    """2·(Cin/groups)·prod(K)·Cout·prod(out spatial)·N, plus one add per output element for the bias."""
    flops = 2 * conv_macs(x, w, out_shape, bool(transposed))
    if bias is not None:
        flops += numel(out_shape)
    return flops


@register_formula([aten.convolution_backward], "matmul")
def conv_backward_flops(grad_out, x, w, bias_sizes, stride, padding, dilation, transposed, output_padding,
                        groups, output_mask, *, out_shape=None, **kwargs) -> dict[str, float]:
    """Input gradient: a transposed convolution of grad_out with the weight — the same multiply-adds as the
    forward. Weight gradient: each of the forward's products contributes one product grad_out·x to one
    weight element — again the same multiply-adds, *per group* (this is where flop_counter ignores
    ``groups``). Bias gradient: a sum over N and the spatial positions, one add per grad_out element."""
    macs = conv_macs(x, w, grad_out, bool(transposed))
    result = {"input": 0.0, "weight": 0.0}
    if output_mask[0]:
        result["input"] += 2 * macs
    if output_mask[1]:
        result["weight"] += 2 * macs
    if len(output_mask) > 2 and output_mask[2]:
        result["weight"] += numel(grad_out)
    return result


def _sdpa_flops(q, k, v) -> float:
    """QK^T: b·h·Sq·Sk·d multiply-adds; AV: b·h·Sq·Sk·dv."""
    *batch, s_q, d = q
    s_k = k[-2]
    d_v = v[-1]
    b = numel(batch)
    return 2 * b * s_q * s_k * d + 2 * b * s_q * s_k * d_v


_SDPA_FORWARD = [getattr(aten, name) for name in (
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu",
    "_flash_attention_forward", "_efficient_attention_forward") if hasattr(aten, name)]
_SDPA_BACKWARD = [getattr(aten, name) for name in (
    "_scaled_dot_product_efficient_attention_backward", "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_cudnn_attention_backward",
    "_scaled_dot_product_flash_attention_for_cpu_backward") if hasattr(aten, name)]


@register_formula(_SDPA_FORWARD, "attention")
def sdpa_flops(q, k, v, *args, out_shape=None, **kwargs) -> float:
    """A fused attention kernel, counted as its math decomposition (the two bmms)."""
    return _sdpa_flops(q, k, v)


@register_formula(_SDPA_BACKWARD, "attention")
def sdpa_backward_flops(grad_out, q, k, v, *args, out_shape=None, **kwargs) -> float:
    """Math-path backward: dV = P^T·dO, dP = dO·V^T, dQ = dS·K, dK = dS^T·Q — four bmms, twice the
    forward's two (recomputation inside flash kernels is not counted)."""
    return 2 * _sdpa_flops(q, k, v)


# ------------------------------------------------------------------------------------------ elementwise
# FLOPs per output element: one per arithmetic operation of the op's definition; a transcendental (exp, log,
# tanh, erf, sqrt) counts 1; a comparison counts 1.
ELEMENTWISE_FLOPS_PER_ELEMENT: dict[str, float] = {
    # binary arithmetic (add/sub with alpha != 1 add one multiply: see _alpha_flops)
    "add": 1, "sub": 1, "rsub": 1, "mul": 1, "div": 1, "maximum": 1, "minimum": 1, "pow": 1, "fmod": 1,
    "remainder": 1, "eq": 1, "ne": 1, "lt": 1, "le": 1, "gt": 1, "ge": 1, "where": 1,
    "addcmul": 2, "addcdiv": 2, "lerp": 2, "clamp": 2, "clamp_min": 1, "clamp_max": 1,
    # unary
    "neg": 1, "abs": 1, "reciprocal": 1, "sqrt": 1, "rsqrt": 1, "exp": 1, "log": 1, "sin": 1, "cos": 1,
    "tanh": 1, "erf": 1, "sign": 1, "sgn": 1, "square": 1, "sigmoid": 4,  # 1/(1+exp(-x)): neg, exp, add, div
    "log1p": 1, "expm1": 1, "log2": 1, "log10": 1, "exp2": 1, "tan": 1, "asin": 1, "acos": 1, "atan": 1,
    "atan2": 1, "sinh": 1, "cosh": 1, "erfc": 1, "floor": 1, "ceil": 1, "round": 1, "trunc": 1, "frac": 1,
    "isnan": 1, "isinf": 1, "isfinite": 1,
    "nan_to_num": 3,  # three compares (NaN, +inf, −inf), each selecting its replacement
    "xlogy": 3,  # x == 0 ? 0 : x·log(y): compare, log, mul (KL divergence)
    # activations: relu = max(x, 0); threshold_backward = (x > 0) ? g : 0
    "relu": 1, "threshold": 1, "threshold_backward": 1, "hardtanh": 2, "hardtanh_backward": 2,
    "leaky_relu": 2, "leaky_relu_backward": 2, "prelu": 2,
    "_prelu_kernel": 2,  # x > 0 ? x : w·x
    "_prelu_kernel_backward": 3,  # compare; g·w into the input's gradient, g·x into the weight's (summed after)
    "silu": 5,  # x·sigmoid(x)
    "silu_backward": 8,  # s = sigmoid(x) (4); g·s·(1 + x·(1 − s)): sub, mul, add, mul (4)
    "sigmoid_backward": 3,  # g·y·(1 − y)
    "tanh_backward": 3,  # g·(1 − y²)
    "gelu": 5,  # 0.5·x·(1 + erf(x/√2)): mul, erf, add, mul, mul
    "gelu_backward": 9,  # cdf (3: mul, erf, add·0.5) + pdf (3: mul, mul, exp·c) + x·pdf + cdf, ·g (3)
    "hardswish": 4,  # x·relu6(x+3)/6: add, clamp(2), mul·(1/6) fused as mul — 4
    "hardswish_backward": 4,  # piecewise: compares (2) and g·(2x+3)/6 (2)
    "hardsigmoid": 3,  # relu6(x+3)/6: add, clamp, mul
    "hardsigmoid_backward": 2,  # compare, mul
    "elu": 3, "elu_backward": 3, "celu": 3, "softplus": 3, "softplus_backward": 3, "mish": 6,
    "glu": 5,  # a·sigmoid(b), per output element (half the input): sigmoid (4), mul
    "log_sigmoid_forward": 5, "log_sigmoid_backward": 6,  # −softplus(−x): neg, softplus, neg; g·(1 − sigmoid(x))
    # dropout: draw a Bernoulli mask (1 compare), scale and multiply (2)
    "native_dropout": 3, "native_dropout_backward": 2, "bernoulli": 1, "bernoulli_": 1,
    "masked_fill": 1, "fill": 0, "fill_": 0,
}

_ELEMENTWISE_OPS = []
for _name in ELEMENTWISE_FLOPS_PER_ELEMENT:
    if hasattr(aten, _name):
        _ELEMENTWISE_OPS.append(getattr(aten, _name))
    if hasattr(aten, _name + "_"):
        _ELEMENTWISE_OPS.append(getattr(aten, _name + "_"))


def _first_shape(out_shape):
    if isinstance(out_shape, (list, tuple)) and out_shape and not isinstance(out_shape[0], int):
        return out_shape[0]
    return out_shape


def elementwise_flops(name: str, out_shape, alpha: Any = 1) -> float:
    per_element = ELEMENTWISE_FLOPS_PER_ELEMENT.get(name, ELEMENTWISE_FLOPS_PER_ELEMENT.get(name.rstrip("_")))
    if name.rstrip("_") in ("add", "sub", "rsub") and alpha not in (None, 1):
        per_element += 1  # a + alpha·b: the multiply by alpha
    return per_element * numel(_first_shape(out_shape))


def _make_elementwise(name: str):
    def formula(*args, out_shape=None, **kwargs) -> float:
        alpha = kwargs.get("alpha", 1)
        if name.rstrip("_") in ("add", "sub", "rsub") and len(args) > 2 and isinstance(args[2], (int, float)):
            alpha = args[2]
        return elementwise_flops(name, out_shape, alpha)

    formula.__name__ = f"{name}_flops"
    return formula


for _op in _ELEMENTWISE_OPS:
    register_formula([_op], "elementwise")(_make_elementwise(_op.__name__))


# The ops that reduce a tensor: their kernels read the input and write a smaller output, so the single elementwise
# calls the kernel model was fitted on (an output-sized tensor per operand) do not price them (NOT_POINTWISE)
REDUCTIONS = ("sum", "amax", "amin", "max", "min", "argmax", "argmin", "prod", "any", "all", "mean",
              "linalg_vector_norm", "norm")


@register_formula([aten.sum, aten.amax, aten.amin, aten.max, aten.min, aten.argmax, aten.argmin, aten.prod, aten.any,
                   aten.all], "elementwise")
def reduction_flops(x, *args, out_shape=None, **kwargs) -> float:
    """One operation per *input* element (the adds/compares of the reduction)."""
    return numel(x) if x is not None and not isinstance(x, (int, float)) else 0


@register_formula([aten.mean], "elementwise")
def mean_flops(x, *args, out_shape=None, **kwargs) -> float:
    """One add per input element and one divide per output element (global average pooling on meta runs
    as ``mean``: the same count as adaptive_avg_pool2d)."""
    return numel(x) + numel(_first_shape(out_shape))


@register_formula([aten.linalg_vector_norm, aten.norm], "elementwise")
def norm_flops(x, *args, out_shape=None, **kwargs) -> float:
    return 2 * numel(x)  # square and add per element


@register_formula([aten.cumsum], "elementwise")
def cumsum_flops(x, *args, out_shape=None, **kwargs) -> float:
    return numel(x)


# ---------------------------------------------------------------------------------------- normalization
# Batch/layer norm forward per element: statistics — mean (1 add), variance (sub, square, add: 3) — only
# when they are computed (training BN, every LayerNorm); normalise (x − μ)·σ⁻¹ (2) and the affine ·γ + β (2).
# Backward per element: grad_input = γσ⁻¹/M·(M·dy − Σdy − x̂·Σ(dy·x̂)) with x̂ recomputed:
# x̂ (2), the two sums (3), the combination (4) = 9 (7 when the statistics are fixed: eval BN, dy·γσ⁻¹ ...);
# grad_γ = Σ dy·x̂ (2), grad_β = Σ dy (1) count as weight-gradient work.
NORM_STATS_FLOPS = 4
NORM_APPLY_FLOPS = 2
NORM_AFFINE_FLOPS = 2
NORM_BACKWARD_INPUT_FLOPS = 9
NORM_BACKWARD_WEIGHT_FLOPS = 3


def batch_norm_forward(x, weight, training: bool) -> float:
    per_element = NORM_APPLY_FLOPS + (NORM_AFFINE_FLOPS if weight is not None else 0)
    if training:
        per_element += NORM_STATS_FLOPS
    return per_element * numel(x)


@register_formula([aten.native_batch_norm, aten._native_batch_norm_legit,
                   aten._native_batch_norm_legit_functional, aten.cudnn_batch_norm,
                   aten.miopen_batch_norm], "normalization")
def batch_norm_flops(x, weight, bias, running_mean=None, running_var=None, training=False, *args,
                     out_shape=None, **kwargs) -> float:
    # _native_batch_norm_legit(x, w, b, training, momentum, eps) (no running stats) has `training` 4th
    if isinstance(running_mean, bool):
        training = running_mean
    return batch_norm_forward(x, weight, bool(training))


@register_formula([aten._native_batch_norm_legit_no_training], "normalization")
def batch_norm_eval_flops(x, weight, *args, out_shape=None, **kwargs) -> float:
    return batch_norm_forward(x, weight, False)


@register_formula([aten.native_batch_norm_backward, aten.cudnn_batch_norm_backward,
                   aten.miopen_batch_norm_backward], "normalization")
def batch_norm_backward_flops(grad_out, x, weight, *args, out_shape=None, **kwargs) -> dict[str, float]:
    mask = kwargs.get("output_mask") or next((a for a in reversed(args) if isinstance(a, (list, tuple))
                                              and len(a) == 3 and all(isinstance(b, bool) for b in a)),
                                             [True, True, True])
    n = numel(x)
    return {"input": NORM_BACKWARD_INPUT_FLOPS * n if mask[0] else 0.0,
            "weight": (2 * n if mask[1] else 0.0) + (n if mask[2] else 0.0)}


@register_formula([aten.native_layer_norm], "normalization")
def layer_norm_flops(x, normalized_shape, weight=None, bias=None, *args, out_shape=None, **kwargs) -> float:
    per_element = NORM_STATS_FLOPS + NORM_APPLY_FLOPS + (NORM_AFFINE_FLOPS if weight is not None else 0)
    return per_element * numel(x)


@register_formula([aten.native_layer_norm_backward], "normalization")
def layer_norm_backward_flops(grad_out, x, normalized_shape, mean, rstd, weight, bias, output_mask, *,
                              out_shape=None, **kwargs) -> dict[str, float]:
    n = numel(x)
    return {"input": NORM_BACKWARD_INPUT_FLOPS * n if output_mask[0] else 0.0,
            "weight": (2 * n if output_mask[1] else 0.0) + (n if output_mask[2] else 0.0)}


@register_formula([aten.native_group_norm], "normalization")
def group_norm_flops(x, weight, bias, *args, out_shape=None, **kwargs) -> float:
    per_element = NORM_STATS_FLOPS + NORM_APPLY_FLOPS + (NORM_AFFINE_FLOPS if weight is not None else 0)
    return per_element * numel(x)


@register_formula([aten.native_group_norm_backward], "normalization")
def group_norm_backward_flops(grad_out, x, mean, rstd, weight, n, c, hxw, group, output_mask, *,
                              out_shape=None, **kwargs) -> dict[str, float]:
    count = numel(x)
    return {"input": NORM_BACKWARD_INPUT_FLOPS * count if output_mask[0] else 0.0,
            "weight": (2 * count if output_mask[1] else 0.0) + (count if output_mask[2] else 0.0)}


# -------------------------------------------------------------------------------------------- softmax
# softmax per element: max (1), subtract (1), exp (1), sum (1), divide (1) = 5; log_softmax: max, subtract,
# exp, sum, subtract log-sum = 5. Backward: softmax dx = y·(dy − Σdy·y): mul, sum, sub, mul = 4;
# log_softmax dx = dy − exp(y)·Σdy: sum, exp, mul, sub = 4.
SOFTMAX_FLOPS = 5
SOFTMAX_BACKWARD_FLOPS = 4


@register_formula([aten._softmax, aten._log_softmax, aten._safe_softmax], "softmax")
def softmax_flops(x, *args, out_shape=None, **kwargs) -> float:
    return SOFTMAX_FLOPS * numel(x)


@register_formula([aten._softmax_backward_data, aten._log_softmax_backward_data], "softmax")
def softmax_backward_flops(grad_out, *args, out_shape=None, **kwargs) -> float:
    return SOFTMAX_BACKWARD_FLOPS * numel(grad_out)


@register_formula([aten.nll_loss_forward, aten.nll_loss2d_forward], "elementwise")
def nll_loss_flops(x, target, *args, out_shape=None, **kwargs) -> float:
    """Pick one log-probability per sample and average: one add per sample (+1 divide)."""
    return x[0] + 1 if len(x) > 1 else 2


@register_formula([aten.nll_loss_backward, aten.nll_loss2d_backward], "elementwise")
def nll_loss_backward_flops(grad_out, x, target, *args, out_shape=None, **kwargs) -> float:
    """Scatter −g/N into one element per sample of a zeroed gradient."""
    return x[0] if len(x) > 1 else 1


# -------------------------------------------------------------------------------------------- pooling
def _pool_window(kernel_size, dims: int = 2) -> int:
    return numel(kernel_size) if len(kernel_size) > 1 else kernel_size[0] ** dims


@register_formula([aten.max_pool2d_with_indices, aten.max_pool2d], "pooling")
def max_pool2d_flops(x, kernel_size, *args, out_shape=None, dims=2, **kwargs) -> float:
    """One comparison per window element per output element: kh·kw per output (the standard count;
    strictly kh·kw − 1 comparisons)."""
    return _pool_window(kernel_size, dims) * numel(_first_shape(out_shape))


@register_formula([aten.max_pool2d_with_indices_backward], "pooling")
def max_pool2d_backward_flops(grad_out, x, kernel_size, *args, out_shape=None, dims=2, **kwargs) -> float:
    """Scatter-add each output gradient into the argmax position: one add per grad_out element."""
    return numel(grad_out)


@register_formula([aten.avg_pool2d], "pooling")
def avg_pool2d_flops(x, kernel_size, *args, out_shape=None, dims=2, **kwargs) -> float:
    """kh·kw − 1 adds and one divide per output element: kh·kw."""
    return _pool_window(kernel_size, dims) * numel(out_shape)


@register_formula([aten.avg_pool2d_backward], "pooling")
def avg_pool2d_backward_flops(grad_out, x, kernel_size, *args, out_shape=None, dims=2, **kwargs) -> float:
    """Each output gradient divided once and added into kh·kw inputs: kh·kw per grad_out element."""
    return _pool_window(kernel_size, dims) * numel(grad_out)


# Video models' 3-D pooling (S3D's, MViT's): the 2-D counts over kt·kh·kw windows; fractional max pooling
# (pseudo-random window offsets) compares the same kh·kw window per output and scatters its gradient the same
for _ops, _formula in (([aten.max_pool3d_with_indices, aten.fractional_max_pool3d], max_pool2d_flops),
                       ([aten.max_pool3d_with_indices_backward, aten.fractional_max_pool3d_backward],
                        max_pool2d_backward_flops),
                       ([aten.avg_pool3d], avg_pool2d_flops), ([aten.avg_pool3d_backward], avg_pool2d_backward_flops)):
    register_formula(_ops, "pooling")(functools.partial(_formula, dims=3))
register_formula([aten.fractional_max_pool2d], "pooling")(max_pool2d_flops)
register_formula([aten.fractional_max_pool2d_backward], "pooling")(max_pool2d_backward_flops)


@register_formula([aten._adaptive_avg_pool2d, aten.adaptive_avg_pool2d], "pooling")
def adaptive_avg_pool2d_flops(x, output_size, *args, out_shape=None, **kwargs) -> float:
    """Every input element added once into its window (windows may overlap when the input does not divide,
    counted as non-overlapping), plus one divide per output element."""
    return numel(x) + numel(out_shape)


@register_formula([aten._adaptive_avg_pool2d_backward], "pooling")
def adaptive_avg_pool2d_backward_flops(grad_out, x, *args, out_shape=None, **kwargs) -> float:
    """Each input gradient = its window's output gradient / window size: one op per input element."""
    return numel(x)


@register_formula([aten.adaptive_max_pool2d], "pooling")
def adaptive_max_pool2d_flops(x, output_size, *args, out_shape=None, **kwargs) -> float:
    return numel(x)


@register_formula([aten.adaptive_max_pool2d_backward], "pooling")
def adaptive_max_pool2d_backward_flops(grad_out, *args, out_shape=None, **kwargs) -> float:
    return numel(grad_out)


# F.interpolate (segmentation heads: FCN, DeepLabV3, LR-ASPP upsample their logits bilinearly). Per output element,
# as PyTorch's kernels compute it: d-linear interpolation nests lerps of two weighted taps (w0·a + w1·b: 2 mul,
# 1 add) over d axes, 3·(2^d − 1) FLOPs (linear 3, bilinear 9, trilinear 21); bicubic weighs 4 taps along each
# row (4 mul, 3 add) of 4 rows, then the 4 results: 5 × 7 = 35. Their backward scatters each gradient element
# into every tap, times its weight product (d mul) plus the add: (d + 1)·2^d (bicubic: 16 taps × 3). Nearest is
# a gather, no arithmetic; its backward sums the gradients of the outputs that read each input: one add each.
_INTERPOLATION = {"upsample_linear1d": (3, 4), "upsample_bilinear2d": (9, 12), "_upsample_bilinear2d_aa": (9, 12),
                  "upsample_trilinear3d": (21, 32), "upsample_bicubic2d": (35, 48), "_upsample_bicubic2d_aa": (35, 48),
                  **{f"{name}{d}d": (0, 1) for name in ("upsample_nearest", "_upsample_nearest_exact") for d in (1, 2, 3)}}


def _per_element(flops_per_element: float, of_output: bool) -> Callable[..., float]:
    """``flops_per_element`` × the elements of the op's output (``of_output``) or of its first argument."""
    def flops(first, *args, out_shape=None, **kwargs) -> float:
        return flops_per_element * numel(_first_shape(out_shape) if of_output else first)
    return flops


for _name, (_forward, _backward) in _INTERPOLATION.items():
    for _op, _per_element_flops, _is_backward in ((_name, _forward, False), (f"{_name}_backward", _backward, True)):
        if hasattr(aten, _op):
            register_formula([getattr(aten, _op)], "memory" if _per_element_flops == 0 else "elementwise")(
                _per_element(_per_element_flops, of_output=not _is_backward))


# F.grid_sample (RAFT's correlation lookups, spatial transformers), as PyTorch's grid_sampler_2d kernels compute
# it. Per output element (each channel of each grid location): its interpolation's taps, as F.interpolate's
# (bilinear 9, bicubic 35, nearest 0). Per grid location, once for all channels: the two coordinates
# unnormalized (mul, add each) and the four bilinear tap weights (2 sub, 1 mul each), 16 (nearest: unnormalize
# and round, 6). Backward per grad_output element: the input gradient scattered into each tap (mul, add: 8
# bilinear, 1 nearest, bicubic 16 taps × 3) and the grid gradient — each tap's value times its weight
# difference times the gradient, subtracted, for x and y (3 each: 24 bilinear, bicubic 16 taps × 2 × 3 = 96,
# nearest none); per location the weights again and the coordinates' scale, 18.
GRID_SAMPLE_FLOPS = {0: (9, 16, 8, 24, 18), 1: (0, 6, 1, 0, 6), 2: (35, 16, 48, 96, 18)}  # by interpolation_mode


@register_formula([aten.grid_sampler_2d], "elementwise")
def grid_sampler_2d_flops(x, grid, interpolation_mode=0, *args, out_shape=None, **kwargs) -> float:
    per_element, per_location, *_ = GRID_SAMPLE_FLOPS.get(interpolation_mode, GRID_SAMPLE_FLOPS[0])
    return per_element * numel(out_shape) + per_location * numel(grid) / 2


@register_formula([aten.grid_sampler_2d_backward], "elementwise")
def grid_sampler_2d_backward_flops(grad_out, x, grid, interpolation_mode=0, padding_mode=0, align_corners=False,
                                   output_mask=(True, True), *args, out_shape=None, **kwargs) -> float:
    *_, input_part, grid_part, per_location = GRID_SAMPLE_FLOPS.get(interpolation_mode, GRID_SAMPLE_FLOPS[0])
    input_wanted, grid_wanted = (tuple(output_mask) + (True, True))[:2]
    per_element = input_part * bool(input_wanted) + grid_part * bool(grid_wanted)
    return per_element * numel(grad_out) + per_location * numel(grid) / 2


# Losses and activations a user's model or loss calls (torchvision's classifiers train on cross-entropy, counted
# above), one FLOP per arithmetic operation as ELEMENTWISE_FLOPS_PER_ELEMENT. A reducing loss: per input
# element, its terms plus the add of the sum (the mean's one divide left out)
LOSS_FLOPS_PER_ELEMENT = {
    "mse_loss": 3,  # (x − t)²: sub, mul; the add
    "l1_loss": 3,  # |x − t|: sub, abs; the add
    "smooth_l1_loss": 5, "huber_loss": 5,  # |d| < β ? 0.5·d²/β : |d| − 0.5β: sub, abs, compare, the branch (2)
    "binary_cross_entropy": 7,  # −(t·log x + (1 − t)·log(1 − x)): 2 log, 2 sub, 2 mul, the add (+ neg folded)
    "binary_cross_entropy_with_logits": 8,  # (1 − t)·x + softplus(−x): sub, mul, neg, softplus (3), add; the add
}
# backward per element of the gradient it writes: mse 2·(x − t)·g/n (sub, mul, mul); l1 sign(x − t)·g/n (3);
# smooth L1/Huber the branch and its scale (4); BCE g·(x − t)/(x·(1 − x))/n (sub, sub, mul, div, mul: 5)
LOSS_BACKWARD_FLOPS_PER_ELEMENT = {"mse_loss_backward": 3, "l1_loss_backward": 3, "smooth_l1_loss_backward": 4,
                                   "huber_loss_backward": 4, "binary_cross_entropy_backward": 5}


for _table, _backward in ((LOSS_FLOPS_PER_ELEMENT, False), (LOSS_BACKWARD_FLOPS_PER_ELEMENT, True)):
    for _name, _flops in _table.items():  # forward: per element of self; backward: of the gradient it writes
        if hasattr(aten, _name):
            register_formula([getattr(aten, _name)], "elementwise")(_per_element(_flops, of_output=_backward))


# nn.EmbeddingBag (recommendation models' sparse features): each index's row added into its bag (dim adds; with
# per-sample weights, a multiply each; mode max compares instead), mean dividing each bag's sum once per output
# element. Its backward adds each bag's gradient into the rows its indices name (the weight's gradient; mean
# divides it by the bag size first). nn.Embedding's gather has no arithmetic (MEMORY_OPS)
EMBEDDING_BAG_MEAN = 1  # its ``mode`` argument: 0 sum, 1 mean, 2 max


@register_formula([aten._embedding_bag, aten._embedding_bag_forward_only, aten.embedding_bag], "elementwise")
def embedding_bag_flops(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                        per_sample_weights=None, *args, out_shape=None, **kwargs) -> float:
    per_index = weight[-1] * (2 if per_sample_weights is not None else 1)
    return numel(indices) * per_index + (numel(_first_shape(out_shape)) if mode == EMBEDDING_BAG_MEAN else 0)


def _embedding_bag_gradient(grad, indices, mode, per_sample_weights) -> dict[str, float]:
    per_index = grad[-1] * (2 if per_sample_weights is not None else 1)
    return {"input": 0.0, "weight": numel(indices) * per_index + (numel(grad) if mode == EMBEDDING_BAG_MEAN else 0)}


@register_formula([aten._embedding_bag_backward], "elementwise")
def embedding_bag_backward_flops(grad, indices, offsets, offset2bag, bag_size, maximum_indices, num_weights,
                                 scale_grad_by_freq, mode, sparse, per_sample_weights=None, *args, out_shape=None,
                                 **kwargs) -> dict[str, float]:
    return _embedding_bag_gradient(grad, indices, mode, per_sample_weights)


@register_formula([aten._embedding_bag_dense_backward], "elementwise")
def embedding_bag_dense_backward_flops(grad, indices, offset2bag, bag_size, maximum_indices, num_weights,
                                       scale_grad_by_freq, mode, per_sample_weights=None, *args, out_shape=None,
                                       **kwargs) -> dict[str, float]:
    return _embedding_bag_gradient(grad, indices, mode, per_sample_weights)


@register_formula([aten.glu_backward], "elementwise")
def glu_backward_flops(grad_out, x, *args, out_shape=None, **kwargs) -> float:
    """Per grad_output element: s = sigmoid(b) (4); da = g·s (1); db = g·a·s·(1 − s) (sub, 3 mul): 9."""
    return 9 * numel(grad_out)


# Weight normalization (torch.nn.utils.parametrizations.weight_norm): w = g·v/‖v‖ per output channel. Per element
# of v: the norm's square and add, and the scale's multiply (3); per channel the sqrt and g/‖v‖ (2). Its backward:
# per element grad_g's v·grad_w summed (2) and grad_v = (g/‖v‖)·(grad_w − v·grad_g/‖v‖) (3); per channel 3.
@register_formula([aten._weight_norm_interface], "elementwise")
def weight_norm_flops(v, g, *args, out_shape=None, **kwargs) -> float:
    return 3 * numel(v) + 2 * numel(g)


@register_formula([aten._weight_norm_interface_backward], "elementwise")
def weight_norm_backward_flops(grad_w, v, g, *args, out_shape=None, **kwargs) -> float:
    return 5 * numel(v) + 3 * numel(g)


@register_formula([aten.logsumexp], "elementwise")
def logsumexp_flops(x, *args, out_shape=None, **kwargs) -> float:
    """Per input element the max's compare, then exp(x − max) summed (sub, exp, add): 4; per output the log and
    the max added back: 2."""
    return 4 * numel(x) + 2 * numel(_first_shape(out_shape))


# Padding that reflects or replicates the border: the forward copies (a memory op); the backward copies the
# interior gradient and adds each border element's gradient into the input element it copied: one add each
_PAD_BACKWARD = [getattr(aten, f"{kind}_pad{d}d_backward") for kind in ("reflection", "replication")
                 for d in (1, 2, 3) if hasattr(aten, f"{kind}_pad{d}d_backward")]


@register_formula(_PAD_BACKWARD, "elementwise")
def pad_backward_flops(grad_out, x, *args, out_shape=None, **kwargs) -> float:
    return max(0, numel(grad_out) - numel(x))


# torch.fft: a length-N complex transform as the radix-2 count, 5·N·log2(N) real FLOPs (N/2·log2 N butterflies
# of a complex multiply (6) and two complex adds (4)); a real-to-complex or complex-to-real one half that.
# A multi-dimensional transform of N = n1·n2·… points sums N·log2(n_d) over its dims: N·log2(N). Its bytes,
# a few FLOPs each, price it (the time model's elementwise class).
FFT_FLOPS_PER_POINT_LOG2 = {"_fft_c2c": 5.0, "_fft_r2c": 2.5, "_fft_c2r": 2.5}


def _fft_flops(name: str):
    def flops(x, dim, *args, out_shape=None, **kwargs) -> float:
        real = _first_shape(out_shape) if name == "_fft_c2r" else x  # the real side's lengths
        points = numel([real[d] for d in dim])
        batch = numel(real) / points if points else 0
        return FFT_FLOPS_PER_POINT_LOG2[name] * batch * points * math.log2(points) if points > 1 else 0.0
    return flops


for _name in FFT_FLOPS_PER_POINT_LOG2:
    register_formula([getattr(aten, _name)], "elementwise")(_fft_flops(_name))


# torch.cdist: per pair of rows (an output element) and feature m, |a_m − b_m|^p summed (sub, pow, add: 3), then
# the p-th root; for p = 2 on more than 25 rows PyTorch takes ‖a‖² + ‖b‖² − 2·a·b instead (_euclidean_dist: a GEMM),
# so the matmul class (its FLOPs at the peak). Its backward (the gradient of one operand): per pair and feature
# the difference, scaled by g/d (the pair's divide) and added: 3·m + 1.
@register_formula([aten._cdist_forward], "matmul")
def cdist_flops(x1, x2, *args, out_shape=None, **kwargs) -> float:
    return numel(_first_shape(out_shape)) * (3 * x1[-1] + 1)


@register_formula([aten._euclidean_dist], "matmul")
def euclidean_dist_flops(x1, x2, *args, out_shape=None, **kwargs) -> float:
    """cdist's p = 2 path on many rows: the squared norms of both operands' rows (2 per element), the product
    a·b (2·m per pair), then ‖a‖² + ‖b‖² − 2·a·b, clamped, its square root (4 per pair)."""
    pairs = numel(_first_shape(out_shape))
    return 2 * (numel(x1) + numel(x2)) + pairs * (2 * x1[-1] + 4)


@register_formula([aten._cdist_backward], "matmul")
def cdist_backward_flops(grad, x1, x2, *args, out_shape=None, **kwargs) -> float:
    return numel(grad) * (3 * x1[-1] + 1)


# nn.Bilinear's y_o = x1ᵀ·W_o·x2 + b_o runs as aten._trilinear(x1, W, x2, expand dims, sum dims): per output
# feature a GEMM and a batched dot (formulas.trilinear_slices, below with the GEMM views); its backward is
# _trilinear again, once per operand that takes a gradient. Its FLOPs are those products' multiply-adds, 2 each,
# and the elementwise muls and adds between them: for nn.Bilinear's forward 2·B·out·in2·(in1 + 1) + B·out.
@register_formula([aten._trilinear], "matmul")
def trilinear_flops(*args, out_shape=None, **kwargs) -> float:
    slices, views, elementwise = trilinear_slices(*args, **kwargs)
    return float(slices * (sum(2 * m * n * k * count for m, n, k, count in views) + elementwise))


# The elementwise-class ops above that resample, gather, scatter or reduce: their bytes are not one output-sized
# tensor per operand, as the single elementwise calls the kernel model was fitted on are (add, mul, relu, ...),
# so a step's time prices their bytes by the time model (rooflow.estimate.kernel_ops.kernel_rows leaves them)
NOT_POINTWISE = frozenset({*_INTERPOLATION, *(f"{name}_backward" for name in _INTERPOLATION), "grid_sampler_2d",
                           "grid_sampler_2d_backward", *LOSS_FLOPS_PER_ELEMENT, *LOSS_BACKWARD_FLOPS_PER_ELEMENT,
                           "_embedding_bag", "_embedding_bag_forward_only", "embedding_bag", "_embedding_bag_backward",
                           "_embedding_bag_dense_backward", "var", "std", "var_mean", "std_mean", "logsumexp",
                           "_weight_norm_interface", "_weight_norm_interface_backward",
                           *REDUCTIONS,
                           *(op.__name__ for op in _PAD_BACKWARD), *FFT_FLOPS_PER_POINT_LOG2})


@register_formula([aten.var, aten.std, aten.var_mean, aten.std_mean], "elementwise")
def variance_flops(x, *args, out_shape=None, **kwargs) -> float:
    """Two passes per input element: the mean's add, then (x − μ)² summed (sub, mul, add): 4; per output the
    mean's and the variance's divides (and std's sqrt, counted with them)."""
    return 4 * numel(x) + 2 * numel(_first_shape(out_shape))


# --------------------------------------------------------------------------- data movement, no arithmetic
# These move or create data: no FLOPs, but their bytes count (a cast reads fp32 and writes fp16 ...).
MEMORY_OPS = [getattr(aten, name) for name in (
    "_to_copy", "copy", "copy_", "clone", "contiguous", "cat", "stack", "constant_pad_nd", "pad",
    *(f"{kind}_pad{d}d" for kind in ("reflection", "replication") for d in (1, 2, 3)),
    "roll", "flip", "index", "index_select", "gather", "scatter", "index_put", "index_put_", "_index_put_impl_", "masked_scatter", "select_backward", "slice_backward",
    "slice_scatter", "select_scatter", "as_strided_scatter", "diagonal_backward", "unfold_backward",
    "_unsafe_index", "_unsafe_index_put", "repeat", "tril", "triu", "tril_", "triu_", "zero_", "zeros",
    "zeros_like", "ones", "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full", "empty", "empty_like",
    "empty_strided", "new_empty", "new_empty_strided", "arange", "scalar_tensor", "lift_fresh_copy",
    "_local_scalar_dense", "embedding", "embedding_dense_backward", "detach_copy", "view_copy",
    "alias_copy", "linspace", "randn", "rand", "randint", "normal_", "uniform_",
    "_foreach_add", "set_", "resize_", "_has_compatible_shallow_copy_type", "sort", "topk",
    "channel_shuffle", "native_channel_shuffle", "pixel_shuffle", "pixel_unshuffle", "im2col", "col2im",
    # boolean and integer logic (masks): no floating-point operation
    *(f"{kind}_{op}{inplace}" for kind in ("logical", "bitwise") for op in ("and", "or", "xor", "not")
      for inplace in ("", "_")),
) if hasattr(aten, name)]


@register_formula(MEMORY_OPS, "memory")
def no_flops(*args, out_shape=None, **kwargs) -> float:
    return 0.0


# The bias part of the matmul formulas above (addmm = mm + bias): lets a caller report pure multiply-adds,
# the unit of torchvision's published ``_ops``.
def _bias_of_addmm(bias, *args, out_shape=None, **kwargs) -> float:
    return numel(out_shape)


def _bias_of_conv(x, w, bias, *args, out_shape=None, **kwargs) -> float:
    return numel(out_shape) if bias is not None else 0.0


BIAS_PARTS: dict[Any, Callable[..., float]] = {aten.addmm: _bias_of_addmm, aten.baddbmm: _bias_of_addmm,
                                               aten.convolution: _bias_of_conv,
                                               aten._convolution: _bias_of_conv}


def bias_flops(func, args: tuple, kwargs: dict, out) -> float:
    """FLOPs of the bias add inside a matmul-class op's count (0 for ops without one)."""
    part = BIAS_PARTS.get(getattr(func, "overloadpacket", func))
    if part is None:
        return 0.0
    return float(part(*shapes_of(args), out_shape=shapes_of(out), **shapes_of(kwargs)))


def shapes_of(value):
    """Replace tensors by their shapes (recursively through lists/tuples), keep everything else."""
    if isinstance(value, torch.Tensor):
        return value.shape
    if isinstance(value, (list, tuple)):
        return type(value)(shapes_of(v) for v in value)
    return value


def count(func, args: tuple, kwargs: dict, out) -> tuple[FlopResult, str] | None:
    """(FLOPs, op class) of one aten call, or None when no formula is registered for it."""
    formula = lookup(func)
    if formula is None:
        return None
    return formula.fn(*shapes_of(args), out_shape=shapes_of(out), **shapes_of(kwargs)), formula.op_class


# ------------------------------------------------------------------------------------------ GEMM views
# The time model (rooflow.estimate.predict) needs the shape of the matrix products a matmul-class op runs,
# not only their FLOPs: a GEMM's speed depends on how its output tiles fill the GPU (tile and wave
# quantisation) and on its inner dimension (pipeline fill). Convolutions run as implicit GEMMs (cuDNN's
# "implicit_gemm", "fprop/dgrad/wgrad" kernels). Each view is (m, n, k, count): count independent
# m×k·k×n products (groups of a grouped convolution, the batch of a bmm); convolution views add a fifth
# element, 1 where a fast algorithm (Winograd, FFT) applies, and two more: the filter taps (kernel positions)
# that k, resp. n, is made of (k = channels × taps for forward and data gradient, n = channels × taps for
# the weight gradient), so that the time model can pad the channels of each tap (a 3-channel image stem).
GemmView = tuple[int, ...]
GEMM_VIEWS: dict[Any, Callable[..., tuple[GemmView, ...]]] = {}


def _registrar(table: dict[Any, Callable]):
    """A decorator factory that files a function under each aten op (overload packet) it is given."""
    def register(ops: Sequence[Any]):
        def decorator(fn):
            for op in ops:
                table[getattr(op, "overloadpacket", op)] = fn
            return fn

        return decorator

    return register


register_gemm_view = _registrar(GEMM_VIEWS)


@register_gemm_view([aten.mm, aten.addmm])
def _mm_view(*args, out_shape=None, **kwargs) -> tuple[GemmView, ...]:
    a, b = (args[0], args[1]) if len(args[0]) == 2 and len(args) == 2 else (args[-2], args[-1])
    return ((a[0], b[1], a[1], 1),)


@register_gemm_view([aten.bmm, aten.baddbmm])
def _bmm_view(*args, out_shape=None, **kwargs) -> tuple[GemmView, ...]:
    a, b = args[-2], args[-1]
    return ((a[1], b[2], a[2], a[0]),)


@register_gemm_view([aten.mv])
def _mv_view(a, v, *args, out_shape=None, **kwargs) -> tuple[GemmView, ...]:
    return ((a[0], 1, a[1], 1),)


@register_gemm_view([aten._euclidean_dist])
def _euclidean_dist_view(x1, x2, *args, out_shape=None, **kwargs) -> tuple[GemmView, ...]:
    """cdist's p = 2 path: [-2·a, ‖a‖², 1] @ [b, 1, ‖b‖²]ᵀ, one (batched) product two columns deeper than a row."""
    return ((x1[-2], x2[-2], x1[-1] + 2, numel(x1[:-2])),)


def _sumproduct_pair(left: list[int], right: list[int], sum_dims: set[int]) -> tuple[GemmView | None, list[int]]:
    """ATen's sumproduct_pair on operand sizes of equal rank: its product as a bmm of (dims in both) batches of
    (left-only dims) × (right-only dims) × (summed dims in both), the two sides swapped where every right-only
    dim comes before every left-only one (``swap_lo_ro``) — None where nothing is summed (a mul) — and its
    result's sizes (summed dims kept as 1)."""
    if not sum_dims:
        return None, [max(a, b) for a, b in zip(left, right)]
    both = depth = 1
    only_left: list[int] = []
    only_right: list[int] = []
    sizes = []
    for i, (a, b) in enumerate(zip(left, right)):
        if i in sum_dims:
            depth *= a if a != 1 and b != 1 else 1  # a dim only one side has is summed before the product
            sizes.append(1)
            continue
        if a != 1 and b != 1:
            both *= a
        elif a != 1:
            only_left.append(i)
        elif b != 1:
            only_right.append(i)
        sizes.append(max(a, b))
    if only_left and only_right and only_right[-1] < only_left[0]:
        only_left, only_right = only_right, only_left
    return (numel([sizes[i] for i in only_left]), numel([sizes[i] for i in only_right]), depth, both), sizes


TRILINEAR_SLICE_KERNELS = 3  # a slice's two pairs (a bmm or a mul each) and its add into the output


def trilinear_slices(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1
                     ) -> tuple[int, tuple[GemmView, ...], int]:
    """What ATen's _trilinear runs (nn.Bilinear and its backward): per slice of ``unroll_dim`` (the output features
    of nn.Bilinear's forward), i1·i2 summed over the sum dims i3 lacks, then i3·that over the others — each a bmm
    where it sums, else a mul — and the result added into the output. (slices, the bmm views of one slice, the
    elementwise FLOPs of one slice: its muls' and its add's elements).
    nn.Bilinear's forward: per output feature a B×in2×in1 GEMM, B dot products of in2 and the add, as
    torch.profiler lists them (test_bilinear_runs_two_products_per_output_feature)."""
    total = len(i1) + len(expand1)
    expanded = []
    for shape, dims in ((i1, expand1), (i2, expand2), (i3, expand3)):
        sizes = list(shape)
        for d in sorted(d % total for d in dims):
            sizes.insert(d, 1)
        expanded.append(sizes)
    if any(numel(sizes) == 0 for sizes in expanded):
        return 0, (), 0
    summed, unroll_dim, lacking = {d % total for d in sumdim}, unroll_dim % total, {d % total for d in expand3}
    sliced = [[1 if d == unroll_dim else size for d, size in enumerate(sizes)] for sizes in expanded]
    first, buffer = _sumproduct_pair(sliced[0], sliced[1], summed & lacking - {unroll_dim})
    second, result = _sumproduct_pair(sliced[2], buffer, summed - lacking - {unroll_dim})
    elementwise = (numel(buffer) if first is None else 0) + (numel(result) if second is None else 0) + numel(result)
    views = tuple(view for view in (first, second) if view is not None)
    return max(sizes[unroll_dim] for sizes in expanded), views, elementwise


@register_gemm_view([aten._trilinear])
def _trilinear_views(*args, out_shape=None, **kwargs) -> tuple[GemmView, ...]:
    """Each slice's products (:func:`trilinear_slices`), each its own launch."""
    slices, views, _ = trilinear_slices(*args, **kwargs)
    return views * slices


def _fast_eligible(w, stride, dilation, groups) -> int:
    """1 when cuDNN may run this convolution with a fast algorithm (Winograd, FFT): a 2-D kernel of at least
    3×3, stride 1, no dilation, not grouped — the shapes for which those algorithms exist."""
    spatial = list(w[2:])
    return int(len(spatial) == 2 and min(spatial) >= 3 and all(int(s) == 1 for s in (stride or [1]))
               and all(int(d) == 1 for d in (dilation or [1])) and int(groups) == 1)


ELEMENT_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp64": 8}  # by compute dtype (rooflow's names)


def runs_as_gemm(views, read_elements: float) -> bool:
    """Whether a convolution (its GEMM views, and the elements its forward reads: input, weights, bias) is 1×1,
    stride 1 and ungrouped. cuDNN runs those on NCHW tensors as plain GEMMs over C × H·W (cutlass and cuBLAS
    ``s1688gemm``/``xmma_gemm`` kernels) rather than as NHWC implicit-GEMM kernels, so without NCHW ↔ NHWC
    transposes: in rooflow's H100 TF32 recordings of ResNet-50 (tests/data/real/h100-rooflow, torch.profiler) 27 of
    its 33 such forward convolutions ran GEMM kernels, and 26 convolutions with transposes ran the 3×3, 7×7 and
    strided ones. Forward: one view of one tap (k_taps) whose input is read once (m·k elements beside the n·k
    weights and n biases); backward: one tap in the data gradient (k_taps) and in the weight gradient (n_taps),
    the data gradient's positions those of the weight gradient's reduction (dgrad m = wgrad k)."""
    if not views or any(int(view[3]) != 1 for view in views):
        return False
    if len(views) == 1:
        m, n, k, _, _, k_taps, _ = views[0][:7]
        return k_taps == 1 and abs(read_elements - (m + n) * k) <= n
    dgrad, wgrad = views[0], views[1]
    return dgrad[5] == 1 and wgrad[6] == 1 and dgrad[0] == wgrad[2]


# cuDNN's forward convolutions of an image (fewer than IMAGE_CHANNELS channels, so that a 16-bit NHWC tap is not
# 16-byte aligned), read from the H200's batch-256 traces (tests/data/real/gpu-2026-11-27, cuDNN 9.19, autotuned):
# - under NCHW_IMAGE_MAX_PRODUCTS products per output (3 channels × 3×3 or 4×4 taps: 27, 48) its FFMA kernels on
#   the NCHW tensors, no layout copies: implicit_convolve_sgemm / precomputed_convolve_sgemm in bf16 (SqueezeNet's,
#   VGG16's, RegNet's and MobileNetV2's stems), sm80_xmma_fprop_…_nchw in TF32 (ConvNeXt's 4×4); the boundary lies
#   anywhere between 48 and 147;
# - 7×7 and 11×11 taps (147, 363) on tensor cores with NHWC copies (ResNet-50's, DenseNet's, GoogLeNet's, AlexNet's),
#   and in 16-bit as TF32 on a 4-byte copy of the input, its channels padded to IMAGE_CHANNEL_ALIGN
#   (nchwToNhwcKernel<__nv_bfloat16, float> feeding cutlass_tensorop_s1688fprop_optimized_tf32_…_align4).
# ViT-B/16's 16×16 patches (768 products) ran NCHW in bf16 and with an NHWC input copy in TF32: no rule here
# covers them (its steps' memory peaks elsewhere).
IMAGE_CHANNELS = 8
NCHW_IMAGE_MAX_PRODUCTS = 64
IMAGE_CHANNEL_ALIGN = 4


def image_channels(views) -> int:
    """The input channels of a forward convolution's one GEMM view where they are an image's (fewer than
    :data:`IMAGE_CHANNELS`), else 0."""
    if len(views) != 1 or not views[0][5] or views[0][6]:
        return 0
    m, n, k, count, fast, k_taps, n_taps = views[0][:7]
    channels = k // k_taps if k % k_taps == 0 else 0
    return channels if 0 < channels < IMAGE_CHANNELS and count == 1 else 0


def convolves_image_on_nchw(views) -> bool:
    """Whether cuDNN runs a forward convolution (its GEMM views) of an image of few products per output on its FFMA
    kernels over the NCHW tensors, without layout copies (module comment above)."""
    return bool(image_channels(views)) and views[0][2] < NCHW_IMAGE_MAX_PRODUCTS


@register_gemm_view([aten.convolution, aten._convolution])
def _conv_view(x, w, bias, stride=None, padding=None, dilation=None, transposed=False, output_padding=None,
               groups=1, *args, out_shape=None, **kwargs) -> tuple[GemmView, ...]:
    """Forward: m = N·out spatial, n = Cout/g, k = Cin/g·kernel, one product per group. A transposed
    convolution runs as the data gradient of its mirror: m = N·out spatial, n = Cout/g, k = Cin/g·kernel
    too, with its weight read as [Cin, Cout/g, *K]. A fifth element marks Winograd/FFT-eligible shapes."""
    g = max(1, int(groups))
    kernel = numel(w[2:])
    cout = w[1] * g if transposed else w[0]
    fast = 0 if transposed else _fast_eligible(w, stride, dilation, g)
    return ((x[0] * numel(out_shape[2:]), cout // g, x[1] // g * kernel, g, fast, kernel, 0),)


@register_gemm_view([aten.convolution_backward])
def _conv_backward_view(grad_out, x, w, bias_sizes, stride, padding, dilation, transposed, output_padding,
                        groups, output_mask, *, out_shape=None, **kwargs) -> tuple[GemmView, ...]:
    """Data gradient (dgrad): m = N·in spatial, n = Cin/g, k = Cout/g·kernel. Weight gradient (wgrad):
    m = Cout/g, n = Cin/g·kernel, k = N·out spatial."""
    n, cin, cout = x[0], x[1], grad_out[1]
    g = max(1, int(groups))
    kernel = numel(w[2:])
    fast = 0 if transposed else _fast_eligible(w, stride, dilation, g)
    views = []
    if output_mask[0]:
        views.append((n * numel(x[2:]), cin // g, cout // g * kernel, g, fast, kernel, 0))
    if output_mask[1]:
        views.append((cout // g, cin // g * kernel, n * numel(grad_out[2:]), g, fast, 0, kernel))
    return tuple(views)


# The kernel model (rooflow.estimate.kernel_calibration) prices some calls from more than their GEMM views:
# a convolution by its full geometry (cuDNN's Winograd transforms tile the output; its algorithms depend on
# kernel size and stride), LayerNorm and softmax by rows × the length they reduce over (a warp or a block per
# row). Each such call gets a "call shape": a tuple of ints, () where the kernel model has no formula.
CALL_SHAPES: dict[Any, Callable[..., tuple[int, ...]]] = {}
register_call_shape = _registrar(CALL_SHAPES)


@register_call_shape([aten.convolution, aten._convolution])
def _conv_call(x, w, bias, stride=None, padding=None, dilation=None, transposed=False, output_padding=None,
               groups=1, *args, channels_last: int = 0, **kwargs) -> tuple[int, ...]:
    """(N, Cin, size, Cout, kernel, stride, padding) of a 2-D, square, ungrouped, undilated forward
    convolution on a square input — the single-op shapes measured (nn.Conv2d); (groups, channels_last) of a
    grouped 2-D one (:data:`LAYOUT_OPERANDS`: which kernels run it); () otherwise."""
    if int(groups) != 1:
        return (int(groups), int(channels_last)) if len(x) == 4 and not transposed else ()
    stride, padding, dilation = list(stride or [1, 1]), list(padding or [0, 0]), list(dilation or [1, 1])
    square = (len(x) == 4 and x[2] == x[3] and w[2] == w[3] and len(set(stride)) == 1 and len(set(padding)) == 1
              and set(dilation) == {1})
    if transposed or not square:
        return ()
    return (int(x[0]), int(x[1]), int(x[2]), int(w[0]), int(w[2]), int(stride[0]), int(padding[0]))


@register_call_shape([aten.convolution_backward])
def _conv_backward_call(grad_out, x, w, bias_sizes, stride, padding, dilation, transposed, output_padding, groups,
                        output_mask, channels_last: int = 0, **kwargs) -> tuple[int, ...]:
    """Its forward's call shape (:func:`_conv_call`): the geometry that decides cuDNN's kernels both ways."""
    return _conv_call(x, w, None, stride, padding, dilation, transposed, output_padding, groups,
                      channels_last=channels_last)


@register_call_shape([aten._trilinear])
def _trilinear_call(*args, **kwargs) -> tuple[int, ...]:
    """(slices, kernels a slice launches): a loop on the host, each kernel its own dispatch and launch
    (:func:`trilinear_slices`; rooflow.estimate.timemodel prices its host time and kernels so)."""
    return (trilinear_slices(*args, **kwargs)[0], TRILINEAR_SLICE_KERNELS)


@register_call_shape([aten.native_layer_norm])
def _layer_norm_call(x, normalized_shape, *args, **kwargs) -> tuple[int, ...]:
    """(rows, length): the rows normalised and the elements each reduces over."""
    length = numel(normalized_shape)
    return (numel(x) // max(1, length), length)


@register_call_shape([aten._softmax])
def _softmax_call(x, dim, *args, **kwargs) -> tuple[int, ...]:
    """(rows, length) of a softmax over the last dimension; () over another (other kernels)."""
    if dim not in (-1, len(x) - 1):
        return ()
    return (numel(x) // max(1, x[-1]), int(x[-1]))


# A depthwise or grouped convolution whose input or weight is channels_last runs cuDNN's kernels in every dtype
# ("always use cudnn_depthwise for channels_last format": ConvParams::use_cudnn_depthwise in
# aten/src/ATen/native/Convolution.cpp, through cudnn_conv_suggest_memory_format); otherwise PyTorch's own
# depthwise kernels (fp16 aside). ConvNeXt's blocks permute to NHWC for LayerNorm and back, so their
# depthwise 7×7 convolutions see channels_last inputs. The operands (positions) whose layout decides:
LAYOUT_OPERANDS = {aten.convolution: (0, 1), aten._convolution: (0, 1), aten.convolution_backward: (1, 2)}


# Operands a kernel copies to a contiguous tensor before it runs, where they are not (strides PyTorch calls neither
# contiguous nor channels_last): the interpolation backward kernels' grad_output (`grad_output_.contiguous()` in
# aten/src/ATen/native/cuda/UpSampleBilinear2d.cu and UpSampleNearest2d.cu, the CPU kernels alike). A sum-of-outputs
# loss hands a segmentation head's final upsample a stride-0 gradient: the copy writes all of it, the kernel reads
# it (rooflow.estimate.counter records the copy as the clone it is). The positions:
CONTIGUOUS_OPERANDS = {op: (0,) for op in (aten.upsample_bilinear2d_backward, aten.upsample_nearest2d_backward,
                                           aten._upsample_nearest_exact2d_backward,
                                           aten._upsample_bilinear2d_aa_backward, aten._upsample_bicubic2d_aa_backward)}


def copied_contiguous(t) -> bool:
    """Whether a kernel that needs ``t`` dense (:data:`CONTIGUOUS_OPERANDS`) copies it first: a tensor neither
    contiguous nor channels_last (a broadcast gradient, a transposed view)."""
    return (isinstance(t, torch.Tensor) and not t.is_contiguous()
            and not (t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last)))


def suggests_channels_last(t) -> bool:
    """Whether a 4-D tensor's strides make PyTorch suggest channels_last for it (Tensor.suggest_memory_format)."""
    return (isinstance(t, torch.Tensor) and t.dim() == 4
            and suggest_memory_format(t) is torch.channels_last)


def channels_last_operands(packet, args: tuple) -> bool:
    """Whether a convolution call (:data:`LAYOUT_OPERANDS`) has an operand PyTorch treats as channels_last."""
    return any(suggests_channels_last(args[i]) for i in LAYOUT_OPERANDS[packet] if i < len(args))


def call_shape(func, args: tuple, kwargs: dict) -> tuple[int, ...]:
    """The call shape of an aten call (:data:`CALL_SHAPES`), () where none is registered."""
    packet = getattr(func, "overloadpacket", func)
    shape = CALL_SHAPES.get(packet)
    if shape is None:
        return ()
    layout = {}
    if packet in LAYOUT_OPERANDS:
        layout["channels_last"] = int(channels_last_operands(packet, args))
    return shape(*shapes_of(args), **shapes_of(kwargs), **layout)


def format_gemms(gemms) -> str:
    """'25088x128x576x1' per matrix product (m x n x k x count), ';'-joined: the ops table's GEMM views."""
    return ";".join("x".join(str(d) for d in view) for view in gemms)


def parse_gemms(text) -> list[tuple[int, int, int, int, int, int, int]]:
    """The inverse of :func:`format_gemms` ('' or NaN: no product): (m, n, k, count, fast, k_taps, n_taps)
    each (:func:`gemm_views`), 0 where the view does not say."""
    if not isinstance(text, str) or not text:
        return []
    views = [tuple(int(d) for d in view.split("x")) for view in text.split(";")]
    return [view + (0,) * (7 - len(view)) for view in views]


def gemm_views(func, args: tuple, kwargs: dict, out) -> tuple[GemmView, ...]:
    """The GEMM views of a matmul-class aten call (() for any other op)."""
    view = GEMM_VIEWS.get(getattr(func, "overloadpacket", func))
    if view is None:
        return ()
    return tuple(tuple(int(d) for d in v) for v in view(*shapes_of(args), out_shape=shapes_of(out),
                                                         **shapes_of(kwargs)))
