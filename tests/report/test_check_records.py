"""Checks are records (rooflow.report.findings): found once, rendered for people in the summary, written as
records by the self-checks step and read back by the report and `rooflow checks`, never re-split from text."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from rooflow import cli
from rooflow.hardware.devices import load_devices
from rooflow.io import write_csv
from rooflow.report.checks import check_records, records_path
from rooflow.report.findings import Check, read_checks, render, run_checks, write_checks
from rooflow.report.summary import COLUMNS, build_row

ROOT = Path(__file__).resolve().parents[2]
GPU = load_devices(ROOT / "config" / "devices.yaml")["h100-sxm5-80gb"]


def noisy_oom_rows() -> list[dict]:
    """Two summary rows as build_row writes them: a noisy point above its roof, and an out-of-memory run whose
    message holds '; ' and ': ' (what the old text format split on)."""
    estimate = {"model": "resnet50", "batch": 64, "precision": "tf32", "mode": "inference",
                "total_flops": 5.3e11, "fused_bytes": 3e9}
    # 5.3e11 FLOP in 0.1 ms = 5,300 TFLOP/s; AI 177 FLOP/B > ridge 148: the flat 494.7 TFLOP/s roof, 1071%
    noisy = build_row(GPU, estimate, {"status": "ok", "median_seconds": 1e-4, "spread": 0.2, "timing_rounds": 3,
                                      "timer": "cuda-events"})
    message = "out of memory: asked for 3.06 GiB; 1.20 GiB free: see the allocator"
    oom = build_row(GPU, {**estimate, "batch": 512}, {"status": "oom", "message": message})
    return [noisy, oom]


def test_the_summary_column_renders_the_records_and_the_checks_file_holds_them(tmp_path):
    rows = noisy_oom_rows()
    found = [run_checks(row) for row in rows]
    assert [[c.check for c in checks] for checks in found] == [["above the roof", "noisy"], ["out of memory"]]
    assert [row["checks"] for row in rows] == [render(checks) for checks in found]
    above, noisy = found[0]
    assert above.value == "1071% of the attainable 495 TFLOP/s of the datasheet tf32 roof"
    assert noisy.value == "spread 20.0% of the median after 3 rounds"
    [oom] = found[1]
    assert (oom.severity, oom.run) == ("result", "h100-sxm5-80gb resnet50 b512 tf32 inference")
    assert oom.cause == "asked for 3.06 GiB; 1.20 GiB free: see the allocator; a smaller batch or lower precision fits"
    # through results/summary.csv: the same records, found again from the columns, whole
    write_csv(tmp_path / "summary.csv", pd.DataFrame(rows, columns=COLUMNS))
    again, _ = check_records(pd.read_csv(tmp_path / "summary.csv"))
    assert sorted(again, key=lambda c: c.check) == sorted(found[0] + found[1], key=lambda c: c.check)
    # the checks file round-trips
    path = records_path(tmp_path / "summary.csv")
    write_checks(path, again)
    assert read_checks(path) == again and all(isinstance(c, Check) for c in again)


# a record the workflow's check_runs step wrote, which no check computed from the summary gives
LATENCY_RECORD = Check(run="cpu alexnet b1 fp32 training", device="cpu", model="alexnet", batch=1, precision="fp32",
                       mode="training", severity="warning", check="forward:backward latency", value="6.74",
                       expected="[0.95, 3.80]", cause="unexplained", evidence="Conv2d backward 80 ms")


def test_rooflow_checks_prints_the_records_file_with_its_evidence(tmp_path, capsys):
    rows = noisy_oom_rows()
    write_csv(tmp_path / "summary.csv", pd.DataFrame(rows, columns=COLUMNS))
    write_checks(records_path(tmp_path / "summary.csv"), [LATENCY_RECORD])
    # the workflow's records, newer than the summary: printed as written, not recomputed
    assert cli.main(["checks", str(tmp_path / "summary.csv")]) == 0
    out = capsys.readouterr().out
    assert "forward:backward latency" in out and "evidence: Conv2d backward 80 ms" in out
    assert "above the roof" not in out
    # no records file: computed from the summary (an error: a point above its roof)
    records_path(tmp_path / "summary.csv").unlink()
    assert cli.main(["checks", str(tmp_path / "summary.csv"), "--estimates", str(tmp_path)]) == 1
    assert "above the roof" in capsys.readouterr().out


def test_rooflow_checks_with_a_devices_file_computes_with_it_or_names_the_missing_one(tmp_path, capsys, root):
    """--devices-file was read only where the checks were computed: beside the workflow's records file it was
    ignored — a path to nothing passed, exit 0, and the datasheet comparison it asks for never ran."""
    rows = noisy_oom_rows()
    write_csv(tmp_path / "summary.csv", pd.DataFrame(rows, columns=COLUMNS))
    write_checks(records_path(tmp_path / "summary.csv"), [LATENCY_RECORD])
    assert cli.main(["checks", str(tmp_path / "summary.csv"), "--devices-file", str(tmp_path / "none.yaml")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"rooflow checks: error: --devices-file {tmp_path / 'none.yaml'}: no such file: give a device catalogue "
        "(config/devices.yaml, or the workflow's devices_file), or leave it out")
    # given one, the checks are computed (the records file holds no datasheet comparison): the summary's error shows
    assert cli.main(["checks", str(tmp_path / "summary.csv"), "--devices-file",
                     str(root / "config" / "devices.yaml")]) == 1
    out = capsys.readouterr().out
    assert "above the roof" in out and "forward:backward latency" not in out
    # a foreign file is named though no ceilings folder asks for its DRAM roofs (it passed, exit 1 as above)
    foreign = tmp_path / "foreign.yaml"
    foreign.write_text("model: resnet18\n")
    assert cli.main(["checks", str(tmp_path / "summary.csv"), "--devices-file", str(foreign)]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"rooflow checks: error: {foreign}") and captured.out == ""


def test_a_row_without_a_timer_is_not_held_to_the_prediction():
    """An imported profile's time is its kernel time: no predicted-vs-measured verdict (the `timer` column)."""
    row = {c: math.nan for c in COLUMNS}
    row.update(device="a100", model="vgg11", batch=16, precision="fp32", mode="training", measured_seconds=0.02,
               measured_over_predicted=0.1, predicted_seconds=0.2, predicted_seconds_low=0.15,
               predicted_seconds_high=0.25, predicted_bound="device",
               predicted_seconds_by_class='{"convolution": 0.15, "elementwise": 0.05}')
    assert run_checks({**row, "timer": "imported"}) == []
    [check] = run_checks({**row, "timer": "cuda-events"})
    assert check.expected == "150–250 ms" and check.cause == (
        "outside the model's ±25% band (nan); most predicted time is convolution (150 ms) and elementwise (50 ms)")
    # a range one doubt widened on one side (the time model's FP32 fast-path doubt) says so
    [check] = run_checks({**row, "timer": "cuda-events", "predicted_seconds_high": 0.4})
    assert check.expected == "150–400 ms" and check.cause.startswith("outside the model's −25% / +100% band")


