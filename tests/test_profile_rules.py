"""The profile_ncu rule end to end with a STAND-IN for ncu (no GPU or Nsight on these machines): the stand-in
records the command line the rule built and replays a real recorded ncu output, or fails the way ncu fails
without counter permission. What is tested is rooflow's side: the command, the error, the aggregation."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, copy_workflow

pytestmark = pytest.mark.slow

TARGET = "results/aggregate/a100-sxm4-40gb/resnet18/b64-fp32-training/ncu.json"
RECORDED = ROOT / "tests/data/real/cyanguwa-DeepLearningProfiling/mlperf-deepcam/PT-fp32-O1-AdamW-fw-733731"

REPLAY = """#!/usr/bin/env bash
# Stand-in for Nsight Compute: record argv, write a recorded ncu CSV to --log-file.
printf '%s\\n' "$@" > "{argv}"
while [ $# -gt 0 ]; do [ "$1" = --log-file ] && log="$2"; shift; done
{{ echo "==PROF== Connected to process 4242"; zcat -f "{recorded}"; }} > "$log"
"""

DENIED = """#!/usr/bin/env bash
# Stand-in for Nsight Compute on a node without counter permission.
while [ $# -gt 0 ]; do [ "$1" = --log-file ] && log="$2"; shift; done
cat > "$log" <<'END'
==PROF== Connected to process 4242 (/usr/bin/python3.11)
==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters on the target device 0. For instructions on enabling permissions and to get more information see https://developer.nvidia.com/ERR_NVGPUCTRPERM
==PROF== Disconnected from process 4242
END
exit 1
"""


def run_with_fake_ncu(workdir: Path, snakemake_exe: str, script: str):
    bin_dir = workdir / "fake-bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "ncu"
    fake.write_text(script)
    fake.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run([snakemake_exe, TARGET, "--cores", "2", "--configfile", "tests/configs/gpu.yaml"],
                          cwd=workdir, env=env, capture_output=True, text=True, timeout=600)


def test_ncu_rule_builds_the_one_iteration_command_and_aggregates(tmp_path, snakemake_exe):
    workdir = copy_workflow(tmp_path / "wf")
    argv_file = tmp_path / "argv.txt"
    recorded = next(RECORDED.glob("out.dram__bytes.sum*"))
    result = run_with_fake_ncu(workdir, snakemake_exe, REPLAY.format(argv=argv_file, recorded=recorded))
    assert result.returncode == 0, result.stderr[-3000:]
    argv = argv_file.read_text().split("\n")
    for flag in ("--profile-from-start", "off", "--target-processes", "all", "--csv", "--one-iteration"):
        assert flag in argv
    metrics = argv[argv.index("--metrics") + 1].split(",")
    # an A100 (sm_80): TF32 and FP16 tensor-core FLOPs, CUDA-core FLOPs, DRAM bytes
    assert "sm__ops_path_tensor_src_tf32_dst_fp32.sum" in metrics or any("tf32" in m for m in metrics)
    assert "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum" in metrics
    assert any(m.startswith("dram__bytes") for m in metrics)
    assert argv[argv.index("--model") + 1] == "resnet18" and argv[argv.index("--precision") + 1] == "fp32"
    import json

    totals = json.loads((workdir / TARGET).read_text())
    assert totals["kernels"] == 797  # the recorded NERSC run
    assert totals["dram_bytes"] == pytest.approx(2.18303e10, rel=1e-5)


def test_ncu_without_counter_permission_is_one_clear_error_and_leaves_no_output(tmp_path, snakemake_exe):
    workdir = copy_workflow(tmp_path / "wf")
    result = run_with_fake_ncu(workdir, snakemake_exe, DENIED)
    assert result.returncode != 0
    csv = workdir / "results/profile/a100-sxm4-40gb/resnet18/b64-fp32-training/ncu.csv"
    assert not csv.exists()
    log = (workdir / "logs/profile/a100-sxm4-40gb/resnet18/b64-fp32-training/ncu.log").read_text()
    assert "ERR_NVGPUCTRPERM" in log and "NVreg_RestrictProfilingToAdminUsers=0" in log
    assert str(csv) in log or "results/profile/a100-sxm4-40gb/resnet18/b64-fp32-training/ncu.csv" in log
    assert "Traceback" not in log
