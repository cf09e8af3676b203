"""`rooflow doctor`: the table on this CPU-only machine, each failure mode with a stand-in ncu/nsys, and the GPU
sequence's comparisons on the recorded H100 files (no GPU was at hand when this was written)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from conftest import ROOT, report_line
from support import NVTX_RECORDING

from rooflow.hardware.devices import load_devices
from rooflow.measure.doctor import (
    GPU_CHECKS,
    NO_GPU,
    catalogue_check,
    compare_profiles,
    counters_check,
    exit_status,
    format_table,
    metrics_check,
    missing_metrics,
    nsys_build,
    nsys_check,
    profiled_timeline,
    program_error,
    run_doctor,
    timeline_check,
    tool_check,
)
from rooflow.measure.timeline import parse_trace
from rooflow.profilers.metrics import metrics_for_architecture
from rooflow.profilers.ncu import aggregate_ncu

MALFORMED = ROOT / "tests" / "data" / "malformed"
H100 = ROOT.parent / "shared" / "fixtures" / "real" / "h100-rooflow"
DEVICES = load_devices(ROOT / "config" / "devices.yaml")
# The H100 SXM5 as torch reports it: 132 SMs, 79.1 GiB usable of the marketed 80 GB, sm_90.
H100_SEEN = {"name": "NVIDIA H100 80GB HBM3", "sm_count": 132, "memory_bytes": 84_934_656_000, "architecture": "sm_90"}

# A stand-in ncu: --version, --query-metrics (the listing in $LISTING), or a profile whose --log-file gets
# the recorded output in $NCU_OUTPUT.
NCU = r"""#!/usr/bin/env bash
if [ "$1" = --version ]; then echo "NVIDIA (R) Nsight Compute Command Line Profiler"; echo "Version 2025.3.1.0"; exit 0; fi
if [ "$1" = --query-metrics ]; then cat "$LISTING"; exit 0; fi
while [ $# -gt 0 ]; do [ "$1" = --log-file ] && log="$2"; shift; done
cat "$NCU_OUTPUT" > "$log"
"""


@pytest.fixture
def ncu(tmp_path, monkeypatch):
    path = tmp_path / "bin" / "ncu"
    path.parent.mkdir()
    path.write_text(NCU)
    path.chmod(0o755)
    listing = tmp_path / "listing.txt"
    listing.write_text("".join(f"{m.rsplit('.', 1)[0]}  Counter  a description\n"
                               for m in metrics_for_architecture("sm_90")))
    monkeypatch.setenv("LISTING", str(listing))
    return path


def test_doctor_on_this_cpu_only_machine_prints_its_table_and_exits_0(tmp_path):
    """Run from outside the checkout, as on a cluster node's home directory: the catalogue is the checkout's (it
    was config/devices.yaml of the working directory, so `rooflow doctor` worked in the checkout only)."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the GPU checks run")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "rooflow", "doctor", "--device", "h100-sxm5-80gb",
                           "--json", str(tmp_path / "doctor.json"), "--files", str(tmp_path / "files")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT), PATH="/usr/bin:/bin"))
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads((tmp_path / "doctor.json").read_text())["checks"]
    assert [r["check"] for r in rows if r["result"] == NO_GPU] == list(GPU_CHECKS)
    assert {r["check"] for r in rows} >= {"python", "torch", "CUDA build", "ncu", "nsys", "Triton (L2 roof)",
                                          "scratch space", "job memory limit"}
    ncu_row = next(r for r in rows if r["check"] == "ncu")
    assert ncu_row["status"] == "warning" and "not on PATH" in ncu_row["result"]  # a login node: not a failure
    for row in rows:
        assert row["check"] in done.stdout
    assert not (tmp_path / "files").exists()  # nothing written without a GPU
    report_line(f"rooflow doctor without a GPU: {seconds:.1f} s")


