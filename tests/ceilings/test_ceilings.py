"""Empirical ceilings: the CPU path for real, the GPU path for real where a GPU exists and through a
labelled STUB of torch.cuda where none does, and the theoretical CPU peak from fixed /proc/cpuinfo texts.

No timed assertions beyond sanity (positive numbers, best >= median): this machine is shared and noisy.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from rooflow import cli
from rooflow.ceilings import measure as ceilings
from rooflow.ceilings.measure import CpuClock, _Session, is_stable, measure_ceilings, window_gain
from rooflow.ceilings.plan import (
    ConvShape,
    Plan,
    conv2d_flops,
    copy_bytes,
    default_plan,
    gemm_flops,
    l2_read_bytes,
    triad_bytes,
)
from rooflow.cli.ceilings import format_table
from rooflow.errors import RooflowError
from rooflow.hardware.cpu import cpu_microarchitecture, theoretical_cpu_peak
from rooflow.hardware.roofs import invalid_cache_roofs

HAS_CUDA = torch.cuda.is_available()

TINY_CONV = ConvShape("tiny 3x3 8->16 16x16 b2", 2, 8, 16, 16, 3)
TINY_CPU = Plan(precisions=("fp32", "bf16"), gemm_sizes=(128, 256), stream_elements=(1 << 20, 1 << 21),
                conv_shapes=(TINY_CONV,), warmup=1, repeats=3)
REAL = Path(__file__).resolve().parents[1] / "data" / "real" / "h100-rooflow"


# --- counting conventions (closed form) --------------------------------------------------------------

def test_counting_conventions():
    assert gemm_flops(1024) == 2 * 1024**3  # n³ FMAs, one FMA = 2 FLOPs
    assert copy_bytes(1000) == 8000  # fp32: read 4000 + write 4000
    assert triad_bytes(1000) == 12000  # fp32: read b and c, write a
    assert triad_bytes(1000, element_bytes=8) == 24000
    # the L2 read test: 40 passes over 1000 fp32 elements read, one fp32 partial sum per program written
    assert l2_read_bytes(1000, passes=40, programs=8) == 40 * 4000 + 32


def test_convolution_flops_by_the_closed_form():
    # ResNet-18 layer1 3x3 conv, 64 -> 64 channels at 56x56, batch 4: 2·64·3·3·64·56·56·4
    shape = ConvShape("r18", 4, 64, 64, 56, 3)
    assert shape.output_size == 56
    assert shape.flops() == 2 * 64 * 9 * 64 * 56 * 56 * 4 == 924_844_032
    # a stride-2 7x7 stem (ResNet conv1): 224 -> 112, 2·3·7·7·64·112·112
    stem = ConvShape("stem", 1, 3, 64, 224, 7, stride=2, padding=3)
    assert stem.output_size == 112 and stem.flops() == 2 * 3 * 49 * 64 * 112 * 112
    # 1x1 and depthwise (groups = channels)
    assert ConvShape("1x1", 4, 256, 64, 56, 1).flops() == 2 * 256 * 64 * 56 * 56 * 4
    assert conv2d_flops(1, 32, 32, 112, 3, groups=32) == 2 * 1 * 9 * 32 * 112 * 112


def test_repeat_until_stable_rule():
    """Stable = the best of the last `window` timings beats the best before them by < tolerance."""
    assert window_gain([1.0, 0.9, 0.8], 3) is None  # nothing before the window yet
    assert window_gain([1.0, 0.9, 0.8, 0.8], 3) == pytest.approx(1.0 / 0.8 - 1)
    assert not is_stable([1.0, 0.9, 0.8, 0.8, 0.8], 3, 0.015)  # 0.9 → 0.8 is a 12.5% gain
    assert is_stable([1.0, 0.9, 0.8, 0.8, 0.8, 0.8], 3, 0.015)  # no gain in the last three
    assert is_stable([1.0, 0.81, 0.8, 0.8, 0.8], 3, 0.015)  # 0.81 → 0.8: 1.25% < 1.5%


class ScriptedClock(CpuClock):
    """A clock that returns scripted seconds, one per timed call: tests the stopping rule, not speed."""

    def __init__(self, script):
        self.script = list(script)
        self.calls = 0

    def time(self, fn, warmup, repeats, inner=1):
        out = []
        for _ in range(repeats):
            out.append(self.script[min(self.calls, len(self.script) - 1)])
            self.calls += 1
        return out


def adaptive_plan(**changes) -> Plan:
    plan = Plan(precisions=("fp32",), gemm_sizes=(8,), stream_elements=(16,), warmup=0, repeats=3,
                max_repeats=20, stable_window=3, stable_tolerance=0.015)
    for key, value in changes.items():
        setattr(plan, key, value)
    return plan


def test_a_case_repeats_until_its_best_stops_improving():
    session = _Session(torch, ScriptedClock([1.0, 0.9, 0.8, 0.8, 0.8, 0.8, 0.5]), "cpu", adaptive_plan())
    seconds, _ = session._time(lambda: None, "case")
    assert seconds == [1.0, 0.9, 0.8, 0.8, 0.8, 0.8]  # stable at 6: the 0.5 is never reached
    assert session.stability["case"]["stopped"] == "stable"
    assert session.stability["case"]["timings"] == 6 and session.stability["case"]["last_window_gain"] == 0


def test_a_case_that_keeps_improving_stops_at_its_limit():
    improving = [1.0 / (1 + 0.05 * i) for i in range(50)]  # 5% faster every time: never stable
    session = _Session(torch, ScriptedClock(improving), "cpu", adaptive_plan(max_repeats=12))
    seconds, _ = session._time(lambda: None, "case")
    assert len(seconds) == 12 and session.stability["case"]["stopped"] == "max repeats"
    spent = _Session(torch, ScriptedClock(improving), "cpu", adaptive_plan(case_budget_seconds=0.0))
    assert len(spent._time(lambda: None, "case")[0]) == 3  # the minimum repeats only
    assert spent.stability["case"]["stopped"] == "time budget"
    fixed = _Session(torch, ScriptedClock(improving), "cpu", adaptive_plan(max_repeats=None))
    assert len(fixed._time(lambda: None, "case")[0]) == 3
    assert fixed.stability["case"]["stopped"] == "fixed repeats"


# --- CPU, for real -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cpu_tiny() -> dict:
    return measure_ceilings("cpu", threads=1, plan=TINY_CPU)


def test_cpu_measurement_is_positive_and_best_is_at_least_median(cpu_tiny):
    assert cpu_tiny["device_kind"] == "cpu" and cpu_tiny["threads"] == 1
    assert cpu_tiny["peak_flops_per_second"]["fp32"] > 0
    for key, best in cpu_tiny["peak_flops_per_second"].items():
        assert best >= cpu_tiny["median_peak_flops_per_second"][key] > 0
    assert cpu_tiny["dram_bytes_per_second"] >= cpu_tiny["median_dram_bytes_per_second"] > 0
    assert cpu_tiny["l2_bytes_per_second"] is None and "l2" in cpu_tiny["skipped"]
    assert "bf16" in cpu_tiny["peak_flops_per_second"] or "bf16" in cpu_tiny["skipped"]


def test_cpu_runs_count_flops_and_read_plus_write_bytes(cpu_tiny):
    runs = cpu_tiny["runs"]
    gemms = [r for r in runs if r["test"] == "gemm" and r["precision"] == "fp32"]
    assert {r["size"] for r in gemms} == {128, 256}
    assert len(gemms) == 2 * TINY_CPU.repeats
    for run in gemms:
        assert run["flops"] == 2 * run["size"] ** 3
        assert run["flops_per_second"] == pytest.approx(run["flops"] / run["seconds"])
    convs = [r for r in runs if r["test"] == "conv"]
    assert len(convs) == TINY_CPU.repeats and all(r["flops"] == TINY_CONV.flops() for r in convs)
    assert TINY_CONV.flops() == 2 * 8 * 9 * 16 * 16 * 16 * 2
    # the fp32 roof is the best over GEMMs AND convolutions
    assert cpu_tiny["peak_flops_per_second"]["fp32"] == max(r["flops_per_second"] for r in gemms + convs)
    tests = cpu_tiny["compute_tests_flops_per_second"]
    assert set(tests) == {"gemm_fp32", "conv_fp32"} | ({"gemm_bf16"} if "bf16" in cpu_tiny["peak_flops_per_second"]
                                                       else set())
    assert cpu_tiny["peak_kernel"]["fp32"] in (tests["gemm_fp32"]["best_case"], tests["conv_fp32"]["best_case"])
    triads = [r for r in runs if r["test"] == "triad"]
    copies = [r for r in runs if r["test"] == "copy"]
    assert {r["size"] for r in triads} == {1 << 20, 1 << 21}
    for run in triads:
        assert run["bytes"] == 3 * 4 * run["size"]  # 2 arrays read + 1 written, fp32
        assert run["bytes_per_second"] == pytest.approx(run["bytes"] / run["seconds"])
    for run in copies:
        assert run["bytes"] == 2 * 4 * run["size"]  # read + write
    best_triad = cpu_tiny["memory_tests_bytes_per_second"]["dram_triad"]["best"]
    assert best_triad == max(r["bytes_per_second"] for r in triads)
    assert cpu_tiny["dram_bytes_per_second"] == max(r["bytes_per_second"] for r in triads + copies)


def test_cpu_result_is_json_serialisable_and_records_the_environment(cpu_tiny):
    data = json.loads(json.dumps(cpu_tiny))
    assert data["environment"]["torch_threads"] == 1
    assert data["theoretical_basis"]
    assert set(data["plan"]) >= {"gemm_sizes", "stream_elements", "warmup", "repeats"}


def test_threads_are_restored():
    before = torch.get_num_threads()
    measure_ceilings("cpu", threads=1, plan=Plan(precisions=("fp32",), gemm_sizes=(64,),
                                                 stream_elements=(1 << 16,), warmup=1, repeats=2))
    assert torch.get_num_threads() == before


def test_cpu_quick_default_run():
    """The workflow's default: the real quick plan (GEMMs and convolutions until stable, within budget)."""
    result = measure_ceilings("cpu", threads=2, quick=True)
    assert result["quick"] is True
    assert result["peak_flops_per_second"]["fp32"] >= result["median_peak_flops_per_second"]["fp32"] > 0
    assert {"gemm_fp32", "conv_fp32"} <= set(result["compute_tests_flops_per_second"])
    assert result["dram_bytes_per_second"] >= result["median_dram_bytes_per_second"] > 0
    assert result["seconds_total"] < 120  # sanity, not a timing test: the quick run must stay short
    assert all(s["timings"] >= 5 for s in result["stability"].values())
    if result["theoretical_peak_flops_per_second"]:
        assert result["fraction_of_theoretical"]["fp32"] > 0
        assert result["theoretical"]["microarchitecture"]


