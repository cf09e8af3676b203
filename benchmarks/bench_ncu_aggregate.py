"""Aggregating a big Nsight Compute details page: rooflow's streaming parser against pandas.read_csv + a pivot.

    .venv/bin/python benchmarks/bench_ncu_aggregate.py                   # ~1 GB, 3 rounds
    .venv/bin/python benchmarks/bench_ncu_aggregate.py --size-mb 50 200 --rounds 1
    .venv/bin/python benchmarks/bench_ncu_aggregate.py --size-mb 100 --with-strict   # + the csv-module path
    .venv/bin/python benchmarks/bench_ncu_aggregate.py --compare /tmp/main           # + another checkout's rooflow

The file is made in a temporary folder from rooflow's own H100 recordings (tests/data/real/h100-rooflow, the
`*-ncu.csv.gz` details pages with the standard header) concatenated until it reaches the size asked for,
kernel IDs renumbered so they stay unique; ``==PROF==`` lines lead, as in a real file.

Each method runs in its own process (so its peak RSS, ``ru_maxrss``, is its own), the methods alternate
round by round (so load on a shared machine hits both alike), and the table shows the median wall time of
the aggregation itself (imports excluded), its CPU time, the peak RSS, and whether the totals are identical:

- ``rooflow``: :func:`rooflow.profilers.ncu.aggregate_ncu` (everything: per-kernel table, totals, notes);
- ``pandas``: ``pd.read_csv`` of the whole file (``thousands=","``), each value times its unit's factor, a
  ``pivot_table`` to kernels × metrics, then rooflow's own derivation of the totals from that table (the
  same formulas, so any difference in the totals is a difference in parsing); a text log: ``read_csv`` of its
  lines as one column, kernel lines numbered, metric rows split by ``str.extract``, the same pivot;
- ``rooflow strict`` (``--with-strict``): rooflow with its vectorised path off, every row through ``csv``;
- ``rooflow before`` (``--compare DIR``): the same as ``rooflow`` with the ``rooflow`` package of another checkout
  (e.g. ``git archive main rooflow | tar -x -C DIR``), in the same rounds.
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
REAL = ROOT / "tests" / "data" / "real"
RECORDINGS = REAL / "h100-rooflow"
DEEPCAM = REAL / "cyanguwa-DeepLearningProfiling" / "mlperf-deepcam" / "PT-fp32-O1-AdamW-fw-733731"
LEADING = ["==PROF== Connected to process 24166 (/usr/bin/python3.12)",
           "==PROF== Disconnected from process 24166"]
# ncu <= 2021's details header when sections and rules ran (DESIGN.md): the metric rows stop after "Metric
# Value" and one empty field (13 of 15), the rule rows fill the three rule fields and leave the metric empty.
RULES_HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Kernel Time","Context","Stream",'
                '"Section Name","Metric Name","Metric Unit","Metric Value","Rule Name","Rule Type","Rule Description"')
RULES = [('"GPU Speed Of Light","","","","SOLBottleneck","WRN","This kernel exhibits low compute throughput and '
          'memory bandwidth utilization relative to the peak performance of this device. Achieved compute '
          'throughput and/or memory bandwidth below 60.0% of peak typically indicate latency issues. Look at '
          '""Scheduler Statistics"" and ""Warp State Statistics"" for potential reasons."'),
         ('"Launch Statistics","","","","LaunchConfiguration","WRN","The grid for this launch is configured to '
          'execute only 2 blocks, which is less than the GPU\'s 80 multiprocessors. This can underutilize some '
          'multiprocessors. If you do not intend to execute this kernel concurrently with other workloads, '
          'consider reducing the block size to have at least one block per multiprocessor."')]
# The sections ncu's default set adds to each kernel (ncu 2021 names and units; a text value among them).
SECTION_METRICS = [
    ("GPU Speed Of Light", "DRAM Frequency", "cycle/usecond", "876.95"),
    ("GPU Speed Of Light", "SM Frequency", "cycle/nsecond", "1.31"),
    ("GPU Speed Of Light", "Elapsed Cycles", "cycle", "4,593"),
    ("GPU Speed Of Light", "Memory [%]", "%", "12.87"),
    ("GPU Speed Of Light", "SOL DRAM", "%", "8.25"),
    ("GPU Speed Of Light", "Duration", "usecond", "3.49"),
    ("GPU Speed Of Light", "SOL L1/TEX Cache", "%", "10.49"),
    ("GPU Speed Of Light", "SOL L2 Cache", "%", "6.90"),
    ("GPU Speed Of Light", "SM Active Cycles", "cycle", "1,722.41"),
    ("GPU Speed Of Light", "SM [%]", "%", "2.42"),
    ("Launch Statistics", "Block Size", "", "512"),
    ("Launch Statistics", "Function Cache Configuration", "", "cudaFuncCachePreferNone"),
    ("Launch Statistics", "Grid Size", "", "2"),
    ("Launch Statistics", "Registers Per Thread", "register/thread", "28"),
    ("Launch Statistics", "Shared Memory Configuration Size", "Kbyte", "32.77"),
    ("Launch Statistics", "Dynamic Shared Memory Per Block", "byte/block", "0"),
    ("Launch Statistics", "Static Shared Memory Per Block", "byte/block", "0"),
    ("Launch Statistics", "Threads", "thread", "1,024"),
    ("Launch Statistics", "Waves Per SM", "", "0.01"),
    ("Occupancy", "Block Limit SM", "block", "32"),
    ("Occupancy", "Block Limit Registers", "block", "4"),
    ("Occupancy", "Theoretical Occupancy", "%", "100"),
    ("Occupancy", "Achieved Occupancy", "%", "24.76"),
    ("Occupancy", "Achieved Active Warps Per SM", "warp", "15.85"),
]
FORMATS = {
    "details": "details page, ncu 2025 (15 columns), H100 recordings, short and long kernel names",
    "details-rules": "details page, ncu 2021 with Rule columns and rule rows, DeepCAM's long template names",
    "per-metric": "one metric per file (NERSC out.<metric>, ncu 2020, 12 columns), long template names",
    "raw": "raw page (--page raw), one wide row per kernel and a units row, H100 recording",
    "text": "ncu text output (no --csv), A100 VGG11 log (pandas: read_csv of its lines, a regex, a pivot)",
}


def _lines(path: Path) -> list[str]:
    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).decode().splitlines(keepends=True)


def _split_id(row: str) -> tuple[int, str]:
    """('"12","rest' -> 12, '","rest')."""
    end = row.index('"', 1)
    return int(row[1:end]), row[end:]


def _bodies(fmt: str) -> tuple[str, str, list[tuple[list[tuple[int, str]], int]]]:
    """(text before the rows, units/extra header lines, [(rows as (ID, the rest of the line), kernels)])."""
    if fmt == "details":
        header, bodies = None, []
        for recording in sorted(RECORDINGS.glob("*-ncu.csv.gz")):
            lines = _lines(recording)
            first = next(line for line in lines if line.startswith('"ID",'))
            header = header or first
            if first != header:  # the NVTX recording has two more columns: not concatenable
                continue
            rows = [_split_id(line) for line in lines if line.startswith('"') and line != first]
            bodies.append((rows, max(i for i, _ in rows) + 1))
        return "\n".join(LEADING) + "\n" + header, "", bodies
    if fmt in ("details-rules", "per-metric"):
        files = sorted(DEEPCAM.glob("out.*"))
        if fmt == "per-metric":
            lines = _lines(DEEPCAM / "out.sm__sass_thread_inst_executed_op_ffma_pred_on.sum.gz")
            at = next(i for i, line in enumerate(lines) if line.startswith('"ID",'))
            rows = [_split_id(line) for line in lines[at + 1:] if line.startswith('"')]
            return "".join(lines[: at + 1]), "", [(rows, max(i for i, _ in rows) + 1)]
        # One run of the 12 metrics, kernel by kernel, each followed by its rule rows.
        section = '"Command line profiler metrics"'
        per_kernel: dict[int, list[str]] = {}
        for path in files:
            for line in _lines(path):
                if line.startswith('"') and not line.startswith('"ID",'):
                    kernel_id, rest = _split_id(line)
                    per_kernel.setdefault(kernel_id, []).append(rest)
        rows = []
        for kernel_id, metric_rows in sorted(per_kernel.items()):
            prefix = metric_rows[0][: metric_rows[0].index(section)]  # one kernel, one description
            rows += [(kernel_id, prefix + rest[rest.index(section):].rstrip("\n") + ',""\n') for rest in metric_rows]
            rows += [(kernel_id, f'{prefix}"{name}","{metric}","{unit}","{value}",""\n')
                     for name, metric, unit, value in SECTION_METRICS]
            rows += [(kernel_id, prefix + rule + "\n") for rule in RULES]
        return "\n".join(LEADING) + "\n" + RULES_HEADER + "\n", "", [(rows, max(per_kernel) + 1)]
    if fmt == "raw":
        lines = _lines(RECORDINGS / "resnet50-b64-fp32-training-ncu-raw-no-sass.csv.gz")
        at = next(i for i, line in enumerate(lines) if line.startswith('"ID",'))
        rows = [_split_id(line) for line in lines[at + 2:] if line.startswith('"')]
        return "".join(lines[: at + 2]), "", [(rows, max(i for i, _ in rows) + 1)]
    raise ValueError(fmt)


def build(path: Path, size_bytes: int, fmt: str = "details") -> tuple[int, int]:
    """Write a big file of one format from the recordings, kernel IDs renumbered to stay unique; returns
    (bytes, kernels)."""
    if fmt == "text":
        lines = _lines(REAL / "anoushka21-cloudml" / "proj1" / "a100" / "vgg11" / "ncu-log-vgg11.txt")
        body = "".join(lines)
        kernels = sum(line.startswith("==PROF== Profiling") for line in lines)
        copies = max(1, -(-size_bytes // len(body)))
        with open(path, "w") as out:
            for _ in range(copies):
                out.write(body)
        return copies * len(body), copies * kernels
    head, _, bodies = _bodies(fmt)
    written, offset = 0, 0
    with open(path, "w") as out:
        out.write(head)
        written += len(head)
        while written < size_bytes:
            for rows, count in bodies:
                chunk = "".join(f'"{kernel_id + offset}{rest}' for kernel_id, rest in rows)
                out.write(chunk)
                written += len(chunk)
                offset += count
                if written >= size_bytes:
                    break
    return written, offset


# --------------------------------------------------------------------------------------------------
# The workers (one process each)


def run_rooflow(path: str, strict: bool) -> dict:
    from rooflow.profilers import _details, _details_arrow
    from rooflow.profilers.ncu import aggregate_ncu

    _details.VECTORISED = _details_arrow.ARROW = not strict
    start, cpu = time.perf_counter(), time.process_time()
    result = aggregate_ncu(path)
    return {"seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu,
            "totals": _comparable(result.totals)}


def _header_line(path: str) -> int:
    """0-based index of the CSV header line (application output and ==PROF== lines come before it)."""
    with open(path, "rb") as handle:
        for index, line in enumerate(handle):
            if line.startswith(b'"ID",'):
                return index
    raise SystemExit(f"{path}: no CSV header")


def run_pandas(path: str, fmt: str) -> dict:
    import numpy as np
    import pandas as pd

    from rooflow.profilers._details import _power_of_ten
    from rooflow.profilers.metrics import derive_quantities
    from rooflow.profilers.ncu import TOTAL_KEYS, _drop_fp16_of_wide_kernels, _total

    def si(values: np.ndarray, units: pd.Series) -> np.ndarray:
        # Unit -> power of ten; value × 10^k (or / 10^-k): one rounding, as rooflow converts.
        exponents = {unit: _power_of_ten(unit) for unit in units.unique()}
        exponent = units.map(exponents).to_numpy(dtype=np.int64)
        powers = 10.0 ** np.abs(exponent)
        return np.where(exponent >= 0, values * powers, values / powers)

    start, cpu = time.perf_counter(), time.process_time()
    if fmt == "text":
        wide, cc, names = _pandas_text(path, si)
    elif fmt == "raw":
        at = _header_line(path)
        frame = pd.read_csv(path, skiprows=[*range(at), at + 1], thousands=",")
        units = pd.read_csv(path, skiprows=at, nrows=1, dtype=str, keep_default_na=False).iloc[0]
        columns = [c for c in frame.columns if "__" in c and frame[c].dtype.kind in "if"]
        wide = pd.DataFrame({c: si(frame[c].to_numpy(dtype=np.float64), pd.Series([units[c]] * len(frame)))
                             for c in columns}, index=frame["ID"])
        cc = frame.set_index("ID")["CC"].astype(str)
        names = frame.set_index("ID")["Kernel Name"]
    else:
        frame = pd.read_csv(path, skiprows=_header_line(path), thousands=",")
        frame = frame[frame["Metric Name"].notna()]  # rule rows: no metric
        values = frame["Metric Value"]
        if values.dtype.kind not in "if":  # text values among the numbers: read_csv left them all as text
            values = pd.to_numeric(values.str.replace(",", "", regex=False), errors="coerce")
        frame["si"] = si(values.to_numpy(dtype=np.float64), frame["Metric Unit"].fillna(""))
        wide = frame.pivot_table(index="ID", columns="Metric Name", values="si", aggfunc="first")
        cc = (frame.groupby("ID")["CC"].first().astype(str) if "CC" in frame.columns
              else pd.Series("7.0", index=wide.index))
        names = frame.groupby("ID")["Kernel Name"].first()
    derived, info, _ = derive_quantities(wide, cc)
    # rooflow's rule for the fp16 counts of FP32 kernels (their names say so), applied to the same table
    table = pd.DataFrame({"name": names.reindex(derived.index).astype(str), "flops_fp16": derived["flops_fp16"],
                          "flops_total": derived["flops_total"]})
    _drop_fp16_of_wide_kernels(table, [])
    derived = derived.assign(flops_fp16=table["flops_fp16"].to_numpy(), flops_total=table["flops_total"].to_numpy())
    totals = {"kernels": len(wide)}
    for key in TOTAL_KEYS[1:]:
        totals[key] = _total(derived[key])
    if info["has_seconds"]:
        totals["seconds"] = _total(derived["seconds"])
    return {"seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu,
            "totals": _comparable(totals)}


def _pandas_text(path: str, si):
    """ncu's text output with pandas: ``read_csv`` of its lines (one column), kernel lines found and numbered,
    metric-table rows ("    name  unit  value") split by a regex, values times their unit's factor, a pivot; with
    each kernel's name (its header line up to ", Context")."""
    import csv

    import numpy as np
    import pandas as pd

    lines = pd.read_csv(path, sep="\x1f", header=None, names=["line"], quoting=csv.QUOTE_NONE, dtype=str,
                        skip_blank_lines=True)["line"]
    header = lines.str.match(r"^  \S") & lines.str.contains(", Context ", regex=False)
    kernel = header.cumsum() - 1
    rows = lines.str.extract(r"^    (\S+) +(\S+) +([0-9][0-9,]*(?:\.[0-9]*)?|n/a)$")
    keep = rows[0].notna() & (kernel >= 0)
    rows, kernel = rows[keep], kernel[keep]
    values = pd.to_numeric(rows[2].str.replace(",", "", regex=False), errors="coerce")
    frame = pd.DataFrame({"id": kernel.to_numpy(), "metric": rows[0].to_numpy(),
                          "si": si(values.to_numpy(dtype=np.float64), rows[1])})
    wide = frame.pivot_table(index="id", columns="metric", values="si", aggfunc="first")
    cc = lines[header].str.extract(r"CC (\d+\.\d+)\s*$")[0].reset_index(drop=True).reindex(wide.index)
    names = lines[header].str.extract(r"^  (.*?), Context ")[0].reset_index(drop=True).reindex(wide.index)
    return wide, cc, names


