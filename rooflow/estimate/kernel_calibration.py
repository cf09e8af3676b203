"""Per-GPU calibration from measured single-op latencies: what one nn.Conv2d / nn.Linear / torch.bmm /
elementwise / LayerNorm / softmax call costs on a GPU, as a function of its shape and the GPU's datasheet.

This module owns the **kernel model** (:func:`predict_seconds`), its **fit** from measurements
(:func:`fit_gpu`), the **architecture-family** calibration a GPU without measurements gets
(:func:`family_calibration`), and the reader of the measurement files (:func:`load_measurements`: the
public NeuSight data set's CSV layout, which ``rooflow ceilings --calibrate``-style microbenchmarks can
write too).

The model, per op class, is datasheet arithmetic times a few physically meaningful parameters:

- **gemm** (nn.Linear, torch.bmm) and **convolution** (implicit GEMM view m = N·Ho·Wo, n = Cout,
  k = Cin·kh·kw): ``flops / (fp32 peak × efficiency × shape factor)``. The shape factor is the best FP32
  SGEMM tile (cuBLAS's 128×128 … 32×32; a tile of fewer outputs reuses fewer operands:
  quality = (intensity / largest intensity) ** ``tile_exponent``) for tile padding × wave quantisation over
  the SMs (the last wave runs partly empty) × mainloop fill ``k / (k + fill_k)`` (split-K across idle SMs
  where k is long). Against it the memory time ``bytes / (DRAM bandwidth × memory_efficiency)``: a GEMV
  (small m or n) is bound by reading its weights — an nn.Linear's weights at ``weight_efficiency`` of the
  bandwidth where a board's skinny calls pin a rate of their own (Pascal's maxwell_sgemm_*_tn: 0.17-0.18 of
  DRAM; rooflow's H200 FP32 calls 0.14), lent only within its architecture (at the donor's bytes per SM cycle
  where its SMs bound them) or family. Convolutions: cuDNN's autotuner also tries Winograd
  (3×3, stride 1), which does fewer multiplications; its ``winograd_efficiency`` (of the direct FLOPs,
  above 1 when it wins) is a parameter of its own, and the faster of the two is taken. Where the measured calls
  name their kernels, the implicit-GEMM parameters are fitted on the calls that ran implicit GEMM, so that
  Winograd cannot stand in for them (:func:`_implicit_gemm_parameters`), and the rate the Winograd calls ran at
  is kept as ``winograd_rate`` (the time model's FP32 Winograd rate). On Hopper
  (:data:`NO_FORWARD_WINOGRAD`) cuDNN runs no FP32 forward Winograd: the alternative is FFT of 16×16 or
  32×32 transforms (a complex GEMM per frequency at the GEMM efficiency, the transforms at the bandwidth).
- **elementwise** (add, mul, div, pow, their scalar forms, relu, gelu, tanh), **normalization**
  (LayerNorm) and **softmax**: ``bytes / (bandwidth × memory_efficiency)``, where the part of the working
  set that stays in L2 between back-to-back calls (up to ``l2_fraction`` × the L2 all SMs share: half of
  it on an A100 or H100, ``Gpu.shared_l2_bytes``) moves at
  ``cache_speedup`` × that; the reductions parallelise over rows (a warp or a block per row): fewer rows
  than ``rows_per_sm`` × SMs leave the GPU partly idle.
- Every call adds the **launch floor** of its operator (``floors``: the fastest measured call of that
  operator; convolution: ``floor_seconds`` fitted with the rest): the time between the CUDA events around
  one eager call that no kernel fills — the measuring host's dispatch path, not the GPU's. A convolution's
  floor grows over its measuring run by ``drift_seconds_per_call`` for every call before it
  (:func:`host_drift`): its ``floor_seconds`` is the run's middle call's (``drift_from_call``), the place a
  row that does not say its own (``run_order``) is priced at.

A GPU with measurements gets its parameters fitted on them (:func:`fit_gpu`). A GPU without
(:func:`family_calibration`) gets, with its own datasheet (SMs, FP32 peak, bandwidth, L2 size, board
power) and a wider range that says so: the median memory-bound parameters and per-operator floors of all
measured GPUs (one library kernel per call: they carry across architectures), and the GEMV-like DRAM
efficiency of GEMM/convolution alike; the other GEMM and convolution parameters are the median of the
measured GPUs of its architecture family (:data:`FAMILIES`), else of all (GEMM: of the full-power boards
among them, else of all families' full-power boards: its tile exponent and k fill were fitted together
with the efficiency it takes from those), with the FP32 efficiency of the
full-power boards (its family's, else all) held to what its board power sustains at its family's FLOPs per
watt — but an SM that must issue an FP32 FMA every clock to reach its peak (:data:`ISSUE_BOUND_FP32`: the A10's,
beside its family's A100) takes the efficiency measured on such SMs (the H100's roof). Convolution runs at the
GPU's GEMM efficiency (cuDNN's implicit-GEMM kernels are SGEMMs on the same SMs; a measured GPU's own ran at
0.87-1.6x its GEMMs' fit, but its donors' efficiency or their ratio to their GEMMs' predicted the held-out GPUs
worse) — on a power-limited board at one clock whatever a call's length (:func:`random_order_clock`), where its
GEMMs fall to the power-limited clock within a call (:func:`_throttled`) — and takes all measured GPUs' convolution shapes' residuals, each GPU's less its median (rooflow.estimate.shape_residuals), and its
family's full-power boards' GEMM shapes' residuals alike (cuBLAS's kernels are a family's own). A measured
GPU of its own architecture lends it its parameters and measured shapes whole instead (a class it did not
measure — the A100's convolutions — with the FP32 efficiency a GPU of an unmeasured architecture takes); a Hopper board's
(:data:`OWN_KERNELS`: rooflow's H200 single ops) reach Hopper boards only, and its host's floors no other GPU.
"""

from __future__ import annotations

import functools
import io
import json
import math
import re
import statistics
from dataclasses import asdict, dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rooflow.errors import RooflowError
from rooflow.estimate import shape_residuals
from rooflow.estimate.shape_residuals import ShapeResiduals
from rooflow.io import missing, read_json_object
from rooflow.units import finite_number, positive_number

FP32_BYTES = 4
# The files of the measurement set, by the operator's folder name: (op class, operand count). Operands:
# tensors read (the output is written once more).
OPERATORS = {"conv": ("convolution", 0), "linear": ("gemm", 0), "bmm": ("gemm", 0),
             "add": ("elementwise", 2), "mul": ("elementwise", 2), "div": ("elementwise", 2),
             "pow": ("elementwise", 2), "addu": ("elementwise", 1), "mulu": ("elementwise", 1),
             "divu": ("elementwise", 1), "powu": ("elementwise", 1), "relu": ("elementwise", 1),
             "gelu": ("elementwise", 1), "tanh": ("elementwise", 1), "ln": ("normalization", 1),
             "softmax": ("softmax", 1)}
CLASSES = ("convolution", "gemm", "elementwise", "normalization", "softmax")
# FP32 SGEMM tiles cuBLAS/cuDNN pick among (sm_50 … sm_90 "sgemm_128x128", "…_32x128", ...).
SGEMM_TILES = ((128, 128), (128, 64), (64, 128), (128, 32), (32, 128), (64, 64), (64, 32), (32, 64), (32, 32))
# cuDNN's FP32 forward convolutions tile 128 output pixels by 128, 64 or 32 channels (implicit GEMM:
# scudnn_128x128/128x64/128x32 in the data set's kernel names, all three on every GPU; their grids are
# ceil(N·Ho·Wo / 128) × ceil(Cout / tile) for all 5,353 such calls), and its fused Winograd kernel 128 × 128
# (scudnn_winograd_128x128): a convolution of few pixels or channels pads them, it does not pick a smaller tile
IMPLICIT_GEMM_TILES = ((128, 128), (128, 64), (128, 32))
# cuDNN 9's FP32 implicit GEMMs on Hopper (sm80_xmma_fprop_implicit_gemm_f32f32…): 256×64 and 128×32 tiles, the
# only two in rooflow's H100 and H200 FP32 traces (90 and 18 kernels; MobileNetV2's 1×1 convolutions of 24 output
# channels launched 128-pixel × 32-channel blocks, ResNet-50's of 64-256 channels 256 × 64). cuDNN 9.19's sm_90
# module ships these and 32×32; 8.9.2's (the data set's) ships 64×64 and 64×32 instead of 128×32 (tests/data/real/
# library-kernels): the model keeps the tiles of the library rooflow's users and recordings run
IMPLICIT_GEMM_TILES_OF = {"sm_90": ((256, 64), (128, 32))}
FUSED_WINOGRAD_TILES = ((128, 128),)
# Architectures whose FP32 forward convolutions cuDNN runs without Winograd: every 3×3 stride-1 forward
# convolution recorded on the H100 (VGG16, ResNet-50: cuDNN 9, ncu) and the H200 (five FP32 steps,
# torch.profiler) ran sm80_xmma_fprop_implicit_gemm or FFT kernels (Winograd only in weight gradients). Not only
# cuDNN 9's choice: neither 8.9.2 (the data set's library) nor 9.19 ships a fused FP32 Winograd kernel for sm_90,
# and both ship one for every older architecture (tests/data/real/library-kernels, read from the libraries); Ada
# (sm_89) loads sm_80's and sm_86's modules, which have it, so it keeps the data set's picks.
NO_FORWARD_WINOGRAD = ("sm_90",)
# Architectures whose FP32 kernels no other architecture runs: cuBLAS 12.1 and 13 and cuDNN 8.9.2 and 9.19 ship
# their sm_90 modules to Hopper alone (no ampere_sgemm, scudnn or fused Winograd there), while Ada (sm_89) loads
# the sm_80 and sm_86 modules Ampere runs (tests/data/real/library-kernels). A measured board of such an
# architecture (rooflow's H200 single ops) calibrates its own architecture only, not its family's other boards
OWN_KERNELS = ("sm_90",)
# There cuDNN's alternative is FFT: the H200's 3×3 stride-1 convolutions of 28×28 and 14×14 inputs ran
# fft2d_r2c_32x32 / 16x16 transforms around a complex GEMM per frequency (sm80_xmma_gemm_cf32cf32), at 2.3–2.5×
# their direct rate; those of 56×56 inputs ran 64×64 transforms with a pointwise kernel instead of a GEMM, at the
# direct rate (so not modelled: direct). The transform sizes it ran, over the padded input:
FFT_SIZES = (16, 32)
# The shipped H100 calibration's classes whose kernels its SMs, not its memory, bound: an H200 (the same SMs, 1.43x
# the bandwidth) ran them in the H100's time, kernel by kernel (rooflow.estimate.calibration.sm_bound_bandwidth).
# A GPU with less memory per SM cycle than the H100 runs them at the H100's bytes per SM cycle, a larger share of
# its memory, up to its own streaming rate (carry_sm_bound). Checked on published ResNet-50 steps of GPUs rooflow
# never recorded a step on (tests/data/published), before and after: 28 of 29 within ±25%, mean |error| 8.0%, and
# 29 of 29, 5.5%; the V100's fp16 and FP32 training 0.77 and 0.87 -> 0.96 and 0.97, the A10's fp16 0.70 -> 0.94 and
# its TF32 0.98 -> 1.22, the H100 PCIe's fp16 0.85 -> 0.95 and TF32 0.97 -> 1.06 (benchmarks/README.md,
# "Published steps")
SM_BOUND_CLASSES = ("normalization_training", "max_pool", "elementwise_indexed")
# Architecture families: a GPU without measurements takes the parameters of measured GPUs of its family —
# one SM design on one process node: Pascal (16 nm), Volta and Turing (12 nm, 64 FP32 lanes and 4
# sub-cores per SM), Ampere (7/8 nm), Ada and Hopper (4N). The node sets the energy of a FLOP, so a family's
# FP32 GEMM throughput per watt carries over to a board with another power limit (a T4 at 70 W sustains
# far less than its boost-clock datasheet peak; a V100 at 250 W nearly all of it).
FAMILIES = {"sm_60": "pascal", "sm_61": "pascal", "sm_70": "volta-turing", "sm_72": "volta-turing",
            "sm_75": "volta-turing", "sm_80": "ampere", "sm_86": "ampere", "sm_87": "ampere",
            "sm_89": "ada-hopper", "sm_90": "ada-hopper"}
# Architecture generations within a family: one chip design and one cuBLAS heuristic. The P100 (GP100) and P4
# (GP104) ran the same SGEMM kernel for 88% of the data set's 24,202 GEMM shapes both measured; the V100 and the
# T4 (Turing, a generation of its own on Volta's node) for 27%.
# The families' process nodes, oldest first (an architecture FAMILIES does not list is taken as the newest): a
# node's FP32 FLOPs per joule bound those of a board on the same or a newer node from below, not an older one's
FAMILY_NODES = ("pascal", "volta-turing", "ampere", "ada-hopper", "ampere+")
GENERATIONS = {"sm_60": "pascal", "sm_61": "pascal", "sm_70": "volta", "sm_72": "volta", "sm_75": "turing",
               "sm_80": "ampere", "sm_86": "ampere", "sm_87": "ampere", "sm_89": "ada", "sm_90": "hopper"}
# The measured GPUs: the data set's name → (catalogue key or None, architecture). The data set's
# device_configs/*.json give SMs, clock, FP32 peak, bandwidth and L2 of each.
# Board power from the datasheets (P4: 75 W; the others are in config/devices.yaml).
DATASET_GPUS = {"Tesla P100-PCIE-16GB": ("p100-pcie-16gb", "sm_60", 250.0), "Tesla P4": (None, "sm_61", 75.0),
                "Tesla T4": ("t4", "sm_75", 70.0), "Tesla V100-PCIE-32GB": ("v100-pcie-16gb", "sm_70", 250.0),
                "NVIDIA A100-PCIE-40GB": ("a100-pcie-40gb", "sm_80", 250.0)}
# Base and boost clocks (MHz, TechPowerUp's GPU database) of the measured GPUs the catalogue has no entry of
# their own for (the V100 32GB's key is the 16GB's, whose base clock differs); the others' are the catalogue's
DATASET_CLOCKS = {"Tesla P4": (886, 1114), "Tesla V100-PCIE-32GB": (1230, 1380)}
# cuBLAS's FP32 batched GEMM (torch.bmm) runs one tile whatever the shape on some architecture generations:
# 128×128 on Ampere (ampere_sgemm_128x128: 16,588 of the A100's 16,661 bmm calls in the data set), 128×64 on
# Pascal (17,720 of the P100's 17,792); Volta and Turing pick by shape (64×64, 32×128, 128×64, 128×32). Ada
# loads Ampere's sm_80 modules, ampere_sgemm's among them. Hopper cannot: cuBLAS 12.1 (the data set's) and 13
# ship ampere_sgemm as sm_80 code only, no PTX (tests/data/real/library-kernels), so its batched GEMMs run
# sm80_xmma_gemm_f32f32 and cutlass_80_simt_sgemm in tiles picked by shape (the H200's 500 bmm calls: 32×32 in
# 321, 64×64, 64×32, 128×32, 32×64 in most others) and take every SGEMM tile here.
BATCHED_TILES = {"pascal": (128, 64), "ampere": (128, 128), "ada": (128, 128)}  # by GENERATIONS
# A family whose FP32 GEMMs run another family's kernels (those same recordings: Ampere's multistage SIMT SGEMMs,
# cutlass_80_simt_sgemm_*_8x5, on the H100): where none of its own single ops were measured, its GEMM tile
# exponent and k fill are that family's, and so is how fast its memory-bound GEMMs stream against its own
# elementwise ops — a property of the kernels, the rate of the memory: Ampere's SGEMMs stream at 1.05x the
# A100's elementwise DRAM efficiency (0.92 against 0.87), Pascal's at 0.87-0.91x theirs, Volta's and Turing's at
# 0.59-0.69x.
# Its FP32 efficiency stays its own measured roof's and board power's, and that family's measured shapes stay
# out: the A100's residuals at an 8192³ product would move the H100's FP32 torch.mm off the roof it was
# measured at (52.9 to 45.6 TFLOP/s predicted, 52.1 measured by others)
FP32_GEMM_KERNELS_OF = {"ada-hopper": "ampere"}
# Architectures whose SMs reach their datasheet FP32 peak only by issuing an FP32 FMA from every scheduler at every
# clock: 32 FP32 lanes per scheduler and one dispatch per clock (GA10x and AD10x: 16 FP32 lanes and 16 that FP32
# shares with INT32; GH100: 32 FP32 lanes; the architecture whitepapers), where GA100, GV100 and TU10x have 16 (a
# warp's FMA takes two clocks, leaving the scheduler free for the loads and address arithmetic around it) and
# Pascal two dispatch units per scheduler. An SGEMM's other instructions then come out of its FMA rate: third-party
# FP32 torch.mm (github.com/zzc0721/torch-performance-test-data, 30 calls back to back) runs at 0.52-0.71 of the
# datasheet peak on desktop and workstation GA102, AD102, AD104 and AD106 boards (RTX 3090, 3080 Ti, A6000, 4090,
# 4090D, 4070 SUPER, 4060 Ti: 18 rows, 16 of them 0.62-0.71) and 0.78 on the H100, against 0.93-0.98 on the A100s
# and the A800, 0.92 on an RTX 2080, 0.83 on a V100S
ISSUE_BOUND_FP32 = ("sm_86", "sm_87", "sm_89", "sm_90")
# cuBLAS's FP32 nn.Linear GEMMs (sgemm "tn") on Pascal take the small tiles only: maxwell_sgemm_32x128_tn,
# 64x64_tn and 128x32_tn for every one of the P100's and the P4's 6,423 linear calls in the data set, the
# largest included (the P100 runs its linear calls of over 0.3 s at 26% of its FP32 peak); Volta, Turing and
# Ampere pick 128×128 and 128×64 for large ones. Pascal's GEMM efficiency (at a 128×128 tile, as every
# family's) is then cuDNN's too, whose implicit GEMMs tile 128 output pixels
LINEAR_TILES = {"pascal": ((128, 32), (32, 128), (64, 64))}
# GPUs whose L2 is two partitions, each caching the data its own GPCs' SMs touch (A100 whitepaper: "Each L2
# partition localizes and caches data for memory accesses from SMs in the GPCs directly connected to the
# partition"): a working set every SM streams is held in both, so half the L2 holds it. GA100 (sm_80); GH100
# (sm_90) assumed built alike (no H100 single ops here to check it). The A100's own elementwise fit put the
# working set that stays in L2 at 0.49 of its 40 MB; held out, the other four GPUs' median (1.7 L2s) over-
# predicted its 10–80 MB calls by 1.4–2.0×: elementwise 85% within ±25% on the full data, 98% with the half.
PARTITIONED_L2 = ("sm_80", "sm_90")
# PyTorch's FP32 softmax runs one of two kernels by row length (the data set's kernel names, on every GPU: 1,049
# calls of softmax_warp_forward for rows of 1 to 1,023 elements, 701 of cunn_SoftMaxForward for 1,025 to 4,094):
# a warp per row that holds the row in registers (read once, written once) up to this many elements, else a block
# per row that reads it three times (its maximum, the sum of exponentials, the output). The softmax class's
# ``block_bytes`` is the block kernel's traffic over the one-pass kernel's: what the caches leave of the two
# re-reads (fitted 1.11 on the T4 to 1.41 on the A100)
SOFTMAX_WARP_MAX_ELEMENTS = 1024
# PyTorch's LayerNorm kernel (vectorized_layer_norm_kernel) runs one block per row: besides streaming its bytes,
# each row costs its block's two reductions, however short the row. Seconds per row per SM, by architecture, where
# rooflow recorded it: on the H200 (sm_90), its ViT-B/16 b256 FP32 inference (25 LayerNorms of 50,432 rows × 768,
# torch.profiler) less their bytes at its architecture's measured triad (the H100's ceilings). The same GPU's
# ConvNeXt-T LayerNorms of 96–768 per row and 12,544–802,816 rows, its ViT-B/16 b32 ones, are the check
# (`test_h200_layer_norms_against_the_kernel_model`). The data set's GPUs (rows ≤ 16,380 of 260 or more) fit
# their rows' cost into their other parameters: 0 there
NORMALIZATION_ROW_SECONDS_OF = {"sm_90": 1.94e-7}
# A measured GPU's memory-bound GEMMs streaming at under this share of its elementwise kernels' rate are bound by
# its SMs, not its memory (the H200's GEMVs at 0.57 of it, the V100's at 0.59); near it, by its memory (the A100's
# GEMMs 1.05, the V100's convolutions 0.99): which decides how a sibling with other memory streams them
SM_BOUND_SHARE = 0.8
# The convolution parameters that are the measuring host's, not the GPU's (:func:`host_drift`)
CONVOLUTION_HOST_KEYS = ("floor_seconds", "drift_seconds_per_call", "drift_from_call")
FLOOR_QUANTILE = 0.02  # an operator's launch floor: this quantile of its calls (the fastest one can be an outlier)
# A power-limited board's clock falls from its boost clock towards the share its power sustains with this time
# constant into a kernel, as GPU Boost's power average catches up (the measured low-power boards: a T4's FP32
# GEMMs reach 0.58 of its datasheet peak at 0.1–0.3 ms, 0.39 beyond 10 ms). Before 2026-12-01 a step at 0.3 ms;
# held one out, the decay predicts the T4 and the P4 1–3 points better, and 0.6 or 1.2 ms trade the T4's GEMMs
# for its convolutions (benchmarks/README.md, "A power-limited board's clock falls smoothly")
BOOST_TIME_CONSTANT_SECONDS = 3e-4
FULL_POWER_WATTS = 150.0  # boards of this power or more sustain their boost clock under FP32 GEMM
MEASURED_UNCERTAINTY = 0.25  # a GPU whose own kernels were measured
FAMILY_UNCERTAINTY = 0.4  # a GPU predicted from its family's measurements and its datasheet


