"""Single-op latencies measured on this GPU as the public NeuSight data set measured its five GPUs, written in
its layout — `<operator>/<GPU>.csv` and `device_configs/<GPU>.json` — which `rooflow calibrate-kernels --data
DIR` fits into this GPU's kernel calibration (`rooflow ceilings --device KEY --single-ops DIR`).

Their method (their `neusight/Dataset/collect.py`): one operator on fresh FP32 tensors, TF32 off,
`cudnn.benchmark` on; CUDA events recorded right before and after one call, then a synchronize; 25 calls, the
mean of the 5 fastest. Shapes are drawn (seeded) from the ranges their files cover, so that what is fitted
here is comparable with the shipped calibrations; 3×3 stride-1 convolutions only, as theirs.

One departure, for the calls their host's launch floor makes: those under :data:`RETIME_BELOW_SECONDS` are timed
again in :data:`PASSES` − 1 later passes over the operators, and the fastest pass is kept. A host's dispatch runs
in states that last for a block of shapes: rooflow's H200 single ops and their repeat run (another process, the
same shapes) differ per operator by one factor, 0.58–1.40, inside which a block's shapes agree (softmax 0.58–0.60,
tanh 0.59–0.62, div 1.33–1.44 between quartiles) — the calls of one operator timed in one slow or fast stretch.
Inside one operator's block the stretches show too: the repeat run's bmm calls of under 50 µs, by 50 rows in run
order, took 1.21, 1.40, 1.46, 0.97, 0.94, 1.39, 1.44, 1.47, 0.96, 0.97 times the first run's (quartiles within
±0.1 of each) — stretches of some 100 shapes, a few tenths of a second, slow half the time. A later pass, seconds
away, times the shape in another stretch; with half of them slow, one of five passes misses every fast one for
1 shape in 32 (one of three: 1 in 8)."""

from __future__ import annotations

import datetime
import math
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rooflow.errors import RooflowError
from rooflow.estimate.kernel_calibration import OPERATORS as KERNEL_OPERATORS
from rooflow.estimate.kernel_calibration import SINGLE_OPS_PROVENANCE

CALLS = 25  # timed calls per shape
FASTEST = 5  # of which the mean of the fastest is the latency
PASSES = 5  # passes that time a call under RETIME_BELOW_SECONDS (the module docstring says why); the fastest is kept
RETIME_BELOW_SECONDS = 1e-3  # a call this short is mostly its host's floor, whose state moves it by up to 1.7x
# Not re-timed: convolutions, whose host cost grows with the shapes cudnn.benchmark has tuned before them
# (kernel_calibration.host_drift reads that growth from each row's place in its run; a later pass would hide it)
RETIMED_OPERATORS_EXCLUDE = ("conv",)
# Each operator's shape columns and their ranges, inclusive, drawn log-uniformly: the data set's, narrower
# where its largest go past the caps below (convolution inputs to 252, linear depths and widths to 65,536).
RANGES: dict[str, dict[str, tuple[int, int]]] = {
    "conv": {"B": (1, 64), "Input_Channel": (3, 1024), "Output_Channel": (3, 1024), "Input_Size": (5, 128)},
    "linear": {"B": (1, 1), "M": (8, 8192), "N": (2, 16384), "K": (2, 16384)},
    "bmm": {"B": (1, 1024), "M": (2, 1024), "N": (2, 1024), "K": (2, 1024)},
    "elementwise": {"B": (1, 16384), "H": (1, 4096)},
    "ln": {"B": (4, 16384), "H": (256, 4096)},
    "softmax": {"B": (1, 16384), "H": (1, 4096)},
}
OPERATORS = tuple(KERNEL_OPERATORS)  # the operators the kernel model reads, in its order
ELEMENTWISE = tuple(operator for operator in OPERATORS if KERNEL_OPERATORS[operator][0] == "elementwise")
# Shapes per operator. Where the library picks its kernels by shape (cuDNN, cuBLAS) the fit needs many: fitted on
# 500 of each (40 of the others), a data-set GPU's own calibration predicts the rest of its convolutions 73–86%
# within ±25% and its GEMMs 80–98%; on 200, 71–85% and 73–98%; on 40, 66–80% and 62–96%. The memory-bound ops
# need few (40: 83–100%). Their kernels take about a minute on a T4 (the kernel model's sum). A quarter with --quick.
SHAPES_PER_OPERATOR = {"conv": 500, "linear": 500, "bmm": 500}
SHAPES_DEFAULT = 40
MAX_TENSOR_BYTES = 2**30  # a drawn shape whose tensors exceed this is drawn again (a 16 GB board holds it)
MAX_FLOPS = 2e12  # nor one of more FLOPs than this (half a second a call on a T4)
# Operators whose kernels the library picks by shape (cuDNN's algorithm, cuBLAS's tile): on a GPU their rows
# name the kernels one call launched (`Kernels`, `Kernel Name`: the longest), as the data set's do
LIBRARY_OPERATORS = ("conv", "linear", "bmm")


