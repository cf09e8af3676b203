"""Guard rails of the GPU jobs, on the real H100 recording and profiles constructed from it: a distinct-mode
profile whose NVTX filter caught nothing, one with a kernel-count mismatch, an L2 roof under DRAM — each gives
its sentence, its guard record, its check row and the fallback (exhaustive ncu; no measured L2 roof)."""

from __future__ import annotations

import json
import logging
import shutil

import pandas as pd
import pytest
from support import NVTX_RECORDING

from rooflow.ceilings.measure import cache_roof_guards
from rooflow.errors import RooflowError
from rooflow.guards import GUARD_FIELDS
from rooflow.hardware.roofs import invalid_cache_roofs
from rooflow.measure.ncu_job import profile_with_fallback
from rooflow.profilers.distinct import apply_plan, check_distinct
from rooflow.profilers.ncu import aggregate_ncu
from rooflow.profilers.nvtx import SIGNATURE_RANGE
from rooflow.profilers.nvtx import parse_nvtx_stack as parse_stack
from rooflow.report.checks import CHECK_COLUMNS, guard_checks

RUN = {"device": "h100-sxm5-80gb", "model": "resnet18", "batch": 16, "precision": "fp32", "mode": "training"}


def test_a_faithful_distinct_profile_passes_every_guard(stand_in):
    csv_path, plan = stand_in
    kernels = aggregate_ncu(csv_path).kernels
    assert len(kernels) == 86
    assert check_distinct(kernels, plan) == []
    assert check_distinct(kernels, plan, reference_kernels=194) == []  # the exhaustive recording's launches


def test_an_nvtx_filter_that_caught_nothing(stand_in, exhaustive):
    """The exhaustive recording has no rooflow:sig ranges: as if ncu had ignored the per-signature ranges."""
    _, plan = stand_in
    [record] = check_distinct(exhaustive.kernels, plan)
    assert tuple(record) == GUARD_FIELDS
    assert record["check"] == "NVTX filter caught nothing" and record["severity"] == "error"
    assert record["value"] == f"194 kernels profiled, none inside a {SIGNATURE_RANGE}<k> range"
    assert record["expected"] == "the kernels of the first call of each of 63 op signatures"
    assert "exhaustive mode" in record["cause"]


def test_kernel_count_mismatches(stand_in, exhaustive):
    csv_path, plan = stand_in
    kernels = aggregate_ncu(csv_path).kernels
    # a stray kernel (outside every planned signature) and a planned convolution without its kernels
    numbers = [next(int(m[len(SIGNATURE_RANGE):]) for m in parse_stack(s)[1] if m.startswith(SIGNATURE_RANGE))
               for s in kernels["nvtx_stack"]]
    plan = json.loads(json.dumps(plan))
    plan["signatures"][numbers[0]]["op"] = "aten.convolution.default"
    missing_conv = kernels[[n != numbers[0] for n in numbers]]
    stray = exhaustive.kernels.iloc[[0]].assign(id=10_000)
    records = check_distinct(pd.concat([missing_conv, stray], ignore_index=True), plan, reference_kernels=194)
    assert [r["check"] for r in records] == ["kernel count differs from the plan"] * 3
    assert records[0]["value"] == "1 of 86 profiled kernels outside the plan's signatures"
    assert records[0]["evidence"]["stray_kernel_ids"] == [10_000]
    assert records[1]["value"] == "1 planned convolution/GEMM signatures without a profiled kernel"
    lost = numbers.count(numbers[0]) * len(plan["signatures"][numbers[0]]["occurrences"])
    assert records[2]["value"] == f"the distinct profile stands for {194 - lost} kernel launches"
    assert records[2]["expected"] == "194, as the exhaustive profile of the same step"


def fake_ncu(distinct_csv, plan, calls):
    """run(mode, log) as the profile_ncu job passes it: distinct writes `distinct_csv` and the plan, exhaustive
    the real exhaustive recording and an exhaustive plan."""

    def run(mode, log_path):
        calls.append((mode, str(log_path)))
        if mode == "distinct":
            shutil.copyfile(distinct_csv, run.csv)
            run.plan.write_text(json.dumps(plan))
        else:
            shutil.copyfile(NVTX_RECORDING, run.csv)
            run.plan.write_text(json.dumps({"format": "rooflow-ncu-plan/1", "mode": "exhaustive"}))
        with open(log_path, "a") as sink:
            sink.write(f"ncu {mode}\n")

    return run


