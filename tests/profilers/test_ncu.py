"""Nsight Compute parsing and aggregation, checked against real recorded output and the studies' own totals.

Fixtures: tests/data/real (see tests/data/README.md and real/PROVENANCE.md). Expected values come from the
studies' own result files (parsed here, not copied by hand) or from the files themselves.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import math
import os
import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from support import (
    ANOUSHKA,
    DATA,
    DEEPCAM,
    DETAILS_FILES,
    OLD_RULES_HEADER,
    REAL,
    _same_result,
    _short_rows_file,
    assert_one_sentence,
    real,
)

from rooflow.errors import ParseError
from rooflow.profilers import metrics as m
from rooflow.profilers.kernels import KERNEL_CLASSES, classify_kernel, only_wide_float_types
from rooflow.profilers.ncu import KERNEL_COLUMNS, TOTAL_KEYS, aggregate_ncu

MALFORMED = DATA / "malformed"
B200 = "meinie0826-roofline-analysis/decodebench/results/ncu"
RUNS = [(gpu, model) for gpu in ("a100", "v100") for model in ("vgg11", "vgg13", "vgg19")]
H100_TF32 = "h100-rooflow/resnet50-b64-tf32-inference-ncu.csv"




def real_text(relative: str) -> str:
    path = real(relative)
    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).decode()


def test_fixture_copies_are_byte_for_byte():
    """Every copied fixture, decompressed where stored compressed, has the original's SHA-256."""
    lines = (REAL / "SHA256SUMS").read_text().splitlines()
    assert len(lines) == 185  # 39 files from public studies, 25 of rooflow's H100 run, 11 of the 2026-11-25 runs,
    # 56 of the 2026-11-27 H200 traces, 49 of the 2026-11-28 H200 runs, 4 of the library inventories, PROVENANCE.md
    for line in lines:
        digest, relative = line.split("  ", 1)
        path = real(relative)
        data = path.read_bytes()
        if path.suffix == ".gz" and not relative.endswith(".gz"):  # compressed here, plain in the original
            data = gzip.decompress(data)
        assert hashlib.sha256(data).hexdigest() == digest, relative


# ---------------------------------------------------------------------------------------------------
# anoushka21: ncu 2020 TEXT output, A100 and V100, VGG11/13/19 — the study's own totals


def study_totals(relative: str) -> dict[str, str]:
    """The study's ncu-final-metric file: label lines, each followed by its value (some labels carry a
    literal "\\n" prefix from the study's echo)."""
    values: dict[str, str] = {}
    label = None
    for line in real_text(relative).splitlines():
        line = line.strip().removeprefix("\\n").strip()
        if not line:
            continue
        if re.fullmatch(r"[0-9.e+]+", line):
            values[label] = line
        else:
            label = line
    return values


def matches_printed(value: float, printed: str) -> bool:
    """`value` equals the study's number as printed: exactly for integers, to the printed digits for %g."""
    if "e" in printed:
        return format(value, ".6g") == printed
    return value == int(printed)


@pytest.mark.parametrize(("gpu", "model"), RUNS)
def test_text_log_reproduces_the_study_totals_exactly(gpu, model):
    result = aggregate_ncu([real(f"{ANOUSHKA}/{gpu}/{model}/ncu-log-{model}.txt")])
    expected = study_totals(f"{ANOUSHKA}/{gpu}/{model}/ncu-final-metric-{model}.txt")
    totals = result.totals
    assert totals["source_format"] == "ncu-text"
    # TOTALBYTES = Σ dram__bytes.sum (printed auto-scaled in Kbyte/Mbyte, thousands separators elsewhere)
    assert matches_printed(totals["dram_bytes"], expected["TOTALBYTES"])
    # TOTALFLOPS = Σ fadd + fmul + 2·ffma
    assert matches_printed(totals["flops_fp32"], expected["TOTALFLOPS"])
    # DRDW TRANSACTIONS = Σ dram__sectors.sum; dram__bytes.sum is preferred, never added to 32 × sectors
    assert result.metrics["dram__sectors.sum"].sum() == int(expected["DRDW TRANSACTIONS"])
    assert totals["dram_bytes"] != 32 * int(expected["DRDW TRANSACTIONS"])  # the auto-scaled rounding differs
    # No tensor-core metric in this study: tensor FLOPs are "not collected", not zero
    assert totals["tensor_metrics_collected"] is False
    assert totals["flops_tensor"] is None
    assert totals["l2_bytes"] is None and totals["l1_bytes"] is None
    assert "seconds" not in totals
    assert totals["flops_fp16"] == 0.0  # hadd/hmul/hfma collected, all zero
    assert totals["flops_total"] == totals["flops_fp32"] + totals["flops_fp64"]
    assert totals["kernels"] == len(result.kernels)


def test_a100_vgg11_numbers_and_kernels():
    result = aggregate_ncu([real(f"{ANOUSHKA}/a100/vgg11/ncu-log-vgg11.txt")])
    assert result.totals["dram_bytes"] == 9_790_409_380
    assert result.totals["flops_fp32"] == 11_771_359_163
    assert result.totals["kernels"] == 170  # as many as the ==PROF== Profiling lines announce
    kernels = result.kernels
    assert list(kernels.columns) == KERNEL_COLUMNS
    assert list(kernels["id"]) == list(range(170))
    first = kernels.iloc[0]
    # Hand-read from the log, line 180–193: implicit_convolve_sgemm, 208.82 Mbyte, ffma 1,644,167,168, fmul 51,380,224
    assert first["name"].startswith("void implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, false")
    assert first["kernel_class"] == "convolution"
    assert first["dram_bytes"] == 208_820_000
    assert first["flops_fp32"] == 51_380_224 + 2 * 1_644_167_168
    assert math.isnan(first["flops_tensor"]) and math.isnan(first["seconds"])
    # The TF32 tensor-core kernels are there, doing work fadd/fmul/ffma cannot see
    tf32 = kernels[kernels["name"].str.contains("Ampere_hmma_tf32_traits")]
    assert len(tf32) > 0 and (tf32["kernel_class"] == "convolution").all()
    cutlass = kernels[kernels["name"].str.contains("cutlass_80_tensorop_s1688gemm")]
    assert len(cutlass) > 0 and (cutlass["kernel_class"] == "gemm").all()
    assert "No tensor-core metric was collected" in " ".join(result.notes)


def test_v100_vgg11_sees_the_fp32_work_the_a100_counters_miss():
    a100 = aggregate_ncu([real(f"{ANOUSHKA}/a100/vgg11/ncu-log-vgg11.txt")]).totals
    v100 = aggregate_ncu([real(f"{ANOUSHKA}/v100/vgg11/ncu-log-vgg11.txt")]).totals
    assert round(v100["flops_fp32"] / 1e9, 1) == 221.7
    assert v100["flops_fp32"] / a100["flops_fp32"] > 18  # same code: the A100's convolutions ran on tensor cores
    assert v100["flops_fp64"] > 0  # a few dfma (2 FLOPs each) in the V100 run


# ---------------------------------------------------------------------------------------------------
# NERSC DeepCAM, V100: 12 one-metric CSV files = one run; the author's golden per-kernel-name table

DEEPCAM_FILES = sorted((REAL / DEEPCAM / "PT-fp32-O1-AdamW-fw-733731").glob("out.*"))
SASS = "sm__sass_thread_inst_executed_op_{}_pred_on.sum"


@pytest.fixture(scope="module")
def deepcam():
    assert len(DEEPCAM_FILES) == 12
    return aggregate_ncu(DEEPCAM_FILES)


@pytest.fixture(scope="module")
def golden():
    return pd.read_csv(REAL / DEEPCAM / "CSVs" / "fp32-O1-AdamW-fw.csv")


def sig4(value: float) -> str:
    return format(value, ".4g")


def test_deepcam_files_merge_into_one_run(deepcam):
    totals = deepcam.totals
    assert totals["kernels"] == 797
    assert totals["source_format"] == "ncu-csv-details"
    assert totals["tensor_metrics_collected"] is True
    assert totals["flops_fp64"] is None  # no d* counters in this run
    assert len(deepcam.metrics.columns) == 12
    assert set(totals) == set(TOTAL_KEYS) | {"seconds", "metrics_collected", "tensor_metrics_collected",
                                              "source_format"}
    # "Kernel Time" is a launch timestamp, not a duration: it must not become a metric
    assert "Kernel Time" not in deepcam.metrics.columns


