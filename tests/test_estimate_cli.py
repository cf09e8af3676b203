"""`rooflow estimate` through the real dispatcher (rooflow.cli.main), output parsed back."""

from __future__ import annotations

import csv
import io
import json

import pytest

from rooflow.cli import main


def run(capsys, *argv):
    status = main(["estimate", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_json_several_models_with_prediction(capsys):
    status, out, _ = run(capsys, "resnet18", "alexnet", "--batch", "4", "--mode", "training",
                         "--precision", "tf32", "--device", "a100-sxm4-40gb", "--format", "json")
    assert status == 0
    payload = json.loads(out)
    assert [entry["model"] for entry in payload] == ["resnet18", "alexnet"]
    for entry in payload:
        assert entry["batch"] == 4 and entry["mode"] == "training" and entry["precision"] == "tf32"
        assert entry["device"] == "a100-sxm4-40gb"
        assert entry["predicted_seconds"] > 0
        assert entry["predicted_seconds"] == pytest.approx(entry["compute_bound_seconds"]
                                                           + entry["memory_bound_seconds"])
        assert entry["ops_compute_bound"] + entry["ops_memory_bound"] > 0
        assert "layers" not in entry


def test_json_layers(capsys):
    status, out, _ = run(capsys, "alexnet", "--format", "json", "--layers")
    assert status == 0
    (entry,) = json.loads(out)
    layers = {row["layer"]: row for row in entry["layers"]}
    assert layers["features.0"]["type"] == "Conv2d"
    assert layers["features.0"]["output_shape"] == [1, 64, 55, 55]
    assert sum(row["forward_flops"] for row in entry["layers"]) == pytest.approx(entry["forward_flops"])


def test_cpu_without_ceilings_has_no_prediction(capsys):
    status, out, _ = run(capsys, "alexnet", "--device", "cpu", "--format", "json")
    assert status == 0
    (entry,) = json.loads(out)
    assert entry["predicted_seconds"] is None and entry["compute_bound_seconds"] is None


def test_csv_one_row_per_model(capsys):
    status, out, _ = run(capsys, "resnet18", "mobilenet_v2", "--format", "csv")
    assert status == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [row["model"] for row in rows] == ["resnet18", "mobilenet_v2"]
    assert float(rows[0]["forward_flops"]) > 3e9
    assert "peak_memory_activations_bytes" in rows[0]


def test_csv_layers(capsys):
    status, out, _ = run(capsys, "alexnet", "--format", "csv", "--layers")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert status == 0 and rows[0]["model"] == "alexnet" and rows[0]["layer"] == "features.0"


def test_table_has_units(capsys):
    status, out, _ = run(capsys, "resnet18", "--batch", "2", "--layers")
    assert status == 0
    assert "GFLOP" in out and "MB" in out and "peak GB" in out
    assert "resnet18" in out and "layer1.0.conv1" in out


def test_unknown_model_is_one_clear_error(capsys):
    status, _, err = run(capsys, "resnet19", "alexnet")
    assert status == 2
    assert "resnet19" in err and "resnet18" in err  # the valid names are listed
    assert "Traceback" not in err


def test_unknown_device(capsys):
    status, _, err = run(capsys, "alexnet", "--device", "tpu-v9")
    assert status == 2 and "tpu-v9" in err
