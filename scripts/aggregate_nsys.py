from rooflow.conventions import variant_of_suffix
from rooflow.io import write_csv, write_json
from rooflow.logs import step_logging
from rooflow.profilers.nsys import aggregate_nsys

w = snakemake.wildcards
with step_logging(snakemake.log[0], "aggregate_nsys") as log:
    result = aggregate_nsys(list(snakemake.input))
    totals = dict(result.totals, device=w.device, model=w.model, batch=int(w.batch), precision=w.precision,
                  mode=w.mode, variant=variant_of_suffix(w.variant), files=list(snakemake.input))
    write_json(snakemake.output.totals, totals)
    write_csv(snakemake.output.kernels, result.kernels)
    log.info("%d kernels, %.4g s kernel time, %.4g s memcpy, %.4g s memset", totals["kernels"],
             totals["kernel_seconds"], totals["memcpy_seconds"] or 0, totals["memset_seconds"] or 0)
