"""What to change next (rooflow.estimate.whatif): the alternatives of a run, ranked by the time model's numbers,
and started from a measured H100 step."""

from __future__ import annotations

import json

import pytest
import torch

from rooflow.errors import RooflowError
from rooflow.estimate.api import estimate_run, predict, what_if_module
from rooflow.estimate.whatif import format_table, supported_precisions, what_if
from rooflow.hardware.devices import default_catalogue_path, load_devices
from rooflow.io import read_json
from rooflow.workload.spec import spec_from_options
from tests.support import real

H100_STEP = "h100-rooflow/resnet50-b64-tf32-training-timing.json"


def estimator(model: str, mode: str):
    spec = spec_from_options(model, None, None, None)
    return lambda batch, precision: estimate_run(spec, batch, precision, mode)


@pytest.fixture(scope="module")
def devices():
    return load_devices(default_catalogue_path())


@pytest.fixture(scope="module")
def resnet18(devices):
    return what_if(estimator("resnet18", "training"), 8, "tf32", "training", "a100-sxm4-40gb", devices)


def test_ranking_is_the_time_models_own_numbers(resnet18, devices):
    rows = resnet18["alternatives"]
    gpus = [k for k, d in devices.items() if d.is_cuda]
    assert {r["device"] for r in rows if r["change"] == "device"} == set(gpus) - {"a100-sxm4-40gb"}
    assert {r["precision"] for r in rows if r["change"] == "precision"} == {"fp32", "fp16", "bf16"}
    assert sorted(r["batch"] for r in rows if r["change"] == "batch") == [4, 16, 32]
    spec = spec_from_options("resnet18", None, None, None)
    recomputed = []
    for row in rows:
        if row["variant"] != "eager":
            continue
        # the same run through `rooflow estimate --device`'s path: predict() on a fresh estimate
        totals = predict(estimate_run(spec, row["batch"], row["precision"], "training"), row["device"]).totals
        assert row["predicted_seconds"] == pytest.approx(totals["predicted_seconds"], rel=1e-9)
        assert row["fits"] == totals["fits"] and row["calibration_source"] == totals["calibration_source"]
        recomputed.append((row["batch"] / totals["predicted_seconds"], (row["device"], row["batch"], row["precision"])))
    # every run fits: the ranking is the time model's images/s, best first
    assert [key for _, key in recomputed] == [key for _, key in sorted(recomputed, key=lambda x: -x[0])]


def test_variants(resnet18):
    variant = {r["variant"]: r for r in resnet18["alternatives"] if r["device"] == "a100-sxm4-40gb"
               and r["batch"] == 8 and r["precision"] == "tf32"}
    # not predicted (the H200's measured channels_last gains are far beyond the transposes the model prices)
    for name in ("channels_last", "compile"):
        assert variant[name]["predicted_seconds"] is None and not variant[name]["modelled"]
    assert "fused-traffic roofline bound" in variant["compile"]["note"]
    assert "NCHW <-> NHWC transposes alone are" in variant["channels_last"]["note"]
    assert {r["variant"] for r in resnet18["alternatives"][-2:]} == {"channels_last", "compile"}  # ranked last


def test_supported_precisions(devices):
    assert supported_precisions(devices["v100-sxm2-16gb"]) == ["fp32", "fp16"]
    assert supported_precisions(devices["a100-sxm4-40gb"]) == ["fp32", "tf32", "fp16", "bf16"]


def test_from_the_measured_h100_step_scales_with_it(devices):
    """Habitat's way: a GPU's what-if is the measured H100 step × the predicted ratio; change the measurement
    and every other GPU's prediction changes by the same factor."""
    record = read_json(real(H100_STEP))
    run = estimator("resnet50", "training")
    results = []
    for factor in (1.0, 1.5):
        measured = {**record, "median_seconds": record["median_seconds"] * factor}
        results.append(what_if(run, 64, "tf32", "training", "a100-sxm4-40gb", devices, measured=measured,
                               changes=("device",)))
    first, second = ({r["device"]: r for r in result["alternatives"]} for result in results)
    assert first["h100-sxm5-80gb"]["predicted_seconds"] == record["median_seconds"]
    assert first["h100-sxm5-80gb"]["basis"] == "measured"
    anchor = results[0]["measured_from"]
    for key in ("a100-sxm4-40gb", "h200-sxm-141gb", "t4"):
        assert second[key]["predicted_seconds"] == pytest.approx(1.5 * first[key]["predicted_seconds"])
        assert first[key]["basis"] == "from the measured h100-sxm5-80gb run × predicted ratio"
        analytic = first[key]["predicted_seconds"] / anchor["scale"]
        assert first[key]["predicted_seconds"] == pytest.approx(
            record["median_seconds"] * analytic / anchor["predicted_seconds"])
    assert "Times start from the measured h100-sxm5-80gb run" in format_table(results[0])


