"""Summary math on hand-built inputs: every derived column is checked against its closed form."""

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from rooflow.hardware.devices import Device
from rooflow.report.findings import run_checks, run_label
from rooflow.report.summary import UNSEEN_BOUND, build_row, build_summary, eager_rows

GPU = Device(key="gpu", kind="cuda", name="Test GPU", architecture="sm_80",
             peak_flops_per_second={"fp32": 10e12, "tf32": 100e12}, dram_bytes_per_second=1e12)
CPU = Device(key="cpu", kind="cpu", name="Test CPU").with_measured(
    {"peak_flops_per_second": {"fp32": 100e9}, "dram_bytes_per_second": 10e9})


def estimate(**overrides):
    base = dict(model="toy", batch=4, precision="fp32", mode="inference", input_size=224, params=1000,
                total_flops=4e9, forward_flops=4e9, backward_flops=0, optimizer_flops=0,
                forward_matmul_flops=3.8e9, backward_matmul_flops=0, min_bytes=1e7, fused_bytes=1e8,
                unfused_bytes=3e8, peak_memory_bytes=5e8)
    base.update(overrides)
    return base


def timing(seconds, spread=0.01, status="ok", device="cpu", **overrides):
    base = dict(device=device, model="toy", batch=4, precision="fp32", mode="inference", status=status,
                median_seconds=seconds, spread=spread, images_per_second=4 / seconds if seconds else None)
    base.update(overrides)
    return base


def test_cpu_eager_row_uses_measured_roofs_and_the_estimates_unfused_bytes():
    """An eager step runs one kernel per aten op: its estimated point is at the unfused traffic."""
    row = build_row(CPU, estimate(), timing(0.1))
    assert row["flops"] == 4e9 and row["flops_source"] == "estimate"
    assert row["bytes"] == 3e8 and row["bytes_source"] == "estimate-unfused"
    assert row["arithmetic_intensity"] == pytest.approx(4e9 / 3e8)
    assert row["estimated_bytes"] == 3e8 and row["estimated_arithmetic_intensity"] == row["arithmetic_intensity"]
    assert row["achieved_flops_per_second"] == pytest.approx(40e9)
    assert row["ridge_intensity"] == pytest.approx(10)  # 100 GFLOP/s over 10 GB/s
    assert row["attainable_flops_per_second"] == pytest.approx(100e9)
    assert row["percent_of_roofline"] == pytest.approx(40)
    assert row["bound"] == "compute-bound"
    assert row["roof_source"] == "measured"
    assert row["checks"] == ""


def test_a_compiled_point_sits_at_the_fused_intensity_right_of_the_eager_ones():
    """torch.compile fuses elementwise ops into their producers: the compiled step's point uses the fusion-aware
    bytes (6e8), eager and channels_last the unfused ones (2e9): at the same FLOPs it moves 3.3x right (AI 2 ->
    6.7 FLOP/B, both left of the ridge at 10), up the slanted roof."""
    rows = {variant: build_row(CPU, estimate(fused_bytes=6e8, unfused_bytes=2e9), timing(1.0, variant=variant))
            for variant in ("eager", "channels_last", "compile")}
    assert [rows[v]["bytes_source"] for v in rows] == ["estimate-unfused", "estimate-unfused", "estimate-fused"]
    assert [rows[v]["arithmetic_intensity"] for v in rows] == pytest.approx([2.0, 2.0, 4e9 / 6e8])
    # the slanted roof rises with the intensity: the same FLOP/s is a smaller share of it
    assert rows["eager"]["attainable_flops_per_second"] == pytest.approx(20e9)
    assert rows["compile"]["attainable_flops_per_second"] == pytest.approx(10e9 * 4e9 / 6e8)
    assert rows["compile"]["percent_of_roofline"] == pytest.approx(100 * 4e9 / (10e9 * 4e9 / 6e8))


def test_memory_bound_point_percent_is_against_the_slanted_roof():
    row = build_row(CPU, estimate(unfused_bytes=2e9), timing(1.0))  # AI = 2 FLOP/B < ridge 10
    assert row["bound"] == "memory-bound"
    assert row["attainable_flops_per_second"] == pytest.approx(20e9)
    assert row["percent_of_roofline"] == pytest.approx(100 * 4e9 / 20e9)


def test_point_above_its_roof_is_flagged_with_a_cause():
    # 4 GFLOP in 10 ms = 400 GFLOP/s on a CPU whose roof is 100 GFLOP/s: impossible, so flagged.
    row = build_row(CPU, estimate(), timing(0.01))
    assert row["percent_of_roofline"] == pytest.approx(400)
    assert "above the roof" in row["checks"] and "wrong peak" in row["checks"]


def test_noisy_measurement_is_flagged():
    row = build_row(CPU, estimate(), timing(0.1, spread=0.2))
    assert row["checks"].startswith("noisy: spread 20.0% of the median")


def test_oom_is_a_row_not_a_crash():
    row = build_row(GPU, estimate(), timing(None, status="oom", device="gpu", message="CUDA out of memory"))
    assert row["status"] == "oom"
    assert "out of memory" in row["checks"]
    assert row.get("achieved_flops_per_second") is None


def test_gpu_row_prefers_ncu_counts_and_uses_the_precision_roof():
    ncu = dict(device="gpu", model="toy", batch=4, precision="tf32", mode="inference", flops_total=3.9e9,
               dram_bytes=5e8, flops_tensor=3.5e9, tensor_metrics_collected=True)
    row = build_row(GPU, estimate(precision="tf32"), timing(0.001, device="gpu", precision="tf32"), ncu=ncu)
    assert row["flops_source"] == "ncu" and row["bytes_source"] == "ncu-dram"
    assert row["arithmetic_intensity"] == pytest.approx(3.9e9 / 5e8)
    assert row["peak_flops_per_second"] == 100e12  # the TF32 roof, not the FP32 one
    assert row["roof_source"] == "datasheet"
    assert row["attainable_flops_per_second"] == pytest.approx(1e12 * 7.8)


def test_a_profiled_compiled_step_is_held_to_the_fused_bytes_and_its_gap_is_a_check():
    """The same ncu totals (5e8 DRAM bytes) on an eager and on a compiled step of one run: the eager step is held
    to the range from the floor (1e7) to the unfused bytes (3e8) ± 20% and exceeds it; the compiled step is 5x
    the fused bytes (1e8); without a per-kernel table nothing explains either: errors, "Unexplained"."""
    ncu = dict(device="gpu", model="toy", batch=4, precision="fp32", mode="inference", flops_total=3.9e9,
               dram_bytes=5e8, tensor_metrics_collected=True)
    rows = {variant: build_row(GPU, estimate(), timing(0.001, device="gpu", variant=variant),
                               ncu={**ncu, "variant": variant}) for variant in ("eager", "compile")}
    for row in rows.values():
        assert row["bytes_source"] == "ncu-dram" and row["arithmetic_intensity"] == pytest.approx(3.9e9 / 5e8)
    assert [rows[v]["estimated_arithmetic_intensity"] for v in rows] == pytest.approx([4e9 / 3e8, 4e9 / 1e8])
    assert [rows[v]["bytes_ratio"] for v in rows] == pytest.approx([5 / 3, 5.0])
    eager = [c for c in run_checks(rows["eager"]) if c.check == "measured/estimated DRAM bytes"]
    assert [(c.severity, c.value) for c in eager] == [("error", "1.67")]
    assert eager[0].cause.startswith("Unexplained: measured DRAM bytes are 1.67× the unfused estimate")
    [compiled] = [c for c in run_checks(rows["compile"]) if c.check == "measured/estimated DRAM bytes"]
    assert (compiled.severity, compiled.value, compiled.variant) == ("error", "5.00", "compile")
    assert compiled.expected == "within ±20% of the fusion-aware estimate"
    assert compiled.cause.startswith("Unexplained: measured DRAM bytes are 400% above the fusion-aware estimate")


