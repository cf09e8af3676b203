import pandas as pd

from rooflow.io import read_json, write_csv, write_json
from rooflow.logs import step_logging
from rooflow.measure.timeline import compare_kernels, launches, read_timeline
from rooflow.profilers.layers import layer_table, layer_table_note, read_kernel_table
from rooflow.profilers.reconcile import reconcile
from rooflow.report.tables import write_html_table

i, o, w = snakemake.input, snakemake.output, snakemake.wildcards
with step_logging(snakemake.log[0], "reconcile_ncu") as log:
    totals, estimate = read_json(i.totals), read_json(i.estimate)
    kernels, ops, layers = read_kernel_table(i.kernels), pd.read_csv(i.ops), pd.read_csv(i.layers)
    variant = snakemake.params.variant
    result = reconcile(totals, estimate, w.precision, w.mode, bool(totals.get("tensor_metrics_collected")),
                       architecture=snakemake.params.architecture, kernels=kernels, ops=ops, layers=layers,
                       variant=variant)
    record = {"device": w.device, "model": w.model, "batch": int(w.batch), "precision": w.precision,
              "mode": w.mode, **result, "kernels_compared": None}
    if i.timeline:
        timeline = read_timeline(i.timeline[0])
        if len(timeline):
            record["kernels_compared"] = compare_kernels(timeline, kernels)
            log.info("timed vs profiled kernels: %s", record["kernels_compared"]["message"] or "the same")
        else:
            log.info("the timing job recorded no kernel timeline: nothing to compare")
    elif i.nsys_kernels:  # an import: the kernels of its Nsight Systems trace, whose sum is its time
        record["kernels_compared"] = compare_kernels(launches(read_kernel_table(i.nsys_kernels[0])), kernels,
                                                     timed_by="its Nsight Systems trace ran")
        log.info("nsys vs ncu kernels: %s", record["kernels_compared"]["message"] or "the same")
    table = layer_table(kernels, ops, layers, by_layer=variant != "compile")
    write_json(o.reconciliation, record)
    write_csv(o.layers, table)
    view = table.assign(flops_gap=table["measured_flops"] - table["estimated_flops"])
    run = f"{w.device}, {w.model}, batch {w.batch}, {w.precision}, {w.mode}" + (f", {variant}" if w.variant else "")
    write_html_table(o.table, view, f"Per layer, measured vs estimated: {run}",
                     layer_table_note(table, result["cause"], result["bytes_cause"]))
    log.info("measured/estimated FLOPs %s: %s", result["flops_ratio"], result["cause"] or "agree")
    log.info("measured/estimated DRAM bytes (%s) %s: %s", result["bytes_model"], result["bytes_ratio"],
             result["bytes_cause"] or "agree")