@dataclass(frozen=True)
class Gpu:
    """What the kernel model reads from a GPU's datasheet (SI units)."""

    name: str
    architecture: str
    sm_count: int
    fp32_flops_per_second: float
    dram_bytes_per_second: float
    l2_bytes: float
    tdp_watts: float | None = None
    # base clock / boost clock: the least of its boost-clock rate a board keeps at its power limit
    base_clock_fraction: float | None = None

    @property
    def family(self) -> str:
        return FAMILIES.get(self.architecture, "ampere+")

    @property
    def generation(self) -> str:
        """Its architecture generation (:data:`GENERATIONS`; an unlisted architecture is its own)."""
        return GENERATIONS.get(self.architecture, self.architecture)

    @property
    def full_power(self) -> bool:
        """A board of :data:`FULL_POWER_WATTS` or more: it holds its boost clock under FP32 GEMM."""
        return (self.tdp_watts or 0) >= FULL_POWER_WATTS

    @property
    def shared_l2_bytes(self) -> float:
        """The L2 a working set streamed by all SMs can occupy: half of it on a GPU whose L2 is two partitions
        that each cache the data their own SMs touch (GA100, GH100: :data:`PARTITIONED_L2`)."""
        return self.l2_bytes / 2 if self.architecture in PARTITIONED_L2 else self.l2_bytes


def gpu_from_config(data: dict[str, Any], architecture: str, tdp_watts: float | None = None,
                    base_clock_fraction: float | None = None) -> Gpu:
    """A :class:`Gpu` from a NeuSight ``device_configs/*.json`` (MB, GB/s, GFLOP/s units)."""
    return Gpu(name=data["Device"], architecture=architecture, sm_count=int(data["Num_Sm"]),
               fp32_flops_per_second=float(data["SingleFLOPs"]) * 1e9,
               dram_bytes_per_second=float(data["Mem_Bw"]) * 1e9, l2_bytes=float(data["L2Cache"]) * 2**20,
               tdp_watts=tdp_watts, base_clock_fraction=base_clock_fraction)


def gpu_from_device(device) -> Gpu | None:
    """A :class:`Gpu` from a catalogue :class:`rooflow.hardware.devices.Device` (None: not a GPU, or no L2 size)."""
    if not device.is_cuda or not device.sm_count or not getattr(device, "l2_cache_bytes", None):
        return None
    base, boost = getattr(device, "base_clock_mhz", None), getattr(device, "boost_clock_mhz", None)
    return Gpu(name=device.name, architecture=device.architecture or "", sm_count=int(device.sm_count),
               fp32_flops_per_second=float(device.peak_flops_per_second["fp32"]),
               dram_bytes_per_second=float(device.dram_bytes_per_second), l2_bytes=float(device.l2_cache_bytes),
               tdp_watts=getattr(device, "tdp_watts", None), base_clock_fraction=clock_fraction(base, boost))


def clock_fraction(base_mhz: float | None, boost_mhz: float | None) -> float | None:
    """Base clock ÷ boost clock (None where either is unknown)."""
    return round(base_mhz / boost_mhz, 4) if base_mhz and boost_mhz else None


# ------------------------------------------------------------------------------------------ measurements
def load_measurements(root: str | Path, gpus: list[str] | None = None) -> pd.DataFrame:
    """All measured rows under ``root`` (``<operator>/<GPU>.csv(.gz)``, NeuSight's layout): one row per call
    with ``operator``, ``op_class``, ``gpu`` (the data set's device name), ``seconds`` and the shape
    columns (conv: B, Input_Channel, Output_Channel, Kernel_Szie, Input_Size, Stride, Padding, and the
    ``algorithm`` cuDNN ran where the file names its kernels; linear/bmm: B, M, N, K; the others: B, H)."""
    if why := missing(root, folder=True):  # it said "no single-op measurements found" of a mistyped path
        raise RooflowError(f"{root}: {why}: give the folder of <operator>/<GPU>.csv(.gz) files (`rooflow ceilings "
                           f"--single-ops DIR` writes one)")
    frames = []
    for operator in OPERATORS:
        for path in sorted((Path(root) / operator).glob("*.csv*")):
            frame = _read_measurement_file(path, operator)
            if gpus is not None and not frame["Device"].isin(gpus).any():
                continue
            frame["operator"] = operator
            frames.append(frame)
    if not frames:
        raise RooflowError(f"{root}: no single-op measurements found: expected <operator>/<GPU>.csv(.gz) files "
                           f"(operators {', '.join(OPERATORS)}) beside device_configs/<GPU>.json, the public "
                           f"NeuSight data set's layout")
    data = pd.concat(frames, ignore_index=True)
    data["op_class"] = data["operator"].map(lambda o: OPERATORS[o][0])
    data["gpu"] = data["Device"]
    data["seconds"] = data["Latency"] * 1e-3  # the data set's latencies are milliseconds
    return data


# The columns each operator's file needs (besides Device and Latency): the call's shape
SHAPE_COLUMNS = {"conv": ("B", "Input_Channel", "Output_Channel", "Kernel_Szie", "Input_Size", "Stride", "Padding"),
                 "linear": ("B", "M", "N", "K"), "bmm": ("B", "M", "N", "K")}
# An operator's calls measured over this multiple of what the kernel model prices them at with its default
# parameters on the GPU's datasheet (median over its calls), or under its inverse: a file in another unit than
# milliseconds. The measured data sets' operators sit at 0.48-1.66 of it; latencies in microseconds at ~1,000 (they
# fitted every class to its bounds, floors of 26-58 ms, ResNet-18 on a T4 at 27 ms), in seconds at ~0.001
UNIT_RATIO = 30.0
# What a device_configs/<GPU>.json must give (NeuSight's units: GFLOP/s, GB/s, MB)
CONFIG_KEYS = ("Device", "Num_Sm", "SingleFLOPs", "Mem_Bw", "L2Cache")


def _read_measurement_file(path: Path, operator: str) -> pd.DataFrame:
    """One ``<operator>/<GPU>.csv(.gz)``, checked: a damaged, truncated or foreign file ends in one sentence
    naming it, never in a fit on half its rows."""
    needed = ("Device", "Latency", *SHAPE_COLUMNS.get(operator, ("B", "H")))
    layout = f"columns {', '.join(needed)}, Latency in milliseconds: the NeuSight data set's layout"
    try:
        # a convolution's kernels name the algorithm cuDNN's autotuner ran (the other files' are not read)
        kept = ("Kernels",) if operator == "conv" else ()
        frame = pd.read_csv(path, usecols=lambda c: c not in ("Kernels", "Kernel Name") or c in kept)
    except (OSError, EOFError, UnicodeDecodeError, ValueError) as error:  # bad gzip, cut short, empty, binary
        raise RooflowError(f"{path}: not a readable file of {operator} measurements ({type(error).__name__}: "
                           f"{error}): copy it again, or measure it again with `rooflow ceilings --single-ops`"
                           ) from None
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise RooflowError(f"{path}: no column {', '.join(missing)}: not a file of {operator} measurements (expected "
                           f"{layout})")
    if frame.empty:  # a header alone: a fit would hold nothing of this GPU, and a check nothing to score
        raise RooflowError(f"{path}: no measurements in it, only its header: the run that wrote it stopped before "
                           f"its first call; measure it again with `rooflow ceilings --single-ops`, or remove it")
    numbers = frame[list(needed[1:])].apply(pd.to_numeric, errors="coerce")
    bad = ~np.isfinite(numbers.to_numpy(float)).all(axis=1) | (numbers["Latency"].to_numpy(float) <= 0) \
        | frame["Device"].isna().to_numpy()
    if bad.any():
        line = int(np.flatnonzero(bad)[0]) + 2  # the header is line 1
        raise RooflowError(f"{path}: {int(bad.sum())} of {len(frame)} rows lack a number or a positive Latency "
                           f"(the first at line {line}): a truncated or damaged file; measure it again or remove "
                           f"those rows ({layout})")
    shapes = numbers[list(needed[2:])].to_numpy(float)
    # a size below 1 (a padding below 0) or not whole — a negated B, an H of 0: an add of nothing "taking" 26 µs — is
    # no call's: the fit ran on, pinned its classes at their bounds and wrote a calibration that priced ResNet-18 1.8x
    least = np.array([0.0 if column == "Padding" else 1.0 for column in needed[2:]])
    odd_cells = (shapes < least) | (shapes != np.floor(shapes))
    odd = odd_cells.any(axis=1)
    if odd.any():
        row = int(np.flatnonzero(odd)[0])
        column = needed[2:][int(np.argmax(odd_cells[row]))]
        raise RooflowError(f"{path}: {int(odd.sum())} of {len(frame)} rows have a shape that is not a whole number of "
                           f"1 or more (0 or more for Padding; the first at line {row + 2}: {column} "
                           f"{numbers[column].iloc[row]:g}): shapes are tensor sizes; measure it again or remove those "
                           f"rows ({layout})")
    frame[list(needed[1:])] = numbers
    if "Kernels" in frame:
        frame["algorithm"] = frame.pop("Kernels").map(convolution_algorithm)
    frame["run_order"] = np.arange(len(frame))  # a file's rows are its measuring run's calls, in order
    return frame


def convolution_algorithm(kernels) -> str | None:
    """The algorithm of one cuDNN forward convolution from the names of the kernels it launched: ``fused``
    (scudnn_winograd_*: one kernel; any other Winograd kernel too, so that a library naming its own otherwise is
    never read as implicit GEMM, whose parameters are fitted on those calls), ``nonfused``
    (winograd_nonfused::winogradForwardData/Filter/Output around an SGEMM), ``fft`` (fft2d_r2c/c2r around a complex
    GEMM), else ``direct`` (implicit or explicit GEMM); None where no kernel was recorded."""
    if not isinstance(kernels, str) or not kernels.strip(";"):
        return None
    names = kernels.lower()
    if "winograd_nonfused" in names:
        return "nonfused"
    if "winograd" in names:
        return "fused"
    if "fft" in names:
        return "fft"
    return "direct"


def load_dataset_gpus(root: str | Path, measured=()) -> dict[str, Gpu]:
    """The :class:`Gpu` of each measured GPU, from the data set's ``device_configs`` (its architecture and
    board power from :data:`DATASET_GPUS`, else from the catalogue entry of that name, :func:`dataset_gpu_identity`;
    its SM count the one its own launches report, :func:`launched_sm_count`, where they do);
    ``measured``: GPU names the measurements give, each of which must have its file."""
    gpus = {}
    for name, (path, data) in _device_configs(root).items():
        key, architecture, tdp_watts = dataset_gpu_identity(name, path, data)
        base, boost = DATASET_CLOCKS.get(name) or _catalogue_clocks(key)
        gpu = gpu_from_config(data, architecture, tdp_watts, clock_fraction(base, boost))
        launched = launched_sm_count(root, name)
        gpus[name] = replace(gpu, sm_count=launched) if launched else gpu
    unconfigured = sorted(set(measured) - set(gpus))
    if unconfigured:
        raise RooflowError(f"{Path(root) / 'device_configs'}: no config of {unconfigured[0]!r}, whose single ops are "
                           f"measured there: add a JSON file with {', '.join(CONFIG_KEYS)} (\"Device\": "
                           f"{json.dumps(unconfigured[0])}; SMs, FP32 GFLOP/s, DRAM GB/s, L2 MB)")
    return gpus


# the launch columns of a measurement file: grid blocks over "Blocks per SM" is the SM count the profiler saw
LAUNCH_COLUMNS = ("Device", "Grid x", "Grid y", "Grid z", "Blocks per SM")


def launched_sm_count(root: str | Path, name: str) -> int | None:
    """The SM count ``name``'s own launches report under ``root`` (grid blocks ÷ "Blocks per SM", which the
    profiler computes from the board it ran on) in the first of its linear, bmm and conv files, where that file's
    rows carry them and all agree; None otherwise (rooflow's own single ops carry no launch columns). It overrides
    a device config's Num_Sm: the data set's Tesla_P4.json says 40 (× 64 lanes), every one of the P4's 29,198
    GEMM and convolution launches 20 (GP104: 20 SMs of 128 lanes; test_the_data_sets_launches_count_the_p4s_sms_as_20)."""
    for operator in ("linear", "bmm", "conv"):
        for path in sorted((Path(root) / operator).glob("*.csv*")):
            try:
                frame = pd.read_csv(path, usecols=lambda c: c in LAUNCH_COLUMNS)
            except (OSError, EOFError, UnicodeDecodeError, ValueError):
                return None  # load_measurements names the damaged file
            if set(frame.columns) != set(LAUNCH_COLUMNS) or not (frame["Device"] == name).any():
                continue
            rows = frame[frame["Device"] == name]
            per_sm = pd.to_numeric(rows["Blocks per SM"], errors="coerce").to_numpy(float)
            blocks = rows[["Grid x", "Grid y", "Grid z"]].apply(pd.to_numeric, errors="coerce").prod(axis=1)
            counts = np.unique(np.round(blocks.to_numpy(float) / per_sm)[per_sm > 0])
            counts = counts[np.isfinite(counts)]
            return int(counts[0]) if len(counts) == 1 and counts[0] > 0 else None
    return None


def dataset_gpu_keys(root: str | Path) -> dict[str, str | None]:
    """The catalogue key of each GPU of ``root``'s ``device_configs`` (None: a data-set GPU the catalogue lacks)."""
    return {name: dataset_gpu_identity(name, path, data)[0] for name, (path, data) in _device_configs(root).items()}


def config_disagreements(root: str | Path, bandwidth_tolerance: float = 0.15) -> list[str]:
    """A line for each GPU of ``root``'s ``device_configs`` whose SMs or DRAM bandwidth are not those of the
    catalogue board it is predicted as (a config named "Tesla V100" holding a T4's 40 SMs and 320 GB/s was said
    to match the V100): the prediction takes the config's numbers with that board's architecture and clocks."""
    from rooflow.hardware.devices import default_catalogue_path, load_devices

    devices = load_devices(default_catalogue_path())
    lines = []
    for name, (path, data) in _device_configs(root).items():
        key = dataset_gpu_identity(name, path, data)[0]
        device = devices.get(key) if key else None
        if device is None or not device.sm_count or not device.dram_bytes_per_second:
            continue
        sms, bandwidth = int(data["Num_Sm"]), float(data["Mem_Bw"]) * 1e9
        off = abs(bandwidth / device.dram_bytes_per_second - 1) > bandwidth_tolerance
        if sms != device.sm_count or off:
            lines.append(f"{path}: {name} is predicted as the catalogue's {key} ({device.name}: {device.sm_count} "
                         f"SMs, {device.dram_bytes_per_second / 1e9:.0f} GB/s), but its config gives {sms} SMs and "
                         f"{bandwidth / 1e9:.0f} GB/s: check that the config is this GPU's (its prediction takes "
                         f"the config's numbers with {key}'s architecture and clocks)")
    return lines


def _device_configs(root: str | Path) -> dict[str, tuple[Path, dict[str, Any]]]:
    """``device_configs/*.json`` under ``root`` by the GPU name each gives: (its path, its content)."""
    configs = {}
    for path in sorted((Path(root) / "device_configs").glob("*.json")):
        data = read_json_object(path, f"a device config (a JSON object with {', '.join(CONFIG_KEYS)})")
        missing = [key for key in CONFIG_KEYS if key not in data]
        if missing:
            raise RooflowError(f"{path}: no {', '.join(missing)} in this device config: give {', '.join(CONFIG_KEYS)} "
                               f"(SMs, FP32 GFLOP/s, DRAM GB/s, L2 MB)")
        _check_config_numbers(path, data)
        configs[data["Device"]] = (path, data)
    return configs


# What each number of a device config is, for the sentence that refuses a wrong one.
CONFIG_NUMBERS = {"Num_Sm": "SM count, a positive whole number", "SingleFLOPs": "FP32 GFLOP/s, a positive number",
                  "Mem_Bw": "DRAM GB/s, a positive number", "L2Cache": "L2 size in MB, a positive number"}


def _check_config_numbers(path: Path, data: dict[str, Any]) -> None:
    """A device config's SMs, GFLOP/s, GB/s and MB are positive finite numbers (the SM count whole): a zero or
    negative one calibrated NaN efficiencies that estimate then used, without a word."""
    if not isinstance(data["Device"], str) or not data["Device"].strip():
        raise RooflowError(f"{path}: its Device is {data['Device']!r}: give the GPU's name, e.g. \"Tesla T4\"")
    for key, meaning in CONFIG_NUMBERS.items():
        value = data[key]
        number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        whole = key != "Num_Sm" or (number is not None and float(number).is_integer())
        if number is None or not math.isfinite(number) or number <= 0 or not whole:
            raise RooflowError(f"{path}: its {key} is {value!r}: give the GPU's {meaning} (from its datasheet)")


def _catalogue_gpu(name: str, config: dict[str, Any] | None = None):
    """(key, device) of the catalogue's CUDA GPU (with its architecture) of that name, or (None, None). A name
    the catalogue does not spell alike ("NVIDIA H100 SXM5 80GB", "A100-PCIE-80GB") is its board of the same model
    (:func:`rooflow.hardware.devices.model_boards`) whose datasheet is the config's (SMs, then the nearest DRAM
    bandwidth), then whose name is the most alike: boards of one model share their architecture, so their kernels."""
    from difflib import SequenceMatcher

    from rooflow.hardware.devices import default_catalogue_path, load_devices, model_boards

    gpus = {key: device for key, device in load_devices(default_catalogue_path()).items()
            if device.is_cuda and device.architecture}
    for key, device in gpus.items():
        if device.name == name:
            return key, device
    boards = [(key, gpus[key]) for key in model_boards(name, gpus)]
    if not boards:
        return None, None

    def spelled(text: str) -> str:
        return re.sub(r"[^a-z0-9]", "", text.lower())

    def unlike(board) -> tuple[float, ...]:
        device = board[1]
        name_gap = 1 - SequenceMatcher(None, spelled(name), spelled(device.name)).ratio()
        if not config:
            return (name_gap,)
        bandwidth = float(config["Mem_Bw"]) * 1e9
        return (float(int(config["Num_Sm"]) != device.sm_count),
                abs(math.log(bandwidth / device.dram_bytes_per_second)) if bandwidth > 0 else 0.0, name_gap)

    return min(boards, key=unlike)


