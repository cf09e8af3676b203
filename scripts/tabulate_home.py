import pandas as pd

from rooflow.io import atomic_path
from rooflow.logs import step_logging
from rooflow.report.home import home_page

i = snakemake.input
with step_logging(snakemake.log[0], "tabulate_home") as log:
    summary = pd.read_csv(i.summary)
    # results/plots/roofline/{device}.svg, in the order of the devices
    rooflines = {path.rsplit("/", 1)[-1].removesuffix(".svg"): path for path in i.rooflines}
    fragment = home_page(summary, rooflines, pd.read_csv(i.checks))
    with atomic_path(snakemake.output.page) as tmp:
        tmp.write_text(fragment, encoding="utf-8")
    log.info("home page: %d devices, %d runs, %d bytes", len(rooflines), len(summary), len(fragment))
