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
        # the time model's prediction, its range, and the per-op roofline beneath it (every op at its roof)
        assert entry["predicted_seconds_low"] < entry["predicted_seconds"] < entry["predicted_seconds_high"]
        assert 0 < entry["roofline_seconds"] < entry["predicted_seconds"]
        assert entry["predicted_bound"] in ("host", "gpu")
        assert "not measured" in entry["calibration_source"]  # an A100 SXM4: its family's kernels
        assert entry["fits"] is True and entry["predicted_memory_bytes"] > entry["peak_memory_bytes"]
        assert "layers" not in entry
        # the step split as the timing job's clock splits a measured one
        phases = entry["predicted_seconds_by_phase"]
        assert set(phases) == {"forward", "backward", "optimizer"}
        assert sum(phases.values()) == pytest.approx(entry["predicted_seconds"], rel=1e-9)


def test_a_training_prediction_prints_its_phases(capsys):
    status, out, _ = run(capsys, "resnet50", "--batch", "64", "--mode", "training", "--device", "h100-sxm5-80gb")
    assert status == 0
    [line] = [line for line in out.splitlines() if "predicted forward" in line]
    # the H100 recording of this step timed forward 22.3 ms and backward 49.6 ms (tests/estimate/test_timemodel.py)
    assert line.startswith("resnet50 b64 fp32 training on h100-sxm5-80gb: predicted forward 22.")
    assert ", backward 4" in line and "as `rooflow time` splits a step" in line
    status, out, _ = run(capsys, "resnet50", "--batch", "64", "--device", "h100-sxm5-80gb")
    assert "predicted forward" not in out  # inference: one phase, the step itself


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
    assert entry["roofline_seconds"] is None and "predicted_seconds" not in entry  # no measured roofs yet
    assert entry["predicted_memory_bytes"] == entry["peak_memory_bytes"] and entry["fits"] is None


def test_a_tpu_gets_its_roofline_and_no_step_time(capsys):
    """A TPU runs an XLA-compiled step: no eager ops to price, so no step time (it was priced with the generic CPU
    constants, bound "cpu"); its roofline time and memory stay."""
    status, out, _ = run(capsys, "resnet18", "--device", "tpu-v4", "--batch", "8", "--format", "json")
    assert status == 0
    (entry,) = json.loads(out)
    assert entry["predicted_seconds"] is None and "predicted_bound" not in entry
    assert entry["calibration_source"].startswith("none for tpu-v4") and entry["roofline_seconds"] > 0
    status, out, _ = run(capsys, "resnet18", "--device", "tpu-v4", "--batch", "8")
    assert "no time model" in out and "Predicted time: none for tpu-v4" in out and "CPU constants" not in out


def test_vgg16_training_b256_does_not_fit_a_t4(capsys):
    """The issue's example: 32.4 GB measured on an H100; the prediction says it cannot fit a 16 GB T4."""
    status, out, _ = run(capsys, "vgg16", "--batch", "256", "--mode", "training", "--device", "t4")
    assert status == 0
    assert "vgg16 b256 fp32 training on t4: does not fit: needs 20.5 GB" in out
    status, out, _ = run(capsys, "vgg16", "--batch", "256", "--mode", "training", "--device", "h100-sxm5-80gb")
    assert "on h100-sxm5-80gb: fits" in out


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


def test_a_prediction_under_its_roofline_says_which_rows_and_why(capsys):
    """VGG16 FP32 on an A100 80GB: its 3×3 convolutions priced on Winograd/FFT, faster than the direct FLOPs'
    roof; the table says so beneath it, and --format json carries the same sentence."""
    status, out, _ = run(capsys, "vgg16", "--batch", "32", "--device", "a100-pcie-80gb")
    assert status == 0
    line = next(line for line in out.splitlines() if line.startswith("vgg16 b32 fp32 inference on a100-pcie-80gb: "
                                                                      "predicted"))
    assert "under its per-op roofline time" in line and "convolution row(s)" in line and "Winograd/FFT" in line
    status, out, _ = run(capsys, "vgg16", "--batch", "32", "--device", "a100-pcie-80gb", "--format", "json")
    (entry,) = json.loads(out)
    assert entry["predicted_seconds"] < entry["roofline_seconds"] and entry["below_roofline"] in line


