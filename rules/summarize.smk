rule summarize:
    input:
        estimates=get_estimate_files("totals"),
        ops=get_estimate_files("ops"),
        timings=get_timing_files,
        ceilings=list(get_ceilings_files().values()),
        ncu=get_aggregate_inputs("ncu"),
        nsys=get_aggregate_inputs("nsys"),
        reconciliations=get_reconcile_files,
        kernel_calibrations=KERNEL_CALIBRATIONS,
    output:
        summary=report(
            "results/summary.csv",
            caption="../report/summary.rst",
            category="Summary",
            labels={"table": "summary (one row per run)"},
        ),
    log:
        "logs/summarize.log",
    conda:
        "../envs/rooflow.yaml"
    params:
        devices_file=config["devices_file"],
        ceilings=get_ceilings_files(),
        imports=IMPORTS,
    script:
        "../scripts/summarize.py"