def _comparable(totals: dict) -> dict:
    from rooflow.profilers.ncu import TOTAL_KEYS

    return {key: totals.get(key) for key in [*TOTAL_KEYS, "seconds"]}


def worker(method: str, path: str, fmt: str) -> None:
    import resource

    result = run_pandas(path, fmt) if method == "pandas" else run_rooflow(path, strict=method == "rooflow strict")
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux
    print(json.dumps(result))


# --------------------------------------------------------------------------------------------------
# The driver


def measure(method: str, path: Path, fmt: str, before: str | None = None) -> dict:
    # "rooflow before": the same worker on another checkout's rooflow package (--compare), side by side.
    package = before if method == "rooflow before" else str(ROOT)
    env = dict(os.environ, PYTHONPATH=package + os.pathsep + os.environ.get("PYTHONPATH", ""))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    worker_method = "rooflow" if method == "rooflow before" else method
    done = subprocess.run([sys.executable, __file__, "--worker", worker_method, str(path), fmt], capture_output=True,
                          text=True, env=env, check=False)
    if done.returncode:
        raise SystemExit(f"{method} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["load"] = load  # the 1-minute load average as the method started
    return result


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
    parser.add_argument("--format", nargs="+", choices=list(FORMATS), default=list(FORMATS),
                        help="file format(s) to build and aggregate (default: all)")
    parser.add_argument("--size-mb", type=float, nargs="+", default=[1000.0], help="file size(s) in MB (1e6 B)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per method; the table shows the median")
    parser.add_argument("--with-strict", action="store_true", help="also time rooflow's csv-module path")
    parser.add_argument("--keep", metavar="DIR", help="build the file(s) here and keep them")
    parser.add_argument("--compare", metavar="DIR", help="also run the rooflow package of this checkout (the "
                        "folder holding its rooflow/), as 'rooflow before'")
    parser.add_argument("--worker", nargs=3, metavar=("METHOD", "PATH", "FORMAT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker)
        return 0

    print(f"Machine: {machine()}; Python {sys.version.split()[0]}")
    rows, failures = [], []
    if args.keep:
        Path(args.keep).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.keep) as scratch:
        for fmt in args.format:
            methods = (["pandas", "rooflow"] + (["rooflow before"] if args.compare else [])
                       + (["rooflow strict"] if args.with_strict else []))
            for size_mb in args.size_mb:
                path = Path(args.keep or scratch) / f"ncu-{fmt}-{size_mb:g}MB.csv"
                start = time.perf_counter()
                size, kernels = build(path, int(size_mb * 1e6), fmt)
                print(f"built {path.name} ({FORMATS[fmt]}): {size / 1e6:.0f} MB, {kernels} kernels, in "
                      f"{time.perf_counter() - start:.1f} s", flush=True)
                runs = {method: [] for method in methods}
                for _ in range(args.rounds):
                    for method in methods:
                        runs[method].append(measure(method, path, fmt, args.compare))
                reference = runs[methods[0]][0]["totals"]
                for method in methods:
                    seconds = statistics.median(r["seconds"] for r in runs[method])
                    rows.append((fmt, size / 1e6, method, seconds,
                                 statistics.median(r["cpu_seconds"] for r in runs[method]),
                                 max(r["peak_rss_mb"] for r in runs[method]),
                                 statistics.median(r["load"] for r in runs[method]),
                                 all(r["totals"] == reference for r in runs[method])))
                    if not rows[-1][-1]:
                        failures.append(f"{method}, {fmt} at {size / 1e6:.0f} MB: {runs[method][0]['totals']} != "
                                        f"{reference}")
                if not args.keep:
                    path.unlink()
    print(f"\n{'format':14} {'MB':>6}  {'method':15} {'seconds':>8} {'CPU s':>7} {'peak RSS MB':>11} "
          f"{'load':>5} {'vs pandas (wall / CPU)':>22}  {'totals identical':16}")
    baseline = {(fmt, size): (seconds, cpu) for fmt, size, method, seconds, cpu, *_ in rows if method == "pandas"}
    for fmt, size, method, seconds, cpu, rss, load, same in rows:
        ratio = (f"{baseline[fmt, size][0] / seconds:.2f}x / {baseline[fmt, size][1] / cpu:.2f}x"
                 if (fmt, size) in baseline else "n/a")
        print(f"{fmt:14} {size:>6.0f}  {method:15} {seconds:>8.2f} {cpu:>7.2f} {rss:>11.0f} {load:>5.1f} {ratio:>22}  "
              f"{'yes' if same else 'NO'}")
    print(f"\n(seconds: median of {args.rounds} round(s) of the aggregation alone, imports excluded; CPU s: user + "
          f"system time of the process (all threads) over the same span; 'vs pandas': pandas' seconds / this "
          f"method's, wall and CPU; peak RSS: the largest ru_maxrss of the rounds, imports included; load: the "
          f"1-minute load average as the method started (median of the rounds))")
    for failure in failures:
        print("TOTALS DIFFER:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
