"""The device catalogue: schema, datasheet values (dense, not sparse), roofs and ridge points, the CLI."""

from __future__ import annotations

import json

import pytest
import yaml

from rooflow import cli
from rooflow.config import validate_config
from rooflow.errors import RooflowError
from rooflow.hardware.devices import (
    COMPUTE_ROOFS,
    Device,
    Roof,
    default_catalogue_path,
    derived_roofs,
    load_device,
    load_devices,
)

TERA = 1e12
GIGA = 1e9

EXPECTED_KEYS = {
    "cpu", "p100-pcie-16gb", "v100-sxm2-16gb", "v100-pcie-16gb", "t4", "a100-sxm4-40gb", "a100-sxm4-80gb",
    "a100-pcie-80gb", "a10", "l4", "l40s", "h100-sxm5-80gb", "h100-pcie-80gb", "h200-sxm-141gb",
}
# Chips the published studies analysed, where rooflow cannot run (issue 16).
ESTIMATE_ONLY_KEYS = {"tpu-v4", "apple-a14", "xeon-e5-2699-v4-2s", "xeon-e5-2697-v2-2s", "xeon-phi-7120a"}


@pytest.fixture(scope="module")
def devices() -> dict[str, Device]:
    return load_devices(default_catalogue_path())


def write_catalogue(tmp_path, data) -> str:
    path = tmp_path / "devices.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def gpu_entry(**changes):
    entry = {
        "kind": "cuda", "name": "Test GPU", "architecture": "sm_80", "sm_count": 108, "memory_gbytes": 40,
        "memory_bandwidth_gbytes_per_second": 1555, "peak_tflops_per_second": {"fp32": 19.5, "tf32": 156},
        "source": "https://example.com/datasheet.pdf",
    }
    entry.update(changes)
    return entry


def rejection(tmp_path, data) -> str:
    with pytest.raises(RooflowError) as info:
        load_devices(write_catalogue(tmp_path, data))
    message = str(info.value)
    assert "\n" not in message, "errors are one line"
    return message


# --- the shipped catalogue ---------------------------------------------------------------------------

def test_catalogue_has_every_device_of_the_issue(devices):
    assert EXPECTED_KEYS | ESTIMATE_ONLY_KEYS <= set(devices)
    assert {k for k, d in devices.items() if d.estimate_only} == ESTIMATE_ONLY_KEYS


def test_every_entry_names_its_source(devices):
    for key, device in devices.items():
        assert device.source, key
        if device.is_cuda:
            assert device.source.startswith("https://"), key
            assert all(ref.startswith("https://") for ref in device.references), key


def test_every_gpu_has_a_complete_datasheet_entry_and_a_slurm_block(devices):
    for key, d in devices.items():
        if not d.is_cuda:
            continue
        assert d.architecture and d.architecture.startswith("sm_"), key
        assert d.sm_count and d.memory_bytes and d.dram_bytes_per_second and d.memory_type, key
        assert d.peak_flops_per_second.get("fp32", 0) > 0, key
        assert d.slurm["partition"] == "gpu", key
        assert d.slurm["gres"].startswith("gpu:") and d.slurm["gres"].endswith(":1"), key
        assert {"runtime", "mem_mb", "cpus_per_task"} <= set(d.slurm), key


def test_the_workflow_test_keys_keep_their_slurm_blocks(devices):
    assert devices["cpu"].slurm == {"partition": "cpu", "runtime": 60, "mem_mb": 16000, "cpus_per_task": 2}
    assert devices["a100-sxm4-40gb"].slurm["gres"] == "gpu:a100:1"
    assert devices["v100-sxm2-16gb"].slurm["gres"] == "gpu:v100:1"


