"""The GPU rules as a cluster user's dry-run shows them: per device the ncu/nsys/timing/ceilings jobs, each
with the SLURM partition and gres of its catalogue entry — after the estimates, which decide (the
predict_fit checkpoint) whether a run fits its GPU; one that cannot is never submitted."""

import json
import re
import subprocess

import pytest
from conftest import copy_workflow


def _estimated_copy(tmp_path_factory, snakemake_exe, config: str):
    """A copy of the workflow whose estimates and fit table are built (local, seconds): what a user has after
    `snakemake --until predict_fit`, and what Snakemake itself runs first."""
    workdir = copy_workflow(tmp_path_factory.mktemp("gpu"))
    built = subprocess.run([snakemake_exe, "--cores", "2", "--configfile", config, "--until", "predict_fit"],
                           cwd=workdir, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    return workdir


def _dry_run(workdir, snakemake_exe, config: str) -> str:
    result = subprocess.run([snakemake_exe, "-n", "--cores", "2", "--configfile", config],
                            cwd=workdir, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout + result.stderr


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory, snakemake_exe):
    workdir = _estimated_copy(tmp_path_factory, snakemake_exe, "tests/configs/gpu.yaml")
    return _dry_run(workdir, snakemake_exe, "tests/configs/gpu.yaml")


def test_first_dry_run_estimates_before_anything_is_submitted(root, snakemake_exe, tmp_path):
    """From nothing, the DAG holds the estimates and the fit checkpoint; the GPU jobs come after it."""
    workdir = copy_workflow(tmp_path / "fresh")
    output = _dry_run(workdir, snakemake_exe, "tests/configs/gpu.yaml")
    found = {rule for rule, _, _ in jobs(output)}
    assert {"estimate_model", "predict_fit"} <= found and "profile_ncu" not in found


def test_a_run_that_cannot_fit_is_not_submitted(tmp_path_factory, snakemake_exe):
    """VGG16 training at batch 256 (32.4 GB measured on an H100) on a 16 GB T4: a record_unfit row, no
    profiling job; ResNet-18 at the same batch fits and is profiled."""
    config = "tests/configs/unfit.yaml"
    workdir = _estimated_copy(tmp_path_factory, snakemake_exe, config)
    fits = json.loads((workdir / "results/fit/fits.json").read_text())
    assert fits["t4/vgg16/b256-fp32-training"]["fits"] is False
    assert "does not fit: needs 20.5 GB" in fits["t4/vgg16/b256-fp32-training"]["verdict"]
    assert fits["t4/resnet18/b256-fp32-training"]["fits"] is True
    found = jobs(_dry_run(workdir, snakemake_exe, config))
    submitted = {(rule, wildcards) for rule, wildcards, _ in found if rule.startswith("profile_")}
    assert submitted and all("model=resnet18" in wildcards for _, wildcards in submitted)
    assert [w for r, w, _ in found if r == "record_unfit"] == \
        ["device=t4, model=vgg16, batch=256, precision=fp32, mode=training, variant="]  # eager: no suffix


def jobs(output):
    """(rule, wildcards, resources) per job block of a dry-run."""
    blocks = re.split(r"\n(?=(?:local)?(?:rule|checkpoint) )", output)
    found = []
    for block in blocks:
        rule = re.match(r"(?:local)?(?:rule|checkpoint) (\w+):", block)
        wildcards = re.search(r"wildcards: (.*)", block)
        resources = re.search(r"resources: (.*)", block)
        if rule:
            found.append((rule.group(1), wildcards.group(1) if wildcards else "",
                          resources.group(1) if resources else ""))
    return found


@pytest.mark.parametrize("device,gres", [("a100-sxm4-40gb", "gpu:a100:1"), ("v100-sxm2-16gb", "gpu:v100:1")])
def test_each_gpu_gets_profiling_jobs_with_its_gres(dry_run, device, gres):
    mine = [(r, w, res) for r, w, res in jobs(dry_run) if f"device={device}" in w and "gres=" in res]
    rules = sorted({r for r, _, _ in mine})
    assert rules == ["measure_ceilings", "profile_ncu", "profile_nsys", "profile_time"]
    # 1 model × 1 batch × 2 precisions × 1 mode: timed and profiled (ncu, nsys) as eager and as compiled (a
    # compiled step profiled whole: rooflow.measure.driver)
    for rule in ("profile_time", "profile_ncu", "profile_nsys"):
        assert sorted(w.split("variant=")[-1] for r, w, _ in mine if r == rule) == \
            ["", "", "-compile", "-compile"], rule
    for _, _, resources in mine:
        assert f"gres={gres}" in resources and "slurm_partition=gpu" in resources
        assert "runtime=" in resources and "mem_mb=" in resources
        # keys no configured device sets are not resources at all (no function evaluated per job)
        assert "qos=" not in resources and "constraint=" not in resources


def test_cpu_jobs_get_the_cpu_partition_and_no_gres(dry_run):
    cpu = [res for r, w, res in jobs(dry_run) if r == "profile_time" and "device=cpu" in w]
    assert cpu and all("slurm_partition=cpu" in res and "gres" not in res for res in cpu)


def test_aggregates_follow_the_profiles_and_need_no_gpu(dry_run):
    found = jobs(dry_run)
    rules = [r for r, _, _ in found]
    # 2 GPUs × 2 precisions × 2 variants; the reconciliation after each ncu aggregate
    assert rules.count("aggregate_ncu") == 8 and rules.count("aggregate_nsys") == 8
    assert rules.count("reconcile_ncu") == 8
    assert all("gres" not in res for r, _, res in found if r.startswith("aggregate_"))


def test_the_shipped_slurm_profile_is_refused_until_its_account_is_set(root, snakemake_exe, tmp_path):
    """`snakemake --profile profiles/slurm` as shipped (slurm_account 'CHANGE-ME') dry-ran and submitted every job
    under that account: refused where accounts are enforced, each job its own sbatch error, or charged to a name
    that is no account. It ends before the DAG in one sentence naming the profile key and where to find the account;
    with the account set, a GPU device whose catalogue entry asks for no gres is refused the same way (its jobs
    would run on a node without a GPU)."""
    import yaml

    workdir = copy_workflow(tmp_path / "run")
    shipped = subprocess.run([snakemake_exe, "-n", "--profile", str(root / "profiles" / "slurm"), "--configfile",
                              "tests/configs/gpu.yaml"], cwd=workdir, capture_output=True, text=True, timeout=300)
    assert shipped.returncode == 1
    error = shipped.stderr.strip().splitlines()[-1]
    assert error.startswith("rooflow: the SLURM profile's slurm_account is still the placeholder 'CHANGE-ME': set it")
    assert "sacctmgr show assoc user=$USER" in error and "Traceback" not in shipped.stderr
    profile = tmp_path / "slurm"
    profile.mkdir()
    (profile / "config.yaml").write_text(
        (root / "profiles" / "slurm" / "config.yaml").read_text().replace("'CHANGE-ME'", "'physics'"))
    devices = yaml.safe_load((root / "config" / "devices.yaml").read_text())
    del devices["a100-sxm4-40gb"]["slurm"]
    (workdir / "nogres.yaml").write_text(yaml.safe_dump(devices))
    bare = subprocess.run([snakemake_exe, "-n", "--profile", str(profile), "--configfile", "tests/configs/gpu.yaml",
                           "--config", "devices_file=nogres.yaml"], cwd=workdir, capture_output=True, text=True,
                          timeout=300)
    assert bare.returncode == 1 and bare.stderr.strip().splitlines()[-1] == (
        "rooflow: nogres.yaml: GPU device 'a100-sxm4-40gb' has no gres in its slurm: block, so its profiling jobs "
        "would run on a node without a GPU: add e.g. slurm: {partition: gpu, gres: \"gpu:<type>:1\"} with your "
        "site's partition and gres type (scontrol show node | grep Gres)")
    fine = subprocess.run([snakemake_exe, "-n", "--profile", str(profile), "--configfile", "tests/configs/gpu.yaml"],
                          cwd=workdir, capture_output=True, text=True, timeout=300)
    assert fine.returncode == 0, fine.stderr[-3000:]
