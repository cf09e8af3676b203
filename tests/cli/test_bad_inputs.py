"""Bad input at the command line ends in one sentence naming the input and the fix (a new-user pass, 2026-12-04)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rooflow import cli
from rooflow.errors import RooflowError

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
    # each a traceback inside the work: an overflowing seed, torch's resize of a 1-pixel side, setrlimit's overflow
    (["subset", "--seed", str(2**70), "--output", "s.pt", "--manifest", "s.csv"],
     f"rooflow subset: error: argument --seed: {2**70} is not a seed from 0 to 4,294,967,295 (usage: rooflow "
     "subset --help)"),
    (["subset", "--resize", "1", "--image-size", "1", "--output", "s.pt", "--manifest", "s.csv"],
     "rooflow subset: error: argument --resize: 1 is not a side in pixels from 2 to 4,096 (usage: rooflow subset "
     "--help)"),
    (["time", "--model", "resnet18", "--batch", "1", "--cpu-memory-limit", str(2**64 - 1)],
     f"rooflow time: error: argument --cpu-memory-limit: {2**64 - 1} is not a number of bytes from 1 to "
     "4,611,686,018,427,387,904 (usage: rooflow time --help)"),
    # an argument the sub-command does not take pointed at `rooflow --help`, not at the sub-command's usage
    (["calibrate-kernels", "/data/single-ops"], "rooflow calibrate-kernels: error: unrecognized arguments: "
                                                "/data/single-ops (usage: rooflow calibrate-kernels --help)"),
    (["summary", "--results", "x"], "rooflow summary: error: unrecognized arguments: --results (usage: rooflow "
                                    "summary --help)"),
    (["--bogus"], "rooflow: error: unrecognized arguments: --bogus (usage: rooflow --help)"),
    # a prefix of another option: argparse read --device as --devices-file ("h100 does not exist: give the path of
    # an existing YAML file")
    (["devices", "--device", "h100"], "rooflow devices: error: unrecognized arguments: --device h100 (usage: "
                                      "rooflow devices --help)"),
])
def test_a_mistyped_option_is_one_line_not_the_usage_block(capsys, argv, said):
    """argparse printed the whole usage block, up to ten lines, above the one sentence that mattered."""
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2 and one_line_error(capsys) == said


def test_time_takes_its_model_as_estimate_does_and_asks_for_one(tmp_path, capsys):
    """`rooflow estimate X` and `rooflow time X`: time took only --model ("the following arguments are required:
    --model"); now either, and one sentence where none or two are given."""
    output = tmp_path / "timing.json"
    assert cli.main(["time", "squeezenet1_1", "--batch", "1", "--warmup", "0", "--iterations", "1", "--rounds", "1",
                     "--output", str(output)]) == 0
    assert json.loads(output.read_text())["model"] == "squeezenet1_1"
    assert cli.main(["time", "--batch", "1"]) == 2
    assert one_line_error(capsys) == ("rooflow time: error: give one model, e.g. `rooflow time resnet50 --batch 8` "
                                      "(or --model resnet50)")
    assert cli.main(["time", "resnet18", "--model", "alexnet", "--batch", "1"]) == 2
    assert one_line_error(capsys) == "rooflow time: error: two models given (alexnet and resnet18): give one"


def test_estimate_takes_its_model_as_time_does_and_asks_for_one(capsys):
    """`rooflow time --model X` and `rooflow estimate X`: estimate takes --model too (it answered "unrecognized
    arguments: --model"), and with none given says how to give one."""
    assert cli.main(["estimate", "resnet18", "--format", "json"]) == 0
    positional = capsys.readouterr().out
    assert cli.main(["estimate", "--model", "resnet18", "--format", "json"]) == 0
    assert capsys.readouterr().out == positional and '"resnet18"' in positional
    assert cli.main(["estimate"]) == 2
    assert one_line_error(capsys) == ("rooflow estimate: error: give a model, e.g. `rooflow estimate resnet50` (or "
                                      "--model resnet50); `rooflow estimate --help` says which names it takes")


def test_an_unknown_model_is_not_offered_detection_models_it_cannot_estimate(capsys):
    assert cli.main(["estimate", "notamodel"]) == 2
    error = one_line_error(capsys)
    assert "resnet18" in error and "fasterrcnn" not in error and "ssd300" not in error
    assert error.endswith("(torchvision's detection models cannot be estimated or run by the workflow, only timed: "
                          "rooflow time --model NAME --mode inference)")


def test_subset_refuses_one_path_for_both_outputs_and_a_subset_larger_than_memory(tmp_path, capsys):
    """--output and --manifest the same file: exit 0, the manifest overwritten; --classes 100000 (120 GB of
    generated images) grew until the machine ran out of memory."""
    same = tmp_path / "same.pt"
    assert cli.main(["subset", "--output", str(same), "--manifest", str(same)]) == 2
    assert one_line_error(capsys) == (f"rooflow subset: error: --output and --manifest are both {same}: give the "
                                      "manifest its own file (a .csv)")
    assert cli.main(["subset", "--classes", "100000", "--output", str(tmp_path / "s.pt"), "--manifest",
                     str(tmp_path / "m.csv")]) == 2
    assert one_line_error(capsys) == (
        "rooflow subset: error: --classes 100000 × --images-per-class 8 is 800,000 images, 120.4 GB at 224×224, "
        "over the 2 GiB a subset may hold: lower them (the timed batches cycle through the subset)")
    assert not list(tmp_path.iterdir())


def test_time_refuses_more_threads_than_the_machine_can_run(capsys):
    """--threads 100000 ended in a segmentation fault with nothing on stderr (torch's OpenMP)."""
    import os

    with pytest.raises(SystemExit):
        cli.main(["time", "--model", "resnet18", "--batch", "1", "--threads", "100000"])
    assert one_line_error(capsys).startswith(f"rooflow time: error: argument --threads: 100000 is more than 4 × this "
                                             f"machine's {os.cpu_count()} CPUs")


def test_time_with_more_threads_than_usable_cpus_says_they_share_cores(tmp_path, capsys, monkeypatch):
    """--threads 8 on 2 CPUs timed ResNet-18 at 3x its 2-thread latency (0.080 s against 0.026) without a word."""
    import os

    import torch

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    output = tmp_path / "timing.json"
    threads = torch.get_num_threads()
    try:
        assert cli.main(["time", "--model", "resnet18", "--batch", "1", "--warmup", "0", "--iterations", "1",
                         "--rounds", "1", "--threads", "2", "--output", str(output)]) == 0
    finally:
        torch.set_num_threads(threads)  # this process's other tests keep theirs
    assert one_line_error(capsys) == (
        "rooflow time: warning: --threads 2 on 1 usable CPU(s): the threads share cores, so the step is timed slower "
        "than 1 thread(s) run it; give --threads 1 or fewer for this machine's latency")
    assert output.exists()


def test_time_out_of_memory_writes_its_record_and_says_what_to_change(tmp_path, capsys):
    """A real allocation failure (resnet18 training at batch 64 under a 200 MB limit) exited 0 with a log line:
    a script could not tell it from a timing. The record is written (status oom) and one sentence says what to
    change; the exit status is 3."""
    import resource

    from rooflow.cli.time import OOM_EXIT_STATUS
    from rooflow.io import read_json

    before = resource.getrlimit(resource.RLIMIT_AS)
    output = tmp_path / "timing.json"
    status = cli.main(["time", "--model", "resnet18", "--batch", "64", "--mode", "training", "--warmup", "0",
                       "--iterations", "1", "--rounds", "1", "--cpu-memory-limit", str(200 * 2**20),
                       "--output", str(output)])
    assert resource.getrlimit(resource.RLIMIT_AS) == before
    assert status == OOM_EXIT_STATUS == 3
    assert read_json(output)["status"] == "oom"
    error = one_line_error(capsys)
    assert error.startswith("rooflow time: resnet18 batch 64 fp32 training did not fit: out of memory: asked for ")
    assert error.endswith(f"the record (status oom) is written to {output}. Try a smaller --batch (`rooflow estimate "
                          "resnet18 --batch N --device KEY` predicts a batch's steady-state memory) or a larger "
                          "--cpu-memory-limit.")


def test_inputs_read_only_for_a_device_or_given_as_a_folder_are_named(tmp_path, capsys):
    """--ceilings without --device was never read (a missing file passed, exit 0); a folder as a subset or a kernel
    calibrations file was "does not exist"; a foreign kernel calibrations file's fix wrote over it (-o that file)."""
    assert cli.main(["estimate", "resnet18", "--ceilings", str(tmp_path / "none.json")]) == 2
    assert one_line_error(capsys).endswith("--ceilings: it is for the prediction on a device: add --device KEY")
    assert cli.main(["estimate", "resnet18", "--device", "t4", "--kernel-calibrations", str(tmp_path)]) == 2
    assert one_line_error(capsys).endswith(f"{tmp_path} is a folder: give a kernel calibrations file (`rooflow "
                                           "calibrate-kernels --data DIR -o kernels-GPU.json` writes one)")
    foreign = tmp_path / "ceilings.json"
    foreign.write_text("[1, 2]")
    assert cli.main(["estimate", "resnet18", "--device", "t4", "--kernel-calibrations", str(foreign)]) == 2
    error = one_line_error(capsys)
    assert "not a kernel calibrations file" in error and f"-o {foreign}" not in error
    assert cli.main(["time", "--model", "resnet18", "--batch", "1", "--subset", str(tmp_path)]) == 2
    assert one_line_error(capsys).endswith(f"dataset subset '{tmp_path}' is a folder: give the .pt file `rooflow "
                                           "subset --output` (the workflow's subset_dataset step) wrote")


def test_a_roof_no_device_measures_or_a_newer_ceilings_file_is_refused(tmp_path, capsys):
    """A ceilings JSON with a roof of 1e300 FLOP/s priced every run at 0 s, one of 0.001 bytes/s at hours, an H100
    DRAM roof of 9 TB/s (2.7x its datasheet) passed as measured, and a file of schema_version 99 was read as this
    rooflow's: each is refused naming the value, by estimate and by the checks of a results tree."""
    import json

    from rooflow.report.checks import check_file_records

    ceilings = ROOT / "tests" / "data" / "real" / "h100-rooflow" / "ceilings-h100.json"
    measured = json.loads(ceilings.read_text())
    cases = (({"peak_flops_per_second": {**measured["peak_flops_per_second"], "fp32": 1e300}},
              "peak_flops_per_second.fp32 is 1e+300 FLOP/s, past what any one device measures"),
             ({"dram_bytes_per_second": 0.001}, "dram_bytes_per_second is 0.001 B/s, below what any one device measures"),
             ({"schema_version": 99}, "was written by a newer rooflow (schema_version 99; this one reads up to 2"),
             ({"dram_bytes_per_second": 9e12}, "its dram_bytes_per_second 9 TB/s is 2.69× h100-sxm5-80gb's datasheet "
                                               "3.35 TB/s, which no board of it reaches"))
    for change, words in cases:
        edited = tmp_path / "h100-sxm5-80gb.json"
        edited.write_text(json.dumps({**measured, **change}))
        assert cli.main(["estimate", "resnet18", "--device", "h100-sxm5-80gb", "--ceilings", str(edited),
                         "--measured"]) == 2
        assert one_line_error(capsys).startswith(f"rooflow estimate: error: ceilings file {edited}: {words}")
        if "datasheet" not in words:  # the checks read no catalogue here: the file alone
            with pytest.raises(RooflowError, match=re.escape(f"ceilings file {edited}: {words}")):
                check_file_records(ROOT / "tests" / "data" / "real" / "h100-rooflow" / "summary-tf32.csv",
                                   ceilings_paths=[edited])
    # a measured roof a little above the datasheet's (a factory-overclocked board) is a measurement
    edited.write_text(json.dumps({**measured, "dram_bytes_per_second": 3.6e12}))
    assert cli.main(["estimate", "resnet18", "--device", "h100-sxm5-80gb", "--ceilings", str(edited), "--measured"]) == 0


def test_a_roof_or_a_time_that_is_not_a_positive_number_is_refused(tmp_path, capsys):
    """A ceilings JSON with 'fast' as its bandwidth was a TypeError traceback, with NaN a NaN prediction (exit 0);
    a timing record with a negative median gave negative predicted times and throughputs; a ceilings JSON given as
    the timing record was "a run that differs in model (None vs resnet50)"."""
    import json

    ceilings = ROOT / "tests" / "data" / "real" / "h100-rooflow" / "ceilings-h100.json"
    for value, shown in (("fast", "'fast'"), (float("nan"), "nan"), (-5, "-5")):
        edited = tmp_path / "ceilings.json"
        edited.write_text(json.dumps({**json.loads(ceilings.read_text()), "dram_bytes_per_second": value}))
        assert cli.main(["estimate", "resnet18", "--device", "h100-sxm5-80gb", "--ceilings", str(edited),
                         "--measured"]) == 2
        assert one_line_error(capsys).startswith(f"rooflow estimate: error: ceilings file {edited}: "
                                                 f"dram_bytes_per_second is {shown}, not a positive number")
    assert cli.main(["estimate", "resnet18", "--device", "h100-sxm5-80gb", "--ceilings", str(ceilings),
                     "--measured"]) == 0
    capsys.readouterr()
    assert cli.main(["estimate", "resnet50", "--device", "h100-sxm5-80gb", "--what-if", "--from-measured",
                     str(ceilings)]) == 2
    assert one_line_error(capsys).endswith(f"{ceilings}: not a timing record (no model, batch, precision, mode): "
                                           "pass the timing.json `rooflow time --output` (the workflow's timing job) "
                                           "wrote")
    record = {"model": "resnet50", "batch": 64, "precision": "tf32", "mode": "inference", "device": "h100-sxm5-80gb",
              "status": "ok", "median_seconds": -1.0}
    (tmp_path / "timing.json").write_text(json.dumps(record))
    assert cli.main(["estimate", "resnet50", "--batch", "64", "--precision", "tf32", "--device", "h100-sxm5-80gb",
                     "--what-if", "--from-measured", str(tmp_path / "timing.json")]) == 2
    assert one_line_error(capsys).endswith("its median_seconds is -1.0, not a positive number of seconds: pass the "
                                           "timing record `rooflow time` wrote, unedited")


def test_options_a_mode_would_drop_and_paths_that_collide_are_refused(tmp_path, capsys):
    """`checks --records nowhere.json` printed "all self-checks passed" (exit 0); `calibrate-kernels --check DIR -o F`
    exited 0 writing nothing; `doctor --output F --json F` lost the table; a binary JSON input named no file."""
    assert cli.main(["checks", str(SUMMARY), "--records", str(tmp_path / "nowhere.json")]) == 2
    assert one_line_error(capsys).startswith(f"rooflow checks: error: --records {tmp_path / 'nowhere.json'}: no such "
                                             "file")
    assert cli.main(["calibrate-kernels", "--check", str(tmp_path), "-o", str(tmp_path / "k.json")]) == 2
    assert one_line_error(capsys) == ("rooflow calibrate-kernels: error: --check scores and prints; it does not use -o: "
                                      "give --check alone, or --data DIR -o FILE to fit and write a calibration")
    same = tmp_path / "doctor.txt"
    assert cli.main(["doctor", "--output", str(same), "--json", str(same)]) == 2
    assert one_line_error(capsys).startswith(f"rooflow doctor: error: --output and --json are both {same}")
    binary = tmp_path / "ceilings.json"
    binary.write_bytes(bytes(range(128, 256)))
    assert cli.main(["estimate", "resnet18", "--device", "cpu", "--ceilings", str(binary)]) == 2
    assert one_line_error(capsys).startswith(f"rooflow estimate: error: {binary} is not text (")
    assert not (tmp_path / "k.json").exists() and not same.exists()


@pytest.mark.parametrize("argv, said", [
    (["calibrate", "--from-recordings", "{real}", "--device", "h100-sxm5-80gb", "--ceilings", "{tmp}"],
     "rooflow calibrate: error: --ceilings {tmp}: a folder, not a file: give the JSON `rooflow ceilings --device "
     "h100-sxm5-80gb --output FILE` wrote on that device"),
    (["calibrate", "--from-recordings", "{summary}", "--device", "h100-sxm5-80gb", "--ceilings", "{ceilings}"],
     "rooflow calibrate: error: {summary}: a file, not a folder of recordings: give the folder that holds"),
    (["checks", "{summary}", "--estimates", "{summary}"],
     "rooflow checks: error: --estimates {summary}: a file, not a folder: give the workflow's results/estimate/"),
    (["checks", "{summary}", "--records", "{tmp}"],
     "rooflow checks: error: --records {tmp}: a folder, not a file: give the workflow's results/checks/checks.json"),
    (["calibrate-kernels", "--data", "{tmp}", "--ceilings", "t4={tmp}"],
     "rooflow calibrate-kernels: error: --ceilings 't4={tmp}': {tmp}: a folder, not a file: give the JSON `rooflow "
     "ceilings --device t4 --output FILE` wrote on that device"),
])
def test_a_folder_given_for_a_file_or_a_file_for_a_folder_is_named_as_such(tmp_path, capsys, argv, said):
    """Each was "no such file/folder" (or "does not exist") for a path that exists: the user looked for a typo."""
    real = SUMMARY.parent
    paths = {"tmp": tmp_path, "real": real, "summary": SUMMARY, "ceilings": real / "ceilings-h100.json"}
    assert cli.main([part.format(**paths) for part in argv]) == 2
    assert one_line_error(capsys).startswith(said.format(**paths))


@pytest.mark.parametrize("argv, work", [
    (["doctor", "--json", "/proc/rooflow-doctor.json"], "rooflow.measure.doctor.run_doctor"),
    (["calibrate-kernels", "--data", "{tmp}", "-o", "/proc/rooflow-kernels.json"],
     "rooflow.estimate.kernel_calibration.calibrate_measured"),
])
def test_an_output_that_cannot_be_written_is_refused_before_the_work(tmp_path, capsys, monkeypatch, argv, work):
    """`doctor --json /proc/x` ran its checks (minutes of profiling on a GPU) and then failed to write;
    `calibrate-kernels -o /proc/x.json` fitted for minutes and then named its shapes file, not the output given."""
    ran = []
    monkeypatch.setattr(work, lambda *args, **kwargs: ran.append(args))
    assert cli.main([part.format(tmp=tmp_path) for part in argv]) == 2
    output = argv[-1]
    assert one_line_error(capsys).endswith(f"error: {output}: cannot write in its folder /proc (No such file or "
                                           "directory); write it somewhere else")
    assert ran == []


def test_measured_roofs_without_a_ceilings_file_are_refused(capsys):
    """`estimate --device t4 --measured` had no measured roof to use and predicted with the datasheet's, exit 0."""
    assert cli.main(["estimate", "resnet18", "--device", "t4", "--measured"]) == 2
    assert one_line_error(capsys) == (
        "rooflow estimate: error: --measured: the measured roofs are a ceilings file's: add --ceilings FILE "
        "(results/ceilings/t4.json, or what `rooflow ceilings --device t4 --output FILE` wrote on it)")


def test_another_gpus_ceilings_are_refused_by_estimate(capsys):
    """An H200's measured roofs given for an H100 moved its prediction from 20 to 18.2 ms without a word (only a
    CPU's for a GPU was refused); an H100 SXM's, given for an H100 PCIe, put a DRAM roof of 3.03 TB/s over a board
    whose memory runs at 2.0 (it had been taken, as the same GPU model's)."""
    h200 = ROOT / "tests" / "data" / "real" / "gpu-2026-11-28" / "ceilings-h200.json"
    assert cli.main(["estimate", "resnet50", "--device", "h100-sxm5-80gb", "--ceilings", str(h200), "--measured"]) == 2
    assert one_line_error(capsys) == (
        f"rooflow estimate: error: ceilings file {h200}: it holds the roofs of a H200 (NVIDIA H200), and "
        "h100-sxm5-80gb is a H100 (NVIDIA H100 80GB HBM3): give the JSON `rooflow ceilings --device h100-sxm5-80gb "
        "--output FILE` wrote on that device")
    h100 = ROOT / "tests" / "data" / "real" / "h100-rooflow" / "ceilings-h100.json"
    assert cli.main(["estimate", "resnet50", "--device", "h100-pcie-80gb", "--ceilings", str(h100), "--measured"]) == 2
    assert one_line_error(capsys) == (
        f"rooflow estimate: error: ceilings file {h100}: its dram_bytes_per_second 3.033 TB/s is 1.52× "
        "h100-pcie-80gb's datasheet 2 TB/s, which no board of it reaches: give the JSON `rooflow ceilings --device "
        "h100-pcie-80gb --output FILE` wrote on that device")
    assert cli.main(["estimate", "resnet50", "--device", "h100-sxm5-80gb", "--ceilings", str(h100), "--measured"]) == 0


@pytest.mark.parametrize("argv, said", [
    (["ncu", "{copy}", "--kernels-csv", "{copy}"],
     "rooflow ncu: error: --kernels-csv {copy} is also the input FILE {copy}: writing it would replace that file; "
     "give --kernels-csv a path of its own"),
    (["time", "--model", "resnet18", "--batch", "1", "--output", "{tmp}/t.json", "--timeline", "{tmp}/t.json"],
     "rooflow time: error: --timeline {tmp}/t.json is also the output --output {tmp}/t.json: writing it would "
     "replace that file; give --timeline a path of its own"),
    (["time", "--model", "resnet18", "--batch", "1", "--subset", "{copy}", "--output", "{copy}"],
     "rooflow time: error: --output {copy} is also the input --subset {copy}: writing it would replace that file; "
     "give --output a path of its own"),
])
def test_an_output_that_is_an_input_or_another_output_is_refused(tmp_path, capsys, argv, said):
    """`rooflow ncu F --kernels-csv F` replaced the Nsight Compute output (often the only copy, from a cluster) with
    rooflow's per-kernel table, exit 0; `time --subset S --output S` the subset with a timing record; `--output F
    --timeline F` lost one of the two. Refused before any work, the input untouched."""
    copy = tmp_path / "ncu.csv.gz"
    copy.write_bytes(NCU.read_bytes())
    assert cli.main([part.format(copy=copy, tmp=tmp_path) for part in argv]) == 2
    assert one_line_error(capsys) == said.format(copy=copy, tmp=tmp_path)
    assert copy.read_bytes() == NCU.read_bytes()


@pytest.mark.parametrize("edit, says", [
    (("classes", "gemm", "efficiency", 0), 'classes.gemm.efficiency is 0, not a positive number'),
    (("classes", "gemm", "efficiency", "fast"), "classes.gemm.efficiency is 'fast', not a positive number"),
    (("classes", "gemm", "efficiency", float("nan")), "classes.gemm.efficiency is nan, not a positive number"),
    (("classes", "gemm", "reread", -1), "classes.gemm.reread is -1, not a number ≥ 0"),
    # 0 would have read as 'no rate of its own', silently
    (("classes", "gemm", "weight_efficiency", 0), "classes.gemm.weight_efficiency is 0, not a positive number"),
    (("relative_uncertainty", 5), "relative_uncertainty is 5, not a share between 0 and 1"),
    (("floors", "linear", -1), "floors.linear is -1, not a positive number of seconds"),
])
def test_a_kernel_calibrations_file_with_values_no_fit_writes_is_refused(tmp_path, capsys, edit, says):
    """A copy of the shipped kernels.json, one value hand-edited: an efficiency of 0 ended `rooflow estimate` in a
    ZeroDivisionError traceback, a string in a ValueError one, NaN printed a NaN time (exit 0), a relative
    uncertainty of 5 a negative range, a negative floor passed. One sentence naming the value's place; the
    workflow's kernel_calibrations key reads files the same way (rooflow.config.check_kernel_calibrations)."""
    import json
    from importlib import resources

    shipped = json.loads(resources.files("rooflow.data.calibration").joinpath("kernels.json").read_text())
    name = "NVIDIA A100-PCIE-40GB"
    data = {**shipped, "measured": {name: shipped["measured"][name]}}
    *where, key, value = edit
    target = data["measured"][name]["calibration"]
    for part in where:
        target = target[part]
    target[key] = value
    path = tmp_path / "kernels-a100.json"
    path.write_text(json.dumps(data))
    argv = ["estimate", "resnet50", "--batch", "128", "--mode", "training", "--device", "a100-pcie-40gb",
            "--kernel-calibrations", str(path)]
    assert cli.main(argv) == 2
    assert one_line_error(capsys).endswith(
        f'{path}: measured["{name}"].calibration.{says}, which no fit writes: make it again with `rooflow '
        f'calibrate-kernels --data DIR -o {path}`')
