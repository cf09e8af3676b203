from rooflow.estimate import estimate_run
from rooflow.io import write_csv, write_json
from rooflow.logs import step_logging
from rooflow.workload.spec import spec_from_entry

w = snakemake.wildcards
with step_logging(snakemake.log[0], "estimate_model") as log:
    result = estimate_run(spec_from_entry(snakemake.params.model), int(w.batch), w.precision, w.mode)
    write_json(snakemake.output.totals, result.totals)
    write_csv(snakemake.output.layers, result.layers)
    write_csv(snakemake.output.ops, result.ops)
    log.info("%s b%s %s %s: %.3g GFLOP", w.model, w.batch, w.precision, w.mode, result.totals["total_flops"] / 1e9)
