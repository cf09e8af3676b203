"""Predicted step time on a device: a model of the hardware, per op, with the host in the loop.

Every row of an estimate's ops table (one layer × phase × aten op × GEMM shape, ``calls`` of it) becomes
device work and host work:

- **Device work** of one call: ``max(compute, memory, kernels × kernel_seconds) + layout + epilogue``.
  *compute* — for convolutions and matrix products, each GEMM view (m × n × k, ``formulas.gemm_views``) at
  the measured peak of its path (TF32/FP16/BF16 tensor cores, or FP32 FMA), divided by a shape factor that
  is a property of the GPU, not of a model — **tile padding** (outputs are computed in whole tiles), **GPU
  fill** (fewer tiles than SMs leave SMs idle; split-K where it pays) and the **mainloop fill**
  ``k / (k + gemm_fill_k)`` — and by the path's calibrated efficiency. FP32 convolutions that Winograd or FFT
  can run (3×3 and larger, stride 1, not grouped) have their own efficiency: cuDNN's autotuner picks those
  algorithms, which do fewer multiplications than the direct count (it can exceed 1).
  *memory* — the op's eager bytes (every aten op reads its inputs and writes its outputs) at the measured
  DRAM bandwidth times the efficiency kernels of its class reach (BatchNorm in training reads its input
  more than once, max-pool backward scatters: each class has its own number). Elementwise ops and copies
  that PyTorch cannot vectorise (a broadcast, mixed dtypes, a strided input: ``indexed_elementwise``) have
  their own efficiency and follow elements (16-bit at 4-byte prices); a calibration scaled from a GPU of
  fewer bytes per SM cycle holds every memory-bound kernel to that GPU's rate per SM except the vectorised
  elementwise and copy kernels, which stream at this device's bandwidth.
  *layout* — tensor-core convolutions on NCHW tensors pay cuDNN's NCHW ↔ NHWC transposes, separate kernels
  (``layout_bytes_per_byte`` of the direction × the convolution's activation bytes at the bandwidth,
  ``layout_bytes``; each kernel's fixed part; a filter of more than one tap at its own, SM-bound rate:
  ``transpose_kernel_seconds``), but the 1×1 ones cuDNN runs as GEMMs on the NCHW tensors (``transposes``).
  *epilogue* — a convolution with a bias adds it in a separate elementwise kernel (cuDNN path of
  ``aten::_convolution``): it reads and writes the output once more, in an indexing kernel (16-bit at the
  time of 4-byte elements: ``INDEXED_ELEMENT_BYTES``).
  *kernels* — no kernel takes less than ``kernel_seconds``.
  *16-bit BatchNorm* (GPU, training) — at the time of the same work on fp32 elements
  (``NATIVE_NORMALIZATION_OPS``); bf16 runs PyTorch's own kernels, not cuDNN, and takes at least the time
  one block needs to walk its channel (one block per channel: rooflow.estimate.batchnorm). Its forward, in
  inference too, at least the cycles of its normalising pass's blocks, one per (sample, channel) plane.
  *cuBLAS GEMMs* (mm, addmm, bmm on a GPU) run at the measured GEMM ceiling (a cuBLAS GEMM itself) times
  their shape factor (``gemm_efficiency``, 1 unless measured); cuDNN's convolutions at ``matmul_efficiency``.
  *attention* (GPU) — PyTorch's fused SDPA kernel, not the math decomposition the estimate counts
  (rooflow.estimate.attention): its products at the kernel's path, the score matrix kept on chip, the
  softmax, scaling and casts inside it.
  *depthwise* — memory-bound kernels, forward and backward (``depthwise_backward``) each with its
  efficiency; PyTorch's native kernels (bf16; fp16 where cuDNN is not chosen) at the time of fp32 work. On a
  channels_last input (ConvNeXt's) cuDNN's kernels in every dtype, each way at its own efficiency
  (``depthwise_channels_last_efficiency``; a 16-bit backward at the native kernels' price).
  *cache* — an op whose bytes fit in half the last-level cache moves them at the cache's speed (the class's
  cache-resident efficiency, where the calibration measured one: a CPU's small activations).
  *page faults* (CPU) — a tensor of 32 MiB or more is freshly mapped at each allocation (glibc), so an op
  creating one pays a page fault per page (AlexNet's classifier gradients and optimizer temporaries).
- **Host work** of one call: dispatching the op from Python and launching its kernels
  (``host_op_seconds``), more for cuDNN/cuBLAS calls (``host_library_seconds``) and for ops autograd
  records in training (``host_autograd_seconds``); ``host_module_seconds`` per nn.Module call; backward ops
  run by the autograd engine (``host_backward_op_seconds``); ``torch.optim.SGD``'s foreach path (a few calls
  over tensor lists). fp16 training adds GradScaler's unscale pass over the gradients and its host read of
  ``found_inf`` (a synchronisation).
- **Together**: the host issues ops in order; the device runs each when the host has issued it and the
  previous one finished; the step ends when the last kernel ends (rooflow's timing loop starts every step on
  an idle GPU). A small step is bound by the host, a large one by the GPU. Back to back, each kernel waits
  ``kernel_gap_seconds`` after the previous one (the GPU's front end starting it: a timed step's time less its
  recorded kernels' sum); a kernel that waits for the host hides it. On a CPU the host IS the device: the
  times add.

The constants are a :class:`Calibration`: measured on the device (``rooflow calibrate``, stored beside its
ceilings), shipped (rooflow/data/calibration/), or scaled from a shipped one by datasheet ratios — the
prediction then says so (``calibration_source``) and widens its range.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import pandas as pd

from rooflow.conventions import MATMUL_OP_CLASSES, PAGE_FAULT_PART, PHASE_LAYER_TYPES
from rooflow.estimate import attention, batchnorm, dropout, kernel_calibration, kernel_ops, recurrent
from rooflow.estimate.core import parse_call, parse_gemms
from rooflow.estimate.formulas import ELEMENT_BYTES, runs_as_gemm

# A CPU matrix product priced at the calibration's small_rows_efficiency for its rows (its key in the compute terms).
SMALL_ROWS_PATH = "fp32_small_rows"
# The rows (m) at which the CPU calibration times a matrix product of few rows: up to where the BLAS's small-m
# kernels give way to its blocked GEMM.
SMALL_ROWS = (1, 2, 4, 8, 16, 32, 64, 128)

# The timing job marks a training step's clock after the loss, the backward and the optimizer
# (rooflow.measure.timing.Runner.step): its "forward" phase holds the loss.
TIMED_PHASES = {"loss": "forward"}

# Ops that call cuDNN/cuBLAS (host: descriptors, heuristics and plan-cache lookups).
LIBRARY_OPS = {"convolution", "_convolution", "convolution_backward", "mm", "addmm", "bmm", "baddbmm",
               "native_batch_norm", "native_batch_norm_backward", "cudnn_batch_norm",
               "cudnn_batch_norm_backward", "_native_batch_norm_legit_no_training",
               "_native_batch_norm_legit_functional", *recurrent.DISPATCH_OPS.values()}
# ops that launch no kernel of their own (cuDNN's RNN calls: their kernels are rows of their own, recurrent.substitute)
NO_KERNEL_OPS = {"empty", "empty_like", "empty_strided", "detach", "t", "view", "expand",
                 *recurrent.DISPATCH_OPS.values()}
TRAINING_SENSITIVE = ("normalization", "pooling")  # kernels that differ between training and inference
PATHS = ("fp32", "fp32_fast", "tf32", "fp16", "bf16")
# modules whose step the estimate counts as per-timestep cell ops (the meta device's decomposition of aten::lstm
# and kin), while PyTorch runs them as fused RNN kernels (cuDNN's: rooflow.estimate.recurrent; oneDNN's)
RECURRENT_MODULES = recurrent.MODULES
# The GEMM ceiling times square products of 2048 and more: cuBLAS GEMMs whose output fills whole tiles in
# both dimensions run its kernels; thinner ones (a linear layer at a small batch: GEMV-like kernels, split-K)
# keep the efficiency the recordings give (matmul_efficiency).
GEMM_CEILING_MIN_ROWS = 128
GEMM_PREFIX = "gemm_"  # compute paths of cuBLAS GEMMs on a GPU: gemm_fp32, gemm_tf32, gemm_bf16, ...
# cuDNN's tensor-core convolutions by direction: the forward ones run its fprop kernels, the backward ones its
# dgrad/wgrad kernels (their names in the H100 recordings), at efficiencies of their own where a calibration has
# them ("tf32_forward", "tf32_backward"), else their path's ("tf32": both directions together)
DIRECTIONS = ("_forward", "_backward")

# BatchNorm on bf16 activations never runs cuDNN on a GPU: PyTorch's backend choice
# (_select_batch_norm_backend, aten/src/ATen/native/Normalization.cpp) excludes bf16, while fp16 with fp32
# weights (autocast) gets cuDNN. In training both take the time of the same work on 4-byte elements: their
# NCHW training kernels (a block per channel, one element per thread per step; cuDNN's 1C11 kernels reach
# 39% of the bandwidth in fp32) follow elements, not bytes; the native ones are moreover limited by one
# block per channel (rooflow.estimate.batchnorm). H100 sweep: ResNet-50 b256 training 114.7 ms in bf16,
# 96.3 ms in fp16, 138 ms in TF32; where BN does not train (inference; VGG) bf16 and fp16 match within 4%.
NATIVE_NORMALIZATION_OPS = ("native_batch_norm", "native_batch_norm_backward")
NATIVE_NORMALIZATION_ELEMENT_BYTES = 4.0
# PyTorch's elementwise ops (TensorIterator) run the vectorised kernel (``vectorized_elementwise_kernel``) only
# when every operand is contiguous, of one dtype and of the output's shape; a broadcast operand (a convolution's
# bias, a layer scale), mixed dtypes (autocast's bf16 + fp32 residual adds) or a strided input (``contiguous()``
# of a permuted tensor: an ``aten::clone``) send it to ``elementwise_kernel`` / ``unrolled_elementwise_kernel``,
# which index each element. Those are priced apart (efficiency class ``elementwise_indexed``), and their rate
# follows elements, not bytes: a 16-bit one takes the time of a 4-byte one. H200 traces
# (tests/data/real/gpu-2026-11-27): VGG16 b256 inference's 13 bias adds took 10.45 ms in bf16 and 10.83 ms in
# fp32, SqueezeNet's 26 2.00 ms in bf16 (inference) and 2.07 ms in fp32 (training); ViT-B/16 bf16 inference's
# indexed adds and copies ran at 2.0-2.5 TB/s, its vectorised GELU at 3.0, ResNet-50's vectorised ReLU at 4.24.
INDEXED_ELEMENT_BYTES = 4.0
INDEXED_SUFFIX = "_indexed"
# A convolution's bias gradient on a GPU is its own kernel: PyTorch's cuDNN path sums the output gradient over
# N·H·W per channel with at::sum (reduce_kernel, inside aten::convolution_backward), reading every element once
# more. The H200's traces (tests/data/real/gpu-2026-11-27): SqueezeNet's 26 in bf16 and in fp32 training took the
# same 1.31 ms (1.97 ps per element: elements, not bytes), VGG16's 13 in bf16 5.27 ms (1.52 ps): priced as
# indexing elementwise work on 4-byte elements (1.73 ps per element there), under the part "reduction".
BIAS_GRADIENT_PART = "reduction"
# Ops that draw a random number per element (a dropout mask: bernoulli_ on the meta device's and a CPU's path,
# native_dropout on a GPU's). A CPU draws them one element at a time, far under its bandwidth: 7.8-13 ns per
# element on this project's 2-core machine, where an add moves one in 0.1-0.7 ns, and a Transformer's training
# step spent 11.4 ms in its dropouts against 1.0 ms priced at the elementwise rate. Where the calibration timed a
# generator (``memory_efficiency_by_class["random"]``: rooflow.ceilings.calibrate's "random" microbenchmark, a
# bernoulli_ per element) they are priced at that rate; else as any elementwise op.
RANDOM_OPS = ("bernoulli_", "bernoulli", "native_dropout", "uniform_", "normal_")
RANDOM_CLASS = "random"
# A CPU's in-place elementwise ops (aten's trailing underscore: relu_, hardtanh_, add_, mul_) touch one tensor's
# lines where an out-of-place op writes a second one (read for ownership, then written): per byte counted they
# ran 1.5-2.8x the out-of-place rate in cache on a 2-core Xeon (ReLU, 1.6-19 MB). Measured by the calibration's
# in-place ReLU where it ran (rooflow.ceilings.calibrate); else the elementwise class's.
INPLACE_CLASS = "elementwise_inplace"
# A sum over dimensions (a linear layer's bias gradient over its rows, a layer scale's over N·H·W) runs PyTorch's
# reduce_kernel, not the vectorised elementwise one: the H200's ViT-B/16 training traces summed its linear layers' bias
# gradients at 2.37 TB/s in fp32 (7.09 ms) and in bf16 (3.54 ms) alike — bytes, at the rate the SMs hold (the
# H100's per SM), which the indexing kernels' efficiency prices (2.31 TB/s there); streamed at the H200's own
# bandwidth as vectorised work they were predicted at half their time.
REDUCTION_OPS = ("sum",)
BINARY_ELEMENTWISE_OPS = frozenset({"add", "add_", "sub", "sub_", "rsub", "mul", "mul_", "div", "div_", "where",
                                    "masked_fill", "masked_fill_", "maximum", "minimum", "pow", "pow_"})
# A cuBLAS GEMM of a backward pass whose reduction is longer than both its output's sides is a weight gradient
# (a Linear's: m × n = out × in, k = the batch's tokens); cuBLAS runs those with other kernels ("nt" layouts)
# than the forward and input-gradient products: path gemm_<path>_wgrad, its own efficiency (1 where absent)
WGRAD_SUFFIX = "_wgrad"
# cuBLAS GEMMs whose output tiles run in rounds over the SMs, so a GEMM of a few rounds runs its last one partly
# empty (tests/data/real/gpu-2026-11-27, the H200's kernels). FP32 (FFMA) GEMMs launch one block per tile:
# ConvNeXt-T's nn.Linear calls launched sm80_xmma_gemm_f32f32_…_ffma grids of 392 × 12, 98 × 24 and 196 × 6 blocks.
# TF32 GEMMs on Hopper are persistent (sm90_xmma_gemm grids of 66 × 2 and 132 × 1, one block per SM), but every
# forward and input-gradient one ("tn", "nn") runs "segment_k_off": no stream-K, so each block takes the tile one
# grid further on in turn (CUTLASS's sm90 persistent tile scheduler) and 147 tiles on 132 blocks still take two
# rounds; only weight-gradient ("nt") kernels run "segment_k_on", splitting k to even the SMs out — a weight gradient
# keeps its own efficiency, read with the whole-GPU occupancy (GEMM_EFFICIENCY). 16-bit GEMMs keep the even pricing:
# no trace here shows their nn.Linear kernels (benchmarks/README.md, "TF32 GEMMs on Hopper take their tiles in rounds").
WAVE_PATHS = (GEMM_PREFIX + "fp32", GEMM_PREFIX + "tf32")
# Calibration.gemm_efficiency's default (its comment says where it was read)
GEMM_EFFICIENCY = {"bf16_wgrad": 1.01, "fp32_wgrad": 1.02, "tf32_wgrad": 0.42}
# Calibration.attention_efficiency's default (its comment says where it was read)
ATTENTION_EFFICIENCY = {"efficient_backward": 0.39, "efficient_forward": 0.41, "flash_backward": 0.52,
                        "flash_forward": 0.62}
# Depthwise convolutions run cuDNN only for fp16 (use_cudnn_depthwise, aten/src/ATen/native/Convolution.cpp);
# fp32 and bf16 run PyTorch's conv_depthwise2d kernels (one output element per thread, the taps loaded one by
# one, fp32 accumulation), whose time follows elements: bf16 takes the time of the same work in fp32.
# fp16 runs cuDNN for square 3×3/5×5 filters of 32 channels or more at stride 1 (at stride 2 and a batch
# above 16 only for wide layers: left to the native kernels here).
# cuDNN's FP32 (FFMA) forward convolutions tile at least 128 output pixels and never split their reduction: the
# H100 recordings at batch 64 ran "sm80_xmma_fprop_implicit_gemm_f32f32_..._tilesize256x64x8" for every forward
# convolution that was not an FFT one (ResNet-50's 3×3 layers of 256 and 512 channels and VGG16's of 256 and 512
# ran fft2d_r2c/cf32 GEMM/fft2d_c2r kernels instead), none a split-K kernel; at batch 16 (ResNet-18, NVTX
# recording) 256×64, 128×32 and 32×32 tiles, no FFT; the public single-op data set's Pascal-to-Ampere FP32
# convolutions tile 128 pixels by 128, 64 or 32 channels and none of 20,000 splits k
# (rooflow.estimate.kernel_calibration). A layer of few pixels (batch 32 and less, late stages) then fills few SMs.
# Tile quality by the calibration's rule (outputs per operand element: 256×64 between 128×64 and 128×128, 128×32
# between 32×32 and 64×64).
FP32_FPROP_TILES = ((256, 64, 0.9), (128, 128, 0.95), (128, 64, 0.85), (128, 32, 0.6))

# Which FP32 convolutions cuDNN runs with a fast algorithm (FFT, Winograd) is its heuristics' pick. rooflow's
# H100 recordings show, for forward layers of that shape (stride 1, 3×3 or more): FFT for 256 and 512 input
# channels at batch 64 (ResNet-50, VGG16), implicit GEMM for 3–128 channels at batch 64 and for every layer
# (64–512 channels) at batch 16 (ResNet-18, NVTX recording). One rule holds all of them: FFT where batch × input
# channels reaches 64 × 256 (FAST_PATH_MIN_BATCH_CHANNELS; FFT's frequency-domain products are GEMMs of batch
# rows over the input channels). The calibration's ``fp32_fast`` efficiency is what the eligible layers of its
# batch-64 recordings reached together, FFT and implicit GEMM alike, so from batch 64 up (and below batch 16,
# which no recording covers) every eligible layer keeps that price. From batch 16 to 63 a layer under the rule's
# product is priced as the implicit GEMM it ran at both ends (``fp32``: ResNet-18 b16's forward convolutions
# then come within 4% of their recorded time, where they were 1.6× the fast path's price). Where an eligible
# layer keeps the fast path at a batch and channel count no recording showed it for, the high end of its range
# holds it at the implicit GEMM's rate and the source says so (benchmarks/README.md, "FP32 at batch 32").
FAST_PATH_SEEN_BATCH = 64  # the least batch at which a recording showed cuDNN's FFT forward kernels
FAST_PATH_SEEN_CHANNELS = 256  # the least input channels of those layers
FAST_PATH_MIN_BATCH_CHANNELS = FAST_PATH_SEEN_BATCH * FAST_PATH_SEEN_CHANNELS
# cuDNN runs a 1×1 stride-1 convolution as a GEMM on the NCHW tensors, without layout transposes, from this many
# output positions per image (14×14); below (7×7), as an implicit GEMM on transposed NHWC copies (transposes())
NCHW_GEMM_MIN_POSITIONS = 196
# The precisions whose tensor-core convolutions no recording of the calibration's device measured take TF32's
# forward efficiency both ways. The H200's traces (tests/data/real/gpu-2026-11-27) of compute-bound convolutions
# against the model at efficiency 1: VGG16 b256 bf16 forward 1.04 and backward 1.13, ResNet-50 b256 TF32 3×3 of 128
# channels or more forward 1.04 and backward 0.86 — 16-bit ones run at TF32's forward rate, also backward, where
# TF32's backward kernels are slower (as cuBLAS's TF32 weight gradients: GEMM_EFFICIENCY).
SIXTEEN_BIT_PATHS = ("fp16", "bf16")
# cuDNN's layout transposes in the H200's b256 inference traces (tests/data/real/gpu-2026-11-27), each convolution's
# input nchwToNhwcKernel: of 8 MB or more, 16-bit tensors moved at 2.15 TB/s (read + write, the median of 71), 4-byte
# ones at 3.52 (79): a 16-bit byte costs LAYOUT_16_BIT_BYTE_COST 4-byte bytes. An input of 3 channels (the stem's
# image) moved 68 G elements/s in TF32 and 67 in bf16, against 440 for wider 4-byte ones: NARROW_TRANSPOSE_COST
# times a 4-byte byte's time per 4-byte element.
LAYOUT_16_BIT_BYTE_COST = 1.63
NARROW_CHANNELS = 8
NARROW_TRANSPOSE_COST = 6.5
# cuDNN transposes a filter of more than one tap (KCRS -> KRSC) in a kernel of its own: once per forward call, and
# per backward view (the filter for the input gradient, the weight gradient back to KCRS); a 1×1 filter is the same
# bytes both ways. Its time follows elements, whatever the dtype, and not the bandwidth: in the H200's TF32 and
# bf16 traces (tests/data/real/gpu-2026-11-27, 158 forward filters) 2.36 M elements took 14.3–15.6 µs (0.3–0.6 TB/s
# where the activations' transposes moved 2–3.5), 0.59 M 4.8–5.2, 0.04 M 2.3: TRANSPOSE_KERNEL_SECONDS plus the
# elements at FILTER_TRANSPOSE_ELEMENTS_PER_SM_CYCLE (least squares over them; 180 G elements/s on the H200's 132
# SMs at 1.98 GHz). Batch does not change it, so at a small batch it is much of a late layer's transposes (ResNet-18
# b32 bf16 on the H100: its 512-channel 3×3 filters' 13.9 µs against 5 µs for the input's). The fixed part is the
# transpose kernel's own, so the activations' two transposes take it too beside their bytes.
TRANSPOSE_KERNEL_SECONDS = 1.87e-6
FILTER_TRANSPOSE_ELEMENTS_PER_SM_CYCLE = 0.69
DIRECT_PATH_SEEN_BATCH = 16  # the least batch of a recording (every forward layer on implicit GEMM)

NATIVE_DEPTHWISE_PRECISIONS = ("bf16",)
# A depthwise convolution on a channels_last input runs cuDNN's kernels in every dtype (formulas.LAYOUT_OPERANDS:
# ConvNeXt's). Their time, as measured in ConvNeXt-Tiny's steps on the H100 and the H200: the forward follows
# elements (bf16 took as long as fp32: 8.8 and 7.5 ms over the native price at batch 256 on the H100); the fp32
# and TF32 backward took 106–113 ms over the native price (H100; 84–92 on the H200), the bf16 backward none, so a
# 16-bit backward takes the native kernels' price (4-byte elements). Not settled without a trace: the same
# signature would come from the blocks' Linear weight-gradient GEMMs (k = N·H·W, 3–144 output tiles) if cuBLAS
# split them along k in bf16 only; the excess is put on the depthwise convolutions, whose kernels the layout
# demonstrably changes (benchmarks/README.md, "step time against the GPU sweeps").
# Efficiencies of the bandwidth on 4-byte elements (Calibration.depthwise_channels_last_efficiency).
DEPTHWISE_CHANNELS_LAST_FORWARD = 0.1068
DEPTHWISE_CHANNELS_LAST_BACKWARD = 0.0156
CUDNN_DEPTHWISE_TAPS = (9, 25)
CUDNN_DEPTHWISE_MIN_CHANNELS = 32
# A host-bound step's time is its host's, and a host's speed moves between runs of the same work: in rooflow's
# sweeps an FP32 run and its TF32 twin (the same ops and host calls: TF32 changes only the kernels) measured
# 0.63-1.96x apart where both were host-bound — a per-run scatter (log) of 0.22 on the H100's host (16 pairs) and
# 0.16 on the H200's (9): 0.20 together (tests/estimate/test_sweep_7_models.py recomputes it). So a host-bound
# prediction's range adds that scatter, at HOST_RANGE_Z (a 90% range), to its calibration's, in quadrature.
HOST_RUN_SCATTER = 0.20
# bf16 torch.mm on GPUs without bf16 units, over the same board's FP32 rate, measured by others
# (github.com/zzc0721/torch-performance-test-data, database.md, best of n = 1024 ... 10240; 16 rows): T4 0.46,
# 0.51 and 0.59, P40 0.52, GTX 1080 Ti 0.53, M40 0.54, GeForce Turing 0.54-0.72, P4 0.57, P100 0.71, V100 0.73-0.74.
# Such a run's products are priced at the FP32 run's time, a lower bound; its range's high end adds them at the
# slowest of these rates
EMULATED_BF16_OF_FP32 = (0.46, 0.74)
HOST_PAIRS_APART = (0.63, 1.96)  # the least and the most TF32/FP32 measured ratio of those pairs
HOST_RANGE_Z = 1.645


def step_spread(spread: float, bound: str) -> float:
    """The relative half-width of a step prediction's range: its calibration's ``spread``, and for a step the host
    binds (``bound`` "host") the host's run-to-run scatter with it (:data:`HOST_RUN_SCATTER`)."""
    return math.hypot(spread, HOST_RANGE_Z * HOST_RUN_SCATTER) if bound == "host" else spread


