"""The profile_ncu job: ncu around the one-iteration driver, with the distinct mode's guard rails.

Distinct mode (the default) has been checked against recordings and stand-ins, not on every GPU and ncu
version. So after a distinct-mode profile the job checks it against the driver's plan
(:func:`rooflow.profilers.distinct.check_distinct`: the NVTX filter caught kernels, every kernel sits in a
planned signature, no planned convolution/GEMM went unprofiled). Where it does not hold, the job logs one
sentence per finding, profiles the step again in exhaustive mode (the verified path) and writes the
findings into the plan (``guards``, ``requested_mode``), whence aggregate_ncu copies them into ncu.json and
the report's checks list them (:func:`rooflow.report.checks.guard_checks`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rooflow.errors import RooflowError
from rooflow.guards import guard, sentence
from rooflow.io import read_json, write_json

log = logging.getLogger(__name__)

NO_KERNELS = "No kernels were profiled"


def profile_with_fallback(run: Callable[[str, Path], None], mode: str, csv_path: str | Path,
                          plan_path: str | Path, log_path: str | Path) -> list[dict[str, Any]]:
    """Profile with ``run(mode, log_path)`` (ncu around the driver, writing ``csv_path`` and ``plan_path``);
    in distinct mode, check the result and on any finding profile again exhaustively. Returns the guard
    records (empty when the profile was used as made)."""
    from rooflow.profilers.distinct import FALLBACK, check_distinct
    from rooflow.profilers.ncu import aggregate_ncu

    if mode != "distinct":
        run(mode, Path(log_path))
        return []
    attempt = Path(f"{log_path}.distinct")  # its "No kernels were profiled" must not fail the exhaustive run
    try:
        run(mode, attempt)
        records = check_distinct(aggregate_ncu([csv_path]).kernels, plan_path)
    except RooflowError as error:
        if NO_KERNELS not in str(error):
            raise
        records = [guard("NVTX filter caught nothing", "error", "0 kernels profiled",
                         "the kernels of the first call of each op signature",
                         f"ncu profiled no kernel between the driver's per-signature profiler ranges, {FALLBACK}",
                         {"kernels_profiled": 0})]
    finally:
        if attempt.is_file():
            with open(log_path, "a") as sink:
                sink.write(attempt.read_text(errors="replace"))
            attempt.unlink()
    if not records:
        return []
    for record in records:
        log.warning(sentence(record))
    Path(csv_path).write_text("")
    Path(plan_path).write_text("")  # the exhaustive driver writes its own plan: never keep the distinct one
    run("exhaustive", Path(log_path))
    plan = read_json(plan_path)
    plan.update(guards=records, requested_mode="distinct")
    write_json(plan_path, plan)
    return records
