rule plot_roofline:
    input:
        summary=rules.summarize.output.summary,
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
    params:
        devices_file=config["devices_file"],
    script:
        "../scripts/plot_roofline.py"


rule plot_costs:
    input:
        summary=rules.summarize.output.summary,
    output:
        flops=report(
            "results/plots/flops.svg",
            caption="../report/flops.rst",
            category="Cost",
            labels={"figure": "FLOPs per model"},
        ),
        params=report(
            "results/plots/params.svg",
            caption="../report/params.rst",
            category="Cost",
            labels={"figure": "parameters per model"},
        ),
    log:
        "logs/plots/costs.log",
    script:
        "../scripts/plot_costs.py"
