"""The real workflow, end to end, on a tiny config in a temp directory: outputs, report, no-op re-run,
and a one-model change that re-runs only that model's jobs."""

from __future__ import annotations

import json
import re
import subprocess

import pandas as pd
import pytest
import yaml

pytestmark = pytest.mark.slow

CONFIG = "tests/configs/tiny.yaml"


def snakemake(exe, workdir, *args, timeout=1500):
    result = subprocess.run([exe, "--cores", "2", "--configfile", CONFIG, *args], cwd=workdir,
                            capture_output=True, text=True, timeout=timeout)
    return result


@pytest.fixture(scope="module")
def run(tiny_run):
    return tiny_run


def test_summary_has_one_ok_row_per_run(run):
    summary = pd.read_csv(run / "results" / "summary.csv")
    config = yaml.safe_load((run / CONFIG).read_text())
    expected = len(config["models"]) * len(config["batch_sizes"]) * len(config["modes"])
    assert len(summary) == expected + len(config["imports"])
    assert (summary["status"] == "ok").all()
    summary = summary[summary["device"] == "cpu"]
    assert len(summary) == expected
    for column in ("estimated_flops", "measured_seconds", "achieved_flops_per_second", "arithmetic_intensity",
                   "attainable_flops_per_second", "percent_of_roofline"):
        assert (summary[column] > 0).all(), column
    assert set(summary["bound"]) <= {"memory-bound", "compute-bound"}
    # a training step costs more than inference of the same batch (forward + backward + update)
    pivot = summary.pivot_table(index=["model", "batch"], columns="mode", values="estimated_flops")
    assert (pivot["training"] > 2.5 * pivot["inference"]).all()
    # achieved = flops / seconds, percent = achieved / attainable
    assert (summary["achieved_flops_per_second"] - summary["flops"] / summary["measured_seconds"]).abs().max() < 1
    ratio = 100 * summary["achieved_flops_per_second"] / summary["attainable_flops_per_second"]
    assert (ratio - summary["percent_of_roofline"]).abs().max() < 1e-6


def test_imported_a100_profile_is_aggregated_and_flagged(run):
    summary = pd.read_csv(run / "results" / "summary.csv").set_index("device")
    row = summary.loc["a100-sxm4-40gb"]
    # the study's own totals (ncu-final-metric-vgg11.txt) and its kernel-only nsys time
    assert row["measured_flops"] == 11_771_359_163
    assert row["measured_dram_bytes"] == 9_790_409_380
    assert row["measured_seconds"] == pytest.approx(20.95e-3, rel=1e-3)
    assert row["flops_source"] == "ncu"
    # no tensor-core metrics: ~1.6% of the estimated work is visible, and the summary says why
    assert row["flops_ratio"] < 0.05
    assert "tensor" in row["reconciliation"].lower()
    assert "measured/estimated FLOPs: 0.02 (expected [0.5, 2.0])" in row["checks"]
    assert (run / "results" / "plots" / "roofline" / "a100-sxm4-40gb.svg").is_file()
    # its time is its kernels' sum, held to the predicted kernel time: half the FP32 prediction, and the check
    # names the TF32 kernels that ran and the time priced so (0.90)
    assert row["timer"] == "nsys-kernels" and row["measured_over_predicted"] == pytest.approx(0.50, abs=0.04)
    checks = pd.read_csv(run / "results" / "checks" / "checks.csv")
    [cause] = checks.loc[(checks["device"] == "a100-sxm4-40gb")
                         & (checks["check"] == "predicted vs measured kernel time"), "likely_cause"]
    assert "ran TF32 on tensor cores (11 convolution kernels such as xmma_new_implicit_gemm" in cause
    assert "(measured/predicted 0.90, inside the band)" in cause


def test_figures_and_logs_exist(run):
    svg = (run / "results" / "plots" / "roofline" / "cpu.svg").read_text()
    assert "Arithmetic intensity [FLOP/byte]" in svg and "Performance [FLOP/s]" in svg
    assert (run / "results" / "plots" / "flops.svg").stat().st_size > 5000
    assert (run / "logs" / "summarize.log").read_text().strip()
    assert (run / "results" / "ceilings" / "cpu.json").is_file()