def _flops_and_bytes(operator: str, shape: dict[str, int]) -> tuple[float, float]:
    """Multiply-add FLOPs and the bytes of the call's tensors (FP32)."""
    if operator == "conv":
        b, cin, cout, size = shape["B"], shape["Input_Channel"], shape["Output_Channel"], shape["Input_Size"]
        return 2.0 * b * cin * cout * 9 * size * size, 4.0 * (b * (cin + cout) * size * size + cout * cin * 9)
    if operator in ("linear", "bmm"):
        b, m, n, k = shape["B"], shape["M"], shape["N"], shape["K"]
        return 2.0 * b * m * n * k, 4.0 * (b * m * n + (b if operator == "bmm" else 1) * n * k + b * m * k)
    return 0.0, 4.0 * shape["B"] * shape["H"] * 3


def shape_counts(quick: bool = False) -> dict[str, int]:
    """Shapes to measure per operator (:data:`SHAPES_PER_OPERATOR`; a quarter with ``quick``)."""
    return {operator: SHAPES_PER_OPERATOR.get(operator, SHAPES_DEFAULT) // (4 if quick else 1)
            for operator in OPERATORS}


def plan(counts: dict[str, int] | int, seed: int = 0) -> dict[str, list[dict[str, int]]]:
    """Per operator, its count of ``counts`` (one count for all, if an int) shapes drawn log-uniformly in
    :data:`RANGES` (the same for a seed)."""
    rng = random.Random(seed)
    shapes: dict[str, list[dict[str, int]]] = {}
    for operator in OPERATORS:
        ranges = RANGES["elementwise" if operator in ELEMENTWISE else operator]
        wanted = counts if isinstance(counts, int) else counts.get(operator, 0)
        drawn: list[dict[str, int]] = []
        while len(drawn) < wanted:
            shape = {name: round(math.exp(rng.uniform(math.log(low), math.log(high))))
                     for name, (low, high) in ranges.items()}
            flops, tensor_bytes = _flops_and_bytes(operator, shape)
            if tensor_bytes <= MAX_TENSOR_BYTES and flops <= MAX_FLOPS:
                drawn.append(shape)
        shapes[operator] = drawn
    return shapes


def build_call(torch, operator: str, shape: dict[str, int], device: str) -> Callable[[], Any]:
    """One call of ``operator`` on fresh FP32 tensors of ``shape`` on ``device`` (a closure to time)."""
    nn, randn = torch.nn, lambda *size: torch.randn(*size, device=device)
    if operator == "conv":
        module = nn.Conv2d(shape["Input_Channel"], shape["Output_Channel"], 3, stride=1, padding=1, bias=False,
                           device=device)
        x = randn(shape["B"], shape["Input_Channel"], shape["Input_Size"], shape["Input_Size"])
        return lambda: module(x)
    if operator == "linear":  # nn.Linear(N, K) on (B, M, N), as theirs
        # built on the device: a 16,384-square weight initialised by the host would take seconds a pass
        module, x = nn.Linear(shape["N"], shape["K"], device=device), randn(shape["B"], shape["M"], shape["N"])
        return lambda: module(x)
    if operator == "bmm":
        a, b = randn(shape["B"], shape["M"], shape["N"]), randn(shape["B"], shape["N"], shape["K"])
        return lambda: torch.bmm(a, b)
    x, y = randn(shape["B"], shape["H"]), randn(shape["B"], shape["H"])
    calls = {"add": lambda: x + y, "mul": lambda: x * y, "div": lambda: x / y, "pow": lambda: torch.pow(x, y),
             "addu": lambda: x + 1.5, "mulu": lambda: x * 1.5, "divu": lambda: x / 1.5,
             "powu": lambda: torch.pow(x, 1.5), "relu": lambda: torch.relu(x),
             "gelu": lambda: nn.functional.gelu(x), "tanh": lambda: torch.tanh(x)}
    if operator in calls:
        return calls[operator]
    if operator == "ln":
        module = nn.LayerNorm(shape["H"], device=device)
        return lambda: module(x)
    if operator == "softmax":
        return lambda: torch.softmax(x, dim=-1)
    raise RooflowError(f"unknown single op {operator!r}: one of {', '.join(OPERATORS)}")