def test_cpu_default_plan_outgrows_the_last_level_cache():
    plan = default_plan("cpu", quick=True, llc_bytes=480 << 20, memory_bytes=None)
    assert triad_bytes(min(plan.stream_elements)) >= 2 * (480 << 20)
    full = default_plan("cpu", quick=False, llc_bytes=32 << 20, memory_bytes=None)
    assert len(full.gemm_sizes) > len(plan.gemm_sizes) and len(full.stream_elements) == 2
    assert plan.conv_shapes and len(full.conv_shapes) > len(plan.conv_shapes)
    # the quick run repeats until stable within 40 s of timing (so `rooflow ceilings --quick` stays < 60 s)
    assert plan.max_repeats > plan.repeats and plan.total_budget_seconds <= 40
    capped = default_plan("cpu", quick=True, llc_bytes=480 << 20, memory_bytes=1 << 30)
    assert triad_bytes(max(capped.stream_elements)) <= (1 << 30) // 4 + 12
    assert any("cache" in note for note in capped.notes)


def test_unknown_kind_is_a_user_error():
    with pytest.raises(RooflowError, match="cpu or cuda"):
        measure_ceilings("tpu")


# --- theoretical CPU peak from fixed /proc/cpuinfo texts ---------------------------------------------
# Each text is built from the documented /proc/cpuinfo fields of that part: vendor_id, cpu family and model
# (decimal, as Linux prints them: Intel SDM vol. 4 table 2-1 / AMD family 17h-1Ah model numbers), the model
# name as the vendor brands it, its ISA flags, and `cpu MHz`.

