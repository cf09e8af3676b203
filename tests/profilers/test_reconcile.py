"""Measured vs estimated FLOPs: agreement, and the named cause of a gap — on the real VGG runs with a
closed-form estimate, and on hand-made cases for each cause."""

from __future__ import annotations

import copy
import functools
import math
from pathlib import Path

import pandas as pd
import pytest

from rooflow.estimate import estimate as rooflow_estimate
from rooflow.hardware.devices import load_devices
from rooflow.io import read_json
from rooflow.profilers.ncu import aggregate_ncu
from rooflow.profilers.reconcile import reconcile
from rooflow.report.checks import build_checks
from rooflow.report.summary import COLUMNS, build_row

REAL = Path(__file__).resolve().parents[1] / "data" / "real" / "anoushka21-cloudml" / "proj1"

# VGG11 ("A"): 3×3 convolutions, padding 1, (C_in, C_out, H=W) per layer, then three linear layers.
VGG11_CONVS = [(3, 64, 224), (64, 128, 112), (128, 256, 56), (256, 256, 56), (256, 512, 28), (512, 512, 28),
               (512, 512, 14), (512, 512, 14)]
VGG11_LINEARS = [(512 * 7 * 7, 4096), (4096, 4096), (4096, 1000)]


def vgg11_training_estimate(batch: int) -> dict:
    """Closed form, one FMA = 2 FLOPs: conv 2·C_in·9·C_out·H·W per image, linear 2·in·out; backward = input-grad
    + weight-grad = 2 × forward, except the first convolution, which needs no input-grad."""
    convs = [2 * cin * 9 * cout * hw * hw for cin, cout, hw in VGG11_CONVS]
    linears = [2 * fan_in * fan_out for fan_in, fan_out in VGG11_LINEARS]
    forward = batch * (sum(convs) + sum(linears))
    first = batch * convs[0]
    backward = 2 * forward - first
    return {"total_flops": forward + backward, "forward_flops": forward, "backward_flops": backward,
            "forward_matmul_flops": forward, "backward_matmul_flops": backward, "first_layer_flops": first}


def ncu_run(gpu: str):
    path = REAL / gpu / "vgg11" / "ncu-log-vgg11.txt"
    return aggregate_ncu([path if path.exists() else path.with_name(path.name + ".gz")])


def test_closed_form_vgg11_is_about_7_6_gmac_per_image():
    estimate = vgg11_training_estimate(batch=1)
    assert estimate["forward_flops"] / 2 == pytest.approx(7.6e9, rel=0.01)  # torchvision: 7.61 GMACs
    assert estimate["total_flops"] == pytest.approx(3 * 2 * 7.6e9, rel=0.02)


def test_a100_vgg11_is_flagged_for_missing_tensor_core_metrics():
    result = ncu_run("a100")
    estimate = vgg11_training_estimate(batch=16)
    outcome = reconcile(result.totals, estimate, precision="fp32", mode="training",
                        tensor_metrics_collected=result.totals["tensor_metrics_collected"], architecture="sm_80")
    assert outcome["flops_agree"] is False
    assert outcome["flops_ratio"] == pytest.approx(result.totals["flops_total"] / estimate["total_flops"])
    assert outcome["flops_ratio"] < 0.05  # tens of times too few
    assert "no tensor-core metric was collected" in outcome["cause"]
    assert "TF32" in outcome["cause"] and "sm__ops_path_tensor_src_" in outcome["cause"]
    # An unknown GPU gets the same diagnosis: FP32 convolutions may have run as TF32
    unknown = reconcile(result.totals, estimate, "fp32", "training", False)
    assert "no tensor-core metric" in unknown["cause"]


def test_v100_vgg11_gap_points_at_winograd_not_at_tensor_cores():
    result = ncu_run("v100")
    estimate = vgg11_training_estimate(batch=16)
    outcome = reconcile(result.totals, estimate, "fp32", "training", tensor_metrics_collected=False,
                        architecture="sm_70", kernels=result.kernels)
    assert outcome["flops_agree"] is False
    assert 0.25 < outcome["flops_ratio"] < 0.8
    assert "Winograd" in outcome["cause"] and "tensor" not in outcome["cause"]
    assert not outcome["unexplained"] and outcome["side"] == "convolution/matmul"
    # without the estimate's ops the kernels cannot be matched to layers: the Winograd kernels are named instead
    assert outcome["attribution"] is None and "winogradForward" in outcome["cause"]