def test_build_summary_joins_estimates_to_every_device_that_measured_them():
    frame = build_summary({"cpu": CPU, "gpu": GPU}, [estimate()],
                          [timing(0.1), timing(0.001, device="gpu")])
    assert sorted(frame["device"]) == ["cpu", "gpu"]
    assert frame.set_index("device").loc["gpu", "roof_source"] == "datasheet"


def test_each_variant_of_a_run_is_a_row_of_its_own_with_the_one_estimate_and_its_compile_time():
    """The timing jobs of one run as eager, channels_last and compiled: three rows (eager first, whatever the
    order they come in), each its own measured time on the same estimated FLOPs; compile time apart."""
    frame = build_summary({"cpu": CPU}, [estimate()],
                          [timing(0.05, variant="compile", compile_seconds=12.0), timing(0.1),
                           timing(0.08, variant="channels_last")])
    assert list(frame["variant"]) == ["eager", "channels_last", "compile"]
    assert list(frame["measured_seconds"]) == [0.1, 0.08, 0.05]
    assert list(frame["achieved_flops_per_second"]) == pytest.approx([4e9 / 0.1, 4e9 / 0.08, 4e9 / 0.05])
    assert frame["compile_seconds"].tolist()[2] == 12.0 and frame["compile_seconds"][:2].isna().all()
    # the figures that compare runs (latency, correlation, forward:backward) see the eager row only
    assert eager_rows(frame)["measured_seconds"].tolist() == [0.1]
    # ...and the report names a variant after the run (roofline points, checks, the home page)
    assert [run_label(row) for _, row in frame.iterrows()] == [
        "cpu toy b4 fp32 inference", "cpu toy b4 fp32 inference channels_last", "cpu toy b4 fp32 inference compile"]


def test_a_run_that_cannot_fit_is_a_result_row_with_the_verdict():
    """The workflow's record_unfit row (rooflow.estimate.predict.unfit_record): status does-not-fit, the
    prediction's verdict as a 'result' check, no time, no roofline point."""
    from rooflow.estimate import estimate
    from rooflow.estimate.predict import unfit_record
    from rooflow.hardware.devices import load_devices
    from rooflow.report.checks import build_checks
    from rooflow.report.summary import build_summary

    devices = load_devices(Path(__file__).resolve().parents[2] / "config" / "devices.yaml")
    totals = estimate("vgg16", 256, "fp32", "training").totals
    record = unfit_record(totals, devices["t4"])
    assert record["status"] == "does-not-fit" and "does not fit: needs 20.5 GB" in record["message"]
    summary = build_summary(devices, [totals], [record])
    row = summary.iloc[0]
    assert row["status"] == "does-not-fit" and pd.isna(row["measured_seconds"]) and row["fits"] == False  # noqa: E712
    checks, _ = build_checks(summary)
    unfit = checks[checks["check"] == "does not fit (not submitted)"]
    assert list(unfit["severity"]) == ["result"] and "20.5 GB" in unfit["likely_cause"].iloc[0]


def test_a_missed_time_prediction_names_the_layer_types_that_carry_it():
    """Closed form: measured 12 ms for a predicted 8 ms; Conv2d measured 9 vs predicted 5 ms and BatchNorm2d
    2 vs 1.5 ms carry the miss (ReLU, faster than predicted, does not), largest first."""
    from rooflow.report.findings import _miss_carriers

    run = {"device": "gpu", "measured_over_predicted": 1.5,
           "measured_seconds_by_layer_type": '{"Conv2d": 0.009, "BatchNorm2d": 0.002, "ReLU": 0.0005}',
           "predicted_seconds_by_layer_type": '{"Conv2d": 0.005, "BatchNorm2d": 0.0015, "ReLU": 0.001}'}
    assert _miss_carriers(run) == ("by layer type, measured vs predicted kernel time in the profiled iteration: "
                                   "Conv2d 9 vs 5 ms (+4 ms), BatchNorm2d 2 vs 1.5 ms (+0.5 ms)")
    assert _miss_carriers({**run, "measured_seconds_by_layer_type": None}) is None


def test_a_miss_its_profiled_iteration_ran_the_other_way_names_no_layer():
    """The recorded CPU run (alexnet b1 fp32 training): its profiled iteration's layers summed above their
    prediction. Where the timed step came out faster than predicted (0.7x; the default run's ResNet-18 b4 training
    at 0.73x named BatchNorm2d's -6.9 ms for a 140 ms miss whose profiled iteration ran 1.10x), no layer is named
    as the carrier: the sentence gives both ratios and says unexplained."""
    import json

    from support import recorded_cpu_row

    from rooflow.report.findings import _miss_carriers

    row, _, _, _ = recorded_cpu_row()
    profiled = sum(json.loads(row["measured_seconds_by_layer_type"]).values())
    modelled = sum(json.loads(row["predicted_seconds_by_layer_type"]).values())
    assert profiled > modelled
    said = _miss_carriers({**row, "measured_over_predicted": 0.7})
    assert said == (f"the profiled iteration does not reproduce the miss: its layers' op time summed "
                    f"{profiled * 1e3:.3g} ms against {modelled * 1e3:.3g} ms predicted ({profiled / modelled:.2f}x), "
                    f"where the timed step measured 0.70x its prediction: which layers carry it is unexplained")
    assert _miss_carriers(row).startswith("by layer type")  # the same direction: the carriers are named


def test_a_missed_training_prediction_names_the_phase_that_carries_it():
    """What a missed training prediction prints, on the recorded CPU run (alexnet b1 fp32 training,
    tests/data/recorded/cpu-rooflow, make run of 2026-12-02; at 1.12x its prediction it is inside the band): its phases as the timing job measured them against the time model's split of its
    prediction, on the calibration the same run measured — the backward, 155 ms measured against 112 predicted,
    departs most (the optimizer 147 against 164, the forward 25.9 against 18); inference runs and rows without
    the split name no phase."""
    from support import recorded_cpu_row

    from rooflow.report.findings import _phase_carriers, _predicted_time_carrier

    row, _, timing, _ = recorded_cpu_row()
    said = _phase_carriers(row)
    forward, backward = timing["forward_median_seconds"], timing["backward_median_seconds"]
    assert said.startswith(f"by phase, measured vs predicted: backward {backward * 1e3:.3g} vs "
                           f"{row['predicted_backward_seconds'] * 1e3:.3g} ms, ")
    assert f"forward {forward * 1e3:.3g} vs {row['predicted_forward_seconds'] * 1e3:.3g} ms" in said
    optimizer = row["measured_seconds"] - forward - backward
    assert f"optimizer {optimizer * 1e3:.3g} vs " in said
    assert _predicted_time_carrier(row).startswith(said + "; by layer type")
    assert _phase_carriers({**row, "mode": "inference"}) is None
    assert _phase_carriers({**row, "predicted_forward_seconds": None}) is None


