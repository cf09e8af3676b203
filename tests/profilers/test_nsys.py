"""nsys stats reports: kernel time kept apart from memcpy time, on the real 2020 traces and every documented
header shape."""

from __future__ import annotations

import csv
import gzip
import io
import math
from pathlib import Path

import pytest

from rooflow.errors import ParseError
from rooflow.profilers.kernels import KERNEL_CLASSES
from rooflow.profilers.nsys import KERNEL_COLUMNS, TOTAL_KEYS, aggregate_nsys

DATA = Path(__file__).resolve().parents[1] / "data"
REAL = DATA / "real" / "anoushka21-cloudml" / "proj1"
MALFORMED = DATA / "malformed"
RUNS = [(gpu, model) for gpu in ("a100", "v100") for model in ("vgg11", "vgg13", "vgg19")]


def trace_path(gpu: str, model: str) -> Path:
    path = REAL / gpu / model / "tmp_nsys_gputrace.csv"
    return path if path.exists() else path.with_name(path.name + ".gz")


def trace_rows(gpu: str, model: str) -> list[dict[str, str]]:
    path = trace_path(gpu, model)
    data = path.read_bytes()
    text = (gzip.decompress(data) if path.suffix == ".gz" else data).decode()
    return list(csv.DictReader(io.StringIO(text)))


def study_runtime_ns(gpu: str, model: str) -> int:
    """The study's nsys-final-metric file: 'Runtime(nanosec)' then the number."""
    lines = (REAL / gpu / model / f"nsys-final-metric-{model}.txt").read_text().split()
    assert lines[0] == "Runtime(nanosec)"
    return int(lines[1])


def test_a100_vgg11_kernel_time_is_20_95_ms_not_the_studys_141_ms():
    result = aggregate_nsys(trace_path("a100", "vgg11"))
    totals = result.totals
    assert set(totals) == set(TOTAL_KEYS)
    assert round(totals["kernel_seconds"] * 1e3, 2) == 20.95
    assert totals["kernel_seconds"] == pytest.approx(20_950_006e-9, rel=1e-15)
    # The study's "Runtime" is the sum of EVERY row of a whole-program trace, memcpys included
    assert totals["all_rows_seconds"] == pytest.approx(study_runtime_ns("a100", "vgg11") * 1e-9, rel=1e-15)
    assert round(totals["all_rows_seconds"] * 1e3) == 141
    assert totals["memcpy_seconds"] + totals["memset_seconds"] == pytest.approx(
        totals["all_rows_seconds"] - totals["kernel_seconds"], rel=1e-12)
    # memset rows are summed apart from the copies (by hand from the trace: its [CUDA memset] rows)
    rows = trace_rows("a100", "vgg11")
    memset_ns = sum(int(r["Duration(nsec)"]) for r in rows if r["Name"] == "[CUDA memset]")
    memcpy_ns = sum(int(r["Duration(nsec)"]) for r in rows if r["Name"].startswith("[CUDA memcpy"))
    assert memset_ns > 0 and memcpy_ns > 0
    assert totals["memset_seconds"] == pytest.approx(memset_ns * 1e-9, rel=1e-15)
    assert totals["memcpy_seconds"] == pytest.approx(memcpy_ns * 1e-9, rel=1e-15)
    assert totals["source_format"] == "nsys-gputrace-2020"
    assert totals["kernels"] == 214
    assert list(result.kernels.columns) == KERNEL_COLUMNS
    assert set(result.memops["name"]) == {"[CUDA memcpy HtoD]", "[CUDA memcpy DtoH]", "[CUDA memcpy DtoD]",
                                          "[CUDA memset]"}
    assert len(result.memops) == 296 - 214
    assert "whole program" in result.note


