"""The time model's calibration measured on this machine: the microbenchmarks `rooflow ceilings --calibrate`
(and the workflow's measure_ceilings) run — one module each, timed on the device, estimated by rooflow on
meta; each efficiency is the model's time at efficiency 1 over the measured one (the same ratio
rooflow.estimate.calibration.derive_from_recordings takes over whole steps). Batch per device kind."""

from __future__ import annotations

import collections
import math
from typing import Any

from rooflow.conventions import PAGE_FAULT_PART
from rooflow.estimate.timemodel import INPLACE_CLASS, RANDOM_CLASS, SMALL_ROWS, Calibration


def _microbenchmarks(torch) -> list[tuple[str, Any, tuple[int, ...], str]]:
    nn = torch.nn

    class Mask(nn.Module):
        """A dropout mask: one random draw per element (bernoulli_), what dropout layers spend on a CPU."""

        def forward(self, x):
            return torch.empty_like(x).bernoulli_(0.9)

    return [
        ("conv3x3", lambda: nn.Conv2d(64, 64, 3, padding=1, bias=False), (64, 56, 56), "inference"),
        ("conv3x3", lambda: nn.Conv2d(64, 64, 3, padding=1, bias=False), (64, 56, 56), "training"),
        ("conv1x1", lambda: nn.Conv2d(256, 64, 1, bias=False), (256, 56, 56), "inference"),
        ("conv1x1", lambda: nn.Conv2d(256, 64, 1, bias=False), (256, 56, 56), "training"),
        ("depthwise", lambda: nn.Conv2d(96, 96, 3, padding=1, groups=96, bias=False), (96, 56, 56), "inference"),
        ("batchnorm", lambda: nn.BatchNorm2d(64), (64, 56, 56), "inference"),
        ("batchnorm", lambda: nn.BatchNorm2d(64), (64, 56, 56), "training"),
        ("relu", lambda: nn.ReLU(), (64, 56, 56), "inference"),
        ("relu_inplace", lambda: nn.ReLU(inplace=True), (64, 56, 56), "inference"),
        ("maxpool", lambda: nn.MaxPool2d(3, 2, 1), (64, 112, 112), "inference"),
        ("maxpool", lambda: nn.MaxPool2d(3, 2, 1), (64, 112, 112), "training"),
        ("random", Mask, (64, 56, 56), "inference"),
    ]


def _timer(torch, cuda: bool):
    import time

    def run(fn, seconds: float = 0.3, warmup: int = 3) -> float:
        for _ in range(warmup):
            fn()
        if cuda:
            torch.cuda.synchronize()
        count, start = 0, time.perf_counter()
        while True:
            fn()
            count += 1
            if cuda and count % 8 == 0:
                torch.cuda.synchronize()
            if time.perf_counter() - start >= seconds and (not cuda or count % 8 == 0):
                break
        if cuda:
            torch.cuda.synchronize()
        return (time.perf_counter() - start) / count

    return run


def measure_host_costs(torch, device: str) -> dict[str, float]:
    """Host costs of the time model, measured with tiny tensors (the kernels take next to nothing, so the
    loop times the host: Python, dispatcher, autograd, the launch)."""
    cuda = device.startswith("cuda")
    timer = _timer(torch, cuda)
    x = torch.randn(8, 8, device=device)
    image = torch.randn(1, 8, 8, 8, device=device)
    relu, conv = torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 3, padding=1, bias=False).to(device)
    grad_x = x.clone().requires_grad_(True)
    tensors = [torch.randn(16, device=device) for _ in range(16)]
    with torch.no_grad():
        op = timer(lambda: torch.relu(x))
        module = timer(lambda: relu(x)) - op
        library = timer(lambda: conv(image)) - op - module
    autograd = timer(lambda: torch.relu(grad_x)) - op
    chain = 8

    def backward():
        y = grad_x
        for _ in range(chain):
            y = torch.relu(y)
        y.sum().backward()

    backward_op = (timer(backward) - (chain + 1) * (op + autograd)) / (chain + 1)
    foreach = timer(lambda: torch._foreach_add_(tensors, tensors))
    return {"host_op_seconds": op, "host_module_seconds": max(module, 0.0), "host_library_seconds": max(library, 0.0),
            "host_autograd_seconds": max(autograd, 0.0), "host_backward_op_seconds": max(backward_op, op),
            "host_optimizer_call_seconds": foreach}


