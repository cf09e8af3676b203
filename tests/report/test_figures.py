"""The companion figures' data, from summaries and op tables built by hand with closed-form values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from support import gpu

from rooflow.report.checks import build_checks, flagged_runs
from rooflow.report.figures import (
    correlation_figure,
    estimated_time_by_layer_type,
    forward_backward_figure,
    latency_figure,
    predicted_figure,
    throughput_figure,
    time_by_layer_figure,
)
from rooflow.report.plots import axis_scale
from rooflow.report.summary import COLUMNS

# model: (GFLOP per image forward, parameters, CPU seconds per image, GPU seconds per image)
MODELS = {
    "mobilenet_v2": (0.6e9, 3.5e6, 0.010, 0.0010),
    "resnet18": (3.6e9, 11.7e6, 0.030, 0.0008),
    "alexnet": (1.4e9, 61.1e6, 0.015, 0.0005),
    "vgg11": (15.2e9, 132.9e6, 0.120, 0.0030),
}


def row(device, model, batch, mode="inference", **extra) -> dict:
    flops, params, cpu, gpu_seconds = MODELS[model]
    factor = 3 if mode == "training" else 1
    seconds = (cpu if device == "cpu" else gpu_seconds) * batch * factor
    out = {c: math.nan for c in COLUMNS}
    out.update(device=device, model=model, batch=batch, precision="fp32", mode=mode, status="ok", checks="",
               params=params, estimated_flops=flops * batch * factor, measured_seconds=seconds,
               seconds_spread=0.01, percent_of_roofline=30.0, roof_source="measured")
    out.update(extra)
    return out


def summary(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=COLUMNS)


def full_summary() -> pd.DataFrame:
    return summary([row(d, m, b, mode) for d in ("cpu", "gpu") for m in MODELS for b in (1, 8)
                    for mode in ("inference", "training")])


@pytest.mark.parametrize("values, scale", [([1, 50], "linear"), ([1, 100], "linear"), ([1, 101], "log"),
                                           ([0.001, 10], "log"), ([5], "linear"), ([0, 1e9, np.nan, 2e9], "linear")])
def test_axis_is_log_only_beyond_two_decades(values, scale):
    result, why = axis_scale(values)
    assert result == scale
    assert (why != "") == (scale == "log")
    if scale == "log":
        assert why.startswith("log scale: data span") and "decades" in why


def test_latency_points_and_a_justified_log_axis(tmp_path):
    data = latency_figure(full_summary(), "cpu", tmp_path / "latency.svg")
    assert len(data) == 16 and set(data["device"]) == {"cpu"}
    resnet = data[(data["model"] == "resnet18") & (data["batch"] == 8) & (data["mode"] == "training")].iloc[0]
    assert resnet["gflop"] == pytest.approx(3.6 * 8 * 3)
    assert resnet["milliseconds"] == pytest.approx(30 * 8 * 3)
    assert resnet["mparams"] == pytest.approx(11.7)
    svg = (tmp_path / "latency.svg").read_text()
    assert "Latency per step [ms]" in svg
    scales = data.attrs["scales"]
    # inference latency spans 10 ms (mobilenet b1) .. 960 ms (vgg11 b8): 1.98 decades → linear;
    # parameters 3.5 .. 133 M: 1.6 decades → linear; work 0.6 .. 121.6 GFLOP: 2.3 decades → log, said so
    assert scales[("inference", "fp32", "milliseconds")] == scales[("inference", "fp32", "mparams")] == "linear"
    assert scales[("inference", "fp32", "gflop")] == "log" and "(log scale: data span 2.3 decades)" in svg


def test_latency_over_more_than_two_decades_goes_log_and_says_why(tmp_path):
    frame = summary([row("cpu", m, b) for m in MODELS for b in (1, 256)])
    data = latency_figure(frame, "cpu", tmp_path / "latency.svg")
    # 10 ms .. 30.7 s: 3.5 decades
    assert data.attrs["scales"][("inference", "fp32", "milliseconds")] == "log"
    assert data.attrs["scales"][("inference", "fp32", "mparams")] == "linear"
    assert "log scale: data span 3.5 decades" in (tmp_path / "latency.svg").read_text()


def test_throughput_is_batch_over_latency(tmp_path):
    data = throughput_figure(full_summary(), "gpu", tmp_path / "t.svg")
    alexnet = data[(data["model"] == "alexnet") & (data["batch"] == 8) & (data["mode"] == "inference")].iloc[0]
    assert alexnet["images_per_second"] == pytest.approx(8 / (0.0005 * 8))
    assert "Throughput [images/s]" in (tmp_path / "t.svg").read_text()


def test_an_imported_profiles_time_is_not_called_a_median(tmp_path):
    """The default config's imported A100/V100 profiles have no timing: their time is one profiled step's kernel
    sum (timer nsys-kernels), which the latency axis called "(median)" and the throughput axis left unsaid. Each
    axis now says how its runs were timed: timed medians, one step's kernel time, or both where they mix."""
    imported = [row("gpu", m, 8, timer="nsys-kernels") for m in MODELS]
    latency_figure(summary(imported), "gpu", tmp_path / "imported.svg")
    svg = (tmp_path / "imported.svg").read_text()
    assert "Latency per step [ms]" in svg and "(kernel time of one profiled step)" in svg and "(median" not in svg
    throughput_figure(summary(imported), "gpu", tmp_path / "imported-t.svg")
    assert "(batch / kernel time of one profiled step)" in (tmp_path / "imported-t.svg").read_text()
    mixed = [*imported[:2], *[row("gpu", m, 8, timer="cuda-events") for m in list(MODELS)[2:]]]
    latency_figure(summary(mixed), "gpu", tmp_path / "mixed.svg")
    assert "(median; imported: one step's kernels)" in (tmp_path / "mixed.svg").read_text()
    timed = [row("gpu", m, 8, timer="cuda-events") for m in MODELS]
    latency_figure(summary(timed), "gpu", tmp_path / "timed.svg")
    throughput_figure(summary(timed), "gpu", tmp_path / "timed-t.svg")
    assert "Latency per step [ms] (median)" in (tmp_path / "timed.svg").read_text()
    assert "kernel time" not in (tmp_path / "timed-t.svg").read_text()