def _catalogue_clocks(key: str | None) -> tuple[float | None, float | None]:
    """(base, boost) clock in MHz of the catalogue GPU under ``key`` ((None, None) where there is none)."""
    from rooflow.hardware.devices import default_catalogue_path, load_devices

    device = load_devices(default_catalogue_path()).get(key) if key else None
    return (device.base_clock_mhz, device.boost_clock_mhz) if device else (None, None)


def dataset_gpu_identity(name: str, where: str | Path = "", config: dict[str, Any] | None = None
                         ) -> tuple[str | None, str, float | None]:
    """(catalogue key, architecture, board watts) of a GPU by the name its measurements give it (``config``: its
    device config, whose datasheet picks among the boards of its model where the name is not the catalogue's)."""
    if name in DATASET_GPUS:
        return DATASET_GPUS[name]
    key, device = _catalogue_gpu(name, config)
    if device is not None:
        return key, device.architecture, getattr(device, "tdp_watts", None)
    raise RooflowError(f"{where or name}: GPU {name!r} is not in rooflow's device catalogue: add it to "
                     f"config/devices.yaml with its architecture (sm_XX) and tdp_watts, named exactly {name!r}")


# ------------------------------------------------------------------------------------------ work of a call
def _gemm_views(rows: pd.DataFrame) -> tuple[np.ndarray, ...]:
    """(m, n, k, count, bytes) of each linear/bmm/conv row as a GEMM (conv: its implicit-GEMM view)."""
    operator = rows["operator"].to_numpy()
    b = rows["B"].to_numpy(float)
    m = np.zeros(len(rows))
    n, k, count, moved = m.copy(), m.copy(), np.ones(len(rows)), m.copy()
    linear, bmm, conv = operator == "linear", operator == "bmm", operator == "conv"
    if linear.any() or bmm.any():
        mm, nn_, kk = (rows[c].to_numpy(float) for c in ("M", "N", "K"))
        # nn.Linear(N, K) on (B, M, N): one GEMM of B·M rows, K outputs, N deep (+ the bias row)
        m[linear], n[linear], k[linear] = (b * mm)[linear], kk[linear], nn_[linear]
        moved[linear] = FP32_BYTES * (b * mm * nn_ + nn_ * kk + b * mm * kk + kk)[linear]
        # torch.bmm (B, M, N) @ (B, N, K): B GEMMs of M × K outputs, N deep
        m[bmm], n[bmm], k[bmm], count[bmm] = mm[bmm], kk[bmm], nn_[bmm], b[bmm]
        moved[bmm] = FP32_BYTES * (b * (mm * nn_ + nn_ * kk + mm * kk))[bmm]
    if conv.any():
        cin, cout, kernel, size, stride, padding = (rows[c].to_numpy(float) for c in (
            "Input_Channel", "Output_Channel", "Kernel_Szie", "Input_Size", "Stride", "Padding"))
        out = np.floor((size + 2 * padding - kernel) / stride) + 1
        m[conv], n[conv], k[conv] = (b * out * out)[conv], cout[conv], (cin * kernel * kernel)[conv]
        moved[conv] = FP32_BYTES * (b * cin * size * size + cout * cin * kernel * kernel + b * cout * out * out)[conv]
    return m, n, k, count, moved * _element_bytes(rows) / FP32_BYTES


def _element_bytes(rows: pd.DataFrame) -> np.ndarray | float:
    """Bytes per operand element of each row: FP32's, but an estimate's 16-bit operands where its rows say so (an
    ``element_bytes`` column: rooflow.estimate.kernel_ops.fp32_arithmetic)."""
    return rows["element_bytes"].fillna(FP32_BYTES).to_numpy(float) if "element_bytes" in rows else FP32_BYTES


def _rows_by_columns(tiles) -> tuple[tuple[int, int], ...]:
    """cuBLAS's SGEMM tiles, named as in its kernels ("maxwell_sgemm_128x64"), as the model's (output rows, output
    columns). cuBLAS is column-major and runs torch's row-major product as its transpose, so a name's first number
    tiles the output's columns: the grid of every named SGEMM call of the data set (79,000, five GPUs) is
    ceil(columns / first) × ceil(rows / second) (test_cublas_tiles_name_the_output_columns_first). cuDNN's
    implicit-GEMM names tile output pixels first, as the model does (IMPLICIT_GEMM_TILES)."""
    return tuple((rows, columns) for columns, rows in tiles)


@dataclass
class _ShapeTable:
    """Per candidate (tile, split-K) of each row: padding × waves × reduction cost, and k per part."""

    intensity: list[float]  # per candidate: the tile's outputs per operand element, relative to the largest
    base: np.ndarray  # candidates × rows
    k_part: np.ndarray
    # candidates × rows: bytes per FLOP of its operands' re-reads that the L2 cannot hold (None: no L2 given)
    reread: np.ndarray | None = None
    # the last (tile_exponent, fill_k) asked of _candidate_factors and its result: a fit scans one parameter at a
    # time, and most (efficiency, memory_efficiency, sustained, ...) leave these two as they were
    last: tuple = field(default=(None, None), repr=False, compare=False)


def _shape_table(m, n, k, count, sm_count: int, batched=None, batched_tile=None, split_k: bool = True,
                 tiles=SGEMM_TILES, linear_tiles=None, l2_bytes: float | None = None) -> _ShapeTable:
    """``batched``: rows that are batched GEMMs (torch.bmm), which cuBLAS does not split along k (none of the
    data set's 88,000 bmm calls launched a split-K reduction; 2–11% of its linear calls did) and runs with
    its architecture's one ``batched_tile`` where it has one (:data:`BATCHED_TILES`). ``split_k`` False: no
    row splits k (cuDNN's forward convolutions: none of the data set's 20,000 launched a split-K kernel, so a
    convolution of few output tiles and many input channels runs on few SMs). ``linear_tiles``: the tiles the
    rows that are not batched take, where their architecture has a set of its own (:data:`LINEAR_TILES`).
    ``l2_bytes``: the GPU's L2. A tile reads its rows of A (tile m × k) once and its columns of B (tile n × k)
    once, so A is read once per tile column and B once per tile row; the part of an operand beyond the L2 is
    re-read from DRAM: ``reread``, 4 bytes × (A's share beyond the L2 / tile n + B's / tile m) / 2 per FLOP (a
    batched row's operands are one product's). FP32 operands whatever an estimate's: a 16-bit product without
    tensor cores runs as fast as its FP32 one, not faster (test_16_bit_products_without_their_units_are_fp32_arithmetic)."""
    largest = max(tm * tn / (tm + tn) for tm, tn in SGEMM_TILES)
    intensity, bases, parts, rereads = [], [], [], []
    if l2_bytes:
        a_beyond = np.maximum(0.0, 1.0 - l2_bytes / (FP32_BYTES * m * k))
        b_beyond = np.maximum(0.0, 1.0 - l2_bytes / (FP32_BYTES * n * k))
    batched_rows = np.zeros(len(m), bool) if batched is None else np.asarray(batched, bool)
    unsplit = np.ones(len(m), bool) if not split_k else batched_rows
    for tm, tn in tiles:
        tiles_m, tiles_n = np.ceil(m / tm), np.ceil(n / tn)
        padding = (m * n) / (tiles_m * tm * tiles_n * tn)
        tiles = tiles_m * tiles_n * count
        # the batched tile binds batched rows only (a convolution is unsplit, not batched: it keeps ``tiles``)
        allowed = ~batched_rows if batched_tile and (tm, tn) != tuple(batched_tile) else np.ones(len(m), bool)
        if linear_tiles is not None and batched is not None and (tm, tn) not in linear_tiles:
            allowed = allowed & batched_rows
        for split in (1, 2, 4, 8, 16):
            if split > 1:
                useful = (tiles * split <= 2 * sm_count) & (k / split >= 128) & ~unsplit & allowed
            else:
                useful = allowed
            slots = tiles * split
            waves = np.ceil(slots / sm_count)
            occupancy = slots / (waves * sm_count)  # the last wave runs partly empty
            reduction = 1.0 / (1.0 + 0.02 * math.log2(split))
            intensity.append(tm * tn / (tm + tn) / largest)
            bases.append(np.where(useful, padding * occupancy * reduction, 0.0))
            parts.append(k / split)
            if l2_bytes:
                rereads.append(FP32_BYTES / 2 * (a_beyond / tn + b_beyond / tm))
    return _ShapeTable(intensity, np.array(bases), np.array(parts), np.array(rereads) if rereads else None)


def _candidate_factors(table: _ShapeTable, tile_exponent: float, fill_k: float) -> np.ndarray:
    """Candidates × rows: each candidate's share of the calibrated rate (0 where it does not apply). Read-only:
    the table keeps it for the next call with the same parameters."""
    key, factors = table.last
    if key != (tile_exponent, fill_k):
        quality = np.array(table.intensity)[:, None] ** tile_exponent
        factors = quality * table.base * table.k_part / (table.k_part + fill_k)
        factors.flags.writeable = False
        table.last = ((tile_exponent, fill_k), factors)
    return factors


def _shape_factor(table: _ShapeTable, tile_exponent: float, fill_k: float) -> np.ndarray:
    return _candidate_factors(table, tile_exponent, fill_k).max(axis=0)


# ------------------------------------------------------------------------------------------ parameters
@dataclass(frozen=True)
class KernelCalibration:
    """The kernel model's parameters of one GPU (or one family), per op class; where they came from."""

    source: str
    gpu: str
    relative_uncertainty: float = FAMILY_UNCERTAINTY
    # per class: efficiency, memory_efficiency, floor_seconds, tile_exponent, fill_k, winograd_efficiency,
    # cache_speedup, rows_per_sm, block_bytes — each class uses the ones its formula has
    classes: dict[str, dict[str, float]] = field(default_factory=dict)
    rows: int = 0  # measurements fitted
    # per operator (add, relu, ln, ...): the launch floor of one call of a memory-bound class — the
    # measuring host's dispatch path for that operator, not the GPU's (its class's floor where absent)
    floors: dict[str, float] = field(default_factory=dict)
    # the architecture its measurements were made on: their shapes carry to GPUs of that architecture only
    architecture: str = ""
    # per class (gemm, convolution): the measured shapes' residuals against the model — what the library's
    # kernel picks do by shape (rooflow.estimate.shape_residuals); stored beside the JSON, not in it
    shapes: dict[str, ShapeResiduals] = field(default_factory=dict, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("shapes")
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any], shapes: dict[str, ShapeResiduals] | None = None) -> KernelCalibration:
        return cls(**data, shapes=shapes or {})


DEFAULTS = {
    "gemm": {"efficiency": 0.8, "memory_efficiency": 0.7, "floor_seconds": 30e-6, "tile_exponent": 0.5,
             "fill_k": 64.0, "reread": 0.0},
    "convolution": {"efficiency": 0.7, "memory_efficiency": 0.7, "floor_seconds": 30e-6, "tile_exponent": 0.5,
                    "fill_k": 64.0, "winograd_efficiency": 1.3},
    "elementwise": {"memory_efficiency": 0.8, "floor_seconds": 30e-6, "cache_speedup": 2.0, "l2_fraction": 0.5},
    "normalization": {"memory_efficiency": 0.7, "floor_seconds": 40e-6, "cache_speedup": 2.0, "l2_fraction": 0.5,
                      "rows_per_sm": 4.0},
    "softmax": {"memory_efficiency": 0.7, "floor_seconds": 30e-6, "cache_speedup": 2.0, "l2_fraction": 0.5,
                "rows_per_sm": 4.0, "block_bytes": 1.0},
}
# What a fit adjusts, per class, and how (coordinate search in log space, then the floor in closed form).
FITTED = {"gemm": ("efficiency", "memory_efficiency", "tile_exponent", "fill_k"),
          "convolution": ("efficiency", "memory_efficiency", "tile_exponent", "fill_k", "winograd_efficiency"),
          "elementwise": ("memory_efficiency", "cache_speedup", "l2_fraction"),
          "normalization": ("memory_efficiency", "cache_speedup", "l2_fraction", "rows_per_sm"),
          "softmax": ("memory_efficiency", "cache_speedup", "l2_fraction", "rows_per_sm", "block_bytes")}
# Classes of one library kernel per call (no cuBLAS/cuDNN heuristics): their parameters carry across
# architectures, so a GPU without measurements takes all measured GPUs' (the held-one-GPU-out check
# prefers that to a family of one or two GPUs), and their launch floor is per operator.
MEMORY_CLASSES = ("elementwise", "normalization", "softmax")
# A power-limited board's measured GEMMs are its kernels at the boost clock, falling over GPU Boost's time constant
# to the share of that rate its power sustains: both fitted, so its efficiency is its kernels' (its family's) alone.
POWER_KEYS = ("sustained", "boost_seconds")
BOUNDS = {"sustained": (0.1, 1.0), "efficiency": (0.05, 1.5), "memory_efficiency": (0.05, 1.5), "tile_exponent": (0.0, 3.0),
          "fill_k": (0.0, 1024.0), "reread": (0.0, 8.0), "weight_efficiency": (0.05, 1.5), "winograd_efficiency": (0.3, 4.0), "cache_speedup": (0.5, 8.0), "l2_fraction": (0.1, 3.0),
          "rows_per_sm": (0.25, 64.0), "floor_seconds": (2e-6, 5e-4), "block_bytes": (1.0, 3.0)}


