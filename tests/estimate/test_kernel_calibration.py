"""The kernel model and its calibrations (rooflow.estimate.kernel_calibration).

Closed forms on constructed rows, and the model against real single-op measurements: the public NeuSight
data set (../shared/fixtures/public/neusight-kernels, PROVENANCE.md there) — held one GPU out (trained on
four GPUs, the fifth predicted from its family and its datasheet) and held out shapes (a fixed 20% per
GPU), on a fixed sample of each file to stay fast; benchmarks/bench_kernel_calibration.py prints the full
tables.
"""

from __future__ import annotations

import functools
import gzip
import json
import math
import re
import statistics
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rooflow.errors import RooflowError
from rooflow.estimate import kernel_calibration as kc
from rooflow.estimate import shape_residuals
from rooflow.estimate.calibration import for_device
from rooflow.hardware.devices import gpu_model, load_devices

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT.parent / "shared" / "fixtures" / "public" / "neusight-kernels"
CATALOGUE = ROOT / "config" / "devices.yaml"
H100_CEILINGS = ROOT / "tests" / "data" / "real" / "h100-rooflow" / "ceilings-h100.json"
GPU = kc.Gpu(name="test", architecture="sm_80", sm_count=100, fp32_flops_per_second=10e12,
             dram_bytes_per_second=1e12, l2_bytes=40 * 2**20, tdp_watts=250.0)


def _rows(operator: str, **shape) -> pd.DataFrame:
    rows = pd.DataFrame([shape])
    rows["operator"] = operator
    rows["op_class"] = kc.OPERATORS[operator][0]
    return rows


# ------------------------------------------------------------------------------------------ closed forms
def test_elementwise_is_bandwidth_plus_floor():
    """add of two (B, H) tensors: 3 × 4 bytes per element at the bandwidth × efficiency, plus the add
    operator's floor; the part of the working set that stays in L2 (l2_fraction × its size) moves at
    cache_speedup × that, so a working set within it moves entirely at the cached rate."""
    calibration = kc.KernelCalibration(source="t", gpu="test", floors={"add": 12e-6}, classes={
        "elementwise": {"memory_efficiency": 0.5, "floor_seconds": 10e-6, "cache_speedup": 2.0, "l2_fraction": 0.5}})
    big = _rows("add", B=4096, H=4096)
    # GPU is an sm_80: of its 40 MB L2, the 20 MB one of its two partitions holds (PARTITIONED_L2)
    bytes_big, cached = 3 * 4 * 4096 * 4096, 0.5 * 20 * 2**20
    assert kc.predict_seconds(big, GPU, calibration)[0] == pytest.approx(
        12e-6 + (bytes_big - cached + cached / 2) / 0.5e12)
    small = _rows("relu", B=256, H=256)  # no floor of its own: the class's
    assert kc.predict_seconds(small, GPU, calibration)[0] == pytest.approx(10e-6 + 2 * 4 * 256**2 / 1e12)
    unpartitioned = replace(GPU, architecture="sm_86")  # a GA10x: one L2, all of it shared
    cached = 0.5 * 40 * 2**20
    assert kc.predict_seconds(big, unpartitioned, calibration)[0] == pytest.approx(
        12e-6 + (bytes_big - cached + cached / 2) / 0.5e12)


def test_a_measuring_runs_growth_per_call_is_read_and_priced():
    """host_drift reads the seconds each call of a run adds to the later ones from the excess over the work
    against the call's place (none where the order is unknown or the growth is within the noise); a convolution
    row is priced at its place in its run (the floor is the run's middle call's, never under 2 µs), a row that
    does not say its place at the middle call."""
    rng = np.random.default_rng(0)
    order = np.arange(2000, dtype=float)
    work = rng.uniform(1e-5, 1e-3, 2000)
    noise = rng.normal(0.0, 20e-6, 2000)
    assert kc.host_drift(order, work, work + 50e-6 + 100e-9 * order + noise) == pytest.approx(100e-9, rel=0.1)
    assert kc.host_drift(order, work, work + 50e-6 + noise) == 0.0  # flat: within the noise
    assert kc.host_drift(np.full(2000, np.nan), work, work + 100e-9 * order) == 0.0  # order unknown
    stepped = np.sort(work)  # a file that steps through its shapes: a model's misfit follows the order
    assert kc.host_drift(order, stepped, 1.3 * stepped + 50e-6 + noise) == 0.0
    params = {"efficiency": 1.0, "memory_efficiency": 1.0, "floor_seconds": 300e-6, "tile_exponent": 0.0,
              "fill_k": 0.0, "winograd_efficiency": 1.0, "drift_seconds_per_call": 100e-9, "drift_from_call": 2500.0}
    calibration = kc.KernelCalibration(source="t", gpu="test", classes={"convolution": params})
    conv = pd.concat([_rows("conv", B=1, Input_Channel=8, Output_Channel=8, Kernel_Szie=1, Input_Size=8, Stride=1,
                            Padding=0)] * 3, ignore_index=True)
    floors = kc.launch_floors(conv.assign(run_order=[0.0, 2500.0, 5000.0]), GPU, calibration)
    assert floors == pytest.approx([50e-6, 300e-6, 550e-6])
    assert kc.launch_floors(conv, GPU, calibration) == pytest.approx([300e-6] * 3)  # no place said: the middle
    early = replace(calibration, classes={"convolution": {**params, "drift_from_call": 4000.0}})
    assert kc.launch_floors(conv.assign(run_order=0.0), GPU, early) == pytest.approx([2e-6] * 3)


def test_softmax_rows_of_over_1024_elements_run_the_three_pass_kernel():
    """PyTorch's FP32 softmax holds a row of up to 1,024 elements in a warp's registers (read once, written
    once); a longer row runs cunn_SoftMaxForward, which reads it three times: block_bytes × the traffic. The data
    set's kernel names split exactly there on every GPU."""
    calibration = kc.KernelCalibration(source="t", gpu="test", floors={"softmax": 10e-6}, classes={"softmax": {
        "memory_efficiency": 0.5, "floor_seconds": 10e-6, "cache_speedup": 1.0, "l2_fraction": 0.5,
        "rows_per_sm": 1.0, "block_bytes": 1.5}})
    one_pass = kc.predict_seconds(_rows("softmax", B=16384, H=1024), GPU, calibration)[0]
    assert one_pass == pytest.approx(10e-6 + 2 * 4 * 16384 * 1024 / 0.5e12)
    three_pass = kc.predict_seconds(_rows("softmax", B=8192, H=2048), GPU, calibration)[0]  # the same bytes
    assert three_pass == pytest.approx(10e-6 + 1.5 * 2 * 4 * 16384 * 1024 / 0.5e12)
    if KERNELS.is_dir():  # the split, as the kernel names record it
        for path in (KERNELS / "softmax").glob("*.csv.gz"):
            kernels = pd.read_csv(path, usecols=["Kernel Name", "H"])
            warp = kernels["Kernel Name"].str.contains("softmax_warp_forward")
            assert warp.any() and kernels.loc[~warp, "Kernel Name"].str.contains("cunn_SoftMaxForward").all()
            assert ((kernels["H"] <= kc.SOFTMAX_WARP_MAX_ELEMENTS) == warp).all(), path.name


def test_gemm_waves_and_tiles():
    """A GEMM of whole 128×128 tiles filling the SMs exactly runs at the efficiency (long k); one more
    tile than SMs needs a second wave and takes twice as long."""
    calibration = kc.KernelCalibration(source="t", gpu="test", classes={"gemm": {
        "efficiency": 0.5, "memory_efficiency": 1.0, "floor_seconds": 0.0, "tile_exponent": 1.0, "fill_k": 0.0}})
    full = _rows("bmm", B=100, M=128, N=8192, K=128)
    flops = 2 * 100 * 128 * 128 * 8192
    assert kc.predict_seconds(full, GPU, calibration)[0] == pytest.approx(flops / 5e12)
    spill = _rows("bmm", B=101, M=128, N=8192, K=128)
    assert kc.predict_seconds(spill, GPU, calibration)[0] == pytest.approx(2 * flops / 5e12, rel=0.02)


def test_power_limit_carries_flops_per_watt():
    """A 70 W board of a family whose 250 W member sustains 80% of 10 TFLOP/s (32 GFLOP/J) runs its GEMMs
    at 80% of its own 8 TFLOP/s at a kernel's start, falling with GPU Boost's time constant τ to the 70 × 32e9
    FLOP/s its power sustains (a share s = 0.35): the time T of 10 ms of work at boost solves
    s T + (1 − s) τ (1 − exp(−T / τ)) = 10 ms; a kernel much shorter than τ runs at boost."""
    big = kc.KernelCalibration(source="t", gpu="big", classes={"gemm": {
        "efficiency": 0.8, "memory_efficiency": 1.0, "floor_seconds": 0.0, "tile_exponent": 0.0, "fill_k": 0.0}})
    small = kc.Gpu(name="small", architecture="sm_80", sm_count=40, fp32_flops_per_second=8e12,
                   dram_bytes_per_second=3e11, l2_bytes=4 * 2**20, tdp_watts=70.0)
    result = kc.family_calibration(small, {"big": big}, {"big": GPU})
    sustained = 70 * 0.8 * 10e12 / 250 / (8e12 * 0.8)
    assert result.classes["gemm"]["efficiency"] == 0.8
    assert result.classes["gemm"]["sustained"] == pytest.approx(sustained)
    assert "not measured" in result.source and result.relative_uncertainty == kc.FAMILY_UNCERTAINTY
    boost = 10e-3  # 40 tiles of 128×128 on 40 SMs, k long enough for 10 ms at 6.4 TFLOP/s
    rows = _rows("linear", B=1, M=128 * 5, N=round(boost * 8e12 * 0.8 / (2 * 640 * 1024)), K=1024)
    tau = kc.BOOST_TIME_CONSTANT_SECONDS
    at_boost = 2 * 640 * 1024 * rows["N"].iloc[0] / (8e12 * 0.8)
    seconds = kc.predict_seconds(rows, small, result)[0]
    done = sustained * seconds + (1 - sustained) * tau * (1 - math.exp(-seconds / tau))
    assert done == pytest.approx(at_boost, rel=1e-6)
    assert seconds == pytest.approx((at_boost - (1 - sustained) * tau) / sustained, rel=1e-6)  # 33 τ long
    power = {"sustained": sustained, "boost_seconds": tau}
    assert kc._throttled(np.array([tau / 100]), power)[0] == pytest.approx(tau / 100, rel=0.01)  # at boost
    assert tau < kc._throttled(np.array([tau]), power)[0] < tau / sustained
    assert np.isinf(kc._throttled(np.array([np.inf, 1.0]), power)).tolist() == [True, False]


def test_a_power_limited_board_of_an_unmeasured_family_takes_the_best_flops_per_watt_measured():
    """A 70 W board of an architecture no family lists (sm_120: none of its family measured) is held to what the
    best FLOPs per watt of all measured boards sustains — the 250 W sm_80 board's 32 GFLOP/J, not the 75 W sm_61
    board's 16 (a lower bound for a newer process) — and its calibration says so; before, it ran its GEMMs at its
    boost clock whatever its power. A 300 W board of that architecture keeps its boost clock (FULL_POWER_WATTS)."""
    params = {"memory_efficiency": 1.0, "floor_seconds": 0.0, "tile_exponent": 0.0, "fill_k": 0.0}
    big = kc.KernelCalibration(source="t", gpu="big", classes={"gemm": {"efficiency": 0.8, **params}})
    old = kc.KernelCalibration(source="t", gpu="old", classes={"gemm": {"efficiency": 0.8, "sustained": 0.5,
                                                                        **params}})
    old_gpu = replace(GPU, name="old", architecture="sm_61", fp32_flops_per_second=3e12, tdp_watts=75.0)
    new = kc.Gpu(name="new", architecture="sm_120", sm_count=40, fp32_flops_per_second=8e12,
                 dram_bytes_per_second=3e11, l2_bytes=4 * 2**20, tdp_watts=70.0)
    result = kc.family_calibration(new, {"big": big, "old": old}, {"big": GPU, "old": old_gpu})
    assert 70 * 0.8 * 10e12 / 250 > 75 * 0.8 * 0.5 * 3e12 / 75  # the sm_80 board's FLOPs per watt is the best
    assert result.classes["gemm"]["sustained"] == pytest.approx(70 * 0.8 * 10e12 / 250 / (8e12 * 0.8))
    assert ("its board power at the best FP32 FLOPs per joule measured on a board of its process node or an older "
            "one (none of its family measured" in result.source)
    full = kc.family_calibration(replace(new, tdp_watts=300.0), {"big": big, "old": old}, {"big": GPU, "old": old_gpu})
    assert "sustained" not in full.classes["gemm"] and "FLOPs per joule" not in full.source


def test_a_power_limited_board_takes_flops_per_watt_from_its_node_or_an_older_one():
    """The FLOPs per watt of a board on a newer process node than a power-limited board's bound its own from above,
    not below: a 70 W sm_75 board (12 nm) none of whose family was measured takes the 75 W sm_61 board's (16 nm),
    not the 250 W sm_80 board's (7 nm), whose would give it more; with only the newer board measured, its base
    clock (what it guarantees at its power limit), and its calibration says which."""
    params = {"memory_efficiency": 1.0, "floor_seconds": 0.0, "tile_exponent": 0.0, "fill_k": 0.0}
    big = kc.KernelCalibration(source="t", gpu="big", classes={"gemm": {"efficiency": 0.8, **params}})
    old = kc.KernelCalibration(source="t", gpu="old", classes={"gemm": {"efficiency": 0.8, "sustained": 0.5,
                                                                        **params}})
    old_gpu = replace(GPU, name="old", architecture="sm_61", fp32_flops_per_second=3e12, tdp_watts=75.0)
    turing = kc.Gpu(name="turing", architecture="sm_75", sm_count=40, fp32_flops_per_second=8e12,
                    dram_bytes_per_second=3e11, l2_bytes=4 * 2**20, tdp_watts=70.0, base_clock_fraction=0.1)
    result = kc.family_calibration(turing, {"big": big, "old": old}, {"big": GPU, "old": old_gpu})
    assert result.classes["gemm"]["sustained"] == pytest.approx(70 * 0.8 * 0.5 * 3e12 / 75 / (8e12 * 0.8))
    newer_only = kc.family_calibration(turing, {"big": big}, {"big": GPU})
    assert newer_only.classes["gemm"]["sustained"] == 0.1
    assert "no board of its process node or an older one measured" in newer_only.source


def test_power_limited_boards_convolutions_take_one_clock_whatever_their_length():
    """The same 70 W board's convolutions (no data of its own) run at 2s / (1 + s) of their boost-clock rate, the
    mean of their boost-clock and power-limited times, the same for a 0.1 ms and a 30 ms call; its GEMMs keep
    falling with GPU Boost's time constant."""
    big = kc.KernelCalibration(source="t", gpu="big", classes={op_class: {
        "efficiency": 0.8, "memory_efficiency": 1.0, "floor_seconds": 0.0, "tile_exponent": 0.0, "fill_k": 0.0}
        for op_class in ("gemm", "convolution")})
    small = kc.Gpu(name="small", architecture="sm_80", sm_count=40, fp32_flops_per_second=8e12,
                   dram_bytes_per_second=3e11, l2_bytes=4 * 2**20, tdp_watts=70.0)
    result = kc.family_calibration(small, {"big": big}, {"big": GPU})
    sustained = result.classes["gemm"]["sustained"]
    assert sustained == pytest.approx(0.35)
    convolution = result.classes["convolution"]
    assert convolution["sustained"] == pytest.approx(2 * 0.35 / 1.35) and convolution["boost_seconds"] == 0.0
    assert "convolutions at 0.52 of their boost-clock rate whatever their length" in result.source
    for boost in (1e-4, 3e-2):  # seconds of work at the boost clock: one share for both
        assert kc._throttled(np.array([boost]), convolution)[0] == pytest.approx(boost / convolution["sustained"])
    gemm = result.classes["gemm"]
    short, long = (kc._throttled(np.array([boost]), gemm)[0] / boost for boost in (1e-4, 3e-2))
    assert short < 1 / convolution["sustained"] < long  # a GEMM slows with its length, from boost to s


def test_gpu_without_data_takes_full_power_boards_and_its_gemm_for_convolution():
    """A 300 W Ampere board without data: FP32 efficiency of its family's full-power board (0.9, not the
    other family's 0.6), the DRAM efficiency of GEMV-like calls from all GPUs (median of 0.4, 0.6, 0.8),
    convolution at its GEMM efficiency (its Winograd efficiency scaled alike), launch floors per operator
    from all GPUs."""
    def calibration(name, efficiency, memory, floor):
        return kc.KernelCalibration(source="t", gpu=name, floors={"add": floor}, classes={
            "gemm": {"efficiency": efficiency, "memory_efficiency": memory},
            "convolution": {"efficiency": 0.5, "memory_efficiency": memory, "winograd_efficiency": 1.0}})
    other = kc.Gpu(name="other", architecture="sm_70", sm_count=80, fp32_flops_per_second=14e12,
                   dram_bytes_per_second=9e11, l2_bytes=6 * 2**20, tdp_watts=250.0)
    small = kc.Gpu(name="small", architecture="sm_80", sm_count=40, fp32_flops_per_second=4e12,
                   dram_bytes_per_second=3e11, l2_bytes=4 * 2**20, tdp_watts=70.0)
    measured = {"big": calibration("big", 0.9, 0.4, 20e-6), "other": calibration("other", 0.6, 0.6, 30e-6),
                "small": calibration("small", 0.3, 0.8, 40e-6)}
    target = kc.Gpu(name="target", architecture="sm_86", sm_count=100, fp32_flops_per_second=10e12,
                    dram_bytes_per_second=1e12, l2_bytes=40 * 2**20, tdp_watts=300.0)
    result = kc.family_calibration(target, measured, {"big": GPU, "other": other, "small": small})
    assert result.classes["gemm"]["efficiency"] == pytest.approx(0.9)
    assert result.classes["gemm"]["memory_efficiency"] == pytest.approx(0.6)
    assert result.classes["convolution"]["efficiency"] == pytest.approx(0.9)
    assert result.classes["convolution"]["winograd_efficiency"] == pytest.approx(0.9 / 0.5)
    assert result.floors == {"add": pytest.approx(30e-6)}


def test_gpu_without_data_takes_gemm_shapes_of_full_power_boards():
    """A GPU whose family's only measured board is power-limited (a P100 beside the 75 W P4) takes its GEMM
    tile exponent and k fill from the full-power boards of other families, whose FP32 efficiency it takes:
    a fit trades the three against each other."""
    def calibration(name, tile_exponent, fill_k):
        return kc.KernelCalibration(source="t", gpu=name, classes={"gemm": {
            "efficiency": 0.9, "memory_efficiency": 0.5, "floor_seconds": 30e-6, "tile_exponent": tile_exponent,
            "fill_k": fill_k}})
    p4 = kc.Gpu(name="p4", architecture="sm_61", sm_count=20, fp32_flops_per_second=5.7e12,
                dram_bytes_per_second=1.9e11, l2_bytes=2 * 2**20, tdp_watts=75.0)
    volta = kc.Gpu(name="volta", architecture="sm_70", sm_count=80, fp32_flops_per_second=14e12,
                   dram_bytes_per_second=9e11, l2_bytes=6 * 2**20, tdp_watts=250.0)
    measured = {"p4": calibration("p4", 0.96, 0.0), "volta": calibration("volta", 0.2, 20.0),
                "test": calibration("test", 0.3, 10.0)}
    p100 = replace(volta, name="p100", architecture="sm_60", sm_count=56)
    result = kc.family_calibration(p100, measured, {"p4": p4, "volta": volta, "test": GPU})
    assert result.classes["gemm"]["tile_exponent"] == pytest.approx(0.25)
    assert result.classes["gemm"]["fill_k"] == pytest.approx(15.0)
    # a family with a full-power board keeps its own: a P4 held out takes the P100's
    measured["p100"] = calibration("p100", 0.7, 5.0)
    result = kc.family_calibration(p4, {k: v for k, v in measured.items() if k != "p4"},
                                   {"p100": p100, "volta": volta, "test": GPU})
    assert result.classes["gemm"]["tile_exponent"] == pytest.approx(0.7)


def test_gpu_of_an_unmeasured_family_streams_gemms_as_the_kernels_it_runs():
    """Ada and Hopper run Ampere's multistage SIMT SGEMMs for FP32 (FP32_GEMM_KERNELS_OF): a GPU of that family
    with no single ops measured takes its tile exponent and k fill from the measured Ampere board, and streams
    its memory-bound GEMMs at that board's share of its own elementwise DRAM efficiency (1.05 here and on the
    real A100; Pascal and Volta fits 0.6), not at all GPUs' median (0.55 here); its FP32 efficiency
    is its family's measured roof's, its convolutions keep all GPUs' median, a measured family its own."""
    def calibration(name, memory_efficiency, tile_exponent, elementwise):
        params = {"efficiency": 0.9, "memory_efficiency": memory_efficiency, "floor_seconds": 30e-6,
                  "tile_exponent": tile_exponent, "fill_k": 10.0}
        return kc.KernelCalibration(source="t", gpu=name, classes={
            "gemm": params, "convolution": {**params, "winograd_efficiency": 1.2},
            "elementwise": {"memory_efficiency": elementwise, "floor_seconds": 20e-6, "cache_speedup": 4.0,
                            "l2_fraction": 0.5}})
    volta = kc.Gpu(name="volta", architecture="sm_70", sm_count=80, fp32_flops_per_second=14e12,
                   dram_bytes_per_second=9e11, l2_bytes=6 * 2**20, tdp_watts=250.0)
    pascal = replace(volta, name="pascal", architecture="sm_60")
    measured = {"volta": calibration("volta", 0.55, 0.2, 0.92), "pascal": calibration("pascal", 0.45, 0.8, 0.76),
                "test": calibration("test", 0.92, 0.3, 0.875)}
    gpus = {"volta": volta, "pascal": pascal, "test": GPU}
    hopper = replace(GPU, name="hopper", architecture="sm_90", sm_count=132, fp32_flops_per_second=60e12)
    roof = kc.MeasuredRoof(gpu=hopper, gemm_efficiency=0.8, source="ceilings")
    result = kc.family_calibration(hopper, measured, gpus, roofs={"hopper": roof})
    elementwise = result.classes["elementwise"]["memory_efficiency"]
    assert elementwise == pytest.approx(0.875)  # all measured GPUs' median
    assert result.classes["gemm"]["memory_efficiency"] == pytest.approx(0.92 / 0.875 * elementwise)
    assert result.classes["gemm"]["tile_exponent"] == pytest.approx(0.3)
    assert result.classes["gemm"]["efficiency"] == pytest.approx(0.8)
    assert result.classes["convolution"]["memory_efficiency"] == pytest.approx(0.55)
    assert "DRAM efficiency against its elementwise ops' from test (it runs the ampere family's" in result.source
    # a memory-bound product (k = 4): its DRAM time at that efficiency
    rows = pd.DataFrame([{"operator": "bmm", "op_class": "gemm", "B": 64, "M": 4096, "N": 4, "K": 4096}])
    moved = 4 * 64 * (4096 * 4 + 4 * 4096 + 4096 * 4096)
    assert kc.predict_seconds(rows, hopper, result)[0] - 30e-6 == pytest.approx(moved / (1e12 * 0.92), rel=0.01)
    # the same share of a board's own measured elementwise rate (its ceilings' triad)
    measured_roof = replace(roof, dram_efficiency=0.7)
    slower = kc.family_calibration(hopper, measured, gpus, roofs={"hopper": measured_roof})
    assert slower.classes["gemm"]["memory_efficiency"] == pytest.approx(0.92 / 0.875 * 0.7)
    # a GPU of a measured family runs its own family's kernels: all measured GPUs' median, as before
    turing = replace(volta, name="turing", architecture="sm_75")
    assert kc.family_calibration(turing, measured, gpus).classes["gemm"]["memory_efficiency"] == pytest.approx(0.55)


