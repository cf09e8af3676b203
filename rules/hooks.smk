# Run-level hooks.


onstart:
    # A job killed with SIGKILL (node loss, OOM killer, scancel after KillWait) cannot remove the
    # `.<output>.<random>.tmp` temporaries rooflow.io writes beside its outputs. Remove those beside the
    # outputs this run is about to make: Snakemake's lock (held while onstart runs) keeps every other
    # run of this workflow from writing them. Not run in dry-runs or inside cluster jobs (--no-hooks).
    from rooflow.io import remove_stale_temporaries

    for stale in remove_stale_temporaries(
        str(f) for f in workflow.persistence.all_outputfiles()
    ):
        print(
            f"rooflow: removed {stale}, left by a job that was killed",
            file=sys.stderr,
        )