def _step(torch, module, x, training: bool):
    if training:
        # backward from a dense gradient, as a layer inside a network gets one: `.sum().backward()` hands it
        # a stride-0 expanded gradient, which CPU kernels take on a slower path (BatchNorm2d's forward and
        # backward at 1.8x their time on a dense one on a 2-core Xeon), and every network's BatchNorm and
        # convolution backward was priced at that rate
        with torch.no_grad():
            gradient = torch.ones_like(module(x))

        def step():
            module(x).backward(gradient)
    else:
        def step():
            with torch.no_grad():
                module(x)
    return step


# in place or not, a GPU's elementwise kernels stream the same bytes (no read for ownership)
CPU_ONLY = {"relu_inplace"}
MEMORY_BENCHMARKS = {"depthwise", "batchnorm", "relu", "relu_inplace", "maxpool", "random"}
PARTS = {"conv3x3": "matmul:fp32_fast", "conv1x1": "matmul:fp32", "depthwise": "depthwise",
         "batchnorm": "normalization", "relu": "elementwise", "relu_inplace": INPLACE_CLASS, "maxpool": "pooling",
         "random": RANDOM_CLASS}


def hold_to_dram_roof(efficiencies: dict[str, float]) -> tuple[dict[str, float], str]:
    """The DRAM-sized classes' efficiencies against the measured DRAM roof, each held to at most 1, and a note
    naming those measured above it ('' if none). No op streams a working set four times the cache faster than
    the machine's own triad: a value above 1 is the timing's error (on a CPU, the host dispatch subtracted
    from a short run), and kept it would price the class's rows under their roofline."""
    above = {key: value for key, value in efficiencies.items() if value > 1.0}
    held = {key: round(min(value, 1.0), 4) for key, value in efficiencies.items()}
    note = ("DRAM-sized " + ", ".join(f"{key} {value:.2f}" for key, value in sorted(above.items()))
            + " measured above the DRAM roof these ceilings measured: held at 1.0, the roof") if above else ""
    return held, note


def settle_allocator(torch) -> None:
    """Leave the CPU allocator as a network's first iteration leaves it. glibc maps every allocation over its mmap
    threshold (128 KiB at first) fresh and raises the threshold to the size of each mapped block freed, up to 32 MiB
    (DEFAULT_MMAP_THRESHOLD_MAX): after one step a network's tensors under 32 MiB reuse memory, and only larger ones
    fault their pages in, which the time model charges apart (rooflow.estimate.core.LARGE_ALLOCATION_BYTES). A
    microbenchmark in a fresh process instead faulted in its outputs and oneDNN's layout copies on every call: on
    this machine's 2 cores a 144-channel depthwise convolution of 7 MB ran at 1/6 of its speed inside MobileNetV2,
    and the time model priced that network's depthwise layers at 5x their measured time. One block of just
    under 32 MiB, mapped and freed, takes the threshold there (no effect where the C library is not glibc)."""
    from rooflow.estimate.core import LARGE_ALLOCATION_BYTES

    torch.empty((LARGE_ALLOCATION_BYTES - 2 * 4096) // 4)  # mapped, then freed at once


def charged_host_seconds(torch, module, shape: tuple[int, ...], mode: str, phase: str,
                         host: dict[str, float]) -> float:
    """What the time model already charges one call of ``module`` on an input of ``shape`` in ``phase``: its ops'
    host dispatch (op and library; autograd in training) at the measured ``host`` costs and, forward, the module's
    call — the part of a microbenchmark's time that is not the work it calibrates."""
    from rooflow.estimate.core import count_module
    from rooflow.estimate.timemodel import host_op_seconds

    calibration = Calibration(source="host", kind="cpu", **host)
    est = count_module(module, torch.empty(*shape, device="meta", requires_grad=mode == "training"), mode=mode,
                       name="microbenchmark")
    rows = est.ops[est.ops["phase"] == phase]
    module_seconds = calibration.host_module_seconds if phase == "forward" else 0.0
    return module_seconds + sum(int(r["calls"]) * host_op_seconds(r, mode, calibration) for _, r in rows.iterrows())


def measure_depthwise_call_seconds(torch, host: dict[str, float], timer) -> dict[str, float]:
    """A CPU's depthwise convolution costs a fixed time per call beyond its bytes (oneDNN's depthwise primitive:
    0.1-0.2 ms forward on a 2-core Xeon whether the call moves 6 KB or 0.4 MB, where a dense 1×1 convolution's
    call costs 0.02 ms): timed on a 16-channel 3×3 depthwise convolution of one 7×7 image, whose bytes take no
    time, less what the time model already charges the call (its host dispatch: op, library and module;
    autograd in training). Backward: a training step's time less its forward's. Seconds per call, by phase."""
    def depthwise():
        return torch.nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False)

    shape = (1, 16, 7, 7)
    inference = timer(_step(torch, depthwise(), torch.randn(*shape), False))
    training = timer(_step(torch, depthwise(), torch.randn(*shape, requires_grad=True), True))

    def charged(mode: str, phase: str) -> float:
        return charged_host_seconds(torch, depthwise(), shape, mode, phase, host)

    forward = max(inference - charged("inference", "forward"), 0.0)
    backward = max(training - charged("training", "forward") - forward - charged("training", "backward"), 0.0)
    return {"forward": forward, "backward": backward}