def cpuinfo(vendor, family, model, name, flags, mhz=None, siblings=None, cores=None):
    lines = ["processor\t: 0", f"vendor_id\t: {vendor}", f"cpu family\t: {family}", f"model\t\t: {model}",
             f"model name\t: {name}"]
    if mhz:
        lines.append(f"cpu MHz\t\t: {mhz}")
    if siblings:
        lines += ["physical id\t: 0", f"siblings\t: {siblings}", f"cpu cores\t: {cores}"]
    lines.append(f"flags\t\t: {flags}")
    return "\n".join(lines) + "\n"


AVX2 = "fpu sse sse2 ssse3 sse4_1 sse4_2 avx f16c fma avx2 bmi2"
AVX512 = AVX2 + " avx512f avx512dq avx512cd avx512bw avx512vl"
INTEL, AMD = "GenuineIntel", "AuthenticAMD"

# (what, cpuinfo text, expected microarchitecture (substring), FP32 FLOP/cycle/core, clock in Hz)
CPUS = [
    ("AMD EPYC 9654 (Zen 4, Genoa)", cpuinfo(AMD, 25, 17, "AMD EPYC 9654 96-Core Processor",
                                             AVX512 + " avx512_bf16 avx512_vnni", mhz="2400.000"),
     "Zen 4", 32, 2.4e9),
    ("AMD EPYC 7763 (Zen 3, Milan)", cpuinfo(AMD, 25, 1, "AMD EPYC 7763 64-Core Processor", AVX2, mhz="2450.000"),
     "Zen 3", 32, 2.45e9),
    ("AMD EPYC 7742 (Zen 2, Rome)", cpuinfo(AMD, 23, 49, "AMD EPYC 7742 64-Core Processor", AVX2, mhz="2250.000"),
     "Zen 2", 32, 2.25e9),
    ("AMD EPYC 7601 (Zen, Naples)", cpuinfo(AMD, 23, 1, "AMD EPYC 7601 32-Core Processor", AVX2, mhz="2200.000"),
     "Zen / Zen+", 16, 2.2e9),
    ("Xeon Platinum 8380 (Ice Lake-SP)", cpuinfo(INTEL, 6, 106, "Intel(R) Xeon(R) Platinum 8380 CPU @ 2.30GHz",
                                                 AVX512), "Ice Lake-SP", 64, 2.3e9),
    ("Xeon Gold 6148 (Skylake-SP, 2 FMA)", cpuinfo(INTEL, 6, 85, "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz",
                                                   AVX512, mhz="1000.000"), "two 512-bit FMA units", 64, 2.4e9),
    ("Xeon Silver 4114 (Skylake-SP, 1 FMA)", cpuinfo(INTEL, 6, 85, "Intel(R) Xeon(R) Silver 4114 CPU @ 2.20GHz",
                                                     AVX512), "one 512-bit FMA unit", 32, 2.2e9),
    ("Xeon Gold 5118 (Skylake-SP, 1 FMA)", cpuinfo(INTEL, 6, 85, "Intel(R) Xeon(R) Gold 5118 CPU @ 2.30GHz",
                                                   AVX512), "one 512-bit FMA unit", 32, 2.3e9),
    ("Xeon Gold 5122 (the Gold 5 with 2 FMA)", cpuinfo(INTEL, 6, 85, "Intel(R) Xeon(R) Gold 5122 CPU @ 3.60GHz",
                                                       AVX512), "two 512-bit FMA units", 64, 3.6e9),
    ("Core i7-1165G7 (Tiger Lake client)", cpuinfo(INTEL, 6, 140, "11th Gen Intel(R) Core(TM) i7-1165G7 @ 2.80GHz",
                                                   AVX512), "client", 32, 2.8e9),
    ("Xeon E5-2699 v4 (Broadwell-EP)", cpuinfo(INTEL, 6, 79, "Intel(R) Xeon(R) CPU E5-2699 v4 @ 2.20GHz", AVX2),
     "Broadwell", 32, 2.2e9),
    ("Xeon E5-2680 v3 (Haswell-EP)", cpuinfo(INTEL, 6, 63, "Intel(R) Xeon(R) CPU E5-2680 v3 @ 2.50GHz", AVX2),
     "Haswell", 32, 2.5e9),
    ("Xeon E5-2697 v2 (Ivy Bridge-EP, no FMA)", cpuinfo(INTEL, 6, 62, "Intel(R) Xeon(R) CPU E5-2697 v2 @ 2.70GHz",
                                                        "fpu sse sse2 ssse3 sse4_1 sse4_2 avx f16c"),
     "Ivy Bridge", 16, 2.7e9),
    ("Xeon Platinum 8480+ (Sapphire Rapids)", cpuinfo(INTEL, 6, 143, "Intel(R) Xeon(R) Platinum 8480+",
                                                      AVX512 + " amx_bf16 amx_tile", mhz="2000.000"),
     "Sapphire", 64, 2.0e9),
]