def test_deepcam_reproduces_the_authors_golden_totals(deepcam, golden):
    totals, raw = deepcam.totals, deepcam.metrics
    # The brief's numbers and the golden CSV's column sums, to 4 significant digits
    assert sig4(totals["flops_tensor"]) == sig4(1.12868e12) == sig4(golden["TC FLOPs"].sum())
    assert totals["flops_tensor"] == pytest.approx(golden["TC FLOPs"].sum(), rel=1e-12)  # in fact exact
    assert sig4(totals["dram_bytes"]) == sig4(2.18303e10) == sig4(golden["dram__bytes.sum"].sum())
    assert totals["dram_bytes"] == pytest.approx(golden["dram__bytes.sum"].sum(), rel=1e-12)
    assert totals["l2_bytes"] == pytest.approx(golden["lts__t_bytes.sum"].sum(), rel=1e-12)
    assert totals["l1_bytes"] == pytest.approx(golden["l1tex__t_bytes.sum"].sum(), rel=1e-12)

    # CUDA-core FLOPs: the author counted fadd + fmul + 2·ffma + hadd + hmul + 2·hfma (one FLOP per half
    # instruction). rooflow counts half2 instructions as 2 FLOPs (2·hadd + 2·hmul + 4·hfma, DESIGN.md), so the
    # author's number is recomputed here from the parsed counters, and the product's differs by exactly
    # hadd + hmul + 2·hfma.
    fadd, fmul, ffma = (raw[SASS.format(op)].sum() for op in ("fadd", "fmul", "ffma"))
    hadd, hmul, hfma = (raw[SASS.format(op)].sum() for op in ("hadd", "hmul", "hfma"))
    theirs = fadd + fmul + 2 * ffma + hadd + hmul + 2 * hfma
    assert sig4(theirs) == sig4(2.41696e11) == sig4(golden["CC FLOPs"].sum())
    assert theirs == pytest.approx(golden["CC FLOPs"].sum(), rel=1e-12)
    assert totals["flops_fp32"] == fadd + fmul + 2 * ffma
    # but for the fp16-pipe instructions of kernels whose names show only 32-bit types (6 here, 24.8 MFLOP of this
    # mixed-precision step's 20.5 GFLOP: a float copy kernel the most), not half-precision arithmetic
    wide = deepcam.kernels["name"].astype(str).map(only_wide_float_types).to_numpy()
    half = (2 * raw[SASS.format("hadd")] + 2 * raw[SASS.format("hmul")] + 4 * raw[SASS.format("hfma")]).to_numpy()
    dropped = half[wide].sum()
    assert dropped == pytest.approx(24.77e6, rel=1e-3) and (wide & (half > 0)).sum() == 6
    assert totals["flops_fp16"] == 2 * hadd + 2 * hmul + 4 * hfma - dropped
    assert totals["flops_fp32"] + totals["flops_fp16"] + dropped - theirs == hadd + hmul + 2 * hfma > 0

    # Time: the author divided each kernel NAME's summed cycles by its mean cycles-per-second; rooflow divides
    # per kernel, then sums (a rate is never summed). Both from the same parsed counters:
    per_kernel = raw["sm__cycles_elapsed.avg"] / raw["sm__cycles_elapsed.avg.per_second"]
    assert totals["seconds"] == pytest.approx(per_kernel.sum(), rel=1e-12)
    frame = pd.DataFrame({"name": deepcam.kernels["name"].to_numpy(),
                          "cycles": raw["sm__cycles_elapsed.avg"].to_numpy(),
                          "rate": raw["sm__cycles_elapsed.avg.per_second"].to_numpy()})
    by_name = frame.groupby("name").agg(cycles=("cycles", "sum"), rate=("rate", "mean"))
    their_time = (by_name["cycles"] / by_name["rate"]).sum()
    assert sig4(their_time) == sig4(0.104385) == sig4(golden["Time"].sum())
    assert sig4(totals["seconds"]) == "0.1043"  # the per-kernel division: 0.07% below the author's 0.1044
    assert totals["seconds"] == pytest.approx(their_time, rel=1e-3)


def test_deepcam_per_kernel_name_matches_the_golden_table(deepcam, golden):
    """Not only the totals: each of the 45 kernel names' instance count, tensor FLOPs and DRAM bytes."""
    ours = deepcam.kernels.groupby("name").agg(count=("id", "size"), tensor=("flops_tensor", "sum"),
                                               dram=("dram_bytes", "sum"))
    golden = golden.set_index("Kernel Name")
    assert set(ours.index) == set(golden.index) and len(ours) == 45
    for name, row in golden.iterrows():
        assert ours.loc[name, "count"] == row["Count"], name
        assert ours.loc[name, "tensor"] == pytest.approx(row["TC FLOPs"], rel=1e-12), name
        assert ours.loc[name, "dram"] == pytest.approx(row["dram__bytes.sum"], rel=1e-12), name


def test_deepcam_one_file_alone_is_a_valid_run_with_only_that_metric():
    result = aggregate_ncu([REAL / DEEPCAM / "PT-fp32-O1-AdamW-fw-733731" / "out.dram__bytes.sum.gz"])
    assert result.totals["kernels"] == 797
    assert sig4(result.totals["dram_bytes"]) == sig4(2.18303e10)
    assert result.totals["flops_total"] is None and result.totals["tensor_metrics_collected"] is False


def _deepcam_lines(metric: str) -> list[str]:
    return real_text(f"{DEEPCAM}/PT-fp32-O1-AdamW-fw-733731/out.{metric}").splitlines(keepends=True)


DEEPCAM_RUN = REAL / DEEPCAM / "PT-fp32-O1-AdamW-fw-733731"


def _write_csv_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(lines))
    return path


def _rewrite_rows(lines: list[str], change) -> list[str]:
    """Apply `change(fields) -> fields | None` to every CSV row after the header (None drops the row)."""
    out, header_seen = [], False
    for line in lines:
        if not line.startswith('"') or not header_seen:
            header_seen = header_seen or line.startswith('"ID"')
            out.append(line)
            continue
        fields = change(next(csv.reader([line])))
        if fields is None:
            continue
        buffer = io.StringIO()
        csv.writer(buffer, quoting=csv.QUOTE_ALL, lineterminator="\n").writerow(fields)
        out.append(buffer.getvalue())
    return out


def _metric_total(metric: str) -> float:
    return math.fsum(float(next(csv.reader([line]))[11].replace(",", ""))
                     for line in _deepcam_lines(metric) if line.startswith('"') and not line.startswith('"ID"'))


def test_a_file_missing_the_last_kernel_is_a_separate_run_and_noted(tmp_path):
    """Cut at a line boundary, a one-metric file cannot show it: accepted as a separate run, with a note."""
    lines = _deepcam_lines("lts__t_bytes.sum")
    short = _write_csv_lines(tmp_path / "out.lts__t_bytes.sum", lines[:-1])  # the last kernel's line lost
    result = aggregate_ncu([DEEPCAM_RUN / "out.dram__bytes.sum.gz", short])
    assert result.totals["runs"] == 2 and result.totals["kernels_per_run"] == [797, 796]
    assert result.totals["kernels"] == 797
    note = " ".join(result.notes)
    assert "2 files from 2 separate ncu runs: 796–797 kernels" in note
    assert f"{short} holds exactly the first 796 of the 797 kernels" in note and "undercounted" in note
    last = float(next(csv.reader([lines[-1]]))[11].replace(",", ""))
    assert result.totals["l2_bytes"] == _metric_total("lts__t_bytes.sum") - last


def test_separate_runs_with_other_kernel_lists_sum_each_metric_over_its_own_file(tmp_path):
    """NERSC's layout, one ncu run per metric, with run-to-run differences: a kernel fewer in one run (the
    IDs after it shift), kernel names truncated otherwise in another, two kernels more in a third."""
    def drop_kernel_400(fields):
        kernel_id = int(fields[0])
        if kernel_id == 400:
            return None
        fields[0] = str(kernel_id - 1 if kernel_id > 400 else kernel_id)
        return fields

    def truncate_names(fields):
        fields[4] = fields[4][:60]
        return fields

    fewer = _write_csv_lines(tmp_path / "out.dram__bytes.sum",
                             _rewrite_rows(_deepcam_lines("dram__bytes.sum"), drop_kernel_400))
    renamed = _write_csv_lines(tmp_path / "out.lts__t_bytes.sum",
                               _rewrite_rows(_deepcam_lines("lts__t_bytes.sum"), truncate_names))
    ffma = _deepcam_lines("sm__sass_thread_inst_executed_op_ffma_pred_on.sum")
    extra = _rewrite_rows(['"ID"\n'] + ffma[-2:], lambda f: [str(int(f[0]) + 2)] + f[1:])[1:]  # IDs 797, 798
    more = _write_csv_lines(tmp_path / "out.ffma", ffma + extra)
    fadd = DEEPCAM_RUN / "out.sm__sass_thread_inst_executed_op_fadd_pred_on.sum.gz"
    fmul = DEEPCAM_RUN / "out.sm__sass_thread_inst_executed_op_fmul_pred_on.sum.gz"
    result = aggregate_ncu([fewer, renamed, more, fadd, fmul])
    totals = result.totals

    # fadd and fmul hold the same kernels: one run, merged by ID; the three others are runs of their own
    assert totals["runs"] == 4 and totals["kernels_per_run"] == [796, 797, 799, 797]
    assert result.runs == [[fewer], [renamed], [more], [fadd, fmul]]
    assert any("5 files from 4 separate ncu runs: 796–799 kernels" in note for note in result.notes)
    # each metric summed over its own file: DRAM without kernel 400, L2 in full, FFMA with its two extra rows
    row_400 = next(line for line in _deepcam_lines("dram__bytes.sum") if line.startswith('"400",'))
    dram_400 = float(next(csv.reader([row_400]))[11].replace(",", ""))
    assert totals["dram_bytes"] == _metric_total("dram__bytes.sum") - dram_400
    assert totals["l2_bytes"] == _metric_total("lts__t_bytes.sum")
    ffma_extra = sum(float(next(csv.reader([line]))[11].replace(",", "")) for line in ffma[-2:])
    expected_fp32 = (_metric_total("sm__sass_thread_inst_executed_op_fadd_pred_on.sum")
                     + _metric_total("sm__sass_thread_inst_executed_op_fmul_pred_on.sum")
                     + 2 * (_metric_total("sm__sass_thread_inst_executed_op_ffma_pred_on.sum") + ffma_extra))
    assert totals["flops_fp32"] == expected_fp32
    # the per-kernel table stacks the runs; every additive column sums to its total
    kernels = result.kernels
    assert list(kernels.columns) == KERNEL_COLUMNS and len(kernels) == 796 + 797 + 799 + 797
    assert list(kernels["id"][:3]) == [0, 1, 2] and kernels["id"].iloc[796] == 0
    for key in ("dram_bytes", "l2_bytes", "flops_fp32"):
        assert math.fsum(kernels[key].dropna()) == totals[key]
    assert kernels["dram_bytes"].iloc[796:].isna().all()  # the other runs did not measure DRAM ...
    assert not any("report n/a" in note for note in result.notes)  # ... which is not "n/a"
    assert result.metrics.index.names == ["run", "id"]


def test_separate_runs_of_different_programs_are_refused(tmp_path):
    """Kernel counts 10% or more apart: not runs of one step (here a third of the kernels)."""
    lines = _deepcam_lines("lts__t_bytes.sum")
    short = _write_csv_lines(tmp_path / "out.lts__t_bytes.sum", lines[:-300])
    with pytest.raises(ParseError, match="not runs of the same step") as error:
        aggregate_ncu([DEEPCAM_RUN / "out.dram__bytes.sum.gz", short])
    assert_one_sentence(str(error.value), short)


