"""One job of the SLURM load test (tests/slurm/sweep/Snakefile): fail as configured, else write a result."""

import sys
from pathlib import Path

from rooflow.io import write_json
from rooflow.logs import step_logging

job = snakemake  # noqa: F821 - injected by Snakemake's script: directive
index = int(job.wildcards.i)
# attempts so far, counted in a file: the script object does not carry Snakemake's attempt number
tries = Path(job.params.attempts_dir) / f"{index}.attempts"
tries.parent.mkdir(parents=True, exist_ok=True)
with tries.open("a") as handle:
    handle.write("x")
attempt = len(tries.read_text())
with step_logging(job.log[0], "sweep_job") as log:
    log.info("job %d, attempt %d", index, attempt)
    if index in job.params.fail_always:
        log.error("job %d is made to fail on every attempt (this is attempt %d)", index, attempt)
        sys.exit(1)
    if index in job.params.fail_once and attempt == 1:
        log.error("job %d is made to fail on its first attempt", index)
        sys.exit(1)
    write_json(job.output[0], {"index": index, "attempt": attempt, "square": index * index})