def test_v100_vgg11_winograd_layer_by_layer_with_rooflow_estimate():
    result = ncu_run("v100")
    estimate = rooflow_estimate("vgg11", 16, "fp32", "training")
    outcome = reconcile(result.totals, estimate.totals, "fp32", "training", False, architecture="sm_70",
                        kernels=result.kernels, ops=estimate.ops, layers=estimate.layers)
    assert outcome["attribution"] == "launch order" and not outcome["unexplained"]
    # Every 3x3 convolution after the first runs Winograd F(4x4, 3x3): a quarter of the direct multiplications
    # on the output padded to whole 4x4 tiles ((16/14)² more at 14x14), plus the transforms (under 10%).
    forward = [r for r in outcome["layers"] if r["mechanism"] == "Winograd convolution" and r["phase"] == "forward"]
    assert {r["layer"] for r in forward} == {f"features.{i}" for i in (3, 6, 8, 11, 13, 16, 18)}
    sizes = dict(zip(estimate.layers["layer"], estimate.layers["output_shape"]))
    for row in forward:
        side = sizes[row["layer"]][-1]
        expected = 0.25 * (math.ceil(side / 4) * 4 / side) ** 2
        assert expected <= row["ratio"] <= 1.1 * expected, row
    assert "F(4×4, 3×3)" in outcome["cause"] and "winogradForward" in outcome["cause"]


def test_agreement_has_no_cause():
    outcome = reconcile({"flops_total": 1.1e12, "dram_bytes": 5e9}, {"total_flops": 1e12, "fused_bytes": 4.5e9},
                        "fp32", "inference", tensor_metrics_collected=True)
    assert outcome["flops_agree"] is True and outcome["cause"] is None
    assert outcome["flops_ratio"] == pytest.approx(1.1)
    assert outcome["bytes_ratio"] == pytest.approx(5 / 4.5)
    assert outcome["bytes_agree"] is True and outcome["bytes_cause"] is None


def test_tolerance_edges():
    estimate = {"total_flops": 1000.0}
    assert reconcile({"flops_total": 800.0}, estimate, "fp32", "inference", True)["flops_agree"] is True
    assert reconcile({"flops_total": 1200.0}, estimate, "fp32", "inference", True)["flops_agree"] is True
    assert reconcile({"flops_total": 799.0}, estimate, "fp32", "inference", True)["flops_agree"] is False
    assert reconcile({"flops_total": 1201.0}, estimate, "fp32", "inference", True)["flops_agree"] is False


def test_small_training_shortfall_notes_the_first_layer():
    estimate = vgg11_training_estimate(batch=16)
    measured = {"flops_total": 0.97 * estimate["total_flops"]}
    outcome = reconcile(measured, estimate, "fp32", "training", tensor_metrics_collected=True)
    assert outcome["flops_agree"] is True and outcome["cause"] is None
    assert any("first layer computes no input gradient" in note for note in outcome["notes"])
    assert any("1.1% of forward FLOPs" in note for note in outcome["notes"])  # conv1: 173 M of 15.2 G


def test_fp16_on_volta_without_tensor_metrics():
    outcome = reconcile({"flops_total": 1e11}, {"total_flops": 1e12}, "fp16", "inference", False,
                        architecture="sm_70")
    assert "no tensor-core metric" in outcome["cause"] and "FP16" in outcome["cause"]


def test_fp32_on_volta_without_tensor_metrics_is_not_blamed_on_tensor_cores():
    outcome = reconcile({"flops_total": 5e11}, {"total_flops": 1e12}, "fp32", "inference", False,
                        architecture="7.0")
    assert outcome["cause"].startswith("Unexplained") and "tensor" not in outcome["cause"]


def test_without_a_kernel_table_nothing_is_guessed():
    """The ratio alone is no evidence: every gap without a kernel table is unexplained (the old guesses —
    elementwise work, padding, a partial range, several iterations — were printed as causes)."""
    cases = [({"flops_total": 1.3e12}, {"total_flops": 1e12, "matmul_flops": 1e12}),
             ({"flops_total": 1.4e12}, {"total_flops": 1e12, "forward_matmul_flops": 3e11,
                                        "backward_matmul_flops": 6e11}),
             ({"flops_total": 1e11}, {"total_flops": 1e12}),
             ({"flops_total": 3.02e12}, {"total_flops": 1e12})]
    for measured, estimate in cases:
        outcome = reconcile(measured, estimate, "tf32", "training", True)
        assert outcome["cause"].startswith("Unexplained") and outcome["unexplained"] is True
        assert "elementwise" not in outcome["cause"] and "iterations" not in outcome["cause"]


def _kernels(rows):
    """A per-kernel table as aggregate_ncu builds it: (name, kernel_class, flops_fp32, flops_tensor)."""
    frame = pd.DataFrame(rows, columns=["name", "kernel_class", "flops_fp32", "flops_tensor"])
    frame.insert(0, "id", range(len(frame)))
    frame["flops_fp16"] = 0.0
    frame["flops_fp64"] = 0.0
    frame["flops_total"] = frame["flops_fp32"] + frame["flops_tensor"]
    return frame