def test_unknown_model_is_one_clear_error(capsys):
    status, _, err = run(capsys, "resnet19", "alexnet")
    assert status == 2
    assert "resnet19" in err and "resnet18" in err  # the valid names are listed
    assert "(closest: resnet18, " in err  # ... the nearest first
    assert "Traceback" not in err


def test_a_quantized_model_is_refused_naming_its_float_model(capsys):
    """torchvision's int8 quantized models were refused as unknown names, "closest: resnet50" the only hint."""
    status, _, err = run(capsys, "quantized_resnet50")
    assert status == 2 and "Traceback" not in err
    assert "quantized_resnet50 is torchvision's int8 quantized model" in err
    assert "use its float model resnet50, in precision fp32, tf32, fp16 or bf16" in err
    status, _, err = run(capsys, "quantized_resnet19")  # no such float model: an unknown name as any other
    assert status == 2 and "unknown model(s) quantized_resnet19" in err and "int8" not in err


def test_a_batch_its_batchnorm_cannot_train_on_names_the_fix(capsys):
    """It named the run and torch's words, not what to change."""
    status, _, err = run(capsys, "inception_v3", "--batch", "1", "--mode", "training")
    assert status == 2 and "Traceback" not in err
    assert "inception_v3 cannot run training at batch 1 (input 299): Expected more than 1 value per channel" in err
    assert err.rstrip().endswith("give a batch of 2 or more, or run it in mode inference")


def test_unknown_device(capsys):
    status, _, err = run(capsys, "alexnet", "--device", "tpu-v9")
    assert status == 2 and "tpu-v9" in err


def test_what_if_resnet50_on_an_a100(capsys):
    """The issue's command: the other precisions, three batch sizes, the variants and every catalogue GPU, each
    with a predicted time range and a fit verdict, ranked by predicted images/s."""
    from rooflow.hardware.devices import default_catalogue_path, load_devices

    status, out, _ = run(capsys, "resnet50", "--batch", "64", "--mode", "training", "--device", "a100-sxm4-40gb",
                         "--what-if", "--format", "json")
    assert status == 0
    result = json.loads(out)
    rows = result["alternatives"]
    assert result["run"] == {"model": "resnet50", "batch": 64, "precision": "fp32", "mode": "training",
                             "device": "a100-sxm4-40gb"} and result["measured_from"] is None
    assert {r["precision"] for r in rows if r["change"] == "precision"} == {"tf32", "fp16", "bf16"}
    assert sorted(r["batch"] for r in rows if r["change"] == "batch") == [32, 128, 256]
    assert {r["variant"] for r in rows if r["change"] == "variant"} == {"channels_last", "compile"}
    gpus = {k for k, d in load_devices(default_catalogue_path()).items() if d.is_cuda}
    assert {r["device"] for r in rows} == gpus
    for row in rows:
        assert row["fit_verdict"].startswith(("fits", "does not fit"))
        if row["variant"] == "eager":
            assert row["predicted_seconds_low"] < row["predicted_seconds"] < row["predicted_seconds_high"]
            assert row["images_per_second"] == pytest.approx(row["batch"] / row["predicted_seconds"])
    fitting = [r["images_per_second"] for r in rows if r["fits"] and r["images_per_second"]]
    assert fitting == sorted(fitting, reverse=True) and fitting == [r["images_per_second"] for r in rows[:len(fitting)]]


def test_from_measured_needs_what_if(capsys):
    status, out, err = run(capsys, "resnet18", "--device", "t4", "--from-measured", "timing.json")
    assert status != 0 and out == ""
    assert "--from-measured: it is the starting point of --what-if: add --what-if" in err