def test_dense_not_sparse_peaks(devices):
    """The headline tensor numbers quote 2:4 sparsity; the catalogue holds the dense halves."""
    a100 = devices["a100-sxm4-40gb"].peak_flops_per_second
    assert a100["tf32"] == 156 * TERA  # not the sparse 312
    assert a100["fp16"] == a100["bf16"] == 312 * TERA  # not 624
    h100 = devices["h100-sxm5-80gb"].peak_flops_per_second
    assert h100["fp16"] == h100["bf16"] == pytest.approx(989.4 * TERA)  # not 1979
    assert h100["tf32"] == pytest.approx(494.7 * TERA)  # not 989
    assert devices["h100-pcie-80gb"].peak_flops_per_second["fp16"] == 756 * TERA  # not 1513
    assert devices["l4"].peak_flops_per_second["fp16"] == 121 * TERA  # not 242
    assert devices["l40s"].peak_flops_per_second["tf32"] == 183 * TERA  # not 366


def test_tensor_precisions_keep_their_dense_ratios(devices):
    """On every sm_80+ GPU here, dense TF32 is half of dense FP16 and FP8 twice FP16: a sparse number
    entered for one precision (and not the other) breaks the ratio."""
    for key, d in devices.items():
        peaks = d.peak_flops_per_second
        if "tf32" in peaks:
            assert peaks["tf32"] / peaks["fp16"] == pytest.approx(0.5, rel=0.02), key
            assert peaks["bf16"] == peaks["fp16"], key
        if "fp8" in peaks:
            assert peaks["fp8"] / peaks["fp16"] == pytest.approx(2.0, rel=0.02), key
        if "fp64_tensor" in peaks:
            assert d.architecture in ("sm_80", "sm_90"), key  # DMMA exists on GA100 and GH100 only


def test_form_factors_are_not_confused(devices):
    """A V100 PCIe number for an SXM2 card, or the 2022 3 TB/s for an H100 SXM, are the classic slips."""
    assert devices["v100-sxm2-16gb"].peak_flops_per_second["fp32"] == 15.7 * TERA
    assert devices["v100-pcie-16gb"].peak_flops_per_second["fp32"] == 14.0 * TERA
    assert devices["v100-sxm2-16gb"].peak_flops_per_second["fp16"] == 125 * TERA
    assert devices["h100-sxm5-80gb"].dram_bytes_per_second == 3350 * GIGA
    assert devices["h200-sxm-141gb"].dram_bytes_per_second == 4800 * GIGA
    assert devices["a100-sxm4-80gb"].dram_bytes_per_second == 2039 * GIGA
    assert devices["a100-pcie-80gb"].dram_bytes_per_second == 1935 * GIGA
    assert "tf32" not in devices["v100-sxm2-16gb"].peak_flops_per_second  # no TF32 before sm_80


def test_derived_fp64_follows_the_cuda_guide_ratio(devices):
    """FP64 of GPUs whose datasheet gives none = FP32 × 1/32 (sm_75) or 1/64 (sm_86, sm_89)."""
    for key, ratio in (("t4", 32), ("a10", 64), ("l4", 64), ("l40s", 64)):
        peaks = devices[key].peak_flops_per_second
        assert peaks["fp64"] == pytest.approx(peaks["fp32"] / ratio, rel=0.01), key


def test_units_are_si(devices):
    a100 = devices["a100-sxm4-40gb"]
    assert a100.memory_bytes == 40e9
    assert a100.dram_bytes_per_second == 1555e9
    assert a100.peak_flops_per_second["fp32"] == 19.5e12


# --- schema ------------------------------------------------------------------------------------------

def test_schema_rejects_a_negative_peak(tmp_path):
    message = rejection(tmp_path, {"gpu": gpu_entry(peak_tflops_per_second={"fp32": -19.5})})
    assert "gpu/peak_tflops_per_second/fp32" in message


def test_schema_rejects_a_zero_bandwidth(tmp_path):
    message = rejection(tmp_path, {"gpu": gpu_entry(memory_bandwidth_gbytes_per_second=0)})
    assert "memory_bandwidth_gbytes_per_second" in message


def test_schema_rejects_a_gpu_without_its_bandwidth(tmp_path):
    entry = gpu_entry()
    del entry["memory_bandwidth_gbytes_per_second"]
    message = rejection(tmp_path, {"gpu": entry})
    assert "memory_bandwidth_gbytes_per_second" in message and "'gpu'" in message


