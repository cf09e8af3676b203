import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rooflow.conventions import NOISY_SPREAD
from rooflow.errors import RooflowError
from rooflow.measure import timing
from rooflow.measure.oom import is_out_of_memory, oom_details
from rooflow.measure.timing import Runner, RunSpec, measure, summarize_seconds
from rooflow.workload.dataset import SubsetSpec, build_subset, load_subset

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def subset(tmp_path_factory):
    folder = tmp_path_factory.mktemp("subset")
    build_subset(SubsetSpec(None, 2, 2, 64, 56, 0), folder / "s.pt", folder / "m.csv")
    return load_subset(folder / "s.pt")


def test_summarize_seconds_closed_form():
    stats = summarize_seconds([1.0, 2.0, 3.0, 4.0, 5.0])
    assert stats["median_seconds"] == 3.0
    assert stats["min_seconds"] == 1.0 and stats["max_seconds"] == 5.0
    assert stats["iqr_seconds"] == pytest.approx(2.0)  # q3 4 - q1 2
    assert stats["spread"] == pytest.approx(2.0 / 3.0)
    assert summarize_seconds([0.5], "forward_")["forward_median_seconds"] == 0.5


def test_cpu_training_measurement_records_phases_and_environment(subset):
    record = measure(RunSpec("squeezenet1_0", 2, "fp32", "training", "cpu", 1, 3, 1), subset)
    assert record["status"] == "ok" and record["timer"] == "perf_counter_ns"
    assert len(record["seconds"]) == 3 and all(s > 0 for s in record["seconds"])
    # the iteration is the sum of its phases
    for total, f, b, o in zip(record["seconds"], record["forward_seconds"], record["backward_seconds"],
                              record["optimizer_seconds"]):
        assert total == pytest.approx(f + b + o)
    assert record["threads"] == 1
    load = record["load_during_timing"]
    if load is not None:  # Linux: the job's own CPU time beside its iterations, one thread's worth at most
        assert 0 < load["own_cpu_seconds"] <= 1.2 * load["wall_seconds"] + 0.05
    assert record["images_per_second"] == pytest.approx(2 / record["median_seconds"])
    assert record["environment"]["torch"] == torch.__version__
    assert record["params"] == 1_248_424  # squeezenet1_0, 1000 classes


def test_inference_runs_without_grad(subset):
    record = measure(RunSpec("squeezenet1_0", 1, "fp32", "inference", "cpu", 0, 2, 1), subset)
    assert record["status"] == "ok" and "backward_seconds" not in record
    assert record["forward_seconds"] == record["seconds"]


def test_out_of_memory_becomes_a_result_row(subset, monkeypatch):
    def explode(self, clock=None):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 3.06 GiB")

    monkeypatch.setattr(timing.Runner, "step", explode)
    record = measure(RunSpec("squeezenet1_0", 1, "fp32", "training", "cpu", 1, 2, 1), subset)
    assert record["status"] == "oom"
    assert "Tried to allocate" in record["message"]
    assert "seconds" not in record


def test_other_errors_are_not_swallowed(subset, monkeypatch):
    def explode(self, clock=None):
        raise ValueError("a bug")

    monkeypatch.setattr(timing.Runner, "step", explode)
    with pytest.raises(ValueError):
        measure(RunSpec("squeezenet1_0", 1, "fp32", "training", "cpu", 1, 2, 1), subset)