def test_one_metric_in_two_separate_runs(tmp_path):
    """Two totals for one metric: refused. The same total twice: counted once, with a note."""
    def truncate_names(fields):
        fields[4] = fields[4][:60]
        return fields

    lines = _rewrite_rows(_deepcam_lines("dram__bytes.sum"), truncate_names)
    same = _write_csv_lines(tmp_path / "out.dram__bytes.sum", lines)
    result = aggregate_ncu([DEEPCAM_RUN / "out.dram__bytes.sum.gz", same])
    assert result.totals["dram_bytes"] == _metric_total("dram__bytes.sum")
    assert any("with the same total: counted once" in note for note in result.notes)
    other = _write_csv_lines(tmp_path / "out.dram_other", [line.replace('"byte","59520"', '"byte","5952000"')
                                                           for line in lines])
    with pytest.raises(ParseError, match="holds dram__bytes.sum") as error:
        aggregate_ncu([DEEPCAM_RUN / "out.dram__bytes.sum.gz", other])
    assert_one_sentence(str(error.value), other)


def test_time_from_cycles_of_separate_runs_is_not_reported(tmp_path):
    """Cycles and cycles per second from two runs: a kernel's time needs both from the same kernel."""
    def truncate_names(fields):
        fields[4] = fields[4][:60]
        return fields

    rate = _write_csv_lines(tmp_path / "out.rate",
                            _rewrite_rows(_deepcam_lines("sm__cycles_elapsed.avg.per_second"), truncate_names))
    result = aggregate_ncu([DEEPCAM_RUN / "out.sm__cycles_elapsed.avg.gz", rate])
    assert "seconds" not in result.totals
    assert any("come from separate ncu runs" in note for note in result.notes)


def test_the_same_metric_twice_with_other_values_is_refused(tmp_path):
    copy = tmp_path / "out.dram__bytes.sum"
    copy.write_text("".join(_deepcam_lines("dram__bytes.sum")).replace('"byte","59520"', '"byte","59521"'))
    with pytest.raises(ParseError) as error:
        aggregate_ncu([REAL / DEEPCAM / "PT-fp32-O1-AdamW-fw-733731" / "out.dram__bytes.sum.gz", copy])
    assert "dram__bytes.sum of kernel ID 0" in str(error.value)


# ---------------------------------------------------------------------------------------------------
# B200 --page raw: wide, units row


def raw_page(relative: str) -> tuple[list[str], list[str], list[list[str]]]:
    rows = list(csv.reader(line for line in real_text(relative).splitlines() if line.startswith('"')))
    return rows[0], rows[1], rows[2:]


@pytest.mark.parametrize(("name", "kernels"), [("torch_sdpa_flash__gqa_bf16_b64_ctx4k_p64", 16),
                                               ("flashinfer_paged_decode__gqa_bf16_b64_ctx4k_p64", 64)])
def test_raw_page_units_row_is_honoured(name, kernels):
    relative = f"{B200}/{name}.ncu.csv"
    result = aggregate_ncu([real(relative)])
    header, units, rows = raw_page(relative)
    duration = header.index("gpu__time_duration.sum")
    assert units[duration] == "ns"
    assert result.totals["kernels"] == kernels == len(rows)
    assert result.totals["source_format"] == "ncu-csv-raw"
    # By hand from the file: kernel 0's duration column, in ns per the units row, becomes seconds
    assert result.kernels.loc[0, "seconds"] == pytest.approx(int(rows[0][duration]) * 1e-9, rel=1e-15)
    assert result.totals["seconds"] == pytest.approx(sum(int(r[duration]) for r in rows) * 1e-9, rel=1e-12)
    # Unit-less and percent columns keep their value; text columns are not metrics
    launches = header.index("launch__grid_size")
    assert units[launches] == ""
    assert result.metrics.loc[0, "launch__grid_size"] == float(rows[0][launches])
    percent = next(i for i, u in enumerate(units) if u == "%" and rows[0][i] not in ("", "n/a"))
    assert result.metrics.loc[0, header[percent]] == pytest.approx(float(rows[0][percent].replace(",", "")))
    assert "device__attribute_display_name" not in result.metrics.columns
    # Attention kernels without FLOP or DRAM metrics: nothing invented
    assert result.totals["flops_total"] is None and result.totals["dram_bytes"] is None
    assert result.totals["tensor_metrics_collected"] is False


def test_torch_sdpa_first_kernels_by_hand():
    result = aggregate_ncu([real(f"{B200}/torch_sdpa_flash__gqa_bf16_b64_ctx4k_p64.ncu.csv")])
    assert result.kernels.loc[0, "seconds"] == pytest.approx(687_488e-9, rel=1e-15)
    assert result.kernels.loc[1, "seconds"] == pytest.approx(685_792e-9, rel=1e-15)
    assert result.kernels.loc[0, "name"].startswith("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64")
    assert result.metrics.loc[0, "profiler__replayer_bytes_mem_accessible.sum"] == 11_928_907_078


# ---------------------------------------------------------------------------------------------------
# Shapes without a public fixture, written here from the documented headers (see DESIGN.md)

NEW_HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
              '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value","Rule Name",'
              '"Rule Type","Rule Description","Estimated Speedup Type","Estimated Speedup"')


def _new_row(kernel_id, name, metric, unit, value, cc="9.0", rule=("", "", "", "", "")):
    fields = [str(kernel_id), "4242", "python3.11", "127.0.0.1", name, "1", "7", "(256, 1, 1)", "(528, 1, 1)",
              "0", cc, "Command line profiler metrics" if metric else "SpeedOfLight", metric, unit, value, *rule]
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="").writerow(fields)
    return out.getvalue()


def test_new_details_header_with_rules_separators_and_interleaved_output(tmp_path):
    gemm = "void cutlass::Kernel2<cutlass_90_tensorop_s16816gemm_f16_256x128_64x3_nt_align8>(Params)"
    relu = "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar>"
    lines = [
        "==PROF== Connected to process 4242 (/usr/bin/python3.11)",
        "rooflow driver: warm-up done",
        NEW_HEADER,
        _new_row(0, gemm, "dram__bytes_read.sum", "Mbyte", "1,048.58"),
        _new_row(0, gemm, "dram__bytes_write.sum", "Kbyte", "512.25"),
        "==WARNING== Found outstanding GPU clock reset, trying to revert...",
        _new_row(0, gemm, "gpu__time_duration.sum", "usecond", "1,234.50"),
        _new_row(0, gemm, "sm__ops_path_tensor_src_fp16.sum", "", "2,147,483,648"),
        _new_row(0, gemm, "sm__ops_path_tensor_src_fp16_dst_fp32.sum", "", "2,147,483,648"),  # part of src_fp16
        _new_row(0, gemm, "sm__ops_path_tensor_src_fp16_sparsity_off.sum", "", "2,147,483,648"),
        _new_row(0, gemm, "sm__ops_path_tensor_src_tf32_dst_fp32.sum", "", "0"),
        _new_row(0, gemm, "sm__ops_path_tensor_src_int8.sum", "", "999"),  # integer ops are not FLOPs
        _new_row(0, gemm, "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", "inst", "1,000"),
        _new_row(0, gemm, "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum", "inst", "10"),
        _new_row(0, gemm, "dram__throughput.avg.pct_of_peak_sustained_elapsed", "%", "71.3"),
        _new_row(0, gemm, "", "", "", rule=("SOLBottleneck", "OPT", "This kernel ...", "global", "12.5")),
        "step 1 done",
        _new_row(1, relu, "dram__bytes_read.sum", "Gbyte", "1.5"),
        _new_row(1, relu, "dram__bytes_write.sum", "byte", "2,000"),
        _new_row(1, relu, "gpu__time_duration.sum", "msecond", "2"),
        _new_row(1, relu, "sm__ops_path_tensor_src_fp16.sum", "", "0"),
        _new_row(1, relu, "sm__ops_path_tensor_src_fp16_dst_fp32.sum", "", "0"),
        _new_row(1, relu, "sm__ops_path_tensor_src_fp16_sparsity_off.sum", "", "0"),
        _new_row(1, relu, "sm__ops_path_tensor_src_tf32_dst_fp32.sum", "", "0"),
        _new_row(1, relu, "sm__ops_path_tensor_src_int8.sum", "", "0"),
        _new_row(1, relu, "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", "inst", "0"),
        _new_row(1, relu, "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum", "inst", "0"),
        _new_row(1, relu, "dram__throughput.avg.pct_of_peak_sustained_elapsed", "%", "88.0"),
        "==PROF== Disconnected from process 4242",
    ]
    path = tmp_path / "ncu.csv"
    path.write_text("\n".join(lines) + "\n")
    result = aggregate_ncu([path])
    totals, kernels = result.totals, result.kernels
    assert totals["kernels"] == 2 and totals["source_format"] == "ncu-csv-details"
    assert kernels.loc[0, "dram_bytes"] == 1_048_580_000 + 512_250
    assert kernels.loc[1, "dram_bytes"] == 1_500_000_000 + 2_000
    assert kernels.loc[0, "seconds"] == pytest.approx(1234.5e-6, rel=1e-15)
    assert kernels.loc[1, "seconds"] == pytest.approx(2e-3, rel=1e-15)
    # src_fp16 only: not its dst_fp32 part, not the sparsity split, not int8
    assert kernels.loc[0, "flops_tensor"] == 2_147_483_648
    assert kernels.loc[0, "flops_fp32"] == 2_000 and kernels.loc[0, "flops_fp16"] == 40
    assert math.isnan(kernels.loc[0, "flops_fp64"])  # no d* counters collected
    assert kernels.loc[0, "flops_total"] == 2_147_483_648 + 2_000 + 40
    assert kernels.loc[0, "kernel_class"] == "gemm" and kernels.loc[1, "kernel_class"] == "elementwise"
    assert totals["tensor_metrics_collected"] is True
    assert totals["flops_fp64"] is None
    assert "sm__ops_path_tensor_src_fp16.sum" in totals["metrics_collected"]
    assert "sm__ops_path_tensor_src_fp16_dst_fp32.sum" not in totals["metrics_collected"]
    assert result.metrics.loc[0, "dram__throughput.avg.pct_of_peak_sustained_elapsed"] == 71.3


