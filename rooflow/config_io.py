"""Reading YAML/JSON inputs and validating them against the package's JSON Schemas, with one-line errors."""

from __future__ import annotations

import difflib
import json
import math
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from rooflow.errors import RooflowError

# How a JSON Schema type reads in an error message.
_TYPE_NAMES = {"integer": "an integer", "number": "a number", "string": "a string", "boolean": "true or false",
               "array": "a list", "object": "a mapping (key: value)", "null": "null"}


def load_schema(name: str) -> dict[str, Any]:
    """A schema shipped in rooflow/schemas/ (the workflow validates with the same files)."""
    text = resources.files("rooflow.schemas").joinpath(name).read_text()
    return yaml.safe_load(text)


def schema_path(name: str) -> Path:
    return Path(str(resources.files("rooflow.schemas").joinpath(name)))


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (PyYAML keeps the last silently: a config
    with `batch_sizes:` twice ran the second list, and nothing said the first was dropped)."""

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                continue  # a merge (<<: its keys may be overridden) or a complex key: not a repeated name
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise RooflowError(f"{Path(self.name)}: line {line}: key '{key}' is given twice in one mapping (first "
                                   f"at line {seen[key]}), and YAML would keep the last silently: remove one")
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


    def construct_yaml_float(self, node):
        value = super().construct_yaml_float(node)
        if not math.isfinite(value):  # a schema's minimum lets NaN (and infinity, past a maximum-less bound) through
            raise RooflowError(f"{Path(self.name)}: line {node.start_mark.line + 1}: '{node.value}' is not a finite "
                               f"number: give the number itself")
        return value


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:float", _UniqueKeyLoader.construct_yaml_float)


def check_unique_keys(path: str | Path) -> None:
    """Refuse a YAML file with a key given twice in one mapping (RooflowError, one sentence); its syntax is the
    reader's to judge (Snakemake's, for a config file)."""
    path = Path(path)
    try:
        with path.open() as stream:
            yaml.load(stream, Loader=_UniqueKeyLoader)  # noqa: S506 — a SafeLoader subclass
    except (OSError, yaml.YAMLError):
        return


def read_yaml(path: str | Path) -> Any:
    path = Path(path)
    if path.is_dir():
        raise RooflowError(f"{path} is a folder: give the path of a YAML file (in it, or elsewhere)")
    if not path.is_file():
        raise RooflowError(f"{path} does not exist: give the path of an existing YAML file")
    try:
        with path.open() as stream:
            return yaml.load(stream, Loader=_UniqueKeyLoader)  # noqa: S506 — a SafeLoader subclass
    except UnicodeDecodeError as error:
        raise RooflowError(f"{path} is not text ({error.reason} at byte {error.start}): a binary file was given "
                           "where a YAML file is expected; give the YAML file") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise RooflowError(f"{path} is not valid YAML{where}: fix the syntax ({error.__class__.__name__})") from None


def _schema_types(schema: dict[str, Any]) -> set[str]:
    """The JSON types a (sub)schema accepts, its anyOf/oneOf branches' included."""
    declared = schema.get("type", [])
    types = set(declared if isinstance(declared, list) else [declared])
    for branch in (*schema.get("anyOf", ()), *schema.get("oneOf", ())):
        types |= _schema_types(branch)
    return types


def coerce_command_line(value: Any, schema: dict[str, Any]) -> Any:
    """``value`` with the strings Snakemake's ``--config`` leaves in lists and mappings read as the integer,
    number, boolean or null its schema asks for at their key. Snakemake parses a list or mapping given on the
    command line with YAML's BaseLoader, which keeps every scalar a string (``--config batch_sizes=[1,8]``
    gives ['1', '8'], which the schema then refused as "a string, not an integer"); a lone value it parses itself.
    A string the schema accepts as a string stays one ('null' where null is allowed too: that is what it meant);
    one that does not read as the type asked for is left for validation to name. Mappings change in place."""
    if isinstance(value, dict):
        properties, extra = schema.get("properties") or {}, schema.get("additionalProperties")
        for key, item in value.items():
            sub = properties.get(key, extra if isinstance(extra, dict) else None)
            if sub:
                value[key] = coerce_command_line(item, sub)
        return value
    if isinstance(value, list):
        items = schema.get("items")
        return [coerce_command_line(item, items) for item in value] if isinstance(items, dict) else value
    if not isinstance(value, str):
        return value
    types, text = _schema_types(schema), value.strip()
    if "null" in types and text in ("null", "~"):
        return None
    if "string" in types:
        return value
    if "integer" in types and text.lstrip("+-").isdigit():
        return int(text)
    if "number" in types:
        try:
            return float(text)
        except ValueError:
            pass
    if "boolean" in types and text.lower() in ("true", "false"):
        return text.lower() == "true"
    return value


def close_matches(word: str, choices: list[str] | tuple[str, ...], n: int = 3) -> list[str]:
    """The `choices` closest to `word` (difflib), best first; case is ignored."""
    lowered = {c.lower(): c for c in choices}
    return [lowered[m] for m in difflib.get_close_matches(str(word).lower(), list(lowered), n=n, cutoff=0.6)]


