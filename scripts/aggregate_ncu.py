from rooflow.io import write_csv, write_json
from rooflow.logs import step_logging
from rooflow.profilers.ncu import aggregate_ncu

w = snakemake.wildcards
with step_logging(snakemake.log[0], "aggregate_ncu") as log:
    result = aggregate_ncu(list(snakemake.input))
    totals = dict(result.totals, device=w.device, model=w.model, batch=int(w.batch), precision=w.precision,
                  mode=w.mode, files=list(snakemake.input),
                  kernel_names=sorted(set(result.kernels["name"])))
    write_json(snakemake.output.totals, totals)
    write_csv(snakemake.output.kernels, result.kernels)
    log.info("%d kernels, %.4g FLOP, %.4g DRAM bytes", totals["kernels"], totals["flops_total"] or 0,
             totals["dram_bytes"] or 0)