def test_catalogue_rejects_a_base_clock_above_its_boost_clock(tmp_path):
    """The kernel model's power-limited FP32 GEMM clock never falls below base ÷ boost: a swapped pair, or one
    without the other, is refused in one sentence that names the device and the fix."""
    message = rejection(tmp_path, {"gpu": gpu_entry(base_clock_mhz=2040, boost_clock_mhz=795)})
    assert "'gpu'" in message and "base clock at most the boost clock" in message
    message = rejection(tmp_path, {"gpu": gpu_entry(base_clock_mhz=795)})
    assert "give both" in message


def test_an_empty_catalogue_file_says_so(tmp_path, capsys):
    """YAML reads an empty file as null: it said "the file is null (null), not a mapping (key: value)"."""
    from rooflow import cli

    empty = tmp_path / "devices.yaml"
    empty.write_text("")
    assert cli.main(["devices", "--catalogue", str(empty)]) == 2
    assert capsys.readouterr().err.strip() == f"rooflow devices: error: {empty}: the file is empty: see config/DEVICES.md"


@pytest.mark.parametrize("command", [["devices"], ["ceilings", "--device", "cpu"]])
def test_every_command_takes_the_catalogue_as_devices_file(tmp_path, capsys, command):
    """estimate, calibrate, checks and doctor took --devices-file; devices and ceilings only --catalogue, so the
    flag a user had learnt was refused there. Both take --devices-file; --catalogue still works."""
    from rooflow import cli

    empty = tmp_path / "devices.yaml"
    empty.write_text("")
    for flag in ("--devices-file", "--catalogue"):
        assert cli.main([*command, flag, str(empty)]) == 2
        assert capsys.readouterr().err.strip().endswith(f"{empty}: the file is empty: see config/DEVICES.md")


def test_every_gpu_has_its_base_and_boost_clocks(devices):
    for key, d in devices.items():
        if d.is_cuda:
            assert 0 < d.base_clock_mhz <= d.boost_clock_mhz, key


def test_schema_rejects_a_key_without_its_unit(tmp_path):
    entry = gpu_entry()
    entry["memory_bandwidth"] = entry.pop("memory_bandwidth_gbytes_per_second")
    message = rejection(tmp_path, {"gpu": entry})
    assert "memory_bandwidth" in message


def test_schema_rejects_an_unknown_key(tmp_path):
    message = rejection(tmp_path, {"gpu": gpu_entry(bandwidth_gbs=900)})
    assert "bandwidth_gbs" in message


def test_schema_rejects_an_unknown_precision(tmp_path):
    message = rejection(tmp_path, {"gpu": gpu_entry(peak_tflops_per_second={"fp32": 19.5, "int8": 624})})
    assert "int8" in message


def test_schema_rejects_an_entry_without_a_source(tmp_path):
    entry = gpu_entry()
    del entry["source"]
    assert "source" in rejection(tmp_path, {"gpu": entry})


def test_schema_rejects_a_gpu_source_that_is_not_a_link(tmp_path):
    message = rejection(tmp_path, {"gpu": gpu_entry(source="the datasheet")})
    assert "gpu/source" in message


def test_schema_accepts_a_cpu_without_datasheet_numbers(tmp_path):
    path = write_catalogue(tmp_path, {"laptop": {"kind": "cpu", "name": "My laptop", "source": "measured"}})
    device = load_devices(path)["laptop"]
    assert device.peak_flops_per_second == {} and device.roofs() == []


# --- roofs and ridge points --------------------------------------------------------------------------

def test_ridge_points(devices):
    a100 = devices["a100-sxm4-40gb"]
    assert a100.ridge_point("fp32") == pytest.approx(19.5e12 / 1555e9)  # 12.5 FLOP/byte
    assert a100.ridge_point("tf32") == pytest.approx(156e12 / 1555e9)  # 100 FLOP/byte
    assert devices["h100-sxm5-80gb"].ridge_point("fp16") == pytest.approx(989.4e12 / 3350e9)
    # A V100 has no TF32: its tf32 roof is its fp32 roof.
    assert devices["v100-sxm2-16gb"].ridge_point("tf32") == devices["v100-sxm2-16gb"].ridge_point("fp32")
    assert devices["cpu"].ridge_point("fp32") is None  # nothing measured yet


