# The report: self-checks, the roofline per device, the companion figures and the tables. Every item the
# user should see is report()-flagged with a caption (report/*.rst), a category and labels; a run is found
# by the report's search through its path (device/model/b{batch}-{precision}-{mode}).


localrules:
    check_runs,
    tabulate_home,
    plot_roofline_interactive,
    plot_latency,
    plot_correlation,
    plot_forward_backward,
    plot_time_by_layer,
    tabulate_layers,
    tabulate_summary,
    tabulate_environment,
    tabulate_what_if,


rule check_runs:
    input:
        summary=rules.summarize.output.summary,
        totals=get_estimate_files("totals"),
        layers=get_estimate_files("layers"),
        ceilings=list(get_ceilings_files().values()),
        ncu=get_aggregate_inputs("ncu"),
        timings=get_timing_files,
    output:
        records="results/checks/checks.json",
        table="results/checks/checks.csv",
        forward_backward="results/checks/forward_backward.csv",
        overview="results/checks/overview.html",
        report=report(
            "results/checks/checks.html",
            caption="../report/checks.rst",
            category="Checks",
            labels={"table": "self-checks (one row per failed check)"},
        ),
    log:
        "logs/checks/check_runs.log",
    conda:
        "../envs/rooflow.yaml"
    params:
        devices_file=config["devices_file"],
    script:
        "../scripts/check_runs.py"


rule plot_roofline:
    input:
        summary=rules.summarize.output.summary,
        checks=rules.check_runs.output.table,
        ncu=get_device_aggregates("ncu"),
        ceilings=get_plot_ceilings,
    output:
        figure=report(
            "results/plots/roofline/{device}.svg",
            caption="../report/roofline.rst",
            category="Roofline",
            labels={"figure": "roofline", "device": "{device}"},
        ),
    log:
        "logs/plots/roofline/{device}.log",
    conda:
        "../envs/rooflow.yaml"
    params:
        devices_file=config["devices_file"],
    script:
        "../scripts/plot_roofline.py"


rule tabulate_home:
    input:
        summary=rules.summarize.output.summary,
        checks=rules.check_runs.output.table,
        rooflines=get_home_rooflines,
    output:
        page="results/report/home.html",
    log:
        "logs/report/home.log",
    conda:
        "../envs/rooflow.yaml"
    script:
        "../scripts/tabulate_home.py"


rule plot_roofline_interactive:
    input:
        summary=rules.summarize.output.summary,
        checks=rules.check_runs.output.table,
        ceilings=list(get_ceilings_files().values()),
    output:
        page=report(
            "results/plots/roofline.html",
            caption="../report/roofline_interactive.rst",
            category="Roofline",
            labels={
                "figure": "roofline, interactive (hover, filters)",
                "device": "all",
            },
        ),
    log:
        "logs/plots/roofline_interactive.log",
    conda:
        "../envs/rooflow.yaml"
    params:
        devices_file=config["devices_file"],
        devices=get_plot_devices(),
    script:
        "../scripts/plot_roofline_interactive.py"


rule plot_costs:
    input:
        summary=rules.summarize.output.summary,
    output:
        flops=report(
            "results/plots/flops.svg",
            caption="../report/flops.rst",
            category="Cost",
            subcategory="Per model",
            labels={"figure": "FLOPs per model"},
        ),
        params=report(
            "results/plots/params.svg",
            caption="../report/params.rst",
            category="Cost",
            subcategory="Per model",
            labels={"figure": "parameters per model"},
        ),
    log:
        "logs/plots/costs.log",
    conda:
        "../envs/rooflow.yaml"
    script:
        "../scripts/plot_costs.py"


rule plot_latency:
    input:
        summary=rules.summarize.output.summary,
        checks=rules.check_runs.output.table,
    output:
        latency=report(
            "results/plots/latency/{device}.svg",
            caption="../report/latency.rst",
            category="Latency",
            subcategory="Latency vs FLOPs and parameters",
            labels={"figure": "latency vs FLOPs and parameters", "device": "{device}"},
        ),
        throughput=report(
            "results/plots/throughput/{device}.svg",
            caption="../report/throughput.rst",
            category="Latency",
            subcategory="Throughput vs parameters",
            labels={"figure": "throughput vs parameters", "device": "{device}"},
        ),
        predicted=report(
            "results/plots/predicted/{device}.svg",
            caption="../report/predicted.rst",
            category="Latency",
            subcategory="Predicted vs measured",
            labels={"figure": "predicted vs measured time", "device": "{device}"},
        ),
    log:
        "logs/plots/latency/{device}.log",
    conda:
        "../envs/rooflow.yaml"
    script:
        "../scripts/plot_latency.py"


