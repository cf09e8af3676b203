"""Config validation (issue 14): every bad input is rejected before any job starts, in one sentence that
names the key and the fix -- through rooflow.config.validate_config and through a real `snakemake -n`
(stderr holds the sentence and no traceback). And config values never reach a shell: the schema rejects
names that are not wildcard-safe, and nothing in rooflow, its scripts or its rules runs a shell."""

import ast
import copy
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rooflow.config import experiment_matrix, lacking_precision, load_config, validate_config
from rooflow.config_io import load_schema, validate
from rooflow.errors import RooflowError
from rooflow.hardware.devices import load_devices

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def config(root):
    return yaml.safe_load((root / "config" / "config.yaml").read_text())


def test_default_config_is_valid_and_gets_defaults(config, root):
    validated = validate_config(copy.deepcopy(config), root)
    assert validated["profiling"]["ncu"]["executable"] == "ncu"
    assert validated["profiling"]["max_timing_rounds"] == 3
    assert validated["profiling"]["noise_budget_seconds"] == 60
    assert validated["profiling"]["cpu_memory_limit_bytes"] is None
    runs = experiment_matrix(validated)
    assert len(runs) == len(config["models"]) * len(config["batch_sizes"]) * len(config["modes"])


def image_tree(folder: Path, classes: int, images: int, suffix: str = ".JPEG") -> Path:
    from PIL import Image

    for c in range(classes):
        (folder / f"n{c:08d}").mkdir(parents=True)
        for i in range(images):
            Image.new("RGB", (8, 8), (c * 40, i * 40, 0)).save(folder / f"n{c:08d}" / f"img{i}{suffix}", "JPEG")
    return folder


def empty_tree(folder: Path) -> Path:
    """Class folders, but no images in them (a README and a labels file)."""
    for c in range(3):
        (folder / f"class{c}").mkdir(parents=True)
        (folder / f"class{c}" / "README.txt").write_text("no images here")
    return folder


