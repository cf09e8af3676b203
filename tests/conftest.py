"""Shared fixtures: paths into the checkout, the venv's executables, the NVTX/CUDA-profiler stand-in; and how
the suite runs on two workers (`make test`: pytest-xdist, one file per work unit, the real workflow and
cluster runs on one worker while the other takes the rest)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

# Fixtures that run the real workflow or start the real cluster, once per process: the modules that use one
# are a single xdist work unit, so that neither is paid for (or started) twice on two workers.
REAL_RUN_FIXTURES = {"tiny_run", "tiny_report", "slurm_cluster"}
REAL_RUN_MODULES = ("tests/workflow/test_examples_workflow.py", "tests/workflow/test_report_browser.py",
                    "tests/workflow/test_slurm.py", "tests/workflow/test_workflow.py")
# A file the workers append their report lines to, printed at the end by the controller (a worker's own
# output is not shown).
REPORT_FILE_ENV = "ROOFLOW_TEST_REPORT_FILE"
REPORT_FILE_KEY = pytest.StashKey[str]()


def pytest_configure(config):
    if hasattr(config, "workerinput") or REPORT_FILE_ENV in os.environ:
        return  # a worker: the controller's file, inherited through the environment
    handle, path = tempfile.mkstemp(prefix="rooflow-test-report-", suffix=".txt")
    os.close(handle)
    os.environ[REPORT_FILE_ENV] = config.stash[REPORT_FILE_KEY] = path


def report_line(message: str) -> None:
    """One line in the report at the end of the run (timings of the real runs), from any worker."""
    path = os.environ.get(REPORT_FILE_ENV)
    if not path:
        print(message)
        return
    with open(path, "a") as handle:  # one short append per line: whole lines even from two workers
        handle.write(message.replace("\n", " ") + "\n")


def pytest_terminal_summary(terminalreporter, config):
    path = config.stash.get(REPORT_FILE_KEY, None)
    if path is None:
        return
    lines = Path(path).read_text().splitlines() if Path(path).exists() else []
    Path(path).unlink(missing_ok=True)
    if lines:
        terminalreporter.write_sep("-", "rooflow: the real runs")
        for line in lines:
            terminalreporter.write_line(line)


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config, items):
    """The modules using the real runs first, then the other modules with slow tests, then the rest: the
    longest work starts early, so two workers end close together (the same order in a serial run)."""
    real = {module_of(item.nodeid) for item in items if REAL_RUN_FIXTURES & set(item.fixturenames)}
    if real - set(REAL_RUN_MODULES):
        raise pytest.UsageError(f"tests/conftest.py: add {sorted(real - set(REAL_RUN_MODULES))} to "
                                f"REAL_RUN_MODULES (they use one of {sorted(REAL_RUN_FIXTURES)})")
    slow = {module_of(item.nodeid) for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: 0 if module_of(item.nodeid) in REAL_RUN_MODULES
               else 1 if module_of(item.nodeid) in slow else 2)


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile`, with the REAL_RUN_MODULES one work unit (xdist's own xdist_group marks do not
    reach its scheduler under pytest 9, whose node ids xdist cannot suffix)."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = module_of(nodeid)
            return "real-runs" if module in REAL_RUN_MODULES else module

    return ByModule(config, log)


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture
def added_calibrations():
    """Undo rooflow.estimate.kernel_calibration.add_calibrations after a test (it is per process)."""
    from rooflow.estimate import kernel_calibration

    yield
    kernel_calibration._ADDED.clear()
    kernel_calibration._shipped.cache_clear()


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


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory, snakemake_exe) -> Path:
    """The workflow run once, for real, on tests/configs/tiny.yaml in a temp copy: shared by the workflow,
    report and cluster tests so the suite pays for one local run."""
    import subprocess
    import time

    workdir = copy_workflow(tmp_path_factory.mktemp("tiny"))
    started = time.monotonic()
    result = subprocess.run([snakemake_exe, "--cores", "2", "--configfile", "tests/configs/tiny.yaml"],
                            cwd=workdir, capture_output=True, text=True, timeout=1800)
    (workdir / "snakemake.log").write_text(result.stdout + result.stderr)
    assert result.returncode == 0, f"tiny workflow run failed:\n{result.stderr[-4000:]}"
    report_line(f"tiny workflow run: {time.monotonic() - started:.0f} s in {workdir}")
    return workdir


def copy_run(run: Path, target: Path) -> Path:
    """A copy of a finished workflow run (its outputs, logs and .snakemake metadata, modification times kept),
    without the reports written at its top level: a later run there redoes only what its config changes."""
    shutil.copytree(run, target, symlinks=True,
                    ignore=lambda folder, names: [n for n in names if Path(folder) == run and n.endswith(".html")])
    return target


@pytest.fixture(scope="session")
def tiny_report(tiny_run, snakemake_exe) -> Path:
    """The tiny run's `snakemake --report report.html`: made once, read by the workflow test and opened in the
    browser test."""
    import subprocess

    result = subprocess.run([snakemake_exe, "--cores", "2", "--configfile", "tests/configs/tiny.yaml", "--report",
                             "report.html"], cwd=tiny_run, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, f"snakemake --report failed:\n{result.stderr[-4000:]}"
    return tiny_run / "report.html"


class Recorder:
    """Stands in for NVTX and the CUDA profiler API: the open range stack, and whether profiling is on."""

    def __init__(self):
        self.stack: list[str] = []
        self.profiling = False
        self.starts = 0

    def push(self, message):
        self.stack.append(message)

    def pop(self):
        self.stack.pop()

    def start(self):
        assert not self.profiling, "cudaProfilerStart while profiling: ranges must not nest"
        self.profiling, self.starts = True, self.starts + 1

    def stop(self):
        assert self.profiling
        self.profiling = False


@pytest.fixture
def recorder(monkeypatch):
    """NVTX ranges and cudaProfilerStart/Stop recorded instead of sent to a GPU (the profiling driver's tests)."""
    import torch

    recorder = Recorder()
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", recorder.push)
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", recorder.pop)
    monkeypatch.setattr(torch.cuda.profiler, "start", recorder.start)
    monkeypatch.setattr(torch.cuda.profiler, "stop", recorder.stop)
    return recorder


# The resnet18 b16 training step recorded on the H100 with NVTX ranges: its exhaustive aggregate, and a
# distinct-mode stand-in built from it (the guard rails and the doctor check them).
@pytest.fixture(scope="session")
def exhaustive():
    import support

    from rooflow.profilers.ncu import aggregate_ncu

    return aggregate_ncu(support.NVTX_RECORDING)


@pytest.fixture(scope="session")
def stand_in(exhaustive, tmp_path_factory):
    """(distinct CSV, plan) as the driver and ncu would write them for the recorded step."""
    import json

    import support

    folder = tmp_path_factory.mktemp("distinct")
    csv_path, plan_path = folder / "ncu.csv", folder / "ncu_plan.json"
    groups = support.signature_groups(exhaustive.kernels, support.module_shapes("resnet18", 16))
    support.distinct_stand_in(exhaustive.kernels, groups, csv_path, plan_path)
    return csv_path, json.loads(plan_path.read_text())
