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


localrules:
    record_config,


# The configuration these results were made with, its page named by the config's digest. After a config change
# `snakemake --report` asks for the new digest's page, which only a run makes, and stops ("marked for report but
# does not exist") rather than report the old results as the new configuration's.
rule record_config:
    output:
        page=report(
            f"results/config/config-{CONFIG_DIGEST}.html",
            caption="../report/config.rst",
            category="Summary",
            labels={"table": "configuration of these results"},
        ),
    log:
        "logs/record_config.log",
    conda:
        "../envs/rooflow.yaml"
    params:
        config=config,
        digest=CONFIG_DIGEST,
    script:
        "../scripts/record_config.py"