def test_roofs_of_a_gpu(devices):
    roofs = devices["a100-sxm4-40gb"].roofs()
    assert all(isinstance(r, Roof) and r.source == "datasheet" for r in roofs)
    compute = [(r.precision_or_level, r.value) for r in roofs if r.kind == "compute"]
    assert compute == [("fp64", 9.7e12), ("fp64_tensor", 19.5e12), ("fp32", 19.5e12), ("tf32", 156e12),
                       ("fp16", 312e12), ("bf16", 312e12)]
    memory = [r for r in roofs if r.kind == "memory"]
    assert [(r.name, r.precision_or_level, r.value) for r in memory] == [("HBM2", "dram", 1555e9)]
    assert roofs[3].name == COMPUTE_ROOFS["tf32"] == "TF32 tensor"
    assert roofs[3].label == "TF32 tensor (datasheet)" and roofs[3].linestyle == "-"


def test_measured_roofs_sit_beside_the_datasheet_ones(tmp_path):
    ceilings = tmp_path / "a100.json"
    ceilings.write_text(json.dumps({"peak_flops_per_second": {"fp32": 18.1e12, "tf32": 140e12},
                                    "dram_bytes_per_second": 1.4e12, "l2_bytes_per_second": 4.5e12}))
    device = load_device(default_catalogue_path(), "a100-sxm4-40gb", ceilings)
    roofs = device.roofs()
    measured = [r for r in roofs if r.source == "measured"]
    assert [(r.kind, r.precision_or_level, r.value) for r in measured] == [
        ("compute", "fp32", 18.1e12), ("compute", "tf32", 140e12),
        ("memory", "dram", 1.4e12), ("memory", "l2", 4.5e12)]
    assert all(r.linestyle == "--" for r in measured)
    assert device.peak_flops_per_second["fp32"] == 19.5e12  # datasheet untouched
    assert device.ridge_point("fp32", measured=True) == pytest.approx(18.1e12 / 1.4e12)
    assert roofs.index(measured[0]) > max(roofs.index(r) for r in roofs if r.source == "datasheet")


def test_cpu_roofs_come_from_measurement(tmp_path):
    ceilings = tmp_path / "cpu.json"
    ceilings.write_text(json.dumps({"peak_flops_per_second": {"fp32": 1.4e11, "bf16": 1.1e12},
                                    "dram_bytes_per_second": 1.3e10, "l2_bytes_per_second": None}))
    cpu = load_device(default_catalogue_path(), "cpu", ceilings)
    assert [(r.name, r.source) for r in cpu.roofs()] == [("FP32", "measured"), ("BF16 matmul", "measured"),
                                                        ("DRAM", "measured")]
    assert cpu.roof_for_precision("fp32") == (1.4e11, 1.3e10)  # falls back to measured: no datasheet


@pytest.mark.parametrize("ceilings, absent", [
    ({"peak_flops_per_second": {}, "dram_bytes_per_second": 1.3e10}, "peak_flops_per_second.fp32"),
    ({"peak_flops_per_second": {"bf16": 1.1e12}, "dram_bytes_per_second": 1.3e10}, "peak_flops_per_second.fp32"),
    ({"peak_flops_per_second": {"fp32": 1.4e11}, "dram_bytes_per_second": None}, "dram_bytes_per_second"),
])
def test_a_cpu_ceilings_file_without_one_of_its_two_roofs_is_refused(tmp_path, ceilings, absent):
    """A CPU has no datasheet: a ceilings file without its FP32 peak priced ResNet-18 b1 at 6.6 ms (549 GFLOP/s on a
    CPU of 232 theoretical); without its bandwidth the advice was to pass the --ceilings that was passed."""
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps(ceilings))
    with pytest.raises(RooflowError) as error:
        load_device(default_catalogue_path(), "cpu", path)
    assert str(error.value) == (f"ceilings file {path}: it has no {absent}, and cpu has no datasheet value in its "
                                "place: give the JSON `rooflow ceilings --device cpu --output FILE` wrote on that device")
    # a GPU's datasheet stands in for a roof its file lacks
    gpu = tmp_path / "h100.json"
    gpu.write_text(json.dumps({"peak_flops_per_second": {"fp32": 5e13}}))
    assert load_device(default_catalogue_path(), "h100-sxm5-80gb", gpu).measured_peak_flops_per_second["fp32"] == 5e13