def test_gpu_without_data_keeps_a_working_set_in_at_most_its_l2():
    """Donors whose own fits keep more than their whole L2 of a working set (the P100's, V100's: 2–3 L2s)
    give a GPU without data at most its own shared L2; a GPU of a measured architecture takes its sibling's
    fraction whole, and a donor's own fraction is its fit's."""
    def calibration(name, l2_fraction):
        return kc.KernelCalibration(source="t", gpu=name, classes={
            "elementwise": {"memory_efficiency": 0.8, "floor_seconds": 20e-6, "cache_speedup": 4.0,
                            "l2_fraction": l2_fraction}})
    volta = kc.Gpu(name="volta", architecture="sm_70", sm_count=80, fp32_flops_per_second=14e12,
                   dram_bytes_per_second=9e11, l2_bytes=6 * 2**20, tdp_watts=250.0)
    pascal = replace(volta, name="pascal", architecture="sm_60")
    measured = {"volta": calibration("volta", 2.3), "pascal": calibration("pascal", 3.0), "test": calibration("test", 0.9)}
    gpus = {"volta": volta, "pascal": pascal, "test": GPU}
    ada = replace(GPU, name="ada", architecture="sm_89")
    assert kc.family_calibration(ada, measured, gpus).classes["elementwise"]["l2_fraction"] == 1.0  # median 2.3
    sibling = replace(GPU, name="sibling", l2_bytes=80 * 2**20)
    assert kc.family_calibration(sibling, measured, gpus).classes["elementwise"]["l2_fraction"] == 0.9


# ------------------------------------------------------------------------------------------ real data
needs_data = pytest.mark.skipif(not KERNELS.is_dir(), reason="shared fixtures (../shared) not present")


@pytest.fixture(scope="module")
def sample():
    data = kc.load_measurements(KERNELS)
    # a fixed sample of each file: every GPU × operator, 250 rows
    return data.groupby(["gpu", "operator"]).sample(frac=1, random_state=0).groupby(["gpu", "operator"]).head(250)


@needs_data
def test_the_p100s_memory_bound_misses_are_its_hosts_launch_floor(sample):
    """Held one out, the P100's elementwise and softmax calls miss (55% and 18% within ±25% on the full data) by
    its measuring host's launch floor (its fastest add, mul, ReLU and softmax: 41-56 µs; the other GPUs' 25-40
    µs), not by its kernels: with that
    host's floors they are 98% and 88% (full data). A convolution's floor is its host's too, once its growth over
    the measuring run is priced (kc.host_drift): the fits had put it at 213-470 µs, above the fastest calls
    (66-108 µs), the run's middle call's; with the host's floor and growth the P100's convolutions hold (90% on the
    full data; 37% with a floor from the fastest calls, before the growth was priced)."""
    gpus = kc.load_dataset_gpus(KERNELS)
    fitted = kc.fit_each(sample, gpus)
    table = kc.held_one_out(sample, gpus, calibrations=fitted).set_index(["gpu", "op_class"])["within"]
    host = kc.held_one_out(sample, gpus, host_floors=True, calibrations=fitted).set_index(["gpu", "op_class"])["within"]
    p100 = "Tesla P100-PCIE-16GB"
    for op_class in ("elementwise", "softmax"):
        assert table[(p100, op_class)] < 0.7 and host[(p100, op_class)] >= 0.85, (op_class, table, host)
    assert host[(p100, "convolution")] >= 0.7 and host[(p100, "convolution")] > table[(p100, "convolution")] - 0.05


@needs_data
def test_held_one_gpu_out(sample):
    """Train on four GPUs, predict the fifth. Pinned at what the model reaches (the issue asks 80% within
    ±25% per class; see the report): the memory-bound classes on every GPU but the P100 (whose measuring
    host's launch floor is 1.5× the others'), and the classes/GPUs where it falls short."""
    table = kc.held_one_out(sample, kc.load_dataset_gpus(KERNELS)).set_index(["gpu", "op_class"])
    within = table["within"]
    assert set(table.index.get_level_values("gpu")) == set(kc.DATASET_GPUS)
    others = within.drop("Tesla P100-PCIE-16GB", level="gpu")
    assert others.xs("elementwise", level="op_class").min() >= 0.85
    assert others.xs("softmax", level="op_class").min() >= 0.8
    assert within.xs("normalization", level="op_class").min() >= 0.8
    assert within.xs("gemm", level="op_class").mean() >= 0.55
    assert within.xs("convolution", level="op_class").mean() >= 0.7  # 0.755 (0.45 before kc.host_drift)
    # at its GEMM efficiency, and the other GPUs' convolution shapes' residuals, each less its median
    # (cuDNN's picks by shape carry across architectures). 0.70 on this sample before the base-clock floor of
    # the power limit: the T4's fit on this sample puts the V100's power-derived clock under its base clock, so
    # the floor raises it (0.67 here; 85% of the full data's 4,958 convolutions with and without the floor)
    assert within[("Tesla V100-PCIE-32GB", "convolution")] >= 0.65
    # Pascal's nn.Linear GEMMs run small tiles only (LINEAR_TILES): its GEMM efficiency, quoted at 128×128
    # tiles, is its convolutions' too (0.26 and 0.25 on this sample without)
    assert within[("Tesla P100-PCIE-16GB", "convolution")] >= 0.65
    # the P4's power limit at its P100 donor's FLOPs per watt would hold it to half its boost clock; its base
    # clock (886 of 1,114 MHz) is the floor (0.48 and 0.43 on this sample without the floor)
    assert within[("Tesla P4", "convolution")] >= 0.7
    # the power limit carried from the V100 (same family), and cuBLAS's picks by shape from its family's
    # full-power board (the P100's maxwell_sgemm shapes for the P4, the V100's volta_sgemm ones for the T4):
    # 0.51 and 0.70 on this sample without them
    assert within[("Tesla P4", "gemm")] >= 0.58
    assert within[("Tesla T4", "gemm")] >= 0.75
    assert within[("Tesla V100-PCIE-32GB", "gemm")] >= 0.85  # efficiency of the full-power boards
    # the A100's L2 is two partitions, so half of it holds a working set all SMs stream (PARTITIONED_L2):
    # 0.86 / 0.84 / 0.92 on this sample with its whole L2, the other GPUs' L2 fraction carried over
    assert within[("NVIDIA A100-PCIE-40GB", "elementwise")] >= 0.95
    # and its softmax rows of over 1,024 elements run a three-pass kernel (SOFTMAX_WARP_MAX_ELEMENTS): 0.90 with
    # one kernel for every row
    assert within[("NVIDIA A100-PCIE-40GB", "softmax")] >= 0.95
    # and at most its whole L2 carried from GPUs whose own fits keep more: 0.92 on this sample (0.90 without)
    assert within[("Tesla T4", "softmax")] >= 0.91
    assert within[("NVIDIA A100-PCIE-40GB", "normalization")] >= 0.94
    # cuBLAS runs an Ampere batched GEMM in 128×128 tiles whatever its shape (BATCHED_TILES): 64% without it
    assert within[("NVIDIA A100-PCIE-40GB", "gemm")] >= 0.75
    assert table["median_abs_error"].median() < 0.2


# The held-one-GPU-out table on every measured call (249,000; about 40 s on 2 cores), each cell pinned at what
# the model reaches, rounded down to a point (2026-11-27; the P4's GEMMs and the V100's convolutions
# 2026-11-28, once power-limited boards' fits separated their power limit; the P100's GEMMs 2026-11-28, with the P4's
# GEMM residuals: its generation's; the P100's and P4's GEMMs 2026-11-28, with their operands' re-reads; the
# convolutions 2026-11-29, once each measuring run's growth per call was priced (kc.host_drift): the P100 0.85 ->
# 0.91, P4 0.84 -> 0.86, T4 0.67 -> 0.69, and the V100 0.85 -> 0.82: its first fifth of calls, 0.85 within before,
# 0.65 now, at a median predicted/measured of 0.79 (its kernels priced too fast by the T4's Winograd share, 1.64x its
# GEMM efficiency against the V100's own 1.07, which the flat floor of the run's middle call had hidden under the
# first calls' overhead). Re-pinned 2026-11-29 (later), once a convolution's implicit-GEMM parameters were read from
# the calls that ran implicit GEMM (kc._implicit_gemm_parameters), a trade: P100 0.91 -> 0.94 and V100 0.82 -> 0.82,
# but P4 0.86 -> 0.82 and T4 0.69 -> 0.67 (their fused-Winograd calls priced by the non-fused path at the lower
# memory efficiency the refits give), for the families held out whole (below: Pascal's 0.44-0.47 -> 0.77) and the
# T4's published ResNet-50 steps (0.69-0.78 -> 0.85-0.94 measured/predicted). The 250-call sample above is cheaper
# and noisier: a change that moves a sample cell by one row may leave the full data's untouched
# (benchmarks/README.md). Re-pinned 2026-11-30, once cuBLAS's tiles were laid the way round its kernels' grids
# say (kc._rows_by_columns: a name's first number tiles the output's columns), a GPU without data took its family's
# GEMV rate and no power-limited board's GEMM residuals: GEMM P100 0.74 -> 0.85, convolution P4 0.82 -> 0.83 and
# V100 0.83 -> 0.84, but GEMM A100 0.83 -> 0.81 (the P100's refitted tile exponent and k fill are half of its
# donors' median) and P4 0.72 -> 0.71 (benchmarks/README.md, "cuBLAS tiles the output's columns first"). Re-pinned
# once the P4 was read as the 20 SMs its launches report (kc.launched_sm_count; its config says 40): convolution
# P100 0.949 -> 0.960, P4 0.832 -> 0.850, V100 0.845 -> 0.847, softmax P4 0.994 -> 0.999, GEMM P4 0.707 -> 0.701.
# Re-pinned 2026-12-01, once a power-limited board's clock fell with GPU Boost's time constant instead of as a step
# at its end (kc._throttled): convolution T4 0.680 -> 0.711, V100 0.847 -> 0.843, GEMM T4 0.746 -> 0.764, P4 0.701 ->
# 0.712. Re-pinned 2026-12-01 (later), once a power-limited board's convolutions ran at one clock whatever their
# length (kc.random_order_clock: the data set measured them in random shape order, its GEMMs in sweeps): convolution
# T4 0.711 -> 0.893 and V100 0.843 -> 0.856 (held out, it takes a power limit from the T4's FLOPs per joule), a trade
# with P4 0.850 -> 0.836 (its longest direct convolutions, 10-30 ms, measured 1.17x the prediction: a shape's own
# calls back to back lower its clock, which one clock per run does not price). Re-pinned 2026-12-04, once a GEMM's
# re-reads beyond the L2 could cost up to 8x the tile's no-reuse traffic (Pascal's nn.Linear SGEMMs,
# maxwell_sgemm_*_tn, moved 0.14-0.22 bytes per FLOP on both the P4 and the P100: the P4's fit sat at the old bound,
# 1.0) and a held-out board took only its own generation's value, a value its calls do not pin (kc._identified: the
# A100's) none: GEMM P4 0.712 -> 0.760, P100 0.853 -> 0.856, the rest unchanged. Re-pinned 2026-12-05, once a board
# took its family's GEMM residuals where the same waves fall on its SMs (shape_residuals.in_waves_of): GEMM T4 0.764
# -> 0.801, P4 0.760 -> 0.794, the rest unchanged. Re-pinned 2026-12-05 (later), once nn.Linear's weights streamed
# at a rate of their own where a board's calls pin one and its family's boards lend it (kc's weight_efficiency:
# Pascal's P100 0.18 and P4 0.17 of DRAM): GEMM P100 0.856 -> 0.861, P4 0.794 -> 0.800 (19,362 of 24,202 calls: one
# over the issue's 80%), the rest unchanged.
FULL_DATA_WITHIN = {
    "NVIDIA A100-PCIE-40GB": {"gemm": 0.81, "elementwise": 0.97, "normalization": 0.94, "softmax": 0.96},
    "Tesla P100-PCIE-16GB": {"convolution": 0.96, "gemm": 0.86, "elementwise": 0.55, "normalization": 0.84,
                             "softmax": 0.18},
    "Tesla P4": {"convolution": 0.83, "gemm": 0.80, "elementwise": 0.99, "normalization": 0.90, "softmax": 0.99},
    "Tesla T4": {"convolution": 0.89, "gemm": 0.80, "elementwise": 0.99, "normalization": 0.87, "softmax": 0.98},
    "Tesla V100-PCIE-32GB": {"convolution": 0.85, "gemm": 0.86, "elementwise": 1.0, "normalization": 0.86,
                             "softmax": 0.97},
}
# Held one family out (the GPU's whole architecture family out with it: every parameter all other families'), the
# case of a GPU of a family nothing measured (the L4) and of the A100's convolutions, pinned 2026-11-29 once a
# convolution's implicit-GEMM parameters were read from the calls that ran implicit GEMM: its convolutions went P100
# 0.44 -> 0.77, P4 0.47 -> 0.77, T4 0.74 -> 0.72, V100 0.60 -> 0.60 (benchmarks/README.md). Re-pinned 2026-11-30
# with the tiles the way round (above): GEMM P100 0.60 -> 0.86, P4 0.46 -> 0.56, but T4 0.43 -> 0.36 (no board of its
# family, so no power limit priced, and a higher efficiency from the P100) and V100 0.85 -> 0.84, A100 0.83 -> 0.81;
# convolution T4 0.72 -> 0.70, V100 0.60 -> 0.62. Re-pinned with the P4's 20 SMs (above): convolution P4 0.779 ->
# 0.765 and T4 0.703 -> 0.699 (the medians of the other families' fits, the P4's among them, move), V100 0.621 ->
# 0.623, GEMM P4 0.561 -> 0.565; a fact of the data is not traded for half a point. Re-pinned 2026-12-01 (latest),
# once a power-limited board of a family nothing measured took the best FLOPs per watt of all measured boards
# (the A100's, for the T4): T4 convolution 0.699 -> 0.872, GEMM 0.358 -> 0.465 (the P4's stays unlimited: the
# A100's FLOPs per watt sustain its boost clock). Re-pinned 2026-12-02, once those FLOPs per watt came only from
# boards of its process node or an older one (kc.FAMILY_NODES: the A100's 7 nm bounds a 12 nm T4 from above, not
# below) and a board without any took its base clock: GEMM T4 0.465 -> 0.614 (sustained 0.61 -> 0.50 of its boost
# clock; its own fit 0.42), P4 0.565 -> 0.660 (its base clock, 0.80, where it ran unlimited), convolution P4
# 0.765 -> 0.787, but T4 0.872 -> 0.838: its convolutions at 0.67 of their boost clock, where its own fit puts them
# at 0.68 of the V100's, score 84% with the other hosts' launch floors and 96% with its own host's (94% before:
# FAMILY_OUT_HOST_FLOORS_WITHIN).
FAMILY_OUT_WITHIN = {
    "NVIDIA A100-PCIE-40GB": {"gemm": 0.81, "elementwise": 0.97, "normalization": 0.94, "softmax": 0.96},
    "Tesla P100-PCIE-16GB": {"convolution": 0.77, "gemm": 0.85, "elementwise": 0.54, "normalization": 0.79,
                             "softmax": 0.18},
    "Tesla P4": {"convolution": 0.78, "gemm": 0.66, "elementwise": 0.99, "normalization": 0.85, "softmax": 0.99},
    "Tesla T4": {"convolution": 0.83, "gemm": 0.61, "elementwise": 0.99, "normalization": 0.86, "softmax": 0.91},
    "Tesla V100-PCIE-32GB": {"convolution": 0.62, "gemm": 0.83, "elementwise": 0.99, "normalization": 0.87,
                             "softmax": 0.91},
}

# The same with the launch floors of the host that measured the held-out GPU (kc.with_host_floors): the power-limited
# boards' convolutions and GEMMs apart from the other hosts' floors
FAMILY_OUT_HOST_FLOORS_WITHIN = {"Tesla P4": {"convolution": 0.82, "gemm": 0.67},
                                 "Tesla T4": {"convolution": 0.95, "gemm": 0.61}}


def _short_of(table: pd.DataFrame, pinned: dict) -> dict:
    """The cells of a held-out table (per GPU and class: ``within``) under their ``pinned`` value."""
    cells = table.set_index(["gpu", "op_class"])["within"]
    assert set(cells.index) == {(gpu, op_class) for gpu, row in pinned.items() for op_class in row}
    return {cell: round(float(value), 4) for cell, value in cells.items() if value < pinned[cell[0]][cell[1]]}


def test_a_held_out_table_says_how_many_calls_its_range_holds():
    """Each GPU's range (what its predictions print: ±25% measured, ±40% not) follows its name, and each class
    the fraction of calls inside it, beside the fraction within ±25%."""
    rows = pd.DataFrame({"op_class": ["gemm"] * 4, "seconds": [1.0, 1.0, 1.0, 1.0]})
    predicted = np.array([1.1, 1.3, 0.65, 2.0])  # errors 10%, 30%, 35%, 100%
    scores = kc._score(rows, predicted, "GPU X", 0.25, kc.FAMILY_UNCERTAINTY)
    assert scores == [{"gpu": "GPU X", "op_class": "gemm", "rows": 4, "within": 0.25,
                       "median_abs_error": pytest.approx(0.325), "range": 0.4, "inside_range": 0.75}]
    text = kc.format_table(pd.DataFrame(scores))
    line = next(line for line in text.splitlines() if line.startswith("GPU X"))
    assert line.split()[:6] == ["GPU", "X", "(±40%)", "-", "25%", "75%"]
    assert "in-range" in text.splitlines()[1] and "±40%" in text.splitlines()[-1]
    # without a range (a caller that has none), the table keeps its three columns
    plain = kc.format_table(pd.DataFrame(kc._score(rows, predicted, "GPU X", 0.25)))
    assert "in-range" not in plain and "(±" not in plain


@functools.lru_cache(maxsize=1)
def _full_data_fits():
    """The data set, its GPUs and each GPU's own calibration fitted on all its calls (about 30 s): shared."""
    data = kc.load_measurements(KERNELS)
    gpus = kc.load_dataset_gpus(KERNELS)
    return data, gpus, kc.fit_each(data, gpus)


@needs_data
@pytest.mark.slow
def test_a_gpu_without_convolutions_takes_other_boards_gemm_efficiency():
    """The A100's case, on the four boards that ran convolutions: each given its own calibration but its
    convolutions, and only the other families' calibrations (as the A100 has no sibling that ran any). Its
    convolutions priced at the other architectures' full-power boards' GEMM efficiency (as a GPU of an unmeasured
    architecture takes it) are within ±25%: P100 77.8%, P4 78.7%, T4 86.6%, V100 62.3%; at its own GEMMs' (the rule
    before 2026-12-01): 58.7%, 77.6%, 39.6%, 54.2% (the P4's and T4's at one clock per run, kc.random_order_clock).
    A board's cuDNN and cuBLAS efficiencies differ by board (its own fits: the P100's convolutions 0.83 of its
    GEMMs', the V100's 1.10)."""
    data, gpus, fitted = _full_data_fits()
    within = {}
    for name in ("Tesla P100-PCIE-16GB", "Tesla P4", "Tesla T4", "Tesla V100-PCIE-32GB"):
        rows = data[(data["gpu"] == name) & (data["op_class"] == "convolution")]
        own = fitted[name]
        without = replace(own, classes={c: p for c, p in own.classes.items() if c != "convolution"},
                          shapes={c: r for c, r in own.shapes.items() if c != "convolution"})
        others = {o: cal for o, cal in fitted.items() if gpus[o].family != gpus[name].family}
        completed = kc._completed(without, gpus[name], {**others, name: without}, gpus, {})
        assert "the other architectures' full-power boards' GEMMs', not its own" in completed.source
        at_own = dict(completed.classes["convolution"])
        kc._set_efficiency(at_own, own.classes["gemm"]["efficiency"])
        measured = rows["seconds"].to_numpy(float)
        within[name] = [np.mean(np.abs(kc.predict_seconds(rows, gpus[name], calibration) / measured - 1) <= 0.25)
                        for calibration in (completed, replace(completed, classes={**completed.classes,
                                                                                    "convolution": at_own}))]
    within = {name.split()[1].split("-")[0]: pair for name, pair in within.items()}  # "P100", "P4", ...
    rule = {board: round(float(pair[0]), 3) for board, pair in within.items()}
    assert rule == pytest.approx({"P100": 0.778, "P4": 0.787, "T4": 0.866, "V100": 0.623}, abs=0.01)
    gains = {board: pair[0] - pair[1] for board, pair in within.items()}
    assert gains["P100"] > 0.15 and gains["T4"] > 0.4 and gains["V100"] > 0.05 and gains["P4"] > -0.01


@needs_data
@pytest.mark.slow
def test_power_limited_boards_convolutions_ran_at_one_clock_between_their_bounds():
    """What kc.random_order_clock stands on, read from the data set. Its GEMM files ran shapes in sweeps (each
    call's length correlated 0.95 with the previous call's) and its convolutions in random order (0.02-0.03).
    On the two power-limited boards (P4 75 W, T4 70 W), fitted on their own calls with no power limit on either,
    the GEMMs' measured/predicted grows with the call's length (the T4's from 1.0 under 0.3 ms to 1.8 beyond
    30 ms), the convolutions' stays flat (0.98-1.01 from 0.3 to 30 ms): one clock per run. That clock lies
    between the boards' bounds, their boost clock and the share their GEMMs sustain: the P4's convolutions at 0.87
    of its full-power sibling's (the P100's) efficiency, the T4's at 0.68 of the V100's, where the mean of the two
    times (2s / (1 + s), s their GEMMs' fitted share, 0.77 and 0.55) gives 0.87 and 0.71."""
    data, gpus, fitted = _full_data_fits()
    order = {}
    for (name, operator), rows in data.groupby(["gpu", "operator"]):
        if operator in ("linear", "bmm", "conv"):
            seconds = np.log(rows.sort_values("run_order")["seconds"].to_numpy(float))
            order[(name, operator)] = np.corrcoef(seconds[1:], seconds[:-1])[0, 1]
    assert min(value for (_, operator), value in order.items() if operator != "conv") > 0.9
    assert max(value for (_, operator), value in order.items() if operator == "conv") < 0.1
    bins = [3e-4, 1e-3, 3e-3, 1e-2, 3e-2]
    for name, sibling in (("Tesla P4", "Tesla P100-PCIE-16GB"), ("Tesla T4", "Tesla V100-PCIE-32GB")):
        own = fitted[name]
        unlimited = replace(own, classes={**own.classes, "gemm": kc._without_power(own.classes["gemm"])})
        rows = data[data["gpu"] == name]
        ratio = rows["seconds"].to_numpy(float) / kc.predict_seconds(rows, gpus[name], unlimited)
        by_length = pd.Series(ratio).groupby([rows["op_class"].to_numpy(), np.digitize(rows["seconds"], bins)]).median()
        convolution = by_length["convolution"].loc[1:4]  # 0.3-30 ms
        assert convolution.between(0.95, 1.05).all(), (name, convolution.round(3).to_dict())
        assert by_length["gemm"].loc[5] > 1.1 * by_length["gemm"].loc[0], name  # beyond 30 ms against under 0.3 ms
        level = own.classes["convolution"]["efficiency"] / fitted[sibling].classes["convolution"]["efficiency"]
        assert kc.random_order_clock(own.classes["gemm"]["sustained"]) == pytest.approx(level, rel=0.05), name


