"""Benchmark: this machine's CPU ceilings, measured three times, with the spread between runs.

    .venv/bin/python benchmarks/bench_ceilings.py [--runs 3] [--threads N] [--quick] [--json FILE]

Prints, per roof (the fp32 roof and its GEMM and convolution parts, bf16 where measured, DRAM copy/triad
bandwidth): the best and median of each run, the spread between runs ((max - min) / median of the runs'
bests), each run's time and timings, and the fp32 peak as a percentage of the theoretical one (cores × clock
× FP32 FLOP/cycle/core of the microarchitecture, from /proc/cpuinfo). A large spread means the machine was
busy (shared cores, other jobs): re-run when it is quieter before trusting the numbers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from rooflow.ceilings.measure import measure_ceilings

GIGA = 1e9


def rows_of(results: list[dict]) -> list[tuple[str, str, list[float], list[float]]]:
    """(roof, unit, bests per run, medians per run) for every roof measured in every run."""
    rows = []
    precisions = [p for p in results[0]["peak_flops_per_second"]
                  if all(p in r["peak_flops_per_second"] for r in results)]
    for p in precisions:
        rows.append((f"{p} roof", "GFLOP/s", [r["peak_flops_per_second"][p] / GIGA for r in results],
                     [r["median_peak_flops_per_second"][p] / GIGA for r in results]))
    for test in results[0].get("compute_tests_flops_per_second", {}):
        if all(test in r.get("compute_tests_flops_per_second", {}) for r in results):
            rows.append((f"  {test.replace('_', ' ')}", "GFLOP/s",
                         [r["compute_tests_flops_per_second"][test]["best"] / GIGA for r in results],
                         [r["compute_tests_flops_per_second"][test]["median"] / GIGA for r in results]))
    for test in results[0].get("memory_tests_bytes_per_second", {}):
        rows.append((test.replace("_", " "), "GB/s",
                     [r["memory_tests_bytes_per_second"][test]["best"] / GIGA for r in results],
                     [r["memory_tests_bytes_per_second"][test]["median"] / GIGA for r in results]))
    rows.append(("DRAM roof", "GB/s", [r["dram_bytes_per_second"] / GIGA for r in results],
                 [r["median_dram_bytes_per_second"] / GIGA for r in results]))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--quick", action="store_true", help="the workflow's quick plan instead of the full one")
    parser.add_argument("--json", help="write every run's full result to this file")
    args = parser.parse_args(argv)

    results = []
    for i in range(args.runs):
        result = measure_ceilings("cpu", threads=args.threads, quick=args.quick)
        results.append(result)
        print(f"run {i + 1}/{args.runs}: {result['seconds_total']:.1f} s", file=sys.stderr)

    first = results[0]
    print(f"CPU ceilings: {first['device_name']}, {first['threads']} threads, "
          f"{'quick' if args.quick else 'full'} plan, {args.runs} runs, torch {first['environment']['torch']}")
    header = f"{'roof':13} {'unit':8} " + " ".join(f"{'run ' + str(i + 1):>17}" for i in range(args.runs)) \
        + f" {'best':>8} {'spread':>7}"
    print(header)
    print(" " * 23 + " ".join(f"{'best / median':>17}" for _ in range(args.runs)))
    print("-" * len(header))
    for name, unit, bests, medians in rows_of(results):
        cells = " ".join(f"{b:8.1f} / {m:6.1f}" for b, m in zip(bests, medians))
        spread = (max(bests) - min(bests)) / statistics.median(bests)
        print(f"{name:13} {unit:8} {cells} {max(bests):8.1f} {spread:7.0%}")

    theory = first["theoretical_peak_flops_per_second"].get("fp32")
    if theory:
        best = max(r["peak_flops_per_second"]["fp32"] for r in results)
        per_run = ", ".join(f"{r['fraction_of_theoretical']['fp32']:.0%}" for r in results)
        print(f"\nfp32 theoretical peak {theory / GIGA:.1f} GFLOP/s; best measured {best / GIGA:.1f} GFLOP/s = "
              f"{best / theory:.0%} of it (per run: {per_run})")
        print(f"  basis: {first['theoretical_basis']}")
    print("fp32 roof set by: " + "; ".join(r["peak_kernel"].get("fp32", "-") for r in results))
    print("seconds per run: " + ", ".join(f"{r['seconds_total']:.1f}" for r in results) + "; timings per run: "
          + ", ".join(str(sum(s["timings"] for s in r["stability"].values())) for r in results))
    for what, why in first["skipped"].items():
        print(f"skipped {what}: {why}")
    print("spread = (max - min) / median of the runs' bests; bytes = read + written (STREAM convention).")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
