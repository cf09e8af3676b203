"""The timed process's kernel timeline: parsing real torch.profiler (Kineto) traces recorded on an H100, the
phases, and the comparison with the kernels Nsight Compute profiled in another process."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pandas as pd
import pytest
import torch

from rooflow.errors import ParseError
from rooflow.io import read_json
from rooflow.measure.timeline import (
    TIMELINE_COLUMNS,
    _PhaseRanges,
    compare_kernels,
    parse_trace,
    read_timeline,
    seconds_by_class,
)
from rooflow.measure.timing import RunSpec, measure
from rooflow.profilers.kernels import short_kernel_name
from rooflow.profilers.ncu import aggregate_ncu
from rooflow.report.checks import build_checks
from rooflow.report.summary import COLUMNS, _evidence_columns
from rooflow.workload.dataset import SubsetSpec, build_subset, load_subset

H100 = Path(__file__).resolve().parents[1] / "data" / "real" / "h100-rooflow"


def trace(name: str) -> pd.DataFrame:
    return parse_trace(H100 / f"torch-profiler-{name}.json.gz")


@pytest.mark.parametrize(("name", "kernels", "memsets", "optimizer"), [
    ("resnet50-b64-tf32-inference", 244, 20, 0),
    ("resnet50-b64-tf32-training", 761, 40, 13),
    ("vgg16-b64-fp32-training", 570, 12, 28),
])
def test_real_traces_give_every_gpu_activity(name, kernels, memsets, optimizer):
    """PROVENANCE counts 265 / 803 / 585 CUDA events: kernels + memsets + the gpu_user_annotation rows of the
    iteration's record_function ranges (1 / 2 / 3), which are not GPU work."""
    timeline = trace(name)
    assert list(timeline.columns) == TIMELINE_COLUMNS
    assert (timeline["kind"] == "kernel").sum() == kernels
    assert (timeline["kind"] == "memset").sum() == memsets
    # no phase ranges were recorded then, but the optimizer's own range marks its kernels
    assert (timeline["phase"] == "optimizer").sum() == optimizer
    assert set(timeline.loc[timeline["phase"] == "optimizer", "kernel_class"]) <= {"elementwise", "memory"}
    assert timeline["start_seconds"].is_monotonic_increasing and timeline["start_seconds"].iloc[0] == 0
    assert (timeline["seconds"] > 0).all()


def test_kernel_time_fits_in_the_timed_step():
    """The profiled iteration's kernels run in at most the CUDA-event step time of the timing job (same GPU,
    same code, another process) and, at batch 64, keep the GPU busy for most of it."""
    for name in ("resnet50-b64-tf32-inference", "resnet50-b64-tf32-training"):
        timeline = trace(name)
        step = read_json(H100 / f"{name}-timing.json")["median_seconds"]
        kernel_seconds = timeline.loc[timeline["kind"] == "kernel", "seconds"].sum()
        assert 0.9 * step < kernel_seconds < step, (name, kernel_seconds, step)


def test_seconds_units_and_launch_configuration():
    timeline = trace("resnet50-b64-tf32-inference")
    raw = json.loads(gzip.open(H100 / "torch-profiler-resnet50-b64-tf32-inference.json.gz").read())
    durations = [e["dur"] for e in raw["traceEvents"] if e.get("cat") in ("kernel", "gpu_memset")]
    assert math.fsum(timeline["seconds"]) == pytest.approx(math.fsum(durations) * 1e-6, rel=1e-12)  # µs -> s
    first = timeline.iloc[0]
    assert first["grid"] == "(1568, 1, 64)" and first["block"] == "(256, 1, 1)"  # ncu's own notation
    by_class = seconds_by_class(timeline)
    assert math.fsum(by_class.values()) == pytest.approx(math.fsum(timeline["seconds"]))
    assert list(by_class.values()) == sorted(by_class.values(), reverse=True)


def test_phases_come_from_ranges_around_the_launch_even_on_autograd_thread():
    """A constructed trace (the layout torch.profiler writes): phase ranges on the main thread (tid 1), a
    backward kernel launched from autograd's thread (tid 2) while the main thread waits in phase:backward."""
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "phase:forward", "ts": 0, "dur": 100, "tid": 1},
        {"ph": "X", "cat": "user_annotation", "name": "phase:backward", "ts": 100, "dur": 200, "tid": 1},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 10, "dur": 5, "tid": 1,
         "args": {"correlation": 7}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 150, "dur": 5, "tid": 2,
         "args": {"correlation": 8}},
        {"ph": "X", "cat": "kernel", "name": "volta_sgemm_128x64_nt", "ts": 20, "dur": 40,
         "args": {"correlation": 7, "grid": [4, 2, 1], "block": [256, 1, 1], "stream": 7}},
        {"ph": "X", "cat": "kernel", "name": "void cudnn::bn_bw_1C11_kernel_new<float>(float)", "ts": 160, "dur": 9,
         "args": {"correlation": 8, "grid": [64, 1, 1], "block": [512, 1, 1], "stream": 7}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "ts": 300, "dur": 2,
         "args": {"correlation": 9}},
    ]
    timeline = parse_trace({"traceEvents": events})
    assert timeline[["kernel_class", "kind", "phase"]].values.tolist() == [
        ["gemm", "kernel", "forward"], ["normalization", "kernel", "backward"], ["memory", "memcpy", ""]]
    assert timeline["seconds"].tolist() == pytest.approx([40e-6, 9e-6, 2e-6])