def measure_small_rows_efficiency(torch, host: dict[str, float], peak_flops_per_second: float,
                                  cache_bytes: float | None, seconds: float = 0.15) -> dict[str, float]:
    """A CPU matrix product of few rows against the FP32 peak: an nn.Linear (no bias) of m = 1 … 128 rows
    (SMALL_ROWS) by a weight four times the last-level cache (at most 256 MB) and, as "cache:<m>", by one of an
    eighth of it, less the call's host dispatch. The BLAS runs such products with its small-m kernels, which
    stream the weight: MKL on a 2-core Zen VM ran m = 4 at 6-7% of the FP32 peak, where its 1×1 convolutions
    reach 37%."""
    timer = _timer(torch, False)
    sizes = {"": min(4 * cache_bytes, 256e6) if cache_bytes else 128 * 2**20}
    if cache_bytes:
        sizes["cache:"] = cache_bytes / 8
    out: dict[str, float] = {}
    for prefix, weight_bytes in sizes.items():
        elements = int(weight_bytes // 4)
        n = 2 ** max(4, int(math.log2(math.sqrt(elements / 2))))
        k = max(16, elements // n)
        layer = torch.nn.Linear(k, n, bias=False)
        for rows in SMALL_ROWS:
            x = torch.randn(rows, k)
            with torch.no_grad():
                measured = timer(lambda layer=layer, x=x: layer(x), seconds=seconds, warmup=2)
            charged = charged_host_seconds(torch, torch.nn.Linear(k, n, bias=False), (rows, k), "inference",
                                           "forward", host)
            ideal = 2.0 * rows * n * k / peak_flops_per_second
            out[f"{prefix}{rows}"] = round(ideal / max(measured - charged, 0.05 * measured), 4)
    return out


def measure_page_fault_seconds_per_byte(torch) -> float:
    """Seconds per byte of writing a freshly allocated 64 MiB tensor beyond writing an existing one: the page
    faults of memory glibc maps anew for every large allocation (CPU only)."""
    timer = _timer(torch, False)
    elements = 16 * 2**20
    existing = torch.empty(elements)
    fresh = timer(lambda: torch.empty(elements).fill_(1.0), seconds=0.3)
    reused = timer(lambda: existing.fill_(1.0), seconds=0.3)
    return max(fresh - reused, 0.0) / (4 * elements)


def measure_calibration(device_entry, ceilings: dict[str, Any], batch: int | None = None,
                        threads: int | None = None) -> Calibration:
    """Calibrate ``device_entry`` (a catalogue Device whose measured ceilings are merged in) by running the
    microbenchmarks on this machine: torch's CPU, or its first CUDA GPU for a cuda device.

    Convolutions at one batch; the memory-bound classes twice: with tensors that fit in the last-level cache
    (an eighth of it) and with tensors four times its size (DRAM), so that an op is held to the speed its
    size gets. On a CPU also the page faults of a freshly mapped large tensor."""
    import torch

    from rooflow.estimate.core import count_module
    from rooflow.estimate.timemodel import device_op_seconds

    cuda = device_entry.is_cuda
    device = "cuda" if cuda else "cpu"
    if threads and not cuda:
        torch.set_num_threads(threads)
    batch = batch or (32 if cuda else 2)
    cache = ceilings.get("l2_cache_bytes") if cuda else ceilings.get("last_level_cache_bytes")
    cache = float(cache) if cache else None
    timer = _timer(torch, cuda)
    host = measure_host_costs(torch, device)
    faults = 0.0 if cuda else measure_page_fault_seconds_per_byte(torch)
    if not cuda:
        settle_allocator(torch)
    depthwise_calls = {} if cuda else measure_depthwise_call_seconds(torch, host, timer)
    peak = device_entry.compute_peak("fp32", True) or 0.0
    small_rows = measure_small_rows_efficiency(torch, host, peak, cache) if not cuda and peak else {}
    unity = Calibration(source="unity", kind="cuda" if cuda else "cpu", kernel_seconds=0.0, memory_efficiency=1.0,
                         matmul_efficiency=dict.fromkeys(("fp32", "fp32_fast", "tf32", "fp16", "bf16"), 1.0))
    ideal: dict[str, float] = collections.defaultdict(float)
    measured: dict[str, float] = collections.defaultdict(float)
    for name, factory, shape, mode in _microbenchmarks(torch):
        if cuda and name in CPU_ONLY:
            continue
        training = mode == "training"
        sizes = {"": batch}
        if name in MEMORY_BENCHMARKS and cache:
            per_image = 4 * math.prod(shape) * 2  # read and written once, at least
            sizes = {"cache:": max(1, int(cache / 8 // per_image)),
                     "": max(batch, min(int(4 * cache // per_image) + 1, int(256e6 // per_image)))}
        for prefix, size in sizes.items():
            module = factory().to(device).train(training)
            x = torch.randn(size, *shape, device=device, requires_grad=training)
            seconds = timer(_step(torch, module, x, training))
            est = count_module(factory(), torch.empty(size, *shape, device="meta", requires_grad=training),
                                  mode=mode, name=name)
            ops = est.ops[est.ops["phase"].isin(["forward", "backward"])]
            # what the model charges apart: the host's dispatch (a CPU runs the kernels itself) and the page
            # faults of freshly mapped large outputs
            host_seconds = sum(int(r["calls"]) * (host["host_op_seconds"]
                                                  + (host["host_autograd_seconds"] if training else 0.0))
                               for _, r in ops.iterrows())
            host_seconds += float(ops["large_allocated_bytes"].sum()) * faults
            work = 0.0
            for _, row in ops.iterrows():
                _, _, parts = device_op_seconds(row, "fp32", mode, device_entry, unity,
                                                int(device_entry.sm_count or 1))
                work += int(row["calls"]) * sum(v for k, v in parts.items() if k != PAGE_FAULT_PART)
                if "depthwise" in parts:  # its primitive's per-call cost, priced apart
                    host_seconds += int(row["calls"]) * depthwise_calls.get(
                        "backward" if row["phase"] == "backward" else "forward", 0.0)
            part = PARTS[name]
            if training and part in ("normalization", "pooling"):
                part += "_training"
            ideal[prefix + part] += work
            # on a CPU the host runs the kernels: its dispatch time is not kernel time
            measured[prefix + part] += max(seconds - (0 if cuda else host_seconds), seconds * 0.05)
    matmul = {key.split(":")[1]: round(ideal[key] / measured[key], 4) for key in ideal if key.startswith("matmul:")}
    memory, above_roof = hold_to_dram_roof({key: ideal[key] / measured[key] for key in ideal if ":" not in key})
    cached = {key.split(":")[1]: round(ideal[key] / measured[key], 4) for key in ideal if key.startswith("cache:")}
    if cuda and "fp32" in matmul:
        matmul.setdefault("tf32", matmul["fp32"])
    notes = [f"measured by rooflow's calibration microbenchmarks on {'this GPU' if cuda else 'this CPU'} "
             f"(3×3 and 1×1 convolutions at batch {batch}; depthwise, batch norm, ReLU{'' if cuda else ' (and in place)'}, max-pool and a random "
             f"mask with tensors inside and four times the {'L2' if cuda else 'last-level cache'}; a loop of tiny "
             f"ops for the host)"]
    if above_roof:
        notes.append(above_roof)
    extra: dict[str, Any] = {}
    if not cuda:
        extra["page_fault_seconds_per_byte"] = faults
        notes.append("page faults: writing a fresh 64 MiB tensor against writing an existing one")
    else:
        notes.append("tensor-core paths (TF32/FP16/BF16) not benchmarked: TF32 takes FP32's efficiency")
    if small_rows:
        extra["small_rows_efficiency"] = small_rows
        notes.append(f"matrix products of few rows: an nn.Linear of {SMALL_ROWS[0]}-{SMALL_ROWS[-1]} rows by a weight "
                     f"four times and an eighth of the last-level cache")
    if depthwise_calls:
        extra["depthwise_call_seconds"] = {k: round(v, 9) for k, v in depthwise_calls.items()}
        notes.append("depthwise convolution calls: a 16-channel one of a 7×7 image, less its host dispatch")
    return Calibration(source=f"measured on {device_entry.key} by rooflow's calibration microbenchmarks",
                        kind="cuda" if cuda else "cpu", **{k: float(v) for k, v in host.items()},
                        kernel_seconds=0.0 if not cuda else 2.5e-6, matmul_efficiency=matmul,
                        memory_efficiency_by_class=memory, memory_efficiency=memory.get("elementwise", 0.8),
                        cache_bytes=cache, cache_memory_efficiency_by_class=cached, notes=tuple(notes), **extra)
