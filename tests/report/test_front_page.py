"""The report's front page (report/workflow.rst), rendered as Snakemake renders it (jinja2, trim_blocks and
lstrip_blocks, `snakemake.config`, then docutils)."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml
from docutils.core import publish_parts
from jinja2 import Environment

from rooflow.config import validate_config

ROOT = Path(__file__).resolve().parents[2]


def front_page(config: dict) -> str:
    class Snakemake:
        pass

    Snakemake.config = config
    text = Environment(trim_blocks=True, lstrip_blocks=True).from_string(
        (ROOT / "report" / "workflow.rst").read_text()).render(snakemake=Snakemake, categories={}, files=[])
    return publish_parts(text, writer="html")["html_body"]


def test_the_front_page_names_a_users_own_model_by_its_name_and_factory():
    """A config's own model (a mapping: factory, inputs, name) was joined as its dict's repr:
    "models resnet18, {'factory': 'examples.tiny_cnn.model:build', 'inputs': ...}"."""
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["models"] = ["resnet18", {"factory": "examples.tiny_cnn.model:build", "inputs": ["3x32x32"],
                                     "name": "tiny_cnn"}, {"factory": "examples.tiny_cnn.model:build",
                                                           "inputs": ["3x32x32"]}]
    config["imports"] = []
    page = front_page(validate_config(copy.deepcopy(config), ROOT))
    assert ("models resnet18, tiny_cnn (your own, examples.tiny_cnn.model:build), examples.tiny_cnn.model:build "
            "(your own); batch sizes 1, 4;") in " ".join(page.split())
    assert "{" not in page.split("models", 1)[1].split("batch sizes", 1)[0]