@pytest.mark.parametrize("argv, content, says", [
    (["resnet18", "--device", "h100-sxm5-80gb", "--ceilings"], '{"peak_flops_per_second": 3',
     "not JSON (Expecting ',' delimiter at line 1, column 28): a file cut short"),
    (["resnet18", "--device", "h100-sxm5-80gb", "--ceilings"], "[1, 2]",
     "not a ceilings file (the JSON `rooflow ceilings --output` writes): it holds a JSON list"),
    (["resnet18", "--device", "h100-sxm5-80gb", "--what-if", "--from-measured"], "[1, 2]",
     "not a timing record (`rooflow time --output`): it holds a JSON list"),
    (["resnet18", "--device", "h100-sxm5-80gb", "--what-if", "--from-measured"], "step: 3 ms",
     "not JSON (Expecting value at line 1, column 1)"),
])
def test_a_cut_or_foreign_json_input_is_one_sentence(capsys, tmp_path, argv, content, says):
    """A --ceilings or --from-measured file cut short or of another kind ends in one line naming it, not in a
    JSONDecodeError or AttributeError traceback."""
    path = tmp_path / "given.json"
    path.write_text(content)
    status, out, err = run(capsys, *argv, str(path))
    assert status == 2 and out == ""
    assert err.strip().startswith(f"rooflow estimate: error: {path}: {says}") and "\n" not in err.strip()


def test_factory_options_on_torchvision_models_are_refused_not_ignored(capsys):
    """--input 3x32x32 on resnet18 was ignored (a 224×224 estimate printed); now one sentence pointing at
    --input-size. With a factory model among the models the options apply to it, and pass."""
    status, out, err = run(capsys, "resnet18", "--input", "3x32x32")
    assert status == 2 and out == ""
    assert err.strip() == ("rooflow estimate: error: --input describes a package.module:factory model, but resnet18 "
                           "is a torchvision model: leave --input out (a torchvision model's square input side is "
                           "--input-size, e.g. --input-size 32)")
    status, _, err = run(capsys, "resnet18", "alexnet", "--loss", "a.b:c")
    assert status == 2 and "--loss describes a package.module:factory model, but resnet18, alexnet are" in err
    status, out, _ = run(capsys, "resnet18", "--input-size", "32", "--format", "json")
    assert status == 0 and json.loads(out)[0]["forward_flops"] < 0.1e9  # 32×32, not 224×224 (3.6 GFLOP)


def test_an_input_size_that_is_not_positive_or_has_no_torchvision_model_is_refused(capsys):
    """--input-size 0 estimated ResNet-50 at its default 224 (0 read as "not given"), and --input-size with a
    factory model only was ignored; each is now one sentence."""
    status, out, err = run(capsys, "resnet50", "--input-size", "0")
    assert status == 2 and out == ""
    assert err.strip() == ("rooflow estimate: error: --input-size must be a positive integer (a square image's side "
                           "in pixels), not 0")
    status, out, err = run(capsys, "examples.tiny_lm.model:build", "--input", "64:int64", "--input-size", "3")
    assert status == 2 and out == ""
    assert "--input-size is a torchvision model's square input side, but examples.tiny_lm.model:build is a " \
           "factory model: leave it out and give each input's shape with --input" in err
    status, out, _ = run(capsys, "resnet18", "examples.tiny_lm.model:build", "--input", "64:int64",
                         "--input-size", "32", "--format", "json")
    assert status == 0 and json.loads(out)[0]["forward_flops"] < 0.1e9  # the size applies to resnet18


def test_an_input_size_a_models_views_cannot_take_is_one_sentence(capsys):
    """MaxViT-T at 100×100: its window partition's view cannot reshape the feature map (a RuntimeError traceback,
    exit 1); a failing view is named as any other op that does not fit the input."""
    status, out, err = run(capsys, "maxvit_t", "--input-size", "100")
    assert status == 2 and out == ""
    assert err.strip() == (
        "rooflow estimate: error: estimate: maxvit_t cannot be counted: op aten.view (layer "
        "blocks.0.layers.0.layers.window_attention.partition_op) cannot run on the meta device (shape "
        "'[1, 64, 3, 7, 3, 7]' is invalid for input of size 40000); its layers do not fit a 100×100 input: give the "
        "--input-size it takes (the default, 224, does)")


