"""``rooflow doctor``: a preflight of a machine before the sweep runs there, one record per check.

Run it where the jobs will run: on a login node for the local checks (Python, torch, the profilers on PATH,
Triton, scratch space), and as a job on a GPU node (the workflow's ``doctor`` rule, submitted with the
device's SLURM resources) for the GPU checks, which replay every GPU path of rooflow on one small real step:

- the GPU torch sees against the catalogue entry (name, SMs, memory; the clocks as NVML reads them);
- ncu: version, counters readable (a one-kernel profile; ``ERR_NVGPUCTRPERM`` gives its fix), the metrics
  rooflow asks for on this architecture known to this ncu; nsys: a full build or the one bundled with ncu;
- the distinct mode (first call of each op signature, weighted by the plan) against an exhaustive profile of
  the same step: the guards of :func:`rooflow.profilers.distinct.check_distinct`, kernel launches equal, FLOP
  and DRAM byte totals within 1% (:data:`AGREEMENT`);
- the torch.profiler timeline of the step against ncu's kernels (:func:`rooflow.measure.timeline.compare_kernels`);
- NVML clocks and throttle reasons readable; Triton importable (the L2 roof); scratch space; the job's memory
  limit.

On a machine without a GPU every GPU check is "skipped: no GPU" and the rest still run — but in a SLURM job for
a GPU device the catalogue check fails: that job was meant to get a GPU (its gres). The GPU sequence
writes its files (the ncu CSVs, the plan, the timeline) into a folder, ready to become test fixtures. Each
check is a plain function returning a record (:func:`record`), so each failure mode is tested with stand-ins
and the comparisons with the recorded H100 files.
"""

from __future__ import annotations

import logging
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

STATUSES = ("ok", "info", "warning", "fail", "skipped")
NO_GPU = "skipped: no GPU"
AGREEMENT = 0.01  # distinct vs exhaustive totals: the target the distinct mode was built to (tests/test_distinct.py)
MEMORY_TOLERANCE = 0.10  # torch reports GiB-rounded usable memory; the catalogue the marketed GB
SCRATCH_BYTES = 5e9  # a sweep's results and ncu CSVs: a few GB at most
# The small real step the GPU checks profile: short under ncu's replay, with convolutions, GEMM, BN, loss,
# backward and optimizer: every kind of op call the distinct mode keys.
STEP = {"model": "resnet18", "batch": 2, "precision": "fp32", "mode": "training"}
ONE_KERNEL = "import torch; x = torch.ones(1 << 20, device='cuda'); torch.cuda.synchronize(); (x * 2).sum().item()"
COUNTER_METRIC = "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum"


def record(check: str, status: str, result: str, fix: str = "") -> dict[str, str]:
    """One row of the table: the check, its status (:data:`STATUSES`), what was found, what to do."""
    assert status in STATUSES, status
    return {"check": check, "status": status, "result": result, "fix": fix}


def _run(command: list[str], timeout: float = 60.0, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)


# -- local checks ------------------------------------------------------------------------------------------

def software_checks() -> list[dict[str, str]]:
    out = [record("python", "ok", f"{platform.python_version()} ({sys.executable})")]
    try:
        import torch
        import torchvision
    except ImportError as error:
        return [*out, record("torch", "fail", f"not importable ({error})",
                             "install requirements.txt into the environment the jobs use")]
    out.append(record("torch", "ok", f"torch {torch.__version__}, torchvision {torchvision.__version__}"))
    cuda = torch.version.cuda
    cudnn = torch.backends.cudnn.version() if cuda else None
    if not cuda:
        out.append(record("CUDA build", "warning", "this torch is a CPU-only build",
                          "install a CUDA build of torch where GPU jobs run (pip's default wheels are)"))
    else:
        out.append(record("CUDA build", "ok", f"CUDA {cuda}, cuDNN {cudnn or 'not loadable'}"))
    return out


def gpu_properties() -> dict[str, Any] | None:
    """Name, SM count, memory and compute capability of GPU 0, or None where torch sees no GPU."""
    import torch

    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(0)
    return {"name": props.name, "sm_count": props.multi_processor_count, "memory_bytes": props.total_memory,
            "architecture": f"sm_{props.major}{props.minor}"}


