rule measure_ceilings:
    output:
        ceilings="results/ceilings/{device}.json",
    log:
        "logs/ceilings/{device}.log",
    conda:
        "../envs/rooflow.yaml"
    threads: device_threads
    resources:
        slurm_partition=slurm_option("partition"),
        gres=slurm_option("gres"),
        constraint=slurm_option("constraint"),
        qos=slurm_option("qos"),
        runtime=runtime_minutes,
        mem_mb=mem_mb,
    params:
        kind=device_kind,
        quick=config["profiling"]["ceilings_quick"],
        devices_file=config["devices_file"],
    script:
        "../scripts/measure_ceilings.py"
