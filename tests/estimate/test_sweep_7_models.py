"""The time and memory model against the 7-model H100 sweep (../shared/fixtures/real/h100-rooflow/
h100-sweep-7-models.jsonl: 138 measured steps of resnet18/50, vgg16, alexnet, mobilenet_v2, efficientnet_b0
and vit_b_16 at batch 1/32/256, fp32/tf32/bf16 and a few fp16, inference and training).

None of it calibrated the H100 (its calibration comes from b64 kernel recordings of resnet50, vgg16 and
mobilenet_v2). One constant was read from the sweep: the per-channel block rate of PyTorch's bf16
BatchNorm kernels (rooflow.estimate.batchnorm), from resnet18 and resnet50. The efficiency of the
memory-efficient attention backward kernel, read from vit_b_16's fp32/TF32 training here before, now comes
with the other attention kernels' and the weight-gradient GEMMs' from an H200's kernel traces
(tests/data/real/gpu-2026-11-27), so vit_b_16 is held out here too; efficientnet_b0 was kept out of every
choice and is checked as a held-out model. The last batch-256 miss, alexnet
bf16 training (1.30×), went inside ±25% (1.22×) when 16-bit max-pooling took the time of 4-byte values
(rooflow.estimate.timemodel.NATIVE_POOLING_OPS, read from two kernel recordings, not from this sweep).
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pandas as pd
import pytest
from support import cached_estimate

from rooflow.estimate.calibration import for_device, shipped_calibration
from rooflow.estimate.predict import held_workspace_threads, predict_memory
from rooflow.estimate.timemodel import (
    HOST_PAIRS_APART,
    HOST_RANGE_Z,
    HOST_RUN_SCATTER,
    predict_step,
    step_spread,
)
from rooflow.hardware.devices import load_device

ROOT = Path(__file__).resolve().parents[2]
SWEEP = ROOT.parent / "shared" / "fixtures" / "real" / "h100-rooflow" / "h100-sweep-7-models.jsonl"
H100 = ROOT / "tests" / "data" / "real" / "h100-rooflow"
H200_SWEEP = ROOT / "tests" / "data" / "real" / "gpu-2026-11-25" / "h200-sweep-12-models.jsonl"
NEW_MODELS = ("convnext_tiny", "densenet121", "googlenet", "regnet_y_1_6gf", "squeezenet1_1")


def _compare(path: Path, device, calibration, keep, rest_counts_run: bool) -> pd.DataFrame:
    """``rest_counts_run``: whether the file's at_rest_before counts the run's weights and input (the H100
    sweep's does, the H200's not); beyond them it holds the cuBLAS workspaces of the sweep's earlier steps."""
    rows = []
    for line in path.read_text().splitlines():
        run = json.loads(line)
        if run["batch"] != 256 or not keep(run):  # GPU-bound; batch 1 (host-bound) and 32 left out: test time
            continue
        est = cached_estimate(run["model"], run["batch"], run["precision"], run["mode"])
        time = predict_step(est.ops, est.totals, device, calibration)
        run_bytes = est.totals["weight_bytes"] + est.totals["input_bytes"] if rest_counts_run else 0
        # the 2026-11-28 sweep did not record what was held at rest (its steps' memory is predicted without it)
        held = held_workspace_threads(run.get("at_rest_before", 0), device, run_bytes)
        memory = predict_memory(est.totals, device, held)
        rows.append({**{k: run[k] for k in ("model", "batch", "precision", "mode")}, "bound": time.bound,
                     "time_ratio": run["median_seconds"] / time.seconds,
                     "memory_ratio": run["steady_peak_allocated"] / memory["predicted_memory_bytes"],
                     **{k: memory[f"predicted_memory_bytes{k.removeprefix('memory')}"]
                        for k in ("memory", "memory_low", "memory_high")}})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def sweep():
    if not SWEEP.is_file():
        pytest.skip("shared fixtures (../shared) not present")
    device = load_device(ROOT / "config" / "devices.yaml", "h100-sxm5-80gb", H100 / "ceilings-h100.json")
    return _compare(SWEEP, device, shipped_calibration("h100-sxm5-80gb"), lambda run: True, True)


