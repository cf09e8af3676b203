# The preflight of a cluster: `rooflow doctor` as a job on each configured GPU's nodes, with the device's
# SLURM resources (`snakemake --profile profiles/slurm doctor`). Not part of `all`: run it first, once.


localrules:
    doctor,


rule doctor:
    input:
        expand("results/doctor/{device}.txt", device=CUDA_DEVICES),


rule run_doctor:
    output:
        table="results/doctor/{device}.txt",
        records="results/doctor/{device}.json",
        files=directory("results/doctor/{device}"),
    log:
        "logs/doctor/{device}.log",
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
        devices_file=config["devices_file"],
        ncu=config["profiling"]["ncu"]["executable"],
        nsys=config["profiling"]["nsys"]["executable"],
    script:
        "../scripts/doctor.py"
