"""The examples' own models (examples/tiny_cnn, examples/two_input: a factory model and a two-input model with
its own loss) through the real workflow on the CPU, as every variant (eager, channels_last, compile): estimate,
time, summary, the roofline and the report.

To stay cheap it runs in a copy of the tiny workflow run (conftest.tiny_run, which the workflow tests pay
for anyway), with the tiny config's dataset and profiling settings: the subset and the CPU's ceilings are
up to date there, so only the examples' runs are new (estimates, timings, summary, figures, report)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pandas as pd
import pytest
import yaml
from conftest import ROOT, copy_run, report_line

pytestmark = pytest.mark.slow


def test_example_models_run_end_to_end_on_the_cpu(tiny_run, snakemake_exe, tmp_path):
    workdir = copy_run(tiny_run, tmp_path / "wf")
    shutil.copytree(ROOT / "examples", workdir / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    config = yaml.safe_load((workdir / "tests" / "configs" / "tiny.yaml").read_text())
    # the examples' custom models, as their configs write them (resnet18 of tiny_cnn's config is tiny's own)
    config["models"] = [entry for name in ("tiny_cnn", "two_input")
                        for entry in yaml.safe_load((ROOT / "examples" / name / "config.yaml").read_text())["models"]
                        if isinstance(entry, dict)]
    # every variant: a timing job of its own per run (compile: about 25-45 s of compilation per job on 2 cores)
    config.update(batch_sizes=[2], model_batch_sizes={}, imports=[], variants=["eager", "channels_last", "compile"])
    (workdir / "examples.yaml").write_text(yaml.safe_dump(config))

    dry = subprocess.run([snakemake_exe, "-n", "--cores", "2", "--configfile", "examples.yaml"], cwd=workdir,
                         capture_output=True, text=True, timeout=600)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "measure_ceilings" not in dry.stdout and "subset_dataset" not in dry.stdout  # reused, not re-run
    run = subprocess.run([snakemake_exe, "--cores", "2", "--configfile", "examples.yaml"], cwd=workdir,
                         capture_output=True, text=True, timeout=1500)
    assert run.returncode == 0, run.stderr[-4000:]

    summary = pd.read_csv(workdir / "results" / "summary.csv").set_index(["model", "mode", "variant"])
    variants = ("eager", "channels_last", "compile")
    assert set(summary.index) == {(m, mode, v) for m in ("tiny_cnn", "image_and_features")
                                  for mode in ("inference", "training") for v in variants}
    assert (summary["status"] == "ok").all() and (summary["measured_seconds"] > 0).all()
    # compile time apart from the step: recorded for the compiled runs only, and longer than their step
    compiled = summary.xs("compile", level="variant")
    assert (compiled["compile_seconds"] > compiled["measured_seconds"]).all()
    assert summary.drop(index="compile", level="variant")["compile_seconds"].isna().all()
    # each point at the intensity of the traffic its variant moves: compiled at the fusion-aware bytes, eager and
    # channels_last at the unfused ones; tiny_cnn's BatchNorm and ReLU fuse, so its compiled point lies right
    for (model, mode, variant), row in summary.iterrows():
        totals = json.loads((workdir / f"results/estimate/{model}/b2-fp32-{mode}/totals.json").read_text())
        traffic = "fused" if variant == "compile" else "unfused"
        assert row["bytes_source"] == f"estimate-{traffic}"
        assert row["arithmetic_intensity"] == pytest.approx(totals["total_flops"] / totals[f"{traffic}_bytes"])
        # a point above its roof never passes quietly
        assert not row["percent_of_roofline"] > 100 or "above the roof" in row["checks"]
    for mode in ("inference", "training"):
        x = summary.loc[("tiny_cnn", mode), "arithmetic_intensity"]
        assert x["compile"] > 1.1 * x["eager"] and x["channels_last"] == x["eager"]
    roofline = (workdir / "results/plots/roofline/cpu.svg").read_text()
    assert "tiny_cnn b2 inf compile" in roofline and "tiny_cnn b2 train channels_last" in roofline
    # tiny_cnn's convolutions and linear at batch 2, written out (one FMA = 2 FLOPs, + bias)
    b = 2
    matmul = (2 * 3 * 9 * 16 * 32 * 32 * b + 16 * 32 * 32 * b + 2 * 16 * 9 * 32 * 16 * 16 * b + 32 * 16 * 16 * b
              + 2 * 2048 * 10 * b + 10 * b)
    totals = json.loads((workdir / "results/estimate/tiny_cnn/b2-fp32-inference/totals.json").read_text())
    assert totals["forward_matmul_flops"] == matmul
    assert totals["input_shapes"] == [[2, 3, 32, 32]]
    two = json.loads((workdir / "results/estimate/image_and_features/b2-fp32-training/totals.json").read_text())
    assert two["input_shapes"] == [[2, 3, 32, 32], [2, 8]] and two["backward_flops"] > 0
    timing = json.loads((workdir / "results/profile/cpu/image_and_features/b2-fp32-training/timing.json").read_text())
    assert timing["status"] == "ok" and timing["backward_median_seconds"] > 0
    nhwc = json.loads((workdir / "results/profile/cpu/tiny_cnn/b2-fp32-training-channels_last/timing.json")
                      .read_text())
    assert nhwc["variant"] == "channels_last" and nhwc["status"] == "ok"
    compiled_timing = json.loads((workdir / "results/profile/cpu/tiny_cnn/b2-fp32-training-compile/timing.json")
                                 .read_text())
    assert compiled_timing["compile_seconds"] > 0 and compiled_timing["warmup_iterations"] == 1
    report_line(f"compile seconds of the examples: {compiled['compile_seconds'].round(1).to_dict()}")

    report = subprocess.run([snakemake_exe, "--cores", "2", "--configfile", "examples.yaml", "--report",
                             "report.html"], cwd=workdir, capture_output=True, text=True, timeout=900)
    assert report.returncode == 0, report.stderr[-3000:]
    assert (workdir / "report.html").stat().st_size > 100_000
