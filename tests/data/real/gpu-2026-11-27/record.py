"""Record, on a lent GPU, the per-kernel evidence for the step predictions rooflow misses (issue 25).

Per step: rooflow's own Runner (cudnn.benchmark switched on after it is built, as in the H200 sweep of
gpu-2026-11-25), 10 warm-up and 20 timed iterations (CUDA events around forward, backward and optimizer),
then ONE iteration under torch.profiler (CPU + CUDA activities, input shapes, a ``module:`` range around every
module and a ``phase:`` range around each phase), exported with export_chrome_trace. Writes, in OUT:
``torch-profiler-<model>-b<batch>-<precision>-<mode>.json.gz``, ``<...>-timing.json`` (median_seconds, as
rooflow.estimate.calibration.load_recordings reads it) and ``steps.jsonl`` (one line per step, failures too).

Usage: python3 record.py OUT SECONDS [model:batch:precision:mode,...]
(steps not started within SECONDS are skipped, and say so; without a list, STEPS)
"""

from __future__ import annotations

import gzip
import json
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

# (model, batch, precision, mode), most wanted first: the H200 b256 misses and the ViT TF32 backward gap,
# then the FP32 steps that are predicted well, as the contrast a TF32 or layout cause must show against.
STEPS = [
    ("vit_b_16", 256, "tf32", "training"),
    ("convnext_tiny", 256, "tf32", "inference"),
    ("resnet50", 256, "tf32", "inference"),
    ("mobilenet_v2", 256, "fp32", "inference"),
    ("densenet121", 256, "tf32", "inference"),
    ("regnet_y_1_6gf", 256, "bf16", "inference"),
    ("squeezenet1_1", 256, "bf16", "training"),
    ("vit_b_16", 256, "fp32", "training"),
    ("convnext_tiny", 256, "fp32", "inference"),
    ("resnet50", 256, "fp32", "inference"),
    ("vit_b_16", 32, "tf32", "training"),
    ("resnet50", 256, "tf32", "training"),
]
WARMUP, TIMED = 10, 20


def record_step(model: str, batch: int, precision: str, mode: str, subset: dict, out: Path,
                device: str = "cuda") -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from rooflow.measure.optime import module_ranges
    from rooflow.measure.timeline import _PhaseRanges, parse_trace
    from rooflow.measure.timing import Runner, RunSpec, _Clock

    stem = f"{model}-b{batch}-{precision}-{mode}"
    row: dict = {"model": model, "batch": batch, "precision": precision, "mode": mode, "status": "ok"}
    started = time.perf_counter()
    runner = Runner(RunSpec(model, batch, precision, mode, device=device), subset)
    cuda = device == "cuda"
    torch.backends.cudnn.benchmark = True
    try:
        for _ in range(WARMUP):
            runner.step()
        runner.synchronize()
        phases = []
        for _ in range(TIMED):
            clock = _Clock(cuda)
            runner.step(clock)
            phases.append(clock.intervals_seconds())
        seconds = [sum(p) for p in phases]
        row["median_seconds"] = statistics.median(seconds)
        row["min_seconds"] = min(seconds)
        for index, name in enumerate(["forward", "backward", "optimizer"][:len(phases[0])]):
            row[f"{name}_median_seconds"] = statistics.median(p[index] for p in phases)
        names = ["forward"] if mode == "inference" else ["forward", "backward", "optimizer"]
        runner.synchronize()
        with module_ranges(runner.model), profile(activities=[ProfilerActivity.CPU] + [ProfilerActivity.CUDA] * cuda,
                                                  record_shapes=True) as profiler:
            runner.step(_PhaseRanges(names))
            runner.synchronize()
        with tempfile.TemporaryDirectory() as folder:
            raw = Path(folder) / "trace.json"
            profiler.export_chrome_trace(str(raw))
            trace_path = out / f"torch-profiler-{stem}.json.gz"
            with open(raw, "rb") as source, gzip.open(trace_path, "wb") as target:
                shutil.copyfileobj(source, target)
        timeline = parse_trace(trace_path)
        kernels = timeline[timeline["kind"] == "kernel"]
        row["trace_kernels"] = int(len(kernels))
        row["trace_kernel_seconds"] = float(kernels["seconds"].sum())
        if cuda:
            row["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
    finally:
        del runner
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
    row["wall_seconds"] = time.perf_counter() - started
    (out / f"{stem}-timing.json").write_text(json.dumps(row, indent=1) + "\n")
    return row


def main(out: Path, budget_seconds: float, steps: list[tuple[str, int, str, str]]) -> None:
    import torch
    import torchvision

    from rooflow.workload.dataset import SubsetSpec, build_subset, load_subset

    out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    tensor = out.parent / "subset.pt"
    build_subset(SubsetSpec(), tensor, out.parent / "subset.csv")
    subset = load_subset(tensor)
    environment = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "torchvision": torchvision.__version__, "cudnn": torch.backends.cudnn.version()}
    with open(out / "steps.jsonl", "a") as log:
        for model, batch, precision, mode in steps:
            row = {"model": model, "batch": batch, "precision": precision, "mode": mode}
            if time.monotonic() - start > budget_seconds:
                row.update(status="skipped", message=f"not started within the {budget_seconds:g} s budget")
            else:
                try:
                    row = record_step(model, batch, precision, mode, subset, out)
                except Exception as error:  # noqa: BLE001 - record the failure, go on with the next step
                    row.update(status="error", message=f"{type(error).__name__}: {error}"[:500],
                               traceback=traceback.format_exc()[-2000:])
            row.update(environment)
            log.write(json.dumps(row) + "\n")
            log.flush()
            print(json.dumps({k: row.get(k) for k in ("model", "batch", "precision", "mode", "status",
                                                       "median_seconds", "trace_kernel_seconds",
                                                       "wall_seconds", "message")}), flush=True)


if __name__ == "__main__":
    listed = [(m, int(b), p, mode) for m, b, p, mode in (item.split(":") for item in sys.argv[3].split(","))] \
        if len(sys.argv) > 3 else STEPS
    main(Path(sys.argv[1]), float(sys.argv[2]), listed)
