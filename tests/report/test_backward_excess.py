"""Causes from evidence: a forward:backward latency ratio outside its band names the layers whose measured
backward carries the excess (rooflow.measure.optime over the profiled iteration), or says "unexplained".

Real recordings: tests/data/recorded/cpu-rooflow/ (alexnet b1 fp32 training on this project's 2-core CPU VM,
with module ranges) and tests/data/real/h100-rooflow/ (vgg16 b64 fp32 training on an H100, no module ranges)."""

from __future__ import annotations

import gzip
import json
import math
import re
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from support import RECORDED_CPU_RUN, recorded_cpu_row

from rooflow.estimate import estimate
from rooflow.measure.optime import backward_excess, compact, from_record, op_times, seconds_by
from rooflow.report.checks import build_checks
from rooflow.report.summary import COLUMNS

CPU = Path(__file__).resolve().parents[1] / "data" / "recorded" / "cpu-rooflow"
H100 = Path(__file__).resolve().parents[1] / "data" / "real" / "h100-rooflow"


def trace(path: Path) -> dict:
    with gzip.open(path, "rt") as handle:
        return json.load(handle)


@pytest.fixture(scope="module")
def alexnet_ops() -> pd.DataFrame:
    return op_times(trace(CPU / "torch-profiler-alexnet-b1-fp32-training.json.gz"))


@pytest.fixture(scope="module")
def alexnet_estimate():
    result = estimate("alexnet", 1, "fp32", "training")
    key = ("alexnet", 1, "fp32", "training")
    return {key: result.totals}, {key: result.layers}


def test_every_backward_node_of_a_layer_is_booked_to_that_layer(alexnet_ops):
    """Backward nodes carry the sequence number of the forward op that recorded them: every conv/linear
    backward lands on the module whose forward ran it (5 convolutions, 3 linears), none unnamed."""
    backward = alexnet_ops[alexnet_ops["phase"] == "backward"]
    matmul = backward[backward["op"].str.contains("ConvolutionBackward|AddmmBackward")]
    assert sorted(set(matmul["layer"])) == ["classifier.1", "classifier.4", "classifier.6", "features.0",
                                            "features.10", "features.3", "features.6", "features.8"]
    forward = seconds_by(alexnet_ops, "layer", "forward")
    layers = seconds_by(alexnet_ops, "layer", "backward")
    # the first convolution needs no input gradient: its backward is the cheapest of the five, relative to
    # its forward, as the estimate's 2 − share says
    ratio = {name: layers[name] / forward[name] for name in ("features.0", "features.3", "features.6",
                                                            "features.8", "features.10")}
    assert min(ratio, key=ratio.get) == "features.0"
    # what the timing record keeps reads back the same
    again = from_record({"op_times": compact(alexnet_ops)})
    assert math.fsum(again["seconds"]) == pytest.approx(math.fsum(alexnet_ops["seconds"]), rel=1e-12)


def summary_row(backward_over_forward: float, device: str = "cpu") -> pd.DataFrame:
    row = {c: math.nan for c in COLUMNS}
    row.update(device=device, model="alexnet", batch=1, precision="fp32", mode="training", status="ok",
               measured_seconds=0.8, forward_seconds=0.1, backward_seconds=0.1 * backward_over_forward)
    return pd.DataFrame([row], columns=COLUMNS)


def latency_check(frame, estimate_tables, ops) -> pd.Series:
    totals, layers = estimate_tables
    key = ("cpu", "alexnet", 1, "fp32", "training")
    checks, _ = build_checks(frame, totals, layers, op_times={key: ops} if ops is not None else None)
    [row] = [r for _, r in checks.iterrows() if r["check"] == "forward:backward latency"]
    return row


def test_the_issues_alexnet_ratio_is_unexplained_where_the_profiled_ops_sit_in_the_band(alexnet_ops, alexnet_estimate):
    # the issue's CPU run: backward/forward 6.74 against a band of 0.95–3.80 (implied 1.90 ÷/× 2). The
    # profiled iteration here has 3.47; the excess over 1.90 × forward is in the linear and conv layers.
    row = latency_check(summary_row(6.74), alexnet_estimate, alexnet_ops)
    cause = row["likely_cause"]
    assert row["expected"].startswith("[0.95, 3.80]")
    # 3.47 is inside the band: the timed excess is not in the ops
    assert cause.startswith("unexplained: the backward ran at under half the forward's FLOP/s in the timed "
                            "iterations, but the profiled iteration's ops give backward/forward 3.47")
    # against a band the profiled iteration also leaves (a run whose implied ratio were 1.5), the carriers
    profiled, carriers = backward_excess(alexnet_ops, 1.5)
    assert profiled == pytest.approx(3.47, abs=0.005)
    assert [c["name"] for c in carriers][:2] == ["classifier.1 (Linear)", "features.8 (Conv2d)"]
    for carrier in carriers:
        assert carrier["excess_seconds"] == pytest.approx(carrier["backward_seconds"] - 1.5 * carrier["forward_seconds"])
    assert sum(c["share"] for c in carriers) >= 0.8


