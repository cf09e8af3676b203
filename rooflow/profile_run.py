"""Running Nsight Compute / Nsight Systems around rooflow's one-iteration driver, with clear errors
when the tool is missing, lacks counter permission, or profiled nothing."""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from rooflow.errors import RooflowError

log = logging.getLogger(__name__)


def driver_argv(model: str, batch: int, precision: str, mode: str, subset: str, warmup: int,
                threads: int | None, ncu_mode: str | None = None, plan: str | Path | None = None) -> list[str]:
    """The command that runs exactly one profiled iteration (:func:`rooflow.driver.profile_one_iteration`):
    for nsys no ``ncu_mode`` (one profiler range around the step), for ncu ``distinct`` or ``exhaustive``
    with the ``plan`` JSON to write (profiling.ncu.mode)."""
    argv = [sys.executable, "-m", "rooflow.driver", "--device", "cuda",
            "--model", model, "--batch", str(batch), "--precision", precision, "--mode", mode,
            "--subset", str(subset), "--warmup", str(max(warmup, 1))]
    if threads:
        argv += ["--threads", str(threads)]
    if ncu_mode:
        argv += ["--ncu-mode", ncu_mode]
    if plan:
        argv += ["--plan", str(plan)]
    return argv


def require_tool(executable: str, config_key: str) -> str:
    found = shutil.which(executable)
    if not found:
        raise RooflowError(
            f"'{executable}' is not on PATH on {socket.gethostname()}: load the CUDA/Nsight module "
            f"on the GPU nodes or set {config_key} to its full path in config/config.yaml")
    return found


def run_tool(command: list[str], log_path: str | Path, what: str, outputs: list[str | Path] = ()) -> None:
    """Run a profiler command, streaming its output to the log. On failure, the profiler's own error
    (no counter permission, no kernels profiled, ...) found in the log or in `outputs` is the message;
    otherwise one line pointing at the log."""
    from rooflow.profilers.commands import check_profiler_log

    log.info("running: %s", " ".join(str(c) for c in command))
    with open(log_path, "a") as sink:
        completed = subprocess.run(command, stdout=sink, stderr=subprocess.STDOUT, check=False)
    for path in (log_path, *outputs):
        if Path(path).is_file() and Path(path).stat().st_size:
            check_profiler_log(path)
    if completed.returncode != 0:
        raise RooflowError(f"{what} exited with status {completed.returncode}: see {log_path} for its output")


def require_nsys_report(report_stem: str | Path, executable: str, log_path: str | Path) -> Path:
    """The ``.nsys-rep`` that ``nsys profile -o <report_stem>`` wrote, or one sentence saying why there is none.

    The nsys bundled inside Nsight Compute writes only a ``.qdstrm`` capture (it lacks the QdstrmImporter),
    and ``nsys stats`` would then fail with "input file does not exist" (fixture
    h100-rooflow/nsys-without-qdstrm-importer.log): say what happened and how to fix it instead.
    """
    from rooflow.profilers._text import NO_NSYS_REPORT

    report = Path(f"{report_stem}.nsys-rep")
    if report.is_file():
        return report
    capture = Path(f"{report_stem}.qdstrm")
    if capture.is_file():
        raise RooflowError(NO_NSYS_REPORT.format(nsys=executable, qdstrm=capture) + f" (see {log_path})")
    raise RooflowError(f"nsys profile wrote no report {report.name}: see {log_path} for its output, fix the "
                       f"cause it names and profile again, or set profiling.nsys.enabled: false")
