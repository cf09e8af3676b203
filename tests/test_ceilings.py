"""Empirical ceilings: the CPU path for real, the GPU path for real where a GPU exists and through a
labelled STUB of torch.cuda where none does, and the theoretical CPU peak from fixed /proc/cpuinfo texts.

No timed assertions beyond sanity (positive numbers, best >= median): this machine is shared and noisy.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from rooflow import ceilings, cli
from rooflow.ceilings import (
    Plan,
    copy_bytes,
    default_plan,
    gemm_flops,
    measure_ceilings,
    theoretical_cpu_peak,
    triad_bytes,
)
from rooflow.errors import RooflowError

HAS_CUDA = torch.cuda.is_available()

TINY_CPU = Plan(precisions=("fp32", "bf16"), gemm_sizes=(128, 256), stream_elements=(1 << 20, 1 << 21),
                warmup=1, repeats=3)


# --- counting conventions (closed form) --------------------------------------------------------------

def test_counting_conventions():
    assert gemm_flops(1024) == 2 * 1024**3  # n³ FMAs, one FMA = 2 FLOPs
    assert copy_bytes(1000) == 8000  # fp32: read 4000 + write 4000
    assert triad_bytes(1000) == 12000  # fp32: read b and c, write a
    assert triad_bytes(1000, element_bytes=8) == 24000


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
    """The workflow's default: the real quick plan (a few seconds on two cores)."""
    result = measure_ceilings("cpu", threads=2, quick=True)
    assert result["quick"] is True
    assert result["peak_flops_per_second"]["fp32"] >= result["median_peak_flops_per_second"]["fp32"] > 0
    assert result["dram_bytes_per_second"] >= result["median_dram_bytes_per_second"] > 0
    assert result["seconds_total"] < 120  # sanity, not a timing test: the quick run must stay short
    if result["theoretical_peak_flops_per_second"]:
        assert result["fraction_of_theoretical"]["fp32"] > 0


def test_cpu_default_plan_outgrows_the_last_level_cache():
    plan = default_plan("cpu", quick=True, llc_bytes=480 << 20, memory_bytes=None)
    assert triad_bytes(min(plan.stream_elements)) >= 2 * (480 << 20)
    full = default_plan("cpu", quick=False, llc_bytes=32 << 20, memory_bytes=None)
    assert len(full.gemm_sizes) > len(plan.gemm_sizes) and len(full.stream_elements) == 2
    capped = default_plan("cpu", quick=True, llc_bytes=480 << 20, memory_bytes=1 << 30)
    assert triad_bytes(max(capped.stream_elements)) <= (1 << 30) // 4 + 12
    assert any("cache" in note for note in capped.notes)


def test_unknown_kind_is_a_user_error():
    with pytest.raises(RooflowError, match="cpu or cuda"):
        measure_ceilings("tpu")


# --- theoretical CPU peak from fixed /proc/cpuinfo texts ---------------------------------------------

CPUINFO_AVX512 = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Processor
cpu MHz\t\t: 2599.998
siblings\t: 2
cpu cores\t: 2
flags\t\t: fpu sse sse2 avx fma avx2 avx512f avx512bw amx_bf16