def time_call(torch, call: Callable[[], Any], cuda: bool, calls: int = CALLS, fastest: int = FASTEST) -> float:
    """Seconds of one call: the mean of the ``fastest`` of ``calls``, each timed alone — CUDA events right
    before and after it, then a synchronize (a monotonic clock on a CPU) — after one untimed call, in which
    ``cudnn.benchmark`` picks its algorithm."""
    seconds = []
    with torch.no_grad():
        call()
        if cuda:
            torch.cuda.synchronize()
        for _ in range(calls):
            if cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                call()
                end.record()
                torch.cuda.synchronize()
                seconds.append(start.elapsed_time(end) * 1e-3)
            else:
                begin = time.perf_counter()
                call()
                seconds.append(time.perf_counter() - begin)
    return sum(sorted(seconds)[:fastest]) / fastest


def launched_kernels(torch, call: Callable[[], Any]) -> list[tuple[str, float]]:
    """The kernels one call of ``call`` launches on the GPU, in start order, with their seconds: a torch.profiler
    trace (CUDA activity) of that call, as the data set's ``Kernels`` recorded them."""
    import json
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad(), profile(activities=[ProfilerActivity.CUDA]) as profiler:
        call()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace.json"
        profiler.export_chrome_trace(str(path))
        events = json.loads(path.read_text()).get("traceEvents", [])
    return kernels_of_trace(events)


def kernels_of_trace(events: list) -> list[tuple[str, float]]:
    """The GPU kernels of a torch.profiler Chrome trace's events, in start order, with their seconds
    (rooflow.measure.timeline reads whole timelines, this layer only names a call's kernels)."""
    from rooflow.profilers.kernels import TRACE_KERNEL_CATEGORIES

    kernels = sorted((e for e in events if isinstance(e, dict) and e.get("ph") == "X"
                      and e.get("cat") in TRACE_KERNEL_CATEGORIES), key=lambda e: float(e.get("ts", 0.0)))
    return [(str(e.get("name", "")), float(e.get("dur", 0.0)) * 1e-6) for e in kernels]


def device_config(device) -> dict[str, Any]:
    """The data set's ``device_configs/<GPU>.json`` of a catalogue GPU (their units: GB, GB/s, MHz, GFLOP/s,
    MB), which the kernel model reads its datasheet from."""
    missing = [name for name, value in (("sm_count", device.sm_count), ("l2_cache_bytes", device.l2_cache_bytes),
                                        ("dram_bytes_per_second", device.dram_bytes_per_second),
                                        ("peak fp32", device.peak_flops_per_second.get("fp32")))
               if not value]
    if missing:
        raise RooflowError(f"device '{device.key}' lacks {', '.join(missing)} in the catalogue: the kernel model "
                           f"needs them to fit single ops; add them to its entry in config/devices.yaml")
    fp32 = device.peak_flops_per_second["fp32"]
    clock_mhz = device.boost_clock_mhz or 0.0
    return {"Device": device.name, "Dev_Mem": round((device.memory_bytes or 0) / 1e9),
            "Mem_Bw": round(device.dram_bytes_per_second / 1e9), "Num_Sm": int(device.sm_count),
            "Core_Per_SM": round(fp32 / (2 * clock_mhz * 1e6 * device.sm_count)) if clock_mhz else None,
            "Freq": clock_mhz or None, "SingleFLOPs": round(fp32 / 1e9),
            "L2Cache": device.l2_cache_bytes / 2**20}