def host_scatter_words() -> str:
    """The evidence for a host-bound step's wider range, in words (the calibration source's, the report's check)."""
    return (f"the same host work measured {HOST_PAIRS_APART[0]:.2f}-{HOST_PAIRS_APART[1]:.2f}x apart between runs "
            f"on one machine")


def _host_range_note(bound: str) -> str:
    """The calibration source's words for a host-bound step's wider range; nothing for another."""
    if bound != "host":
        return ""
    return f"; host-bound: its range adds the host's run-to-run scatter (±{HOST_RUN_SCATTER:.0%}, 1σ: {host_scatter_words()})"


# Max-pooling runs PyTorch's own NCHW kernels in every dtype (max_pool_forward_nchw, max_pool_backward_nchw in
# aten/src/ATen/native/cuda/DilatedMaxPool2d.cu): one output (forward) or input (backward) element per thread, the
# window's values and int64 indices loaded one at a time, so their time follows elements, not bytes. Measured on the
# H100 (torch.profiler): max_pool_forward_nchw took 16.6 ps per output in bf16 (resnet18 b32,
# tests/data/real/gpu-2026-11-25) and 15.8 ps in fp32 (resnet50 b64, tests/data/real/h100-rooflow). A 16-bit
# max-pool takes the time of the same op on 4-byte values; its int64 indices (8 bytes per output) are the same.
NATIVE_POOLING_OPS = ("max_pool2d_with_indices", "max_pool2d_with_indices_backward")
POOLING_INDEX_SHARE = 8 / 10  # of the bytes per output of a 16-bit max-pool: an int64 index beside a 2-byte value
# The forward kernel's time per output follows its window, not the bytes the pool moves: in the H200's traces
# (tests/data/real/gpu-2026-11-27, 44 max_pool_forward_nchw calls with their shapes) a 3×3 window took 16.2 ps per
# output at stride 1 and at stride 2, in bf16 and fp32 (15.6–16.9: medians of 28), a 2×2 window 12.0 (11.9–12.5,
# 16), whatever the size. So a forward max-pool is priced as (window + MAX_POOL_OUTPUT_LOADS) 4-byte loads per
# output — the window's loads and, in load times, what each output costs besides (its value and int64 index
# written, the index arithmetic): (16.2 − 12.0) / (9 − 4) = 0.85 ps per window element, 12.0 − 4 × 0.85 = 8.6 ps
# per output, 10.2 loads. Priced by bytes, a stride-1 3×3 pool (GoogLeNet's inception branches: a quarter of a
# stride-2 one's input bytes per output) took half its recorded time. The level is the calibration's own
# efficiency class for these loads, MAX_POOL_CLASS, read from the recorded max_pool_forward_nchw kernels: above 1 (the
# H100's 1.53), as the windows' loads mostly hit the caches. The other pooling kernels keep the pooling class's.
MAX_POOL_OUTPUT_LOADS = 10.2
MAX_POOL_CLASS = "max_pool"


