"""The GPU rules as a cluster user's first dry-run shows them: per device the ncu/nsys/timing/ceilings jobs,
each with the SLURM partition and gres of its catalogue entry."""

import re
import subprocess

import pytest


@pytest.fixture(scope="module")
def dry_run(root, snakemake_exe):
    result = subprocess.run([snakemake_exe, "-n", "--cores", "2", "--configfile", "tests/configs/gpu.yaml"],
                            cwd=root, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout + result.stderr


def jobs(output):
    """(rule, wildcards, resources) per job block of a dry-run."""
    blocks = re.split(r"\n(?=(?:local)?rule )", output)
    found = []
    for block in blocks:
        rule = re.match(r"(?:local)?rule (\w+):", block)
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
    # 1 model × 1 batch × 2 precisions × 1 mode, for each of the three profiling rules
    assert sum(r.startswith("profile_") for r, _, _ in mine) == 6
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
    assert rules.count("aggregate_ncu") == 4 and rules.count("aggregate_nsys") == 4
    assert all("gres" not in res for r, _, res in found if r.startswith("aggregate_"))