def validate(data: Any, schema: dict[str, Any], source: str) -> None:
    """Validate with defaults applied in place, raising one sentence that names the key and the fix."""
    validator_class = jsonschema.validators.validator_for(schema)
    validator = _with_defaults(validator_class)(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        raise RooflowError(describe_error(errors[0], schema, source))


def describe_error(error: jsonschema.ValidationError, schema: dict[str, Any], source: str) -> str:
    """One sentence for a schema violation: `<source>: key '<path>' <what is wrong>: <how to fix it>`. The
    fix is the nearest `description` in the schema along the failing key's path."""
    if error.validator in ("anyOf", "oneOf") and error.context:
        # one of several shapes (a model name or a custom model): describe what is wrong with the shape of
        # the value's own type, not that it matches none
        fitting = [e for e in error.context if not (e.validator == "type" and not e.relative_path)]
        if fitting:
            first = sorted(fitting, key=lambda e: [str(p) for p in e.absolute_path])[0]
            return describe_error(first, schema, source)
    path = [str(p) for p in error.absolute_path]
    key = "/".join(path)
    kind, expected, value = error.validator, error.validator_value, error.instance
    hint = _nearest_description(schema, list(error.absolute_schema_path))
    if kind == "additionalProperties" and isinstance(value, dict):
        allowed = sorted((error.schema.get("properties") or {}).keys())
        unknown = sorted(k for k in value if k not in allowed)
        name = unknown[0] if unknown else "?"
        full = "/".join([*path, name])
        guess = close_matches(name, allowed, n=1)
        did_you_mean = f" (did you mean '{'/'.join([*path, guess[0]])}'?)" if guess else ""
        where = f"under '{key}'" if key else "at the top level"
        return (f"{source}: key '{full}' is not a known key{did_you_mean}: remove it or use one of the keys "
                f"allowed {where}: {', '.join(allowed)}")
    if "propertyNames" in error.absolute_schema_path:  # the key's name itself, not a value under it
        subject = f"key name {_show(value)}" + (f" under '{key}'" if key else "")
        return " ".join(f"{source}: {subject} is not allowed: {hint}".split())
    subject = f"key '{key}'" if key else "the file"
    shown = _show(value)
    if kind == "type" and value is None and not key:  # an empty file: YAML reads it as null
        problem = "is empty"
    elif kind == "type":
        types = expected if isinstance(expected, list) else [expected]
        wanted = " or ".join(_TYPE_NAMES.get(t, t) for t in types)
        problem = f"is {shown} ({_type_of(value)}), not {wanted}"
    elif kind in ("minimum", "exclusiveMinimum"):
        bound = "at least" if kind == "minimum" else "more than"
        problem = f"is {shown}, but must be {bound} {expected}"
    elif kind in ("maximum", "exclusiveMaximum"):
        bound = "at most" if kind == "maximum" else "less than"
        problem = f"is {shown}, but must be {bound} {expected}"
    elif kind == "enum":
        guess = close_matches(str(value), [str(e) for e in expected], n=1)
        if str(value).lower() in ("gpu", "nvidia") and "cuda" in expected:  # not 'tpu', the closest spelling
            guess = ["cuda"]
        did_you_mean = f" (did you mean '{guess[0]}'?)" if guess else ""
        problem = f"is {shown}{did_you_mean}, not one of {', '.join(str(e) for e in expected)}"
    elif kind == "const":
        problem = f"is {shown}, not {_show(expected)}"
    elif kind == "pattern":
        problem = f"is {shown}, which has characters or a shape this key does not allow"
    elif kind == "minItems":
        problem = "is an empty list" if not value else f"has {len(value)} item(s), fewer than {expected}"
    elif kind == "uniqueItems":
        problem = f"lists a value more than once ({shown})"
    elif kind == "required":
        missing = [r for r in expected if isinstance(value, dict) and r not in value]
        problem = f"lacks '{missing[0] if missing else expected}'"
    elif kind == "minProperties":
        problem = "is empty"
    else:
        problem = f"is invalid ({error.message})"
    fix = hint or f"see {schema.get('$comment', 'config/README.md')}"
    if kind == "minItems":  # the description says what the list holds, not that it needs more
        fix = f"list at least {expected} ({fix[:1].lower() + fix[1:]})"
    return " ".join(f"{source}: {subject} {problem}: {fix}".split())


def _nearest_description(schema: dict[str, Any], schema_path: list[Any]) -> str:
    """The last `description` met walking the schema along `schema_path` (the root's own is skipped)."""
    found, node = "", schema
    for step in schema_path:
        if isinstance(node, dict):
            node = node.get(step)
        elif isinstance(node, list) and isinstance(step, int) and step < len(node):
            node = node[step]
        else:
            break
        if isinstance(node, dict) and isinstance(node.get("description"), str):
            found = node["description"]
    return found.strip().rstrip(".")


def _show(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    return {int: "an integer", float: "a number", str: "a string", list: "a list", dict: "a mapping"}.get(
        type(value), type(value).__name__)


def _with_defaults(validator_class):
    """A validator that fills in each property's `default` as it validates (Snakemake's validate does too)."""
    set_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, subschema in properties.items():
                if isinstance(subschema, dict) and "default" in subschema:
                    instance.setdefault(name, json.loads(json.dumps(subschema["default"])))
        yield from set_properties(validator, properties, instance, schema)

    # A YAML `2.0` is a float: JSON Schema would accept it as an integer, and a batch "2.0" would then
    # name its output folder b2.0; only true integers (not booleans) pass.
    type_checker = validator_class.TYPE_CHECKER.redefine(
        "integer", lambda checker, value: isinstance(value, int) and not isinstance(value, bool))
    return jsonschema.validators.extend(validator_class, {"properties": set_defaults}, type_checker=type_checker)