def test_gpu_bound_runs(sweep):
    """GPU-bound runs at batch 256: 48 of 48 within ±25%, mean |error| 7.1% (the issue's goal: 90%, 12%; 7.2%
    before cuBLAS's FP32 GEMMs ran by the wave, 7.8%
    before the FP32 forward convolutions took the kernel model of Hopper's single ops; 47 of 48 and 9.8% before
    16-bit max-pooling followed elements, 9.4% before the gaps between kernels and the elementwise efficiency
    without the optimizer's kernels)."""
    gpu = sweep[sweep["bound"] == "gpu"]
    error = (gpu["time_ratio"] - 1).abs()
    assert len(gpu) == 48
    assert (error <= 0.25).sum() >= 48
    assert error.mean() <= 0.075


def test_held_out_model(sweep):
    """efficientnet_b0 (SiLU, squeeze-excitation, depthwise 5×5), which no choice of the model looked at: all
    six batch-256 runs within ±25%, mean |error| 7.0% (7.8% before the FP32 forward convolutions took the kernel
    model of Hopper's single ops: its FP32 inference 0.89 -> 1.02; 12% before the gaps between kernels)."""
    held_out = sweep[sweep["model"] == "efficientnet_b0"]
    error = (held_out["time_ratio"] - 1).abs()
    assert len(held_out) == 6 and (error <= 0.25).all()
    assert error.mean() <= 0.075


def _ratio(sweep, model, precision, mode):
    row = sweep[(sweep["model"] == model) & (sweep["precision"] == precision) & (sweep["mode"] == mode)]
    return float(row["time_ratio"].iloc[0])


def test_fixed_misses(sweep):
    """What the previous model missed by 1.5–2×: fused SDPA attention in bf16, bf16 BatchNorm and depthwise
    training (PyTorch's native kernels), depthwise inference (its forward kernels apart from backward), fp16
    BatchNorm training (element-bound) and fp16 depthwise where PyTorch leaves cuDNN (stride 2)."""
    assert abs(_ratio(sweep, "vit_b_16", "bf16", "inference") - 1) < 0.15
    assert abs(_ratio(sweep, "vit_b_16", "fp32", "inference") - 1) < 0.1
    assert abs(_ratio(sweep, "vit_b_16", "tf32", "training") - 1) < 0.2  # attention, TF32 weight gradients
    assert abs(_ratio(sweep, "mobilenet_v2", "bf16", "training") - 1) < 0.1
    assert abs(_ratio(sweep, "efficientnet_b0", "bf16", "training") - 1) < 0.1
    assert abs(_ratio(sweep, "resnet18", "bf16", "training") - 1) < 0.15
    assert _ratio(sweep, "mobilenet_v2", "fp32", "inference") > 0.75
    assert abs(_ratio(sweep, "mobilenet_v2", "fp16", "training") - 1) < 0.2
    assert abs(_ratio(sweep, "resnet50", "fp16", "training") - 1) < 0.1


def test_16_bit_max_pooling(sweep):
    """The nets with max-pooling in bf16 (module docstring): alexnet's training was the sweep's last batch-256 miss
    (1.30×); 1.22× with the pooling, 1.10× since its 3-channel stem's layout transposes are priced per element
    (timemodel.NARROW_TRANSPOSE_COST, from the H200's traces)."""
    assert abs(_ratio(sweep, "alexnet", "bf16", "training") - 1) < 0.12
    assert abs(_ratio(sweep, "alexnet", "bf16", "inference") - 1) < 0.17  # 1.20 before
    assert abs(_ratio(sweep, "resnet18", "bf16", "inference") - 1) < 0.17  # 1.19 before


def test_memory(sweep):
    """Steady-state peak within ±15% for 47 of the 48 batch-256 runs (43 before the fused attention kernel's
    inputs replaced the math path's fp32 copies of q, k, v; 44 before the FFT workspace of the FP32 convolutions
    the kernel model runs by FFT, test_fp32_convolutions_hold_cudnns_fft_workspace: AlexNet's FP32 inference and
    training were 1.35 and 1.20, now 0.98 and 0.98; 46 before an RGB stem held the copies of the kernels cuDNN
    runs it with, tests/estimate/test_memory.py: AlexNet bf16 inference 1.16, now 1.00). The miss: VGG16 FP32
    training (1.34, 1.57 before; unexplained: its peak needs 12 GB or more over the live tensors at every op,
    which no workspace of the FFT and Winograd algorithms its backward ran at batch 64 reaches).
    Every vit_b_16 run within 8% (bf16 inference was 0.80: its fp32 copies of q, k, v, which a fused kernel never
    makes)."""
    assert ((sweep["memory_ratio"] - 1).abs() <= 0.15).sum() >= 47
    stems = sweep[sweep["model"].isin(["alexnet", "resnet18"]) & (sweep["precision"] == "bf16")
                  & (sweep["mode"] == "inference")]["memory_ratio"]
    assert len(stems) == 2 and ((stems - 1).abs() < 0.01).all()  # 1.16 and 1.11 before
    vit = sweep[sweep["model"] == "vit_b_16"]["memory_ratio"]
    assert len(vit) == 6 and ((vit - 1).abs() < 0.08).all()