def catalogue_check(gpu: dict[str, Any] | None, devices: dict[str, Any], key: str | None,
                    job: str | None = None) -> dict[str, str]:
    """The GPU torch sees against the catalogue entry ``key`` (or, without a key, the entry that matches it).
    ``job``: the SLURM job this runs in (SLURM_JOB_ID), where no GPU for a GPU key is a failure: the job was meant
    to get one (on a login node it is the expected "skipped")."""
    if gpu is None:
        if job and key in devices and devices[key].is_cuda:
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            return record("GPU vs catalogue", "fail",
                          f"no GPU visible in SLURM job {job} for GPU device '{key}'"
                          + (f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else ""),
                          "give the device's slurm: block a gres for its GPU (gres: \"gpu:<type>:1\", "
                          "config/devices.yaml), or check that its partition's nodes have one")
        return record("GPU vs catalogue", "skipped", NO_GPU)
    seen = (f"{gpu['name']}, {gpu['sm_count']} SMs, {gpu['memory_bytes'] / 2**30:.1f} GiB, "
            f"{gpu['architecture']}")

    def mismatches(device) -> list[str]:
        found = []
        if device.sm_count and device.sm_count != gpu["sm_count"]:
            found.append(f"{device.sm_count} SMs")
        if device.memory_bytes and abs(gpu["memory_bytes"] / device.memory_bytes - 1) > MEMORY_TOLERANCE:
            found.append(f"{device.memory_bytes / 1e9:.0f} GB")
        if device.architecture and device.architecture != gpu["architecture"]:
            found.append(device.architecture)
        return found

    matching = [k for k, d in devices.items() if d.is_cuda and not mismatches(d)
                and d.name.lower() == gpu["name"].lower()] or \
        [k for k, d in devices.items() if d.is_cuda and not mismatches(d)]
    if key is None:
        if matching:
            return record("GPU vs catalogue", "ok", f"{seen}: catalogue entry {', '.join(matching)}",
                          f"run `rooflow doctor --device {matching[0]}` and use that key in config.devices")
        return record("GPU vs catalogue", "warning", f"{seen}: no catalogue entry matches",
                      "add an entry to config/devices.yaml (see config/README.md and `rooflow devices`)")
    device = devices.get(key)
    if device is None:
        return record("GPU vs catalogue", "fail", f"'{key}' is not in the catalogue",
                      f"use one of {', '.join(matching) or ', '.join(k for k, d in devices.items() if d.is_cuda)}")
    wrong = mismatches(device)
    if not wrong and device.name.lower() == gpu["name"].lower():
        return record("GPU vs catalogue", "ok", f"{seen} = {key}")
    if not wrong:
        return record("GPU vs catalogue", "warning", f"{seen}: named '{device.name}' in {key}",
                      "the numbers match; check that it is the same product")
    fix = (f"this node's GPU is catalogue entry {', '.join(matching)}: use that key (or a node with {key})"
           if matching else "add an entry for this GPU to config/devices.yaml, or run on a node with "
           f"{device.name}")
    return record("GPU vs catalogue", "fail", f"{seen}; {key} says {', '.join(wrong)}", fix)


# What each profiler's --version names it ("NVIDIA (R) Nsight Compute Command Line Profiler", "NVIDIA Nsight Systems
# version 2025.1 ..."; the nsys bundled with Nsight Compute says the latter too)
TOOL_NAMES = {"ncu": "Nsight Compute", "nsys": "Nsight Systems"}


def tool_check(name: str, executable: str, gpu: bool) -> tuple[dict[str, str], str | None]:
    """(record, full path or None) of a profiler on PATH, with its version. Missing is a failure on a GPU
    node and a warning elsewhere (a login node may not load the CUDA module)."""
    found = shutil.which(executable)
    if not found:
        # a path given: it is not there (or not an executable file), which PATH has nothing to do with
        where = (f"'{executable}' is not an executable file" if "/" in executable else
                 f"'{executable}' is not on PATH")
        return record(name, "fail" if gpu else "warning", where,
                      f"load the CUDA/Nsight module in the job's environment, or set profiling.{name}.executable "
                      "to its full path" + ("" if gpu else " (check on a GPU node: `snakemake doctor`)")), None
    try:
        done = _run([found, "--version"], timeout=30)
        banner = (done.stdout + done.stderr).strip()
        version = banner.splitlines()[-1:] or [""]
    except (OSError, subprocess.TimeoutExpired) as error:
        return record(name, "fail", f"{found} does not run ({error})", "reinstall it or fix its PATH"), None
    fix = f"set profiling.{name}.executable to {TOOL_NAMES[name]}'s {name}"
    if done.returncode != 0:  # a wrapper that failed, a program that does not take --version
        printed = f" ({version[0].strip()[:80]})" if banner else ", printing nothing"
        return record(name, "fail", f"{found} --version exited {done.returncode}{printed}", fix), None
    other = next((tool for tool, words in TOOL_NAMES.items() if tool != name and words in banner), None)
    if other or TOOL_NAMES[name] not in banner:  # ncu and nsys swapped, /bin/true: "OK" before any profile ran
        named = next((line for line in banner.splitlines() if "Nsight" in line), version[0])
        said = f"its --version says {named.strip()[:80]!r}" if banner else "its --version prints nothing"
        row = record(name, "fail" if other else "warning", f"{found} is not {TOOL_NAMES[name]} ({said})", fix)
        return row, None if other else found  # the other profiler: none of this one's checks can run on it
    return record(name, "ok", f"{found}: {version[0].strip()}"), found


