"""The profile_ncu rule end to end with a STAND-IN for ncu (no GPU or Nsight on these machines): the stand-in
records the command line the rule built and replays a real recorded ncu output (and the plan the driver
would have written), or fails the way ncu fails without counter permission. What is tested is rooflow's
side: the command, the error, the aggregation in exhaustive and distinct mode."""

from __future__ import annotations

import json
import subprocess
import sys

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


RUN_RECONCILE = """
import runpy, sys, types
workdir, run, estimate = sys.argv[1:4]
aggregate = f"{workdir}/results/aggregate/{run}"
device, model, name = run.split("/")
snakemake = types.SimpleNamespace(
    input=types.SimpleNamespace(totals=f"{aggregate}/ncu.json", kernels=f"{aggregate}/ncu_kernels.csv",
                                estimate=f"{estimate}/totals.json", ops=f"{estimate}/ops.csv",
                                layers=f"{estimate}/layers.csv", timeline=[], nsys_kernels=[]),
    output=types.SimpleNamespace(reconciliation=f"{aggregate}/reconcile.json", layers=f"{aggregate}/layers.csv",
                                 table=f"{workdir}/results/tables/layers_measured/{run}.html"),
    wildcards=types.SimpleNamespace(device=device, model=model, batch="64", precision="fp32", mode="training",
                                    variant="-compile"),
    params=types.SimpleNamespace(architecture="sm_80", variant="compile"), log=[f"{workdir}/reconcile.log"])
runpy.run_path("scripts/reconcile_ncu.py", init_globals={"snakemake": snakemake})
"""


def test_a_compiled_step_is_profiled_whole_and_held_to_the_fused_bytes(tmp_path, snakemake_exe):
    """The compiled variant's ncu job: exhaustive although the config asks for distinct, the driver told to run
    the step compiled; its aggregate, reconciliation and per-layer page carry the variant. The stand-in replays a
    recorded EAGER profile (no compiled step was ever recorded here): the reconciliation holds its DRAM bytes to
    the fusion-aware estimate and says that no inductor kernel ran — what it must say of such a profile."""
    from rooflow.estimate import estimate

    workdir = copy_workflow(tmp_path / "wf")
    argv_file, plan = tmp_path / "argv.txt", tmp_path / "plan.json"
    # what the driver writes for a compiled step (rooflow.measure.driver.annotated_step)
    plan.write_text(json.dumps({"format": "rooflow-ncu-plan/1", "mode": "exhaustive", "variant": "compile",
                                "attribution": "whole step"}))
    recorded = next(RECORDED.glob("out.dram__bytes.sum*"))
    run, estimate_dir = "a100-sxm4-40gb/resnet18/b64-fp32-training-compile", "results/estimate/resnet18/b64-fp32-training"
    result = run_with_fake_ncu(workdir, snakemake_exe, REPLAY.format(argv=argv_file, recorded=recorded, plan=plan),
                               "distinct", targets=(f"results/aggregate/{run}/ncu.json", f"{estimate_dir}/totals.json"))
    assert result.returncode == 0, result.stderr[-3000:]
    argv = argv_file.read_text().split("\n")
    assert argv[argv.index("--ncu-mode") + 1] == "exhaustive" and argv[argv.index("--variant") + 1] == "compile"
    assert argv[argv.index("--plan") + 1].startswith(str(workdir / f"results/profile/{run}/.ncu_plan.json."))

    totals = json.loads((workdir / f"results/aggregate/{run}/ncu.json").read_text())
    assert (totals["variant"], totals["ncu_mode"], totals["kernels"]) == ("compile", "exhaustive", 797)
    # reconcile_ncu as the rule runs it (the rule itself also needs the GPU timing job's kernel timeline)
    table = workdir / f"results/tables/layers_measured/{run}.html"
    reconcile = subprocess.run([sys.executable, "-c", RUN_RECONCILE, str(workdir), run, estimate_dir], cwd=workdir,
                               capture_output=True, text=True, timeout=300)
    assert reconcile.returncode == 0, reconcile.stderr[-3000:]
    reconciliation = json.loads((workdir / f"results/aggregate/{run}/reconcile.json").read_text())
    fused = estimate("resnet18", 64, "fp32", "training").totals["fused_bytes"]
    assert (reconciliation["variant"], reconciliation["bytes_model"]) == ("compile", "fused")
    assert reconciliation["bytes_estimated"] == pytest.approx(fused)
    assert reconciliation["bytes_ratio"] == pytest.approx(2.18303e10 / fused, rel=1e-5)
    assert reconciliation["bytes_agree"] is False and reconciliation["attribution"] is None
    assert "no kernel inductor generated (triton_*)" in reconciliation["bytes_cause"]
    page = table.read_text()
    assert "training, compile" in page and "profiled whole" in page
    # the eager step of the same run keeps its paths: nothing of it was made
    assert not (workdir / "results/aggregate/a100-sxm4-40gb/resnet18/b64-fp32-training").exists()


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
