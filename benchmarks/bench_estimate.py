"""How long rooflow's analytic estimate takes, and how much memory, per model (meta device: no tensors are
allocated, so batch 256 should cost what batch 1 costs).

    .venv/bin/python benchmarks/bench_estimate.py                       # a few models, b1 and b256
    .venv/bin/python benchmarks/bench_estimate.py --all --batch 256 --mode training   # the whole zoo
    .venv/bin/python benchmarks/bench_estimate.py --matrix --batch 2    # every model × precision × mode
    .venv/bin/python benchmarks/bench_estimate.py --module              # one user's layer on a device

Prints one row per model × batch: seconds to estimate (model construction on meta included), the
process's resident memory after it and its peak so far (VmRSS/VmHWM), and the FLOPs for reference.
"""

from __future__ import annotations

import argparse
import time


def _rss_mb() -> tuple[float, float]:
    fields = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = float(value.split()[0]) / 1024
    return fields.get("VmRSS", float("nan")), fields.get("VmHWM", float("nan"))


# A user's own layer predicted on a device (rooflow.estimate_module, issue "Your own model"): the target, once
# imports and the device's calibration are loaded, is under a second a call
MODULE_TARGET_SECONDS = 1.0


def module_table(repeats: int = 5) -> int:
    """Seconds of ``rooflow.estimate_module`` on one nn.Conv2d(64, 128, 3) at batch 32, 56×56, on the T4 (meta
    device), after one call that loads the imports and the device's calibration: each repeat and their median
    against MODULE_TARGET_SECONDS. Returns 1 where the median misses it."""
    import statistics

    import torch

    import rooflow

    conv = torch.nn.Conv2d(64, 128, 3, padding=1).to("meta")
    x = torch.empty(32, 64, 56, 56, device="meta")
    rooflow.estimate_module(conv, (x,), device="t4")
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        rooflow.estimate_module(conv, (x,), device="t4")
        seconds.append(time.perf_counter() - start)
    median = statistics.median(seconds)
    print("| call | seconds |\n|---|---:|")
    for number, value in enumerate(seconds, 1):
        print(f"| {number} | {value:.3f} |")
    print(f"| median | {median:.3f} (target < {MODULE_TARGET_SECONDS:g}: {'met' if median < MODULE_TARGET_SECONDS else 'MISSED'}) |")
    return 0 if median < MODULE_TARGET_SECONDS else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["resnet18", "resnet50", "vgg16", "mobilenet_v2",
                                                      "efficientnet_b0", "vit_b_16", "swin_t"])
    parser.add_argument("--all", action="store_true", help="every torchvision classification model")
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 256])
    parser.add_argument("--mode", choices=["inference", "training"], nargs="+", default=["training"])
    parser.add_argument("--precision", nargs="+", default=["fp32"],
                        help="one or more of fp32 tf32 fp16 bf16")
    parser.add_argument("--matrix", action="store_true",
                        help="every model × fp32/tf32/fp16/bf16 × inference/training at --batch (issue: no "
                             "combination may crash); prints one row per run and the failures")
    parser.add_argument("--module", action="store_true",
                        help="time rooflow.estimate_module on one nn.Conv2d on the T4 against its 1 s target")
    args = parser.parse_args()
    if args.module:
        return module_table()
    if args.matrix:
        args.all, args.precision, args.mode = True, ["fp32", "tf32", "fp16", "bf16"], ["inference", "training"]

    from rooflow.estimate import estimate
    from rooflow.workload.models import classification_models

    models = list(classification_models()) if args.all else args.models
    estimate("resnet18", 1, mode=args.mode[0])  # warm imports and caches out of the first row
    print(f"{'model':22} {'batch':>5} {'prec':4} {'mode':9} {'seconds':>8} {'RSS MB':>8} {'peak RSS MB':>11} "
          f"{'total GFLOP':>12} {'peak mem GB':>11}")
    total_seconds, failures, runs = 0.0, [], 0
    start_all = time.perf_counter()
    for name in models:
        for batch in args.batch:
            for precision in args.precision:
                for mode in args.mode:
                    start = time.perf_counter()
                    runs += 1
                    try:
                        est = estimate(name, batch, precision, mode)
                    except Exception as error:  # noqa: BLE001 — report and go on: the table is the result
                        failures.append(f"{name} b{batch} {precision} {mode}: {type(error).__name__}: {error}")
                        continue
                    seconds = time.perf_counter() - start
                    total_seconds += seconds
                    rss, peak = _rss_mb()
                    t = est.totals
                    print(f"{name:22} {batch:>5} {precision:4} {mode:9} {seconds:>8.2f} {rss:>8.0f} {peak:>11.0f} "
                          f"{t['total_flops'] / 1e9:>12.2f} {t['peak_memory_bytes'] / 1e9:>11.2f}", flush=True)
    rss, peak = _rss_mb()
    print(f"\n{runs} runs ({len(models)} models × {len(args.batch)} batch × {len(args.precision)} precision × "
          f"{len(args.mode)} mode): {total_seconds:.1f} s estimating ({time.perf_counter() - start_all:.1f} s wall), "
          f"peak RSS {peak:.0f} MB, {len(failures)} failed")
    for failure in failures:
        print("FAILED", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