def nsys_build(path: str | Path) -> str:
    """'full' where the QdstrmImporter sits in the nsys installation (it turns a capture into a report),
    'bundled with ncu' for the nsys inside Nsight Compute (it writes only a .qdstrm), else 'unknown'."""
    path = Path(path).resolve()
    for parent in list(path.parents)[:3]:
        if any(parent.glob("*/QdstrmImporter")) or (parent / "QdstrmImporter").exists():
            return "full"
    return "bundled with ncu" if "nsight-compute" in str(path).lower() else "unknown"


def nsys_check(executable: str, gpu: bool) -> dict[str, str]:
    row, found = tool_check("nsys", executable, gpu)
    if found is None or row["status"] != "ok":
        return row
    build = nsys_build(found)
    if build == "full":
        return record("nsys", "ok", f"{row['result']} (full build: QdstrmImporter present)")
    return record("nsys", "warning", f"{row['result']} ({build}: no QdstrmImporter beside it)",
                  "install Nsight Systems on the GPU nodes and set profiling.nsys.executable to its nsys, or set "
                  "profiling.nsys.enabled: false (the timing job's torch.profiler timeline gives kernel times)")


def triton_check() -> dict[str, str]:
    try:
        import triton
    except ImportError as error:
        return record("Triton (L2 roof)", "warning", f"not importable ({error})",
                      "install torch's CUDA wheels (they bring Triton): without it the L2 roof is not measured")
    return record("Triton (L2 roof)", "ok", f"triton {triton.__version__}")


def scratch_check(folder: str | Path = ".") -> dict[str, str]:
    folders = dict.fromkeys(str(Path(f).resolve()) for f in (folder, os.environ.get("TMPDIR") or "/tmp"))
    free = {f: shutil.disk_usage(f).free for f in folders if Path(f).is_dir()}
    text = ", ".join(f"{f}: {v / 1e9:.1f} GB free" for f, v in free.items())
    if any(v < SCRATCH_BYTES for v in free.values()):
        return record("scratch space", "warning", text,
                      f"free space under {SCRATCH_BYTES / 1e9:.0f} GB: run from a larger file system or set TMPDIR")
    return record("scratch space", "ok", text)


def memory_limit_bytes() -> tuple[int | None, str]:
    """The job's memory limit: SLURM's (per node, or per CPU × CPUs) or the cgroup's; (None, why) where unlimited."""
    slurm = os.environ.get("SLURM_MEM_PER_NODE")
    if slurm and slurm.isdigit():
        return int(slurm) * 2**20, "SLURM_MEM_PER_NODE"
    per_cpu, cpus = os.environ.get("SLURM_MEM_PER_CPU"), os.environ.get("SLURM_CPUS_PER_TASK") or "1"
    if per_cpu and per_cpu.isdigit() and cpus.isdigit():
        return int(per_cpu) * int(cpus) * 2**20, "SLURM_MEM_PER_CPU x SLURM_CPUS_PER_TASK"
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:
            return int(text), path
    return None, "no SLURM or cgroup limit"


def memory_check(device: Any = None) -> dict[str, str]:
    limit, source = memory_limit_bytes()
    if limit is None:
        return record("job memory limit", "info", source)
    text = f"{limit / 2**30:.1f} GiB ({source})"
    wanted = (device.slurm or {}).get("mem_mb") if device is not None else None
    if wanted and limit < wanted * 2**20 * 0.99:
        return record("job memory limit", "warning", f"{text}, the catalogue asks for {wanted} MB",
                      "the cluster granted less than the device's slurm.mem_mb: lower it or ask for a larger node")
    return record("job memory limit", "ok", text)


# -- GPU checks --------------------------------------------------------------------------------------------

