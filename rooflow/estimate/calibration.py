"""Calibrations of the time model (rooflow.estimate.timemodel): where they come from, and how they travel.

A :class:`~rooflow.estimate.timemodel.Calibration` holds what a device's roofs do not say: how fast its
host dispatches ops, and what fraction of its roofs each class of kernel reaches. Three sources, best first:

1. **measured on the device** — the ``calibration`` block that ``rooflow ceilings --calibrate`` (and the
   workflow's ``measure_ceilings``) writes beside the device's ceilings: GEMM/convolution/depthwise/
   elementwise shapes timed on it, and a loop of small ops for the host (rooflow.ceilings.measure.calibrate.measure_calibration);
2. **derived from recordings** of real steps on that device (:func:`derive_from_recordings`: per-kernel
   times of Nsight Compute or torch.profiler recordings, joined with rooflow's estimate of the same steps,
   and a back-to-back op loop for the host); rooflow ships one for the H100 SXM5, derived from
   tests/data/real/h100-rooflow by ``rooflow calibrate --from-recordings`` (reproduced by a test);
3. **scaled** from a shipped calibration of the same vendor by datasheet ratios (:func:`for_device`):
   efficiencies are kept, the roofs are the target's; the source says so and the range widens.
"""

from __future__ import annotations

import collections
import gzip
import json
import math
import statistics
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd

from rooflow.errors import RooflowError
from rooflow.estimate.timemodel import (
    DIRECTIONS,
    GEMM_PREFIX,
    INDEXED_SUFFIX,
    MAX_POOL_CLASS,
    TENSOR_PATHS,
    Calibration,
    device_bandwidth,
    indexed_element_scale,
    indexed_elementwise,
    max_pool_priced_bytes,
    op_terms,
    transpose_kernel_seconds,
    undirected,
)
from rooflow.io import missing, read_json

SHIPPED = {"h100-sxm5-80gb": "h100-sxm5-80gb.json"}
# Kernel classes (rooflow.profilers.kernels) → the time model's parts.
KERNEL_PARTS = {"convolution": "matmul", "gemm": "matmul", "other": "matmul", "memory": "layout",
                "normalization": "normalization", "elementwise": "elementwise", "pooling": "pooling",
                "reduction": "reduction"}
# Kernels of the optimizer step (not of the forward/backward ops): PyTorch's foreach and fused optimizers.
OPTIMIZER_KERNELS = r"multi_tensor_apply_kernel|fused_adam|fused_sgd"
# PyTorch's elementwise kernels that index each element (broadcasts, mixed dtypes, strided inputs), apart from
# ``vectorized_elementwise_kernel``: ``elementwise_kernel<128, 2, ...>`` and ``unrolled_elementwise_kernel``
INDEXED_KERNELS = r"(?<!vectorized_)elementwise_kernel"
TRANSPOSE_OVERHEAD = "transpose_overhead"  # _ideal_parts: transposes' seconds besides their activations' bytes
MAX_POOL_FORWARD_KERNEL = "max_pool_forward_nchw"  # PyTorch's forward max-pool (timemodel.MAX_POOL_OUTPUT_LOADS)
# Under ncu's default --clock-control base the H100's SMs ran at 1.59 GHz, the timed steps at 1.98 GHz
# (tests/data/real/PROVENANCE.md): compute-bound kernel times scale by the clock, memory-bound ones do not.
NCU_BASE_CLOCK_RATIO = {"h100-sxm5-80gb": 1.59 / 1.98}
SCALED_UNCERTAINTY = 0.4


def shipped_calibration(device_key: str) -> Calibration | None:
    name = SHIPPED.get(device_key)
    if name is None:
        return None
    text = resources.files("rooflow.data.calibration").joinpath(name).read_text()
    return Calibration.from_json(json.loads(text))


