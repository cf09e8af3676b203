# Measurement: latency on every device (CUDA events / perf_counter_ns), and on cuda devices one
# iteration under Nsight Compute (counters) and Nsight Systems (kernel times), each for every variant (a
# compiled step is profiled whole: rooflow.measure.driver). A GPU run the estimate says cannot fit is not
# submitted: record_unfit writes its result row instead.


rule profile_time:
    input:
        subset=rules.subset_dataset.output.tensor,
    output:
        timing=f"results/profile/{{device}}/{TIMED_RUN_PATTERN}/timing.json",
        kernels=f"results/profile/{{device}}/{TIMED_RUN_PATTERN}/kernels.csv",
    log:
        f"logs/profile/{{device}}/{TIMED_RUN_PATTERN}/timing.log",
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
        model=get_model_spec,
        variant=get_variant,
        kind=device_kind,
        warmup=config["profiling"]["warmup_iterations"],
        iterations=config["profiling"]["timed_iterations"],
        rounds=config["profiling"]["max_timing_rounds"],
        noise_budget=config["profiling"]["noise_budget_seconds"],
        cpu_memory_limit=config["profiling"]["cpu_memory_limit_bytes"],
    script:
        "../scripts/profile_time.py"


rule record_unfit:
    input:
        totals=f"results/estimate/{RUN_PATTERN}/totals.json",
    output:
        unfit=f"results/profile/{{device}}/{TIMED_RUN_PATTERN}/unfit.json",
    log:
        f"logs/profile/{{device}}/{TIMED_RUN_PATTERN}/unfit.log",
    conda:
        "../envs/rooflow.yaml"
    params:
        devices_file=config["devices_file"],
        variant=get_variant,
    script:
        "../scripts/record_unfit.py"


rule profile_ncu:
    input:
        subset=rules.subset_dataset.output.tensor,
    output:
        csv=f"results/profile/{{device}}/{TIMED_RUN_PATTERN}/ncu.csv",
        plan=f"results/profile/{{device}}/{TIMED_RUN_PATTERN}/ncu_plan.json",
    log:
        f"logs/profile/{{device}}/{TIMED_RUN_PATTERN}/ncu.log",
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
        model=get_model_spec,
        variant=get_variant,
        tool=config["profiling"]["ncu"],
        architecture=device_architecture,
        warmup=config["profiling"]["warmup_iterations"],
    script:
        "../scripts/profile_ncu.py"


rule profile_nsys:
    input:
        subset=rules.subset_dataset.output.tensor,
    output:
        kern_sum=f"results/profile/{{device}}/{TIMED_RUN_PATTERN}/nsys_cuda_gpu_kern_sum.csv",
        trace=f"results/profile/{{device}}/{TIMED_RUN_PATTERN}/nsys_cuda_gpu_trace.csv",
    log:
        f"logs/profile/{{device}}/{TIMED_RUN_PATTERN}/nsys.log",
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
        model=get_model_spec,
        variant=get_variant,
        tool=config["profiling"]["nsys"],
        warmup=config["profiling"]["warmup_iterations"],
    script:
        "../scripts/profile_nsys.py"