@needs_data
def test_the_p4s_linear_kernels_are_slower_than_its_clock_and_its_bmm_say():
    """What the README says of the P4's GEMM misses, read from the data set: on the shapes both boards ran, the P4
    takes 2.2-2.35x the P100's time for its bmm calls of over 1 ms (maxwell_sgemm_128x64_nn on both: its 1.67x lower
    FP32 peak at its base clock's 0.795 gives 2.1x) but 3.4-4.0x for its nn.Linear calls that ran
    maxwell_sgemm_64x64_tn on both boards and 2.8-3.2x for those that ran 32x128_tn on both — a slowdown of the same
    kernels on the P4 alone (unexplained). And cuBLAS picks 64x64_tn on the P4 for 59% of the nn.Linear shapes, on
    the P100 for 29%: where the P4 ran it and the P100 32x128_tn, 5.05x — the P100's measured shapes, which a
    P4 without data of its own takes, carry the wrong kernel there. The same-kernel slowdown grows with the
    reduction depth: 32x128_tn 2.27x at 256 deep or less (bmm's 2.26x), 3.36x beyond 1,024."""
    def paired(operator):
        p4, p100 = (pd.read_csv(KERNELS / operator / f"{name}.csv.gz", usecols=["Latency", "Kernel Name", "B", "M",
                                                                                    "N", "K"])
                    for name in ("Tesla_P4", "Tesla_P100-PCIE-16GB"))
        both = p4.merge(p100, on=["B", "M", "N", "K"], suffixes=("_p4", "_p100"))
        return both[both["Latency_p100"] > 1.0]  # ms

    bmm = paired("bmm")
    bmm = bmm[bmm["Kernel Name_p4"].str.contains("128x64") & bmm["Kernel Name_p100"].str.contains("128x64")]
    linear = paired("linear")
    ratio = linear["Latency_p4"] / linear["Latency_p100"]
    p4, p100 = linear["Kernel Name_p4"], linear["Kernel Name_p100"]
    both_wide = p4.str.contains("64x64_tn") & p100.str.contains("64x64_tn")
    both_narrow = p4.str.contains("32x128_tn") & p100.str.contains("32x128_tn")
    assert len(bmm) > 1000 and both_wide.sum() > 500
    bmm_ratio = float((bmm["Latency_p4"] / bmm["Latency_p100"]).median())
    linear_ratio = float(ratio[both_wide].median())
    assert 2.1 < bmm_ratio < 2.4 and 3.3 < linear_ratio < 4.2, (bmm_ratio, linear_ratio)
    narrow_ratio = float(ratio[both_narrow].median())
    picked_apart = float(ratio[p4.str.contains("64x64_tn") & p100.str.contains("32x128_tn")].median())
    assert 2.8 < narrow_ratio < 3.2 and picked_apart > 4.5, (narrow_ratio, picked_apart)
    # the same kernel's slowdown grows with the reduction depth (nn.Linear's in_features, N here): 32x128_tn as bmm
    # at 256 deep or less (bmm's shapes are at most 1,025 deep), 1.5x that beyond 1,024
    shallow, deep = (float(ratio[both_narrow & depth].median()) for depth in (linear["N"] <= 256, linear["N"] > 1024))
    assert shallow < 2.4 and deep > 3.2, (shallow, deep)
    share_64x64 = {name: float(pd.read_csv(KERNELS / "linear" / f"{name}.csv.gz", usecols=["Kernel Name"])
                               ["Kernel Name"].str.contains("64x64_tn").mean())
                   for name in ("Tesla_P4", "Tesla_P100-PCIE-16GB")}
    assert share_64x64["Tesla_P4"] > 0.55 and share_64x64["Tesla_P100-PCIE-16GB"] < 0.32, share_64x64


@needs_data
@pytest.mark.slow
def test_held_out_boards_read_their_siblings_gemm_residuals_at_the_same_sm_fill():
    """The T4 (40 SMs) and the P4 (20) held out take the V100's (80) and the P100's (56) GEMM residuals where a call
    fills their SMs as the measured shape filled the sibling's (shape_residuals.in_waves_of; the shift is the ratio of
    SM counts, nothing fitted). Within ±25%, torch.bmm T4 0.750 -> 0.791, P4 0.849 -> 0.891, nn.Linear T4 0.801 ->
    0.830, P4 0.516 -> 0.524. Not cuBLAS's picks: the P4 and the P100 ran one bmm kernel for over 99% of their calls
    (what the residuals carry is the model's miss by how full the SMs are; benchmarks/README.md)."""
    data, gpus, fitted = _full_data_fits()
    for name, sibling in (("Tesla T4", "Tesla V100-PCIE-32GB"), ("Tesla P4", "Tesla P100-PCIE-16GB")):
        rows = data[(data["gpu"] == name) & (data["op_class"] == "gemm")]
        held_out = kc.family_calibration(gpus[name], {o: c for o, c in fitted.items() if o != name}, gpus)
        as_measured = replace(held_out, shapes={**held_out.shapes, "gemm": shape_residuals.pooled(
            [fitted[sibling].shapes["gemm"]])})
        within = {}
        for label, calibration in (("waves", held_out), ("measured", as_measured)):
            error = np.abs(kc.predict_seconds(rows, gpus[name], calibration) / rows["seconds"].to_numpy() - 1)
            within[label] = {op: float(np.mean(error[(rows["operator"] == op).to_numpy()] <= 0.25))
                             for op in ("bmm", "linear")}
        assert within["waves"]["bmm"] >= within["measured"]["bmm"] + 0.035, (name, within)
        assert within["waves"]["linear"] >= within["measured"]["linear"], (name, within)
    for board in ("Tesla_P4", "Tesla_P100-PCIE-16GB"):
        kernels = pd.read_csv(KERNELS / "bmm" / f"{board}.csv.gz", usecols=["Kernel Name"])["Kernel Name"]
        assert (kernels == "maxwell_sgemm_128x64_nn").mean() > 0.99


@needs_data
@pytest.mark.slow
def test_held_one_gpu_out_on_the_full_data():
    """Train on four GPUs, predict every call of the fifth: each cell at least what the model reached when it was
    pinned (the issue asks 80% within ±25%: met by 22 of its 24 cells; the two others, the P100's host floors, are
    named in benchmarks/README.md).
    Then with the fifth's whole family held out too (FAMILY_OUT_WITHIN)."""
    data, gpus, fitted = _full_data_fits()
    table = kc.held_one_out(data, gpus, calibrations=fitted)
    assert not _short_of(table, FULL_DATA_WITHIN), _short_of(table, FULL_DATA_WITHIN)
    assert (table["within"] >= 0.8).sum() >= 22
    # the range a GPU without data prints (±40%) holds at least 90% of its calls in every cell but the P100's
    # elementwise and softmax calls, which are mostly its measuring host's launch floor (1.65x the others')
    assert set(table["range"]) == {kc.FAMILY_UNCERTAINTY}
    # (the P4's GEMMs: 90% before cuBLAS's tiles were laid the way round, kc._rows_by_columns, 86% then, 91% since
    # its nn.Linear calls' re-reads may cost several times their tiles' traffic, as its generation's P100 fits them;
    # 92% once their weights streamed at their kernels' own rate)
    outside = table[table["inside_range"] < 0.9].set_index(["gpu", "op_class"])["inside_range"]
    assert set(outside.index) == {("Tesla P100-PCIE-16GB", "elementwise"), ("Tesla P100-PCIE-16GB", "softmax")}
    assert outside.min() >= 0.5
    family_out = kc.held_one_out(data, gpus, calibrations=fitted, whole_family=True)
    assert not _short_of(family_out, FAMILY_OUT_WITHIN), _short_of(family_out, FAMILY_OUT_WITHIN)
    host_floors = kc.held_one_out(data[data["gpu"].isin(FAMILY_OUT_HOST_FLOORS_WITHIN)], gpus, host_floors=True,
                                  calibrations=fitted, whole_family=True)
    host_floors = host_floors[host_floors["op_class"].isin(["convolution", "gemm"])]
    assert not _short_of(host_floors, FAMILY_OUT_HOST_FLOORS_WITHIN), _short_of(host_floors,
                                                                                FAMILY_OUT_HOST_FLOORS_WITHIN)


@needs_data
def test_fits_beyond_the_l2_are_the_measuring_hosts():
    """Elementwise calls of 2-4 L2s of working set take longer than the smallest calls by their DRAM time on
    the A100, P4 and T4 (host floors 26 µs: additive), but by 0.12 and 0.30 of it on the P100 and V100 (floors
    45 and 32 µs): their hosts' return after the launch overlaps the kernel. Their fits read that as 2-3 L2s
    at the cached rate, which family_calibration does not carry to another GPU (at most one L2)."""
    data = kc.load_measurements(KERNELS)
    gpus = kc.load_dataset_gpus(KERNELS)
    extra = {}
    for name, gpu in gpus.items():
        rows = data[(data["gpu"] == name) & (data["operator"].isin(["add", "mul", "div"]))]
        working_set = 12 * rows["B"] * rows["H"]  # two read, one written, FP32
        plateau = (working_set > 2 * gpu.l2_bytes) & (working_set <= 4 * gpu.l2_bytes)
        smallest = rows.loc[working_set < gpu.l2_bytes / 16, "seconds"].median()
        dram = (working_set[plateau] / gpu.dram_bytes_per_second).median()
        extra[name] = (rows.loc[plateau, "seconds"].median() - smallest) / dram
    for name in ("NVIDIA A100-PCIE-40GB", "Tesla P4", "Tesla T4"):
        assert extra[name] == pytest.approx(1.0, abs=0.1)
    assert extra["Tesla P100-PCIE-16GB"] < 0.2 and extra["Tesla V100-PCIE-32GB"] < 0.4
    calibrations, _, _, _ = kc.load_shipped()
    assert calibrations["Tesla P100-PCIE-16GB"].classes["elementwise"]["l2_fraction"] > 2
    assert calibrations["Tesla V100-PCIE-32GB"].classes["elementwise"]["l2_fraction"] > 2


@needs_data
def test_held_out_shapes(sample):
    """Per GPU, fit on its rows but a fixed random 20% of each operator's shapes and predict those."""
    table = kc.held_out_shapes(sample, kc.load_dataset_gpus(KERNELS)).set_index(["gpu", "op_class"])
    within = table["within"]
    assert set(table.index.get_level_values("gpu")) == set(kc.DATASET_GPUS)
    assert within.xs("elementwise", level="op_class").min() >= 0.95
    assert within.xs("normalization", level="op_class").min() >= 0.85
    assert within.xs("softmax", level="op_class").min() >= 0.8
    # the model alone reached 0.65 and 0.7: each GPU's measured shapes' residuals (its library's kernel
    # picks) carry the rest (rooflow.estimate.shape_residuals)
    assert within.xs("gemm", level="op_class").mean() >= 0.8
    # 0.93 on this sample (0.75 before each run's growth per call was priced: kc.host_drift)
    assert within.xs("convolution", level="op_class").mean() >= 0.9


@needs_data
def test_fitted_on_as_few_shapes_as_a_user_measures(sample):
    """Per GPU, fit on a few shapes per operator (what `rooflow ceilings --single-ops` measures on a user's GPU,
    scaled to the sample: 100 of each GEMM and convolution operator, 20 of the others) and predict the rest."""
    counts = {operator: 100 if operator in ("conv", "linear", "bmm") else 20 for operator in kc.OPERATORS}
    table = kc.fitted_on_few(sample, kc.load_dataset_gpus(KERNELS), counts).set_index(["gpu", "op_class"])
    assert table.loc[("Tesla T4", "gemm"), "rows"] == 2 * 250 - 2 * 100  # the fitted shapes are not scored
    within = table["within"]
    assert set(table.index.get_level_values("gpu")) == set(kc.DATASET_GPUS)
    assert within.xs("elementwise", level="op_class").min() >= 0.95  # memory-bound ops need few shapes
    # 0.79 (P100) and 0.87 (A100) with one softmax kernel for every row length (SOFTMAX_WARP_MAX_ELEMENTS)
    assert within.xs("softmax", level="op_class").min() >= 0.9
    assert within.xs("gemm", level="op_class").mean() >= 0.8  # 0.84 on this sample
    assert within.xs("convolution", level="op_class").mean() >= 0.85  # 0.87 (0.80 before kc.host_drift)


@needs_data
def test_shipped_calibrations_are_fits_of_the_data(sample):
    """kernels.json holds a calibration per measured GPU — the data set's five and rooflow's own H200 single ops —
    named by its source, and refitting a GPU's elementwise rows of its data gives the shipped parameters."""
    calibrations, gpus, keys, roofs = kc.load_shipped()
    assert set(calibrations) == set(kc.DATASET_GPUS) | {"NVIDIA H200"}
    assert set(roofs) == {"h100-sxm5-80gb"} and "ceilings" in roofs["h100-sxm5-80gb"].source
    for name, calibration in calibrations.items():  # each GPU's measured shapes, beside the JSON
        assert {"gemm"} <= set(calibration.shapes) and calibration.architecture == gpus[name].architecture
    assert keys == {**{name: key for name, (key, _, _) in kc.DATASET_GPUS.items() if key},
                    "NVIDIA H200": "h200-sxm-141gb"}
    for name, calibration in calibrations.items():
        assert name in calibration.source
        assert ("NeuSight" in calibration.source) == (name != "NVIDIA H200")
    assert "rooflow ceilings --single-ops" in calibrations["NVIDIA H200"].source
    assert "torch 2.11" in calibrations["NVIDIA H200"].source
    for root, name in ((KERNELS, "NVIDIA A100-PCIE-40GB"), (H200_SINGLE_OPS / "single-ops-h200", "NVIDIA H200")):
        data = kc.load_measurements(root)
        rows = data[(data["gpu"] == name) & (data["op_class"] == "elementwise")]
        refit = kc.fit_gpu(rows, gpus[name], "refit")
        assert refit.classes["elementwise"] == calibrations[name].classes["elementwise"]


def test_every_catalogue_gpu_names_its_calibration_source():
    """`rooflow estimate --device` prints the calibration's source: measured kernels for the GPUs the data
    set has, the family's for the others, the H100's own recordings for sm_90."""
    devices = load_devices(CATALOGUE)
    sources = {key: for_device(device).source for key, device in devices.items() if device.is_cuda}
    assert "fitted on" in sources["t4"] and "Tesla T4" in sources["t4"]
    assert "fitted on" in sources["a100-pcie-40gb"]
    assert "not measured" in sources["l4"] and "not measured" in sources["a100-pcie-80gb"]
    assert "A100-PCIE-40GB" in sources["a100-pcie-80gb"]  # its family: Ampere
    assert "h100" in sources["h200-sxm-141gb"].lower()
    for key, source in sources.items():
        assert source, key
    # a convolution's floor and its growth over a measuring run (host_drift): the measured hosts'
    l4 = kc.for_gpu(devices["l4"])[0]
    assert ("convolution calls 293 µs of launch floor at a measuring run's middle call, growing 112 ns per call "
            "over the run (its donors' hosts: a call timed alone; a network's step is priced on its kernels, its host "
            "costs apart)") in l4.source
    assert l4.classes["convolution"]["drift_seconds_per_call"] == pytest.approx(111.5e-9)
    t4 = kc.for_gpu(devices["t4"])[0].source
    assert ("convolution calls 234 µs of launch floor at a measuring run's middle call, growing 82 ns per call "
            "over the run (its host's: a call timed alone; a network's step is priced on its kernels, its host costs "
            "apart)") in t4
    # its convolutions' implicit GEMMs, read from the calls that ran them (test_implicit_gemm_parameters_...)
    assert "convolutions' implicit-GEMM efficiency 0.76 (its GEMMs' 0.47), fitted on its 1631 calls" in t4


def test_an_issue_bound_gpu_takes_an_issue_bound_architectures_fp32_efficiency():
    """The A10 (GA102) issues an FP32 FMA from 32 lanes per scheduler at every clock to reach its datasheet peak,
    as the H100's SMs do, where the A100's (GA100, its family's measured board) have 16 and two clocks per warp FMA:
    third-party FP32 torch.mm runs at 0.52-0.71 of the peak on GA102/AD10x boards, 0.78 on the H100, 0.93-0.98 on
    the A100 (kc.ISSUE_BOUND_FP32). So its FP32 GEMM (and convolution) efficiency is the H100's measured roof's, not
    the A100's; its kernels' shape parameters stay its family's (the same ampere_sgemm kernels). An issue-bound GPU
    whose efficiency already comes from an issue-bound roof (the L4) and a GA100 board do not move."""
    calibrations, _, _, roofs = kc.load_shipped()
    devices = load_devices(CATALOGUE)
    a10, l4, a100_80 = (kc.for_gpu(devices[key])[0] for key in ("a10", "l4", "a100-pcie-80gb"))
    a100 = calibrations["NVIDIA A100-PCIE-40GB"].classes["gemm"]
    (h100,) = [roof for roof in roofs.values() if roof.gpu.architecture == "sm_90"]
    assert a10.classes["gemm"]["efficiency"] == pytest.approx(h100.gemm_efficiency)
    assert a10.classes["gemm"]["efficiency"] < 0.85 * a100["efficiency"]
    assert a10.classes["convolution"]["efficiency"] == a10.classes["gemm"]["efficiency"]
    assert a10.classes["gemm"]["tile_exponent"] == a100["tile_exponent"] and a10.classes["gemm"]["fill_k"] == a100["fill_k"]
    assert "issue an FP32 FMA from 32 lanes per scheduler" in a10.source
    assert l4.classes["gemm"]["efficiency"] == pytest.approx(h100.gemm_efficiency) and "32 lanes" not in l4.source
    assert a100_80.classes["gemm"]["efficiency"] == a100["efficiency"] and "32 lanes" not in a100_80.source


def test_a_hopper_boards_single_ops_calibrate_hopper_alone():
    """rooflow's H200 single ops lend their kernel parameters and shapes to the other Hopper boards (the H100 SXM
    and PCIe: the same sm_90 modules of cuBLAS and cuDNN), and nothing to any other GPU: the Ada L4 and L40S load
    Ampere's modules (Winograd, ampere_sgemm), so their calibrations are the same with or without the H200.
    Nor its host: an H100's launch floors and convolution floor and growth are the other measured hosts' (the data
    set's: 293 µs at a run's middle call, 112 ns per call), not the H200 host's 21 µs that does not grow."""
    calibrations, gpus, keys, roofs = kc.load_shipped()
    without = {name: calibration for name, calibration in calibrations.items() if name != "NVIDIA H200"}
    devices = load_devices(CATALOGUE)
    for key in ("l4", "l40s", "a10", "a100-pcie-80gb", "t4", "v100-sxm2-16gb"):
        gpu = kc.gpu_from_device(devices[key])
        assert kc.calibration_of(gpu, key) == kc.calibration_of(gpu, key, (without, gpus, keys, roofs)), key
        assert "H200" not in kc.calibration_of(gpu, key).source, key
    h200 = calibrations["NVIDIA H200"]
    for key in ("h100-sxm5-80gb", "h100-pcie-80gb"):
        h100 = kc.calibration_of(kc.gpu_from_device(devices[key]), key)
        assert "the kernel calibration of NVIDIA H200 (its architecture, sm_90" in h100.source
        for name in ("efficiency", "tile_exponent", "fill_k"):
            assert h100.classes["gemm"][name] == h200.classes["gemm"][name]
            assert h100.classes["convolution"][name] == h200.classes["convolution"][name]
        assert set(h100.shapes) == {"gemm", "convolution"}
        assert len(h100.shapes["gemm"].points) == len(h200.shapes["gemm"].points) == 1000
        convolution = h100.classes["convolution"]
        assert convolution["floor_seconds"] == pytest.approx(293e-6, rel=0.01)
        assert convolution["drift_seconds_per_call"] == pytest.approx(111.5e-9)
        assert h200.classes["convolution"]["floor_seconds"] < 25e-6
        assert h100.floors["add"] == pytest.approx(statistics.median(cal.floors["add"] for cal in without.values()))
        # its LayerNorms: rooflow's recording's row cost, as every Hopper board's
        assert h100.classes["normalization"]["row_seconds"] == kc.NORMALIZATION_ROW_SECONDS_OF["sm_90"]
    assert "normalization" not in h200.classes  # not fitted on its single ops (test_h200_layer_norms_...)


def test_a_siblings_sm_bound_gemvs_keep_its_bytes_per_sm_cycle():
    """A GEMV-like GEMM (nn.Linear of 2-13 outputs, a bmm of few columns) is bound by its bytes in flight per SM where
    it streams well under the board's elementwise rate: the H200's 20 such single ops moved 1.6-3.5 TB/s (median
    2.3) of its 4.8, where its adds stream 0.87 of it. A sibling with other memory moves the same bytes per SM cycle
    (as the time model carries the H100's SM-bound kernels to the H200: calibration.sm_bound_bandwidth), up to what
    its own memory gives: the H100 (3.35 TB/s, the same 132 SMs at 1.98 GHz) 0.71 of its bandwidth, not the H200's
    share, 0.49. A sibling whose donor streamed them at its memory's rate keeps that share: the A100 80GB the A100
    40GB's 0.92 (its adds 0.87)."""
    calibrations, gpus, _, _ = kc.load_shipped()
    devices = load_devices(CATALOGUE)
    h200 = calibrations["NVIDIA H200"].classes
    assert h200["gemm"]["memory_efficiency"] < kc.SM_BOUND_SHARE * h200["elementwise"]["memory_efficiency"]
    h100, gpu = kc.for_gpu(devices["h100-sxm5-80gb"])
    per_sm_cycle = h200["gemm"]["memory_efficiency"] * 4.8e12 / 67e12
    assert h100.classes["gemm"]["memory_efficiency"] == pytest.approx(per_sm_cycle * 67e12 / 3.35e12)
    assert h100.classes["gemm"]["memory_efficiency"] == pytest.approx(0.71, abs=0.01)
    assert "memory-bound gemm calls at 0.71 of its DRAM bandwidth" in h100.source
    # never beyond what its memory gives its streaming kernels (the H100 PCIe: 114 SMs on 2.0 TB/s)
    pcie, _ = kc.for_gpu(devices["h100-pcie-80gb"])
    assert pcie.classes["gemm"]["memory_efficiency"] == pcie.classes["elementwise"]["memory_efficiency"]
    a100 = calibrations["NVIDIA A100-PCIE-40GB"].classes["gemm"]["memory_efficiency"]
    assert kc.for_gpu(devices["a100-pcie-80gb"])[0].classes["gemm"]["memory_efficiency"] == a100
    # the H100's data-set-like GEMMs that stream (a 5,000-shape sample of the A100's): 9% of them, 12% faster
    rows = kc.load_measurements(KERNELS, ["NVIDIA A100-PCIE-40GB"]) if KERNELS.is_dir() else None
    if rows is not None:
        rows = rows[rows["op_class"] == "gemm"].sample(5000, random_state=0)
        share = dict(h100.classes["gemm"], memory_efficiency=h200["gemm"]["memory_efficiency"])
        ratio = (kc.predict_seconds(rows, gpu, replace(h100, classes={**h100.classes, "gemm": share}))
                 / kc.predict_seconds(rows, gpu, h100))
        assert 0.05 < np.mean(ratio > 1.05) < 0.15 and np.all(ratio >= 1 - 1e-9)