def for_device(device, ceilings: dict[str, Any] | None = None, catalogue: dict | None = None) -> Calibration:
    """The best calibration for ``device``: measured (``ceilings['calibration']``), shipped, or a shipped one
    of another GPU scaled to this one (efficiencies kept, roofs the target's, range widened). A CPU without a
    measured calibration gets the generic CPU constants, labelled as such."""
    if ceilings and ceilings.get("calibration"):
        return Calibration.from_json(ceilings["calibration"])
    shipped = shipped_calibration(device.key)
    if shipped is not None:
        return shipped
    if not device.is_cuda:
        return Calibration(source=f"generic CPU constants (no calibration measured on this CPU: measure one with "
                                  f"`rooflow ceilings --device {device.key} --calibrate --output FILE` and pass "
                                  f"--ceilings FILE)",
                           kind="cpu", host_op_seconds=6e-6, host_module_seconds=3e-6, host_library_seconds=10e-6,
                           host_autograd_seconds=3e-6, host_backward_op_seconds=12e-6,
                           host_optimizer_call_seconds=20e-6, kernel_seconds=0.0, memory_efficiency=0.6,
                           matmul_efficiency={"fp32": 0.5, "fp32_fast": 0.5}, relative_uncertainty=SCALED_UNCERTAINTY)
    reference_key = "h100-sxm5-80gb"
    reference = shipped_calibration(reference_key)
    from rooflow.estimate.kernel_calibration import time_model_calibration

    # measured single ops of this GPU, or its family's; the H100's own calibration for its sm_90 siblings
    kernels = None if device.architecture == "sm_90" else time_model_calibration(device, reference, reference_key)
    if kernels is not None:
        return kernels
    cap = sm_bound_bandwidth(device, reference_key)
    notes = (*reference.notes, f"{device.key} was not calibrated: efficiencies and host costs are the "
                               f"{reference_key}'s, roofs are {device.key}'s")
    if cap is not None:
        notes = (*notes, f"memory-bound kernels held to {cap / 1e12:.2f} TB/s: the {reference_key}'s bandwidth per "
                         f"SM cycle, which {device.key}'s memory exceeds (its SMs, not its memory, bound them); "
                         f"vectorised elementwise and copy kernels stream at {device.key}'s bandwidth")
    held = f", memory-bound kernels held to {cap / 1e12:.2f} TB/s ({reference_key}'s bytes per SM cycle)" if cap else ""
    from rooflow.estimate.kernel_calibration import carry_sm_bound

    memory, sm_bound = carry_sm_bound(dict(reference.memory_efficiency_by_class), device, reference_key)
    return reference.with_(
        source=f"scaled from the {reference_key} calibration ({reference.source}) by {device.key}'s datasheet "
               f"roofs{held}{sm_bound}",
        relative_uncertainty=max(reference.relative_uncertainty, SCALED_UNCERTAINTY),
        bandwidth_cap_bytes_per_second=cap, notes=notes, memory_efficiency_by_class=memory)


def sm_bound_bandwidth(device, reference_key: str) -> float | None:
    """The bandwidth ``device``'s SMs sustain, by the reference GPU's (same architecture) bytes per SM cycle, when
    its memory offers more; else None.

    A kernel keeps a number of bytes in flight per SM (its threads' loads: occupancy × bytes per thread), so by
    Little's law it moves at most that over the memory latency, per SM. The calibration's efficiencies were
    measured on the reference, whose kernels reach its bandwidth; a GPU with the same SMs and clocks but more
    bandwidth (the H200's 4.8 TB/s beside the H100's 3.35, both 132 SMs at 1.98 GHz) runs the same kernels at
    the same per-SM rate. Measured: the H200 ran 72 batch-256 steps of 12 CNNs/ViTs 0.93× the H100's time
    (spread 0.04), memory-bound ones included, not the up to 0.7× its bandwidth would give
    (tests/data/real/gpu-2026-11-25). The SM rate is the FP32 datasheet peak (SMs × clock × lanes). Kernel by
    kernel (gpu-2026-11-27) it holds for BatchNorm training, max-pooling and PyTorch's indexing elementwise
    kernels, not for its vectorised ones (ReLU at 4.24 TB/s on the H200), which the time model streams at the
    device's bandwidth (rooflow.estimate.timemodel.indexed_elementwise)."""
    from rooflow.estimate.timemodel import device_bandwidth
    from rooflow.hardware.devices import default_catalogue_path, load_devices

    reference = load_devices(default_catalogue_path()).get(reference_key)
    if reference is None or device.architecture != reference.architecture:
        return None
    sm_rate, reference_rate = device.compute_peak("fp32", False), reference.compute_peak("fp32", False)
    if not sm_rate or not reference_rate:
        return None
    cap = device_bandwidth(reference) * sm_rate / reference_rate
    return cap if cap < device_bandwidth(device) else None


# ------------------------------------------------------------------------------------------ recordings
@dataclass
class Recording:
    """Per-kernel times of one recorded step: ``kernels`` has ``kernel_class`` and ``seconds``."""

    model: str
    batch: int
    precision: str
    mode: str
    kernels: pd.DataFrame
    source: str  # "ncu" (clock locked to base) or "torch.profiler"
    path: str
    # the median CUDA-event time of the step, from <model>-b<batch>-<precision>-<mode>-timing.json beside it
    step_seconds: float | None = None


# what `rooflow calibrate --from-recordings DIR` reads
RECORDING_FILES = ("<model>-b<batch>-<precision>-<mode>-ncu.csv(.gz) (Nsight Compute) or "
                   "torch-profiler-<model>-b<batch>-<precision>-<mode>.json(.gz) (torch.profiler) files")


def _recording_key(path: Path) -> tuple[str, int, str, str] | None:
    stem = path.name.split(".")[0].removeprefix("torch-profiler-").removesuffix("-ncu")
    parts = stem.split("-")
    if len(parts) < 4 or not parts[1].startswith("b") or not parts[1][1:].isdigit():
        return None
    return parts[0], int(parts[1][1:]), parts[2], parts[3]


