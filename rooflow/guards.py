"""Guard records: what a GPU job found on real hardware that its tests did not expect, and what it did instead.

A job that meets such a thing (an NVTX filter that caught no kernel, profiled kernels the plan does not
account for, a cache roof under DRAM) logs one sentence, writes a record into its output JSON (a ``guards``
list) and falls back to the verified path (exhaustive ncu; no measured cache roof) rather than write a wrong
number. :func:`rooflow.report.checks.guard_checks` lifts the records into the run's self-checks.
"""

from __future__ import annotations

from typing import Any

GUARD_FIELDS = ("check", "severity", "value", "expected", "cause", "evidence")


def guard(check: str, severity: str, value: Any, expected: Any, cause: str,
          evidence: dict[str, Any] | None = None) -> dict[str, Any]:
    """One record: ``check`` (what was checked), ``severity`` (error/warning), the ``value`` found and the
    ``expected`` one, the ``cause`` (what it means and what the job did about it) and ``evidence`` (numbers,
    file names)."""
    return {"check": check, "severity": severity, "value": value, "expected": expected, "cause": cause,
            "evidence": dict(evidence or {})}


def sentence(record: dict[str, Any]) -> str:
    """The record as the one sentence the job logs."""
    return f"{record['check']}: {record['value']} (expected {record['expected']}): {record['cause']}"