def test_time_model_takes_kernel_efficiencies():
    """The T4's time-model calibration takes its measured FP32 GEMM efficiency at the share of its boost clock its
    power sustains, both fitted on its calls (against 80% of the datasheet peak, as the time model holds it), which
    its source says, for cuBLAS's GEMMs; its convolutions (those the kernel model does not price itself: grouped,
    backward) its measured convolutions' efficiency, cuDNN's kernels' (test_step_model_gpus: a grouped one had
    taken the GEMMs' power-limited rate, 1.8x slower); and it keeps the H100's host costs."""
    devices = load_devices(CATALOGUE)
    calibration = for_device(devices["t4"])
    shipped = json.loads((ROOT / "rooflow" / "data" / "calibration" / "kernels.json").read_text())
    classes = shipped["measured"]["Tesla T4"]["calibration"]["classes"]
    gemm, convolution = classes["gemm"], classes["convolution"]
    assert 0.37 < gemm["sustained"] < 1.0  # above its base clock's share (585 of 1,590 MHz)
    assert f"to {gemm['sustained']:.2f} of it (fitted on its calls" in calibration.source
    assert calibration.gemm_efficiency["fp32"] == pytest.approx(gemm["efficiency"] * gemm["sustained"] / 0.8, abs=1e-4)
    assert calibration.matmul_efficiency["fp32"] == pytest.approx(convolution["efficiency"] / 0.8, abs=1e-4)
    assert calibration.matmul_efficiency["fp32"] > 1.5 * calibration.gemm_efficiency["fp32"]
    assert calibration.relative_uncertainty >= 0.25
    assert np.isfinite(calibration.host_op_seconds)


# ------------------------------------------------------------------------------------------ library picks
def test_pascal_linear_runs_small_tiles():
    """A large nn.Linear on Pascal runs cuBLAS's 64×64 / 32×128 / 128×32 tiles (LINEAR_TILES), its bmm 128×64;
    on Volta the same linear takes 128×128: at a tile exponent of 1, a 64×64 tile reaches half the rate."""
    volta = kc.Gpu(name="v", architecture="sm_70", sm_count=100, fp32_flops_per_second=10e12,
                   dram_bytes_per_second=1e12, l2_bytes=6 * 2**20, tdp_watts=250.0)
    pascal = kc.Gpu(**{**volta.__dict__, "architecture": "sm_60"})
    calibration = kc.KernelCalibration(source="t", gpu="x", classes={"gemm": {
        "efficiency": 1.0, "memory_efficiency": 1.0, "floor_seconds": 0.0, "tile_exponent": 1.0, "fill_k": 0.0}})
    linear = _rows("linear", B=1, M=12800, N=8192, K=12800)
    ratio = kc.predict_seconds(linear, pascal, calibration)[0] / kc.predict_seconds(linear, volta, calibration)[0]
    assert ratio == pytest.approx(2.0, rel=0.02)


def test_operand_rereads_beyond_the_l2_come_from_dram():
    """A tile reads A's rows once per tile column and B's columns once per tile row: of an operand beyond the L2,
    those re-reads come from DRAM, element bytes × (A's share beyond the L2 / tile n + B's / tile m) / 2 per FLOP,
    at the fitted ``reread`` share. With its kernels infinitely fast, a large nn.Linear on a Pascal board (its
    narrow tiles: 64×64 re-reads least) takes that traffic at its DRAM rate; within the L2, or at ``reread`` 0,
    the model is the one without re-reads."""
    pascal = kc.Gpu(name="p", architecture="sm_61", sm_count=20, fp32_flops_per_second=5.5e12,
                    dram_bytes_per_second=192e9, l2_bytes=2 * 2**20)
    gemm = {"efficiency": 1e6, "memory_efficiency": 0.5, "floor_seconds": 0.0, "tile_exponent": 0.0, "fill_k": 0.0}

    def seconds(rows, reread):
        calibration = kc.KernelCalibration(source="t", gpu="p", classes={"gemm": {**gemm, "reread": reread}})
        return kc.predict_seconds(rows, pascal, calibration)[0]

    rows, inputs, outputs = 8192, 4096, 8192
    linear = _rows("linear", B=1, M=rows, N=inputs, K=outputs)
    flops = 2 * rows * inputs * outputs
    a_beyond = 1 - pascal.l2_bytes / (4 * rows * inputs)
    b_beyond = 1 - pascal.l2_bytes / (4 * outputs * inputs)
    per_flop = 4 / 2 * (a_beyond / 64 + b_beyond / 64)
    assert seconds(linear, 1.0) == pytest.approx(flops * per_flop / (192e9 * 0.5), rel=1e-6)
    assert seconds(linear, 0.5) == pytest.approx(seconds(linear, 1.0) / 2, rel=1e-6)
    moved_once = 4 * (rows * inputs + inputs * outputs + rows * outputs + outputs)  # its operands, once
    assert seconds(linear, 0.0) == pytest.approx(moved_once / (192e9 * 0.5), rel=1e-6)
    # 1 MB and 4 MB operands: A fits, half of B is beyond the L2 (re-read once per tile row: 128×32 least), and
    # the operands moved once then take longer
    small = _rows("linear", B=1, M=256, N=1024, K=1024)
    b_small = 1 - pascal.l2_bytes / (4 * 1024 * 1024)
    reread = 2 * 256 * 1024 * 1024 * min(2 * b_small / tm for tm, _ in kc.LINEAR_TILES["pascal"]) / (192e9 * 0.5)
    once = 4 * (256 * 1024 + 1024 * 1024 + 256 * 1024 + 1024) / (192e9 * 0.5)
    assert once > reread and seconds(small, 1.0) == pytest.approx(once, rel=1e-6)
    assert seconds(_rows("linear", B=1, M=4096, N=1024, K=1024), 1.0) == pytest.approx(
        2 * 4096 * 1024 * 1024 * min(4 / 2 * ((1 - pascal.l2_bytes / (4 * 4096 * 1024)) / tn + b_small / tm)
                                     for tm, tn in kc.LINEAR_TILES["pascal"]) / (192e9 * 0.5), rel=1e-6)


@needs_data
def test_pascals_gemms_reread_their_operands_from_dram():
    """The evidence for ``reread``: on the same shapes, the P4's (192 GB/s, 2 MB L2) nn.Linear calls of over 3 ms
    on the P100 take 3.4-6.8x the P100's time, its torch.bmm calls 2.0-2.5x (at a 1.67x FP32 peak ratio): Pascal's
    nn.Linear SGEMMs move several times their tiles' traffic from DRAM
    (test_pascal_linear_sgemms_move_their_kernels_bytes_per_flop_at_dram_speed), a bmm's operands are one
    product's, small. Fitted after the rest of the GEMM parameters, the P4 and the P100 put the share of re-reads
    that reach DRAM at 1.83 and 1.75 of their tiles' (below 2026-12-04's bound of 8; at the old bound of 1 the P4 sat
    on it and the P100 fitted 0), the V100 at 0: its tiles and L2 hold them. The other GEMM parameters are those of
    the fit without re-reads."""
    data = kc.load_measurements(KERNELS)
    data = data[data["op_class"] == "gemm"]
    shape = ["operator", "B", "M", "N", "K"]
    p100 = data[data["gpu"] == "Tesla P100-PCIE-16GB"].drop_duplicates(shape).set_index(shape)["seconds"]
    p4 = data[data["gpu"] == "Tesla P4"].drop_duplicates(shape).set_index(shape)["seconds"]
    both = pd.concat([p100.rename("p100"), p4.rename("p4")], axis=1, join="inner")
    long = both[both["p100"] > 3e-3]
    ratio = (long["p4"] / long["p100"]).groupby(level="operator").median()
    assert ratio["linear"] > 1.5 * ratio["bmm"] and 1.9 < ratio["bmm"] < 2.6
    gpus = kc.load_dataset_gpus(KERNELS)
    fitted = {name: kc.fit_gpu(data[data["gpu"] == name], gpus[name], "t").classes["gemm"]
              for name in ("Tesla P100-PCIE-16GB", "Tesla P4", "Tesla V100-PCIE-32GB")}
    pascal = [fitted["Tesla P4"]["reread"], fitted["Tesla P100-PCIE-16GB"]["reread"]]
    assert 1.5 < min(pascal) and max(pascal) < 2.0 < kc.BOUNDS["reread"][1]
    assert fitted["Tesla V100-PCIE-32GB"]["reread"] == 0.0
    assert fitted["Tesla P100-PCIE-16GB"]["efficiency"] == 1.2089  # as fitted without re-reads


def test_a_pascal_bmm_tiles_64_output_rows_by_128_columns():
    """cuBLAS's maxwell_sgemm_128x64 (Pascal's one batched tile) covers 128 output columns by 64 output rows
    (kc._rows_by_columns): a torch.bmm of 64 × 128 outputs fills one tile, one of 128 × 64 two tiles half empty.
    With tile quality and mainloop fill neutral, the second takes twice the first's time."""
    calibration = kc.KernelCalibration(source="t", gpu="test", classes={"gemm": {
        "efficiency": 0.5, "memory_efficiency": 1.0, "floor_seconds": 0.0, "tile_exponent": 0.0, "fill_k": 0.0}})
    pascal = kc.Gpu(name="p", architecture="sm_60", sm_count=10, fp32_flops_per_second=10e12,  # full waves
                    dram_bytes_per_second=1e15, l2_bytes=4 * 2**20)
    wide = _rows("bmm", B=10, M=64, N=512, K=128)  # (10, 64, 512) @ (10, 512, 128): 64 rows, 128 columns
    tall = _rows("bmm", B=10, M=128, N=512, K=64)
    flops = 2 * 10 * 64 * 128 * 512
    assert kc.predict_seconds(wide, pascal, calibration)[0] == pytest.approx(flops / 5e12)
    assert kc.predict_seconds(tall, pascal, calibration)[0] == pytest.approx(2 * flops / 5e12)
    assert kc._rows_by_columns([(128, 64), (32, 128)]) == ((64, 128), (128, 32))


@needs_data
def test_cublas_tiles_name_the_output_columns_first():
    """The evidence for kc._rows_by_columns: every nn.Linear and torch.bmm call of the data set whose kernel names
    its tile (maxwell_/volta_/ampere_sgemm_AxB…, 79,000 calls on five GPUs) launched a grid of ceil(output columns
    / A) × ceil(output rows / B): cuBLAS, column-major, runs torch's row-major product as its transpose. The other
    way round (A along the rows) matches 1-25% of each file's calls — those whose padding comes out alike."""
    for gpu in ("Tesla_P100-PCIE-16GB", "Tesla_P4", "Tesla_T4", "Tesla_V100-PCIE-32GB", "NVIDIA_A100-PCIE-40GB"):
        for operator in ("linear", "bmm"):
            calls = pd.read_csv(KERNELS / operator / f"{gpu}.csv.gz",
                                usecols=["Kernel Name", "Grid x", "Grid y", "B", "M", "K"])
            tile = calls["Kernel Name"].str.extract(r"sgemm_(\d+)x(\d+)_(?:sliced1x4_)?(?:tn|nn)").astype(float)
            named = tile[0].notna()
            assert named.mean() > 0.99, (gpu, operator)
            calls, first, second = calls[named], tile[0][named], tile[1][named]
            rows = calls["M"] if operator == "bmm" else calls["B"] * calls["M"]
            columns = calls["K"]  # bmm (B, M, N) @ (B, N, K); nn.Linear(N, K) on (B, M, N)
            transposed = (calls["Grid x"] == np.ceil(columns / first)) & (calls["Grid y"] == np.ceil(rows / second))
            as_named = (calls["Grid x"] == np.ceil(rows / first)) & (calls["Grid y"] == np.ceil(columns / second))
            assert transposed.all(), (gpu, operator, float(transposed.mean()))
            assert as_named.mean() < 0.3, (gpu, operator, float(as_named.mean()))


def test_batched_gemm_runs_its_architectures_tile():
    """An Ampere torch.bmm of 32×32 outputs runs in a 128×128 tile (16× its outputs computed), and so does an
    Ada one (it loads Ampere's ampere_sgemm); a Volta or Hopper one picks the 32×32 tile: with tile quality and
    mainloop fill neutral, the Ampere call takes 16× longer."""
    calibration = kc.KernelCalibration(source="t", gpu="test", classes={"gemm": {
        "efficiency": 0.5, "memory_efficiency": 1.0, "floor_seconds": 0.0, "tile_exponent": 0.0, "fill_k": 0.0}})
    rows = _rows("bmm", B=100, M=32, N=4096, K=32)
    volta = kc.Gpu(name="v", architecture="sm_70", sm_count=100, fp32_flops_per_second=10e12,
                   dram_bytes_per_second=1e15, l2_bytes=40 * 2**20)
    ampere = kc.Gpu(**{**volta.__dict__, "architecture": "sm_80"})
    flops = 2 * 100 * 32 * 32 * 4096
    assert kc.predict_seconds(rows, volta, calibration)[0] == pytest.approx(flops / 5e12)
    assert kc.predict_seconds(rows, ampere, calibration)[0] == pytest.approx(16 * flops / 5e12)
    for architecture, tiles in (("sm_89", 16), ("sm_90", 1)):
        gpu = kc.Gpu(**{**volta.__dict__, "architecture": architecture})
        assert kc.predict_seconds(rows, gpu, calibration)[0] == pytest.approx(tiles * flops / 5e12)


def _flat_calibration() -> kc.KernelCalibration:
    """GEMMs and convolutions at half the FP32 peak whatever their tile or depth, no floor, no Winograd."""
    params = {"efficiency": 0.5, "memory_efficiency": 1.0, "floor_seconds": 0.0, "tile_exponent": 0.0,
              "fill_k": 0.0, "winograd_efficiency": 0.01}
    return kc.KernelCalibration(source="t", gpu="test", classes={"gemm": params, "convolution": params})


def test_convolution_never_splits_its_reduction():
    """A forward convolution of one 128×32 output tile (cuDNN's smallest) and a long reduction runs on one SM
    (cuDNN: no split-K); the same product as nn.Linear splits k over 16 SMs (cuBLAS)."""
    calibration = _flat_calibration()
    # 1×1 convolution, 2 images of 8×8 pixels: m = 128 pixels, n = 32 channels, k = 4096 input channels
    conv = _rows("conv", B=2, Input_Channel=4096, Output_Channel=32, Kernel_Szie=1, Input_Size=8, Stride=1,
                 Padding=0)
    linear = _rows("linear", B=1, M=128, N=4096, K=32)
    per_sm = 10e12 / 100 * 0.5
    assert kc.predict_seconds(conv, GPU, calibration)[0] == pytest.approx(2 * 128 * 32 * 4096 / per_sm)
    assert kc.predict_seconds(linear, GPU, calibration)[0] < kc.predict_seconds(conv, GPU, calibration)[0] / 10


def test_convolutions_take_every_implicit_gemm_tile_where_batched_gemms_take_one():
    """cuDNN's implicit GEMMs tile 128 pixels by 128, 64 or 32 channels on every architecture (the data set's
    scudnn_128x128/128x64/128x32 on the P100 and P4 alike); cuBLAS's batched GEMMs take their architecture's one
    tile (BATCHED_TILES: 128×128 on Ampere). A convolution of 128 pixels × 128 channels on 100 SMs runs as four
    128×32 tiles on four SMs. Before, a convolution (never split along k) was held to the batched tile too."""
    calibration = _flat_calibration()
    conv = _rows("conv", B=2, Input_Channel=4096, Output_Channel=128, Kernel_Szie=1, Input_Size=8, Stride=1,
                 Padding=0)
    bmm = _rows("bmm", B=1, M=128, N=4096, K=128)
    per_sm = 10e12 / 100 * 0.5
    for gpu in (GPU, replace(GPU, architecture="sm_60"), replace(GPU, architecture="sm_70")):
        assert kc.predict_seconds(conv, gpu, calibration)[0] == pytest.approx(2 * 128 * 128 * 4096 / per_sm / 4)
    assert kc.predict_seconds(bmm, GPU, calibration)[0] == pytest.approx(2 * 128 * 128 * 4096 / per_sm)


def test_hopper_convolutions_run_implicit_gemm_or_fft_never_winograd():
    """On sm_90 (NO_FORWARD_WINOGRAD) a 3×3 stride-1 convolution of a large input is priced as the direct
    implicit GEMM, never Winograd (whatever its efficiency); one of a 28×28 input as the cheaper of that and
    FFT of 32×32 transforms (FFT_SIZES), which does 8·B·Cout·Cin·32·17 FLOPs: 3.2x fewer than direct."""
    params = {"efficiency": 0.5, "memory_efficiency": 1.0, "floor_seconds": 0.0, "tile_exponent": 0.0,
              "fill_k": 0.0, "winograd_efficiency": 4.0}
    calibration = kc.KernelCalibration(source="t", gpu="test", classes={"convolution": params})
    hopper = replace(GPU, architecture="sm_90", dram_bytes_per_second=1e15)  # bandwidth out of the way
    large = _rows("conv", B=64, Input_Channel=128, Output_Channel=128, Kernel_Szie=3, Input_Size=128, Stride=1,
                  Padding=1)
    direct_flops = 2 * 64 * 128 * 128 * 128 * 128 * 9
    assert kc.predict_seconds(large, hopper, calibration)[0] == pytest.approx(direct_flops / 5e12, rel=0.01)
    assert kc.predict_seconds(large, GPU, calibration)[0] < direct_flops / 5e12 / 3  # sm_80: Winograd
    small = _rows("conv", B=64, Input_Channel=512, Output_Channel=512, Kernel_Szie=3, Input_Size=28, Stride=1,
                  Padding=1)
    fft_flops = 8 * 64 * 512 * 512 * 32 * 17
    assert kc.predict_seconds(small, hopper, calibration)[0] == pytest.approx(fft_flops / 5e12, rel=0.05)


def _operator_calls(trace: Path, operator: str, skipped: str | None = None) -> list[tuple[dict, float]]:
    """Each ``operator`` call (an aten op) of a torch.profiler trace, in order, with the seconds of the kernels it
    launched (CUPTI correlation ids; rooflow.measure.optime's rule) but those whose name holds ``skipped``."""
    events = json.load(gzip.open(trace))["traceEvents"]
    kernels = {e["args"]["correlation"]: (e["name"], e["dur"]) for e in events if e.get("cat") == "kernel"}
    launches = [e for e in events if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})]
    calls = []
    for event in (e for e in events if e.get("cat") == "cpu_op" and e["name"] == operator):
        ids = [launch["args"]["correlation"] for launch in launches
               if launch["tid"] == event["tid"] and event["ts"] <= launch["ts"] <= event["ts"] + event["dur"]]
        seconds = sum(kernels[i][1] for i in ids if i in kernels
                      and not (skipped and skipped in kernels[i][0])) * 1e-6
        calls.append((event, seconds))
    return calls


def _convolution_calls(trace: Path) -> list[tuple[dict, float]]:
    """Each aten::conv2d of a torch.profiler trace with its kernels' seconds less its bias add (an elementwise
    kernel)."""
    return _operator_calls(trace, "aten::conv2d", skipped="elementwise_kernel")


def _vgg16_forward_convolutions(trace: Path) -> pd.DataFrame:
    """VGG16's 13 forward convolutions in a torch.profiler trace recorded without shapes, with torchvision's
    layer shapes in order."""
    shapes = [(3, 64, 224), (64, 64, 224), (64, 128, 112), (128, 128, 112), (128, 256, 56), (256, 256, 56),
              (256, 256, 56), (256, 512, 28), (512, 512, 28), (512, 512, 28), (512, 512, 14), (512, 512, 14),
              (512, 512, 14)]
    return pd.DataFrame([{"operator": "conv", "op_class": "convolution", "B": 64, "Input_Channel": cin,
                          "Output_Channel": cout, "Kernel_Szie": 3, "Input_Size": size, "Stride": 1, "Padding": 1,
                          "seconds": seconds}
                         for (_, seconds), (cin, cout, size) in zip(_convolution_calls(trace)[:13], shapes)])


def test_h100_fp32_convolutions_against_the_kernel_model():
    """A GPU with no single-op data: the H100's FP32 forward convolutions of a VGG16 b64 training step
    (torch.profiler, rooflow's own recording), against the kernel model as shipped — its architecture's
    calibration, the H200's single ops (implicit GEMM or FFT on Hopper), with the H100's datasheet: 13 of 13
    within ±25%, the total 1.05x (before the H200's single ops were shipped, from the H100's measured roof and
    all GPUs' convolution parameters: 13 of 13, 0.94x; 3 of 13 and 0.51x when priced as Winograd, as cuDNN runs
    it on the data set's GPUs)."""
    rows = _vgg16_forward_convolutions(ROOT / "tests" / "data" / "real" / "h100-rooflow"
                                       / "torch-profiler-vgg16-b64-fp32-training.json.gz")
    calibration, gpu = kc.for_gpu(load_devices(CATALOGUE)["h100-sxm5-80gb"])
    assert "the kernel calibration of NVIDIA H200" in calibration.source
    predicted = kc.predict_seconds(rows, gpu, calibration) - kc.launch_floors(rows, gpu, calibration)
    ratio = predicted / rows["seconds"].to_numpy()
    assert np.mean(np.abs(ratio - 1) <= 0.25) == 1.0
    assert predicted.sum() == pytest.approx(rows["seconds"].sum(), rel=0.1)


def _forward_convolutions(trace: Path) -> pd.DataFrame:
    """The dense forward convolutions (groups 1, square) of a torch.profiler trace recorded with shapes: per
    aten::conv2d its input and weight dims, stride and padding, and its kernels' seconds."""
    rows = []
    for event, seconds in _convolution_calls(trace):
        (batch, cin, height, width), (cout, _, kernel, kernel_width) = event["args"]["Input Dims"][:2]
        stride, padding, _, groups = event["args"]["Concrete Inputs"][3:7]
        if int(groups) != 1 or height != width or kernel != kernel_width:
            continue
        rows.append({"operator": "conv", "op_class": "convolution", "B": batch, "Input_Channel": cin,
                     "Output_Channel": cout, "Kernel_Szie": kernel, "Input_Size": height,
                     "Stride": json.loads(stride)[0], "Padding": json.loads(padding)[0], "seconds": seconds})
    return pd.DataFrame(rows)