@pytest.mark.parametrize(("gpu", "model", "mode"), [
    ("h100-sxm5-80gb", "vgg16", "inference"), ("h100-sxm5-80gb", "vgg16", "training"),
    ("h100-sxm5-80gb", "alexnet", "inference"), ("h200-sxm-141gb", "googlenet", "inference")])
def test_fp32_convolutions_hold_cudnns_fft_workspace(gpu, model, mode):
    """FP32 batch-32 steps whose peak is cuDNN's FFT workspace: VGG16's measured peak is 1.70 GB over its tensors
    in inference (H100) and 2.35 GB in training, AlexNet's 0.23 GB, GoogLeNet's 0.11 GB (H200) — 1.33-2.28x the
    prediction before. The convolutions the kernel model runs by FFT on Hopper (3×3 at 28×28 and 14×14, where FFT
    is the fastest of its algorithms: kernel_calibration.fft_sizes) hold their input, filter and output as S × S
    complex frequencies while they run (predict.fft_workspace_bytes): 1.00-1.02, GoogLeNet 0.93. Over the two
    sweeps' 90 FP32 steps, 75 were within ±15% before and 88 after, none moved out; the two left are VGG16's
    batch-256 training (1.34, unexplained: test_memory). An A100's cuDNN has FP32 Winograd, which the
    model prices instead: no FFT workspace there."""
    path = SWEEP if gpu == "h100-sxm5-80gb" else H200_SWEEP
    if not path.is_file():
        pytest.skip("shared fixtures (../shared) not present")
    runs = [json.loads(line) for line in path.read_text().splitlines()]
    run = next(r for r in runs if (r["model"], r["batch"], r["precision"], r["mode"]) == (model, 32, "fp32", mode))
    catalogue = ROOT / "config" / "devices.yaml"
    device = load_device(catalogue, gpu)
    est = cached_estimate(model, 32, "fp32", mode)
    run_bytes = est.totals["weight_bytes"] + est.totals["input_bytes"] if path == SWEEP else 0
    held = held_workspace_threads(run["at_rest_before"], device, run_bytes)
    without_fft = {**est.totals, "fp32_convolutions": []}
    before = predict_memory(without_fft, device, held)["predicted_memory_bytes"]
    predicted = predict_memory(est.totals, device, held)["predicted_memory_bytes"]
    assert run["steady_peak_allocated"] / before > 1.3
    assert run["steady_peak_allocated"] / predicted == pytest.approx(1.0, abs=0.08)
    a100 = load_device(catalogue, "a100-pcie-40gb")
    assert predict_memory(est.totals, a100) == predict_memory(without_fft, a100)


def test_memory_range_holds_its_point(sweep):
    """The range a report draws around each predicted peak runs from the tensors alone to an FFT workspace: its
    low end never above the point. vit_b_16's was the math path's peak (its L × L score matrices, which a GPU
    never allocates), 1.3-1.45x the point, so its bar ran backwards (40.9 to 32.1 GB around 31.5 GB)."""
    assert (sweep["memory_low"] <= sweep["memory"]).all() and (sweep["memory"] <= sweep["memory_high"]).all()
    vit = sweep[sweep["model"] == "vit_b_16"]
    assert ((vit["memory_low"] / vit["memory"]) > 0.9).all()