# (name, change to config/config.yaml, words the one-sentence error must contain: the key, then the fix)
FAULTS = [
    ("unknown top-level key", {"batch_size": [1]}, ["'batch_size'", "did you mean 'batch_sizes'"]),
    ("unknown nested key", {"profiling": {"timed_iteration": 3}},
     ["'profiling/timed_iteration'", "did you mean 'profiling/timed_iterations'"]),
    ("wrong type: string for a list", {"batch_sizes": "4"}, ["'batch_sizes'", "not a list"]),
    ("wrong type: text for an integer", {"profiling": {"timed_iterations": "ten"}},
     ["'profiling/timed_iterations'", "not an integer"]),
    ("wrong type: a float batch", {"batch_sizes": [2.0]}, ["'batch_sizes/0'", "not an integer"]),
    ("wrong type: yes for a boolean", {"profiling": {"ceilings_quick": "yes"}},
     ["'profiling/ceilings_quick'", "not true or false"]),
    ("zero batch size", {"batch_sizes": [0]}, ["'batch_sizes/0'", "at least 1"]),
    ("negative batch size", {"batch_sizes": [-8]}, ["'batch_sizes/0'", "at least 1"]),
    ("a batch past int64 byte counts", {"batch_sizes": [1, 16777217]},
     ["'batch_sizes/1' is 16777217, but must be at most 16777216", "1 to 16,777,216 (2^24)"]),
    ("negative per-model batch size", {"model_batch_sizes": {"resnet18": [-2]}},
     ["'model_batch_sizes/resnet18/0'", "at least 1"]),
    # it said "is an empty list: Batch sizes to estimate and measure", the schema's description, not the fix
    ("empty batch list", {"batch_sizes": []},
     ["key 'batch_sizes' is an empty list: list at least 1 (batch sizes to estimate and measure"]),
    ("zero timed iterations", {"profiling": {"timed_iterations": 0}}, ["'profiling/timed_iterations'", "at least 1"]),
    ("zero timing rounds", {"profiling": {"max_timing_rounds": 0}}, ["'profiling/max_timing_rounds'", "at least 1"]),
    ("unknown model", {"models": ["resnet18", "resnet19"]},
     ["'models'", "'resnet19'", "closest: resnet18", "resnet50"]),
    ("misspelt model", {"models": ["mobilenetv2"]}, ["'models'", "closest: mobilenet_v2"]),
    ("model name with shell syntax", {"models": ["resnet18; rm -rf ~"]},
     ["'models/0'", "'resnet18; rm -rf ~'", "lowercase letters and digits"]),
    ("model name with a path", {"models": ["../../etc"]}, ["'models/0'", "lowercase letters and digits"]),
    # the name pattern had refused these without the closest name
    ("mistyped model name", {"models": ["resnet18", "resnet5O"]},
     ["names unknown model 'resnet5O' (closest: resnet50"]),
    ("detection model", {"models": ["resnet18", "ssdlite320_mobilenet_v3_large"]},
     ["'models'", "ssdlite320_mobilenet_v3_large, a detection model", "the meta device",
      "rooflow time --model ssdlite320_mobilenet_v3_large --mode inference"]),
    ("quantized model", {"models": ["resnet18", "quantized_mobilenet_v2"]},
     ["key 'models': quantized_mobilenet_v2 is torchvision's int8 quantized model", "its float model mobilenet_v2"]),
    # its estimate job stopped the workflow with it after the other runs' jobs had started
    ("batch 1 training of inception_v3", {"models": ["resnet18", "inception_v3"]},
     ["key 'batch_sizes' gives inception_v3 batch 1", "cannot run for it at batch 1", "more than one value per channel",
      "batches from 2 up in model_batch_sizes/inception_v3, or remove training"]),
    ("batch 1 training of deeplabv3", {"models": ["deeplabv3_resnet50"], "model_batch_sizes": {
        "deeplabv3_resnet50": [1, 2]}}, ["key 'model_batch_sizes/deeplabv3_resnet50' gives deeplabv3_resnet50 batch 1"]),
    ("capitalised model name", {"models": ["Resnet50"]}, ["names unknown model 'Resnet50' (closest: resnet50"]),
    ("unknown device", {"devices": ["a100"]}, ["'devices/0'", "'a100'", "rooflow devices"]),
    ("device key with shell syntax", {"devices": ["cpu && reboot"]}, ["'devices/0'", "dashes"]),
    ("unknown precision", {"precisions": ["fp64"]}, ["'precisions/0'", "fp32, tf32, fp16, bf16"]),
    ("fp8 is not a run precision", {"precisions": ["fp8"]}, ["'precisions/0'", "FP8 is not a run precision"]),
    ("upper-case precision", {"precisions": ["FP16"]}, ["'precisions/0'", "did you mean 'fp16'"]),
    ("bf16 on a V100", {"devices": ["cpu", "v100-sxm2-16gb"], "precisions": ["fp32", "bf16"]},
     ["'precisions'", "bf16", "v100-sxm2-16gb", "no bf16 arithmetic", "remove bf16"]),
    ("bf16 on a T4", {"devices": ["t4"], "precisions": ["bf16"]}, ["'precisions'", "Tesla T4", "no bf16"]),
    ("bf16 on an imported V100 profile", {"imports": [{
        "device": "v100-sxm2-16gb", "model": "vgg11", "batch": 16, "precision": "bf16", "mode": "training",
        "ncu": ["tests/data/real/anoushka21-cloudml/proj1/v100/vgg11/ncu-log-vgg11.txt.gz"]}]},
     ["'imports/0/precision'", "no bf16"]),
    ("dataset root that does not exist", {"dataset": {"root": "/nonexistent/imagenet"}},
     ["'dataset/root'", "not a directory", "null"]),
    ("dataset root without images", {"dataset": {"root": "EMPTY_TREE"}}, ["'dataset/root'", "holds no images"]),
    ("dataset root with too few classes", {"dataset": {"root": "SMALL_TREE", "classes": 4}},
     ["'dataset/root'", "only 2 class folder(s)", "lower dataset.classes"]),
    ("import naming no files", {"imports": [{"device": "a100-sxm4-40gb", "model": "vgg11", "batch": 16,
                                             "precision": "fp32", "mode": "training"}]},
     ["'imports/0'", "names no ncu or nsys files"]),
    ("import with a negative time", {"imports": [{"device": "a100-sxm4-40gb", "model": "vgg11", "batch": 16,
                                                  "precision": "fp32", "mode": "training", "seconds": -0.5,
                                                  "nsys": ["nowhere/nsys.csv"]}]},
     ["'imports/0/seconds'", "-0.5"]),
    # its estimate job counted a batch of 1e8 (4.6e18 FLOPs); at 1e12 the estimator overflowed, naming no key
    ("import with a batch past batch_sizes' bound", {"imports": [{"device": "a100-sxm4-40gb", "model": "vgg11",
                                                                  "batch": 100000000, "precision": "fp32",
                                                                  "mode": "training", "nsys": ["nowhere/nsys.csv"]}]},
     ["'imports/0/batch' is 100000000, but must be at most 16777216", "1 to 16,777,216 (2^24)"]),
    ("import whose file is missing", {"imports": [{"device": "a100-sxm4-40gb", "model": "vgg11", "batch": 16,
                                                   "precision": "fp32", "mode": "training",
                                                   "ncu": ["nowhere/ncu.csv"]}]},
     ["'nowhere/ncu.csv'", "fix the path"]),
    # each passed validation, then its aggregate job refused it once the workflow ran (summary and report with it)
    ("an nsys report listed under ncu", {"imports": [{
        "device": "a100-sxm4-40gb", "model": "vgg11", "batch": 16, "precision": "fp32", "mode": "training",
        "ncu": ["tests/data/real/anoushka21-cloudml/proj1/a100/vgg11/tmp_nsys_gputrace.csv"]}]},
     ["imported profiler file 'tests/data/real/anoushka21-cloudml/proj1/a100/vgg11/tmp_nsys_gputrace.csv' "
      "(imports/0/ncu) is an nsys stats report, not Nsight Compute output: list it under nsys:"]),
    ("ncu output listed under nsys", {"imports": [{
        "device": "h100-sxm5-80gb", "model": "resnet50", "batch": 64, "precision": "tf32", "mode": "inference",
        "nsys": ["tests/data/real/h100-rooflow/resnet50-b64-tf32-inference-ncu.csv.gz"]}]},
     ["(imports/0/nsys) is Nsight Compute output, not an nsys stats report: list it under ncu:"]),
    ("a timing record listed under nsys", {"imports": [{
        "device": "h100-sxm5-80gb", "model": "resnet50", "batch": 64, "precision": "tf32", "mode": "inference",
        "nsys": ["tests/data/real/h100-rooflow/resnet50-b64-tf32-inference-timing.json"]}]},
     ["(imports/0/nsys) is JSON, not Nsight Systems output: list the profiler's text or CSV output"]),
    # each passed `snakemake -n`, then failed in the GPU job ("'' is not on PATH"), or its output went elsewhere than
    # the aggregate job reads ("the file is empty: the profiler wrote nothing")
    ("a blank ncu executable", {"profiling": {"ncu": {"executable": ""}}},
     ["key 'profiling/ncu/executable' is ''", "ncu executable (name on PATH or full path)"]),
    ("ncu's log file in extra_args", {"profiling": {"ncu": {"extra_args": ["--log-file", "x.txt"]}}},
     ["key 'profiling/ncu/extra_args' gives --log-file, which rooflow's ncu command sets itself (its output is what "
      "the aggregate job reads): remove it"]),
    ("nsys's output and capture range in extra_args", {"profiling": {"nsys": {"extra_args": ["-o", "x",
                                                                                             "--capture-range=none"]}}},
     ["key 'profiling/nsys/extra_args' gives -o, --capture-range=none, which rooflow's nsys command sets itself"]),
    # an import on a CPU: its Nsight profile drawn on the CPU's roofline (accepted)
    ("import on a cpu", {"imports": [{"device": "cpu", "model": "vgg11", "batch": 16, "precision": "fp32",
                                      "mode": "training",
                                      "ncu": ["tests/data/real/anoushka21-cloudml/proj1/a100/vgg11/ncu-log-vgg11.txt"]}]},
     ["key 'imports/0/device' is cpu, a cpu device, but ncu and nsys profile NVIDIA GPUs"]),
    # the workflow took the first entry of a run: the second one's files were never read, and nothing said so
    ("the same run imported twice", {"imports": [
        {"device": "a100-sxm4-40gb", "model": "vgg11", "batch": 16, "precision": "fp32", "mode": "training",
         "ncu": ["tests/data/real/anoushka21-cloudml/proj1/a100/vgg11/ncu-log-vgg11.txt"]},
        {"device": "a100-sxm4-40gb", "model": "vgg11", "batch": 16, "precision": "fp32", "mode": "training",
         "ncu": ["tests/data/real/anoushka21-cloudml/proj1/a100/vgg13/ncu-log-vgg13.txt.gz"]}]},
     ["key 'imports/1' (vgg11 b16 fp32 training on a100-sxm4-40gb) is the same run as imports/0: give each run once"]),
    # '' read the workflow's own folder as the image tree: "only 2 class folder(s) hold images" (rooflow/, tests/)
    ("dataset root that is empty", {"dataset": {"root": ""}},
     ["key 'dataset/root' is an empty string", "write null for the generated stand-in"]),
    # 1,000 x 1,300 (ImageNet's train/) is 196 GB of uint8 images at 224: every timing job loads the subset whole
    ("dataset subset larger than memory", {"dataset": {"classes": 1000, "images_per_class": 1300}},
     ["key 'dataset/classes'", "1,300,000 images, 195.7 GB", "at most 2 GiB", "lower them"]),
    # each passed validation, then its first job ended in a traceback: an overflowing seed, an allocator error,
    # torch's antialiased resize of a 1-pixel side, setrlimit's OverflowError
    ("seed past a long long", {"dataset": {"seed": 2**70}}, ["'dataset/seed'", "must be at most 4294967295"]),
    ("negative seed", {"dataset": {"seed": -1}}, ["'dataset/seed'", "at least 0"]),
    ("resize of petabytes", {"dataset": {"resize": 10**9}}, ["'dataset/resize'", "must be at most 4096"]),
    ("resize of one pixel", {"dataset": {"resize": 1, "image_size": 1}}, ["'dataset/resize'", "at least 2"]),
    ("memory limit past setrlimit", {"profiling": {"cpu_memory_limit_bytes": 2**80}},
     ["'profiling/cpu_memory_limit_bytes'", "must be at most 4611686018427387904"]),
    ("resize below the crop", {"dataset": {"resize": 200, "image_size": 224}},
     ["'dataset/resize' is 200, below dataset.image_size 224", "black borders", "256 for a 224 crop"]),
    ("kernel calibrations file that is missing", {"kernel_calibrations": ["nowhere/kernels-l4.json"]},
     ["'kernel_calibrations/0'", "nowhere/kernels-l4.json", "no such kernel calibrations file",
      "rooflow calibrate-kernels --data DIR -o", "or remove it"]),
]


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    base = tmp_path_factory.mktemp("datasets")
    return {"EMPTY_TREE": str(empty_tree(base / "empty")), "SMALL_TREE": str(image_tree(base / "small", 2, 2))}


