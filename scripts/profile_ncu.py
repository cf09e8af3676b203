from rooflow.errors import RooflowError
from rooflow.io import atomic_path
from rooflow.logs import step_logging
from rooflow.profile_run import driver_argv, require_tool, run_tool
from rooflow.profilers.commands import ncu_command
from rooflow.profilers.metrics import metrics_for_architecture

w, p = snakemake.wildcards, snakemake.params
with step_logging(snakemake.log[0], "profile_ncu") as log:
    executable = require_tool(p.tool["executable"], "profiling.ncu.executable")
    argv = driver_argv(w.model, int(w.batch), w.precision, w.mode, snakemake.input.subset, p.warmup,
                       snakemake.threads)
    with atomic_path(snakemake.output.csv) as tmp:
        command = ncu_command(executable, metrics_for_architecture(p.architecture), tmp, argv,
                              p.tool["extra_args"])
        try:
            run_tool(command, snakemake.log[0], "ncu", outputs=[tmp])
        except RooflowError as error:  # name the output, not the temporary file it was written to
            raise RooflowError(str(error).replace(str(tmp), snakemake.output.csv)) from None