def test_old_details_header_with_rule_columns(tmp_path):
    header = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Kernel Time","Context","Stream",'
              '"Section Name","Metric Name","Metric Unit","Metric Value","Rule Name","Rule Type","Rule Description"')
    prefix = '"0","11","python","h","volta_sgemm_128x64_nt","2021-Mar-01 10:00:00","1","7",'
    rows = [prefix + row for row in (
        '"Command line profiler metrics","dram__sectors.sum","sector","1,000","","",""',
        '"Command line profiler metrics","sm__inst_executed_pipe_tensor.sum","inst","3","","",""',
        '"SpeedOfLight","","","","SOLBottleneck","WRN","Compute is more heavily utilized than memory"',
        '"Command line profiler metrics","sm__cycles_elapsed.avg","cycle","1,200","","",""',
        '"Command line profiler metrics","sm__cycles_elapsed.avg.per_second","cycle/nsecond","1.2","","",""',
    )]
    path = tmp_path / "old.csv"
    path.write_text(header + "\n" + "\n".join(rows) + "\n")
    result = aggregate_ncu(path)
    row = result.kernels.iloc[0]
    assert row["dram_bytes"] == 32_000  # 32 × dram__sectors.sum
    assert row["flops_tensor"] == 512 * 3  # sm_70 style: 512 FLOPs per HMMA instruction
    assert row["seconds"] == pytest.approx(1200 / 1.2e9, rel=1e-15)  # cycle/nsecond -> per second
    assert result.totals["seconds"] == pytest.approx(1e-6, rel=1e-12)


def test_rates_are_never_summed_across_kernels(tmp_path):
    """Two kernels at different clocks: Σ cycles_i / rate_i, not Σ cycles / Σ rate (or mean rate)."""
    header = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Kernel Time","Context","Stream",'
              '"Section Name","Metric Name","Metric Unit","Metric Value"')
    rows = []
    for kernel_id, cycles, rate in ((0, "1,000,000", "1.0"), (1, "3,000,000", "1.5")):
        for metric, unit, value in (("sm__cycles_elapsed.avg", "cycle", cycles),
                                    ("sm__cycles_elapsed.avg.per_second", "cycle/second", f"{rate}e9")):
            rows.append(f'"{kernel_id}","1","p","h","k","t","1","7","s","{metric}","{unit}","{value}"')
    path = tmp_path / "rates.csv"
    path.write_text(header + "\n" + "\n".join(rows) + "\n")
    totals = aggregate_ncu(path).totals
    assert totals["seconds"] == pytest.approx(1e6 / 1e9 + 3e6 / 1.5e9, rel=1e-12)  # 3 ms
    assert totals["seconds"] != pytest.approx(4e6 / 2.5e9, rel=1e-3)
    assert totals["seconds"] != pytest.approx(4e6 / 1.25e9, rel=1e-3)


def test_dram_bytes_has_one_source_never_two(tmp_path):
    header = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Kernel Time","Context","Stream",'
              '"Section Name","Metric Name","Metric Unit","Metric Value"')

    def run(metrics):
        path = tmp_path / f"dram{len(metrics)}.csv"
        path.write_text(header + "\n" + "\n".join(
            f'"0","1","p","h","k","t","1","7","s","{m}","{u}","{v}"' for m, u, v in metrics) + "\n")
        return aggregate_ncu(path).totals["dram_bytes"]

    every = [("dram__bytes.sum", "Kbyte", "64"), ("dram__bytes_read.sum", "Kbyte", "40"),
             ("dram__bytes_write.sum", "Kbyte", "24"), ("dram__sectors.sum", "sector", "2,000")]
    assert run(every) == 64_000
    assert run(every[1:]) == 64_000
    assert run(every[3:]) == 64_000
    assert run([("lts__t_bytes.sum", "Gbyte", "1")]) is None


def test_volta_instruction_count_is_not_scaled_on_turing(tmp_path):
    path = tmp_path / "turing.csv"
    path.write_text(NEW_HEADER + "\n" + _new_row(0, "turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_nn",
                                                 "sm__inst_executed_pipe_tensor.sum", "inst", "100", cc="7.5") + "\n")
    result = aggregate_ncu(path)
    assert result.totals["flops_tensor"] is None and result.totals["tensor_metrics_collected"] is False
    assert any("512 FLOPs per instruction does not hold" in note for note in result.notes)


NEW_TEXT = """\
==PROF== Connected to process 5150 (/usr/bin/python3.11)
==PROF== Profiling "ampere_sgemm_128x64_nn" - 0: 0%....50%....100% - 9 passes
==PROF== Profiling "vectorized_elementwise_kernel" - 1: 0%....50%....100% - 9 passes
==PROF== Disconnected from process 5150
[5150] python3.11@127.0.0.1
  ampere_sgemm_128x64_nn (64, 2, 1)x(128, 1, 1), Context 1, Stream 7, Device 0, CC 8.6
    Section: GPU Speed Of Light Throughput
    ----------------------- ----------- ------------
    Metric Name             Metric Unit Metric Value
    ----------------------- ----------- ------------
    DRAM Frequency                  Ghz         9.49
    Duration                    usecond        41.25
    DRAM Throughput                   %        12.34
    ----------------------- ----------- ------------

    Section: Command line profiler metrics
    ----------------------------------------------------- ----------- ------------
    Metric Name                                           Metric Unit Metric Value
    ----------------------------------------------------- ----------- ------------
    dram__bytes_read.sum                                        Mbyte        12.58
    dram__bytes_write.sum                                       Kbyte       512.00
    dram__bytes_read.sum.per_second                     Gbyte/second       304.97
    gpu__time_duration.sum                                    usecond        41.25
    l1tex__t_bytes.sum                                          Mbyte        50.33
    lts__t_bytes.sum                                            Mbyte        25.17
    sm__ops_path_tensor_src_tf32_dst_fp32.sum                                    0
    smsp__sass_thread_inst_executed_op_fadd_pred_on.sum          inst        65536
    smsp__sass_thread_inst_executed_op_ffma_pred_on.sum          inst     16777216
    smsp__sass_thread_inst_executed_op_fmul_pred_on.sum          inst            0
    ----------------------------------------------------- ----------- ------------

    WRN   Memory is more heavily utilized than Compute: look at the Memory Workload Analysis section.

  void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>) (1024, 1, 1)x(128, 1, 1), Context 1, Stream 7, Device 0, CC 8.6
    Section: Command line profiler metrics
    ----------------------------------------------------- ----------- ------------
    Metric Name                                           Metric Unit Metric Value
    ----------------------------------------------------- ----------- ------------
    dram__bytes_read.sum                                         byte            0
    dram__bytes_write.sum                                       Mbyte         2.10
    dram__bytes_read.sum.per_second                      byte/second            0
    gpu__time_duration.sum                                    nsecond     2,976.00
    l1tex__t_bytes.sum                                          Mbyte         2.10
    lts__t_bytes.sum                                            Mbyte         2.10
    sm__ops_path_tensor_src_tf32_dst_fp32.sum                                    0
    smsp__sass_thread_inst_executed_op_fadd_pred_on.sum          inst            0
    smsp__sass_thread_inst_executed_op_ffma_pred_on.sum          inst            0
    smsp__sass_thread_inst_executed_op_fmul_pred_on.sum          inst            0
    ----------------------------------------------------- ----------- ------------
"""


def test_newer_text_output_with_grid_block_device_and_unit_rows(tmp_path):
    path = tmp_path / "ncu.txt"
    path.write_text(NEW_TEXT)
    result = aggregate_ncu(path)
    kernels, totals = result.kernels, result.totals
    assert totals["kernels"] == 2 and totals["source_format"] == "ncu-text"
    assert kernels.loc[0, "name"] == "ampere_sgemm_128x64_nn"
    assert kernels.loc[1, "name"].endswith("at::detail::Array<char*, 1>)")
    assert kernels.loc[0, "dram_bytes"] == 12_580_000 + 512_000
    assert kernels.loc[0, "seconds"] == pytest.approx(41.25e-6, rel=1e-15)
    assert kernels.loc[1, "seconds"] == pytest.approx(2976e-9, rel=1e-15)
    assert kernels.loc[0, "flops_fp32"] == 65_536 + 2 * 16_777_216
    assert kernels.loc[0, "flops_tensor"] == 0 and totals["tensor_metrics_collected"] is True
    assert totals["l2_bytes"] == 25_170_000 + 2_100_000 and totals["l1_bytes"] == 50_330_000 + 2_100_000
    # A rate is converted (Gbyte/second -> byte/second) but never summed into a total
    assert result.metrics.loc[0, "dram__bytes_read.sum.per_second"] == pytest.approx(304.97e9)
    # Section tables whose names have spaces, read by the dashed rule's columns
    assert result.metrics.loc[0, "Duration"] == pytest.approx(41.25e-6)
    assert result.metrics.loc[0, "DRAM Frequency"] == pytest.approx(9.49e9)
    assert result.metrics.loc[0, "DRAM Throughput"] == 12.34


def test_gzip_and_plain_copies_parse_alike(tmp_path):
    plain = tmp_path / "ncu.txt"
    plain.write_text(NEW_TEXT)
    packed = tmp_path / "ncu.txt.gz"
    packed.write_bytes(gzip.compress(NEW_TEXT.encode()))
    assert aggregate_ncu(plain).totals == aggregate_ncu(packed).totals


# ---------------------------------------------------------------------------------------------------
# Malformed input: one sentence naming the file, the cause and the fix