def load_recordings(folder: str | Path) -> list[Recording]:
    """The per-kernel recordings of a folder laid out like tests/data/real/h100-rooflow:
    ``<model>-b<batch>-<precision>-<mode>-ncu.csv(.gz)`` and ``torch-profiler-<...>.json(.gz)``. A step
    recorded both ways is taken from torch.profiler (real clocks)."""
    from rooflow.profilers.kernels import classify_launches
    from rooflow.profilers.ncu import aggregate_ncu

    folder = Path(folder)
    if why := missing(folder, folder=True):
        raise RooflowError(f"{folder}: {why} of recordings: give the folder that holds {RECORDING_FILES}")
    found: dict[tuple, Recording] = {}
    for path in sorted(folder.glob("torch-profiler-*.json*")):
        key = _recording_key(path)
        if key is None:
            continue
        trace = read_trace(path)
        # in launch order: a Winograd/FFT convolution's GEMMs are booked to it (classify_launches)
        rows = [(event["name"], event["dur"] * 1e-6) for event in sorted(
            (event for event in trace["traceEvents"] if event.get("cat") == "kernel" and "name" in event
             and "dur" in event), key=lambda event: event.get("ts", 0.0))]
        if not rows:  # an empty recording would stand in for the step's ncu file and price it at 0 s
            raise RooflowError(f"{path}: no CUDA kernel events: record the step with "
                               f"activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] on the GPU, or move the "
                               f"trace out of the folder")
        kernels = pd.DataFrame(rows, columns=["name", "seconds"])
        kernels["kernel_class"] = classify_launches(kernels["name"])
        found[key] = Recording(*key, kernels, "torch.profiler", str(path), _step_seconds(folder, key))
    for path in sorted(folder.glob("*-ncu.csv*")):
        key = _recording_key(path)
        if key is None or key in found or "nvtx" in path.name:
            continue
        kernels = aggregate_ncu(path).kernels
        timeless = int(kernels["seconds"].isna().sum())
        if timeless:  # a log of other metrics: its step would be priced at NaN seconds
            raise RooflowError(f"{path}: {timeless} of its {len(kernels)} kernels have no duration "
                               f"(gpu__time_duration.sum): record the step with that metric (rooflow's ncu "
                               f"command line has it) and give that file")
        found[key] = Recording(*key, kernels[["name", "kernel_class", "seconds"]].copy(), "ncu", str(path),
                               _step_seconds(folder, key))
    if not found:
        raise RooflowError(f"{folder}: no recordings in it: expected {RECORDING_FILES} (as in rooflow's "
                           f"tests/data/real/h100-rooflow)")
    return list(found.values())