def apply(config: dict, change: dict, trees: dict) -> dict:
    config = copy.deepcopy(config)
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key].update({k: trees.get(v, v) if isinstance(v, str) else v for k, v in value.items()})
        else:
            config[key] = value
    return config


@pytest.mark.parametrize("name,change,words", FAULTS, ids=[f[0] for f in FAULTS])
def test_each_fault_is_one_sentence_naming_key_and_fix(config, root, trees, name, change, words):
    with pytest.raises(RooflowError) as error:
        validate_config(apply(config, change, trees), root)
    message = str(error.value)
    assert "\n" not in message and message.startswith("config: "), message
    for word in words:
        assert word in message, (word, message)
    # key, then ": " and what to do about it
    assert re.search(r"key '[^']+'|profiler file", message) and message.count(": ") >= 2, message


def test_a_model_that_cannot_train_at_batch_1_passes_with_other_batches_or_modes(config, root):
    for change in ({"models": ["inception_v3"], "model_batch_sizes": {"inception_v3": [2, 4]}},
                   {"models": ["inception_v3"], "modes": ["inference"]}):
        validate_config({**copy.deepcopy(config), **change}, root)


def test_the_models_refused_batch_1_training_are_those_pytorch_cannot_train():
    """NO_TRAINING_AT_BATCH_1 against the estimate itself, on every segmentation model and the two classification
    models with auxiliary heads (the classification zoo's other models train at batch 1: test_estimate_zoo)."""
    from rooflow.estimate.api import estimate_run
    from rooflow.workload.models import NO_TRAINING_AT_BATCH_1, task_models
    from rooflow.workload.spec import spec_from_options

    refused = set()
    for name in (*task_models("segmentation"), "googlenet", "inception_v3"):
        try:
            estimate_run(spec_from_options(name, None, None, None), 1, "fp32", "training", None)
        except RooflowError as error:
            assert "more than 1 value per channel" in str(error), error
            refused.add(name)
    assert refused == set(NO_TRAINING_AT_BATCH_1)