def _write_rows(path: Path, measured: list[tuple[dict[str, int], dict[str, Any]]]) -> None:
    import pandas as pd

    from rooflow.io import write_csv

    write_csv(path, pd.DataFrame([{**row, **shape} for shape, row in measured]))


def _name_kernels(torch, measured: dict[str, list[tuple[dict[str, int], dict[str, Any]]]], torch_device: str,
                  folder: Path, file_name: str, log: Callable[[str], None]) -> None:
    """Add to each library operator's rows the kernels one more call of its shape launches (cudnn.benchmark's
    pick, cached from its timing) and rewrite its file; a profiler that fails leaves the latencies as written."""
    for operator in LIBRARY_OPERATORS:
        began = time.monotonic()
        for shape, row in measured.get(operator, []):
            try:
                kernels = launched_kernels(torch, build_call(torch, operator, shape, torch_device))
            except torch.cuda.OutOfMemoryError:
                torch.cuda.empty_cache()
                continue
            except Exception as error:  # noqa: BLE001 - the latencies stand without the names
                log(f"single ops: kernel names not recorded (torch.profiler: {type(error).__name__}: {error}); "
                    f"the latencies are written without them")
                return
            row["Kernels"] = "".join(f";{name}" for name, _ in kernels)
            row["Kernel Name"] = max(kernels, key=lambda k: k[1])[0] if kernels else ""
        if measured.get(operator):
            _write_rows(folder / operator / f"{file_name}.csv", measured[operator])
            log(f"single ops: {operator}: kernels named in {time.monotonic() - began:.1f} s")


def _retime(torch, measured: dict[str, list[tuple[dict[str, int], dict[str, Any]]]], torch_device: str,
            cuda: bool, folder: Path, file_name: str, log: Callable[[str], None]) -> None:
    """Time again, in :data:`PASSES` − 1 more passes over the operators, each shape whose
    first pass took under :data:`RETIME_BELOW_SECONDS` (but the operators of :data:`RETIMED_OPERATORS_EXCLUDE`),
    keep its fastest pass as ``Latency`` and every pass in ``Pass_Latencies`` (milliseconds, in order), and
    rewrite the files whose rows moved. Each pass builds the call afresh: holding every shape's tensors between
    passes would hold gigabytes."""
    passes = PASSES
    short = {operator: [(shape, row) for shape, row in rows if row["Latency"] * 1e-3 < RETIME_BELOW_SECONDS]
             for operator, rows in measured.items() if operator not in RETIMED_OPERATORS_EXCLUDE}
    short = {operator: rows for operator, rows in short.items() if rows}
    if passes < 2 or not short:
        return
    began, times = time.monotonic(), {id(row): [row["Latency"]] for rows in short.values() for _, row in rows}
    for _ in range(passes - 1):
        for operator, rows in short.items():
            for shape, row in rows:
                try:
                    times[id(row)].append(time_call(torch, build_call(torch, operator, shape, torch_device), cuda)
                                          * 1e3)
                except torch.cuda.OutOfMemoryError:  # it ran in the first pass: keep the passes it has
                    torch.cuda.empty_cache()
    moved = 0
    for rows in short.values():
        for _, row in rows:
            row["Latency"] = min(times[id(row)])
            row["Pass_Latencies"] = ";".join(f"{ms:.6g}" for ms in times[id(row)])
            moved += times[id(row)][0] > 1.1 * row["Latency"]
    for operator in short:
        _write_rows(folder / operator / f"{file_name}.csv", measured[operator])
    calls = sum(len(rows) for rows in short.values())
    log(f"single ops: {calls} calls under {RETIME_BELOW_SECONDS * 1e3:g} ms timed in {passes - 1} more passes in "
        f"{time.monotonic() - began:.1f} s, the fastest pass kept: {moved} took over 10% longer in their first pass "
        f"(slow stretches of the host's dispatch do this)")