def test_is_out_of_memory_recognises_cpu_and_cuda_messages():
    assert is_out_of_memory(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate"))
    assert is_out_of_memory(torch.OutOfMemoryError("CUDA out of memory"))
    assert not is_out_of_memory(RuntimeError("shape mismatch"))


def test_cuda_run_without_gpu_says_what_to_do(subset):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: this checks the message on machines without one")
    with pytest.raises(RooflowError, match="no CUDA GPU"):
        measure(RunSpec("squeezenet1_0", 1, "fp32", "inference", "cuda", 0, 1, 1), subset)


def test_fp32_turns_tf32_off_and_tf32_turns_it_on():
    timing.configure_precision("tf32", "cuda")
    assert torch.backends.cudnn.allow_tf32 and torch.backends.cuda.matmul.allow_tf32
    timing.configure_precision("fp32", "cuda")
    assert not torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32


# ---- noisy timings are repeated (issue 14) ----

class ScriptedClock:
    """Stand-in for timing._Clock: each iteration's phases take the next scripted number of seconds (one
    phase per mark pair), so the rounds' spreads are known exactly."""

    script: list[float] = []

    def __init__(self, cuda):
        self.marks = 0

    def mark(self):
        self.marks += 1

    def intervals_seconds(self):
        return [ScriptedClock.script.pop(0)] + [0.0] * (self.marks - 2)


class StandInRunner:
    cuda = False

    def step(self, clock=None):
        clock.mark()
        clock.mark()


QUIET = [1.0] * 8  # spread 0
NOISY = [1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0]  # q1 1, q3 2, median 1.5: spread 2/3


def rounds_of(script, max_rounds=3, budget=1000.0):
    ScriptedClock.script = list(script)
    spec = RunSpec("squeezenet1_0", 1, timed_iterations=8, max_timing_rounds=max_rounds, noise_budget_seconds=budget)
    phases, info = timing.timed_rounds(StandInRunner(), spec, clock_class=ScriptedClock)
    assert not ScriptedClock.script or max_rounds == 1 or info["timing_rounds"] < max_rounds
    return [sum(p) for p in phases], info


def test_a_quiet_first_round_is_not_repeated():
    seconds, info = rounds_of(QUIET + NOISY)
    assert seconds == QUIET and info["timing_rounds"] == 1 and not info["noisy"]
    assert info["rounds"] == [{"round": 1, "iterations": 8, "median_seconds": 1.0, "spread": 0.0, "seconds_total": 8.0}]


def test_a_noisy_round_is_repeated_and_the_quietest_round_is_reported():
    seconds, info = rounds_of(NOISY + QUIET + NOISY)
    assert info["timing_rounds"] == 2 and info["chosen_round"] == 2 and not info["noisy"]
    assert seconds == QUIET
    assert [r["spread"] for r in info["rounds"]] == [pytest.approx(2 / 3), 0.0]


def test_still_noisy_after_every_round_is_flagged_with_the_rounds():
    slightly = [1.0] * 6 + [1.3, 1.3]  # q3 = 1.075: spread 7.5%, quieter than NOISY
    seconds, info = rounds_of(NOISY + slightly + NOISY, max_rounds=3)
    assert info["timing_rounds"] == 3 and info["noisy"] and info["chosen_round"] == 2
    assert seconds == slightly
    assert [r["round"] for r in info["rounds"]] == [1, 2, 3]
    # the machine's load is sampled beside every iteration of every round, its quarters ranked by timed seconds
    # (rooflow.measure.load; none without /proc/stat)
    load = info["load_during_timing"]
    if load is not None:
        assert load["iterations"] == 24 and load["slowest"]["iterations"] == load["fastest"]["iterations"] == 6
        assert load["slowest"]["timed_seconds"] == pytest.approx(12.0) and load["fastest"]["timed_seconds"] == 6.0


def test_the_noise_budget_stops_repeating():
    # each round takes 12 s of timed iterations: a second round fits in 25 s, a third would not
    seconds, info = rounds_of(NOISY + NOISY + QUIET, max_rounds=5, budget=25.0)
    assert info["timing_rounds"] == 2 and info["noisy"]
    seconds, info = rounds_of(NOISY + QUIET, max_rounds=5, budget=11.0)
    assert info["timing_rounds"] == 1 and info["noisy"]


def test_one_round_never_repeats():
    _, info = rounds_of(NOISY, max_rounds=1)
    assert info["timing_rounds"] == 1 and info["noisy"]


def test_a_real_measurement_records_its_rounds(subset):
    record = measure(RunSpec("squeezenet1_0", 1, "fp32", "inference", "cpu", 1, 4, 1, max_timing_rounds=2), subset)
    assert 1 <= record["timing_rounds"] <= 2 and len(record["rounds"]) == record["timing_rounds"]
    chosen = record["rounds"][record["chosen_round"] - 1]
    assert record["median_seconds"] == chosen["median_seconds"] and len(record["seconds"]) == 4
    assert record["noisy"] == (chosen["spread"] > NOISY_SPREAD)


# ---- out of memory: a REAL allocation failure on the CPU, as a result with the numbers ----

def test_a_real_cpu_allocation_failure_is_an_oom_row_with_asked_and_available(subset):
    """resnet18 training at batch 64 (224x224 input: ~39 MB of input alone, ~1.5 GB of activations) under a
    200 MB address-space limit: the model is built, the forward pass fails to allocate. The limit is lifted
    again afterwards (this test process goes on)."""
    import resource

    before = resource.getrlimit(resource.RLIMIT_AS)
    limit = 200 * 2**20
    record = measure(RunSpec("resnet18", 64, "fp32", "training", "cpu", 1, 2, 1, cpu_memory_limit_bytes=limit),
                     subset)
    assert resource.getrlimit(resource.RLIMIT_AS) == before
    assert record["status"] == "oom", record.get("message")
    assert record["memory_limit_bytes"] == limit
    assert 0 < record["memory_requested_bytes"] and 0 <= record["memory_available_bytes"] < limit
    # the allocation that failed did not fit in what was left
    assert record["memory_requested_bytes"] > record["memory_available_bytes"]
    assert record["message"].startswith("out of memory: asked for ") and "cpu_memory_limit_bytes" in record["message"]
    assert "seconds" not in record and "\n" not in record["message"]
    # and the process is fine: the same run without the limit works
    ok = measure(RunSpec("resnet18", 1, "fp32", "inference", "cpu", 0, 1, 1), subset)
    assert ok["status"] == "ok"


def test_cuda_oom_message_gives_asked_and_available_without_a_gpu():
    """torch's CUDA allocator message (as printed on a T4); torch.cuda.mem_get_info cannot run without a GPU,
    so the numbers come from the message."""
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: mem_get_info would answer instead of the message")
    error = torch.OutOfMemoryError(
        "CUDA out of memory. Tried to allocate 3.06 GiB. GPU 0 has a total capacity of 14.75 GiB of which "
        "1.20 GiB is free. Including non-PyTorch memory, this process has 13.54 GiB memory in use.")
    details = oom_details(error, cuda=True)
    assert details["memory_requested_bytes"] == int(3.06 * 2**30)
    assert details["memory_available_bytes"] == int(1.20 * 2**30)
    assert details["memory_limit_bytes"] == int(14.75 * 2**30)
    assert details["memory_in_use_bytes"] == int(13.54 * 2**30)
    assert details["message"].startswith("out of memory: asked for 3.06 GiB with 1.20 GiB free on the GPU of 14.75 GiB")


def test_cpu_allocator_message_in_bytes():
    error = RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: "
                         "you tried to allocate 205520896 bytes. Error code 12 (Cannot allocate memory)")
    assert is_out_of_memory(error)
    details = oom_details(error, cuda=False)
    assert details["memory_requested_bytes"] == 205520896
    assert details["memory_available_bytes"] > 0  # MemAvailable of this machine
    assert "asked for 196.00 MiB" in details["message"]


