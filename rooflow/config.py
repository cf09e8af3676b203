"""The experiment config: schema validation with defaults, then the checks a schema cannot express
(model names against torchvision, custom models' factories, device keys and their precisions against the catalogue, a dataset
folder that holds images, import files that exist, kernel calibrations files that load). Every failure is one sentence naming the key and
the fix, raised before any job starts."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

from rooflow.config_io import coerce_command_line, load_schema, read_yaml, validate
from rooflow.errors import RooflowError
from rooflow.hardware.devices import MATMUL_ROOF, Device, device_hint, estimate_only_error, load_devices
from rooflow.profilers._text import listed_kind_problem
from rooflow.profilers.commands import own_flags_given
from rooflow.workload.models import (
    NO_TRAINING_AT_BATCH_1,
    closest_models_hint,
    named_models,
    quantized_problem,
    task,
)
from rooflow.workload.spec import ModelSpec, check_importable, spec_from_entry

# Where the catalogue has no peak for a precision's matmul roof, the GPU has no arithmetic of that format,
# except TF32: a math mode of fp32 storage that GPUs without TF32 tensor cores (V100, T4, P100) ignore, so
# a tf32 run there IS an fp32 run (Device.compute_peak falls back to fp32; config/devices.yaml says so).
FALLBACK_PRECISIONS = {"tf32": "fp32"}


def validate_config(config: dict[str, Any], workdir: str | Path = ".", source: str = "config") -> dict[str, Any]:
    """Validate in place (defaults filled in) and return the config; raise RooflowError with one sentence."""
    if not isinstance(config, dict) or not config:
        raise RooflowError(f"{source} is empty: start from config/config.yaml")
    schema = load_schema("config.schema.yaml")
    coerce_command_line(config, schema)  # `snakemake --config batch_sizes=[1,8]`: YAML's BaseLoader gives strings
    if isinstance(config.get("models"), list):
        # a mistyped name (resnet5O, Resnet50) before the schema, whose name pattern would hide the closest name;
        # one with other characters (a path, a shell command) is the pattern's to refuse
        check_models([m for m in config["models"] if isinstance(m, str) and re.fullmatch(r"\w+", m)], "models", source)
    validate(config, schema, source)
    specs = model_specs(config, source)
    stray = sorted(set(config["model_batch_sizes"]) - set(specs))
    if stray:
        raise RooflowError(
            f"{source}: key 'model_batch_sizes' names {', '.join(stray)}, not in models: add it to models or "
            f"remove it")
    check_batch_one_training(config, specs, source)
    catalogue = config["devices_file"]
    devices = load_devices(Path(workdir) / catalogue)
    for i, key in enumerate(config["devices"]):
        check_device(key, devices, f"devices/{i}", catalogue, source)
        if devices[key].estimate_only:  # imported profiles may name one: nothing runs there
            raise estimate_only_error(key, f"{source}: devices")
        for precision in config["precisions"]:
            check_precision(devices[key], precision, "precisions", source)
    check_dataset(config["dataset"], Path(workdir), source)
    for tool in ("ncu", "nsys"):
        if given := own_flags_given(tool, config["profiling"][tool]["extra_args"]):
            raise RooflowError(f"{source}: key 'profiling/{tool}/extra_args' gives {', '.join(given)}, which rooflow's "
                               f"{tool} command sets itself (its output is what the aggregate job reads): remove "
                               f"{'them' if len(given) > 1 else 'it'}")
    for i, name in enumerate(config["kernel_calibrations"]):
        check_kernel_calibrations(name, Path(workdir), f"kernel_calibrations/{i}", source)
    first_of_run: dict[tuple, int] = {}
    for i, run in enumerate(config["imports"]):
        where = f"imports/{i}"
        if run["model"] not in specs:
            check_models([run["model"]], f"{where}/model", source)
        check_device(run["device"], devices, f"{where}/device", catalogue, source)
        if not devices[run["device"]].is_cuda:  # its profile would sit on a CPU's (or TPU's) roofline
            raise RooflowError(
                f"{source}: key '{where}/device' is {run['device']}, a {devices[run['device']].kind} device, but "
                f"ncu and nsys profile NVIDIA GPUs: name the catalogue GPU the profile was taken on")
        label = f"{run['model']} b{run['batch']} {run['precision']} {run['mode']} on {run['device']}"
        earlier = first_of_run.setdefault((run["device"], run["model"], str(run["batch"]), run["precision"],
                                           run["mode"]), i)
        if earlier != i:  # the workflow takes the first entry of a run: this one's files were never read
            raise RooflowError(
                f"{source}: key '{where}' ({label}) is the same run as imports/{earlier}: give each run once (all "
                f"of its files in one entry's ncu: and nsys:)")
        check_precision(devices[run["device"]], run["precision"], f"{where}/precision", source)
        files = run["ncu"] + run["nsys"]
        if not files:
            raise RooflowError(
                f"{source}: key '{where}' ({run['model']} on {run['device']}) names no ncu or nsys files: list "
                f"the profiler outputs under ncu: and/or nsys:, or remove the import")
        for kind in ("ncu", "nsys"):
            for name in run[kind]:
                if not (Path(workdir) / name).is_file():
                    raise RooflowError(f"{source}: imported profiler file '{name}' ({where}) does not exist: fix "
                                       f"the path")
                # the run's aggregate job would refuse it once the workflow runs, its summary and report with it
                if why := listed_kind_problem(Path(workdir) / name, kind):
                    raise RooflowError(f"{source}: imported profiler file '{name}' ({where}/{kind}) {why}")
    return config


def check_models(names: list[str], key: str, source: str = "config") -> None:
    """Every name a torchvision model; else the closest names (difflib) and the full list."""
    valid = named_models()
    for name in names:
        if problem := quantized_problem(name):
            raise RooflowError(f"{source}: key '{key}': {problem}")
        if name not in valid:
            offered = ", ".join(n for n in valid if task(n) != "detection")  # refused below
            raise RooflowError(
                f"{source}: key '{key}' names unknown model '{name}'{closest_models_hint([name])}: use a "
                f"torchvision model name, one of {offered}, or your own model as "
                f"{{name, factory: package.module:callable, inputs: [3x224x224]}} (config/README.md)")
        if task(name) == "detection":
            # every run's estimate job counts it on the meta device, where its box filtering cannot run (the
            # output's shape depends on the scores): the whole workflow would stop there, with no summary
            raise RooflowError(
                f"{source}: key '{key}' names {name}, a detection model, which the workflow cannot estimate (its "
                f"box filtering's output shapes depend on the data, which the meta device that counts FLOPs does "
                f"not have): remove it from the config and time it alone with `rooflow time --model {name} "
                f"--mode inference`")


def check_batch_one_training(config: dict[str, Any], specs: dict[str, ModelSpec], source: str = "config") -> None:
    """A torchvision model PyTorch cannot train at batch 1 (NO_TRAINING_AT_BATCH_1) given batch 1 and mode
    training: refused before any job runs (its estimate job would stop the workflow with it)."""
    if "training" not in config["modes"]:
        return
    for name, spec in specs.items():
        own = name in config["model_batch_sizes"]
        batches = config["model_batch_sizes"][name] if own else config["batch_sizes"]
        if not spec.custom and name in NO_TRAINING_AT_BATCH_1 and 1 in batches:
            key = f"model_batch_sizes/{name}" if own else "batch_sizes"
            raise RooflowError(
                f"{source}: key '{key}' gives {name} batch 1, and modes include training, which PyTorch cannot run "
                f"for it at batch 1 (a BatchNorm of its meets a 1×1 map and needs more than one value per channel "
                f"in training): give it batches from 2 up in model_batch_sizes/{name}, or remove training")


def model_specs(config: dict[str, Any], source: str = "config") -> dict[str, ModelSpec]:
    """The config's models by run name (torchvision names, and custom models checked: their factory's and
    loss's modules can be found, their shapes parse, their names are wildcard-safe and distinct). The
    factories themselves are imported by the jobs that build the models (importing them here would import
    torch at every workflow parse): a factory that fails there is one sentence in that job's log."""
    specs: dict[str, ModelSpec] = {}
    for i, entry in enumerate(config["models"]):
        where = f"{source}: key 'models/{i}'"
        if isinstance(entry, str):
            check_models([entry], "models", source)
        spec = spec_from_entry(entry, where)
        if spec.custom:
            for path in (spec.factory, spec.loss):
                if path:
                    check_importable(path, where)
        if spec.name in specs:
            raise RooflowError(f"{where} is named '{spec.name}', as another model is: give each model its own "
                               f"name")
        specs[spec.name] = spec
    return specs


