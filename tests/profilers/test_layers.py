"""Per-layer attribution of profiled kernels (NVTX ranges, launch order) and the per-layer measured vs estimated
table — on rooflow's real ResNet-18 NVTX recording (H100) and on constructed stacks."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import pandas as pd
import pytest

from rooflow.estimate import estimate
from rooflow.profilers.layers import (
    LAYER_TABLE_COLUMNS,
    LOSS,
    OPTIMIZER,
    OUTSIDE,
    attribute_by_launch_order,
    attribute_by_nvtx,
    biggest_gaps,
    has_nvtx,
    layer_table,
    matmul_runs,
)
from rooflow.profilers.ncu import aggregate_ncu
from rooflow.profilers.nvtx import parse_nvtx_stack

H100 = Path(__file__).resolve().parents[1] / "data" / "real" / "h100-rooflow"
NVTX_FILE = H100 / "resnet18-b16-fp32-training-ncu-nvtx.csv.gz"


@functools.cache
def resnet18():
    """(ncu result, estimate) of the recorded ResNet-18 batch-16 FP32 training step (TF32 off)."""
    return aggregate_ncu(NVTX_FILE), estimate("resnet18", 16, "fp32", "training")


@functools.cache
def resnet18_table():
    result, est = resnet18()
    return layer_table(result.kernels, est.ops, est.layers)


def test_parse_a_real_stack_cell():
    result, _ = resnet18()
    thread, messages = parse_nvtx_stack(result.kernels["nvtx_stack"].iloc[0])
    assert thread == "1360"
    assert messages[:4] == ["phase:forward", "layer:conv1", "aten::conv2d, seq = 360, op_id = 1",
                            "aten::convolution, seq = 360, op_id = 2"]


def test_parse_keeps_colons_of_the_message_and_named_domains():
    cell = ('7  "<default domain>:autograd::engine::evaluate_function: ConvolutionBackward0, op_id = 4:none:none:'
            'none:none:none:none"  "rooflow:layer:features.0:none:none:none:none:none:none"')
    thread, messages = parse_nvtx_stack(cell)
    assert thread == "7"
    assert messages == ["autograd::engine::evaluate_function: ConvolutionBackward0, op_id = 4", "layer:features.0"]
    assert parse_nvtx_stack("") == ("", []) and parse_nvtx_stack(float("nan")) == ("", [])


def test_every_kernel_is_attributed_or_outside_and_backward_goes_through_seq():
    result, _ = resnet18()
    where = attribute_by_nvtx(result.kernels)
    assert len(where) == len(result.kernels) == 194 and where["layer"].notna().all()
    # 81 forward kernels inside a layer range, 85 backward kernels tied to their layer by autograd's seq
    assert (where["how"] == "range").sum() == 81 + 2 + 5  # + 2 loss kernels, + 5 optimizer kernels
    assert ((where["how"] == "seq") & (where["phase"] == "backward")).sum() == 85
    # the backward kernels run on autograd's own thread, outside every main-thread range
    threads = {parse_nvtx_stack(text)[0] for text in result.kernels.loc[where["how"] == "seq", "nvtx_stack"]}
    assert threads == {"1388"}
    first_conv_backward = where[(where["layer"] == "conv1") & (where["phase"] == "backward")]
    assert len(first_conv_backward) == 1  # the first layer computes only its weight gradient
    assert set(where.loc[where["layer"] == LOSS, "phase"]) == {"loss"}
    assert (where["layer"] == OPTIMIZER).sum() == 5
    # residual adds (no leaf module) and gradient accumulation: explicit rows, not dropped
    assert set(where.loc[where["layer"] == OUTSIDE, "phase"]) == {"forward", "backward"}


def test_nvtx_and_launch_order_agree_on_every_convolution_and_gemm_kernel():
    result, est = resnet18()
    by_nvtx = attribute_by_nvtx(result.kernels)
    by_order = attribute_by_launch_order(result.kernels, est.ops)
    matched = by_order["layer"].notna()
    assert matched.sum() == sum(len(run) for run in matmul_runs(result.kernels)) == 67  # 63 convolution (3 of them cuDNN scaling helpers) + 4 gemm
    assert (by_nvtx.loc[matched, ["layer", "phase"]] == by_order.loc[matched, ["layer", "phase"]]).all().all()


def test_rows_sum_to_the_ncu_totals():
    result, _ = resnet18()
    table = resnet18_table()
    assert list(table.columns) == LAYER_TABLE_COLUMNS
    assert table["kernels"].sum() == result.totals["kernels"]
    assert math.fsum(table["measured_flops"]) == pytest.approx(result.totals["flops_total"], rel=1e-12)
    assert math.fsum(table["measured_dram_bytes"]) == pytest.approx(result.totals["dram_bytes"], rel=1e-12)
    assert math.fsum(table["measured_tensor_flops"]) == 0  # TF32 was off: CUDA cores only
    assert (table["attribution"] == "nvtx").all()


def test_estimated_rows_sum_to_the_estimate():
    _, est = resnet18()
    table = resnet18_table()
    assert math.fsum(table["estimated_flops"]) == pytest.approx(est.totals["total_flops"], rel=1e-12)
    assert math.fsum(table["estimated_fused_bytes"]) == pytest.approx(est.totals["fused_bytes"], rel=1e-12)
    # an eager step's rows are held to the unfused traffic, as the run's own reconciliation is
    rows = table[table["estimated_unfused_bytes"] > 0]
    assert (rows["bytes_ratio"] == rows["measured_dram_bytes"] / rows["estimated_unfused_bytes"]).all()


def test_convolution_forward_flops_per_layer():
    """Every forward convolution ran an implicit GEMM on CUDA cores, so it computes at least the estimate
    and at most its tiles' padding more. The largest padding is closed-form: layer4's 3x3 convolutions run
    128x32 tiles over the 16·7·7 = 784 output pixels of the batch, padded to 7·128 = 896 rows: 8/7 the
    estimate (plus the epilogue's bias-free scaling, under 0.1%)."""
    table = resnet18_table()
    forward = table[(table["type"] == "Conv2d") & (table["phase"] == "forward")].set_index("layer")
    assert len(forward) == 20
    assert forward["flops_ratio"].between(1.0, 8 / 7 * 1.01).all(), forward["flops_ratio"]
    for layer in ("layer4.0.conv2", "layer4.1.conv1", "layer4.1.conv2"):
        assert "tilesize128x32x8" in forward.at[layer, "top_kernel"]
        assert forward.at[layer, "flops_ratio"] == pytest.approx(8 / 7, rel=1e-3)
    # layers whose GEMM divides into whole tiles agree within 0.2%
    assert forward.loc[["layer1.0.conv1", "layer2.0.conv2", "layer3.1.conv2"], "flops_ratio"].between(
        1.0, 1.002).all()


def test_biggest_gaps_and_an_outside_row():
    table = resnet18_table()
    gaps = biggest_gaps(table, 3)
    assert len(gaps) == 3 and gaps["flops_gap"].abs().is_monotonic_decreasing
    outside = table[table["layer"] == OUTSIDE]
    assert set(outside["phase"]) == {"forward", "backward"}
    assert (outside["estimated_flops"] == 0).all() and (outside["measured_flops"] > 0).all()
    assert outside["note"].str.contains("outside every layer range").all()


def test_a_profile_without_nvtx_says_so_in_the_table():
    result = aggregate_ncu(H100 / "resnet50-b64-tf32-inference-ncu.csv.gz")
    est = estimate("resnet50", 64, "tf32", "inference")
    assert not has_nvtx(result.kernels)
    table = layer_table(result.kernels, est.ops, est.layers)
    last = table.iloc[-1]
    assert last["layer"] == "(all kernels)" and "no NVTX layer ranges" in last["note"]
    assert last["measured_flops"] == pytest.approx(result.totals["flops_total"])
    assert table.iloc[:-1]["measured_flops"].isna().all()
    assert math.fsum(table.iloc[:-1]["estimated_flops"]) == pytest.approx(est.totals["total_flops"])


def test_a_compiled_step_is_one_row_of_all_its_kernels_whatever_ranges_it_has():
    """A compiled step is profiled whole (its kernels fuse layers): even with NVTX ranges in the profile the
    table is the estimate by layer and one row of the measured totals, and the note says why."""
    from rooflow.profilers.layers import WHOLE_STEP, layer_table_note

    result, est = resnet18()
    assert has_nvtx(result.kernels)
    table = layer_table(result.kernels, est.ops, est.layers, by_layer=False)
    last = table.iloc[-1]
    assert (last["layer"], last["note"]) == ("(all kernels)", WHOLE_STEP)
    assert last["measured_dram_bytes"] == pytest.approx(result.totals["dram_bytes"])
    assert table.iloc[:-1]["measured_flops"].isna().all()
    note = layer_table_note(table, None, "Unexplained: measured DRAM bytes are 40% above the fusion-aware estimate")
    assert note.startswith("A compiled step (torch.compile) is profiled whole: inductor's kernels fuse ops")
    assert note.endswith("DRAM bytes: Unexplained: measured DRAM bytes are 40% above the fusion-aware estimate")


def test_reduced_mode_rows_carry_layer_and_phase_items():
    """The reduced ("distinct kernels") ncu mode writes layer: and phase: items on every row, backward ones
    included: the same function attributes them by range."""
    def cell(*messages):
        return "1  " + "  ".join(f'"<default domain>:{m}:none:none:none:none:none:none"' for m in messages)

    kernels = pd.DataFrame({"id": [0, 1, 2, 3], "name": ["a", "b", "c", "d"], "kernel_class": ["convolution"] * 4,
                            "nvtx_stack": [cell("phase:forward", "layer:features", "layer:features.0"),
                                           cell("phase:backward", "layer:features.0"),
                                           cell("phase:optimizer"),
                                           # a backward hook's range on autograd's thread: no phase item
                                           cell("ConvolutionBackward0, seq = 3, op_id = 9", "layer:features.0")]})
    where = attribute_by_nvtx(kernels)
    assert where[["layer", "phase"]].values.tolist() == [["features.0", "forward"], ["features.0", "backward"],
                                                         [OPTIMIZER, "optimizer"], ["features.0", "backward"]]