# ---- throttling seen during the timed iterations ----

class StandInNVML:
    """STAND-IN for pynvml (no GPU here): the functions GpuMonitor calls, answering from a script of samples
    (clocks-event reason mask, SM clock MHz, temperature °C, power mW)."""

    NVML_CLOCK_SM = 0
    NVML_TEMPERATURE_GPU = 0

    def __init__(self, samples):
        self.samples = list(samples)
        self.current = None
        self.calls = []

    def nvmlInit(self):
        self.calls.append("init")

    def nvmlShutdown(self):
        self.calls.append("shutdown")

    def nvmlDeviceGetHandleByUUID(self, uuid):
        self.calls.append(uuid)
        return "handle"

    def nvmlDeviceGetHandleByIndex(self, index):
        self.calls.append(index)
        return "handle"

    def nvmlDeviceGetMaxClockInfo(self, handle, kind):
        return 1980

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return 700_000

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        self.current = self.samples.pop(0)
        return self.current[0]

    def nvmlDeviceGetClockInfo(self, handle, kind):
        return self.current[1]

    def nvmlDeviceGetTemperature(self, handle, kind):
        return self.current[2]

    def nvmlDeviceGetPowerUsage(self, handle):
        return self.current[3]


def monitor_over(samples, **kwargs):
    from rooflow.hardware.environment import GpuMonitor

    nvml = StandInNVML(samples)
    with GpuMonitor(uuid="GPU-1234", nvml=nvml, min_interval_seconds=0, **kwargs) as monitor:
        for _ in samples:
            monitor.sample()
    assert nvml.calls[0] == "init" and nvml.calls[1] == "GPU-1234" and nvml.calls[-1] == "shutdown"
    return monitor.summary()