def test_an_imported_file_is_read_for_its_kind_at_validation(config, root, tmp_path):
    """An empty file or a binary Nsight Systems report under an import passed validation and stopped the workflow in
    its aggregate job; the profiler outputs each kind lists (gzip too) pass."""
    run = {"device": "a100-sxm4-40gb", "model": "vgg11", "batch": 16, "precision": "fp32", "mode": "training"}
    empty, report = tmp_path / "ncu.txt", tmp_path / "vgg11.nsys-rep"
    empty.write_text("\n")
    report.write_bytes(b"\x00\x01binary")
    for kind, path, words in (("ncu", empty, "is empty: copy it again from where the profiler wrote it"),
                              ("nsys", report, "is a binary Nsight Systems report (.nsys-rep): run `nsys stats")):
        with pytest.raises(RooflowError, match=re.escape(f"imported profiler file '{path}' (imports/0/{kind}) {words}")):
            validate_config({**copy.deepcopy(config), "imports": [{**run, kind: [str(path)]}]}, root)
    a100 = "tests/data/real/anoushka21-cloudml/proj1/a100"
    validated = validate_config({**copy.deepcopy(config), "imports": [{
        **run, "ncu": [f"{a100}/vgg11/ncu-log-vgg11.txt"], "nsys": [f"{a100}/vgg11/tmp_nsys_gputrace.csv"]}, {
        **run, "model": "vgg13", "ncu": [f"{a100}/vgg13/ncu-log-vgg13.txt.gz"],
        "nsys": [f"{a100}/vgg13/tmp_nsys_gputrace.csv.gz"]}]}, root)
    assert [len(entry["ncu"] + entry["nsys"]) for entry in validated["imports"]] == [2, 2]
    # nsys stats' stdout, captured whole, starts with its progress lines: "[3/8] ..." is no JSON array
    captured = tmp_path / "stats.txt"
    captured.write_text("[3/8] Executing 'cuda_gpu_trace' stats report\n\n"
                        + (root / a100 / "vgg11" / "tmp_nsys_gputrace.csv").read_text())
    validate_config({**copy.deepcopy(config), "imports": [{**run, "nsys": [str(captured)]}]}, root)


