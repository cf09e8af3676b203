"""Write the configuration page of these results (results/config/config-<digest>.html) and remove the pages of
earlier configurations."""

from pathlib import Path

from rooflow.io import atomic_path
from rooflow.logs import step_logging
from rooflow.report.tables import config_page

with step_logging(snakemake.log[0], "record_config") as log:
    page = Path(snakemake.output.page)
    with atomic_path(page) as tmp:
        tmp.write_text(config_page(snakemake.params.config, snakemake.params.digest), encoding="utf-8")
    for earlier in sorted(page.parent.glob("config-*.html")):
        if earlier != page:
            earlier.unlink()
            log.info("removed %s, the page of an earlier configuration", earlier)
    log.info("configuration %s recorded", snakemake.params.digest)