def test_report_is_one_self_contained_file(tiny_report):
    html = tiny_report.read_text()
    assert len(html) > 100_000
    assert "rooflow" in html and "Roofline" in html
    # offline: no stylesheet or script fetched from the network
    assert not re.search(r"<(script|link)[^>]+(src|href)=\"https?://", html)


def test_a_report_after_a_config_change_waits_for_the_run(run, tiny_report, snakemake_exe):
    """`snakemake --report` after a config change built the report from the old results without a word. The
    results' configuration page is named by the config's digest: the run made its own, the report holds it, and a
    changed config's report stops asking for the page only a run makes (no report is written)."""
    pages = list((run / "results" / "config").glob("config-*.html"))
    assert len(pages) == 1 and "Configuration of these results" in pages[0].read_text()
    assert "configuration of these results" in tiny_report.read_text()
    config = yaml.safe_load((run / CONFIG).read_text())
    config["profiling"]["noise_budget_seconds"] = config["profiling"].get("noise_budget_seconds", 60) + 1
    (run / "changed-budget.yaml").write_text(yaml.safe_dump(config))
    result = subprocess.run([snakemake_exe, "--cores", "2", "--configfile", "changed-budget.yaml", "--report",
                             "stale.html"], cwd=run, capture_output=True, text=True, timeout=600)
    assert result.returncode != 0 and not (run / "stale.html").exists()
    missing = re.search(r"File (results/config/config-[0-9a-f]{12}\.html) marked for report but does not exist",
                        result.stdout + result.stderr)
    assert missing and (run / missing.group(1)).name != pages[0].name, result.stderr[-2000:]


def test_second_run_does_nothing(run, snakemake_exe):
    result = snakemake(snakemake_exe, run, "-n")
    assert result.returncode == 0
    assert "Nothing to be done" in result.stdout + result.stderr