def test_measured_run_must_be_the_same_run(devices):
    record = {**read_json(real(H100_STEP)), "source": "h100.json"}
    with pytest.raises(RooflowError, match=r"^h100.json: the measured run differs .* batch \(64 vs 32\)"):
        what_if(estimator("resnet50", "training"), 32, "tf32", "training", "a100-sxm4-40gb", devices,
                measured=record, changes=())


def test_measured_run_must_be_of_the_same_images_and_eager(devices):
    """A timing record at another input size (a 224-px ResNet-50 step scaling a 112-px what-if) or of another
    variant (a compiled step taken for the eager run) scaled every prediction without a word: only model, batch,
    precision and mode were compared."""
    record = {**read_json(real(H100_STEP)), "source": "h100.json"}
    assert record["input_size"] == 224

    def small(batch, precision):
        return estimate_run(spec_from_options("resnet50"), batch, precision, "training", input_size=112)

    with pytest.raises(RooflowError, match=r"^h100.json: the measured run differs from the what-if's in "
                                           r"input_size \(224 vs 112\): pass a timing record of the same model, "
                                           r"batch, precision and mode, eager, at the what-if's input size$"):
        what_if(small, 64, "tf32", "training", "h100-sxm5-80gb", devices, measured=record, changes=())
    with pytest.raises(RooflowError, match=r"differs from the what-if's in variant \(compile vs eager\)"):
        what_if(estimator("resnet50", "training"), 64, "tf32", "training", "h100-sxm5-80gb", devices,
                measured={**record, "variant": "compile"}, changes=())
    result = what_if(estimator("resnet50", "training"), 64, "tf32", "training", "h100-sxm5-80gb", devices,
                     measured=record, changes=())
    assert result["measured_from"]["measured_seconds"] == record["median_seconds"]


def test_price_gives_cost_per_1000_images(tmp_path):
    import yaml

    catalogue = tmp_path / "devices.yaml"
    data = yaml.safe_load(default_catalogue_path().read_text())
    data["l4"]["price_per_hour_usd"] = 0.8
    catalogue.write_text(yaml.safe_dump(data))
    module = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                 torch.nn.Linear(8 * 30 * 30, 10))
    result = what_if_module(module, torch.empty(4, 3, 32, 32, device="meta"), "l4", devices_file=str(catalogue))
    assert sorted(r["batch"] for r in result["alternatives"] if r["change"] == "batch") == [2, 8, 16]
    for row in result["alternatives"]:
        if row["device"] == "l4" and row["predicted_seconds"]:
            assert row["cost_per_1000_images_usd"] == pytest.approx(0.8 / 3600 * row["predicted_seconds"] / row["batch"]
                                                                    * 1000)
        else:
            assert row["cost_per_1000_images_usd"] is None
    json.dumps(result)  # a record: JSON as it is