@pytest.mark.slow
def test_a_host_bound_steps_host_time_varies_as_much_as_its_misses():
    """Why host-bound steps hold less (README, "How far it holds"): their own host time varies by as much.
    MobileNetV2's batch-32 inference is host-bound in fp32 and tf32 on both GPUs, and its host work is the same
    in both (TF32 changes the kernels' math mode, not the ops dispatched): the model puts the two within 5% of
    each other, the H100 sweep timed tf32 at 0.63 of fp32 and the H200's at 1.33: the host's own spread, which
    a prediction shared by both halves of a pair cannot undercut (the H100's pair: 0.95 and 0.60 of it)."""
    if not SWEEP.is_file():
        pytest.skip("shared fixtures (../shared) not present")
    catalogue = ROOT / "config" / "devices.yaml"
    ratios = {}
    for path, key, ceilings in ((SWEEP, "h100-sxm5-80gb", H100 / "ceilings-h100.json"),
                                (H200_SWEEP, "h200-sxm-141gb", None)):
        device = load_device(catalogue, key, ceilings)
        calibration = shipped_calibration(key) if ceilings else for_device(device)
        runs = {r["precision"]: r for r in map(json.loads, path.read_text().splitlines())
                if (r["model"], r["batch"], r["mode"]) == ("mobilenet_v2", 32, "inference")}
        steps = {}
        for precision in ("fp32", "tf32"):
            est = cached_estimate("mobilenet_v2", 32, precision, "inference")
            steps[precision] = predict_step(est.ops, est.totals, device, calibration)
        assert {s.bound for s in steps.values()} == {"host"}
        assert steps["tf32"].seconds / steps["fp32"].seconds == pytest.approx(1.0, abs=0.05)
        ratios[key] = runs["tf32"]["median_seconds"] / runs["fp32"]["median_seconds"]
        # so each prints a range with the host's scatter in it (timemodel.step_spread), which holds all four
        # runs; the calibration's alone (±25% on the H100) left the H100's tf32 run (0.60) outside
        spread = step_spread(calibration.relative_uncertainty, "host")
        for precision, step in steps.items():
            assert step.high_seconds / step.seconds - 1 == pytest.approx(spread)
            assert step.low_seconds <= runs[precision]["median_seconds"] <= step.high_seconds, (key, precision)
            assert "host-bound: its range adds the host's run-to-run scatter" in step.calibration_source
    assert ratios["h100-sxm5-80gb"] < 0.7 and ratios["h200-sxm-141gb"] > 1.25
    assert ratios["h100-sxm5-80gb"] < 1 - shipped_calibration("h100-sxm5-80gb").relative_uncertainty


# The FP32/TF32 pairs of the sweeps whose steps the model has host-bound in both precisions (model, batch, mode;
# bench_step_prediction.py lists the bound of every run): the same host work twice on one machine.
HOST_BOUND_PAIRS = {
    "h100": [("resnet18", 1, "inference"), ("resnet18", 1, "training"), ("resnet50", 1, "inference"),
             ("resnet50", 1, "training"), ("alexnet", 1, "inference"), ("alexnet", 1, "training"),
             ("mobilenet_v2", 1, "inference"), ("mobilenet_v2", 32, "inference"), ("mobilenet_v2", 1, "training"),
             ("mobilenet_v2", 32, "training"), ("efficientnet_b0", 1, "inference"),
             ("efficientnet_b0", 32, "inference"), ("efficientnet_b0", 1, "training"),
             ("efficientnet_b0", 32, "training"), ("vit_b_16", 1, "inference"), ("vit_b_16", 1, "training")],
    "h200": [("densenet121", 32, "training"), ("googlenet", 32, "training"), ("regnet_y_1_6gf", 32, "inference"),
             ("regnet_y_1_6gf", 32, "training"), ("squeezenet1_1", 32, "training"), ("mobilenet_v2", 32, "inference"),
             ("mobilenet_v2", 32, "training"), ("efficientnet_b0", 32, "inference"),
             ("efficientnet_b0", 32, "training")]}