def test_h200_fp32_convolutions_against_the_kernel_model():
    """The H200's FP32 forward convolutions in networks (rooflow's torch.profiler traces, b256 inference) against
    the kernel model as shipped: fitted on the same GPU's 500 single convolutions (`rooflow ceilings --single-ops`,
    another process and other shapes), implicit GEMM in the 256×64 and 128×32 tiles its kernels launch
    (IMPLICIT_GEMM_TILES_OF) or FFT. VGG16 11 of 13 within ±25% (its two misses at 1.25-1.26, 56×56 of 256
    channels), ResNet-50 52 of 53, MobileNetV2's 1×1 and stem convolutions 35 of 35; in total 1.09x, 0.97x, 1.04x.
    Before the H200's single ops were shipped (all GPUs' convolution parameters, the H100's roof): 13 of 13 (0.98x),
    48 of 53 (0.87x), 22 of 35 (0.84x: its 1×1 convolutions from many channels to few, 96 → 24 … 960 → 160, ran at
    0.65-0.76 of the prediction, which the single ops' tile exponent, 0.47 against 0.20, now prices); before
    Hopper's own tiles and no Winograd residuals: 10 of 13 (1.01x), 43 of 53 (0.89x), 24 of 35 (1.08x)."""
    calibration, gpu = kc.for_gpu(load_devices(CATALOGUE)["h200-sxm-141gb"])
    assert "fitted on 2020 measured single-op latencies of the NVIDIA H200" in calibration.source
    within, totals = {}, {}
    for model, least in (("vgg16", 11), ("resnet50", 52), ("mobilenet_v2", 35)):
        rows = _forward_convolutions(ROOT / "tests" / "data" / "real" / "gpu-2026-11-27"
                                     / f"torch-profiler-{model}-b256-fp32-inference.json.gz")
        predicted = kc.predict_seconds(rows, gpu, calibration) - kc.launch_floors(rows, gpu, calibration)
        ratio = predicted / rows["seconds"].to_numpy()
        within[model] = int(np.sum(np.abs(ratio - 1) <= 0.25))
        totals[model] = predicted.sum() / rows["seconds"].sum()
        assert within[model] >= least, (model, within[model], len(rows))
        assert np.all(np.abs(ratio - 1) <= 0.45), (model, ratio)  # no call off by more than 45%
    assert totals["vgg16"] == pytest.approx(1.09, abs=0.05) and totals["resnet50"] == pytest.approx(0.97, abs=0.05)
    assert totals["mobilenet_v2"] == pytest.approx(1.04, abs=0.05)


@pytest.mark.parametrize("model, recorded_ms, least, most", [("resnet50", 48.13, 0.92, 1.03),
                                                             ("mobilenet_v2", 6.89, 0.95, 1.10)])
def test_hoppers_fp32_convolutions_take_its_single_ops_kernel_model(model, recorded_ms, least, most):
    """In a step on the H200, its FP32 forward convolutions are the kernel model's (fitted on the same
    architecture's single ops, 3×3 stride-1 shapes only), the rest of the step the time model's, whose FP32
    efficiency was read from the H100's traces with its tile shape factor. Against the recorded kernels of those
    convolutions (torch.profiler, b256 inference; MobileNetV2's depthwise ones apart): ResNet-50 48.1 ms recorded,
    0.97x predicted (was 1.23x: 59.0 ms), MobileNetV2 6.9 ms, 1.04x (was 1.59x); the H100 and H200 FP32 steps of
    both models had been over-predicted by as much (ResNet-50 b256 inference 0.84 -> 1.01 on the H100 sweep)."""
    from rooflow.estimate import estimate
    from rooflow.estimate.core import parse_call
    from rooflow.estimate.timemodel import predict_step

    device = load_devices(CATALOGUE)["h200-sxm-141gb"]
    recorded = _forward_convolutions(ROOT / "tests" / "data" / "real" / "gpu-2026-11-27"
                                     / f"torch-profiler-{model}-b256-fp32-inference.json.gz")
    assert recorded["seconds"].sum() * 1e3 == pytest.approx(recorded_ms, abs=0.01)
    result = estimate(model, 256, "fp32", "inference")
    step = predict_step(result.ops, result.totals, device, for_device(device))
    ops = result.ops
    # a dense convolution's call is its 7-number shape (a depthwise one's: its channels and padding)
    dense = ops["op"].isin(("convolution", "_convolution")) & (ops["phase"] == "forward") \
        & ops["call"].map(lambda call: len(parse_call(call)) == 7)
    predicted = sum(seconds for index, seconds in step.row_seconds.items() if dense.get(index, False))
    assert least <= predicted / recorded["seconds"].sum() <= most
    assert "FP32 forward convolution call(s) by the kernel model of its architecture's single ops" in \
        step.calibration_source


def _layer_norms(trace: Path) -> pd.DataFrame:
    """The LayerNorms of a torch.profiler trace recorded with shapes, as the kernel model's rows (``ln``: B rows
    of H), with the seconds of the LayerNorm kernel alone (a permuted input's copy to contiguous left out)."""
    rows = []
    for event, seconds in _operator_calls(trace, "aten::layer_norm", skipped="at::native::elementwise_kernel"):
        dims = event["args"]["Input Dims"][0]
        rows.append({"operator": "ln", "op_class": "normalization", "B": int(np.prod(dims[:-1])), "H": dims[-1],
                     "seconds": seconds})
    return pd.DataFrame(rows)


def test_h200_layer_norms_against_the_kernel_model():
    """A LayerNorm costs its rows as well as its bytes on Hopper (NORMALIZATION_ROW_SECONDS_OF): the constant is
    what the H200's ViT-B/16 b256 FP32 LayerNorms (50,432 rows × 768) leave after their bytes at the H100's
    measured triad, and it predicts the same GPU's ConvNeXt-T LayerNorms of 96 to 768 per row (12,544 to 802,816
    rows) at 0.90-1.05 of their time (asserted within ±15%) and its ViT-B/16 b32 ones at 0.85 (±25%). Before it
    (all measured GPUs' streaming parameters, no row cost), ConvNeXt-T's were predicted at 0.21-0.77 of their
    time and ViT-B/16 b32's at 0.68."""
    calibration, gpu = kc.for_gpu(load_devices(CATALOGUE)["h200-sxm-141gb"])
    row_seconds = calibration.classes["normalization"]["row_seconds"]
    assert row_seconds == kc.NORMALIZATION_ROW_SECONDS_OF["sm_90"]
    assert calibration.classes["normalization"]["memory_efficiency"] == pytest.approx(0.905, abs=0.005)
    traces = ROOT / "tests" / "data" / "real" / "gpu-2026-11-27"

    def ratios(model: str) -> tuple[pd.DataFrame, np.ndarray]:
        rows = _layer_norms(traces / f"torch-profiler-{model}-fp32-inference.json.gz")
        rows = rows[rows["B"] >= 4096]  # ConvNeXt-T's last LayerNorm (256 rows) is its kernel's few µs of latency
        predicted = kc.predict_seconds(rows, gpu, calibration) - kc.launch_floors(rows, gpu, calibration)
        return rows, predicted

    rows, predicted = ratios("vit_b_16-b256")
    derived = np.median((rows["seconds"].to_numpy() - predicted) / rows["B"].to_numpy() * gpu.sm_count) + row_seconds
    assert len(rows) == 25 and derived == pytest.approx(row_seconds, rel=0.05)
    rows, predicted = ratios("convnext_tiny-b256")
    assert len(rows) == 22 and set(rows["H"]) == {96, 192, 384, 768}
    assert np.all(np.abs(predicted / rows["seconds"].to_numpy() - 1) <= 0.15), predicted / rows["seconds"].to_numpy()
    rows, predicted = ratios("vit_b_16-b32")
    assert len(rows) == 25 and np.all(np.abs(predicted / rows["seconds"].to_numpy() - 1) <= 0.25)
    # the data set's GPUs have no row cost (their fits hold it elsewhere), nor does an architecture not recorded
    l4, _ = kc.for_gpu(load_devices(CATALOGUE)["l4"])
    assert "row_seconds" not in l4.classes["normalization"]


def test_hopper_fp32_implicit_gemm_tiles_are_the_recorded_ones():
    """Every FP32 forward implicit-GEMM kernel in rooflow's H100 and H200 traces is sm80_xmma_fprop in a 256×64
    or 128×32 tile: the tiles the model offers sm_90 (IMPLICIT_GEMM_TILES_OF)."""
    tiles = set()
    traces = sorted((ROOT / "tests" / "data" / "real").glob("*/torch-profiler-*fp32*.json.gz"))
    for trace in traces:
        for event in json.load(gzip.open(trace))["traceEvents"]:
            if event.get("cat") == "kernel" and "xmma_fprop_implicit_gemm" in event["name"]:
                tiles.add(tuple(int(t) for t in event["name"].split("tilesize")[1].split("_")[0].split("x")[:2]))
    assert len(traces) >= 8 and tiles == set(kc.IMPLICIT_GEMM_TILES_OF["sm_90"])


def test_measured_shapes_correct_by_their_nearest_neighbours():
    """A query at a measured shape takes its residual, shrunk by the prior (weight 1/0.25 against 0.25); one
    far from every measured shape keeps the model (factor → 1)."""
    residuals = shape_residuals.ShapeResiduals(np.array([[0.0, 0.0], [40.0, 40.0]]), np.array([np.log(2.0), 0.0]))
    near, far = residuals.correction(np.array([[0.0, 0.0], [400.0, 400.0]]))
    w_near, w_far = 1 / 0.25, 1 / (80 + 0.25)
    assert near == pytest.approx(np.exp(w_near * np.log(2.0) / (w_near + w_far + shape_residuals.PRIOR_WEIGHT)))
    assert far == pytest.approx(1.0, abs=0.01)


def test_same_architecture_takes_the_measured_gpus_calibration_whole():
    """An A100 80GB (sm_80, not measured) takes the measured A100 40GB's parameters and measured shapes, with
    its own datasheet; a GPU of another architecture takes no shapes."""
    shapes = {"gemm": shape_residuals.ShapeResiduals(np.zeros((1, 5)), np.array([0.3]))}
    measured = {"a100": kc.KernelCalibration(source="t", gpu="a100", architecture="sm_80", floors={"add": 30e-6},
                                             shapes=shapes, classes={"gemm": {
                                                 "efficiency": 0.9, "memory_efficiency": 0.8, "floor_seconds": 40e-6,
                                                 "tile_exponent": 1.5, "fill_k": 5.0}})}
    a100 = kc.Gpu(name="a100", architecture="sm_80", sm_count=108, fp32_flops_per_second=19.5e12,
                  dram_bytes_per_second=1.555e12, l2_bytes=40 * 2**20, tdp_watts=250.0)
    big = kc.Gpu(**{**a100.__dict__, "name": "a100-80", "dram_bytes_per_second": 1.935e12, "tdp_watts": 300.0})
    result = kc.family_calibration(big, measured, {"a100": a100})
    assert result.classes["gemm"] == measured["a100"].classes["gemm"]
    assert result.shapes["gemm"] is not None and result.shapes["gemm"].residuals.tolist() == [0.3]
    assert "its architecture, sm_80" in result.source
    other = kc.family_calibration(kc.Gpu(**{**a100.__dict__, "name": "x", "architecture": "sm_86"}), measured,
                                  {"a100": a100})
    # another Ampere: the A100's GEMM shapes less their level (test_gemm_shapes_carry_within_a_family_...)
    assert set(other.shapes) == {"gemm"} and other.shapes["gemm"].residuals.tolist() == [0.0]
    ada = kc.family_calibration(kc.Gpu(**{**a100.__dict__, "name": "y", "architecture": "sm_89"}), measured,
                                {"a100": a100})
    assert ada.shapes == {}


def test_a_measured_gpu_takes_a_class_it_lacks_as_its_architectures_gpus_without_data_do():
    """The data set's A100 PCIe 40GB ran no convolutions: they are priced as the A100 SXM4 40GB's (same chip,
    not measured) — every measured GPU's median parameters and pooled shapes — not by the model's defaults
    (which had the PCIe board's ResNet-18 1.6× the SXM4's); its measured classes stay its own. The FP32
    efficiency is the other architectures' full-power boards' GEMMs' (the P100's 1.21 and the V100's 1.005:
    1.11), as a GPU of an unmeasured architecture takes it, not its own GEMMs' 1.005 (before 2026-12-01; the
    test above), nor the median of the four boards' convolutions (0.94, the 70 W T4 and 75 W P4 among them).
    The A10, of another architecture of its family, keeps its GEMMs' (an issue-bound architecture's roof)."""
    devices = load_devices(CATALOGUE)
    pcie, _ = kc.for_gpu(devices["a100-pcie-40gb"])
    sxm, _ = kc.for_gpu(devices["a100-sxm4-40gb"])
    shipped = kc.load_shipped()[0]["NVIDIA A100-PCIE-40GB"]
    assert "convolution" not in shipped.classes
    fitted = (*kc.FITTED["convolution"], "floor_seconds")  # its board power (250 W, not 400 W) is its own
    assert {k: pcie.classes["convolution"][k] for k in fitted} == {k: sxm.classes["convolution"][k] for k in fitted}
    assert pcie.shapes["convolution"].residuals.tolist() == sxm.shapes["convolution"].residuals.tolist()
    assert pcie.classes["gemm"] == shipped.classes["gemm"]
    assert pcie.shapes["gemm"].residuals.tolist() == shipped.shapes["gemm"].residuals.tolist()
    assert pcie.source.startswith(shipped.source)
    assert "convolution not measured on it: each parameter the median of Tesla P100-PCIE-16GB, Tesla P4" in pcie.source
    assert "but its FP32 efficiency (1.11), the other architectures' full-power boards' GEMMs', not its own" \
        in pcie.source
    full_power = statistics.median(kc.load_shipped()[0][name].classes["gemm"]["efficiency"]
                                   for name in ("Tesla P100-PCIE-16GB", "Tesla V100-PCIE-32GB"))
    for key in ("a100-pcie-40gb", "a100-pcie-80gb", "a100-sxm4-80gb"):
        calibration = kc.for_gpu(devices[key])[0]
        assert calibration.classes["convolution"]["efficiency"] == pytest.approx(full_power), key
        assert calibration.classes["gemm"]["efficiency"] == shipped.classes["gemm"]["efficiency"] != full_power, key
    a10 = kc.for_gpu(devices["a10"])[0]  # its GEMMs' own is an issue-bound architecture's (the test above)
    assert a10.classes["convolution"]["efficiency"] == a10.classes["gemm"]["efficiency"]
    assert "convolution: none measured on its architecture, each parameter the median of all measured GPUs' but " \
        "its FP32 efficiency (1.11), the other architectures' full-power boards' GEMMs', not its own" \
        in kc.for_gpu(devices["a100-pcie-80gb"])[0].source
    complete = kc.load_shipped()[0]["Tesla T4"]
    assert kc.for_gpu(devices["t4"])[0] == complete  # measured in every class: as shipped


def test_convolution_shapes_carry_across_architectures_less_each_gpus_level():
    """A GPU of an unmeasured architecture takes every measured GPU's convolution residuals, each less its
    own median (a board's level — its power limit — is not a shape's), pooled; GEMM residuals stay with
    their architecture; a measured architecture's own convolution shapes win."""
    def measured_gpu(name, architecture, conv, gemm=None):
        shapes = {"convolution": shape_residuals.ShapeResiduals(np.zeros((len(conv), 6)), np.array(conv))}
        if gemm is not None:
            shapes["gemm"] = shape_residuals.ShapeResiduals(np.zeros((1, 5)), np.array([gemm]))
        return kc.KernelCalibration(source="t", gpu=name, architecture=architecture, shapes=shapes, classes={})
    measured = {"v100": measured_gpu("v100", "sm_70", [0.1, 0.3, 0.5], gemm=0.2),
                "t4": measured_gpu("t4", "sm_75", [-0.4, -0.2])}
    v100 = kc.Gpu(name="v100", architecture="sm_70", sm_count=80, fp32_flops_per_second=14e12,
                  dram_bytes_per_second=0.9e12, l2_bytes=6 * 2**20, tdp_watts=250.0)
    t4 = kc.Gpu(**{**v100.__dict__, "name": "t4", "architecture": "sm_75", "tdp_watts": 70.0})
    l4 = kc.Gpu(**{**v100.__dict__, "name": "l4", "architecture": "sm_89", "tdp_watts": 72.0})
    result = kc.family_calibration(l4, measured, {"v100": v100, "t4": t4})
    assert sorted(result.shapes["convolution"].residuals.tolist()) == pytest.approx([-0.2, -0.1, 0.0, 0.1, 0.2])
    assert "gemm" not in result.shapes and "convolution shapes: all measured GPUs'" in result.source
    own = kc.family_calibration(kc.Gpu(**{**v100.__dict__, "name": "v100s"}), measured, {"v100": v100, "t4": t4})
    assert own.shapes["convolution"].residuals.tolist() == [0.1, 0.3, 0.5]


def test_hopper_takes_no_winograd_shapes_residuals():
    """On sm_90 cuDNN runs a 3×3 stride-1 forward convolution as implicit GEMM or FFT, where the measured GPUs
    ran Winograd: those shapes' residuals describe another algorithm and are left out of an H100's; its other
    shapes' stay, and an Ada GPU (Winograd) keeps them all. The H100's VGG16 convolutions (all 3×3 stride 1):
    with them, 10 of 13 within ±25% at the implicit-GEMM tiles its kernels launch; without, 12."""
    features = shape_residuals.features(pd.DataFrame({
        "B": [8, 8, 8], "Input_Channel": [64] * 3, "Output_Channel": [64] * 3, "Kernel_Szie": [3, 1, 3],
        "Input_Size": [28] * 3, "Stride": [1, 1, 2], "Padding": [1, 0, 1]}), "convolution")
    shapes = {"convolution": shape_residuals.ShapeResiduals(features, np.array([0.5, 0.1, -0.1]))}
    measured = {"v100": kc.KernelCalibration(source="t", gpu="v100", architecture="sm_70", shapes=shapes, classes={})}
    v100 = kc.Gpu(name="v100", architecture="sm_70", sm_count=80, fp32_flops_per_second=14e12,
                  dram_bytes_per_second=0.9e12, l2_bytes=6 * 2**20, tdp_watts=250.0)
    h100 = kc.family_calibration(kc.Gpu(**{**v100.__dict__, "name": "h100", "architecture": "sm_90"}), measured,
                                 {"v100": v100})
    ada = kc.family_calibration(kc.Gpu(**{**v100.__dict__, "name": "l4", "architecture": "sm_89"}), measured,
                                {"v100": v100})
    # each less the V100's median over all its shapes (0.1: its level), the 3×3 stride-1 one then dropped
    assert sorted(h100.shapes["convolution"].residuals.tolist()) == pytest.approx([-0.2, 0.0])
    assert sorted(ada.shapes["convolution"].residuals.tolist()) == pytest.approx([-0.2, 0.0, 0.4])
    assert "no 3×3 stride-1" in h100.source and "no 3×3 stride-1" not in ada.source


def test_gemm_shapes_carry_from_a_familys_full_power_boards():
    """A board without data takes its family's full-power boards' GEMM residuals, less their median (the same
    kernel names: maxwell_sgemm on the P100 and P4, volta_sgemm on the V100 and T4), and no power-limited board's,
    though its generation's picks are the same (the P4's for the P100: 88% of their shapes,
    test_generations_share_cublas_picks): held one GPU out on the full data, the P100's GEMMs went 80% -> 85% within
    ±25% without the P4's residuals once cuBLAS's tiles were laid the way round (kc._rows_by_columns), which is what
    they had been correcting (60% -> 72% with them before). Another family's boards carry none."""
    def measured_gpu(name, architecture, gemm):
        shapes = {"gemm": shape_residuals.ShapeResiduals(np.zeros((len(gemm), 5)), np.array(gemm))}
        return kc.KernelCalibration(source="t", gpu=name, architecture=architecture, shapes=shapes, classes={})
    p100 = kc.Gpu(name="p100", architecture="sm_60", sm_count=56, fp32_flops_per_second=9.3e12,
                  dram_bytes_per_second=0.732e12, l2_bytes=4 * 2**20, tdp_watts=250.0)
    p4 = kc.Gpu(**{**p100.__dict__, "name": "p4", "architecture": "sm_61", "tdp_watts": 75.0})
    v100 = kc.Gpu(**{**p100.__dict__, "name": "v100", "architecture": "sm_70"})
    t4 = kc.Gpu(**{**p100.__dict__, "name": "t4", "architecture": "sm_75", "tdp_watts": 70.0})
    measured = {"p100": measured_gpu("p100", "sm_60", [0.1, 0.3, 0.5]), "p4": measured_gpu("p4", "sm_61", [-0.4, 0.2]),
                "v100": measured_gpu("v100", "sm_70", [0.9]), "t4": measured_gpu("t4", "sm_75", [0.6, 1.0])}
    gpus = {"p100": p100, "p4": p4, "v100": v100, "t4": t4}

    def held_out(gpu, among=measured):
        return kc.family_calibration(gpu, {k: v for k, v in among.items() if k != gpu.name}, gpus)

    # the P100's, less their median (0.3)
    assert held_out(p4).shapes["gemm"].residuals.tolist() == pytest.approx([-0.2, 0.0, 0.2])
    assert "GEMM shapes: its family's full-power boards' residuals (p100)" in held_out(p4).source
    assert "gemm" not in held_out(p100).shapes  # the P4 is its family's only other board: 75 W
    assert "GEMM shapes" not in held_out(p100).source
    assert held_out(t4).shapes["gemm"].residuals.tolist() == pytest.approx([0.0])  # the V100's: full power
    assert "its family's full-power boards' residuals (v100)" in held_out(t4).source
    assert "gemm" not in held_out(v100).shapes  # the T4: 70 W
    turing = kc.family_calibration(kc.Gpu(**{**p100.__dict__, "name": "t", "architecture": "sm_75"}),
                                   {"p100": measured["p100"], "p4": measured["p4"]}, gpus)
    assert "gemm" not in turing.shapes


def test_gemm_shapes_carry_where_the_same_waves_fall_on_its_sms():
    """A donor's GEMM residual of a shape is read where a call fills the board's SMs as that shape filled the
    donor's: a batched product's count (another product's output rows) times the ratio of their SMs. The V100
    (80 SMs) ran a batch of 20; the T4 (40) is as full with 10. Convolutions keep their shapes (cuDNN's autotuner
    times its algorithms on the board; shifted, the held-out boards' convolutions lost 0.3-1.7 points)."""
    v100 = kc.Gpu(name="v100", architecture="sm_70", sm_count=80, fp32_flops_per_second=14e12,
                  dram_bytes_per_second=0.9e12, l2_bytes=6 * 2**20, tdp_watts=250.0)
    t4 = kc.Gpu(**{**v100.__dict__, "name": "t4", "architecture": "sm_75", "sm_count": 40, "tdp_watts": 70.0})
    # features(): log2 rows, log2 k, log2 n, log2 count, batched flag
    gemm = np.array([[6.0, 7.0, 8.0, np.log2(20), shape_residuals.CATEGORY_OCTAVES],   # torch.bmm, batch 20
                     [10.0, 7.0, 8.0, 0.0, 0.0]])                                     # nn.Linear, 1024 rows
    conv = np.array([[12.0, 6.0, 6.0, 5.0, 9.0, 3.0]])
    v100_calibration = kc.KernelCalibration(source="t", gpu="v100", architecture="sm_70", classes={}, shapes={
        "gemm": shape_residuals.ShapeResiduals(gemm, np.array([0.4, 0.2])),
        "convolution": shape_residuals.ShapeResiduals(conv, np.array([0.3]))})
    held_out = kc.family_calibration(t4, {"v100": v100_calibration}, {"v100": v100, "t4": t4})
    assert np.allclose(held_out.shapes["gemm"].points,
                       [[6.0, 7.0, 8.0, np.log2(10), shape_residuals.CATEGORY_OCTAVES], [9.0, 7.0, 8.0, 0.0, 0.0]])
    assert held_out.shapes["convolution"].points.tolist() == conv.tolist()
    # so a T4 batch of 10 sits on the V100's batch-20 shape (its residual less the V100's median, 0.3); without the
    # shift it would sit an octave away
    query = gemm[:1].copy()
    query[0, 3] = np.log2(10)
    near, far = 1 / shape_residuals.DISTANCE_OFFSET, 1 / (3.0 + np.log2(10) + 3.0 + shape_residuals.DISTANCE_OFFSET)
    expected = (near * 0.1 + far * -0.1) / (near + far + shape_residuals.PRIOR_WEIGHT)
    assert np.log(held_out.shapes["gemm"].correction(query)[0]) == pytest.approx(expected)
    # a board of the donor's SMs reads them where they were measured
    same = kc.family_calibration(kc.Gpu(**{**t4.__dict__, "sm_count": 80}), {"v100": v100_calibration},
                                 {"v100": v100, "t4": t4})
    assert same.shapes["gemm"].points.tolist() == gemm.tolist()


