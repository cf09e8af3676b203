"""The experiment config: schema validation with defaults, then the checks a schema cannot express
(model names against torchvision, device keys against the catalogue, import files that exist)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from rooflow.config_io import load_schema, read_yaml, validate
from rooflow.devices import estimate_only_error, load_devices
from rooflow.errors import RooflowError
from rooflow.models import check_model_names


def validate_config(config: dict[str, Any], workdir: str | Path = ".", source: str = "config") -> dict[str, Any]:
    """Validate in place (defaults filled in) and return the config; raise RooflowError with one sentence."""
    if not isinstance(config, dict) or not config:
        raise RooflowError(f"{source} is empty: start from config/config.yaml")
    validate(config, load_schema("config.schema.yaml"), source)
    check_model_names(config["models"], f"{source}: models")
    stray = sorted(set(config["model_batch_sizes"]) - set(config["models"]))
    if stray:
        raise RooflowError(
            f"{source}: model_batch_sizes names {', '.join(stray)}, not in models: add it to models or remove it")
    catalogue = Path(workdir) / config["devices_file"]
    devices = load_devices(catalogue)
    imported = {run["device"] for run in config["imports"]}
    for key in list(config["devices"]) + sorted(imported):
        if key not in devices:
            raise RooflowError(
                f"{source}: device '{key}' is not in {catalogue}: use one of {', '.join(sorted(devices))} "
                f"or add an entry there")
    for key in config["devices"]:  # imported profiles may name an estimate-only device: nothing runs there
        if devices[key].estimate_only:
            raise estimate_only_error(key, f"{source}: devices")
    root = config["dataset"]["root"]
    if root is not None and not (Path(workdir) / root).is_dir():
        raise RooflowError(
            f"{source}: dataset.root '{root}' is not a directory: point it at an ImageFolder tree "
            f"(e.g. ImageNet's val/ with one folder per class) or set it to null for the generated stand-in")
    for run in config["imports"]:
        check_model_names([run["model"]], f"{source}: imports")
        files = run["ncu"] + run["nsys"]
        if not files:
            raise RooflowError(f"{source}: import of {run['model']} on {run['device']} names no ncu or nsys files")
        for name in files:
            if not (Path(workdir) / name).is_file():
                raise RooflowError(f"{source}: imported profiler file '{name}' does not exist: fix the path")
    return config


def load_config(path: str | Path, workdir: str | Path = ".") -> dict[str, Any]:
    return validate_config(read_yaml(path) or {}, workdir, str(path))


def experiment_matrix(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Every model × batch × precision × mode (device-independent: what the estimator runs); a model's
    entry in model_batch_sizes replaces the common batch_sizes for that model."""
    runs = []
    for model in config["models"]:
        batches = config.get("model_batch_sizes", {}).get(model, config["batch_sizes"])
        runs += [
            {"model": model, "batch": b, "precision": p, "mode": mode}
            for b, p, mode in itertools.product(batches, config["precisions"], config["modes"])
        ]
    return runs