def test_the_hosts_run_to_run_scatter_is_read_from_the_sweeps_pairs():
    """timemodel.HOST_RUN_SCATTER, recomputed: a host-bound FP32 step and its TF32 twin do the same host work,
    so the log of their measured ratio is two runs' scatter (per run, its rms over √2): 0.22 on the H100's host
    and 0.16 on the H200's, 0.20 over both; the pairs 0.63-1.96x apart."""
    if not SWEEP.is_file():
        pytest.skip("shared fixtures (../shared) not present")
    logs = {}
    for name, path in (("h100", SWEEP), ("h200", H200_SWEEP)):
        runs = {(r["model"], r["batch"], r["mode"], r["precision"]): r["median_seconds"]
                for r in map(json.loads, path.read_text().splitlines()) if r.get("status") == "ok"}
        logs[name] = [math.log(runs[(*pair, "tf32")] / runs[(*pair, "fp32")]) for pair in HOST_BOUND_PAIRS[name]]
    per_run = {name: math.sqrt(statistics.fmean(x * x for x in values) / 2) for name, values in logs.items()}
    assert per_run["h100"] == pytest.approx(0.22, abs=0.01) and per_run["h200"] == pytest.approx(0.16, abs=0.01)
    pooled = math.sqrt(statistics.fmean(x * x for values in logs.values() for x in values) / 2)
    assert pooled == pytest.approx(HOST_RUN_SCATTER, abs=0.01)
    ratios = [math.exp(x) for values in logs.values() for x in values]
    assert (min(ratios), max(ratios)) == pytest.approx(HOST_PAIRS_APART, abs=0.005)


def test_only_a_host_bound_step_widens_its_range():
    assert step_spread(0.25, "gpu") == 0.25 and step_spread(0.25, "cpu") == 0.25
    assert step_spread(0.25, "host") == pytest.approx(math.hypot(0.25, HOST_RANGE_Z * HOST_RUN_SCATTER))
    assert 0.40 < step_spread(0.25, "host") < 0.42


# ---------------------------------------------------------------------------------------------------
# The H200 (tests/data/real/gpu-2026-11-25): never calibrated, predicted from the H100's calibration. Its steps
# ran 0.93× the H100's (spread 0.04) though its memory is 1.43× faster: memory-bound kernels are held to the
# H100's bandwidth per SM cycle (rooflow.estimate.calibration.sm_bound_bandwidth). With the datasheet bandwidth
# alone the 72 batch-256 runs were 46/72 within ±25%, mean |error| 25%; the cap made it 60/72, 14.6%; 16-bit
# max-pooling on the time of 4-byte values 62/72, 13.9%.


@pytest.fixture(scope="module")
def h200():
    device = load_device(ROOT / "config" / "devices.yaml", "h200-sxm-141gb")
    # the seven H100-sweep models (estimates shared with the H100 fixture above) and the five others' inference
    return _compare(H200_SWEEP, device, for_device(device),
                    lambda run: run["model"] not in NEW_MODELS or run["mode"] == "inference", False)


def test_h200_from_the_h100_calibration(h200):
    known = h200[~h200["model"].isin(NEW_MODELS)]
    error = (known["time_ratio"] - 1).abs()
    assert len(known) == 42 and (known["bound"] == "gpu").all()
    # 42 of 42, 7.7% (8.4% before the FP32 forward convolutions took the kernel model of Hopper's single ops,
    # 10.7% before the gaps between kernels)
    assert (error <= 0.25).sum() >= 42 and error.mean() <= 0.08
    # memory, held out while the memory model was changed (issue 25): 41 of 42 (37, then 38 before the FFT
    # workspace and the RGB stem's copies); the miss is the H100's (VGG16 FP32 training, unexplained)
    assert ((known["memory_ratio"] - 1).abs() <= 0.15).sum() >= 41


