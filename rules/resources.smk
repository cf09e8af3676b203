# Per-job resources and threads, derived from the device catalogue (config/devices.yaml).


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
