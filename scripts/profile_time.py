import logging

from rooflow.io import write_json
from rooflow.logs import step_logging
from rooflow.measure.timing import RunSpec, measure
from rooflow.workload.dataset import load_subset
from rooflow.workload.spec import spec_from_entry

w, p = snakemake.wildcards, snakemake.params
with step_logging(snakemake.log[0], "profile_time"):
    model = spec_from_entry(p.model)
    spec = RunSpec(w.model, int(w.batch), w.precision, w.mode, "cuda" if p.kind == "cuda" else "cpu",
                   p.warmup, p.iterations, snakemake.threads, max_timing_rounds=p.rounds,
                   noise_budget_seconds=p.noise_budget, cpu_memory_limit_bytes=p.cpu_memory_limit,
                   factory=model.factory, inputs=model.inputs, loss=model.loss,
                   input_dtypes=model.input_dtypes, variant=p.variant)
    record = measure(spec, load_subset(snakemake.input.subset), snakemake.output.kernels)
    record["device"] = w.device
    if record["status"] == "oom":  # recorded as the run's result (the summary's status oom), not a failed job
        logging.getLogger("rooflow.profile_time").warning("%s", record["message"])
    write_json(snakemake.output.timing, record)
