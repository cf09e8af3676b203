"""A distinct-mode ncu profile (``profiling.ncu.mode: distinct``) back to one row per kernel launch of the step.

In distinct mode the driver (:mod:`rooflow.measure.driver`) profiles only the FIRST call of each aten op signature
(inside an NVTX range ``rooflow:sig:<k>``) and writes a plan: per signature, every call of the step with its
phase and layer. :func:`expand` gives each profiled kernel one row per call of its signature — the table an
exhaustive profile would have given, if every call of a signature launches the kernels of its first call
with the same counter values (what tests/profilers/test_distinct.py checks on a real per-kernel H100 recording) — and
:func:`apply_plan` sums it into the totals the workflow writes.

Each expanded row's ``nvtx_stack`` is written in ncu's own format (``<thread>  "<default domain>:<message>:
none:none:none:none:none:none"  ...``) with the call's ``phase:<phase>`` and ``layer:<name>`` items (every
enclosing module, outermost first), then, for a backward call, ``<Node>, seq = <N>`` (its autograd node, as
``emit_nvtx`` names it), then ``rooflow:sig:<k>`` and the op ranges ncu recorded inside it. So a per-layer
attribution that reads ``layer:``/``phase:`` items works on it unchanged — backward rows included, which an
exhaustive profile leaves outside every layer range (they run on autograd's thread).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd

from rooflow.errors import ParseError
from rooflow.guards import guard
from rooflow.io import read_json
from rooflow.profilers.ncu import TOTAL_KEYS, NcuResult
from rooflow.profilers.nvtx import PLAN_FORMAT, SIGNATURE_RANGE, format_nvtx_stack, parse_nvtx_stack

EXTRA_COLUMNS = ["profiled_id", "signature", "occurrence", "weight"]





def load_plan(plan: dict[str, Any] | str | Path) -> dict[str, Any]:
    if isinstance(plan, dict):
        return plan
    data = read_json(plan)
    if not isinstance(data, dict) or data.get("format") != PLAN_FORMAT:
        raise ParseError(f"{plan}: not a rooflow ncu plan (format {PLAN_FORMAT}); give the ncu_plan.json that "
                         f"profile_ncu wrote beside the ncu CSV.")
    return data


def _signature_of(kernel_id: Any, messages: list[str], where: str) -> tuple[int, list[str]]:
    """The signature number of a profiled kernel and the messages inside its rooflow:sig range."""
    for position in range(len(messages) - 1, -1, -1):
        if messages[position].startswith(SIGNATURE_RANGE):
            try:
                return int(messages[position][len(SIGNATURE_RANGE):]), messages[position + 1:]
            except ValueError:
                break
    raise ParseError(f"{where}: kernel ID {kernel_id} has no '{SIGNATURE_RANGE}<k>' NVTX range, so it was not "
                     f"profiled by rooflow's distinct-mode driver; profile with ncu --nvtx and the driver's "
                     f"--ncu-mode distinct, or aggregate the CSV without the plan (exhaustive mode).")


def _occurrence_stack(occurrence: dict[str, Any], signature: int, inner: list[str]) -> list[str]:
    stack = [f"phase:{occurrence['phase']}"] if occurrence.get("phase") else []
    stack += [f"layer:{name}" for name in occurrence.get("layers", [])]
    if occurrence.get("node"):
        seq = occurrence.get("seq")
        stack.append(f"{occurrence['node']}, seq = {seq}" if seq is not None else occurrence["node"])
    return [*stack, f"{SIGNATURE_RANGE}{signature}", *inner]


def expand(kernels: pd.DataFrame, plan: dict[str, Any] | str | Path, where: str = "ncu profile") -> pd.DataFrame:
    """One row per (profiled kernel, call of its op signature), in the step's order: the columns of
    ``NcuResult.kernels`` (``id`` renumbered 0…n-1 in step order; ``nvtx_stack`` that call's phase, layers
    and node) plus ``profiled_id`` (the kernel's ID in ncu's CSV), ``signature``, ``occurrence`` (the call's
    index among the step's op calls) and ``weight`` (how many calls the profiled kernel stands for)."""
    plan = load_plan(plan)
    signatures = {int(entry["id"]): entry for entry in plan["signatures"]}
    rows: list[dict[str, Any]] = []
    for record in kernels.to_dict("records"):
        thread, messages = parse_nvtx_stack(record.get("nvtx_stack", ""))
        number, inner = _signature_of(record["id"], messages, where)
        entry = signatures.get(number)
        if entry is None:
            raise ParseError(f"{where}: kernel ID {record['id']} ran in signature {number}, which the plan does "
                             f"not list; the CSV and the plan come from different runs, so profile again.")
        occurrences = entry["occurrences"]
        for occurrence in occurrences:
            row = dict(record)
            row.update(nvtx_stack=format_nvtx_stack(thread, _occurrence_stack(occurrence, number, inner)),
                       profiled_id=record["id"], signature=number, occurrence=int(occurrence["index"]),
                       weight=len(occurrences))
            rows.append(row)
    columns = list(kernels.columns) + [c for c in EXTRA_COLUMNS if c not in kernels.columns]
    table = pd.DataFrame(rows, columns=columns)
    table = table.sort_values(["occurrence", "profiled_id"], kind="stable").reset_index(drop=True)
    table["id"] = range(len(table))
    return table


def totals_of(table: pd.DataFrame) -> dict[str, Any]:
    """Σ over the rows, as :func:`rooflow.profilers.ncu.aggregate_ncu` sums its kernels: exactly rounded, None
    where no row has a value."""
    totals: dict[str, Any] = {"kernels": len(table)}
    for key in [*TOTAL_KEYS[1:], "seconds"]:
        if key in table.columns:
            values = table[key].dropna()
            totals[key] = math.fsum(values) if len(values) else None
    return totals


def apply_plan(result: NcuResult, plan: dict[str, Any] | str | Path | None) -> tuple[pd.DataFrame, dict[str, Any]]:
    """(per-kernel table, totals) of one profiled run, expanded when ``plan`` is a distinct-mode plan.

    The totals carry ``ncu_mode`` (``distinct`` or ``exhaustive``; no plan, as for imported profiles, counts
    as exhaustive), ``kernels_profiled`` (rows in ncu's CSV) and ``kernels_represented`` (kernel launches of
    the step they stand for); distinct mode adds ``op_calls`` and ``distinct_signatures``; a plan with guard
    records (a distinct profile the job replaced by an exhaustive one) adds ``guards`` and
    ``ncu_mode_requested``."""
    where = ", ".join(str(p) for p in result.paths) or "ncu profile"
    plan = load_plan(plan) if plan is not None else None
    totals = dict(result.totals)
    if plan is not None and plan.get("guards"):  # what the profiling job found and fell back from
        totals.update(guards=plan["guards"], ncu_mode_requested=plan.get("requested_mode"))
    if plan is None or plan.get("mode") != "distinct":
        totals.update(ncu_mode="exhaustive", kernels_profiled=len(result.kernels),
                      kernels_represented=len(result.kernels))
        return result.kernels, totals
    table = expand(result.kernels, plan, where)
    expanded = totals_of(table)
    if "seconds" not in result.totals:
        expanded.pop("seconds", None)
    totals.update(expanded)
    totals.update(ncu_mode="distinct", kernels_profiled=len(result.kernels), kernels_represented=len(table),
                  op_calls=plan.get("calls"), distinct_signatures=plan.get("distinct"))
    return table, totals


# aten ops every call of which launches at least one kernel on a GPU: a planned signature of one of them without
# a profiled kernel is a call ncu missed (its FLOPs would be missing from the totals).
KERNEL_OPS = re.compile(r"^aten\.(convolution|convolution_backward|_convolution|cudnn_convolution|mm|addmm|bmm|"
                        r"baddbmm)\.")
FALLBACK = ("so the job profiled the step again in exhaustive mode (every kernel: the verified path) and its "
            "numbers come from that profile")


def check_distinct(kernels: pd.DataFrame, plan: dict[str, Any] | str | Path, reference_kernels: int | None = None,
                   fallback: str = FALLBACK) -> list[dict[str, Any]]:
    """Guard records (:func:`rooflow.guards.guard`) where a distinct-mode profile does not match its plan; an
    empty list where it does, or where the plan is not a distinct one. Checks: the NVTX filter caught kernels
    at all; every profiled kernel sits inside one planned ``rooflow:sig:<k>`` range; every planned
    convolution/GEMM signature has a profiled kernel; and, given ``reference_kernels`` (the launches of the
    same step in an exhaustive profile or a timeline), the expansion represents exactly that many."""
    plan = load_plan(plan)
    if plan.get("mode") != "distinct":
        return []
    planned = {int(entry["id"]): entry for entry in plan["signatures"]}
    caught: Counter[int] = Counter()
    stray: list[Any] = []
    for record in kernels.to_dict("records"):
        try:
            number, _ = _signature_of(record["id"], parse_nvtx_stack(record.get("nvtx_stack", ""))[1], "")
        except ParseError:
            number = None
        if number in planned:
            caught[number] += 1
        else:
            stray.append(record["id"])
    evidence = {"kernels_profiled": len(kernels), "planned_signatures": len(planned),
                "signatures_with_kernels": len(caught)}
    if not caught:
        return [guard("NVTX filter caught nothing", "error",
                      f"{len(kernels)} kernels profiled, none inside a {SIGNATURE_RANGE}<k> range",
                      f"the kernels of the first call of each of {len(planned)} op signatures",
                      f"ncu profiled no kernel between the driver's per-signature profiler ranges (ncu without "
                      f"--nvtx, or a version that ignores cudaProfilerStart/Stop around single ops), {fallback}",
                      evidence)]
    out = []
    if stray:
        out.append(guard("kernel count differs from the plan", "error",
                         f"{len(stray)} of {len(kernels)} profiled kernels outside the plan's signatures",
                         "every profiled kernel inside one planned signature",
                         f"the profile and the plan disagree (kernels launched outside the dispatch mode, or from "
                         f"another process), {fallback}", {**evidence, "stray_kernel_ids": stray[:20]}))
    missed = [entry for number, entry in planned.items() if KERNEL_OPS.match(str(entry.get("op", "")))
              and not caught[number]]
    if missed:
        out.append(guard("kernel count differs from the plan", "error",
                         f"{len(missed)} planned convolution/GEMM signatures without a profiled kernel",
                         "at least one kernel for each", f"ncu missed calls whose FLOPs the totals need, {fallback}",
                         {**evidence, "missed_signatures": [entry["op"] for entry in missed[:20]]}))
    represented = sum(count * len(planned[number]["occurrences"]) for number, count in caught.items())
    if reference_kernels is not None and represented != reference_kernels:
        out.append(guard("kernel count differs from the plan", "error",
                         f"the distinct profile stands for {represented} kernel launches",
                         f"{reference_kernels}, as the exhaustive profile of the same step",
                         f"some op calls launched other kernels than the first call of their signature, {fallback}",
                         {**evidence, "kernels_represented": represented, "reference_kernels": reference_kernels}))
    return out
