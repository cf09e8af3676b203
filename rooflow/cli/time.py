"""`rooflow time`: the latency of one model × batch × precision × mode (or, with --one-iteration, the
single profiled iteration that ncu and nsys wrap)."""

from __future__ import annotations

import argparse
import json
import sys

from rooflow.arguments import CPU_MEMORY_LIMIT_BYTES, bounded_int, non_negative_seconds, positive_int
from rooflow.io import check_distinct, write_json
from rooflow.measure.driver import profile_one_iteration
from rooflow.measure.timing import RunSpec, add_run_arguments, measure, model_fields
from rooflow.workload.dataset import SubsetSpec, load_subset, subset_data


def _spec_from_args(args: argparse.Namespace) -> RunSpec:
    return RunSpec(batch=args.batch, precision=args.precision, mode=args.mode, device=args.device,
                   warmup_iterations=args.warmup, timed_iterations=args.iterations, threads=args.threads,
                   max_timing_rounds=args.rounds, noise_budget_seconds=args.noise_budget,
                   cpu_memory_limit_bytes=args.cpu_memory_limit, variant=args.variant, **model_fields(args))


def _cmd_time(args: argparse.Namespace) -> int:
    check_distinct({"--output": args.output, "--timeline": args.timeline}, {"--subset": args.subset})
    spec = _spec_from_args(args)
    cpus = usable_cpus()
    if args.threads and args.threads > cpus and not args.device.startswith("cuda"):
        print(f"rooflow time: warning: --threads {args.threads} on {cpus} usable CPU(s): the threads share cores, so "
              f"the step is timed slower than {cpus} thread(s) run it; give --threads {cpus} or fewer for this "
              f"machine's latency", file=sys.stderr)
    # without a subset file, the workflow's default: the generated stand-in, made in memory (deterministic)
    subset = load_subset(args.subset) if args.subset else subset_data(SubsetSpec())[0]
    record = profile_one_iteration(spec, subset) if args.one_iteration else measure(spec, subset, args.timeline)
    if args.output:
        write_json(args.output, record)
    else:
        print(json.dumps({k: v for k, v in record.items() if not k.endswith("seconds") or
                          not isinstance(v, list)}, indent=2))
    if record.get("status") == "oom":  # a result, recorded as such; the exit status tells a script it did not fit
        kept = f"the record (status oom) is written to {args.output}" if args.output else "the record is above"
        print(f"rooflow time: {spec.model} batch {spec.batch} {spec.precision} {spec.mode} did not fit: "
              f"{record.get('message')}; {kept}. Try a smaller --batch (`rooflow estimate {_estimate_arguments(args)} "
              f"--batch N --device KEY` predicts a batch's steady-state memory){_cpu_limit_hint(args)}.",
              file=sys.stderr)
        return OOM_EXIT_STATUS
    return 0


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask: a SLURM step's or taskset's share of the machine)."""
    import os

    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity call on this platform
        return os.cpu_count() or 1


# `rooflow time`'s exit status for a run that ran out of memory (its record written): not 1 (an error) nor
# 2 (bad arguments)
OOM_EXIT_STATUS = 3


def _estimate_arguments(args: argparse.Namespace) -> str:
    """The model as `rooflow estimate` takes it: the --model text, a factory's inputs after it."""
    return " ".join([args.model, *(f"--input {shape}" for shape in args.input or ())])


def _cpu_limit_hint(args: argparse.Namespace) -> str:
    return " or a larger --cpu-memory-limit" if args.cpu_memory_limit and not args.device.startswith("cuda") else ""


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "time", help="measure latency of one model × batch × precision × mode",
        description="Warm up, then time iterations with CUDA events (GPU) or perf_counter_ns (CPU). "
                    "--one-iteration instead runs the single profiled iteration for ncu/nsys.")
    add_run_arguments(parser, "cpu", "cpu or cuda[:N]")
    parser.add_argument("--iterations", type=positive_int, default=30, help="timed iterations (default: %(default)s)")
    parser.add_argument("--rounds", type=positive_int, default=3,
                        help="rounds of iterations at most while the spread exceeds 5%% (default: %(default)s)")
    parser.add_argument("--noise-budget", type=non_negative_seconds, default=60.0,
                        help="seconds of timed iterations one measurement may spend on repeated rounds; 0 never "
                             "repeats (default: %(default)s)")
    parser.add_argument("--cpu-memory-limit", type=bounded_int(*CPU_MEMORY_LIMIT_BYTES, "a number of bytes"),
                        default=None,
                        help="bytes a CPU run may map beyond what the process holds; more ends as status oom")
    parser.add_argument("--subset", help="subset .pt written by `rooflow subset` (default: the generated stand-in "
                                         f"the workflow uses without a dataset, {SubsetSpec.classes} classes × "
                                         f"{SubsetSpec.images_per_class} images, made in memory)")
    parser.add_argument("--one-iteration", action="store_true",
                        help="profile exactly one iteration between cudaProfilerStart/Stop (for ncu/nsys)")
    parser.add_argument("--output", help="timing JSON to write (default: print)")
    parser.add_argument("--timeline", help="CSV to write the kernels of one extra, profiled iteration to (GPU; "
                                           "empty on a CPU)")
    parser.set_defaults(func=_cmd_time)