def test_a_missed_prediction_names_the_layers_that_carry_it():
    """The recorded CPU run (alexnet b1 fp32 training): per layer, forward and backward, its profiled iteration
    against the time model — the classifier's first Linear (its 151 MB weight's gradient, a product of one row's
    depth) departs most the slow way, 93.9 against 69.4 ms, then classifier.4 and classifier.6; the stem
    convolution the fast way (2.2 against 4.1 ms). The optimizer's update of a layer's weights is the SGD update's
    time in the iteration, so neither side counts it for the layer (with it the prediction read 178 ms)."""
    import json

    from support import recorded_cpu_row

    from rooflow.report.findings import _layer_carriers, _miss_carriers

    row, result, timing, _ = recorded_cpu_row()
    departures = {layer: (kind, measured, predicted) for layer, kind, measured, predicted in
                  json.loads(row["layer_departures"])}
    kind, measured, predicted = departures["classifier.1"]
    recorded = sum(op["seconds"] for op in timing["op_times"] if op["layer"] == "classifier.1")
    assert kind == "Linear" and measured == pytest.approx(recorded) and predicted == pytest.approx(0.0694, abs=0.002)
    assert departures["features.0"][1] < departures["features.0"][2]
    said = _miss_carriers(row)
    assert said.endswith("; by layer: classifier.1 (Linear) 93.9 vs 69.4 ms, classifier.4 (Linear) 39.5 vs 30.8 ms")
    assert _layer_carriers(row, slower=False, limit=2).startswith("by layer: features.0 (Conv2d) 2.24 vs 4.07 ms")
    plain = _miss_carriers({**row, "layer_departures": None})
    assert plain.startswith("by layer type") and "by layer:" not in plain


def test_a_host_bound_miss_names_its_twin_the_same_host_work_timed_again():
    """rooflow's H100 sweep timed ResNet-50 b1 inference at 3.05 ms in FP32 and 5.99 ms in TF32: the same ops
    dispatched (TF32 changes only the kernels), both host-bound in the model (5.24 ms). The FP32 step, 0.58 of the
    prediction, is outside even a host-bound range (±41%); its warning names its TF32 twin, 1.96x it on the same
    machine — the host's own spread, read from the user's data. The TF32 step (1.14) needs no check, and a twin
    not timed (or GPU-bound) gives no clause."""
    from support import cached_estimate

    sweep = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "real" / "h100-rooflow" / \
        "h100-sweep-7-models.jsonl"
    if not sweep.is_file():
        pytest.skip("shared fixtures (../shared) not present")
    from rooflow.hardware.devices import default_catalogue_path, load_devices

    devices = load_devices(default_catalogue_path())
    runs = [r for r in map(json.loads, sweep.read_text().splitlines())
            if (r["model"], r["batch"], r["mode"]) == ("resnet50", 1, "inference") and r["precision"] in ("fp32", "tf32")]
    timings = [{**r, "device": "h100-sxm5-80gb", "timer": "cuda-events"} for r in runs]
    estimates = {r["precision"]: cached_estimate("resnet50", 1, r["precision"], "inference") for r in runs}
    summary = build_summary(devices, [e.totals for e in estimates.values()], timings,
                            ops={("resnet50", 1, p, "inference"): e.ops for p, e in estimates.items()})
    rows = summary.set_index("precision")
    assert list(rows["predicted_bound"]) == ["host", "host"]
    assert rows.loc["fp32", "host_twin_precision"] == "tf32"
    assert rows.loc["fp32", "host_twin_seconds"] == pytest.approx(5.99e-3, abs=5e-5)
    [check] = [c for c in run_checks(rows.loc["fp32"].to_dict() | {"precision": "fp32"})
               if c.check == "predicted vs measured time"]
    assert "its tf32 twin, the same host work (TF32 changes only the kernels) and host-bound too, measured " \
           "5.99 ms: 1.96x this step on the same machine" in check.cause
    assert "tf32 twin" in rows.loc["fp32", "checks"]  # the rendered column re-rendered with it
    assert run_checks(rows.loc["tf32"].to_dict() | {"precision": "tf32"}) == []
    alone = build_summary(devices, [estimates["fp32"].totals], timings[:1],
                          ops={("resnet50", 1, "fp32", "inference"): estimates["fp32"].ops})
    assert alone["host_twin_seconds"].isna().all() and "twin" not in alone["checks"].iloc[0]


def test_h100_resnet18_bf16_miss_is_read_from_its_profiled_iteration():
    """rooflow's real H100 timing job (resnet18 b32 bf16 inference, torch 2.11): measured 2.89 ms, 1.27× the
    prediction, inside the range of a host-bound step (±41%) but outside ±25%: a noted result, which says the model
    has the step host-bound and names the layer types whose kernels took
    longer than predicted in the profiled iteration, BatchNorm2d first (+0.09 ms), then Conv2d (1.03 ms against
    0.96: +0.06 ms), and the layers departing most, the stem's conv1 and bn1. That Conv2d gap is mostly the stem's: the other 19 convolutions are within 0.8-1.41× of their
    recorded kernels (14 within ±5%; cuDNN's transposes by direction, at their fitted ratio used once, filters at
    their own rate: timemodel.TRANSPOSE_KERNEL_SECONDS), while the stem took 0.34 ms against 0.29 — its
    kernel, a padded 3-channel CUTLASS fprop (cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64, in the ncu
    recording beside it), runs under the tensor-core efficiency the model gives it. While the layout transposes
    were divided by an efficiency twice, Conv2d read 1.04 ms: the overcount hid the stem."""
    import ast
    import json

    from rooflow.estimate.calibration import for_device
    from rooflow.estimate.core import estimate as rooflow_estimate
    from rooflow.estimate.timemodel import device_op_seconds
    from rooflow.hardware.devices import default_catalogue_path, load_devices
    from rooflow.profilers.ncu import aggregate_ncu

    root = Path(__file__).resolve().parents[1] / "data" / "real" / "gpu-2026-11-25"
    record = json.loads((root / "resnet18-b32-bf16-inference-timing.json").read_text())
    device = load_devices(default_catalogue_path())["h100-sxm5-80gb"]
    calibration = for_device(device)
    result = rooflow_estimate("resnet18", 32, "bf16", "inference")
    row = build_row(device, dict(result.totals), record, ops=result.ops, calibration=calibration)
    assert row["measured_over_predicted"] == pytest.approx(1.27, abs=0.05)
    measured = json.loads(row["measured_seconds_by_layer_type"])
    assert measured["Conv2d"] == pytest.approx(1.026e-3, rel=1e-3)
    # inside the host-bound range (±41%: timemodel.step_spread), so a noted result, not a warning
    assert not [c for c in run_checks(row) if c.check == "predicted vs measured time"]
    [check] = [c for c in run_checks(row) if c.check == "host-bound step off its prediction"]
    assert check.severity == "result" and "inside the model's ±41% band for a host-bound step" in check.cause
    assert "the step is host-bound in the model" in check.cause
    assert check.cause.endswith("BatchNorm2d 0.298 vs 0.21 ms (+0.088 ms), Conv2d 1.03 vs 0.963 ms (+0.0624 ms); "
                                "by layer: conv1 (Conv2d) 0.342 vs 0.289 ms, bn1 (BatchNorm2d) 0.0647 vs 0.0506 ms")
    # per convolution: its recorded kernels (torch.profiler, the profiled iteration) against the model's
    recorded = {}
    op_times = record["op_times"]
    for op in ast.literal_eval(op_times) if isinstance(op_times, str) else op_times:
        if op["layer_type"] == "Conv2d":
            recorded[op["layer"]] = recorded.get(op["layer"], 0.0) + op["seconds"]
    predicted: dict[str, float] = {}
    for _, op in result.ops[result.ops["layer"].isin(list(recorded))].iterrows():  # its weights' cast too
        seconds = device_op_seconds(op, "bf16", "inference", device, calibration, device.sm_count)[0] * op["calls"]
        predicted[op["layer"]] = predicted.get(op["layer"], 0.0) + seconds
    ratios = {layer: recorded[layer] / seconds for layer, seconds in predicted.items()}
    assert len(ratios) == 20 and ratios["conv1"] == pytest.approx(1.18, abs=0.03)
    gap = sum(recorded.values()) - sum(predicted.values())
    assert 0.8 * gap < recorded["conv1"] - predicted["conv1"] < 1.2 * gap  # 0.052 of 0.062 ms
    others = [ratio for layer, ratio in ratios.items() if layer != "conv1"]
    assert max(others) < 1.41 and min(others) > 0.8 and sum(abs(r - 1) <= 0.05 for r in others) == 14
    stem = aggregate_ncu(root / "resnet18-b32-bf16-inference-ncu.csv.gz").kernels["name"]
    assert "s16816fprop_optimized_bf16_256x64" in stem.iloc[4] and "nchwToNhwc" in stem.iloc[2]