def test_close_matches_come_first_and_the_whole_list_follows(config, root):
    config["models"] = ["resnet19"]
    with pytest.raises(RooflowError) as error:
        validate_config(config, root)
    message = str(error.value)
    closest = re.search(r"\(closest: ([^)]*)\)", message).group(1).split(", ")
    assert closest[0] == "resnet18" and len(closest) <= 3
    assert "wide_resnet101_2" in message  # and every valid name after it


def test_what_lacking_a_precision_means(root):
    """The catalogue's peaks decide: no peak for the precision's matmul roof = no such arithmetic. TF32 is
    the exception that falls back (a math mode of fp32 storage: a V100 ignores the flag), and the CPU has
    no datasheet peaks at all (its roofs are measured), so it lacks nothing."""
    devices = load_devices(root / "config" / "devices.yaml")
    lacking = {(key, p) for key, d in devices.items() for p in ("fp32", "tf32", "fp16", "bf16")
               if lacking_precision(d, p)}
    assert lacking == {("p100-pcie-16gb", "bf16"), ("v100-sxm2-16gb", "bf16"), ("v100-pcie-16gb", "bf16"),
                       ("t4", "bf16")}
    assert lacking_precision(devices["v100-sxm2-16gb"], "tf32") is None
    assert lacking_precision(devices["cpu"], "bf16") is None


def test_dataset_with_images_passes(config, root, tmp_path):
    config["dataset"] = {"root": str(image_tree(tmp_path / "imgs", 3, 1)), "classes": 3, "images_per_class": 1}
    assert validate_config(config, root)["dataset"]["classes"] == 3


def test_a_subset_the_job_would_refuse_is_refused_by_validation(config, root, tmp_path):
    """Validation builds the subset job's own pick: three class folders with images and two empty ones passed
    validation for every seed (three hold images, classes 3) and the subset job then stopped on an empty folder
    its seed picked; images_per_class past a folder's images passed too."""
    tree = image_tree(tmp_path / "imgs", 3, 3)
    for name in ("d", "e"):
        (tree / name).mkdir()
    config["dataset"] = {"root": str(tree), "classes": 3, "images_per_class": 3, "seed": 0}
    with pytest.raises(RooflowError) as error:
        validate_config(copy.deepcopy(config), root)
    message = str(error.value)
    assert message.startswith("config: key 'dataset/root'") and "holds no image" in message and "\n" not in message
    config["dataset"] = {"root": str(image_tree(tmp_path / "few", 3, 3)), "classes": 3, "images_per_class": 5}
    with pytest.raises(RooflowError, match="holds 3 image\\(s\\), fewer than dataset.images_per_class=5"):
        validate_config(copy.deepcopy(config), root)


def test_model_batch_sizes_override_one_model(config, root):
    config["model_batch_sizes"] = {"alexnet": [32]}
    runs = experiment_matrix(validate_config(config, root))
    assert {r["batch"] for r in runs if r["model"] == "alexnet"} == {32}
    assert {r["batch"] for r in runs if r["model"] == "resnet18"} == set(config["batch_sizes"])
    config["model_batch_sizes"] = {"vgg19": [2]}
    with pytest.raises(RooflowError, match="'model_batch_sizes' names vgg19"):
        validate_config(config, root)


def test_kernel_calibrations_must_be_files_calibrate_kernels_wrote(config, root, tmp_path):
    foreign = tmp_path / "ceilings.json"  # a JSON file, but rooflow ceilings', not calibrate-kernels'
    foreign.write_text('{"peak_flops_per_second": {"fp32": 1e12}}')
    config["kernel_calibrations"] = [str(foreign)]
    with pytest.raises(RooflowError) as error:
        validate_config(copy.deepcopy(config), root)
    message = str(error.value)
    assert "\n" not in message and "'kernel_calibrations/0'" in message and "not a kernel calibrations file" in message
    config["kernel_calibrations"] = ["rooflow/data/calibration/kernels.json"]  # the shipped file is one
    assert validate_config(config, root)["kernel_calibrations"] == ["rooflow/data/calibration/kernels.json"]


def test_command_line_config_values_read_as_the_schema_types(config, root):
    """`snakemake --config batch_sizes=[1,8]`: Snakemake parses a list or mapping with YAML's BaseLoader, so every
    scalar in it arrives a string, and the schema refused it ("'1' (a string), not an integer") — no list of
    batch sizes could be given on the command line. Parsed here by Snakemake's own parse_config."""
    from snakemake.cli import parse_config

    overrides = parse_config(["batch_sizes=[1,8]", "model_batch_sizes={vgg11: [2]}", "models=[resnet18,vgg11]",
                              "dataset={root: null, classes: 3, images_per_class: 2}",
                              "profiling={timed_iterations: 5, noise_budget_seconds: 2.5, ncu: {enabled: false}}"])
    assert overrides["batch_sizes"] == ["1", "8"]  # what Snakemake hands over
    config.update(overrides)
    checked = validate_config(config, root)
    assert checked["batch_sizes"] == [1, 8] and checked["model_batch_sizes"] == {"vgg11": [2]}
    assert checked["dataset"]["root"] is None and checked["dataset"]["classes"] == 3
    assert checked["profiling"]["timed_iterations"] == 5 and checked["profiling"]["noise_budget_seconds"] == 2.5
    assert checked["profiling"]["ncu"]["enabled"] is False
    for entry, says in (("batch_sizes=[0]", "'batch_sizes/0' is 0, but must be at least 1"),
                        ("batch_sizes=[eight]", "'batch_sizes/0' is 'eight' (a string), not an integer")):
        config.update(parse_config([entry]))
        with pytest.raises(RooflowError, match=re.escape(says)):
            validate_config(copy.deepcopy(config), root)


