"""The kernel model inside a step (rooflow.estimate.kernel_ops, rooflow.estimate.timemodel): which ops of an
estimate it prices, and a one-layer step priced as the single call the public single-op measurements time."""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd
import pytest
import torch

import rooflow
from rooflow.estimate import kernel_calibration as kc
from rooflow.estimate import kernel_ops
from rooflow.estimate.api import estimate_module
from rooflow.hardware.devices import load_devices

ROOT = Path(__file__).resolve().parents[2]
DEVICES = load_devices(ROOT / "config" / "devices.yaml")
KERNELS = ROOT.parent / "shared" / "fixtures" / "public" / "neusight-kernels"


def meta(*shape):
    return torch.empty(*shape, device="meta")


class Add(torch.nn.Module):
    def forward(self, a, b):
        return torch.add(a, b)


class Bmm(torch.nn.Module):
    def forward(self, a, b):
        return torch.bmm(a, b)


def _estimate(module, *inputs, precision="fp32", mode="inference"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return estimate_module(module.to("meta"), inputs, precision=precision, mode=mode)


def test_kernel_rows_are_the_measurement_layout():
    """A convolution by its geometry, nn.Linear on (B, M, N) as one GEMM of B·M rows, torch.bmm by batch,
    an add of two tensors and one of a scalar (their operand counts), LayerNorm and softmax by rows × length.
    Of a TF32 run: its FP32 ops (the same kernels), no TF32 GEMM (tensor cores: not what was measured), and its
    convolution only as a candidate (the FP32 algorithms cuDNN's autotuner weighs against the TF32 ones)."""
    model = torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3, padding=1, bias=False), torch.nn.Flatten(),
                                torch.nn.Linear(32 * 8 * 8, 10), torch.nn.LayerNorm(10), torch.nn.Softmax(-1))
    rows = kernel_ops.kernel_rows(_estimate(model, meta(4, 16, 8, 8)).ops)
    by_operator = {row.operator: row for row in rows.itertuples()}
    conv = by_operator["conv"]
    assert (conv.B, conv.Input_Channel, conv.Output_Channel, conv.Kernel_Szie, conv.Input_Size, conv.Stride,
            conv.Padding) == (4, 16, 32, 3, 8, 1, 1)
    linear = by_operator["linear"]
    assert (linear.B, linear.M, linear.N, linear.K) == (1, 4, 2048, 10)
    assert (by_operator["ln"].B, by_operator["ln"].H) == (4, 10)
    assert (by_operator["softmax"].B, by_operator["softmax"].H) == (4, 10)
    bmm = kernel_ops.kernel_rows(_estimate(Bmm(), meta(13, 27, 15), meta(13, 15, 29)).ops).iloc[0]
    assert (bmm.operator, bmm.B, bmm.M, bmm.N, bmm.K) == ("bmm", 13, 27, 15, 29)
    add = kernel_ops.kernel_rows(_estimate(Add(), meta(127, 168), meta(127, 168)).ops).iloc[0]
    assert (add.operator, add.operands, add.H) == ("add", 2, 127 * 168)
    assert not rows["candidate"].eq(True).any()
    tf32 = kernel_ops.kernel_rows(_estimate(model, meta(4, 16, 8, 8), precision="tf32").ops)
    assert sorted(tf32["operator"]) == ["conv", "ln", "softmax"]
    assert tf32.set_index("operator")["candidate"].eq(True).to_dict() == {"conv": True, "ln": False, "softmax": False}


