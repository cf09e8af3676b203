"""Latency of one model × batch × precision × mode on one device (the one-iteration driver the Nsight
profilers wrap is rooflow.measure.driver).

GPU: CUDA events around forward, backward and optimizer step, after warm-up (allocator, lazy init), with
cuDNN's deterministic heuristics rather than its per-process autotuner (see Runner), peak memory from
max_memory_allocated; then, optionally, the kernels of one extra iteration (rooflow.measure.timeline). CPU:
perf_counter_ns with a fixed thread count and the same warm-up/repeat discipline. Out of memory is a
result (status "oom"), not a crash.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import re
import resource
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rooflow.arguments import batch_size, non_negative_int, thread_count
from rooflow.conventions import MODES, NOISY_SPREAD, PRECISIONS, VARIANTS
from rooflow.errors import RooflowError, first_line
from rooflow.hardware.environment import GpuMonitor, describe, gpu_state
from rooflow.measure.faults import minor_faults, page_bytes
from rooflow.measure.load import LoadSampler, other_cores, own_cores
from rooflow.measure.oom import cpu_memory_limit, is_out_of_memory, oom_details
from rooflow.workload.step import ONE_VALUE_PER_CHANNEL, backward_failure, rejected_run_message

log = logging.getLogger(__name__)


@dataclass
class RunSpec:
    model: str
    batch: int
    precision: str = "fp32"
    mode: str = "inference"
    device: str = "cpu"  # "cpu" or "cuda"
    warmup_iterations: int = 10
    timed_iterations: int = 30
    threads: int | None = None
    # a round of timed_iterations noisier than NOISY_SPREAD is repeated, up to this many rounds in all,
    # while the rounds so far plus one more fit in noise_budget_seconds (config: profiling.*)
    max_timing_rounds: int = 3
    noise_budget_seconds: float = 60.0
    # CPU runs: RLIMIT_AS = the address space mapped before the run + this; None = no limit
    cpu_memory_limit_bytes: int | None = None
    # a custom model (rooflow.workload.spec): `model` is its run name, built by this factory on these inputs
    factory: str | None = None
    inputs: tuple[tuple[int, ...], ...] = ()
    loss: str | None = None
    input_dtypes: tuple[str, ...] = ()  # per input (rooflow.workload.spec.INPUT_DTYPES); (): all float32
    # rooflow.conventions.VARIANTS: eager; channels_last (model and 4-D inputs NHWC); compile (torch.compile,
    # inductor: its first step, the compilation, is recorded apart as compile_seconds)
    variant: str = "eager"

    def model_spec(self):
        from rooflow.workload.spec import ModelSpec

        return ModelSpec(self.model, self.factory, tuple(self.inputs), self.loss, tuple(self.input_dtypes))


# A timing whose interquartile range exceeds this share of its median is noisy: it is repeated (up to
# RunSpec.max_timing_rounds) and flagged in the report if still noisy.


def configure_precision(precision: str, device_type: str) -> contextlib.AbstractContextManager:
    """Set TF32 flags and return the autocast context a run executes under.

    fp32 turns TF32 off explicitly (PyTorch's cuDNN default is TF32 ON for convolutions, which is why
    hand-made "FP32" A100 tables are wrong); tf32 turns it on for matmul and cuDNN; fp16/bf16 use autocast.
    """
    import torch

    if precision not in PRECISIONS:
        raise RooflowError(f"precision '{precision}' is unknown: use one of {', '.join(PRECISIONS)}")
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    if precision in ("fp16", "bf16"):
        dtype = torch.float16 if precision == "fp16" else torch.bfloat16
        return torch.autocast(device_type=device_type, dtype=dtype)
    return contextlib.nullcontext()


def timed_rounds(runner: Any, spec: RunSpec, monitor: GpuMonitor | None = None,
                 clock_class: type | None = None) -> tuple[list[list[float]], dict[str, Any]]:
    """Time rounds of `spec.timed_iterations` iterations: a round whose spread exceeds NOISY_SPREAD is
    repeated while rounds are left (`spec.max_timing_rounds`) and the rounds so far plus one more fit in
    `spec.noise_budget_seconds` of timed iterations. Returns the per-iteration phase intervals of the
    quietest round and {timing_rounds, rounds (median, spread, seconds of each), chosen_round, noisy,
    minor_faults (the quietest round's, per iteration: rooflow.measure.faults), median_minor_faults,
    load_during_timing (every round's: rooflow.measure.load; None without /proc/stat)}.
    `monitor` is sampled after every iteration (outside the timed interval); `clock_class` replaces the
    clock in tests."""
    clock_class = clock_class or _Clock
    rounds: list[dict[str, Any]] = []
    best: tuple[float, int, list[list[float]]] | None = None
    max_rounds = max(1, spec.max_timing_rounds)
    load = LoadSampler()  # the machine's other load beside each iteration, for the noisy check's cause
    for number in range(1, max_rounds + 1):
        phases: list[list[float]] = []
        faults: list[int] = []  # minor page faults of each iteration (rooflow.measure.faults)
        for i in range(spec.timed_iterations):
            clock = clock_class(runner.cuda)
            load.start()  # outside the faults' window: reading /proc/stat allocates, and its faults are not the step's
            before = minor_faults()
            runner.step(clock)
            intervals = clock.intervals_seconds()
            faults.append(minor_faults() - before)
            load.stop(sum(intervals), faults[-1])
            phases.append(intervals)
            if monitor is not None:
                monitor.sample()
            if (i + 1) % max(1, spec.timed_iterations // 10) == 0 or i == 0:
                log.info("round %d, iteration %d/%d: %.4f s", number, i + 1, spec.timed_iterations, sum(intervals))
        seconds = [sum(p) for p in phases]
        stats = summarize_seconds(seconds)
        rounds.append({"round": number, "iterations": len(seconds), "median_seconds": stats["median_seconds"],
                       "spread": stats["spread"], "seconds_total": sum(seconds)})
        if best is None or stats["spread"] < best[0]:
            best = (stats["spread"], number, phases, faults)
        if stats["spread"] <= NOISY_SPREAD or number == max_rounds:
            break
        spent = sum(r["seconds_total"] for r in rounds)
        if spent + rounds[-1]["seconds_total"] > spec.noise_budget_seconds:
            log.info("round %d: spread %.1f%%, but another round would pass the %g s noise budget",
                     number, 100 * stats["spread"], spec.noise_budget_seconds)
            break
        log.info("round %d: spread %.1f%% over %.0f%%: timing another round", number, 100 * stats["spread"],
                 100 * NOISY_SPREAD)
    spread, chosen, phases, faults = best
    return phases, {"timing_rounds": len(rounds), "rounds": rounds, "chosen_round": chosen,
                    "noisy": spread > NOISY_SPREAD, "minor_faults": faults,
                    "median_minor_faults": statistics.median(faults), "load_during_timing": load.summary()}


class _Clock:
    """Marks phase boundaries of one iteration: CUDA events on GPU, perf_counter_ns on CPU."""

    def __init__(self, cuda: bool):
        self.cuda = cuda
        self.marks: list[Any] = []

    def mark(self) -> None:
        if self.cuda:
            import torch

            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter_ns())

    def intervals_seconds(self) -> list[float]:
        if self.cuda:
            import torch

            torch.cuda.synchronize()
            return [a.elapsed_time(b) / 1e3 for a, b in zip(self.marks, self.marks[1:])]
        return [(b - a) / 1e9 for a, b in zip(self.marks, self.marks[1:])]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low, high = int(position), min(int(position) + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summarize_seconds(values: list[float], prefix: str = "") -> dict[str, float]:
    """Median and spread of per-iteration seconds; `spread` is the interquartile range over the median."""
    if not values:
        return {}
    median = statistics.median(values)
    q1, q3 = _percentile(values, 0.25), _percentile(values, 0.75)
    return {
        f"{prefix}median_seconds": median,
        f"{prefix}mean_seconds": statistics.fmean(values),
        f"{prefix}min_seconds": min(values),
        f"{prefix}max_seconds": max(values),
        f"{prefix}stdev_seconds": statistics.stdev(values) if len(values) > 1 else 0.0,
        f"{prefix}iqr_seconds": q3 - q1,
        f"{prefix}spread": (q3 - q1) / median if median > 0 else 0.0,
    }


class Runner:
    """Holds the model, optimizer and batch for one run; `step(clock)` runs one iteration."""

    def __init__(self, spec: RunSpec, subset: dict):
        import torch

        from rooflow.workload import step
        from rooflow.workload.dataset import make_batch
        from rooflow.workload.models import build_model, input_shapes, input_size, output_classes, task
        from rooflow.workload.spec import (
            build_custom,
            example_inputs,
            load_loss,
            random_inputs,
            refuse_cast_parameters,
            refuse_untrainable,
        )

        if spec.mode not in MODES:
            raise RooflowError(f"mode '{spec.mode}' is unknown: use one of {', '.join(MODES)}")
        if not re.fullmatch(r"cpu|cuda(:\d+)?", spec.device):
            raise RooflowError(
                f"device '{spec.device}' is not one a step can be timed on: use cpu or cuda[:N] (a catalogue key "
                f"such as a100-sxm4-40gb names a device for `rooflow estimate` and the workflow's devices:, and a "
                f"job timed on cuda is matched to it there)")
        self.spec = spec
        self.cuda = spec.device.startswith("cuda")
        if self.cuda and not torch.cuda.is_available():
            raise RooflowError(
                f"device '{spec.device}' asked for but torch sees no CUDA GPU: run this job on a GPU node "
                f"(the device's slurm partition/gres in config/devices.yaml) with a CUDA build of torch")
        self.device = torch.device(spec.device)
        if self.cuda:
            # cuDNN's heuristics, not its autotuner: the timing job and the ncu job are separate processes, and
            # benchmark=True times candidate algorithms in each process and keeps the fastest, so two processes
            # can run different kernels for the same layer (two ncu runs of one ResNet-50 step on an H100
            # counted 639 and 556 GFLOP of tensor work) and a roofline point would divide one process's FLOPs by
            # another's time. With benchmark=False cuDNN picks an algorithm deterministically from the shapes,
            # dtypes and GPU ("Reproducibility", https://pytorch.org/docs/stable/notes/randomness.html), so both
            # processes run the same kernels; it is PyTorch's default, so the timing is what users get unless
            # they opt into autotuning, which may find faster kernels for some layers. deterministic=True is not
            # needed for that and would exclude fast non-deterministic algorithms. The timing job records its
            # kernels (rooflow.measure.timeline) and the summary flags any difference from the profiled ones.
            torch.backends.cudnn.benchmark = False
        self.autocast = configure_precision(spec.precision, self.device.type)
        model_spec = spec.model_spec()
        user_loss = None
        if model_spec.custom:
            self.model = build_custom(model_spec)
            refuse_cast_parameters(self.model, model_spec.name)
            self.model = self.model.to(self.device)
            self.inputs = example_inputs(model_spec, spec.batch, self.device, self.model)
            self.input_size = model_spec.inputs[0][-1]
            target, classification = None, False
            user_loss = load_loss(model_spec)
            self._check_inputs(model_spec)
        else:
            kind = task(spec.model)
            if kind == "detection" and spec.mode == "training":
                raise RooflowError(f"{spec.model} is a detection model, which trains on box targets that rooflow "
                                   f"does not generate: measure it in mode inference")
            self.input_size = input_size(spec.model)
            self.model = build_model(spec.model).to(self.device)
            x, y = make_batch(subset, spec.batch, self.input_size)
            self.inputs = (x.to(self.device),)
            if kind in ("video", "optical_flow"):  # clips, pairs of frames: N(0, 1) of the model's shapes
                self.inputs = random_inputs(input_shapes(spec.model), spec.batch, self.device)
            target, classification = y.to(self.device), kind in ("classification", "video")
            classes = output_classes(spec.model) if spec.mode == "training" else None
            if classes and len(y) and int(y.max()) >= classes:  # an IndexError deep in cross-entropy's backward
                raise RooflowError(f"the subset's labels reach {int(y.max())}, and {spec.model} outputs {classes} "
                                   f"classes (its cross-entropy needs labels below {classes}): build the subset from "
                                   f"at most {classes} classes (dataset.classes), or time the run in mode inference")
        self.params = sum(p.numel() for p in self.model.parameters())
        if spec.mode == "training":
            # the step of rooflow.workload.step: its loss, SGD with momentum, GradScaler for fp16
            refuse_untrainable(self.model, spec.model, self.inputs)
            self.model.train()
            self.loss_fn = step.make_loss(spec.model, target, user_loss, classification)
            self.optimizer = step.make_optimizer(self.model.parameters())
            self.scaler = step.make_scaler(self.device.type, spec.precision, spec.mode)
        else:
            self.model.eval()
        self._apply_variant(spec.variant)

    def _apply_variant(self, variant: str) -> None:
        """Run the step as ``variant`` asks (RunSpec.variant); the optimizer is rebuilt on the parameters
        the step then updates."""
        import torch

        from rooflow.workload import step

        if variant not in VARIANTS:
            raise RooflowError(f"variant '{variant}' is unknown: use one of {', '.join(VARIANTS)}")
        if variant == "channels_last":
            # a video model's 5-D convolutions take its 3-D form, NDHWC (torch.channels_last refuses their 5-D
            # weights: a traceback in every such timing job)
            ranks = {p.dim() for p in self.model.parameters()} & {4, 5}
            if ranks == {4, 5}:
                raise RooflowError(f"--variant channels_last: model '{self.spec.model}' holds both 4-D and 5-D "
                                   f"weights (2-D and 3-D convolutions), and one memory format cannot hold both: "
                                   f"time it eager or compile, or drop channels_last from the config's variants")
            rank = 5 if ranks == {5} else 4
            layout = torch.channels_last_3d if rank == 5 else torch.channels_last
            self.model = self.model.to(memory_format=layout)
            self.inputs = tuple(x.contiguous(memory_format=layout) if x.dim() == rank else x for x in self.inputs)
        elif variant == "compile":
            self.model = torch.compile(self.model)
        if variant != "eager" and self.spec.mode == "training":
            self.optimizer = step.make_optimizer(self.model.parameters())

    def _check_inputs(self, model_spec) -> None:
        """One forward of a custom model on its inputs: a wrong input shape is one sentence, not a traceback
        in the middle of the warm-up."""
        import torch

        from rooflow.workload.spec import shape_error

        try:
            with torch.no_grad():
                self.model.eval()(*self.inputs)
        except (RuntimeError, ValueError, TypeError, IndexError) as error:
            if is_out_of_memory(error):
                raise
            raise shape_error(model_spec, self.spec.batch, error) from error

    def step(self, clock: _Clock | None = None) -> None:
        import torch

        mark = clock.mark if clock else (lambda: None)
        if self.spec.mode == "inference":
            mark()
            with torch.no_grad(), self.autocast:
                self.model(*self.inputs)
            mark()
            return
        mark()
        with self.autocast:
            loss = self.loss_fn(self.model(*self.inputs))
        mark()
        self.optimizer.zero_grad(set_to_none=True)
        try:
            self.scaler.scale(loss).backward()
        except RuntimeError as error:  # PyTorch refuses this model's backward (out of memory: the OOM record's)
            if is_out_of_memory(error):
                raise
            raise backward_failure(error, self.spec.model) from error
        mark()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        mark()

    def synchronize(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize()


def _set_threads(threads: int | None) -> int:
    import torch

    if threads:
        torch.set_num_threads(threads)
        with contextlib.suppress(RuntimeError):  # only settable before the first parallel region
            torch.set_num_interop_threads(1)
    return torch.get_num_threads()


def compile_error(error: Exception) -> RooflowError:
    """The sentence for a step torch.compile could not compile (its first line names PyTorch's cause): a machine
    without a working C++ compiler (inductor's InvalidCxxCompiler: a slim image, a compute node without build
    tools) ended every compile run's timing job in a 40-line traceback."""
    cause = next((line.strip() for line in str(error).splitlines() if line.strip()), error.__class__.__name__)
    fix = ("install a C++ compiler (g++) where the job runs, or point CXX at one, or drop compile from the config's "
           "variants" if "InvalidCxxCompiler" in cause else
           "time the model eager (or channels_last), or drop compile from the config's variants")
    return RooflowError(f"--variant compile: torch.compile could not compile the step ({cause}): {fix}")


def measure(spec: RunSpec, subset: dict, timeline_path: str | Path | None = None) -> dict[str, Any]:
    """Warm up, time `timed_iterations` iterations, and return the timing record (status ok or oom).

    Iterations are timed in rounds, repeated while noisy (timed_rounds); an oom record says how much
    memory was asked for and how much was available (oom_details), and a CPU run may be held to
    `spec.cpu_memory_limit_bytes` (cpu_memory_limit). On a GPU, NVML is sampled during the timed
    iterations: `gpu_during_timing`, and `throttled` when the GPU slowed itself down (power, temperature);
    the warm-up's memory peak (cuDNN autotuning) is reported apart from the steady state's.

    With ``timeline_path``, on a GPU, one more iteration after the timed ones runs under torch.profiler and
    its kernels are written there as CSV (rooflow.measure.timeline); the record says what it cost. On a CPU the file
    is written empty: torch.profiler records ops there, not kernels."""
    import torch

    threads = _set_threads(spec.threads)
    record: dict[str, Any] = {
        "status": "ok", "model": spec.model, "batch": spec.batch, "precision": spec.precision,
        "mode": spec.mode, "device_type": "cuda" if spec.device.startswith("cuda") else "cpu",
        "threads": threads, "warmup_iterations": spec.warmup_iterations,
        "timed_iterations": spec.timed_iterations, "max_timing_rounds": spec.max_timing_rounds,
        "variant": spec.variant,
    }
    record["environment"] = describe(threads)
    runner = None
    # the CPU memory limit and the NVML session end with the try block, before anything else runs
    limits = contextlib.ExitStack()
    cpu_limit = None if spec.device.startswith("cuda") else spec.cpu_memory_limit_bytes
    cap = limits.enter_context(cpu_memory_limit(cpu_limit))
    monitor = None
    try:
        runner = Runner(spec, subset)
        record.update(input_size=runner.input_size, params=runner.params,
                      timer="cuda-events" if runner.cuda else "perf_counter_ns")
        if runner.cuda:
            torch.cuda.reset_peak_memory_stats()
        if spec.variant == "compile":
            # torch.compile compiles on the first call (forward and, in training, backward graphs): that step
            # is the compile time, kept apart from the warm-up and the timed steps that follow it
            started = time.perf_counter()
            try:
                runner.step()
                runner.synchronize()
            except torch._dynamo.exc.TorchDynamoException as error:
                if is_out_of_memory(error):
                    raise
                raise compile_error(error) from None
            record["compile_seconds"] = time.perf_counter() - started
        started = time.perf_counter()
        for i in range(spec.warmup_iterations):
            runner.step()
            log.info("warm-up %d/%d", i + 1, spec.warmup_iterations)
        runner.synchronize()
        record["warmup_seconds_total"] = time.perf_counter() - started
        if runner.cuda:
            # Warm-up includes cuDNN autotuning, which tries algorithms with large workspaces: its peak is
            # reported apart from the steady state of the timed iterations (what a run needs to fit).
            record["warmup_peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
            record["warmup_peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
            torch.cuda.reset_peak_memory_stats()
        monitor = limits.enter_context(GpuMonitor(uuid=_nvml_uuid())) if runner.cuda else None
        phases, rounds = timed_rounds(runner, spec, monitor)
        record.update(rounds)
    except Exception as error:  # noqa: BLE001 - OOM is a result; anything else propagates
        # the model's own refusal of the run, in one sentence (any other ValueError is a bug: its traceback stands)
        if isinstance(error, ValueError) and ONE_VALUE_PER_CHANNEL in str(error) and runner is not None:
            raise RooflowError(rejected_run_message(spec.model, spec.mode, spec.batch, runner.input_size,
                                                    error)) from None
        if not is_out_of_memory(error):
            raise
        # a result, not a failure: the caller says it (the workflow's log, `rooflow time`'s one sentence)
        record.update(status="oom", **oom_details(error, spec.device.startswith("cuda"), cap, cpu_limit))
        del runner
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        if timeline_path:
            _write_timeline(timeline_path, None, record, "skipped: the run is out of memory")
        return record
    finally:
        limits.close()
        if monitor is not None:
            record["gpu_during_timing"] = monitor.summary()
            record["throttled"] = record["gpu_during_timing"].get("throttled")
    # pages the step maps afresh every iteration: the allocator's work, not the ops' (rooflow.measure.faults)
    record["page_bytes"] = page_bytes()
    if record.get("median_minor_faults"):
        log.info("%g minor page faults per timed iteration: %.3g MB mapped afresh", record["median_minor_faults"],
                 record["median_minor_faults"] * record["page_bytes"] / 1e6)
    if record.get("load_during_timing"):
        load = record["load_during_timing"]
        log.info("other processes beside the timed iterations: %.2f of %d cores (slowest quarter %.2f, fastest %.2f); "
                 "this job's threads busy on %.2f cores (slowest quarter %.2f, fastest %.2f)",
                 other_cores(load), load["cores"], other_cores(load["slowest"]), other_cores(load["fastest"]),
                 own_cores(load), own_cores(load["slowest"]), own_cores(load["fastest"]))
    seconds = [sum(p) for p in phases]
    record["seconds"] = seconds
    record.update(summarize_seconds(seconds))
    if spec.mode == "training":
        record["forward_seconds"] = [p[0] for p in phases]
        record["backward_seconds"] = [p[1] for p in phases]
        record["optimizer_seconds"] = [p[2] for p in phases]
        record.update(summarize_seconds(record["forward_seconds"], "forward_"))
        record.update(summarize_seconds(record["backward_seconds"], "backward_"))
        record.update(summarize_seconds(record["optimizer_seconds"], "optimizer_"))
    else:
        record["forward_seconds"] = seconds
        record.update(summarize_seconds(seconds, "forward_"))
    record["images_per_second"] = spec.batch / record["median_seconds"]
    if runner.cuda:
        record["steady_peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
        record["steady_peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
        record["max_memory_allocated_bytes"] = max(record["steady_peak_allocated_bytes"],
                                                   record.get("warmup_peak_allocated_bytes", 0))
        record["environment_after"] = gpu_state(torch.cuda.current_device())
    else:
        # ru_maxrss is in KiB on Linux: the process's peak, model and batch included.
        record["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if timeline_path:
        _record_timeline(runner, timeline_path, record)
    return record


def _nvml_uuid() -> str | None:
    """NVML's name ("GPU-<uuid>") of the GPU torch runs on: NVML's indices ignore CUDA_VISIBLE_DEVICES."""
    import torch

    uuid = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "uuid", None)
    return f"GPU-{uuid}" if uuid else None


def _record_timeline(runner: Runner, path: str | Path, record: dict[str, Any]) -> None:
    """One more iteration under torch.profiler, in this process, after the timed ones: its kernels
    (rooflow.measure.timeline; a GPU) and the measured time of its ops by layer (rooflow.measure.optime; every
    device), in ``record["op_times"]``."""
    from rooflow.measure.optime import compact
    from rooflow.measure.timeline import capture_iteration

    try:
        timeline, seconds, ops, faults_by_layer = capture_iteration(runner)
    except Exception as error:  # noqa: BLE001 - a diagnostic: the timing stands without it
        log.warning("profiled iteration not recorded: %s", error)
        _write_timeline(path, None, record, f"failed: {first_line(error) or repr(error)}")
        return
    record["op_times"] = compact(ops)
    # each leaf layer's forward faults in that iteration (rooflow.measure.faults): where the allocator's time went
    record["forward_faults_by_layer"] = {layer: count for layer, count in faults_by_layer.items() if count > 0}
    record["op_times_source"] = "torch.profiler: " + ("GPU time of the kernels each op launched" if runner.cuda
                                                      else "CPU time of each op")
    record["timeline_capture_seconds"] = seconds
    if not runner.cuda:
        _write_timeline(path, None, record, "skipped: a CPU run has no kernel timeline (torch.profiler records "
                                            "ops on a CPU, not kernels: their times are in op_times)")
        log.info("op times: %d ops, %.4f s, recorded in %.2f s (one extra iteration under torch.profiler)",
                 len(ops), float(ops["seconds"].sum()), seconds)
        return
    record["timeline_kernel_seconds"] = float(timeline.loc[timeline["kind"] == "kernel", "seconds"].sum())
    _write_timeline(path, timeline, record, "recorded")
    log.info("kernel timeline: %d kernels, %.4f s of kernel time, recorded in %.2f s (one extra iteration under "
             "torch.profiler, export and parsing)", record["timeline_kernels"], record["timeline_kernel_seconds"],
             seconds)


def _write_timeline(path: str | Path, timeline, record: dict[str, Any], status: str) -> None:
    import pandas as pd

    from rooflow.io import write_csv
    from rooflow.measure.timeline import TIMELINE_COLUMNS

    frame = timeline if timeline is not None else pd.DataFrame(columns=TIMELINE_COLUMNS)
    write_csv(path, frame)
    record["timeline_status"] = status
    record["timeline_kernels"] = int((frame["kind"] == "kernel").sum()) if len(frame) else 0


def model_fields(args: argparse.Namespace) -> dict[str, Any]:
    """RunSpec's model fields from --model (a torchvision name or package.module:factory), --input, --loss,
    --name."""
    from rooflow.workload.spec import refuse_factory_options, spec_from_options

    given = [model for model in (args.model, getattr(args, "model_positional", None)) if model]
    if len(set(given)) != 1:
        raise RooflowError("give one model, e.g. `rooflow time resnet50 --batch 8` (or --model resnet50)"
                           if not given else f"two models given ({given[0]} and {given[1]}): give one")
    args.model = given[0]
    refuse_factory_options([args.model], args.input, args.loss, args.name,
                           "the subset's image size: `rooflow subset --image-size`", args.mode)
    model = spec_from_options(args.model, args.input, args.loss, args.name, "--model")
    return {"model": model.name, "factory": model.factory, "inputs": model.inputs, "loss": model.loss,
            "input_dtypes": model.input_dtypes}


def add_run_arguments(parser: argparse.ArgumentParser, device: str, device_help: str) -> None:
    """The arguments of one run (RunSpec) that `rooflow time` and the profiling driver share."""
    parser.add_argument("model_positional", nargs="?", metavar="MODEL",
                        help="a torchvision model name, or package.module:factory (with --input)")
    parser.add_argument("--model", help="the MODEL given as an option")
    parser.add_argument("--input", action="append", metavar="SHAPE",
                        help="a factory model's input shape without the batch (e.g. 3x224x224), its dtype after a "
                             "colon where it is not float32 (35:int64: token ids); one per input")
    parser.add_argument("--loss", metavar="package.module:callable", help="a factory model's training loss")
    parser.add_argument("--name", help="a factory model's run name (default: derived from its path)")
    parser.add_argument("--batch", type=batch_size, required=True,
                        help="batch size: images (or samples) per step, 1 to 16,777,216")
    parser.add_argument("--precision", choices=PRECISIONS, default="fp32",
                        help="fp32; tf32 (fp32 tensors, TF32 matmuls); fp16/bf16 (torch.autocast) "
                             "(default: %(default)s)")
    parser.add_argument("--mode", choices=MODES, default="inference",
                        help="inference (eval, no_grad) or training (forward, loss, backward, SGD step) "
                             "(default: %(default)s)")
    parser.add_argument("--device", default=device, help=device_help)
    parser.add_argument("--warmup", type=non_negative_int, default=10, help="untimed iterations first (default: %(default)s)")
    parser.add_argument("--threads", type=thread_count, default=None, help="CPU threads (default: torch's)")
    parser.add_argument("--variant", choices=VARIANTS, default="eager",
                        help="how the step runs: eager, channels_last (NHWC), compile (torch.compile; profiled "
                             "whole by ncu/nsys) (default: %(default)s)")