def read_trace(path: str | Path) -> dict[str, Any]:
    """A torch.profiler trace (``export_chrome_trace``'s JSON, gzipped or not); one cut short or of another kind
    ends in one sentence naming it."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt") as handle:
            trace = json.load(handle)
    except (OSError, EOFError, UnicodeDecodeError, ValueError) as error:  # JSONDecodeError is a ValueError
        raise RooflowError(f"{path}: not a readable torch.profiler trace ({type(error).__name__}: {error}): record "
                           f"it again, or move it out of the folder") from None
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise RooflowError(f"{path}: no traceEvents: not a torch.profiler trace (export_chrome_trace writes one); "
                           f"record it again, or move it out of the folder")
    return trace


def _step_seconds(folder: Path, key: tuple[str, int, str, str]) -> float | None:
    model, batch, precision, mode = key
    path = folder / f"{model}-b{batch}-{precision}-{mode}-timing.json"
    if not path.is_file():
        return None
    return read_json(path).get("median_seconds")


def kernel_gap_seconds(recordings: list[Recording]) -> float | None:
    """The idle time between back-to-back kernels: over the torch.profiler recordings (real clocks) whose step
    was also timed, the steps' time less their kernels' sum, per kernel (None: no such recording). On the H100,
    ResNet-50 b64 TF32 inference (244 kernels, 10.79 ms of 11.24) and training (761, 36.61 of 37.75): 1.57 µs."""
    timed = [r for r in recordings if r.source == "torch.profiler" and r.step_seconds and len(r.kernels)]
    if not timed:
        return None
    idle = sum(r.step_seconds - float(r.kernels["seconds"].sum()) for r in timed)
    return max(idle, 0.0) / sum(len(r.kernels) for r in timed)


def _ideal_parts(recording: Recording, device, unity: Calibration, matmul_rows: list | None = None
                 ) -> dict[str, float]:
    """Seconds of each part of the step at efficiency 1 (the model's terms before calibration). ``matmul_rows``:
    where given, each matrix-product row's (compute seconds by path at efficiency 1, memory seconds), over its
    calls, is appended to it (:func:`_path_efficiencies` holds them to the roofline as the time model does)."""
    from rooflow.estimate.core import estimate

    ops = estimate(recording.model, recording.batch, recording.precision, recording.mode).ops
    bandwidth = device_bandwidth(device)
    parts: dict[str, float] = collections.defaultdict(float)
    training = recording.mode == "training"
    for _, row in ops[ops["phase"] != "optimizer"].iterrows():
        terms = op_terms(row, recording.precision, device, unity, int(device.sm_count or 1))
        calls = int(row["calls"])
        if terms.get("depthwise"):
            parts["depthwise_backward" if row["phase"] == "backward" else "depthwise"] += \
                calls * terms["bytes"] / bandwidth
            continue
        if terms["path"]:
            for path, seconds in terms["compute"].items():
                parts[f"matmul:{path}"] += calls * seconds
            if matmul_rows is not None and terms["compute"]:
                memory = terms["bytes"] / (bandwidth * unity.memory_efficiency_of(row["op_class"], recording.mode))
                matmul_rows.append(({path: calls * seconds for path, seconds in terms["compute"].items()},
                                    calls * memory))
            parts[f"layout:{terms['path']}{DIRECTIONS[terms['backward']]}"] += calls * terms["conv_bytes"] / bandwidth
            if terms["path"] in TENSOR_PATHS:  # the transposes' fixed part and filters, at their own rate
                parts[TRANSPOSE_OVERHEAD] += calls * transpose_kernel_seconds(terms, device)
            parts["elementwise" + INDEXED_SUFFIX] += calls * terms["epilogue_bytes"] / bandwidth
            continue
        op_class = row["op_class"]
        key = f"{op_class}_training" if training and op_class in ("normalization", "pooling") else op_class
        nbytes = terms["bytes"]
        pooled = max_pool_priced_bytes(row)
        if pooled is not None:  # a forward max-pool on its loads (the same kernel in training and inference)
            parts[MAX_POOL_CLASS] += calls * pooled / bandwidth
            if training:
                continue  # _measured_parts: not in a training step's pooling part
        if indexed_elementwise(row):
            key = "elementwise" + INDEXED_SUFFIX
            nbytes *= indexed_element_scale(row, device)
        parts[key] += calls * nbytes / bandwidth
    return dict(parts)


def _measured_parts(recording: Recording, clock_ratio: float) -> dict[str, float]:
    parts: dict[str, float] = collections.defaultdict(float)
    kernels = recording.kernels
    depthwise = kernels["name"].str.contains("depthwise|dwconv", case=False, regex=True)
    forward = kernels["name"].str.contains("forward|fprop", case=False, regex=True)
    parts["depthwise"] += float(kernels.loc[depthwise & forward, "seconds"].sum())
    parts["depthwise_backward"] += float(kernels.loc[depthwise & ~forward, "seconds"].sum())
    # The foreach optimizer's (and GradScaler's) multi-tensor kernels are elementwise by name but are the
    # optimizer step, which _ideal_parts leaves out: counted as elementwise they took VGG16 b64 training's
    # elementwise efficiency from 0.93 to 0.74 (its SGD step: 28 kernels, 2.18 of its 10.86 ms).
    optimizer = kernels["name"].str.contains(OPTIMIZER_KERNELS, case=False, regex=True)
    parts["optimizer"] += float(kernels.loc[optimizer, "seconds"].sum())
    # PyTorch's indexing elementwise kernels (not the vectorised one): rooflow.estimate.timemodel.indexed_elementwise
    indexed = (kernels["kernel_class"] == "elementwise") & kernels["name"].str.contains(INDEXED_KERNELS, regex=True)
    parts["elementwise" + INDEXED_SUFFIX] += float(kernels.loc[indexed & ~optimizer, "seconds"].sum())
    # the forward max-pools on their loads (_ideal_parts). A training step's pooling part is then its backward
    # max-pools (and average pools); an inference step's keeps its forward max-pools, the only pooling kernels
    # it records (average pooling to 1×1 runs as a reduction), whose bytes price its average pools
    max_pool = kernels["name"].str.contains(MAX_POOL_FORWARD_KERNEL, regex=False)
    parts[MAX_POOL_CLASS] += float(kernels.loc[max_pool, "seconds"].sum())
    rest = ~depthwise & ~optimizer & ~indexed
    if recording.mode == "training":
        rest &= ~max_pool
    for kernel_class, seconds in kernels[rest].groupby("kernel_class")["seconds"].sum().items():
        part = KERNEL_PARTS.get(kernel_class, "other")
        if part == "matmul" and recording.source == "ncu":
            seconds *= clock_ratio  # compute-bound: at the timed steps' clock
        parts[part] += float(seconds)
    return dict(parts)


# the range around the recorded step that host costs are read within (PROVENANCE.md of tests/data/real)
STEP_RANGE = "rooflow:"


def check_step_trace(trace: dict, path: str | Path) -> dict:
    """``trace`` if it holds the ``rooflow:<model>:b<batch>:<precision>:<mode>`` range of one step (host
    costs are read inside it); else one sentence naming ``path``."""
    if not any(e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith(STEP_RANGE)
               for e in trace["traceEvents"] if e.get("ph") == "X"):
        raise RooflowError(f"{path}: no '{STEP_RANGE}<model>:b<batch>:<precision>:<mode>' range around a step: "
                           f"record the step inside torch.profiler.record_function('{STEP_RANGE}...') (as "
                           f"tests/data/real/PROVENANCE.md describes), or move the trace out of the folder")
    return trace


def profiled_host_costs(trace: dict) -> dict[str, float]:
    """Median CPU seconds, under torch.profiler, of the top-level host work of one recorded step: a
    one-kernel op (``simple``: aten::relu_ and aten::add_), a convolution and a batch norm call, the gap
    between two forward ops (Python and nn.Module work), a backward node (AccumulateGrad apart) and a
    foreach optimizer call."""
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    step = next(e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith(STEP_RANGE))
    start, end = step["ts"], step["ts"] + step["dur"]
    by_thread: dict[Any, list] = collections.defaultdict(list)
    for e in events:
        if e.get("cat") == "cpu_op" and start <= e["ts"] <= end:
            by_thread[e["tid"]].append(e)
    durations: dict[str, list[float]] = collections.defaultdict(list)
    forward_gaps: list[float] = []
    for thread_events in by_thread.values():
        thread_events.sort(key=lambda e: (e["ts"], -e["dur"]))
        top, until = [], -math.inf
        for e in thread_events:
            if e["ts"] >= until:
                top.append(e)
                until = e["ts"] + e["dur"]
        for e in top:
            durations[e["name"]].append(e["dur"] * 1e-6)  # the trace's times are microseconds
        if not any(e["name"].startswith("autograd::engine") for e in top):
            forward_gaps += [(b["ts"] - a["ts"] - a["dur"]) * 1e-6 for a, b in zip(top, top[1:])]

    def median(values: list[float]) -> float | None:
        return statistics.median(values) if values else None

    pick = lambda *names: [v for name in names for v in durations.get(name, [])]  # noqa: E731
    costs = {"simple": median(pick("aten::relu_", "aten::add_")), "conv": median(pick("aten::conv2d")),
             "batch_norm": median(pick("aten::batch_norm")), "forward_gap": median(forward_gaps),
             "backward": median([v for name, values in durations.items() if name.startswith("autograd::engine")
                                 and "AccumulateGrad" not in name for v in values]),
             "foreach": median(pick("aten::_foreach_add_", "aten::_foreach_mul_"))}
    return {k: v for k, v in costs.items() if v is not None}


def host_costs(inference: dict[str, float], training: dict[str, float] | None, op_seconds: float
               ) -> dict[str, float]:
    """The model's host costs from profiled ones (:func:`profiled_host_costs` of an inference and a training
    step on the same host), anchored to ``op_seconds``: the unprofiled time of one plain op (the ceilings'
    back-to-back small-copy loop). Under the profiler every op runs slower; the RATIOS of the profiled
    durations are kept and scaled so that a one-kernel inference op costs ``op_seconds``."""
    scale = op_seconds / inference["simple"]
    costs = {"host_op_seconds": op_seconds}
    library = [inference[k] for k in ("conv", "batch_norm") if k in inference]
    if library:
        costs["host_library_seconds"] = max(0.0, statistics.mean(library) * scale - op_seconds)
    if "forward_gap" in inference:
        costs["host_module_seconds"] = inference["forward_gap"] * scale
    if training:
        if "simple" in training:
            costs["host_autograd_seconds"] = max(0.0, (training["simple"] - inference["simple"]) * scale)
        if "backward" in training:
            costs["host_backward_op_seconds"] = training["backward"] * scale
        if "foreach" in training:
            costs["host_optimizer_call_seconds"] = training["foreach"] * scale
    return {k: float(v) for k, v in costs.items()}


def copy_loop_seconds(ceilings: dict[str, Any]) -> float | None:
    """Seconds of one small copy in the ceilings' back-to-back L2 copy loop (median of its smallest size):
    on a GPU those copies take a microsecond, so the loop measures the host's dispatch and launch of one op."""
    runs = [r for r in ceilings.get("runs", []) if r.get("test") == "copy" and r.get("level") == "l2"]
    if not runs:
        return None
    smallest = min(r["size"] for r in runs)
    return statistics.median(r["seconds"] for r in runs if r["size"] == smallest)


