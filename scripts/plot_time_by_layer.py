import pandas as pd

from rooflow.hardware.devices import load_device
from rooflow.io import read_json
from rooflow.logs import step_logging
from rooflow.measure.optime import from_record, seconds_by
from rooflow.measure.timeline import read_timeline, seconds_by_class
from rooflow.report.figures import estimated_time_by_layer_type, time_by_layer_figure

i, device_key = snakemake.input, snakemake.wildcards.device
with step_logging(snakemake.log[0], "plot_time_by_layer") as log:
    device = load_device(snakemake.params.devices_file, device_key, i.ceilings[0] if i.ceilings else None)
    summary = pd.read_csv(i.summary)
    runs = summary[summary["device"] == device_key]
    wanted = {(r.model, int(r.batch), r.precision, r.mode) for r in runs.itertuples()}
    estimated = {}
    for path in i.ops:
        # results/estimate/{model}/b{batch}-{precision}-{mode}/ops.csv
        model, run = path.split("/")[-3:-1]
        batch, precision, mode = run[1:].split("-")
        key = (model, int(batch), precision, mode)
        if key in wanted:
            estimated[key] = estimated_time_by_layer_type(pd.read_csv(path), device, precision)
    kernels = {}
    for path in i.nsys:
        record = read_json(path)
        model, run = path.split("/")[-3:-1]
        batch, precision, mode = run[1:].split("-")
        kernels[(model, int(batch), precision, mode)] = record.get("by_class") or {}
    sources = {"Nsight Systems"} if any(kernels.values()) else set()
    for path in i.timelines:
        # results/profile/{device}/{model}/b{batch}-{precision}-{mode}/kernels.csv: the timing job's kernels,
        # where nsys did not profile the run
        model, run = path.split("/")[-3:-1]
        batch, precision, mode = run[1:].split("-")
        key = (model, int(batch), precision, mode)
        by_class = seconds_by_class(read_timeline(path))
        if key in wanted and not kernels.get(key) and by_class:
            kernels[key] = by_class
            sources.add("torch.profiler")

    measured = {}
    for path in i.timings:
        # results/profile/{device}/{model}/b{batch}-{precision}-{mode}/timing.json: the measured time per layer
        # of the timing job's profiled iteration
        record = read_json(path)
        key = (record.get("model"), int(record.get("batch", 0)), record.get("precision"), record.get("mode"))
        if key in wanted and record.get("op_times"):
            measured[key] = seconds_by(from_record(record))

    def label(key):
        return f"{key[0]} b{key[1]} {key[2]} {key[3]}"

    shares = time_by_layer_figure({label(k): v for k, v in sorted(estimated.items())},
                                  {label(k): v for k, v in sorted(kernels.items())}, device_key,
                                  snakemake.output.figure, " / ".join(sorted(sources)) or "Nsight Systems",
                                  {label(k): v for k, v in sorted(measured.items())})
    for name, table in shares.items():
        log.info("%s shares [%%]:\n%s", name, table.round(1).to_string())
