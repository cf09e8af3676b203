"""What keeps the workflow's parse cheap (benchmarks/bench_workflow_dag.py measures it): config validation
reads torchvision's model names from a shipped list instead of importing torchvision and torch."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import pytest
from conftest import ROOT

from rooflow.config_io import load_schema
from rooflow.workload import models


def test_the_shipped_model_names_are_torchvisions_own():
    listed = load_schema("torchvision_models.yaml")
    if listed["torchvision"] != metadata.version("torchvision"):
        assert models._shipped_model_names() is None  # another torchvision: its own list is imported
        pytest.skip(f"the list is for torchvision {listed['torchvision']}, this is {metadata.version('torchvision')}")
    import torchvision

    assert tuple(listed["models"]) == tuple(sorted(torchvision.models.list_models(module=torchvision.models)))
    assert models._shipped_model_names() == tuple(listed["models"])


def test_validating_the_config_imports_neither_torch_nor_torchvision():
    code = ("import sys; from rooflow.config import load_config; load_config('config/config.yaml'); "
            "bad = sorted(m for m in ('torch', 'torchvision') if m in sys.modules); print(bad); "
            "sys.exit(1 if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]


def test_an_unknown_model_is_still_rejected_with_the_valid_names():
    with pytest.raises(models.RooflowError, match="unknown model.*resnet18"):
        models.check_model_names(["resnet1"])
