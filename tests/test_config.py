import copy

import pytest
import yaml

from rooflow.config import experiment_matrix, load_config, validate_config
from rooflow.errors import RooflowError


@pytest.fixture()
def config(root):
    return yaml.safe_load((root / "config" / "config.yaml").read_text())


def test_default_config_is_valid_and_gets_defaults(config, root):
    validated = validate_config(copy.deepcopy(config), root)
    assert validated["profiling"]["ncu"]["executable"] == "ncu"
    runs = experiment_matrix(validated)
    assert len(runs) == len(config["models"]) * len(config["batch_sizes"]) * len(config["modes"])


def test_unknown_model_lists_the_valid_names(config, root):
    config["models"] = ["resnet18", "resnet19"]
    with pytest.raises(RooflowError) as error:
        validate_config(config, root)
    message = str(error.value)
    assert "resnet19" in message and "resnet50" in message and "\n" not in message


def test_misspelt_key_names_the_key(config, root):
    config["batch_size"] = [1]
    with pytest.raises(RooflowError, match="batch_size"):
        validate_config(config, root)


def test_wrong_type_names_the_key_path(config, root):
    config["profiling"]["timed_iterations"] = 0
    with pytest.raises(RooflowError, match="profiling/timed_iterations"):
        validate_config(config, root)


def test_unknown_device_and_missing_dataset(config, root):
    bad = copy.deepcopy(config)
    bad["devices"] = ["tpu-v9"]
    with pytest.raises(RooflowError, match="tpu-v9.*not in"):
        validate_config(bad, root)
    config["dataset"]["root"] = "/nonexistent/imagenet"
    with pytest.raises(RooflowError, match="ImageFolder"):
        validate_config(config, root)


def test_model_batch_sizes_override_one_model(config, root):
    config["model_batch_sizes"] = {"alexnet": [32]}
    runs = experiment_matrix(validate_config(config, root))
    assert {r["batch"] for r in runs if r["model"] == "alexnet"} == {32}
    assert {r["batch"] for r in runs if r["model"] == "resnet18"} == set(config["batch_sizes"])
    config["model_batch_sizes"] = {"vgg19": [2]}
    with pytest.raises(RooflowError, match="vgg19"):
        validate_config(config, root)


def test_invalid_yaml_is_one_line(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("models: [resnet18\n")
    with pytest.raises(RooflowError, match="not valid YAML at line"):
        load_config(path, tmp_path)
