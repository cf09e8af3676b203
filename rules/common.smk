# Config validation, the experiment matrix, wildcard constraints, and the get_* input functions.
import functools
import os
import sys

# The workflow runs from a checkout: make its `rooflow` package importable for rule scripts and jobs
# even where it is not pip-installed (conda environments, cluster jobs).
sys.path.insert(0, workflow.basedir)
os.environ.update(
    PYTHONPATH=os.pathsep.join(
        p for p in (workflow.basedir, os.environ.get("PYTHONPATH")) if p
    )
)

from rooflow.config import validate_config, experiment_matrix
from rooflow.hardware.devices import load_devices
from rooflow.errors import RooflowError

try:
    validate_config(config, workdir=".", source="config")
except RooflowError as error:
    # One sentence naming the key and the fix, and nothing else: a WorkflowError would add a
    # traceback frame pointing into this file, which is not where the user's mistake is.
    print(f"rooflow: {error}", file=sys.stderr)
    sys.exit(1)


onstart:
    # A job killed with SIGKILL (node loss, OOM killer, scancel after KillWait) cannot remove the
    # `.<output>.<random>.tmp` temporaries rooflow.io writes beside its outputs. Remove those beside the
    # outputs this run is about to make: Snakemake's lock (held while onstart runs) keeps every other
    # run of this workflow from writing them. Not run in dry-runs or inside cluster jobs (--no-hooks).
    from rooflow.io import remove_stale_temporaries

    for stale in remove_stale_temporaries(
        str(f) for f in workflow.persistence.all_outputfiles()
    ):
        print(
            f"rooflow: removed {stale}, left by a job that was killed",
            file=sys.stderr,
        )


