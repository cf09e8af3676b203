"""The Nsight Compute metrics rooflow collects, per GPU architecture, and how they become FLOPs and bytes.

Conventions (DESIGN.md, "FLOPs from counters"):

- CUDA-core FLOPs come from the SASS thread-instruction counters
  ``smsp__sass_thread_inst_executed_op_{fadd,fmul,ffma,...}_pred_on.sum``: one FMA = 2 FLOPs, so
  FP32 = fadd + fmul + 2·ffma and FP64 = dadd + dmul + 2·dfma. FP16 instructions work on half2 pairs,
  so non-tensor FP16 = 2·hadd + 2·hmul + 4·hfma (the weights of Nsight Compute's own half-precision
  roofline section). Older tools name the same counters ``sm__sass_...``; both spellings are accepted.
  (NERSC's DeepCAM tables count one FLOP per half instruction, hadd + hmul + 2·hfma; rooflow does not —
  tests/profilers/test_ncu.py recomputes their number from the parsed counters to show both.) A kernel whose
  name shows only 32/64-bit float types counts no FP16 FLOPs: its fp16-pipe instructions (HFMA2 in an FP32 bias
  add, one per element) are not half-precision arithmetic (rooflow.profilers.ncu, the notes say how much).
- Tensor-core FLOPs on sm_75 and newer: ``sm__ops_path_tensor_src_*`` already count FLOPs (an RTX 4090
  fp8 GEMM of M·N·K = 4096·3072·768 reads 19,327,352,832 = 2·M·N·K in a public study), so they are summed
  as they are, base names only: the ``_sparsity_on``/``_sparsity_off`` variants split the same work again.
  On sm_70 (V100) only ``sm__inst_executed_pipe_tensor.sum`` exists: 512 FLOPs per HMMA instruction
  (exact for FP32-accumulate HMMA, and how NERSC's V100 hierarchical-roofline study counted them).
- DRAM bytes = ``dram__bytes.sum`` (= read + write = 32 × ``dram__sectors.sum``), L2
  ``lts__t_bytes.sum``, L1 ``l1tex__t_bytes.sum``; one source each, never two added together.

What was checked against NVIDIA's material and what was not (search of public docs/code, 2025):
verified — the ``sm__ops_path_tensor_src_{fp16_dst_fp16,fp16_dst_fp32,bf16_dst_fp32,tf32_dst_fp32,fp64}``
names and their ``_sparsity_on/off`` variants (an NVIDIA engineer's ``ncu --query-metrics | grep
sm__ops_`` listing on the developer forum, Ampere), ``sm__ops_path_tensor_src_fp8`` (used on an RTX 4090,
sm_89, and on H100), ``sm__ops_path_tensor_src_fp16`` as the sm_90 aggregate of both fp16 destinations
(used on H100 in public roofline scripts), the SASS counters and ``dram__bytes_{read,write}.sum``,
``lts__t_bytes.sum``, ``l1tex__t_bytes.sum``, ``gpu__time_duration.sum`` (NVIDIA's roofline guidance and
the fixtures). Not verified: which ``src_*`` names exist on sm_86/sm_87 (they are assumed to match sm_80
without fp64, which GA10x and Orin lack in their tensor cores) and on Blackwell (sm_100 is assumed to
match sm_90; sm_120 is assumed to have no fp64 tensor path). A name the GPU lacks makes ncu fail with
"Failed to find metric", which :func:`rooflow.profilers.commands.check_profiler_log` reports with this fix.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from rooflow.errors import RooflowError

SASS_PREFIXES = ("smsp__", "sm__")
SASS_TEMPLATE = "{prefix}sass_thread_inst_executed_op_{op}_pred_on.sum"

# FLOPs per executed thread instruction, by precision (see the module docstring).
CUDA_CORE_FLOP_WEIGHTS: dict[str, dict[str, int]] = {
    "fp64": {"dadd": 1, "dmul": 1, "dfma": 2},
    "fp32": {"fadd": 1, "fmul": 1, "ffma": 2},
    "fp16": {"hadd": 2, "hmul": 2, "hfma": 4},
}

TENSOR_OPS_PREFIX = "sm__ops_path_tensor_src_"
VOLTA_TENSOR_INSTRUCTIONS = "sm__inst_executed_pipe_tensor.sum"
VOLTA_FLOPS_PER_TENSOR_INSTRUCTION = 512

DRAM_BYTES = "dram__bytes.sum"
DRAM_BYTES_READ = "dram__bytes_read.sum"
DRAM_BYTES_WRITE = "dram__bytes_write.sum"
DRAM_SECTORS = "dram__sectors.sum"
DRAM_SECTORS_READ = "dram__sectors_read.sum"
DRAM_SECTORS_WRITE = "dram__sectors_write.sum"
L2_BYTES = "lts__t_bytes.sum"
L2_SECTORS = "lts__t_sectors.sum"
L1_BYTES = "l1tex__t_bytes.sum"
L1_SECTORS = "l1tex__t_sectors.sum"
SECTOR_BYTES = 32  # bytes per DRAM/L2/L1 sector on every NVIDIA GPU ncu supports

DURATION = "gpu__time_duration.sum"
CYCLES = "sm__cycles_elapsed.avg"
CYCLES_PER_SECOND = "sm__cycles_elapsed.avg.per_second"

MEMORY_AND_TIME_METRICS = [DRAM_BYTES_READ, DRAM_BYTES_WRITE, L2_BYTES, L1_BYTES, DURATION]

# Tensor-core FLOP counters per architecture (compute capability × 10).
_TENSOR_SOURCES: dict[int, list[str]] = {
    75: ["fp16_dst_fp16", "fp16_dst_fp32"],  # Turing: no bf16/tf32/fp64 tensor paths
    80: ["fp16_dst_fp16", "fp16_dst_fp32", "bf16_dst_fp32", "tf32_dst_fp32", "fp64"],
    86: ["fp16_dst_fp16", "fp16_dst_fp32", "bf16_dst_fp32", "tf32_dst_fp32"],
    87: ["fp16_dst_fp16", "fp16_dst_fp32", "bf16_dst_fp32", "tf32_dst_fp32"],
    89: ["fp16_dst_fp16", "fp16_dst_fp32", "bf16_dst_fp32", "tf32_dst_fp32", "fp8"],
    90: ["fp16", "bf16_dst_fp32", "tf32_dst_fp32", "fp64", "fp8"],
    100: ["fp16", "bf16_dst_fp32", "tf32_dst_fp32", "fp64", "fp8"],
    103: ["fp16", "bf16_dst_fp32", "tf32_dst_fp32", "fp64", "fp8"],
    120: ["fp16", "bf16_dst_fp32", "tf32_dst_fp32"],
    121: ["fp16", "bf16_dst_fp32", "tf32_dst_fp32"],
}
_ARCH = re.compile(r"^(?:sm_?|compute_?)?(\d)\.?(\d+)[a-z]?$", re.IGNORECASE)


def parse_architecture(architecture: str | int) -> int:
    """``"sm_80"``, ``"sm80"``, ``"8.0"``, ``"80"``, ``"sm_90a"`` or 80 -> 80 (compute capability × 10)."""
    text = str(architecture).strip()
    match = _ARCH.match(text)
    if not match:
        raise RooflowError(f"GPU architecture {architecture!r} is not of the form sm_XY (e.g. sm_80 for A100, "
                           f"sm_90 for H100); use the device catalogue's `architecture` field.")
    return int(match.group(1)) * 10 + int(match.group(2))


def sass_metrics() -> list[str]:
    """The nine CUDA-core instruction counters (fp64, fp32, fp16 × add, mul, fma)."""
    return [SASS_TEMPLATE.format(prefix="smsp__", op=op)
            for weights in CUDA_CORE_FLOP_WEIGHTS.values() for op in weights]


def tensor_metrics_for_architecture(architecture: str | int) -> list[str]:
    """Tensor-core FLOP counters for one architecture ([] before Volta)."""
    cc = parse_architecture(architecture)
    if cc < 70:
        return []
    if cc < 75:
        return [VOLTA_TENSOR_INSTRUCTIONS]  # sm_70/sm_72: instructions, 512 FLOPs each
    known = sorted(k for k in _TENSOR_SOURCES if k <= cc)
    # An unlisted newer chip of a known family takes its family's list (sm_88 -> sm_87's list, ...).
    sources = _TENSOR_SOURCES[known[-1]]
    return [f"{TENSOR_OPS_PREFIX}{source}.sum" for source in sources]


# Tensor-core paths each precision can use (rooflow's precisions: rooflow.measure.timing.configure_precision). fp32
# runs with TF32 off, so it can use none; the TF32 path is collected for every precision anyway, as the
# detector of FP32 work that reached tensor cores despite the flags (cuDNN's default is TF32 ON on Ampere and
# newer: an "fp32" run whose convolutions ran in TF32 would otherwise show 20-40x too few FLOPs and no
# evidence why). No rooflow precision uses the fp64 or fp8 paths (zero in every H100 recording).
PRECISION_TENSOR_SOURCES: dict[str, tuple[str, ...]] = {
    "fp32": ("tf32_dst_fp32",),
    "tf32": ("tf32_dst_fp32",),
    "fp16": ("fp16", "fp16_dst_fp16", "fp16_dst_fp32", "tf32_dst_fp32"),
    "bf16": ("bf16_dst_fp32", "tf32_dst_fp32"),
}
# Where an architecture has none of a precision's paths (fp32 on Turing: no TF32), its FP16 path with FP32
# accumulation stands in, so that every run still collects a tensor-core counter.
_FALLBACK_TENSOR_SOURCES = ("fp16_dst_fp32", "fp16")


def tensor_metrics_for_precision(architecture: str | int, precision: str) -> list[str]:
    """The tensor-core FLOP counters a run of ``precision`` needs on ``architecture``: the paths that precision
    can use (plus TF32 as the detector of tensor-core FP32), among those the architecture has.

    >>> tensor_metrics_for_precision("sm_90", "fp32")
    ['sm__ops_path_tensor_src_tf32_dst_fp32.sum']
    """
    if precision not in PRECISION_TENSOR_SOURCES:
        raise RooflowError(f"precision {precision!r} has no tensor-core metric list: use one of "
                           f"{', '.join(PRECISION_TENSOR_SOURCES)}.")
    available = tensor_metrics_for_architecture(architecture)
    if not available or not available[0].startswith(TENSOR_OPS_PREFIX):
        return available  # before Volta: none; Volta: its one instruction counter, whatever the precision
    wanted = [f"{TENSOR_OPS_PREFIX}{source}.sum" for source in PRECISION_TENSOR_SOURCES[precision]]
    chosen = [name for name in available if name in wanted]
    if not chosen:
        fallback = [f"{TENSOR_OPS_PREFIX}{source}.sum" for source in _FALLBACK_TENSOR_SOURCES]
        chosen = [name for name in available if name in fallback][:1]
    return chosen


def metrics_for_architecture(architecture: str | int, precision: str | None = None,
                             hierarchical: bool = True) -> list[str]:
    """The ncu ``--metrics`` list for one architecture: CUDA-core FLOP counters, tensor-core FLOP counters,
    DRAM bytes, L2 and L1 bytes (``hierarchical``), and kernel duration.

    Without ``precision``: every tensor-core path of the architecture and DRAM read and write (the list
    rooflow's H100 recordings were made with). With ``precision``: as few hardware counters as give the
    same totals, since ncu's cost is its replay passes over hardware counters (measured on an H100:
    ResNet-50 fp32 training took 182 s with the full list, 157 s without the SASS counters, 28 s with the
    FFMA counter alone):

    - tensor-core paths: only those ``precision`` can use, plus TF32 (:func:`tensor_metrics_for_precision`);
    - DRAM: ``dram__bytes.sum``, the same quantity as read + write (32 x ``dram__sectors.sum``), one name;
    - L2/L1 bytes only for the hierarchical roofline (``profiling.ncu.hierarchical``);
    - all nine SASS counters stay: they are instrumented (one patched pass, not one per counter), and
      "fp32" runs execute FP16 (hfma) and FP64 (dfma) instructions (H100 recordings: the FP16 ones in kernels
      whose names show FP32 types only, left out of FLOPs by name).

    >>> "sm__ops_path_tensor_src_tf32_dst_fp32.sum" in metrics_for_architecture("sm_80")
    True
    """
    if precision is None:
        memory = list(MEMORY_AND_TIME_METRICS)
        tensor = tensor_metrics_for_architecture(architecture)
    else:
        tensor = tensor_metrics_for_precision(architecture, precision)
        memory = [DRAM_BYTES, L2_BYTES, L1_BYTES, DURATION]
    if not hierarchical:
        memory = [name for name in memory if name not in (L2_BYTES, L1_BYTES)]
    return sass_metrics() + tensor + memory


def is_used_metric(name: str) -> bool:
    """Whether rooflow derives FLOPs, bytes or time from this metric (so its unit must be understood)."""
    if name.startswith(TENSOR_OPS_PREFIX) or "sass_thread_inst_executed_op_" in name:
        return True
    return name in {VOLTA_TENSOR_INSTRUCTIONS, DRAM_BYTES, DRAM_BYTES_READ, DRAM_BYTES_WRITE, DRAM_SECTORS,
                    DRAM_SECTORS_READ, DRAM_SECTORS_WRITE, L2_BYTES, L2_SECTORS, L1_BYTES, L1_SECTORS, DURATION,
                    CYCLES, CYCLES_PER_SECOND}


def sass_metric(columns: Iterable[str], op: str) -> str | None:
    """The collected spelling of one SASS counter (``smsp__`` preferred over ``sm__``), or None."""
    present = set(columns)
    for prefix in SASS_PREFIXES:
        name = SASS_TEMPLATE.format(prefix=prefix, op=op)
        if name in present:
            return name
    return None


def tensor_flop_metrics(columns: Iterable[str]) -> list[str]:
    """The collected ``sm__ops_path_tensor_src_*`` counters whose sum is the tensor-core FLOPs.

    Base names only (``*_sparsity_on/off`` split the same work again), floating-point sources only (the
    ``src_int*`` paths count integer ops), and where an aggregate and its parts were both collected
    (``src_fp16`` and ``src_fp16_dst_fp32`` on sm_90) the aggregate alone, so nothing is counted twice.
    """
    names = sorted({c for c in columns if c.startswith(TENSOR_OPS_PREFIX) and c.endswith(".sum")})
    stems = []
    for name in names:
        stem = name[: -len(".sum")]
        source = stem[len(TENSOR_OPS_PREFIX):]
        if "." in stem or source.startswith("int") or re.search(r"_sparsity_(on|off)$", stem):
            continue
        stems.append(stem)
    kept = [s for s in stems if not any(s != other and s.startswith(other + "_") for other in stems)]
    return [f"{stem}.sum" for stem in kept]


# --------------------------------------------------------------------------------------------------
# Counters -> FLOPs, bytes, seconds


def _weighted(wide: pd.DataFrame, weights: dict[str, float]) -> pd.Series | None:
    """Σ weight × metric per kernel over the metrics present; NaN for a kernel where all of them are NaN."""
    present = {name: weight for name, weight in weights.items() if name in wide.columns}
    if not present:
        return None
    # One column at a time (a frame of the columns, its NaN mask and a Series per term held ~80 MB at once on a
    # raw page of 447,715 kernels), with the operations and dtypes of the pandas expression it replaces:
    # sum(column.fillna(0.0) * weight) starting from 0, NaN where every column is NaN.
    total = absent = None
    for name, weight in present.items():
        values = np.asarray(wide[name].to_numpy())  # a sparse column (one number for every kernel) made dense
        missing = np.isnan(values)
        term = np.where(missing, values.dtype.type(0), values)
        term *= weight  # in place: the dtype and rounding of term * weight
        if total is None:
            term += 0  # 0 + term (a -0.0 becomes 0.0)
            total = term
        elif np.result_type(total, term) == total.dtype:
            total += term
        else:
            total = total + term
        absent = missing if absent is None else absent & missing
    total[absent] = np.nan
    return pd.Series(total, index=wide.index)


def _row_sum(columns: list[pd.Series]) -> np.ndarray:
    """Per row, the sum of the columns' values that are not NaN, added left to right; NaN where all are NaN —
    ``DataFrame.sum(axis=1, min_count=1)``, without pandas' row-wise reduction (a third of a second for a
    million kernels)."""
    total, present = None, None
    for column in columns:
        values = column.to_numpy(dtype=np.float64)
        known = ~np.isnan(values)
        filled = np.where(known, values, 0.0)
        total = filled if total is None else total + filled
        present = known if present is None else present | known
    total[~present] = np.nan
    return total


def derive_quantities(wide: pd.DataFrame, cc: pd.Series) -> tuple[pd.DataFrame, dict[str, Any], list[str]]:
    """Per kernel (rows of `wide`: one column per collected metric, SI values; `cc`: compute capability),
    the FLOPs per precision, DRAM/L2/L1 bytes and seconds by the conventions above; with what was used
    (`info`) and how each quantity was formed (`notes`)."""
    columns = set(wide.columns)
    derived = pd.DataFrame(index=wide.index)
    used: list[str] = []
    notes: list[str] = []

    cuda_core_collected = False
    for precision, weights in CUDA_CORE_FLOP_WEIGHTS.items():
        names = {sass_metric(columns, op): weight for op, weight in weights.items()}
        names = {name: weight for name, weight in names.items() if name}
        series = _weighted(wide, names)
        derived[f"flops_{precision}"] = series if series is not None else np.nan
        cuda_core_collected |= series is not None
        used += list(names)
        missing = [op for op in weights if not sass_metric(columns, op)]
        if names and missing:
            notes.append(f"flops_{precision} lacks the {', '.join(missing)} counters: it undercounts.")
        if names and precision == "fp16":
            notes.append("fp16 CUDA-core FLOPs count half2 instructions: 2·hadd + 2·hmul + 4·hfma.")

    tensor_names = tensor_flop_metrics(columns)
    tensor_collected = bool(tensor_names)
    if tensor_names:
        derived["flops_tensor"] = _weighted(wide, {name: 1 for name in tensor_names})
        used += tensor_names
        notes.append(f"Tensor-core FLOPs = Σ {', '.join(tensor_names)} (these counters count FLOPs).")
    elif VOLTA_TENSOR_INSTRUCTIONS in columns:
        capabilities = {str(value) for value in cc.dropna()}
        if capabilities and not all(value.startswith(("7.0", "7.2")) for value in capabilities):
            derived["flops_tensor"] = np.nan
            notes.append(f"{VOLTA_TENSOR_INSTRUCTIONS} was collected on compute capability "
                         f"{', '.join(sorted(capabilities))}, where 512 FLOPs per instruction does not hold: "
                         f"tensor-core FLOPs not counted; collect sm__ops_path_tensor_src_* instead.")
        else:
            derived["flops_tensor"] = wide[VOLTA_TENSOR_INSTRUCTIONS] * VOLTA_FLOPS_PER_TENSOR_INSTRUCTION
            used.append(VOLTA_TENSOR_INSTRUCTIONS)
            tensor_collected = True
            notes.append(f"Tensor-core FLOPs = {VOLTA_FLOPS_PER_TENSOR_INSTRUCTION} × "
                         f"{VOLTA_TENSOR_INSTRUCTIONS} (Volta HMMA, FP32 accumulate).")
    else:
        derived["flops_tensor"] = np.nan
        notes.append("No tensor-core metric was collected: tensor-core work (TF32/FP16/BF16 convolutions and "
                     "GEMMs) is invisible to these totals.")

    if not cuda_core_collected:
        # no sm__sass_thread_inst_executed_op_* counter: an FP32 step's total printed "0 FLOP" beside 64 ms of
        # convolution kernels, an intensity of 0 for whatever read it
        derived["flops_total"] = np.nan
        notes.append("No CUDA-core FLOP counter (sm__sass_thread_inst_executed_op_*) was collected: FP32, FP16 and "
                     "FP64 work is invisible, so there is no FLOP total (tensor-core FLOPs apart): profile with "
                     "the workflow's profile_ncu job, or give ncu --metrics the list "
                     "rooflow.profilers.metrics.metrics_for_architecture returns.")
    else:
        derived["flops_total"] = _row_sum([derived[c] for c in ("flops_fp64", "flops_fp32", "flops_fp16",
                                                                 "flops_tensor")])

    def pick(label: str, options: list[tuple[dict[str, float], str]]) -> None:
        for weights, how in options:
            if all(name in columns for name in weights):
                derived[label] = _weighted(wide, weights)
                used.extend(weights)
                notes.append(f"{label} = {how}.")
                return
        derived[label] = np.nan

    pick("dram_bytes", [({DRAM_BYTES: 1}, DRAM_BYTES),
                        ({DRAM_BYTES_READ: 1, DRAM_BYTES_WRITE: 1}, f"{DRAM_BYTES_READ} + {DRAM_BYTES_WRITE}"),
                        ({DRAM_SECTORS: SECTOR_BYTES}, f"{SECTOR_BYTES} × {DRAM_SECTORS}"),
                        ({DRAM_SECTORS_READ: SECTOR_BYTES, DRAM_SECTORS_WRITE: SECTOR_BYTES},
                         f"{SECTOR_BYTES} × ({DRAM_SECTORS_READ} + {DRAM_SECTORS_WRITE})")])
    pick("l2_bytes", [({L2_BYTES: 1}, L2_BYTES), ({L2_SECTORS: SECTOR_BYTES}, f"{SECTOR_BYTES} × {L2_SECTORS}")])
    pick("l1_bytes", [({L1_BYTES: 1}, L1_BYTES), ({L1_SECTORS: SECTOR_BYTES}, f"{SECTOR_BYTES} × {L1_SECTORS}")])

    has_seconds = True
    if DURATION in columns:
        derived["seconds"] = wide[DURATION]
        used.append(DURATION)
        notes.append(f"seconds = {DURATION} (ncu locks clocks to base: use nsys or CUDA events for time).")
    elif CYCLES in columns and CYCLES_PER_SECOND in columns:
        # Per kernel, then summed: a rate is never added across kernels.
        derived["seconds"] = wide[CYCLES] / wide[CYCLES_PER_SECOND]
        used += [CYCLES, CYCLES_PER_SECOND]
        notes.append(f"seconds = {CYCLES} / {CYCLES_PER_SECOND} per kernel.")
    else:
        derived["seconds"] = np.nan
        has_seconds = False

    info = {"tensor_metrics_collected": tensor_collected, "has_seconds": has_seconds,
            "metrics_collected": sorted(set(used))}
    return derived, info, notes
