"""The workflow's `kernel_calibrations:` (config): a user's own GPU's kernel calibration (`rooflow calibrate-kernels
-o FILE` on single ops measured there) replaces the shipped one in the jobs that predict times — the summary and
the what-if tables — for that GPU, and joins the medians of the GPUs without data of its family."""

from __future__ import annotations

import dataclasses
import json

import pytest

from rooflow.estimate import estimate_run
from rooflow.estimate import kernel_calibration as kc
from rooflow.hardware.devices import default_catalogue_path, load_devices
from rooflow.io import write_csv, write_json
from rooflow.report.next_steps import what_to_try
from rooflow.report.summary import summarize_files
from rooflow.workload.spec import spec_from_entry

CATALOGUE = str(default_catalogue_path())
SOURCE = "test: the L4's family calibration at half its FP32 efficiencies"


@pytest.fixture
def slow_l4(tmp_path, added_calibrations):
    """A calibrations file whose L4 runs its FP32 GEMMs and convolutions at half the shipped efficiency (what
    `rooflow calibrate-kernels -o` writes); the process's added calibrations undone after the test."""
    calibration, gpu = kc.for_gpu(load_devices(CATALOGUE)["l4"])
    classes = {name: dict(params) for name, params in calibration.classes.items()}
    for name in ("gemm", "convolution"):
        classes[name]["efficiency"] *= 0.5
        classes[name]["winograd_efficiency"] = classes[name].get("winograd_efficiency", 1.0) * 0.5
    slow = dataclasses.replace(calibration, source=SOURCE, classes=classes, shapes={})
    path = tmp_path / "kernels-l4.json"
    kc.write_shipped({"measured": {gpu.name: {"catalogue": "l4", "gpu": dataclasses.asdict(gpu),
                                              "calibration": slow.to_json()}}}, {}, path)
    return path


def measured_on(device: str, tmp_path) -> dict[str, str]:
    """resnet18 batch 64 FP32 inference, estimated, and timed at 10 ms on ``device``: the stage files."""
    result = estimate_run(spec_from_entry("resnet18"), 64, "fp32", "inference")
    files = {"totals": tmp_path / "totals.json", "ops": tmp_path / "ops.csv", "timing": tmp_path / "timing.json"}
    write_json(files["totals"], result.totals)
    write_csv(files["ops"], result.ops)
    files["timing"].write_text(json.dumps({"device": device, "model": "resnet18", "batch": 64, "precision": "fp32",
                                           "mode": "inference", "variant": "eager", "status": "ok",
                                           "median_seconds": 0.01, "spread": 0.01}))
    return {k: str(v) for k, v in files.items()}


def test_the_summary_predicts_the_users_gpu_from_its_own_calibration(slow_l4, tmp_path):
    files = measured_on("l4", tmp_path)

    def summary(calibrations):
        frame = summarize_files(CATALOGUE, [files["totals"]], [files["timing"]], ops=[files["ops"]],
                                kernel_calibrations=calibrations)
        return frame.iloc[0]

    shipped = summary([])
    assert "not measured" in shipped["calibration_source"]
    own = summary([str(slow_l4)])
    assert SOURCE in own["calibration_source"]
    # ResNet-18's FP32 convolutions at batch 64 carry most of the L4's step: half their efficiency, a slower step
    assert own["predicted_seconds"] > 1.3 * shipped["predicted_seconds"]


def test_the_what_if_tables_take_it_for_that_gpu_only(slow_l4, tmp_path):
    files = measured_on("h100-sxm5-80gb", tmp_path)
    spec = {"resnet18": "resnet18"}

    def cross(calibrations):
        _, table = what_to_try([files["timing"]], spec, "h100-sxm5-80gb", CATALOGUE,
                               kernel_calibrations=calibrations)
        return table[table["change"] == "device"].set_index("device")

    shipped = cross([])
    own = cross([str(slow_l4)])
    assert SOURCE in own.loc["l4", "calibration_source"]
    assert own.loc["l4", "predicted_seconds"] > 1.3 * shipped.loc["l4", "predicted_seconds"]
    # its family's GPU without data (the L40S, Ada) takes it into its medians; a GPU measured in every class keeps
    # its own calibration, and the H100 and H200 keep rooflow's own step recordings
    assert own.loc["l40s", "predicted_seconds"] > 1.1 * shipped.loc["l40s", "predicted_seconds"]
    for other in ("t4", "v100-pcie-16gb", "p100-pcie-16gb", "h200-sxm-141gb", "h100-pcie-80gb"):
        assert own.loc[other, "predicted_seconds"] == pytest.approx(shipped.loc[other, "predicted_seconds"])
