"""Which kind of layer a GPU kernel belongs to, from its demangled name.

The classes answer "where does the time go by layer type": convolution, gemm (linear layers and the GEMMs
cuBLAS runs), elementwise (activations, adds, dropout), normalization, pooling, reduction (reductions,
softmax, losses), memory (copies, fills, layout transposes, memcpy/memset rows of a trace) and other.

Rules are tried in order, first match wins, on the name without its argument list (the template arguments
stay: ``vectorized_elementwise_kernel<4, ...batch_norm...>`` is normalisation work). The order matters:
memory first (``nchwToNhwcKernel<..., cudnnKernelDataType_t>`` is a layout copy although it names cuDNN),
normalisation and pooling before convolution (``cudnn::detail::bn_fw_tr_1C11_kernel_NCHW``,
``cudnn::detail::pooling_fw_4d_kernel``), convolution before gemm (``xmma_new::gemm::kernel<
xmma_new::implicit_gemm::fprop...>`` and ``implicit_convolve_sgemm`` are convolutions), gemm before
reduction (``splitKreduce_kernel`` finishes a split-K GEMM); cuDNN's softmax and activation kernels are
caught before the catch-all "cudnn" convolution rule.
"""

from __future__ import annotations

import re

KERNEL_CLASSES = ("convolution", "gemm", "elementwise", "normalization", "pooling", "reduction", "memory",
                  "other")

_RULES: list[tuple[str, re.Pattern[str]]] = [
    ("memory", re.compile(
        r"^\[cuda (memcpy|memset)|^\[cuda unified|memcpy|memset|nchwtonhwc|nhwctonchw|transpose|"
        r"copy_device_to_device|copy_kernel|batchedcopy|\bcopy|fillfunctor|fill_kernel")),
    ("normalization", re.compile(
        r"batch_?norm|layer_?norm|group_?norm|instance_?norm|\bbn_(fw|bw)|cudnn::bn_|::bn_fw|::bn_bw|"
        r"welford|rms_?norm")),
    ("pooling", re.compile(r"max_?pool|avg_?pool|average_pool|adaptive|pooling|maxpool")),
    # cuDNN's own softmax and activation/tensor-op kernels, before the "cudnn" convolution rule.
    ("reduction", re.compile(r"softmax")),
    ("elementwise", re.compile(r"cudnn::.*(activation_(fw|bw)|op_tensor|scale_tensor|add_tensor)")),
    ("convolution", re.compile(
        r"cudnn|xmma|implicit_gemm|implicit_convolve|winograd|fft|convol|conv2d|conv3d|dgrad|wgrad|fprop|"
        r"scudnn|cask|im2col|col2im|depthwise")),
    ("gemm", re.compile(r"cutlass|gemm|gemv|splitkreduce|cublas|matmul|_mma_|hmma")),
    ("reduction", re.compile(
        r"reduce|softmax|nll_?loss|nllcriterion|cross_?entropy|_sum_kernel|norm_kernel|argmax|argmin|"
        r"cumsum|scan_kernel|topk|sort")),
    ("elementwise", re.compile(
        r"elementwise|dropout|relu|threshold|activation|sigmoid|tanh|gelu|silu|functor|add_kernel|"
        r"mul_kernel|clamp|masked_scale|upsample|index")),
]


def _without_arguments(name: str) -> str:
    """``void f<T>(int, float)`` -> ``void f<T>``: drop the trailing argument list, parentheses balanced."""
    name = name.strip()
    if not name.endswith(")"):
        return name
    depth = 0
    for position in range(len(name) - 1, -1, -1):
        char = name[position]
        if char == ")":
            depth += 1
        elif char == "(":
            depth -= 1
            if depth == 0:
                return name[:position] if position > 0 else name
    return name


def classify_kernel(name: str) -> str:
    """One of :data:`KERNEL_CLASSES` for a demangled kernel name (or an nsys ``[CUDA memcpy ...]`` row).

    >>> classify_kernel("void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(...)")
    'convolution'
    >>> classify_kernel("ampere_sgemm_128x64_nt")
    'gemm'
    """
    if not isinstance(name, str) or not name.strip():
        return "other"
    key = _without_arguments(name).lower()
    for kernel_class, pattern in _RULES:
        if pattern.search(key):
            return kernel_class
    return "other"