def test_a_gpu_at_full_clock_is_not_throttled():
    # GpuIdle (0x1) and SyncBoost (0x10) are no slowdown of a busy GPU
    summary = monitor_over([(0x0, 1980, 60, 300_000), (0x1, 1980, 61, 310_000), (0x10, 1980, 62, 320_000)])
    assert summary["throttled"] is False and summary["reasons"] == [] and summary["samples"] == 3


def test_power_cap_and_thermal_slowdown_are_flagged_with_the_reading():
    from rooflow.hardware.environment import throttle_reading

    summary = monitor_over([(0x0, 1980, 70, 650_000), (0x4, 1755, 81, 699_000), (0x4 | 0x20, 1410, 87, 700_000),
                            (0x0, 1980, 84, 640_000)])
    assert summary["throttled"] is True
    assert summary["reasons"] == ["sw_power_cap", "sw_thermal_slowdown"]
    assert summary["throttled_samples"] == 2 and summary["samples"] == 4
    assert (summary["sm_clock_mhz_min"], summary["sm_clock_mhz_max"], summary["max_sm_clock_mhz"]) == (1410, 1980, 1980)
    assert summary["temperature_celsius_max"] == 87 and summary["power_watts_max"] == 700.0
    assert throttle_reading(summary) == ("sw_power_cap, sw_thermal_slowdown in 2 of 4 samples; SM clock 1410-1980 "
                                         "MHz (max 1980); up to 87 °C; up to 700 W of 700 W")


def test_sampling_is_rate_limited():
    from rooflow.hardware.environment import GpuMonitor

    ticks = iter([0.0, 0.001, 0.002, 0.05, 0.051])
    nvml = StandInNVML([(0x0, 1980, 60, 1000)] * 5)
    with GpuMonitor(nvml=nvml, min_interval_seconds=0.02, clock=lambda: next(ticks)) as monitor:
        for _ in range(5):
            monitor.sample()
    assert monitor.summary()["samples"] == 2


def test_no_nvml_means_unknown_not_unthrottled():
    from rooflow.hardware.environment import GpuMonitor

    class Broken(StandInNVML):
        def nvmlInit(self):
            raise RuntimeError("NVML Shared Library Not Found")

    with GpuMonitor(nvml=Broken([])) as monitor:
        monitor.sample()
    summary = monitor.summary()
    assert summary["throttled"] is None and "NVML unavailable" in summary["nvml_error"]