def counters_check(ncu: str, folder: Path) -> dict[str, str]:
    """A real one-kernel profile: ncu reads one counter of one kernel, or says why it cannot."""
    from rooflow.profilers._text import profiler_error, read_text

    output = folder / "ncu-counters.csv"
    command = [ncu, "--csv", "--metrics", COUNTER_METRIC, "--log-file", str(output), sys.executable, "-c", ONE_KERNEL]
    try:
        done = _run(command, timeout=300)
    except subprocess.TimeoutExpired:
        return record("ncu counters", "fail", "a one-kernel profile took over 5 minutes", "check the node's GPU")
    lines = (read_text(output) if output.is_file() else "").splitlines() + (done.stdout + done.stderr).splitlines()
    error = profiler_error(output, lines)
    if error is not None:
        message = str(error)
        if "ERR_NVGPUCTRPERM" in message:
            return record("ncu counters", "fail", "no permission for the GPU performance counters (ERR_NVGPUCTRPERM)",
                          message.split("(ERR_NVGPUCTRPERM): ", 1)[-1])
        return record("ncu counters", "fail", message, "see the message; rerun the doctor after fixing it")
    rows = [line for line in lines if COUNTER_METRIC in line]
    if done.returncode != 0 or not rows:
        return record("ncu counters", "fail", f"ncu exited {done.returncode} without a counter row",
                      f"see {output}")
    return record("ncu counters", "ok", f"readable: {len(rows)} kernel(s) profiled ({output.name})")


def missing_metrics(wanted: Iterable[str], listing: str) -> list[str]:
    """The metrics of ``wanted`` whose base name (before the ``.sum`` roll-up) ``ncu --query-metrics`` does not
    list: their counters would come back empty."""
    known = {line.split()[0] for line in listing.splitlines() if line.strip()}
    return [m for m in wanted if m.rsplit(".", 1)[0] not in known and m not in known]


def metrics_check(ncu: str, architecture: str, precision: str = "fp32") -> dict[str, str]:
    from rooflow.profilers.metrics import metrics_for_architecture

    wanted = metrics_for_architecture(architecture, None)
    try:
        done = _run([ncu, "--query-metrics"], timeout=120)
    except subprocess.TimeoutExpired:
        return record("ncu metrics", "fail", "ncu --query-metrics took over 2 minutes", "check the node's GPU")
    missing = missing_metrics(wanted, done.stdout)
    if done.returncode != 0 or not done.stdout.strip():
        return record("ncu metrics", "fail", f"ncu --query-metrics exited {done.returncode}",
                      (done.stdout + done.stderr).strip().splitlines()[-1:][0] if (done.stdout + done.stderr).strip()
                      else "run it by hand to see why")
    if missing:
        return record("ncu metrics", "fail", f"{len(missing)} of {len(wanted)} unknown to this ncu on {architecture}: "
                      f"{', '.join(missing)}", "use a newer Nsight Compute, or report the architecture's metric "
                      "names (rooflow/profilers/metrics.py)")
    return record("ncu metrics", "ok", f"all {len(wanted)} metrics rooflow asks for on {architecture} are known")


def compare_profiles(distinct_csv: str | Path, plan: str | Path | dict, exhaustive_csv: str | Path
                     ) -> dict[str, str]:
    """The distinct-mode profile of a step against the exhaustive profile of the same step: the guards
    (with the exhaustive launch count as reference), then FLOP and DRAM byte totals within :data:`AGREEMENT`."""
    from rooflow.guards import sentence
    from rooflow.profilers.distinct import apply_plan, check_distinct
    from rooflow.profilers.ncu import aggregate_ncu

    distinct = aggregate_ncu([distinct_csv])
    exhaustive = aggregate_ncu([exhaustive_csv])
    reference = len(exhaustive.kernels)
    guards = check_distinct(distinct.kernels, plan, reference_kernels=reference, fallback="so the workflow's "
                            "profile_ncu jobs will fall back to exhaustive ncu on this node")
    fix = "set profiling.ncu.mode: exhaustive in the config (slower, verified), and report this with the doctor's files"
    if guards:
        return record("ncu distinct vs exhaustive", "fail", "; ".join(sentence(g) for g in guards), fix)
    _, totals = apply_plan(distinct, plan)
    errors = {}
    for key in ("flops_total", "dram_bytes"):
        a, b = totals.get(key), exhaustive.totals.get(key)
        if a is not None and b:
            errors[key] = a / b - 1
    text = (f"{totals['kernels_profiled']} kernels profiled for {totals['kernels_represented']} launches "
            f"(exhaustive {reference}); " + ", ".join(f"{k} {100 * v:+.2f}%" for k, v in errors.items()))
    if any(abs(v) > AGREEMENT for v in errors.values()):
        return record("ncu distinct vs exhaustive", "fail", f"{text}: over {100 * AGREEMENT:.0f}%", fix)
    return record("ncu distinct vs exhaustive", "ok", text)