def test_a_cpu_what_if_uses_its_ceilings_and_a_rooflow_time_record(tmp_path, capsys):
    """`--what-if --device cpu --ceilings` predicted no CPU row ("no roofs": the ceilings went to the calibration
    but not to the device), and `rooflow time --output`'s record (it names the torch device it ran on, not a
    catalogue key) was refused as of device 'None'. The CPU row is now `rooflow estimate --device cpu`'s own
    prediction, and the record anchors the what-if on --device; given for a GPU, one sentence."""
    from rooflow import cli
    from tests.support import RECORDED_CPU_CEILINGS, RECORDED_CPU_RUN

    ceilings = ["--device", "cpu", "--ceilings", str(RECORDED_CPU_CEILINGS)]
    run = ["alexnet", "--mode", "training", "--format", "json"]
    assert cli.main(["estimate", *run, *ceilings]) == 0
    predicted = json.loads(capsys.readouterr().out)[0]["predicted_seconds"]
    assert cli.main(["estimate", *run, *ceilings, "--what-if"]) == 0
    rows_of_unanchored = json.loads(capsys.readouterr().out)["alternatives"]
    rows = {r["change"]: r for r in rows_of_unanchored}
    assert rows["run"]["predicted_seconds"] == pytest.approx(predicted, rel=1e-12)
    record = {k: v for k, v in read_json(RECORDED_CPU_RUN).items() if k != "device"}  # as `rooflow time` writes it
    assert record["device_type"] == "cpu"
    path = tmp_path / "timing.json"
    path.write_text(json.dumps(record))
    assert cli.main(["estimate", *run, *ceilings, "--what-if", "--from-measured", str(path)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["measured_from"]["device"] == "cpu"
    assert result["measured_from"]["measured_seconds"] == record["median_seconds"]
    # the CPU's measurement scales its own alternatives, not the GPUs' (its miss says nothing of theirs)
    bases = {(r["change"], r["device"] == "cpu"): r["basis"] for r in result["alternatives"]}
    assert bases[("run", True)] == "measured"
    assert bases[("batch", True)] == "from the measured cpu run × predicted ratio"
    assert bases[("device", False)] == "time model"
    assert {r["predicted_seconds"] for r in result["alternatives"] if r["change"] == "device"} == {
        r["predicted_seconds"] for r in rows_of_unanchored if r["change"] == "device"}
    assert cli.main(["estimate", *run, "--device", "t4", "--what-if", "--from-measured", str(path)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.endswith(f"{path}: it names no catalogue device, and it ran on a cpu, not on t4 (cuda): give "
                          f"--device the device it ran on, or a timing record of t4")


def test_batches_to_try_are_batches_a_run_accepts():
    """At the largest batch a run accepts (2^24), double and four times it were proposed: no command takes them."""
    from rooflow.arguments import MAX_BATCH
    from rooflow.estimate.whatif import _batches

    assert _batches(64) == [32, 128, 256]
    assert _batches(1) == [2, 4]
    assert _batches(MAX_BATCH) == [MAX_BATCH // 2]
    assert _batches(MAX_BATCH // 2) == [MAX_BATCH // 4, MAX_BATCH]


def test_a_run_that_does_not_fit_is_offered_the_largest_batch_that_does(devices):
    """ResNet-50 training at 1024 on a T4 (89 GB of 16): its batch rows were 512, 2048 and 4096, none of which fits,
    so nothing on the T4 said which batch would run. Now the largest batch the memory prediction fits is a row, and
    the next batch up does not fit."""
    from rooflow.estimate.predict import predict_memory

    result = what_if(estimator("resnet50", "training"), 1024, "fp32", "training", "t4", devices,
                     changes=("batch",))
    rows = {r["batch"]: r for r in result["alternatives"] if r["change"] == "batch"}
    fitting = [b for b, r in rows.items() if r["fits"]]
    assert len(fitting) == 1 and sorted(rows) == sorted([512, 2048, 4096, *fitting])
    largest = fitting[0]
    assert 100 < largest < 512  # 13.6 GB at 154 with the margin and context, of 16
    after = predict_memory(estimate_run(spec_from_options("resnet50", None, None, None), largest + 1, "fp32",
                                        "training").totals, devices["t4"])
    assert after["fits"] is False
    assert rows[largest]["images_per_second"] > 0
    # a run that fits is offered no extra batch
    fits = what_if(estimator("resnet18", "inference"), 8, "fp32", "inference", "t4", devices, changes=("batch",))
    assert sorted(r["batch"] for r in fits["alternatives"] if r["change"] == "batch") == [4, 16, 32]


def test_where_not_even_batch_1_fits_its_row_says_so(devices):
    """A GPU of 1.2 GB (a T4 of less memory): ResNet-50 training needs 1.3 GB at batch 1 with the margin and the
    context, so batch 1 is the row, not fitting either."""
    import copy

    small = copy.copy(devices["t4"])
    small.memory_bytes = 1.2e9
    result = what_if(estimator("resnet50", "training"), 64, "fp32", "training", "t4", {**devices, "t4": small},
                     changes=("batch",))
    rows = {r["batch"]: r for r in result["alternatives"] if r["change"] == "batch"}
    assert sorted(rows) == [1, 32, 128, 256] and rows[1]["fits"] is False
    assert rows[1]["fit_verdict"].startswith("does not fit: needs 0.")
