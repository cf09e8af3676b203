from rooflow.conventions import variant_of_suffix
from rooflow.io import write_csv, write_json
from rooflow.logs import step_logging
from rooflow.profilers.distinct import apply_plan
from rooflow.profilers.ncu import aggregate_ncu, check_profiled_device

w, inputs = snakemake.wildcards, snakemake.input
files = [inputs.csv] if isinstance(inputs.csv, str) else list(inputs.csv)
plans = [inputs.plan] if isinstance(inputs.plan, str) else list(inputs.plan)  # none for imported profiles
with step_logging(snakemake.log[0], "aggregate_ncu") as log:
    profile = aggregate_ncu(files)
    check_profiled_device(profile, files, w.device, snakemake.params.architecture)
    kernels, totals = apply_plan(profile, plans[0] if plans else None)
    totals.update(device=w.device, model=w.model, batch=int(w.batch), precision=w.precision, mode=w.mode,
                  variant=variant_of_suffix(w.variant), files=files + plans, kernel_names=sorted(set(kernels["name"])))
    write_json(snakemake.output.totals, totals)
    write_csv(snakemake.output.kernels, kernels)
    log.info("%s mode: %d kernels profiled for %d launches, %.4g FLOP, %.4g DRAM bytes", totals["ncu_mode"],
             totals["kernels_profiled"], totals["kernels_represented"], totals["flops_total"] or 0,
             totals["dram_bytes"] or 0)
