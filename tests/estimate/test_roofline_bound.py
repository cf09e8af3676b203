"""The per-op roofline time beside a prediction (rooflow.estimate.predict): attention priced as the kernel a GPU
runs, and every row the time model prices under its roof named with its cause, never printed quietly."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rooflow.estimate import api, attention, kernel_calibration, kernel_ops
from rooflow.estimate.calibration import for_device
from rooflow.estimate.core import parse_gemms
from rooflow.estimate.predict import BELOW_ROOF_TOLERANCE, below_roofline, below_roofline_flag, op_times
from rooflow.estimate.timemodel import predict_step
from rooflow.hardware.devices import default_catalogue_path, load_device

ROOT = Path(__file__).resolve().parents[2]
SWEEP = ROOT.parent / "shared" / "fixtures" / "real" / "h100-rooflow" / "h100-sweep-7-models.jsonl"


def _device(key):
    return load_device(default_catalogue_path(), key, None)


def _predicted(model, batch, precision, mode, key):
    result = api.estimate(model, batch, precision, mode)
    api.predict(result, key)
    return result


def test_sdpa_attention_is_priced_at_its_fused_kernels_roof():
    """ViT-H/14 (1,370 tokens at its 518-pixel input) b32 bf16 training on an H100: flash attention runs in bf16
    on tensor cores, where the math path the estimate counts up-casts q, k, v to fp32. Priced as counted, the
    roofline time was 1,059 ms against the time model's 744 ms."""
    result = _predicted("vit_h_14", 32, "bf16", "training", "h100-sxm5-80gb")
    totals = result.totals
    assert 0 < totals["roofline_seconds"] < totals["predicted_seconds"]
    h100 = _device("h100-sxm5-80gb")
    times = op_times(result.ops, h100, "bf16")
    layers = attention.sdpa_layers(result.ops["layer"], result.ops["op"])
    products = times[(times["op_class"] == "attention") & times["layer"].isin(layers)]
    # per layer, QK^T and AV forward, three product rows of their gradients backward
    assert products.groupby("phase").size().to_dict() == {"forward": 32 * 2, "backward": 32 * 3}
    assert np.allclose(products["compute_seconds"], products["flops"] / h100.compute_peak("bf16"))
    absorbed = times.loc[list(attention.fused_rows(result.ops))]
    assert set(absorbed["op_class"]) >= {"softmax"} and (absorbed["seconds"] == 0).all()


def test_fp32_attention_takes_the_memory_efficient_kernels_three_tf32_products():
    """fp32 has no flash kernel: the memory-efficient one runs three TF32 products per product on sm_80+ (faster
    than the FP32 roof the math path would be held to), FP32 FMA before."""
    result = api.estimate("vit_b_16", 8, "fp32", "inference")
    layers = attention.sdpa_layers(result.ops["layer"], result.ops["op"])
    for key, peak in (("h100-sxm5-80gb", lambda d: d.compute_peak("tf32") / 3), ("v100-pcie-16gb",
                                                                               lambda d: d.compute_peak("fp32"))):
        device = _device(key)
        times = op_times(result.ops, device, "fp32")
        products = times[(times["op_class"] == "attention") & times["layer"].isin(layers)]
        assert len(products) == 12 * 2
        assert np.allclose(products["compute_seconds"], products["flops"] / peak(device)), key


def test_a_kernel_models_call_keeps_its_kernels_when_its_floor_is_larger():
    """ResNet-18's 1×1 stride-2 convolutions on an A100 80GB: about 30 µs of kernels under a launch floor of
    360 µs, at a measured-shapes residual under 1. The residual scales the kernels, not the floor: taken
    from the whole call and the floor subtracted after, their kernels came to 0 s (2.5 µs, one launch, against
    21 µs at their roof)."""
    result = api.estimate("resnet18", 32, "fp32", "inference")
    a100 = _device("a100-pcie-80gb")
    rows = kernel_ops.kernel_rows(result.ops, a100)
    calibration, gpu = kernel_calibration.for_gpu(a100)
    kernels = kernel_calibration.kernel_seconds(rows, gpu, calibration)
    floors = kernel_calibration.launch_floors(rows, gpu, calibration)
    calls = kernel_calibration.predict_seconds(rows, gpu, calibration)
    assert (kernels > 0).all() and (kernels < calls).all()
    times = op_times(result.ops, a100, "fp32")
    pointwise = [index for index in rows.index if result.ops.at[index, "op"] == "convolution"
                 and parse_gemms(result.ops.at[index, "gemms"])[0][5] == 1]  # 1×1 filters
    assert len(pointwise) == 3
    for index in pointwise:
        position = rows.index.get_loc(index)
        assert floors[position] > 3 * times.at[index, "seconds"]  # the case: a floor far above the kernels
        assert kernels[position] >= (1 - BELOW_ROOF_TOLERANCE) * times.at[index, "seconds"]