def _ops(rows):
    """ops.csv rows: (layer, phase, op, op_class, flops)."""
    frame = pd.DataFrame(rows, columns=["layer", "phase", "op", "op_class", "flops"])
    for column in ("bytes_read", "bytes_written", "fused_bytes_read", "fused_bytes_written"):
        frame[column] = 0
    return frame


CONV = "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32_warpgroupsize1x1x1_g1"
BN = "void cudnn::bn_fw_inf_1C11_kernel_NCHW<float, float, 1, 1>(float, float, cudnnTensorStruct)"
ADD = "void at::vectorized_elementwise_kernel<4, at::CUDAFunctor_add<float>, std::array<char *, 3>>(int)"
TWO_CONVS = _ops([("conv1", "forward", "convolution", "matmul", 1e11),
                  ("bn1", "forward", "native_batch_norm", "normalization", 1e9),
                  ("conv2", "forward", "convolution", "matmul", 1e11)])
TWO_CONVS_TOTALS = {"total_flops": 2.01e11, "matmul_flops": 2e11, "normalization_flops": 1e9}


def test_a_gemm_kernel_doing_fewer_flops_than_its_layer_is_unexplained():
    """A GEMM cannot do fewer multiplications than M·N·K: a deficit in an implicit-GEMM kernel with no FFT or
    Winograd kernel beside it has no mechanism, and the cause must say so."""
    kernels = _kernels([(CONV, "convolution", 0.0, 0.5e11), (BN, "normalization", 1e9, 0.0),
                        (CONV, "convolution", 0.0, 0.5e11)])
    outcome = reconcile({"flops_total": 1.01e11}, TWO_CONVS_TOTALS, "tf32", "inference", True,
                        kernels=kernels, ops=TWO_CONVS)
    assert outcome["attribution"] == "launch order"
    assert outcome["cause"].startswith("Unexplained") and outcome["unexplained"]
    assert [r["mechanism"] for r in outcome["layers"]] == ["unexplained", "unexplained"]
    assert outcome["side"] == "convolution/matmul"


def test_a_gemm_kernel_doing_more_is_tile_padding_and_names_it():
    kernels = _kernels([(CONV, "convolution", 0.0, 1e11), (BN, "normalization", 1e9, 0.0),
                        (CONV, "convolution", 0.0, 1.6e11)])
    outcome = reconcile({"flops_total": 2.61e11}, TWO_CONVS_TOTALS, "tf32", "inference", True,
                        kernels=kernels, ops=TWO_CONVS)
    assert not outcome["unexplained"] and outcome["explained_share"] == pytest.approx(1.0)
    assert "GEMM padding — conv2 forward: +60 GFLOP (100 GFLOP → 160 GFLOP, ×1.60" in outcome["cause"]
    assert "×1 (160 GFLOP)" in outcome["cause"] and "tilesize128x128x32" in outcome["cause"]
    assert outcome["layers"][0]["mechanism"] is None  # conv1 agrees exactly


def test_the_other_kernels_carrying_the_gap_are_named_by_class():
    kernels = _kernels([(CONV, "convolution", 0.0, 1e11), (BN, "normalization", 6e10, 0.0),
                        (CONV, "convolution", 0.0, 1e11)])
    outcome = reconcile({"flops_total": 2.6e11}, TWO_CONVS_TOTALS, "tf32", "inference", True,
                        kernels=kernels, ops=TWO_CONVS)
    assert outcome["side"] == "other ops" and not outcome["unexplained"]
    assert ("normalization kernels compute 60 GFLOP where the estimate's normalization ops count 1 GFLOP"
            in outcome["cause"])
    assert "bn_fw_inf_1C11_kernel_NCHW ×1" in outcome["cause"]


def test_a_profile_holding_two_steps_is_recognised_from_its_kernels():
    step = [(CONV, "convolution", 0.0, 1e11), (BN, "normalization", 1e9, 0.0), (CONV, "convolution", 0.0, 1e11),
            (ADD, "elementwise", 0.0, 0.0)]
    outcome = reconcile({"flops_total": 4.02e11}, TWO_CONVS_TOTALS, "tf32", "inference", True,
                        kernels=_kernels(step + step), ops=TWO_CONVS)
    assert "held 2 iterations" in outcome["cause"] and not outcome["unexplained"]


def test_kernel_names_alone_show_fft_but_not_its_share():
    names = pd.DataFrame({"name": ["void fft2d_r2c_32x32<float, 0, 1, 0>(float2 *)", CONV]})
    below = reconcile({"flops_total": 5e11}, {"total_flops": 1e12}, "tf32", "inference", True, kernels=names)
    assert "FFT (1 kernels)" in below["cause"] and not below["unexplained"]
    above = reconcile({"flops_total": 1.5e12}, {"total_flops": 1e12}, "tf32", "inference", True, kernels=names)
    assert above["unexplained"]