def test_a_host_bound_step_inside_its_range_but_off_its_point_is_a_noted_result():
    """A host-bound step's range adds its host's run-to-run scatter (±41% on a ±25% calibration): measured 1.3x
    its prediction, inside that range, it is a result naming the host-bound model, not a warning; a GPU-bound step
    inside its band is nothing, and one outside it the warning, host-bound or not."""
    row = {c: math.nan for c in COLUMNS}
    row.update(device="h100-sxm5-80gb", model="resnet18", batch=32, precision="bf16", mode="inference",
               timer="cuda-events", predicted_seconds=0.002, predicted_seconds_low=0.002 * 0.59,
               predicted_seconds_high=0.002 * 1.41, predicted_bound="host", predicted_host_seconds=0.002,
               predicted_device_seconds=0.0012)

    def checks(ratio: float, **changes) -> list:
        return run_checks({**row, "measured_seconds": 0.002 * ratio, "measured_over_predicted": ratio, **changes})

    [check] = checks(1.3)
    assert (check.severity, check.check, check.expected) == ("result", "host-bound step off its prediction",
                                                             "within ±25%")
    assert check.cause.startswith("inside the model's ±41% band for a host-bound step") and \
        "the step is host-bound in the model (2 ms of host work for 1.2 ms of kernels)" in check.cause
    assert checks(1.2) == [] and checks(0.8) == []
    [check] = checks(1.5)
    assert (check.severity, check.check) == ("warning", "predicted vs measured time")
    # the value in the expected range's unit, beside the ratio (a bare ratio against "1.18–2.82 ms" read as a time)
    assert (check.value, check.expected) == ("3 ms (measured/predicted 1.50)", "1.18–2.82 ms")
    assert checks(1.3, predicted_bound="gpu") == []  # its band is its band: inside, nothing to say