def test_the_local_cpu_without_measured_roofs_says_how_to_measure_them(capsys):
    """`cpu`'s catalogue entry has no roofs (the workflow measures them): the prediction line said nothing; it
    now names the command that measures them, and with generic constants, the one that calibrates."""
    status, out, _ = run(capsys, "resnet18", "--device", "cpu")
    assert status == 0
    assert ("Predicted time: none for cpu: its catalogue entry has no roofs (they are measured on the machine): "
            "measure them with `rooflow ceilings --device cpu --output ceilings.json` and pass --ceilings "
            "ceilings.json") in out
    status, out, _ = run(capsys, "resnet18", "--device", "xeon-e5-2699-v4-2s")
    assert status == 0 and "`rooflow ceilings --device xeon-e5-2699-v4-2s --calibrate --output FILE`" in out


def test_the_calibration_source_prints_a_clause_per_line(capsys):
    """`rooflow estimate --device l4` (no data of its own: a calibration of a dozen clauses) prints its source as
    a list, one clause per line, a clause's parenthesised list kept whole; JSON keeps the one string."""
    from rooflow.cli.estimate import source_parts

    assert source_parts("a (x; y); b; c (d (e; f))") == ["a (x; y)", "b", "c (d (e; f))"]
    status, out, _ = run(capsys, "resnet50", "--batch", "64", "--device", "l4")
    assert status == 0
    lines = out.splitlines()
    start = lines.index("Predicted time: host and GPU work per op, the range its uncertainty; calibration:")
    listed = [line for line in lines[start + 1:] if line.startswith("  - ")]
    assert listed[0] == "  - kernel calibration — NVIDIA L4: not measured" and len(listed) >= 8
    assert any(line.startswith("  - FP32 GEMMs falling from their boost-clock rate to 0.39 of it") for line in listed)
    status, out, _ = run(capsys, "resnet50", "--batch", "64", "--device", "l4", "--format", "json")
    [entry] = json.loads(out)
    assert "; ".join(part.removeprefix("  - ") for part in listed) == entry["calibration_source"]


def test_a_batch_past_int64_bytes_is_refused(capsys):
    """--batch 10^12 printed negative megabytes (int64 byte counts overflowed) and 10^20 ended in a traceback; the
    largest batch rooflow takes, 2^24, estimates with every count positive."""
    for batch in ("1000000000000", "100000000000000000000"):
        with pytest.raises(SystemExit) as exited:
            run(capsys, "resnet18", "--batch", batch)
        assert exited.value.code == 2
        assert f"argument --batch: {batch} is more than 16,777,216 (2^24) samples" in capsys.readouterr().err
    status, out, _ = run(capsys, "resnet18", "--batch", "16777216", "--format", "json")
    assert status == 0
    row = json.loads(out)[0]
    assert row["batch"] == 16777216
    assert all(value >= 0 for key, value in row.items() if key.endswith("_bytes") and isinstance(value, (int, float)))
    # a part per sample and a fixed part: exactly the line through batches 1 and 2, no overflow
    one, two = (json.loads(run(capsys, "resnet18", "--batch", b, "--format", "json")[1])[0]["activation_bytes"]
                for b in ("1", "2"))
    assert row["activation_bytes"] == one + (16777216 - 1) * (two - one)


def test_a_small_model_shows_its_digits_and_a_long_name_keeps_the_columns(capsys):
    """A tiny factory model printed 0.00 GFLOP, 0.00 M parameters and 0 MB everywhere, and a name longer than 22
    characters pushed its row's columns right of the header's."""
    name = "a_factory_model_named_at_length"
    status, out, _ = run(capsys, "tests.support:Tiny", "--input", "3x8x8", "--name", name)
    assert status == 0
    header, _, row = out.splitlines()[:3]
    assert row.startswith(name) and header.index("batch") + len("batch") == row.index(" 1 fp32") + 2
    status, json_out, _ = run(capsys, "tests.support:Tiny", "--input", "3x8x8", "--name", name, "--format", "json")
    totals = json.loads(json_out)[0]
    cells = row.split()
    assert cells[4] == f"{totals['forward_flops'] / 1e9:.2g}" != "0.00"  # fwd GFLOP
    assert cells[7] == f"{totals['params'] / 1e6:.2g}" != "0.00"  # params M