def test_missing_tensor_metrics_needs_tensor_core_kernels_when_names_are_known():
    names = pd.DataFrame({"name": ["void implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, 0, 0, 1>"]})
    outcome = reconcile({"flops_total": 1e10}, {"total_flops": 1e12}, "fp32", "training", False,
                        architecture="sm_80", kernels=names)
    assert outcome["unexplained"] and "no kernel name shows tensor-core work" in outcome["cause"]


def test_bytes_range():
    estimate = {"total_flops": 1e12, "min_bytes": 1e9, "fused_bytes": 5e9, "unfused_bytes": 1e10}
    below = reconcile({"flops_total": 1e12, "dram_bytes": 5e8}, estimate, "fp32", "inference", True)
    # no per-kernel table: nothing can name what carries the gap
    assert below["bytes_agree"] is False and below["bytes_unexplained"]
    assert below["bytes_cause"].startswith("Unexplained: measured DRAM bytes are 0.5× the compulsory floor")
    within = reconcile({"flops_total": 1e12, "dram_bytes": 9e9}, estimate, "fp32", "inference", True)
    # an eager step is held to the unfused traffic (one kernel per op): the ratio is to that estimate
    assert within["bytes_agree"] is True and within["bytes_ratio"] == pytest.approx(0.9)
    assert (within["bytes_model"], within["bytes_estimated"]) == ("unfused", 1e10)
    above = reconcile({"flops_total": 1e12, "dram_bytes": 2e10}, estimate, "fp32", "inference", True)
    assert above["bytes_agree"] is False
    assert above["bytes_cause"].startswith("Unexplained: measured DRAM bytes are 2× the unfused estimate")


def test_nothing_to_compare():
    outcome = reconcile({"flops_total": None, "dram_bytes": None}, {"total_flops": 1e12}, "fp32", "training", False)
    assert outcome["flops_ratio"] is None and outcome["flops_agree"] is None and outcome["cause"] is None
    assert outcome["bytes_ratio"] is None and outcome["bytes_agree"] is None
    assert reconcile({"flops_total": 1e9}, {}, "fp32", "training", True)["flops_ratio"] is None


def test_pure_function():
    measured = {"flops_total": 1e10, "dram_bytes": 1e9, "tensor_metrics_collected": False}
    estimate = vgg11_training_estimate(batch=16)
    before = copy.deepcopy((measured, estimate))
    first = reconcile(measured, estimate, "fp32", "training", False)
    second = reconcile(measured, estimate, "fp32", "training", False)
    assert first == second and (measured, estimate) == before


# ---------------------------------------------------------------------------------------------------
# rooflow's own H100 recordings: the cause each run's reconciliation gives, pinned

H100 = Path(__file__).resolve().parents[1] / "data" / "real" / "h100-rooflow"
# (model, batch, precision, mode, ncu file, measured/estimated FLOPs)
H100_RUNS = [
    ("resnet50", 64, "fp32", "training", "resnet50-b64-fp32-training-ncu.csv.gz", 0.9051),
    ("resnet50", 64, "tf32", "inference", "resnet50-b64-tf32-inference-ncu.csv.gz", 1.2215),
    ("resnet50", 64, "tf32", "training", "resnet50-b64-tf32-training-ncu.csv.gz", 1.0746),
    ("vgg16", 64, "fp32", "inference", "vgg16-b64-fp32-inference-ncu.csv.gz", 0.5919),
    ("vgg16", 64, "tf32", "inference", "vgg16-b64-tf32-inference-ncu.csv.gz", 1.0024),
    ("vgg16", 64, "tf32", "training", "vgg16-b64-tf32-training-ncu.csv.gz", 0.9912),
    ("mobilenet_v2", 64, "fp32", "training", "mobilenet_v2-b64-fp32-training-ncu.csv.gz", 1.1711),
    ("resnet18", 16, "fp32", "training", "resnet18-b16-fp32-training-ncu-nvtx.csv.gz", 1.0333),
]


@functools.cache
def h100_outcome(model, batch, precision, mode, path):
    result = aggregate_ncu(H100 / path)
    estimate = rooflow_estimate(model, batch, precision, mode)
    return reconcile(result.totals, estimate.totals, precision, mode, result.totals["tensor_metrics_collected"],
                     architecture="sm_90", kernels=result.kernels, ops=estimate.ops, layers=estimate.layers)


@pytest.mark.parametrize(("model", "batch", "precision", "mode", "path", "ratio"), H100_RUNS,
                         ids=[f"{r[0]}-b{r[1]}-{r[2]}-{r[3]}" for r in H100_RUNS])