MALFORMED_CAUSES = {
    "empty.csv": "empty",
    "foreign.csv": "not Nsight Compute output",
    "ncu_log_saved_from_github.txt": "HTML page",
    "ncu_errnvgpuctrperm.log": "NVreg_RestrictProfilingToAdminUsers=0",
    "ncu_no_kernels.log": "No kernels were profiled",
    "ncu_failed_metric.log": "metrics_for_architecture",
    "ncu_details_truncated_midline.csv": "truncated",
    "ncu_details_truncated_at_line.csv": "truncated",
    "ncu_details_row_too_long.csv": "a CSV row with 20 fields under a header of 15; the file mixes two ncu outputs",
    "ncu_text_truncated.txt": "truncated",
    "ncu_report_binary.ncu-rep": "binary Nsight Compute report (.ncu-rep)",
    "nvprof_metrics.csv": "this is nvprof output",
    "nsys_cuda_gpu_trace_truncated.csv": "this is an nsys stats report, not Nsight Compute output",
    "nsys_profile_no_report.log": "the capture range never opened",
    "nsys_stats_no_kernels.txt": "no CUDA kernels",
}


def _gzip_cut(tmp_path: Path) -> Path:
    path = tmp_path / "ncu.csv.gz"
    path.write_bytes(gzip.compress(real_text(H100_TF32).encode())[:5000])
    return path


def _unreadable(tmp_path: Path) -> Path:
    path = tmp_path / "ncu.csv"
    path.write_text(real_text(H100_TF32))
    path.chmod(0)
    return path


# Bad input made here, each with what aggregate_ncu is given and what its one sentence must say.
GENERATED_CAUSES = {
    "missing file": (lambda tmp: tmp / "does-not-exist.csv", "no such file"),
    "directory": (lambda tmp: tmp, "is a directory, not a profiler output file"),
    "gzip cut short": (_gzip_cut, "the gzip data is corrupt or truncated"),
    "zip archive": (lambda tmp: _write_bytes(tmp / "ncu.zip", b"PK\x03\x04" + bytes(200)), "a ZIP archive"),
    "UTF-16 text": (lambda tmp: _write_bytes(tmp / "ncu.csv", real_text(H100_TF32)[:3000].encode("utf-16")),
                    "UTF-16 text"),
    "random bytes": (lambda tmp: _write_bytes(tmp / "ncu.csv", bytes(range(256)) * 8), "a binary file, not text"),
    "chrome trace": (lambda tmp: _write_bytes(tmp / "trace.json", b'{"traceEvents": []}'),
                     "a torch.profiler / Chrome trace"),
    "unreadable": (_unreadable, "permission denied"),
}


def _write_bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path




@pytest.mark.parametrize("name", sorted(MALFORMED_CAUSES) + sorted(GENERATED_CAUSES) + ["asked-for metric missing"])
def test_bad_input_raises_one_clear_error_naming_the_file(name, tmp_path):
    """Every kind of bad input of issue 14 ("Profiler outputs"): one ParseError, one sentence, the file named."""
    required = None
    if name in MALFORMED_CAUSES:
        path, cause = MALFORMED / name, MALFORMED_CAUSES[name]
    elif name in GENERATED_CAUSES:
        make, cause = GENERATED_CAUSES[name]
        path = make(tmp_path)
        if name == "unreadable" and os.geteuid() == 0:
            pytest.skip("root reads any file: tests/profilers/test_profiler_commands.py runs this one as another user")
    else:
        path, cause = real(H100_TF32), "ncu was asked for lts__t_sectors.sum but the file does not hold it"
        required = ["dram__bytes_read.sum", "lts__t_sectors.sum"]
    with pytest.raises(ParseError) as error:
        aggregate_ncu([path], required_metrics=required)
    message = str(error.value)
    assert_one_sentence(message, path)
    assert cause in message


def test_permission_error_names_line_cause_and_fix():
    path = MALFORMED / "ncu_errnvgpuctrperm.log"
    with pytest.raises(ParseError) as error:
        aggregate_ncu(path)
    message = str(error.value)
    assert f"{path}: line 2:" in message and "ERR_NVGPUCTRPERM" in message
    assert "admin rights" in message


def test_a_file_that_only_names_the_permission_error_is_not_read_as_ncus_own(tmp_path):
    """ncu writes the permission error as its own '==ERROR== ERR_NVGPUCTRPERM - ...' line; a file that merely names
    it (a README, here as `rooflow nsys README.md` was given) was told ncu could not read the counters and to ask
    the admins. It is read as what it is: not ncu output."""
    notes = tmp_path / "notes.md"
    notes.write_text("# notes\nIf ncu says ERR_NVGPUCTRPERM, ask the admins.\n")
    with pytest.raises(ParseError) as error:
        aggregate_ncu(notes)
    message = str(error.value)
    assert "not Nsight Compute output" in message and "admin rights" not in message


def test_truncation_points_at_the_line():
    with pytest.raises(ParseError, match=r"line 8: malformed CSV \(unexpected end of data\): the file is trunc"):
        aggregate_ncu(MALFORMED / "ncu_details_truncated_midline.csv")
    with pytest.raises(ParseError, match=r"line 6: the last kernel \(ID 1\) has 1 metrics where the others have 3"):
        aggregate_ncu(MALFORMED / "ncu_details_truncated_at_line.csv")
    with pytest.raises(ParseError, match=r"line 220: the file ends inside the metric table opened on line 214"):
        aggregate_ncu(MALFORMED / "ncu_text_truncated.txt")


def test_text_log_with_fewer_results_than_profiled_kernels_is_truncated(tmp_path):
    """Cut exactly after a complete kernel block: the ==PROF== Profiling lines show what is missing."""
    lines = real_text(f"{ANOUSHKA}/a100/vgg11/ncu-log-vgg11.txt").splitlines(keepends=True)
    path = tmp_path / "ncu-log.txt"
    path.write_text("".join(lines[:211]))  # 178 ==PROF== lines, [pid] line, two complete kernels
    with pytest.raises(ParseError, match="ncu profiled 170 kernels .* results for 2, so it is truncated"):
        aggregate_ncu(path)


def test_no_file():
    with pytest.raises(ParseError, match="no ncu output file"):
        aggregate_ncu([])


def test_a_used_metric_that_is_not_a_number_is_refused(tmp_path):
    path = tmp_path / "instances.csv"
    path.write_text(NEW_HEADER + "\n" + _new_row(0, "k", "dram__bytes.sum", "byte", "4096;8192") + "\n")
    with pytest.raises(ParseError, match=r"line 2: dram__bytes.sum is '4096;8192', not a number"):
        aggregate_ncu(path)


def test_unknown_unit_of_a_used_metric_is_refused(tmp_path):
    path = tmp_path / "unit.csv"
    path.write_text(NEW_HEADER + "\n" + _new_row(0, "k", "dram__bytes.sum", "Kibibyte", "4") + "\n")
    with pytest.raises(ParseError, match=r"line 2: dram__bytes.sum is in unit 'Kibibyte'"):
        aggregate_ncu(path)
    # a word ncu never prints was taken for a count, and the bytes summed as if it were one (a new user's pass)
    path.write_text(NEW_HEADER + "\n" + _new_row(0, "k", "dram__bytes.sum", "Furlong", "4") + "\n")
    with pytest.raises(ParseError, match=r"line 2: dram__bytes.sum is in unit 'Furlong', which rooflow cannot"):
        aggregate_ncu(path)


def test_a_negative_counter_is_refused(tmp_path):
    """ncu counters and durations are never negative; one that was (an edited file) lowered the step's sums."""
    path = tmp_path / "negative.csv"
    rows = [_new_row(0, "k", "dram__bytes.sum", "byte", "4,096"), _new_row(1, "k", "dram__bytes.sum", "byte", "8"),
            _new_row(1, "k", "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", "inst", "-12")]
    path.write_text(NEW_HEADER + "\n" + "\n".join(rows) + "\n")
    with pytest.raises(ParseError) as error:
        aggregate_ncu(path)
    assert str(error.value) == (
        f"{path}: kernel ID 1 (from line 3): smsp__sass_thread_inst_executed_op_ffma_pred_on.sum is -12, and no "
        f"counter or duration is negative (1 kernel has such a value): the file was edited or damaged; profile "
        f"again or copy the file as ncu wrote it.")
    # a negative duration in nanoseconds was "-0" (its seconds printed without decimals)
    path.write_text(NEW_HEADER + "\n" + _new_row(0, "k", "gpu__time_duration.sum", "nsecond", "-5") + "\n")
    with pytest.raises(ParseError, match=r"kernel ID 0 \(from line 2\): gpu__time_duration.sum is -5e-09 s, and no "):
        aggregate_ncu(path)


# ---------------------------------------------------------------------------------------------------
# Kernel classes, on real names from the fixtures


def _fixture_kernel_names() -> dict[str, str]:
    names = {}
    for gpu, model in RUNS:
        for line in real_text(f"{ANOUSHKA}/{gpu}/{model}/ncu-log-{model}.txt").splitlines():
            match = re.match(r"^  (\S.*?), \d{4}-\w{3}-\d+ [\d:]+, Context", line)
            if match:
                names[match.group(1)] = "anoushka"
    for name in pd.read_csv(REAL / DEEPCAM / "CSVs" / "fp32-O1-AdamW-fw.csv")["Kernel Name"]:
        names[name] = "deepcam"
    return names