# ------------------------------------------------------------------------------------------ the model
class _Prepared:
    """The parameter-free work of each row on one GPU, computed once (a fit evaluates many parameters)."""

    def __init__(self, rows: pd.DataFrame, gpu: Gpu):
        self.gpu = gpu
        self.op_class = rows["op_class"].to_numpy()
        # each call's place in its measuring run (NaN where the rows do not say)
        self.run_order = rows["run_order"].to_numpy(float) if "run_order" in rows else np.full(len(rows), np.nan)
        self.index = {c: np.flatnonzero(self.op_class == c) for c in CLASSES}
        self.work: dict[str, dict[str, Any]] = {}
        for op_class, idx in self.index.items():
            if not len(idx):
                continue
            part = rows.iloc[idx]
            if op_class in ("gemm", "convolution"):
                m, n, k, count, moved = _gemm_views(part)
                gemm = op_class == "gemm"
                if gemm:  # cuBLAS's tiles as (output rows, output columns): :func:`_rows_by_columns`
                    batched_tile, linear_tiles = BATCHED_TILES.get(gpu.generation), LINEAR_TILES.get(gpu.family)
                    candidates = dict(tiles=_rows_by_columns(SGEMM_TILES), l2_bytes=gpu.l2_bytes,
                                      batched_tile=_rows_by_columns([batched_tile])[0] if batched_tile else None,
                                      linear_tiles=_rows_by_columns(linear_tiles) if linear_tiles else None)
                else:  # cuDNN's as named (a convolution is never a batched row)
                    candidates = dict(tiles=IMPLICIT_GEMM_TILES_OF.get(gpu.architecture, IMPLICIT_GEMM_TILES))
                # nn.Linear's weight (n outputs × k deep): what a call of one tile row streams once, at its
                # kernels' own ``weight_efficiency`` where a fit keeps one (the module's docstring)
                weight = np.where(part["operator"].to_numpy() == "linear", _element_bytes(part) * n * k, 0.0)
                work = {"flops": 2 * m * n * k * count, "bytes": moved, "weight_bytes": weight,
                        "table": _shape_table(m, n, k, count, gpu.sm_count, part["operator"].to_numpy() == "bmm",
                                              split_k=gemm, **candidates)}
                if op_class == "convolution":
                    work["fused_table"] = _shape_table(m, n, k, count, gpu.sm_count, split_k=False,
                                                       tiles=FUSED_WINOGRAD_TILES)
                    kernel, stride = part["Kernel_Szie"].to_numpy(), part["Stride"].to_numpy()
                    work["winograd"] = (kernel == 3) & (stride == 1) & (gpu.architecture not in NO_FORWARD_WINOGRAD)
                    # non-fused Winograd F(4×4, 3×3): 36 GEMMs (one per point of a 6×6 input tile) of
                    # tiles × Cout × Cin, 4× fewer multiplications than direct; its transforms write and
                    # read the input and output 36/16 times over, the filter 36/9 times
                    tiles = part["B"].to_numpy(float) * np.ceil(np.sqrt(m / part["B"].to_numpy(float)) / 4) ** 2
                    cin = part["Input_Channel"].to_numpy(float)
                    work["nonfused_flops"] = 2 * 36 * tiles * n * cin
                    work["nonfused_table"] = _shape_table(tiles, n, cin, np.full(len(m), 36.0), gpu.sm_count,
                                                          split_k=False)
                    element = _element_bytes(part)
                    activations = moved - element * n * k
                    work["nonfused_bytes"] = 2 * 36 / 16 * activations + 2 * 36 / 9 * element * n * k + moved
                    # FFT (NO_FORWARD_WINOGRAD architectures): input, filter and output transformed to
                    # size × (size/2 + 1) complex frequencies, one complex GEMM per frequency (B × Cout,
                    # Cin deep: 8 FLOPs per complex multiply-add), each transform written once and read once
                    padded = part["Input_Size"].to_numpy(float) + 2 * part["Padding"].to_numpy(float)
                    size = np.select([padded <= f for f in FFT_SIZES], FFT_SIZES, default=0)
                    work["fft"] = ((kernel == 3) & (stride == 1) & (size > 0)
                                   & (gpu.architecture in NO_FORWARD_WINOGRAD))
                    work["fft_size"] = np.where(work["fft"], size, 0)
                    frequencies = size * (size // 2 + 1)
                    batch = part["B"].to_numpy(float)
                    work["fft_flops"] = 8 * batch * n * cin * frequencies
                    work["fft_table"] = _shape_table(batch, n, cin, np.maximum(frequencies, 1.0), gpu.sm_count,
                                                     split_k=False)
                    work["fft_bytes"] = 2 * 8 * frequencies * (batch * cin + n * cin + batch * n) + moved
                work["operator"] = part["operator"].to_numpy()
                self.work[op_class] = work
            else:
                elements = part["B"].to_numpy(float) * part["H"].to_numpy(float)
                # tensors each call reads (an estimate's elementwise ops say so in an "operands" column)
                operands = (part["operands"].to_numpy(float) if "operands" in part
                            else part["operator"].map(lambda o: OPERATORS[o][1]).to_numpy(float))
                moved = FP32_BYTES * elements * (operands + 1)
                if op_class == "normalization":  # weight and bias read, mean and rstd written
                    moved = moved + FP32_BYTES * (2 * part["H"].to_numpy(float) + 2 * part["B"].to_numpy(float))
                self.work[op_class] = {"bytes": moved, "rows": part["B"].to_numpy(float),
                                       "operator": part["operator"].to_numpy()}
                if op_class == "softmax":
                    self.work[op_class]["block"] = part["H"].to_numpy(float) > SOFTMAX_WARP_MAX_ELEMENTS

    def seconds(self, op_class: str, p: dict[str, float]) -> np.ndarray:
        """Predicted seconds of this class's rows with parameters ``p``."""
        gpu, work = self.gpu, self.work[op_class]
        if op_class == "convolution":  # cuDNN's autotuner: the fastest algorithm that applies
            return p["floor_seconds"] + np.min(np.vstack(list(self.convolution_algorithms(p).values())), axis=0)
        if op_class == "gemm":
            bandwidth = gpu.dram_bytes_per_second * p["memory_efficiency"]
            table = work["table"]
            if p.get("reread", 0.0) and table.reread is not None:
                # each candidate tile at its rate or its operands' re-reads from DRAM (the ``reread`` share of
                # them: what concurrent tiles do not share), whichever is slower; the fastest candidate
                factors = np.maximum(_candidate_factors(table, p["tile_exponent"], p["fill_k"]), 1e-4)
                compute = _throttled(work["flops"] / (gpu.fp32_flops_per_second * p["efficiency"] * factors), p)
                rereads = work["flops"] * table.reread * p["reread"] / bandwidth
                compute = np.where(table.base > 0, np.maximum(compute, rereads), np.inf).min(axis=0)
            else:
                shape = np.maximum(_shape_factor(table, p["tile_exponent"], p["fill_k"]), 1e-4)
                compute = _throttled(work["flops"] / (gpu.fp32_flops_per_second * p["efficiency"] * shape), p)
            streamed = work["bytes"] / bandwidth
            if p.get("weight_efficiency"):  # nn.Linear's weight read at its kernels' own rate
                streamed = streamed + work["weight_bytes"] * (
                    1.0 / (gpu.dram_bytes_per_second * p["weight_efficiency"]) - 1.0 / bandwidth)
            return p["floor_seconds"] + np.maximum(compute, streamed)
        # back-to-back calls: the part of the working set that stays in L2 (up to ``l2_fraction`` of the L2
        # all SMs share) moves at ``cache_speedup`` × the DRAM rate, the rest at the DRAM rate
        moved = work["bytes"]
        if "block" in work:  # softmax rows of over 1,024 elements: read three times (SOFTMAX_WARP_MAX_ELEMENTS)
            moved = np.where(work["block"], moved * p["block_bytes"], moved)
        cached = np.minimum(moved, p["l2_fraction"] * gpu.shared_l2_bytes)
        effective_bytes = moved - cached + cached / p["cache_speedup"]
        bandwidth = gpu.dram_bytes_per_second * p["memory_efficiency"]
        if "rows_per_sm" in p:
            bandwidth = bandwidth * np.minimum(1.0, work["rows"] / (p["rows_per_sm"] * gpu.sm_count))
        # a LayerNorm's rows: one block each, whose reductions take their time however short the row
        # (NORMALIZATION_ROW_SECONDS_OF; 0 where no recording measured it)
        per_row = work["rows"] * p.get("row_seconds", 0.0) / gpu.sm_count
        return p["floor_seconds"] + effective_bytes / bandwidth + per_row

    def convolution_algorithms(self, p: dict[str, float]) -> dict[str, np.ndarray]:
        """Seconds of each convolution row by each algorithm cuDNN could run it with (inf where it does not
        apply; the launch floor not included): ``direct`` (implicit GEMM), ``fused`` and ``nonfused``
        Winograd, ``fft``."""
        gpu, work = self.gpu, self.work["convolution"]
        bandwidth = gpu.dram_bytes_per_second * p["memory_efficiency"]
        streaming = work["bytes"] / bandwidth  # input, filter and output moved once

        def compute(flops, table, efficiency, multiplied=True):
            # FLOPs it multiplies run at most at the FP32 peak: a fitted efficiency over 1 (the V100's 1.11) is
            # paid back by the shape factor on the shapes measured, not on a larger one (a non-fused Winograd's
            # products of FCN-ResNet50's head at b64 were priced at 4.4x the peak, 4.1x the direct roof in all).
            # The fused Winograd's efficiency is of the direct FLOPs, which it does not multiply
            shape = np.maximum(_shape_factor(work[table], p["tile_exponent"], p["fill_k"]), 1e-4)
            rate = np.minimum(efficiency * shape, 1.0) if multiplied else efficiency * shape
            return _throttled(flops / (gpu.fp32_flops_per_second * rate), p)

        direct = np.maximum(compute(work["flops"], "table", p["efficiency"]), streaming)
        fused = np.maximum(compute(work["flops"], "fused_table", p["winograd_efficiency"], multiplied=False),
                           streaming)
        nonfused = (compute(work["nonfused_flops"], "nonfused_table", p["efficiency"])
                    + work["nonfused_bytes"] / bandwidth)
        result = {"direct": direct, "fused": np.where(work["winograd"], fused, np.inf),
                  "nonfused": np.where(work["winograd"], nonfused, np.inf)}
        if work["fft"].any():
            fft = compute(work["fft_flops"], "fft_table", p["efficiency"]) + work["fft_bytes"] / bandwidth
            result["fft"] = np.where(work["fft"], fft, np.inf)
        return result

    def operator_floors(self, op_class: str, floors: dict[str, float], params: dict[str, float]) -> np.ndarray:
        """Each row's launch floor: its operator's, else its class's (``params``), at its measuring run's
        place (:func:`host_drift`: the floor is the run's middle call's; a row that does not say its place
        is given the middle)."""
        floor = np.array([floors.get(o, params["floor_seconds"]) for o in self.work[op_class]["operator"]])
        drift = params.get("drift_seconds_per_call", 0.0)
        if not drift:
            return floor
        calls = np.nan_to_num(self.run_order[self.index[op_class]] - params["drift_from_call"])
        return np.maximum(floor + drift * calls, BOUNDS["floor_seconds"][0])  # a short run's first calls: a launch


def predict_seconds(rows: pd.DataFrame, gpu: Gpu, calibration: KernelCalibration) -> np.ndarray:
    """Predicted seconds of each measured-layout row (:func:`load_measurements`) on ``gpu``: the model, times
    the measured shapes' residuals near each row where the calibration has them (its own GPU's, or another
    GPU's of the same architecture)."""
    prepared = _Prepared(rows, gpu)
    result = _model_seconds(prepared, calibration)
    for op_class, residuals in calibration.shapes.items():
        idx = prepared.index.get(op_class, ())
        if len(idx):
            result[idx] *= residuals.correction(shape_residuals.features(rows.iloc[idx], op_class))
    return result


def convolution_row(call) -> dict[str, Any]:
    """A forward convolution's call shape (N, Cin, size, Cout, kernel, stride, padding:
    rooflow.estimate.formulas' call shapes) as a row of the measurements' layout (:data:`SHAPE_COLUMNS`)."""
    b, cin, size, cout, kernel, stride, padding = (int(v) for v in call[:7])
    return {"operator": "conv", "op_class": "convolution", "B": b, "Input_Channel": cin, "Output_Channel": cout,
            "Kernel_Szie": kernel, "Input_Size": size, "Stride": stride, "Padding": padding}


def fft_sizes(calls, device) -> np.ndarray:
    """Per forward convolution call (N, Cin, size, Cout, kernel, stride, padding): the transform size the kernel
    model runs it by FFT with on ``device`` — where FFT is its fastest algorithm, on an architecture whose cuDNN
    has no FP32 forward Winograd (:data:`NO_FORWARD_WINOGRAD`) — else 0. What cuDNN's autotuner would pick, as far
    as the model knows it (its own choice among implicit GEMM and FFT, fitted on the H200's single ops)."""
    calls = list(calls)
    found = for_gpu(device) if calls else None
    if found is None or found[1].architecture not in NO_FORWARD_WINOGRAD:
        return np.zeros(len(calls), int)
    calibration, gpu = found
    rows = pd.DataFrame([convolution_row(call) for call in calls])
    prepared = _Prepared(rows, gpu)
    times = prepared.convolution_algorithms({**DEFAULTS["convolution"], **calibration.classes.get("convolution", {})})
    if "fft" not in times:
        return np.zeros(len(calls), int)
    fastest = np.argmin(np.vstack(list(times.values())), axis=0) == list(times).index("fft")
    return np.where(fastest, prepared.work["convolution"]["fft_size"], 0).astype(int)


def launch_floors(rows: pd.DataFrame, gpu: Gpu, calibration: KernelCalibration) -> np.ndarray:
    """The launch floor of each measured-layout row: its operator's (its class's where the operator has
    none): the part of one call alone that is the measuring host's, not its kernels'."""
    prepared = _Prepared(rows, gpu)
    result = np.zeros(len(rows))
    for op_class, idx in prepared.index.items():
        if len(idx):
            params = {**DEFAULTS[op_class], **calibration.classes.get(op_class, {})}
            result[idx] = prepared.operator_floors(op_class, calibration.floors, params)
    return result


def kernel_seconds(rows: pd.DataFrame, gpu: Gpu, calibration: KernelCalibration) -> np.ndarray:
    """The seconds of each measured-layout row's kernels, its launch floor apart: the model's, times the measured
    shapes' residual near the row (as :func:`predict_seconds` corrects the whole call), never under the roofs of a
    GEMM or of a convolution that cuDNN cannot run by Winograd or FFT. The residual scales the kernels' part only:
    subtracting the floor from the corrected call instead would take a residual under 1 out of the kernels alone,
    to nothing on a small call (a 1×1 convolution of 32 µs whose floor is 360 µs, at a residual of 0.88, left 0
    s). The whole call (:func:`predict_seconds`) is left as fitted: its launch floor is no bound."""
    prepared = _Prepared(rows, gpu)
    modelled = _model_seconds(prepared, calibration)
    corrected = predict_seconds(rows, gpu, calibration)
    floors = launch_floors(rows, gpu, calibration)
    kernels = np.maximum(modelled - floors, 0.0) * corrected / modelled
    for op_class in ("gemm", "convolution"):
        idx = prepared.index.get(op_class, ())
        if not len(idx):
            continue
        # no kernel beats its roofs: the residuals are other shapes', often another GPU's, and a fit's efficiency
        # over 1 (the P100's 1.21) is the fit's; only Winograd and FFT multiply less than the FLOPs counted
        work = prepared.work[op_class]
        roof = np.maximum(work["flops"] / gpu.fp32_flops_per_second, work["bytes"] / gpu.dram_bytes_per_second)
        direct = ~(work["winograd"] | work["fft"]) if op_class == "convolution" else np.ones(len(idx), bool)
        kernels[idx] = np.where(direct, np.maximum(kernels[idx], roof), kernels[idx])
    return kernels


def _model_seconds(prepared: _Prepared, calibration: KernelCalibration) -> np.ndarray:
    """The model's seconds of each prepared row, without the measured shapes' residuals."""
    result = np.full(len(prepared.op_class), np.nan)
    for op_class, idx in prepared.index.items():
        if len(idx):
            params = {**DEFAULTS[op_class], **calibration.classes.get(op_class, {})}
            params["floor_seconds"] = prepared.operator_floors(op_class, calibration.floors, params)
            result[idx] = prepared.seconds(op_class, params)
    return result


# ------------------------------------------------------------------------------------------ fitting
# A fitted parameter is kept where its calls pin it: setting it to zero costs their fit at least this much mean
# |log error| (0.01: a 1% worse fit)
IDENTIFIED_LOSS = 0.01
# ... or, for a parameter of one regime, on the calls it moves by over this share (a log ratio), if at least so many
BINDING_SHARE = 0.05
MIN_BINDING_CALLS = 20
CHECK_BAND = 0.25  # the held-out checks' band: a rate within it of another is not a rate of its own


def _identified(prepared: _Prepared, measured: np.ndarray, op_class: str, params: dict[str, float], name: str) -> bool:
    """Whether ``params[name]`` is pinned by the calls: without it (zero) their mean |log error| (the fit's
    loss) grows by at least :data:`IDENTIFIED_LOSS`."""
    gpu = [(prepared, measured)]
    return _fit_loss(gpu, op_class, {**params, name: 0.0}) - _fit_loss(gpu, op_class, params) >= IDENTIFIED_LOSS


def _identified_where_it_binds(prepared: _Prepared, measured: np.ndarray, op_class: str, params: dict[str, float],
                               name: str, neutral: float) -> bool:
    """Whether ``params[name]`` is pinned by the calls it prices: on the calls whose prediction it moves by over
    :data:`BINDING_SHARE` from its ``neutral`` value, at least :data:`MIN_BINDING_CALLS` of them, it lowers their
    mean |log error| by at least :data:`IDENTIFIED_LOSS`. For a parameter of a regime few calls reach (nn.Linear's
    weight streaming in skinny GEMMs: 1-2% of a GPU's GEMM calls), which a mean over all calls cannot see."""
    fitted = prepared.seconds(op_class, params)
    neutral_seconds = prepared.seconds(op_class, {**params, name: neutral})
    binds = np.abs(np.log(fitted / neutral_seconds)) > BINDING_SHARE
    if binds.sum() < MIN_BINDING_CALLS:
        return False
    gain = np.mean(np.abs(np.log(neutral_seconds[binds] / measured[binds]))) - np.mean(
        np.abs(np.log(fitted[binds] / measured[binds])))
    return bool(gain >= IDENTIFIED_LOSS)


def _fit_loss(prepared: list[tuple[_Prepared, np.ndarray]], op_class: str, candidate: dict[str, float],
              floors: list | None = None) -> float:
    """The mean absolute log error of ``candidate`` over ``prepared`` (one entry per GPU: its rows and their
    measured seconds), each GPU at its own launch floor where ``floors`` gives more than one (else the
    candidate's). L1 in log space: a few odd rows do not steer a fit."""
    errors = []
    for index, (prep, measured) in enumerate(prepared):
        own = candidate if not floors or len(floors) == 1 else {**candidate, "floor_seconds": floors[index]}
        errors.append(np.log(prep.seconds(op_class, own) / measured))
    return float(np.mean(np.abs(np.concatenate(errors))))


def _fit_class(prepared: list[tuple[_Prepared, np.ndarray]], op_class: str, floors: list,
               rounds: int = 3, fit_floor: bool = True, fixed: dict[str, float] | None = None,
               extra: tuple[str, ...] = ()) -> dict[str, float]:
    """Parameters of one class minimising the mean absolute log error over ``prepared`` (one entry per
    GPU: its rows and their measured seconds); each GPU's launch floor is its own (``floors``: seconds,
    or seconds per row; fixed, but refined where one GPU is fitted and ``fit_floor``); ``fixed``: parameters
    held at the given values; ``extra``: parameters fitted beside the class's own (``sustained``)."""
    params = {**DEFAULTS[op_class], **{name: BOUNDS[name][1] for name in extra}, **(fixed or {})}
    fitted = tuple(name for name in FITTED[op_class] + extra if name not in (fixed or {}))
    fitted += (("floor_seconds",) if len(floors) == 1 and fit_floor else ())
    if len(floors) == 1:
        params["floor_seconds"] = floors[0]

    def loss(candidate: dict[str, float]) -> float:
        return _fit_loss(prepared, op_class, candidate, floors)

    for _ in range(rounds):
        for name in fitted:
            low, high = BOUNDS[name]
            grid = np.geomspace(low, high, 25) if low > 0 else np.concatenate([[0.0], np.geomspace(0.05, high, 24)])
            best = min(grid, key=lambda value: loss({**params, name: float(value)}))
            # refine around the best grid point
            fine = np.linspace(max(low, best * 0.8), min(high, best * 1.25 if best else 0.05), 11)
            params[name] = float(min(fine, key=lambda value: loss({**params, name: float(value)})))
    return params


def _work(prepared: _Prepared, op_class: str, params: dict[str, float] | None = None) -> np.ndarray:
    """A class's kernels' seconds without a launch floor, with ``params``, else at default efficiencies."""
    return prepared.seconds(op_class, {**DEFAULTS[op_class], **(params or {}), "floor_seconds": 0.0})


def _floor(prepared: _Prepared, op_class: str, measured: np.ndarray, params: dict[str, float] | None = None) -> float:
    """A class's launch floor on one GPU: the median of its fastest tenth of calls, less their small
    predicted work (with ``params``, else at default efficiencies)."""
    fastest = np.argsort(measured)[: max(5, len(measured) // 10)]
    work = _work(prepared, op_class, params)[fastest]
    return float(max(np.median(measured[fastest] - work), np.min(measured) * 0.5))


# the largest rank correlation of a run's calls' work with their order that host_drift reads: shapes drawn in
# random order correlate by about 1/sqrt(calls) (0.12 for a 500-call sample of the P4's convolutions), a file that
# steps through its shapes by 0.61-0.93 (the data set's other operators)
ORDER_UNRELATED = 0.3


def host_drift(order: np.ndarray, work: np.ndarray, measured: np.ndarray) -> float:
    """Seconds each call of a measuring run adds to every later call, from the calls' ``order`` in the run,
    their modelled ``work`` and ``measured`` seconds (0 where the order is unknown or no growth stands out of
    the noise: over 3 standard errors). The data set's hosts (torch 2.1, cuDNN 8.9, ``cudnn.benchmark``) took
    53-153 ns more per convolution call for every shape their run had measured before it, alike for every
    algorithm and size of call (a host's cost, not a kernel's): over their ~5,000 shapes 0.26-0.76 ms, a
    small call's 75-118 µs over its kernels at the run's start, 291-724 µs at its end. Shapes are drawn alike over the run,
    so any model's work is unrelated to the order: the excess over it against the order is the growth, said
    with least noise by the half of the calls of least work. Where the work follows the order (a file that
    steps through its shapes, as the data set's other operators' do: rank correlation over
    :data:`ORDER_UNRELATED`), the order says nothing apart from the shapes: no growth is read."""
    if len(order) < 50 or not np.isfinite(order).all():
        return 0.0
    if abs(np.corrcoef(pd.Series(order).rank(), pd.Series(work).rank())[0, 1]) > ORDER_UNRELATED:
        return 0.0
    light = work <= np.median(work)
    x, y = order[light] - order[light].mean(), (measured - work)[light]
    slope = float(np.sum(x * (y - y.mean())) / np.sum(x * x))
    spread = float(np.sqrt(np.sum((y - y.mean() - slope * x) ** 2) / (len(x) - 2) / np.sum(x * x)))
    return slope if abs(slope) > 3 * spread else 0.0


def _steady(prepared: _Prepared, op_class: str, measured: np.ndarray) -> tuple[np.ndarray, dict[str, float]]:
    """A class's ``measured`` seconds as each call would have run at its measuring run's middle call, and the
    run's drift (:func:`host_drift`: ``drift_seconds_per_call`` from call ``drift_from_call``; none where the
    calls do not drift or do not say their order)."""
    order = prepared.run_order[prepared.index[op_class]]
    drift = host_drift(order, _work(prepared, op_class), measured)
    if not drift:
        return measured, {}
    middle = float(np.median(order))
    return measured - drift * (order - middle), {"drift_seconds_per_call": drift, "drift_from_call": middle}


def _operator_floors(measured: np.ndarray, operators: np.ndarray) -> dict[str, float]:
    """The launch floor of each operator: its fastest calls' (its smallest shapes), FLOOR_QUANTILE of them."""
    return {o: round(float(np.quantile(measured[operators == o], FLOOR_QUANTILE)), 9) for o in np.unique(operators)}


def with_host_floors(rows: pd.DataFrame, gpu: Gpu, calibration: KernelCalibration) -> KernelCalibration:
    """``calibration`` with the launch floors of the host that measured ``rows`` (by :func:`fit_gpu`'s rules: each
    operator's fastest calls; a convolution's fastest tenth less their work at the calibration's kernel parameters,
    and its run's growth per call: :func:`host_drift`), every kernel parameter as it was.
    A floor is the measuring host's dispatch path, not the GPU's: rooflow's own single ops on an H200 (torch
    2.11) start at 13-24 µs where the data set's hosts (torch 2.1) start at 25-60 µs."""
    prepared = _Prepared(rows, gpu)
    measured = rows["seconds"].to_numpy(float)
    classes = {op_class: dict(params) for op_class, params in calibration.classes.items()}
    floors = dict(calibration.floors)
    for op_class, idx in prepared.index.items():
        if not len(idx):
            continue
        if op_class == "convolution":
            steady, drift = _steady(prepared, op_class, measured[idx])
            params = classes.setdefault(op_class, dict(DEFAULTS[op_class]))
            for key in ("drift_seconds_per_call", "drift_from_call"):
                params.pop(key, None)
            params.update(floor_seconds=_floor(prepared, op_class, steady, params), **drift)
        else:
            floors.update(_operator_floors(measured[idx], rows["operator"].to_numpy()[idx]))
    return replace(calibration, classes=classes, floors=floors,
                   source=f"{calibration.source}; launch floors: the measuring host's")


# Calls of an algorithm (by the kernels they name) a GPU's convolution fit needs to read its parameters from them
MIN_LABELLED_CALLS = 100
WINOGRAD_ALGORITHMS = ("fused", "nonfused")
# A call's kernels must take this long for its rate to be read (3-10x the data set's hosts' 100-300 µs floors)
RATE_MIN_KERNEL_SECONDS = 1e-3


def _implicit_gemm_parameters(rows: pd.DataFrame, gpu: Gpu, steady: np.ndarray, direct: np.ndarray,
                              fixed: dict[str, float]) -> dict[str, float]:
    """The implicit-GEMM parameters (efficiency, tile exponent, k fill) of one GPU's convolutions, fitted on its
    calls that ran implicit GEMM (``direct``: by the kernels they name, :func:`convolution_algorithm`), each priced
    as implicit GEMM; none where fewer than :data:`MIN_LABELLED_CALLS` say which kernels they ran. Fitted on all
    calls, the cheapest algorithm taken and the efficiency pinned at its GEMMs', the fit let Winograd's free
    efficiency stand in for fast implicit GEMMs: the T4's model picked fused Winograd for 1,047 of the 1,631 calls
    that ran implicit GEMM, which it priced 1.42x their time as implicit GEMM. The 3x3 shapes' residuals hid that;
    the 1x1 and strided convolutions only implicit GEMM runs (ResNet-50's) took the slow price."""
    if direct.sum() < MIN_LABELLED_CALLS:
        return {}
    part = _Prepared(rows[direct], gpu)
    work = part.work["convolution"]
    work["winograd"][:] = False  # each call priced as the algorithm it ran
    work["fft"][:] = False
    params = _fit_class([(part, steady[direct])], "convolution", [_floor(part, "convolution", steady[direct])],
                        fixed={key: value for key, value in fixed.items() if key != "efficiency"})
    return {key: params[key] for key in ("efficiency", "tile_exponent", "fill_k")}


def _winograd_rate(prepared: _Prepared, gpu: Gpu, steady: np.ndarray, floor_seconds: float,
                   winograd: np.ndarray) -> dict[str, float]:
    """``winograd_rate``: the median FP32 efficiency (the direct convolution's FLOPs over the kernels' time, against
    the datasheet peak) of one GPU's calls that ran cuDNN's Winograd kernels (``winograd``, by their names) for at
    least :data:`RATE_MIN_KERNEL_SECONDS` past its launch floor: what a network's eligible layers run at, the
    time model's ``fp32_fast``. Read, not fitted: the kernel model prices each call by its own Winograd paths.
    None where fewer than :data:`MIN_LABELLED_CALLS` such calls were measured."""
    kernels = steady - floor_seconds
    calls = winograd & (kernels >= RATE_MIN_KERNEL_SECONDS)
    if calls.sum() < MIN_LABELLED_CALLS:
        return {}
    flops = prepared.work["convolution"]["flops"][calls]
    return {"winograd_rate": float(np.median(flops / kernels[calls])) / gpu.fp32_flops_per_second}


def fit_gpu(rows: pd.DataFrame, gpu: Gpu, source: str) -> KernelCalibration:
    """The kernel calibration of one GPU from its measured rows (all classes it has)."""
    prepared = _Prepared(rows, gpu)
    measured = rows["seconds"].to_numpy(float)
    classes = {}
    floors: dict[str, float] = {}
    # its GEMMs' efficiency as its calls measured it (a power-limited board's: fitted without its power limit too)
    as_measured_efficiency: float | None = None
    power_note = conv_note = ""
    for op_class in sorted(prepared.index, key=lambda c: c == "convolution"):  # convolution after GEMM
        idx = prepared.index[op_class]
        if not len(idx):
            continue
        if op_class == "convolution":
            # cuDNN's calls of small shapes are several kernels (transforms, offsets) chosen by its
            # autotuner: a floor fitted with the rest, not the fastest call's. Its implicit-GEMM kernels
            # are SGEMMs on the same SMs: the GPU's GEMM efficiency, where measured (its power limit inside) —
            # but where Winograd's own efficiency could stand in for them, the calls that ran them say (below)
            fixed = {"efficiency": as_measured_efficiency} if as_measured_efficiency is not None else {}
            winograd = gpu.architecture not in NO_FORWARD_WINOGRAD
            if not winograd:  # no Winograd kernel to fit: its efficiency is no parameter
                fixed["winograd_efficiency"] = DEFAULTS[op_class]["winograd_efficiency"]
            # the measuring run's cost per call grows with the shapes it ran before (:func:`host_drift`): its
            # kernels and floor are fitted on the calls as they would have run at the run's middle call
            steady, drift = _steady(prepared, op_class, measured[idx])
            algorithms = (rows["algorithm"].to_numpy(object)[idx] if "algorithm" in rows
                          else np.full(len(idx), None, object))
            if winograd:
                direct = algorithms == "direct"
                labelled = _implicit_gemm_parameters(rows.iloc[idx], gpu, steady, direct, fixed)
                fixed.update(labelled)
                if labelled:
                    gemms = f" (its GEMMs' {as_measured_efficiency:.2f})" if as_measured_efficiency is not None else ""
                    conv_note = (f"; convolutions' implicit-GEMM efficiency {labelled['efficiency']:.2f}{gemms}, "
                                 f"fitted on its {int(direct.sum())} calls that ran implicit GEMM")
            params = _fit_class([(prepared, steady)], op_class, [_floor(prepared, op_class, steady)], fixed=fixed)
            params.update(drift)
            if not winograd:
                del params["winograd_efficiency"]
            else:
                params.update(_winograd_rate(prepared, gpu, steady, params["floor_seconds"],
                                             np.isin(algorithms, WINOGRAD_ALGORITHMS)))
        else:
            floors.update(_operator_floors(measured[idx], rows["operator"].to_numpy()[idx]))
            if op_class == "normalization" and gpu.architecture in NORMALIZATION_ROW_SECONDS_OF:
                # its LayerNorms are priced as rooflow recorded them in networks (a row cost on its measured
                # triad): single ops of at most ~15k rows fit parameters that do not reach 50k-800k rows (the
                # H200's 40, fitted: its ViT-B/16 b256 LayerNorms at 1.9x their time)
                continue
            floor_rows = prepared.operator_floors(op_class, floors, {"floor_seconds": 0.0})
            # a power-limited board: its kernels' rate, falling over GPU Boost's time constant to what its
            # power sustains
            limited = op_class == "gemm" and gpu.tdp_watts is not None and not gpu.full_power
            params = _fit_class([(prepared, measured[idx])], op_class, [floor_rows], fit_floor=False,
                                fixed={"boost_seconds": BOOST_TIME_CONSTANT_SECONDS} if limited else None,
                                extra=("sustained",) if limited else ())
            if limited:
                as_measured_efficiency = _fit_class([(prepared, measured[idx])], op_class, [floor_rows],
                                                    fit_floor=False)["efficiency"]
                power_note = _power_note("FP32 GEMMs", params["sustained"],
                                         f"fitted on its calls: its {gpu.tdp_watts:.0f} W board power")
            if op_class == "gemm":
                # then the share of its operands' re-reads beyond the L2 that reach DRAM, fitted alone: its
                # efficiency and tile parameters stay its calls' (its convolutions and held-out GPUs take them)
                params = _fit_class([(prepared, measured[idx])], op_class, [floor_rows], fit_floor=False,
                                    fixed={k: v for k, v in params.items() if k != "reread"}, extra=("reread",))
                if not _identified(prepared, measured[idx], op_class, params, "reread"):
                    # its bandwidth hides the term (the A100's fit put 3.7 where 0 fits as well): a value its calls
                    # do not pin would price another board of its generation, one with less bandwidth
                    params["reread"] = 0.0
                params = _fit_class([(prepared, measured[idx])], op_class, [floor_rows], fit_floor=False,
                                    fixed={k: v for k, v in params.items() if k != "weight_efficiency"},
                                    extra=("weight_efficiency",))
                ratio = params["weight_efficiency"] / params["memory_efficiency"]
                if (not _identified_where_it_binds(prepared, measured[idx], op_class, params, "weight_efficiency",
                                                   params["memory_efficiency"])
                        or 1 / (1 + CHECK_BAND) <= ratio <= 1 + CHECK_BAND):
                    # no rate of its own: its calls do not pin one, or it is its other memory-bound GEMMs' within
                    # the checks' band (the V100's 1.21 and T4's 0.91 of theirs: their skinny calls run other kernels)
                    del params["weight_efficiency"]
            params["floor_seconds"] = float(np.median(floor_rows))
        classes[op_class] = {k: round(v, 9 if k in ("floor_seconds", "drift_seconds_per_call") else 4)
                             for k, v in params.items()}
        if op_class == "gemm" and as_measured_efficiency is None:
            as_measured_efficiency = classes[op_class]["efficiency"]
    source += power_note + conv_note + _drift_note(classes.get("convolution", {}), "its host's")
    calibration = KernelCalibration(source=source, gpu=gpu.name, relative_uncertainty=MEASURED_UNCERTAINTY,
                                    classes=classes, rows=len(rows), floors=floors, architecture=gpu.architecture)
    modelled = _model_seconds(prepared, calibration)
    shapes = {op_class: shape_residuals.measured_residuals(rows.iloc[prepared.index[op_class]],
                                                           modelled[prepared.index[op_class]], op_class)
              for op_class in shape_residuals.CLASSES if len(prepared.index.get(op_class, ()))}
    return replace(calibration, shapes=shapes)


@dataclass(frozen=True)
class MeasuredRoof:
    """A GPU's FP32 GEMM efficiency measured by rooflow's own ceilings (a large square torch.mm: its best
    tile, full waves, a long k) — what its family's kernel calibration takes where no single ops of the
    family were measured (the H100 SXM5's for Ada) — and its DRAM efficiency where the ceilings measured
    one: their triad is torch.add over arrays far beyond its L2, the elementwise class's own kernel, which the
    GPU's elementwise calls then take (its own, not its family's: another board's memory is another memory)."""

    gpu: Gpu
    gemm_efficiency: float
    source: str
    dram_efficiency: float | None = None


def _lends(donor: Gpu, gpu: Gpu) -> bool:
    """Whether a measured GPU's calibration may lend ``gpu`` parameters: a board of an architecture whose kernels
    no other architecture loads (:data:`OWN_KERNELS`) lends to its own architecture only."""
    return donor.architecture not in OWN_KERNELS or donor.architecture == gpu.architecture


def family_calibration(gpu: Gpu, measured: dict[str, KernelCalibration], measured_gpus: dict[str, Gpu],
                       roofs: dict[str, MeasuredRoof] | None = None) -> KernelCalibration:
    """The calibration of ``gpu`` (not measured) from measured GPUs' calibrations.

    A measured GPU of the **same architecture** (an A100 80GB beside the A100 40GB) runs the same kernels by
    the same heuristics: its parameters and measured shapes carry over whole, with ``gpu``'s datasheet (a
    convolution none of them measured: at the FP32 efficiency ``gpu`` would take without them, not their GEMMs').
    Otherwise, per class and parameter, the median over the measured GPUs of its architecture family, or over
    all of them where its family has none (GEMM: their full-power boards, else all full-power boards); the FP32
    GEMM efficiency of its family's full-power boards — or,
    where none of its family's single ops were measured, of a measured roof of its family (``roofs``) — held
    to what its board power sustains at its family's FP32 GEMM FLOPs per joule — the best of all measured boards'
    where none of its family was measured, a lower bound for a newer process — (its GEMMs falling to it with
    GPU Boost's time constant, its convolutions at :func:`random_order_clock` of it). Efficiencies are against each
    GPU's own roofs, so ``gpu``'s datasheet carries them over. Launch floors (the measuring host's) and the
    memory-bound classes: all measured GPUs', but LayerNorms on an architecture rooflow recorded them on
    (:data:`NORMALIZATION_ROW_SECONDS_OF`): its measured triad plus a cost per row. A convolution's floor and its
    growth over a measuring run (:func:`host_drift`) come with its other parameters: the data set's Pascal
    boards' hosts drift alike (153 and 141 ns per call), its Volta and Turing boards' alike (53 and 82 ns), and
    the median of all four drifts predicts a held-out board's convolutions worse. Convolution shapes where its
    architecture has none: every measured GPU's residuals, each less its own median (cuDNN's picks by shape
    carry across architectures, a board's level does not; :func:`shape_residuals.pooled`), less the 3×3
    stride-1 shapes where cuDNN has no forward Winograd (:data:`NO_FORWARD_WINOGRAD`: they ran Winograd on the measured GPUs).
    GEMM shapes (its architecture's or its family's full-power boards') are read where a call fills its SMs as the
    measured shape filled the donor's (:func:`shape_residuals.in_waves_of`)."""
    roofs = roofs or {}
    measured = {name: calibration for name, calibration in measured.items() if _lends(measured_gpus[name], gpu)}
    # ... and lends it its kernels, not its host: the launch floors of a GPU not measured are the other measured
    # GPUs' hosts' (the public data set's, torch 2.1: 25-60 µs, convolutions growing 53-153 ns per call over a
    # run; rooflow's H200 single ops, torch 2.11: 13-24 µs and no growth)
    hosts = {name: calibration for name, calibration in measured.items()
             if measured_gpus[name].architecture not in OWN_KERNELS} or measured
    same_architecture = [name for name in measured if measured_gpus[name].architecture == gpu.architecture]
    same = [name for name in measured if measured_gpus[name].family == gpu.family]
    # its generation's measured boards: the same cuBLAS picks and tiles (GENERATIONS), whatever their power
    generation = [name for name in same if measured_gpus[name].generation == gpu.generation]
    donors = same_architecture or same or list(measured)
    # where its family has no measured GPU: those of the family whose FP32 GEMM kernels it runs
    borrowed_kernels = [] if same else [name for name in measured
                                        if measured_gpus[name].family == FP32_GEMM_KERNELS_OF.get(gpu.family)]
    family_roofs = [roof for roof in roofs.values() if roof.gpu.family == gpu.family]
    own_roofs = [roof for roof in family_roofs if roof.gpu.name == gpu.name]
    own_dram = next((roof.dram_efficiency for roof in own_roofs if roof.dram_efficiency), None)
    # its architecture's measured triad (the H100's for the H200): the memory its LayerNorm rows stream from
    architecture_dram = own_dram or next((roof.dram_efficiency for roof in family_roofs if roof.dram_efficiency
                                          and roof.gpu.architecture == gpu.architecture), None)
    # roofs of SMs that must issue an FP32 FMA every clock (ISSUE_BOUND_FP32): an issue-bound GPU's FP32 efficiency
    issue_roofs = [roof for roof in roofs.values() if roof.gpu.architecture in ISSUE_BOUND_FP32]
    classes: dict[str, dict[str, float]] = {}
    issue_note = weights_note = ""
    borrowed: set[str] = set()  # classes whose parameters none of its donors had: taken from all measured GPUs
    for op_class in CLASSES:
        # memory-bound kernels: all measured GPUs (their parameters carry across architectures)
        pool = donors if same_architecture or op_class not in MEMORY_CLASSES else list(measured)
        if not same_architecture and op_class == "gemm":
            # the tile exponent and k fill trade against the efficiency in a fit: from the boards the FP32
            # efficiency comes from (full-power ones, its family's where it has them, else all families')
            full = [name for name in measured if measured_gpus[name].full_power and op_class in measured[name].classes]
            pool = [name for name in borrowed_kernels or pool if name in full] or full or pool
        # a donor's power limit is its board's: each GPU's own is applied below
        values = [_without_power(measured[name].classes[op_class]) for name in pool if op_class in measured[name].classes]
        if not values:  # none of its donors ran this class (the data set's A100: no convolutions): all GPUs'
            values = [_without_power(measured[name].classes[op_class]) for name in measured
                      if op_class in measured[name].classes]
            borrowed.add(op_class)
        if not values:
            continue
        classes[op_class] = {key: float(statistics.median(v.get(key, DEFAULTS[op_class].get(key, 0.0)) for v in values))
                             for key in dict.fromkeys(key for v in values for key in v)}
        if op_class == "gemm" and not same_architecture:
            # re-reads beyond the L2 are its kernels' (Pascal's nn.Linear SGEMMs, maxwell_sgemm_*_tn: the P4 and
            # P100 moved 0.14-0.22 bytes per FLOP at one rate of their DRAM, each its own kernel's): its generation's
            # boards', whatever their power; a generation nothing measured, none (no board's value carries to another
            # generation's kernels)
            kernels_of = [name for name in generation if "gemm" in measured[name].classes]
            classes[op_class]["reread"] = float(statistics.median(
                measured[name].classes["gemm"].get("reread", 0.0) for name in kernels_of)) if kernels_of else 0.0
        if op_class in MEMORY_CLASSES:
            if not same_architecture or op_class in borrowed:
                # at most its whole shared L2 holds a working set: the P100's and V100's fits keep 3.0 and 2.3
                # L2s, their measuring hosts' (floors 1.7x and 1.24x the others') return after the launch, which
                # their kernels hide, and no datasheet carries to another GPU
                classes[op_class]["l2_fraction"] = min(1.0, classes[op_class]["l2_fraction"])
            # one kernel's floor is the measuring host's dispatch and launch, not the architecture's: all GPUs'
            classes[op_class]["floor_seconds"] = float(statistics.median(
                cal.classes[op_class]["floor_seconds"] for cal in hosts.values() if op_class in cal.classes))
            if op_class == "elementwise" and own_dram:  # its ceilings' triad: this class's kernel, measured
                classes[op_class]["memory_efficiency"] = own_dram
            if (op_class == "normalization" and (not same_architecture or op_class in borrowed)
                    and architecture_dram and gpu.architecture in NORMALIZATION_ROW_SECONDS_OF):
                classes[op_class].update(memory_efficiency=architecture_dram,
                                         row_seconds=NORMALIZATION_ROW_SECONDS_OF[gpu.architecture])
        elif not same_architecture:
            donors_of = [name for name in measured if op_class in measured[name].classes]
            if op_class == "gemm":
                # a GEMV-like call streams its weights at its library's memory-bound kernels' rate, alike within a
                # family (of their DRAM bandwidth: the P100 and P4 0.69 and 0.66, the V100 and T4 0.55 and 0.52,
                # the A100 0.92): its family's boards', else all measured GPUs' (or another family's kernels', below)
                donors_of = [name for name in same if name in donors_of] or donors_of
            # convolutions stream at a DRAM efficiency that carries across architectures
            classes[op_class]["memory_efficiency"] = float(statistics.median(
                measured[name].classes[op_class].get("memory_efficiency", DEFAULTS[op_class]["memory_efficiency"])
                for name in donors_of))
            full_family = [name for name in same if name in donors_of and measured_gpus[name].full_power]
            if full_family or not family_roofs:
                _unthrottled_efficiency(classes[op_class], [(measured_gpus[name], measured[name].classes[op_class])
                                                            for name in (full_family or donors_of)])
                lenders = [measured_gpus[name] for name in (full_family or donors_of)]
            else:  # its family's measured roof: its own if it is that GPU, else the median of the family's
                _set_efficiency(classes[op_class], float(statistics.median(
                    r.gemm_efficiency for r in own_roofs or family_roofs)))
                lenders = [r.gpu for r in own_roofs or family_roofs]
            if (op_class == "gemm" and gpu.architecture in ISSUE_BOUND_FP32 and issue_roofs
                    and not any(lender.architecture in ISSUE_BOUND_FP32 for lender in lenders)):
                # its SMs issue-bound, its lenders' not (the A10's GA102 beside the A100): an issue-bound
                # architecture's measured roof (ISSUE_BOUND_FP32; its convolutions follow its GEMMs, below)
                _set_efficiency(classes[op_class], float(statistics.median(r.gemm_efficiency for r in issue_roofs)))
                issue_note = (f"; FP32 GEMM efficiency {classes[op_class]['efficiency']:.2f} from rooflow's measured "
                              f"roof of {', '.join(sorted(r.gpu.name for r in issue_roofs))}: its SMs, as "
                              f"{gpu.architecture}'s, issue an FP32 FMA from 32 lanes per scheduler at every clock to "
                              f"reach their peak, those of {', '.join(sorted(lender.name for lender in lenders))} "
                              f"from 16")
    streaming = [measured[name].classes["gemm"]["memory_efficiency"]
                 / measured[name].classes["elementwise"]["memory_efficiency"]
                 for name in borrowed_kernels if {"gemm", "elementwise"} <= set(measured[name].classes)]
    if streaming and {"gemm", "elementwise"} <= set(classes):
        # the kernels it runs stream a memory-bound GEMM at this share of its elementwise ops' rate
        classes["gemm"]["memory_efficiency"] = statistics.median(streaming) * classes["elementwise"]["memory_efficiency"]
    streaming_note = ""
    if same_architecture and "elementwise" in classes:
        for op_class in ("gemm", "convolution"):
            carried = [_streaming_efficiency(measured[name], measured_gpus[name], op_class, gpu,
                                             classes["elementwise"]["memory_efficiency"])
                       for name in same_architecture if op_class in measured[name].classes]
            if op_class in classes and carried and float(statistics.median(carried)) != classes[op_class].get(
                    "memory_efficiency"):
                classes[op_class]["memory_efficiency"] = float(statistics.median(carried))
                streaming_note += (f"; memory-bound {op_class} calls at {classes[op_class]['memory_efficiency']:.2f} "
                                   f"of its DRAM bandwidth (its sibling's bytes per SM cycle: SMs bound them)")
    # nn.Linear's weights at a rate of their own: its architecture's or family's kernels' (Pascal's maxwell_sgemm_*_tn:
    # 0.18 and 0.17 of DRAM on the P100 and P4), never another family's (the median above may have taken one)
    classes.get("gemm", {}).pop("weight_efficiency", None)
    weight_lenders = [name for name in same_architecture or same
                      if "weight_efficiency" in measured[name].classes.get("gemm", {})]
    if weight_lenders and "gemm" in classes:
        rates = [measured[name].classes["gemm"]["weight_efficiency"] for name in weight_lenders]
        if same_architecture and "elementwise" in classes:  # its SMs may bind them, as they bind its GEMVs
            rates = [_streaming_efficiency(measured[name], measured_gpus[name], "gemm", gpu,
                                           classes["elementwise"]["memory_efficiency"], key="weight_efficiency")
                     for name in weight_lenders]
        classes["gemm"]["weight_efficiency"] = float(statistics.median(rates))
        weights_note = (f"; nn.Linear weights of a call of one tile row at {classes['gemm']['weight_efficiency']:.2f} "
                        f"of its DRAM bandwidth (its {'architecture' if same_architecture else 'family'}'s kernels: "
                        f"{', '.join(sorted(weight_lenders))}{', its bytes per SM cycle' if same_architecture else ''})")
    if gpu.architecture in OWN_KERNELS and "convolution" in classes and "convolution" not in borrowed:
        # its sibling's convolution kernels, not its host: a convolution's floor and growth over a run, the
        # other measured hosts' median
        runs = [cal.classes["convolution"] for cal in hosts.values() if "convolution" in cal.classes]
        classes["convolution"].update({key: float(statistics.median(run.get(key, 0.0) for run in runs))
                                       for key in CONVOLUTION_HOST_KEYS})
    if "convolution" in classes and "gemm" in classes and (not same_architecture or "convolution" in borrowed):
        # cuDNN's SGEMMs run as fast as cuBLAS's (as fitted)
        efficiency = classes["gemm"]["efficiency"]
        if same_architecture:
            # no convolutions measured on its architecture: at the FP32 efficiency a GPU of an unmeasured
            # architecture takes (the other architectures' full-power boards' GEMMs'), not its own GEMMs'. A board's
            # cuDNN and cuBLAS efficiencies differ by board (the P100's convolutions 0.83 of its GEMMs', the V100's
            # 1.10): each of the four boards that ran convolutions, given its own GEMMs and the other families'
            # convolutions, is predicted worse at its own GEMM efficiency
            # (test_a_gpu_without_convolutions_takes_other_boards_gemm_efficiency)
            others = {name: cal for name, cal in measured.items() if name not in same_architecture}
            stand_in = family_calibration(gpu, others, measured_gpus, roofs) if others else None
            if stand_in is not None and "gemm" in stand_in.classes:
                efficiency = stand_in.classes["gemm"]["efficiency"]
        _set_efficiency(classes["convolution"], efficiency)
    power_note = ""
    if "gemm" in classes and gpu.tdp_watts:
        def gemm_rates(names, lent_roofs) -> list[tuple[Gpu, dict[str, float]]]:
            return ([(measured_gpus[name], measured[name].classes["gemm"]) for name in names
                     if "gemm" in measured[name].classes]
                    + [(roof.gpu, {"efficiency": roof.gemm_efficiency}) for roof in lent_roofs])

        power = gemm_rates(same, family_roofs)
        unmeasured_family = not power and not gpu.full_power
        if unmeasured_family:
            # a power-limited board none of whose family was measured (an architecture FAMILIES does not list):
            # the measured boards' FLOPs per watt on its node or an older one (FAMILY_NODES), the best of them a
            # lower bound for it; without it the board would run its GEMMs at its boost clock whatever its power
            # (the T4 held out with its family: 36% of its GEMMs within ±25%, its long ones 2.6x the prediction),
            # and with a newer node's (the A100's 7 nm for the 12 nm T4: 0.61 of its boost-clock rate, where it
            # sustains 0.42) its long GEMMs at 1.6x the prediction. None so old: its base clock, which the board
            # guarantees at its power limit. A full-power board holds its boost clock (FULL_POWER_WATTS)
            node = _node(gpu)
            power = gemm_rates([name for name in measured if _node(measured_gpus[name]) <= node],
                               [roof for roof in roofs.values() if _node(roof.gpu) <= node])
        sustained = (_sustained_fraction(classes["gemm"]["efficiency"], gpu, power) if power or not unmeasured_family
                     else gpu.base_clock_fraction or 1.0)
        if sustained < 1.0:  # one board, one power limit; its GEMMs and convolutions meet it unlike (random_order_clock)
            classes["gemm"].update(sustained=sustained, boost_seconds=BOOST_TIME_CONSTANT_SECONDS)
            if "convolution" in classes:
                classes["convolution"].update(sustained=random_order_clock(sustained), boost_seconds=0.0)
            whose = ("the best FP32 FLOPs per joule measured on a board of its process node or an older one (none "
                     "of its family measured: a lower bound)" if unmeasured_family else "its family's FP32 FLOPs per joule")
            if not power:
                why = ("its base clock's share of its boost clock, which the board guarantees at its power limit: no "
                       "board of its process node or an older one measured")
            elif gpu.base_clock_fraction and sustained == gpu.base_clock_fraction:
                why = f"its base clock's share of its boost clock: {whose} would give less"
            else:
                why = f"its board power at {whose}"
            power_note = _power_note("FP32 GEMMs", sustained, why)
            if "convolution" in classes:
                power_note += (f"; convolutions at {classes['convolution']['sustained']:.2f} of their boost-clock "
                               f"rate whatever their length (the mean of their boost-clock and power-limited times: the "
                               f"measured power-limited boards ran theirs at one clock between the two)")
    # one call's floor is the measuring host's dispatch path for that operator: all GPUs' median
    operators = sorted({o for cal in hosts.values() for o in cal.floors})
    floors = {o: float(statistics.median(cal.floors[o] for cal in hosts.values() if o in cal.floors))
              for o in operators}
    def waves(name: str, op_class: str) -> ShapeResiduals:  # GEMMs: a measured GPU's residuals in ``gpu``'s waves
        residuals = measured[name].shapes[op_class]
        return (shape_residuals.in_waves_of(residuals, measured_gpus[name].sm_count, gpu.sm_count)
                if op_class == "gemm" else residuals)

    shapes = _shapes_of({op_class: [waves(name, op_class) for name in same_architecture
                                    if op_class in measured[name].shapes] for op_class in shape_residuals.CLASSES})
    # cuBLAS's GEMM picks by shape, each board's level removed: its family's full-power boards' (the same kernel
    # names: maxwell_sgemm on the P100 and P4, volta_sgemm on the V100 and T4). Not a power-limited board's, though
    # its generation's picks are the same (the P4's for the P100: 88% of their shapes ran the same kernel): held
    # one GPU out, the P100's GEMMs went 80% -> 85% within ±25% without them, once the model tiled cuBLAS's
    # output the way round its kernels do (_rows_by_columns) — what the P4's residuals had been correcting
    with_gemm_shapes = [name for name in sorted(same) if "gemm" in measured[name].shapes]
    siblings = [name for name in with_gemm_shapes if measured_gpus[name].full_power]
    gemm_from_family = "gemm" not in shapes and bool(siblings)
    if gemm_from_family:
        shapes["gemm"] = shape_residuals.pooled([waves(name, "gemm") for name in siblings])
    across = []
    for op_class in shape_residuals.ACROSS_ARCHITECTURES:  # cuDNN's picks by shape, each GPU's level removed
        parts = [waves(name, op_class) for name in sorted(measured) if op_class in measured[name].shapes]
        if op_class not in shapes and parts:
            shapes[op_class] = shape_residuals.pooled(parts)
            across.append(op_class)
    winograd_note = ""
    if "convolution" in across and gpu.architecture in NO_FORWARD_WINOGRAD:
        # their 3×3 stride-1 shapes ran Winograd on the measured GPUs, implicit GEMM or FFT here: not its picks
        shapes["convolution"] = shape_residuals.without_winograd_shapes(shapes["convolution"])
        winograd_note = "; no 3×3 stride-1 convolution shapes (Winograd on the measured GPUs)"
    across_note = (f"; {', '.join(across)} shapes: all measured GPUs' residuals, each less its median"
                   f"{winograd_note}" if across else "")
    if gemm_from_family:
        across_note += (f"; GEMM shapes: its family's full-power boards' residuals ({', '.join(siblings)}), "
                        f"each less its median")
    gemm_donors = siblings if gemm_from_family else [name for name in same_architecture
                                                     if "gemm" in measured[name].shapes]
    if any(measured_gpus[name].sm_count != gpu.sm_count for name in gemm_donors):
        across_note += f"; GEMM shapes read where a call fills its {gpu.sm_count} SMs as it filled theirs"
    own_dram_note = (f"; elementwise DRAM efficiency {own_dram:.2f}, its own ceilings' triad"
                     if own_dram and "elementwise" in classes else "")
    layer_norm_note = (f"LayerNorm rows at {architecture_dram:.2f} of its DRAM bandwidth (its architecture's measured "
                       f"triad) plus {classes['normalization']['row_seconds'] * 1e9:.0f} ns per row per SM (rooflow's "
                       f"{gpu.architecture} recording)" if "row_seconds" in classes.get("normalization", {}) else "")
    borrowed_note = "".join(
        (f"; {layer_norm_note}, other parameters the median of all measured GPUs'" if op_class == "normalization"
         and layer_norm_note else f"; {op_class}: none measured on its architecture, each parameter the median of "
                                  f"all measured GPUs'")
        + (_borrowed_efficiency_note(classes["convolution"]) if op_class == "convolution" and "gemm" in classes else "")
        for op_class in sorted(borrowed) if op_class in classes) if same_architecture else ""
    # the measuring hosts' (host_drift), with its convolution parameters
    host_note = _drift_note(classes.get("convolution", {}), "the other measured GPUs' hosts"
                            if same_architecture and gpu.architecture in OWN_KERNELS else "its donors' hosts")
    if same_architecture:
        source = (f"{gpu.name}: not measured; the kernel calibration{'s' if len(same_architecture) > 1 else ''} of "
                  f"{', '.join(sorted(same_architecture))} (its architecture, {gpu.architecture}: the same kernels), "
                  f"measured shapes included, with its datasheet (SMs, FP32 peak, bandwidth, L2, board power); "
                  f"launch floors from all measured GPUs' hosts ({', '.join(sorted(hosts))}){own_dram_note}"
                  f"{streaming_note}{weights_note}{borrowed_note}{across_note}{host_note}{power_note}")
    else:
        which = "its family's" if same else "all"
        kernels_note = (f"; GEMM tile exponent, k fill and memory-bound GEMMs' DRAM efficiency against its "
                        f"elementwise ops' from {', '.join(sorted(borrowed_kernels))} (it runs the "
                        f"{FP32_GEMM_KERNELS_OF[gpu.family]} family's FP32 GEMM kernels)" if streaming else "")
        roof_note = (f"; FP32 GEMM efficiency from rooflow's measured roof of "
                     f"{', '.join(sorted(r.gpu.name for r in family_roofs))}" if family_roofs and not same else "")
        roof_note += own_dram_note + issue_note
        if layer_norm_note:
            roof_note += f"; {layer_norm_note}"
        source = (f"{gpu.name}: not measured; GEMM/convolution from {which} measured GPUs' kernel calibrations "
                  f"({', '.join(sorted(donors))}){roof_note}{kernels_note}, elementwise/normalization/softmax and launch floors "
                  f"from all ({', '.join(sorted(measured))}), median per class, with its datasheet (SMs, FP32 "
                  f"peak, bandwidth, L2, board power){weights_note}{across_note}{host_note}{power_note}")
    return KernelCalibration(source=source, gpu=gpu.name, relative_uncertainty=FAMILY_UNCERTAINTY, classes=classes,
                             floors=floors, architecture=gpu.architecture, shapes=shapes)


def _streaming_efficiency(donor: KernelCalibration, donor_gpu: Gpu, op_class: str, gpu: Gpu,
                          dram_efficiency: float, key: str = "memory_efficiency") -> float:
    """The DRAM efficiency of ``op_class``'s memory-bound calls (GEMV-like GEMMs) on ``gpu``, from a measured GPU
    of its architecture. Where the donor streamed them slower than its elementwise kernels, its SMs bound them
    (bytes in flight per SM over the memory latency): they move the donor's bytes per SM cycle, up to what
    ``gpu``'s memory gives its streaming kernels (``dram_efficiency``) — the H200's GEMVs at 2.4 of its 4.8 TB/s
    move 0.71 of an H100's 3.35, as the time model carries Hopper's SM-bound kernels (calibration.
    sm_bound_bandwidth). Else its memory bound them: the same share of ``gpu``'s. ``key``: the GEMM's
    ``weight_efficiency`` (an nn.Linear's weights in a call of one tile row) alike."""
    efficiency = donor.classes[op_class].get(key, DEFAULTS[op_class]["memory_efficiency"])
    if efficiency >= SM_BOUND_SHARE * donor.classes.get("elementwise", {}).get("memory_efficiency", efficiency):
        return efficiency
    per_sm_cycle = efficiency * donor_gpu.dram_bytes_per_second / donor_gpu.fp32_flops_per_second
    return min(per_sm_cycle * gpu.fp32_flops_per_second / gpu.dram_bytes_per_second, dram_efficiency)


def _shapes_of(parts_of: dict[str, list[ShapeResiduals]]) -> dict[str, ShapeResiduals]:
    """Per class, the measured shapes of several GPUs of one architecture (``parts_of[op_class]``), together."""
    shapes = {}
    for op_class, parts in parts_of.items():
        if parts:
            shapes[op_class] = ShapeResiduals(np.vstack([p.points for p in parts]),
                                              np.concatenate([p.residuals for p in parts]))
    return shapes


def _drift_note(convolution: dict[str, float], whose: str) -> str:
    """A calibration source's words for a convolution's floor and its growth over a measuring run
    (:func:`host_drift`; nothing where it has none)."""
    if not convolution.get("drift_seconds_per_call"):
        return ""
    drift = convolution["drift_seconds_per_call"]
    return (f"; convolution calls {convolution['floor_seconds'] * 1e6:.0f} µs of launch floor at a measuring run's "
            f"middle call, {'growing' if drift > 0 else 'shrinking'} {abs(drift) * 1e9:.0f} ns per call over the run "
            f"({whose}: a call timed alone; a network's step is priced on its kernels, its host costs apart)")


def _borrowed_efficiency_note(convolution: dict[str, float]) -> str:
    """A calibration source's words for the FP32 efficiency of convolutions its architecture did not measure."""
    return (f" but its FP32 efficiency ({convolution['efficiency']:.2f}), the other architectures' full-power boards' "
            f"GEMMs', not its own")


def _node(gpu: Gpu) -> int:
    """Its family's process node, by age (:data:`FAMILY_NODES`)."""
    return FAMILY_NODES.index(gpu.family) if gpu.family in FAMILY_NODES else len(FAMILY_NODES)


def _power_note(what: str, sustained: float, why: str) -> str:
    """A calibration source's words for a power limit: ``what`` fall to ``sustained`` of their boost-clock rate
    over GPU Boost's time constant."""
    return (f"; {what} falling from their boost-clock rate to {sustained:.2f} of it ({why}) with a "
            f"{BOOST_TIME_CONSTANT_SECONDS * 1e3:.1f} ms time constant into a kernel")


def _without_power(params: dict[str, float]) -> dict[str, float]:
    """A class's parameters without its board's power limit (:data:`POWER_KEYS`)."""
    return {key: value for key, value in params.items() if key not in POWER_KEYS}


def _set_efficiency(params: dict[str, float], efficiency: float) -> None:
    """Set the FP32 GEMM efficiency, scaling the Winograd efficiency and rate alike. In place."""
    for key in ("winograd_efficiency", "winograd_rate"):
        if key in params:
            params[key] *= efficiency / params["efficiency"]
    params["efficiency"] = efficiency


def _unthrottled_efficiency(params: dict[str, float], donors: list[tuple[Gpu, dict[str, float]]]) -> None:
    """Set the FP32 GEMM efficiency to the median of the full-power ``donors``' (its family's where it has
    one, else all families'; at or above :data:`FULL_POWER_WATTS` a board holds its boost clock under
    SGEMM, so its efficiency is cuBLAS's, not its power limit's), scaling the Winograd efficiency alike;
    the power limit then applies per board (:func:`_sustained_fraction`). In place."""
    full = [p["efficiency"] for d, p in donors if d.full_power]
    if full:
        _set_efficiency(params, float(statistics.median(full)))


def _sustained_fraction(efficiency: float, gpu: Gpu, donors: list[tuple[Gpu, dict[str, float]]]) -> float:
    """The fraction of its boost-clock FP32 GEMM rate (``efficiency`` of its datasheet peak) that ``gpu``'s
    board power sustains, at its family's FP32 GEMM FLOPs per watt (the best measured donor's: a donor below
    its power limit understates it); 1 where its power suffices or no donor says. Never below its base clock's
    share of its boost clock (``base_clock_fraction``): the board guarantees its base clock at its power limit,
    and a donor below its own limit (an H100 SXM under SGEMM for a 72 W L4 of its family) makes the FLOPs per
    watt a lower bound only."""
    per_watt = [d.fp32_flops_per_second * p["efficiency"] * p.get("sustained", 1.0) / d.tdp_watts
                for d, p in donors if d.tdp_watts]
    if not per_watt:
        return 1.0
    powered = min(1.0, gpu.tdp_watts * max(per_watt) / (gpu.fp32_flops_per_second * efficiency))
    return float(max(powered, gpu.base_clock_fraction or 0.0))


def random_order_clock(sustained: float) -> float:
    """The clock share (of its boost clock) at which a power-limited board without data of its own runs calls
    measured as the data set measured its convolutions, where its power limit alone holds its GEMMs to
    ``sustained``: the mean of a call's boost-clock and power-limited times, 2s / (1 + s) of the boost-clock rate.

    The data set's GEMM files ran their shapes in sweeps (each call's length correlated 0.95 with the previous
    call's), its conv files in random order (0.02-0.03). On both power-limited boards, fitted with no power limit,
    the GEMMs slow with their length (:func:`_throttled` prices that) and the convolutions do not (measured/predicted
    0.98-1.01 from 0.1 to 30 ms calls): one clock per run, between the board's bounds — 0.87 of the P100's
    convolution efficiency on the 75 W P4, 0.68 of the V100's on the 70 W T4, whose GEMMs sustain 0.77 and 0.55
    (this gives 0.87 and 0.71). What places it there is not in the data (the idle time between calls does not move
    it), so the midpoint of the two times, the range of a GPU predicted from others (±40%) covering both ends."""
    return 2 * sustained / (1 + sustained)


def _throttled(seconds: np.ndarray, p: dict[str, float]) -> np.ndarray:
    """Compute-bound seconds on a power-limited board of ``seconds`` at the boost clock its efficiency is quoted
    at: t into a kernel it runs at ``sustained`` + (1 − ``sustained``) × exp(−t / ``boost_seconds``) of that rate
    (GPU Boost averages power over time, so a short kernel barely sees the limit; one of many time constants
    takes (``seconds`` − (1 − ``sustained``) × ``boost_seconds``) / ``sustained``)."""
    sustained = p.get("sustained", 1.0)
    if sustained >= 1.0:
        return seconds
    tau = p.get("boost_seconds", 0.0)
    if tau <= 0:
        return seconds / sustained
    # the clock share at t into the kernel: s + (1 - s) exp(-t / tau) (GPU Boost's power average catching up);
    # the time T doing ``seconds`` of boost-clock work solves s T + (1 - s) tau (1 - exp(-T / tau)) = seconds.
    # From the larger of its two lower bounds: past 12 tau the long-kernel one is within 5e-6, short of it four
    # Newton steps from below (the left side is concave) reach 1e-8 for any sustained share BOUNDS allows (0.1 up)
    seconds = np.asarray(seconds, dtype=float)
    finite = np.isfinite(seconds)  # a path that cannot run a shape (inf) stays so
    work = np.where(finite, seconds, 0.0)
    T = np.maximum(work, (work - (1 - sustained) * tau) / sustained)
    near = T < 12 * tau
    t, done = T[near], work[near]
    for _ in range(4):
        decay = np.exp(-t / tau)
        t = t - (sustained * t + (1 - sustained) * tau * (1 - decay) - done) / (sustained + (1 - sustained) * decay)
    T[near] = t
    return np.where(finite, T, seconds)


# ------------------------------------------------------------------------------------------ checking
def fit_each(data: pd.DataFrame, gpus: dict[str, Gpu]) -> dict[str, KernelCalibration]:
    """Each measured GPU's own calibration, by GPU name (what :func:`held_one_out` trains on)."""
    return {name: fit_gpu(rows, gpus[name], source=f"fitted on {name}") for name, rows in data.groupby("gpu")}


def held_one_out(data: pd.DataFrame, gpus: dict[str, Gpu], band: float = CHECK_BAND, host_floors: bool = False,
                 calibrations: dict[str, KernelCalibration] | None = None, whole_family: bool = False) -> pd.DataFrame:
    """Train on all GPUs but one, predict the one left out (its family's or all GPUs' parameters with its
    datasheet): per held-out GPU and class, rows, the fraction within ±``band`` and the median |error|.
    ``host_floors``: with the launch floors of the host that measured the held-out GPU (:func:`with_host_floors`);
    ``calibrations``: :func:`fit_each` of ``data``, where already fitted; ``whole_family``: its whole architecture
    family held out with it (the case of a GPU of a family nothing measured: the L4's, or the A100's
    convolutions)."""
    calibrations = calibrations or fit_each(data, gpus)
    table = []
    for name, rows in data.groupby("gpu"):
        others = {other: cal for other, cal in calibrations.items() if other != name
                  and not (whole_family and gpus[other].family == gpus[name].family)}
        calibration = family_calibration(gpus[name], others, gpus)
        if host_floors:
            calibration = with_host_floors(rows, gpus[name], calibration)
        predicted = predict_seconds(rows, gpus[name], calibration)
        table += _score(rows, predicted, name, band, calibration.relative_uncertainty)
    return pd.DataFrame(table)


def held_out_shapes(data: pd.DataFrame, gpus: dict[str, Gpu], fraction: float = 0.2, band: float = CHECK_BAND,
                    seed: int = 0) -> pd.DataFrame:
    """Per GPU, fit on its measured rows but a fixed random ``fraction`` of its shapes (per operator),
    predict those: per GPU and class, rows, the fraction within ±``band`` and the median |error|."""
    return _fitted_on_part(data, gpus, band, lambda rows: rows.drop(
        rows.groupby("operator").sample(frac=fraction, random_state=seed).index))


def fitted_on_few(data: pd.DataFrame, gpus: dict[str, Gpu], counts: dict[str, int], band: float = CHECK_BAND,
                  seed: int = 0) -> pd.DataFrame:
    """Per GPU, fit on ``counts`` of its shapes per operator (what `rooflow ceilings --single-ops` measures on a
    user's GPU), predict the rest: per GPU and class, rows, the fraction within ±``band`` and the median |error|."""
    return _fitted_on_part(data, gpus, band, lambda rows: pd.concat(
        [part.sample(n=min(len(part), counts.get(operator, 0)), random_state=seed)
         for operator, part in rows.groupby("operator")]))


def _fitted_on_part(data: pd.DataFrame, gpus: dict[str, Gpu], band: float, train_of) -> pd.DataFrame:
    """Per GPU, fit on the rows ``train_of(its rows)`` picks, predict the others: per GPU and class, rows, the
    fraction within ±``band`` and the median |error|."""
    table = []
    for name, rows in data.groupby("gpu"):
        train = train_of(rows)
        calibration = fit_gpu(train, gpus[name], source=f"fitted on {len(train)} of {len(rows)} calls of {name}")
        test = rows.drop(train.index)
        table += _score(test, predict_seconds(test, gpus[name], calibration), name, band,
                        calibration.relative_uncertainty)
    return pd.DataFrame(table)


def algorithm_agreement(data: pd.DataFrame, gpus: dict[str, Gpu]) -> pd.DataFrame:
    """The convolution model's algorithms against cuDNN's picks: per measured GPU (fitted on its own GEMMs and
    convolutions) and algorithm its autotuner ran (the ``algorithm`` column, :func:`convolution_algorithm`):
    the calls, the fraction the model also makes the fastest, and the median predicted/measured seconds of
    that algorithm's own model (its launch floor included, the measured shapes' residuals not)."""
    table = []
    for name, rows in data[data["op_class"].isin(("gemm", "convolution"))].groupby("gpu"):
        convolutions = rows[rows["op_class"] == "convolution"]
        if "algorithm" not in convolutions or not convolutions["algorithm"].notna().any():
            continue
        calibration = fit_gpu(rows, gpus[name], source=f"fitted on {name}")
        prepared = _Prepared(convolutions, gpus[name])
        params = {**DEFAULTS["convolution"], **calibration.classes["convolution"]}
        times = prepared.convolution_algorithms(params)
        names = np.array(list(times))
        picked = names[np.argmin(np.vstack(list(times.values())), axis=0)]
        ran = convolutions["algorithm"].to_numpy(object)
        measured = convolutions["seconds"].to_numpy(float)
        for algorithm in sorted(set(ran[pd.notna(ran)])):
            mask = ran == algorithm
            own = (params["floor_seconds"] + times[algorithm][mask]) / measured[mask] if algorithm in times else []
            table.append({"gpu": name, "algorithm": algorithm, "calls": int(mask.sum()),
                          "model_picks_it": float(np.mean(picked[mask] == algorithm)),
                          "median_ratio": float(np.median(own)) if len(own) else float("nan")})
    return pd.DataFrame(table)


def check_shipped(root: str | Path, band: float = CHECK_BAND, host_floors: bool = False) -> pd.DataFrame:
    """The shipped calibrations against the measurements under ``root`` (the measurement layout): each GPU
    predicted with its own shipped calibration, or — rooflow having no measurements of it — its architecture's
    or family's with its datasheet (``device_configs``); per GPU and class, rows, the fraction within
    ±``band`` and the median |error|. ``host_floors``: with the launch floors of the host that measured them
    (:func:`with_host_floors`), so that the kernels alone are checked."""
    data, gpus = measured_folder(root)
    keys = dataset_gpu_keys(root)
    table = []
    for name, rows in data.groupby("gpu"):
        calibration = calibration_of(gpus[name], keys[name])
        if host_floors:
            calibration = with_host_floors(rows, gpus[name], calibration)
        table += _score(rows, predict_seconds(rows, gpus[name], calibration), name, band,
                        calibration.relative_uncertainty)
    return pd.DataFrame(table)


def _score(rows: pd.DataFrame, predicted: np.ndarray, gpu: str, band: float,
           uncertainty: float | None = None) -> list[dict[str, Any]]:
    """Per class of ``rows``: calls, the fraction within ±``band``, the median |error| and, where the calibration's
    range (``uncertainty``, its ±relative_uncertainty: what a prediction from it prints) is given, that range and
    the fraction of calls inside it."""
    ratio = predicted / rows["seconds"].to_numpy(float)
    result = []
    for op_class in CLASSES:
        mask = (rows["op_class"] == op_class).to_numpy()
        if mask.any():
            error = np.abs(ratio[mask] - 1)
            score = {"gpu": gpu, "op_class": op_class, "rows": int(mask.sum()),
                     "within": float(np.mean(error <= band)), "median_abs_error": float(np.median(error))}
            if uncertainty is not None:
                score.update(range=uncertainty, inside_range=float(np.mean(error <= uncertainty)))
            result.append(score)
    return result


# ------------------------------------------------------------------------------------------ shipped
SHIPPED_FILE = "kernels.json"
# beside single ops rooflow measured (`rooflow ceilings --single-ops DIR`): who measured them, where, with what
SINGLE_OPS_PROVENANCE = "rooflow-single-ops.json"
# the repository the public data set was published in, as a copy's PROVENANCE.md names it
PUBLIC_DATA_SET_REPOSITORY = "sitar-lab/NeuSight"


SHAPES_FILE = "kernels_shapes.npz"  # beside SHIPPED_FILE (<stem>_shapes.npz): the measured shapes' residuals, per GPU and class


def roof_from_ceilings(ceilings: dict[str, Any], device) -> MeasuredRoof:
    """A :class:`MeasuredRoof` from ``rooflow ceilings`` output on a catalogue GPU: its best FP32 GEMM rate
    over its datasheet FP32 peak, divided by the kernel model's waves and padding of that GEMM (an n×n×n
    product of the ceilings' largest size at 128×128 tiles), so that the model reproduces the measurement."""
    gpu = gpu_from_device(device)
    peaks = ceilings.get("peak_flops_per_second") if isinstance(ceilings, dict) else None
    rate = peaks.get("fp32") if isinstance(peaks, dict) else None
    if gpu is None or not rate:
        raise RooflowError(f"{device.key}: the ceilings file holds no measured FP32 GEMM rate of a GPU: give the "
                           f"JSON `rooflow ceilings` wrote on that GPU")
    n = float(max((ceilings.get("plan") or {}).get("gemm_sizes") or [8192]))
    tiles = math.ceil(n / 128) ** 2  # cuBLAS's largest FP32 tile on a large square product
    shape = tiles / (math.ceil(tiles / gpu.sm_count) * gpu.sm_count)  # its last wave partly empty
    efficiency = round(rate / (gpu.fp32_flops_per_second * shape), 4)
    source = (f"rooflow ceilings on a real {ceilings.get('device_name') or gpu.name}: FP32 torch.mm "
              f"{rate / 1e12:.1f} TFLOP/s of {gpu.fp32_flops_per_second / 1e12:.1f} (n = {n:.0f})")
    # the STREAM triad, torch.add(b, c, alpha=s): reads two arrays, writes one, as the elementwise class counts
    triad = ((ceilings.get("memory_tests_bytes_per_second") or {}).get("dram_triad") or {}).get("best")
    dram_efficiency = round(triad / gpu.dram_bytes_per_second, 4) if triad else None
    if dram_efficiency:
        source += (f"; DRAM triad (torch.add) {triad / 1e12:.2f} TB/s of "
                   f"{gpu.dram_bytes_per_second / 1e12:.2f}")
    return MeasuredRoof(gpu=gpu, gemm_efficiency=efficiency, source=source, dram_efficiency=dram_efficiency)


def load_folders(roots) -> tuple[pd.DataFrame, dict[str, Gpu]]:
    """The measured rows (:func:`load_measurements`) and GPUs (:func:`load_dataset_gpus`) of several folders in the
    measurement layout together; a GPU measured in two of them ends in one sentence (its rows' places in their
    runs would collide)."""
    frames, gpus = [], {}
    for root in roots:
        data, found = measured_folder(root)
        _refuse_twice(root, set(data["gpu"]) & set(gpus))
        gpus.update(found)
        frames.append(data)
    return pd.concat(frames, ignore_index=True), gpus


def measured_folder(root: str | Path) -> tuple[pd.DataFrame, dict[str, Gpu]]:
    """One folder's measured rows (:func:`load_measurements`) and its GPUs' datasheets, each GPU's latencies checked
    for their unit (:func:`check_latency_unit`)."""
    data = load_measurements(root)
    gpus = load_dataset_gpus(root, data["gpu"].unique())
    for name, rows in data.groupby("gpu"):
        check_latency_unit(rows, gpus[name], root)
    return data, gpus


def check_latency_unit(rows: pd.DataFrame, gpu: Gpu, root: str | Path) -> None:
    """Refuse, naming the file, an operator whose measured calls sit :data:`UNIT_RATIO` or more away from the
    kernel model's default prices on ``gpu``'s datasheet: latencies written in microseconds or seconds."""
    predicted = _model_seconds(_Prepared(rows, gpu), KernelCalibration(source="defaults", gpu=gpu.name))
    ratios = pd.Series(rows["seconds"].to_numpy(float) / predicted, index=rows.index)
    for operator, ratio in ratios.groupby(rows["operator"]).median().items():
        if not 1 / UNIT_RATIO <= ratio <= UNIT_RATIO:
            unit = "microseconds (divide them by 1,000)" if ratio > 1 else "seconds (multiply them by 1,000)"
            raise RooflowError(f"{Path(root) / operator}/: the {gpu.name}'s {operator} calls take {ratio:.3g}x what "
                               f"its datasheet allows them (the median of its calls, at the kernel model's default "
                               f"efficiencies): Latency must be milliseconds, and these look like {unit}")


def _refuse_twice(root, names) -> None:
    if names:
        raise RooflowError(f"{root}: single ops of {sorted(names)[0]}, which another of the folders given also holds: "
                           f"give each GPU's measurements in one folder")


def measurement_origin(root: str | Path) -> str:
    """Who measured the single ops under ``root``, as a calibration's source names them: rooflow's own
    (`rooflow ceilings --single-ops`) say so in their :data:`SINGLE_OPS_PROVENANCE`; a copy of the public data set
    in its PROVENANCE.md, which names the data set's repository; any other folder of that layout holds someone
    else's measurements, and only its PROVENANCE.md, where it has one, says whose."""
    provenance = Path(root) / SINGLE_OPS_PROVENANCE
    if provenance.is_file():
        return json.loads(provenance.read_text()).get("measured_by", "rooflow ceilings --single-ops")
    readme = Path(root) / "PROVENANCE.md"
    if not readme.is_file():
        return "measured outside rooflow (nothing beside them says by whom)"
    if PUBLIC_DATA_SET_REPOSITORY in readme.read_text(errors="replace"):
        return "the public NeuSight data set"
    return "measured outside rooflow (its PROVENANCE.md says by whom)"


def calibrate_measured(roots, roofs: dict[str, MeasuredRoof] | None = None
                       ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The kernel calibration of every GPU measured under ``roots`` (one folder or several, each in the
    measurement layout) and the measured roofs (``roofs``, by catalogue key): the shipped JSON's content, and
    the arrays of the measured shapes (:data:`SHAPES_FILE`). Per GPU its datasheet (:class:`Gpu`), catalogue key
    (where the catalogue has it) and fitted parameters."""
    measured, arrays = {}, {}
    for root in [roots] if isinstance(roots, (str, Path)) else roots:
        data, gpus = measured_folder(root)
        keys = dataset_gpu_keys(root)
        origin = measurement_origin(root)
        _refuse_twice(root, set(data["gpu"]) & set(measured))
        for name, rows in data.groupby("gpu"):
            operators = ", ".join(sorted(rows["operator"].unique()))
            source = (f"fitted on {len(rows)} measured single-op latencies of the {name} ({operators}; FP32, "
                      f"{origin}, {Path(root).name}/)")
            calibration = fit_gpu(rows, gpus[name], source)
            measured[name] = {"catalogue": keys[name], "gpu": asdict(gpus[name]),
                              "calibration": calibration.to_json()}
            for op_class, residuals in calibration.shapes.items():
                arrays.update(residuals.to_arrays(f"{name}/{op_class}"))
    about = ("rooflow calibrate-kernels: per-GPU kernel-model parameters fitted on measured single ops, and "
             "measured roofs of GPUs whose family has none (rooflow.estimate.kernel_calibration)")
    roof_json = {key: {"gpu": asdict(roof.gpu), "gemm_efficiency": roof.gemm_efficiency, "source": roof.source,
                       "dram_efficiency": roof.dram_efficiency}
                 for key, roof in (roofs or {}).items()}
    return {"about": about, "measured": measured, "roofs": roof_json}, arrays


def write_shipped(result: dict[str, Any], arrays: dict[str, np.ndarray], path: str | Path) -> Path:
    """Write a calibration (:func:`calibrate_measured`) as ``path`` and its measured shapes beside it
    (``<stem>_shapes.npz``), each atomically; returns the shapes' path."""
    from rooflow.io import atomic_path, write_json

    shapes = shapes_path(path)
    with atomic_path(shapes) as temporary, open(temporary, "wb") as handle:
        np.savez_compressed(handle, **arrays)
    write_json(path, result)
    return shapes


def shapes_path(path: str | Path) -> Path:
    """Where the measured shapes of calibrations file ``path`` lie: ``<stem>_shapes.npz`` beside it."""
    path = Path(path)
    return path.with_name(f"{path.stem}_shapes.npz")


def load_shipped(path: str | Path | None = None
                 ) -> tuple[dict[str, KernelCalibration], dict[str, Gpu], dict[str, str], dict[str, MeasuredRoof]]:
    """(calibrations, datasheets, catalogue keys) of the measured GPUs in ``path`` (default: the shipped
    rooflow/data/calibration/kernels.json and its shapes), by the GPU's name, and the measured roofs by
    catalogue key."""
    if path is None:
        folder = resources.files("rooflow.data.calibration")
        text = folder.joinpath(SHIPPED_FILE).read_text()
        shapes_bytes = folder.joinpath(SHAPES_FILE).read_bytes()
    else:
        path = Path(path)
        text = path.read_text()
        shapes_file = shapes_path(path)
        shapes_bytes = shapes_file.read_bytes() if shapes_file.exists() else None
    content = json.loads(text)
    data = content["measured"]
    arrays = np.load(io.BytesIO(shapes_bytes)) if shapes_bytes else {}
    calibrations = {}
    for name, value in data.items():
        shapes = {op_class: ShapeResiduals.from_arrays(arrays, f"{name}/{op_class}")
                  for op_class in shape_residuals.CLASSES if f"{name}/{op_class}/points" in arrays}
        calibrations[name] = KernelCalibration.from_json(value["calibration"], shapes)
    gpus = {name: Gpu(**v["gpu"]) for name, v in data.items()}
    keys = {name: v["catalogue"] for name, v in data.items() if v.get("catalogue")}
    roofs = {key: MeasuredRoof(gpu=Gpu(**v["gpu"]), gemm_efficiency=v["gemm_efficiency"], source=v["source"],
                               dram_efficiency=v.get("dram_efficiency"))
             for key, v in content.get("roofs", {}).items()}
    return calibrations, gpus, keys, roofs


def calibration_of(gpu: Gpu, key: str | None = None, shipped=None) -> KernelCalibration:
    """The kernel calibration of ``gpu`` (``key``: its catalogue key, if any): its own measured one where
    rooflow ships it (by key or by name), else its architecture's or family's (:func:`family_calibration`)
    from the shipped calibrations and measured roofs (``shipped``: :func:`load_shipped`'s result)."""
    calibrations, gpus, keys, roofs = shipped or _shipped()
    for name, calibration in calibrations.items():
        if name == gpu.name or (key and keys.get(name) == key):
            return _completed(calibration, gpu, calibrations, gpus, roofs)
    return family_calibration(gpu, calibrations, gpus, roofs)


def _completed(calibration: KernelCalibration, gpu: Gpu, calibrations, gpus, roofs) -> KernelCalibration:
    """A measured GPU's calibration with the classes it has no measurements of (the data set's A100 ran no
    convolutions) taken as its architecture's siblings without data take them (:func:`family_calibration`),
    measured shapes included — not the model's defaults."""
    missing = [c for c in CLASSES if c not in calibration.classes]
    if not missing:
        return calibration
    family = family_calibration(gpu, calibrations, gpus, roofs)
    filled = [c for c in missing if c in family.classes]
    if not filled:
        return calibration
    notes = []
    for op_class in filled:  # whose parameters family_calibration took: its architecture's, else all GPUs'
        if "row_seconds" in family.classes[op_class]:  # LayerNorms on an architecture rooflow recorded them on
            notes.append(f"LayerNorm priced as rooflow's {gpu.architecture} recording of networks (its measured "
                         f"triad plus {family.classes[op_class]['row_seconds'] * 1e9:.0f} ns per row per SM), not "
                         f"fitted on its single ops (at most ~15k rows: their fit does not reach a network's)")
            continue
        having = sorted(n for n, c in calibrations.items() if op_class in c.classes and _lends(gpus[n], gpu))
        donors = [n for n in having if gpus[n].architecture == gpu.architecture] or having
        shapes = ", their measured shapes' residuals pooled (each less its median)" if op_class in family.shapes else ""
        own_efficiency = (_borrowed_efficiency_note(family.classes[op_class])
                          if op_class == "convolution" and "gemm" in calibration.classes else "")
        notes.append(f"{op_class} not measured on it: each parameter the median of {', '.join(donors)}{own_efficiency}"
                     f"{shapes}, as a GPU of its architecture without measurements takes it")
    return replace(calibration,
                   classes={**calibration.classes, **{c: family.classes[c] for c in filled}},
                   shapes={**{c: family.shapes[c] for c in filled if c in family.shapes}, **calibration.shapes},
                   source="; ".join([calibration.source, *notes]))


# calibrations files (`rooflow calibrate-kernels -o FILE`) added to the shipped ones in this process, as loaded
_ADDED: dict[Path, tuple] = {}


def read_calibrations(path: str | Path) -> tuple:
    """A ``rooflow calibrate-kernels -o`` file, loaded (:func:`load_shipped`'s tuple); a missing or foreign file
    ends in one sentence naming it and how to make one."""
    path = Path(path)
    if path.is_dir():
        raise RooflowError(f"{path} is a folder: give a kernel calibrations file (`rooflow calibrate-kernels --data "
                           f"DIR -o kernels-GPU.json` writes one)")
    if not path.is_file():
        raise RooflowError(f"{path}: no such kernel calibrations file: make one with `rooflow calibrate-kernels "
                           f"--data DIR -o {path}` (DIR: single ops from `rooflow ceilings --device KEY --single-ops DIR` on that GPU)")
    try:
        loaded = load_shipped(path)
    except (KeyError, TypeError, ValueError) as error:
        raise RooflowError(f"{path}: not a kernel calibrations file ({type(error).__name__}: {error}): give the file "
                           f"`rooflow calibrate-kernels --data DIR -o kernels-GPU.json` wrote") from None
    if not loaded[0]:  # it would change no prediction, silently
        raise RooflowError(f"{path}: no GPU's calibration in it (its \"measured\" is empty): make it again with "
                           f"`rooflow calibrate-kernels --data DIR -o {path}` from a folder of single ops")
    if problem := calibration_values_problem(*loaded[:2]):
        raise RooflowError(f"{path}: {problem}, which no fit writes: make it again with `rooflow calibrate-kernels "
                           f"--data DIR -o {path}`")
    return loaded


# calibration parameters the kernel model divides by (rates and shares: positive), and those of either sign (a
# host's drift per call, the call it counts from); every other one is a size, a time or an exponent: ≥ 0
POSITIVE_PARAMS = frozenset({"efficiency", "memory_efficiency", "weight_efficiency", "winograd_efficiency",
                             "winograd_rate", "sustained", "cache_speedup", "l2_fraction", "rows_per_sm", "block_bytes"})
SIGNED_PARAMS = frozenset({"drift_seconds_per_call", "drift_from_call"})


def calibration_values_problem(calibrations: dict[str, KernelCalibration], gpus: dict[str, Gpu]) -> str | None:
    """The first value of a calibrations file no fit could have written, named by its place, or None: a hand-edited
    efficiency of 0 ended `rooflow estimate` in a ZeroDivisionError, NaN printed a NaN time, a relative uncertainty
    of 5 a negative range. Every number is finite; rates and shares positive, sizes and times not negative."""
    for name, calibration in calibrations.items():
        place = f'measured["{name}"].calibration'
        if not (finite_number(calibration.relative_uncertainty) and 0 < calibration.relative_uncertainty < 1):
            return f"{place}.relative_uncertainty is {calibration.relative_uncertainty!r}, not a share between 0 and 1"
        for op_class, params in calibration.classes.items():
            for key, value in params.items():
                least = None if key in POSITIVE_PARAMS else -math.inf if key in SIGNED_PARAMS else 0.0
                if not finite_number(value) or (value <= 0 if least is None else value < least):
                    kind = {None: "a positive number", 0.0: "a number ≥ 0"}.get(least, "a finite number")
                    return f"{place}.classes.{op_class}.{key} is {value!r}, not {kind}"
        for operator, seconds in calibration.floors.items():
            if not positive_number(seconds):
                return f"{place}.floors.{operator} is {seconds!r}, not a positive number of seconds"
    for name, gpu in gpus.items():
        for key in ("sm_count", "fp32_flops_per_second", "dram_bytes_per_second", "l2_bytes"):
            if not positive_number(getattr(gpu, key)):
                return f'measured["{name}"].gpu.{key} is {getattr(gpu, key)!r}, not a positive number'
    return None


def add_calibrations(*paths: str | Path) -> list[str]:
    """Add the measured GPUs of ``rooflow calibrate-kernels -o`` files to the shipped calibrations for this
    process (a GPU in both: the file's; they join the families of GPUs without data too); returns their
    names."""
    names: set[str] = set()
    for path in map(Path, paths):
        _ADDED[path] = read_calibrations(path)
        names.update(_ADDED[path][0])
    if paths:
        _shipped.cache_clear()
    return sorted(names)


@functools.lru_cache(maxsize=1)
def _shipped():
    calibrations, gpus, keys, roofs = load_shipped()
    for more in _ADDED.values():
        for ours, theirs in zip((calibrations, gpus, keys, roofs), more):
            ours.update(theirs)
    return calibrations, gpus, keys, roofs


def for_gpu(device) -> tuple[KernelCalibration, Gpu] | None:
    """The kernel calibration of a catalogue device: its own measured one where rooflow ships it, else its
    architecture's or family's with its datasheet (None: not a GPU, or the catalogue lacks its L2 size)."""
    gpu = gpu_from_device(device)
    if gpu is None:
        return None
    return calibration_of(gpu, device.key), gpu


def tensor_core_power_fractions(device, reference_key: str = "h100-sxm5-80gb") -> dict[str, float]:
    """By tensor-core precision: the share of the reference GPU's efficiency ``device``'s board power sustains,
    where it is below 1 (empty: none, or not of the reference's family).

    Both boards' tensor cores are of one process node (:data:`FAMILIES`), so a FLOP costs them the same energy:
    a board with fewer watts per datasheet FLOP/s than the reference reaches at most that ratio of its
    efficiency — never below its base clock's share of its boost clock, which it holds at its power limit. The
    reference's efficiency was measured at its own limit or under it (an H100 SXM's 700 W), so this is a bound
    the board may beat. An L4 (72 W, 121 dense bf16 TFLOP/s) against the H100 SXM (700 W, 989): 0.84."""
    from rooflow.hardware.devices import default_catalogue_path, load_devices

    reference = load_devices(default_catalogue_path()).get(reference_key)
    tdp = getattr(device, "tdp_watts", None)
    if (reference is None or not tdp or not reference.tdp_watts
            or FAMILIES.get(device.architecture or "") != FAMILIES.get(reference.architecture or "")):
        return {}
    floor = clock_fraction(getattr(device, "base_clock_mhz", None), getattr(device, "boost_clock_mhz", None)) or 0.0
    fractions = {}
    for precision in ("tf32", "fp16", "bf16"):
        peak, reference_peak = (d.peak_flops_per_second.get(precision) for d in (device, reference))
        if peak and reference_peak:
            fraction = (tdp / peak) / (reference.tdp_watts / reference_peak)
            if fraction < 1.0:
                fractions[precision] = round(max(fraction, floor), 4)
    return fractions


def carry_sm_bound(memory: dict[str, float], device, reference_key: str) -> tuple[dict[str, float], str]:
    """``memory`` (a calibration's efficiencies by class, shares of ``device``'s bandwidth, the reference's
    where not measured on it) with its :data:`SM_BOUND_CLASSES` at the reference GPU's bytes per SM cycle where
    ``device`` has less memory per SM cycle, up to its elementwise share and never below the reference's share;
    and the words a calibration source adds for it ("" where nothing moved)."""
    ratio = sm_cycle_bytes_ratio(device, reference_key)
    if not ratio or ratio <= 1.0:
        return memory, ""
    stream = memory.get("elementwise", 1.0)
    carried = {key: (round(max(value, min(value * ratio, stream)), 4) if key in SM_BOUND_CLASSES else value)
               for key, value in memory.items()}
    return carried, (f"; BatchNorm training, max-pooling and indexing elementwise kernels at the {reference_key}'s "
                     f"bytes per SM cycle ({ratio:.2f}x its share of this GPU's memory: there its SMs bound them), at "
                     f"most its elementwise rate")


def sm_cycle_bytes_ratio(device, reference_key: str) -> float | None:
    """The reference GPU's bytes of bandwidth per SM cycle over ``device``'s (SMs × boost clock; None where the
    catalogue lacks either), by datasheet bandwidth. Above 1, a kernel its SMs bound on the reference
    (rooflow.estimate.calibration.sm_bound_bandwidth) reaches a larger share of ``device``'s memory: a Volta, Turing
    or Ampere SM issues its loads at the rate of a Hopper SM per cycle, whatever its FP32 lanes (an assumption the
    published steps check), and each has less memory behind it."""
    from rooflow.hardware.devices import default_catalogue_path, load_devices

    reference = load_devices(default_catalogue_path()).get(reference_key)
    if reference is None:
        return None
    rates = [(d.bandwidth(False) or 0) / ((d.sm_count or 0) * (d.boost_clock_mhz or 0) * 1e6 or math.inf)
             for d in (device, reference)]
    return rates[1] / rates[0] if all(rates) else None


def time_model_calibration(device, reference, reference_key: str = "h100-sxm5-80gb"):
    """A time-model :class:`~rooflow.estimate.timemodel.Calibration` of ``device`` from its kernel
    calibration: FP32 GEMM/convolution and elementwise/normalization efficiencies from the kernels (the time
    model holds them against 80% of the datasheet FLOP/s and 90% of its bandwidth, the kernel model against
    100%); host costs, tensor-core paths and the other classes from ``reference`` (a measured calibration
    of another GPU), as the source says. None where the device has no kernel calibration."""
    found = for_gpu(device)
    if found is None:
        return None
    kernels, _ = found
    gemm, conv = kernels.classes.get("gemm", {}), kernels.classes.get("convolution", {})
    matmul = dict(reference.matmul_efficiency)
    gemm_efficiency = dict(reference.gemm_efficiency)  # the fitted GEMMs are cuBLAS's (linear, bmm)

    def fp32_rate(params: dict[str, float]) -> float:
        # A fitted efficiency over 1 (the V100's convolutions 1.11, the P100's GEMMs 1.21) is the fit's, paid back by
        # its shape factor on the shapes measured (their direct convolutions at most 0.77-0.91 of the FP32 peak); as
        # a rate of its own it priced a V100's backward and an A100's dilated convolutions over the roof that
        # kernel_seconds holds the kernel model's to. A measured power-limited board's fitted power limit (its calls
        # beyond GPU Boost's time constant, the T4's 0.55) is what a step's back-to-back kernels run at; a GPU
        # without data's is a bound only (third-party bursts of FP32 GEMMs on an L4 and an L40S run above it), so it
        # keeps its boost-clock rate
        sustained = params.get("sustained", 1.0) if kernels.rows else 1.0
        return round(min(params["efficiency"], 1.0) * sustained / 0.8, 4)

    if gemm:
        gemm_efficiency["fp32"] = matmul["fp32"] = fp32_rate(gemm)
    if conv.get("efficiency"):
        # a convolution the kernel model does not price (grouped, backward) runs cuDNN's kernels, at the rate of the
        # GPU's measured convolutions, not cuBLAS's GEMMs': on the T4 0.76 of its peak against its SGEMMs'
        # power-limited 0.42, which took ResNeXt's grouped 3×3 layers to 4.7× their V100 time, its ungrouped ones
        # to 2.4–2.9× (NVIDIA's published ResNeXt101 T4 inference: 0.75–0.86 of such a prediction, 0.87–1.01 now).
        # cuBLAS's products keep gemm_efficiency; the kernel model prices their single-view FP32 calls itself
        matmul["fp32"] = fp32_rate(conv)
    if conv:  # cuDNN's autotuner takes Winograd only where it beats the direct kernels: never below them
        # (the rate its Winograd calls ran at, where measured: the kernel model's Winograd efficiency is a fit's)
        winograd = conv.get("winograd_rate", conv.get("winograd_efficiency", 0.0))
        matmul["fp32_fast"] = round(max(winograd / 0.8, matmul["fp32"]), 4)
    memory = dict(reference.memory_efficiency_by_class)
    for op_class, key in (("elementwise", "elementwise"), ("normalization", "normalization")):
        if op_class in kernels.classes:
            memory[key] = round(kernels.classes[op_class]["memory_efficiency"] / 0.9, 4)
    memory, sm_bound = carry_sm_bound(memory, device, reference_key)
    # the board's power limit holds its FP32 GEMMs (the kernel model's ``sustained``) and its tensor-core work
    # alike: the latter at the reference's tensor FLOPs per joule where they share a process node
    fractions = tensor_core_power_fractions(device, reference_key)
    if fractions:
        shares = sorted(set(f"{value:.2f}" for value in fractions.values()))
        power = (f"; tensor-core (TF32/fp16/bf16) work at {'–'.join(shares)} of the {reference_key}'s efficiency: "
                 f"its board power per datasheet FLOP/s against the {reference_key}'s (the same process node), "
                 f"the least certain part (third-party TF32, fp16 and bf16 GEMMs of 1024–10240 on an L4 at "
                 f"0.79–0.88 of such a prediction at their best size, 0.64–0.73 at 8192³)")
    elif gemm.get("sustained", 1.0) < 1.0:
        power = ("; its power limit is not applied to tensor-core (TF32/fp16/bf16) work (no GPU of its process node "
                 "measured), which is then the least certain part")
    else:
        power = ""
    uncertainty = max(reference.relative_uncertainty, kernels.relative_uncertainty)
    over_peak = [f"{name} {params['efficiency']:.2f}" for name, params in (("convolution", conv), ("GEMM", gemm))
                 if round(params.get("efficiency", 0.0), 2) > 1.0]
    capped = (f"; a fitted FP32 efficiency over 1 ({', '.join(over_peak)}) is the kernel model's, paid back by its "
              f"shape factor on the shapes measured: a product the kernel model does not price runs at most at the "
              f"FP32 peak" if over_peak else "")
    source = (f"kernel calibration — {kernels.source}; host costs, tensor-core paths and other classes from "
              f"the {reference_key} calibration (range ±{uncertainty:.0%})"
              f"{capped}{sm_bound}{power}")
    return reference.with_(source=source, matmul_efficiency=matmul, gemm_efficiency=gemm_efficiency, kernel_model=True,
                           tensor_core_power_fraction=fractions,
                           memory_efficiency_by_class=memory,
                           memory_efficiency=memory.get("elementwise", reference.memory_efficiency),
                           relative_uncertainty=uncertainty,
                           notes=(*reference.notes, f"FP32 GEMM/convolution, elementwise and normalization "
                                                    f"efficiencies: {kernels.source}"))


# ------------------------------------------------------------------------------------------ the command
def format_table(table: pd.DataFrame, title: str = "held-out GPU") -> str:
    """A held-out table: per GPU and class, within ±25% (fraction), median |error| and rows; where the table has
    them (:func:`_score`), each GPU's range (the ± its predictions print) after its name and, per class, the
    fraction of calls inside that range."""
    ranged = "inside_range" in table
    width = 29 if ranged else 22
    header = "within25% in-range med|err|  n" if ranged else "within25%  med|err|  n"
    lines = [f"{title:32} " + " ".join(f"{c:>{width}}" for c in CLASSES),
             f"{'':32} " + " ".join(f"{header:>{width}}" for _ in CLASSES)]
    for gpu, rows in table.groupby("gpu"):
        cells = []
        for op_class in CLASSES:
            row = rows[rows["op_class"] == op_class]
            if row.empty:
                cells.append(f"{'-':>{width}}")
                continue
            inside = f" {row['inside_range'].iloc[0]:>8.0%}" if ranged else ""
            cells.append(f"{row['within'].iloc[0]:>8.0%}{inside} {row['median_abs_error'].iloc[0]:>8.0%} "
                         f"{row['rows'].iloc[0]:>5}")
        label = f"{gpu} (±{rows['range'].iloc[0]:.0%})" if ranged else gpu
        lines.append(f"{label:32} " + " ".join(cells))
    if ranged:
        lines.append(f"in-range: calls inside the range each GPU's predictions print (after its name): "
                     f"±{MEASURED_UNCERTAINTY:.0%} where its own single ops were measured, ±{FAMILY_UNCERTAINTY:.0%} "
                     f"where its family's or all measured GPUs' stand in")
    return "\n".join(lines)