def test_every_h100_run_is_matched_layer_by_layer(model, batch, precision, mode, path, ratio):
    outcome = h100_outcome(model, batch, precision, mode, path)
    assert outcome["flops_ratio"] == pytest.approx(ratio, abs=5e-5)
    # every recording's convolution/GEMM kernels pair with the estimate's ops: by NVTX where ncu recorded it
    assert outcome["attribution"] == ("nvtx" if "nvtx" in path else "launch order")
    sides = outcome["sides"]
    assert sides["convolution/matmul"]["measured"] + sides["other ops"]["measured"] == pytest.approx(
        outcome["flops_measured"], rel=1e-9)
    assert sides["convolution/matmul"]["estimated"] + sides["other ops"]["estimated"] == pytest.approx(
        outcome["flops_estimated"], rel=1e-9)
    if abs(ratio - 1) <= 0.2:
        assert outcome["cause"] is None and outcome["flops_agree"] is True
        assert any(note.startswith("Per class: convolution/matmul kernels") for note in outcome["notes"])
    else:
        assert outcome["flops_agree"] is False and not outcome["unexplained"]
        assert outcome["side"] == "convolution/matmul"


def test_h100_resnet50_tf32_inference_excess_is_conv1_channel_padding_and_gemm_tiles():
    """The report used to blame elementwise work here; the excess is tensor-core work: conv1 pads its 3 input
    channels to 16 (5.34× its FLOPs), and 1x1 convolutions run as GEMMs whose tiles overhang 196 or 3136
    output pixels per image."""
    outcome = h100_outcome("resnet50", 64, "tf32", "inference", "resnet50-b64-tf32-inference-ncu.csv.gz")
    cause = outcome["cause"]
    assert cause.startswith("Measured FLOPs are 22% above the estimate (measured/estimated = 1.22).")
    assert "of which 637.4 GFLOP on tensor cores" in cause and "vs 523.4 GFLOP of convolution/matmul" in cause
    assert ("first-layer channel padding — conv1 forward: +65.61 GFLOP (15.11 GFLOP → 80.72 GFLOP, ×5.34; "
            "5.34× ≈ 16/3: the image's 3 channels padded to 16) in convolution "
            "cutlass_tensorop_s1688fprop_optimized_tf32_256x64_16x4_nhwc_align4 ×1 (80.72 GFLOP)") in cause
    assert "GEMM padding" in cause and "cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4 ×8" in cause
    assert "256×64 tiles over 196 output pixels per image × 1024 channels pad the GEMM to ×1.306" in cause
    assert outcome["explained_share"] > 0.99
    by_layer = {(r["layer"], r["phase"]): r for r in outcome["layers"]}
    assert by_layer[("conv1", "forward")]["ratio"] == pytest.approx(16 / 3, rel=0.01)
    assert by_layer[("layer3.0.conv3", "forward")]["ratio"] == pytest.approx(256 / 196, rel=0.01)


def test_h100_eager_dram_excess_is_named_by_its_kernels():
    """VGG16's eager steps move more DRAM bytes than even the unfused estimate: the cause names the side and the
    kernels that move them, read from the recording — in TF32 training the NCHW↔NHWC transposes around cuDNN's
    tensor-core convolutions (on the other-ops side), in FP32 inference cuDNN's FFT convolutions (on the
    convolution side); the runs within the range have no cause."""
    training = h100_outcome("vgg16", 64, "tf32", "training", "vgg16-b64-tf32-training-ncu.csv.gz")
    assert training["bytes_agree"] is False and not training["bytes_unexplained"]
    assert training["bytes_cause"].startswith("Measured DRAM bytes are 1.87× the unfused estimate")
    assert "The other ops side carries most of the difference" in training["bytes_cause"]
    assert "nchwToNhwcKernel ×70 (18.7 GB)" in training["bytes_cause"]
    fft = h100_outcome("vgg16", 64, "fp32", "inference", "vgg16-b64-fp32-inference-ncu.csv.gz")
    assert "The convolution/matmul side carries most of the difference" in fft["bytes_cause"]
    assert "pointwise_mult_and_sum_complex ×2" in fft["bytes_cause"]
    within = h100_outcome("mobilenet_v2", 64, "fp32", "training", "mobilenet_v2-b64-fp32-training-ncu.csv.gz")
    assert within["bytes_agree"] is True and within["bytes_cause"] is None