def timeline_check(timeline: Any, kernels: Any) -> dict[str, str]:
    """The torch.profiler timeline of a step against ncu's kernels of the same step."""
    from rooflow.measure.timeline import compare_kernels

    found = compare_kernels(timeline, kernels)
    if found["match"]:
        return record("timeline vs ncu", "ok", f"the same {found['timed_kernels']} kernels")
    status = "warning" if found["algorithms_differ"] else "fail"
    return record("timeline vs ncu", status, found["message"],
                  "cuDNN's autotuning picked other algorithms in the two processes: the report flags each such run "
                  "('timed vs profiled kernels')" if found["algorithms_differ"] else
                  "the two processes ran different non-GEMM kernels: report it with the doctor's files")


def nvml_check() -> dict[str, str]:
    from rooflow.hardware.environment import GpuMonitor, gpu_state

    state = gpu_state()
    if not state:
        return record("NVML", "warning", "nvidia-ml-py not importable or NVML not initialisable",
                      "install nvidia-ml-py (requirements.txt): without it throttling goes unseen")
    if "nvml_error" in state:
        return record("NVML", "warning", state["nvml_error"], "the driver's NVML refused a reading")
    try:
        with GpuMonitor() as monitor:
            monitor.sample()
        reading = monitor.summary()
    except Exception as error:  # noqa: BLE001 - any NVML failure is the finding
        return record("NVML", "warning", f"clocks readable, throttle reasons not ({error})",
                      "an old driver: throttling goes unseen")
    if reading.get("nvml_error") or reading.get("throttled") is None:
        return record("NVML", "warning", f"clocks readable, throttle reasons not ({reading.get('nvml_error')})",
                      "an old driver: throttling goes unseen")
    return record("NVML", "ok", f"SM clock {state['sm_clock_mhz']} of {state['max_sm_clock_mhz']} MHz, "
                  f"{state['temperature_celsius']} C; throttle reasons readable "
                  f"({', '.join(reading.get('reasons') or []) or 'none now'})")


def _subset(folder: Path) -> Path:
    from rooflow.workload.dataset import SubsetSpec, build_subset

    path = folder / "subset.pt"
    if not path.is_file():
        build_subset(SubsetSpec(classes=2, images_per_class=2), path, folder / "subset.csv")
    return path


def program_error(log_path: str | Path) -> str | None:
    """The last exception line (``AttributeError: ...``) a profiled Python program wrote to its log, or None:
    the cause a failed profile's table row names (on the H200 it was a torch API missing from torch 2.11)."""
    path = Path(log_path)
    if not path.is_file():
        return None
    found = None
    for line in path.read_text(errors="replace").splitlines():
        head = line.split(":", 1)[0]
        if ":" in line and head.isidentifier() and head.endswith(("Error", "Exception", "Interrupt")):
            found = line.strip()
    return found


def profiled_timeline(spec, subset: Path):
    """The kernel timeline of one iteration of ``spec`` (rooflow.measure.timing.RunSpec) under torch.profiler,
    after 3 warm-up iterations: the capture the timing job makes (empty on a CPU)."""
    from rooflow.measure.timeline import capture_iteration
    from rooflow.measure.timing import Runner
    from rooflow.workload.dataset import load_subset

    runner = Runner(spec, load_subset(subset))
    for _ in range(3):
        runner.step()
    timeline, _seconds, _ops, _faults = capture_iteration(runner)
    return timeline


