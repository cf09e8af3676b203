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
caught before the catch-all "cudnn" convolution rule. A name alone cannot tell cuDNN's non-fused Winograd/FFT
products from a linear layer's (both launch a plain ``volta_sgemm_64x64_nn``): :func:`classify_launches` classifies
a launch-ordered sequence, where the transforms around such a GEMM show whose it is.

What else a name says, for the reconciliation and the timed-vs-profiled comparison:
:func:`short_kernel_name` (a comparable name, the same whichever tool demangled it),
:func:`kernel_algorithm` (FFT, Winograd, implicit GEMM, GEMM, split-K, direct), :func:`kernel_tile`,
:func:`kernel_direction` (fprop/dgrad/wgrad) and :func:`uses_tensor_cores`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

KERNEL_CLASSES = ("convolution", "gemm", "elementwise", "normalization", "pooling", "reduction", "memory",
                  "other")

_RULES: list[tuple[str, re.Pattern[str]]] = [
    ("memory", re.compile(
        r"^\[cuda (memcpy|memset)|^\[cuda unified|memcpy|memset|nchwtonhwc|nhwctonchw|transpose|"
        r"copy_device_to_device|copy_kernel|batchedcopy|\bcopy|fillfunctor|fill_kernel")),
    ("normalization", re.compile(
        r"batch_?norm|layer_?norm|group_?norm|instance_?norm|\bbn_(fw|bw)|cudnn::bn_|::bn_fw|::bn_bw|"
        r"welford|rms_?norm|gammabetabackward")),  # LayerNorm backward's gamma/beta gradients
    ("pooling", re.compile(r"max_?pool|avg_?pool|average_pool|adaptive|pooling|maxpool")),
    # cuDNN's own softmax and activation/tensor-op kernels, before the "cudnn" convolution rule.
    ("reduction", re.compile(r"softmax")),
    ("elementwise", re.compile(r"cudnn::.*(activation_(fw|bw)|op_tensor|scale_tensor|add_tensor)")),
    ("convolution", re.compile(
        r"cudnn|xmma|implicit_gemm|implicit_convolve|winograd|fft|convol|conv2d|conv3d|dgrad|wgrad|fprop|"
        r"scudnn|cask|im2col|col2im|depthwise|pointwise_mult_and_sum_complex|flip_filter|scalepackedtensor|"
        # cuDNN's FFT weight gradient's complex products (ConvNeXt-T's depthwise 7×7 on the H200: 864 launches)
        r"region_transform_abc")),
    # cuBLASLt's epilogue kernel (ncu writes it cublasLt::globalKernel or epilogue::globalKernel); nvjet_*: cuBLAS's
    # Hopper GEMMs (nvjet_sm90_tst_192x192_..._TNN: ViT-B/16 bf16 on the H200, tests/data/real/gpu-2026-11-27)
    ("gemm", re.compile(r"cutlass|gemm|gemv|splitkreduce|cublas|matmul|_mma_|hmma|globalkernel|nvjet")),
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


# Kernels inductor (torch.compile) generates: Triton kernels named after the aten ops they fuse —
# ``triton_poi_`` pointwise, ``triton_red_``/``triton_per_`` reductions, ``triton_tem_`` GEMM/convolution
# templates (max-autotune). By default inductor leaves convolutions and GEMMs to cuDNN/cuBLAS, and a pointwise
# or reduction kernel named ``..._fused_convolution_relu_...`` is that convolution's epilogue (its bias and
# ReLU), not convolution work: the op words of the matmul it follows are not what the kernel computes.
_INDUCTOR = re.compile(r"^(?:void\s+)?triton_(?:(?P<kind>poi|red|per|tem)_)?")
_INDUCTOR_MATMUL_WORDS = re.compile(r"(?<=_)(?:convolution(?:_backward)?|addmm|baddbmm|bmm|mm)(?=_|$)")


def is_inductor_kernel(name: str) -> bool:
    """Whether a kernel is one inductor (torch.compile) generated: a Triton kernel named ``triton_*``."""
    return isinstance(name, str) and bool(_INDUCTOR.match(name.strip().lower()))


def _classify_inductor(key: str, kind: str | None) -> str:
    if kind == "tem":  # a Triton template: the GEMM or convolution itself
        return "convolution" if "convolution" in key else "gemm"
    key = _INDUCTOR_MATMUL_WORDS.sub("", key)
    for kernel_class, pattern in _RULES:
        if kernel_class not in ("convolution", "gemm") and pattern.search(key):
            return kernel_class
    return "reduction" if kind in ("red", "per") else "elementwise"


# Operand types a kernel's name shows: 16-bit (half, bf16, fp8/int8 tensor-core paths) and 32/64-bit ones
_SIXTEEN_BIT_TYPES = re.compile(r"half|f16|bfloat16|h884|h1688|h16816|hmma|fp8|e4m3|e5m2|int8", re.IGNORECASE)
_WIDE_FLOAT_TYPES = re.compile(r"float|f32|tf32|sgemm|scudnn|double|f64", re.IGNORECASE)


def only_wide_float_types(name: str) -> bool:
    """Whether a kernel's name shows 32- or 64-bit float operands and no 16-bit type: its "fp16" CUDA-core
    instructions (ncu's hfma/hadd/hmul counters) are then not half-precision arithmetic. In rooflow's H100 FP32
    and TF32 steps every fp16 count sat in such kernels — CUDAFunctor_add<float> at exactly 4.000x its fadd count
    (one HFMA2 per element), flip_filter<float, float> (a copy with no FP32 FLOP) at 57 MFLOP; in the bf16 step
    99.9% of it sat in kernels whose names show BFloat16."""
    return bool(_WIDE_FLOAT_TYPES.search(name)) and not _SIXTEEN_BIT_TYPES.search(name)


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
    inductor = _INDUCTOR.match(key.strip())
    if inductor:
        return _classify_inductor(key.strip(), inductor["kind"])
    for kernel_class, pattern in _RULES:
        if pattern.search(key):
            return kernel_class
    return "other"


# --------------------------------------------------------------------------------------------------
# What a kernel's name says: a short name for tables, its algorithm, its tile, its direction


# Classes whose kernels do the convolution/matmul work (their tensor-core and CUDA-core FLOPs are compared
# with the estimate's conv/matmul FLOPs), and classes of "glue" kernels (layout copies, fills, cuDNN's
# scaling and offset helpers) that sit between the kernels of one convolution without ending it.
# A torch.profiler Chrome trace's categories of GPU kernel events (kineto's, then the legacy profiler's)
TRACE_KERNEL_CATEGORIES = frozenset({"kernel", "Kernel"})
MATMUL_KERNEL_CLASSES = ("convolution", "gemm")
GLUE_KERNEL_CLASSES = ("memory", "other")

# Kernels named after a generic launcher whose template argument says what they compute.
_GENERIC = {"elementwise_kernel", "vectorized_elementwise_kernel", "unrolled_elementwise_kernel",
            "reduce_kernel", "multi_tensor_apply_kernel", "elementwise_kernel_with_index", "index_elementwise_kernel",
            "distribution_elementwise_grid_stride_kernel"}
# Identifiers inside template arguments that say nothing about the computation (types, namespaces,
# wrappers, demangler words); what is left first is the functor (CUDAFunctor_add, MeanOps, launch_clamp_scalar).
_NOISE = {"at", "native", "void", "float", "double", "half", "Half", "BFloat16", "int", "long", "char", "unsigned",
          "bool", "short", "std", "array", "Array", "true", "false", "detail", "unnamed", "anonymous", "namespace",
          "lambda", "instance", "operator", "const", "c10", "OffsetCalculator", "TensorIteratorBase",
          "TensorIterator", "Scalar", "func_wrapper_t", "gpu_kernel_impl_nocast", "gpu_kernel_impl", "ReduceOp",
          "memory", "LoadWithoutCast", "StoreWithoutCast", "TensorListMetadata", "BinaryFunctor", "BUnaryFunctor",
          "AUnaryFunctor", "UnaryFunctor", "binary_internal", "float2", "ul", "signed", "ClampLimits", "cuda",
          "vectorized_templated", "templates"}
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_TILE_XMMA = re.compile(r"tilesize(\d+)x(\d+)x(\d+)")
_TILE_CUTLASS = re.compile(r"(?:gemm|fprop|dgrad|wgrad)(?:_optimized)?(?:_\w+?)?_(\d+)x(\d+)_(\d+)x\d+(?:_|$)")
_TILE_LEGACY = re.compile(r"(?:sgemm|hgemm|dgemm|cgemm|s884gemm|h884gemm|s1688gemm|h1688gemm|scudnn|s884cudnn|"
                          r"h884cudnn|s1688cudnn|h1688cudnn)(?:_\w+?)?_(\d+)x(\d+)")
_GEMM_SHAPE = re.compile(r"GemmShape<\s*(\d+),\s*(\d+),\s*(\d+)\s*>|GemmShapeILi(\d+)ELi(\d+)ELi(\d+)E|"
                         r"Cta_tile<[\w:]+,\s*(\d+),\s*(\d+),\s*(\d+)")


def _top_template(text: str) -> tuple[str, str]:
    """``ns::f<a<b>, c>`` -> (``ns::f``, ``a<b>, c``); no template -> (text, "")."""
    start = text.find("<")
    if start < 0:
        return text, ""
    depth = 0
    for position in range(start, len(text)):
        if text[position] == "<":
            depth += 1
        elif text[position] == ">":
            depth -= 1
            if depth == 0:
                return text[:start], text[start + 1:position]
    return text[:start], text[start + 1:]


def _mangled_identifiers(name: str) -> list[str]:
    """The length-prefixed identifiers of an Itanium-mangled name (``_ZN17cutlass__5x_cudnn6Kernel...``);
    enough to name a kernel that a profiler left mangled, not a demangler."""
    out, position = [], 2
    while position < len(name):
        match = re.compile(r"(\d+)([A-Za-z_])").search(name, position)
        if not match:
            break
        length = int(match.group(1))
        start = match.start(2)
        if length and start + length <= len(name):
            out.append(name[start:start + length])
            position = start + length
        else:
            position = match.end()
    return out


def _conv_direction_word(text: str) -> str:
    match = re.search(r"Conv2d(Fprop|Dgrad|Wgrad)|\b(fprop|dgrad|wgrad)\b", text)
    return (match.group(1) or match.group(2)).lower() if match else ""


def short_kernel_name(name: str) -> str:
    """A short, comparable name: the kernel's own identifier without namespaces, template values or
    arguments — the cuBLAS/cuDNN/CUTLASS kernel name where a launcher wraps it
    (``cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>`` ->
    ``cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4``), the functor of PyTorch's generic launchers
    (``vectorized_elementwise_kernel<CUDAFunctor_add>``). Nsight Compute and CUPTI (torch.profiler)
    demangle differently (``at::<unnamed>`` vs ``at::native::(anonymous namespace)``, ``1`` vs ``true``),
    and CUPTI may leave a long name mangled; both give the same short name.

    >>> short_kernel_name("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    ...                   "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)")
    'vectorized_elementwise_kernel<CUDAFunctor_add>'
    """
    if not isinstance(name, str) or not name.strip():
        return ""
    text = name.strip()
    if text.startswith("_Z"):
        identifiers = _mangled_identifiers(text)
        if "ImplicitGemmConvolution" in identifiers:
            return _implicit_gemm_name(text)
        useful = [i for i in identifiers if i not in _NOISE and i not in {"Kernel", "Kernel2", "kernel"}]
        return useful[0] if useful else text[:60]
    text = _without_arguments(text)
    if text.startswith("void "):
        text = text[5:]
    # ncu writes anonymous namespaces as <unnamed>, CUPTI as (anonymous namespace): neither is part of a name.
    text = text.replace("<unnamed>::", "").replace("(anonymous namespace)::", "")
    if text.startswith("xmma_new::"):
        return _xmma_new_name(text)
    head, arguments = _top_template(text)
    base = head.split("::")[-1].strip() or head.strip()
    if base in {"Kernel", "Kernel2"} and arguments:
        if "ImplicitGemmConvolution" in arguments:
            return _implicit_gemm_name(arguments)
        if "ReduceSplitK" in arguments:
            return "cutlass_ReduceSplitK"
        # the kernel's own name, not a namespace (cutlass__5x_cudnn::...)
        inner = [m.group(0) for m in _IDENTIFIER.finditer(arguments) if not arguments.startswith("::", m.end())]
        named = [i for i in inner if i.startswith("cutlass_")]
        if named:
            return named[0]
        inner = [i for i in inner if i not in _NOISE]
        return f"{base}<{inner[0]}>" if inner else base
    if base in _GENERIC:
        functor = next((i for i in _IDENTIFIER.findall(arguments) if i not in _NOISE), "")
        return f"{base}<{functor}>" if functor else base
    return base


def _xmma_new_name(text: str) -> str:
    """cuDNN 8's ``xmma_new::gemm::kernel<xmma_new::implicit_gemm::fprop::Kernel_traits<
    xmma_new::Ampere_hmma_tf32_traits<...>, xmma_new::Cta_tile<xmma_new::Ampere, 256, 64, 32, ...>`` ->
    ``xmma_new_implicit_gemm_fprop_Ampere_hmma_tf32_256x64x32``."""
    kind = re.search(r"xmma_new::(implicit_gemm|gemm)::(?:(fprop|dgrad|wgrad\w*)::)?", text[10:])
    traits = re.search(r"xmma_new::(\w+?)_traits", text)
    tile = kernel_tile(text)
    parts = ["xmma_new"]
    if text.split("<", 1)[0].endswith("split_k_kernel"):
        parts.append("split_k")
    if kind:
        parts += [g for g in kind.groups() if g]
    if traits:
        parts.append(traits.group(1))
    if tile:
        parts.append("x".join(str(d) for d in tile if d))
    return "_".join(parts)


def _implicit_gemm_name(text: str) -> str:
    shape = _GEMM_SHAPE.search(text)
    dims = [g for g in (shape.groups() if shape else ()) if g]
    direction = _conv_direction_word(text) or "conv"
    return f"cutlass_ImplicitGemmConvolution_{direction}" + (f"_{'x'.join(dims[:3])}" if dims else "")


def abbreviate_kernel_name(name: str, width: int = 70) -> str:
    """A short name cut to ``width`` characters for a sentence, keeping the tile where the name has one:
    ``sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_…tilesize256x64x32``."""
    if len(name) <= width:
        return name
    tile = re.search(r"tilesize\d+x\d+x\d+", name)
    if tile:
        return f"{name[:width - len(tile.group(0)) - 1].rstrip('_')}…{tile.group(0)}"
    return name[:width - 1] + "…"


def kernel_algorithm(name: str) -> str | None:
    """The convolution/GEMM algorithm a kernel name shows, or None where it shows none:

    - ``fft``: cuDNN's FFT convolution (``fft2d_r2c_*``/``fft2d_c2r_*`` transforms, the complex ``cf32``/cgemm
      products, ``pointwise_mult_and_sum_complex``, ``flip_filter``);
    - ``winograd``: Winograd convolution (fused ``*winograd*`` kernels and the non-fused transforms);
    - ``split-k``: a split-K GEMM or its reduction (``splitKreduce``, ``split_k``, ``ReduceSplitK``,
      ``segment_k_on``) — extra partial sums, few FLOPs;
    - ``implicit-gemm``: an implicit-GEMM convolution (``implicit_gemm``, ``implicit_convolve_sgemm``,
      ``ImplicitGemmConvolution``, CUTLASS ``fprop``/``dgrad``/``wgrad``, cuDNN's ``*_engine`` kernels,
      ``scudnn``);
    - ``gemm``: an explicit GEMM (cuBLAS/cuBLASLt/CUTLASS ``gemm``, ``sgemm``);
    - ``direct``: a direct convolution (PyTorch's ``conv_depthwise2d_*``).
    """
    text = short_kernel_name(name).lower() + " " + str(name).lower()[:400]
    if re.search(r"fft|cf32|cgemm|_complex|flip_filter", text):
        return "fft"
    if "winograd" in text:
        return "winograd"
    if re.search(r"splitk|split_k|segment_k_on", text):
        return "split-k"
    if re.search(r"implicit_gemm|implicit_convolve|implicitgemm|_engine\b|_engine<|scudnn|s884cudnn|h884cudnn|"
                 r"s1688cudnn|h1688cudnn|(fprop|dgrad|wgrad)_optimized|cutlass_\w*(fprop|dgrad|wgrad)", text):
        return "implicit-gemm"
    if re.search(r"gemm|gemv|cublas", text):
        return "gemm"
    if "depthwise" in text or "conv2d" in text:
        return "direct"
    return None


# Convolution algorithms that cuDNN runs as transforms around a GEMM of the transformed tensors (kernel_algorithm)
FAST_CONVOLUTION_ALGORITHMS = ("winograd", "fft")


def classify_launches(names: Sequence[str]) -> list[str]:
    """:func:`classify_kernel` of each kernel of one launch-ordered sequence (a trace, an ncu profile by ID), with
    what the order shows: the GEMMs of cuDNN's non-fused Winograd and FFT convolutions run as plain cuBLAS-named
    SGEMMs between that convolution's transforms (the default config's V100 VGG11 trace: winogradForwardData4x4,
    winogradForwardFilter4x4, volta_sgemm_64x64_nn, winogradForwardOutput4x4; 21 such GEMMs, 16.3 ms of its
    39.6 ms of kernels) and are that convolution's work, not a linear layer's: a run of "gemm" kernels (glue
    between them allowed) whose nearest other kernels on both sides are such transforms is "convolution"."""
    names = list(names)
    distinct = {name: index for index, name in enumerate(dict.fromkeys(names))}
    codes = np.fromiter((distinct[name] for name in names), dtype=np.int64, count=len(names))
    classes, class_codes = launch_class_codes(list(distinct), codes)
    return [classes[code] for code in class_codes]


def launch_class_codes(categories: Sequence[str], codes: np.ndarray) -> tuple[list[str], np.ndarray]:
    """:func:`classify_launches` of launches given as ``codes`` into their distinct names (``categories``), in
    launch order: the class names and each launch's code into them (a profile of a million kernels is
    classified once per distinct name, with no string per kernel)."""
    classes = [classify_kernel(name) for name in categories]
    dictionary = list(dict.fromkeys([*classes, "convolution", "other"]))
    # a code of -1 (a launch without a name: pandas' missing category) reads the last entry: "other"
    of_category = np.array([dictionary.index(c) for c in [*classes, "other"]], dtype=np.int64)
    fast_category = np.array([isinstance(name, str) and kernel_algorithm(name) in FAST_CONVOLUTION_ALGORITHMS
                              for name in categories] + [False], dtype=bool)
    class_codes = of_category[codes]
    code_of = {name: dictionary.index(name) for name in dictionary}
    glue = np.isin(class_codes, [code_of[c] for c in GLUE_KERNEL_CLASSES if c in code_of])
    gemm = class_codes == code_of.get("gemm", -1)
    convolution = class_codes == code_of["convolution"]
    class_codes[fast_convolution_gemms(gemm, glue, fast_category[codes] & convolution)] = code_of["convolution"]
    return dictionary, class_codes


def fast_convolution_gemms(gemm: np.ndarray, glue: np.ndarray, fast: np.ndarray) -> np.ndarray:
    """Per launch (in launch order): a ``gemm`` kernel whose nearest kernels on both sides that are neither GEMMs
    nor ``glue`` are ``fast`` (a Winograd/FFT convolution's transforms): :func:`classify_launches`."""
    count = len(gemm)
    position = np.arange(count)
    bound = ~gemm & ~glue
    before = np.maximum.accumulate(np.where(bound, position, -1)) if count else position
    after = np.minimum.accumulate(np.where(bound, position, count)[::-1])[::-1] if count else position
    fast_bound = np.append(fast & bound, False)  # index -1 (none before) and count (none after): the False
    return gemm & fast_bound[before] & fast_bound[after]


def kernel_tile(name: str) -> tuple[int, int, int | None] | None:
    """The thread-block tile (M, N, K step) a kernel name gives, K None where the name has only M×N:
    ``tilesize256x64x32`` (xmma), ``s1688gemm_128x128_32x3`` and ``fprop_optimized_tf32_256x64_16x4``
    (CUTLASS: M×N, then K × stages), ``sgemm_64x32_sliced1x4`` (cuBLAS), ``GemmShape<64, 128, 16>``."""
    text = str(name)
    for pattern in (_TILE_XMMA, _GEMM_SHAPE):
        match = pattern.search(text)
        if match:
            dims = [int(g) for g in match.groups() if g]
            return dims[0], dims[1], dims[2]
    short = short_kernel_name(text)
    match = _TILE_CUTLASS.search(short)
    if match:
        return int(match.group(1)), int(match.group(2)), int(match.group(3))
    match = _TILE_LEGACY.search(short)
    if match:
        return int(match.group(1)), int(match.group(2)), None
    return None


def kernel_direction(name: str) -> str | None:
    """``fprop``, ``dgrad`` (input gradient) or ``wgrad`` (weight gradient) where a convolution kernel's name
    says so."""
    text = str(name)
    word = _conv_direction_word(text)
    if word:
        return word
    lowered = text.lower()
    if re.search(r"wgrad|grad_weight", lowered):
        return "wgrad"
    if re.search(r"dgrad|depthwise2d_backward", lowered):
        return "dgrad"
    if re.search(r"fprop|depthwise2d_forward", lowered):
        return "fprop"
    return None


def uses_tensor_cores(name: str) -> bool:
    """Whether a kernel name says it runs on tensor cores: CUTLASS ``tensorop``, HMMA (``hmma``, ``884``,
    ``1688``), xmma kernels with a TF32/FP16/BF16 operand type, ``warpgroup`` (sm_90 wgmma)."""
    text = str(name).lower()
    return bool(re.search(r"tensorop|hmma|imma|s884|h884|s1688|h1688|s16816|h16816|warpgroup|wgmma|"
                          r"tensor16x8|_tf32|tf32f32|bf16f32|f16f32|f16f16", text))