def test_a_ratio_outside_the_band_in_the_profiled_ops_names_them(alexnet_ops, alexnet_estimate):
    # halve every forward op: the profiled iteration's ratio doubles to 6.9, outside [0.95, 3.80] as the timing
    faster = alexnet_ops.assign(seconds=[s / 2 if p == "forward" else s
                                         for s, p in zip(alexnet_ops["seconds"], alexnet_ops["phase"])])
    row = latency_check(summary_row(6.74), alexnet_estimate, faster)
    cause = row["likely_cause"]
    assert "in the profiled iteration (backward/forward 6.95) the excess over 1.90 × forward is in " \
           "classifier.1 (Linear) +" in cause
    assert "BatchNorm" not in cause and "depthwise" not in cause and "unexplained" not in cause
    assert "classifier.1 (Linear): backward 296 ms, forward 27 ms" in row["evidence"]


def test_without_op_times_or_on_the_h100_recording_the_cause_is_unexplained(alexnet_estimate):
    row = latency_check(summary_row(6.74), alexnet_estimate, None)
    assert row["likely_cause"].startswith("unexplained: the backward ran at under half the forward's FLOP/s, "
                                          "and no per-op time of this run was recorded")
    # H100 vgg16 b64 fp32 training (no module ranges: layer types from the op names): 65.8 ms of backward
    # kernels for 42.7 ms of forward, 1.54, inside a [0.95, 3.80] band
    ops = op_times(trace(H100 / "torch-profiler-vgg16-b64-fp32-training.json.gz"))
    assert seconds_by(ops, phase="backward")["Conv2d"] == pytest.approx(57.19e-3, abs=1e-5)
    row = latency_check(summary_row(6.74), alexnet_estimate, ops)
    assert "profiled iteration's ops give backward/forward 1.54, inside [0.95, 3.80]" in row["likely_cause"]


def test_a_cpu_timing_records_the_time_of_each_layer(tmp_path):
    """The timing job's extra, profiled iteration on the CPU: every layer's forward and backward time."""
    from rooflow.measure.timeline import read_timeline
    from rooflow.measure.timing import RunSpec, measure
    from rooflow.workload.dataset import SubsetSpec, build_subset, load_subset

    build_subset(SubsetSpec(None, 2, 2, 64, 56, 0), tmp_path / "s.pt", tmp_path / "m.csv")
    record = measure(RunSpec("squeezenet1_0", 1, "fp32", "training", "cpu", 0, 2, 1),
                     load_subset(tmp_path / "s.pt"), tmp_path / "kernels.csv")
    assert record["status"] == "ok" and read_timeline(tmp_path / "kernels.csv").empty  # no kernels on a CPU
    ops = from_record(record)
    convolutions = ops[ops["layer_type"] == "Conv2d"]
    # squeezenet1_0: 26 convolutions, each with a forward and a backward row under its module's name
    assert convolutions.groupby("phase")["layer"].nunique().to_dict() == {"backward": 26, "forward": 26}
    assert set(ops["phase"]) == {"forward", "backward", "optimizer"}
    # a Fire block's own op (the concatenation of its expands) is booked to the block, forward and backward
    fire = ops[ops["layer_type"] == "Fire"]
    assert fire.groupby("phase")["layer"].nunique().to_dict() == {"backward": 8, "forward": 8}
    assert record["op_times_source"] == "torch.profiler: CPU time of each op"


