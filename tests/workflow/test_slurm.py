"""The cluster path on a real SLURM (issue 5).

`tests/slurm/start-cluster.sh` installs (apt) and starts a one-node SLURM on loopback: partitions `cpu`
(default) and `gpu` with fake GPUs `gpu:a100` and `gpu:v100`, accounting through slurmdbd. The tests run
the workflow the way a user does on a cluster -- `snakemake --profile slurm` with profiles/slurm/
copied to the user's config directory and only `slurm_account` edited -- plus a test-only profile that
polls every second and keeps the plugin's logs. Then:

* every non-local job went through sbatch (ids in the main log, in .snakemake/slurm_logs/ and in
  `sacct` with the rule's partition, the account and the device's time limit);
* outputs have the same shape as a local run's (same files; summary.csv same columns and runs);
* re-running submits nothing;
* a job of a GPU device goes to partition `gpu` with `--gres=gpu:a100:1`; as the fake GPU cannot run
  CUDA it fails, is retried with twice the time and memory, and leaves no output behind;
* load (issue 14): a sweep of 100 cheap jobs (tests/slurm/sweep/) through the cluster with the same
  profile, four made to fail once (each retried through sbatch with twice the time and memory, then
  completed) and one made to fail on every attempt (reported with its logs; every other result kept).
  Its wall time is printed (`[slurm] 100-job sweep: ...`).

Needs root and apt-get (CI: a fresh Debian as root); elsewhere skipped with the reason. Run:

    .venv/bin/pytest -m slurm tests/workflow/test_slurm.py -v

Environment: ROOFLOW_SLURM_BASE (cluster state, default /tmp/rooflow-slurm), ROOFLOW_SLURM_ACCOUNTING=0
(no slurmdbd; status via squeue, history from the jobcomp file). A cluster already running under
ROOFLOW_SLURM_BASE is reused and left running; one this fixture starts is stopped afterwards.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import copy_run, copy_workflow, report_line

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CLUSTER_SCRIPT = ROOT / "tests" / "slurm" / "start-cluster.sh"
BASE = Path(os.environ.get("ROOFLOW_SLURM_BASE", "/tmp/rooflow-slurm"))
ACCOUNTING = os.environ.get("ROOFLOW_SLURM_ACCOUNTING", "1") == "1"
ACCOUNT = os.environ.get("ROOFLOW_SLURM_ACCOUNT", "rooflow-ci")
PLACEHOLDER = "'CHANGE-ME'"  # the account in profiles/slurm/config.yaml, edited by every user
GPU_DEVICE = "a100-sxm4-40gb"
PER_DEVICE_RULES = {"profile_time", "measure_ceilings", "profile_ncu", "profile_nsys"}
RUN_TIMEOUT_S = 1200  # the whole tiny matrix; `timeout -s INT` (SIGTERM does not stop a hung snakemake)

SUBMITTED = re.compile(r"has been submitted with SLURM jobid (\d+) \(log: (\S+?)\)\.?$", re.MULTILINE)
SBATCH_CALL = re.compile(r"^sbatch call: (.*?) --wrap", re.MULTILINE)
CLUSTER_RULE = re.compile(r"^rule (\w+):$", re.MULTILINE)  # local jobs print `localrule <name>:`


def report(message: str) -> None:
    """A line in the report at the end of pytest's output (timings), from whichever worker ran it."""
    report_line(f"[slurm] {message}")


