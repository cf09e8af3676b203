"""The ncu/nsys command lines, the metric set per architecture, the log check, and the two sub-commands."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from rooflow.cli import main
from rooflow.errors import ParseError, RooflowError
from rooflow.logs import step_logging
from rooflow.measure.launch import driver_argv, require_nsys_report
from rooflow.profilers.commands import check_profiler_log, ncu_command, nsys_commands, nsys_stats_outputs
from rooflow.profilers.metrics import (
    metrics_for_architecture,
    parse_architecture,
    tensor_flop_metrics,
    tensor_metrics_for_architecture,
    tensor_metrics_for_precision,
)
from rooflow.profilers.ncu import aggregate_ncu

DATA = Path(__file__).resolve().parents[1] / "data"
MALFORMED = DATA / "malformed"
A100_LOG = DATA / "real" / "anoushka21-cloudml" / "proj1" / "a100" / "vgg11" / "ncu-log-vgg11.txt"
A100_TRACE = A100_LOG.with_name("tmp_nsys_gputrace.csv")
NO_IMPORTER_LOG = DATA / "real" / "h100-rooflow" / "nsys-without-qdstrm-importer.log"
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
    assert argv[1:3] == ["-m", "rooflow.measure.driver"]
    assert argv[argv.index("--ncu-mode") + 1] == "distinct"
    assert argv[argv.index("--plan") + 1] == "results/profile/h100/ncu_plan.json"
    assert argv[argv.index("--threads") + 1] == "8" and argv[argv.index("--warmup") + 1] == "10"
    nsys = driver_argv("resnet50", 64, "tf32", "training", "subset.pt", 0, None)
    assert "--ncu-mode" not in nsys and "--plan" not in nsys and nsys[nsys.index("--warmup") + 1] == "1"
    assert "--variant" not in argv + nsys  # an eager step's command is what it was before variants
    compiled = driver_argv("resnet50", 64, "tf32", "training", "subset.pt", 10, 8, ncu_mode="exhaustive",
                           variant="compile")
    assert compiled[compiled.index("--variant") + 1] == "compile"


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
    ("../real/h100-rooflow/nsys-without-qdstrm-importer.log", "install Nsight Systems on the GPU nodes"),
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
    assert list(totals) == ["kernels", "kernel_seconds", "memcpy_seconds", "memset_seconds", "all_rows_seconds",
                            "by_class", "source_format"]
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


# ---------------------------------------------------------------------------------------------------
# nsys without QdstrmImporter (the nsys bundled inside Nsight Compute): one sentence, the cause and the fix

NO_IMPORTER_SENTENCE = ("wrote only a .qdstrm capture ({capture}) and no .nsys-rep report, because it is the nsys "
                        "bundled inside Nsight Compute, which lacks the QdstrmImporter that turns a capture into a "
                        "report; install Nsight Systems on the GPU nodes and set profiling.nsys.executable to its "
                        "nsys, or set profiling.nsys.enabled: false")


def test_the_recorded_log_of_an_nsys_without_importer_is_one_sentence():
    with pytest.raises(ParseError) as error:
        check_profiler_log(NO_IMPORTER_LOG)
    capture = ("/scratch/rooflow/results/profile/h100-sxm5-80gb/vgg16/b64-fp32-training/tmpzu93ydhc/nsys.qdstrm")
    assert str(error.value) == (f"{NO_IMPORTER_LOG}: line 23: /opt/nvidia/nsight-compute/2025.3.1/host/"
                                f"target-linux-x64/nsys " + NO_IMPORTER_SENTENCE.format(capture=capture) + ".")
    assert "does not exist" not in str(error.value)


def test_require_nsys_report(tmp_path):
    stem = tmp_path / "nsys"
    with pytest.raises(RooflowError, match="nsys profile wrote no report nsys.nsys-rep: see log.txt"):
        require_nsys_report(stem, "nsys", "log.txt")
    (tmp_path / "nsys.qdstrm").write_bytes(b"\x00capture")
    with pytest.raises(RooflowError) as error:
        require_nsys_report(stem, "/opt/nsight-compute/nsys", "log.txt")
    assert str(error.value).startswith("/opt/nsight-compute/nsys " + NO_IMPORTER_SENTENCE.format(
        capture=tmp_path / "nsys.qdstrm"))
    (tmp_path / "nsys.nsys-rep").write_bytes(b"report")
    assert require_nsys_report(stem, "nsys", "log.txt") == tmp_path / "nsys.nsys-rep"


# The nsys of the H100 image, replayed: `nsys profile` prints what the recorded log shows and leaves a .qdstrm;
# `nsys stats` would fail with "input file does not exist" (it must not even run).
BUNDLED_NSYS = r"""#!/usr/bin/env bash
echo "$@" >> "{calls}"
if [ "$1" = stats ]; then echo "ERROR: Specified input file ($NSYS_REP) does not exist."; exit 1; fi
while [ $# -gt 0 ]; do [ "$1" = -o ] && stem="$2"; shift; done
echo "Capture range started in the application."
echo "Capture range ended in the application."
echo "Generating '/tmp/nsys-report-c3ba.qdstrm'"
echo "Processing events..."
echo "Generated:"
printf '\t%s.qdstrm\n' "$stem"
printf 'capture' > "$stem.qdstrm"
"""

RUN_PROFILE_NSYS = """
import runpy, sys, types
out = types.SimpleNamespace(trace=sys.argv[1] + "/trace.csv", kern_sum=sys.argv[1] + "/kern_sum.csv")
snakemake = types.SimpleNamespace(
    wildcards=types.SimpleNamespace(model="vgg16", batch="64", precision="fp32", mode="training"),
    params=types.SimpleNamespace(tool={"executable": sys.argv[2], "extra_args": []}, warmup=10,
                                 model={"name": "vgg16"}, variant="eager"),
    input=types.SimpleNamespace(subset="results/dataset/subset.pt"), output=out, threads=2,
    log=[sys.argv[1] + "/nsys.log"])
runpy.run_path("scripts/profile_nsys.py", init_globals={"snakemake": snakemake})
"""


def test_profile_nsys_job_on_a_node_without_the_importer_ends_in_one_sentence(tmp_path):
    """scripts/profile_nsys.py as Snakemake runs it, with a stand-in for the nsys bundled in Nsight Compute."""
    calls = tmp_path / "calls.txt"
    nsys = tmp_path / "nsys"
    nsys.write_text(BUNDLED_NSYS.format(calls=calls))
    nsys.chmod(0o755)
    done = subprocess.run([sys.executable, "-c", RUN_PROFILE_NSYS, str(tmp_path), str(nsys)], cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "profile_nsys failed: " in errors[0] and "does not exist" not in done.stderr
    assert f"{nsys} wrote only a .qdstrm capture" in errors[0]
    assert "install Nsight Systems on the GPU nodes" in errors[0] and "profiling.nsys.enabled: false" in errors[0]
    assert calls.read_text().splitlines()[0].startswith("profile ")
    assert not any(call.startswith("stats") for call in calls.read_text().splitlines())  # never reached
    assert not (tmp_path / "trace.csv").exists() and not (tmp_path / "kern_sum.csv").exists()


# ---------------------------------------------------------------------------------------------------
# No traceback reaches a user: the rooflow command line as a subprocess

def rooflow(*args: str, prefix: tuple[str, ...] = (), **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, sys.executable, "-m", "rooflow", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)), **kwargs)


def test_the_command_line_parser_imports_no_torch():
    """Every command's parser is built before any runs: one that imported torch (rooflow.estimate does) would make
    `rooflow ncu` and every other command wait seconds for it; the commands that count import it themselves."""
    code = ("import sys; from rooflow.cli import build_parser; build_parser(); "
            "print('torch' in sys.modules); sys.exit('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]


def assert_one_line(done: subprocess.CompletedProcess, command: str, *fragments: str) -> None:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"rooflow {command}: error: ")
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.mark.parametrize(("make", "fragments"), [
    (lambda tmp: tmp / "missing.csv", ["missing.csv: no such file; check the path"]),
    (lambda tmp: tmp, [": is a directory, not a profiler output file; give the file(s) inside it"]),
    (lambda tmp: MALFORMED / "ncu_report_binary.ncu-rep", ["ncu_report_binary.ncu-rep: this is a binary Nsight "
                                                           "Compute report", "ncu --import"]),
    (lambda tmp: MALFORMED / "nvprof_metrics.csv", ["nvprof_metrics.csv: line 1: this is nvprof output"]),
    (lambda tmp: MALFORMED / "ncu_details_truncated_midline.csv", ["the file is truncated; profile again"]),
])
@pytest.mark.parametrize("command", ["ncu", "nsys"])
def test_cli_bad_input_is_one_line_without_traceback(command, make, fragments, tmp_path):
    path = make(tmp_path)
    done = rooflow(command, str(path))
    assert_one_line(done, command, str(path))
    if command == "ncu" or "truncated" not in fragments[0]:
        for fragment in fragments:
            assert fragment in done.stderr


def _without_root_file_access() -> tuple[str, ...]:
    """A prefix that makes permission bits apply to this user (root reads any file otherwise)."""
    if os.geteuid() != 0:
        return ()
    if not shutil.which("setpriv"):
        pytest.skip("running as root without setpriv: no way to be refused a file")
    return ("setpriv", "--inh-caps=-dac_override,-dac_read_search", "--bounding-set=-dac_override,-dac_read_search")


@pytest.mark.parametrize("command", ["ncu", "nsys"])
def test_cli_unreadable_file_is_one_line(command, tmp_path):
    path = tmp_path / "ncu.csv"
    path.write_text("x")
    path.chmod(0)
    done = rooflow(command, str(path), prefix=_without_root_file_access())
    assert_one_line(done, command, f"{path}: permission denied; check the file's permissions")


def test_cli_missing_input_of_any_command_is_one_line(tmp_path):
    """Not a parser's ParseError: the OSError of whatever opens the file, turned into one line centrally."""
    missing = tmp_path / "summary.csv"
    done = rooflow("checks", str(missing), "--estimates", str(tmp_path))
    assert_one_line(done, "checks", f"{missing}: no such file or directory; check the path")


def test_cli_ctrl_c_exits_130_with_one_line(tmp_path):
    """Interrupted while reading its input (a FIFO that never delivers): status 130, one line, no traceback."""
    fifo = tmp_path / "ncu.fifo"
    os.mkfifo(fifo)
    # SIGINT's default disposition, as in a terminal: a shell that starts the tests in the background leaves
    # SIGINT ignored, and Python then installs no KeyboardInterrupt handler
    process = subprocess.Popen([sys.executable, "-m", "rooflow", "ncu", str(fifo)], cwd=ROOT, text=True,
                               env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    with open(fifo, "w") as writer:  # returns once rooflow has opened the FIFO: it is now waiting for data
        writer.write("==PROF== Connected to process 1\n")
        writer.flush()
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130
    assert stderr.strip() == "rooflow ncu: interrupted" and "Traceback" not in stderr


# ---------------------------------------------------------------------------------------------------
# ... nor from a rule script (rooflow.logs.step_logging)

STEP = r"""
import sys
from rooflow.logs import step_logging
from rooflow.errors import RooflowError
with step_logging(sys.argv[1], "some_step"):
    kind = sys.argv[2]
    if kind == "rooflow":
        raise RooflowError("results/x.json: the estimate is missing\ntwo lines; run the estimate rule")
    if kind == "missing":
        open("results/does-not-exist.csv")
    if kind == "directory":
        open(sys.argv[1].rsplit("/", 1)[0])
    if kind == "binary":
        bytes(range(128, 256)).decode()
    if kind == "interrupt":
        raise KeyboardInterrupt
    if kind == "bug":
        raise ValueError("a bug: keep its traceback")
"""


@pytest.mark.parametrize(("kind", "status", "fragment"), [
    ("rooflow", 1, "some_step failed: results/x.json: the estimate is missing two lines; run the estimate rule"),
    ("missing", 1, "some_step failed: results/does-not-exist.csv: no such file or directory; check the path"),
    ("directory", 1, ": is a directory, not a file; give the file inside it."),
    ("binary", 1, "some_step failed: an input file is not text (invalid start byte at byte 0)"),
    ("interrupt", 130, "some_step interrupted (Ctrl-C or SIGINT): no output was written"),
])
def test_rule_script_failures_are_one_logged_sentence(kind, status, fragment, tmp_path):
    log = tmp_path / "step.log"
    done = subprocess.run([sys.executable, "-c", STEP, str(log), kind], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == status
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and " ERROR rooflow.some_step: " in lines[0] and fragment in lines[0], done.stderr
    assert fragment in log.read_text()  # and the job's log file says it too


def test_a_bug_in_a_rule_script_keeps_its_traceback(tmp_path):
    done = subprocess.run([sys.executable, "-c", STEP, str(tmp_path / "step.log"), "bug"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 1 and "Traceback" in done.stderr and "ValueError: a bug" in done.stderr


def test_step_log_keeps_what_a_profiled_program_appended(tmp_path):
    """A profiler started by the step appends its program's output to the step's log; the step's own later
    lines go after it, not over it (on the H100 a handle opened "w" overwrote the driver's traceback)."""
    log = tmp_path / "step.log"
    log.write_text("a previous run's log\n")
    with step_logging(log, "some_step") as logger:
        logger.info("running the profiler")
        with open(log, "a") as sink:  # what run_tool does with the profiled program's output
            subprocess.run([sys.executable, "-c", "print('Traceback of the profiled program\\n' * 3)"],
                           stdout=sink, check=True)
        logger.error("the profiler failed")
    logging.shutdown()
    text = log.read_text()
    assert "a previous run's log" not in text  # emptied at the start of the step
    assert text.count("Traceback of the profiled program") == 3
    assert text.index("running the profiler") < text.index("Traceback of") < text.index("the profiler failed")
