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

from rooflow.config import (
    check_cluster_submission,
    config_digest,
    validate_config,
    experiment_matrix,
    model_specs,
)
from snakemake_interface_executor_plugins.settings import ExecMode
from rooflow.hardware.devices import load_devices
from rooflow.errors import RooflowError
from rooflow.config_io import check_unique_keys
from rooflow.conventions import VARIANTS, variant_suffix, variant_of_suffix

try:
    for (
        path
    ) in (
        workflow.configfiles
    ):  # Snakemake's YAML reader keeps a repeated key's last value silently
        check_unique_keys(path)
    validate_config(config, workdir=".", source="config")
except RooflowError as error:
    # One sentence naming the key and the fix, and nothing else: a WorkflowError would add a
    # traceback frame pointing into this file, which is not where the user's mistake is.
    print(f"rooflow: {error}", file=sys.stderr)
    sys.exit(1)


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

# A SLURM run (its profile's default-resources name an account): its placeholders, before anything is submitted.
# Not inside a job (remote or subprocess): the submitting run checked already.
if (
    workflow.exec_mode == ExecMode.DEFAULT
    and workflow.resource_settings.default_resources is not None
):
    try:
        check_cluster_submission(
            {
                name: getattr(resource, "raw", None)
                for name, resource in workflow.resource_settings.default_resources.items()
            },
            DEVICES,
            MEASURED_DEVICES,
            config["devices_file"],
        )
    except RooflowError as error:
        print(f"rooflow: {error}", file=sys.stderr)
        sys.exit(1)
CUDA_DEVICES = [d for d in MEASURED_DEVICES if DEVICES[d].is_cuda]
RUNS = experiment_matrix(config)
IMPORTS = config["imports"]
# the user's own GPUs' kernel calibrations: inputs of the jobs that predict times, so a new fit re-runs them
KERNEL_CALIBRATIONS = config["kernel_calibrations"]
# names the results' configuration page (record_config's output); a changed config is a page only a run makes
CONFIG_DIGEST = config_digest(config)
RUN_PATTERN = "{model}/b{batch}-{precision}-{mode}"
# A measured run's name adds its variant unless it is eager (conventions.variant_suffix): eager paths, and the
# results cached under them, are what they were before variants. The estimate, shared by the variants, keeps
# RUN_PATTERN; timings, ncu/nsys profiles and their aggregates use TIMED_RUN_PATTERN.
TIMED_RUN_PATTERN = f"{RUN_PATTERN}{{variant}}"
VARIANT_SUFFIXES = "|".join(variant_suffix(v) for v in VARIANTS if v != "eager")
MODEL_SPECS = model_specs(config)


wildcard_constraints:
    device="[a-z0-9][a-z0-9-]*",
    model="[a-z0-9]+(_[a-z0-9]+)*",
    batch=r"\d+",
    precision="fp32|tf32|fp16|bf16",
    mode="inference|training",
    variant=f"({VARIANT_SUFFIXES})?",


localrules:
    all,
    summarize,
    plot_roofline,
    plot_costs,
    estimate_model,
    predict_fit,
    record_unfit,


def run_path(run):
    """The run's estimate name (variant-independent)."""
    return RUN_PATTERN.format(**run)


def fill(pattern, run, device=None):
    """A rule's output pattern (`rules.<name>.output.<item>`) for one run (and device): the input functions
    below take every path from the rule that writes it, never from a second copy of the pattern.
    """
    suffix = variant_suffix(run.get("variant", "eager"))
    return str(pattern).format(device=device, **{**run, "variant": suffix})


def get_variant(wildcards):
    """The timed run's variant (eager, channels_last, compile) from its name's suffix."""
    return variant_of_suffix(wildcards.variant)


def get_model_spec(wildcards):
    """The run's model as the jobs build it (rooflow.workload.spec): a torchvision name, or a custom
    model's factory, inputs and loss (a change to those re-runs its jobs)."""
    spec = MODEL_SPECS.get(wildcards.model)
    return spec.as_dict() if spec else {"name": wildcards.model}


