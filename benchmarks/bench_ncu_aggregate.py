"""Aggregating a big Nsight Compute details page: rooflow's streaming parser against pandas.read_csv + a pivot.

    .venv/bin/python benchmarks/bench_ncu_aggregate.py                   # ~1 GB, 3 rounds
    .venv/bin/python benchmarks/bench_ncu_aggregate.py --size-mb 50 200 --rounds 1
    .venv/bin/python benchmarks/bench_ncu_aggregate.py --size-mb 100 --with-strict   # + the csv-module path

The file is made in a temporary folder from rooflow's own H100 recordings (tests/data/real/h100-rooflow, the
`*-ncu.csv.gz` details pages with the standard header) concatenated until it reaches the size asked for,
kernel IDs renumbered so they stay unique; ``==PROF==`` lines lead, as in a real file.

Each method runs in its own process (so its peak RSS, ``ru_maxrss``, is its own), the methods alternate
round by round (so load on a shared machine hits both alike), and the table shows the median wall time of
the aggregation itself (imports excluded), its CPU time, the peak RSS, and whether the totals are identical:

- ``rooflow``: :func:`rooflow.profilers.ncu.aggregate_ncu` (everything: per-kernel table, totals, notes);
- ``pandas``: ``pd.read_csv`` of the whole file (``thousands=","``), each value times its unit's factor, a
  ``pivot_table`` to kernels × metrics, then rooflow's own derivation of the totals from that table (the
  same formulas, so any difference in the totals is a difference in parsing);
- ``rooflow strict`` (``--with-strict``): rooflow with its vectorised path off, every row through ``csv``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECORDINGS = ROOT / "tests" / "data" / "real" / "h100-rooflow"
LEADING = ["==PROF== Connected to process 24166 (/usr/bin/python3.12)",
           "==PROF== Disconnected from process 24166"]


def build(path: Path, size_bytes: int) -> tuple[int, int]:
    """Write the big details page; returns (bytes, kernels)."""
    header, bodies = None, []
    for recording in sorted(RECORDINGS.glob("*-ncu.csv.gz")):
        lines = gzip.decompress(recording.read_bytes()).decode().splitlines(keepends=True)
        first = next(line for line in lines if line.startswith('"ID",'))
        header = header or first
        if first != header:  # the NVTX recording has two more columns: not concatenable
            continue
        rows = [line for line in lines if line.startswith('"') and line != first]
        ids = [int(row[1:row.index('"', 1)]) for row in rows]
        bodies.append((rows, ids, max(ids) + 1))
    written, offset = 0, 0
    with open(path, "w") as out:
        out.write("\n".join(LEADING) + "\n" + header)
        written += len(header) + sum(len(line) + 1 for line in LEADING)
        while written < size_bytes:
            for rows, ids, count in bodies:
                for row, kernel_id in zip(rows, ids):
                    text = f'"{kernel_id + offset}{row[row.index(chr(34), 1):]}'
                    out.write(text)
                    written += len(text)
                offset += count
                if written >= size_bytes:
                    break
    return written, offset


# --------------------------------------------------------------------------------------------------
# The workers (one process each)


def run_rooflow(path: str, strict: bool) -> dict:
    from rooflow.profilers import _details
    from rooflow.profilers.ncu import aggregate_ncu

    _details.VECTORISED = not strict
    start, cpu = time.perf_counter(), time.process_time()
    result = aggregate_ncu(path)
    return {"seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu,
            "totals": _comparable(result.totals)}


def run_pandas(path: str) -> dict:
    import numpy as np
    import pandas as pd

    from rooflow.profilers._details import _power_of_ten
    from rooflow.profilers.ncu import TOTAL_KEYS, _derive, _total

    start, cpu = time.perf_counter(), time.process_time()
    frame = pd.read_csv(path, skiprows=len(LEADING), thousands=",")
    # Unit -> power of ten; value × 10^k (or / 10^-k) is one rounding, as rooflow converts.
    exponents = {unit: _power_of_ten(unit) for unit in frame["Metric Unit"].fillna("").unique()}
    exponent = frame["Metric Unit"].fillna("").map(exponents).to_numpy(dtype=np.int64)
    values = frame["Metric Value"].to_numpy(dtype=np.float64)
    powers = 10.0 ** np.abs(exponent)
    frame["si"] = np.where(exponent >= 0, values * powers, values / powers)
    wide = frame.pivot_table(index="ID", columns="Metric Name", values="si", aggfunc="first")
    cc = frame.groupby("ID")["CC"].first().astype(str)
    derived, info, _ = _derive(wide, cc, {})
    totals = {"kernels": len(wide)}
    for key in TOTAL_KEYS[1:]:
        totals[key] = _total(derived[key])
    if info["has_seconds"]:
        totals["seconds"] = _total(derived["seconds"])
    return {"seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu,
            "totals": _comparable(totals)}


def _comparable(totals: dict) -> dict:
    from rooflow.profilers.ncu import TOTAL_KEYS

    return {key: totals.get(key) for key in [*TOTAL_KEYS, "seconds"]}


def worker(method: str, path: str) -> None:
    import resource

    result = run_pandas(path) if method == "pandas" else run_rooflow(path, strict=method == "rooflow strict")
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux
    print(json.dumps(result))


# --------------------------------------------------------------------------------------------------
# The driver


def measure(method: str, path: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, __file__, "--worker", method, str(path)], capture_output=True,
                          text=True, env=env, check=False)
    if done.returncode:
        raise SystemExit(f"{method} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def machine() -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{os.cpu_count()} CPUs ({model}), load average {load:.1f} at the start"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, nargs="+", default=[1000.0], help="file size(s) in MB (1e6 B)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per method; the table shows the median")
    parser.add_argument("--with-strict", action="store_true", help="also time rooflow's csv-module path")
    parser.add_argument("--keep", metavar="DIR", help="build the file(s) here and keep them")
    parser.add_argument("--worker", nargs=2, metavar=("METHOD", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker)
        return 0

    methods = ["pandas", "rooflow"] + (["rooflow strict"] if args.with_strict else [])
    print(f"Machine: {machine()}; Python {sys.version.split()[0]}")
    rows, failures = [], []
    with tempfile.TemporaryDirectory(dir=args.keep) as scratch:
        for size_mb in args.size_mb:
            path = Path(args.keep or scratch) / f"ncu-details-{size_mb:g}MB.csv"
            start = time.perf_counter()
            size, kernels = build(path, int(size_mb * 1e6))
            print(f"built {path.name}: {size / 1e6:.0f} MB, {kernels} kernels, in {time.perf_counter() - start:.1f} s",
                  flush=True)
            runs = {method: [] for method in methods}
            for _ in range(args.rounds):
                for method in methods:
                    runs[method].append(measure(method, path))
            reference = runs["pandas"][0]["totals"]
            for method in methods:
                seconds = statistics.median(r["seconds"] for r in runs[method])
                rows.append((size / 1e6, method, seconds, statistics.median(r["cpu_seconds"] for r in runs[method]),
                             max(r["peak_rss_mb"] for r in runs[method]),
                             all(r["totals"] == reference for r in runs[method])))
                if not rows[-1][-1]:
                    failures.append(f"{method} at {size / 1e6:.0f} MB: {runs[method][0]['totals']} != {reference}")
    print(f"\n{'MB':>6}  {'method':15} {'seconds':>8} {'CPU s':>7} {'peak RSS MB':>11} {'vs pandas':>9}  "
          f"{'totals identical':16}")
    baseline = {size: seconds for size, method, seconds, *_ in rows if method == "pandas"}
    for size, method, seconds, cpu, rss, same in rows:
        print(f"{size:>6.0f}  {method:15} {seconds:>8.2f} {cpu:>7.2f} {rss:>11.0f} "
              f"{baseline[size] / seconds:>8.2f}x  {'yes' if same else 'NO'}")
    print(f"\n(seconds: median of {args.rounds} round(s) of the aggregation alone, imports excluded; "
          f"'vs pandas': pandas' seconds / this method's seconds)")
    for failure in failures:
        print("TOTALS DIFFER:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