def test_changing_one_models_batches_reruns_only_that_model(run, snakemake_exe):
    config = yaml.safe_load((run / CONFIG).read_text())
    changed = config["models"][-1]
    config["model_batch_sizes"] = {changed: config["batch_sizes"] + [3]}
    (run / "changed.yaml").write_text(yaml.safe_dump(config))
    result = subprocess.run([snakemake_exe, "-n", "--cores", "2", "--configfile", "changed.yaml"], cwd=run,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    output = result.stdout + result.stderr
    models = set(re.findall(r"model=([a-z0-9_]+)", output))
    assert models == {changed}
    assert re.search(r"estimate_model\s+2\b", output) and re.search(r"profile_time\s+2\b", output)
    assert "subset_dataset" not in output and "measure_ceilings" not in output


# ---- faults in real workflow runs (issue 14) ----

def oom_config(workdir, limit_bytes: int) -> str:
    """squeezenet1_0 training at batch 1 (fits) and 256 (~3 GB of activations: does not fit) under a CPU
    memory limit: a REAL allocation failure in a real timing job."""
    config = yaml.safe_load((workdir / CONFIG).read_text())
    config.update(models=["squeezenet1_0"], batch_sizes=[1, 256], modes=["training"], imports=[])
    config["profiling"]["cpu_memory_limit_bytes"] = limit_bytes
    (workdir / "oom.yaml").write_text(yaml.safe_dump(config))
    return "oom.yaml"


def test_out_of_memory_is_a_result_row_and_the_workflow_completes(run, tmp_path, snakemake_exe):
    """In a copy of the tiny run (its subset and the CPU's ceilings are up to date there, as is squeezenet1_0's
    batch-1 training estimate): only the runs of the OOM config are new."""
    from conftest import copy_run

    workdir = copy_run(run, tmp_path / "wf")
    limit = 400 * 2**20
    result = subprocess.run([snakemake_exe, "--cores", "2", "--configfile", oom_config(workdir, limit)],
                            cwd=workdir, capture_output=True, text=True, timeout=1500)
    assert result.returncode == 0, result.stderr[-4000:]
    summary = pd.read_csv(workdir / "results" / "summary.csv").set_index("batch")
    assert summary.loc[1, "status"] == "ok" and summary.loc[1, "measured_seconds"] > 0
    oom = summary.loc[256]
    assert oom["status"] == "oom" and pd.isna(oom["measured_seconds"])
    assert 0 < oom["memory_requested_bytes"] and 0 <= oom["memory_available_bytes"] < limit
    assert oom["memory_requested_bytes"] > oom["memory_available_bytes"]
    assert oom["checks"].startswith("out of memory: oom (expected fits in memory): asked for ")
    assert oom["estimated_flops"] > 0  # the estimate of the run that did not fit is still there
    timing = yaml.safe_load((workdir / "results/profile/cpu/squeezenet1_0/b256-fp32-training/timing.json").read_text())
    assert timing["memory_limit_bytes"] == limit
    # the report: the checks table and front-page overview, and the summary table, show the row
    checks = pd.read_csv(workdir / "results" / "checks" / "checks.csv")
    assert ((checks["check"] == "out of memory") & (checks["batch"] == 256)).sum() == 1
    for page in ("checks/checks.html", "checks/overview.html"):
        text = (workdir / "results" / page).read_text()
        assert "out of memory" in text and "asked for" in text and "b256" in text, page
    assert ">oom<" in (workdir / "results" / "tables" / "summary.html").read_text()


SIGKILL_PARENT = """#!/usr/bin/env bash
# Stand-in for Nsight Compute that is killed mid-write: 2 MB of CSV into --log-file, then the job that
# runs it (rooflow's profile_ncu script, the parent) gets SIGKILL, as from the OOM killer or a node's end.
while [ $# -gt 0 ]; do [ "$1" = --log-file ] && log="$2"; shift; done
{ echo '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"'
   yes '"1","void foo<float, 4>(float*)","dram__bytes_read.sum","byte","1"' | head -n 40000; } > "$log"
kill -KILL $PPID
sleep 5
"""


def test_a_sigkilled_job_leaves_nothing_a_rerun_trusts_and_its_temporary_is_removed(tmp_path, snakemake_exe):
    """A REAL SIGKILL of a real profile_ncu job while its ncu output is half written (the profiler is a
    stand-in: no GPU here). The output does not exist, a dry run plans the job again, and the 2 MB
    `.ncu.csv.<random>.tmp` it leaves is removed when the next run starts; that run then succeeds."""
    from conftest import copy_workflow
    from support import RECORDED, REPLAY, TARGET, run_with_fake_ncu

    workdir = copy_workflow(tmp_path / "wf")
    csv = workdir / "results/profile/a100-sxm4-40gb/resnet18/b64-fp32-training/ncu.csv"
    killed = run_with_fake_ncu(workdir, snakemake_exe, SIGKILL_PARENT)
    assert killed.returncode != 0, killed.stderr[-3000:]
    assert not csv.exists()
    left = sorted(csv.parent.glob(".ncu.csv.*.tmp"))
    assert len(left) == 1 and left[0].stat().st_size > 2_000_000  # what a SIGKILL leaves
    dry = subprocess.run([snakemake_exe, "-n", TARGET, "--cores", "2", "--configfile", "tests/configs/gpu.yaml"],
                         cwd=workdir, capture_output=True, text=True, timeout=300)
    assert dry.returncode == 0 and "profile_ncu" in dry.stdout and left[0].exists()  # a dry run touches nothing

    recorded = next(RECORDED.glob("out.dram__bytes.sum*"))
    plan = tmp_path / "plan.json"  # what the driver writes in exhaustive mode (a recorded file replays every kernel)
    plan.write_text(json.dumps({"format": "rooflow-ncu-plan/1", "mode": "exhaustive"}))
    fixed = run_with_fake_ncu(workdir, snakemake_exe,
                              REPLAY.format(argv=tmp_path / "argv", recorded=recorded, plan=plan), "exhaustive")
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    assert f"rooflow: removed {left[0].relative_to(workdir)}" in fixed.stderr
    assert csv.is_file() and (workdir / TARGET).is_file()
    assert not list((workdir / "results").rglob("*.tmp"))


# Columns of the summary that do not depend on timing or on this machine's measured ceilings.
DETERMINISTIC = ["device", "model", "batch", "precision", "mode", "device_kind", "status", "input_size", "params",
                 "estimated_flops", "estimated_forward_flops", "estimated_backward_flops",
                 "estimated_optimizer_flops", "estimated_matmul_flops", "estimated_min_bytes",
                 "estimated_fused_bytes", "estimated_unfused_bytes", "estimated_peak_memory_bytes",
                 "forward_backward_flops_ratio", "measured_flops", "measured_dram_bytes", "kernel_seconds",
                 "flops", "flops_source", "bytes", "bytes_source", "arithmetic_intensity", "flops_ratio",
                 "reconciliation"]


def outputs_of(workdir) -> set[str]:
    return {str(p.relative_to(workdir)) for p in (workdir / "results").rglob("*") if p.is_file()}


def interrupt_when(process, workdir, ready, signum, what, timeout=900):
    """Send `signum` to snakemake's whole process group (its jobs too, as Ctrl-C, `timeout` or a node's end
    do) once `ready()`; return its exit status and output."""
    import os
    import time

    deadline = time.monotonic() + timeout
    while not ready():
        assert process.poll() is None, f"the run ended before {what}:\n{process.stdout.read()[-3000:]}"
        assert time.monotonic() < deadline, f"no {what} after {timeout} s"
        time.sleep(0.2)
    os.killpg(process.pid, signum)
    output, _ = process.communicate(timeout=600)
    return process.returncode, output


def test_an_interrupted_workflow_resumes_to_the_same_results(tmp_path, snakemake_exe, run):
    """The tiny matrix, interrupted three times: Ctrl-C (SIGINT) while the first jobs run, `timeout`/scancel
    (SIGTERM) later, then node loss (SIGKILL of snakemake and its jobs). After the SIGKILL the directory
    stays locked until `--unlock`; `--rerun-incomplete` then finishes the run. The summary's deterministic
    columns equal those of the uninterrupted run, the same files exist, and no temporary is left."""
    import signal

    from conftest import copy_workflow

    workdir = copy_workflow(tmp_path / "wf")
    command = [snakemake_exe, "--cores", "2", "--configfile", CONFIG, "--rerun-incomplete"]

    def start():
        # SIGINT's default disposition, as in a terminal (a background shell leaves it ignored)
        return subprocess.Popen(command, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    def count(pattern):
        return len(list((workdir / "results").rglob(pattern)))

    rc, out = interrupt_when(start(), workdir, lambda: count("totals.json") >= 1, signal.SIGINT, "first estimate")
    assert rc != 0, out[-3000:]
    rc, out = interrupt_when(start(), workdir, lambda: count("timing.json") >= 1, signal.SIGTERM, "first timing")
    assert rc != 0, out[-3000:]
    done = count("*")
    rc, out = interrupt_when(start(), workdir, lambda: count("*") >= done + 3, signal.SIGKILL, "three more outputs")
    assert rc == -signal.SIGKILL

    locked = subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=600)
    assert locked.returncode != 0 and "--unlock" in locked.stdout + locked.stderr, locked.stderr[-3000:]
    unlock = subprocess.run(command + ["--unlock"], cwd=workdir, capture_output=True, text=True, timeout=600)
    assert unlock.returncode == 0, unlock.stderr[-3000:]
    resumed = subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=1500)
    assert resumed.returncode == 0, resumed.stderr[-4000:]

    assert outputs_of(workdir) == outputs_of(run)
    assert not list((workdir / "results").rglob("*.tmp")) and not list((workdir / "results").rglob(".*"))
    mine = pd.read_csv(workdir / "results" / "summary.csv")
    reference = pd.read_csv(run / "results" / "summary.csv")
    keys = ["device", "model", "batch", "precision", "mode"]
    mine, reference = (f[DETERMINISTIC].sort_values(keys).reset_index(drop=True) for f in (mine, reference))
    pd.testing.assert_frame_equal(mine, reference)
    again = subprocess.run(command + ["-n"], cwd=workdir, capture_output=True, text=True, timeout=600)
    assert "Nothing to be done" in again.stdout + again.stderr