@pytest.mark.parametrize("gpu, device_key", [("a100", "a100-sxm4-40gb"), ("v100", "v100-sxm2-16gb")])
def test_an_imported_profiles_kernel_time_is_held_to_the_predicted_kernel_time(gpu, device_key):
    """The default config's imported course-study profiles (tests/data/real/anoushka21-cloudml: VGG11 b16 fp32
    training, ncu 2020.2 and nsys 2020.3 of one iteration): their time is the nsys trace's kernel sum (20.95 ms on the
    A100-SXM4-40GB, 39.52 ms on the V100-SXM2-16GB), held to the predicted kernel time. On the A100 it is 0.50 of the
    FP32 prediction (41.9 ms), outside the ±40% band: 11 of its convolution kernels (xmma ... Ampere_hmma_tf32) and 6
    of its GEMM kernels (cutlass_80_tensorop_s1688gemm) ran TF32 on tensor cores, as that PyTorch's defaults let
    cuDNN and cuBLAS do for FP32 tensors; priced as it ran, 23.4 ms (0.90, inside). The V100 has no TF32: 0.68 of its
    prediction, inside the ±40% band a GPU predicted from another board's single ops prints, and no check."""
    from support import ANOUSHKA, cached_estimate, real

    from rooflow.estimate.calibration import for_device
    from rooflow.hardware.devices import default_catalogue_path, load_devices
    from rooflow.profilers.ncu import aggregate_ncu
    from rooflow.profilers.nsys import aggregate_nsys
    from rooflow.report.findings import KERNEL_TIMER

    folder = f"{ANOUSHKA}/{gpu}/vgg11"
    ncu = aggregate_ncu([real(f"{folder}/ncu-log-vgg11.txt")])
    nsys = aggregate_nsys([real(f"{folder}/tmp_nsys_gputrace.csv")]).totals
    device = load_devices(default_catalogue_path())[device_key]
    result = cached_estimate("vgg11", 16, "fp32", "training")
    row = build_row(device, dict(result.totals), None, ncu={**ncu.totals, "kernel_names": sorted(set(
        ncu.kernels["name"]))}, nsys=nsys, ops=result.ops, calibration=for_device(device))
    assert row["timer"] == KERNEL_TIMER and row["measured_seconds"] == nsys["kernel_seconds"]
    assert row["measured_over_predicted"] == pytest.approx(row["measured_seconds"] / row["predicted_device_seconds"])
    checks = [c for c in run_checks(row) if c.check == "predicted vs measured kernel time"]
    if gpu == "v100":
        assert row["measured_over_predicted"] == pytest.approx(0.68, abs=0.04)
        assert not checks and pd.isna(row.get("tensor_core_kernels"))
        # its counters saw its work (fewer FLOPs: Winograd/FFT), so its intensity places it: 13.4 under the ridge 17.4
        assert row["tensor_flops_unseen"] is False and row["bound"] == "memory-bound"
        return
    assert row["measured_seconds"] == pytest.approx(0.02095, rel=1e-3)
    assert row["measured_over_predicted"] == pytest.approx(0.50, abs=0.04)
    assert row["tensor_core_kernels"].startswith("11 convolution kernels such as xmma_new_implicit_gemm_")
    assert ", 6 gemm kernels such as cutlass_80_tensorop_s1688gemm" in row["tensor_core_kernels"]
    as_run = row["measured_seconds"] / row["predicted_tf32_device_seconds"]
    assert 0.8 <= as_run <= 1.25  # 0.90
    [check] = checks
    assert check.severity == "warning" and check.value == (f"{row['measured_seconds'] * 1e3:.3g} ms (measured/predicted "
                                                     f"{row['measured_over_predicted']:.2f})")
    assert "ran TF32 on tensor cores" in check.cause and f"measured/predicted {as_run:.2f}, inside the band" in check.cause
    assert "import it as precision tf32" in check.cause and "by kernel class" not in check.cause
    # Its FLOP counters saw 0.016x the estimate (no tensor-core metric in 2020's ncu log): intensity 1.2 FLOP/B of
    # those FLOPs said "memory-bound, 30% of the roof"; the bound is not known from them, and the summary says so.
    assert row["flops_ratio"] == pytest.approx(0.0161, abs=0.0005) and row["arithmetic_intensity"] < 1.3
    assert row["tensor_flops_unseen"] is True and row["bound"] == UNSEEN_BOUND
    # nor a share of its roof: `rooflow summary` and summary.csv said 30% where the home page said "–"
    assert row["attainable_flops_per_second"] is None and row["percent_of_roofline"] is None
    assert row.get("attainable_flops_per_second_measured_roof") is None and row.get("percent_of_measured_roofline") is None
    # The estimate's point at the measured time is 178% of the FP32 roof: the kernels' names say they ran TF32, whose
    # roof (156 TFLOP/s on the A100-SXM4-40GB) covers it; the cause says that first, with the counters' blindness.
    [above] = [c for c in run_checks(row) if c.check == "estimate above the roof"]
    assert above.value.endswith("= 178% of the attainable FLOP/s")
    tf32 = re.search(r"against the TF32 roof \(156 TFLOP/s\) the estimate's point is at (\d+)%", above.cause)
    assert above.cause.startswith("its FP32 kernels ran TF32 on tensor cores (11 convolution kernels") and tf32
    assert 10 <= int(tf32.group(1)) <= 100 and "the FLOP counters saw 0.02× the estimated FLOPs" in above.cause