def cache_resident(bytes_per_call: float, cache_bytes: float | None) -> bool:
    """Whether one call's bytes are priced at the cache's rate: within half the calibration's cache."""
    return bool(cache_bytes) and bytes_per_call <= cache_bytes / 2


def undirected(path: str) -> str:
    """A compute path without its direction ("tf32_backward" → "tf32")."""
    return path.rsplit("_", 1)[0] if path.endswith(DIRECTIONS) else path


@dataclass(frozen=True)
class Calibration:
    """The device constants of the time model (SI units); the module docstring says what each is."""

    source: str
    kind: str = "cuda"
    host_op_seconds: float = 8.6e-6
    host_module_seconds: float = 5.0e-6
    host_library_seconds: float = 25e-6
    host_autograd_seconds: float = 3.0e-6
    host_backward_op_seconds: float = 20e-6
    host_optimizer_call_seconds: float = 40e-6
    kernel_seconds: float = 2.5e-6
    # The idle time between two back-to-back kernels of a GPU-bound step (the GPU's front end starting the next
    # one): a timed step's time less its kernels' sum, per kernel. 0 where no timed recording gave it.
    kernel_gap_seconds: float = 0.0
    memory_efficiency: float = 0.85
    # per op class; "<class>_training" for kernels that differ in training; "layout": the transposes
    memory_efficiency_by_class: dict[str, float] = field(default_factory=dict)
    # An op whose bytes per call fit in half the last-level cache runs at the cache's speed: its class's
    # efficiency is then cache_memory_efficiency_by_class (measured with cache-resident tensors), when given.
    cache_bytes: float | None = None
    cache_memory_efficiency_by_class: dict[str, float] = field(default_factory=dict)
    # CPU: the first write of a freshly mapped large tensor (rooflow.estimate.core.LARGE_ALLOCATION_BYTES)
    # costs a page fault per page, seconds per byte
    page_fault_seconds_per_byte: float = 0.0
    # seconds of cuDNN's layout transposes per convolution byte at the bandwidth (their efficiency in it), by
    # path ("<path>_forward" / "<path>_backward" where the recordings gave both directions)
    layout_bytes_per_byte: dict[str, float] = field(default_factory=dict)
    matmul_efficiency: dict[str, float] = field(default_factory=dict)  # by path (PATHS)
    # cuBLAS GEMMs (mm, addmm, bmm: linear layers, attention) by path, of the measured GEMM ceiling, which is
    # such a GEMM (torch.mm): 1 unless measured otherwise. matmul_efficiency is that of cuDNN's convolutions.
    # Weight gradients (WGRAD_SUFFIX): rooflow.estimate.calibration.weight_gradient_efficiencies over the H200's
    # traces (tests/data/real/gpu-2026-11-27: ViT-B/16 b256 and b32, ConvNeXt-T b256 TF32 training, 0.41-0.45 of
    # the forward's rate; bf16 and fp32 at it). Same SMs and clocks as the H100's.
    gemm_efficiency: dict[str, float] = field(default_factory=lambda: dict(GEMM_EFFICIENCY))
    # PyTorch's fused attention kernels, "<backend>_<phase>" (flash_forward, efficient_backward, ...), of their
    # path's peak and shape factor (1 where absent): rooflow.estimate.calibration.attention_efficiencies over the
    # H200's ViT-B/16 traces (tests/data/real/gpu-2026-11-27: fp32/TF32 b32 and b256, memory-efficient kernels
    # 0.37-0.41 of it in every one; bf16 b256, cuDNN's SDPA). Same SMs and clocks as the H100's.
    attention_efficiency: dict[str, float] = field(default_factory=lambda: dict(ATTENTION_EFFICIENCY))
    # cuDNN's depthwise kernels on channels_last inputs (DEPTHWISE_CHANNELS_LAST_*), of the bandwidth, on the bytes
    # of 4-byte elements: "forward" (every dtype) and "backward" (fp32/TF32). Read from two runs of the one
    # model whose depthwise convolutions see channels_last inputs, ConvNeXt-Tiny on the H100 at batch 256
    # (tests/data/real/gpu-2026-11-25/h100-sweep-5-new-models-partial.jsonl): fp32 inference, 82.8 ms measured
    # against 74.1 predicted with PyTorch's native kernels' price — forward; fp32 training, 376 ms against 249 —
    # backward: each the value that predicts its run exactly, the rest of the calibration as shipped (re-read
    # whenever that changes). Its 16 other runs (TF32, bf16; the H200 at batches 32 and 256) are the check.
    depthwise_channels_last_efficiency: dict[str, float] = field(
        default_factory=lambda: {"forward": DEPTHWISE_CHANNELS_LAST_FORWARD,
                                 "backward": DEPTHWISE_CHANNELS_LAST_BACKWARD})
    # CPU: the seconds a depthwise convolution call takes beyond its host dispatch and its bytes, "forward" and
    # "backward" (oneDNN's depthwise primitives: 0.1-0.2 ms forward, 0.3-0.45 ms backward a call on a 2-core Xeon,
    # from 16 to 960 channels; a call of 0.4 MB takes 0.17 ms, of 6 MB 1.0 ms): measured by the calibration
    # microbenchmarks (rooflow.ceilings.calibrate.measure_depthwise_call_seconds); none elsewhere
    depthwise_call_seconds: dict[str, float] = field(default_factory=dict)
    # CPU: a matrix product of few rows (a linear layer at a small batch: its rows m ≤ SMALL_ROWS[-1]) of the
    # FP32 peak, by rows ("<m>"; "cache:<m>" for a weight within half the cache): the BLAS's small-m kernels
    # stream the weight at a rate the convolutions' efficiency does not give (MKL on a 2-core Zen VM: m = 1 at
    # 8 GFLOP/s, m = 4 at 13, m = 16 at 52, m = 64 at 87-118 on weights of 67-151 MB). Measured by the calibration
    # microbenchmarks (rooflow.ceilings.calibrate.measure_small_rows_efficiency); none elsewhere
    small_rows_efficiency: dict[str, float] = field(default_factory=dict)
    # elements per second one block of PyTorch's per-channel BatchNorm kernels walks (rooflow.estimate.batchnorm)
    norm_block_elements_per_second: float = 1.0e9
    gemm_fill_k: float = 64.0
    # (tile m, tile n, throughput of that tile relative to the largest): smaller tiles reuse less data
    tiles: tuple[tuple[int, int, float], ...] = ((256, 128, 1.0), (128, 256, 1.0), (128, 128, 0.95),
                                                 (128, 64, 0.85), (64, 128, 0.85), (64, 64, 0.7),
                                                 (32, 32, 0.4))
    # Bytes/s the kernels can sustain whatever the memory offers: set when the calibration comes from another GPU
    # of the same architecture with fewer bytes of bandwidth per SM cycle (rooflow.estimate.calibration.for_device)
    bandwidth_cap_bytes_per_second: float | None = None
    relative_uncertainty: float = 0.25
    notes: tuple[str, ...] = ()
    # FP32 convolution, GEMM, elementwise, LayerNorm and softmax calls take their kernels' time from the device's
    # kernel calibration (rooflow.estimate.kernel_ops): set where this calibration was made from it
    kernel_model: bool = False
    # by tensor-core precision (tf32, fp16, bf16): the share of its efficiency a board's power sustains, where it has
    # fewer watts per datasheet FLOP/s than the GPU its efficiencies were measured on (1 where absent;
    # rooflow.estimate.kernel_calibration.tensor_core_power_fractions)
    tensor_core_power_fraction: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["tiles"] = [list(t) for t in self.tiles]
        data["notes"] = list(self.notes)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Calibration:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if "tiles" in values:
            values["tiles"] = tuple(tuple(t) for t in values["tiles"])
        if "notes" in values:
            values["notes"] = tuple(values["notes"])
        return cls(**values)

    def with_(self, **changes) -> Calibration:
        return replace(self, **changes)

    def memory_efficiency_of(self, op_class: str, mode: str, cached: bool = False) -> float:
        table = self.memory_efficiency_by_class
        if cached and self.cache_memory_efficiency_by_class:
            table = {**table, **self.cache_memory_efficiency_by_class}
        if mode == "training" and f"{op_class}_training" in table:
            return table[f"{op_class}_training"]
        if op_class not in table and op_class.endswith("_backward"):
            op_class = op_class.removesuffix("_backward")  # not measured apart: the forward kernels'
        if op_class not in table and op_class.endswith(INDEXED_SUFFIX):
            op_class = op_class.removesuffix(INDEXED_SUFFIX)  # not measured apart: the class's
        return table.get(op_class, self.memory_efficiency)

    def layout_ratio(self, path: str, backward: bool) -> float:
        """``layout_bytes_per_byte`` of a tensor-core convolution on ``path`` in its direction (the path's where
        the recordings gave no direction; 0: no transposes, FP32 FFMA)."""
        table = self.layout_bytes_per_byte
        return table.get(path + DIRECTIONS[backward], table.get(path, 0.0))

    def small_rows_efficiency_of(self, rows: int, weight_bytes: float) -> float | None:
        """The measured efficiency of a CPU matrix product of ``rows`` rows against a weight of ``weight_bytes``
        (the cache's measurements for a cache-resident weight), between the measured row counts on a log scale;
        None above the largest measured or where none was measured."""
        prefix = "cache:" if cache_resident(weight_bytes, self.cache_bytes) else ""
        measured = sorted((int(key.removeprefix(prefix)), value) for key, value in self.small_rows_efficiency.items()
                          if key.startswith(prefix) and key.removeprefix(prefix).isdigit())
        if not measured or rows > measured[-1][0]:
            return None
        below = [(m, value) for m, value in measured if m <= rows] or measured[:1]
        above = [(m, value) for m, value in measured if m >= rows]
        (low, low_value), (high, high_value) = below[-1], above[0]
        if high == low:
            return low_value
        share = math.log(rows / low) / math.log(high / low)
        return low_value * (high_value / low_value) ** share

    def matmul_efficiency_of(self, path: str) -> float:
        if path == SMALL_ROWS_PATH:
            return 1.0  # its views are priced at small_rows_efficiency already
        efficiency = self._matmul_efficiency_of(path)
        if self.tensor_core_power_fraction:
            precision = next((p for p in path.split("_") if p in self.tensor_core_power_fraction), None)
            if precision is not None:
                return efficiency * self.tensor_core_power_fraction[precision]
        return efficiency

    def _matmul_efficiency_of(self, path: str) -> float:
        if path.startswith(attention.KERNEL_PREFIX):  # sdpa_<backend>_<phase>_<path>
            return self.attention_efficiency.get("_".join(path.split("_")[1:3]), 1.0)
        if path.startswith(GEMM_PREFIX):
            base = path.removeprefix(GEMM_PREFIX)
            return self.gemm_efficiency.get(base, self.gemm_efficiency.get(base.removesuffix(WGRAD_SUFFIX), 1.0))
        if path in self.matmul_efficiency:
            return self.matmul_efficiency[path]
        if path.endswith(DIRECTIONS):  # not measured by direction: the path's
            base = undirected(path)
            if base in SIXTEEN_BIT_PATHS and base not in self.matmul_efficiency and "tf32_forward" in self.matmul_efficiency:
                return self.matmul_efficiency["tf32_forward"]  # SIXTEEN_BIT_PATHS: TF32's forward, both ways
            return self._matmul_efficiency_of(base)
        if path == "fp32_fast":
            return self._matmul_efficiency_of("fp32")
        return self.matmul_efficiency.get("tf32" if path in SIXTEEN_BIT_PATHS else "fp32", 0.7)