@pytest.mark.parametrize("model", ["vgg16", "resnet18", "resnet50", "regnet_x_400mf"])
def test_rows_under_their_roof_are_named_with_their_cause(model):
    """On an A100 (Ampere: forward Winograd) the FP32 3×3 stride-1 convolutions are priced on Winograd/FFT, under
    the direct FLOPs' roof; small elementwise ops partly in L2. Every row under its roof has one of those causes:
    the measured shapes' residuals no longer take a stride-2 or 1×1 convolution under its roof (ResNet-50's 3×3
    stride-2 one at 0.93x its roof, RegNetX-400MF's 1×1 stride-2 one at 0.71x)."""
    result = _predicted(model, 32, "fp32", "inference", "a100-pcie-80gb")
    totals = result.totals
    a100 = _device("a100-pcie-80gb")
    step = predict_step(result.ops, totals, a100, for_device(a100))
    causes = below_roofline(result.ops, step.row_seconds, a100, "fp32")
    assert set(causes) <= {"fast convolutions", "cache"}
    fast = [index for index in result.ops.index if any(v[4] for v in parse_gemms(result.ops.at[index, "gemms"]))]
    assert causes.get("fast convolutions", {"rows": 0})["rows"] <= len(fast)
    note = totals.get("below_roofline")
    if totals["predicted_seconds"] < totals["roofline_seconds"]:
        assert note.startswith(f"predicted {totals['predicted_seconds'] * 1e3:.4g} ms, under its per-op roofline")
        assert "Winograd/FFT" in note and causes["fast convolutions"]["ops"] == ["convolution"]
    else:
        assert note is None  # rows under their roof for known causes, the step over it: no note


def test_a_fast_convolution_priced_beyond_any_measured_call_says_so():
    """FCN-ResNet50's head (a 3×3 convolution of 2,048 → 512 channels on 65×65) at batch 64 is 5.1 TFLOP, 70× the
    largest convolution of the single-op data set: the kernel model prices it by non-fused Winograd on a V100 at
    3.8× its direct roof, where the fastest measured call ran 2.24× (FASTEST_MEASURED_FAST_CONVOLUTION). The note
    names the cause and says the speed is an extrapolation; its products never beyond the FP32 peak (4x the roof
    is F(4×4, 3×3)'s whole saving: it had been 4.0x)."""
    from rooflow.estimate.predict import FASTEST_MEASURED_FAST_CONVOLUTION

    result = _predicted("fcn_resnet50", 64, "fp32", "inference", "v100-sxm2-16gb")
    v100 = _device("v100-sxm2-16gb")
    step = predict_step(result.ops, result.totals, v100, for_device(v100))
    fast = below_roofline(result.ops, step.row_seconds, v100, "fp32")["fast convolutions"]
    assert FASTEST_MEASURED_FAST_CONVOLUTION < fast["most_under_roof"] < 4.0
    note = result.totals["below_roofline"]
    assert "Winograd/FFT" in note and f"one at {fast['most_under_roof']:.2f}x its roof, beyond any measured" in note
    # within the measured speed-ups (ResNet-50 b32 on a V100: its 3×3s at most 2.0x): no such words
    result = _predicted("resnet50", 32, "fp32", "inference", "v100-sxm2-16gb")
    step = predict_step(result.ops, result.totals, v100, for_device(v100))
    fast = below_roofline(result.ops, step.row_seconds, v100, "fp32")["fast convolutions"]
    assert 1.0 < fast["most_under_roof"] <= FASTEST_MEASURED_FAST_CONVOLUTION
    assert "beyond any measured" not in (result.totals.get("below_roofline") or "")


def test_no_note_where_nothing_is_under_its_roof():
    """An H100 has no forward Winograd (cuDNN's Hopper kernels: implicit GEMM or FFT): VGG16 b32 FP32 inference
    has no row under its roof, and no note."""
    result = _predicted("vgg16", 32, "fp32", "inference", "h100-sxm5-80gb")
    assert result.totals["roofline_seconds"] < result.totals["predicted_seconds"]
    assert "below_roofline" not in result.totals


@pytest.mark.skipif(not SWEEP.is_file(), reason="shared fixtures (../shared) not present")
def test_a_measured_step_of_fast_convolutions_beats_the_direct_flops_roofline():
    """Why the roofline time is no lower bound for Winograd/FFT convolutions: rooflow's H100 VGG16 b256 FP32
    training step (backward Winograd) measured 381.8 ms against a roofline time of 385.8 ms."""
    runs = [json.loads(line) for line in SWEEP.read_text().splitlines() if line.strip()]
    run = next(r for r in runs if (r["model"], r["batch"], r["precision"], r["mode"], r["status"])
               == ("vgg16", 256, "fp32", "training", "ok"))
    result = _predicted("vgg16", 256, "fp32", "training", "h100-sxm5-80gb")
    assert run["median_seconds"] < result.totals["roofline_seconds"] < result.totals["predicted_seconds"]
    convolutions = result.ops[result.ops["op"].str.startswith("convolution")]
    assert all(parse_gemms(g)[0][4] for g in convolutions["gemms"].iloc[1:])  # every 3×3 stride-1 but the stem's