rule plot_correlation:
    input:
        summary=rules.summarize.output.summary,
    output:
        figure=report(
            "results/plots/correlation.svg",
            caption="../report/correlation.rst",
            category="Latency",
            subcategory="Rank correlation",
            labels={"figure": "Spearman rank correlation"},
        ),
    log:
        "logs/plots/correlation.log",
    conda:
        "../envs/rooflow.yaml"
    script:
        "../scripts/plot_correlation.py"


rule plot_forward_backward:
    input:
        forward_backward=rules.check_runs.output.forward_backward,
    output:
        figure=report(
            "results/plots/forward_backward.svg",
            caption="../report/forward_backward.rst",
            category="Training vs inference",
            labels={"figure": "backward:forward FLOP and latency ratios"},
        ),
    log:
        "logs/plots/forward_backward.log",
    conda:
        "../envs/rooflow.yaml"
    script:
        "../scripts/plot_forward_backward.py"


rule plot_time_by_layer:
    input:
        summary=rules.summarize.output.summary,
        ops=get_estimate_files("ops"),
        # the time by layer type is of eager steps: a compiled step's kernels fuse layers of several types
        nsys=get_device_aggregates("nsys", eager_only=True),
        timelines=get_device_timelines,
        timings=get_device_timings,
        ceilings=get_plot_ceilings,
    output:
        figure=report(
            "results/plots/time_by_layer/{device}.svg",
            caption="../report/time_by_layer.rst",
            category="Profiles",
            subcategory="Time by layer type",
            labels={"figure": "time by layer type", "device": "{device}"},
        ),
    log:
        "logs/plots/time_by_layer/{device}.log",
    conda:
        "../envs/rooflow.yaml"
    params:
        devices_file=config["devices_file"],
    script:
        "../scripts/plot_time_by_layer.py"


rule tabulate_layers:
    input:
        layers=f"results/estimate/{RUN_PATTERN}/layers.csv",
    output:
        table=report(
            f"results/tables/layers/{RUN_PATTERN}.html",
            caption="../report/layers.rst",
            category="Cost",
            subcategory="Per-layer estimates",
            labels={
                "model": "{model}",
                "batch": "{batch}",
                "precision": "{precision}",
                "mode": "{mode}",
            },
        ),
    log:
        f"logs/tables/layers/{RUN_PATTERN}.log",
    conda:
        "../envs/rooflow.yaml"
    script:
        "../scripts/tabulate_layers.py"


rule tabulate_summary:
    input:
        summary=rules.summarize.output.summary,
        checks=rules.check_runs.output.table,
    output:
        table=report(
            "results/tables/summary.html",
            caption="../report/summary_table.rst",
            category="Summary",
            labels={"table": "summary, sortable (one row per run)"},
        ),
    log:
        "logs/tables/summary.log",
    conda:
        "../envs/rooflow.yaml"
    script:
        "../scripts/tabulate_summary.py"


rule tabulate_environment:
    input:
        timings=get_timing_files,
        ceilings=list(get_ceilings_files().values()),
    output:
        table=report(
            "results/tables/environment.html",
            caption="../report/environment.rst",
            category="Profiles",
            subcategory="Environment",
            labels={"table": "environment of every measurement"},
        ),
    log:
        "logs/tables/environment.log",
    conda:
        "../envs/rooflow.yaml"
    script:
        "../scripts/tabulate_environment.py"


# What to try next (the what-ifs of the runs measured on the device) and the cross-GPU table: predictions,
# started from the measurement on a GPU (rooflow.report.next_steps).
rule tabulate_what_if:
    input:
        timings=get_device_timings,
        ceilings=get_plot_ceilings,
        kernel_calibrations=KERNEL_CALIBRATIONS,
    output:
        try_next=report(
            "results/tables/what_to_try/{device}.csv",
            caption="../report/what_to_try.rst",
            category="What to try next",
            subcategory="{device}",
            labels={"table": "what to try next", "device": "{device}"},
        ),
        cross_gpu=report(
            "results/tables/cross_gpu/{device}.csv",
            caption="../report/cross_gpu.rst",
            category="What to try next",
            subcategory="{device}",
            labels={"table": "every catalogue GPU", "device": "{device}"},
        ),
    log:
        "logs/tables/what_if/{device}.log",
    conda:
        "../envs/rooflow.yaml"
    params:
        devices_file=config["devices_file"],
        models={name: spec.as_dict() for name, spec in MODEL_SPECS.items()},
    script:
        "../scripts/tabulate_what_if.py"