# PyTorch's fused attention kernels by backend and direction (rooflow.estimate.attention): the memory-efficient
# CUTLASS kernels (fmha_cutlassF/B), and for fp16/bf16 flash — PyTorch's own (flash_fwd/bwd) or, on sm_90
# with cuDNN 9, cuDNN's SDPA (cudnn_generated_fort_native_sdpa_..._fprop/bprop).
ATTENTION_KERNELS = {"efficient_forward": r"fmha_cutlass\w*F_|mem_eff\w*fwd",
                     "efficient_backward": r"fmha_cutlass\w*B_|mem_eff\w*bwd",
                     "flash_forward": r"flash_fwd|sdpa\w*fprop", "flash_backward": r"flash_bwd|sdpa\w*bprop"}


def attention_efficiencies(recordings: list[Recording], device) -> dict[str, float]:
    """Per fused attention kernel (``<backend>_<phase>``), the model's time at efficiency 1 over the recorded
    kernels' time, summed over the torch.profiler recordings that ran it (Calibration.attention_efficiency)."""
    from rooflow.estimate import attention
    from rooflow.estimate.core import estimate

    unity = Calibration(source="unity", attention_efficiency={})
    ideal: dict[str, float] = collections.defaultdict(float)
    measured: dict[str, float] = collections.defaultdict(float)
    for recording in recordings:
        if recording.source != "torch.profiler":
            continue
        names = recording.kernels["name"]
        found = {key: float(recording.kernels.loc[names.str.contains(pattern, regex=True), "seconds"].sum())
                 for key, pattern in ATTENTION_KERNELS.items()}
        if not any(found.values()):
            continue
        ops = estimate(recording.model, recording.batch, recording.precision, recording.mode).ops
        layers = attention.sdpa_layers(ops["layer"], ops["op"])
        own: dict[str, float] = collections.defaultdict(float)
        for _, row in ops[ops["layer"].isin(layers) & (ops["op_class"] == "attention")].iterrows():
            terms = op_terms(row, recording.precision, device, unity, int(device.sm_count or 1), True)
            for kernel, seconds in terms["compute"].items():
                own["_".join(kernel.removeprefix(attention.KERNEL_PREFIX).split("_")[:2])] += int(row["calls"]) * seconds
        for key, seconds in found.items():
            if seconds and own.get(key):  # recorded and modelled both
                ideal[key] += own[key]
                measured[key] += seconds
    return {key: round(ideal[key] / measured[key], 2) for key in sorted(measured)}