def test_invalid_yaml_is_one_line(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("models: [resnet18\n")
    with pytest.raises(RooflowError, match="not valid YAML at line"):
        load_config(path, tmp_path)


# ---- through a real `snakemake -n`: the same sentence on stderr, no traceback, no job started ----

# a handful (each is a Snakemake start-up, a few seconds): the rest share validate_config with these
SNAKEMAKE_FAULTS = ["unknown top-level key", "zero batch size", "unknown model", "model name with shell syntax",
                    "bf16 on a V100", "dataset root without images", "kernel calibrations file that is missing"]


@pytest.mark.parametrize("name", SNAKEMAKE_FAULTS)
def test_snakemake_dry_run_prints_the_sentence_and_no_traceback(config, root, trees, tmp_path, snakemake_exe, name):
    change, words = next((c, w) for n, c, w in FAULTS if n == name)
    bad = apply(config, change, trees)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    with pytest.raises(RooflowError) as error:
        validate_config(copy.deepcopy(bad), root)
    result = subprocess.run([snakemake_exe, "-n", "--cores", "1", "--configfile", str(path)], cwd=root,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    assert f"rooflow: {error.value}" in result.stderr.splitlines(), result.stderr
    output = result.stdout + result.stderr
    assert "Traceback" not in output and 'File "' not in output and "Error in" not in output, output
    assert "Job stats" not in output and "rule " not in output  # no job was planned, none ran


def test_snakemake_dry_run_takes_a_list_of_batch_sizes_on_the_command_line(root, snakemake_exe):
    result = subprocess.run([snakemake_exe, "-n", "--cores", "1", "--config", "batch_sizes=[1,3]", "models=[resnet18]"],
                            cwd=root, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "results/estimate/resnet18/b3-fp32-training/totals.json" in result.stdout + result.stderr


# ---- config values never reach a shell ----

def test_schema_rejects_names_that_are_not_wildcard_safe():
    """The schema alone (before any other check) rejects a model or device name that could mean something
    to a shell or a path; its patterns are the workflow's own wildcard constraints."""
    schema = load_schema("config.schema.yaml")
    common = (ROOT / "rules" / "common.smk").read_text()
    model_wildcard = re.search(r'model="([^"]+)"', common).group(1)
    device_wildcard = re.search(r'device="([^"]+)"', common).group(1)
    # (?!\n): Python's `$` would also match before a final newline
    assert schema["properties"]["models"]["items"]["anyOf"][0]["pattern"] == f"^{model_wildcard}(?!\\n)$"
    assert schema["properties"]["models"]["items"]["anyOf"][1]["properties"]["name"]["pattern"] == f"^{model_wildcard}(?!\\n)$"
    assert schema["properties"]["devices"]["items"]["pattern"] == f"^{device_wildcard}(?!\\n)$"
    for hostile in ["resnet18; rm -rf ~", "resnet18 && reboot", "$(reboot)", "`id`", "a|b", "../x", "x/y",
                    "resnet18\n", "Resnet18", "resnet18 ", "_resnet", "resnet__18"]:
        for key in ("models", "devices"):
            config = {"models": ["resnet18"], "devices": ["cpu"], key: [hostile]}
            with pytest.raises(RooflowError, match=f"key '{key}/0'"):
                validate(config, schema, "config")


SUBPROCESS_CALLS = {"run", "Popen", "call", "check_call", "check_output", "getoutput", "getstatusoutput"}


def python_sources():
    for folder in ("rooflow", "scripts", "benchmarks"):
        yield from sorted((ROOT / folder).rglob("*.py"))


def test_no_shell_anywhere_in_the_code():
    """Audit: every process rooflow starts gets an argv list (never a string, never shell=True), and there
    is no os.system / os.popen / subprocess.getoutput. Names then arrive as single arguments."""
    starts = []
    for path in python_sources():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            assert not (owner == "os" and name in {"system", "popen", "execl", "execlp", "spawnl"}), where
            if owner == "subprocess" and name in SUBPROCESS_CALLS:
                assert name not in {"getoutput", "getstatusoutput"}, where
                starts.append(where)
                assert node.args and not isinstance(node.args[0], (ast.Constant, ast.JoinedStr)), where
                assert not any(k.arg == "shell" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
                               for k in node.keywords), where
    assert any(s.startswith("rooflow/measure/launch.py") for s in starts), starts  # the audit sees the one that exists


def test_rules_run_scripts_not_shell_commands():
    """Every rule runs a Python script (script:), so no config value is ever interpolated into a command
    line; a `shell:` or `run:` directive added later fails here and must be audited."""
    files = [ROOT / "Snakefile", *sorted((ROOT / "rules").glob("*.smk"))]
    directives = {}
    for path in files:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            match = re.match(r"\s+(shell|run|script|wrapper|notebook|cwl):", line)
            if match:
                directives[f"{path.name}:{number}"] = match.group(1)
    assert directives and set(directives.values()) == {"script"}, directives


def test_a_hostile_name_past_the_schema_stays_one_harmless_argument(tmp_path):
    """Were the schema bypassed, a model name with shell syntax would still reach the profiler driver as ONE
    argv element and do nothing: the driver rejects it as an unknown model, and the command in it never runs."""
    from rooflow.measure.launch import driver_argv
    from rooflow.workload.dataset import SubsetSpec, build_subset

    marker = tmp_path / "pwned"
    hostile = f"resnet18; touch {marker}"
    subset = tmp_path / "subset.pt"
    build_subset(SubsetSpec(None, 1, 1, 32, 28, 0), subset, tmp_path / "manifest.csv")
    argv = driver_argv(hostile, 1, "fp32", "inference", str(subset), 1, 1)
    assert argv[argv.index("--model") + 1] == hostile
    argv[argv.index("--device") + 1] = "cpu"  # the driver builds its model before it needs the GPU
    result = subprocess.run(argv, capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert result.returncode != 0 and "unknown model" in result.stderr, result.stderr[-2000:]
    assert not marker.exists()


def test_a_hostile_target_matches_no_rule(root, tmp_path, snakemake_exe):
    """The wildcard constraints refuse a path with shell syntax in the model slot: no job, no file."""
    marker = tmp_path / "pwned"
    target = f"results/estimate/resnet18;touch {marker}/b1-fp32-inference/totals.json"
    result = subprocess.run([snakemake_exe, "-n", "--cores", "1", target], cwd=root, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode != 0 and "MissingRuleException" in result.stdout + result.stderr
    assert not marker.exists()


def test_python_executable_is_the_venv(snakemake_exe):
    # the subprocess tests above run this checkout's snakemake and python
    assert Path(snakemake_exe).parent == Path(sys.executable).parent


@pytest.mark.parametrize("resources, refused", [
    ({"slurm_account": "'CHANGE-ME'", "runtime": "30 * attempt"}, "placeholder 'CHANGE-ME'"),
    ({"slurm_account": '"CHANGE-ME"'}, "placeholder 'CHANGE-ME'"),
    ({"slurm_account": "'physics'"}, None),
    ({"runtime": "30"}, None),  # no account: a local run's resources, or another profile's — nothing to check
])
def test_a_slurm_profiles_placeholder_account_is_refused(resources, refused):
    from rooflow.config import check_cluster_submission
    from rooflow.hardware.devices import default_catalogue_path, load_devices

    devices = load_devices(default_catalogue_path())
    if refused is None:
        check_cluster_submission(resources, devices, ["cpu", "a100-sxm4-40gb"], "config/devices.yaml")
        return
    with pytest.raises(RooflowError, match=refused) as error:
        check_cluster_submission(resources, devices, ["cpu"], "config/devices.yaml")
    assert "\n" not in str(error.value) and "sacctmgr show assoc" in str(error.value)


def test_a_measured_gpu_without_gres_is_refused_on_a_cluster_only():
    """A CPU needs no gres; a GPU without one would run its profiling jobs on a node without a GPU — refused only
    where the run is a SLURM one (an account in the default resources)."""
    import dataclasses

    from rooflow.config import check_cluster_submission
    from rooflow.hardware.devices import default_catalogue_path, load_devices

    devices = load_devices(default_catalogue_path())
    devices["a100-sxm4-40gb"] = dataclasses.replace(devices["a100-sxm4-40gb"], slurm={"partition": "gpu"})
    with pytest.raises(RooflowError, match="GPU device 'a100-sxm4-40gb' has no gres in its slurm: block"):
        check_cluster_submission({"slurm_account": "'physics'"}, devices, ["cpu", "a100-sxm4-40gb"], "devices.yaml")
    check_cluster_submission({}, devices, ["a100-sxm4-40gb"], "devices.yaml")


def test_a_devices_file_that_is_another_yaml_file_is_named_as_such(config, root):
    """devices_file: config/config.yaml (the experiment config, a slip) was refused as "the file is 'batch_sizes',
    which has characters or a shape this key does not allow": the schema's complaint about one of its keys."""
    config["devices_file"] = "config/config.yaml"
    with pytest.raises(RooflowError) as error:
        validate_config(config, root)
    assert str(error.value) == (
        f"{root / 'config' / 'config.yaml'} is not a devices catalogue: none of its entries (models, batch_sizes, "
        "model_batch_sizes, ...) is a device with a kind: point the devices file (devices_file: in the config, "
        "--devices-file) at config/devices.yaml or a copy of it")


def test_a_key_given_twice_is_refused_with_both_lines(tmp_path, root):
    """PyYAML keeps a repeated key's last value silently: `batch_sizes: [1]` then `batch_sizes: [2]` ran [2], and
    nothing said [1] was dropped. Both readers refuse it: rooflow's (config, devices files) and, through
    check_unique_keys, the workflow's configfiles."""
    from rooflow.config_io import check_unique_keys, read_yaml

    top, nested = tmp_path / "twice.yaml", tmp_path / "nested.yaml"
    top.write_text("batch_sizes: [1]\ndataset:\n  classes: 2\nbatch_sizes: [2]\n")
    nested.write_text("batch_sizes: [1]\ndataset:\n  classes: 2\n  classes: 3\n")
    for read in (read_yaml, check_unique_keys):
        for path, key, lines in ((top, "batch_sizes", (4, 1)), (nested, "classes", (4, 3))):
            with pytest.raises(RooflowError) as error:
                read(path)
            assert str(error.value) == (f"{path}: line {lines[0]}: key '{key}' is given twice in one mapping (first "
                                        f"at line {lines[1]}), and YAML would keep the last silently: remove one")
    # the same name in two mappings, a merge key, and YAML that does not parse (the reader's to judge) pass here
    fine = tmp_path / "fine.yaml"
    fine.write_text("a: &base {x: 1}\nb:\n  <<: *base\n  x: 2\nc: {x: 3}\n")
    assert read_yaml(fine) == {"a": {"x": 1}, "b": {"x": 2}, "c": {"x": 3}}
    check_unique_keys(fine)
    broken = tmp_path / "broken.yaml"
    broken.write_text("a: [1\n")
    check_unique_keys(broken)
    assert read_yaml(root / "config" / "config.yaml")["models"]


@pytest.mark.parametrize("text, line, word", [("profiling:\n  noise_budget_seconds: .nan\n", 2, ".nan"),
                                              ("h100:\n  kind: cuda\n  memory_gbytes: .inf\n", 3, ".inf"),
                                              ("x: [1.5, -.Inf]\n", 1, "-.Inf")])
def test_a_number_that_is_not_finite_is_refused_with_its_line(tmp_path, text, line, word):
    """JSON Schema's minimums let YAML's .nan (and .inf where no maximum) through: a NaN memory size in the
    catalogue made every run of that GPU 'does not fit' (never profiled), a NaN bandwidth printed NaN predictions and
    JSON no parser reads. Both readers refuse it (config, catalogue, the workflow's configfiles)."""
    from rooflow.config_io import check_unique_keys, read_yaml

    path = tmp_path / "numbers.yaml"
    path.write_text(text)
    for read in (read_yaml, check_unique_keys):
        with pytest.raises(RooflowError) as error:
            read(path)
        assert str(error.value) == f"{path}: line {line}: '{word}' is not a finite number: give the number itself"


def test_the_command_lines_bounds_are_the_schemas():
    """`rooflow subset --seed/--resize` and `rooflow time --cpu-memory-limit` refuse what the config's schema
    refuses for the same keys (rooflow.arguments holds the numbers)."""
    from rooflow import arguments
    from rooflow.config_io import load_schema

    schema = load_schema("config.schema.yaml")["properties"]
    dataset, profiling = schema["dataset"]["properties"], schema["profiling"]["properties"]
    for key, bounds in ((dataset["resize"], arguments.RESIZE_PIXELS), (dataset["seed"], arguments.SEED),
                        (profiling["cpu_memory_limit_bytes"], arguments.CPU_MEMORY_LIMIT_BYTES)):
        assert (key["minimum"], key["maximum"]) == bounds


def test_the_config_digest_names_a_config_whatever_its_key_order(config, root):
    """The results' configuration page is named by it (rule record_config): a re-ordered config is the same one,
    a changed value another, and the page shows the config, escaped."""
    from rooflow.config import config_digest
    from rooflow.report.tables import config_page

    validated = validate_config(copy.deepcopy(config), root)
    reordered = dict(reversed(list(copy.deepcopy(validated).items())))
    assert config_digest(reordered) == config_digest(validated)
    assert re.fullmatch(r"[0-9a-f]{12}", config_digest(validated))
    changed = copy.deepcopy(validated)
    changed["profiling"]["timed_iterations"] += 1
    assert config_digest(changed) != config_digest(validated)
    page = config_page({**validated, "models": ["<b>net</b>"]}, config_digest(validated))
    assert "timed_iterations: 10" in page and "&lt;b&gt;net&lt;/b&gt;" in page and config_digest(validated) in page
