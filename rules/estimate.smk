rule estimate_model:
    output:
        totals=f"results/estimate/{RUN_PATTERN}/totals.json",
        layers=f"results/estimate/{RUN_PATTERN}/layers.csv",
        ops=f"results/estimate/{RUN_PATTERN}/ops.csv",
    log:
        f"logs/estimate/{RUN_PATTERN}.log",
    conda:
        "../envs/rooflow.yaml"
    params:
        model=get_model_spec,
    script:
        "../scripts/estimate_model.py"


# Whether each GPU run fits its device, from the estimates: a checkpoint, so the runs that cannot fit are
# never submitted (rules/common.smk run_fits; record_unfit writes their result row). One job for all runs:
# its inputs, the estimates, run in parallel, and the DAG is re-evaluated once.
checkpoint predict_fit:
    input:
        totals=get_fit_estimates(),
    output:
        fits="results/fit/fits.json",
    log:
        "logs/fit/fits.log",
    conda:
        "../envs/rooflow.yaml"
    params:
        devices_file=config["devices_file"],
        pairs=get_fit_pairs(),
    script:
        "../scripts/predict_fit.py"