def test_a_bad_input_loss_or_name_of_a_factory_model_is_labelled_with_its_option(capsys):
    """An --input, --loss or --name value that is no shape, path or run name was labelled "MODEL:", the positional
    argument, whose value was fine."""
    factory = "examples.tiny_cnn.model:build"
    for argv, said in ((["--input", "3x0x224"], "--input: input shape '3x0x224' is not positive whole numbers"),
                       (["--input", "3x32x32", "--loss", "notapath", "--mode", "training"],
                        "--loss: loss 'notapath' is not of the form package.module:callable"),
                       (["--input", "3x32x32", "--name", "Bad Name"], "--name: name 'Bad Name' is not lowercase")):
        status, out, err = run(capsys, factory, *argv)
        assert status == 2 and out == "" and err.startswith(f"rooflow estimate: error: {said}"), err


def test_a_16_bit_run_on_a_cpu_without_that_roof_has_no_time(capsys):
    """A CPU's step is priced only at a roof of its precision. On the recorded Zen 4 VM (its ceilings keep fp32 and
    bf16; `rooflow ceilings` measures no fp16 on a CPU) ResNet-18 b1 fp16 was priced at 31.1 ms against 38.1 ms in
    fp32 (its arithmetic at the fp32 roof on half the bytes) while `rooflow time` measured it at 1.24 s, 43x its
    fp32 step's 28.5 ms (2026-12-04, no AVX512-FP16 there; bf16 27.6 ms); an Ivy Bridge Xeon (no bf16 arithmetic)
    had bf16 at 9.14 ms against fp32 10.6. Such a run now has no time and says why; fp32, and bf16 at its measured
    roof, stay priced, as does the what-if's fp32 alternative."""
    from support import RECORDED_CPU_CEILINGS

    def entry(*argv):
        status, out, _ = run(capsys, "resnet18", *argv, "--format", "json")
        assert status == 0
        return json.loads(out)[0]

    cpu = ("--device", "cpu", "--ceilings", str(RECORDED_CPU_CEILINGS))
    fp16 = entry(*cpu, "--precision", "fp16")
    assert fp16["predicted_seconds"] is None and "predicted_bound" not in fp16
    assert fp16["calibration_source"] == (
        "none for cpu at fp16: its measured roofs hold no fp16 rate (bf16, fp32), so PyTorch's fp16 ops run there on "
        "a path no roof prices: time the step with `rooflow time --device cpu --precision fp16`")
    assert fp16["predicted_memory_bytes"] > 0  # its memory is still predicted
    assert entry(*cpu, "--precision", "bf16")["predicted_seconds"] > 0
    assert entry(*cpu, "--precision", "fp32")["predicted_seconds"] > 0
    xeon = ("--device", "xeon-e5-2697-v2-2s")
    assert entry(*xeon, "--precision", "bf16")["calibration_source"].startswith(
        "none for xeon-e5-2697-v2-2s at bf16: its datasheet roofs hold no bf16 rate (fp32, fp64)")
    assert entry(*xeon, "--precision", "fp32")["predicted_seconds"] > 0
    status, out, _ = run(capsys, "resnet18", *cpu, "--precision", "fp16")
    assert status == 0 and "no fp16 roof" in out and "Predicted time: none for cpu at fp16" in out
    status, out, _ = run(capsys, "resnet18", *xeon, "--precision", "bf16", "--what-if", "--format", "json")
    rows = json.loads(out)["alternatives"]
    [bf16] = [r for r in rows if r["change"] == "run"]
    assert bf16["predicted_seconds"] is None and bf16["note"].startswith("its datasheet roofs hold no bf16 rate")
    [fp32] = [r for r in rows if r["change"] == "precision" and r["precision"] == "fp32"]
    assert fp32["predicted_seconds"] > 0
    # a GPU with no roof of a precision still runs it (PyTorch converts): priced, with its note
    status, out, _ = run(capsys, "resnet18", "--device", "t4", "--precision", "bf16", "--format", "json")
    assert json.loads(out)[0]["predicted_seconds"] > 0