def test_h200_models_not_in_the_h100_sweep(h200):
    """convnext_tiny, densenet121, googlenet, regnet_y_1_6gf, squeezenet1_1 (inference): no choice of the model
    saw these runs (two H100 runs of ConvNeXt set the price of cuDNN's channels_last depthwise kernels); 15 of 15
    within ±25%, mean |error| 5.0% (6.9% before their FP32 forward convolutions took the kernel model of Hopper's
    single ops: RegNetY FP32 0.84 -> 0.95, SqueezeNet 0.89 -> 0.97, DenseNet 0.93 -> 0.99; 8.6% earlier; 13 of 15
    and 13% before the layout transposes followed cuDNN's kernels and the convolution efficiencies were held to the
    roofline: regnet bf16 1.27 → 1.21, TF32 densenet 0.73 → 0.90; 10 and 20% before 16-bit max-pooling followed
    elements: squeezenet bf16 1.34 → 1.24, googlenet 1.31 → 1.20; 19% before ConvNeXt's depthwise convolutions ran
    cuDNN's kernels; 12 of 15 and 15% before the gaps between kernels).
    GoogLeNet's bf16 step (1.20 before) came to 1.03 when a forward max-pool was priced by its window
    (timemodel.MAX_POOL_OUTPUT_LOADS): its stride-1 3×3 pools took 5.9 ms of 16.5 in the H200's trace
    (tests/data/real/gpu-2026-11-27), 3.9 predicted on their bytes. It is 1.06 since the layout transposes are
    no longer priced 1.5× their fit: that overcount had hidden what its convolutions' kernels miss (the NCHW
    GEMMs on Ampere CUTLASS kernels at 14×14 and the stem:
    test_step_model_gpus.test_googlenets_bf16_convolution_miss_sits_in_its_nchw_gemms_at_14x14_and_its_stem). RegNetY's bf16 step is the slowest against its
    prediction (1.21): in that trace its 1×1 convolutions that cuDNN runs as NCHW GEMMs took CUTLASS and MAGMA
    kernels at 0.7-1.4 TB/s, which the model prices at the bandwidth."""
    new = h200[h200["model"].isin(NEW_MODELS)]
    error = (new["time_ratio"] - 1).abs()
    assert len(new) == 15
    assert (error <= 0.25).all() and error.mean() <= 0.055
    bf16 = new[new["precision"] == "bf16"].set_index("model")["time_ratio"]
    assert bf16["regnet_y_1_6gf"] > bf16.drop("regnet_y_1_6gf").max()
    assert bf16["googlenet"] == pytest.approx(1.06, abs=0.02)


def test_h200_memory_of_models_not_in_the_h100_sweep(h200):
    """Memory of the five new models' inference: 15 of 15 within 1% (DenseNet's concatenations included).
    DenseNet-121's TF32 and bf16 peaks (0.71 and 0.73 before) are its FP32 one: the peak is at a 1×1 convolution,
    which cuDNN runs as a GEMM on NCHW tensors without NHWC copies (rooflow.estimate.formulas.runs_as_gemm, read
    from the H100 ResNet-50 traces). SqueezeNet's TF32 and bf16 peaks were 0.82 and 0.95: its 3×3 stem, where
    they were predicted, runs FFMA kernels on the NCHW image without copies; GoogLeNet's bf16 1.10: its 7×7 stem
    copies the image as 4-byte elements of 4 channels (formulas.IMAGE_CHANNELS, read from the H200's traces)."""
    new = h200[h200["model"].isin(NEW_MODELS)]
    error = (new["memory_ratio"] - 1).abs()
    assert len(new) == 15 and (error <= 0.01).all()
    densenet = new[new["model"] == "densenet121"]["memory_ratio"]
    assert ((densenet - 1).abs() <= 0.02).all()


H200_UNSEEN = ROOT / "tests" / "data" / "real" / "gpu-2026-11-28" / "h200-sweep-new-models.jsonl"


def test_h200_models_no_fixture_held():
    """Eleven torchvision models of which no run was in the repository while the time and memory models were
    built (ResNet-101, ResNeXt-50, MobileNetV3-L, Swin-T, Wide ResNet-50, ViT-B/32, ShuffleNetV2, DenseNet-169,
    EfficientNet-B2, RegNetX-3.2GF, ConvNeXt-S), bf16 training at batch 256, measured on the lent H200 after
    the model was fixed (2026-11-28): 11 of 11 within ±25%, mean |error| 7.8% (the widest, Swin-T at 1.18
    measured/predicted, is unexplained: no trace of it was recorded); memory within ±4%."""
    device = load_device(ROOT / "config" / "devices.yaml", "h200-sxm-141gb")
    runs = _compare(H200_UNSEEN, device, for_device(device), lambda run: True, False)
    error = (runs["time_ratio"] - 1).abs()
    assert len(runs) == 11 and set(runs["precision"] + runs["mode"]) == {"bf16training"}
    assert not set(runs["model"]) & {json.loads(line)["model"] for line in H200_SWEEP.read_text().splitlines()}
    assert (runs["bound"] == "gpu").all() and (error <= 0.25).all() and error.mean() <= 0.09
    assert ((runs["memory_ratio"] - 1).abs() <= 0.05).all()


# ---------------------------------------------------------------------------------------------------
# ConvNeXt-Tiny: its depthwise 7×7 convolutions see channels_last inputs (the blocks permute to NHWC for LayerNorm
# and back), so PyTorch runs them on cuDNN's kernels, not its own (rooflow.estimate.formulas.LAYOUT_OPERANDS).
H100_NEW = ROOT / "tests" / "data" / "real" / "gpu-2026-11-25" / "h100-sweep-5-new-models-partial.jsonl"
FITTED_RUNS = {("fp32", "inference"), ("fp32", "training")}  # on the H100: timemodel.DEPTHWISE_CHANNELS_LAST_*