def step_checks(ncu: str, architecture: str, folder: Path) -> list[dict[str, str]]:
    """Profile :data:`STEP` in distinct and exhaustive mode under ncu, capture its torch.profiler timeline,
    and compare (files left in ``folder``)."""
    from rooflow.io import write_csv
    from rooflow.measure.launch import driver_argv, run_tool
    from rooflow.measure.timing import RunSpec
    from rooflow.profilers.commands import ncu_command
    from rooflow.profilers.metrics import metrics_for_architecture
    from rooflow.profilers.ncu import aggregate_ncu

    subset = _subset(folder)
    metrics = metrics_for_architecture(architecture, STEP["precision"])
    out = []
    paths = {mode: folder / f"ncu-{mode}.csv" for mode in ("distinct", "exhaustive")}
    try:
        for mode, path in paths.items():
            argv = driver_argv(STEP["model"], STEP["batch"], STEP["precision"], STEP["mode"], subset, 3, None,
                               ncu_mode=mode, plan=folder / f"ncu-plan-{mode}.json")
            run_tool(ncu_command(ncu, metrics, path, argv), folder / f"ncu-{mode}.log", "ncu", outputs=[path])
        out.append(compare_profiles(paths["distinct"], folder / "ncu-plan-distinct.json", paths["exhaustive"]))
    except Exception as error:  # noqa: BLE001 - the doctor reports, it does not stop
        cause = next(filter(None, (program_error(folder / f"ncu-{mode}.log") for mode in paths)), None)
        out.append(record("ncu distinct vs exhaustive", "fail", f"{type(error).__name__}: {error}",
                          f"the profiled program raised {cause}; " * bool(cause) + f"see the logs in {folder}"))
        return out
    try:
        timeline = profiled_timeline(RunSpec(STEP["model"], STEP["batch"], STEP["precision"], STEP["mode"],
                                             "cuda", 3, 1), subset)
        write_csv(folder / "timeline.csv", timeline)
        out.append(timeline_check(timeline, aggregate_ncu([paths["exhaustive"]]).kernels))
    except Exception as error:  # noqa: BLE001
        out.append(record("timeline vs ncu", "fail", f"{type(error).__name__}: {error}",
                          "the timing job's torch.profiler capture fails the same way: report it"))
    return out


GPU_CHECKS = ("GPU vs catalogue", "ncu counters", "ncu metrics", "ncu distinct vs exhaustive", "timeline vs ncu",
              "NVML")


def run_doctor(device_key: str | None = None, devices_file: str | Path | None = None,
               folder: str | Path = "results/doctor/files", ncu: str = "ncu", nsys: str = "nsys",
               gpu: dict[str, Any] | None | bool = True) -> list[dict[str, str]]:
    """Every check, in the table's order. ``gpu``: True = ask torch; None = as on a machine without a GPU."""
    from rooflow.hardware.devices import default_catalogue_path, load_devices, unknown_device_error

    devices = load_devices(devices_file or default_catalogue_path())
    if device_key and device_key not in devices:  # without a GPU its check is skipped: the typo went unsaid
        raise unknown_device_error(device_key, devices, devices_file or default_catalogue_path())
    device = devices.get(device_key) if device_key else None
    rows = software_checks()
    if gpu is True:
        gpu = gpu_properties()
    rows.append(catalogue_check(gpu, devices, device_key, os.environ.get("SLURM_JOB_ID")))
    ncu_row, ncu_path = tool_check("ncu", ncu, gpu is not None)
    rows += [ncu_row, nsys_check(nsys, gpu is not None)]
    if gpu is None:
        rows += [record(name, "skipped", NO_GPU) for name in GPU_CHECKS[1:]]
    elif ncu_path is None:
        rows += [record(name, "skipped", "skipped: no ncu") for name in GPU_CHECKS[1:-1]] + [nvml_check()]
    else:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        rows.append(counters_check(ncu_path, folder))
        rows.append(metrics_check(ncu_path, gpu["architecture"]))
        if rows[-2]["status"] == "ok":
            rows += step_checks(ncu_path, gpu["architecture"], folder)
        else:
            rows += [record(name, "skipped", "skipped: ncu cannot read counters") for name in GPU_CHECKS[3:5]]
        rows.append(nvml_check())
    rows += [triton_check(), scratch_check(), memory_check(device)]
    return rows


def format_table(rows: list[dict[str, str]]) -> str:
    """The records as a plain-text table: check, result (status first), what to do."""
    width = max(len(r["check"]) for r in rows)
    lines = [f"{'check'.ljust(width)}  result", f"{'-' * width}  {'-' * 6}"]
    for r in rows:
        status = "" if r["result"].startswith("skipped") else f"{r['status'].upper()}: "
        lines.append(f"{r['check'].ljust(width)}  {status}{r['result']}")
        if r["fix"] and r["status"] not in ("ok", "skipped"):
            lines.append(f"{' ' * width}    -> {r['fix']}")
    return "\n".join(lines)


def exit_status(rows: list[dict[str, str]]) -> int:
    return 1 if any(r["status"] == "fail" for r in rows) else 0