def test_fp16_without_tensor_cores_is_held_to_the_fp32_roof(devices):
    """PyTorch's fp16 products on a GPU without tensor cores are FP32 arithmetic (cuBLAS's FP32 compute, cuDNN's
    pseudo-half): a P100 fp16 run is held to its 9.3 TFLOP/s FP32 roof, not the 18.7 of packed half2 that the
    datasheet lists (and the catalogue keeps: it is the hardware's); its roofline time likewise. A V100's fp16
    stays on its tensor-core roof; tf32 on the P100 was already FP32 (no such roof)."""
    from rooflow.estimate import estimate
    from rooflow.estimate.predict import op_times

    p100, v100 = devices["p100-pcie-16gb"], devices["v100-sxm2-16gb"]
    assert p100.peak_flops_per_second["fp16"] == pytest.approx(18.7 * TERA)
    assert p100.roof_for_precision("fp16")[0] == p100.roof_for_precision("fp32")[0] == pytest.approx(9.3 * TERA)
    assert v100.roof_for_precision("fp16")[0] == pytest.approx(125 * TERA)
    ops = estimate("resnet18", 64, "fp16", "inference").ops
    products = ops[(ops["op_class"] == "matmul") & (ops["compute_precision"] == "fp16")]
    assert len(products) > 10
    seconds = op_times(products, p100, "fp16")["compute_seconds"].sum()
    assert seconds == pytest.approx(float(products["flops"].sum()) / (9.3 * TERA))


def test_load_device_names_the_valid_keys(tmp_path):
    with pytest.raises(RooflowError, match="a100-sxm4-40gb"):
        load_device(default_catalogue_path(), "a100")


def test_a_ceilings_path_to_nothing_is_refused_not_passed_over(tmp_path):
    """load_device(key, ceilings) with no file there returned the datasheet device without a word."""
    with pytest.raises(RooflowError, match=r"^ceilings file .*none.json: no such file: give the JSON `rooflow "
                                           r"ceilings --device t4 --output FILE` wrote on that device$"):
        load_device(default_catalogue_path(), "t4", tmp_path / "none.json")
    with pytest.raises(RooflowError, match=r": a folder, not a file: "):
        load_device(default_catalogue_path(), "t4", tmp_path)


def test_an_unknown_device_key_points_at_the_one_meant(capsys, root):
    """A user types what nvidia-smi prints, or the GPU's model: the error names the key of the device of that
    name, or that model's boards, before the whole list; the estimate CLI, the config and ceilings say the same."""
    path = default_catalogue_path()
    with pytest.raises(RooflowError, match=r"'NVIDIA L4' is the name of catalogue device l4: give its key, l4\)"):
        load_device(path, "NVIDIA L4")
    with pytest.raises(RooflowError, match=r"\(its H100 boards: h100-pcie-80gb, h100-sxm5-80gb\): use one of a10, "):
        load_device(path, "h100")
    with pytest.raises(RooflowError, match=r"\(its A100 boards: a100-pcie-40gb, a100-pcie-80gb, a100-sxm4-40gb, "):
        load_device(path, "A100 80GB")
    with pytest.raises(RooflowError, match=r"\(closest: l40s, l4\)"):
        load_device(path, "l40")
    with pytest.raises(RooflowError, match=r"device 'b200' is not in .*devices.yaml: use one of"):
        load_device(path, "b200")  # a model the catalogue lacks: no hint, the list
    assert cli.main(["estimate", "resnet18", "--device", "NVIDIA H200"]) != 0
    assert "is the name of catalogue device h200-sxm-141gb" in capsys.readouterr().err
    with pytest.raises(RooflowError, match=r"names device 'h100', which is not in .*\(its H100 boards: "):
        validate_config({"models": ["resnet18"], "devices": ["h100"]}, workdir=root)