def test_a_linear_axis_leaves_room_past_its_largest_point():
    """set_xlim(left=0) froze the far end of a linear axis at the largest value: the default run's A100 VGG19
    (143.7 M parameters) sat on the frame of the latency and throughput panels, its marker cut in half."""
    import matplotlib.pyplot as plt

    from rooflow.report.figures import _apply_scale

    fig, ax = plt.subplots()
    ax.scatter([132.9, 133.0, 143.7], [21.0, 30.2, 41.9])
    assert _apply_scale(ax, "x", pd.Series([132.9, 133.0, 143.7]), "Parameters [millions]") == "linear"
    assert _apply_scale(ax, "y", pd.Series([21.0, 30.2, 41.9]), "Latency per step [ms]") == "linear"
    assert ax.get_xlim() == pytest.approx((0, 1.06 * 143.7)) and ax.get_ylim() == pytest.approx((0, 1.06 * 41.9))
    plt.close(fig)


def test_flagged_runs_stay_in_the_figures_and_are_ringed(tmp_path):
    rows = [row("cpu", m, 1) for m in MODELS]
    rows[0]["seconds_spread"] = 0.2  # noisy
    frame = summary(rows)
    checks, _ = build_checks(frame)
    data = latency_figure(frame, "cpu", tmp_path / "l.svg", flagged_runs(checks))
    assert len(data) == 4
    assert "self-check warning" in (tmp_path / "l.svg").read_text()


