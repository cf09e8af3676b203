"""estimate() on real torchvision models: the API the workflow uses, and the anchors of DESIGN.md.

Anchors (measured on this project's machine, DESIGN.md):
- matmul/conv backward:forward FLOP ratio: resnet18 1.935, alexnet 1.90 (first conv has no input gradient);
- DRAM bytes at batch 256, fp32 forward (MB): resnet18 floor 202 / fused 6,651 / unfused 18,417;
  alexnet 400 / 1,609 / 2,800; vgg16 709 / 31,656 / 62,553 (unfused includes the int64 max-pool indices
  meta writes, as CUDA does; fused drops them in inference since nothing reads them);
- peak training memory at batch 256 (CPU RSS): resnet18 5.78 GB, vgg16 19.9 GB. Our model counts tensor
  bytes only (no allocator, no libraries): within 15%.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from rooflow.errors import RooflowError
from rooflow.estimate import estimate
from rooflow.estimate.core import LAYER_COLUMNS, OP_COLUMNS

CORE_MODELS = ["resnet18", "alexnet", "vgg11", "mobilenet_v2"]

TOTALS_KEYS = {
    "model", "batch", "precision", "mode", "input_size", "forward_flops", "backward_flops", "optimizer_flops",
    "total_flops", "forward_matmul_flops", "backward_matmul_flops", "backward_input_flops",
    "backward_weight_flops", "matmul_flops", "elementwise_flops", "normalization_flops", "pooling_flops",
    "softmax_flops", "attention_flops", "params", "weight_bytes", "activation_bytes", "gradient_bytes",
    "min_bytes", "fused_bytes", "unfused_bytes", "arithmetic_intensity", "arithmetic_intensity_fused",
    "arithmetic_intensity_unfused", "peak_memory_bytes", "peak_memory_breakdown", "unsupported_ops",
    "forward_backward_ratio", "counting_convention",
}


@pytest.fixture(scope="module")
def training():
    return {name: estimate(name, 8, mode="training") for name in CORE_MODELS}


@pytest.mark.parametrize("name", CORE_MODELS)
def test_training_totals_are_complete_and_consistent(training, name):
    est = training[name]
    t = est.totals
    assert TOTALS_KEYS <= set(t)
    json.dumps(t)  # serialisable as is
    assert t["unsupported_ops"] == {}
    assert t["total_flops"] == pytest.approx(t["forward_flops"] + t["loss_flops"] + t["backward_flops"]
                                             + t["optimizer_flops"])
    assert t["backward_flops"] == pytest.approx(t["backward_input_flops"] + t["backward_weight_flops"])
    by_class = sum(t[f"{c}_flops"] for c in ("matmul", "elementwise", "normalization", "pooling", "softmax",
                                             "attention"))
    assert by_class == pytest.approx(t["total_flops"])
    assert 1.75 < t["forward_backward_ratio"] < 2.05
    assert t["min_bytes"] < t["fused_bytes"] < t["unfused_bytes"]
    assert t["arithmetic_intensity"] == pytest.approx(t["total_flops"] / t["min_bytes"])
    assert sum(t["peak_memory_breakdown"].values()) == t["peak_memory_bytes"]
    assert t["gradient_bytes"] == 4 * t["params"]


@pytest.mark.parametrize("name", CORE_MODELS)
def test_layers_and_ops_tables(training, name):
    est = training[name]
    assert list(est.layers.columns) == LAYER_COLUMNS
    assert list(est.ops.columns) == OP_COLUMNS
    t = est.totals
    for column in ("forward_flops", "backward_flops", "backward_input_flops", "backward_weight_flops",
                   "forward_matmul_flops", "optimizer_flops", "loss_flops"):
        assert est.layers[column].sum() == pytest.approx(t[column])
    # the rows add up to the step: the (loss) row showed 0 FLOPs where the totals counted its cross-entropy
    assert est.layers[["forward_flops", "backward_flops", "optimizer_flops", "loss_flops"]].to_numpy().sum() \
        == pytest.approx(t["total_flops"])
    assert est.layers.set_index("layer").at["(loss)", "loss_flops"] == t["loss_flops"] > 0
    assert est.layers["params"].sum() == t["params"]
    assert est.ops["flops"].sum() == pytest.approx(t["total_flops"])
    assert set(est.ops["phase"]) == {"forward", "loss", "backward", "optimizer"}
    assert est.layers["unfused_bytes"].sum() == pytest.approx(t["unfused_bytes"])
    # every leaf module with parameters has its row, with its type
    assert "Conv2d" in set(est.layers["type"])
    assert est.layers["layer"].is_unique


def test_resnet18_layer_attribution(training):
    layers = training["resnet18"].layers.set_index("layer")
    conv1 = layers.loc["conv1"]
    assert conv1["type"] == "Conv2d" and conv1["output_shape"] == [8, 64, 112, 112]
    assert conv1["backward_input_flops"] == 0  # the first layer: no input gradient
    assert conv1["backward_weight_flops"] == conv1["forward_flops"] == 2 * 8 * 64 * 112 * 112 * 3 * 49
    ops = training["resnet18"].ops
    conv_bwd = ops[(ops["layer"] == "layer1.0.conv1") & (ops["op"] == "convolution_backward")]
    assert float(conv_bwd["flops"].sum()) == 2 * layers.loc["layer1.0.conv1", "forward_flops"]
    # ... and its input-gradient also carries the sum of the two gradients reaching the max-pool output
    # (residual branch + identity), which autograd adds while running this convolution's backward
    assert layers.loc["layer1.0.conv1", "backward_input_flops"] == (layers.loc["layer1.0.conv1", "forward_flops"]
                                                                    + 8 * 64 * 56 * 56)
    assert layers.loc["layer1.0", "type"] == "BasicBlock"  # the residual add runs in the block itself
    assert layers.loc["fc", "forward_flops"] == 2 * 8 * 512 * 1000 + 8 * 1000


@pytest.mark.parametrize("name, ratio", [("resnet18", 1.935), ("alexnet", 1.90)])
def test_matmul_backward_forward_ratio(training, name, ratio):
    assert training[name].totals["matmul_backward_forward_ratio"] == pytest.approx(ratio, abs=0.002)


def test_inference_has_no_backward():
    t = estimate("resnet18", 4).totals
    assert t["mode"] == "inference"
    assert t["backward_flops"] == t["optimizer_flops"] == t["gradient_bytes"] == 0
    assert t["total_flops"] == t["forward_flops"]
    assert t["forward_backward_ratio"] is None


def test_batch_scaling_resnet18():
    one = estimate("resnet18", 1, mode="training").totals
    many = estimate("resnet18", 16, mode="training").totals
    assert many["forward_flops"] == pytest.approx(16 * one["forward_flops"], rel=1e-6)
    assert many["backward_matmul_flops"] == pytest.approx(16 * one["backward_matmul_flops"], rel=1e-6)


# DESIGN.md anchors: batch 256 fp32 forward (MB). Our definitions reproduce them (to the MB); the tests
# allow 10% so that a deliberate refinement of a definition is a reviewed change, not a broken build.
BYTES_ANCHORS_MB = {
    "resnet18": (202, 6_651, 18_417),
    "alexnet": (400, 1_609, 2_800),
    "vgg16": (709, 31_656, 62_553),
}


@pytest.mark.parametrize("name", BYTES_ANCHORS_MB)
def test_bytes_anchors_batch256(name):
    t = estimate(name, 256).totals
    floor, fused, unfused = BYTES_ANCHORS_MB[name]
    assert t["min_bytes"] / 1e6 == pytest.approx(floor, rel=0.10)
    assert t["forward_fused_bytes"] / 1e6 == pytest.approx(fused, rel=0.10)
    assert t["forward_unfused_bytes"] / 1e6 == pytest.approx(unfused, rel=0.10)


@pytest.mark.parametrize("name, measured_gb", [("resnet18", 5.78), ("vgg16", 19.9)])
def test_peak_training_memory_anchors(name, measured_gb):
    t = estimate(name, 256, mode="training").totals
    assert t["peak_memory_bytes"] / 1e9 == pytest.approx(measured_gb, rel=0.15)
    breakdown = t["peak_memory_breakdown"]
    assert breakdown["activations"] > breakdown["params"]  # batch 256: activations dominate
    assert breakdown["optimizer_state"] == pytest.approx(t["weight_bytes"], rel=0.01)


def test_unknown_model_lists_valid_names():
    with pytest.raises(RooflowError, match="resnet18"):
        estimate("resnet19", 1)


def test_bad_precision_and_mode():
    with pytest.raises(RooflowError, match="precision"):
        estimate("resnet18", 1, precision="fp8")
    with pytest.raises(RooflowError, match="mode"):
        estimate("resnet18", 1, mode="train")


def test_input_size_override():
    small = estimate("resnet18", 1, input_size=112).totals
    full = estimate("resnet18", 1).totals
    assert small["input_size"] == 112 and full["input_size"] == 224
    assert small["forward_matmul_flops"] < full["forward_matmul_flops"] / 3


def test_the_floor_counts_only_the_weights_the_step_reads():
    """GoogLeNet's two auxiliary heads run in training only: their weights were in the inference floor, which
    then exceeded the fused traffic at --input-size 75 (a floor AI below the fused AI, no upper bound)."""
    from rooflow.workload.models import build_meta_model

    net = build_meta_model("googlenet")
    aux_bytes = sum(p.numel() * 4 for head in (net.aux1, net.aux2) for p in head.parameters())
    aux_bytes += sum(b.numel() * b.element_size() for head in (net.aux1, net.aux2) for b in head.buffers()
                     if b.is_floating_point())
    # nor does inference read a BatchNorm's num_batches_tracked (an int64 each; training increments it)
    counters = sum(b.numel() * 8 for n, b in net.named_buffers() if n.endswith("num_batches_tracked"))
    inference = estimate("googlenet", 1, input_size=75).totals
    assert inference["min_bytes"] == (inference["input_bytes"] + inference["weight_bytes"] - aux_bytes - counters
                                      + inference["output_bytes"])
    assert inference["min_bytes"] <= inference["fused_bytes"]
    training = estimate("googlenet", 2, mode="training").totals  # every head reads its weights
    params = sum(p.numel() * 4 for p in net.parameters())
    assert training["min_bytes"] == (training["input_bytes"] + training["output_bytes"] + 2 * 8
                                     + training["weight_bytes"] + 4 * params)


# ------------------------------------------------------------------------------------------ precisions
def _rows(est, layer, op, phase="forward"):
    ops = est.ops
    return ops[(ops["layer"] == layer) & (ops["op"] == op) & (ops["phase"] == phase)]


@pytest.fixture(scope="module")
def resnet_precisions():
    return {p: estimate("resnet18", 64, precision=p, mode="training") for p in ("fp32", "tf32", "fp16", "bf16")}


def test_precision_does_not_change_flops(resnet_precisions):
    fp32 = resnet_precisions["fp32"].totals
    for precision, est in resnet_precisions.items():
        assert est.totals["forward_flops"] == fp32["forward_flops"], precision
        assert est.totals["backward_matmul_flops"] == fp32["backward_matmul_flops"], precision
        assert est.totals["weight_bytes"] == fp32["weight_bytes"]  # fp32 master weights under autocast


def test_tf32_is_fp32_bytes_on_tf32_roof(resnet_precisions):
    fp32, tf32 = resnet_precisions["fp32"], resnet_precisions["tf32"]
    assert tf32.totals["unfused_bytes"] == fp32.totals["unfused_bytes"]
    matmuls = tf32.ops[tf32.ops["op_class"] == "matmul"]
    assert set(matmuls["compute_precision"]) == {"tf32"}
    assert set(tf32.ops.loc[tf32.ops["op_class"] == "normalization", "compute_precision"]) == {"fp32"}


@pytest.mark.parametrize("low", ["fp16", "bf16"])
def test_autocast_bytes(resnet_precisions, low):
    """CUDA autocast semantics: convolutions and linears run in fp16/bf16 (inputs and weights cast, the
    output half the bytes); batch_norm is on no autocast list, so it runs in its input's dtype (fp16 here,
    as on a GPU); log_softmax/nll_loss are on the fp32 list."""
    fp32, half = resnet_precisions["fp32"], resnet_precisions[low]
    conv32 = _rows(fp32, "layer1.0.conv1", "convolution")
    conv16 = _rows(half, "layer1.0.conv1", "convolution")
    assert int(conv16["bytes_written"].sum()) * 2 == int(conv32["bytes_written"].sum())
    assert set(conv16["compute_precision"]) == {low}
    assert set(_rows(half, "bn1", "native_batch_norm")["compute_precision"]) == {low}
    assert set(_rows(half, "(loss)", "_log_softmax", "loss")["compute_precision"]) == {"fp32"}
    # the weight is cast once per step (autocast's cache), recorded as a _to_copy in its layer
    casts = _rows(half, "layer1.0.conv1", "_to_copy")
    assert int(casts["bytes_read"].sum()) == 64 * 64 * 9 * 4 and int(casts["bytes_written"].sum()) == 64 * 64 * 9 * 2
    assert half.totals["forward_unfused_bytes"] < 0.6 * fp32.totals["forward_unfused_bytes"]
    assert half.totals["peak_memory_bytes"] < 0.9 * fp32.totals["peak_memory_bytes"]


def test_autocast_layer_norm_stays_fp32():
    est = estimate("vit_b_32", 1, precision="fp16")
    ln = est.ops[est.ops["op"] == "native_layer_norm"]
    assert set(ln["compute_precision"]) == {"fp32"}  # layer_norm is on autocast's fp32 list
    linear = est.ops[(est.ops["op_class"] == "matmul")]
    assert set(linear["compute_precision"]) == {"fp16"}
    assert est.totals["unsupported_ops"] == {}


# --------------------------------------------------------------------------------- published figures
@pytest.mark.parametrize("name", CORE_MODELS + ["vit_b_32"])
def test_published_gmacs_core_models(name):
    """torchvision's weights.meta['_ops'] are GMACs at batch 1 and the model's own input size (the full
    zoo: tests/estimate/test_estimate_zoo.py). Agreement here is a consistency check, not validation (DESIGN.md)."""
    from rooflow.workload.models import weights_meta

    t = estimate(name, 1).totals
    assert t["forward_matmul_flops"] / 2 == pytest.approx(weights_meta(name)["_ops"] * 1e9, rel=0.01)


# ------------------------------------------------------------------------ shape-propagation cache
@pytest.mark.parametrize("case", [("resnet50", 8, "fp32", "training"), ("vit_b_16", 2, "fp16", "training"),
                                  ("densenet121", 2, "bf16", "inference")])
def test_geometry_cache_changes_nothing(case, monkeypatch):
    """The recorder reuses the output geometry of a functional op already run on the same shapes (a
    network repeats its blocks): every total, op row and layer row equals the uncached count."""
    from rooflow.estimate import counter

    cached = estimate(*case)
    monkeypatch.setattr(counter, "_call_signature", lambda *args: None)
    uncached = estimate(*case)
    assert cached.totals == uncached.totals
    pd.testing.assert_frame_equal(cached.ops, uncached.ops)
    pd.testing.assert_frame_equal(cached.layers, uncached.layers)


def test_geometry_cache_skips_mutating_and_aliasing_ops():
    from rooflow.estimate.counter import _is_functional

    aten = torch.ops.aten
    assert _is_functional(aten.add.Tensor) and _is_functional(aten.convolution.default)
    assert not _is_functional(aten.add_.Tensor)  # mutates its first argument
    assert not _is_functional(aten.view.default)  # aliases
    assert not _is_functional(aten.native_dropout.default)  # random: the mask is drawn per call


def test_a_model_whose_forward_returns_no_tensor_is_counted_or_refused_in_one_sentence():
    """A forward that returns None (its work done for its side effects) was a StopIteration traceback in
    `rooflow estimate` and the workflow's estimate job, in inference too. Inference counts its work with no
    output bytes; training says, as `rooflow time` does, that there is nothing to train on."""
    from rooflow import estimate_module

    class SideEffects(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(10, 5)

        def forward(self, x):
            self.linear(x)

    result = estimate_module(SideEffects(), torch.zeros(2, 10), name="side_effects")
    assert result.totals["forward_flops"] == 2 * 2 * 10 * 5 + 2 * 5  # the matmul and its bias
    with pytest.raises(RooflowError, match="^the model's output holds no floating-point tensor to train on: give "
                                           "the run a loss"):
        estimate_module(SideEffects(), torch.zeros(2, 10), mode="training", name="side_effects")
