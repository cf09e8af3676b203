from rooflow.io import write_csv
from rooflow.logs import step_logging
from rooflow.report.next_steps import what_to_try

i, p = snakemake.input, snakemake.params
with step_logging(snakemake.log[0], "tabulate_what_if") as log:
    try_next, cross_gpu = what_to_try(i.timings, p.models, snakemake.wildcards.device, p.devices_file,
                                      i.ceilings[0] if i.ceilings else None, i.kernel_calibrations)
    write_csv(snakemake.output.try_next, try_next)
    write_csv(snakemake.output.cross_gpu, cross_gpu)
    log.info("%d alternatives, %d cross-GPU rows", len(try_next), len(cross_gpu))
