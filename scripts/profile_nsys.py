import shutil
from pathlib import Path

from rooflow.errors import RooflowError
from rooflow.io import scratch_directory
from rooflow.logs import step_logging
from rooflow.measure.launch import driver_argv, require_nsys_report, require_tool, run_tool
from rooflow.profilers.commands import nsys_commands, nsys_stats_outputs
from rooflow.workload.spec import spec_from_entry

w, p, out = snakemake.wildcards, snakemake.params, snakemake.output
with step_logging(snakemake.log[0], "profile_nsys"):
    executable = require_tool(p.tool["executable"], "profiling.nsys.executable")
    argv = driver_argv(spec_from_entry(p.model), int(w.batch), w.precision, w.mode, snakemake.input.subset, p.warmup,
                       snakemake.threads, variant=p.variant)
    # Work in a scratch folder; only complete CSVs are moved onto the outputs. It is named like a
    # temporary of the trace output, so a SIGKILLed job's leftover is removed at the next run's start.
    with scratch_directory(out.trace) as scratch:
        stem = Path(scratch) / "nsys"
        profile, stats = nsys_commands(executable, stem, argv, p.tool["extra_args"])
        run_tool(profile, snakemake.log[0], "nsys profile")
        require_nsys_report(stem, executable, snakemake.log[0])
        produced = nsys_stats_outputs(stem)
        run_tool(stats, snakemake.log[0], "nsys stats", outputs=produced)
        for report, target in zip(produced, (out.kern_sum, out.trace)):
            if not report.is_file():
                raise RooflowError(f"nsys stats wrote no {report.name}: see {snakemake.log[0]}")
            shutil.move(report, target)