def test_an_unknown_device_key_is_refused_before_any_check(tmp_path, capsys):
    """On a machine without a GPU the catalogue check is skipped, and `--device h100` (no such key) passed."""
    from rooflow import cli

    assert cli.main(["doctor", "--device", "h100", "--json", str(tmp_path / "doctor.json")]) == 2
    error = capsys.readouterr().err.strip()
    assert "device 'h100' is not in" in error and "(its H100 boards: h100-pcie-80gb, h100-sxm5-80gb)" in error
    assert "\n" not in error and not (tmp_path / "doctor.json").exists()


def test_the_gpu_vs_catalogue_check():
    assert catalogue_check(None, DEVICES, "h100-sxm5-80gb")["result"] == NO_GPU
    # in a SLURM job for a GPU device, no GPU is the failure the preflight is for (a job whose gres granted none)
    failed = catalogue_check(None, DEVICES, "h100-sxm5-80gb", job="4242")
    assert failed["status"] == "fail" and failed["result"].startswith(
        "no GPU visible in SLURM job 4242 for GPU device 'h100-sxm5-80gb'") and "gres" in failed["fix"]
    assert catalogue_check(None, DEVICES, "cpu", job="4242")["result"] == NO_GPU  # a CPU job needs none
    ok = catalogue_check(H100_SEEN, DEVICES, "h100-sxm5-80gb")
    assert ok["status"] == "ok" and ok["result"].endswith("= h100-sxm5-80gb")
    wrong = catalogue_check(H100_SEEN, DEVICES, "h100-pcie-80gb")  # 114 SMs in the catalogue
    assert wrong["status"] == "fail" and "h100-pcie-80gb says 114 SMs" in wrong["result"]
    assert wrong["fix"].startswith("this node's GPU is catalogue entry h100-sxm5-80gb")
    found = catalogue_check(H100_SEEN, DEVICES, None)
    assert found["status"] == "ok" and "catalogue entry h100-sxm5-80gb" in found["result"]
    unknown = catalogue_check({**H100_SEEN, "name": "NVIDIA B300", "sm_count": 160}, DEVICES, None)
    assert unknown["status"] == "warning" and "config/devices.yaml" in unknown["fix"]
    assert catalogue_check(H100_SEEN, DEVICES, "h100")["status"] == "fail"


@pytest.mark.parametrize(("output", "status", "fragment"), [
    (MALFORMED / "ncu_errnvgpuctrperm.log", "fail", "NVreg_RestrictProfilingToAdminUsers=0"),
    (MALFORMED / "ncu_no_kernels.log", "fail", "No kernels were profiled"),
    (MALFORMED / "ncu_failed_metric.log", "fail", ""),
])
def test_each_counter_failure_prints_its_fix(ncu, tmp_path, monkeypatch, output, status, fragment):
    monkeypatch.setenv("NCU_OUTPUT", str(output))
    row = counters_check(str(ncu), tmp_path)
    assert row["status"] == status
    assert fragment in row["result"] + row["fix"]
    if "ERR_NVGPUCTRPERM" in output.name:
        assert row["result"] == "no permission for the GPU performance counters (ERR_NVGPUCTRPERM)"


def test_readable_counters(ncu, tmp_path, monkeypatch):
    good = tmp_path / "good.csv"
    good.write_text('"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n'
                    '"0","vectorized_elementwise_kernel","smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",'
                    '"inst","1048576"\n')
    monkeypatch.setenv("NCU_OUTPUT", str(good))
    assert counters_check(str(ncu), tmp_path) == {
        "check": "ncu counters", "status": "ok", "result": "readable: 1 kernel(s) profiled (ncu-counters.csv)",
        "fix": ""}


def test_the_metrics_rooflow_asks_for(ncu, tmp_path, monkeypatch):
    wanted = metrics_for_architecture("sm_90")
    listing = "\n".join(m.rsplit(".", 1)[0] + "  Counter  x" for m in wanted[1:])
    assert missing_metrics(wanted, listing) == wanted[:1]
    assert missing_metrics(wanted, listing + "\n" + wanted[0].rsplit(".", 1)[0]) == []
    assert metrics_check(str(ncu), "sm_90")["status"] == "ok"
    (tmp_path / "listing.txt").write_text(listing)
    row = metrics_check(str(ncu), "sm_90")
    assert row["status"] == "fail" and row["result"].startswith(f"1 of {len(wanted)} unknown to this ncu on sm_90")


