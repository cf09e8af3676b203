"""The real workflow, end to end, on a tiny config in a temp directory: outputs, report, no-op re-run,
and a one-model change that re-runs only that model's jobs."""

from __future__ import annotations

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
    assert "outside [0.5, 2.0]" in row["checks"]
    assert (run / "results" / "plots" / "roofline" / "a100-sxm4-40gb.svg").is_file()


def test_figures_and_logs_exist(run):
    svg = (run / "results" / "plots" / "roofline" / "cpu.svg").read_text()
    assert "Arithmetic intensity [FLOP/byte]" in svg and "Performance [FLOP/s]" in svg
    assert (run / "results" / "plots" / "flops.svg").stat().st_size > 5000
    assert (run / "logs" / "summarize.log").read_text().strip()
    assert (run / "results" / "ceilings" / "cpu.json").is_file()


def test_report_is_one_self_contained_file(run, snakemake_exe):
    result = snakemake(snakemake_exe, run, "--report", "report.html")
    assert result.returncode == 0, result.stderr[-3000:]
    html = (run / "report.html").read_text()
    assert len(html) > 100_000
    assert "rooflow" in html and "Roofline" in html
    # offline: no stylesheet or script fetched from the network
    assert not re.search(r"<(script|link)[^>]+(src|href)=\"https?://", html)


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