def test_a_throttled_timing_is_flagged_in_summary_and_checks():
    """A timing record as measure() writes it for a throttled GPU run reaches the summary's `throttle`
    column and the report's checks with the reading."""
    from rooflow.hardware.devices import load_devices
    from rooflow.report.checks import summary_checks
    from rooflow.report.summary import build_row

    device = load_devices(ROOT / "config" / "devices.yaml")["h100-sxm5-80gb"]
    gpu = monitor_over([(0x4, 1500, 83, 699_000), (0x0, 1980, 80, 650_000)])
    timing_record = {"status": "ok", "median_seconds": 0.01, "spread": 0.01, "timing_rounds": 1,
                     "images_per_second": 6400.0, "throttled": True, "gpu_during_timing": gpu}
    estimate = {"model": "resnet50", "batch": 64, "precision": "tf32", "mode": "inference",
                "total_flops": 5.3e11, "fused_bytes": 3e9}
    row = build_row(device, estimate, timing_record)
    assert row["throttle"].startswith("sw_power_cap in 1 of 2 samples; SM clock 1500-1980 MHz")
    assert row["checks"].startswith("throttled: sw_power_cap")
    import pandas as pd

    checks = summary_checks(pd.DataFrame([row]))
    throttled = [c for c in checks if c["check"] == "throttled"]
    assert len(throttled) == 1 and throttled[0]["severity"] == "warning"
    assert throttled[0]["value"] == row["throttle"] and "power cap" in throttled[0]["likely_cause"]


def test_an_oom_timing_reaches_the_summary_with_its_numbers():
    import pandas as pd

    from rooflow.hardware.devices import load_devices
    from rooflow.report.checks import summary_checks
    from rooflow.report.summary import build_row

    device = load_devices(ROOT / "config" / "devices.yaml")["t4"]
    error = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 3.06 GiB. GPU 0 has a total capacity of "
                                   "14.75 GiB of which 1.20 GiB is free.")
    record = {"status": "oom", **oom_details(error, cuda=True)} if not torch.cuda.is_available() else None
    if record is None:
        pytest.skip("a GPU is present")
    estimate = {"model": "vgg16", "batch": 256, "precision": "fp32", "mode": "training", "total_flops": 1e13}
    row = build_row(device, estimate, record)
    assert row["status"] == "oom"
    assert row["memory_requested_bytes"] == int(3.06 * 2**30) and row["memory_available_bytes"] == int(1.2 * 2**30)
    assert row["checks"].startswith("out of memory: oom (expected fits in memory): asked for 3.06 GiB with 1.20 GiB "
                                    "free")
    oom = [c for c in summary_checks(pd.DataFrame([row])) if c["check"] == "out of memory"]
    assert len(oom) == 1 and "asked for 3.06 GiB" in oom[0]["likely_cause"]


def _tiny(variant: str, mode: str) -> RunSpec:
    # the shared tiny model (tests.support.Tiny) as a factory model: a few ms a step on a CPU
    return RunSpec("tiny", 2, "fp32", mode, "cpu", 1, 2, 1, factory="tests.support:Tiny", inputs=((3, 8, 8),),
                   variant=variant)


@pytest.mark.parametrize("mode", ["inference", "training"])
def test_channels_last_runs_nhwc_tensors(mode):
    runner = Runner(_tiny("channels_last", mode), {})
    assert runner.inputs[0].is_contiguous(memory_format=torch.channels_last)
    assert not runner.inputs[0].is_contiguous()
    assert runner.model.stem.weight.is_contiguous(memory_format=torch.channels_last)
    if mode == "training":  # the optimizer updates the converted parameters
        before = runner.model.stem.weight.detach().clone()
        runner.step()
        assert {id(p) for group in runner.optimizer.param_groups for p in group["params"]} == \
            {id(p) for p in runner.model.parameters()}
        assert not torch.equal(before, runner.model.stem.weight)