def test_h100_vgg16_fp32_inference_deficit_is_fft_convolution():
    outcome = h100_outcome("vgg16", 64, "fp32", "inference", "vgg16-b64-fp32-inference-ncu.csv.gz")
    cause = outcome["cause"]
    assert "FFT convolution — 8 layers" in cause and "forward: −812.2 GFLOP" in cause
    assert "sm80_xmma_gemm_cf32cf32" in cause and "pointwise_mult_and_sum_complex ×2" in cause
    fft = [r for r in outcome["layers"] if r["mechanism"] == "FFT convolution"]
    direct = [r for r in outcome["layers"] if r["mechanism"] is None]
    assert len(fft) == 8 and all(r["ratio"] < 0.6 for r in fft)
    # the layers cuDNN ran as direct implicit GEMM agree with the estimate
    assert {r["layer"] for r in direct} >= {"features.2", "features.5", "features.7", "features.10"}


def test_h100_mobilenet_v2_agrees_and_its_excess_is_implicit_gemm_tiles_in_the_backward():
    """At 1.20x the estimate, over the ±20% band, while 3.95 GFLOP of its count were fp16-pipe instructions of its
    FP32 kernels (rooflow.profilers.kernels.only_wide_float_types); without them 1.17x, inside, and its other
    kernels 10.0 GFLOP against the estimate's 10.17 (they were 13.9). The convolution/matmul excess that remains is
    the implicit-GEMM tiles of its backward, layer by layer."""
    outcome = h100_outcome("mobilenet_v2", 64, "fp32", "training", "mobilenet_v2-b64-fp32-training-ncu.csv.gz")
    assert outcome["cause"] is None and outcome["flops_agree"] is True
    other = outcome["sides"]["other ops"]
    assert abs(other["measured"] / other["estimated"] - 1) < 0.02
    padded = [r for r in outcome["layers"] if r["mechanism"] == "GEMM padding" and r["phase"] == "backward"]
    assert len(padded) == 25
    assert sum(r["difference"] for r in padded) > 0.8 * outcome["sides"]["convolution/matmul"]["difference"]


def test_h100_resnet50_fp32_training_agrees_and_its_shortfall_is_fft_and_winograd():
    outcome = h100_outcome("resnet50", 64, "fp32", "training", "resnet50-b64-fp32-training-ncu.csv.gz")
    mechanisms = {r["mechanism"] for r in outcome["layers"] if r["difference"] < 0 and abs(r["difference"]) > 5e9}
    assert mechanisms == {"FFT convolution", "Winograd convolution"}


# ---------------------------------------------------------------------------------------------------
# The checks that read the reconciliation: unexplained gaps, explanations the per-class counts contradict

OLD_RESNET50_CAUSE = ("Measured FLOPs are 22% above the estimate (measured/estimated = 1.22): the estimate counts "
                      "only convolution/matmul FLOPs, while the counters also see the elementwise, normalisation, "
                      "pooling, softmax and optimizer work; compare with an estimate that includes them.")


def h100_summary_row(reconciliation: dict) -> dict:
    """The summary row of the recorded H100 ResNet-50 tf32 inference run, with a given reconciliation."""
    result = aggregate_ncu(H100 / "resnet50-b64-tf32-inference-ncu.csv.gz")
    estimate = rooflow_estimate("resnet50", 64, "tf32", "inference")
    timing = dict(read_json(H100 / "resnet50-b64-tf32-inference-timing.json"), device="h100-sxm5-80gb")
    device = load_devices(Path(__file__).resolve().parents[2] / "config" / "devices.yaml")["h100-sxm5-80gb"]
    return build_row(device, estimate.totals, timing, dict(result.totals, device="h100-sxm5-80gb"),
                     reconciliation=reconciliation)


def failed(row: dict, check: str) -> list[dict]:
    checks, _ = build_checks(pd.DataFrame([row], columns=COLUMNS))
    return [r for _, r in checks.iterrows() if r["check"] == check]


def test_the_old_resnet50_explanation_contradicts_the_per_class_counts():
    """The report's old cause for the real ResNet-50 run blamed the elementwise work; the per-class counts
    put +115 GFLOP on the convolution/matmul side and +1.9 on the other: an error, not a printed cause."""
    outcome = h100_outcome("resnet50", 64, "tf32", "inference", "resnet50-b64-tf32-inference-ncu.csv.gz")
    row = h100_summary_row(outcome)
    assert row["reconciliation_side"] == "convolution/matmul" and row["reconciliation"] == outcome["cause"]
    assert row["measured_matmul_flops"] == pytest.approx(638.5e9, rel=1e-3)
    assert not failed(row, "explanation contradicts the per-class counts")
    assert not failed(row, "unexplained FLOP gap")
    old = dict(row, reconciliation=OLD_RESNET50_CAUSE, reconciliation_side=None)
    [flag] = failed(old, "explanation contradicts the per-class counts")
    assert flag["severity"] == "error"
    assert flag["value"].startswith("convolution/matmul +115.1 GFLOP, other ops +1.711 GFLOP of a +116.8 GFLOP gap")
    assert "blames the other ops side" in flag["likely_cause"]


