"""The time and memory model against the 7-model H100 sweep (../shared/fixtures/real/h100-rooflow/
h100-sweep-7-models.jsonl: 138 measured steps of resnet18/50, vgg16, alexnet, mobilenet_v2, efficientnet_b0
and vit_b_16 at batch 1/32/256, fp32/tf32/bf16 and a few fp16, inference and training).

None of it calibrated the H100 (its calibration comes from b64 kernel recordings of resnet50, vgg16 and
mobilenet_v2). Pinned at what the model reaches; the misses are named so a change that fixes or breaks one
shows: depthwise convolutions in inference (predicted slower than measured), bf16/fp16 training of
BatchNorm-heavy nets (measured 1.6–1.9× the prediction), vit_b_16 (PyTorch's fused SDPA kernels and its
FP32 GEMMs run faster than the model's math-path attention and conv-derived GEMM efficiency).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from rooflow.estimate import estimate
from rooflow.estimate.calibration import shipped_calibration
from rooflow.estimate.predict import predict_memory
from rooflow.estimate.timemodel import predict_step
from rooflow.hardware.devices import load_device

ROOT = Path(__file__).resolve().parents[2]
SWEEP = ROOT.parent / "shared" / "fixtures" / "real" / "h100-rooflow" / "h100-sweep-7-models.jsonl"
H100 = ROOT / "tests" / "data" / "real" / "h100-rooflow"


@pytest.fixture(scope="module")
def sweep():
    if not SWEEP.is_file():
        pytest.skip("shared fixtures (../shared) not present")
    device = load_device(ROOT / "config" / "devices.yaml", "h100-sxm5-80gb", H100 / "ceilings-h100.json")
    calibration = shipped_calibration("h100-sxm5-80gb")
    rows = []
    for line in SWEEP.read_text().splitlines():
        run = json.loads(line)
        if run["batch"] != 256:  # GPU-bound; batch 1 (host-bound) and 32 are left out to keep the test fast
            continue
        est = estimate(run["model"], run["batch"], run["precision"], run["mode"])
        time = predict_step(est.ops, est.totals, device, calibration)
        memory = predict_memory(est.totals, device)
        rows.append({**{k: run[k] for k in ("model", "batch", "precision", "mode")}, "bound": time.bound,
                     "time_ratio": run["median_seconds"] / time.seconds,
                     "memory_ratio": run["steady_peak_allocated"] / memory["predicted_memory_bytes"]})
    return pd.DataFrame(rows)


def test_gpu_bound_runs(sweep):
    """GPU-bound runs at batch 256: 34 of 48 within ±25%, mean |error| 20% (the issue's goal: 90%, 12%)."""
    gpu = sweep[sweep["bound"] == "gpu"]
    error = (gpu["time_ratio"] - 1).abs()
    assert len(gpu) == 48
    assert (error <= 0.25).sum() >= 34
    assert error.mean() <= 0.21
    # the four models the H100 calibration saw kernels of, or the sweep before: within ±25% for most
    old = gpu[gpu["model"].isin(["resnet50", "vgg16", "alexnet"])]
    assert ((old["time_ratio"] - 1).abs() <= 0.25).mean() >= 0.9


def test_named_misses(sweep):
    """The misses are where the model knows it is weak (module docstring)."""
    def ratio(model, batch, precision, mode):
        row = sweep[(sweep["model"] == model) & (sweep["batch"] == batch) & (sweep["precision"] == precision)
                    & (sweep["mode"] == mode)]
        return float(row["time_ratio"].iloc[0])

    assert ratio("mobilenet_v2", 256, "fp32", "inference") < 0.75  # depthwise inference: faster than modelled
    assert ratio("mobilenet_v2", 256, "bf16", "training") > 1.5  # bf16 BN/depthwise training: slower
    assert ratio("vit_b_16", 256, "bf16", "inference") < 0.6  # fused SDPA (flash) in bf16


def test_memory(sweep):
    """Steady-state peak within ±15% for 40 of the 48 batch-256 runs."""
    assert ((sweep["memory_ratio"] - 1).abs() <= 0.15).sum() >= 40
