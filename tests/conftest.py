"""Shared fixtures: paths into the checkout, the venv's executables."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def snakemake_exe() -> str:
    exe = BIN / "snakemake"
    return str(exe) if exe.exists() else shutil.which("snakemake")


def copy_workflow(target: Path) -> Path:
    """A copy of the workflow (no results) for a real run in a temp directory."""
    target.mkdir(parents=True, exist_ok=True)
    for name in ("Snakefile", "rules", "scripts", "config", "report", "profiles", "envs", "rooflow"):
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, target / name)
    shutil.copytree(ROOT / "tests" / "configs", target / "tests" / "configs")
    fixture = Path("tests/data/real/anoushka21-cloudml/proj1/a100/vgg11")
    shutil.copytree(ROOT / fixture, target / fixture)
    return target
