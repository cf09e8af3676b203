"""Benchmark: the workflow's own overhead, i.e. how long Snakemake needs to build rooflow's DAG, as the sweep grows.

    .venv/bin/python benchmarks/bench_workflow_dag.py [--repeats 3] [--sizes small medium sweep]
    .venv/bin/python benchmarks/bench_workflow_dag.py --compare /tmp/main   # and another checkout, interleaved

Each size is a config written into a fresh copy of the workflow in a temporary directory (no results):

- small:  1 model x 1 batch x 1 mode on the cpu            (~20 jobs)
- medium: 4 models x 2 batches x 2 modes, cpu + 2 GPUs      (~230 jobs, ncu + nsys on)
- sweep:  20 models x 4 batches x 2 modes, cpu + 2 GPUs     (480 runs, ~2,100 jobs, ncu + nsys on)

and, for each, the wall-clock and CPU (user + sys) seconds of

- ``snakemake -n`` on the empty directory: with GPUs in the sweep this DAG holds the estimates and the
  ``predict_fit`` checkpoint only (which GPU runs fit decides what else is submitted);
- ``snakemake -n`` once the estimates and the fit table exist (faked: empty files, every run fits): the DAG
  of every job, the ~2,100 of the issue's sweep;
- ``snakemake -n`` again after the sweep was faked as built (every output touched in job order, so each is
  newer than its inputs): the no-op re-run a user sees once everything is done ("Nothing to be done").

The median over ``--repeats`` runs is printed, with the spread (max - min) of the wall time: a large
spread means other processes shared the cores. CPU seconds are the less noisy number on a shared machine.
``--compare DIR`` runs another checkout of rooflow (e.g. ``git worktree add /tmp/main main``) the same way,
its runs interleaved with this one's, so that both see the same load.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SNAKEMAKE = Path(sys.executable).parent / "snakemake"
WORKFLOW_PARTS = ("Snakefile", "rules", "scripts", "config", "report", "envs", "profiles", "rooflow")

ZOO = ["resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "vgg11", "vgg13", "vgg16", "vgg19",
       "alexnet", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large", "densenet121", "squeezenet1_0",
       "shufflenet_v2_x1_0", "efficientnet_b0", "regnet_y_400mf", "googlenet", "mnasnet1_0"]
GPUS = ["a100-sxm4-40gb", "h100-sxm5-80gb"]
SIZES = {
    "small": {"models": ZOO[:1], "batch_sizes": [1], "modes": ["inference"], "devices": ["cpu"]},
    "medium": {"models": ZOO[:4], "batch_sizes": [1, 32], "modes": ["inference", "training"],
               "devices": ["cpu", *GPUS]},
    "sweep": {"models": ZOO, "batch_sizes": [1, 8, 32, 64], "modes": ["inference", "training"],
              "devices": ["cpu", *GPUS]},
}


def make_workdir(tree: Path, size: str, parent: Path) -> Path:
    """A copy of the workflow in ``tree`` with the size's config as config/config.yaml (imports off, ncu and
    nsys on)."""
    workdir = parent / size
    workdir.mkdir(parents=True)
    for name in WORKFLOW_PARTS:
        source = tree / name
        if source.is_dir():
            shutil.copytree(source, workdir / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif source.exists():
            shutil.copy2(source, workdir / name)
    spec = SIZES[size]
    lines = [f"{key}: [{', '.join(map(str, value))}]" for key, value in spec.items()]
    lines += ["precisions: [fp32]", "imports: []",
              "profiling: {ncu: {enabled: true}, nsys: {enabled: true}}"]
    (workdir / "config" / "config.yaml").write_text("\n".join(lines) + "\n")
    return workdir


def snakemake(workdir: Path, *args: str) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the child, stdout + stderr) of one snakemake command."""
    env = dict(os.environ, PYTHONPATH=str(workdir))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run([str(SNAKEMAKE), *args], cwd=workdir, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"snakemake {' '.join(args)} failed in {workdir}:\n{result.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, result.stdout + result.stderr


def job_count(output: str) -> int:
    match = re.search(r"^total\s+(\d+)", output, re.MULTILINE)
    return int(match.group(1)) if match else 0


def fake_outputs(workdir: Path, dry_run: str) -> None:
    """Create every output a dry-run lists (empty files); the fit table says every run fits."""
    for block in re.split(r"\n(?=(?:local)?(?:rule|checkpoint) \w+:)", dry_run):
        match = re.search(r"^\s+output: (.*)$", block, re.MULTILINE)
        if match and re.match(r"(?:local)?(?:rule|checkpoint) \w+:", block):
            for name in match.group(1).split(", "):
                path = workdir / name.strip()
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("{}" if path.name == "fits.json" else "")


def fake_build(workdir: Path, dry_run: str) -> float:
    """Make the sweep look built: create the outputs the dry-run lists, then let ``snakemake --touch`` bring
    their times into job order and record each job's metadata, as a real run would (again after the
    checkpoint, whose outputs let Snakemake see the rest of the DAG). Returns the seconds ``--touch`` took."""
    total = 0.0
    for _ in range(3):
        fake_outputs(workdir, dry_run)
        wall, _, _ = snakemake(workdir, "--touch", "--cores", "1", "--quiet")
        total += wall
        _, _, dry_run = snakemake(workdir, "-n", "--cores", "1")
        if "Nothing to be done" in dry_run:
            break
    return total


def measure(runs: list[tuple[float, float]]) -> tuple[float, float, float]:
    walls, cpus = [w for w, _ in runs], [c for _, c in runs]
    return statistics.median(walls), max(walls) - min(walls), statistics.median(cpus)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", choices=list(SIZES), default=list(SIZES))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--compare", type=Path, nargs="*", default=[],
                        help="other rooflow checkouts to run the same way (interleaved)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directories")
    args = parser.parse_args()

    trees = {"this": ROOT, **{str(path): path.resolve() for path in args.compare}}
    cpu_model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), "unknown CPU")
    print(f"machine: {os.cpu_count()} CPUs ({cpu_model}); load average {os.getloadavg()[0]:.1f} at the start; "
          f"median of {args.repeats} runs")
    width = max(len(name) for name in trees)
    print(f"{'checkout':{width}} {'size':8} {'jobs':>6} {'command':22} {'wall s':>8} {'spread s':>9} {'CPU s':>7}")
    parent = Path(tempfile.mkdtemp(prefix="rooflow-dag-"))
    try:
        for size in args.sizes:
            workdirs = {name: make_workdir(tree, size, parent / f"tree{number}")
                        for number, (name, tree) in enumerate(trees.items())}
            jobs: dict[str, int] = {}
            for state in ("empty", "estimated", "built"):
                runs: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
                for _ in range(args.repeats):
                    for name, workdir in workdirs.items():
                        wall, cpu, output = snakemake(workdir, "-n", "--cores", "1")
                        if state == "built" and "Nothing to be done" not in output:
                            raise SystemExit(f"the faked build of {size} is not up to date:\n{output[-3000:]}")
                        runs[name].append((wall, cpu))
                        if state != "built":
                            jobs[f"{name}/{state}"] = job_count(output)
                        if len(runs[name]) == args.repeats:
                            if state == "empty" and "predict_fit" in output:
                                fake_outputs(workdir, output)  # the estimates and a fit table: all fit
                                snakemake(workdir, "--touch", "--cores", "1", "--quiet")
                            elif state in ("empty", "estimated"):
                                fake_build(workdir, output)
                for name in trees:
                    wall, spread, cpu = measure(runs[name])
                    print(f"{name:{width}} {size:8} {jobs.get(f'{name}/{state}', 0):>6} "
                          f"{'snakemake -n (' + state + ')':22} {wall:>8.2f} {spread:>9.2f} {cpu:>7.2f}", flush=True)
    finally:
        if args.keep:
            print(f"kept {parent}")
        else:
            shutil.rmtree(parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