def test_a_constructed_contradiction_in_both_directions():
    """Measured 1.3 TFLOP for 1 TFLOP estimated: +290 GFLOP in normalization kernels, +10 in convolutions."""
    row = {c: math.nan for c in COLUMNS}
    row.update(device="gpu", model="toy", batch=1, precision="tf32", mode="training", status="ok", checks="",
               flops_ratio=1.3, measured_flops=1.3e12, estimated_flops=1e12, measured_matmul_flops=0.91e12,
               measured_other_flops=0.39e12, estimated_other_flops=0.1e12)
    blames_tiles = dict(row, reconciliation="GEMM tile padding in the 1x1 convolutions")
    [flag] = failed(blames_tiles, "explanation contradicts the per-class counts")
    assert flag["value"] == "other ops +290 GFLOP, convolution/matmul +10 GFLOP of a +300 GFLOP gap"
    blames_norm = dict(row, reconciliation="the normalization kernels compute more than the estimate's formula")
    assert not failed(blames_norm, "explanation contradicts the per-class counts")
    # rooflow's own reconciliation names its side; that wins over the words
    named = dict(blames_tiles, reconciliation_side="other ops")
    assert not failed(named, "explanation contradicts the per-class counts")


def test_an_unexplained_gap_inside_the_band_is_an_error():
    kernels = _kernels([(CONV, "convolution", 0.0, 0.5e11), (BN, "normalization", 1e9, 0.0),
                        (CONV, "convolution", 0.0, 0.5e11)])
    outcome = reconcile({"flops_total": 1.01e11}, TWO_CONVS_TOTALS, "tf32", "inference", True,
                        kernels=kernels, ops=TWO_CONVS)
    assert outcome["flops_ratio"] == pytest.approx(1.01 / 2.01)  # inside [0.5, 2]: the band check stays quiet
    row = {c: math.nan for c in COLUMNS}
    row.update(device="gpu", model="toy", batch=1, precision="tf32", mode="inference", status="ok",
               flops_ratio=outcome["flops_ratio"], reconciliation=outcome["cause"], checks="",
               measured_flops=1.01e11, estimated_flops=2.01e11)
    [flag] = failed(row, "unexplained FLOP gap")
    assert flag["severity"] == "error" and flag["likely_cause"].startswith("Unexplained")
    assert not failed(row, "measured/estimated FLOPs")
    # outside the band the same text is an error of the band check, never a warning
    far = dict(row, flops_ratio=0.3)
    [band] = failed(far, "measured/estimated FLOPs")
    assert band["severity"] == "error" and band["likely_cause"].startswith("Unexplained")


def test_h100_resnet18_bf16_inference_excess_is_conv1_padded_to_32_channels():
    """rooflow's own workflow on a lent H100 (tests/data/real/gpu-2026-11-25, ncu distinct mode, torch 2.11):
    in bf16 cuDNN pads conv1's 3 input channels to 32, not TF32's 16 — 10.7× its FLOPs, nearly all of the
    65% excess; the rest is GEMM tiles overhanging layer4's 7×7 outputs."""
    from rooflow.profilers.distinct import apply_plan

    folder = H100.parent / "gpu-2026-11-25"
    plan = read_json(folder / "resnet18-b32-bf16-inference-ncu_plan.json")
    kernels, totals = apply_plan(aggregate_ncu(folder / "resnet18-b32-bf16-inference-ncu.csv.gz"), plan)
    estimate = rooflow_estimate("resnet18", 32, "bf16", "inference")
    outcome = reconcile(totals, estimate.totals, "bf16", "inference", totals["tensor_metrics_collected"],
                        architecture="sm_90", kernels=kernels, ops=estimate.ops, layers=estimate.layers)
    cause = outcome["cause"]
    assert outcome["flops_ratio"] == pytest.approx(1.6533, abs=1e-4)
    assert ("first-layer channel padding — conv1 forward: +73.09 GFLOP (7.553 GFLOP → 80.64 GFLOP, ×10.68; "
            "10.68× ≈ 32/3: the image's 3 channels padded to 32)") in cause
    assert "GEMM padding — layer4.0.conv2, layer4.1.conv1, layer4.1.conv2 forward" in cause
    assert cause.endswith("These account for all of the convolution/matmul difference.")


# -- a compiled step's DRAM bytes against the fusion-aware estimate ----------------------------------------------
# Hand-made kernel tables over the real estimate of resnet18 at batch 16 (fp32 inference): cuDNN's convolution
# kernels, inductor's Triton kernels (named as inductor names them: triton_<kind>_fused_<aten ops>_<n>) and
# layout copies, whose DRAM bytes are set from the estimate's own per-side bytes in closed form. No GPU ran them.

