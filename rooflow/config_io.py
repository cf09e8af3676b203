"""Reading YAML/JSON inputs and validating them against the package's JSON Schemas, with one-line errors."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from rooflow.errors import RooflowError


def load_schema(name: str) -> dict[str, Any]:
    """A schema shipped in rooflow/schemas/ (the workflow validates with the same files)."""
    text = resources.files("rooflow.schemas").joinpath(name).read_text()
    return yaml.safe_load(text)


def schema_path(name: str) -> Path:
    return Path(str(resources.files("rooflow.schemas").joinpath(name)))


def read_yaml(path: str | Path) -> Any:
    path = Path(path)
    if not path.is_file():
        raise RooflowError(f"{path} does not exist: give the path of an existing YAML file")
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise RooflowError(f"{path} is not valid YAML{where}: fix the syntax ({error.__class__.__name__})") from None


def validate(data: Any, schema: dict[str, Any], source: str) -> None:
    """Validate with defaults applied in place, raising one sentence that names the key and the fix."""
    validator_class = jsonschema.validators.validator_for(schema)
    validator = _with_defaults(validator_class)(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        error = errors[0]
        key = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        hint = error.schema.get("description", "") if isinstance(error.schema, dict) else ""
        hint = f" ({hint.strip()})" if hint else ""
        raise RooflowError(f"{source}: key '{key}' is invalid: {error.message}{hint}")


def _with_defaults(validator_class):
    """A validator that fills in each property's `default` as it validates (Snakemake's validate does too)."""
    set_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, subschema in properties.items():
                if isinstance(subschema, dict) and "default" in subschema:
                    instance.setdefault(name, json.loads(json.dumps(subschema["default"])))
        yield from set_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})
