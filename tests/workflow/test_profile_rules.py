"""The profile_ncu rule end to end with a STAND-IN for ncu (no GPU or Nsight on these machines): the stand-in
records the command line the rule built and replays a real recorded ncu output (and the plan the driver
would have written), or fails the way ncu fails without counter permission. What is tested is rooflow's
side: the command, the error, the aggregation in exhaustive and distinct mode."""

from __future__ import annotations

import json

import pytest
from conftest import copy_workflow
from support import RECORDED, REPLAY, TARGET, run_with_fake_ncu

pytestmark = pytest.mark.slow



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




def test_ncu_rule_in_exhaustive_mode_builds_the_command_and_aggregates(tmp_path, snakemake_exe):
    workdir = copy_workflow(tmp_path / "wf")
    argv_file, plan = tmp_path / "argv.txt", tmp_path / "plan.json"
    plan.write_text(json.dumps({"format": "rooflow-ncu-plan/1", "mode": "exhaustive"}))  # what the driver writes
    recorded = next(RECORDED.glob("out.dram__bytes.sum*"))
    result = run_with_fake_ncu(workdir, snakemake_exe, REPLAY.format(argv=argv_file, recorded=recorded, plan=plan),
                               "exhaustive")
    assert result.returncode == 0, result.stderr[-3000:]
    argv = argv_file.read_text().split("\n")
    for flag in ("--profile-from-start", "off", "--target-processes", "all", "--nvtx", "--csv"):
        assert flag in argv
    assert argv[argv.index("-m") + 1] == "rooflow.measure.driver" and argv[argv.index("--ncu-mode") + 1] == "exhaustive"
    assert argv[argv.index("--plan") + 1].startswith(str(workdir / "results/profile/a100-sxm4-40gb/resnet18"))
    metrics = argv[argv.index("--metrics") + 1].split(",")
    # an A100 (sm_80), fp32: CUDA-core FLOPs, the TF32 tensor path only (TF32 is off: the detector of FP32
    # work on tensor cores), one DRAM metric, L2 and L1 (hierarchical by default), duration
    assert [m for m in metrics if "tensor" in m] == ["sm__ops_path_tensor_src_tf32_dst_fp32.sum"]
    assert "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum" in metrics
    assert [m for m in metrics if m.startswith("dram__")] == ["dram__bytes.sum"]
    assert "lts__t_bytes.sum" in metrics and "l1tex__t_bytes.sum" in metrics
    assert argv[argv.index("--model") + 1] == "resnet18" and argv[argv.index("--precision") + 1] == "fp32"

    totals = json.loads((workdir / TARGET).read_text())
    assert totals["kernels"] == 797  # the recorded NERSC run
    assert (totals["ncu_mode"], totals["kernels_profiled"], totals["kernels_represented"]) == ("exhaustive", 797, 797)
    assert totals["dram_bytes"] == pytest.approx(2.18303e10, rel=1e-5)


def test_ncu_rule_in_distinct_mode_aggregates_the_plan(tmp_path, snakemake_exe):
    """The stand-in replays a distinct-mode CSV and plan made from rooflow's real H100 ResNet-18 recording
    (tests/profilers/test_distinct.py: distinct_stand_in); the aggregate represents all 194 launches from 86 profiled."""
    from support import NVTX_RECORDING, distinct_stand_in, module_shapes, signature_groups

    from rooflow.profilers.ncu import aggregate_ncu

    full = aggregate_ncu(NVTX_RECORDING)
    csv_path, plan = tmp_path / "distinct.csv", tmp_path / "plan.json"
    distinct_stand_in(full.kernels, signature_groups(full.kernels, module_shapes("resnet18", 16)), csv_path, plan)
    workdir = copy_workflow(tmp_path / "wf")
    argv_file = tmp_path / "argv.txt"
    result = run_with_fake_ncu(workdir, snakemake_exe, REPLAY.format(argv=argv_file, recorded=csv_path, plan=plan))
    assert result.returncode == 0, result.stderr[-3000:]
    argv = argv_file.read_text().split("\n")
    assert argv[argv.index("--ncu-mode") + 1] == "distinct" and "--nvtx" in argv
    totals = json.loads((workdir / TARGET).read_text())
    assert (totals["ncu_mode"], totals["kernels_profiled"], totals["kernels_represented"]) == ("distinct", 86, 194)
    assert totals["flops_total"] == full.totals["flops_total"]
    assert totals["files"][-1].endswith("ncu_plan.json")
    kernels = (workdir / TARGET).with_name("ncu_kernels.csv").read_text().splitlines()
    assert len(kernels) == 195 and kernels[0].endswith("nvtx_stack,profiled_id,signature,occurrence,weight")


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
