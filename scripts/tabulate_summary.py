import pandas as pd

from rooflow.logs import step_logging
from rooflow.report.checks import flagged_runs, severity_of
from rooflow.report.tables import write_html_table

with step_logging(snakemake.log[0], "tabulate_summary"):
    summary = pd.read_csv(snakemake.input.summary)
    flags = flagged_runs(pd.read_csv(snakemake.input.checks))
    severity = [severity_of(flags, r.device, r.model, r.batch, r.precision, r.mode) or ""
                for r in summary.itertuples()]
    write_html_table(snakemake.output.table, summary, "Summary: one row per device × model × batch × precision × mode",
                     "SI base units (FLOP, bytes, seconds). Click a header to sort; rows a self-check flagged "
                     "are shaded (red: error, orange: warning, purple: result such as out of memory).",
                     row_class=severity)