@pytest.mark.parametrize(("gpu", "model"), RUNS)
def test_every_trace_keeps_kernel_and_copy_time_apart(gpu, model):
    rows = trace_rows(gpu, model)
    kernel_ns = sum(int(r["Duration(nsec)"]) for r in rows if not r["Name"].startswith("[CUDA mem"))
    every_ns = sum(int(r["Duration(nsec)"]) for r in rows)
    totals = aggregate_nsys([trace_path(gpu, model)]).totals
    assert totals["kernel_seconds"] == pytest.approx(kernel_ns * 1e-9, rel=1e-15)
    assert totals["all_rows_seconds"] == pytest.approx(every_ns * 1e-9, rel=1e-15)
    assert every_ns == study_runtime_ns(gpu, model)  # what the study reported as "Runtime"
    assert totals["kernel_seconds"] < 0.5 * totals["all_rows_seconds"]
    assert math.fsum(totals["by_class"].values()) == pytest.approx(totals["kernel_seconds"], rel=1e-12)
    assert set(totals["by_class"]) <= set(KERNEL_CLASSES) and "other" not in totals["by_class"]


def test_kernel_classes_of_the_a100_trace():
    result = aggregate_nsys(trace_path("a100", "vgg11"))
    by_class = result.totals["by_class"]
    assert list(by_class) == sorted(by_class, key=by_class.get, reverse=True)
    assert max(by_class, key=by_class.get) == "convolution"
    xmma = result.kernels[result.kernels["name"].str.contains("xmma_new::gemm::kernel")]
    assert len(xmma) > 0 and set(xmma["kernel_class"]) == {"convolution"}
    layout = result.kernels[result.kernels["name"].str.startswith("void nchwToNhwcKernel")]
    assert len(layout) > 0 and set(layout["kernel_class"]) == {"memory"}


def test_the_v100_traces_book_winograd_gemms_to_their_convolutions():
    """cuDNN's non-fused Winograd runs its products as plain volta_sgemm kernels between its transforms; by name
    alone they were "gemm" (VGG11: 18.8 ms of 39.6, for 3 small linear layers). What stays gemm is the linear
    layers' own: 3 layers × (forward, input gradient, weight gradient) and their split-K reductions."""
    from rooflow.profilers.kernels import classify_kernel
    from rooflow.profilers.ncu import aggregate_ncu

    result = aggregate_nsys(trace_path("v100", "vgg11"))
    kernels = result.kernels
    by_name = [classify_kernel(name) for name in kernels["name"]]
    moved = kernels[(kernels["kernel_class"] == "convolution").to_numpy() & [c == "gemm" for c in by_name]]
    assert len(moved) == 21 and moved["name"].str.startswith("volta_sgemm_").all()
    assert math.fsum(moved["seconds"]) == pytest.approx(0.01628, rel=1e-3)
    gemm = kernels[kernels["kernel_class"] == "gemm"]
    assert (~gemm["name"].str.contains("splitKreduce")).sum() == 9
    assert result.totals["by_class"]["gemm"] == pytest.approx(0.002486, rel=1e-3)
    assert max(result.totals["by_class"], key=result.totals["by_class"].get) == "convolution"
    # the same run's ncu profile (in kernel-ID order) books the same launches alike
    profile = aggregate_ncu(REAL / "v100" / "vgg11" / "ncu-log-vgg11.txt.gz").kernels
    assert sorted(profile.loc[profile["kernel_class"] == "gemm", "name"]) == sorted(gemm["name"])


def test_a_gemm_between_other_kernels_stays_gemm():
    from rooflow.profilers.kernels import classify_launches

    data = "void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(int)"
    output = "void cudnn::winograd_nonfused::winogradForwardOutput4x4<float, float>(int)"
    add = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int)"
    fill = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int)"
    assert classify_launches([data, "volta_sgemm_64x64_nn", fill, "volta_sgemm_64x64_nn", output]) == [
        "convolution", "convolution", "memory", "convolution", "convolution"]
    # a linear layer after a convolution's output transform, or at either end: its own GEMM
    assert classify_launches([output, "volta_sgemm_64x64_nn", add, data]) == [
        "convolution", "gemm", "elementwise", "convolution"]
    assert classify_launches(["volta_sgemm_64x64_nn", output]) == ["gemm", "convolution"]
    assert classify_launches([data, "volta_sgemm_64x64_nn"]) == ["convolution", "gemm"]
    assert classify_launches([]) == []