def test_the_summary_names_what_takes_most_time_and_whether_it_was_measured(alexnet_ops):
    from rooflow.hardware.devices import load_devices
    from rooflow.report.summary import build_row

    device = load_devices(Path(__file__).resolve().parents[2] / "config" / "devices.yaml")["h100-sxm5-80gb"]
    totals = estimate("alexnet", 1, "fp32", "training").totals
    timing = {"status": "ok", "median_seconds": 2.8, "timer": "cuda-events", "op_times": compact(alexnet_ops)}
    row = build_row(device, totals, timing)
    by_type = seconds_by(alexnet_ops)
    top = max(by_type, key=by_type.get)
    assert row["top_time_source"] == "measured"
    assert row["top_time"] == f"{top} {100 * by_type[top] / sum(by_type.values()):.0f}%"
    assert top == "SGD update"  # alexnet's 61 M parameters: the optimizer step streams 3 × 244 MB at batch 1
    assert build_row(device, totals, {**timing, "op_times": []}).get("top_time_source") is None  # no ops: no prediction


def test_an_imported_traces_kernel_classes_name_what_takes_most_time():
    """An import has no timing job: its "most time" is the kernel class its Nsight Systems trace measured
    (the V100 VGG11 trace: convolutions, once cuDNN's Winograd SGEMMs are booked to them), not a prediction."""
    from rooflow.hardware.devices import load_devices
    from rooflow.profilers.nsys import aggregate_nsys
    from rooflow.report.summary import build_row

    device = load_devices(Path(__file__).resolve().parents[2] / "config" / "devices.yaml")["v100-sxm2-16gb"]
    result = estimate("vgg11", 16, "fp32", "training")
    totals = result.totals
    trace_file = Path(__file__).resolve().parents[1] / "data" / "real" / "anoushka21-cloudml" / "proj1" / "v100" \
        / "vgg11" / "tmp_nsys_gputrace.csv.gz"
    nsys = aggregate_nsys(trace_file).totals
    row = build_row(device, totals, None, nsys=nsys, ops=result.ops)
    by_class = nsys["by_class"]
    assert row["top_time_source"] == "measured kernels"
    assert row["top_time"] == f"convolution {100 * by_class['convolution'] / math.fsum(by_class.values()):.0f}%"
    assert row["top_time"] == "convolution 62%"
    # without the trace, the prediction speaks, and says so
    from rooflow.estimate.calibration import for_device

    predicted = build_row(device, totals, None, ops=result.ops, calibration=for_device(device))
    assert predicted["top_time_source"] == "predicted"


def test_where_the_time_goes_shows_the_measured_layer_types_beside_the_prediction(alexnet_ops, tmp_path):
    from rooflow.report.figures import time_by_layer_figure

    measured = seconds_by(alexnet_ops)
    shares = time_by_layer_figure({"alexnet b1 fp32 training": pd.Series({"Conv2d": 2.0, "Linear": 1.0})}, None,
                                  "cpu", tmp_path / "t.svg", measured={"alexnet b1 fp32 training": measured})
    assert list(shares) == ["measured", "estimate"]
    row = shares["measured"].loc["alexnet b1 fp32 training"]
    assert row.sum() == pytest.approx(100)
    assert row["Conv2d"] == pytest.approx(100 * measured["Conv2d"] / sum(measured.values()))
    drawn = (tmp_path / "t.svg").read_text()
    assert "measured by layer type: torch.profiler, one profiled iteration" in drawn
    # the right panel is the per-op roofline, not the time model's prediction; a total of 3 s is not '3e+03 ms'
    assert "per-op roofline by layer type (a lower bound, not the time model" in drawn
    # that hand-made bound (3 s) is over the measured iteration: starred (test_figures.py)
    assert ">3 s*<" in drawn and "e+03 ms" not in drawn


def recorded_checks(calibration=None):
    """The forward:backward latency check of the recorded CPU run (its timing record with its profiled
    iteration's op times), through the summary row the workflow builds from it: the time model's phases on
    the calibration measured by the same workflow run (or ``calibration``)."""
    row, result, timing, calibration = recorded_cpu_row(calibration)
    frame = pd.DataFrame([row], columns=COLUMNS)
    key = ("alexnet", 1, "fp32", "training")
    checks, table = build_checks(frame, {key: result.totals}, {key: result.layers},
                                 op_times={("cpu", *key): from_record(timing)})
    latency = [r for _, r in checks.iterrows() if r["check"] == "forward:backward latency"]
    return latency, table.iloc[0], calibration