def test_spearman_matrix_from_hand_ranks(tmp_path):
    matrices = correlation_figure(full_summary(), tmp_path / "c.svg")
    matrix = matrices[("inference", "fp32", 8)]
    assert list(matrix.columns) == ["latency cpu", "latency gpu", "FLOPs", "parameters"]
    # CPU latency ranks the models exactly as FLOPs do: mobilenet < alexnet < resnet18 < vgg11
    assert matrix.loc["latency cpu", "FLOPs"] == pytest.approx(1.0)
    # GPU ranks: alexnet < resnet18 < mobilenet < vgg11 against FLOPs ranks 2,3,1,4 → ρ = 1 − 6·6/60 = 0.4
    assert matrix.loc["latency gpu", "FLOPs"] == pytest.approx(0.4)
    # parameters rank: mobilenet < resnet18 < alexnet < vgg11 vs FLOPs 1,3,2,4 → ρ = 1 − 6·2/60 = 0.8
    assert matrix.loc["parameters", "FLOPs"] == pytest.approx(0.8)
    assert "Spearman rank correlation" in (tmp_path / "c.svg").read_text()


def test_spearman_needs_three_models(tmp_path):
    two = summary([row("cpu", m, 1) for m in ("resnet18", "alexnet")])
    matrices = correlation_figure(two, tmp_path / "c.svg")
    assert matrices[("inference", "fp32", 1)].isna().all().all()
    assert "at least 3 models" in (tmp_path / "c.svg").read_text()


def test_forward_backward_figure_plots_the_table(tmp_path):
    frame = summary([row("cpu", "resnet18", 8, "training", forward_seconds=0.1, backward_seconds=0.25)])
    layers = {("resnet18", 8, "fp32", "training"): pd.DataFrame(
        {"layer": ["conv1", "fc"], "type": ["Conv2d", "Linear"], "forward_matmul_flops": [6.5, 93.5]})}
    totals = {("resnet18", 8, "fp32", "training"): {"forward_matmul_flops": 100.0, "backward_matmul_flops": 193.5,
                                                     "forward_flops": 110.0, "backward_flops": 210.0}}
    _, table = build_checks(frame, totals, layers)
    drawn = forward_backward_figure(table, tmp_path / "fb.svg")
    assert drawn.iloc[0]["implied_flops_ratio"] == pytest.approx(1.935)
    assert drawn.iloc[0]["estimated_matmul_flops_ratio"] == pytest.approx(1.935)
    assert drawn.iloc[0]["latency_ratio"] == pytest.approx(2.5)
    svg = (tmp_path / "fb.svg").read_text()
    assert "Backward FLOPs / forward FLOPs" in svg and "Backward time / forward time" in svg


def ops_table() -> pd.DataFrame:
    """Three ops on the test GPU (FP32 20 TFLOP/s, TF32 150, DRAM 2 TB/s):
    a conv of 2 TFLOP and 2 GB (compute-bound: 0.1 s), a ReLU of 1 GFLOP moving 4 GB (memory-bound: 2 ms),
    an SGD update of the conv's weights, 0 FLOP moving 2 GB (1 ms)."""
    return pd.DataFrame([
        {"layer": "conv1", "type": "Conv2d", "phase": "forward", "op": "convolution", "op_class": "matmul",
         "compute_precision": "fp32", "calls": 1, "flops": 2e12, "bytes_read": 1e9, "bytes_written": 1e9,
         "fused_bytes_read": 1e9, "fused_bytes_written": 1e9},
        {"layer": "relu", "type": "ReLU", "phase": "forward", "op": "relu", "op_class": "elementwise",
         "compute_precision": "fp32", "calls": 1, "flops": 1e9, "bytes_read": 2e9, "bytes_written": 2e9,
         "fused_bytes_read": 0, "fused_bytes_written": 0},
        {"layer": "conv1", "type": "Conv2d", "phase": "optimizer", "op": "add_", "op_class": "elementwise",
         "compute_precision": "fp32", "calls": 1, "flops": 0, "bytes_read": 1e9, "bytes_written": 1e9,
         "fused_bytes_read": 1e9, "fused_bytes_written": 1e9},
    ])