# ---------------------------------------------------------------------------------------------------
# Header shapes without a public fixture, written from NVIDIA's report scripts / documented headers

GPUTRACE_2021 = """\
Start (ns),Duration (ns),CorrId,GrdX,GrdY,GrdZ,BlkX,BlkY,BlkZ,Reg/Trd,StcSMem (MB),DymSMem (MB),Bytes (MB),Throughput (MBps),SrcMemKd,DstMemKd,Device,Ctx,Strm,Name
1200000,3000,10,,,,,,,,,,0.602,200666.667,Pageable,Device,NVIDIA A100-SXM4-40GB (0),1,7,[CUDA memcpy HtoD]
1250000,48543,11,64,2,1,128,1,1,122,0.000,0.049,,,,,NVIDIA A100-SXM4-40GB (0),1,7,ampere_sgemm_128x64_nt
1300000,9248,12,1568,1,1,128,1,1,16,0.000,0.000,,,,,NVIDIA A100-SXM4-40GB (0),1,7,"void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, at::detail::Array<char*, 3> >(int, at::native::AddFunctor<float>, at::detail::Array<char*, 3>)"
1400000,1500,13,,,,,,,,,,0.000,0.000,,Device,NVIDIA A100-SXM4-40GB (0),1,7,[CUDA memset]
"""

CUDA_GPU_TRACE_2024 = """\
Start (ns),Duration (ns),CorrId,GrdX,GrdY,GrdZ,BlkX,BlkY,BlkZ,Reg/Trd,StcSMem (MB),DymSMem (MB),Bytes (MB),Throughput (MB/s),SrcMemKd,DstMemKd,Device,Ctx,GreenCtx,Strm,Name
1853210944,3392,1201,,,,,,,,,,0.602,177476.415,Pageable,Device,NVIDIA H100 80GB HBM3 (0),1,,7,[CUDA memcpy Host-to-Device]
1853298721,48543,1215,132,1,1,384,1,1,168,0.000,0.213,,,,,NVIDIA H100 80GB HBM3 (0),1,,7,"void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_256x128_16x3_nt_align4>(cutlass_80_tensorop_s1688gemm_256x128_16x3_nt_align4::Params)"
1853350112,9248,1230,1568,1,1,128,1,1,16,0.000,0.000,,,,,NVIDIA H100 80GB HBM3 (0),1,,7,"void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)"
1853360000,20001,1241,3136,1,1,256,1,1,40,0.000,0.000,,,,,NVIDIA H100 80GB HBM3 (0),1,,7,"void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, 512, true, 1>(cudnnTensorStruct, float const*)"
1853390000,2080,1250,,,,,,,,,,0.000,0.000,,Device,NVIDIA H100 80GB HBM3 (0),1,,7,[CUDA memset]
1853400000,1600,1260,,,,,,,,,,0.000,0.003,Device,Pageable,NVIDIA H100 80GB HBM3 (0),1,,7,[CUDA memcpy Device-to-Host]
"""

KERN_SUM = """\
Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name
60.6,48543,1,48543.0,48543.0,48543,48543,0.0,"void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_256x128_16x3_nt_align4>(cutlass_80_tensorop_s1688gemm_256x128_16x3_nt_align4::Params)"
26.1,20001,1,20001.0,20001.0,20001,20001,0.0,"void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, 512, true, 1>(cudnnTensorStruct, float const*)"
13.3,9248,1,9248.0,9248.0,9248,9248,0.0,"void at::native::vectorized_elementwise_kernel<4, launch_clamp_scalar>(int)"
"""

GPUKERNSUM_2021 = """\
Time(%),Total Time (ns),Instances,Average,Minimum,Maximum,StdDev,Name
70.5,2913280,64,45520.0,44991,46272,301.1,volta_sgemm_128x64_nt
29.5,1219392,128,9526.5,9184,10080,201.7,"void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, at::detail::Array<char*, 3> >(int, at::native::AddFunctor<float>, at::detail::Array<char*, 3>)"
"""