@pytest.mark.parametrize("content, says", [
    ("", "not a readable summary table (the file is empty)"),
    ("a,b\n1,2\n1,2,3,4,5\n", "not a readable summary table (its line 3 has 5 fields, its header 2)"),
    ("a,b\n1,2\n", "not a rooflow summary table (no column device, model, batch, precision, mode, status)"),
    # a header alone printed pandas' "Empty DataFrame" repr and "all self-checks passed"; a row cut short read as
    # a run whose numbers were not collected
    ("device,model,batch,precision,mode,status\n", "a summary table without a row (only its header)"),
    ("device,model,batch,precision,mode,status\ncpu,resnet18,1,fp32,inference,ok\ncpu,resnet18,8\n",
     "its row 2 has 3 of the header's 6 fields, so the table is cut short"),
    # the key columns alone printed a row of NaN; a negative or overflowing time and a batch of -1 were printed as
    # results, exit 0
    ("device,model,batch,precision,mode\ncpu,resnet18,1,fp32,inference\n",
     "not a rooflow summary table (no column status)"),
    ("device,model,batch,precision,mode,status,measured_seconds\ncpu,resnet18,1,fp32,inference,ok,-1\n",
     "its row 1 has '-1' in column measured_seconds, where a finite number of 0 or more belongs"),
    ("device,model,batch,precision,mode,status,flops\ncpu,resnet18,1,fp32,inference,ok,1e400\n",
     "its row 1 has '1e400' in column flops, where a finite number of 0 or more belongs"),
    ("device,model,batch,precision,mode,status\ncpu,resnet18,-1,fp32,inference,ok\n",
     "its row 1 has '-1' in column batch, where a whole number of 1 or more belongs"),
    # a summary appended to itself printed every run and every check twice, exit 0
    ("device,model,batch,precision,mode,status,flops\ncpu,resnet18,1,fp32,inference,ok,\n"
     "cpu,resnet18,1,fp32,training,ok,3e9\ncpu,resnet18,1,fp32,inference,ok,\n",
     "its row 3 repeats row 1 field for field (cpu resnet18 1 fp32 inference), so two tables were joined or one "
     "appended to itself"),
])
def test_rooflow_summary_and_checks_refuse_a_foreign_summary_in_one_sentence(tmp_path, capsys, content, says):
    """An empty, foreign, header-only or cut results/summary.csv ended `rooflow summary` and `rooflow checks` in
    a pandas EmptyDataError or KeyError traceback, or in a table and checks of nothing."""
    from rooflow.cli import main

    path = tmp_path / "summary.csv"
    path.write_text(content)
    for command in ("summary", "checks"):
        assert main([command, str(path)]) == 2
        error = capsys.readouterr().err.strip()
        assert error.startswith(f"rooflow {command}: error: {path}: {says}: give the results/summary.csv")
        assert "\n" not in error


def test_a_cpu_miss_names_the_page_faults_its_timed_steps_took():
    """The recorded CPU run (MobileNetV2 b4 fp32 inference, `make run` of 2026-12-02 with page faults counted,
    tests/data/recorded/cpu-rooflow): measured 92.9 ms, 1.45x its prediction, outside the band; each timed step took
    14,080 minor page faults (57.7 MB mapped afresh), 25.2 ms at the 4.36e-10 s per byte its calibration measured in
    the same run, none of it in the prediction (no tensor of 32 MiB): 87% of the 28.9 ms excess, 1.06x without
    them. The check's cause says so before the layers, with the allocator settings that remove them
    (tests/measure/test_faults.py checks them); a step measured faster, or one without faults, names none."""
    from support import RECORDED_CPU_FAULTS_CEILINGS, RECORDED_CPU_FAULTS_RUN, recorded_cpu_row

    from rooflow.report.findings import _page_faults

    row, _, timing, calibration = recorded_cpu_row(run=RECORDED_CPU_FAULTS_RUN, ceilings=RECORDED_CPU_FAULTS_CEILINGS)
    assert timing["median_minor_faults"] == row["minor_faults"] == 14080 and timing["page_bytes"] == 4096
    assert row["minor_fault_seconds"] == pytest.approx(14080 * 4096 * calibration.page_fault_seconds_per_byte)
    assert row["measured_over_predicted"] == pytest.approx(1.45, abs=0.01)
    [check] = [c for c in run_checks(row) if c.check == "predicted vs measured time"]
    said = _page_faults(row)
    assert said.startswith("each timed iteration took 14,080 minor page faults (57.7 MB mapped afresh), 25.2 ms at "
                           "the cost per byte its calibration measured, none of it in the prediction: 87% of the "
                           "28.9 ms over the prediction (without them 1.06x it)")
    assert "MALLOC_MMAP_THRESHOLD_ past the largest tensor together with MALLOC_TRIM_THRESHOLD_" in said
    assert said in check.cause and check.cause.index(said) < check.cause.index("by layer type")
    assert _page_faults({**row, "measured_seconds": 0.9 * row["predicted_seconds"]}) is None
    assert _page_faults({**row, "minor_faults": 0.0}) is None


def test_a_noisy_timing_names_the_load_beside_its_slowest_iterations():
    """A real timing with the test suite running beside it (ResNet-18 b1 fp32 inference on the 2-core VM,
    tests/data/recorded/cpu-rooflow): spread 81% after 3 rounds; other processes' work beside its slowest 22 of 90
    iterations came to 0.82 of a core, beside its fastest 22 to 0.48. The noisy check names that load, read from
    the counters, where it once listed three guesses; where the slow iterations had no more beside them it says
    "unexplained", and where nothing was recorded it says so."""
    from support import RECORDED_CPU_FAULTS_CEILINGS, RECORDED_CPU_LOADED_RUN, recorded_cpu_row

    from rooflow.report.findings import _noise_cause

    row, _, timing, _ = recorded_cpu_row(run=RECORDED_CPU_LOADED_RUN, ceilings=RECORDED_CPU_FAULTS_CEILINGS)
    load = timing["load_during_timing"]
    assert load["readable"] and load["cores"] == 2 and load["slowest"]["iterations"] == 22
    assert json.loads(row["load_during_timing"]) == load
    [check] = [c for c in run_checks(row) if c.check == "noisy"]
    assert check.value == "spread 81.2% of the median after 3 rounds"
    assert check.cause == ("other load on the machine: other processes ran on 0.82 cores beside its slowest 22 "
                           "iterations and 0.48 beside its fastest 22; rerun on an idle node (on SLURM, an "
                           "exclusive one)")
    # the same spread with as much load beside the fast iterations as the slow: no cause named
    even = {**load, "fastest": {**load["fastest"], "other_cpu_seconds": load["fastest"]["wall_seconds"] * 0.82}}
    assert _noise_cause({**row, "load_during_timing": json.dumps(even)}) == (
        "unexplained: the machine's load does not account for it (other processes ran on 0.82 cores beside its "
        "slowest 22 iterations and 0.82 beside its fastest 22: no more beside the slow ones); not recorded: the "
        "CPU's clock, the caches and memory another guest of the same host shares, a hypervisor's pauses it does "
        "not report as steal; the median stands, but runs that differ by less than the spread differ by noise")
    assert "a GPU's clock changes show in the throttled check" in _noise_cause(
        {**row, "device_kind": "cuda", "load_during_timing": json.dumps(even)})
    # iterations too short to split: the mean load, said as such
    short = {**load, "readable": False}
    assert _noise_cause({**row, "load_during_timing": json.dumps(short)}).startswith(
        "other load on the machine: other processes ran on 0.67 of its 2 cores on average while it was timed (its "
        "iterations too short to tell whether the slow ones had more)")
    assert _noise_cause({**row, "load_during_timing": None}).startswith(
        "unexplained: the machine's load while it was timed was not recorded")