def weight_gradient_efficiencies(recordings: list[Recording], device) -> dict[str, float]:
    """Per precision path, the cuBLAS weight-gradient GEMMs' (``<path>_wgrad``: timemodel.WGRAD_SUFFIX) model
    time at efficiency 1 over their recorded time, summed over the torch.profiler recordings of training steps
    that recorded shapes: a kernel is a weight gradient's when the ``aten::mm`` that launched it multiplies
    [m, k] by [k, n] with k above m and n."""
    from rooflow.estimate.core import estimate
    from rooflow.estimate.timemodel import WGRAD_SUFFIX

    unity = Calibration(source="unity", gemm_efficiency={})
    ideal: dict[str, float] = collections.defaultdict(float)
    measured: dict[str, float] = collections.defaultdict(float)
    for recording in recordings:
        if recording.source != "torch.profiler" or recording.mode != "training":
            continue
        with gzip.open(recording.path, "rt") as handle:
            events = json.load(handle)["traceEvents"]
        weight_gradients = set()
        for event in events:
            dims = (event.get("args") or {}).get("Input Dims") or []
            if event.get("cat") == "cpu_op" and event.get("name") == "aten::mm" and len(dims) == 2 \
                    and all(isinstance(d, list) and len(d) == 2 for d in dims) and dims[0][1] > max(dims[0][0], dims[1][1]):
                weight_gradients.add(event["args"].get("External id"))
        seconds = sum(event["dur"] for event in events if event.get("cat") == "kernel"
                      and event["args"].get("External id") in weight_gradients) * 1e-6
        if not seconds:
            continue
        ops = estimate(recording.model, recording.batch, recording.precision, recording.mode).ops
        own: dict[str, float] = collections.defaultdict(float)
        for _, row in ops[(ops["phase"] == "backward") & (ops["op"] == "mm")].iterrows():
            terms = op_terms(row, recording.precision, device, unity, int(device.sm_count or 1))
            for view_path, view_seconds in terms["compute"].items():
                if view_path.startswith(GEMM_PREFIX) and view_path.endswith(WGRAD_SUFFIX):
                    own[view_path.removeprefix(GEMM_PREFIX)] += int(row["calls"]) * view_seconds
        if len(own) == 1:  # one precision path per step: its weight gradients are the recorded ones
            path, modelled = next(iter(own.items()))
            ideal[path] += modelled
            measured[path] += seconds
    return {path: round(ideal[path] / measured[path], 2) for path in sorted(measured)}


def _path_efficiencies(matmul: list[tuple[dict[str, float], float, str, list]], preferred) -> dict[str, float]:
    """Per matmul path, the efficiency at which the time model gives the recorded seconds: each from the
    recordings where it carries most of the matmul work (torch.profiler ones if any), the other paths at their
    current estimate; a few rounds. ``matmul``: per recording, (ideal seconds by path, recorded matmul seconds,
    source, rows). Each row is held to the roofline as the time model holds it — the larger of its compute at
    the paths' efficiencies and its memory seconds — so a memory-bound product (a 1×1 convolution streaming
    its activations) does not pass for slow arithmetic: counted at its compute alone, ResNet-50's 1×1
    convolutions took its TF32 convolutions' forward efficiency to 0.54, where its compute-bound 3×3 ones run at
    1.04 of the model's ideal (H200 traces, tests/data/real/gpu-2026-11-27)."""
    paths = sorted({p for row, *_ in matmul for p in row})
    chosen = {}
    for path in paths:
        if path.startswith(GEMM_PREFIX):
            continue  # cuBLAS GEMMs: of the measured GEMM ceiling (Calibration.gemm_efficiency)
        dominant = [item for item in matmul if item[0].get(path, 0.0) >= 0.5 * sum(item[0].values()) and item[1] > 0]
        chosen[path] = preferred(dominant)
    efficiency = dict.fromkeys(paths, 1.0)

    def predicted(items, path: str, value: float) -> float:
        eff = {**efficiency, path: value}
        return sum(max(sum(seconds / eff[p] for p, seconds in compute.items()), memory)
                   for _, _, _, rows in items for compute, memory in rows)

    solved = set()
    for _ in range(10):
        for path, items in chosen.items():
            target = sum(item[1] for item in items)
            low, high = 1e-3, 1e3
            if not items or predicted(items, path, high) >= target:
                continue  # its memory-bound rows alone take longer than recorded: nothing to say of its compute
            for _ in range(60):  # the model's time falls as the efficiency rises: bisect in log space
                middle = math.sqrt(low * high)
                low, high = (middle, high) if predicted(items, path, middle) > target else (low, middle)
            efficiency[path] = math.sqrt(low * high)
            solved.add(path)
    return {path: round(efficiency[path], 4) for path in sorted(solved)}