class Resample(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.grid = torch.nn.Parameter(torch.zeros(4, 8, 8, 2))

    def forward(self, x):
        up = torch.nn.functional.interpolate(torch.relu(x), scale_factor=2, mode="bilinear")
        sampled = torch.nn.functional.grid_sample(up, self.grid, align_corners=False)
        return sampled.var(-1) + sampled.mean(-1) + sampled.sum(-1)


def test_ops_that_resample_gather_or_reduce_are_left_to_the_time_model():
    """The kernel model's elementwise calls read one output-sized tensor per operand (add, mul, relu, ...): an
    upsampling reads a quarter of what it writes, its backward four times, grid_sample gathers, and var, mean and
    sum reduce (they had been priced as a call on their output's few elements). Counted since they have formulas
    (elementwise class), they are not priced as a measured pointwise call."""
    ops = _estimate(Resample(), meta(4, 3, 8, 8).requires_grad_(), mode="training").ops
    rows = kernel_ops.kernel_rows(ops)
    priced = set(ops.loc[rows.index, "op"])
    resampling = {"upsample_bilinear2d", "upsample_bilinear2d_backward", "grid_sampler_2d",
                  "grid_sampler_2d_backward", "var", "mean", "sum"}
    assert resampling <= set(ops.loc[ops["op_class"] == "elementwise", "op"])  # counted, elementwise class
    assert not priced & resampling and "relu" in priced


def test_kernel_rows_of_an_ops_table_read_back_from_csv(tmp_path):
    """The workflow reads ops.csv from disk, where a call without geometry is NaN, not '': the same rows."""
    model = torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3, padding=1, bias=False), torch.nn.ReLU())
    ops = _estimate(model, meta(4, 16, 8, 8)).ops
    ops.to_csv(tmp_path / "ops.csv", index=False)
    again = pd.read_csv(tmp_path / "ops.csv")
    assert again["call"].isna().any()
    pd.testing.assert_frame_equal(kernel_ops.kernel_rows(again), kernel_ops.kernel_rows(ops),
                                  check_dtype=False)


@pytest.mark.parametrize("device", ["t4", "a100-pcie-80gb", "l4", "h100-sxm5-80gb"])
def test_one_layer_is_its_call_alone(device):
    """rooflow.estimate_module of one nn.Linear is the kernel model's latency of that call (launch floor
    included), on a measured GPU and on GPUs without single-op data alike."""
    result = _estimate(torch.nn.Linear(141, 13), meta(1, 58, 141))
    predicted = estimate_module(torch.nn.Linear(141, 13).to("meta"), (meta(1, 58, 141),), device=device)
    calibration, gpu = kc.for_gpu(DEVICES[device])
    rows = kernel_ops.kernel_rows(result.ops)
    assert predicted["predicted_seconds"] == pytest.approx(kc.predict_seconds(rows, gpu, calibration)[0])
    assert predicted["calibration_source"].startswith("one call alone, by the kernel model")


@pytest.mark.skipif(not KERNELS.is_dir(), reason="shared fixtures (../shared) not present")
def test_one_layer_matches_the_measured_call():
    """The T4's measured nn.Linear(13, 141) on (1, 58, 13) (52.2 µs in the public data set): the same
    figure from rooflow.estimate_module within 25%."""
    measured = pd.read_csv(KERNELS / "linear" / "Tesla_T4.csv.gz").head(1).iloc[0]
    assert (measured.B, measured.M, measured.N, measured.K) == (1, 58, 13, 141)
    predicted = rooflow.estimate_module(torch.nn.Linear(13, 141).to("meta"), (meta(1, 58, 13),), device="t4")
    assert predicted["predicted_seconds"] == pytest.approx(measured.Latency * 1e-3, rel=0.25)


def test_steps_of_several_ops_take_the_kernels_device_time():
    """On a GPU calibrated from single ops (T4), an FP32 step of several layers prices each covered op's
    kernels by the kernel model (without its launch floor) and keeps the time model's host costs; on the
    H100 (calibrated from rooflow's recordings) the time model's own."""
    model = torch.nn.Sequential(torch.nn.Conv2d(64, 64, 3, padding=1, bias=False), torch.nn.ReLU(),
                                torch.nn.Conv2d(64, 64, 3, padding=1, bias=False))
    result = _estimate(model, meta(32, 64, 56, 56))
    priced = kernel_ops.kernel_seconds(result.ops, DEVICES["t4"])
    conv = [index for index in priced.index if result.ops.at[index, "op"] == "convolution"]
    on_t4 = estimate_module(model.to("meta"), (meta(32, 64, 56, 56),), device="t4")
    assert on_t4["predicted_seconds_by_class"]["matmul"] == pytest.approx(float(priced.loc[conv, "device_seconds"].sum()))
    assert on_t4["predicted_device_seconds"] < on_t4["predicted_seconds"]  # a step: host and device overlap
    on_h100 = estimate_module(model.to("meta"), (meta(32, 64, 56, 56),), device="h100-sxm5-80gb")
    assert not on_h100["calibration_source"].startswith("one call alone")
