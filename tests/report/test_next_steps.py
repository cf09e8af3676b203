"""The report's what-to-try-next tables: which measured runs they start from, and on a GPU that every
prediction is the measured step scaled by the time model's ratio (examples/tiny_cnn, estimated on the meta
device in a second)."""

import json

import pytest

from rooflow.hardware.devices import default_catalogue_path
from rooflow.report.next_steps import runs_to_try, what_to_try

TINY = {"tiny_cnn": {"name": "tiny_cnn", "factory": "examples.tiny_cnn.model:build", "inputs": ["3x32x32"]}}
GPU = "h100-sxm5-80gb"


def record(batch, seconds, variant="eager", status="ok", mode="inference"):
    return {"device": GPU, "model": "tiny_cnn", "batch": batch, "precision": "fp32", "mode": mode,
            "variant": variant, "status": status, "median_seconds": seconds}


def test_each_model_precision_and_mode_starts_from_its_largest_completed_eager_batch():
    chosen = runs_to_try([record(2, 0.001), record(8, 0.002), record(16, 0.001, variant="compile"),
                          record(32, None, status="oom"), record(4, 0.003, mode="training")])
    assert [(r["mode"], r["batch"]) for r in chosen] == [("inference", 8), ("training", 4)]


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """The tables from the same run measured at 1 ms and at 2 ms on the H100."""
    out = {}
    for seconds in (0.001, 0.002):
        path = tmp_path_factory.mktemp("t") / "timing.json"
        path.write_text(json.dumps(record(8, seconds)))
        out[seconds] = what_to_try([str(path)], TINY, GPU, str(default_catalogue_path()))
    return out


def test_on_a_gpu_every_prediction_starts_from_the_measurement(tables):
    try_next, cross = tables[0.001]
    run = try_next[try_next["change"] == "run"].iloc[0]
    assert run["basis"] == "measured" and run["predicted_seconds"] == 0.001
    other = cross[cross["change"] == "device"].set_index("device")["predicted_seconds"]
    doubled = tables[0.002][1].set_index("device")["predicted_seconds"]
    assert len(other) > 5 and list(doubled[other.index]) == pytest.approx(list(2 * other))  # it scales them all


def test_rows_are_ranked_by_predicted_throughput_and_split_between_the_two_tables(tables):
    try_next, cross = tables[0.001]
    assert set(try_next["change"]) == {"run", "precision", "batch", "variant"}
    assert set(cross["change"]) == {"run", "device"}
    for table in (try_next, cross):
        for _, one in table.groupby("mode"):  # one run each: those that fit, best first, then those that do not
            predicted = one.dropna(subset=["images_per_second"])
            order = [(fits is False, -rate) for fits, rate in zip(predicted["fits"], predicted["images_per_second"])]
            assert len(order) > 1 and order == sorted(order)


def test_a_variant_timed_on_the_device_is_its_measured_step_ranked_among_the_predictions(tmp_path):
    paths = []
    for name, rec in (("eager", record(8, 0.001)), ("nhwc", record(8, 0.0001, variant="channels_last"))):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(rec))
    try_next, _ = what_to_try([str(p) for p in paths], TINY, GPU, str(default_catalogue_path()))
    top = try_next.iloc[0]  # 80,000 images/s measured: faster than anything predicted from the 1 ms step
    assert (top["change"], top["variant"], top["basis"], top["images_per_second"]) == \
        ("variant", "channels_last", "measured", pytest.approx(8 / 0.0001))
    compiled = try_next.set_index("variant").loc["compile"]
    assert compiled["basis"] == "time model" and "not modelled" in compiled["note"]


def test_on_a_cpu_its_own_alternatives_start_from_the_measurement_and_the_gpus_do_not(tmp_path):
    ceilings = tmp_path / "cpu.json"
    ceilings.write_text(json.dumps({"peak_flops_per_second": {"fp32": 100e9}, "dram_bytes_per_second": 10e9}))
    out = {}
    for seconds in (0.01, 0.02):
        path = tmp_path / f"{seconds}.json"
        path.write_text(json.dumps({**record(8, seconds), "device": "cpu"}))
        out[seconds] = what_to_try([str(path)], TINY, "cpu", str(default_catalogue_path()), str(ceilings))
    (mine, gpus), (doubled, gpus_again) = out[0.01], out[0.02]
    assert mine.set_index("change").loc["run", "predicted_seconds"] == 0.01
    batches = mine[mine["change"] == "batch"]["predicted_seconds"]
    assert len(batches) == 3 and list(doubled[doubled["change"] == "batch"]["predicted_seconds"]) == \
        pytest.approx(list(2 * batches))
    other = gpus[gpus["change"] == "device"]
    assert len(other) > 5 and set(other["basis"]) == {"time model"}
    assert list(other["predicted_seconds"]) == list(gpus_again[gpus_again["change"] == "device"]["predicted_seconds"])