@dataclass
class StepPrediction:
    seconds: float
    low_seconds: float
    high_seconds: float
    device_seconds: float
    host_seconds: float
    bound: str  # host | gpu | cpu
    by_class_seconds: dict[str, float]
    calibration_source: str
    kernels: int
    # per layer type (the module class, as the measured op_times name it): kernel seconds on a GPU, the ops'
    # whole time on a CPU (where the host is the device) — what the timing job's profiled iteration measures
    by_layer_type_seconds: dict[str, float] = field(default_factory=dict)
    # per priced row of the ops table (its index label): the device seconds of all its calls, launch gaps apart
    row_seconds: dict[Any, float] = field(default_factory=dict)
    # per phase of a training step as the timing job's clock marks split it ("forward": the model and the loss,
    # "backward", "optimizer"): the step's clock (host or device, whichever is later) from mark to mark
    phase_seconds: dict[str, float] = field(default_factory=dict)
    # per phase, the priced parts of its ops' calls (as by_class_seconds): what makes one phase long
    phase_class_seconds: dict[str, dict[str, float]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"predicted_seconds": self.seconds, "predicted_seconds_low": self.low_seconds,
                "predicted_seconds_high": self.high_seconds, "predicted_device_seconds": self.device_seconds,
                "predicted_host_seconds": self.host_seconds, "predicted_bound": self.bound,
                "predicted_kernels": self.kernels, "predicted_seconds_by_class": self.by_class_seconds,
                "predicted_seconds_by_phase": self.phase_seconds, "calibration_source": self.calibration_source}


# ------------------------------------------------------------------------------------------ compute
def gemm_efficiency(m: int, n: int, k: int, count: int, sm_count: int, calibration: Calibration,
                    split_k: bool = True, tiles=None, waves: bool = False) -> float:
    """The shape factor of one GEMM view: the best tile (with split-K) for tile padding × GPU fill ×
    mainloop fill. Stream-K kernels keep a GPU with more tiles than SMs full; with ``waves`` (a block per tile, or
    persistent blocks taking tiles in turn: WAVE_PATHS) the last round runs partly empty. A GEMM with few
    output tiles and a long k (a weight gradient: m = Cout, n = Cin·kernel, k = N·H·W) splits k across the
    SMs and adds the partial sums — unless ``split_k`` is False (cuDNN's forward convolutions). ``tiles``: the
    (m, n, quality) tiles the kernels take (default: the calibration's)."""
    if sm_count <= 1:
        return 1.0  # a CPU: its GEMM kernels pad to a vector register, not to a GPU tile
    best = 0.0
    for tile_m, tile_n, tile_quality in tiles or calibration.tiles:
        tiles_m, tiles_n = math.ceil(m / tile_m), math.ceil(n / tile_n)
        padding = (m * n) / (tiles_m * tile_m * tiles_n * tile_n)
        tiles = tiles_m * tiles_n * count
        split = 1
        while True:
            slots = tiles * split
            occupancy = slots / (math.ceil(slots / sm_count) * sm_count) if waves else min(1.0, slots / sm_count)
            k_part = k / split
            fill = k_part / (k_part + calibration.gemm_fill_k)
            reduction = 1.0 / (1.0 + 0.02 * math.log2(split))  # the partial sums: one reduction level each
            best = max(best, tile_quality * padding * occupancy * fill * reduction)
            split *= 2
            if not split_k or tiles * split > 2 * sm_count or k / split < 128:
                break
    return best


def _path(compute_precision: str, precision: str, device=None) -> str:
    if compute_precision in ("fp16", "bf16") and kernel_ops.fp32_arithmetic(device, compute_precision):
        return "fp32"
    if compute_precision in ("fp16", "bf16", "tf32"):
        return compute_precision
    return "tf32" if precision == "tf32" else "fp32"


def _native_depthwise(row) -> bool:
    """Whether a 16-bit depthwise convolution row runs PyTorch's native kernels rather than cuDNN
    (``NATIVE_DEPTHWISE_PRECISIONS``): its taps and channels from its GEMM views, its stride from its
    input:output elements (forward: bytes read vs written; backward: input-gradient vs weight-gradient rows)."""
    precision = row["compute_precision"]
    if precision in NATIVE_DEPTHWISE_PRECISIONS:
        return True
    if precision != "fp16":
        return False
    views = parse_gemms(row.get("gemms"))
    if not views:
        return True
    m, _, taps, channels = views[0][:4]
    if len(views) > 1:
        positions = views[1][2] or 1  # weight gradient: k = N·Hout·Wout
        area_ratio = m / positions
    else:
        area_ratio = float(row["bytes_read"]) / max(1.0, float(row["bytes_written"]))
    stride_one = area_ratio < 2.0
    return not (taps in CUDNN_DEPTHWISE_TAPS and channels >= CUDNN_DEPTHWISE_MIN_CHANNELS and stride_one)


def _channels_last_depthwise(row) -> bool:
    """Whether a depthwise convolution row's input is channels_last: its call shape (groups, channels_last)."""
    call = parse_call(row.get("call"))
    return len(call) == 2 and call[1] == 1


def four_byte_pooling_bytes(row) -> float:
    """Bytes of ONE call of a 16-bit max-pool row (``NATIVE_POOLING_OPS``) had its values 4 bytes each: every byte
    twice but the int64 indices. Forward writes a value and an index per output; backward reads the output
    gradient and the indices, the input (2 bytes per element) and writes the input gradient."""
    calls = max(1, int(row["calls"]))
    read, written = float(row["bytes_read"]) / calls, float(row["bytes_written"]) / calls
    per_output = written if row["op"] == NATIVE_POOLING_OPS[0] else read - written
    return 2.0 * (read + written) - POOLING_INDEX_SHARE * per_output


def max_pool_priced_bytes(row) -> float | None:
    """Bytes ONE call of a forward max-pool row is priced on, on a GPU: ``window + MAX_POOL_OUTPUT_LOADS``
    4-byte loads per output (None for any other row). Outputs are the bytes written over a value and an int64
    index; the window is the row's FLOPs per output (formulas.max_pool2d_flops: one comparison per element)."""
    if row["op"] != NATIVE_POOLING_OPS[0] or not float(row["bytes_written"]):
        return None
    outputs = float(row["bytes_written"]) / (ELEMENT_BYTES.get(row["compute_precision"], 4) + 8)
    window = float(row["flops"]) / outputs
    return 4.0 * outputs * (window + MAX_POOL_OUTPUT_LOADS) / max(1, int(row["calls"]))


# Ops whose kernels a C++ loop launches, each a dispatched aten op on the host: _trilinear (nn.Bilinear and its
# backward) launches its slice's two pairs and an add per output feature (formulas.trilinear_slices). On this
# repository's CPU, nn.Bilinear(4, 4, 256) at batch 1 took 5.5 µs of host per feature, 5.7 Python-level torch.add
# calls' worth: each launch is priced as an op's host cost, at the low end of that
LOOPED_OPS = frozenset({"_trilinear"})


def _is_depthwise(views) -> bool:
    """A convolution's views of one output channel per group. (A product's batched matrix-vector views — nn.Bilinear's
    dot products, a bmm by a column — are cuBLAS's GEMVs, priced by their bytes on the product path.)"""
    return any(view[3] > 1 and view[1] == 1 for view in views)


