"""Measured vs estimated FLOPs: agreement, and the named cause of a gap — on the real VGG runs with a
closed-form estimate, and on hand-made cases for each cause."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from rooflow.profilers.ncu import aggregate_ncu
from rooflow.profilers.reconcile import reconcile

REAL = Path(__file__).parent / "data" / "real" / "anoushka21-cloudml" / "proj1"

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
    winograd = result.kernels["name"].str.lower().str.contains("winograd").sum()
    assert winograd > 0
    assert f"the profile holds {winograd} Winograd/FFT transform kernels" in outcome["cause"]


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
    assert "Winograd" in outcome["cause"] and "tensor" not in outcome["cause"]


def test_far_too_few_with_tensor_metrics_is_a_partial_range():
    outcome = reconcile({"flops_total": 1e11}, {"total_flops": 1e12}, "tf32", "training", True)
    assert "only part of the step" in outcome["cause"]


def test_more_than_a_matmul_only_estimate_is_the_elementwise_work():
    estimate = {"total_flops": 1e12, "matmul_flops": 1e12}
    outcome = reconcile({"flops_total": 1.3e12}, estimate, "fp32", "training", True)
    assert outcome["flops_agree"] is False
    assert "elementwise, normalisation" in outcome["cause"] and "30% above" in outcome["cause"]


def test_more_than_a_full_estimate_is_padding_and_im2col():
    estimate = {"total_flops": 1e12, "forward_matmul_flops": 3e11, "backward_matmul_flops": 6e11}
    outcome = reconcile({"flops_total": 1.4e12}, estimate, "fp16", "inference", True)
    assert "padding" in outcome["cause"] and "im2col" in outcome["cause"]


def test_a_whole_multiple_is_several_iterations():
    outcome = reconcile({"flops_total": 3.02e12}, {"total_flops": 1e12}, "fp32", "training", True)
    assert "held 3 iterations" in outcome["cause"]


def test_bytes_range():
    estimate = {"total_flops": 1e12, "min_bytes": 1e9, "fused_bytes": 5e9, "unfused_bytes": 1e10}
    below = reconcile({"flops_total": 1e12, "dram_bytes": 5e8}, estimate, "fp32", "inference", True)
    assert below["bytes_agree"] is False and "below the estimated floor" in below["bytes_cause"]
    within = reconcile({"flops_total": 1e12, "dram_bytes": 9e9}, estimate, "fp32", "inference", True)
    assert within["bytes_agree"] is True and within["bytes_ratio"] == pytest.approx(1.8)
    above = reconcile({"flops_total": 1e12, "dram_bytes": 2e10}, estimate, "fp32", "inference", True)
    assert above["bytes_agree"] is False and "unfused estimate" in above["bytes_cause"]


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
