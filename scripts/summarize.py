from rooflow.io import write_csv
from rooflow.logs import step_logging
from rooflow.report.summary import format_table, summarize_files

i = snakemake.input
with step_logging(snakemake.log[0], "summarize") as log:
    summary = summarize_files(snakemake.params.devices_file, i.estimates, i.timings, snakemake.params.ceilings,
                              i.ncu, i.nsys, i.ops, snakemake.params.imports,
                              reconciliations=i.reconciliations, kernel_calibrations=i.kernel_calibrations)
    write_csv(snakemake.output.summary, summary)
    log.info("summary:\n%s", format_table(summary))