def test_a_ratio_the_time_model_predicts_names_the_parts_that_carry_it():
    """`make run` on the project's 2-core VM (2026-12-02): alexnet b1 fp32 training measured backward/forward
    above 3.80 against a FLOP-implied band of [0.95, 3.80]. The time model, on the calibration the same run
    measured, predicts a ratio outside the band too — its backward's excess is the fresh pages of the
    classifier's 151 MB weight gradient — so the check names that, then what the profiled ops show."""
    [check], table, calibration = recorded_checks()
    timing = json.loads(RECORDED_CPU_RUN.read_text())
    measured = timing["backward_median_seconds"] / timing["forward_median_seconds"]
    assert table["latency_ratio"] == pytest.approx(measured) and measured > table["latency_ratio_high"]
    predicted = table["predicted_latency_ratio"]
    assert predicted > table["latency_ratio_high"] and 1 / 1.5 <= measured / predicted <= 1.5
    cause = check["likely_cause"]
    assert cause.startswith(f"the time model predicts it: backward/forward {predicted:.2f} (forward ")
    assert f"measured {measured:.2f}, {measured / predicted:.2f}x of it), its backward's excess over 1.90 × " \
           "forward in page faults (a CPU tensor of 32 MiB or more is freshly mapped" in cause
    assert "; per op: " in cause and "unexplained" not in cause
    # the page faults carry more than the net excess (the other parts' backward is under 1.90 x their forward)
    assert re.search(r"\+78\.\d ms \(more than all of it: the other parts offset \d+% of it\); per op", cause)
    assert f"(backward/forward {predicted:.2f})" in check["evidence"]
    # without the page faults its predicted ratio falls inside the band: the time model accounts for nothing,
    # and the cause is what the profiled ops alone show
    [check], table, _ = recorded_checks(replace(calibration, page_fault_seconds_per_byte=0.0))
    assert table["latency_ratio_low"] <= table["predicted_latency_ratio"] <= table["latency_ratio_high"]
    assert not check["likely_cause"].startswith("the time model")
    assert "predicted forward" in check["evidence"]


def test_on_the_h200_the_time_model_and_the_profiled_ops_both_name_the_depthwise_backward():
    """ConvNeXt-T b256 TF32 training on an H200 (tests/data/real/gpu-2026-11-27): backward/forward 4.25 against a
    FLOP-implied band of [1.00, 3.99]. The time model (the H200's shipped calibration) predicts 4.96, its
    backward's excess over 2 × forward in the depthwise class; the profiled iteration (4.71) puts it in the
    blocks' first layer, block.0 — ConvNeXt's 7×7 depthwise convolution. Two readings, one cause."""
    from rooflow.estimate.calibration import for_device
    from rooflow.hardware.devices import load_device
    from rooflow.io import read_json
    from rooflow.report.summary import build_row

    h200_folder = Path(__file__).resolve().parents[1] / "data" / "real" / "gpu-2026-11-27"
    timing = read_json(h200_folder / "convnext_tiny-b256-tf32-training-timing.json")
    h200 = load_device(Path(__file__).resolve().parents[2] / "config" / "devices.yaml", "h200-sxm-141gb")
    result = estimate("convnext_tiny", 256, "tf32", "training")
    row = build_row(h200, result.totals, timing, ops=result.ops, calibration=for_device(h200))
    key = ("convnext_tiny", 256, "tf32", "training")
    ops = op_times(trace(h200_folder / "torch-profiler-convnext_tiny-b256-tf32-training.json.gz"))
    checks, table = build_checks(pd.DataFrame([row], columns=COLUMNS), {key: result.totals}, {key: result.layers},
                                 op_times={("h200-sxm-141gb", *key): ops})
    [check] = [r for _, r in checks.iterrows() if r["check"] == "forward:backward latency"]
    assert table.iloc[0]["latency_ratio"] == pytest.approx(4.25, abs=0.005)
    assert table.iloc[0]["latency_ratio_high"] == pytest.approx(3.99, abs=0.005)
    cause = check["likely_cause"]
    predicted = table.iloc[0]["predicted_latency_ratio"]
    assert 4.25 / 1.5 <= predicted <= 4.25 * 1.5 and predicted > 3.99
    head = cause.split("; per op: ")[0]
    assert head.startswith("the time model predicts it") and " in depthwise +" in head
    share = float(head.rsplit("(", 1)[1].split("%")[0])
    assert share >= 80  # the depthwise class alone carries it
    per_op = cause.split("; per op: ")[1]
    assert "in the profiled iteration (backward/forward 4.71)" in per_op
    named = [part.split(" (Conv2d)")[0] for part in per_op.split("is in ")[1].split(", ")]
    assert named[:3] and all(name.endswith(".block.0") for name in named)  # the depthwise 7×7 layers