def cluster_script(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, ROOFLOW_SLURM_BASE=str(BASE), ROOFLOW_SLURM_ACCOUNTING="1" if ACCOUNTING else "0",
               ROOFLOW_SLURM_ACCOUNT=ACCOUNT)
    return subprocess.run(["bash", str(CLUSTER_SCRIPT), *args], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.fixture(scope="session")
def slurm_cluster():
    """A running one-node SLURM; installs its packages first when missing (CI runs as root)."""
    if os.geteuid() != 0:
        pytest.skip("SLURM test cluster needs root (apt-get install, daemons run as root/munge/mysql)")
    tools = ["slurmctld", "slurmd", "sbatch", "munged"] + (["slurmdbd", "mariadbd"] if ACCOUNTING else [])
    if any(shutil.which(t) is None for t in tools) and shutil.which("apt-get") is None:
        pytest.skip("SLURM is not installed and there is no apt-get to install it (Debian/Ubuntu only)")

    t0 = time.monotonic()
    done = cluster_script("install")
    assert done.returncode == 0, f"start-cluster.sh install failed:\n{done.stdout}\n{done.stderr}"
    last = (done.stderr.strip().splitlines() or [""])[-1]
    report(f"install: {time.monotonic() - t0:.1f} s ({last})")

    started_here = cluster_script("status").returncode != 0
    if started_here:
        t0 = time.monotonic()
        done = cluster_script("up", "--fresh")
        assert done.returncode == 0, f"start-cluster.sh up failed:\n{done.stdout}\n{done.stderr}"
        report(f"cluster up: {time.monotonic() - t0:.1f} s")
    else:
        report(f"reusing the cluster already running under {BASE}")
    try:
        yield BASE
    finally:
        if started_here:
            t0 = time.monotonic()
            done = cluster_script("down")
            report(f"cluster down: {time.monotonic() - t0:.1f} s")


def workflow_copy(target: Path) -> Path:
    """A fresh copy of the workflow (conftest.copy_workflow) in a new directory `target`."""
    target.mkdir(parents=True)
    return copy_workflow(target)


def install_user_profile(home: Path) -> Path:
    """What docs/cluster.md tells users: copy profiles/slurm/ to ~/.config/snakemake/slurm/ and set the
    account. `home` stands in for $XDG_CONFIG_HOME (~/.config)."""
    target = home / "snakemake" / "slurm"
    target.mkdir(parents=True)
    text = (ROOT / "profiles" / "slurm" / "config.yaml").read_text()
    assert text.count(PLACEHOLDER) == 1, f"profiles/slurm/config.yaml must hold {PLACEHOLDER} exactly once"
    (target / "config.yaml").write_text(text.replace(PLACEHOLDER, f"'{ACCOUNT}'"))
    return target


def write_ci_profile(directory: Path) -> Path:
    """Test-only overrides on top of the user's profile: poll every second (the plugin's defaults make
    a small workflow take minutes), keep the logs of successful jobs to check their ids, few jobs at
    once (2 shared cores)."""
    directory.mkdir(parents=True)
    settings = {
        "seconds-between-status-checks": 1,
        "slurm-init-seconds-before-status-checks": 1,
        "slurm-keep-successful-logs": True,
        "latency-wait": 5,
        "jobs": 3,
    }
    if not ACCOUNTING:
        # no slurmdbd: sacct fails, and the plugin would wait forever (tests/slurm/start-cluster.sh)
        settings["slurm-status-command"] = "squeue"
    (directory / "config.yaml").write_text(yaml.safe_dump(settings))
    return directory


@pytest.fixture(scope="session")
def cluster_env(tmp_path_factory):
    """Environment and profile arguments of a user's cluster run: `--profile slurm` resolves to the
    copy in $XDG_CONFIG_HOME/snakemake/slurm/, then the CI overrides."""
    root = tmp_path_factory.mktemp("slurm-profiles")
    install_user_profile(root / "xdg")
    ci = write_ci_profile(root / "ci-profile")
    env = dict(os.environ, XDG_CONFIG_HOME=str(root / "xdg"))
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env, ["--profile", "slurm", "--profile", str(ci)]


def snakemake(workdir: Path, args: list[str], env: dict, log: Path, timeout_s: int = RUN_TIMEOUT_S):
    """Run snakemake under `timeout -s INT`; its combined output goes to `log` and is returned."""
    with log.open("w") as out:
        done = subprocess.run(["timeout", "-s", "INT", str(timeout_s), str(BIN / "snakemake"), *args],
                              cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    text = log.read_text()
    assert done.returncode != 124, f"snakemake ran past {timeout_s} s; log {log}:\n{text[-4000:]}"
    return done.returncode, text


def result_files(workdir: Path) -> set[str]:
    return {str(p.relative_to(workdir)) for p in (workdir / "results").rglob("*") if p.is_file()}


def read_csv(path: Path) -> tuple[list[str], list[dict]]:
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def minutes(limit: str) -> int:
    """SLURM time limit ('D-HH:MM:SS', 'HH:MM:SS', 'MM:SS' or plain minutes) in minutes."""
    days, _, clock = limit.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    if len(parts) == 1:
        return parts[0] + 1440 * int(days or 0)
    while len(parts) < 3:
        parts.insert(0, 0)
    h, m, s = parts
    return 1440 * int(days or 0) + 60 * h + m + (1 if s else 0)


def job_history(ids: list[str], settle_s: float = 60) -> dict[str, dict]:
    """What SLURM recorded about these jobs once they all ended: sacct (slurmdbd) or, without
    accounting, the jobcomp file. Keys: name, partition, account, state, limit_minutes, tres."""
    final = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL")
    deadline = time.monotonic() + settle_s
    while True:
        history: dict[str, dict] = {}
        if ACCOUNTING:
            out = subprocess.run(
                ["sacct", "-n", "-X", "-P", "-j", ",".join(ids),
                 "-o", "JobID,JobName%100,Partition,Account,State,Timelimit,ReqTRES%200,Comment%200"],
                capture_output=True, text=True, check=True).stdout
            for line in out.splitlines():
                jid, name, partition, account, state, limit, tres, comment = line.split("|")
                history[jid] = {"name": name, "partition": partition, "account": account,
                                "state": state.split()[0], "limit_minutes": minutes(limit), "tres": tres,
                                "comment": comment}
        else:
            jobcomp = BASE / "log" / "jobcomp.log"
            for line in jobcomp.read_text().splitlines() if jobcomp.exists() else []:
                fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
                if fields.get("JobId") in ids:
                    history[fields["JobId"]] = {
                        "name": fields["Name"], "partition": fields["Partition"], "account": fields["Account"],
                        "state": fields["JobState"], "limit_minutes": int(fields["TimeLimit"]),
                        "tres": fields["Tres"], "comment": ""}
        # slurmdbd fills a record in steps: partition and TRES can lag behind the final state
        if set(history) >= set(ids) and all(h["state"] in final and h["partition"] and h["tres"]
                                            for h in history.values()):
            return history
        if time.monotonic() > deadline:
            missing = sorted(set(ids) - set(history))
            raise AssertionError(f"SLURM has no final record of jobs {missing} after {settle_s} s: {history}")
        time.sleep(1)


def slurm_log_ids(workdir: Path) -> dict[str, str]:
    """Job id -> rule, from the plugin's log tree .snakemake/slurm_logs/rule_<rule>/<wildcards>/<id>.log."""
    logs = workdir / ".snakemake" / "slurm_logs"
    return {p.stem: p.relative_to(logs).parts[0].removeprefix("rule_") for p in logs.rglob("*.log")}


@pytest.fixture(scope="session")
def local_run(tiny_run):
    """The tiny matrix run locally (conftest.tiny_run, shared with the workflow tests): the reference
    for the cluster run's outputs."""
    return tiny_run


@pytest.fixture(scope="session")
def cluster_run(slurm_cluster, cluster_env, tmp_path_factory):
    """The tiny matrix through `snakemake --profile slurm` on the test cluster."""
    env, profiles = cluster_env
    workdir = copy_workflow(tmp_path_factory.mktemp("cluster"))
    t0 = time.monotonic()
    rc, text = snakemake(workdir, [*profiles, "--configfile", "tests/configs/tiny.yaml", "--verbose"], env,
                         workdir / "snakemake.log")
    assert rc == 0, f"cluster run failed (log {workdir / 'snakemake.log'}):\n{text[-6000:]}"
    report(f"cluster tiny run: {time.monotonic() - t0:.1f} s")
    return workdir, text


@pytest.mark.slurm
@pytest.mark.slow
def test_every_cluster_job_went_through_sbatch(cluster_run):
    workdir, text = cluster_run
    submitted = {jid: log for jid, log in SUBMITTED.findall(text)}
    cluster_jobs = CLUSTER_RULE.findall(text)
    assert cluster_jobs, "no job ran on the cluster"
    assert len(submitted) == len(cluster_jobs), (len(submitted), sorted(cluster_jobs))
    # every local-only rule stayed local
    assert not {"summarize", "plot_roofline", "plot_costs", "all"} & set(cluster_jobs)

    # the plugin's log of every job is where the main log says, named by the SLURM job id
    for jid, log in submitted.items():
        assert Path(log).is_file() and Path(log).stem == jid, log
    by_log = slurm_log_ids(workdir)
    assert set(by_log) == set(submitted)

    # sbatch got the profile's account and, for per-device jobs, the device's partition
    calls = SBATCH_CALL.findall(text)
    assert len(calls) == len(submitted)
    for call in calls:
        assert f"-A {ACCOUNT}" in call, call

    # and SLURM itself recorded each one, all from this run (job name = the run's UUID)
    history = job_history(list(submitted))
    assert len({h["name"] for h in history.values()}) == 1, "jobs of more than one run"
    devices = yaml.safe_load((workdir / "config" / "devices.yaml").read_text())
    cpu_slurm = devices["cpu"]["slurm"]
    for jid, record in history.items():
        rule = by_log[jid]
        assert record["state"] == "COMPLETED", (jid, rule, record)
        assert record["account"] == ACCOUNT, (jid, record)
        if ACCOUNTING:
            # the plugin's comment: rule_<rule>[_wildcards_<values>]
            assert re.fullmatch(rf"rule_{rule}(_wildcards_\S+)?", record["comment"]), (jid, rule, record)
        if rule in PER_DEVICE_RULES:
            assert record["partition"] == cpu_slurm["partition"], (jid, rule, record)
            assert record["limit_minutes"] == cpu_slurm["runtime"], (jid, rule, record)  # attempt 1
            assert f"mem={cpu_slurm['mem_mb']}M" in record["tres"], (jid, rule, record)
        else:
            assert record["partition"] == "cpu", (jid, rule, record)  # the cluster's default partition


@pytest.mark.slurm
@pytest.mark.slow
def test_cluster_outputs_match_a_local_run(cluster_run, local_run):
    workdir, _ = cluster_run
    assert result_files(workdir) == result_files(local_run)
    columns, rows = read_csv(workdir / "results" / "summary.csv")
    local_columns, local_rows = read_csv(local_run / "results" / "summary.csv")
    assert columns == local_columns
    keys = [c for c in ("device", "model", "batch", "precision", "mode") if c in columns]
    assert keys, f"summary.csv has none of the run columns: {columns}"
    assert len(rows) == len(local_rows) > 0
    assert sorted(tuple(r[k] for k in keys) for r in rows) == sorted(tuple(r[k] for k in keys) for r in local_rows)


@pytest.mark.slurm
@pytest.mark.slow
def test_rerun_submits_nothing(cluster_run, cluster_env):
    workdir, _ = cluster_run
    env, profiles = cluster_env
    before = set(slurm_log_ids(workdir))
    rc, text = snakemake(workdir, [*profiles, "--configfile", "tests/configs/tiny.yaml", "-n"], env,
                         workdir / "rerun-dry.log", timeout_s=300)
    assert rc == 0, text[-4000:]
    assert "Nothing to be done" in text, text[-4000:]
    rc, text = snakemake(workdir, [*profiles, "--configfile", "tests/configs/tiny.yaml"], env,
                         workdir / "rerun.log", timeout_s=300)
    assert rc == 0, text[-4000:]
    assert not SUBMITTED.search(text), text[-4000:]
    assert set(slurm_log_ids(workdir)) == before


@pytest.mark.slurm
@pytest.mark.slow
def test_a_custom_model_job_runs_through_sbatch(cluster_run, cluster_env):
    """examples/tiny_cnn's factory model (issue 21) timed by a SLURM job in the cluster run's directory (its
    subset is up to date there): the job builds the model from the factory on the node and succeeds."""
    workdir, _ = cluster_run
    env, profiles = cluster_env
    shutil.copytree(ROOT / "examples", workdir / "examples", ignore=shutil.ignore_patterns("__pycache__"),
                    dirs_exist_ok=True)
    config = yaml.safe_load((workdir / "tests" / "configs" / "tiny.yaml").read_text())
    config.update(models=[{"name": "tiny_cnn", "factory": "examples.tiny_cnn.model:build", "inputs": ["3x32x32"]}],
                  batch_sizes=[1], modes=["training"], imports=[])
    path = workdir / "custom.yaml"
    path.write_text(yaml.safe_dump(config))
    target = "results/profile/cpu/tiny_cnn/b1-fp32-training/timing.json"
    t0 = time.monotonic()
    rc, text = snakemake(workdir, [*profiles, "--configfile", str(path), "--verbose", target], env,
                         workdir / "custom.log", timeout_s=600)
    report(f"custom-model SLURM job: {time.monotonic() - t0:.1f} s")
    assert rc == 0, text[-4000:]
    submitted = [log for _, log in SUBMITTED.findall(text)]
    assert len(submitted) == 1 and "rule_profile_time" in submitted[0], submitted
    timing = json.loads((workdir / target).read_text())
    assert timing["status"] == "ok" and timing["model"] == "tiny_cnn" and timing["params"] == 25_674  # convolutions, batch norms, linear


def gpu_config(workdir: Path) -> Path:
    """tests/configs/tiny.yaml measured on the catalogue's A100 instead of the local CPU."""
    config = yaml.safe_load((workdir / "tests" / "configs" / "tiny.yaml").read_text())
    config["devices"] = [GPU_DEVICE]
    path = workdir / "tests" / "configs" / "tiny-a100.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def dry_run_jobs(text: str) -> list[dict]:
    """Jobs of a `snakemake -n` log: rule, wildcards and resources of each."""
    jobs = []
    for block in re.split(r"\n(?=\[[^\]]+\]\n)", text):
        rule = re.search(r"^(local)?rule (\w+):$", block, re.MULTILINE)
        if not rule:
            continue
        fields = {}
        for key in ("wildcards", "resources"):
            m = re.search(rf"^\s+{key}: (.*)$", block, re.MULTILINE)
            fields[key] = dict(kv.split("=", 1) for kv in m.group(1).split(", ")) if m else {}
        threads = re.search(r"^\s+threads: (\d+)$", block, re.MULTILINE)
        jobs.append({"rule": rule.group(2), "local": bool(rule.group(1)),
                     "threads": int(threads.group(1)) if threads else 1, **fields})
    return jobs


def test_gpu_jobs_request_gpu_partition_and_gres_in_dry_run(tiny_run, tmp_path):
    """No cluster needed: the dry-run lists the resources the plugin turns into sbatch options
    (slurm_partition -> -p, gres -> --gres, runtime -> -t, mem_mb -> --mem). In a copy of the local tiny run
    (conftest.tiny_run): the estimates do not depend on the device, so only the fit table is new."""
    workdir = copy_run(tiny_run, tmp_path / "wf")
    config = gpu_config(workdir)
    install_user_profile(tmp_path / "xdg")
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    # the estimates first (local jobs, seconds): the predict_fit checkpoint decides which GPU runs fit
    rc, text = snakemake(workdir, ["--cores", "2", "--configfile", str(config), "--until", "predict_fit"], env,
                         tmp_path / "estimates.log", timeout_s=600)
    assert rc == 0, text[-4000:]
    rc, text = snakemake(workdir, ["-n", "--profile", "slurm", "--configfile", str(config)], env,
                         tmp_path / "dry.log", timeout_s=300)
    assert rc == 0, text[-4000:]
    devices = yaml.safe_load((workdir / "config" / "devices.yaml").read_text())
    want = devices[GPU_DEVICE]["slurm"]
    per_device = [j for j in dry_run_jobs(text)
                  if j["rule"] in PER_DEVICE_RULES and j["wildcards"].get("device") == GPU_DEVICE]
    # ncu and nsys are on by default (config schema)
    assert {j["rule"] for j in per_device} == PER_DEVICE_RULES, per_device
    for job in per_device:
        assert not job["local"], job
        resources = job["resources"]
        assert resources.get("slurm_partition") == want["partition"] == "gpu", job
        assert resources.get("gres") == want["gres"] == "gpu:a100:1", job
        assert int(resources["runtime"]) == want["runtime"], job
        assert int(resources["mem_mb"]) == want["mem_mb"], job
        assert resources.get("slurm_account") == ACCOUNT, job


@pytest.mark.slurm
@pytest.mark.slow
def test_gpu_job_is_submitted_with_gres_and_retried_with_more(slurm_cluster, cluster_env, tmp_path):
    """measure_ceilings of the A100 really goes to partition `gpu` with one fake A100. There is no CUDA
    behind it, so the job fails: it must be resubmitted with twice the time limit and memory, its log
    must be where the error message says, and no output may survive."""
    env, profiles = cluster_env
    workdir = workflow_copy(tmp_path / "wf")
    config = gpu_config(workdir)
    target = f"results/ceilings/{GPU_DEVICE}.json"
    t0 = time.monotonic()
    rc, text = snakemake(workdir, [*profiles, "--configfile", str(config), "--retries", "1", "--verbose",
                                   target], env, workdir / "snakemake.log", timeout_s=600)
    report(f"GPU submission (2 failing attempts): {time.monotonic() - t0:.1f} s")
    assert rc != 0, "a CUDA job on a fake GPU cannot succeed"

    devices = yaml.safe_load((workdir / "config" / "devices.yaml").read_text())
    want = devices[GPU_DEVICE]["slurm"]
    calls = [c for c in SBATCH_CALL.findall(text) if "rule_measure_ceilings_" in c]
    assert len(calls) == 2, calls  # attempt 1 and the retry
    for attempt, call in enumerate(calls, start=1):
        assert f"-p {want['partition']}" in call, call
        assert f"--gres={want['gres']}" in call, call
        assert f"-t {want['runtime'] * attempt}" in call, call
        assert f"--mem {want['mem_mb'] * attempt}" in call, call
        assert f"-A {ACCOUNT}" in call, call

    submitted = SUBMITTED.findall(text)
    ids = [jid for jid, log in submitted if "rule_measure_ceilings" in log]
    assert len(ids) == 2
    history = job_history(ids)
    for attempt, jid in enumerate(ids, start=1):
        record = history[jid]
        assert record["partition"] == "gpu", record
        assert "gres/gpu:a100=1" in record["tres"], record
        assert record["limit_minutes"] == want["runtime"] * attempt, record
        assert record["state"] == "FAILED", record

    # the error names the rule's log and each attempt's SLURM log; both hold the job's own error
    named = [log for line in re.findall(r"^\s+log: (.*) \(check log file", text, re.MULTILINE)
             for log in line.split(", ")]
    rule_log = f"logs/ceilings/{GPU_DEVICE}.log"
    assert rule_log in named, named
    rule_text = (workdir / rule_log).read_text()
    assert "ERROR" in rule_text and "CUDA" in rule_text, rule_text[-2000:]  # why it failed: no GPU behind gres
    for jid, log in submitted:
        if jid in ids:
            assert log in named, (log, named)
            assert "Error in rule measure_ceilings" in Path(log).read_text(), log
    # no partial output is trusted: none left, and a re-run would still have to make it
    assert not (workdir / target).exists()
    rc, text = snakemake(workdir, [*profiles, "--configfile", str(config), "-n", target], env,
                         workdir / "dry.log", timeout_s=300)
    assert rc == 0 and "measure_ceilings" in text and "Nothing to be done" not in text, text[-3000:]


# ---- load: a 100-job sweep with retries and a job that always fails (issue 14) ----

SWEEP_SNAKEFILE = ROOT / "tests" / "slurm" / "sweep" / "Snakefile"
SWEEP_JOBS = 100
SWEEP_FAIL_ONCE = [7, 33, 61, 88]
SWEEP_FAIL_ALWAYS = [50]
SWEEP_CONCURRENT = 20  # jobs queued or running at once (the profile's `jobs`, overridden)


def sweep_index(log_path: str) -> int:
    """The sweep index of a plugin log .snakemake/slurm_logs/rule_sweep_job/<wildcards>/<jobid>.log."""
    return int(re.search(r"rule_sweep_job/\D*(\d+)/", log_path).group(1))


@pytest.fixture(scope="session")
def sweep_run(slurm_cluster, cluster_env, tmp_path_factory):
    """tests/slurm/sweep/Snakefile: 100 cheap jobs through the cluster with the user's SLURM profile
    (retries 2, keep-going, runtime/mem_mb growing with the attempt), polling every second."""
    env, profiles = cluster_env
    workdir = tmp_path_factory.mktemp("sweep")
    config = [f"jobs={SWEEP_JOBS}", f"fail_once={SWEEP_FAIL_ONCE}".replace(" ", ""),
              f"fail_always={SWEEP_FAIL_ALWAYS}".replace(" ", "")]
    t0 = time.monotonic()
    rc, text = snakemake(workdir, ["-s", str(SWEEP_SNAKEFILE), *profiles, "--jobs", str(SWEEP_CONCURRENT),
                                   "--verbose", "--config", *config], env, workdir / "snakemake.log")
    seconds = time.monotonic() - t0
    submitted = SUBMITTED.findall(text)
    report(f"100-job sweep: {seconds:.1f} s for {len(submitted)} submissions "
           f"({SWEEP_CONCURRENT} at a time, {seconds / max(1, len(submitted)):.2f} s per job)")
    return workdir, rc, text, submitted


@pytest.mark.slurm
@pytest.mark.slow
def test_sweep_keeps_every_result_and_reports_the_failing_job(sweep_run):
    workdir, rc, text, submitted = sweep_run
    assert rc != 0, "one job fails on every attempt: the run must end with an error"
    results = {int(p.stem): json.loads(p.read_text()) for p in (workdir / "results" / "sweep").glob("*.json")}
    assert set(results) == set(range(SWEEP_JOBS)) - set(SWEEP_FAIL_ALWAYS)
    for index, result in results.items():
        assert result["square"] == index * index
        assert result["attempt"] == (2 if index in SWEEP_FAIL_ONCE else 1), (index, result)
    assert not list((workdir / "results").rglob("*.tmp"))
    # the failure is reported with the rule's log and each attempt's SLURM log, and nothing else failed
    errors = re.findall(r"^Error in rule (\w+):\n(?:\s+.*\n)*?\s+output: (\S+)", text, re.MULTILINE)
    failed_outputs = {output for _, output in errors}
    assert failed_outputs == {f"results/sweep/{i}.json" for i in SWEEP_FAIL_ALWAYS + SWEEP_FAIL_ONCE}, errors
    always = SWEEP_FAIL_ALWAYS[0]
    named = re.findall(rf"log: logs/sweep/{always}\.log, (\S+/rule_sweep_job/\D*{always}/\d+\.log) \(check log", text)
    assert len(named) == 3 and all(Path(log).is_file() for log in named), named  # one per attempt
    rule_log = (workdir / "logs" / "sweep" / f"{SWEEP_FAIL_ALWAYS[0]}.log").read_text()
    assert "made to fail on every attempt (this is attempt 3)" in rule_log
    assert "Exiting because a job execution failed" in text or "did not complete successfully" in text


@pytest.mark.slurm
@pytest.mark.slow
def test_sweep_retries_go_back_through_sbatch_with_more_resources(sweep_run):
    workdir, _, text, submitted = sweep_run
    per_index: dict[int, list[str]] = {}
    for jid, log in submitted:
        per_index.setdefault(sweep_index(log), []).append(jid)
    # retries 2 (the profile): three attempts of the job that always fails, two of those that fail once
    assert {i: len(ids) for i, ids in per_index.items() if len(ids) > 1} == \
        {**{i: 2 for i in SWEEP_FAIL_ONCE}, **{i: 3 for i in SWEEP_FAIL_ALWAYS}}
    assert set(per_index) == set(range(SWEEP_JOBS))
    calls = SBATCH_CALL.findall(text)
    assert len(calls) == len(submitted) == SWEEP_JOBS + len(SWEEP_FAIL_ONCE) + 2 * len(SWEEP_FAIL_ALWAYS)
    # the profile's default resources, times the attempt: runtime 30 * attempt, mem_mb 4000 * attempt
    attempts = {}
    for call in calls:
        index = int(re.search(r"rule_sweep_job_wildcards_(\d+)", call).group(1))
        attempts[index] = attempts.get(index, 0) + 1
        assert f"-t {30 * attempts[index]}" in call and f"--mem {4000 * attempts[index]}" in call, call
        assert f"-A {ACCOUNT}" in call, call
    # SLURM's own record agrees: every job ended; 99 indexes completed, the first attempts failed
    history = job_history([jid for jid, _ in submitted], settle_s=120)
    states = {}
    for index, ids in per_index.items():
        states[index] = [history[jid]["state"] for jid in ids]
    for index, sequence in states.items():
        if index in SWEEP_FAIL_ALWAYS:
            assert sequence == ["FAILED"] * 3, (index, sequence)
        elif index in SWEEP_FAIL_ONCE:
            assert sequence == ["FAILED", "COMPLETED"], (index, sequence)
        else:
            assert sequence == ["COMPLETED"], (index, sequence)
    assert len({h["name"] for h in history.values()}) == 1  # one run
