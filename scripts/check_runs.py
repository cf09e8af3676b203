from rooflow.io import atomic_path, write_csv
from rooflow.logs import step_logging
from rooflow.report.checks import check_file_records
from rooflow.report.findings import checks_frame, write_checks
from rooflow.report.tables import checks_overview, write_html_table

i, o = snakemake.input, snakemake.output
with step_logging(snakemake.log[0], "check_runs") as log:
    records, forward_backward = check_file_records(i.summary, i.totals, i.layers, i.ceilings,
                                                   snakemake.params.devices_file, i.timings,
                                                   i.ncu)
    write_checks(o.records, records)
    checks = checks_frame(records)
    write_csv(o.table, checks)
    write_csv(o.forward_backward, forward_backward)
    write_html_table(o.report, checks, "Self-checks: one row per failed check",
                     "Errors (red) are bugs to fix before trusting a number; warnings (orange) need a look; "
                     "results (purple) are outcomes such as out-of-memory. Click a header to sort.",
                     row_class=checks["severity"])
    with atomic_path(o.overview) as tmp:
        tmp.write_text(checks_overview(checks), encoding="utf-8")
    log.info("%d failed checks: %s", len(checks), checks["severity"].value_counts().to_dict())