def layout_ratios(recordings: list[tuple[dict[str, float], float, str]]) -> dict[str, float]:
    """``layout_bytes_per_byte`` from recorded steps: each one's activation transposes' seconds (one precision per
    step: its recorded transposes less the model's fixed part and filters, timemodel.transpose_kernel_seconds) over
    its convolutions' activation bytes at the bandwidth (``{"<path>_forward"/"<path>_backward": seconds}``). By
    path over all of them; by direction where some steps have forward convolutions only (inference: the forward's
    ratio) and others backward ones too (training: its transposes less the forward's ratio of its forward bytes,
    over its backward bytes). ResNet-50 b64 TF32 on the H100: 1.89 forward, 3.18 backward, 2.44 both (the
    backward transposes its output gradient twice, for each of its kernels)."""
    by_path: dict[str, list[tuple[float, float, float]]] = collections.defaultdict(list)
    for ideal, measured, _ in recordings:
        for path in {undirected(key) for key in ideal}:
            by_path[path].append((ideal.get(path + DIRECTIONS[0], 0.0), ideal.get(path + DIRECTIONS[1], 0.0),
                                  measured))
    ratios: dict[str, float] = {}
    for path, steps in by_path.items():
        ideal_total, measured_total = sum(f + b for f, b, _ in steps), sum(m for *_, m in steps)
        if ideal_total <= 0 or measured_total <= 0:
            continue
        ratios[path] = round(measured_total / ideal_total, 4)
        forward_only = [(f, m) for f, b, m in steps if not b]
        with_backward = [(f, b, m) for f, b, m in steps if b]
        if forward_only and with_backward and sum(f for f, _ in forward_only) > 0:
            forward = sum(m for _, m in forward_only) / sum(f for f, _ in forward_only)
            backward = (sum(m for *_, m in with_backward) - forward * sum(f for f, *_ in with_backward)) \
                / sum(b for _, b, _ in with_backward)
            if backward > 0:
                ratios.update({path + DIRECTIONS[0]: round(forward, 4), path + DIRECTIONS[1]: round(backward, 4)})
    return ratios