def test_a_noisy_timing_with_nothing_beside_it_is_unexplained():
    """The default `make run` (4f616fe) on the 2-core VM, nothing else running: vgg11 b4 fp32 training still
    noisy after 3 rounds (spread 11.6%), with 0.07 cores of other processes' work beside its slowest 7 of 30
    iterations and 0.06 beside its fastest 7 (a hypervisor 0.4% and 0.2% of the machine's CPU time). The counters
    show no load behind the slow iterations, so the check names none: "unexplained", with what is not recorded."""
    from support import RECORDED_CPU_FAULTS_CEILINGS, RECORDED_CPU_QUIET_NOISY_RUN, recorded_cpu_row

    row, _, timing, _ = recorded_cpu_row(run=RECORDED_CPU_QUIET_NOISY_RUN, ceilings=RECORDED_CPU_FAULTS_CEILINGS)
    assert timing["load_during_timing"]["readable"] and timing["timing_rounds"] == 3
    [check] = [c for c in run_checks(row) if c.check == "noisy"]
    assert check.value == "spread 11.6% of the median after 3 rounds"
    assert check.cause.startswith(
        "unexplained: the machine's load does not account for it (other processes ran on 0.07 cores beside its "
        "slowest 7 iterations and 0.06 beside its fastest 7: no more beside the slow ones); not recorded: the "
        "CPU's clock, the caches and memory another guest of the same host shares")


def test_the_faults_the_time_model_prices_are_the_ones_a_training_step_takes():
    """The same make run's AlexNet b1 fp32 training: 114,469 faults a step (469 MB mapped afresh) — its classifier's
    weight gradients and the optimizer's temporaries, tensors of 32 MiB or more, which the time model prices
    (its ``page faults`` part: 436 MB at the calibration's cost, 190 ms) — so the check counts only the other
    14.3 ms against the 43.2 ms the step took over its prediction (33%)."""
    import json

    from support import RECORDED_CPU, RECORDED_CPU_FAULTS_CEILINGS, recorded_cpu_row

    from rooflow.report.findings import _page_faults

    row, _, _, calibration = recorded_cpu_row(run=RECORDED_CPU / "alexnet-b1-fp32-training-2026-12-02-faults-timing.json",
                                              ceilings=RECORDED_CPU_FAULTS_CEILINGS)
    priced_bytes = json.loads(row["predicted_seconds_by_class"])["page faults"] / calibration.page_fault_seconds_per_byte
    assert priced_bytes == pytest.approx(436e6, rel=0.01) and row["minor_fault_bytes"] == 114469 * 4096
    assert 0.9 < priced_bytes / row["minor_fault_bytes"] < 1.0
    assert ", 190 ms of it in the prediction (its tensors of 32 MiB or more), the other 14.3 ms: 33% of the 43.2 ms " \
           "over the prediction (without them 1.09x it)" in _page_faults(row)



def test_a_slower_layer_names_the_page_faults_its_forward_took():
    """A timing job run alone the same day (MobileNetV2 b4 fp32 inference, rooflow.measure.timing.measure as the
    workflow calls it, tests/data/README.md), priced on the make run's calibration: 1.58x its prediction, 10,552
    faults a timed step; in its profiled iteration the layers that depart most are
    the 16-to-96 expansion of features.2 (14.1 ms against 1.82) and its BatchNorm (7.43 against 1.67), whose
    forwards took 6,272 and 4,704 page faults — the pages of their 19 MB outputs, 4,704 pages each, mapped afresh
    (the convolution's also its reordered copy). The check's layers say so; a faster miss's layers say nothing of
    faults."""
    from support import RECORDED_CPU, RECORDED_CPU_FAULTS_CEILINGS, recorded_cpu_row

    from rooflow.report.findings import _layer_carriers

    run = RECORDED_CPU / "mobilenet_v2-b4-fp32-inference-2026-12-02-layer-faults-timing.json"
    row, _, timing, _ = recorded_cpu_row(run=run, ceilings=RECORDED_CPU_FAULTS_CEILINGS)
    assert timing["median_minor_faults"] == 10552 and row["measured_over_predicted"] == pytest.approx(1.58, abs=0.01)
    assert 4 * 96 * 112 * 112 * 4 // 4096 == timing["forward_faults_by_layer"]["features.2.conv.0.1"] == 4704
    [check] = [c for c in run_checks(row) if c.check == "predicted vs measured time"]
    assert check.cause.endswith("by layer: features.2.conv.0.0 (Conv2d) 14.1 vs 1.82 ms (6,272 page faults in its "
                                "forward), features.2.conv.0.1 (BatchNorm2d) 7.43 vs 1.67 ms (4,704 page faults in "
                                "its forward)")
    assert "page faults" not in _layer_carriers(row, slower=False, limit=2)


def test_a_noisy_timing_whose_slow_iterations_took_more_cpu_time_ran_slower_on_the_cpu():
    """A timing job run alone on the 2-core VM (2026-12-03, nothing else running; tests/data/README.md): MobileNetV2
    b1 fp32 training, spread 6.7% after 3 rounds, 0.06 and 0.03 cores of other work beside its slowest and fastest
    7 iterations. Its own CPU time says where the slow iterations' extra time went: 212 ms of CPU time each against
    168 (18.8 and 8.08 ms of it in the kernel), its two threads busy on 1.96 and 1.99 cores, 92% of the extra wall
    time on the CPU — it ran slower, it did not wait, and not in the kernel; what slowed the CPU is not recorded,
    and the check says so. The same record with the slow iterations' CPU time no higher than the fast ones' reads
    as waiting; on a GPU the host's CPU time is not the kernels', so it is not read."""
    from support import RECORDED_CPU_FAULTS_CEILINGS, RECORDED_CPU_ON_CPU_RUN, recorded_cpu_row

    from rooflow.report.findings import _noise_cause

    row, _, timing, _ = recorded_cpu_row(run=RECORDED_CPU_ON_CPU_RUN, ceilings=RECORDED_CPU_FAULTS_CEILINGS)
    load = timing["load_during_timing"]
    assert load["readable"] and load["slowest"]["iterations"] == 7 and timing["timing_rounds"] == 3
    [check] = [c for c in run_checks(row) if c.check == "noisy"]
    assert check.value == "spread 6.7% of the median after 3 rounds"
    assert check.cause.startswith(
        "unexplained slowness on the CPU: its slowest 7 iterations took 212 ms of CPU time each against 168 ms in "
        "its fastest 7 (18.8 and 8.08 ms of it in the kernel, beside 5,070 and 2,683 page faults), its threads busy "
        "on 1.96 and 1.99 cores: 92% of their extra time on the CPU, so the step ran slower rather than waiting; "
        "other load does not account for it (other processes ran on 0.06 cores beside its slowest 7 iterations and "
        "0.03 beside its fastest 7, a hypervisor took 1% and 0% of the machine's CPU time: less than 0.25 core of "
        "other work and 5% steal more beside the slow ones); not recorded: the CPU's clock")
    slow, fast = load["slowest"], load["fastest"]
    waited = {**load, "slowest": {**slow, "own_cpu_seconds": fast["own_cpu_seconds"]}}
    assert _noise_cause({**row, "load_during_timing": json.dumps(waited)}).startswith(
        "unexplained waiting: its slowest 7 iterations took 168 ms of CPU time each against 168 ms in its fastest 7")
    on_gpu = _noise_cause({**row, "device_kind": "cuda", "load_during_timing": json.dumps(load)})
    assert on_gpu.startswith("unexplained: the machine's load does not account for it")
    assert "of CPU time each" not in on_gpu
    # a timing from before rooflow kept the kernel's part and the faults: its CPU time alone
    bare = {part: {k: v for k, v in load[part].items() if k not in ("own_system_seconds", "minor_faults")}
            for part in ("slowest", "fastest")}
    assert "of CPU time each against 168 ms in its fastest 7, its threads busy" in _noise_cause(
        {**row, "load_during_timing": json.dumps({**load, **bare})})