# --- CLI ---------------------------------------------------------------------------------------------

def test_devices_command_lists_the_catalogue_with_units(capsys):
    assert cli.main(["devices"]) == 0
    out = capsys.readouterr().out
    for key in EXPECTED_KEYS:
        assert key in out
    assert "TFLOP/s" in out and "GB/s" in out and "989.4" in out


def test_devices_command_json(capsys):
    assert cli.main(["devices", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["t4"]["dram_bytes_per_second"] == 300e9
    assert data["h200-sxm-141gb"]["source"].startswith("https://")



# --- GPU arithmetic: FP32 peak = SMs × FP32 lanes per SM × 2 (FMA) × boost clock -----------------------
# Boost clocks (MHz) and FP32 lanes per SM from NVIDIA's architecture whitepapers and datasheets: 64 lanes
# per SM on sm_60/70/75/80, 128 on sm_86/89/90 (config/DEVICES.md, "Checking the GPU entries").
GPU_ARITHMETIC = {
    "p100-pcie-16gb": (64, 1303), "v100-sxm2-16gb": (64, 1530), "v100-pcie-16gb": (64, 1380), "t4": (64, 1590),
    "a100-sxm4-40gb": (64, 1410), "a100-pcie-40gb": (64, 1410), "a100-sxm4-80gb": (64, 1410),
    "a100-pcie-80gb": (64, 1410),
    "a10": (128, 1695), "l4": (128, 2040), "l40s": (128, 2520), "h100-sxm5-80gb": (128, 1980),
    "h100-pcie-80gb": (128, 1755), "h200-sxm-141gb": (128, 1980),
}


def test_every_gpu_fp32_peak_is_its_sm_arithmetic(devices):
    assert set(GPU_ARITHMETIC) == {k for k, d in devices.items() if d.is_cuda}
    for key, (lanes, boost_mhz) in GPU_ARITHMETIC.items():
        d = devices[key]
        arithmetic = d.sm_count * lanes * 2 * boost_mhz * 1e6
        assert d.peak_flops_per_second["fp32"] == pytest.approx(arithmetic, rel=0.01), key


# --- estimate-only devices: datasheet arithmetic, closed form ---------------------------------------

def test_tpu_v4_peaks_are_its_matrix_units_arithmetic(devices):
    tpu = devices["tpu-v4"]
    # 2 TensorCores × 4 MXUs × 128×128 multiply-accumulates × 2 FLOP × 1050 MHz
    assert tpu.peak_flops_per_second["bf16"] == pytest.approx(2 * 4 * 128 * 128 * 2 * 1.05e9)  # 275.25 TFLOP/s
    assert tpu.peak_flops_per_second["fp32"] == pytest.approx(2 * 4 * 128 * 128 * 2 * 1.05e9 / 6)  # 6 bf16 passes
    assert tpu.dram_bytes_per_second == 1200e9  # Google's stated HBM2 bandwidth per chip
    assert tpu.kind == "tpu" and tpu.memory_type == "HBM2"


def test_apple_a14_peak_sums_its_two_core_clusters(devices):
    a14 = devices["apple-a14"]
    # 2 Firestorm × 2.998 GHz × 32 (4 × 128-bit FMA) + 4 Icestorm × 1.823 GHz × 16 (2 × 128-bit FMA)
    assert a14.peak_flops_per_second["fp32"] == pytest.approx(2 * 2.998e9 * 32 + 4 * 1.823e9 * 16)  # 308.5 GFLOP/s
    assert a14.peak_flops_per_second["fp64"] == pytest.approx(a14.peak_flops_per_second["fp32"] / 2)
    # LPDDR4X-4266 on a 64-bit bus: 1 × 4266 MT/s × 8 bytes
    assert a14.dram_bytes_per_second == pytest.approx(4266e6 * 8)  # 34.1 GB/s
    assert "CPU" in a14.name and "Neural Engine" in a14.assumptions and "GPU" in a14.assumptions


def test_two_socket_xeons_are_sockets_times_cores_times_clock_times_flops_per_cycle(devices):
    broadwell = devices["xeon-e5-2699-v4-2s"]
    assert broadwell.peak_flops_per_second["fp32"] == pytest.approx(2 * 22 * 2.2e9 * 32)  # AVX2, 2 FMA: 3.10 TF
    assert broadwell.peak_flops_per_second["fp64"] == pytest.approx(2 * 22 * 2.2e9 * 16)
    assert broadwell.dram_bytes_per_second == pytest.approx(2 * 4 * 2400e6 * 8)  # 153.6 GB/s DDR4-2400
    ivy = devices["xeon-e5-2697-v2-2s"]
    assert ivy.peak_flops_per_second["fp32"] == pytest.approx(2 * 12 * 2.7e9 * 16)  # AVX, no FMA: 1.04 TF
    assert ivy.peak_flops_per_second["fp64"] == pytest.approx(2 * 12 * 2.7e9 * 8)
    assert ivy.dram_bytes_per_second == pytest.approx(2 * 4 * 1866e6 * 8)  # 119.4 GB/s DDR3-1866
    for d in (broadwell, ivy):
        assert d.derivation["sockets"] == 2 and d.derivation["core_groups"][0]["clock"] == "base"
        assert "base clock" in d.assumptions


def test_xeon_phi_7120a_is_61_cores_of_one_512_bit_fma_unit(devices):
    phi = devices["xeon-phi-7120a"]
    assert phi.peak_flops_per_second["fp64"] == pytest.approx(61 * 1.238e9 * 16)  # Intel: 1.208 TFLOPS
    assert phi.peak_flops_per_second["fp32"] == pytest.approx(61 * 1.238e9 * 32)
    assert phi.dram_bytes_per_second == pytest.approx(8 * 5500e6 * 8)  # 352 GB/s GDDR5
    assert phi.memory_bytes == 16e9


def test_estimate_only_entries_are_sourced_assumed_and_never_submitted(devices):
    for key in ESTIMATE_ONLY_KEYS:
        d = devices[key]
        assert d.source.startswith("https://") and d.assumptions and d.derivation, key
        assert d.slurm == {}, key
        assert d.peak_flops_per_second["fp32"] > 0 and d.dram_bytes_per_second > 0, key
        peaks, bandwidth = derived_roofs(d.derivation)
        assert peaks.keys() == d.peak_flops_per_second.keys(), key
        for precision, value in peaks.items():
            assert d.peak_flops_per_second[precision] == pytest.approx(value, rel=1e-4), (key, precision)
        if bandwidth is not None:
            assert d.dram_bytes_per_second == pytest.approx(bandwidth, rel=1e-4), key
        assert all(g["clock"] in ("base", "avx_base", "max") for g in d.derivation["core_groups"]), key


def estimate_only_entry(**changes):
    entry = {
        "kind": "cpu", "estimate_only": True, "name": "Test Xeon", "memory_bandwidth_gbytes_per_second": 153.6,
        "peak_tflops_per_second": {"fp32": 3.0976}, "assumptions": "base clock",
        "source": "https://example.com/ark",
        "derivation": {"sockets": 2, "core_groups": [{"name": "core", "count": 22, "clock_ghz": 2.2,
                                                      "clock": "base", "flops_per_cycle": {"fp32": 32}}],
                       "memory": {"channels": 4, "transfer_rate_mts": 2400, "bytes_per_transfer": 8}},
    }
    entry.update(changes)
    return entry


def test_a_listed_peak_that_its_derivation_does_not_give_is_rejected(tmp_path):
    assert load_devices(write_catalogue(tmp_path, {"x": estimate_only_entry()}))["x"].estimate_only
    message = rejection(tmp_path, {"x": estimate_only_entry(peak_tflops_per_second={"fp32": 6.1952})})
    assert "'x'" in message and "fp32" in message and "3.0976" in message  # two FMA units counted twice
    message = rejection(tmp_path, {"x": estimate_only_entry(memory_bandwidth_gbytes_per_second=76.8)})
    assert "memory_bandwidth_gbytes_per_second" in message and "153.6" in message  # one socket only
    message = rejection(tmp_path, {"x": estimate_only_entry(peak_tflops_per_second={"fp32": 3.0976, "fp64": 1.5})})
    assert "fp64" in message


def test_the_schema_keeps_estimate_only_devices_off_the_cluster(tmp_path):
    message = rejection(tmp_path, {"x": estimate_only_entry(slurm={"partition": "cpu"})})
    assert "'x'" in message and "slurm" in message
    no_assumptions = estimate_only_entry()
    del no_assumptions["assumptions"]
    assert "assumptions" in rejection(tmp_path, {"x": no_assumptions})
    tpu = estimate_only_entry(kind="tpu", estimate_only=False)
    assert "estimate_only" in rejection(tmp_path, {"x": tpu})


def test_the_workflow_rejects_an_estimate_only_device_in_devices(root):
    config = {"models": ["resnet18"], "devices": ["cpu", "tpu-v4"]}
    with pytest.raises(RooflowError) as info:
        validate_config(config, workdir=root)
    message = str(info.value)
    assert "\n" not in message and "'tpu-v4'" in message and "estimate-only" in message
    assert "rooflow estimate --device tpu-v4" in message and "imported profile" in message


def test_an_imported_profile_names_a_gpu_estimate_only_or_not(root):
    """Imports were allowed on any catalogue device, estimate-only ones included (nothing runs there): so an A100's
    Nsight Compute log imported as the estimate-only Xeon Phi's was drawn on a CPU's roofline. ncu and nsys profile
    NVIDIA GPUs: an import names one (every estimate-only device of the catalogue is a CPU or a TPU)."""
    ncu = "tests/data/real/anoushka21-cloudml/proj1/a100/vgg11/ncu-log-vgg11.txt"
    run = {"model": "vgg11", "batch": 16, "precision": "fp32", "mode": "training", "ncu": [ncu]}
    config = {"models": ["vgg11"], "devices": ["cpu"], "imports": [{"device": "xeon-phi-7120a", **run}]}
    with pytest.raises(RooflowError, match=r"key 'imports/0/device' is xeon-phi-7120a, a cpu device, but ncu and "
                                           r"nsys profile NVIDIA GPUs: name the catalogue GPU"):
        validate_config(config, workdir=root)
    config["imports"] = [{"device": "a100-sxm4-40gb", **run}]
    assert validate_config(config, workdir=root)["imports"][0]["device"] == "a100-sxm4-40gb"


def test_devices_command_marks_estimate_only_devices(capsys):
    assert cli.main(["devices"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for key in ESTIMATE_ONLY_KEYS:
        line = next(line for line in lines if line.startswith(key + " "))
        assert line.endswith("[estimate only]"), line
    assert not any(line.startswith("h100-sxm5-80gb ") and "estimate only" in line for line in lines)


def test_catalogue_faults_name_the_key_the_fix_and_the_catalogues_own_page(tmp_path):
    """An upper-case device key said "the file is 'H100-X' ... see config/README.md" (the file is no key, the page
    the config's); `kind: gpu` was offered 'tpu' (the closest spelling) where an NVIDIA GPU is 'cuda'; an empty
    catalogue pointed at the config's page."""
    catalogue = yaml.safe_load(default_catalogue_path().read_text())
    cases = {"upper": ({**catalogue, "H100-X": catalogue["h100-sxm5-80gb"]},
                       "key name 'H100-X' is not allowed: A device key is lowercase letters, digits and dashes (it "
                       "names result folders and Snakemake wildcards), e.g. h100-sxm5-80gb: rename it "
                       "(config/DEVICES.md)"),
             "gpu": ({**catalogue, "t4": {**catalogue["t4"], "kind": "gpu"}},
                     "key 't4/kind' is 'gpu' (did you mean 'cuda'?), not one of cuda, cpu, tpu"),
             "empty": (None, "the file is empty: see config/DEVICES.md")}
    for name, (data, says) in cases.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(data) if data is not None else "")
        with pytest.raises(RooflowError) as error:
            load_devices(path)
        assert str(error.value).startswith(f"{path}: {says}"), str(error.value)