# Tensor-core convolution kernels read each filter tap's channels in k-slices of 64 bytes (16 TF32, 32
# FP16/BF16 elements) and pad a tap with fewer channels to a whole slice; the weight gradient pads them to
# the 16-byte alignment only. Read from rooflow's H100 recordings: ResNet-50's 7×7 stem (3 channels) ran
# cutlass "fprop_optimized_tf32_256x64_16x4" doing 80.56 GFLOP of tensor work for 15.11 GFLOP of
# convolution (49 taps × 16 channels, not × 3), and its weight gradient 26.36 GFLOP (3 channels padded to 4,
# then 196 columns to two 128-wide tiles). cuDNN's autotuner then takes FP32 FFMA kernels where those are
# faster: VGG16's 3×3 stem (27 products per output, 144 padded) ran on FFMA with TF32 allowed.
TENSOR_PATHS = {"tf32": 4, "fp16": 2, "bf16": 2}  # element bytes
TAP_SLICE_BYTES = 64
TAP_ALIGN_BYTES = 16


def tensor_core_padding(n: int, k: int, k_taps: int, n_taps: int, element_bytes: int) -> tuple[int, int]:
    """(n, k) of a convolution GEMM view as tensor-core kernels run it (module constants above)."""
    if k_taps and k % k_taps == 0 and k // k_taps * element_bytes < TAP_SLICE_BYTES:
        k = k_taps * (TAP_SLICE_BYTES // element_bytes)
    if n_taps and n % n_taps == 0:
        align = TAP_ALIGN_BYTES // element_bytes
        n = n_taps * math.ceil(n // n_taps / align) * align
    return n, k


def op_terms(row, precision: str, device, calibration: Calibration, sm_count: int, sdpa: bool = False
             ) -> dict[str, Any]:
    """The ideal work of ONE call of an ops-table row, before efficiencies: ``compute`` seconds per path
    (``{path: seconds}`` at the path's peak with the shape factor), ``bytes`` moved eagerly,
    ``conv_bytes`` (a convolution's bytes: its layout transposes are a calibrated multiple of them, on a
    tensor-core ``path``), ``epilogue_bytes`` (a separate bias add) and ``kernels``. Where tensor cores would
    pad the shape, the kernels taken are those cuDNN's autotuner would take."""
    calls = max(1, int(row["calls"]))  # the table's FLOPs and bytes are over all calls; GEMM views per call
    bytes_moved = (float(row["bytes_read"]) + float(row["bytes_written"])) / calls
    terms: dict[str, Any] = {"compute": {}, "bytes": bytes_moved, "conv_bytes": 0.0, "epilogue_bytes": 0.0,
                             "kernels": 0.0 if row["op"] in NO_KERNEL_OPS else 1.0, "path": "",
                             "backward": row["phase"] == "backward"}
    if row["op_class"] not in MATMUL_OP_CLASSES:
        return terms
    path = _path(row["compute_precision"], precision, device)
    terms["path"] = path
    peak = _peak(device, path)
    views = parse_gemms(row.get("gemms"))
    if not peak:
        return terms
    convolution = row["op"].startswith(("convolution", "_convolution"))
    if row["op_class"] == "attention" and views and calibration.kind == "cuda" and sdpa:
        _fused_attention_terms(terms, row, views, precision, device, calibration, sm_count)
    elif views and not (convolution and _is_depthwise(views)):
        product_flops, padded = 0.0, False
        ffma: dict[str, float] = {}  # the same views with every padded one on FP32 FFMA instead
        ffma_peak = _peak(device, "fp32")
        library = calibration.kind == "cuda" and not convolution
        forward_conv = calibration.kind == "cuda" and row["op"] in kernel_ops.CONVOLUTION_OPS
        ffma_tiles = FP32_FPROP_TILES if forward_conv else None
        direct = forward_conv and path == "fp32" and _runs_direct(row)
        # with TF32 allowed cuDNN's autotuner still has its FP32 algorithms: every view on FFMA (Winograd where it
        # applies), NCHW as it is — the faster where TF32 units are only twice the FP32 lanes (sm_86, sm_89)
        fp32_views: dict[str, float] = {}
        fp32_direct = forward_conv and path == "tf32" and _runs_direct(row)
        for m, n, k, count, fast, k_taps, n_taps in views:
            view_path = "fp32_fast" if path == "fp32" and fast and not direct else path
            if library and min(m, n) >= GEMM_CEILING_MIN_ROWS:
                view_path = f"{GEMM_PREFIX}{path}"  # cuBLAS, not cuDNN: the kernels the GEMM ceiling times
                if row["phase"] == "backward" and k > max(m, n):
                    view_path += WGRAD_SUFFIX
            elif convolution and path in TENSOR_PATHS:
                view_path = path + DIRECTIONS[row["phase"] == "backward"]
            run_n, run_k = (tensor_core_padding(n, k, k_taps, n_taps, TENSOR_PATHS[path])
                            if path in TENSOR_PATHS and count == 1 else (n, k))
            tiles = ffma_tiles if view_path in ("fp32", "fp32_fast") else None
            # a matrix-vector product (a linear layer at batch 1, its input gradient): cuBLAS's gemv kernels
            # stream the matrix, with no output tile for the vector to pad; its bytes price it
            efficiency = 1.0 if library and min(m, n) == 1 else max(gemm_efficiency(
                m, run_n, run_k, count, sm_count, calibration, not forward_conv, tiles,
                waves=view_path in WAVE_PATHS), 1e-3)
            small_rows = (calibration.small_rows_efficiency_of(m, 4.0 * n * k * count)
                          if calibration.kind == "cpu" and not convolution and path == "fp32"
                          and calibration.small_rows_efficiency else None)
            if small_rows:  # the weight streamed by the BLAS's small-m kernels, at their measured rate
                view_path, efficiency = SMALL_ROWS_PATH, small_rows
            seconds = 2.0 * m * run_n * run_k * count / (peak * efficiency)
            terms["compute"][view_path] = terms["compute"].get(view_path, 0.0) + seconds
            padded_view = (run_n, run_k) != (n, k)
            tf32_convolution = convolution and path == "tf32"
            if ffma_peak and (padded_view or tf32_convolution):  # this view on FP32 FFMA, unpadded
                ffma_seconds = 2.0 * m * n * k * count / (ffma_peak * max(gemm_efficiency(
                    m, n, k, count, sm_count, calibration, not forward_conv, ffma_tiles), 1e-3))
            if padded_view and ffma_peak:
                padded = True
                ffma["fp32"] = ffma.get("fp32", 0.0) + ffma_seconds
            else:
                ffma[view_path] = ffma.get(view_path, 0.0) + seconds
            if tf32_convolution and ffma_peak:
                fp32_path = "fp32_fast" if fast and not fp32_direct else "fp32"
                fp32_views[fp32_path] = fp32_views.get(fp32_path, 0.0) + ffma_seconds
            product_flops += 2.0 * m * n * k * count
        terms["kernels"] = float(looped_launches(row) or len(views))
        if convolution and transposes(row, views):
            element = ELEMENT_BYTES.get(row["compute_precision"], 4)
            filters = [filter_elements(view) for view in views]
            activations = max(0.0, bytes_moved - element * sum(filters))  # its filters transpose at their own rate
            terms["conv_bytes"] = layout_bytes(row, activations, device)
            terms["filter_transposes"] = [elements for elements, view in zip(filters, views) if max(view[5:7]) > 1]
        if convolution:
            if float(row["flops"]) / calls > product_flops * 1.0000001 and row["phase"] == "forward":
                # bias: read + write out, in PyTorch's broadcasting (indexing) elementwise kernel
                terms["epilogue_bytes"] = 2.0 * float(row["bytes_written"]) / calls * indexed_element_scale(row,
                                                                                                            device)
                terms["kernels"] += 1.0
        if padded:
            _take_faster_kernels(terms, ffma, device, calibration)
        if fp32_views:
            _take_faster_kernels(terms, fp32_views, device, calibration)
    elif not views:
        terms["compute"][path] = float(row["flops"]) / calls / peak
    else:  # depthwise (one channel per group): a few FLOPs per byte, bandwidth work in its own kernels
        terms["depthwise"] = True
    return terms


def _fused_attention_terms(terms: dict[str, Any], row, views, precision: str, device, calibration: Calibration,
                           sm_count: int) -> None:
    """The attention products of a row as PyTorch's fused SDPA kernel runs them on a GPU
    (rooflow.estimate.attention): at its kernel's path, the score matrix kept on chip."""
    path, products = attention.kernel_path(precision, device.compute_capability)
    peak = _peak(device, path) / products
    seconds = sum(2.0 * m * n * k * count / (peak * max(gemm_efficiency(m, n, k, count, sm_count, calibration), 1e-3))
                  for m, n, k, count, *_ in views)
    if row["phase"] == "backward":
        seconds *= attention.BACKWARD_RECOMPUTE
    element_bytes = 2 if path in ("fp16", "bf16") else 4
    kernel = f"{attention.KERNEL_PREFIX}{attention.backend(precision, device.compute_capability)}_{row['phase']}_{path}"
    terms.update(compute={kernel: seconds}, path="", kernels=1.0,
                 bytes=attention.fused_bytes(views, element_bytes))


def _peak(device, path: str) -> float:
    """FLOP/s of a compute path: measured, or 80% of the catalogue's (0: the device lacks it)."""
    return device.compute_peak(path, True) or (device.compute_peak(path, False) or 0.0) * 0.8


def device_bandwidth(device) -> float:
    """Bytes per second the device's memory moves: measured, or 90% of the catalogue's."""
    return device.bandwidth(True) or (device.bandwidth(False) or 1.0) * 0.9


def _bandwidth(device, calibration: Calibration) -> float:
    """The device's bandwidth, held to what its SMs sustain where the calibration says so."""
    cap = calibration.bandwidth_cap_bytes_per_second
    return min(device_bandwidth(device), cap) if cap else device_bandwidth(device)


def _layout_seconds(terms: dict[str, Any], path: str, device, calibration: Calibration) -> float:
    """Seconds of the layout transposes around a tensor-core convolution on ``path`` (none for FFMA): its
    activations' bytes (the ratio is recorded seconds over bytes at the bandwidth, so their efficiency is in it:
    not divided by one again), and its kernels' fixed part and filters (``transpose_kernel_seconds``)."""
    ratio = calibration.layout_ratio(path, terms["backward"])
    if not ratio:
        return 0.0
    return ratio * terms["conv_bytes"] / _bandwidth(device, calibration) + transpose_kernel_seconds(terms, device)


def transpose_kernel_seconds(terms: dict[str, Any], device) -> float:
    """Seconds of a transposing convolution's layout transposes besides its activations' bytes: each kernel's fixed
    part (``TRANSPOSE_KERNEL_SECONDS``: input and output, and each filter's) and its filters' elements."""
    if not terms["conv_bytes"]:
        return 0.0
    return 2 * TRANSPOSE_KERNEL_SECONDS + sum(filter_transpose_seconds(elements, device)
                                              for elements in terms.get("filter_transposes", ()))


def filter_elements(view) -> int:
    """Elements of the filter a convolution GEMM view reads or writes (formulas.gemm_views: forward and input
    gradient m × (out or in channels) × (channels × taps), k_taps set; weight gradient out × (in × taps) × pixels,
    n_taps set)."""
    m, n, k, count, _, k_taps, n_taps = view
    return (m * n if n_taps and not k_taps else n * k) * max(1, count)


def filter_transpose_seconds(elements: float, device) -> float:
    """One of cuDNN's filter transposes (``TRANSPOSE_KERNEL_SECONDS`` and ``FILTER_TRANSPOSE_ELEMENTS_PER_SM_CYCLE``):
    SM-bound, so at the device's SMs and clock."""
    rate = (device.sm_count or 0) * (getattr(device, "boost_clock_mhz", None) or 0.0) * 1e6 \
        * FILTER_TRANSPOSE_ELEMENTS_PER_SM_CYCLE
    return TRANSPOSE_KERNEL_SECONDS + (elements / rate if rate else 0.0)


def _take_faster_kernels(terms: dict[str, Any], ffma: dict[str, float], device, calibration: Calibration) -> None:
    """cuDNN's autotuner: padded tensor-core kernels with their layout transposes, or FP32 FFMA (or Winograd)
    kernels on the unpadded shape (and NCHW as it is, when every view runs them), whichever is faster."""
    def total(compute: dict[str, float], path: str) -> float:
        return sum(seconds / calibration.matmul_efficiency_of(p) for p, seconds in compute.items()) + \
            _layout_seconds(terms, path, device, calibration)

    ffma_path = "fp32" if set(ffma) <= {"fp32", "fp32_fast"} else terms["path"]
    if total(ffma, ffma_path) < total(terms["compute"], terms["path"]):
        terms["compute"], terms["path"] = ffma, ffma_path


def indexed_element_scale(row, device=None) -> float:
    """Bytes priced per byte moved by an indexing elementwise kernel on a GPU: 16-bit elements at 4-byte prices
    (``INDEXED_ELEMENT_BYTES``)."""
    sixteen_bit = row["compute_precision"] in ("fp16", "bf16")
    return INDEXED_ELEMENT_BYTES / 2.0 if sixteen_bit and getattr(device, "is_cuda", True) else 1.0


def indexed_elementwise(row) -> bool:
    """Whether an elementwise or copy row of the ops table runs PyTorch's indexing kernels rather than its
    vectorised one (``BINARY_ELEMENTWISE_OPS``' comment): a copy of a strided tensor (``clone``), or a binary op
    whose bytes read are neither two whole operands nor one (a scalar's), i.e. a broadcast or mixed dtypes."""
    if row["op_class"] not in ("elementwise", "memory"):
        return False
    if row["op"] == "clone":
        return True
    if row["op"] not in BINARY_ELEMENTWISE_OPS or not float(row["bytes_written"]):
        return False
    read, written = float(row["bytes_read"]), float(row["bytes_written"])
    return read != written and abs(read / written - 2.0) > 0.01


def device_op_seconds(row, precision: str, mode: str, device, calibration: Calibration, sm_count: int,
                      norm_channels: dict[str, tuple[int, float]] | None = None, sdpa_layers: set | None = None,
                      batch: int | None = None) -> tuple[float, int, dict[str, float]]:
    """(seconds, kernels, seconds by part) of ONE call of an ops-table row on the device; ``norm_channels``:
    the bf16 BatchNorm layers' channels (rooflow.estimate.batchnorm.channels_by_layer); ``sdpa_layers``: the
    layers whose attention runs as PyTorch's fused kernel (rooflow.estimate.attention.sdpa_layers); ``batch``: the
    step's batch (the planes of a native BatchNorm's transform kernel)."""
    terms = op_terms(row, precision, device, calibration, sm_count, bool(sdpa_layers) and row["layer"] in sdpa_layers)
    bandwidth = _bandwidth(device, calibration)
    memory_class = "depthwise" if terms.get("depthwise") else row["op_class"]
    # depthwise backward (input gradient, and the weight gradient: a reduction over N·H·W per tap) runs
    # other kernels than forward, in training and inference alike
    efficiency_class = f"{memory_class}_backward" if memory_class == "depthwise" and row["phase"] == "backward" \
        else memory_class
    cached = cache_resident(terms["bytes"], calibration.cache_bytes)
    memory_bytes, memory_bandwidth = terms["bytes"], bandwidth
    if row["op"] in RANDOM_OPS and RANDOM_CLASS in calibration.memory_efficiency_by_class:
        efficiency_class = RANDOM_CLASS  # its elements at the rate the calibration's generator drew them
    elif (calibration.kind == "cpu" and memory_class == "elementwise" and row["op"].endswith("_")
          and INPLACE_CLASS in calibration.memory_efficiency_by_class):
        efficiency_class = INPLACE_CLASS
    elif calibration.kind == "cuda" and memory_class in ("elementwise", "memory"):
        if indexed_elementwise(row):  # elements, held to what the SMs index
            efficiency_class = "elementwise" + INDEXED_SUFFIX
            memory_bytes *= indexed_element_scale(row, device)
        elif row["op"] in REDUCTION_OPS:  # reduce_kernel: its bytes, at the indexing kernels' rate
            efficiency_class = "elementwise" + INDEXED_SUFFIX
        else:  # vectorised: streams at the memory's bandwidth, whatever the SMs of a scaled calibration
            memory_bandwidth = device_bandwidth(device)
    memory = memory_bytes / (memory_bandwidth * calibration.memory_efficiency_of(efficiency_class, mode, cached))
    if (calibration.kind == "cuda" and mode == "training" and row["compute_precision"] in ("fp16", "bf16")
            and row["op"] in NATIVE_NORMALIZATION_OPS):
        memory *= NATIVE_NORMALIZATION_ELEMENT_BYTES / 2.0
        if norm_channels and row["layer"] in norm_channels and row["compute_precision"] == "bf16":
            memory = max(memory, batchnorm.block_seconds(row["op"], *norm_channels[row["layer"]], sm_count,
                                                         calibration.norm_block_elements_per_second))
    if (calibration.kind == "cuda" and norm_channels and batch and row["op"] == "native_batch_norm"
            and row["phase"] == "forward" and row["compute_precision"] == "bf16" and row["layer"] in norm_channels):
        # its normalising pass: one block per (sample, channel) plane, at least their cycles (small planes)
        clock = (getattr(device, "boost_clock_mhz", None) or 0.0) * 1e6
        memory = max(memory, batchnorm.transform_seconds(*norm_channels[row["layer"]], batch, sm_count, clock))
    # the forward kernel's loads, in any dtype, where the calibration read their price (else its bytes, as before)
    pooled = (max_pool_priced_bytes(row) if calibration.kind == "cuda"
              and MAX_POOL_CLASS in calibration.memory_efficiency_by_class else None)
    if pooled is not None:
        memory = pooled / (memory_bandwidth * calibration.memory_efficiency_of(MAX_POOL_CLASS, mode, cached))
    elif (calibration.kind == "cuda" and row["op"] in NATIVE_POOLING_OPS and row["compute_precision"] in ("fp16", "bf16")
            and terms["bytes"]):
        memory *= four_byte_pooling_bytes(row) / terms["bytes"]
    if calibration.kind == "cuda" and memory_class == "depthwise":
        sixteen_bit = row["compute_precision"] in ("fp16", "bf16")
        if _channels_last_depthwise(row):  # cuDNN's kernels, priced on 4-byte elements
            cudnn = calibration.depthwise_channels_last_efficiency
            efficiency = (cudnn.get("forward") if row["phase"] != "backward"
                          else None if sixteen_bit else cudnn.get("backward"))
            if efficiency:
                memory = terms["bytes"] / (bandwidth * efficiency)
            if sixteen_bit:
                memory *= NATIVE_NORMALIZATION_ELEMENT_BYTES / 2.0
        elif _native_depthwise(row):
            memory *= NATIVE_NORMALIZATION_ELEMENT_BYTES / 2.0
    if memory_class == "depthwise" or row["op_class"] not in MATMUL_OP_CLASSES:
        # a row priced by its bytes, never under its FLOPs at the FP32 roof (PyTorch's elementwise and reduction
        # kernels compute in FP32 whatever their dtype): on a CPU ConvNeXt-T's 7×7 depthwise layers were priced at
        # 0.94x that roof, and the sum of a Linear's bias gradient at 0.23x (its gradient broadcast from one
        # element by the sum-of-outputs loss: 4 bytes read) (rooflow.estimate.predict.below_roofline)
        memory = max(memory, float(row["flops"]) / max(1, int(row["calls"])) / (_peak(device, "fp32") or math.inf))
    compute = sum(seconds / calibration.matmul_efficiency_of(path) for path, seconds in terms["compute"].items())
    layout = _layout_seconds(terms, terms["path"], device, calibration)
    # bytes per second of PyTorch's indexing kernels: the bias add of the cuDNN path, the bias gradient's sum
    indexed_rate = bandwidth * calibration.memory_efficiency_of("elementwise" + INDEXED_SUFFIX, mode)
    epilogue = terms["epilogue_bytes"] / indexed_rate
    bias_gradient = 0.0
    if calibration.kind == "cuda" and row["op"] == "convolution_backward":
        elements = bias_gradient_elements(row)
        if elements:
            bias_gradient = max(elements * INDEXED_ELEMENT_BYTES / indexed_rate, calibration.kernel_seconds)
    transposes_run = 2 + len(terms.get("filter_transposes", ())) if layout else 0  # activations in and out, filters
    kernels = terms["kernels"] + transposes_run + (1 if bias_gradient else 0)
    main = max(compute, memory, terms["kernels"] * calibration.kernel_seconds)
    if memory_class == "depthwise":  # a CPU's per-call cost of the library's depthwise primitive, on top
        main += calibration.depthwise_call_seconds.get("backward" if row["phase"] == "backward" else "forward", 0.0)
    faults = float(row.get("large_allocated_bytes") or 0.0) / max(1, int(row["calls"])) \
        * calibration.page_fault_seconds_per_byte
    parts = {memory_class: main}
    parts["layout"] = parts.get("layout", 0.0) + layout
    parts["elementwise"] = parts.get("elementwise", 0.0) + epilogue
    parts[PAGE_FAULT_PART] = faults
    parts[BIAS_GRADIENT_PART] = parts.get(BIAS_GRADIENT_PART, 0.0) + bias_gradient
    return main + layout + epilogue + faults + bias_gradient, int(round(kernels)), parts


def bias_gradient_elements(row) -> float:
    """Elements of the output gradient a convolution_backward row sums for its bias, per call: its FLOPs (one add
    per element, rooflow.estimate.formulas) less its products' (0: no bias)."""
    calls = max(1, int(row["calls"]))
    products = sum(2.0 * m * n * k * count for m, n, k, count, *_ in parse_gemms(row.get("gemms")))
    return float(max(0, round(float(row["flops"]) / calls - products)))


def transposes(row, views) -> bool:
    """Whether cuDNN transposes a tensor-core convolution's NCHW tensors to NHWC and back (the layout
    transposes, ``nchwToNhwcKernel``/``nhwcToNchwKernel``): all but the 1×1 stride-1 ones it runs as GEMMs on the
    NCHW tensors (formulas.runs_as_gemm), which it does at ``NCHW_GEMM_MIN_POSITIONS`` output positions per image
    or more, and at one position (a squeeze-excitation's: NCHW and NHWC are then the same bytes). The H200's TF32
    and bf16 traces (tests/data/real/gpu-2026-11-27), forward and backward: of such convolutions at 2 to 195
    positions, 64 of 85 ran with transposes (7×7: 51 of 58), at 196 or more 20 of 285, at one 0 of 54."""
    read_elements = float(row["bytes_read"]) / max(1, int(row["calls"])) / ELEMENT_BYTES.get(row["compute_precision"], 4)
    if not runs_as_gemm(views, read_elements):
        return True
    call = parse_call(row.get("call"))
    return len(call) == 7 and 1 < call[2] * call[2] < NCHW_GEMM_MIN_POSITIONS


def layout_bytes(row, bytes_moved: float, device=None) -> float:
    """The bytes a transposing convolution's layout transposes are priced on (a calibrated multiple of them:
    Calibration.layout_bytes_per_byte, read from 4-byte elements): ``bytes_moved`` (its activations'), a 16-bit
    byte at ``LAYOUT_16_BIT_BYTE_COST``, and an input of fewer than ``NARROW_CHANNELS`` channels (an RGB image) at
    ``NARROW_TRANSPOSE_COST`` per 4-byte element."""
    element = ELEMENT_BYTES.get(row["compute_precision"], 4)
    scale = LAYOUT_16_BIT_BYTE_COST if element == 2 and getattr(device, "is_cuda", True) else 1.0
    nbytes = bytes_moved * scale
    call = parse_call(row.get("call"))
    if len(call) == 7 and call[1] < NARROW_CHANNELS:
        batch, channels, size = call[:3]
        nbytes += batch * channels * size * size * element * (NARROW_TRANSPOSE_COST * 4.0 / element - scale)
    return nbytes


def _runs_direct(row) -> bool:
    """Whether a forward convolution row's call is priced as cuDNN's implicit GEMM though its shape allows a
    fast algorithm: batch × input channels under FAST_PATH_MIN_BATCH_CHANNELS, at a batch from the smallest
    recorded (16) to the calibration's (64, whose fast-path price holds the recorded mix of both paths)."""
    call = parse_call(row.get("call"))
    return (len(call) == 7 and DIRECT_PATH_SEEN_BATCH <= call[0] < FAST_PATH_SEEN_BATCH
            and call[0] * call[1] < FAST_PATH_MIN_BATCH_CHANNELS)


def _fast_path_doubt(row, precision: str, device, calibration: Calibration, sm_count: int, mode: str) -> float:
    """Seconds ONE call of a forward FP32 convolution row would add if cuDNN ran the views the model prices on
    the Winograd/FFT path as implicit GEMMs (at the ``fp32`` efficiency), where no recording showed the fast
    path for a layer of its batch and input channels; 0 elsewhere."""
    if row["op"] not in kernel_ops.CONVOLUTION_OPS or row.get("compute_precision") != "fp32":
        return 0.0
    call = parse_call(row.get("call"))
    if len(call) == 7 and call[0] >= FAST_PATH_SEEN_BATCH and call[1] >= FAST_PATH_SEEN_CHANNELS:
        return 0.0
    fast = op_terms(row, precision, device, calibration, sm_count)["compute"].get("fp32_fast", 0.0)
    if not fast:
        return 0.0
    return fast * (1.0 / calibration.matmul_efficiency_of("fp32") - 1.0 / calibration.matmul_efficiency_of("fp32_fast"))


def looped_launches(row) -> int:
    """The kernels ONE call of a row of :data:`LOOPED_OPS` launches from its loop (its call shape: slices, kernels a
    slice), 0 for any other row."""
    call = parse_call(row.get("call"))
    return call[0] * call[1] if row["op"] in LOOPED_OPS and len(call) == 2 else 0


def host_op_seconds(row, mode: str, calibration: Calibration) -> float:
    """Host seconds of ONE call of an ops-table row (module calls are added per forward op); an op of
    :data:`LOOPED_OPS` adds an op's host cost for each kernel its loop launches after the first."""
    seconds = calibration.host_backward_op_seconds if row["phase"] == "backward" else calibration.host_op_seconds
    seconds += max(0, looped_launches(row) - 1) * calibration.host_op_seconds
    if mode == "training" and row["phase"] in ("forward", "loss"):
        seconds += calibration.host_autograd_seconds
    if row["op"] in LIBRARY_OPS:
        seconds += calibration.host_library_seconds
    return seconds


# ------------------------------------------------------------------------------------------ the step
def _single_call(body: pd.DataFrame, single: pd.DataFrame, precision: str, mode: str, device,
                 calibration: Calibration, sm_count: int) -> StepPrediction | None:
    """A step that is ONE call the kernel model prices (one layer, inference): the latency of that call alone,
    launch floor included, as the device's single-op measurements time it (rooflow.estimate.kernel_ops).
    None for any other step."""
    launching = [index for index, row in body.iterrows() if row["op"] not in NO_KERNEL_OPS]
    if len(launching) != 1 or launching[0] not in single.index or int(body.at[launching[0], "calls"]) != 1 \
            or single.at[launching[0], "candidate"]:
        return None
    row = body.loc[launching[0]]
    seconds, device_seconds = float(single.at[row.name, "seconds"]), float(single.at[row.name, "device_seconds"])
    _, kernels, parts = device_op_seconds(row, precision, mode, device, calibration, sm_count)
    found = kernel_calibration.for_gpu(device)
    bound = "gpu" if device_seconds >= 0.8 * seconds else "host"
    source = (f"one call alone, by the kernel model — {found[0].source}" if found else calibration.source) \
        + _host_range_note(bound)
    spread = step_spread(max(calibration.relative_uncertainty, found[0].relative_uncertainty if found else 0.0), bound)
    return StepPrediction(seconds=seconds, low_seconds=seconds * (1 - spread), high_seconds=seconds * (1 + spread),
                          device_seconds=device_seconds, host_seconds=seconds - device_seconds, bound=bound,
                          by_class_seconds={next(iter(parts)): device_seconds}, calibration_source=source,
                          kernels=kernels, by_layer_type_seconds={str(row.get("type") or row["op"]): device_seconds})


def unpriced_precision(device, precision: str) -> str | None:
    """Why a CPU's ``precision`` step has no predicted time, or None: a 16-bit run on a CPU whose roofs (measured
    by `rooflow ceilings`, which keeps bf16 only where the CPU runs it fast, or its datasheet's) hold no rate of
    that precision runs on a path no roof prices — an fp16 ResNet-18 step on a Zen 4 without AVX512-FP16 took
    tens of times its fp32 one — where pricing its arithmetic at the fp32 roof on 16-bit bytes put it *faster*
    than fp32."""
    if device.is_cuda or precision not in ("fp16", "bf16"):
        return None
    roofs = device.measured_peak_flops_per_second or device.peak_flops_per_second
    if not roofs or roofs.get(precision):  # no roofs at all: the caller says to measure them
        return None
    held = ", ".join(sorted(roofs))
    return (f"none for {device.key} at {precision}: its {'measured' if device.measured_peak_flops_per_second else 'datasheet'} "
            f"roofs hold no {precision} rate ({held}), so PyTorch's {precision} ops run there on a path no roof prices: "
            f"time the step with `rooflow time --device cpu --precision {precision}`")


def predict_step(ops: pd.DataFrame, totals: dict[str, Any], device, calibration: Calibration) -> StepPrediction:
    """The predicted time of one step of the estimate whose ops table is ``ops`` (module docstring)."""
    precision, mode = totals["precision"], totals["mode"]
    sm_count = int(getattr(device, "sm_count", None) or 1)
    cpu = calibration.kind == "cpu" or not device.is_cuda
    precision_note = ""
    emulated_bf16 = False
    if precision in ("tf32", "bf16") and not cpu and not (device.peak_flops_per_second or {}).get(precision):
        precision_note = f"; {precision} on a GPU without {precision} units ({getattr(device, 'architecture', '')}): "
        if precision == "tf32":
            # PyTorch's allow_tf32 changes no kernel before Ampere: the run is an fp32 run
            precision_note += "no kernel changes, priced as the fp32 run it is"
            precision = "fp32"
            ops = ops.assign(compute_precision=ops["compute_precision"].replace("tf32", "fp32"))
        else:  # torch.cuda.is_bf16_supported(including_emulation=True): it runs, on no path rooflow recorded
            emulated_bf16 = True
            precision_note += ("PyTorch emulates it, a path no recording here shows: its matrix products and "
                               "convolutions are priced as the fp32 run's, on 16-bit operands, a lower bound "
                               f"(third-party bf16 torch.mm ran at {EMULATED_BF16_OF_FP32[0]:.2f}-"
                               f"{EMULATED_BF16_OF_FP32[1]:.2f} of the FP32 rate on such GPUs; its "
                               "convolutions leave cuDNN for PyTorch's im2col fallback), unverified"
                               + (" (fp16 has units here)" if (device.peak_flops_per_second or {}).get("fp16") else ""))
    if precision == "fp16" and not cpu and kernel_ops.fp32_arithmetic(device, "fp16"):
        precision_note = (f"; fp16 on a GPU without tensor cores ({device.architecture}): its convolutions and matrix "
                          f"products are FP32 arithmetic on 16-bit operands (cuBLAS's FP32 compute, cuDNN's "
                          f"pseudo-half), priced so")
    # nn.LSTM/GRU/RNN calls a GPU runs as cuDNN's RNN kernels (rooflow.estimate.recurrent): their per-timestep cells
    # as counted give way to those kernels under one host dispatch per call and phase
    recurrent_calls = {} if cpu else dict(totals.get("recurrent_calls") or {})
    persistent: dict[Any, str] = {}  # the cuDNN kernel rows of calls get_algo runs by a persistent algorithm
    if recurrent_calls:
        ops = recurrent.substitute(ops, recurrent_calls, precision)
        for label in ops.index[ops["host_calls"] == 0]:
            picked = recurrent.algorithm(ops.at[label, "recurrent_call"], ops.at[label, "phase"] == "forward",
                                         precision, device.compute_capability, sm_count)
            if picked != "standard":
                persistent[label] = picked
        names = sorted({ops.at[label, "type"] for label in ops.index if isinstance(label, str)})
        precision_note += (f"; its {', '.join(f'nn.{name}' for name in names)} layers as cuDNN's standard RNN "
                           f"algorithm runs them (one host call per call and phase; per layer one GEMM of all "
                           f"timesteps' inputs, then per timestep a recurrent GEMM and one pointwise kernel; "
                           f"backward alike, its weight gradients one GEMM each), from cuDNN's and PyTorch's "
                           f"documentation, no recording here")
        if persistent:
            low, high = recurrent.PERSISTENT_RATIO
            precision_note += (f"; PyTorch's get_algo picks cuDNN's {' and '.join(sorted(set(persistent.values())))} algorithm "
                               f"for some of them (one kernel over all timesteps), priced as the standard one: the "
                               f"range spans {low:g}-{high:g}x their kernels' time, what a public benchmark (PyTorch "
                               f"PR #62143, 20 nn.LSTM shapes) measured between the two")
    unpriced = sorted({str(kind) for layer, kind in zip(ops["layer"], ops["type"])
                       if kind in RECURRENT_MODULES and layer not in recurrent_calls}) if "type" in ops else []
    if unpriced:
        precision_note += (f"; its {', '.join(f'nn.{name}' for name in unpriced)} layers run PyTorch's fused RNN "
                           f"kernels ({'oneDNN' if cpu else 'cuDNN'}), which the time model does not price"
                           f"{'' if cpu else ' for a PackedSequence input'}: they are priced as their per-timestep "
                           f"math path (its FLOPs are theirs; its bytes and time are the unfused cells': unverified)")
    host_clock = device_clock = device_busy = 0.0
    kernels_total = 0
    by_class: dict[str, float] = {}
    by_type: dict[str, float] = {}
    row_seconds: dict[Any, float] = {}
    phase_seconds: dict[str, float] = {}
    phase_class: dict[str, dict[str, float]] = {}
    module_calls = sum((totals.get("module_calls") or {}).values())
    forward_calls = int(ops.loc[ops["phase"] == "forward", "calls"].sum()) or 1
    module_share = calibration.host_module_seconds * module_calls / forward_calls

    # torch.optim.SGD runs its foreach path (a few calls over tensor lists) on a GPU, and one op per parameter
    # on a CPU (foreach is for CUDA tensors): there the estimate's per-parameter optimizer ops are the work.
    body = ops if cpu else ops[ops["phase"] != "optimizer"]
    capability = None if cpu else device.compute_capability
    fused_kernel = not cpu and attention.fused(precision, capability)
    sdpa_layers = attention.sdpa_layers(body["layer"], body["op"]) if fused_kernel else set()
    if not cpu:  # the softmax, scaling and casts of attention's math path run inside the fused kernel
        body = body.drop(index=list(attention.fused_rows(body, fused_kernel) | attention.fast_path_rows(
            body, precision, mode, totals.get("mha_fast_path_layers"))))
        body = dropout.as_cuda_runs(body)  # a dropout's three kernels are native_dropout's one
    norm_channels = batchnorm.channels_by_layer(body, 2.0) if not cpu and precision == "bf16" else None
    # The fused kernel's products (device_op_seconds prices them so) on tensor cores are not the FP32 cuBLAS
    # bmm calls the single-op measurements timed: the kernel model never prices them. On FP32 FMA units (fp32
    # before sm_80) those SGEMMs are the nearest measured kernels, and it does.
    tensor_core_attention = fused_kernel and attention.kernel_path(precision, capability)[0] != "fp32"
    fused_products = (body.index[(body["op_class"] == "attention") & body["layer"].isin(sdpa_layers)]
                      if tensor_core_attention else body.index[:0])
    single = None if cpu else kernel_ops.kernel_seconds(body.drop(index=fused_products), device)
    if single is not None and not single.empty:
        alone = _single_call(body, single, precision, mode, device, calibration, sm_count)
        if alone is not None:
            return replace(alone, calibration_source=alone.calibration_source + precision_note)
    doubt_seconds, doubt_layers = 0.0, 0
    # An architecture whose own single ops fitted the kernel model (kernel_calibration.OWN_KERNELS: Hopper, the
    # H200's) prices its FP32 forward convolutions by it — what those single ops measured (TF32 off) — and the rest
    # of the step by the calibration read from its traces. The H200's traces time ResNet-50's and MobileNetV2's at
    # 0.97x and 1.04x the kernel model, 1.23x and 1.59x the traces' FP32 efficiency with its tile shape factor
    # (test_hoppers_fp32_convolutions_take_its_single_ops_kernel_model). A TF32 run's convolutions (``candidate``
    # rows) keep the recorded TF32 kernels and the time model's own FFMA alternative.
    own_convolutions = (not cpu and not calibration.kernel_model
                        and getattr(device, "architecture", None) in kernel_calibration.OWN_KERNELS)
    own_priced = 0
    for index, row in body.iterrows():
        calls = int(row["calls"])
        work, kernels, parts = device_op_seconds(row, precision, mode, device, calibration, sm_count, norm_channels,
                                                 sdpa_layers, totals.get("batch"))
        if single is not None and index in single.index and (
                calibration.kernel_model or (own_convolutions and row["op"] in kernel_ops.CONVOLUTION_OPS
                                             and not single.at[index, "candidate"])):
            # its kernels as the device's single-op measurements price them (the time model's host costs stay);
            # a TF32 convolution's FP32 algorithms only where cuDNN's autotuner would find them faster. The
            # measured calls had no bias (nn.Conv2d(bias=False)): a convolution's bias add, like its page
            # faults and bias gradient, stays the time model's; the layout copies are the TF32 kernels' only
            main = next(iter(parts))
            extras = {part: seconds for part, seconds in parts.items() if part not in (main, "layout")}
            measured_work = max(float(single.at[index, "device_seconds"]), kernels * calibration.kernel_seconds)
            if not single.at[index, "candidate"] or measured_work + sum(extras.values()) < work:
                work = measured_work + sum(extras.values())
                parts = {main: measured_work, **extras}
                own_priced += calls if own_convolutions else 0
        elif not cpu and calibration.kind == "cuda" and row["phase"] == "forward":
            doubt = _fast_path_doubt(row, precision, device, calibration, sm_count, mode)
            if doubt > 0:
                doubt_seconds += calls * doubt
                doubt_layers += 1
        host = (0.0 if row.get("host_calls") == 0  # a kernel a library call launched (recurrent.substitute)
                else host_op_seconds(row, mode, calibration) + (module_share if row["phase"] == "forward" else 0.0))
        gap = 0.0 if cpu else kernels * calibration.kernel_gap_seconds
        phase = TIMED_PHASES.get(row["phase"], row["phase"])
        clock_before = max(device_clock, host_clock)
        gaps_paid = 0.0  # the gaps not hidden in a wait for the host: the GPU's own time between kernels
        if cpu:
            host_clock += calls * (host + work)
            device_clock = host_clock
        else:
            # a looped op's kernels run while its loop launches the next ones: one launch at a time
            launches = looped_launches(row) or 1
            for _ in range(calls * launches):
                host_clock += host / launches
                if kernels:
                    start = max(device_clock + gap / launches, host_clock)
                    gaps_paid += start - max(device_clock, host_clock)
                    device_clock = start + work / launches
        device_busy += calls * work + gaps_paid
        phase_seconds[phase] = phase_seconds.get(phase, 0.0) + max(device_clock, host_clock) - clock_before
        row_seconds[index] = calls * work
        kernels_total += calls * kernels
        for part, seconds in parts.items():
            if seconds:
                by_class[part] = by_class.get(part, 0.0) + calls * seconds
                parts_of_phase = phase_class.setdefault(phase, {})
                parts_of_phase[part] = parts_of_phase.get(part, 0.0) + calls * seconds
        if gaps_paid:
            by_class["kernel gaps"] = by_class.get("kernel gaps", 0.0) + gaps_paid
            parts_of_phase = phase_class.setdefault(phase, {})
            parts_of_phase["kernel gaps"] = parts_of_phase.get("kernel gaps", 0.0) + gaps_paid
        # booked as the profiled iteration books it: the optimizer and the loss apart from the layers
        layer_type = PHASE_LAYER_TYPES.get(row["phase"]) or str(row.get("type") or row["op"])
        by_type[layer_type] = by_type.get(layer_type, 0.0) + calls * (host + work if cpu else work)

    if mode == "training" and not cpu:
        clock_before = max(device_clock, host_clock)
        optimizer = ops[ops["phase"] == "optimizer"]
        tensors = int(totals.get("param_tensors") or optimizer["layer"].nunique() or 1)
        bandwidth = _bandwidth(device, calibration)
        if precision == "fp16":
            # GradScaler.unscale_: one foreach pass over the gradients (inf/NaN check and multiply, in place);
            # GradScaler.step then reads found_inf on the host: the host waits for the GPU
            launches = max(1, math.ceil(tensors / 48))
            unscale = max(2.0 * float(totals.get("gradient_bytes") or 0.0)
                          / (bandwidth * calibration.memory_efficiency_of("elementwise", mode)),
                          launches * calibration.kernel_seconds)
            host_clock += calibration.host_optimizer_call_seconds
            device_clock = max(device_clock, host_clock) + unscale
            device_busy += unscale
            kernels_total += launches
            by_class["grad scaler"] = unscale
            by_type[PHASE_LAYER_TYPES["optimizer"]] = by_type.get(PHASE_LAYER_TYPES["optimizer"], 0.0) + unscale
            host_clock = max(host_clock, device_clock) + 3 * calibration.host_op_seconds
        optimizer_bytes = float((optimizer["bytes_read"] + optimizer["bytes_written"]).sum())
        foreach_calls = 4  # SGD(momentum, weight decay), foreach: d = g + wd·p; buf·m; buf + d; p − lr·buf
        launches = foreach_calls * max(1, math.ceil(tensors / 48))  # multi_tensor_apply chunks of tensors
        work = max(optimizer_bytes / (bandwidth * calibration.memory_efficiency_of("elementwise", mode)),
                   launches * calibration.kernel_seconds)
        host_clock += foreach_calls * calibration.host_optimizer_call_seconds
        device_clock = max(device_clock, host_clock) + work
        device_busy += work
        kernels_total += launches
        by_class["optimizer"] = work
        by_type[PHASE_LAYER_TYPES["optimizer"]] = by_type.get(PHASE_LAYER_TYPES["optimizer"], 0.0) + work
        phase_seconds["optimizer"] = max(device_clock, host_clock) - clock_before
        phase_class["optimizer"] = {part: by_class[part] for part in ("grad scaler", "optimizer") if part in by_class}
    seconds = max(device_clock, host_clock)
    bound = "cpu" if cpu else ("host" if device_busy < 0.8 * seconds else "gpu")
    spread = step_spread(calibration.relative_uncertainty, bound)
    source = calibration.source + precision_note
    if own_priced:
        source += (f"; its {own_priced} FP32 forward convolution call(s) by the kernel model of its architecture's "
                   f"single ops (bias adds the time model's) — {kernel_calibration.for_gpu(device)[0].source}")
    if doubt_seconds > 0:
        source += (f"; the {doubt_layers} FP32 forward convolution(s) of 3×3 or more at stride 1 are priced on cuDNN's "
                   f"Winograd/FFT path, which rooflow's H100 recordings show for batch ≥ {FAST_PATH_SEEN_BATCH} and "
                   f"≥ {FAST_PATH_SEEN_CHANNELS} input channels only (elsewhere implicit GEMM, at half the rate): the "
                   f"range's high end adds {doubt_seconds * 1e3:.3g} ms for them")
    emulated_seconds = 0.0
    if emulated_bf16:  # the products' FP32 time, a lower bound: the range reaches the slowest measured rate
        products = [label for label in row_seconds if body.at[label, "op_class"] in MATMUL_OP_CLASSES
                    and body.at[label, "compute_precision"] == "bf16"]
        emulated_seconds = sum(row_seconds[label] for label in products) * (1 / EMULATED_BF16_OF_FP32[0] - 1)
        if emulated_seconds > 0:
            source += (f"; the range's high end adds {emulated_seconds * 1e3:.3g} ms: its emulated bf16 products and "
                       f"convolutions at {EMULATED_BF16_OF_FP32[0]:.2f} of the FP32 rate, the slowest measured")
    source += _host_range_note(bound)
    low_seconds, high_seconds = seconds * (1 - spread), seconds * (1 + spread) + doubt_seconds + emulated_seconds
    if persistent:  # the persistent calls' kernels at what that algorithm measured against the standard one
        rnn_seconds = sum(row_seconds.get(label, 0.0) for label in persistent)
        low_seconds = max(low_seconds - rnn_seconds * (1 - recurrent.PERSISTENT_RATIO[0]), 0.1 * low_seconds)
        high_seconds += rnn_seconds * (recurrent.PERSISTENT_RATIO[1] - 1)
    return StepPrediction(seconds=seconds, low_seconds=low_seconds, high_seconds=high_seconds,
                          device_seconds=device_busy, host_seconds=host_clock, bound=bound,
                          by_class_seconds=by_class, calibration_source=source, kernels=kernels_total,
                          by_layer_type_seconds=by_type, row_seconds=row_seconds, phase_seconds=phase_seconds,
                          phase_class_seconds=phase_class)


def as_tf32(ops: pd.DataFrame, convolutions: bool = True, products: bool = True) -> pd.DataFrame:
    """The ops of an FP32 step as PyTorch runs them where it lets cuDNN (``torch.backends.cudnn.allow_tf32``, on by
    default) and cuBLAS (``torch.backends.cuda.matmul.allow_tf32``, on by default before PyTorch 1.12) take TF32
    tensor cores for FP32 tensors on Ampere and newer: its ``convolutions`` and/or its other matrix ``products`` at
    TF32, every other op as it was. A copy; what :func:`predict_step` then prices an imported FP32 profile at when
    its kernels' names show that work (rooflow's own timing turns both flags off for fp32)."""
    fp32_products = ops["op_class"].isin(MATMUL_OP_CLASSES) & ops["compute_precision"].eq("fp32")
    convolution = ops["op"].astype(str).str.startswith("convolution")
    taken = fp32_products & ((convolution & convolutions) | (~convolution & products))
    return ops.assign(compute_precision=ops["compute_precision"].where(~taken, "tf32"))
