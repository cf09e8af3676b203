import shutil
import tempfile
from pathlib import Path

from rooflow.logs import step_logging
from rooflow.profile_run import driver_argv, require_tool, run_tool
from rooflow.profilers.commands import check_profiler_log, nsys_commands

w, p, out = snakemake.wildcards, snakemake.params, snakemake.output
with step_logging(snakemake.log[0], "profile_nsys"):
    executable = require_tool(p.tool["executable"], "profiling.nsys.executable")
    argv = driver_argv(w.model, int(w.batch), w.precision, w.mode, snakemake.input.subset, p.warmup,
                       snakemake.threads)
    # Work in a scratch folder; only complete CSVs are moved onto the outputs.
    with tempfile.TemporaryDirectory(dir=Path(out.trace).parent) as scratch:
        stem = str(Path(scratch) / "nsys")
        profile, stats = nsys_commands(executable, stem, argv, p.tool["extra_args"])
        run_tool(profile, snakemake.log[0], "nsys profile")
        run_tool(stats, snakemake.log[0], "nsys stats")
        for report, target in (("cuda_gpu_kern_sum", out.kern_sum), ("cuda_gpu_trace", out.trace)):
            produced = Path(f"{stem}_{report}.csv")
            check_profiler_log(produced)
            shutil.move(produced, target)