def test_nsys_full_or_bundled(tmp_path):
    full = tmp_path / "nsight-systems" / "2025.1" / "target-linux-x64" / "nsys"
    bundled = tmp_path / "opt" / "nvidia" / "nsight-compute" / "2025.3.1" / "host" / "target-linux-x64" / "nsys"
    for path in (full, bundled):
        path.parent.mkdir(parents=True)
        path.write_text("#!/bin/sh\necho 'NVIDIA Nsight Systems version 2025.1'\n")
        path.chmod(0o755)
    (full.parent.parent / "host-linux-x64").mkdir()
    (full.parent.parent / "host-linux-x64" / "QdstrmImporter").write_text("")
    assert (nsys_build(full), nsys_build(bundled)) == ("full", "bundled with ncu")
    assert nsys_check(str(full), True)["status"] == "ok"
    row = nsys_check(str(bundled), True)
    assert row["status"] == "warning" and "bundled with ncu" in row["result"]
    assert "profiling.nsys.enabled: false" in row["fix"]
    assert nsys_check(str(tmp_path / "absent"), True)["status"] == "fail"


def test_without_counter_permission_the_step_checks_are_skipped(ncu, tmp_path, monkeypatch):
    monkeypatch.setenv("NCU_OUTPUT", str(MALFORMED / "ncu_errnvgpuctrperm.log"))
    rows = run_doctor("h100-sxm5-80gb", ROOT / "config" / "devices.yaml", tmp_path / "files", str(ncu),
                      str(tmp_path / "nsys"), gpu=H100_SEEN)
    by = {r["check"]: r for r in rows}
    assert by["ncu counters"]["status"] == "fail" and by["ncu metrics"]["status"] == "ok"
    assert by["ncu distinct vs exhaustive"]["result"] == "skipped: ncu cannot read counters"
    assert exit_status(rows) == 1
    fix = next(line for line in format_table(rows).splitlines() if "->" in line and "admins" in line)
    assert fix.strip().startswith("-> the cluster's driver restricts them to administrators; ask the admins to "
                                  "load the NVIDIA driver with NVreg_RestrictProfilingToAdminUsers=0")


# -- the GPU sequence's comparisons, on the recorded H100 files ---------------------------------------------

def test_distinct_vs_exhaustive_on_the_recorded_step(stand_in):  # noqa: F811
    csv_path, plan = stand_in
    row = compare_profiles(csv_path, plan, NVTX_RECORDING)
    assert row["status"] == "ok", row
    assert row["result"].startswith("86 kernels profiled for 194 launches (exhaustive 194); flops_total +0.00%")
    broken = compare_profiles(NVTX_RECORDING, plan, NVTX_RECORDING)  # a filter that caught nothing
    assert broken["status"] == "fail" and broken["result"].startswith("NVTX filter caught nothing: ")
    assert "profiling.ncu.mode: exhaustive" in broken["fix"]


@pytest.mark.skipif(not H100.is_dir(), reason="needs ../shared/fixtures")
def test_timeline_vs_ncu_on_the_recorded_h100_step():
    """The timing job's torch.profiler timeline and ncu's profile of ResNet-50 b64 tf32 inference: two processes,
    cuDNN picked other convolution/GEMM algorithms in each (244 vs 241 kernels)."""
    timeline = parse_trace(H100 / "torch-profiler-resnet50-b64-tf32-inference.json.gz")
    kernels = aggregate_ncu(H100 / "resnet50-b64-tf32-inference-ncu.csv.gz").kernels
    row = timeline_check(timeline, kernels)
    assert row["status"] == "warning" and row["result"].startswith("the timed iteration ran 244 kernels, ncu "
                                                                   "profiled 241")
    assert "autotuning" in row["fix"]
    assert timeline_check(kernels, kernels) == {"check": "timeline vs ncu", "status": "ok",
                                                "result": "the same 241 kernels", "fix": ""}


