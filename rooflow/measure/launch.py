"""Running Nsight Compute / Nsight Systems around rooflow's one-iteration driver, with clear errors
when the tool is missing, lacks counter permission, or profiled nothing."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from rooflow.errors import RooflowError

log = logging.getLogger(__name__)


def driver_argv(model, batch: int, precision: str, mode: str, subset: str, warmup: int,
                threads: int | None, ncu_mode: str | None = None, plan: str | Path | None = None,
                variant: str = "eager") -> list[str]:
    """The command that runs exactly one profiled iteration (:func:`rooflow.measure.driver.profile_one_iteration`):
    for nsys no ``ncu_mode`` (one profiler range around the step), for ncu ``distinct`` or ``exhaustive``
    with the ``plan`` JSON to write (profiling.ncu.mode). ``model``: a torchvision name, or a
    rooflow.workload.spec.ModelSpec (a custom model travels as its factory, inputs and loss); ``variant``: how
    the step runs (an eager one adds no argument)."""
    model_argv = ["--model", model] if isinstance(model, str) else model.argv(mode)
    argv = [sys.executable, "-m", "rooflow.measure.driver", "--device", "cuda", *model_argv,
            "--batch", str(batch), "--precision", precision, "--mode", mode,
            "--subset", str(subset), "--warmup", str(max(warmup, 1))]
    if threads:
        argv += ["--threads", str(threads)]
    if ncu_mode:
        argv += ["--ncu-mode", ncu_mode]
    if plan:
        argv += ["--plan", str(plan)]
    if variant != "eager":
        argv += ["--variant", variant]
    return argv


def require_tool(executable: str, config_key: str) -> str:
    found = shutil.which(executable)
    if not found:
        raise RooflowError(
            f"'{executable}' is not on PATH on {socket.gethostname()}: load the CUDA/Nsight module "
            f"on the GPU nodes or set {config_key} to its full path in config/config.yaml")
    return found


def run_tool(command: list[str], log_path: str | Path, what: str, outputs: list[str | Path] = (),
             grace_seconds: float = 10.0) -> None:
    """Run a profiler command, streaming its output to the log. On failure, the profiler's own error
    (no counter permission, no kernels profiled, ...) found in the log or in `outputs` is the message;
    otherwise one line pointing at the log. A SIGTERM, SIGINT or SIGHUP to this process stops the profiler
    promptly (:func:`run_interruptible`) and ends in a RooflowError, so callers' temporaries are removed."""
    from rooflow.profilers.commands import check_profiler_log

    log.info("running: %s", " ".join(str(c) for c in command))
    with open(log_path, "a") as sink:
        returncode, stopped_by = run_interruptible(command, sink, grace_seconds)
    if stopped_by is not None:
        raise RooflowError(
            f"{what} was stopped by {signal.Signals(stopped_by).name} (the job was cancelled or timed out): "
            f"nothing was written; run the workflow again to redo it")
    for path in (log_path, *outputs):
        if Path(path).is_file() and Path(path).stat().st_size:
            check_profiler_log(path)
    if returncode != 0:
        raise RooflowError(f"{what} exited with status {returncode}: see {log_path} for its output")


# Signals that mean "stop now": scancel and `timeout` send SIGTERM, Ctrl-C SIGINT, a closed terminal SIGHUP.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def run_interruptible(command: list[str], sink, grace_seconds: float = 10.0) -> tuple[int, int | None]:
    """Run `command` (an argv list, never a shell) in a process group of its own, output to `sink`, and
    return (exit status, the stop signal received or None).

    A profiler is a process tree (ncu or nsys, the Python driver it launched, that driver's workers) that
    may not pass a signal on, and a job that only dies itself leaves it running on the GPU while Snakemake
    or SLURM waits. So while the command runs, a stop signal to this process is forwarded as SIGTERM to the
    command's whole process group, which gets `grace_seconds` to exit before SIGKILL. The group is also
    SIGKILLed if this function is left any other way. If this process itself is SIGKILLed, the kernel
    sends the direct child SIGKILL (PR_SET_PDEATHSIG, Linux)."""
    received: list[int] = []
    child = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True, preexec_fn=_die_with_parent)

    def forward(signum, _frame):
        if not received:
            log.warning("received %s: stopping %s (process group %d)", signal.Signals(signum).name,
                        command[0], child.pid)
            _signal_group(child.pid, signal.SIGTERM)
        received.append(signum)

    previous = {}
    try:
        for signum in STOP_SIGNALS:
            try:
                previous[signum] = signal.signal(signum, forward)
            except ValueError:  # not the main thread: signals cannot be caught here
                break
        deadline = None
        while True:
            try:
                returncode = child.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                pass
            if received and deadline is None:
                deadline = time.monotonic() + grace_seconds
            if deadline is not None and time.monotonic() > deadline:
                log.warning("%s did not exit %g s after SIGTERM: SIGKILL", command[0], grace_seconds)
                _signal_group(child.pid, signal.SIGKILL)
                deadline = float("inf")
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        # whatever is left of the group (the driver under a profiler that already exited, or everything
        # when this function is left by an exception)
        _signal_group(child.pid, signal.SIGKILL)
        if child.poll() is None:
            child.wait()
    return returncode, (received[0] if received else None)


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL me when my parent dies (Linux prctl PR_SET_PDEATHSIG = 1)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


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