@pytest.mark.parametrize("failure", ["caught nothing", "no kernels at all"])
def test_the_job_falls_back_to_exhaustive_and_records_why(stand_in, exhaustive, tmp_path, caplog, failure):
    _, plan = stand_in
    calls: list = []
    run = fake_ncu(NVTX_RECORDING, plan, calls)  # distinct run whose kernels carry no signature range
    run.csv, run.plan = tmp_path / "ncu.csv", tmp_path / "ncu_plan.json"
    log_path = tmp_path / "ncu.log"
    if failure == "no kernels at all":
        inner = run

        def run(mode, log_path):  # noqa: F811 - ncu itself reported that it profiled nothing
            if mode == "distinct":
                calls.append((mode, str(log_path)))
                log_path.write_text("==PROF== No kernels were profiled.\n")
                raise RooflowError("ncu.csv: the profiler recorded no kernels (\"No kernels were profiled\")")
            inner(mode, log_path)
    with caplog.at_level(logging.WARNING):
        records = profile_with_fallback(run, "distinct", tmp_path / "ncu.csv", tmp_path / "ncu_plan.json", log_path)
    assert [c[0] for c in calls] == ["distinct", "exhaustive"]
    assert calls[0][1] == f"{log_path}.distinct" and not (tmp_path / "ncu.log.distinct").exists()
    assert [r["check"] for r in records] == ["NVTX filter caught nothing"]
    assert [m for m in caplog.messages if m.startswith("NVTX filter caught nothing: ")]  # its one sentence
    if failure == "no kernels at all":
        assert "No kernels were profiled" in log_path.read_text()  # the attempt's log is kept in the job's
    # the aggregate is the exhaustive profile's, and carries the record
    kernels, totals = apply_plan(aggregate_ncu(tmp_path / "ncu.csv"), tmp_path / "ncu_plan.json")
    assert totals["ncu_mode"] == "exhaustive" and totals["ncu_mode_requested"] == "distinct"
    assert totals["kernels"] == 194 and totals["flops_total"] == exhaustive.totals["flops_total"]
    assert totals["guards"] == records
    rows = guard_checks({"ncu.json": {**totals, **RUN}})
    assert [(r["run"], r["severity"], r["check"]) for r in rows] == [
        ("h100-sxm5-80gb resnet18 b16 fp32 training", "error", "NVTX filter caught nothing")]
    assert set(rows[0].as_row()) == set(CHECK_COLUMNS)


def test_a_faithful_distinct_profile_is_used_as_made(stand_in, tmp_path):
    csv_path, plan = stand_in
    calls: list = []
    run = fake_ncu(csv_path, plan, calls)
    run.csv, run.plan = tmp_path / "ncu.csv", tmp_path / "ncu_plan.json"
    assert profile_with_fallback(run, "distinct", run.csv, run.plan, tmp_path / "ncu.log") == []
    assert [c[0] for c in calls] == ["distinct"]
    _, totals = apply_plan(aggregate_ncu(run.csv), run.plan)
    assert totals["ncu_mode"] == "distinct" and "guards" not in totals


def test_an_l2_roof_under_dram_is_a_guard_record_and_a_check(tmp_path):
    """The H100's L2 measured at 2.5 TB/s under its measured DRAM 3.03 TB/s (what a working set that did not
    stay in L2 gives): no L2 roof is written, the record says so."""
    ceilings = {"dram_bytes_per_second": 3.03e12, "l2_bytes_per_second": 2.5e12}
    invalid = invalid_cache_roofs(ceilings)
    [record] = cache_roof_guards(invalid)
    assert record["check"] == "L2 roof at or below DRAM" and record["value"] == "L2 2500 GB/s"
    assert record["expected"] == "> measured DRAM 3030 GB/s"
    assert "no measured L2 roof is written" in record["cause"]
    assert cache_roof_guards(invalid_cache_roofs({"dram_bytes_per_second": 3.03e12,
                                                  "l2_bytes_per_second": 7.0e12})) == []
    [row] = guard_checks({"results/ceilings/h100-sxm5-80gb.json": {"guards": [record]}})
    assert (row["run"], row["device"], row["check"]) == ("h100-sxm5-80gb ceilings", "h100-sxm5-80gb",
                                                        "L2 roof at or below DRAM")