def test_a_noisy_timing_whose_extra_time_is_the_kernels_memory_mapping_names_it_and_its_fix():
    """The same VM, VGG11 b4 fp32 training: spread 12.3% after 2 rounds, 316,525 page faults a step (1.3 GB mapped
    afresh). Its slowest 5 iterations spent 1,349 ms each in the kernel against 712 ms in its fastest 5, beside
    324,123 and 304,250 faults: 72% of their extra CPU time in the kernel, at 4.16 µs a fault against 2.34 — as
    many faults, each taking more of the kernel's time. The check names the kernel's memory mapping and the fix;
    the same command with the fix's settings right after took no fault and 2 ms a step in the kernel, 1.33 s a step
    against 1.96, spread 4.1%: not noisy. Slow iterations with 1.5x the
    fast ones' faults name them as more, not slower."""
    from support import (
        RECORDED_CPU_CACHING_RUN,
        RECORDED_CPU_FAULTS_CEILINGS,
        RECORDED_CPU_FAULTS_NOISY_RUN,
        recorded_cpu_row,
    )

    from rooflow.report.findings import NOISY_SPREAD, _noise_cause

    row, _, timing, _ = recorded_cpu_row(run=RECORDED_CPU_FAULTS_NOISY_RUN, ceilings=RECORDED_CPU_FAULTS_CEILINGS)
    assert timing["median_minor_faults"] == 316525
    [check] = [c for c in run_checks(row) if c.check == "noisy"]
    assert check.value == "spread 12.3% of the median after 2 rounds"
    assert check.cause.startswith(
        "the kernel's memory mapping: its slowest 5 iterations took 4,218 ms of CPU time each against 3,329 ms in "
        "its fastest 5 (1,349 and 712 ms of it in the kernel, beside 324,123 and 304,250 page faults), its threads "
        "busy on 1.69 and 1.85 cores: 69% of their extra time on the CPU; 72% of the extra CPU time in the kernel, "
        "beside much the same page faults, 4.16 µs of kernel time a fault against 2.34 (what slowed the kernel's "
        "work is not recorded); a caching allocator removes them (LD_PRELOAD jemalloc or tcmalloc, or "
        "MALLOC_MMAP_THRESHOLD_")
    fixed = json.loads(RECORDED_CPU_CACHING_RUN.read_text())
    assert fixed["median_minor_faults"] == 0 and fixed["spread"] <= NOISY_SPREAD < timing["spread"]
    assert fixed["median_seconds"] < 0.7 * timing["median_seconds"]
    fixed_load = fixed["load_during_timing"]
    assert fixed_load["own_system_seconds"] / fixed_load["iterations"] < 0.01  # the kernel's mapping gone with them
    load = timing["load_during_timing"]
    more = {**load, "slowest": {**load["slowest"], "minor_faults": 1.5 * load["fastest"]["minor_faults"]}}
    assert "72% of the extra CPU time in the kernel, with 1.50x the page faults — the allocator mapping memory " \
           "afresh in some iterations more than in others" in _noise_cause({**row, "load_during_timing": json.dumps(more)})
    # fastest iterations that faulted no page in: the summarize job died dividing by their zero (a tiny workflow
    # run on this VM, 2026-12-04); the cause names the faults against none
    none = {**load, "fastest": {**load["fastest"], "minor_faults": 0}}
    assert "72% of the extra CPU time in the kernel, with 324,123 page faults each where the fastest had none — the " \
           "allocator mapping memory afresh in some iterations and not in others" in _noise_cause(
               {**row, "load_during_timing": json.dumps(none)})


def test_rooflow_checks_reads_the_folders_beside_the_summary_and_refuses_a_missing_one(tmp_path, capsys,
                                                                                       monkeypatch):
    """`rooflow checks DIR/summary.csv` read results/estimate of the working directory, not DIR's, and a folder
    given that does not exist (--estimates /nope) was read as empty: every check of it passed. A checks file the
    workflow wrote is not read when folders are given: they were ignored."""
    from rooflow.cli import main

    results = tmp_path / "results"
    (results / "checks").mkdir(parents=True)
    summary = results / "summary.csv"
    summary.write_text("device,model,batch,precision,mode,status\ncpu,resnet18,1,fp32,inference,ok\n")
    (results / "checks" / "checks.json").write_text("[]")
    assert main(["checks", str(summary), "--estimates", str(tmp_path / "nope")]) == 2
    error = capsys.readouterr().err.strip()
    assert error == (f"rooflow checks: error: --estimates {tmp_path / 'nope'}: no such folder: give the workflow's "
                     f"results/estimate/ (or leave --estimates out: the one beside the summary)")
    calls = []

    def spy(summary_path, totals_paths, layers_paths, ceilings_paths, devices_file, timings_paths):
        calls.append([summary_path, list(totals_paths), list(ceilings_paths)])
        return [], None

    estimate = results / "estimate" / "resnet18" / "b1-fp32-inference"
    estimate.mkdir(parents=True)
    (estimate / "totals.json").write_text("{}")
    (results / "ceilings").mkdir()
    (results / "ceilings" / "cpu.json").write_text("{}")
    monkeypatch.setattr("rooflow.cli.checks.check_file_records", spy)
    assert main(["checks", str(summary), "--ceilings", str(results / "ceilings")]) == 0
    assert calls == [[str(summary), [estimate / "totals.json"], [results / "ceilings" / "cpu.json"]]]
    # no profile/ beside the summary: its checks did not run, and it says so
    assert capsys.readouterr().out.strip() == (
        f"the summary's self-checks passed; not checked: profiles (no {results / 'profile'}): give --profiles, or "
        "run from the workflow's folder")
    (results / "profile").mkdir()
    # a folder there but holding none of its files: its checks did not run either, and it says so
    assert main(["checks", str(summary), "--ceilings", str(results / "ceilings")]) == 0
    said = (f"the summary's self-checks passed; not checked: profiles (no */*/*/timing.json in {results / 'profile'}): "
            "give --profiles, or run from the workflow's folder")
    assert capsys.readouterr().out.strip() == said
    assert main(["checks", str(summary), "--ceilings", str(results / "ceilings"), "--profiles",
                 str(results / "profile")]) == 0
    assert capsys.readouterr().out.strip() == said
    timing = results / "profile" / "cpu" / "resnet18" / "b1-fp32-inference" / "timing.json"
    timing.parent.mkdir(parents=True)
    timing.write_text("{}")
    assert main(["checks", str(summary), "--ceilings", str(results / "ceilings")]) == 0
    assert capsys.readouterr().out.strip() == "all self-checks passed"
    # a summary copied off the cluster alone: none of the three ran
    alone = tmp_path / "copied" / "summary.csv"
    alone.parent.mkdir()
    alone.write_text(summary.read_text())
    assert main(["checks", str(alone)]) == 0
    assert capsys.readouterr().out.strip() == (
        f"the summary's self-checks passed; not checked: estimates (no {alone.parent / 'estimate'}), ceilings (no "
        f"{alone.parent / 'ceilings'}), profiles (no {alone.parent / 'profile'}): give --estimates / --ceilings / "
        "--profiles, or run from the workflow's folder")