@pytest.mark.parametrize("what, text, uarch, per_cycle, clock", CPUS, ids=[c[0] for c in CPUS])
def test_theoretical_peak_per_microarchitecture(what, text, uarch, per_cycle, clock):
    result = theoretical_cpu_peak(text, cores=2)
    assert uarch in result["microarchitecture"] and result["microarchitecture_known"], what
    assert result["fp32_flops_per_cycle_per_core"] == per_cycle, what
    assert result["flops_per_second"]["fp32"] == pytest.approx(2 * clock * per_cycle), what
    assert result["microarchitecture"] in result["basis"] and f"{per_cycle} FP32 FLOP/cycle/core" in result["basis"]
    assert result["microarchitecture_source"]


def test_zen4_is_not_counted_as_two_512_bit_fma_units():
    """Zen 4 has avx512f but executes it on 256-bit datapaths: 32 FP32 FLOP/cycle/core, not 64."""
    zen4 = theoretical_cpu_peak(CPUS[0][1], cores=2)
    assert zen4["flops_per_second"]["fp32"] == pytest.approx(2 * 2.4e9 * 32)  # 153.6 GFLOP/s, not 307.2
    assert "256-bit" in zen4["datapath"]


def test_an_unknown_microarchitecture_falls_back_to_an_upper_bound_and_says_so():
    text = cpuinfo("HygonGenuine", 24, 1, "Hygon C86 7185 32-core Processor", AVX2, mhz="2000.000")
    result = theoretical_cpu_peak(text, cores=4)
    assert result["microarchitecture"] == "unknown" and not result["microarchitecture_known"]
    assert result["flops_per_second"]["fp32"] == pytest.approx(4 * 2.0e9 * 32)  # two 256-bit FMA units
    assert "UNKNOWN" in result["basis"] and "UPPER bound" in result["basis"]
    no_avx = theoretical_cpu_peak(cpuinfo("GenuineIntel", 6, 1, "Old", "fpu sse sse2", mhz="1000.0"), cores=1)
    assert no_avx["fp32_flops_per_cycle_per_core"] == 8 and no_avx["microarchitecture"] == "unknown"


def test_arm_neoverse_is_identified_by_its_cpu_part():
    graviton2 = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics\n" \
                "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\n"
    assert cpu_microarchitecture(graviton2)["name"].startswith("Arm Neoverse N1")
    assert cpu_microarchitecture(graviton2)["fp32_flops_per_cycle"] == 16
    result = theoretical_cpu_peak(graviton2, cores=2)  # aarch64 cpuinfo has no clock
    assert result["flops_per_second"] == {} and "no clock" in result["basis"]


def test_smt_siblings_are_not_counted_as_cores():
    """A 2-vCPU VM on one Zen 4 core (siblings 2, cpu cores 1): the two threads share one core's FMA units."""
    text = cpuinfo(AMD, 25, 17, "AMD EPYC 9R14 96-Core Processor", AVX512, mhz="2600.000", siblings=2, cores=1)
    result = theoretical_cpu_peak(text, cores=2)
    assert result["cores"] == 1 and result["threads"] == 2
    assert result["flops_per_second"]["fp32"] == pytest.approx(1 * 2.6e9 * 32)
    assert "SMT" in result["basis"]
    smt_spare = theoretical_cpu_peak(cpuinfo(INTEL, 6, 85, "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz", AVX512,
                                             siblings=8, cores=4), cores=4)
    assert smt_spare["cores"] == 4 and "SMT" in smt_spare["basis"]


def test_theoretical_peak_without_a_clock():
    result = theoretical_cpu_peak("flags : avx2 fma\n", cores=2)
    assert result["flops_per_second"] == {} and "no clock" in result["basis"]


# --- GPU path ----------------------------------------------------------------------------------------