def derive_from_recordings(recordings: list[Recording], device, ceilings: dict[str, Any],
                           traces: dict[str, dict] | None = None, source: str = "") -> Calibration:
    """A calibration of ``device`` from recorded steps on it (module docstring, source 2).

    Each efficiency is a ratio of sums over the recordings — the model's time at efficiency 1 over the time
    the recorded kernels of that part took — so it says what the device reached on real steps, whatever
    the model; each matmul path (FP32 direct, FP32 Winograd/FFT-eligible, TF32) from the recordings it dominates. ``traces``
    (``{"inference": ..., "training": ...}``: torch.profiler traces of one step each) give the host costs,
    anchored to the ceilings' small-copy loop."""
    unity = Calibration(source="unity")
    clock = NCU_BASE_CLOCK_RATIO.get(device.key, 1.0)
    # Per quantity: (ideal seconds, measured seconds, source) of each recording. torch.profiler's kernel
    # times are the real ones; ncu's run at a locked base clock on flushed caches (multi-kernel algorithms
    # such as FFT convolutions lose their L2 reuse), so they only fill in what no profiler trace covers.
    contributions: dict[str, list[tuple[float, float, str]]] = collections.defaultdict(list)
    matmul: list[tuple[dict[str, float], float, str, list]] = []  # ideal by path, recorded, source, rows
    layout: list[tuple[dict[str, float], float, str]] = []  # ideal by directed path, recorded transposes, source
    floors = []
    for recording in recordings:
        rows: list[tuple[dict[str, float], float]] = []
        ideal = _ideal_parts(recording, device, unity, rows)
        measured = _measured_parts(recording, clock)
        matmul.append(({k.split(":")[1]: v for k, v in ideal.items() if k.startswith("matmul:")},
                       measured.get("matmul", 0.0), recording.source, rows))
        transposed = {key.split(":")[1]: seconds for key, seconds in ideal.items()
                      if key.startswith("layout:") and undirected(key.split(":")[1]) in TENSOR_PATHS}
        if any(transposed.values()):  # one precision per step; its activations' bytes: the transposes less the rest
            activations = measured.get("layout", 0.0) - ideal.get(TRANSPOSE_OVERHEAD, 0.0)
            layout.append((transposed, activations, recording.source))
        for key, seconds in ideal.items():
            if key.startswith("layout:") or key == TRANSPOSE_OVERHEAD:
                continue
            elif not key.startswith("matmul:") and seconds:
                contributions[key].append((seconds, measured.get(key.removesuffix("_training"), 0.0),
                                           recording.source))
        if recording.source == "ncu":
            floors.append(float(recording.kernels["seconds"].min()))

    def preferred(items):
        real = [item for item in items if item[-1] == "torch.profiler"]
        return real or items

    ratios = {}
    for key, items in contributions.items():
        items = preferred(items)
        ideal_total, measured_total = sum(i[0] for i in items), sum(i[1] for i in items)
        if ideal_total > 0 and measured_total > 0:
            ratios[key] = ideal_total / measured_total
    memory = {key: round(value, 4) for key, value in ratios.items()}
    layout_per_byte = layout_ratios(preferred(layout))
    # Each matmul path's efficiency; then the tensor-core convolutions' by direction where the recordings give
    # both (fprop kernels: the inference steps; dgrad/wgrad: the training steps less their forward part)
    def both_directions(by_path: dict[str, float]) -> dict[str, float]:
        merged: dict[str, float] = collections.defaultdict(float)
        for path, seconds in by_path.items():
            merged[undirected(path)] += seconds
        return dict(merged)

    pooled = [(both_directions(row), target, src, [(both_directions(compute), seconds) for compute, seconds in rows])
              for row, target, src, rows in matmul]
    matmul_efficiency = _path_efficiencies(pooled, preferred)
    directed = {p: v for p, v in _path_efficiencies(matmul, preferred).items() if p.endswith(DIRECTIONS)}
    if not {undirected(p) + d for p in directed for d in DIRECTIONS} <= set(directed):
        directed = {}  # one direction alone: the path's efficiency says as much
    matmul_efficiency.update(directed)
    notes = [f"efficiencies from {len(recordings)} recorded steps: "
             + ", ".join(f"{r.model} b{r.batch} {r.precision} {r.mode} ({r.source})" for r in recordings),
             "matmul efficiency: measured convolution/GEMM kernel time vs the shape-factored peak time, each "
             "product held to the roofline (a memory-bound one at the bandwidth); "
             "fp32_fast: FP32 convolutions Winograd/FFT can run (above 1: fewer multiplications)"]
    if directed:
        notes.append("<path>_forward / <path>_backward: tensor-core convolutions by direction, cuDNN's fprop kernels "
                     "(the inference steps) and dgrad/wgrad kernels (the training steps less their forward part); "
                     "<path>: both together")
    values: dict[str, Any] = {"matmul_efficiency": matmul_efficiency, "memory_efficiency_by_class": memory,
                              "layout_bytes_per_byte": layout_per_byte}
    if floors:
        values["kernel_seconds"] = min(floors)
        notes.append("kernel_seconds: the shortest recorded kernel")
    gap = kernel_gap_seconds(recordings)
    if gap is not None:
        values["kernel_gap_seconds"] = round(gap, 9)
        notes.append("kernel_gap_seconds: the timed steps' time less their recorded kernels' sum, per kernel")
    op_seconds = copy_loop_seconds(ceilings)
    inference = profiled_host_costs(traces["inference"]) if op_seconds and traces and traces.get("inference") else None
    if inference is not None and "simple" in inference:
        training = profiled_host_costs(traces["training"]) if traces.get("training") else None
        values.update(host_costs(inference, training, op_seconds))
        notes.append(f"host: one op = {op_seconds * 1e6:.1f} µs (the ceilings' back-to-back small-copy loop); "
                     "other host costs in proportion to it, from torch.profiler traces of an inference and a "
                     "training step")
    elif inference is not None:  # it was a KeyError
        notes.append("host costs: not derived (the inference trace has no aten::relu_ or aten::add_ call, the "
                     "one-kernel op they are scaled from); the defaults apply")
    missing = [p for p in ("fp16", "bf16") if p not in matmul_efficiency]
    if missing:
        notes.append(f"no recording of {'/'.join(missing)} steps: their tensor-core convolutions take TF32's forward "
                     f"efficiency (of their own peak) both ways, their other products TF32's")
        if "tf32" in layout_per_byte:  # the same NCHW <-> NHWC transpose kernels, on 2-byte elements
            layout_per_byte.update({p + d: layout_per_byte[f"tf32{d}"] for p in missing for d in ("", *DIRECTIONS)
                                    if f"tf32{d}" in layout_per_byte and p + d not in layout_per_byte})
            notes.append(f"{'/'.join(missing)} layout transposes: TF32's per byte, a 16-bit byte at "
                         f"timemodel.LAYOUT_16_BIT_BYTE_COST")
    # what these recordings did not give keeps rooflow's defaults: said, so a written file is not read as measured
    kept = [name for name in DERIVED_SCALARS if name not in values]
    if kept:
        notes.append(f"not derived from these recordings, rooflow's defaults kept: {', '.join(kept)} (host costs "
                     f"need torch.profiler traces of an inference and a training step and the ceilings' copy loop; "
                     f"kernel_seconds an ncu recording; kernel_gap_seconds a timed step beside its recording)")
    return Calibration(source=source or f"derived from recordings on {device.key}", **values, notes=tuple(notes))


# The scalar constants a calibration from recordings derives where its recordings give them (the rest default)
DERIVED_SCALARS = ("host_op_seconds", "host_module_seconds", "host_library_seconds", "host_autograd_seconds",
                   "host_backward_op_seconds", "host_optimizer_call_seconds", "kernel_seconds", "kernel_gap_seconds")
