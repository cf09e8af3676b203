rule estimate_model:
    output:
        totals=f"results/estimate/{RUN_PATTERN}/totals.json",
        layers=f"results/estimate/{RUN_PATTERN}/layers.csv",
        ops=f"results/estimate/{RUN_PATTERN}/ops.csv",
    log:
        f"logs/estimate/{RUN_PATTERN}.log",
    conda:
        "../envs/rooflow.yaml"
    script:
        "../scripts/estimate_model.py"
