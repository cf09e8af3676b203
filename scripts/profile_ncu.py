from rooflow.errors import RooflowError
from rooflow.io import atomic_path
from rooflow.logs import step_logging
from rooflow.measure.driver import ncu_mode_for
from rooflow.measure.launch import driver_argv, require_tool, run_tool
from rooflow.measure.ncu_job import profile_with_fallback
from rooflow.profilers.commands import ncu_command
from rooflow.profilers.metrics import metrics_for_architecture
from rooflow.workload.spec import spec_from_entry

w, p, out = snakemake.wildcards, snakemake.params, snakemake.output
with step_logging(snakemake.log[0], "profile_ncu") as log:
    executable = require_tool(p.tool["executable"], "profiling.ncu.executable")
    metrics = metrics_for_architecture(p.architecture, w.precision, p.tool["hierarchical"])
    with atomic_path(out.csv) as tmp, atomic_path(out.plan) as plan:

        def run(mode, log_path):
            argv = driver_argv(spec_from_entry(p.model), int(w.batch), w.precision, w.mode, snakemake.input.subset, p.warmup,
                               snakemake.threads, ncu_mode=mode, plan=plan, variant=p.variant)
            command = ncu_command(executable, metrics, tmp, argv, p.tool["extra_args"])
            try:
                run_tool(command, log_path, "ncu", outputs=[tmp])
            except RooflowError as error:  # name the output, not the temporary file it was written to
                raise RooflowError(str(error).replace(str(tmp), out.csv)) from None
            if not plan.stat().st_size:
                raise RooflowError(f"the profiled driver wrote no plan ({out.plan}): see {snakemake.log[0]} for "
                                   f"its output")

        profile_with_fallback(run, ncu_mode_for(p.variant, p.tool["mode"]), tmp, plan, snakemake.log[0])