CUDNN_CONV = "void cudnn::cnn::implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, 0, 0, 1>(int, int)"
TRITON_EPILOGUE = "triton_poi_fused_convolution_relu_0"  # a convolution's bias + ReLU: elementwise work, not convolution
TRITON_NORM = "triton_red_fused__native_batch_norm_legit_no_training_relu_1"
LAYOUT_COPY = "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>(int)"


@functools.lru_cache(maxsize=1)
def resnet18_estimate():
    result = rooflow_estimate("resnet18", 16, "fp32", "inference")
    ops = result.ops
    fused = ops["fused_bytes_read"] + ops["fused_bytes_written"]
    matmul = float(fused[ops["op_class"] == "matmul"].sum())
    return result, matmul, float(fused.sum()) - matmul


def compiled_kernels(conv_bytes: float, triton_bytes: float, copy_bytes: float = 0.0) -> pd.DataFrame:
    """Two convolution kernels, two inductor kernels (and optionally a layout copy) sharing the given bytes."""
    from rooflow.profilers.kernels import classify_kernel

    names = [CUDNN_CONV, CUDNN_CONV, TRITON_EPILOGUE, TRITON_NORM] + ([LAYOUT_COPY] if copy_bytes else [])
    dram = [conv_bytes / 2, conv_bytes / 2, triton_bytes / 2, triton_bytes / 2] + ([copy_bytes] if copy_bytes else [])
    return pd.DataFrame({"name": names, "kernel_class": [classify_kernel(n) for n in names], "dram_bytes": dram,
                         "flops_fp32": [0.0] * len(names), "flops_tensor": [0.0] * len(names)})


def compiled(kernels: pd.DataFrame | None) -> dict:
    result, _, _ = resnet18_estimate()
    measured = {"flops_total": result.totals["total_flops"],
                "dram_bytes": float(kernels["dram_bytes"].sum()) if kernels is not None else
                1.5 * result.totals["fused_bytes"]}
    return reconcile(measured, result.totals, "fp32", "inference", True, kernels=kernels, ops=result.ops,
                     layers=result.layers, variant="compile")


def test_a_compiled_step_within_tolerance_of_the_fused_bytes_agrees():
    _, matmul, other = resnet18_estimate()
    outcome = compiled(compiled_kernels(matmul, 1.1 * other))
    assert outcome["bytes_model"] == "fused" and outcome["bytes_agree"] is True and outcome["bytes_cause"] is None
    assert outcome["bytes_ratio"] == pytest.approx((matmul + 1.1 * other) / (matmul + other))
    # the sides add up to the measured and estimated totals; a convolution's Triton epilogue is not convolution work
    sides = outcome["bytes_sides"]
    assert sides["convolution/matmul"]["measured"] == pytest.approx(matmul)
    assert sides["other ops"]["families"]["inductor's triton_ kernels"]["count"] == 2
    # a compiled step is profiled whole: no per-layer attribution
    assert outcome["attribution"] is None and outcome["layers"] == []


def test_the_kernels_carrying_a_compiled_steps_byte_gap_are_named():
    _, matmul, other = resnet18_estimate()
    half = 0.5 * (matmul + other)
    fused_less = compiled(compiled_kernels(matmul, other + half))
    assert fused_less["bytes_agree"] is False and not fused_less["bytes_unexplained"]
    assert fused_less["bytes_ratio"] == pytest.approx(1.5)
    cause = fused_less["bytes_cause"]
    assert cause.startswith("Measured DRAM bytes are 50% above the fusion-aware estimate")
    assert "other kernels carry 100% of the gap" in cause and "triton_poi_fused_convolution_relu_0" in cause
    assert "more intermediate tensors in DRAM" in cause

    libraries = compiled(compiled_kernels(matmul + half, other))["bytes_cause"]
    assert "convolution/matmul kernels carry 100% of the gap" in libraries and "implicit_convolve_sgemm" in libraries

    copies = compiled(compiled_kernels(matmul, other, copy_bytes=half))["bytes_cause"]
    assert "kernels outside inductor's fused code alone move" in copies and "nchwToNhwcKernel" in copies


def test_a_compiled_profile_without_inductor_kernels_says_the_step_ran_eager():
    _, matmul, other = resnet18_estimate()
    kernels = compiled_kernels(matmul, 3 * other)
    kernels["name"] = [CUDNN_CONV, CUDNN_CONV, "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
                       "void at::native::batch_norm_transform_input_kernel<float>"]
    cause = compiled(kernels)["bytes_cause"]
    assert "no kernel inductor generated (triton_*)" in cause and "graph break" in cause


def test_a_compiled_steps_byte_gap_without_kernels_is_unexplained():
    outcome = compiled(None)
    assert outcome["bytes_unexplained"] and outcome["bytes_cause"].startswith("Unexplained")