def sorted_dicts(value):
    """The same data with every mapping's keys sorted, so params compare equal whatever the key order of
    the YAML (a re-dumped config must not re-run anything)."""
    if isinstance(value, dict):
        return {key: sorted_dicts(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [sorted_dicts(item) for item in value]
    return value


for key in list(config):
    config[key] = sorted_dicts(config[key])

DEVICES = load_devices(config["devices_file"])
MEASURED_DEVICES = config["devices"]
CUDA_DEVICES = [d for d in MEASURED_DEVICES if DEVICES[d].is_cuda]
RUNS = experiment_matrix(config)
IMPORTS = config["imports"]
RUN_PATTERN = "{model}/b{batch}-{precision}-{mode}"


wildcard_constraints:
    device="[a-z0-9][a-z0-9-]*",
    model="[a-z0-9]+(_[a-z0-9]+)*",
    batch=r"\d+",
    precision="fp32|tf32|fp16|bf16",
    mode="inference|training",


localrules:
    all,
    summarize,
    plot_roofline,
    plot_costs,
    estimate_model,
    predict_fit,
    record_unfit,


def run_path(run):
    return RUN_PATTERN.format(**run)


# The config `imports` by device × run: one dictionary lookup per job instead of a scan of the list
# (reversed: the first entry of a run wins, as the scan did).
IMPORTS_BY_RUN = {
    (e["device"], e["model"], str(e["batch"]), e["precision"], e["mode"]): e
    for e in reversed(IMPORTS)
}


def imported_run(wildcards):
    """The config `imports` entry for this device × run, or None when rooflow profiles it itself."""
    return IMPORTS_BY_RUN.get(
        (
            wildcards.device,
            wildcards.model,
            str(wildcards.batch),
            wildcards.precision,
            wildcards.mode,
        )
    )


def estimated_runs():
    """Every run the estimator must count: the matrix plus imported runs."""
    runs = {run_path(r): r for r in RUNS}
    for entry in IMPORTS:
        run = {k: entry[k] for k in ("model", "batch", "precision", "mode")}
        runs[run_path(run)] = run
    return list(runs.values())


def measured_runs():
    """(device, run) pairs with a timing job: every configured device × the matrix."""
    return [(device, run) for device in MEASURED_DEVICES for run in RUNS]


def _memory_checked(device):
    """GPUs whose runs are checked against their memory before submission (rules/estimate.smk predict_fit)."""
    return DEVICES[device].is_cuda and bool(DEVICES[device].memory_bytes)


def get_fit_pairs():
    """'device/model/bBATCH-PRECISION-MODE' of every run checked against its GPU's memory."""
    return [
        f"{device}/{run_path(run)}"
        for device, run in measured_runs()
        if _memory_checked(device)
    ]


def get_fit_estimates():
    return sorted(
        {
            f"results/estimate/{run_path(run)}/totals.json"
            for device, run in measured_runs()
            if _memory_checked(device)
        }
    )


@functools.cache
def _fit_table(path):
    from rooflow.io import read_json

    return read_json(path)


def run_fits(device, run):
    """False when the estimate says the run cannot fit the GPU's memory: it is then never submitted, and a
    record_unfit row says why (not an out-of-memory after queueing). Asks the predict_fit checkpoint (so
    Snakemake estimates first); CPUs and GPUs of unknown memory are not checked."""
    if not _memory_checked(device):
        return True
    table = _fit_table(checkpoints.predict_fit.get().output.fits)
    return table.get(f"{device}/{run_path(run)}", {}).get("fits") is not False


def get_timing_files(wildcards=None):
    """Each device × run's timing.json, or the record of a run that does not fit (record_unfit)."""
    return [
        f"results/profile/{device}/{run_path(run)}/"
        + ("timing.json" if run_fits(device, run) else "unfit.json")
        for device, run in measured_runs()
    ]


def _profiled_runs(tool):
    """(device, run) pairs with an aggregate of `tool` (ncu or nsys): profiled cuda runs + imports."""
    pairs = []
    if config["profiling"][tool]["enabled"]:
        pairs += [
            (device, run)
            for device in CUDA_DEVICES
            for run in RUNS
            if run_fits(device, run)
        ]
    pairs += [
        (e["device"], {k: e[k] for k in ("model", "batch", "precision", "mode")})
        for e in IMPORTS
        if e[tool]
    ]
    return pairs


def get_aggregate_files(tool):
    return [
        f"results/aggregate/{device}/{run_path(run)}/{tool}.json"
        for device, run in _profiled_runs(tool)
    ]


def get_aggregate_inputs(tool):
    """Input function: every aggregate of `tool` (evaluated when the estimates are known)."""

    def inputs(wildcards):
        return get_aggregate_files(tool)

    return inputs


def get_reconcile_files(wildcards=None):
    """reconcile.json of every ncu-profiled run (rooflow's own and imported ones)."""
    return [
        f"results/aggregate/{device}/{run_path(run)}/reconcile.json"
        for device, run in _profiled_runs("ncu")
    ]


def get_layer_tables(wildcards=None):
    """The per-layer measured vs estimated table (HTML) of every ncu-profiled run."""
    return [
        f"results/tables/layers_measured/{device}/{run_path(run)}.html"
        for device, run in _profiled_runs("ncu")
    ]


def _timed_run(wildcards):
    """Whether rooflow's timing job measured this device × run (not an import)."""
    run = (wildcards.model, int(wildcards.batch), wildcards.precision, wildcards.mode)
    return (
        imported_run(wildcards) is None
        and wildcards.device in MEASURED_DEVICES
        and any(
            (r["model"], int(r["batch"]), r["precision"], r["mode"]) == run
            for r in RUNS
        )
    )


def get_timeline_input(wildcards):
    """The timing job's kernel timeline of this run (for the timed vs profiled kernels), where rooflow timed it."""
    if not _timed_run(wildcards):
        return []
    return [
        f"results/profile/{wildcards.device}/{wildcards.model}/"
        f"b{wildcards.batch}-{wildcards.precision}-{wildcards.mode}/kernels.csv"
    ]


def get_device_timelines(wildcards):
    """The kernel timelines of the runs timed on this GPU (the time by kernel class when nsys is off)."""
    if wildcards.device not in CUDA_DEVICES:
        return []
    return [
        f"results/profile/{wildcards.device}/{run_path(run)}/kernels.csv"
        for run in RUNS
        if run_fits(wildcards.device, run)
    ]


def get_estimate_files(kind):
    return [f"results/estimate/{run_path(run)}/{kind}" for run in estimated_runs()]


def get_ceilings_files():
    return {device: f"results/ceilings/{device}.json" for device in MEASURED_DEVICES}


def get_ncu_inputs(wildcards):
    entry = imported_run(wildcards)
    if entry:
        return entry["ncu"]
    return rules.profile_ncu.output.csv


def get_ncu_plan(wildcards):
    """The distinct-mode plan profile_ncu writes beside its CSV; none for an imported profile."""
    if imported_run(wildcards):
        return []
    return rules.profile_ncu.output.plan


def get_nsys_inputs(wildcards):
    entry = imported_run(wildcards)
    if entry:
        return entry["nsys"]
    return [rules.profile_nsys.output.kern_sum, rules.profile_nsys.output.trace]


def get_plot_devices():
    return sorted(set(MEASURED_DEVICES) | {e["device"] for e in IMPORTS})


def get_final_outputs(wildcards=None):
    """The targets of the default rule: the summary and every report item (get_report_outputs)."""
    return ["results/summary.csv", *get_report_outputs()]


# SLURM resources: each device's `slurm:` block in the catalogue; runtime and memory grow with the
# attempt number, so a job killed for time or memory is retried with more (--retries in the profile).


def device_slurm(wildcards):
    return DEVICES[wildcards.device].slurm


def device_kind(wildcards):
    return DEVICES[wildcards.device].kind


def slurm_option(key):
    """Input function for one resource from the device's `slurm:` block (None, i.e. unset, when absent).

    None outright where no configured device sets the key (qos and constraint, usually): Snakemake then
    evaluates nothing for it, where a callable costs about a millisecond per job and resource (a 2,000-job
    DAG evaluates thousands)."""
    if not any(key in DEVICES[device].slurm for device in MEASURED_DEVICES):
        return None

    def option(wildcards):
        return device_slurm(wildcards).get(key)

    return option


def runtime_minutes(wildcards, attempt):
    return device_slurm(wildcards).get("runtime", 60) * attempt


def mem_mb(wildcards, attempt):
    return device_slurm(wildcards).get("mem_mb", 8000) * attempt


def _device_threads(wildcards):
    """CPU threads for a device's jobs: all local cores in a local run (timing jobs then run one at a
    time, so they never share cores); the device's slurm cpus_per_task on a cluster, both where the job
    is submitted (sbatch --cpus-per-task) and inside the job (torch threads). workflow.cores is not
    defined when submitting to a cluster, and inside a job it would be the whole node.
    """
    if workflow.local_exec and not workflow.remote_exec:
        return workflow.cores
    return device_slurm(wildcards).get("cpus_per_task") or 1


def _local_cores():
    """workflow.cores in a local run where it is a number; None elsewhere (on a cluster, and inside a cluster
    job, where reading workflow.cores raises)."""
    if not (workflow.local_exec and not workflow.remote_exec):
        return None
    try:
        cores = workflow.cores
    except WorkflowError:
        return None
    return cores if isinstance(cores, int) else None


# In a local run every device's jobs get all cores: a number, not a function evaluated per job.
device_threads = _local_cores() or _device_threads


def device_architecture(wildcards):
    return DEVICES[wildcards.device].architecture


def get_plot_ceilings(wildcards):
    """The device's measured ceilings, when this workflow measures them (not for import-only devices)."""
    if wildcards.device in MEASURED_DEVICES:
        return [f"results/ceilings/{wildcards.device}.json"]
    return []


def get_report_outputs():
    """Every figure and table of the report (rule all asks for these)."""
    devices = get_plot_devices()
    outputs = [
        rules.check_runs.output.report,
        rules.check_runs.output.overview,
        rules.plot_roofline_interactive.output.page,
        rules.plot_costs.output.flops,
        rules.plot_costs.output.params,
        rules.plot_correlation.output.figure,
        rules.plot_forward_backward.output.figure,
        rules.tabulate_summary.output.table,
        rules.tabulate_environment.output.table,
    ]
    for pattern in (
        "results/plots/roofline/{device}.svg",
        "results/plots/latency/{device}.svg",
        "results/plots/throughput/{device}.svg",
        "results/plots/predicted/{device}.svg",
        "results/plots/time_by_layer/{device}.svg",
    ):
        outputs += expand(pattern, device=devices)
    outputs += [
        f"results/tables/layers/{run_path(run)}.html" for run in estimated_runs()
    ]
    outputs += get_layer_tables()
    return outputs


def get_device_aggregates(tool):
    """Input function: the `tool` (ncu or nsys) aggregates of the runs profiled on this device."""

    def inputs(wildcards):
        prefix = f"results/aggregate/{wildcards.device}/"
        return [path for path in get_aggregate_files(tool) if path.startswith(prefix)]

    return inputs