def test_phase_ranges_are_what_torch_profiler_exports(tmp_path):
    """The real profiler on this machine's CPU: the phase ranges the timing job opens appear in the exported
    trace as user_annotation events with their names (what parse_trace reads)."""
    model = torch.nn.Linear(8, 8)
    marker = _PhaseRanges(["forward", "backward"])
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
        marker.mark()
        loss = model(torch.ones(2, 8)).sum()
        marker.mark()
        loss.backward()
        marker.mark()
    path = tmp_path / "trace.json"
    profiler.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    names = [e["name"] for e in events if e.get("cat") == "user_annotation"]
    assert names == ["phase:forward", "phase:backward"]
    assert parse_trace(path).empty  # a CPU has no kernels


def test_unreadable_traces_are_one_sentence(tmp_path):
    bad = tmp_path / "trace.json"
    bad.write_text("{not json")
    with pytest.raises(ParseError, match="not a readable torch.profiler Chrome trace"):
        parse_trace(bad)
    bad.write_text(json.dumps({"schemaVersion": 1}))
    with pytest.raises(ParseError, match="no 'traceEvents' list"):
        parse_trace(bad)


def test_the_recorded_processes_ran_different_algorithms():
    """The fixtures' traces and ncu profiles come from separate processes with cudnn.benchmark autotuning:
    the comparison names the convolution/GEMM kernels that differ, and nothing that differs only in how ncu
    and CUPTI demangle."""
    timed = trace("resnet50-b64-tf32-inference")
    profiled = aggregate_ncu(H100 / "resnet50-b64-tf32-inference-ncu.csv.gz").kernels
    comparison = compare_kernels(timed, profiled)
    assert comparison["timed_kernels"] == 244 and comparison["profiled_kernels"] == 241
    assert comparison["match"] is False and comparison["algorithms_differ"] is True
    assert comparison["by_class"] == {"convolution": [39, 26], "gemm": [16, 28], "memory": [69, 67]}
    assert comparison["message"].startswith("the timed iteration ran 244 kernels, ncu profiled 241 (convolution "
                                            "39 vs 26, gemm 16 vs 28, memory 69 vs 67); only timed: ")
    differing = {name for name, _ in comparison["only_timed"] + comparison["only_profiled"]}
    # same kernels, demangled differently by ncu and CUPTI: not differences
    for same in ("bn_fw_inf_1C11_kernel_NCHW", "vectorized_elementwise_kernel<launch_clamp_scalar>",
                 "vectorized_elementwise_kernel<CUDAFunctor_add>", "max_pool_forward_nchw", "reduce_kernel<MeanOps>"):
        assert same not in differing
    assert "cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4" in dict(comparison["only_profiled"])


def test_the_same_kernels_match_whatever_the_demangler():
    ncu = pd.DataFrame({"name": [
        "void at::vectorized_elementwise_kernel<4, at::CUDAFunctor_add<float>, std::array<char *, 3>>(int, "
        "at::CUDAFunctor_add<float>, std::array<char *, 3>)",
        "void cudnn::bn_fw_inf_1C11_kernel_NCHW<float, float, 1, 1>(float, float, cudnnTensorStruct)"],
        "kernel_class": ["elementwise", "normalization"]})
    cupti = pd.DataFrame({"name": [
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, "
        "3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
        "void cudnn::bn_fw_inf_1C11_kernel_NCHW<float, float, true, 1>(float, float, cudnnTensorStruct)"],
        "kernel_class": ["elementwise", "normalization"], "kind": ["kernel", "kernel"]})
    assert [short_kernel_name(n) for n in ncu["name"]] == [short_kernel_name(n) for n in cupti["name"]]
    comparison = compare_kernels(cupti, ncu)
    assert comparison["match"] is True and comparison["message"] == ""


def test_a_missing_kernel_is_a_mismatch_but_not_an_algorithm_change():
    profiled = pd.DataFrame({"name": ["volta_sgemm_128x64_nt", "void at::vectorized_elementwise_kernel<4, "
                                      "at::FillFunctor<float>, std::array<char *, 1>>(int)"],
                             "kernel_class": ["gemm", "memory"]})
    timed = profiled.iloc[:1].assign(kind="kernel")
    comparison = compare_kernels(timed, profiled)
    assert comparison["match"] is False and comparison["algorithms_differ"] is False
    assert comparison["only_profiled"] == [["vectorized_elementwise_kernel<FillFunctor>", 1]]
    assert "only timed: none" in comparison["message"]


@pytest.fixture(scope="module")
def subset(tmp_path_factory):
    folder = tmp_path_factory.mktemp("subset")
    build_subset(SubsetSpec(None, 2, 2, 64, 56, 0), folder / "s.pt", folder / "m.csv")
    return load_subset(folder / "s.pt")


