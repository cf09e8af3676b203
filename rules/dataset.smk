rule subset_dataset:
    output:
        tensor="results/dataset/subset.pt",
        manifest=report(
            "results/dataset/manifest.csv",
            caption="../report/manifest.rst",
            category="Data",
            labels={"table": "image subset manifest"},
        ),
    log:
        "logs/dataset/subset.log",
    conda:
        "../envs/rooflow.yaml"
    params:
        dataset=config["dataset"],
    script:
        "../scripts/subset_dataset.py"
