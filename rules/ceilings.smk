rule measure_ceilings:
    output:
        ceilings="results/ceilings/{device}.json",
    log:
        "logs/ceilings/{device}.log",
    conda:
        "../envs/rooflow.yaml"
    threads: device_threads
    resources:
        slurm_partition=slurm_partition,
        gres=slurm_gres,
        constraint=slurm_constraint,
        qos=slurm_qos,
        runtime=runtime_minutes,
        mem_mb=mem_mb,
    params:
        kind=device_kind,
        quick=config["profiling"]["ceilings_quick"],
    script:
        "../scripts/measure_ceilings.py"