class StubCuda:
    """STUB of ``torch.cuda`` — NOT a GPU and NOT a measurement.

    Used only where CUDA is absent, to run rooflow's GPU code path: tensors stay on the CPU
    (``tensor_device = "cpu"``), and every timed event pair reports exactly ``batch_ms`` milliseconds, so
    the tests check what the GPU path counts (FLOPs, bytes, precisions, TF32 switching), never speed.
    """

    tensor_device = "cpu"

    def __init__(self, major=8, minor=0, l2_bytes=1 << 20, free_bytes=1 << 26, batch_ms=1.0, sm_count=2):
        self.props = SimpleNamespace(name="STUB GPU (not a real device)", major=major, minor=minor,
                                     L2_cache_size=l2_bytes, multi_processor_count=sm_count)
        self.free_bytes = free_bytes
        self.tf32_at_sync: list[bool] = []  # TF32 flag seen at each timing's synchronize()
        stub = self

        class Event:
            def __init__(self, enable_timing=False):
                assert enable_timing

            def record(self):
                pass

            def synchronize(self):
                pass

            def elapsed_time(self, end):
                return stub.batch_ms

        self.Event = Event
        self.batch_ms = batch_ms

    def is_available(self):
        return True

    def synchronize(self):
        self.tf32_at_sync.append(torch.backends.cuda.matmul.allow_tf32)

    def get_device_properties(self, index):
        return self.props

    def mem_get_info(self):
        return self.free_bytes, 80 << 30


# The L2 read test: each launch reads its 4 KiB / 16 KiB buffer 16 / 4 times (64 KiB per call). The stub
# keeps tensors on the CPU, so the real Triton kernel runs in Triton's interpreter (TRITON_INTERPRET=1),
# with 64-element blocks (the interpreter reduces element by element in Python): its sum is checked
# against passes × elements before anything is timed.
TINY_GPU = Plan(precisions=("fp32", "tf32", "fp16", "bf16", "fp64"), gemm_sizes=(64, 128),
                stream_elements=(1 << 12,), l2_elements=(1 << 10, 1 << 12), l2_read_bytes_per_call=64 << 10,
                l2_block=64, warmup=1, repeats=3)


@pytest.fixture
def triton_interpreter(monkeypatch):
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")


@pytest.mark.skipif(HAS_CUDA, reason="the stub stands in for torch.cuda only where CUDA is absent")
def test_gpu_path_counts_flops_and_bytes_with_a_stub(triton_interpreter):
    stub = StubCuda(major=8, minor=0)
    tf32_before = torch.backends.cuda.matmul.allow_tf32
    result = measure_ceilings("cuda", plan=TINY_GPU, cuda=stub)
    assert result["device_kind"] == "cuda" and result["device_name"].startswith("STUB")
    assert result["gpu_compute_capability"] == "sm_80"
    # Every timed batch "took" 1 ms for 1 call, so each rate is exactly count / 1e-3 s.
    for run in result["runs"]:
        assert run["calls_per_timing"] == 1 and run["seconds"] == pytest.approx(1e-3)
        if run["test"] == "gemm":
            assert run["flops"] == 2 * run["size"] ** 3
            assert run["flops_per_second"] == pytest.approx(run["flops"] / 1e-3)
        elif run["test"] == "copy":
            assert run["bytes"] == 2 * 4 * run["size"]  # device-to-device copy: read + write
        elif run["test"] == "triad":
            assert run["bytes"] == 3 * 4 * run["size"]
        elif run["test"] == "read":  # L2: passes reads of the buffer + one fp32 per program (8 per SM)
            assert run["level"] == "l2" and run["programs"] == 16
            assert run["passes"] == (64 << 10) // (4 * run["size"])
            assert run["bytes"] == run["passes"] * 4 * run["size"] + 16 * 4
    # FP64 GEMMs run on DMMA tensor cores on sm_80: recorded beside the fp64_tensor datasheet roof.
    assert set(result["peak_flops_per_second"]) == {"fp32", "tf32", "fp16", "bf16", "fp64_tensor"}
    assert result["peak_flops_per_second"]["fp16"] == pytest.approx(2 * 128**3 / 1e-3)
    assert result["dram_bytes_per_second"] == pytest.approx(3 * 4 * (1 << 12) / 1e-3)  # triad > copy
    assert result["l2_bytes_per_second"] == pytest.approx((64 * 1024 + 64) / 1e-3)  # above DRAM: valid
    assert result["invalid_roofs"] == {}
    assert {(r["test"], r["level"]) for r in result["runs"] if "level" in r} == {
        ("copy", "dram"), ("triad", "dram"), ("read", "l2")}
    assert "fp8" in result["skipped"]
    # TF32 is on for the tf32 GEMMs only (2 sizes × 2 timings each), and restored afterwards.
    assert stub.tf32_at_sync[4:8] == [True] * 4
    assert stub.tf32_at_sync.count(True) == 4
    assert torch.backends.cuda.matmul.allow_tf32 == tf32_before
    json.dumps(result)


@pytest.mark.skipif(HAS_CUDA, reason="the stub stands in for torch.cuda only where CUDA is absent")
def test_an_l2_roof_at_or_below_dram_is_marked_invalid_with_a_stub(triton_interpreter):
    """The stub times every batch at 1 ms: with DRAM arrays of 1 Mi elements (12 MiB of triad per call) the
    64 KiB L2 read comes out far below DRAM — a failed measurement, marked, with its numbers kept."""
    plan = Plan(precisions=("fp16",), gemm_sizes=(64,), stream_elements=(1 << 20,), l2_elements=(1 << 10,),
                l2_read_bytes_per_call=64 << 10, l2_block=64, warmup=1, repeats=2)
    result = measure_ceilings("cuda", plan=plan, cuda=StubCuda())
    assert result["l2_bytes_per_second"] is None and result["median_l2_bytes_per_second"] is None
    invalid = result["invalid_roofs"]["l2"]
    assert invalid["bytes_per_second"] == pytest.approx((64 * 1024 + 64) / 1e-3)
    assert invalid["dram_bytes_per_second"] == pytest.approx(3 * 4 * (1 << 20) / 1e-3)
    assert result["memory_tests_bytes_per_second"]["l2_read"]["best"] == invalid["bytes_per_second"]
    assert any(note.startswith("INVALID L2 roof") for note in result["notes"])
    assert "INVALID" in format_table(result)