@pytest.mark.parametrize(("fragment", "expected"), [
    ("void implicit_convolve_sgemm<float, float, 1024", "convolution"),
    ("xmma_new::gemm::kernel<xmma_new::implicit_gemm::fprop", "convolution"),
    ("xmma_new::gemm::split_k_kernel<xmma_new::implicit_gemm::wgrad_indexed", "convolution"),
    ("cudnn::winograd_nonfused::winogradForwardData4x4", "convolution"),
    ("volta_scudnn_winograd_128x128", "convolution"),
    ("Volta_hmma_implicit_gemm_fprop_fp32_nhwc", "convolution"),
    ("volta_fp16_s884cudnn_fp16_256x64_ldg8_relu_f2f_exp_small_nhwc2nchw_tn_v1", "convolution"),
    ("void cudnn::cnn::wgrad_alg0_engine<float, 128", "convolution"),
    ("cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4>", "gemm"),
    ("ampere_sgemm_128x64_nt", "gemm"),
    ("volta_sgemm_64x64_nt", "gemm"),
    ("volta_fp16_s884gemm_fp16_128x128_ldg8_f2f_nt", "gemm"),
    ("void splitKreduce_kernel<float, float, float, float>", "gemm"),
    ("at::native::vectorized_elementwise_kernel<4, at::native::threshold_kernel_impl<float>", "elementwise"),
    ("at::native::unrolled_elementwise_kernel<at::native::AddFunctor<float>", "elementwise"),
    ("at::native::(anonymous namespace)::fused_dropout_kernel_vec<float", "elementwise"),
    ("cudnn::detail::bn_fw_tr_1C11_kernel_NCHW<__half, float, 512, true, 1>", "normalization"),
    ("at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>", "pooling"),
    ("at::native::(anonymous namespace)::adaptive_average_pool<float>", "pooling"),
    ("at::native::(anonymous namespace)::atomic_adaptive_average_gradinput<float>", "pooling"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float", "reduction"),
    ("(anonymous namespace)::softmax_warp_forward<float, float, float, 10, true>", "reduction"),
    ("void cunn_ClassNLLCriterion_updateOutput_kernel<float, float>", "reduction"),
    ("void nchwToNhwcKernel<float, float, float, true, false, (cudnnKernelDataType_t)2>", "memory"),
    ("void nhwcToNchwKernel<__half, __half, float, true, false>", "memory"),
    ("at::native::unrolled_elementwise_kernel<at::native::copy_device_to_device(at::TensorIterator&, bool)",
     "memory"),
    ("at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 4>", "memory"),
    ("at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>", "memory"),
    ("cask_cudnn::computeOffsetsKernel(cask_cudnn::ComputeOffsetsParams)", "convolution"),
])
def test_classify_real_kernel_names(fragment, expected):
    names = [name for name in _fixture_kernel_names() if fragment in name]
    assert names, f"no fixture kernel contains {fragment!r}"
    assert {classify_kernel(name) for name in names} == {expected}


@pytest.mark.parametrize(("trace", "fragment", "expected"), [
    ("vit_b_16-b256-bf16-inference", "nvjet_sm90_tst_192x192", "gemm"),  # cuBLAS's Hopper GEMMs (addmm, mm)
    ("vit_b_16-b256-tf32-training", "GammaBetaBackwardCUDAKernelTemplate", "normalization"),  # LayerNorm backward
    ("convnext_tiny-b256-tf32-training", "region_transform_ABC_val", "convolution"),  # cuDNN's FFT weight gradient
])
def test_the_h200_traces_kernels_that_were_unclassified(trace, fragment, expected):
    """The H200 traces (gpu-2026-11-27, torch.profiler): cuBLAS's nvjet GEMMs (8.8 + 3.0 ms of ViT-B/16 bf16
    inference's 39.5), LayerNorm's gamma/beta backward and cuDNN's FFT complex products were "other"."""
    from rooflow.measure.timeline import parse_trace

    kernels = parse_trace(REAL / "gpu-2026-11-27" / f"torch-profiler-{trace}.json.gz")
    kernels = kernels[kernels["kind"] == "kernel"]
    named = kernels[kernels["name"].str.contains(fragment, regex=False)]
    assert len(named) >= 12 and {classify_kernel(name) for name in named["name"]} == {expected}


def test_no_kernel_of_the_h200_traces_is_left_unclassified():
    """Every kernel of the H200 traces has a class, so their time by kernel class is whole."""
    from rooflow.measure.timeline import parse_trace

    unclassified = {name for path in sorted((REAL / "gpu-2026-11-27").glob("torch-profiler-*.json.gz"))
                    for name in parse_trace(path)["name"] if classify_kernel(name) == "other"}
    assert not unclassified


@pytest.mark.parametrize(("name", "expected"), [
    # inductor names a Triton kernel after the aten ops it fuses (torch/_inductor/codegen: triton_<kind>_fused_<ops>)
    ("triton_poi_fused_convolution_relu_0", "elementwise"),  # the bias + ReLU epilogue of a cuDNN convolution
    ("triton_poi_fused_add_relu_threshold_backward_5", "elementwise"),
    ("triton_red_fused__native_batch_norm_legit_functional_convolution_1", "normalization"),
    ("triton_red_fused_convolution_backward_native_batch_norm_backward_9", "normalization"),
    ("triton_poi_fused_max_pool2d_with_indices_3", "pooling"),
    ("triton_per_fused_mean_view_4", "reduction"),  # a reduction with no other word: a reduction
    ("triton_poi_fused_clone_10", "elementwise"),  # a pointwise kernel with no other word: elementwise
    ("triton_tem_fused_addmm_6", "gemm"),  # max-autotune's GEMM template is the GEMM itself
    ("triton_tem_fused_convolution_7", "convolution"),
])
def test_inductor_kernels_are_classed_by_what_they_compute(name, expected):
    from rooflow.profilers.kernels import is_inductor_kernel

    assert classify_kernel(name) == expected and is_inductor_kernel(name)
    assert not is_inductor_kernel("void cudnn::bn_fw_tr_1C11_kernel_NCHW<float>")


def test_every_fixture_kernel_gets_a_class():
    classes = defaultdict(int)
    for name in _fixture_kernel_names():
        classes[classify_kernel(name)] += 1
    assert set(classes) <= set(KERNEL_CLASSES)
    assert classes["other"] == 0  # every CNN kernel in the studies is recognised
    assert classify_kernel("[CUDA memcpy Host-to-Device]") == "memory"
    assert classify_kernel("[CUDA memset]") == "memory"
    assert classify_kernel("flash_fwd_kernel") == "other"
    assert classify_kernel("") == "other"


# ---------------------------------------------------------------------------------------------------
# Launch configuration and NVTX stack per kernel (rooflow's H100 recordings)


def test_details_page_keeps_grid_block_and_nvtx_stack():
    """`ncu --nvtx` adds the thread's push/pop stack; every details page carries grid and block size."""
    result = aggregate_ncu(real("h100-rooflow/resnet18-b16-fp32-training-ncu-nvtx.csv"))
    first = result.kernels.iloc[0]
    assert first["name"].startswith("void implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3")
    assert (first["grid_size"], first["block_size"]) == ("(6272, 2, 1)", "(8, 8, 1)")
    assert '"<default domain>:layer:conv1:' in first["nvtx_stack"]
    assert first["nvtx_stack"].startswith("1360 ")  # the main thread's id
    backward = result.kernels.iloc[105]
    assert backward["nvtx_stack"].startswith("1388 ")  # autograd's worker thread
    assert "CudnnBatchNormBackward0, seq = 420" in backward["nvtx_stack"]
    assert (result.kernels["nvtx_stack"] != "").all()


def test_outputs_without_launch_columns_leave_them_empty():
    result = aggregate_ncu(real("anoushka21-cloudml/proj1/a100/vgg11/ncu-log-vgg11.txt"))
    assert (result.kernels[["grid_size", "block_size", "nvtx_stack"]] == "").all().all()
    plain = aggregate_ncu(real("h100-rooflow/resnet50-b64-tf32-inference-ncu.csv"))
    assert (plain.kernels["nvtx_stack"] == "").all() and (plain.kernels["grid_size"] != "").all()


# ---------------------------------------------------------------------------------------------------
# Rows shorter than the header (ncu's rule columns), truncation, mixing — built from DESIGN.md's shapes









def test_short_metric_rows_under_rule_columns_are_padded(tmp_path):
    path, lines = _short_rows_file(tmp_path)
    assert len(next(csv.reader([lines[2]]))) == 13 and len(next(csv.reader([OLD_RULES_HEADER]))) == 15
    result = aggregate_ncu(path)
    assert result.totals["kernels"] == 3
    assert list(result.kernels["dram_bytes"]) == [1_000_500_000 + 2_048, 2_000_500_000 + 2_048,
                                                  3_000_500_000 + 2_048]
    assert result.totals["seconds"] == pytest.approx(3 * 12.25e-6, rel=1e-15)
    assert result.totals["dram_bytes"] == 6_001_500_000 + 3 * 2_048


def test_newer_header_rows_without_the_estimated_speedup_fields(tmp_path):
    """ncu 2023+: "Rule Name" ... "Estimated Speedup" after "Metric Value"; metric rows stop early (19 of 20)."""
    rows = [_new_row(k, "k", m, u, v)[: -len(',""')] for k in (0, 1)
            for m, u, v in (("dram__bytes.sum", "Kbyte", "4"), ("lts__t_bytes.sum", "byte", "8,192"))]
    assert all(len(next(csv.reader([row]))) == 19 for row in rows)
    path = tmp_path / "new.csv"
    path.write_text("\n".join([NEW_HEADER] + rows) + "\n")
    totals = aggregate_ncu(path).totals
    assert totals["dram_bytes"] == 8_000 and totals["l2_bytes"] == 16_384


def _before_value(last: str) -> int:
    """Where the comma before the Metric Value field of an `_old_row` line is."""
    return last.rindex(',"', 0, last.rindex(',"'))


@pytest.mark.parametrize(("cut", "message"), [
    (lambda last: last[:-4], r"line 14: malformed CSV \(unexpected end of data\): the file is truncated"),
    (lambda last: last[:_before_value(last)], r"line 14: the last CSV row has 11 of the header's 15 fields, so the "
                                              r"file is truncated"),
    (lambda last: last[:_before_value(last) + 1], r"line 14: the last line ends inside a row \(after a comma"),
])
def test_a_last_row_cut_short_is_truncation(tmp_path, cut, message):
    path, lines = _short_rows_file(tmp_path)
    path.write_text("\n".join(lines[:-1] + [cut(lines[-1])]))  # no line break after the cut
    with pytest.raises(ParseError, match=message) as error:
        aggregate_ncu(path)
    assert_one_sentence(str(error.value), path)


def test_a_last_kernel_cut_at_a_line_boundary_is_truncation(tmp_path):
    path, lines = _short_rows_file(tmp_path)
    path.write_text("\n".join(lines[:-3]) + "\n")  # kernel 2 keeps 1 of its 3 metrics
    with pytest.raises(ParseError, match=r"line 11: the last kernel \(ID 2\) has 1 metrics where the others have 3"):
        aggregate_ncu(path)


@pytest.mark.parametrize(("change", "message"), [
    (lambda row: row + ',"","","extra"', r"line 4: a CSV row with 16 fields under a header of 15; the file mixes"),
    (lambda row: row[:_before_value(row)], r"line 4: a CSV row with 11 fields where ncu writes at least 12 \(every "
                                           r"column up to 'Metric Value'\)"),
    (lambda row: '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"', r"line 4: a second CSV header"),
])
def test_rows_longer_than_the_header_or_short_mid_file_are_refused(tmp_path, change, message):
    path, lines = _short_rows_file(tmp_path)
    lines[3] = change(lines[3])
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ParseError, match=message) as error:
        aggregate_ncu(path)
    assert_one_sentence(str(error.value), path)