def config_digest(config: dict[str, Any]) -> str:
    """12 hex digits naming a validated config (its keys sorted): the results it made carry it in the name of
    their configuration page (the workflow's record_config rule)."""
    import hashlib
    import json

    text = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def model_names(config: dict[str, Any]) -> list[str]:
    """The run names of the config's models, in order."""
    return [entry if isinstance(entry, str) else spec_from_entry(entry).name for entry in config["models"]]


def check_device(key: str, devices: dict[str, Device], where: str, catalogue: str, source: str = "config") -> None:
    if key not in devices:
        raise RooflowError(
            f"{source}: key '{where}' names device '{key}', which is not in {catalogue}{device_hint(key, devices)}: use one of "
            f"{', '.join(sorted(devices))} (`rooflow devices` lists them) or add an entry there (config/DEVICES.md)")


def lacking_precision(device: Device, precision: str) -> str | None:
    """Why `device` cannot run `precision`, or None. A cuda device lacks a precision when its catalogue
    entry has no datasheet peak for that precision's matmul roof (bf16 on a V100 or T4: no bf16 arithmetic)
    and no fallback applies (FALLBACK_PRECISIONS: tf32 runs as fp32). A cpu device has no datasheet peaks
    (its roofs are measured) and torch runs every precision on it, so it lacks none."""
    if not device.is_cuda:
        return None
    roof = MATMUL_ROOF[precision]
    peaks = device.peak_flops_per_second
    if peaks.get(roof) or FALLBACK_PRECISIONS.get(precision) in peaks:
        return None
    has = ", ".join(k for k in ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8") if peaks.get(k))
    return (f"the catalogue lists no {precision} peak for {device.name} ({device.architecture}), i.e. it has no "
            f"{precision} arithmetic (its peaks: {has})")


def check_precision(device: Device, precision: str, key: str, source: str = "config") -> None:
    reason = lacking_precision(device, precision)
    if reason:
        raise RooflowError(
            f"{source}: key '{key}' asks for {precision} on device '{device.key}', but {reason}: remove "
            f"{precision} from {key.split('/')[0]} or measure that device in a config of its own without it")


def check_kernel_calibrations(name: str, workdir: Path, key: str, source: str = "config") -> None:
    """``name`` (relative to ``workdir``) is a ``rooflow calibrate-kernels -o`` file that loads
    (rooflow.estimate.kernel_calibration.read_calibrations), else one sentence naming the key, the file as the
    config writes it, and how to make one."""
    from rooflow.estimate.kernel_calibration import read_calibrations

    path = workdir / name
    try:
        read_calibrations(path)
    except RooflowError as error:
        raise RooflowError(f"{source}: key '{key}': {str(error).replace(str(path), name)}, or remove it") from None


def check_dataset(dataset: dict[str, Any], workdir: Path, source: str = "config") -> None:
    """dataset.root, when set: a folder of class folders, at least dataset.classes of which hold an image.
    Cheap on ImageNet-sized trees: it stops at the first image of each class folder."""
    from rooflow.workload.dataset import IMAGE_EXTENSIONS, MAX_SUBSET_BYTES, subset_bytes

    if dataset["resize"] < dataset["image_size"]:
        raise RooflowError(f"{source}: key 'dataset/resize' is {dataset['resize']}, below dataset.image_size "
                           f"{dataset['image_size']}: the center crop would pad the images with black borders; "
                           f"resize to image_size or more (the evaluation transform: 256 for a 224 crop)")
    images = dataset["classes"] * dataset["images_per_class"]
    nbytes = subset_bytes(dataset["classes"], dataset["images_per_class"], dataset["image_size"])
    if nbytes > MAX_SUBSET_BYTES:  # every timing job loads the subset whole
        raise RooflowError(
            f"{source}: key 'dataset/classes' ({dataset['classes']}) × dataset.images_per_class "
            f"({dataset['images_per_class']}) asks for {images:,} images, "
            f"{nbytes / 1e9:.1f} GB at {dataset['image_size']}×{dataset['image_size']}, which every timing job "
            f"would hold in memory (at most {MAX_SUBSET_BYTES / 2**30:.0f} GiB): the subset only feeds the timed "
            f"batches, which cycle through it, so lower them (the default is 4 × 8)")
    root = dataset["root"]
    if root is None:
        return
    if not str(root).strip():
        raise RooflowError(
            f"{source}: key 'dataset/root' is an empty string, which would read the workflow's own folder as the "
            f"image tree: write null for the generated stand-in, or the path of an ImageFolder tree")
    path = workdir / root
    generated = "or set dataset.root to null for the generated stand-in"
    if not path.is_dir():
        raise RooflowError(
            f"{source}: key 'dataset/root' is '{root}', which is not a directory: point it at an ImageFolder tree "
            f"(e.g. ImageNet's val/ with one folder per class) {generated}")
    classes = dataset["classes"]
    with_images = 0
    class_dirs = sorted(p for p in path.iterdir() if p.is_dir())
    for class_dir in class_dirs:
        if any(f.suffix.lower() in IMAGE_EXTENSIONS for f in class_dir.rglob("*")):
            with_images += 1
            if with_images >= classes:
                _check_picks(dataset, path, root, source)
                return
    kinds = "/".join(sorted(e.lstrip(".") for e in IMAGE_EXTENSIONS))
    if with_images == 0:
        loose = any(f.suffix.lower() in IMAGE_EXTENSIONS for f in path.iterdir() if f.is_file())
        what = ("holds images but no class folders" if loose
                else f"holds no images ({kinds}) in {len(class_dirs)} class folder(s)")
        raise RooflowError(
            f"{source}: key 'dataset/root' is '{root}', which {what}: point it at an ImageFolder tree "
            f"(root/<class>/<image>, e.g. ImageNet's val/) {generated}")
    raise RooflowError(
        f"{source}: key 'dataset/root' is '{root}', where only {with_images} class folder(s) hold images, fewer "
        f"than dataset.classes={classes}: lower dataset.classes or point dataset.root at a larger tree")


def _check_picks(dataset: dict[str, Any], path: Path, root: str, source: str) -> None:
    """The subset job's own pick (its seed's class folders, their images): what it would refuse (an empty class
    folder among them, fewer images than dataset.images_per_class) is refused before any job runs. It lists the
    picked class folders only."""
    from rooflow.workload.dataset import SubsetSpec, _pick_files

    try:
        _pick_files(SubsetSpec(**{**dataset, "root": str(path)}))
    except RooflowError as error:
        raise RooflowError(f"{source}: key 'dataset/root' is '{root}', whose subset (dataset.seed "
                           f"{dataset['seed']}) cannot be built: {error}") from None


def load_config(path: str | Path, workdir: str | Path = ".") -> dict[str, Any]:
    return validate_config(read_yaml(path) or {}, workdir, str(path))


def experiment_matrix(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Every model × batch × precision × mode × variant (device-independent; the estimator counts each run
    once, whatever its variant); a model's entry in model_batch_sizes replaces the common batch_sizes for
    that model."""
    runs = []
    for model in model_names(config):
        batches = config.get("model_batch_sizes", {}).get(model, config["batch_sizes"])
        runs += [
            {"model": model, "batch": b, "precision": p, "mode": mode, "variant": variant}
            for b, p, mode, variant in itertools.product(batches, config["precisions"], config["modes"],
                                                         config.get("variants", ["eager"]))
        ]
    return runs


# The account profiles/slurm/config.yaml ships with, which every user replaces.
ACCOUNT_PLACEHOLDER = "CHANGE-ME"


def check_cluster_submission(default_resources: dict[str, Any], devices: dict[str, Device], measured: list[str],
                             catalogue: str) -> None:
    """Before a SLURM run submits anything: the profile's account still the shipped placeholder (sbatch refuses
    every job, each its own error, where accounts are enforced; where they are not, the jobs are charged to an
    account named CHANGE-ME), and a measured GPU whose ``slurm:`` block asks for no GPU (its profiling jobs would
    wait in the queue, then land on a node without one). ``default_resources``: name -> the raw value of
    Snakemake's --default-resources (a profile's, as written: "'CHANGE-ME'"). A run with no slurm_account there
    is not a SLURM run of this profile: nothing is checked. Raises RooflowError, one sentence."""
    if "slurm_account" not in default_resources:
        return
    account = str(default_resources["slurm_account"]).strip().strip("'\"")
    if account == ACCOUNT_PLACEHOLDER:
        raise RooflowError(
            f"the SLURM profile's slurm_account is still the placeholder '{ACCOUNT_PLACEHOLDER}': set it to your "
            "account (sacctmgr show assoc user=$USER format=account) under default-resources in the profile's "
            "config.yaml (profiles/slurm/config.yaml, or your copy in ~/.config/snakemake/slurm/)")
    for key in measured:
        device = devices[key]
        if device.is_cuda and not (device.slurm or {}).get("gres"):
            raise RooflowError(
                f"{catalogue}: GPU device '{key}' has no gres in its slurm: block, so its profiling jobs would run "
                f"on a node without a GPU: add e.g. slurm: {{partition: gpu, gres: \"gpu:<type>:1\"}} with your "
                f"site's partition and gres type (scontrol show node | grep Gres)")