@pytest.mark.parametrize("spread, shown", [(0.05006, "5.01%"), (0.050004, "5.0004%"), (0.0512, "5.1%")])
def test_a_noisy_spread_just_past_the_budget_is_printed_past_it(spread, shown):
    """A spread of 5.006% printed as "5.0%" against "≤ 5%": the digits that show it past the budget."""
    from rooflow.report.findings import NOISY_SPREAD, _percent_beyond

    assert NOISY_SPREAD == 0.05 and _percent_beyond(spread, NOISY_SPREAD) == shown


def test_an_imported_profiles_kernel_time_is_held_to_the_predicted_kernel_time():
    """An imported nsys profile's time is its kernels' sum (findings.KERNEL_TIMER): held to the predicted kernel
    time in the step's band, scaled; the side of the kernels that carries a miss, or where its kernels ran TF32
    on tensor cores, the prediction priced as it ran (its other sides then beside the point)."""
    from rooflow.report.findings import KERNEL_TIMER

    row = {c: math.nan for c in COLUMNS}
    row.update(device="a100", model="vgg11", batch=16, precision="fp32", mode="training", timer=KERNEL_TIMER,
               measured_seconds=0.02, predicted_seconds=0.044, predicted_seconds_low=0.0264,
               predicted_seconds_high=0.0616, predicted_device_seconds=0.04, predicted_bound="gpu",
               predicted_seconds_by_class='{"matmul": 0.032, "optimizer": 0.004, "pooling": 0.003, "kernel gaps": 0.001}',
               measured_kernel_seconds_by_class='{"convolution": 0.009, "other": 0.006, "gemm": 0.002, "memory": 0.003}')
    [check] = run_checks(row)
    assert check.check == "predicted vs measured kernel time" and check.value == "20 ms (measured/predicted 0.50)"
    assert check.expected == "24–56 ms"  # the step's ±40% around the 40 ms of kernels
    assert check.cause.startswith("kernel time of the imported profile outside the model's ±40% band")
    assert check.cause.endswith("by kernel class, measured vs predicted: convolution/matmul kernels 11 vs 32 ms, "
                                "other kernels 9 vs 7 ms")
    tf32 = {**row, "predicted_tf32_device_seconds": 0.022,
            "tensor_core_kernels": "11 convolution kernels such as xmma_new_implicit_gemm_fprop_Ampere_hmma_tf32"}
    [check] = run_checks(tf32)
    assert "ran TF32 on tensor cores (11 convolution kernels such as xmma" in check.cause
    assert "the kernels take 22 ms (measured/predicted 0.91, inside the band)" in check.cause
    assert "by kernel class" not in check.cause
    [check] = run_checks({**tf32, "predicted_tf32_device_seconds": 0.036})  # TF32 does not account for all of it
    assert "(measured/predicted 0.56, still outside the band)" in check.cause and "by kernel class" in check.cause
    assert run_checks({**row, "measured_seconds": 0.03}) == []  # inside 24-56 ms
    assert run_checks({**row, "timer": "imported"}) == []  # a step time a config entry gave: how is not known