def test_the_profilers_error_line_explains_a_damaged_file(tmp_path):
    path, lines = _short_rows_file(tmp_path)
    path.write_text("\n".join(lines[:-1] + [lines[-1][:-4], "==ERROR== The application returned an error code (9)"]))
    with pytest.raises(ParseError, match=r"line 15: the profiler reported an error \(The application returned"):
        aggregate_ncu(path)


# ---------------------------------------------------------------------------------------------------
# The streaming reader: its vectorised path, its strict path and any block size give the same result





@pytest.mark.parametrize("relative", DETAILS_FILES)
def test_vectorised_strict_and_small_block_reads_agree(relative, monkeypatch):
    from rooflow.profilers import _details, ncu

    path = real(relative)
    fast = aggregate_ncu(path)
    monkeypatch.setattr(ncu, "BLOCK_BYTES", 3_000)  # kernels cut by block boundaries, lines longer than blocks
    _same_result(fast, aggregate_ncu(path))
    monkeypatch.setattr(_details, "VECTORISED", False)  # every row through the csv module
    _same_result(fast, aggregate_ncu(path))


def test_values_the_vectorised_path_leaves_to_the_strict_one(tmp_path):
    """n/a, exponents, signs, misplaced separators, binary prefixes, a text value: each row read exactly once."""
    rows = [_new_row(0, "k", "dram__bytes.sum", "Kbyte", "1,234.5"),
            _new_row(0, "k", "lts__t_bytes.sum", "Kibyte", "2"),  # 2 × 1024: not a power of ten
            _new_row(0, "k", "l1tex__t_bytes.sum", "byte", "1.5e+03"),
            _new_row(0, "k", "gpu__time_duration.sum", "nsecond", "n/a"),
            _new_row(0, "k", "sm__warps_launched.sum", "warp", "12,34"),  # not a number: ignored, not used
            _new_row(0, "k", "device__attribute_display_name", "", "NVIDIA H100"),
            _new_row(0, "k", "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", "inst", "007"),
            _new_row(0, "k", "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum", "inst", "1,000,000,000,000")]
    path = tmp_path / "mixed.csv"
    path.write_text("\n".join([NEW_HEADER] + rows) + "\n")
    result = aggregate_ncu(path)
    row = result.kernels.iloc[0]
    assert row["dram_bytes"] == 1_234_500
    assert row["l2_bytes"] == 2_048 and row["l1_bytes"] == 1_500
    assert math.isnan(row["seconds"]) and result.totals["seconds"] is None
    assert row["flops_fp32"] == 14 + 1_000_000_000_000
    assert "sm__warps_launched.sum" not in result.metrics.columns
    assert "device__attribute_display_name" not in result.metrics.columns


# ---------------------------------------------------------------------------------------------------
# Required and optional metrics

def test_the_metrics_rooflow_asked_for_are_all_there():
    from rooflow.profilers.metrics import metrics_for_architecture

    asked = metrics_for_architecture("sm_90")
    assert len(asked) == 19
    result = aggregate_ncu(real(H100_TF32), required_metrics=asked)
    assert result.totals == aggregate_ncu(real(H100_TF32)).totals


def test_a_required_metric_missing_is_an_error_naming_it():
    from rooflow.profilers.metrics import metrics_for_architecture

    path = real(H100_TF32)
    asked = metrics_for_architecture("sm_90") + ["sm__ops_path_tensor_src_fp8_dst_fp16.sum"]
    with pytest.raises(ParseError, match=r"ncu was asked for sm__ops_path_tensor_src_fp8_dst_fp16.sum but the "
                                         r"file does not hold it") as error:
        aggregate_ncu(path, required_metrics=asked)
    assert_one_sentence(str(error.value), path)
    files = [DEEPCAM_RUN / "out.dram__bytes.sum.gz", DEEPCAM_RUN / "out.lts__t_bytes.sum.gz"]
    with pytest.raises(ParseError, match=r"\(and 1 more file\): ncu was asked for l1tex__t_bytes.sum but none of "
                                         r"the files holds it"):
        aggregate_ncu(files, required_metrics=["dram__bytes.sum", "lts__t_bytes.sum", "l1tex__t_bytes.sum"])


def test_an_optional_metric_missing_is_null_never_zero(tmp_path):
    """The H100 recording without its L1 rows: l1_bytes is None, every other total unchanged."""
    text = real_text(H100_TF32)
    path = tmp_path / "no-l1.csv"
    path.write_text("".join(line for line in text.splitlines(keepends=True) if '"l1tex__t_bytes.sum"' not in line))
    full, without = aggregate_ncu(real(H100_TF32)).totals, aggregate_ncu(path).totals
    assert full["l1_bytes"] > 0 and without["l1_bytes"] is None
    assert {k: v for k, v in without.items() if k not in ("l1_bytes", "metrics_collected")} == \
        {k: v for k, v in full.items() if k not in ("l1_bytes", "metrics_collected")}
    assert "l1tex__t_bytes.sum" not in without["metrics_collected"]


RAW_FILES = ["h100-rooflow/resnet50-b64-fp32-training-ncu-raw-no-sass.csv",
             "h100-rooflow/resnet50-b64-fp32-training-ncu-raw-ffma-only.csv",
             f"{B200}/flashinfer_paged_decode__gqa_bf16_b64_ctx4k_p64.ncu.csv",
             f"{B200}/torch_sdpa_flash__gqa_bf16_b64_ctx4k_p64.ncu.csv"]


@pytest.mark.parametrize("relative", RAW_FILES)
def test_streamed_raw_page_reads_as_the_whole_file_parser(relative, monkeypatch):
    """The raw page streamed (pyarrow, constant columns held once) gives the whole-file parser's result to the bit."""
    from rooflow.profilers import _raw, ncu

    monkeypatch.setattr(_raw, "BATCH_BYTES", 40_000)  # several batches even for these small files
    monkeypatch.setattr(_raw, "COLUMNS_AT_ONCE", 7)  # several column groups per batch
    streamed = aggregate_ncu(real(relative))
    assert any(isinstance(dtype, pd.SparseDtype) for dtype in streamed.metrics.dtypes)  # it was streamed
    narrow = [name for name, dtype in streamed.metrics.dtypes.items() if dtype == np.float32]
    assert narrow and not [name for name in narrow if m.is_used_metric(name)]  # the metrics rooflow adds: float64
    monkeypatch.setattr(ncu, "RAW_STREAMED", False)
    whole = aggregate_ncu(real(relative))
    assert streamed.totals == whole.totals
    pd.testing.assert_frame_equal(streamed.kernels, whole.kernels)
    pd.testing.assert_frame_equal(streamed.metrics.astype(float), whole.metrics)
    assert streamed.notes == whole.notes


def _joined(parts, rows):
    """A raw-page column as the reader built it before _Column: per-batch parts joined at the end."""
    scalars = {part for part, _ in parts if not isinstance(part, np.ndarray)}
    arrays = [part for part, _ in parts if isinstance(part, np.ndarray)]
    if len(scalars) == 1 and None not in scalars and not arrays:
        (value,) = scalars
        return pd.arrays.SparseArray(np.full(rows, value), fill_value=value)
    narrow = all(part.dtype == np.float32 for part in arrays) and all(
        value is None or float(np.float32(value)) == value for value in scalars)
    dtype = np.float32 if narrow else np.float64
    return np.concatenate([part.astype(dtype, copy=False) if isinstance(part, np.ndarray)
                           else np.full(count, np.nan if part is None else part, dtype=dtype) for part, count in parts])


@pytest.mark.parametrize("capacity", [1, 6, 1000])
@pytest.mark.parametrize("parts", [
    [(2.0, 3), (2.0, 4)],  # one number throughout: held once
    [(2.0, 3), (None, 2), (2.0, 1)],
    [(2.0, 3), (0.1, 2)],  # 0.1 is not a float32: float64
    [(None, 2), (np.array([1.0, 2.0], dtype=np.float32), 2), (3.0, 3)],
    [(np.array([1.0, 2.0], dtype=np.float32), 2), (np.array([0.1, 5.0]), 2), (7.0, 1)],  # float32, then float64
    [(np.array([1.5], dtype=np.float32), 1), (16_777_217.0, 2), (np.array([2.5, 3.5], dtype=np.float32), 2)],
    [(np.array([4.0, 5.0]), 2), (None, 3), (np.array([6.0], dtype=np.float32), 1)],
])
def test_raw_columns_are_written_as_the_joined_parts_were(parts, capacity):
    """_Column writes each batch into one array with room for the file; the values and dtype are those of the
    per-batch parts joined at the end, whatever room it guessed (growing, widening float32 to float64)."""
    from rooflow.profilers import _raw

    column = _raw._Column()
    for part, count in parts:
        column.add(part, count, capacity)
    rows = sum(count for _, count in parts)
    expected = _joined(parts, rows)
    got = column.values(rows)
    assert type(got) is type(expected) and got.dtype == expected.dtype
    np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))


