"""How many op calls of one step ncu's distinct mode profiles, per model and mode (on this machine's CPU).

    .venv/bin/python benchmarks/bench_distinct_ops.py [resnet50 vgg16 mobilenet_v2] [--batch 2]

Runs the profiling driver's distinct-mode step (rooflow.measure.driver.annotated_step) on the CPU, with the CUDA
profiler calls replaced by no-ops, and prints per model × mode: the aten op calls of the step, the distinct
signatures among them (the calls ncu would profile), and the same two counts for the calls that can launch
a kernel (views, detach and the profiler's record_function ops launch none). The CPU dispatches the same
ops as a GPU, except that batch norm runs as native_batch_norm instead of cudnn_batch_norm (one call each
way); the optimizer is SGD with foreach=True, as on a GPU. Counts do not depend on the batch size.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

import torch  # noqa: E402

from rooflow.measure import driver  # noqa: E402
from rooflow.measure.timing import Runner, RunSpec  # noqa: E402


def launches_no_kernel(op: str) -> bool:
    """Views, detach and profiler bookkeeping: no kernel whatever their shapes."""
    namespace, _, rest = op.partition(".")
    if namespace != "aten":
        return True
    name, _, overload = rest.partition(".")
    packet = getattr(torch.ops.aten, name, None)
    overload_fn = getattr(packet, overload or "default", None) if packet is not None else None
    return name == "detach" or bool(overload_fn is not None and overload_fn.is_view)


def count(model: str, mode: str, batch: int) -> dict:
    subset = {"images": torch.zeros(batch, 3, 224, 224, dtype=torch.uint8), "labels": torch.arange(batch) % 10}
    runner = Runner(RunSpec(model, batch, "fp32", mode, "cpu"), subset)
    if mode == "training":
        runner.optimizer = torch.optim.SGD(runner.model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4,
                                           foreach=True)
    runner.step()  # warm-up: optimizer state, as in the driver
    plan = driver.annotated_step(runner, "distinct")
    compute = [entry for entry in plan["signatures"] if not launches_no_kernel(entry["op"])]
    return {"calls": plan["calls"], "distinct": plan["distinct"],
            "compute_calls": sum(entry["count"] for entry in compute), "compute_distinct": len(compute)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["resnet50", "vgg16", "mobilenet_v2"])
    parser.add_argument("--batch", type=int, default=2)
    args = parser.parse_args()
    driver._profiler_start = driver._profiler_stop = lambda: None  # no GPU: nothing to start
    torch.set_num_threads(max(1, torch.get_num_threads()))
    print(f"{'model':14} {'mode':9} {'op calls':>8} {'distinct':>8} {'kept':>6} {'kernel-op calls':>15} "
          f"{'distinct':>8} {'kept':>6} {'seconds':>7}")
    for model in args.models:
        for mode in ("inference", "training"):
            started = time.perf_counter()
            c = count(model, mode, args.batch)
            print(f"{model:14} {mode:9} {c['calls']:>8} {c['distinct']:>8} {c['distinct'] / c['calls']:>6.0%} "
                  f"{c['compute_calls']:>15} {c['compute_distinct']:>8} "
                  f"{c['compute_distinct'] / c['compute_calls']:>6.0%} {time.perf_counter() - started:>7.1f}",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