processor\t: 1
model name\t: Intel(R) Xeon(R) Processor
cpu MHz\t\t: 2599.998
flags\t\t: fpu sse sse2 avx fma avx2 avx512f avx512bw amx_bf16
"""

CPUINFO_AVX2_SMT = """processor\t: 0
model name\t: Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz
cpu MHz\t\t: 1000.000
siblings\t: 8
cpu cores\t: 4
flags\t\t: fpu sse2 avx fma avx2
"""

CPUINFO_AVX_NO_FMA = """model name\t: Intel(R) Xeon(R) CPU E5-2670 0 @ 2.60GHz
flags\t\t: fpu sse2 avx
"""


def test_theoretical_peak_avx512():
    result = theoretical_cpu_peak(CPUINFO_AVX512, cores=2)
    # 2 cores × 2.6 GHz × 16 lanes × 2 FMA units × 2 FLOP
    assert result["flops_per_second"]["fp32"] == pytest.approx(2 * 2.599998e9 * 16 * 2 * 2)
    assert result["fp32_lanes"] == 16 and result["fma_units_assumed"] == 2
    assert "avx512f" in result["basis"] and "assumed" in result["basis"]


def test_theoretical_peak_avx2_uses_the_nominal_clock_and_notes_smt():
    result = theoretical_cpu_peak(CPUINFO_AVX2_SMT, cores=4)
    assert result["flops_per_second"]["fp32"] == pytest.approx(4 * 2.4e9 * 8 * 2 * 2)  # 307.2 GFLOP/s
    assert "model name" in result["basis"] and "SMT" in result["basis"]


def test_theoretical_peak_without_fma():
    result = theoretical_cpu_peak(CPUINFO_AVX_NO_FMA, cores=1)
    assert result["flops_per_second"]["fp32"] == pytest.approx(2.6e9 * 8 * 2)
    assert result["fma"] is False and "no FMA" in result["basis"]


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

    def __init__(self, major=8, minor=0, l2_bytes=1 << 20, free_bytes=1 << 26, batch_ms=1.0):
        self.props = SimpleNamespace(name="STUB GPU (not a real device)", major=major, minor=minor,
                                     L2_cache_size=l2_bytes, multi_processor_count=108)
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


TINY_GPU = Plan(precisions=("fp32", "tf32", "fp16", "bf16", "fp64"), gemm_sizes=(64, 128),
                stream_elements=(1 << 16,), l2_elements=(1 << 10, 1 << 12), warmup=1, repeats=3)


@pytest.mark.skipif(HAS_CUDA, reason="the stub stands in for torch.cuda only where CUDA is absent")
def test_gpu_path_counts_flops_and_bytes_with_a_stub():
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
    # FP64 GEMMs run on DMMA tensor cores on sm_80: recorded beside the fp64_tensor datasheet roof.
    assert set(result["peak_flops_per_second"]) == {"fp32", "tf32", "fp16", "bf16", "fp64_tensor"}
    assert result["peak_flops_per_second"]["fp16"] == pytest.approx(2 * 128**3 / 1e-3)
    assert result["dram_bytes_per_second"] == pytest.approx(3 * 4 * (1 << 16) / 1e-3)  # triad > copy
    assert result["l2_bytes_per_second"] == pytest.approx(2 * 4 * (1 << 12) / 1e-3)
    assert {r["level"] for r in result["runs"] if r["test"] == "copy"} == {"dram", "l2"}
    assert "fp8" in result["skipped"]
    # TF32 is on for the tf32 GEMMs only (2 sizes × 2 timings each), and restored afterwards.
    assert stub.tf32_at_sync[4:8] == [True] * 4
    assert stub.tf32_at_sync.count(True) == 4
    assert torch.backends.cuda.matmul.allow_tf32 == tf32_before
    json.dumps(result)


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
    assert all(2 * 4 * n <= (50 << 20) // 2 for n in plan.l2_elements)  # L2 working sets fit in half of it
    small = default_plan("cuda", quick=False, l2_bytes=50 << 20, memory_bytes=1 << 30, capability=(9, 0))
    assert max(small.stream_elements) * 4 <= (1 << 30) // 8


def test_cuda_without_a_gpu_is_a_user_error():
    absent = SimpleNamespace(is_available=lambda: False)
    with pytest.raises(RooflowError, match="no CUDA GPU"):
        measure_ceilings("cuda", cuda=absent)


@pytest.mark.skipif(not HAS_CUDA, reason="needs a real CUDA GPU")
def test_gpu_path_for_real():
    plan = Plan(precisions=("fp32", "tf32", "fp16", "bf16", "fp64"), gemm_sizes=(1024,),
                stream_elements=(1 << 24,), l2_elements=(1 << 16,), warmup=3, repeats=3)
    result = measure_ceilings("cuda", plan=plan)
    for key, best in result["peak_flops_per_second"].items():
        assert best >= result["median_peak_flops_per_second"][key] > 0
    assert result["dram_bytes_per_second"] > 0 and result["l2_bytes_per_second"] > 0


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
    monkeypatch.setattr(ceilings, "measure_ceilings", lambda kind, threads=None, quick=False: dict(CANNED))
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