def test_the_l2_read_kernel_reads_every_element_passes_times(triton_interpreter):
    """The kernel's byte count rests on its sum: ones summed passes times over any grid = passes × n."""
    kernel = ceilings.l2_read_kernel()
    for n, programs, passes in ((5000, 3, 7), (1 << 12, 16, 4), (100, 8, 1)):
        x, out = torch.ones(n), torch.zeros(programs)
        kernel[(programs,)](x, out, n, passes, BLOCK=64, num_warps=ceilings.L2_NUM_WARPS)
        assert out.sum().item() == passes * n


# --- invalid cache roofs ---------------------------------------------------------------------------

def test_the_real_h100_l2_roof_below_hbm_is_flagged():
    """rooflow's own H100 run: "L2" 2,973 GB/s under HBM's 3,033 GB/s — the copy measured DRAM/launches."""
    result = json.loads((REAL / "ceilings-h100.json").read_text())
    invalid = invalid_cache_roofs(result)
    assert set(invalid) == {"l2"}
    assert invalid["l2"]["bytes_per_second"] == pytest.approx(2.9728e12, rel=1e-4)
    assert invalid["l2"]["dram_bytes_per_second"] == pytest.approx(3.0328e12, rel=1e-4)
    assert invalid["l2"]["dram_source"] == "measured" and "not drawn" in invalid["l2"]["reason"]


def test_invalid_cache_roofs_on_constructed_cases():
    assert invalid_cache_roofs({"dram_bytes_per_second": 3e12, "l2_bytes_per_second": 7e12}) == {}
    assert set(invalid_cache_roofs({"dram_bytes_per_second": 3e12, "l2_bytes_per_second": 3e12})) == {"l2"}
    # above the measured DRAM roof but under the datasheet's: still not a cache roof
    below_sheet = invalid_cache_roofs({"dram_bytes_per_second": 3.0e12, "l2_bytes_per_second": 3.2e12}, 3.35e12)
    assert below_sheet["l2"]["dram_source"] == "datasheet"
    assert invalid_cache_roofs({"dram_bytes_per_second": 3e12, "l2_bytes_per_second": None}) == {}
    assert invalid_cache_roofs({"dram_bytes_per_second": 1e10}) == {}  # a CPU: no cache roof measured
    marked = {"dram_bytes_per_second": 3e12, "l2_bytes_per_second": None,
              "invalid_roofs": {"l2": {"bytes_per_second": 2e12, "dram_bytes_per_second": 3e12, "reason": "x"}}}
    assert invalid_cache_roofs(marked)["l2"]["bytes_per_second"] == 2e12  # kept as the JSON marks it


@pytest.mark.skipif(HAS_CUDA, reason="the stub stands in for torch.cuda only where CUDA is absent")
def test_gpu_path_batches_short_kernels_with_a_stub():
    """A kernel shorter than plan.min_batch_seconds is timed in batches of back-to-back calls."""
    stub = StubCuda(batch_ms=0.1)  # every event pair: 0.1 ms, so 10 calls make the 1 ms minimum batch
    plan = Plan(precisions=("fp16",), gemm_sizes=(64,), stream_elements=(1 << 12,), warmup=1, repeats=2)
    result = measure_ceilings("cuda", plan=plan, cuda=stub)
    gemm = next(r for r in result["runs"] if r["test"] == "gemm")
    assert gemm["calls_per_timing"] == 10
    assert gemm["seconds"] == pytest.approx(0.1e-3 / 10)
    assert gemm["flops_per_second"] == pytest.approx(2 * 64**3 / 1e-5)


@pytest.mark.skipif(HAS_CUDA, reason="the stub stands in for torch.cuda only where CUDA is absent")
def test_gpu_path_stops_before_a_size_too_slow_to_time_with_a_stub():
    """A T4 runs FP64 at 1/32 rate: sizes whose one call would exceed plan.max_call_seconds are not run."""
    stub = StubCuda(batch_ms=300.0)  # every call "takes" 0.3 s: n=128 would take 8 × 0.3 s = 2.4 s
    plan = Plan(precisions=("fp64",), gemm_sizes=(64, 128), stream_elements=(1 << 12,), warmup=1, repeats=2,
                max_call_seconds=0.5)
    result = measure_ceilings("cuda", plan=plan, cuda=stub)
    assert {r["size"] for r in result["runs"] if r["test"] == "gemm"} == {64}
    assert "gemm_fp64_tensor_n128" in result["skipped"]
    assert result["peak_flops_per_second"]["fp64_tensor"] == pytest.approx(2 * 64**3 / 0.3)


@pytest.mark.skipif(HAS_CUDA, reason="the stub stands in for torch.cuda only where CUDA is absent")
def test_gpu_path_on_a_volta_skips_tf32_and_bf16_with_a_stub():
    stub = StubCuda(major=7, minor=0)
    result = measure_ceilings("cuda", plan=TINY_GPU, cuda=stub)
    assert set(result["peak_flops_per_second"]) == {"fp32", "fp16", "fp64"}  # no DMMA on sm_70
    assert "sm_80" in result["skipped"]["tf32"] and "bf16" in result["skipped"]
    default = default_plan("cuda", quick=True, l2_bytes=6 << 20, memory_bytes=16 << 30, capability=(7, 0))
    assert "tf32" not in default.precisions and "bf16" not in default.precisions