@pytest.mark.parametrize("mode", ["inference", "training"])
def test_channels_last_runs_a_video_model_ndhwc(mode):
    """A video model (r3d_18, mc3_18, ...: 5-D weights) under --variant channels_last ended every such timing job
    in "required rank 4 tensor to use channels_last format"; it takes the 3-D form, NDHWC. A model holding both
    2-D and 3-D convolutions is one sentence."""
    spec = RunSpec("tiny3d", 2, "fp32", mode, "cpu", 1, 2, 1, factory="tests.support:Tiny3d",
                   inputs=((3, 4, 8, 8),), variant="channels_last")
    runner = Runner(spec, {})
    assert runner.inputs[0].is_contiguous(memory_format=torch.channels_last_3d)
    assert runner.model.stem.weight.is_contiguous(memory_format=torch.channels_last_3d)
    runner.step()
    mixed = RunSpec("mixed", 2, "fp32", mode, "cpu", 1, 2, 1, factory="tests.support:tiny_3d_with_2d",
                    inputs=((3, 4, 8, 8),), variant="channels_last")
    with pytest.raises(RooflowError, match="^--variant channels_last: model 'mixed' holds both 4-D and 5-D weights"):
        Runner(mixed, {})


def test_labels_past_the_models_classes_are_one_sentence_in_training():
    """A subset built from more classes than a torchvision classifier outputs (dataset.classes 2,000 from an
    ImageNet-21k tree, say) ended every training timing job in "IndexError: Target 1500 is out of bounds" inside
    cross-entropy; one sentence with the fix. Inference does not read the labels, and labels inside run."""
    images = torch.zeros(2, 3, 32, 32, dtype=torch.uint8)
    far = {"images": images, "labels": torch.tensor([1500, 3])}
    spec = RunSpec("squeezenet1_1", 2, "fp32", "training", "cpu", 1, 2, 1)
    with pytest.raises(RooflowError) as raised:
        Runner(spec, far)
    assert str(raised.value) == (
        "the subset's labels reach 1500, and squeezenet1_1 outputs 1000 classes (its cross-entropy needs labels "
        "below 1000): build the subset from at most 1000 classes (dataset.classes), or time the run in mode inference")
    Runner(RunSpec("squeezenet1_1", 2, "fp32", "inference", "cpu", 1, 2, 1), far)
    Runner(spec, {"images": images, "labels": torch.tensor([999, 3])}).step()


@pytest.mark.slow  # inductor compiles C++ for the graph: about 20 s on two shared cores
def test_compile_records_its_compile_time_apart():
    record = measure(_tiny("compile", "inference"), {})
    assert record["status"] == "ok" and record["variant"] == "compile"
    # compiling (dynamo + inductor's C++ for the graph) takes far longer than a step
    assert record["compile_seconds"] > 10 * record["median_seconds"]
    assert "compile_seconds" not in measure(_tiny("eager", "inference"), {})


def test_compile_without_a_cpp_compiler_is_one_sentence(monkeypatch):
    """A machine without a working C++ compiler (a slim image, a compute node without build tools; here inductor
    pointed at a missing g++) ended every compile run's timing job in a 40-line InductorError traceback. One
    sentence with PyTorch's cause and the fix; the eager run of the same model still times."""
    import torch._inductor.config as inductor

    monkeypatch.setattr(inductor.cpp, "cxx", (None, "/nonexistent/g++"))
    monkeypatch.setattr(inductor, "fx_graph_cache", False)  # a graph compiled before must not stand in
    torch._dynamo.reset()
    try:
        with pytest.raises(RooflowError) as raised:
            measure(_tiny("compile", "inference"), {})
    finally:
        torch._dynamo.reset()
    assert str(raised.value).startswith("--variant compile: torch.compile could not compile the step "
                                        "(InvalidCxxCompiler: No working C++ compiler found")
    assert str(raised.value).endswith("'/nonexistent/g++')): install a C++ compiler (g++) where the job runs, or point "
                                      "CXX at one, or drop compile from the config's variants")
    assert measure(_tiny("eager", "inference"), {})["status"] == "ok"