@pytest.mark.parametrize("folder, name, content, says", [
    ("estimate/resnet18/b1-fp32-inference", "totals.json", '{"foo": 1}',
     "{path}: not an estimate's totals (the totals.json the workflow's estimate_model step writes): no model, batch, "
     "precision, mode; write it again (`snakemake --forcerun estimate_model`), or move it out of the estimate folder"),
    ("ceilings", "cpu.json", "[1, 2]",
     "{path}: not a ceilings file (the JSON `rooflow ceilings --output` writes): it holds a JSON list, not an object"),
    ("ceilings", "cpu.json", '{"peak_flops_per_second": {"fp32": "fast"}, "dram_bytes_per_second": 1e10}',
     "ceilings file {path}: peak_flops_per_second.fp32 is 'fast', not a positive number (its peak_flops_per_second "
     "a mapping of them): measure it again (`rooflow ceilings --device cpu --output {path}` on that device), or "
     "move it out of the ceilings folder"),
])
def test_rooflow_checks_names_a_damaged_file_of_the_results_tree(tmp_path, capsys, folder, name, content, says):
    """A foreign totals.json in the estimate folder (KeyError 'model'), a ceilings JSON that is a list
    (AttributeError) or has a string roof (TypeError): tracebacks of `rooflow checks`. One sentence naming the
    file, exit 2."""
    from rooflow.cli import main

    results = tmp_path / "results"
    results.mkdir()
    summary = results / "summary.csv"
    summary.write_text("device,model,batch,precision,mode,status\ncpu,resnet18,1,fp32,inference,ok\n")
    path = results / folder / name
    path.parent.mkdir(parents=True)
    path.write_text(content)
    assert main(["checks", str(summary)]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("rooflow checks: error: " + says.format(path=path)), captured.err
    assert "\n" not in captured.err.strip() and captured.out == ""


@pytest.mark.parametrize("folder, name, content, says", [
    ("estimate", "layers.csv", b"", "empty"),
    ("estimate", "layers.csv", b"a,b\n1,2\n", "no layer, forward_matmul_flops column"),
    ("estimate", "layers.csv", b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe\xfa", "not a CSV table (not text)"),
    ("profile/cpu", "timing.json", b"[]", "it holds a JSON list, not an object"),
    ("profile/cpu", "timing.json", b'{"device": "cpu", "op_times": "x"}',
     "its op_times is not a list of {layer, layer_type, phase, seconds}; time the run again (`snakemake --forcerun "
     "profile_time`), or move it out of the profile folder"),
])
def test_rooflow_checks_names_a_damaged_layer_table_or_timing_record(tmp_path, capsys, folder, name, content, says):
    """A training run's layers.csv that is empty (an EmptyDataError traceback, also ending the workflow's check_runs
    job), binary (a message naming no file) or foreign (the forward:backward check skipped without a word), and a
    timing record that is a JSON list or holds op_times of another shape (AttributeError, ValueError tracebacks):
    one sentence naming the file, exit 2."""
    from rooflow.cli import main

    results = tmp_path / "results"
    run = "b1-fp32-training"
    (results / "estimate" / "resnet18" / run).mkdir(parents=True)
    (results / "estimate" / "resnet18" / run / "totals.json").write_text(
        '{"model": "resnet18", "batch": 1, "precision": "fp32", "mode": "training"}')
    (results / "profile").mkdir()
    (results / "summary.csv").write_text("device,model,batch,precision,mode,status\ncpu,resnet18,1,fp32,training,ok\n")
    path = results / folder / "resnet18" / run / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    assert main(["checks", str(results / "summary.csv")]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"rooflow checks: error: {path}: not "), captured.err
    assert says in captured.err and "\n" not in captured.err.strip() and captured.out == ""


def test_a_cpu_run_in_a_precision_its_roofs_lack_has_no_prediction_and_no_time_check(tmp_path):
    """The recorded CPU run's row in fp16 (its timing record relabelled, its ceilings keep fp32 and bf16): the time
    model priced it faster than fp32 while such steps measured 43x slower (tests/cli/test_estimate_cli.py), so the
    row has no predicted time, the reason in its calibration source, and the predicted-vs-measured check is not
    run on it."""
    from support import RECORDED_CPU_RUN, recorded_cpu_row

    from rooflow.io import read_json

    record = {**read_json(RECORDED_CPU_RUN), "precision": "fp16"}
    path = tmp_path / "alexnet-b1-fp16-training-timing.json"
    path.write_text(json.dumps(record))
    row, _, _, _ = recorded_cpu_row(run=path)
    assert row["precision"] == "fp16" and row["measured_seconds"] > 0
    assert row.get("predicted_seconds") is None and "measured_over_predicted" not in row
    assert row["calibration_source"].startswith("none for cpu at fp16: its measured roofs hold no fp16 rate")
    assert not [c for c in run_checks(row) if c.check == "predicted vs measured time"]


def test_rooflow_checks_refuses_a_records_file_that_is_a_json_object(tmp_path, capsys):
    """`rooflow checks S --records F` with F holding `{}` iterated the object's keys as no records and printed
    "all self-checks passed"; a list of checks is what the workflow writes."""
    from rooflow.cli import main

    summary = tmp_path / "summary.csv"
    summary.write_text("device,model,batch,precision,mode,status\ncpu,resnet18,1,fp32,inference,ok\n")
    records = tmp_path / "checks.json"
    records.write_text("{}")
    assert main(["checks", str(summary), "--records", str(records)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"rooflow checks: error: {records}: not a checks file written by rooflow (a JSON dict, not a list of checks); "
        "rerun the check_runs step (or `rooflow checks` without --records)")
    records.write_text("[]")
    assert main(["checks", str(summary), "--records", str(records)]) == 0