def test_raw_page_with_a_text_value_in_a_used_metric_names_the_line(tmp_path):
    """What the streamed reader does not expect goes to the whole-file parser, whose error names the line."""
    lines = real_text(RAW_FILES[0]).splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith('"ID",'))
    column = next(csv.reader([lines[header]])).index("gpu__time_duration.sum")
    fields = next(csv.reader([lines[header + 5]]))
    fields[column] = "oops"
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="").writerow(fields)
    lines[header + 5] = out.getvalue()
    path = tmp_path / "raw.csv"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ParseError, match=rf"line {header + 6}: gpu__time_duration.sum is 'oops', not a number"):
        aggregate_ncu(path)


def test_flops_total_is_pandas_row_sum_to_the_bit():
    """flops_total adds each kernel's precisions left to right, NaN only where none was counted — what
    DataFrame.sum(axis=1, min_count=1) gave before it was replaced by plain numpy (a third of a second per
    million kernels), on values spanning 18 decades with a third of them missing and a column all NaN."""
    rng = np.random.default_rng(7)
    columns = {name: rng.standard_normal(50_000) * 10.0 ** rng.integers(-3, 15, 50_000) for name in "abcd"}
    for values in columns.values():
        values[rng.random(50_000) < 0.35] = np.nan
    columns["c"][:] = np.nan
    frame = pd.DataFrame(columns)
    expected = frame.sum(axis=1, min_count=1).to_numpy()
    assert np.isnan(expected).any() and np.array_equal(m._row_sum([frame[c] for c in "abcd"]), expected, equal_nan=True)


def test_a_counter_past_any_finite_number_is_refused(tmp_path):
    """'1e400' was summed as an infinite DRAM traffic (printed "inf PB", an intensity of 0 FLOP/B), where the
    literal 'inf' was refused; now it is named as past any finite number, not as ncu's per-instance lists."""
    path = tmp_path / "overflow.csv"
    rows = [_new_row(0, "k", "dram__bytes.sum", "byte", "4,096"), _new_row(1, "k", "dram__bytes.sum", "byte", "1e400")]
    path.write_text(NEW_HEADER + "\n" + "\n".join(rows) + "\n")
    with pytest.raises(ParseError) as error:
        aggregate_ncu(path)
    assert str(error.value) == (f"{path}: line 3: dram__bytes.sum is '1e400', past any finite number: the file was "
                                f"edited or damaged; profile again and give the file as ncu wrote it.")


def test_a_metric_given_twice_counts_once_and_two_runs_in_one_file_are_refused(tmp_path):
    """A kernel's metric on two rows (a section listing it again, a row repeated) was an IndexError traceback; two
    runs' details pages in one file (a log appended to by a second ncu run) merged their kernels' values. The same
    value twice counts once (the totals are the file's); another value on the second row is refused, naming it."""
    text = real_text(H100_TF32 + ".gz")
    lines = text.splitlines(keepends=True)
    row = next(i for i, line in enumerate(lines) if line.startswith('"3",') and '"dram__bytes_read.sum"' in line)
    repeated = tmp_path / "repeated.csv"
    repeated.write_text("".join(lines[: row + 1] + [lines[row]] + lines[row + 1:]))
    assert aggregate_ncu(repeated).totals == aggregate_ncu(real(H100_TF32 + ".gz")).totals
    appended = tmp_path / "appended.csv"
    appended.write_text(text + real_text("h100-rooflow/vgg16-b64-tf32-inference-ncu.csv.gz"))
    with pytest.raises(ParseError, match=r"line \d+: kernel ID 0 gives \S+ again, with another value than on line "
                                         r"\d+: two runs in one file .*give one run per file\.") as error:
        aggregate_ncu(appended)
    assert_one_sentence(str(error.value), appended)


def test_a_kernel_whose_time_is_n_a_is_named_in_the_notes(tmp_path):
    """ncu writes n/a for a metric it could not collect on a kernel: kernel 5's duration n/a mid-file was summed as 0
    without a word (FLOPs and DRAM bytes said so; time, L2 and L1 bytes did not)."""
    lines = real_text(H100_TF32 + ".gz").splitlines(keepends=True)
    row = next(i for i, line in enumerate(lines) if line.startswith('"5",') and '"gpu__time_duration.sum"' in line)
    fields = next(csv.reader([lines[row]]))
    fields[-1] = "n/a"
    lines[row] = ",".join(f'"{field}"' for field in fields) + "\n"
    edited = tmp_path / "n-a.csv"
    edited.write_text("".join(lines))
    result, whole = aggregate_ncu(edited), aggregate_ncu(real(H100_TF32 + ".gz"))
    assert result.totals["seconds"] == pytest.approx(whole.totals["seconds"] - float(whole.kernels.loc[5, "seconds"]))
    assert "seconds: 1 kernels report n/a and are left out of the total." in result.notes
    assert not any("report n/a" in note for note in whole.notes)


def test_a_profile_without_cuda_core_counters_has_no_flop_total():
    """rooflow's H100 ResNet-50 FP32 training step profiled without the SASS counters (the raw page's run "without
    them", tests/data/real PROVENANCE.md): its total printed "0 FLOP", and every class 0 FLOP beside 64 ms of
    convolution kernels — an intensity of 0 for whatever read it. No FP32/FP16/FP64 counter: no total, said so;
    the tensor-core count (0: FP32 kernels) stays apart, as the same step's file with FFMA alone counts 1.4 TFLOP."""
    result = aggregate_ncu(real("h100-rooflow/resnet50-b64-fp32-training-ncu-raw-no-sass.csv"))
    assert result.totals["flops_total"] is None and result.totals["flops_fp32"] is None
    assert result.totals["flops_tensor"] == 0 and result.totals["kernels"] == 593
    assert result.kernels["flops_total"].isna().all()
    assert any(note.startswith("No CUDA-core FLOP counter (sm__sass_thread_inst_executed_op_*) was collected")
               for note in result.notes)
    ffma = aggregate_ncu(real("h100-rooflow/resnet50-b64-fp32-training-ncu-raw-ffma-only.csv")).totals
    assert ffma["flops_total"] == pytest.approx(1.395e12, rel=1e-3)


def test_fp16_pipe_instructions_of_fp32_kernels_are_not_half_precision_flops():
    """rooflow's H100 VGG16 TF32 inference step has no 16-bit tensor, yet its ncu counters gave 7.0 GFLOP of "fp16
    CUDA-core" work: the FP32 bias add (elementwise_kernel<CUDAFunctor_add<float>>, 13 calls) executed exactly 4.000x
    as many fp16 FLOPs as FP32 adds (one HFMA2 per element), flip_filter<float, float>, a copy, 57 MFLOP of them.
    Counted, they made its elementwise class 5x its FP32 adds (8.67 GFLOP against 1.73). Kernels whose names show
    only 32/64-bit float types count none, and the notes say how much was left out; a bf16 step's half-precision
    kernels keep theirs."""
    result = aggregate_ncu(real("h100-rooflow/vgg16-b64-tf32-inference-ncu.csv"))
    kernels = result.kernels
    add = kernels[kernels["name"].astype(str).str.contains("CUDAFunctor_add<float>")]
    assert len(add) == 13 and (add["flops_fp16"] == 0).all()
    assert result.totals["flops_fp16"] == 0
    elementwise = kernels[kernels["kernel_class"] == "elementwise"]
    assert elementwise["flops_total"].sum() == pytest.approx(elementwise["flops_fp32"].sum()) == pytest.approx(
        1.734e9, rel=1e-3)
    assert result.totals["flops_total"] == pytest.approx(
        result.totals["flops_fp32"] + result.totals["flops_tensor"], rel=1e-12)
    [note] = [n for n in result.notes if n.startswith("fp16 CUDA-core FLOPs of ")]
    assert note.startswith("fp16 CUDA-core FLOPs of 16 kernels whose names show only 32/64-bit float types "
                           "(7.007 GFLOP, the most in elementwise_kernel<CUDAFunctor_add>)")
    bf16 = aggregate_ncu(real("gpu-2026-11-25/resnet18-b32-bf16-inference-ncu.csv.gz"))
    assert bf16.totals["flops_fp16"] == pytest.approx(4.6e6, rel=0.01)  # its BFloat16 elementwise kernels'


def test_a_profile_filed_under_another_gpu_is_refused():
    """An H100's Nsight Compute CSV (every kernel "CC 9.0") listed in the config's imports under an A100 was
    summarised against the A100's roofs without a word: the aggregate job now names the file, both compute
    capabilities and the fix. The H100 and H200 (both sm_90) take it; a log that names no compute capability
    (ncu 2020's text log of the default config's A100 imports) passes as before."""
    from support import ANOUSHKA

    from rooflow.hardware.devices import default_catalogue_path, load_devices
    from rooflow.profilers.ncu import check_profiled_device

    devices = load_devices(default_catalogue_path())
    path = real("h100-rooflow/resnet50-b64-tf32-inference-ncu.csv")
    result = aggregate_ncu(path)
    assert result.compute_capabilities == ["9.0"]
    with pytest.raises(ParseError) as raised:
        check_profiled_device(result, [path], "a100-sxm4-40gb", devices["a100-sxm4-40gb"].architecture)
    assert str(raised.value) == (
        f"{path}: profiled on a GPU of compute capability 9.0, but filed under device 'a100-sxm4-40gb' (sm_80, compute "
        f"capability 8.0): list it under the device it ran on, or profile again on a100-sxm4-40gb")
    for key in ("h100-sxm5-80gb", "h200-sxm-141gb"):
        check_profiled_device(result, [path], key, devices[key].architecture)
    old = aggregate_ncu([real(f"{ANOUSHKA}/a100/vgg11/ncu-log-vgg11.txt")])
    assert old.compute_capabilities == []
    check_profiled_device(old, ["ncu-log-vgg11.txt"], "v100-sxm2-16gb", devices["v100-sxm2-16gb"].architecture)
