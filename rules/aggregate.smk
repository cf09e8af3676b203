# Profiler outputs (rooflow's own, or imported from an earlier cluster run) → per-kernel tables and totals.


rule aggregate_ncu:
    input:
        csv=get_ncu_inputs,
        plan=get_ncu_plan,
    output:
        totals=f"results/aggregate/{{device}}/{TIMED_RUN_PATTERN}/ncu.json",
        kernels=f"results/aggregate/{{device}}/{TIMED_RUN_PATTERN}/ncu_kernels.csv",
    log:
        f"logs/aggregate/{{device}}/{TIMED_RUN_PATTERN}/ncu.log",
    conda:
        "../envs/rooflow.yaml"
    params:
        # an imported file's kernels must have run on its device's GPU (rooflow.profilers.ncu.check_profiled_device)
        architecture=lambda wildcards: (
            DEVICES[wildcards.device].architecture if imported_run(wildcards) else None
        ),
    script:
        "../scripts/aggregate_ncu.py"


rule aggregate_nsys:
    input:
        get_nsys_inputs,
    output:
        totals=f"results/aggregate/{{device}}/{TIMED_RUN_PATTERN}/nsys.json",
        kernels=f"results/aggregate/{{device}}/{TIMED_RUN_PATTERN}/nsys_kernels.csv",
    log:
        f"logs/aggregate/{{device}}/{TIMED_RUN_PATTERN}/nsys.log",
    conda:
        "../envs/rooflow.yaml"
    script:
        "../scripts/aggregate_nsys.py"


# The evidence behind measured vs estimated FLOPs: per class, per layer (NVTX ranges or launch order), the
# algorithm from kernel names, and whether the timed process ran the kernels ncu profiled.


localrules:
    reconcile_ncu,


rule reconcile_ncu:
    input:
        totals=rules.aggregate_ncu.output.totals,
        kernels=rules.aggregate_ncu.output.kernels,
        estimate=rules.estimate_model.output.totals,
        ops=rules.estimate_model.output.ops,
        layers=rules.estimate_model.output.layers,
        timeline=get_timeline_input,
        nsys_kernels=get_imported_nsys_kernels,
    output:
        reconciliation=f"results/aggregate/{{device}}/{TIMED_RUN_PATTERN}/reconcile.json",
        layers=f"results/aggregate/{{device}}/{TIMED_RUN_PATTERN}/layers.csv",
        table=report(
            f"results/tables/layers_measured/{{device}}/{TIMED_RUN_PATTERN}.html",
            caption="../report/layers_measured.rst",
            category="Profiles",
            subcategory="Per-layer measured vs estimated",
            labels={
                "device": "{device}",
                "model": "{model}",
                "batch": "{batch}",
                "precision": "{precision}",
                "mode": "{mode}{variant}",
            },
        ),
    log:
        f"logs/aggregate/{{device}}/{TIMED_RUN_PATTERN}/reconcile.log",
    conda:
        "../envs/rooflow.yaml"
    params:
        architecture=device_architecture,
        variant=get_variant,
    script:
        "../scripts/reconcile_ncu.py"
