"""What keeps the workflow's parse cheap (benchmarks/bench_workflow_dag.py measures it): config validation
reads torchvision's model names from a shipped list instead of importing torchvision and torch."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import pytest
import yaml
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


@pytest.mark.parametrize("kernel_calibrations", [[], ["rooflow/data/calibration/kernels.json"]])
def test_validating_the_config_imports_neither_torch_nor_torchvision(kernel_calibrations, tmp_path):
    """Also with a kernel calibrations file, whose check loads it (it once imported torch through
    rooflow.estimate's package, 4-5 s on every Snakefile parse, in every job)."""
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["kernel_calibrations"] = kernel_calibrations
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    code = (f"import sys; from rooflow.config import load_config; load_config({str(tmp_path / 'config.yaml')!r}); "
            "bad = sorted(m for m in ('torch', 'torchvision') if m in sys.modules); print(bad); "
            "sys.exit(1 if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]


def test_an_unknown_model_is_still_rejected_with_the_valid_names():
    with pytest.raises(models.RooflowError, match="unknown model.*resnet18"):
        models.check_model_names(["resnet1"])


def test_a_config_file_with_a_key_given_twice_stops_the_workflow_in_one_sentence(tmp_path, snakemake_exe):
    """Snakemake reads --configfile with PyYAML, which keeps a repeated key's last value silently."""
    from conftest import copy_workflow

    workdir = copy_workflow(tmp_path / "run")
    (workdir / "twice.yaml").write_text("batch_sizes: [1]\nimports: []\nbatch_sizes: [2]\n")
    result = subprocess.run([snakemake_exe, "-n", "--cores", "1", "--configfile", "twice.yaml"], cwd=workdir,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"rooflow: {workdir / 'twice.yaml'}: line 3: key 'batch_sizes' is given twice in one mapping (first at line 1), and YAML "
        "would keep the last silently: remove one")