def test_a_cpu_timing_writes_an_empty_timeline_and_says_why(subset, tmp_path):
    path = tmp_path / "kernels.csv"
    record = measure(RunSpec("squeezenet1_0", 1, "fp32", "inference", "cpu", 0, 2, 1), subset, path)
    assert record["status"] == "ok" and record["timeline_status"].startswith("skipped: a CPU run")
    assert record["timeline_kernels"] == 0
    frame = read_timeline(path)
    assert list(frame.columns) == TIMELINE_COLUMNS and frame.empty


# ---------------------------------------------------------------------------------------------------
# The check: timed vs profiled kernels, as the summary and the self-checks report it


def checked(compared: dict) -> list[dict]:
    row = {c: math.nan for c in COLUMNS}
    row.update(device="h100-sxm5-80gb", model="resnet50", batch=64, precision="tf32", mode="inference",
               status="ok", checks="")
    _evidence_columns(row, {"kernels_compared": compared})
    checks, _ = build_checks(pd.DataFrame([row], columns=COLUMNS))
    return [r for _, r in checks.iterrows() if r["check"] == "timed vs profiled kernels"]


def test_real_processes_running_other_convolution_kernels_are_an_error():
    timed = trace("resnet50-b64-tf32-inference")
    profiled = aggregate_ncu(H100 / "resnet50-b64-tf32-inference-ncu.csv.gz").kernels
    [flag] = checked(compare_kernels(timed, profiled))
    assert flag["severity"] == "error" and flag["value"] == "244 timed vs 241 profiled kernels"
    assert "convolution 39 vs 26" in flag["likely_cause"] and "another convolution/GEMM algorithm" in \
        flag["likely_cause"]


def test_other_kernels_differing_are_a_warning_and_the_same_kernels_pass():
    profiled = pd.DataFrame({"name": ["volta_sgemm_128x64_nt", "void at::vectorized_elementwise_kernel<4, "
                                      "at::FillFunctor<float>, std::array<char *, 1>>(int)"],
                             "kernel_class": ["gemm", "memory"]})
    [flag] = checked(compare_kernels(profiled.iloc[:1], profiled))
    assert flag["severity"] == "warning" and "the convolution/GEMM kernels match" in flag["likely_cause"]
    assert checked(compare_kernels(profiled, profiled)) == []


@pytest.mark.parametrize("gpu, launched, profiled", [("a100", 214, 170), ("v100", 229, 185)])
def test_an_imported_runs_nsys_and_ncu_kernels_are_compared(gpu, launched, profiled):
    """The default config's imported VGG11 profiles (tests/data/real/anoushka21-cloudml): the time is the nsys trace's
    kernel sum, the FLOPs and bytes its ncu log's, yet the trace ran 44 more kernels than ncu profiled, all
    AddFunctor elementwise kernels (3.8 ms of the V100's 39.5), so the achieved FLOP/s and intensity divide counts
    of one set of kernels by the time of another — printed without a word (the comparison ran for rooflow's own
    timed runs only). The nsys summary's launches are compared with the ncu kernels, and the check says what
    differs: a warning, the convolution and GEMM kernels being the same."""
    from support import ANOUSHKA, real

    from rooflow.measure.timeline import launches
    from rooflow.profilers.nsys import aggregate_nsys

    folder = f"{ANOUSHKA}/{gpu}/vgg11"
    nsys = aggregate_nsys([real(f"{folder}/tmp_nsys_gputrace.csv")]).kernels
    assert nsys["instances"].sum() == launched
    compared = compare_kernels(launches(nsys), aggregate_ncu([real(f"{folder}/ncu-log-vgg11.txt")]).kernels,
                               timed_by="its Nsight Systems trace ran")
    assert compared["message"] == (f"its Nsight Systems trace ran {launched} kernels, ncu profiled {profiled} "
                                   f"(elementwise 85 vs 41); only timed: vectorized_elementwise_kernel<AddFunctor> "
                                   f"×44; only profiled: none")
    [flag] = checked(compared)
    assert flag["severity"] == "warning" and flag["value"] == f"{launched} timed vs {profiled} profiled kernels"
    assert flag["likely_cause"].endswith("the convolution/GEMM kernels match; the difference is in other kernels")


def test_the_timeline_feeds_the_time_by_kernel_class_figure(tmp_path):
    """Without nsys, the timed iteration's kernels give the measured panel of the time-by-class figure."""
    from rooflow.report.figures import time_by_layer_figure

    by_class = seconds_by_class(trace("resnet50-b64-tf32-training"))
    path = tmp_path / "time.svg"
    shares = time_by_layer_figure({"resnet50 b64 tf32 train": pd.Series({"Conv2d": 2.0, "BatchNorm2d": 1.0})},
                                  {"resnet50 b64 tf32 train": by_class}, "h100-sxm5-80gb", path, "torch.profiler")
    assert shares["kernels"].sum(axis=1).iloc[0] == pytest.approx(100)
    assert shares["kernels"].loc["resnet50 b64 tf32 train", "normalization"] == pytest.approx(
        100 * by_class["normalization"] / sum(by_class.values()))
    assert "torch.profiler" in path.read_text()