def stretches(rows) -> str | None:
    """What the re-timing passes found in measured rows (:func:`kernel_calibration.load_measurements`'s frame,
    ``Pass_Latencies`` where :func:`_retime` wrote them), per GPU, in one line each; None where no row was
    re-timed (the data set's files, or a run before the passes)."""
    if "Pass_Latencies" not in rows.columns:
        return None
    lines = []
    for gpu, frame in rows[rows["Pass_Latencies"].notna()].groupby("gpu"):
        passes = [[float(ms) for ms in str(text).split(";")] for text in frame["Pass_Latencies"]]
        slower = sorted(first[0] / min(first) for first in passes)
        moved = sum(ratio > 1.1 for ratio in slower)
        lines.append(f"{gpu}: {len(passes)} calls under {RETIME_BELOW_SECONDS * 1e3:g} ms timed in "
                     f"{max(len(p) for p in passes)} passes; {moved} took over 10% longer in their first pass than in "
                     f"their fastest (median {slower[len(slower) // 2]:.2f}x, the most {slower[-1]:.2f}x; slow "
                     f"stretches of the host's dispatch do this); the fastest pass is the latency scored")
    return "\n".join(lines) or None


def collect(torch, device, folder: str | Path, counts: dict[str, int] | int | None = None, seed: int = 0,
            torch_device: str = "cuda", log: Callable[[str], None] = print) -> Path:
    """Measure :func:`plan`'s shapes on ``torch_device`` and write them under ``folder`` in the data set's layout
    (each file atomically: a killed run leaves none half-written); returns ``folder``. ``device``: the
    catalogue entry of this GPU (its name labels the rows; its datasheet is the device config); ``counts``: shapes
    per operator (default :func:`shape_counts`). A shape the GPU has no memory for is left out and said so."""
    from rooflow.io import write_json

    folder, cuda = Path(folder), torch_device.startswith("cuda")
    counts = shape_counts() if counts is None else counts
    config = device_config(device)
    flags = (torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32 = True, False
    torch.backends.cuda.matmul.allow_tf32 = False
    file_name = device.name.replace(" ", "_")
    measured: dict[str, list[tuple[dict[str, int], dict[str, Any]]]] = {}
    try:
        for operator, shapes in plan(counts, seed).items():
            measured[operator], began = [], time.monotonic()
            for shape in shapes:
                try:
                    call = build_call(torch, operator, shape, torch_device)
                    seconds = time_call(torch, call, cuda)
                except torch.cuda.OutOfMemoryError:
                    log(f"single ops: {operator} {shape}: out of GPU memory, left out")
                    torch.cuda.empty_cache()
                    continue
                row = {"OPName": operator, "Latency": seconds * 1e3, "Device": device.name,
                       "Torch Version": torch.__version__, "CUDA Version": torch.version.cuda or ""}
                if operator == "conv":
                    row.update(Kernel_Szie=3, Stride=1, Padding=1)
                measured[operator].append((shape, row))
                del call
            _write_rows(folder / operator / f"{file_name}.csv", measured[operator])
            log(f"single ops: {operator}: {len(measured[operator])} shapes measured in "
                f"{time.monotonic() - began:.1f} s")
        _retime(torch, measured, torch_device, cuda, folder, file_name, log)
        if cuda:
            # After every latency: a process that has run torch.profiler times later calls slower (on an H200 its
            # elementwise calls took a median 2.29x a clean run's, two clean runs 1.13x apart)
            _name_kernels(torch, measured, torch_device, folder, file_name, log)
        write_json(folder / "device_configs" / f"{file_name}.json", config)
        cudnn = torch.backends.cudnn.version() if cuda else None
        measured_by = (f"measured by rooflow ceilings --single-ops on {torch_device} ({device.key}), torch "
                       f"{torch.__version__}" + (f", CUDA {torch.version.cuda}, cuDNN {cudnn}" if cuda else "")
                       + f", {datetime.date.today().isoformat()}")
        write_json(folder / SINGLE_OPS_PROVENANCE, {"measured_by": measured_by, "device_key": device.key,
                                                     "shapes_per_operator": counts, "seed": seed,
                                                     "calls": CALLS, "fastest": FASTEST, "passes": PASSES,
                                                     "retimed_below_seconds": RETIME_BELOW_SECONDS,
                                                     "not_retimed": list(RETIMED_OPERATORS_EXCLUDE)})
    finally:
        (torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32,
         torch.backends.cuda.matmul.allow_tf32) = flags
    return folder