def test_time_by_layer_type_is_the_per_op_roofline(tmp_path):
    seconds = estimated_time_by_layer_type(ops_table(), gpu())
    assert seconds.to_dict() == pytest.approx({"Conv2d": 0.1, "ReLU": 2e-3, "SGD update": 1e-3})
    # tf32: the conv runs on the 150 TFLOP/s tensor roof → max(2e12 / 150e12, 2e9 / 2e12) = 13.3 ms
    tf32 = ops_table().assign(compute_precision=["tf32", "fp32", "fp32"])
    assert estimated_time_by_layer_type(tf32, gpu(), "tf32")["Conv2d"] == pytest.approx(2e12 / 150e12)
    shares = time_by_layer_figure({"resnet18 b8 fp32 training": seconds},
                                  {"resnet18 b8 fp32 training": {"convolution": 0.09, "elementwise": 0.01}},
                                  "gpu", tmp_path / "t.svg")
    assert shares["estimate"].loc["resnet18 b8 fp32 training", "Conv2d"] == pytest.approx(100 * 0.1 / 0.103)
    assert shares["kernels"].loc["resnet18 b8 fp32 training", "convolution"] == pytest.approx(90)
    svg = (tmp_path / "t.svg").read_text()
    assert "Nsight Systems" in svg and "per-op roofline" in svg


def test_a_roofline_bar_its_measurement_beats_is_starred(tmp_path):
    """The default config's A100 VGG11 import: the per-op roofline panel, titled "a lower bound", drew 44.1 ms
    beside 21.0 ms of measured kernels (its FP32 convolutions ran TF32 on tensor cores), with no word. Such a bar's
    total is starred and the panel says the checks explain it; a bar under its measurement is not."""
    estimated = {"vgg11 b16 fp32 training": pd.Series({"Conv2d": 0.0400, "Linear": 0.0041}),
                 "vgg13 b16 fp32 training": pd.Series({"Conv2d": 0.0200})}
    kernels = {"vgg11 b16 fp32 training": {"convolution": 0.0150, "gemm": 0.0060},
               "vgg13 b16 fp32 training": {"convolution": 0.0300}}
    time_by_layer_figure(estimated, kernels, "a100-sxm4-40gb", tmp_path / "t.svg")
    svg = (tmp_path / "t.svg").read_text()
    assert "44.1 ms*" in svg and "20 ms*" not in svg and "20 ms" in svg
    assert "* measured under it: the checks say why" in svg


def test_predicted_vs_measured_with_the_diagonal(tmp_path):
    rows = [row("gpu", m, b, predicted_seconds=MODELS[m][3] * b / 3) for m in MODELS for b in (1, 8)]
    data = predicted_figure(summary(rows), "gpu", tmp_path / "p.svg")
    assert len(data) == 8
    assert (data["measured_ms"] / data["predicted_ms"]).to_numpy() == pytest.approx(np.full(8, 3.0))
    svg = (tmp_path / "p.svg").read_text()
    assert "measured = predicted" in svg and "log scale" in svg  # 0.17 .. 24 ms: over two decades
    empty = predicted_figure(summary([row("gpu", "vgg11", 1)]), "gpu", tmp_path / "e.svg")
    assert empty.empty and "no run on gpu has both" in (tmp_path / "e.svg").read_text()
    # an imported nsys profile's time is its kernels' sum: plotted against the predicted kernel time
    from rooflow.report.findings import KERNEL_TIMER

    kernels = row("gpu", "vgg11", 16, timer=KERNEL_TIMER, predicted_seconds=0.05, predicted_device_seconds=0.04,
                  predicted_seconds_low=0.03, predicted_seconds_high=0.07)
    data = predicted_figure(summary([kernels, row("gpu", "vgg11", 1, predicted_seconds=0.01)]), "gpu",
                            tmp_path / "k.svg")
    assert sorted(data["predicted_ms"]) == pytest.approx([10.0, 40.0])
    assert "imported profiles: kernel time" in (tmp_path / "k.svg").read_text()
