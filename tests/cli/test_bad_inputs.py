"""Bad input at the command line ends in one sentence naming the input and the fix (a new-user pass, 2026-12-04)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rooflow import cli

ROOT = Path(__file__).resolve().parents[2]
SUMMARY = ROOT / "tests" / "data" / "real" / "h100-rooflow" / "summary-tf32.csv"
NCU = ROOT / "tests" / "data" / "real" / "h100-rooflow" / "resnet50-b64-fp32-training-ncu.csv.gz"


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


def test_a_folder_or_a_binary_file_as_the_devices_file_is_named_as_such(tmp_path, capsys):
    """A folder was "does not exist"; a binary file's error named no file ("an input file is not text")."""
    binary = tmp_path / "devices.bin"
    binary.write_bytes(bytes(range(128, 256)))
    assert cli.main(["devices", "--devices-file", str(tmp_path)]) == 2
    assert one_line_error(capsys) == f"rooflow devices: error: {tmp_path} is a folder: give the path of a YAML file " \
                                     "(in it, or elsewhere)"
    assert cli.main(["devices", "--devices-file", str(binary)]) == 2
    assert one_line_error(capsys).startswith(f"rooflow devices: error: {binary} is not text (")


def test_a_word_in_a_number_column_of_the_summary_is_named_with_its_row(tmp_path, capsys):
    """'fast' as a measured time ended `rooflow summary` in a 42-line TypeError traceback; 'abc' as a batch printed."""
    lines = SUMMARY.read_text().splitlines()
    header = lines[0].split(",")
    for column, word in (("measured_seconds", "fast"), ("batch", "abc")):
        row = lines[2].split(",")
        row[header.index(column)] = word
        path = tmp_path / f"{column}.csv"
        path.write_text("\n".join([lines[0], lines[1], ",".join(row), *lines[3:]]) + "\n")
        assert cli.main(["summary", str(path)]) == 2
        assert one_line_error(capsys).startswith(
            f"rooflow summary: error: {path}: its row 2 has '{word}' in column {column}, where a number belongs: ")
    assert cli.main(["summary", str(SUMMARY)]) == 0


def test_an_output_in_a_folder_no_file_can_be_made_in_is_named_not_its_temporary(capsys):
    """--kernels-csv /proc/x named /proc/.x.<random>.tmp and asked whether the step that writes it had run."""
    assert cli.main(["ncu", str(NCU), "--kernels-csv", "/proc/rooflow-kernels.csv"]) == 2
    assert one_line_error(capsys) == ("rooflow ncu: error: /proc/rooflow-kernels.csv: cannot write in its folder /proc "
                                      "(No such file or directory); write it somewhere else")


@pytest.mark.parametrize("argv, said", [
    (["estimate", "resnet18", "--batch", "-4"], "rooflow estimate: error: argument --batch: -4 is not a positive "
                                                "integer (1 or more) (usage: rooflow estimate --help)"),
    (["devices", "--format", "xml"], "rooflow devices: error: argument --format: invalid choice: 'xml' (choose from "
                                     "'table', 'json') (usage: rooflow devices --help)"),
])
def test_a_mistyped_option_is_one_line_not_the_usage_block(capsys, argv, said):
    """argparse printed the whole usage block, up to ten lines, above the one sentence that mattered."""
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2 and one_line_error(capsys) == said


def test_an_unknown_model_is_not_offered_detection_models_it_cannot_estimate(capsys):
    assert cli.main(["estimate", "notamodel"]) == 2
    error = one_line_error(capsys)
    assert "resnet18" in error and "fasterrcnn" not in error and "ssd300" not in error
    assert error.endswith("(torchvision's detection models cannot be estimated or run by the workflow, only timed: "
                          "rooflow time --model NAME --mode inference)")