@needs_data
def test_convolution_calls_grow_slower_over_their_measuring_run():
    """The evidence for host_drift: each GPU's convolution file draws its shapes alike over its run (every fifth's
    median batch, channels and size within 0.9-1.12 of the file's), yet over its kernels (as fitted) its calls of
    least work take 67-106 µs in the run's first fifth and 291-716 µs in its last (75-118 and 291-724 µs before a
    convolution's implicit-GEMM parameters were read from the calls that ran implicit GEMM). The growth per call
    (53-153 ns) is the same for implicit GEMM and fused Winograd calls (a host's cost, not a kernel's) and pairs by
    host: the Pascal boards' alike, the V100's and T4's alike. The other files step through their shapes (add's median batch 187 -> 10,497 over
    its run on the V100), so their order says nothing apart from their shapes: no drift is read from them."""
    data = kc.load_measurements(KERNELS)
    gpus = kc.load_dataset_gpus(KERNELS)
    shape = ["B", "Input_Channel", "Output_Channel", "Input_Size"]
    drift = {}
    for name, rows in data[data["op_class"] == "convolution"].groupby("gpu"):
        fifth = pd.qcut(rows["run_order"], 5, labels=False)
        alike = rows.groupby(fifth)[shape].median() / rows[shape].median()
        assert alike.to_numpy().min() >= 0.9 and alike.to_numpy().max() <= 1.12, (name, alike)
        calibration = kc.fit_gpu(rows, gpus[name], "t")
        drift[name] = calibration.classes["convolution"]["drift_seconds_per_call"]
        work = kc._Prepared(rows, gpus[name]).seconds(  # its kernels as fitted, no floor
            "convolution", {**calibration.classes["convolution"], "floor_seconds": 0.0})
        excess = rows["seconds"].to_numpy() - work
        light = work < np.quantile(work, 0.15)
        first, last = (np.median(excess[light & (fifth.to_numpy() == k)]) for k in (0, 4))
        assert 60e-6 < first < 120e-6 and 280e-6 < last < 730e-6, (name, first, last)
        for algorithm in ("direct", "fused"):  # the same growth whichever kernels cuDNN ran
            part = (rows["algorithm"] == algorithm).to_numpy() & (work < np.median(work))
            slope = np.polyfit(rows["run_order"].to_numpy(float)[part], excess[part], 1)[0]
            assert slope == pytest.approx(drift[name], rel=0.25), (name, algorithm, slope, drift[name])
    assert {name: round(value * 1e9) for name, value in drift.items()} == {
        "Tesla P100-PCIE-16GB": 153, "Tesla P4": 141, "Tesla T4": 82, "Tesla V100-PCIE-32GB": 53}
    add = data[(data["gpu"] == "Tesla V100-PCIE-32GB") & (data["operator"] == "add")]
    batches = add.groupby(pd.qcut(add["run_order"], 5, labels=False))["B"].median()
    assert batches.iloc[-1] > 50 * batches.iloc[0]
    work = kc._work(kc._Prepared(add, gpus["Tesla V100-PCIE-32GB"]), "elementwise")
    assert kc.host_drift(add["run_order"].to_numpy(float), work, add["seconds"].to_numpy()) == 0.0
    assert all("drift_seconds_per_call" not in params for cal in kc.load_shipped()[0].values()
               for op_class, params in cal.classes.items() if op_class != "convolution")


@needs_data
def test_generations_share_cublas_picks():
    """The evidence for GENERATIONS: of the GEMM shapes (nn.Linear and torch.bmm) measured on both, the P100 and
    the P4 (Pascal) ran the same cuBLAS kernel for 88%, the V100 (Volta) and the T4 (Turing) for 27%."""
    def kernels(gpu):
        frames = [pd.read_csv(KERNELS / op / f"{gpu}.csv.gz", usecols=["Kernel Name", "B", "M", "N", "K"]).assign(op=op)
                  for op in ("linear", "bmm")]
        table = pd.concat(frames).drop_duplicates(["op", "B", "M", "N", "K"]).set_index(["op", "B", "M", "N", "K"])
        return table["Kernel Name"].astype(str).str.split("(").str[0]

    def agreement(a, b):
        both = pd.concat([kernels(a).rename("a"), kernels(b).rename("b")], axis=1, join="inner")
        assert len(both) > 20_000
        return float((both["a"] == both["b"]).mean())

    assert agreement("Tesla_P100-PCIE-16GB", "Tesla_P4") == pytest.approx(0.884, abs=0.005)
    assert agreement("Tesla_V100-PCIE-32GB", "Tesla_T4") == pytest.approx(0.267, abs=0.005)
    assert kc.Gpu(name="p4", architecture="sm_61", sm_count=20, fp32_flops_per_second=5.5e12,
                  dram_bytes_per_second=1.9e11, l2_bytes=2**21).generation == "pascal"


def test_family_without_single_ops_takes_its_measured_roof_and_board_power():
    """A 72 W Ada board (no Ada single ops measured) takes the FP32 GEMM efficiency of its family's measured
    roof (a 700 W Hopper at 0.8 of 67 TFLOP/s), and past GPU Boost's time constant its board power at that roof's
    FLOPs per joule: 72 × 0.8 × 67e12 / 700 FLOP/s of the 0.8 × 30.3 TFLOP/s it reaches at boost."""
    measured = {"a100": kc.KernelCalibration(source="t", gpu="a100", architecture="sm_80", classes={"gemm": {
        "efficiency": 0.9, "memory_efficiency": 0.8, "floor_seconds": 40e-6, "tile_exponent": 1.5, "fill_k": 5.0}})}
    a100 = kc.Gpu(name="a100", architecture="sm_80", sm_count=108, fp32_flops_per_second=19.5e12,
                  dram_bytes_per_second=1.555e12, l2_bytes=40 * 2**20, tdp_watts=250.0)
    h100 = kc.Gpu(name="h100", architecture="sm_90", sm_count=132, fp32_flops_per_second=67e12,
                  dram_bytes_per_second=3.35e12, l2_bytes=50 * 2**20, tdp_watts=700.0)
    l4 = kc.Gpu(name="l4", architecture="sm_89", sm_count=58, fp32_flops_per_second=30.3e12,
                dram_bytes_per_second=0.3e12, l2_bytes=48 * 2**20, tdp_watts=72.0)
    roofs = {"h100": kc.MeasuredRoof(gpu=h100, gemm_efficiency=0.8, source="ceilings")}
    assert kc.family_calibration(h100, measured, {"a100": a100}, roofs).classes["gemm"]["efficiency"] == 0.8
    result = kc.family_calibration(l4, measured, {"a100": a100}, roofs)
    assert result.classes["gemm"]["efficiency"] == 0.8
    assert result.classes["gemm"]["sustained"] == pytest.approx(72 * 0.8 * 67e12 / 700 / (30.3e12 * 0.8))
    assert "measured roof of h100" in result.source


def test_power_limit_never_below_the_base_clock():
    """A board holds its base clock at its power limit: a 72 W L4 whose family donor (a 700 W H100, not power
    limited under SGEMM) gives too few FLOPs per watt runs its long FP32 GEMMs at its 795 MHz base clock's share
    of its 2,040 MHz boost clock, not lower. Checked on a measurement rooflow never fitted: an L4's FP32
    torch.mm (TF32 off) of 8192³ and 10240³ at 10.66 and 11.11 TFLOP/s (30 calls back to back; third-party,
    github.com/zzc0721/torch-performance-test-data issue #120). Without the floor: 5.5 TFLOP/s, half of it."""
    device = load_devices(CATALOGUE)["l4"]
    calibration, gpu = kc.for_gpu(device)
    assert gpu.base_clock_fraction == pytest.approx(795 / 2040, abs=1e-4)
    assert calibration.classes["gemm"]["sustained"] == pytest.approx(795 / 2040, abs=1e-4)
    assert "to 0.39 of it (its base clock's share" in calibration.source  # what the CLI prints
    # its tensor-core paths see that limit too (test_tensor_core_work_at_the_boards_power); a GPU whose power holds
    # its boost clock does not
    assert "tensor-core (TF32/fp16/bf16) work at 0.84–0.85 of the h100" in for_device(device).source
    assert "tensor-core (TF32/fp16/bf16) work" not in for_device(load_devices(CATALOGUE)["a100-pcie-80gb"]).source
    rows = pd.DataFrame([{"operator": "linear", "op_class": "gemm", "B": 1, "M": n, "N": n, "K": n}
                         for n in (8192, 10240)])
    measured = np.array([10.66e12, 11.11e12])
    achieved = 2 * rows["M"].to_numpy(float) ** 3 / kc.predict_seconds(rows, gpu, calibration)
    assert np.all(np.abs(measured / achieved - 1) <= 0.25)
    unfloored = replace(gpu, base_clock_fraction=None)
    achieved = 2 * rows["M"].to_numpy(float) ** 3 / kc.predict_seconds(rows, unfloored, kc.calibration_of(unfloored, "l4"))
    assert np.all(measured / achieved > 1.8)


def test_tensor_core_work_at_the_boards_power():
    """A tensor-core FLOP costs boards of one process node the same energy: a 72 W L4 (121 dense bf16 TFLOP/s,
    60 TF32) has 0.84 of the watts per datasheet FLOP/s of the 700 W H100 SXM (989, 495) whose tensor-core
    efficiencies it takes, so it runs at 0.84 of them. Checked on measurements rooflow never fitted (third-party
    torch.mm, best of n = 1024 ... 10240; github.com/zzc0721/torch-performance-test-data issue #120): TF32 31.9,
    fp16 68.8, bf16 70.9 TFLOP/s, which the uncapped efficiencies over-predicted 1.35-1.5x (0.67-0.74; the
    benchmark's table) and these predict within 25% (test_step_model_gpus' third-party rates). An L40S (350 W
    for 362 TFLOP/s) has more watts per FLOP/s than the H100: uncapped; a GPU of another node (A10, 8 nm):
    nothing known, uncapped."""
    devices = load_devices(CATALOGUE)
    fractions = kc.tensor_core_power_fractions(devices["l4"])
    assert fractions["bf16"] == pytest.approx((72 / 121) / (700 / 989.4), abs=1e-3)
    assert fractions["tf32"] == pytest.approx((72 / 60) / (700 / 494.7), abs=1e-3)
    assert kc.tensor_core_power_fractions(devices["l40s"]) == {}
    assert kc.tensor_core_power_fractions(devices["a10"]) == {}
    l4, h100 = for_device(devices["l4"]), for_device(devices["h100-sxm5-80gb"])
    for path in ("bf16_forward", "tf32_backward", "gemm_bf16", "gemm_tf32_wgrad", "sdpa_flash_forward_bf16"):
        precision = next(p for p in ("tf32", "bf16") if p in path)
        assert l4.matmul_efficiency_of(path) == pytest.approx(h100.matmul_efficiency_of(path) * fractions[precision])
    assert l4.matmul_efficiency_of("fp32") == pytest.approx(l4.matmul_efficiency["fp32"])  # the kernel model's


def test_roof_from_the_h100_ceilings():
    """The real H100's ceilings (51.9 TFLOP/s FP32 torch.mm at n = 8192): its efficiency is that rate over
    67 TFLOP/s and over the last wave of 4,096 128×128 tiles on 132 SMs (32 waves: 4096/4224)."""
    ceilings = json.loads(H100_CEILINGS.read_text())
    device = load_devices(CATALOGUE)["h100-sxm5-80gb"]
    roof = kc.roof_from_ceilings(ceilings, device)
    assert roof.gemm_efficiency == pytest.approx(ceilings["peak_flops_per_second"]["fp32"] / 67e12 / (4096 / 4224),
                                                 abs=1e-4)
    _, _, _, shipped = kc.load_shipped()
    assert shipped["h100-sxm5-80gb"].gemm_efficiency == roof.gemm_efficiency
    assert shipped["h100-sxm5-80gb"].dram_efficiency == roof.dram_efficiency


def test_h100_elementwise_calls_stream_at_its_measured_triad():
    """The H100's ceilings measured its STREAM triad, torch.add over 0.8-1.7 GB arrays: 3.03 TB/s of the 3.35
    its datasheet gives (0.91; the median of the GPUs with single ops measured, which it took before, 0.76).
    Its kernel calibration's add, less the launch floor, reproduces every measured triad (the median over
    repeats at each size) within 3%, though its other parameters are the H200's single ops' (its architecture's);
    the H200 keeps its own fit (another memory)."""
    ceilings = json.loads(H100_CEILINGS.read_text())
    devices = load_devices(CATALOGUE)
    roof = kc.roof_from_ceilings(ceilings, devices["h100-sxm5-80gb"])
    assert roof.dram_efficiency == pytest.approx(
        ceilings["memory_tests_bytes_per_second"]["dram_triad"]["best"] / 3.35e12, abs=1e-4)
    calibration, gpu = kc.for_gpu(devices["h100-sxm5-80gb"])
    assert calibration.classes["elementwise"]["memory_efficiency"] == roof.dram_efficiency
    assert "elementwise DRAM efficiency 0.91, its own ceilings' triad" in calibration.source
    triads = pd.DataFrame([run for run in ceilings["runs"] if run.get("test") == "triad" and run.get("level") == "dram"])
    measured = triads.groupby("size")["seconds"].median()
    rows = pd.DataFrame({"operator": "add", "op_class": "elementwise", "B": measured.index.to_numpy(float), "H": 1.0})
    predicted = kc.predict_seconds(rows, gpu, calibration) - kc.launch_floors(rows, gpu, calibration)
    assert len(measured) >= 2
    np.testing.assert_allclose(predicted, measured.to_numpy(), rtol=0.03)
    # the H200 keeps its own single ops' fit (another memory), which the H100 does not take
    h200, _ = kc.for_gpu(devices["h200-sxm-141gb"])
    assert h200.classes["elementwise"]["memory_efficiency"] != roof.dram_efficiency and "fitted on" in h200.source


@needs_data
def test_check_scores_shipped_calibrations_on_other_gpus(tmp_path):
    """`--check DIR` predicts a measured GPU with its own calibration and a GPU rooflow has no single ops of
    (here the T4's rows relabelled as an L4, with the L4's datasheet) from its family; a GPU the catalogue
    does not know is refused in one sentence that says how to add it."""
    rows = pd.read_csv(KERNELS / "add" / "Tesla_T4.csv.gz").head(60)
    for name, device in (("Tesla T4", "Tesla_T4"), ("NVIDIA L4", "NVIDIA_L4")):
        (tmp_path / "add").mkdir(exist_ok=True)
        rows.assign(Device=name).to_csv(tmp_path / "add" / f"{device}.csv.gz", index=False)
    (tmp_path / "device_configs").mkdir()
    (tmp_path / "device_configs" / "Tesla_T4.json").write_text((KERNELS / "device_configs" / "Tesla_T4.json").read_text())
    (tmp_path / "device_configs" / "NVIDIA_L4.json").write_text(json.dumps(
        {"Device": "NVIDIA L4", "Dev_Mem": 24, "Mem_Bw": 300, "Num_Sm": 58, "Core_Per_SM": 128, "Freq": 2040,
         "SingleFLOPs": 30300, "L2Cache": 48}))
    table = kc.check_shipped(tmp_path).set_index("gpu")
    assert set(table.index) == {"Tesla T4", "NVIDIA L4"}
    # the L4's base and boost clocks from the catalogue (the floor of its power-limited GEMM clock)
    assert kc.load_dataset_gpus(tmp_path)["NVIDIA L4"].base_clock_fraction == pytest.approx(795 / 2040, abs=1e-4)
    assert table.loc["Tesla T4", "within"] >= 0.9  # its own calibration, on rows it was fitted on
    assert 0.0 <= table.loc["NVIDIA L4", "within"] <= 1.0 and table.loc["NVIDIA L4", "rows"] == 60
    (tmp_path / "device_configs" / "NVIDIA_L4.json").write_text(json.dumps(
        {"Device": "Acme G1", "Dev_Mem": 24, "Mem_Bw": 300, "Num_Sm": 58, "Core_Per_SM": 128, "Freq": 2040,
         "SingleFLOPs": 30300, "L2Cache": 48}))
    with pytest.raises(RooflowError, match="not in rooflow's device catalogue: add it to config/devices.yaml"):
        kc.check_shipped(tmp_path)
    with pytest.raises(RooflowError, match="no single-op measurements found"):
        kc.check_shipped(tmp_path / "device_configs")


@needs_data
def test_a_users_own_measurements_are_not_called_the_public_data_sets(tmp_path):
    """A calibration's source names who measured its single ops: a folder in the public data set's layout with
    neither rooflow's provenance file nor a PROVENANCE.md naming the data set's repository beside it holds
    someone else's measurements — its calibration had said "the public NeuSight data set"; the data set's own
    folder still says so."""
    (tmp_path / "add").mkdir()
    pd.read_csv(KERNELS / "add" / "Tesla_T4.csv.gz").head(60).to_csv(tmp_path / "add" / "Tesla_T4.csv.gz", index=False)
    (tmp_path / "device_configs").mkdir()
    (tmp_path / "device_configs" / "Tesla_T4.json").write_text((KERNELS / "device_configs" / "Tesla_T4.json").read_text())
    result, _ = kc.calibrate_measured(tmp_path)
    source = result["measured"]["Tesla T4"]["calibration"]["source"]
    assert "NeuSight" not in source and "measured outside rooflow (nothing beside them says by whom)" in source
    assert kc.measurement_origin(KERNELS) == "the public NeuSight data set"
    (tmp_path / "PROVENANCE.md").write_text("Measured on our lab's T4 with NeuSight's collect.py\n")
    assert kc.measurement_origin(tmp_path) == "measured outside rooflow (its PROVENANCE.md says by whom)"


@pytest.mark.parametrize("key, value", [("Num_Sm", 0), ("Num_Sm", 40.5), ("Mem_Bw", -320), ("SingleFLOPs", "8.1 TF"),
                                        ("L2Cache", float("inf"))])
def test_a_device_config_of_zero_or_negative_numbers_is_refused(tmp_path, key, value):
    """Num_Sm 0 or a negative Mem_Bw calibrated NaN efficiencies that estimate then used (exit 0): one sentence
    that names the file, the key and what it holds."""
    config = {"Device": "Tesla T4", "Dev_Mem": 15, "Mem_Bw": 320, "Num_Sm": 40, "Core_Per_SM": 64, "Freq": 1590,
              "SingleFLOPs": 8141, "L2Cache": 4}
    (tmp_path / "device_configs").mkdir()
    (tmp_path / "device_configs" / "Tesla_T4.json").write_text(json.dumps({**config, key: value}).replace("Infinity", "1e999"))
    with pytest.raises(RooflowError, match=rf"Tesla_T4.json: its {key} is .*: give the GPU's"):
        kc.load_dataset_gpus(tmp_path)