def test_rooflow_time_runs_the_variant_it_is_given(tmp_path):
    """`rooflow time` (and the profiling driver: the same arguments) takes the variant of the workflow's jobs."""
    from rooflow import cli

    build_subset(SubsetSpec(None, 1, 1, 16, 8, 0), tmp_path / "s.pt", tmp_path / "m.csv")
    assert cli.main(["time", "--model", "tests.support:Tiny", "--input", "3x8x8", "--batch", "2", "--warmup", "0",
                     "--iterations", "2", "--rounds", "1", "--threads", "1", "--variant", "channels_last",
                     "--subset", str(tmp_path / "s.pt"), "--output", str(tmp_path / "t.json")]) == 0
    record = json.loads((tmp_path / "t.json").read_text())
    assert (record["variant"], record["status"]) == ("channels_last", "ok")


@pytest.mark.parametrize("argv, says", [
    (["--batch", "0"], "argument --batch: 0 is not a positive integer (1 or more)"),
    (["--batch", "2", "--iterations", "0"], "argument --iterations: 0 is not a positive integer (1 or more)"),
    (["--batch", "2", "--warmup", "-1"], "argument --warmup: -1 is not a whole number of 0 or more"),
    (["--batch", "two"], "argument --batch: 'two' is not a whole number"),
    # accepted before, where the config's noise_budget_seconds has minimum 0
    (["--batch", "2", "--noise-budget", "-5"], "argument --noise-budget: -5 is not a number of seconds of 0 or more"),
    (["--batch", "2", "--noise-budget", "nan"], "argument --noise-budget: nan is not a number of seconds of 0 or more"),
    (["--batch", "16777217"], "argument --batch: 16777217 is more than 16,777,216 (2^24) samples, the largest batch "
                              "rooflow counts the bytes of without overflowing; give a smaller batch"),
])
def test_rooflow_time_refuses_a_count_that_is_not_positive_before_it_runs(tmp_path, capsys, argv, says):
    """--batch 0 had timed an empty batch and written it with status ok; --iterations 0 ended in a KeyError
    traceback. Each is argparse's one sentence now, and no timing file is written."""
    from rooflow import cli

    build_subset(SubsetSpec(None, 1, 1, 16, 8, 0), tmp_path / "s.pt", tmp_path / "m.csv")
    with pytest.raises(SystemExit) as exited:
        cli.main(["time", "--model", "tests.support:Tiny", "--input", "3x8x8", *argv,
                  "--subset", str(tmp_path / "s.pt"), "--output", str(tmp_path / "t.json")])
    assert exited.value.code == 2
    # the one line, without argparse's usage block above it
    assert capsys.readouterr().err.strip() == f"rooflow time: error: {says} (usage: rooflow time --help)"
    assert not (tmp_path / "t.json").exists()