NVTX_SUM = """\
Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Style,Range
100.0,2500000,1,2500000.0,2500000.0,2500000,2500000,0.0,PushPop,rooflow:step
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_gputrace_2021(tmp_path):
    result = aggregate_nsys(write(tmp_path, "gputrace.csv", GPUTRACE_2021))
    totals = result.totals
    assert totals["source_format"] == "nsys-gputrace"
    assert totals["kernels"] == 2
    assert totals["kernel_seconds"] == pytest.approx((48_543 + 9_248) * 1e-9, rel=1e-15)
    assert totals["memcpy_seconds"] == pytest.approx(3_000e-9, rel=1e-15)  # the memset row is not a copy
    assert totals["memset_seconds"] == pytest.approx(1_500e-9, rel=1e-15)
    assert totals["by_class"] == pytest.approx({"gemm": 48_543e-9, "elementwise": 9_248e-9})


def test_cuda_gpu_trace_2024_with_green_contexts(tmp_path):
    result = aggregate_nsys(write(tmp_path, "run_cuda_gpu_trace.csv", CUDA_GPU_TRACE_2024))
    totals = result.totals
    assert totals["source_format"] == "nsys-cuda_gpu_trace"
    assert totals["kernels"] == 3
    assert totals["kernel_seconds"] == pytest.approx((48_543 + 9_248 + 20_001) * 1e-9, rel=1e-15)
    assert totals["memcpy_seconds"] == pytest.approx((3_392 + 1_600) * 1e-9, rel=1e-15)
    assert totals["memset_seconds"] == pytest.approx(2_080e-9, rel=1e-15)
    assert set(result.memops["name"]) == {"[CUDA memcpy Host-to-Device]", "[CUDA memset]",
                                          "[CUDA memcpy Device-to-Host]"}
    assert list(result.kernels["kernel_class"]) == ["gemm", "elementwise", "normalization"]
    assert (result.kernels["instances"] == 1).all()


def test_cuda_gpu_kern_sum(tmp_path):
    result = aggregate_nsys(write(tmp_path, "run_cuda_gpu_kern_sum.csv", KERN_SUM))
    totals = result.totals
    assert totals["source_format"] == "nsys-cuda_gpu_kern_sum"
    assert totals["kernels"] == 3
    assert totals["kernel_seconds"] == pytest.approx(77_792e-9, rel=1e-15)
    assert totals["memcpy_seconds"] is None  # a kernel summary has no memcpy rows: not zero, unknown
    assert totals["memset_seconds"] is None
    assert totals["all_rows_seconds"] == totals["kernel_seconds"]


def test_gpukernsum_2021_counts_instances(tmp_path):
    result = aggregate_nsys(write(tmp_path, "gpukernsum.csv", GPUKERNSUM_2021))
    assert result.totals["source_format"] == "nsys-gpukernsum"
    assert result.totals["kernels"] == 64 + 128
    assert result.totals["kernel_seconds"] == pytest.approx((2_913_280 + 1_219_392) * 1e-9, rel=1e-15)
    assert list(result.kernels["instances"]) == [64, 128]


def test_trace_and_summary_of_one_run_agree_and_the_trace_wins(tmp_path):
    trace = write(tmp_path, "run_cuda_gpu_trace.csv", CUDA_GPU_TRACE_2024)
    summary = write(tmp_path, "run_cuda_gpu_kern_sum.csv", KERN_SUM)
    totals = aggregate_nsys([summary, trace]).totals
    assert totals["source_format"] == "nsys-cuda_gpu_trace"
    assert totals["memcpy_seconds"] == pytest.approx(4_992e-9, rel=1e-15)
    assert totals["memset_seconds"] == pytest.approx(2_080e-9, rel=1e-15)


def test_trace_and_summary_of_different_runs_are_refused(tmp_path):
    trace = write(tmp_path, "run_cuda_gpu_trace.csv", CUDA_GPU_TRACE_2024)
    other = write(tmp_path, "other_cuda_gpu_kern_sum.csv", GPUKERNSUM_2021)
    with pytest.raises(ParseError, match="the files are from different runs") as error:
        aggregate_nsys([trace, other])
    assert str(other) in str(error.value)


def test_stats_stdout_with_several_tables_and_notices(tmp_path):
    lines = [
        "Generating SQLite file run.sqlite from run.nsys-rep",
        "Processing [run.sqlite] with [/opt/nvidia/nsight-systems/2024.5.1/host-linux-x64/reports/nvtx_sum.py]... ",
        "", " ** NVTX Range Summary (nvtx_sum):", "", NVTX_SUM,
        "Processing [run.sqlite] with [/opt/nvidia/nsight-systems/2024.5.1/host-linux-x64/reports/cuda_gpu_kern_sum.py]... ",
        "", " ** CUDA GPU Kernel Summary (cuda_gpu_kern_sum):", "", KERN_SUM,
        "Processing [run.sqlite] with [/opt/nvidia/nsight-systems/2024.5.1/host-linux-x64/reports/cuda_gpu_trace.py]... ",
        "", " ** CUDA GPU Trace (cuda_gpu_trace):", "", CUDA_GPU_TRACE_2024]
    result = aggregate_nsys(write(tmp_path, "stats.txt", "\n".join(lines)))
    assert result.totals["kernels"] == 3 and result.totals["source_format"] == "nsys-cuda_gpu_trace"
    assert list(result.nvtx["range"]) == ["rooflow:step"]
    assert result.nvtx.loc[0, "seconds"] == pytest.approx(2.5e-3)


def test_other_time_units_are_converted(tmp_path):
    text = GPUTRACE_2021.replace("Start (ns),Duration (ns)", "Start (us),Duration (us)")
    text = text.replace(",48543,", ",48.543,").replace(",9248,", ",9.248,")
    totals = aggregate_nsys(write(tmp_path, "us.csv", text)).totals
    assert totals["kernel_seconds"] == pytest.approx((48.543 + 9.248) * 1e-6, rel=1e-15)


def test_the_same_report_twice_is_refused(tmp_path):
    first = write(tmp_path, "a.csv", KERN_SUM)
    second = write(tmp_path, "b.csv", KERN_SUM)
    with pytest.raises(ParseError, match="counted twice"):
        aggregate_nsys([first, second])


def test_nvtx_alone_is_not_kernel_time(tmp_path):
    with pytest.raises(ParseError, match="only NVTX ranges"):
        aggregate_nsys(write(tmp_path, "nvtx.csv", NVTX_SUM))


def test_a_memory_summary_is_named_as_unread(tmp_path):
    text = ("Time (%),Total Time (ns),Count,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Operation\n"
            "90.0,1000,3,333.3,300.0,200,500,152.7,[CUDA memcpy Host-to-Device]\n")
    path = write(tmp_path, "mem.csv", text)
    with pytest.raises(ParseError, match="line 1: an nsys stats table rooflow does not read"):
        aggregate_nsys(path)


# ---------------------------------------------------------------------------------------------------
# Malformed input

MALFORMED_CAUSES = {
    "empty.csv": "empty",
    "foreign.csv": "not an nsys stats CSV report",
    "ncu_log_saved_from_github.txt": "HTML page",
    "nsys_cuda_gpu_trace_truncated.csv": "truncated",
    "nsys_stats_no_kernels.txt": "no CUDA kernels",
    "ncu_errnvgpuctrperm.log": "ERR_NVGPUCTRPERM",
    "ncu_text_truncated.txt": "this is Nsight Compute (ncu) output, not an nsys stats report",
    "nsys_profile_no_report.log": "the capture range never opened",
    "ncu_report_binary.ncu-rep": "binary Nsight Compute report (.ncu-rep), not an nsys stats report",
    "nvprof_metrics.csv": "this is nvprof output",
    "ncu_no_kernels.log": "No kernels were profiled",
    "ncu_details_row_too_long.csv": "this is Nsight Compute (ncu) output",
}


@pytest.mark.parametrize("name", sorted(MALFORMED_CAUSES))
def test_malformed_input_raises_one_clear_error(name):
    path = MALFORMED / name
    with pytest.raises(ParseError) as error:
        aggregate_nsys([path])
    message = str(error.value)
    assert str(path) in message and MALFORMED_CAUSES[name] in message
    assert "\n" not in message and message.endswith(".")


def test_truncated_trace_names_the_line():
    with pytest.raises(ParseError, match=r"line 4: malformed CSV .*truncated"):
        aggregate_nsys(MALFORMED / "nsys_cuda_gpu_trace_truncated.csv")


def test_a_row_missing_fields_mid_file(tmp_path):
    lines = CUDA_GPU_TRACE_2024.splitlines()
    lines[2] = "1853298721,48543,1215"
    with pytest.raises(ParseError, match=r"line 3: a row with 3 of the header's 21 fields"):
        aggregate_nsys(write(tmp_path, "bad.csv", "\n".join(lines) + "\n"))


def test_a_negative_time_names_its_line(tmp_path):
    """A negative Duration was summed (a new user's pass): the step's kernel time fell by it, silently."""
    lines = CUDA_GPU_TRACE_2024.splitlines()
    lines[2] = lines[2].replace("1853298721,48543,", "1853298721,-48543,", 1)
    with pytest.raises(ParseError, match=r"line 3: 'Duration \(ns\)' is -48543, and no time nsys reports is "
                                         r"negative: the report was edited or damaged") as error:
        aggregate_nsys(write(tmp_path, "negative.csv", "\n".join(lines) + "\n"))
    assert "\n" not in str(error.value)
    summary = KERN_SUM.replace("26.1,20001,1,", "26.1,-20001,1,")
    with pytest.raises(ParseError, match=r"line 3: 'Total Time \(ns\)' is -20001"):
        aggregate_nsys(write(tmp_path, "negative-sum.csv", summary))


def test_a_trace_of_copies_alone_or_of_an_overflowing_duration_is_refused(tmp_path):
    """A trace whose rows are all memcpy was "0 kernel launches", exit 0 (an import's step time: 0 s); a duration of
    1e400 ns summed to "kernel time inf s". Each is one sentence naming the file."""
    source = trace_path("a100", "vgg11")
    data = source.read_bytes()
    lines = (gzip.decompress(data) if source.suffix == ".gz" else data).decode().splitlines()
    copies = [line for line in lines[1:] if "[CUDA memcpy" in line][:2]
    assert len(copies) == 2
    path = tmp_path / "copies.csv"
    path.write_text("\n".join([lines[0], *copies]) + "\n")
    with pytest.raises(ParseError) as error:
        aggregate_nsys([path])
    assert str(error.value) == (f"{path}: the trace lists 2 memcpy/memset row(s) but no kernel, so the capture range "
                                f"held no kernels or the file is truncated; profile again.")
    header = next(csv.reader([lines[0]]))
    kernel = next(line for line in lines[1:] if "[CUDA mem" not in line)
    fields = next(csv.reader([kernel]))
    fields[header.index("Duration(nsec)")] = "1e400"
    path.write_text("\n".join([lines[0], ",".join(f'"{f}"' if "," in f else f for f in fields)]) + "\n")
    with pytest.raises(ParseError, match=r"line 2: 'Duration\(nsec\)' is '1e400', not a finite number; the report is "
                                         r"damaged"):
        aggregate_nsys([path])


def test_the_same_table_twice_in_one_file_is_refused(tmp_path):
    """`nsys stats ... >> report.csv` run twice: the A100 trace's 214 launches read as 428, its 20.95 ms kernel time
    as 41.9 ms (exit 0); the same report given as two files was already refused."""
    text = trace_path("a100", "vgg11").read_text()
    twice = tmp_path / "twice.csv"
    twice.write_text(text + text)
    second = len(text.splitlines()) + 1
    with pytest.raises(ParseError, match=rf"twice.csv: line {second}: the same trace table as on line 1 again, so its "
                                         r"kernels would be counted twice \(was the file appended to twice\?\)"):
        aggregate_nsys(twice)
    assert aggregate_nsys(trace_path("a100", "vgg11")).totals["kernels"] == 214