# The config `imports` by device × run: one dictionary lookup per job instead of a scan of the list
# (reversed: the first entry of a run wins, as the scan did).
IMPORTS_BY_RUN = {
    (e["device"], e["model"], str(e["batch"]), e["precision"], e["mode"]): e
    for e in reversed(IMPORTS)
}


def imported_run(wildcards):
    """The config `imports` entry for this device × run, or None when rooflow profiles it itself (imported
    profiles are of eager steps)."""
    if wildcards.get("variant"):
        return None
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
    """'device/model/bBATCH-PRECISION-MODE' of every run checked against its GPU's memory (once for all its
    variants: the estimate is the same)."""
    return sorted(
        {
            f"{device}/{run_path(run)}"
            for device, run in measured_runs()
            if _memory_checked(device)
        }
    )


def get_fit_estimates():
    return sorted(
        {
            fill(rules.estimate_model.output.totals, run)
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
        fill(
            (
                rules.profile_time.output.timing
                if run_fits(device, run)
                else rules.record_unfit.output.unfit
            ),
            run,
            device,
        )
        for device, run in measured_runs()
    ]


def _profiled_runs(tool):
    """(device, run) pairs with an aggregate of `tool` (ncu or nsys): profiled cuda runs, every variant (a
    compiled step is profiled whole: rooflow.measure.driver), + imports (eager)."""
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


def _aggregate_output(tool):
    return {
        "ncu": rules.aggregate_ncu.output.totals,
        "nsys": rules.aggregate_nsys.output.totals,
    }[tool]


def get_aggregate_files(tool, device=None, eager_only=False):
    """The `tool` aggregates of every profiled run (of one device, where given; of eager steps only, where
    asked)."""
    return [
        fill(_aggregate_output(tool), run, d)
        for d, run in _profiled_runs(tool)
        if device in (None, d)
        and not (eager_only and run.get("variant", "eager") != "eager")
    ]


def get_aggregate_inputs(tool):
    """Input function: every aggregate of `tool` (evaluated when the estimates are known)."""

    def inputs(wildcards):
        return get_aggregate_files(tool)

    return inputs


def get_reconcile_files(wildcards=None):
    """reconcile.json of every ncu-profiled run (rooflow's own and imported ones)."""
    return [
        fill(rules.reconcile_ncu.output.reconciliation, run, device)
        for device, run in _profiled_runs("ncu")
    ]


def get_layer_tables(wildcards=None):
    """The per-layer measured vs estimated table (HTML) of every ncu-profiled run."""
    return [
        fill(rules.reconcile_ncu.output.table, run, device)
        for device, run in _profiled_runs("ncu")
    ]


def _timed_run(wildcards):
    """Whether rooflow's timing job measured this device × run × variant (not an import)."""
    run = (
        wildcards.model,
        int(wildcards.batch),
        wildcards.precision,
        wildcards.mode,
        get_variant(wildcards),
    )
    return (
        imported_run(wildcards) is None
        and wildcards.device in MEASURED_DEVICES
        and any(
            (r["model"], int(r["batch"]), r["precision"], r["mode"], r["variant"])
            == run
            for r in RUNS
        )
    )


def get_timeline_input(wildcards):
    """The timing job's kernel timeline of this profiled run and variant, for the timed vs profiled kernels,
    where rooflow timed it."""
    if not _timed_run(wildcards):
        return []
    run = {k: wildcards[k] for k in ("model", "batch", "precision", "mode")}
    run["variant"] = get_variant(wildcards)
    return [fill(rules.profile_time.output.kernels, run, wildcards.device)]


def get_imported_nsys_kernels(wildcards):
    """An imported run's Nsight Systems kernels, where it has them beside its Nsight Compute profile: the kernels
    its time is the sum of, compared with those its counters profiled (the timed vs profiled kernels).
    """
    entry = imported_run(wildcards)
    if not entry or not entry.get("nsys"):
        return []
    run = {k: wildcards[k] for k in ("model", "batch", "precision", "mode")}
    return [fill(rules.aggregate_nsys.output.kernels, run, wildcards.device)]


def get_device_timings(wildcards):
    """The timing records of the eager runs timed on this device (their measured time per layer; the time by
    layer type is of the eager step, as the profiles are)."""
    return [
        fill(rules.profile_time.output.timing, run, wildcards.device)
        for run in RUNS
        if wildcards.device in MEASURED_DEVICES
        and run["variant"] == "eager"
        and run_fits(wildcards.device, run)
    ]


def get_device_timelines(wildcards):
    """The kernel timelines of the runs timed on this GPU (the time by kernel class when nsys is off)."""
    if wildcards.device not in CUDA_DEVICES:
        return []
    return [
        fill(rules.profile_time.output.kernels, run, wildcards.device)
        for run in RUNS
        if run["variant"] == "eager" and run_fits(wildcards.device, run)
    ]


def get_estimate_files(item):
    """One output (totals, layers, ops) of every run's estimate."""
    return [fill(rules.estimate_model.output[item], run) for run in estimated_runs()]


def get_ceilings_files():
    return {
        device: rules.measure_ceilings.output.ceilings.format(device=device)
        for device in MEASURED_DEVICES
    }


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


def get_home_rooflines(wildcards=None):
    """Each device's roofline for the home page: the devices this workflow measures first, in the config's
    order, then those of imported profiles."""
    imported = sorted({e["device"] for e in IMPORTS} - set(MEASURED_DEVICES))
    return [
        f"results/plots/roofline/{device}.svg"
        for device in [*MEASURED_DEVICES, *imported]
    ]


def get_final_outputs(wildcards=None):
    """The targets of the default rule: the summary and every report item (get_report_outputs)."""
    return [
        rules.summarize.output.summary,
        rules.record_config.output.page,
        *get_report_outputs(),
    ]


def get_plot_ceilings(wildcards):
    """The device's measured ceilings, when this workflow measures them (not for import-only devices)."""
    if wildcards.device in MEASURED_DEVICES:
        return [rules.measure_ceilings.output.ceilings.format(device=wildcards.device)]
    return []


def get_report_outputs():
    """Every figure and table of the report (rule all asks for these)."""
    devices = get_plot_devices()
    outputs = [
        rules.check_runs.output.report,
        rules.check_runs.output.overview,
        rules.check_runs.output.records,
        rules.tabulate_home.output.page,
        rules.plot_roofline_interactive.output.page,
        rules.plot_costs.output.flops,
        rules.plot_costs.output.params,
        rules.plot_correlation.output.figure,
        rules.plot_forward_backward.output.figure,
        rules.tabulate_summary.output.table,
        rules.tabulate_environment.output.table,
    ]
    for pattern in (
        rules.plot_roofline.output.figure,
        rules.plot_latency.output.latency,
        rules.plot_latency.output.throughput,
        rules.plot_latency.output.predicted,
        rules.plot_time_by_layer.output.figure,
    ):
        outputs += expand(pattern, device=devices)
    outputs += expand(
        [
            rules.tabulate_what_if.output.try_next,
            rules.tabulate_what_if.output.cross_gpu,
        ],
        device=MEASURED_DEVICES,
    )
    outputs += [
        fill(rules.tabulate_layers.output.table, run) for run in estimated_runs()
    ]
    outputs += get_layer_tables()
    return outputs


def get_device_aggregates(tool, eager_only=False):
    """Input function: the `tool` (ncu or nsys) aggregates of the runs profiled on this device (of its eager
    steps only, where asked)."""

    def inputs(wildcards):
        return get_aggregate_files(tool, wildcards.device, eager_only)

    return inputs