def test_a_cpu_timing_job_logs_no_kineto_gpu_error(tmp_path):
    # the profiled iteration on a machine without a GPU: Kineto's "gpuGetDeviceCount failed" is not an error of
    # the run, and it printed one ERROR line per job into the workflow's logs
    build_subset(SubsetSpec(None, 1, 1, 16, 8, 0), tmp_path / "s.pt", tmp_path / "m.csv")
    env = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests"), str(ROOT)])  # tests.support imports conftest
    done = subprocess.run([sys.executable, "-m", "rooflow", "time", "--model", "tests.support:Tiny", "--input", "3x8x8",
                           "--batch", "2", "--warmup", "0", "--iterations", "2", "--rounds", "1", "--threads", "1",
                           "--subset", str(tmp_path / "s.pt"), "--output", str(tmp_path / "t.json"),
                           "--timeline", str(tmp_path / "timeline.csv")],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((tmp_path / "t.json").read_text())["op_times"]  # the profiled iteration ran
    assert "gpuGetDeviceCount" not in done.stdout + done.stderr
    assert "USDT:" not in done.stdout + done.stderr  # "profiler_start"/"profiler_stop" of every capture


def test_unknown_variant_is_one_sentence():
    with pytest.raises(RooflowError, match=r"^variant 'nhwc' is unknown: use one of eager, channels_last, compile$"):
        Runner(_tiny("nhwc", "inference"), {})


@pytest.mark.parametrize("device", ["a100-sxm4-40gb", "meta", "cuda0"])
def test_rooflow_time_on_a_device_it_cannot_time_is_one_sentence(device, capsys):
    """A catalogue key (what `rooflow estimate --device` takes) or a torch device that times nothing was a
    traceback (torch: 'Invalid device string') or, for meta, a bogus timing labelled cpu."""
    from rooflow.cli import main

    assert main(["time", "--model", "squeezenet1_1", "--batch", "1", "--device", device]) == 2
    err = capsys.readouterr().err
    assert f"device '{device}' is not one a step can be timed on: use cpu or cuda[:N]" in err
    assert "Traceback" not in err


def test_onednn_failing_under_the_memory_limit_is_an_oom_row_not_a_shape_error(tmp_path):
    """A small custom CNN under a 1 MB address-space limit: oneDNN cannot create its convolution primitive, and
    the input check blamed the shapes ("rejects inputs of shape 2x3x32x32 ... fix its input shapes"), exit 2, where
    the same run without the limit is fine; the workflow's job failed instead of writing its oom row. In a process
    of its own: oneDNN, failed under the cap, failed other tests' convolutions in this one afterwards.

    Batch 4096: its first convolution's output (268 MB) is more than any malloc arena has reserved. At batch 2 every
    allocation fitted in address space the process had mapped before the cap on a CI machine with more cores (more
    arenas), and the run passed under it."""
    root = Path(__file__).resolve().parents[2]
    output = tmp_path / "timing.json"
    done = subprocess.run([sys.executable, "-m", "rooflow", "time", "--model", "examples.tiny_cnn.model:build",
                           "--input", "3x32x32", "--batch", "4096", "--warmup", "1", "--iterations", "3",
                           "--cpu-memory-limit", "1000000", "--output", str(output)],
                          cwd=root, capture_output=True, text=True, timeout=300)
    # a result, recorded; exit status 3 and one sentence tell a script and a person it did not fit
    assert done.returncode == 3, done.stderr[-2000:]
    assert done.stderr.count("\n") == 1 and "`rooflow estimate examples.tiny_cnn.model:build --input 3x32x32 " \
        "--batch N --device KEY`" in done.stderr
    record = json.loads(output.read_text())
    assert record["status"] == "oom" and record["memory_limit_bytes"] == 1000000
    # the limit named as the command line's option too (it named the config key alone)
    assert record["message"].startswith("out of memory: ") and "left under the memory limit of 976.56 KiB " \
        "(profiling.cpu_memory_limit_bytes, --cpu-memory-limit)" in record["message"]
    # oneDNN's words are a memory failure under a cap (whichever allocation fails first on this CPU), not without
    from rooflow.measure.oom import cpu_memory_limit

    with cpu_memory_limit(2**30):
        assert is_out_of_memory(RuntimeError("could not create a primitive"))
    assert not is_out_of_memory(RuntimeError("could not create a primitive"))


def test_a_batch_its_batchnorm_cannot_train_on_is_one_sentence(subset):
    """Inception-v3 at batch 1 in training: its auxiliary head's BatchNorm sees one value per channel (a 1×1 map).
    `rooflow time` printed torch's traceback; now the run, torch's words and the fix, as the estimate says it."""
    with pytest.raises(RooflowError) as caught:
        measure(RunSpec("inception_v3", 1, "fp32", "training", "cpu", 0, 1, 1), subset)
    message = str(caught.value)
    assert message.startswith("inception_v3 cannot run training at batch 1 (input 299): Expected more than 1 value "
                              "per channel when training")
    assert message.endswith("give a batch of 2 or more, or run it in mode inference")


@pytest.mark.parametrize("name", ["googlenet", "inception_v3"])
def test_the_models_with_a_changing_default_initialisation_build_without_a_warning(name):
    """torchvision warned (FutureWarning) at every build of these two that their default initialisation will
    change: a line in every timing and profiling job's log. The run says which it takes (the coming default)."""
    import warnings

    from rooflow.workload.models import build_model

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = build_model(name)
    assert sum(p.numel() for p in model.parameters()) > 5_000_000