@pytest.fixture(scope="module")
def convnext():
    h100 = load_device(ROOT / "config" / "devices.yaml", "h100-sxm5-80gb", H100 / "ceilings-h100.json")
    h200 = load_device(ROOT / "config" / "devices.yaml", "h200-sxm-141gb")
    keep = lambda run: run["model"] == "convnext_tiny"  # noqa: E731
    native = shipped_calibration("h100-sxm5-80gb").with_(depthwise_channels_last_efficiency={})
    return {"h100": _compare(H100_NEW, h100, shipped_calibration("h100-sxm5-80gb"), keep, False),
            "h200": _compare(H200_SWEEP, h200, for_device(h200), keep, False),
            "h100 native": _compare(H100_NEW, h100, native, keep, False)}


def test_convnext_depthwise_on_channels_last_inputs(convnext):
    """Two of its runs priced cuDNN's channels_last depthwise kernels (H100, batch 256, fp32 inference and
    training); the other ten at batch 256 — TF32 and bf16 on the H100, all six on the H200 — are within ±13% (the
    H100's were 1.12–2.11× the prediction at PyTorch's native kernels' price, the H200's 1.08–1.93×)."""
    h100, h200 = convnext["h100"], convnext["h200"]
    assert len(h100) == 6 and len(h200) == 6
    held_out = pd.concat([h100[[(p, m) not in FITTED_RUNS for p, m in zip(h100["precision"], h100["mode"])]], h200])
    assert len(held_out) == 10 and ((held_out["time_ratio"] - 1).abs() <= 0.13).all()  # worst: H100 TF32 inference 1.12
    native = convnext["h100 native"].set_index(["precision", "mode"])["time_ratio"]
    assert native[("tf32", "training")] > 1.9 and native[("fp32", "training")] > 1.4  # the miss it was
    assert abs(native[("bf16", "training")] - 1) < 0.1  # bf16's backward runs at the native price: no change


def test_a_linear_layer_at_batch_1_streams_its_matrix():
    """At batch 1 a linear layer is a matrix-vector product: cuBLAS runs gemv kernels that stream the weight, with
    no 128-row output tile for the one row to pad. AlexNet b1 FP32 inference on the H100 (0.48 ms measured) was
    predicted at 0.70 ms, 0.27 ms of it its classifier's three products priced as 1/128-full tiles (0.90 TB/s
    from the 151 MB weight); priced by their 235 MB at the calibration's matmul efficiency of its measured
    bandwidth they take 0.09 ms, the step 0.52 ms (0.92) and host-bound. VGG16 b1 FP32 inference (2.01 ms measured, a 494 MB classifier): 0.88 -> 1.04."""
    if not SWEEP.is_file():
        pytest.skip("shared fixtures (../shared) not present")
    from rooflow.estimate.timemodel import _bandwidth, device_op_seconds

    device = load_device(ROOT / "config" / "devices.yaml", "h100-sxm5-80gb", H100 / "ceilings-h100.json")
    calibration = shipped_calibration("h100-sxm5-80gb")
    measured = {(run["model"], run["precision"], run["mode"]): run["median_seconds"]
                for run in map(json.loads, SWEEP.read_text().splitlines()) if run["batch"] == 1}
    for model, expected in (("alexnet", 0.92), ("vgg16", 1.04)):
        est = cached_estimate(model, 1, "fp32", "inference")
        ratio = measured[(model, "fp32", "inference")] / predict_step(est.ops, est.totals, device, calibration).seconds
        assert ratio == pytest.approx(expected, abs=0.03)
    linear = est.ops[est.ops["type"].eq("Linear") & est.ops["op"].eq("addmm")]
    for _, row in linear.iterrows():  # each at its bytes (the weight streamed once) at the measured bandwidth
        seconds = device_op_seconds(row, "fp32", "inference", device, calibration, device.sm_count)[0]
        bandwidth = _bandwidth(device, calibration) * calibration.memory_efficiency_of("matmul", "inference", False)
        assert seconds == pytest.approx(float(row["bytes_read"] + row["bytes_written"]) / bandwidth, rel=1e-6)