@needs_data
def test_check_says_when_a_device_config_is_not_the_board_it_is_predicted_as(tmp_path, capsys):
    """A T4's config renamed "Tesla V100-SXM2-32GB" (40 SMs, 320 GB/s) was said to be predicted as the V100 board
    "that its device config's SMs and bandwidth match"; the data set's own configs agree with their boards."""
    from rooflow import cli

    assert kc.config_disagreements(KERNELS) == []
    (tmp_path / "add").mkdir()
    rows = pd.read_csv(KERNELS / "add" / "Tesla_T4.csv.gz").head(30)
    rows.assign(Device="Tesla V100-SXM2-32GB").to_csv(tmp_path / "add" / "V100.csv.gz", index=False)
    (tmp_path / "device_configs").mkdir()
    config = json.loads((KERNELS / "device_configs" / "Tesla_T4.json").read_text())
    (tmp_path / "device_configs" / "V100.json").write_text(json.dumps({**config, "Device": "Tesla V100-SXM2-32GB"}))
    assert cli.main(["calibrate-kernels", "--check", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "match" not in out.split("GPU (shipped calibration)")[0]
    assert ("Tesla V100-SXM2-32GB is predicted as the catalogue's v100-sxm2-16gb (Tesla V100-SXM2-16GB: 80 SMs, "
            "900 GB/s), but its config gives 40 SMs and 320 GB/s: check that the config is this GPU's") in out


def test_convolution_algorithm_read_from_its_kernels():
    """The algorithm of a measured convolution is the one its kernels name (the data set's Kernels column)."""
    assert kc.convolution_algorithm(
        ";void cudnn::winograd::generateWinogradTilesKernel<0, float, float>(...)"
        ";cudnn_infer_maxwell_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148n_nt_v1") == "fused"
    assert kc.convolution_algorithm(
        ";void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(...);maxwell_sgemm_64x64_nn"
        ";void cudnn::winograd_nonfused::winogradForwardOutput4x4<float, float>(...)") == "nonfused"
    assert kc.convolution_algorithm(";fft2d_r2c_32x32;maxwell_gcgemm_64x64_nt;fft2d_c2r_32x32") == "fft"
    assert kc.convolution_algorithm(";cask_cudnn_infer::computeOffsetsKernel(...)"
                                    ";cudnn_infer_maxwell_scudnn_128x64_relu_small_nn_v1") == "direct"
    assert kc.convolution_algorithm(";void implicit_convolve_sgemm<float, float>(...)") == "direct"
    assert kc.convolution_algorithm(float("nan")) is None and kc.convolution_algorithm(";") is None
    # a Winograd kernel named otherwise is Winograd, never implicit GEMM (whose parameters its calls would fit)
    assert kc.convolution_algorithm(";sm80_xmma_fprop_winograd_f32f32_f32f32_f32_nchwkcrs_nchw") == "fused"


@needs_data
def test_measured_convolutions_name_their_algorithm(sample):
    """Every convolution of the data set names the algorithm cuDNN ran; the model's non-fused Winograd is
    within ±30% of the calls that ran it at the median on every GPU, each fitted on its own calls. Its fused
    Winograd is not (2.2-6.1x slow on the full data: benchmarks/README.md, convolution algorithms)."""
    convolutions = sample[sample["op_class"] == "convolution"]
    assert convolutions["algorithm"].notna().all()
    assert set(convolutions["algorithm"]) == {"direct", "fused", "nonfused", "fft"}
    table = kc.algorithm_agreement(sample, kc.load_dataset_gpus(KERNELS)).set_index(["gpu", "algorithm"])
    assert table["calls"].groupby(level="gpu").sum().to_dict() == convolutions.groupby("gpu").size().to_dict()
    assert table["model_picks_it"].between(0.0, 1.0).all()
    nonfused = table.xs("nonfused", level="algorithm")["median_ratio"]
    assert len(nonfused) == 4 and nonfused.between(0.7, 1.3).all(), nonfused.to_dict()


@needs_data
def test_a_convolutions_implicit_gemm_parameters_come_from_the_calls_that_ran_it():
    """The data set's convolutions name the kernels each call ran, so a GPU's implicit-GEMM parameters (efficiency,
    tile exponent, k fill) are fitted on the calls that ran implicit GEMM, each priced as implicit GEMM. Before, its
    efficiency was pinned at the GPU's GEMMs' (0.47 on the 70 W T4: cuBLAS's SGEMMs under its power limit) and the
    fit let Winograd's free efficiency stand in for the fast implicit GEMMs: the T4's model picked Winograd for 1,047
    of its 1,631 implicit-GEMM calls (7% picked right), which it priced 1.42x their time as implicit GEMM. The 3x3
    shapes' residuals hid it; a 1x1 convolution, which no single op of the data set has and only implicit GEMM runs,
    took the slow price (NVIDIA's published ResNet-50 FP32 inference on a T4: 0.69-0.78 of the prediction, now
    0.85-0.94: test_step_model_gpus). The rate its Winograd calls ran at is the time model's fp32_fast where
    it beats implicit GEMM's."""
    data = kc.load_measurements(KERNELS, ["Tesla T4"])
    rows = data[(data["gpu"] == "Tesla T4") & data["operator"].isin(["conv", "linear", "bmm"])]
    table = kc.algorithm_agreement(rows, kc.load_dataset_gpus(KERNELS)).set_index("algorithm")
    assert table.loc["direct", "calls"] == 1631
    assert table.loc["direct", "model_picks_it"] >= 0.85  # was 0.07
    assert table.loc["direct", "median_ratio"] == pytest.approx(1.0, abs=0.1)  # was 1.42
    t4 = kc.load_shipped()[0]["Tesla T4"]
    convolution = t4.classes["convolution"]
    assert convolution["efficiency"] > 1.5 * t4.classes["gemm"]["efficiency"] * t4.classes["gemm"]["sustained"]
    # the median of its Winograd calls of 1 ms of kernels or more, in the direct convolution's FLOPs
    assert convolution["winograd_rate"] == pytest.approx(0.74, abs=0.01)
    device = load_devices(CATALOGUE)["t4"]
    # cuDNN's autotuner takes Winograd only where it beats implicit GEMM: never below the latter's rate (0.76)
    assert kc.time_model_calibration(device, for_device(load_devices(CATALOGUE)["h100-sxm5-80gb"])
                                     ).matmul_efficiency["fp32_fast"] == pytest.approx(
        max(0.74, convolution["efficiency"]) / 0.8, abs=1e-3)
    # a 1x1 convolution of ResNet-50 (batch 64, 256 -> 64 channels at 56x56: 6.6 GFLOP) at 0.65 of the T4's peak
    # (ResNet-50's 1x1 convolutions took 0.41 before: its GEMMs' efficiency), by the 3x3 calls that ran implicit GEMM
    one_by_one = pd.DataFrame([{"operator": "conv", "op_class": "convolution", "B": 64, "Input_Channel": 256,
                                "Output_Channel": 64, "Kernel_Szie": 1, "Input_Size": 56, "Stride": 1, "Padding": 0}])
    gpu = kc.load_shipped()[1]["Tesla T4"]
    seconds = kc.kernel_seconds(one_by_one, gpu, t4)[0]
    assert 0.55 < 2 * 64 * 56 * 56 * 256 * 64 / seconds / gpu.fp32_flops_per_second < 0.75


@needs_data
def test_fused_winograd_blocks_are_32_channels_by_128_pixels():
    """cuDNN's fused Winograd kernel (scudnn_winograd_128x128_..._tile<i><r><c>) runs a block per 32 output
    channels × i images × 2r rows × 2c columns of output (F(2×2, 3×3): r × c Winograd tiles of 2×2 pixels,
    128 pixels in all): its grid is ceil(B / i)·ceil(Cout / 32) × ceil(Ho / 2r) × ceil(Wo / 2c) for every one
    of the data set's fused calls, not the 128 × 128 tile over N·Ho·Wo pixels its name suggests and the
    model's FUSED_WINOGRAD_TILES assumes (the next step: benchmarks/README.md, convolution algorithms)."""
    calls = 0
    for path in sorted((KERNELS / "conv").glob("*.csv*")):
        frame = pd.read_csv(path, usecols=["Kernel Name", "B", "Output_Channel", "Input_Size", "Padding",
                                           "Grid x", "Grid y", "Grid z"])
        fused = frame[frame["Kernel Name"].str.contains("scudnn_winograd", na=False)]
        tag = fused["Kernel Name"].str.extract(r"_tile(\d)(\d)(\d)")[[0, 1, 2]].astype(int)
        images, rows, columns = tag[0], 2 * tag[1], 2 * tag[2]
        out = fused["Input_Size"] + 2 * fused["Padding"] - 2
        assert (fused["Grid x"] == np.ceil(fused["B"] / images) * np.ceil(fused["Output_Channel"] / 32)).all()
        assert (fused["Grid y"] == np.ceil(out / rows)).all() and (fused["Grid z"] == np.ceil(out / columns)).all()
        assert (images * rows * columns == 128).all()
        calls += len(fused)
    assert calls == 6865


@needs_data
def test_the_data_sets_launches_count_the_p4s_sms_as_20():
    """Every GEMM and convolution call's grid over its "Blocks per SM" is the GPU's SM count: its device config's
    Num_Sm on the A100, P100, T4 and V100, but 20 on the Tesla P4, whose config says 40 (of 64 lanes; a GP104 SM
    has 128). The loader takes the launches' count (kc.launched_sm_count), as the profiler read it off the board."""
    launched = {}
    for operator in ("linear", "bmm", "conv"):
        for path in sorted((KERNELS / operator).glob("*.csv*")):
            frame = pd.read_csv(path, usecols=["Device", "Blocks per SM", "Grid x", "Grid y", "Grid z"])
            sms = (frame["Grid x"] * frame["Grid y"] * frame["Grid z"] / frame["Blocks per SM"]).round()
            assert sms.nunique() == 1, (path.name, sms.value_counts().head().to_dict())
            launched.setdefault(frame["Device"].iloc[0], set()).add(int(sms.iloc[0]))
    assert launched == {"NVIDIA A100-PCIE-40GB": {108}, "Tesla P100-PCIE-16GB": {56}, "Tesla P4": {20},
                        "Tesla T4": {40}, "Tesla V100-PCIE-32GB": {80}}
    gpus = kc.load_dataset_gpus(KERNELS)
    assert {name: gpu.sm_count for name, gpu in gpus.items()} == {name: counts.pop() for name, counts in launched.items()}
    assert gpus["Tesla P4"].fp32_flops_per_second == pytest.approx(5.699e12)  # 20 SMs of 128 lanes, as 40 of 64


def test_a_gpus_sm_count_is_what_its_launches_report(tmp_path):
    """A device config's Num_Sm gives way to the SM count the GPU's own launches report (grid blocks over "Blocks
    per SM", which the profiler reads off the board), where every launch agrees; launches that disagree, or
    rows without the launch columns (elementwise files), leave the config's."""
    config = {"Device": "Tesla P4", "Dev_Mem": 8, "Mem_Bw": 192, "Num_Sm": 40, "Core_Per_SM": 64, "Freq": 1113,
              "SingleFLOPs": 5699, "L2Cache": 2}
    (tmp_path / "device_configs").mkdir()
    (tmp_path / "device_configs" / "Tesla_P4.json").write_text(json.dumps(config))
    (tmp_path / "linear").mkdir()
    launches = pd.DataFrame({"Device": "Tesla P4", "Latency": 0.05, "B": 1, "M": [58, 126, 4096], "N": [13, 115, 64],
                             "K": [141, 72, 4096], "Grid x": [2, 1, 64], "Grid y": [2, 4, 64], "Grid z": 1,
                             "Blocks per SM": [0.2, 0.2, 204.8]})
    launches.to_csv(tmp_path / "linear" / "Tesla_P4.csv", index=False)
    assert kc.launched_sm_count(tmp_path, "Tesla P4") == 20
    assert kc.load_dataset_gpus(tmp_path)["Tesla P4"].sm_count == 20
    assert kc.launched_sm_count(tmp_path, "Tesla T4") is None  # no rows of it
    launches.assign(**{"Blocks per SM": [0.2, 0.1, 204.8]}).to_csv(tmp_path / "linear" / "Tesla_P4.csv", index=False)
    assert kc.launched_sm_count(tmp_path, "Tesla P4") is None
    assert kc.load_dataset_gpus(tmp_path)["Tesla P4"].sm_count == 40
    launches.drop(columns="Blocks per SM").to_csv(tmp_path / "linear" / "Tesla_P4.csv", index=False)
    assert kc.load_dataset_gpus(tmp_path)["Tesla P4"].sm_count == 40


@needs_data
def test_a_gemm_kernels_first_tile_dimension_runs_along_the_outputs_columns():
    """cuBLAS is column-major, so PyTorch's torch.bmm (B, M, N) @ (B, N, K) is its K × M product: a kernel named
    *_AxB tiles A of the output's K columns by B of its M rows. The in-plane grid of every one of the data set's
    87,485 bmm calls so named is ceil(K / A) · ceil(M / B) (its z the batch, or a split of k for a few calls),
    against 30% of the Pascal boards' calls the other way round. BATCHED_TILES name them as the kernels do (Pascal's
    128×64) and the model lays them as (rows, columns), kc._rows_by_columns (benchmarks/README.md, "cuBLAS tiles the
    output's columns first")."""
    calls, other_way = 0, {}
    for path in sorted((KERNELS / "bmm").glob("*.csv*")):
        frame = pd.read_csv(path, usecols=["Device", "Kernel Name", "B", "M", "K", "Grid x", "Grid y", "Grid z"])
        tile = frame["Kernel Name"].str.extract(r"sgemm_(\d+)x(\d+)_").astype(float)
        # not Pascal's sgemm_32x32x32_NN(_vec) and sgemm_128x128x8_NN (72 and 66 calls), grids of their own
        named = tile.notna().all(axis=1)
        assert named.mean() > 0.99, path.name
        frame, columns, rows = frame[named], tile[0][named], tile[1][named]
        assert (frame["Grid x"] * frame["Grid y"] == np.ceil(frame["K"] / columns) * np.ceil(frame["M"] / rows)).all()
        assert (frame["Grid z"] % frame["B"] == 0).all() and (frame["Grid z"] > frame["B"]).sum() <= 16
        swapped = np.ceil(frame["M"] / columns) * np.ceil(frame["K"] / rows) * frame["B"]
        other_way[frame["Device"].iloc[0]] = float(np.mean(swapped == frame["Grid x"] * frame["Grid y"] * frame["Grid z"]))
        calls += len(frame)
    assert calls == 87485
    assert 0.25 < other_way["Tesla P100-PCIE-16GB"] < 0.35 and 0.25 < other_way["Tesla P4"] < 0.35
    assert kc.BATCHED_TILES["pascal"] == (128, 64)


H200_SINGLE_OPS = ROOT / "tests" / "data" / "real" / "gpu-2026-11-28"


def _h200_held_out(root: Path) -> tuple[pd.DataFrame, kc.Gpu, kc.KernelCalibration]:
    """The single ops of an H200 run, its GPU, and its kernel calibration from the other measured GPUs alone
    (what rooflow shipped for it before its own single ops: all GPUs' parameters, the H100's roof)."""
    calibrations, gpus, _, roofs = kc.load_shipped()
    data = kc.load_measurements(root)
    gpu = kc.load_dataset_gpus(root)["NVIDIA H200"]
    others = {name: calibration for name, calibration in calibrations.items() if name != "NVIDIA H200"}
    return data, gpu, kc.family_calibration(gpu, others, gpus, roofs)


def _within(rows: pd.DataFrame, gpu: kc.Gpu, calibration: kc.KernelCalibration) -> pd.Series:
    """Per class, the fraction of ``rows`` predicted within ±25%."""
    return pd.DataFrame(kc._score(rows, kc.predict_seconds(rows, gpu, calibration), gpu.name, 0.25)
                        ).set_index("op_class")["within"]


@pytest.mark.parametrize("run, least", [
    ("single-ops-h200", {"convolution": 0.8, "gemm": 0.7, "elementwise": 0.9, "normalization": 0.85,
                         "softmax": 0.95}),
    ("single-ops-h200-repeat", {"convolution": 0.65, "gemm": 0.59, "elementwise": 0.9, "normalization": 0.7,
                                "softmax": 0.95}),
])
def test_h200_single_ops_held_out(run, least):
    """A Hopper GPU whose single ops the calibration did not see: 2,020 FP32 single ops rooflow measured on a lent
    H200 (`rooflow ceilings --single-ops`, two runs of the same seeded shapes), against the kernel model of the
    other measured GPUs (the data set's, with the H100's roof: what rooflow shipped for the H200 before its own).
    With the launch floors of the host that measured them its kernels hold (pinned per class at what they
    measured: convolution 80% / 70% (70% / 59% before the floor took the runs' growth per call: kc.host_drift),
    GEMM 73% / 60% (54% / 53% with Hopper's bmm in Ampere's one 128×128 tile), elementwise 93% / 92%,
    normalization 88% / 72%, softmax 98% within ±25%). With the data set's hosts' floors (torch 2.1) the floor is
    most of the elementwise error; a convolution's is the data set's runs' middle call's (their 5,000th shape:
    195-425 µs) less their growth per call, so this run's 500 calls take 24-80 µs against this host's 21 µs, which
    does not grow (torch 2.11, cuDNN 9.19): 44% / 50% within (9% / 9% at the middle call's floor for every call)."""
    data, gpu, calibration = _h200_held_out(H200_SINGLE_OPS / run)
    as_measured = _within(data, gpu, calibration)
    host = _within(data, gpu, kc.with_host_floors(data, gpu, calibration))
    assert set(host.index) == set(kc.CLASSES) and len(data) == 2020
    for op_class, fraction in least.items():
        assert host[op_class] >= fraction, (op_class, host[op_class])
    assert as_measured["convolution"] >= 0.4 and as_measured["elementwise"] < host["elementwise"] - 0.3
    if run == "single-ops-h200-repeat":
        own = kc.fit_gpu(data, gpu, "t").classes["convolution"]
        assert "drift_seconds_per_call" not in own and own["floor_seconds"] < 25e-6


def test_h200_single_ops_as_shipped_on_its_repeat_run():
    """rooflow ships the H200's single ops (the first run) as its calibration and its architecture's (the H100's).
    The second run of the same shapes, with its host's launch floors (`calibrate-kernels --check`'s second table):
    convolution 85%, GEMM 75%, elementwise 92%, normalization 72%, softmax 98% within ±25% — against 70%, 60%, 92%,
    72%, 98% from the other GPUs (above). Its memory-bound classes do not move: LayerNorms keep the model of
    rooflow's recordings (row cost), and elementwise and softmax calls are mostly floor. The first run itself is
    the fit's own data (convolution and GEMM 99%)."""
    table = kc.check_shipped(H200_SINGLE_OPS / "single-ops-h200-repeat", host_floors=True).set_index("op_class")
    data, gpu, held_out = _h200_held_out(H200_SINGLE_OPS / "single-ops-h200-repeat")
    before = _within(data, gpu, kc.with_host_floors(data, gpu, held_out))
    least = {"convolution": 0.85, "gemm": 0.75, "elementwise": 0.9, "normalization": 0.7, "softmax": 0.95}
    for op_class, fraction in least.items():
        assert table.loc[op_class, "within"] >= fraction, (op_class, table.loc[op_class, "within"])
    assert table.loc["convolution", "within"] >= before["convolution"] + 0.1
    assert table.loc["gemm", "within"] >= before["gemm"] + 0.1
    assert table.loc["normalization", "within"] == before["normalization"]


def _h200_convolution_tiles() -> dict[tuple[int, int], int]:
    """The implicit-GEMM tiles the H200's 500 single convolutions launched (cuDNN 9.19), with their calls."""
    kernels = pd.read_csv(H200_SINGLE_OPS / "single-ops-h200" / "conv" / "NVIDIA_H200.csv.gz")["Kernels"]
    tiles = kernels.str.extract(r"xmma_fprop_implicit_gemm\w*?_tilesize(\d+)x(\d+)").dropna().astype(int)
    return tiles.value_counts().to_dict()


def test_h200_single_convolutions_run_no_winograd():
    """The kernels each of the H200's 500 single 3×3 stride-1 convolutions launched (cuDNN 9.19): implicit GEMM or
    FFT, never Winograd — NO_FORWARD_WINOGRAD, read from 500 calls rather than rooflow's five model traces. Their
    implicit GEMMs tile 256×64 and 128×32 (IMPLICIT_GEMM_TILES_OF) and, for 173 small ones (median 5 images of
    15×15), 32×32, a tile the model does not offer: offered, it prices those too fast (convolutions within ±25%
    with the host's floors: 70% → 60%, the repeat run 59% → 47%)."""
    data = kc.load_measurements(H200_SINGLE_OPS / "single-ops-h200")
    convolutions = data[data["operator"] == "conv"]
    assert len(convolutions) == 500 and "sm_90" in kc.NO_FORWARD_WINOGRAD
    assert convolutions["algorithm"].value_counts().to_dict() == {"direct": 474, "fft": 26}
    counts = _h200_convolution_tiles()
    assert set(counts) == {*kc.IMPLICIT_GEMM_TILES_OF["sm_90"], (32, 32)} and counts[(32, 32)] == 173


LIBRARY_KERNELS = ROOT / "tests" / "data" / "real" / "library-kernels"


def _cudnn_kernels(version: str) -> dict[str, dict]:
    """Per architecture (sm_XY), the FP32 forward-convolution kernels one cuDNN release ships, read from its
    library (tests/data/real/library-kernels/inventory.py)."""
    return json.loads((LIBRARY_KERNELS / f"cudnn-{version}.json").read_text())["architectures"]


def _loadable(architecture: str, kernels: dict[str, dict], family: str) -> set[str]:
    """The kernels of ``family`` (a list of names, or a dict by kernel family) a GPU of ``architecture`` can
    load: those of its own module and of its major version's older ones (an sm_89 GPU runs sm_80's and sm_86's
    compiled code; there is no sm_89 module)."""
    number = int(architecture[3:])
    return {name for module, listed in kernels.items() if int(module[3:]) // 10 == number // 10
            and int(module[3:]) <= number for name in listed[family]}


def test_no_forward_winograd_where_the_data_sets_cudnn_ships_no_fused_winograd():
    """cuDNN 8.9.2, the data set's (torch 2.1.0+cu121: the library the held-out GPUs were measured with), ships
    fused FP32 Winograd (scudnn_winograd_128x128) for every architecture of the catalogue but Hopper — the same
    as 9.19, rooflow's H200 recordings' — and no legacy scudnn implicit GEMM there either; the Ada boards (sm_89)
    load sm_80's and sm_86's modules, which have both. So NO_FORWARD_WINOGRAD holds for the library the checks
    ran, not only for cuDNN 9. Non-fused Winograd's forward transforms ship for Hopper in both; cuDNN 9.19 never picked them
    in the H200's 500 3×3 stride-1 convolutions (test_h200_single_convolutions_run_no_winograd)."""
    architectures = {device.architecture for device in load_devices(CATALOGUE).values()
                     if device.kind == "cuda" and device.architecture}
    for version in ("8.9.2.26", "9.19.0.56"):
        kernels = _cudnn_kernels(version)
        hopper = kernels["sm_90"]
        assert not hopper["fused_winograd"] and not hopper["legacy_implicit_gemm"]
        assert {f"winogradForward{part}4x4IffE" for part in ("Data", "Filter", "Output")} <= {
            re.sub(r"^_ZN5cudnn17winograd_nonfused\d+(\w+?4x4IffE).*", r"\1", name)
            for name in hopper["nonfused_winograd_forward_fp32"]}
        assert all(kernels[a]["fused_winograd"] for a in ("sm_75", "sm_80", "sm_86"))
    kernels = _cudnn_kernels("8.9.2.26")
    without = {a for a in architectures if not _loadable(a, kernels, "fused_winograd")}
    assert without == set(kc.NO_FORWARD_WINOGRAD) == {"sm_90"} and "sm_89" in architectures


@needs_data
def test_every_scudnn_kernel_the_data_set_launched_is_in_its_cudnns_module():
    """The library inventory reads what cuDNN launches: each of the 53 scudnn kernels (fused Winograd and legacy
    implicit GEMM: 11-15 per GPU, 12,218 calls) the data set's four GPUs launched in their convolutions (its
    names are lower-cased) is among those cuDNN 8.9.2 ships for that GPU's architecture."""
    kernels = _cudnn_kernels("8.9.2.26")
    gpus = kc.load_dataset_gpus(KERNELS)
    checked = 0
    for path in sorted((KERNELS / "conv").glob("*.csv.gz")):
        frame = pd.read_csv(path, usecols=["Device", "Kernels"])
        launched = {name for names in frame["Kernels"].dropna() for name in names.split(";") if "scudnn" in name}
        architecture = gpus[frame["Device"].iloc[0]].architecture
        fused = {name.lower() for name in _loadable(architecture, kernels, "fused_winograd")}
        legacy = {name.lower() for name in _loadable(architecture, kernels, "legacy_implicit_gemm")}
        assert launched and launched <= fused | legacy, (path.name, sorted(launched - fused - legacy)[:3])
        assert {name for name in launched if "winograd" in name} <= fused
        checked += len(launched)
    assert checked == 53


def test_hopper_implicit_gemm_tiles_are_its_cudnns():
    """The FP32 implicit-GEMM tiles the H200's 500 single convolutions launched (cuDNN 9.19) are exactly those
    9.19 ships for sm_90, and the model's Hopper tiles (IMPLICIT_GEMM_TILES_OF) are among them. cuDNN 8.9.2 —
    the held-out H100's library — ships others for sm_90: 64×64 and 64×32 where 9.19 has 128×32. The model keeps
    9.19's, the library rooflow's users and recordings run (benchmarks/README: what 8.9.2's would move)."""
    launched = set(_h200_convolution_tiles())
    current = {tuple(tile) for tile in _cudnn_kernels("9.19.0.56")["sm_90"]["fp32_xmma_implicit_gemm_tiles"]}
    older = {tuple(tile) for tile in _cudnn_kernels("8.9.2.26")["sm_90"]["fp32_xmma_implicit_gemm_tiles"]}
    assert launched == current == {(256, 64), (128, 32), (32, 32)}
    assert set(kc.IMPLICIT_GEMM_TILES_OF["sm_90"]) <= current
    assert (128, 32) not in older and {(256, 64), (64, 64), (64, 32), (32, 32)} <= older


def test_only_generations_that_can_load_a_one_tile_batched_sgemm_take_one():
    """BATCHED_TILES read against cuBLAS 12.1 (the data set's; tests/data/real/library-kernels): ampere_sgemm,
    whose 128×128 tile the A100 ran for 99.6% of its bmm calls, ships as sm_80 code only and the library has no
    PTX but for sm_90's kernels. An sm_8x GPU (Ampere, Ada) loads it; a Hopper GPU cannot, and runs the
    sm80_xmma_gemm_f32f32 and cutlass_80_simt_sgemm kernels its own module ships, in many tiles — as the H200's
    bmm calls did with cuBLAS 13 (with its host's floors, GEMMs within ±25%: 54% -> 73% and 53% -> 60% when
    Hopper took the 128×128 tile too)."""
    library = json.loads((LIBRARY_KERNELS / "cublas-12.1.3.1.json").read_text())
    gemms = {a: module["fp32_gemm_tiles"] for a, module in library["architectures"].items()}
    assert [128, 128] in gemms["sm_80"]["ampere_sgemm"] and library["ptx_architectures"] == [90]
    hopper = gemms["sm_90"]
    assert "ampere_sgemm" not in hopper and len(hopper["sm80_xmma_gemm_f32f32"]) == 13
    assert {tuple(t) for t in kc.SGEMM_TILES} <= {tuple(t) for t in hopper["sm80_xmma_gemm_f32f32"]}
    for architecture, generation in (("sm_80", "ampere"), ("sm_86", "ampere"), ("sm_89", "ada")):
        assert "ampere_sgemm" in _loadable(architecture, library["architectures"], "fp32_gemm_tiles")
        assert kc.BATCHED_TILES[generation] == (128, 128)
    assert "ampere_sgemm" not in _loadable("sm_90", library["architectures"], "fp32_gemm_tiles")
    assert "hopper" not in kc.BATCHED_TILES and kc.GENERATIONS["sm_90"] == "hopper"


def _kernel_base_name(kernel: str) -> str:
    """A profiler's kernel name without return type, namespaces, template arguments and parameters; a CUTLASS
    kernel by the kernel family it instantiates (cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>)."""
    family = re.search(r"cutlass_80_simt_sgemm_\w+", kernel)
    if family:
        return family.group()
    return re.split(r"[<(]", kernel.strip().removeprefix("void "))[0].split("::")[-1]


def test_the_h200s_gemm_kernels_ship_in_the_data_sets_cublas():
    """The H200's single GEMMs (cuBLAS 13) ran no kernel the data set's library lacks on Hopper: every one of the
    35 kernels its 1,000 nn.Linear and torch.bmm calls launched — 20 sm80_xmma_gemm_f32f32 (one split-k) and 8
    cutlass_80_simt_sgemm tiles and layouts, sgemm_largek_lds64 with its split-k reduction, gemmSN, magma_sgemmEx,
    the bias epilogue and scal_kernel — is in cuBLAS 12.1.3.1's sm_90 module (torch 2.1.0+cu121's, which the data
    set and its held-out GPUs ran; tests/data/real/library-kernels). So the picks whose residuals the H200's
    calibration lends an H100 are kernels an H100 with that library can run; which it picks for a shape, cuBLAS
    12.1's heuristics decide, which no file here records."""
    library = json.loads((LIBRARY_KERNELS / "cublas-12.1.3.1.json").read_text())["architectures"]
    hopper = set(library["sm_90"]["fp32_gemm_kernels"])
    launched = set()
    for operator in ("linear", "bmm"):
        frame = pd.read_csv(H200_SINGLE_OPS / "single-ops-h200" / operator / "NVIDIA_H200.csv.gz")
        for kernels in frame["Kernels"]:
            launched |= {_kernel_base_name(k) for k in kernels.split(";") if k.strip()}
    assert len(launched) == 35 and sum(k.startswith("sm80_xmma_gemm_f32f32") for k in launched) == 20
    assert launched <= hopper, sorted(launched - hopper)
    # the Ampere-only SGEMMs stay out of Hopper's module (test_only_generations_that_can_load_...)
    assert not any(k.startswith("ampere_sgemm") for k in hopper)
    assert any(k.startswith("ampere_sgemm") for k in library["sm_80"]["fp32_gemm_kernels"])


def test_check_prints_the_shipped_model_with_and_without_the_hosts_floors(capsys):
    """`rooflow calibrate-kernels --check DIR` prints the shipped calibration's table, then the same with the launch
    floors of the host that measured DIR, and says why the two differ."""
    from rooflow import cli

    assert cli.main(["calibrate-kernels", "--check", str(H200_SINGLE_OPS / "single-ops-h200")]) == 0
    out = capsys.readouterr().out
    assert out.index("GPU (shipped calibration)") < out.index("with its host's floors")
    assert out.count("NVIDIA H200") == 2 and "a floor is the measuring host's dispatch path" in out


def test_a_gpu_named_otherwise_is_its_models_board_by_its_datasheet():
    """Single ops measured elsewhere name their GPU as that harness spells it: a name the catalogue does not
    spell alike is the catalogue's board of the same model (H100, A100, L4) whose SMs and bandwidth the device
    config gives, else whose name is the most alike; a model the catalogue lacks is refused as before."""
    def key(name, sms=None, bandwidth=None):
        config = {"Num_Sm": sms, "Mem_Bw": bandwidth} if sms else None
        return kc.dataset_gpu_identity(name, "", config)[0]

    assert gpu_model("NVIDIA A100-PCIE-40GB") == "A100" and gpu_model("NVIDIA L40S") == "L40S"
    assert gpu_model("Tesla T4") == "T4" and gpu_model("NVIDIA GeForce RTX 4090") is None
    assert key("NVIDIA H100 80GB HBM3") == "h100-sxm5-80gb"  # the catalogue's own spelling
    assert key("NVIDIA H100 SXM5 80GB", 132, 3350) == "h100-sxm5-80gb"
    assert key("NVIDIA H100", 114, 2000) == "h100-pcie-80gb"  # the datasheet picks the board
    assert key("NVIDIA A100-PCIE-80GB", 108, 1935) == "a100-pcie-80gb"
    assert key("NVIDIA A100-SXM-80GB", 108, 2039) == "a100-sxm4-80gb"
    assert key("A100 PCIe 40GB", 108, 1555) == "a100-pcie-40gb"  # same bandwidth as the SXM4: the name decides
    assert key("NVIDIA L4 24GB", 58, 300) == "l4" and key("L4") == "l4"
    assert kc.dataset_gpu_identity("L4")[1] == "sm_89"
    for unknown in ("Acme G1", "NVIDIA GeForce RTX 4090", "NVIDIA B200"):
        with pytest.raises(RooflowError, match="not in rooflow's device catalogue: add it"):
            key(unknown, 58, 300)


def test_check_says_which_board_a_gpu_named_otherwise_is(tmp_path, capsys):
    """`--check DIR` on single ops whose config names the GPU as the catalogue does not (rooflow's H200 run,
    relabelled "NVIDIA H200 SXM 141GB") predicts them as the catalogue's H200 and says so; a folder of an
    operator rooflow has no model of is named as not scored."""
    import shutil

    from rooflow import cli

    shutil.copytree(H200_SINGLE_OPS / "single-ops-h200", tmp_path / "ops")
    for path in (tmp_path / "ops").glob("*/*.csv.gz"):
        rows = pd.read_csv(path)
        rows.assign(Device="NVIDIA H200 SXM 141GB").to_csv(path, index=False)
    config = tmp_path / "ops" / "device_configs" / "NVIDIA_H200.json"
    config.write_text(config.read_text().replace('"NVIDIA H200"', '"NVIDIA H200 SXM 141GB"'))
    assert kc.dataset_gpu_keys(tmp_path / "ops") == {"NVIDIA H200 SXM 141GB": "h200-sxm-141gb"}
    (tmp_path / "ops" / "silu").mkdir()  # an operator rooflow has no model of: said, not silently left out
    assert cli.main(["calibrate-kernels", "--check", str(tmp_path / "ops")]) == 0
    out = capsys.readouterr().out
    assert "not scored (no model of these operators): silu/" in out
    assert "NVIDIA H200 SXM 141GB: predicted as the catalogue's h200-sxm-141gb (NVIDIA H200)" in out
    renamed = kc.check_shipped(tmp_path / "ops").set_index("op_class")
    original = kc.check_shipped(H200_SINGLE_OPS / "single-ops-h200").set_index("op_class")
    pd.testing.assert_series_equal(renamed["within"], original["within"])  # the same predictions


@needs_data
def test_a_power_limited_boards_fit_separates_its_power_limit():
    """A power-limited board's GEMMs run at its kernels' rate, falling over GPU Boost's time constant to the share
    of it its power sustains: fitted with both, the P4's (75 W) kernels are its family's — the P100's (250 W, the same
    maxwell_sgemm kernels): FP32 efficiency 1.11 against 1.21, k fill 9 against 16 (11 against 16 while its clock
    fell as a step at GPU Boost's 0.3 ms, before 2026-12-01; with cuBLAS's tiles the wrong way round,
    2026-11-28: 1.11 against 1.16, no k fill on either) — where one efficiency for all its calls
    read 0.87 and 0.96; but for its small tiles, which lose more on the P4 (tile exponent 0.92 against 0.68; 0.81
    while the P4 was read as 40 SMs, its config's, not the 20 its launches report). Its sustained share (0.77) is
    its base clock's (886 of 1,114 MHz: 0.80) within 5%; the T4's (0.55; 0.58 with the step) is above its base clock's (0.37). Without the
    measured shapes' residuals, the T4's own fit puts 64% of its GEMMs within ±25% with one efficiency, 74% with
    its power limit fitted (full data)."""
    data = kc.load_measurements(KERNELS)
    data = data[data["op_class"] == "gemm"]
    gpus = kc.load_dataset_gpus(KERNELS)
    fitted = {name: kc.fit_gpu(data[data["gpu"] == name], gpus[name], "t").classes["gemm"]
              for name in ("Tesla P4", "Tesla P100-PCIE-16GB", "Tesla T4")}
    p4, p100, t4 = fitted["Tesla P4"], fitted["Tesla P100-PCIE-16GB"], fitted["Tesla T4"]
    assert "sustained" not in p100 and p4["boost_seconds"] == kc.BOOST_TIME_CONSTANT_SECONDS
    assert p4["efficiency"] == pytest.approx(p100["efficiency"], rel=0.1)
    assert p4["tile_exponent"] == pytest.approx(0.92, abs=0.03) and p100["tile_exponent"] == pytest.approx(0.68, abs=0.03)
    assert p4["fill_k"] == pytest.approx(9.1, abs=1.0) and p100["fill_k"] == pytest.approx(15.9, abs=1.0)
    assert p4["sustained"] == pytest.approx(886 / 1114, rel=0.05)
    assert 585 / 1590 < t4["sustained"] < 0.7
    rows, t4_gpu = data[data["gpu"] == "Tesla T4"], gpus["Tesla T4"]
    own = replace(kc.fit_gpu(rows, t4_gpu, "t"), shapes={})
    prepared, measured = kc._Prepared(rows, t4_gpu), rows["seconds"].to_numpy(float)
    one = kc._fit_class([(prepared, measured)], "gemm", [prepared.operator_floors("gemm", own.floors, {"floor_seconds": 0.0})],
                        fit_floor=False)  # one efficiency for all its calls
    assert "sustained" not in one and one["efficiency"] < t4["efficiency"] * 0.8

    def within(calibration):
        return np.mean(np.abs(kc.predict_seconds(rows, t4_gpu, calibration) / measured - 1) <= 0.25)

    assert within(own) >= 0.72 and within(replace(own, classes={"gemm": one})) <= 0.66


def _same_kernel_rates(operator: str) -> tuple[pd.DataFrame, float]:
    """Per cuBLAS kernel, over the shapes of ``operator`` the P100 and the P4 both ran with it for over 5 ms on
    the P100: the median bytes per FLOP their time moves at each board's datasheet bandwidth, and the median share
    of each board's FP32 peak; and the P4's bandwidth per FLOP over the P100's."""
    boards = {}
    for name in ("Tesla_P100-PCIE-16GB", "Tesla_P4"):
        calls = pd.read_csv(KERNELS / operator / f"{name}.csv.gz", usecols=["Latency", "Kernel Name", "B", "M", "N", "K"])
        config = json.loads((KERNELS / "device_configs" / f"{name}.json").read_text())
        seconds, flops = calls["Latency"] * 1e-3, 2.0 * calls["B"] * calls["M"] * calls["N"] * calls["K"]
        calls["bytes_per_flop"] = seconds * config["Mem_Bw"] * 1e9 / flops
        calls["of_peak"] = flops / seconds / (config["SingleFLOPs"] * 1e9)
        calls["seconds"] = seconds
        boards[name] = (calls, config["Mem_Bw"] / config["SingleFLOPs"])
    (p100, p100_balance), (p4, p4_balance) = boards["Tesla_P100-PCIE-16GB"], boards["Tesla_P4"]
    both = p100.merge(p4, on=["B", "M", "N", "K"], suffixes=("_p100", "_p4"))
    both = both[(both["Kernel Name_p100"] == both["Kernel Name_p4"]) & (both["seconds_p100"] > 5e-3)]
    table = both.groupby("Kernel Name_p100").agg(
        calls=("B", "size"), p100_bytes=("bytes_per_flop_p100", "median"), p4_bytes=("bytes_per_flop_p4", "median"),
        p100_peak=("of_peak_p100", "median"), p4_peak=("of_peak_p4", "median"))
    return table[table["calls"] >= 100], p4_balance / p100_balance


@needs_data
def test_pascal_linear_sgemms_move_their_kernels_bytes_per_flop_at_dram_speed():
    """Why a GEMM's re-reads beyond the L2 may cost several times its tile's no-reuse traffic: where the P100 and
    the P4 ran the same nn.Linear kernel (maxwell_sgemm_32x128_tn: 916 shapes, 64x64_tn: 427), their time moves the
    same bytes per FLOP at each board's DRAM bandwidth (0.128 and 0.137, 0.216 and 0.223) — 1.8x and 3.6x the
    tile's 0.078 and 0.0625 — and the P4 reaches 0.41-0.43 of the P100's share of peak, its bandwidth per FLOP
    (0.44), not its power limit. Their bmm kernel (128x64_nn, 1,168 shapes) is the control: the P4 at 0.72 of the
    P100's share of peak (its power), bytes per FLOP apart (0.112, 0.069). The shipped fits agree: each board's
    re-read share is above the old bound of 1, and within 10% of the other's."""
    linear, balance = _same_kernel_rates("linear")
    assert set(linear.index) == {"maxwell_sgemm_32x128_tn", "maxwell_sgemm_64x64_tn"}
    assert balance == pytest.approx(0.438, abs=0.001)
    for kernel, row in linear.iterrows():
        assert row["p4_bytes"] == pytest.approx(row["p100_bytes"], rel=0.1), kernel
        assert row["p4_peak"] / row["p100_peak"] == pytest.approx(balance, rel=0.1), kernel
    tiles = {"maxwell_sgemm_32x128_tn": (32, 128), "maxwell_sgemm_64x64_tn": (64, 64)}
    for kernel, (tm, tn) in tiles.items():  # each operand once per tile: 4 bytes x (1/tm + 1/tn) / 2 per FLOP
        assert linear.loc[kernel, "p100_bytes"] > 1.5 * kc.FP32_BYTES / 2 * (1 / tm + 1 / tn)
    bmm, _ = _same_kernel_rates("bmm")
    assert list(bmm.index) == ["maxwell_sgemm_128x64_nn"]
    control = bmm.iloc[0]
    assert 0.6 < control["p4_peak"] / control["p100_peak"] < 0.8
    assert control["p4_bytes"] < 0.7 * control["p100_bytes"]
    shipped = json.loads((ROOT / "rooflow" / "data" / "calibration" / "kernels.json").read_text())["measured"]
    rereads = [shipped[name]["calibration"]["classes"]["gemm"]["reread"] for name in ("Tesla P100-PCIE-16GB", "Tesla P4")]
    assert min(rereads) > 1.0 and rereads[0] == pytest.approx(rereads[1], rel=0.1)
    # a value its calls do not pin is none (kc._identified): fitted alone to 8x, the A100's was 3.7, which its
    # 1.6 TB/s hides and which an Ampere board of less bandwidth (an A10) would take
    assert shipped["NVIDIA A100-PCIE-40GB"]["calibration"]["classes"]["gemm"]["reread"] == 0.0


@needs_data
def test_the_p4s_cublas_picks_its_linear_kernel_by_padding_the_p100s_does_not():
    """The rule behind the P4's kernel picks (benchmarks/README.md, "Which kernel a Pascal chip runs, and by what
    rule"; the pick fractions themselves: test_the_p4s_linear_kernels_are_slower_than_its_clock_and_its_bmm_say):
    the two boards measured the same 6,423 nn.Linear shapes and ran the same kernel on 56% of them. On the 2,027
    large ones (rows and output columns ≥ 1,024) the P100 runs maxwell_sgemm_32x128_tn (97%) whatever their padding,
    while the P4 runs 64x64_tn on 94% of the shapes whose last 128-row tile is at most half full and on 0.6% of those
    whose last 128-row tile is over half full and whose last 64-column tile is at most half full: a rule of one
    chip's cuBLAS heuristics, which a held-out P4 cannot read off the P100."""
    picked = {}
    for name in ("Tesla_P100-PCIE-16GB", "Tesla_P4"):
        calls = pd.read_csv(KERNELS / "linear" / f"{name}.csv.gz", usecols=["Kernel Name", "B", "M", "N", "K"])
        calls["tile"] = calls["Kernel Name"].str.extract(r"maxwell_sgemm_(\d+x\d+)_tn")[0]
        assert calls["tile"].isin(["32x128", "64x64", "128x32"]).all(), name  # LINEAR_TILES["pascal"]
        picked[name] = calls.drop(columns="Kernel Name")
    both = picked["Tesla_P100-PCIE-16GB"].merge(picked["Tesla_P4"], on=["B", "M", "N", "K"], suffixes=("_p100", "_p4"))
    assert len(both) == len(picked["Tesla_P4"]) == 6423
    assert 0.5 < (both["tile_p100"] == both["tile_p4"]).mean() < 0.62
    rows = both["B"] * both["M"]
    large = both[(rows >= 1024) & (both["K"] >= 1024)]
    rows_half_empty = ((large["B"] * large["M"] - 1) % 128 + 1) <= 64  # the last 128-row tile's rows
    columns_half_empty = ((large["K"] - 1) % 64 + 1) <= 32  # the last 64-column tile's columns
    assert len(large) == 2027 and rows_half_empty.sum() > 1000
    assert (large["tile_p100"] == "32x128").mean() > 0.95
    for half_empty in (True, False):  # the P100 does not look at the rows' padding
        assert (large["tile_p100"][rows_half_empty == half_empty] == "64x64").mean() < 0.06
    assert (large["tile_p4"][rows_half_empty] == "64x64").mean() > 0.9
    assert (large["tile_p4"][~rows_half_empty & columns_half_empty] == "64x64").mean() < 0.02


def _skinny_linear(rows: pd.DataFrame, gpu: kc.Gpu, most_rows: int) -> np.ndarray:
    """nn.Linear calls of at most ``most_rows`` rows (one tile row: each weight read once) whose weights are over four
    L2s (so from DRAM)."""
    weight = 4 * rows["N"] * rows["K"]
    return ((rows["operator"] == "linear") & (rows["B"] * rows["M"] <= most_rows)
            & (weight > 4 * gpu.l2_bytes)).to_numpy()


@needs_data
@pytest.mark.slow
def test_skinny_linear_calls_stream_their_weights_at_their_kernels_rate():
    """The evidence for a GEMM's ``weight_efficiency``: nn.Linear calls of at most 32 rows, whose weights are over
    four L2s and read once, stream those weights at 0.16-0.18 of DRAM on the P100 and the P4 (Pascal's
    maxwell_sgemm_*_tn, whatever their tile), at 0.4-0.6 on the A100, T4 and V100. Fitted after re-reads, each Pascal
    board pins its own (0.18 and 0.17); the V100's and T4's sit within the checks' band of their GEMV-like calls'
    rate (1.21x and 0.91x: none of their own), the A100's calls pin none. Held one GPU out, each Pascal board takes the
    other's: its skinny calls within ±25% from 12% (P100) and 9% (P4) to over 60%; rooflow's H200 single ops pin
    0.14 (its skinny FP32 calls at 0.11-0.27 of its DRAM)."""
    data, gpus, fitted = _full_data_fits()
    gemms = data[data["op_class"] == "gemm"]
    rates = {}
    for name, gpu in gpus.items():
        rows = gemms[gemms["gpu"] == name]
        skinny = rows[_skinny_linear(rows, gpu, 32)]
        weight_bytes = 4 * skinny["N"] * skinny["K"]
        rates[name] = float((weight_bytes / (skinny["seconds"] - 30e-6)).median() / gpu.dram_bytes_per_second)
    pascal = ("Tesla P100-PCIE-16GB", "Tesla P4")
    assert all(0.14 < rates[name] < 0.2 for name in pascal), rates
    assert all(rate > 0.35 for name, rate in rates.items() if name not in pascal), rates
    own = {name: cal.classes["gemm"].get("weight_efficiency") for name, cal in fitted.items()}
    assert all(0.15 < own[name] < 0.2 for name in pascal) and own["Tesla P4"] / own["Tesla P100-PCIE-16GB"] > 0.8, own
    assert all(own[name] is None for name in own if name not in pascal), own
    for name in pascal:
        rows = gemms[gemms["gpu"] == name]
        held_out = kc.family_calibration(gpus[name], {o: c for o, c in fitted.items() if o != name}, gpus)
        other = next(o for o in pascal if o != name)
        assert held_out.classes["gemm"]["weight_efficiency"] == own[other]
        without = replace(held_out, classes={**held_out.classes, "gemm": {
            k: v for k, v in held_out.classes["gemm"].items() if k != "weight_efficiency"}})
        skinny = _skinny_linear(rows, gpus[name], 64)
        measured = rows["seconds"].to_numpy()[skinny]
        within = {label: float(np.mean(np.abs(kc.predict_seconds(rows[skinny], gpus[name], cal) / measured - 1) < 0.25))
                  for label, cal in (("with", held_out), ("without", without))}
        assert skinny.sum() > 100 and within["with"] > 0.6 and within["without"] < 0.2, (name, within)
    # no other family lends it: a held-out A100 (Ampere) prices its weights at its GEMV-like rate
    a100 = kc.family_calibration(gpus["NVIDIA A100-PCIE-40GB"],
                                 {o: c for o, c in fitted.items() if o != "NVIDIA A100-PCIE-40GB"}, gpus)
    assert "weight_efficiency" not in a100.classes["gemm"]
    h200 = kc.load_shipped()[0]["NVIDIA H200"].classes["gemm"]["weight_efficiency"]
    assert 0.1 < h200 < 0.2
    # its SMs bind them (under the share of its adds' rate a memory-bound kernel reaches): an H100 moves its bytes per
    # SM cycle, a larger share of its smaller bandwidth, and its calibration source says so
    h100, source = (lambda cal: (cal.classes["gemm"]["weight_efficiency"], cal.source))(
        kc.for_gpu(load_devices(CATALOGUE)["h100-sxm5-80gb"])[0])
    assert h200 * 1.3 < h100 < 0.71 and "nn.Linear weights of a call of one tile row at 0.20" in source, (h100, source)
