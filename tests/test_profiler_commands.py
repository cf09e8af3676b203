"""The ncu/nsys command lines, the metric set per architecture, the log check, and the two sub-commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rooflow.cli import main
from rooflow.errors import ParseError, RooflowError
from rooflow.profile_run import driver_argv
from rooflow.profilers.commands import check_profiler_log, ncu_command, nsys_commands, nsys_stats_outputs
from rooflow.profilers.metrics import (
    metrics_for_architecture,
    parse_architecture,
    tensor_flop_metrics,
    tensor_metrics_for_architecture,
    tensor_metrics_for_precision,
)
from rooflow.profilers.ncu import aggregate_ncu

DATA = Path(__file__).parent / "data"
MALFORMED = DATA / "malformed"
A100_LOG = DATA / "real" / "anoushka21-cloudml" / "proj1" / "a100" / "vgg11" / "ncu-log-vgg11.txt"
A100_TRACE = A100_LOG.with_name("tmp_nsys_gputrace.csv")
DRIVER = ["python", "-m", "rooflow", "time", "--one-iteration", "--model", "resnet18"]


# ---------------------------------------------------------------------------------------------------
# Command lines


def test_ncu_command():
    command = ncu_command("ncu", ["dram__bytes_read.sum", "gpu__time_duration.sum"], Path("logs/ncu.csv"), DRIVER,
                          ["--clock-control", "base"])
    assert command == ["ncu", "--profile-from-start", "off", "--target-processes", "all", "--nvtx", "--csv",
                       "--page", "details", "--metrics", "dram__bytes_read.sum,gpu__time_duration.sum",
                       "--log-file", "logs/ncu.csv", "--clock-control", "base", *DRIVER]
    # --nvtx writes each kernel's NVTX stack (phase/layer ranges, rooflow:sig:<k>) into the CSV
    assert "--nvtx" not in ncu_command("ncu", ["gpu__time_duration.sum"], "x.csv", DRIVER, nvtx=False)


def test_driver_argv_runs_the_driver_module_with_the_ncu_mode_and_plan():
    argv = driver_argv("resnet50", 64, "tf32", "training", "results/dataset/subset.pt", 10, 8,
                       ncu_mode="distinct", plan="results/profile/h100/ncu_plan.json")
    assert argv[1:3] == ["-m", "rooflow.driver"]
    assert argv[argv.index("--ncu-mode") + 1] == "distinct"
    assert argv[argv.index("--plan") + 1] == "results/profile/h100/ncu_plan.json"
    assert argv[argv.index("--threads") + 1] == "8" and argv[argv.index("--warmup") + 1] == "10"
    nsys = driver_argv("resnet50", 64, "tf32", "training", "subset.pt", 0, None)
    assert "--ncu-mode" not in nsys and "--plan" not in nsys and nsys[nsys.index("--warmup") + 1] == "1"


def test_ncu_command_needs_metrics_and_a_driver():
    with pytest.raises(ValueError):
        ncu_command("ncu", [], "x.csv", DRIVER)
    with pytest.raises(ValueError):
        ncu_command("ncu", ["gpu__time_duration.sum"], "x.csv", [])


def test_nsys_commands():
    profile, stats = nsys_commands("/opt/nsys/bin/nsys", "results/profile/a100/resnet18/b64-fp32-training/nsys",
                                   DRIVER, ["--cuda-memory-usage", "true"])
    stem = "results/profile/a100/resnet18/b64-fp32-training/nsys"
    assert profile == ["/opt/nsys/bin/nsys", "profile", "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
                       "-t", "cuda,nvtx", "-o", stem, "--force-overwrite", "true", "--cuda-memory-usage", "true",
                       *DRIVER]
    assert stats == ["/opt/nsys/bin/nsys", "stats", "--report", "cuda_gpu_kern_sum,cuda_gpu_trace", "--format", "csv",
                     "--force-export", "true", "--output", stem, f"{stem}.nsys-rep"]
    assert nsys_stats_outputs(stem) == [Path(f"{stem}_cuda_gpu_kern_sum.csv"), Path(f"{stem}_cuda_gpu_trace.csv")]


# ---------------------------------------------------------------------------------------------------
# Metric sets

SASS = [f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum"
        for op in ("dadd", "dmul", "dfma", "fadd", "fmul", "ffma", "hadd", "hmul", "hfma")]
MEMORY_AND_TIME = ["dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum", "l1tex__t_bytes.sum",
                   "gpu__time_duration.sum"]
SRC = "sm__ops_path_tensor_src_"


@pytest.mark.parametrize(("arch", "tensor"), [
    ("sm_70", ["sm__inst_executed_pipe_tensor.sum"]),
    ("sm_75", [f"{SRC}fp16_dst_fp16.sum", f"{SRC}fp16_dst_fp32.sum"]),
    ("sm_80", [f"{SRC}fp16_dst_fp16.sum", f"{SRC}fp16_dst_fp32.sum", f"{SRC}bf16_dst_fp32.sum",
               f"{SRC}tf32_dst_fp32.sum", f"{SRC}fp64.sum"]),
    ("sm_86", [f"{SRC}fp16_dst_fp16.sum", f"{SRC}fp16_dst_fp32.sum", f"{SRC}bf16_dst_fp32.sum",
               f"{SRC}tf32_dst_fp32.sum"]),
    ("sm_89", [f"{SRC}fp16_dst_fp16.sum", f"{SRC}fp16_dst_fp32.sum", f"{SRC}bf16_dst_fp32.sum",
               f"{SRC}tf32_dst_fp32.sum", f"{SRC}fp8.sum"]),
    ("sm_90", [f"{SRC}fp16.sum", f"{SRC}bf16_dst_fp32.sum", f"{SRC}tf32_dst_fp32.sum", f"{SRC}fp64.sum",
               f"{SRC}fp8.sum"]),
])
def test_metrics_for_architecture(arch, tensor):
    metrics = metrics_for_architecture(arch)
    assert metrics == SASS + tensor + MEMORY_AND_TIME
    assert len(set(metrics)) == len(metrics)
    assert not any("sparsity" in name for name in metrics)


REDUCED_MEMORY = ["dram__bytes.sum", "lts__t_bytes.sum", "l1tex__t_bytes.sum", "gpu__time_duration.sum"]


@pytest.mark.parametrize(("arch", "precision", "tensor"), [
    ("sm_90", "fp32", ["tf32_dst_fp32"]),
    ("sm_90", "tf32", ["tf32_dst_fp32"]),
    ("sm_90", "fp16", ["fp16", "tf32_dst_fp32"]),
    ("sm_90", "bf16", ["bf16_dst_fp32", "tf32_dst_fp32"]),
    ("sm_80", "fp16", ["fp16_dst_fp16", "fp16_dst_fp32", "tf32_dst_fp32"]),
    ("sm_89", "bf16", ["bf16_dst_fp32", "tf32_dst_fp32"]),
    ("sm_75", "fp32", ["fp16_dst_fp32"]),  # no TF32 on Turing: its FP16 path keeps a tensor counter
    ("sm_75", "fp16", ["fp16_dst_fp16", "fp16_dst_fp32"]),
])
def test_metrics_per_precision_keep_only_the_tensor_paths_the_precision_can_use(arch, precision, tensor):
    metrics = metrics_for_architecture(arch, precision)
    assert metrics == SASS + [f"{SRC}{source}.sum" for source in tensor] + REDUCED_MEMORY
    assert metrics_for_architecture(arch, precision, hierarchical=False) == \
        SASS + [f"{SRC}{source}.sum" for source in tensor] + ["dram__bytes.sum", "gpu__time_duration.sum"]


def test_volta_keeps_its_one_tensor_counter_for_every_precision():
    for precision in ("fp32", "tf32", "fp16", "bf16"):
        assert tensor_metrics_for_precision("sm_70", precision) == ["sm__inst_executed_pipe_tensor.sum"]
    assert tensor_metrics_for_precision("sm_61", "fp16") == []
    with pytest.raises(RooflowError, match="precision 'int8'"):
        tensor_metrics_for_precision("sm_90", "int8")


H100 = DATA / "real" / "h100-rooflow"


@pytest.mark.parametrize("path", sorted(p.name for p in H100.glob("*-ncu*.csv.gz") if "-raw-" not in p.name))
def test_the_reduced_metric_list_leaves_every_recorded_total_unchanged(path):
    """The H100 recordings collected the full list; the counters the reduced list drops hold zero there, and
    the SASS counters it keeps are not all zero even in fp32 runs (FP16 hfma everywhere, FP64 dfma in two)."""
    precision = path.split("-")[2]
    wide = aggregate_ncu(H100 / path).metrics
    kept = set(metrics_for_architecture("sm_90", precision))
    dropped_tensor = [m for m in wide.columns if m.startswith(SRC) and m not in kept]
    assert dropped_tensor and wide[dropped_tensor].sum().sum() == 0
    kept_tensor = [m for m in wide.columns if m.startswith(SRC) and m in kept]
    assert wide[kept_tensor].sum().sum() == (wide[[m for m in wide.columns if m.startswith(SRC)]].sum().sum())
    assert wide["smsp__sass_thread_inst_executed_op_hfma_pred_on.sum"].sum() > 0


def test_turing_has_no_bf16_or_tf32_and_volta_no_ops_path():
    assert not any("bf16" in m or "tf32" in m for m in tensor_metrics_for_architecture("sm_75"))
    assert not any(m.startswith(SRC) for m in tensor_metrics_for_architecture("sm_70"))
    assert tensor_metrics_for_architecture("sm_61") == []


@pytest.mark.parametrize(("text", "cc"), [("sm_80", 80), ("sm80", 80), ("8.0", 80), ("80", 80), ("sm_90a", 90),
                                          ("compute_86", 86), (75, 75)])
def test_parse_architecture(text, cc):
    assert parse_architecture(text) == cc


def test_parse_architecture_rejects_names():
    with pytest.raises(RooflowError, match="sm_XY"):
        parse_architecture("A100")


def test_the_collected_metrics_of_each_architecture_are_counted_once():
    """What metrics_for_architecture asks for, tensor_flop_metrics sums — every name exactly once."""
    for arch in ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90"):
        requested = tensor_metrics_for_architecture(arch)
        sparsity = [name.replace(".sum", "_sparsity_on.sum") for name in requested]
        assert tensor_flop_metrics(requested + sparsity) == sorted(requested)
    both = [f"{SRC}fp16.sum", f"{SRC}fp16_dst_fp32.sum", f"{SRC}fp16_dst_fp16.sum", f"{SRC}int8.sum"]
    assert tensor_flop_metrics(both) == [f"{SRC}fp16.sum"]


# ---------------------------------------------------------------------------------------------------
# Log check


@pytest.mark.parametrize(("name", "cause"), [
    ("ncu_errnvgpuctrperm.log", "NVreg_RestrictProfilingToAdminUsers=0"),
    ("ncu_no_kernels.log", "No kernels were profiled"),
    ("ncu_failed_metric.log", "Failed to find metric sm__ops_path_tensor_src_fp64.sum"),
    ("nsys_stats_no_kernels.txt", "no CUDA kernels"),
    ("nsys_profile_no_report.log", "the capture range never opened"),
])
def test_check_profiler_log_raises(name, cause):
    path = MALFORMED / name
    with pytest.raises(ParseError) as error:
        check_profiler_log(path)
    assert str(path) in str(error.value) and cause in str(error.value)


def test_check_profiler_log_passes_a_good_log():
    assert check_profiler_log(A100_LOG) is None


# ---------------------------------------------------------------------------------------------------
# rooflow ncu / rooflow nsys

NCU_KEYS = ["kernels", "flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor", "flops_total", "dram_bytes",
            "l2_bytes", "l1_bytes"]


def test_rooflow_ncu_json(capsys):
    assert main(["ncu", str(A100_LOG), "--format", "json"]) == 0
    totals = json.loads(capsys.readouterr().out)
    assert list(totals) == NCU_KEYS + ["metrics_collected", "tensor_metrics_collected", "source_format"]
    assert totals["dram_bytes"] == 9_790_409_380 and totals["flops_fp32"] == 11_771_359_163
    assert totals["flops_tensor"] is None and totals["tensor_metrics_collected"] is False


def test_rooflow_ncu_json_with_seconds(capsys, tmp_path):
    raw = DATA / "real" / "meinie0826-roofline-analysis/decodebench/results/ncu/torch_sdpa_flash__gqa_bf16_b64_ctx4k_p64.ncu.csv"
    kernels_csv = tmp_path / "kernels.csv"
    assert main(["ncu", str(raw), "--format", "json", "--kernels-csv", str(kernels_csv)]) == 0
    totals = json.loads(capsys.readouterr().out)
    assert list(totals) == NCU_KEYS + ["seconds", "metrics_collected", "tensor_metrics_collected", "source_format"]
    assert kernels_csv.read_text().splitlines()[0] == ("id,name,kernel_class,flops_fp64,flops_fp32,flops_fp16,"
                                                       "flops_tensor,flops_total,dram_bytes,l2_bytes,l1_bytes,seconds,"
                                                       "grid_size,block_size,nvtx_stack")


def test_rooflow_ncu_table(capsys):
    assert main(["ncu", str(A100_LOG)]) == 0
    out = capsys.readouterr().out
    assert "FLOPs fp32 (CUDA cores)  11.77 GFLOP" in out
    assert "DRAM traffic             9.79 GB" in out
    assert "FLOPs tensor cores       not collected" in out
    assert "TF32/FP16/BF16 tensor-core work is NOT in these FLOPs" in out


def test_rooflow_nsys(capsys):
    assert main(["nsys", str(A100_TRACE), "--format", "json"]) == 0
    totals = json.loads(capsys.readouterr().out)
    assert list(totals) == ["kernels", "kernel_seconds", "memcpy_seconds", "all_rows_seconds", "by_class",
                            "source_format"]
    assert round(totals["kernel_seconds"] * 1e3, 2) == 20.95
    assert main(["nsys", str(A100_TRACE)]) == 0
    out = capsys.readouterr().out
    assert "kernel time" in out and "20.95 ms" in out and "141.3 ms" in out and "NOT the step's time" in out


@pytest.mark.parametrize("command", ["ncu", "nsys"])
def test_user_errors_exit_2_with_one_line(command, capsys):
    path = MALFORMED / "foreign.csv"
    assert main([command, str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"rooflow {command}: error: {path}: line 1:")
    assert "\n" not in err