def test_the_doctors_timeline_capture_runs_the_timing_jobs_capture(tmp_path):
    """The doctor's "timeline vs ncu" check captures one iteration as the timing job does. On the lent H200
    (gpu-2026-11-27/doctor-h200.txt) it failed with "too many values to unpack": capture_iteration had grown
    a third return value (the op times) that the doctor did not take. On this CPU the same capture runs and
    returns the (empty) kernel timeline."""
    from rooflow.measure.timeline import TIMELINE_COLUMNS
    from rooflow.measure.timing import RunSpec
    from rooflow.workload.dataset import SubsetSpec, build_subset

    build_subset(SubsetSpec(classes=2, images_per_class=2), tmp_path / "subset.pt", tmp_path / "subset.csv")
    timeline = profiled_timeline(RunSpec("squeezenet1_1", 2, "fp32", "training", "cpu", 3, 1), tmp_path / "subset.pt")
    assert list(timeline.columns) == list(TIMELINE_COLUMNS) and timeline.empty


def test_a_failed_profile_names_the_programs_exception(tmp_path):
    """The H100's doctor said only "see the logs": the row now names what the profiled program raised."""
    log = tmp_path / "ncu-distinct.log"
    log.write_text("==PROF== Connected to process 1\nTraceback (most recent call last):\n  File \"x.py\", line 1\n"
                   "AttributeError: module 'torch.autograd.graph' has no attribute 'node_creation_hook'\n"
                   "==PROF== Disconnected: the application returned an error code (1)\n")
    assert program_error(log) == ("AttributeError: module 'torch.autograd.graph' has no attribute "
                                  "'node_creation_hook'")
    assert program_error(tmp_path / "missing.log") is None
    log.write_text("==WARNING== Note: Running with default clock control\n")
    assert program_error(log) is None


def test_a_program_that_is_not_the_profiler_is_not_ok(tmp_path):
    """`doctor --ncu PATH` said "ncu OK" of whatever ran: the nsys given as ncu (and ncu as nsys), /bin/true, a script
    exiting 3; a full path to nothing was "not on PATH". The check exists to catch a wrong profiling.ncu.executable
    on a login node, where it is the only check of it."""
    tools = {"ncu": "echo 'NVIDIA (R) Nsight Compute Command Line Profiler'; echo 'Version 2025.3.1.0'",
             "nsys": "echo 'NVIDIA Nsight Systems version 2025.1'", "broken": "exit 3", "quiet": "true"}
    for name, body in tools.items():
        (tmp_path / name).write_text(f"#!/bin/sh\n{body}\n")
        (tmp_path / name).chmod(0o755)
    ncu, nsys = str(tmp_path / "ncu"), str(tmp_path / "nsys")
    assert tool_check("ncu", ncu, True)[0]["status"] == "ok"
    row, found = tool_check("ncu", nsys, True)
    assert (row["status"], found) == ("fail", None)
    assert row["result"] == f"{nsys} is not Nsight Compute (its --version says 'NVIDIA Nsight Systems version 2025.1')"
    assert row["fix"] == "set profiling.ncu.executable to Nsight Compute's ncu"
    row = nsys_check(ncu, True)
    assert row["status"] == "fail" and row["result"] == (
        f"{ncu} is not Nsight Systems (its --version says 'NVIDIA (R) Nsight Compute Command Line Profiler')")
    assert tool_check("ncu", str(tmp_path / "broken"), True)[0]["result"] == (
        f"{tmp_path / 'broken'} --version exited 3, printing nothing")
    assert tool_check("ncu", str(tmp_path / "quiet"), False)[0] == {
        "check": "ncu", "status": "warning", "result": f"{tmp_path / 'quiet'} is not Nsight Compute (its --version "
        "prints nothing)", "fix": "set profiling.ncu.executable to Nsight Compute's ncu"}
    assert tool_check("ncu", str(tmp_path / "absent" / "ncu"), False)[0]["result"] == (
        f"'{tmp_path / 'absent' / 'ncu'}' is not an executable file")