def test_a_theoretical_cpu_roof_below_the_measured_one_is_flagged():
    """The issue's Zen 4 VM: 214 GFLOP/s measured against 2 cores × 2.6 GHz nominal × 32 FLOP/cycle."""
    from rooflow.hardware.cpu import theoretical_cpu_peak
    from rooflow.report.checks import ceilings_checks

    cpuinfo = ("vendor_id : AuthenticAMD\ncpu family : 25\nmodel : 17\nmodel name : AMD EPYC 9R14 @ 2.60GHz\n"
               "flags : fpu sse sse2 avx avx2 fma avx512f\ncpu MHz : 2600.000\nsiblings : 2\ncpu cores : 2\n")
    nominal = theoretical_cpu_peak(cpuinfo, 2)
    peak = nominal["flops_per_second"]["fp32"]
    assert peak == 2 * 2.6e9 * 32 and not nominal["clock_measured"]
    ceilings = {"peak_flops_per_second": {"fp32": 214e9}, "theoretical_peak_flops_per_second": {"fp32": peak},
                "theoretical": nominal}
    [check] = ceilings_checks({"cpu": ceilings})
    assert (check.severity, check.check, check.run) == ("warning", "theoretical roof below a measured one",
                                                       "cpu theoretical FP32 roof")
    assert check.value == "measured FP32 214 GFLOP/s = 129% of the theoretical 166.4 GFLOP/s"
    assert "2.6 GHz" in check.cause and "turbo" in check.cause
    # with the clock the cores sustain (3.4 GHz measured under load) the roof holds: no check
    held = theoretical_cpu_peak(cpuinfo, 2, {"clock_hz": 3.4e9, "how": "dependent adds"})
    assert held["clock_measured"] and held["nominal_clock_hz"] == 2.6e9
    assert held["flops_per_second"]["fp32"] == pytest.approx(2 * 3.4e9 * 32)
    assert ceilings_checks({"cpu": {**ceilings, "theoretical_peak_flops_per_second": held["flops_per_second"],
                                    "theoretical": held}}) == []


def test_the_sustained_clock_is_measured_here():
    from rooflow.ceilings.clock import sustained_clock

    measured = sustained_clock(1, seconds=0.02, repeats=3)
    if measured is None:
        pytest.skip("no x86-64 executable page here: the theoretical roof keeps the nominal clock")
    # any CPU this runs on clocks between 0.5 and 6 GHz
    assert 0.5e9 < measured["clock_hz"] < 6e9 and len(measured["per_round_hz"]) == 3


def test_an_implausible_clock_is_not_taken(monkeypatch):
    # a core that runs the adds faster than one a cycle (Golden Cove folds immediate adds: 19 GHz measured) would
    # raise the theoretical roof ~5x: the nominal clock stays
    from rooflow.ceilings import clock

    monkeypatch.setattr(clock, "MAX_PLAUSIBLE_HZ", 1e6)
    assert clock.sustained_clock(1, seconds=0.01, repeats=1) is None


def test_the_front_page_lists_one_line_per_check_with_its_runs_folded():
    from rooflow.report.tables import checks_overview

    rows = noisy_oom_rows()
    slow = {**rows[0], "model": "vgg16", "seconds_spread": 0.3}
    checks, _ = check_records(pd.DataFrame([*rows, slow], columns=COLUMNS))
    page = checks_overview(pd.DataFrame([c.as_row() for c in checks]))
    # one <details> per kind of check: above the roof (2 runs), noisy (2), out of memory (1)
    assert page.count("<details") == 3 and page.count("<tr>") == 3 + 5  # a header per table, a row per run
    assert "<strong>noisy</strong>: 2 runs (expected ≤ 5%)" in page
    assert "spread 30.0% of the median after 3 rounds" in page  # each run's value, folded inside