def test_a_depthwise_convolution_is_never_priced_under_its_flops_at_the_fp32_roof():
    """Depthwise layers are priced by their bytes (memory-bound on a GPU). On a CPU, at this machine's measured
    roofs (236 GFLOP/s FP32, 34 GB/s), ConvNeXt-T's 7×7 ones are compute-bound: their bytes priced them at 0.94x
    their FLOPs' roof, an unexplained row under it."""
    cpu = load_device(default_catalogue_path(), "cpu", None)
    cpu.measured_peak_flops_per_second = {"fp32": 2.36e11}
    cpu.measured_dram_bytes_per_second = 3.4e10
    result = api.estimate("convnext_tiny", 16, "fp32", "inference")
    step = predict_step(result.ops, result.totals, cpu, for_device(cpu))
    times = op_times(result.ops, cpu, "fp32", measured=True)
    depthwise = [index for index in result.ops.index if result.ops.at[index, "op"] == "convolution"
                 and parse_gemms(result.ops.at[index, "gemms"])[0][1] == 1]  # one output channel per group
    assert len(depthwise) == 18 and all(times.at[index, "bound"] == "compute" for index in depthwise)
    for index in depthwise:
        assert step.row_seconds[index] >= times.at[index, "compute_seconds"]
    assert "unexplained" not in below_roofline(result.ops, step.row_seconds, cpu, "fp32", measured=True)


@pytest.mark.parametrize("key", ["xeon-e5-2699-v4-2s", "apple-a14"])
def test_a_reduction_of_a_broadcast_gradient_is_never_priced_under_its_flops_at_the_fp32_roof(key):
    """Rooflow's sum-of-outputs loss hands a model's last Linear a gradient broadcast from one element, so the sum
    of its bias gradient (640 x 256 elements here) reads 4 bytes: priced by its bytes, it ran at 0.23x (the Xeon)
    and 0.11x (the A14) its FLOPs' roof on a CPU, an "unexplained" row under it in the training estimate of any
    module ending in such a Linear (found on a GRU language model's head)."""
    import torch

    device = load_device(default_catalogue_path(), key, None)
    result = api.estimate_module(torch.nn.Linear(512, 256), torch.empty(16, 40, 512), mode="training")
    step = predict_step(result.ops, result.totals, device, for_device(device))
    times = op_times(result.ops, device, "fp32")
    (bias,) = [index for index in result.ops.index if result.ops.at[index, "op"] == "sum"
               and result.ops.at[index, "phase"] == "backward"]
    assert result.ops.at[bias, "bytes_read"] == 4 and times.at[bias, "bound"] == "compute"
    assert step.row_seconds[bias] >= times.at[bias, "compute_seconds"]
    assert below_roofline(result.ops, step.row_seconds, device, "fp32") == {}


def test_a_cpus_cache_resident_rows_are_a_cause_not_unexplained():
    """A CPU calibration measured with cache-resident tensors (the workflow's ceilings: elementwise ops at 2.61x
    the DRAM rate within half the 32 MiB last-level cache) prices SqueezeNet 1.0 b256 training's small optimizer and
    loss ops under their DRAM roof: 80 rows, which the workflow's out-of-memory run listed as an unexplained error."""
    cpu = load_device(default_catalogue_path(), "cpu", None)
    cpu.measured_peak_flops_per_second = {"fp32": 2.19e11}
    cpu.measured_dram_bytes_per_second = 3.96e10
    calibration = for_device(cpu).with_(cache_bytes=33554432.0, memory_efficiency_by_class={"elementwise": 0.654},
                                        cache_memory_efficiency_by_class={"elementwise": 2.6098})
    result = api.estimate("squeezenet1_0", 256, "fp32", "training")
    step = predict_step(result.ops, result.totals, cpu, calibration)
    roofline = op_times(result.ops, cpu, "fp32", measured=True)["seconds"].sum()
    assert step.seconds > roofline
    causes = below_roofline(result.ops, step.row_seconds, cpu, "fp32", True, calibration.cache_bytes)
    assert set(causes) == {"cache"} and causes["cache"]["rows"] >= 70
    assert below_roofline_flag(result.ops, step, cpu, "fp32", roofline, True, calibration.cache_bytes) is None
    unknown = below_roofline(result.ops, step.row_seconds, cpu, "fp32", True)  # the cache not said: unexplained
    assert set(unknown) == {"unexplained"}