def test_gpu_default_plan_sizes():
    plan = default_plan("cuda", quick=True, l2_bytes=50 << 20, memory_bytes=80 << 30, capability=(9, 0))
    assert min(plan.stream_elements) * 4 >= 16 * (50 << 20)  # DRAM arrays dwarf the L2
    # H100: 50 MB of L2 in two partitions; the L2 buffers (12.5 and 6.25 MiB) fit well inside one
    assert [4 * n for n in plan.l2_elements] == [(50 << 20) // 8, (50 << 20) // 4]
    # one launch reads 512 MiB: 41 passes over 12.5 MiB, tens of microseconds at L2 speed, not launch-bound
    assert math.ceil(plan.l2_read_bytes_per_call / ((50 << 20) // 4)) == 41
    small = default_plan("cuda", quick=False, l2_bytes=50 << 20, memory_bytes=1 << 30, capability=(9, 0))
    assert max(small.stream_elements) * 4 <= (1 << 30) // 8


def test_cuda_without_a_gpu_is_a_user_error():
    absent = SimpleNamespace(is_available=lambda: False)
    with pytest.raises(RooflowError, match="no CUDA GPU"):
        measure_ceilings("cuda", cuda=absent)


@pytest.mark.skipif(not HAS_CUDA, reason="needs a real CUDA GPU")
def test_gpu_path_for_real():
    plan = Plan(precisions=("fp32", "tf32", "fp16", "bf16", "fp64"), gemm_sizes=(1024,),
                stream_elements=(1 << 26,), l2_elements=(1 << 20,), warmup=3, repeats=3)
    result = measure_ceilings("cuda", plan=plan)
    for key, best in result["peak_flops_per_second"].items():
        assert best >= result["median_peak_flops_per_second"][key] > 0
    assert result["dram_bytes_per_second"] > 0
    # a 4 MiB buffer fits the L2 of every GPU since Volta: the L2 roof must come out above DRAM
    assert result["invalid_roofs"] == {} and result["l2_bytes_per_second"] > result["dram_bytes_per_second"]


# --- CLI ---------------------------------------------------------------------------------------------

CANNED = {
    "device_kind": "cuda", "device_name": "NVIDIA A100-SXM4-40GB", "quick": True, "threads": None,
    "peak_flops_per_second": {"fp32": 18.9e12, "tf32": 140e12}, "median_peak_flops_per_second":
    {"fp32": 18.5e12, "tf32": 135e12}, "dram_bytes_per_second": 1.4e12, "median_dram_bytes_per_second": 1.38e12,
    "l2_bytes_per_second": 4.0e12, "median_l2_bytes_per_second": 3.9e12, "memory_tests_bytes_per_second": {},
    "theoretical_peak_flops_per_second": {}, "theoretical_basis": "", "fraction_of_theoretical": {},
    "skipped": {}, "seconds_total": 1.0, "runs": [],
}


def test_ceilings_command_prints_datasheet_roofs_beside_measured(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr("rooflow.cli.ceilings.measure_ceilings", lambda kind, threads=None, quick=False: dict(CANNED))
    out_file = tmp_path / "ceilings" / "a100.json"
    status = cli.main(["ceilings", "--device", "a100-sxm4-40gb", "--quick", "--output", str(out_file)])
    assert status == 0
    table = capsys.readouterr().out
    assert "18.9 TF/s" in table and "19.5 TF/s" in table and "97%" in table  # measured, datasheet, ratio
    assert "156 TF/s" in table and "1555 GB/s" in table
    saved = json.loads(out_file.read_text())
    assert saved["device_key"] == "a100-sxm4-40gb" and saved["peak_flops_per_second"]["fp32"] == 18.9e12


def test_ceilings_command_refuses_a_gpu_device_without_a_gpu(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cli.main(["ceilings", "--device", "h100-sxm5-80gb"]) == 2
    error = capsys.readouterr().err.strip()
    assert "h100-sxm5-80gb" in error and "\n" not in error


def test_ceilings_command_rejects_an_unknown_device(capsys):
    assert cli.main(["ceilings", "--device", "a100"]) == 2
    assert "a100-sxm4-40gb" in capsys.readouterr().err


# --- the inverted-cache-roof check (rooflow.report.checks) ----------------------------------------------------

def test_the_h100_l2_roof_below_hbm_is_an_error_row_of_the_checks(tmp_path, capsys):
    from rooflow.hardware.devices import default_catalogue_path
    from rooflow.report.checks import build_checks, ceilings_checks, check_files, flagged_runs

    result = json.loads((REAL / "ceilings-h100.json").read_text())
    rows = ceilings_checks({"h100-sxm5-80gb": result})
    assert len(rows) == 1
    row = rows[0]
    assert row["severity"] == "error" and row["check"] == "cache roof at or below DRAM"
    assert row["device"] == "h100-sxm5-80gb" and row["run"] == "h100-sxm5-80gb L2 ceiling"
    assert row["value"] == "L2 2973 GB/s" and row["expected"] == "> measured DRAM 3033 GB/s"
    # beside the real tf32 summary of the same GPU: the summary's own checks plus this one
    summary = pd.read_csv(REAL / "summary-tf32.csv")
    checks, _ = build_checks(summary, ceilings={"h100-sxm5-80gb": result})
    assert (checks["check"] == "cache roof at or below DRAM").sum() == 1
    assert checks.iloc[0]["severity"] == "error"  # errors first
    flagged_runs(checks)  # a device-level row must not break the roofline's ring lookup
    # through the files, as the workflow's check_runs rule and `rooflow checks` read them
    ceilings_dir = tmp_path / "ceilings"
    ceilings_dir.mkdir()
    (ceilings_dir / "h100-sxm5-80gb.json").write_text(json.dumps(result))
    summary_path = tmp_path / "summary.csv"
    summary.to_csv(summary_path, index=False)
    checks, _ = check_files(summary_path, ceilings_paths=[ceilings_dir / "h100-sxm5-80gb.json"],
                            devices_file=default_catalogue_path())
    assert "h100-sxm5-80gb L2 ceiling" in set(checks["run"])
    (tmp_path / "none").mkdir()  # no estimates (a folder given that does not exist is refused)
    status = cli.main(["checks", str(summary_path), "--estimates", str(tmp_path / "none"),
                       "--ceilings", str(ceilings_dir)])
    assert status == 1 and "cache roof at or below DRAM" in capsys.readouterr().out


def test_a_valid_cache_roof_gives_no_check_row_and_a_datasheet_floor_is_used_where_given():
    from rooflow.report.checks import ceilings_checks

    valid = {"dram_bytes_per_second": 3.0e12, "l2_bytes_per_second": 7.5e12}
    assert ceilings_checks({"gpu": valid}) == []
    assert ceilings_checks({"cpu": {"dram_bytes_per_second": 1e10, "l2_bytes_per_second": None}}) == []
    between = {"dram_bytes_per_second": 3.0e12, "l2_bytes_per_second": 3.2e12}
    assert ceilings_checks({"gpu": between}) == []
    rows = ceilings_checks({"gpu": between}, {"gpu": 3.35e12})
    assert len(rows) == 1 and rows[0]["expected"] == "> datasheet DRAM 3350 GB/s"


def test_ceilings_command_refuses_an_estimate_only_device(capsys):
    assert cli.main(["ceilings", "--device", "xeon-e5-2699-v4-2s"]) == 2
    error = capsys.readouterr().err.strip()
    assert "estimate-only" in error and "rooflow estimate --device xeon-e5-2699-v4-2s" in error and "\n" not in error



def _probe(seconds_of, budget_seconds=5.0):
    """_cpu_bf16_probe on the quick CPU plan with a fake torch.mm whose n-th call of size n takes
    ``seconds_of(n, call)`` on a fake clock: (its verdict, the sizes it called)."""
    clock = [0]
    called: list[int] = []

    def mm(a, b):
        n = a.shape[0]
        called.append(n)
        clock[0] += int(seconds_of(n, sum(size == n for size in called)) * 1e9)

    fake_torch = SimpleNamespace(randn=torch.randn, bfloat16=torch.bfloat16, mm=mm)
    plan = SimpleNamespace(warmup=2, repeats=5, gemm_sizes=(1024, 2048))  # default_plan("cpu", quick=True)'s
    fake_time = SimpleNamespace(perf_counter_ns=lambda: clock[0])
    original = ceilings.time
    ceilings.time = fake_time
    try:
        verdict = ceilings._cpu_bf16_probe(SimpleNamespace(torch=fake_torch, plan=plan), budget_seconds)
    finally:
        ceilings.time = original
    return verdict, called


def test_the_cpu_bf16_probe_is_decided_at_the_sizes_that_run_fast():
    """On this project's 2-core Zen 4 (AVX512-BF16) 256³, 384³ and 512³ bf16 GEMMs each took ~8 ms (4.2-34
    GFLOP/s) and 1024³ 9.6 ms (224 GFLOP/s), the planned sizes 430 GFLOP/s: the probe timed one 256³ call, so
    whether a quick run kept its bf16 roof hung on the load of the moment (skipped once in five), and every bf16 CPU
    run of that results tree went unpriced. It now grows the size while a bigger probe is cheap, keeping the
    fastest call; a CPU that emulates bf16 (a 1024³ call took 4.6 s on a Zen 3 core) stops after the first size."""
    zen4 = {256: 0.008, 512: 0.008, 1024: 0.0096}
    verdict, called = _probe(lambda n, call: zen4[n])
    assert verdict is None and called == [256] * 4 + [512] * 2  # 512³ at 34 GFLOP/s: 4.0 s for the plan, in budget
    verdict, called = _probe(lambda n, call: zen4[n] * (2 if n == 512 else 1))  # 512³ slower: 1024³ decides
    assert verdict is None and called[-1] == 1024 and 512 in called
    verdict, called = _probe(lambda n, call: 0.5 if call == 2 else 2 * n ** 3 / 400e9)  # one slow timing only
    assert verdict is None and called == [256, 256, 256]
    emulated = 2 * 1024 ** 3 / 4.6  # FLOP/s
    verdict, called = _probe(lambda n, call: 2 * n ** 3 / emulated)
    assert called == [256] * (1 + ceilings.BF16_PROBE_CALLS)  # a 512³ probe would cost 2.3 s of the 5
    assert verdict == ("bf16 GEMMs up to 256^3 ran at 0.5 GFLOP/s at best: the planned bf16 sizes would take ~290 s, "
                       "over the 5 s budget (no fast bf16 path on this CPU)")
