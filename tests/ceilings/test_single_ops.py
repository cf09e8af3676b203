"""Single ops measured on the user's GPU (`rooflow ceilings --single-ops DIR`), fitted (`rooflow calibrate-kernels
--data DIR -o FILE`) and used (`rooflow estimate --kernel-calibrations FILE`). No GPU here: the CUDA-event timing
runs on a GPU only; the rest — shapes, layout, provenance, the fit and its use — runs for real on the CPU, the
timings standing in for a GPU's (the round trip, not the numbers, is what these tests pin)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import torch

from rooflow import cli
from rooflow.ceilings import single_ops
from rooflow.errors import RooflowError
from rooflow.estimate import kernel_calibration as kc
from rooflow.hardware.devices import default_catalogue_path, load_devices
from tests.support import REAL, RECORDED_CPU_CEILINGS

DEVICES = load_devices(default_catalogue_path())


def test_plan_is_seeded_and_within_the_data_sets_ranges():
    shapes = single_ops.plan(30, seed=1)
    assert shapes == single_ops.plan(30, seed=1) and shapes != single_ops.plan(30, seed=2)
    assert set(shapes) == set(kc.OPERATORS)  # every operator the kernel model reads, and only those
    for operator, drawn in shapes.items():
        ranges = single_ops.RANGES["elementwise" if operator in single_ops.ELEMENTWISE else operator]
        assert len(drawn) == 30
        for shape in drawn:
            assert all(low <= shape[name] <= high for name, (low, high) in ranges.items()), (operator, shape)
            flops, tensor_bytes = single_ops._flops_and_bytes(operator, shape)
            assert flops <= single_ops.MAX_FLOPS and tensor_bytes <= single_ops.MAX_TENSOR_BYTES


def test_many_shapes_where_the_library_picks_kernels_by_shape():
    """cuDNN's and cuBLAS's picks by shape need many measured shapes to fit (500 of each convolution and GEMM
    operator), the memory-bound ops few (40); --quick a quarter; a count per operator is followed."""
    counts = single_ops.shape_counts()
    assert counts["conv"] == counts["linear"] == counts["bmm"] == 500
    assert counts["add"] == counts["ln"] == counts["softmax"] == 40 and len(counts) == len(kc.OPERATORS)
    assert single_ops.shape_counts(quick=True)["conv"] == 125 and single_ops.shape_counts(quick=True)["relu"] == 10
    drawn = single_ops.plan({"conv": 5, "relu": 2})
    assert {operator: len(shapes) for operator, shapes in drawn.items() if shapes} == {"conv": 5, "relu": 2}


def test_device_config_is_the_catalogue_datasheet_the_kernel_model_reads():
    for key in ("l4", "t4", "h100-sxm5-80gb"):
        device = DEVICES[key]
        from_config = kc.gpu_from_config(single_ops.device_config(device), device.architecture)
        from_catalogue = kc.gpu_from_device(device)
        assert from_config.name == device.name and from_config.sm_count == from_catalogue.sm_count
        assert from_config.dram_bytes_per_second == pytest.approx(from_catalogue.dram_bytes_per_second, rel=0.01)
        assert from_config.fp32_flops_per_second == pytest.approx(from_catalogue.fp32_flops_per_second, rel=0.01)
        assert from_config.l2_bytes == pytest.approx(from_catalogue.l2_bytes)


def test_a_device_without_the_kernel_models_datasheet_is_refused():
    with pytest.raises(RooflowError, match="lacks l2_cache_bytes.*config/devices.yaml"):
        single_ops.device_config(DEVICES["cpu"].__class__(key="x", kind="cuda", name="X", sm_count=10,
                                                         peak_flops_per_second={"fp32": 1e12},
                                                         dram_bytes_per_second=1e11))


def test_single_ops_fitted_and_used_round_trip(tmp_path, monkeypatch, capsys, added_calibrations):
    """Measured in the data set's layout, with the provenance beside them; fitted by calibrate-kernels into a file
    whose L4 entry names where its single ops came from; and, added, what the L4 is predicted from."""
    monkeypatch.setattr(single_ops, "MAX_FLOPS", 2e8)  # CPU-sized shapes
    monkeypatch.setattr(single_ops, "MAX_TENSOR_BYTES", 2**22)
    # timed on this CPU, named a GPU: 10-1,000x what the GPU's datasheet allows (the unit check's business)
    monkeypatch.setattr(kc, "UNIT_RATIO", 1e6)
    device = DEVICES["l4"]
    folder = single_ops.collect(torch, device, tmp_path / "ops", 3, torch_device="cpu",
                                log=lambda line: None)
    rows = kc.load_measurements(folder)
    assert len(rows) == 3 * len(kc.OPERATORS) and set(rows["gpu"]) == {"NVIDIA L4"}
    assert (rows["seconds"] > 0).all()
    assert set(rows.loc[rows["operator"] == "conv", "Kernel_Szie"]) == {3}
    provenance = json.loads((folder / kc.SINGLE_OPS_PROVENANCE).read_text())
    assert provenance["device_key"] == "l4" and provenance["calls"] == 25 and provenance["fastest"] == 5

    capsys.readouterr()
    assert cli.main(["calibrate-kernels", "--check", str(folder)]) == 0
    assert "NVIDIA L4: " in capsys.readouterr().out.splitlines()[0]  # the re-timing passes' line, then the tables
    output = tmp_path / "kernels-l4.json"
    assert cli.main(["calibrate-kernels", "--data", str(folder), "-o", str(output)]) == 0
    entry = json.loads(output.read_text())["measured"]["NVIDIA L4"]
    assert entry["catalogue"] == "l4"
    assert "measured by rooflow ceilings --single-ops on cpu (l4)" in entry["calibration"]["source"]

    before, _ = kc.for_gpu(device)
    assert before.source.startswith("NVIDIA L4: not measured")
    assert kc.add_calibrations(output) == ["NVIDIA L4"]
    after, _ = kc.for_gpu(device)
    assert after.source == entry["calibration"]["source"]
    assert after.classes["gemm"]["efficiency"] == entry["calibration"]["classes"]["gemm"]["efficiency"]
    # the shipped GPUs stay as shipped
    assert kc.for_gpu(DEVICES["t4"])[0].source.startswith("fitted on")
    # the command line takes several files, as the workflow's `kernel_calibrations:` does
    shipped = str(kc.resources.files("rooflow.data.calibration").joinpath(kc.SHIPPED_FILE))
    capsys.readouterr()
    assert cli.main(["estimate", "resnet18", "--device", "l4", "--kernel-calibrations", shipped,
                     "--kernel-calibrations", str(output)]) == 0
    assert "measured by rooflow ceilings --single-ops on cpu (l4)" in capsys.readouterr().out


def test_several_folders_fit_into_one_file(tmp_path, monkeypatch, capsys):
    """`calibrate-kernels --data A --data B` fits every GPU of both folders into one file (rooflow's shipped one is
    the data set's folder and its own H200 single ops), each naming its folder; a GPU in two folders is refused in
    one sentence."""
    monkeypatch.setattr(single_ops, "MAX_FLOPS", 2e8)  # CPU-sized shapes
    monkeypatch.setattr(single_ops, "MAX_TENSOR_BYTES", 2**22)
    # timed on this CPU, named a GPU: 10-1,000x what the GPU's datasheet allows (the unit check's business)
    monkeypatch.setattr(kc, "UNIT_RATIO", 1e6)
    folders = [single_ops.collect(torch, DEVICES[key], tmp_path / key, 2, torch_device="cpu", log=lambda line: None)
               for key in ("l4", "t4")]
    output = tmp_path / "kernels.json"
    assert cli.main(["calibrate-kernels", "--data", str(folders[0]), "--data", str(folders[1]),
                     "-o", str(output)]) == 0
    measured = json.loads(output.read_text())["measured"]
    assert {name: entry["catalogue"] for name, entry in measured.items()} == {"NVIDIA L4": "l4", "Tesla T4": "t4"}
    assert "l4/)" in measured["NVIDIA L4"]["calibration"]["source"]
    assert "t4/)" in measured["Tesla T4"]["calibration"]["source"]
    data, gpus = kc.load_folders(folders)  # what --held-out holds out: both folders' rows and GPUs
    assert set(gpus) == set(data["gpu"]) == {"NVIDIA L4", "Tesla T4"} and len(data) == 2 * 2 * len(kc.OPERATORS)
    for held_out in ([], ["--held-out"]):
        capsys.readouterr()
        assert cli.main(["calibrate-kernels", "--data", str(folders[0]), "--data", str(folders[0]), *held_out]) == 2
        error = capsys.readouterr().err.strip()
        assert "single ops of NVIDIA L4, which another of the folders given also holds" in error
        assert len(error.splitlines()) == 1


def test_a_missing_or_foreign_calibrations_file_is_one_sentence(tmp_path, capsys, added_calibrations):
    with pytest.raises(RooflowError, match="no such kernel calibrations file.*calibrate-kernels --data DIR"):
        kc.add_calibrations(tmp_path / "none.json")
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({"roofs": {}}))
    with pytest.raises(RooflowError, match="not a kernel calibrations file"):
        kc.add_calibrations(foreign)
    assert cli.main(["estimate", "resnet18", "--device", "l4", "--kernel-calibrations", str(foreign)]) == 2
    error = capsys.readouterr().err.strip()
    assert "foreign.json" in error and "\n" not in error
    # one of no GPU (written by an older calibrate-kernels from header-only files) changed nothing, silently
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"measured": {}, "roofs": {}}))
    assert cli.main(["estimate", "resnet18", "--device", "l4", "--kernel-calibrations", str(empty)]) == 2
    error = capsys.readouterr().err.strip()
    assert f"{empty}: no GPU's calibration in it" in error and "\n" not in error


def test_single_ops_need_a_catalogue_gpu(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr("rooflow.cli.ceilings.measure_ceilings", lambda *a, **k: pytest.fail("measured first"))
    assert cli.main(["ceilings", "--single-ops", str(tmp_path / "ops")]) == 2
    error = capsys.readouterr().err.strip()
    assert "--device" in error and "\n" not in error
    assert not (tmp_path / "ops").exists()
    # a CPU given as the device: it names it (it said "give --device" to a user who had)
    assert cli.main(["ceilings", "--single-ops", str(tmp_path / "ops"), "--device", "cpu"]) == 2
    assert "and --device cpu is not a GPU: give --device, the catalogue key of the GPU here" in capsys.readouterr().err
    assert not (tmp_path / "ops").exists()


def test_a_shape_without_gpu_memory_is_left_out(tmp_path, monkeypatch):
    """An out-of-memory call leaves its shape out (said so), the rest of the operator is written."""
    monkeypatch.setattr(single_ops, "plan", lambda counts, seed=0: {"relu": [{"B": 2, "H": 3}, {"B": 4, "H": 5}]})
    real = single_ops.build_call

    def build(torch_, operator, shape, device):
        if shape["B"] == 4:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")
        return real(torch_, operator, shape, device)

    monkeypatch.setattr(single_ops, "build_call", build)
    said = []
    single_ops.collect(torch, DEVICES["l4"], tmp_path, 2, torch_device="cpu", log=said.append)
    written = pd.read_csv(tmp_path / "relu" / "NVIDIA_L4.csv")
    assert list(written["B"]) == [2]
    assert any("out of GPU memory" in line and "'B': 4" in line for line in said)


def _thirty_adds(unit: float = 1.0) -> str:
    """A T4's add measurements in the data set's layout: 30 calls, 0.030-0.059 ms, batch 64-93 of 1,024 (their
    latencies times ``unit``: 1e3 writes them in microseconds)."""
    rows = [f"add,{(0.03 + i * 1e-3) * unit:.6g},Tesla T4,{64 + i},{1024}" for i in range(30)]
    return "\n".join(["OPName,Latency,Device,B,H", *rows]) + "\n"


@pytest.mark.parametrize("damage, says", [
    ("foreign", "Tesla_T4.csv.gz: no column Device, Latency, B, H: not a file of add measurements"),
    ("cut-gzip", "Tesla_T4.csv.gz: not a readable file of add measurements (EOFError"),
    ("cut-rows", "Tesla_T4.csv.gz: 1 of 30 rows lack a number or a positive Latency (the first at line 31)"),
    ("header-only", "Tesla_T4.csv.gz: no measurements in it, only its header: the run that wrote it stopped"),
    ("no-config", "device_configs: no config of 'Tesla T4', whose single ops are measured there"),
    # each was fitted without a word: every class at its bounds, a calibration pricing ResNet-18 on a T4 1.8x (a
    # negated batch) or 10x (microseconds) slow
    ("negative-shape", "Tesla_T4.csv.gz: 1 of 30 rows have a shape that is not a whole number of 1 or more (0 or more "
                       "for Padding; the first at line 4: B -66)"),
    ("microseconds", "add/: the Tesla T4's add calls take 1.4e+03x what its datasheet allows them (the median of its "
                     "calls, at the kernel model's default efficiencies): Latency must be milliseconds, and these look "
                     "like microseconds (divide them by 1,000)"),
    ("bare-config", "Tesla_T4.json: no Num_Sm, SingleFLOPs, Mem_Bw, L2Cache in this device config"),
])
def test_a_damaged_single_ops_folder_is_one_sentence(tmp_path, capsys, damage, says):
    """A foreign, truncated or header-only measurements file, or a GPU without its device config, ends
    calibrate-kernels (--data and --check) in one sentence naming the file and what it lacks — before any fit, and
    with no calibrations file written."""
    import gzip

    (tmp_path / "add").mkdir()
    (tmp_path / "device_configs").mkdir()
    config = {"Device": "Tesla T4", "Num_Sm": 40, "SingleFLOPs": 8141, "Mem_Bw": 320, "L2Cache": 4}
    text = _thirty_adds()
    if damage == "foreign":
        text = "name,ms\nadd,0.03\n"
    elif damage == "cut-rows":
        text = text[: text.rindex(",")] + "\n"  # the last row cut after its batch: no H
    elif damage == "header-only":  # --check ended in a KeyError traceback, --data wrote an empty calibration
        text = text.splitlines()[0] + "\n"
    elif damage == "negative-shape":
        text = text.replace("Tesla T4,66,", "Tesla T4,-66,")
    elif damage == "microseconds":
        text = _thirty_adds(unit=1e3)
    data = gzip.compress(text.encode())
    if damage == "cut-gzip":
        data = data[: len(data) // 2]
    (tmp_path / "add" / "Tesla_T4.csv.gz").write_bytes(data)
    if damage == "bare-config":
        config = {"Device": "Tesla T4"}
    if damage != "no-config":
        (tmp_path / "device_configs" / "Tesla_T4.json").write_text(json.dumps(config))
    output = tmp_path / "kernels.json"
    for command in (["--data", str(tmp_path), "-o", str(output)], ["--check", str(tmp_path)]):
        assert cli.main(["calibrate-kernels", *command]) == 2
        error = capsys.readouterr().err.strip()
        assert says in error and "\n" not in error and "Traceback" not in error
    assert not output.exists()


def test_calibrate_kernels_refuses_to_write_over_its_measurements(tmp_path, capsys):
    """`calibrate-kernels --data D -o D/add/Tesla_T4.csv.gz` replaced 1,750 measured latencies with the calibration
    (exit 0), `-o D/device_configs/Tesla_T4.json` the GPU's datasheet; a re-run blamed the data. Refused before the
    fit; a file beside the operator folders is no measurement and is written."""
    (tmp_path / "add").mkdir()
    (tmp_path / "device_configs").mkdir()
    measured = tmp_path / "add" / "Tesla_T4.csv"
    measured.write_text(_thirty_adds())
    (tmp_path / "device_configs" / "Tesla_T4.json").write_text(json.dumps(
        {"Device": "Tesla T4", "Num_Sm": 40, "SingleFLOPs": 8141, "Mem_Bw": 320, "L2Cache": 4}))
    for output in (measured, tmp_path / "device_configs" / "Tesla_T4.json"):
        before = output.read_bytes()
        assert cli.main(["calibrate-kernels", "--data", str(tmp_path), "-o", str(output)]) == 2
        assert capsys.readouterr().err.strip() == (
            f"rooflow calibrate-kernels: error: -o {output} writes {output} among the measurements of --data "
            f"{tmp_path} (its operator and device_configs folders, its provenance): it could replace one of them; "
            "write the calibration beside them or elsewhere")
        assert output.read_bytes() == before


def test_an_operator_folder_spelt_otherwise_is_refused_and_an_unknown_one_named(tmp_path, capsys):
    """`Add/` beside `linear/`: its calls were left out without a word (the calibration fitted GEMMs only, exit 0)."""
    (tmp_path / "Add").mkdir()
    (tmp_path / "Add" / "Tesla_T4.csv").write_text(_thirty_adds())
    assert cli.main(["calibrate-kernels", "--data", str(tmp_path), "-o", str(tmp_path / "k.json")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"rooflow calibrate-kernels: error: --data {tmp_path}: its folder Add/ is no operator rooflow reads, and add/ "
        "is: rename it add/ (operator folders are lower case)")
    (tmp_path / "Add").rename(tmp_path / "add")
    (tmp_path / "device_configs").mkdir()
    (tmp_path / "device_configs" / "Tesla_T4.json").write_text(json.dumps(
        {"Device": "Tesla T4", "Num_Sm": 40, "SingleFLOPs": 8141, "Mem_Bw": 320, "L2Cache": 4}))
    (tmp_path / "embedding").mkdir()
    (tmp_path / "embedding" / "Tesla_T4.csv").write_text("OPName,Latency,Device\n")
    assert cli.main(["calibrate-kernels", "--data", str(tmp_path), "-o", str(tmp_path / "k.json")]) == 0
    assert "not fitted (no model of these operators): embedding/ — rooflow models conv, linear" in \
        capsys.readouterr().err


def test_a_data_folder_that_is_not_there_is_named_so(tmp_path, capsys):
    """`calibrate-kernels --data nowhere` said "no single-op measurements found", as of a folder without them."""
    for data, why in ((tmp_path / "nowhere", "no such folder"), (Path(__file__), "a file, not a folder")):
        assert cli.main(["calibrate-kernels", "--data", str(data), "-o", str(tmp_path / "k.json")]) == 2
        assert capsys.readouterr().err.strip() == (
            f"rooflow calibrate-kernels: error: {data}: {why}: give the folder of <operator>/<GPU>.csv(.gz) files "
            "(`rooflow ceilings --single-ops DIR` writes one)")


def test_an_intact_single_ops_folder_is_read_as_written(tmp_path):
    """The checks above refuse nothing whole: the same folder undamaged is read, every row, with its numbers."""
    (tmp_path / "add").mkdir()
    (tmp_path / "add" / "Tesla_T4.csv").write_text(_thirty_adds())
    rows = kc.load_measurements(tmp_path)
    assert len(rows) == 30 and rows["seconds"].iloc[-1] == pytest.approx(0.059e-3)
    assert rows["B"].tolist() == list(range(64, 94))


def test_a_ceilings_file_of_another_kind_is_one_sentence(tmp_path, capsys):
    """calibrate-kernels --ceilings KEY=FILE with FILE cut short, or a JSON without a measured FP32 rate."""
    cut, foreign = tmp_path / "cut.json", tmp_path / "list.json"
    cut.write_text('{"peak_flops_per_second": {"fp32": 5')
    foreign.write_text("[1, 2]")
    for path, says in ((cut, f"{cut}: not JSON (Expecting"),
                       (foreign, "h100-sxm5-80gb: the ceilings file holds no measured FP32 GEMM rate")):
        assert cli.main(["calibrate-kernels", "--data", str(tmp_path), "--ceilings", f"h100-sxm5-80gb={path}"]) == 2
        error = capsys.readouterr().err.strip()
        assert says in error and "\n" not in error


def test_kernel_names_are_added_after_every_latency(tmp_path, monkeypatch):
    """On a GPU the library operators' rows name the kernels one more call launched (`Kernels`, `;`-separated as
    the data set's, and `Kernel Name`, the longest), in a pass after all timings: a process that has run
    torch.profiler times later calls slower (on the lent H200, elementwise calls timed after it took a median
    2.3x a clean run's, two clean runs 1.13x apart). A profiler that fails leaves the latencies as written."""
    shape = {"B": 1, "M": 8, "N": 8, "K": 8}
    measured = {"linear": [(shape, {"OPName": "linear", "Latency": 0.03, "Device": "X"})]}
    monkeypatch.setattr(single_ops, "launched_kernels", lambda torch, call: [("gemv", 2e-6), ("splitk_reduce", 1e-6)])
    single_ops._name_kernels(torch, measured, "cpu", tmp_path, "X", log=print)
    written = pd.read_csv(tmp_path / "linear" / "X.csv")
    assert written.loc[0, "Kernels"] == ";gemv;splitk_reduce" and written.loc[0, "Kernel Name"] == "gemv"
    assert written.loc[0, "Latency"] == 0.03 and written.loc[0, "M"] == 8

    def fails(torch, call):
        raise RuntimeError("CUPTI_ERROR_INSUFFICIENT_PRIVILEGES")

    logged = []
    monkeypatch.setattr(single_ops, "launched_kernels", fails)
    measured = {"bmm": [(shape, {"OPName": "bmm", "Latency": 0.02, "Device": "X"})]}
    single_ops._write_rows(tmp_path / "bmm" / "X.csv", measured["bmm"])
    single_ops._name_kernels(torch, measured, "cpu", tmp_path, "X", log=logged.append)
    assert logged == ["single ops: kernel names not recorded (torch.profiler: RuntimeError: "
                      "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES); the latencies are written without them"]
    assert "Kernels" not in pd.read_csv(tmp_path / "bmm" / "X.csv").columns


def test_a_calls_kernels_are_read_from_its_trace_in_start_order():
    """The kernels named for a call: the trace's kernel events (its CPU ops and runtime calls left out), by start."""
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::linear", "ts": 0.0, "dur": 40.0},
              {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 1.0, "dur": 3.0},
              {"ph": "X", "cat": "kernel", "name": "splitKreduce_kernel", "ts": 30.0, "dur": 2.0},
              {"ph": "X", "cat": "kernel", "name": "sgemm_largek_lds64", "ts": 10.0, "dur": 15.0},
              {"ph": "i", "cat": "kernel", "name": "marker", "ts": 5.0}]
    kernels = single_ops.kernels_of_trace(events)
    assert [name for name, _ in kernels] == ["sgemm_largek_lds64", "splitKreduce_kernel"]
    assert [seconds for _, seconds in kernels] == pytest.approx([15e-6, 2e-6])


def test_a_real_traces_kernels_are_the_timelines():
    """On a real H200 trace (tests/data/real/gpu-2026-11-27) the kernels read here are the timing job's timeline
    kernels (rooflow.measure.timeline, the layer above), name for name and in order."""
    import gzip
    from pathlib import Path

    from rooflow.measure.timeline import parse_trace

    trace = (Path(__file__).resolve().parents[1] / "data" / "real" / "gpu-2026-11-27"
             / "torch-profiler-squeezenet1_1-b256-bf16-inference.json.gz")
    kernels = single_ops.kernels_of_trace(json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"])
    timeline = parse_trace(trace)
    assert len(kernels) > 50
    assert [name for name, _ in kernels] == list(timeline.loc[timeline["kind"] == "kernel", "name"])


def test_a_short_call_timed_in_a_slow_stretch_of_its_host_keeps_its_fastest_pass(tmp_path, monkeypatch):
    """A call under RETIME_BELOW_SECONDS is timed again in later passes and keeps its fastest (every pass in
    `Pass_Latencies`, ms); a longer call, and every convolution (whose place in its run the drift fit reads), keep
    their first. The host here: a first pass in a stretch 1.6x slow, as the lent H200's repeat run read its
    softmax, tanh and powu blocks (0.58-0.60x the first run's), and fast ever after."""
    shapes = {"conv": [{"B": 1, "Input_Channel": 3, "Output_Channel": 3, "Input_Size": 5}],
              "relu": [{"B": 1, "H": 8}, {"B": 2, "H": 8}], "softmax": [{"B": 3, "H": 8}, {"B": 4, "H": 8}]}
    monkeypatch.setattr(single_ops, "plan", lambda counts, seed=0: shapes)
    monkeypatch.setattr(single_ops, "PASSES", 3)  # the mechanism; how many a GPU run takes is the constant's
    fast = {("conv", 1): 30e-6, ("relu", 1): 20e-6, ("relu", 2): 2e-3, ("softmax", 3): 15e-6, ("softmax", 4): 16e-6}
    timed: list[tuple[str, int]] = []
    monkeypatch.setattr(single_ops, "build_call", lambda torch_, operator, shape, device: (operator, shape["B"]))

    def time_call(torch_, call, cuda, calls=single_ops.CALLS, fastest=single_ops.FASTEST):
        timed.append(call)
        return fast[call] * (1.6 if len(timed) <= 5 else 1.0)  # the first pass's five calls: a slow stretch

    monkeypatch.setattr(single_ops, "time_call", time_call)
    said: list[str] = []
    single_ops.collect(torch, DEVICES["l4"], tmp_path, 2, torch_device="cpu", log=said.append)
    assert timed[5:] == [("relu", 1), ("softmax", 3), ("softmax", 4)] * 2
    relu, softmax = pd.read_csv(tmp_path / "relu" / "NVIDIA_L4.csv"), pd.read_csv(tmp_path / "softmax" / "NVIDIA_L4.csv")
    conv = pd.read_csv(tmp_path / "conv" / "NVIDIA_L4.csv")
    assert relu["Latency"].tolist() == pytest.approx([0.020, 3.2])  # ms: the short call's fast pass, the long one's first
    assert softmax["Latency"].tolist() == pytest.approx([0.015, 0.016])
    assert conv["Latency"].tolist() == pytest.approx([0.048])  # a convolution keeps its place in the run
    assert relu.loc[0, "Pass_Latencies"] == "0.032;0.02;0.02" and pd.isna(relu.loc[1, "Pass_Latencies"])
    assert "Pass_Latencies" not in conv.columns
    assert any("3 calls under 1 ms timed in 2 more passes" in line and "3 took over 10% longer in their first pass" in line
               for line in said)
    provenance = json.loads((tmp_path / kc.SINGLE_OPS_PROVENANCE).read_text())
    assert provenance["passes"] == 3 and provenance["retimed_below_seconds"] == 1e-3
    assert provenance["not_retimed"] == ["conv"]
    # and the fit reads the file with its extra column, the fastest passes as the latencies
    rows = kc.load_measurements(tmp_path)
    assert sorted(rows.loc[rows["operator"] == "softmax", "seconds"]) == pytest.approx([15e-6, 16e-6])
    # which `calibrate-kernels --check` says of them: the first pass 1.6x each call's fastest
    assert single_ops.stretches(rows) == (
        "NVIDIA L4: 3 calls under 1 ms timed in 3 passes; 3 took over 10% longer in their first pass than in their "
        "fastest (median 1.60x, the most 1.60x; slow stretches of the host's dispatch do this); the fastest pass is "
        "the latency scored")
    assert single_ops.stretches(rows.drop(columns="Pass_Latencies")) is None  # the data set's files


def test_another_devices_ceilings_are_refused(tmp_path, capsys):
    """A CPU's ceilings given for a T4 made a calibration with an elementwise efficiency of 96 and a GEMM efficiency
    of 0.016, exit 0 (a new user's pass); an H100's for a T4 would fit the T4 to the H100's rates. Both: one
    sentence naming the file, what it holds and the fix, nothing written."""
    cpu, h100 = RECORDED_CPU_CEILINGS, REAL / "h100-rooflow" / "ceilings-h100.json"
    output = tmp_path / "kernels-t4.json"
    for path, holds in ((cpu, "it holds the roofs of a CPU (AMD EPYC), and t4 is a CUDA"),
                        (h100, "it holds the roofs of a H100 (NVIDIA H100 80GB HBM3), and t4 is a T4 (Tesla T4)")):
        assert cli.main(["calibrate-kernels", "--data", str(tmp_path), "--ceilings", f"t4={path}",
                         "-o", str(output)]) == 2
        error = capsys.readouterr().err.strip()
        assert f"ceilings file {path}: {holds}: give the JSON `rooflow ceilings --device t4" in error
        assert "\n" not in error and not output.exists()
