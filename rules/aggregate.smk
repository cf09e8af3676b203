# Profiler outputs (rooflow's own, or imported from an earlier cluster run) → per-kernel tables and totals.


rule aggregate_ncu:
    input:
        csv=get_ncu_inputs,
        plan=get_ncu_plan,
    output:
        totals=f"results/aggregate/{{device}}/{RUN_PATTERN}/ncu.json",
        kernels=f"results/aggregate/{{device}}/{RUN_PATTERN}/ncu_kernels.csv",
    log:
        f"logs/aggregate/{{device}}/{RUN_PATTERN}/ncu.log",
    conda:
        "../envs/rooflow.yaml"
    script:
        "../scripts/aggregate_ncu.py"


rule aggregate_nsys:
    input:
        get_nsys_inputs,
    output:
        totals=f"results/aggregate/{{device}}/{RUN_PATTERN}/nsys.json",
        kernels=f"results/aggregate/{{device}}/{RUN_PATTERN}/nsys_kernels.csv",
    log:
        f"logs/aggregate/{{device}}/{RUN_PATTERN}/nsys.log",
    conda:
        "../envs/rooflow.yaml"
    script:
        "../scripts/aggregate_nsys.py"
