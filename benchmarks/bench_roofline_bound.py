"""Which predictions fall under their per-op roofline time, over torchvision's classification zoo, and why.

    .venv/bin/python benchmarks/bench_roofline_bound.py                            # every model, 4 GPUs, fp32
    .venv/bin/python benchmarks/bench_roofline_bound.py --models resnet50 vgg16 --precisions fp32 bf16

Per GPU, precision and mode: the steps estimated, how many the time model predicts under their roofline time
(rooflow.estimate.predict: every op at its roof, attention as its fused kernel), how many carry a
``below_roofline`` note, and how many of those name a row whose cause is "unexplained" — which must be none:
the roofline time is a lower bound but for Winograd/FFT convolutions and data the kernel model keeps in L2.
Each model's estimate (seconds, on the meta device) is made once per precision and mode and priced on every GPU.
"""

from __future__ import annotations

import argparse
import sys
import time

from rooflow.estimate import api

DEVICES = ("h100-sxm5-80gb", "a100-pcie-80gb", "l4", "t4")


def _models() -> list[str]:
    import torchvision

    return sorted(torchvision.models.list_models(module=torchvision.models))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=None, help="torchvision names (default: every classifier)")
    parser.add_argument("--devices", nargs="+", default=list(DEVICES), help="catalogue keys")
    parser.add_argument("--precisions", nargs="+", default=["fp32"], help="fp32 tf32 fp16 bf16")
    parser.add_argument("--modes", nargs="+", default=["inference", "training"])
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args(argv)
    models = args.models or _models()
    counts: dict[tuple, list[int]] = {}
    unexplained: list[str] = []
    start = time.perf_counter()
    for precision in args.precisions:
        for mode in args.modes:
            for number, model in enumerate(models, 1):
                print(f"{precision} {mode}: {number}/{len(models)} {model}", file=sys.stderr, flush=True)
                result = api.estimate(model, args.batch, precision, mode)
                for device in args.devices:
                    api.predict(result, device)
                    totals = result.totals
                    note = totals.pop("below_roofline", None)
                    row = counts.setdefault((device, precision, mode), [0, 0, 0, 0])
                    row[0] += 1
                    row[1] += int((totals.get("predicted_seconds") or 0) < (totals.get("roofline_seconds") or 0))
                    row[2] += int(bool(note))
                    if note and "unexplained" in note:
                        row[3] += 1
                        unexplained.append(f"{device} {model} {precision} {mode}: {note}")
    print("| GPU | precision | mode | steps | under the roofline | with a note | unexplained |")
    print("|---|---|---|---:|---:|---:|---:|")
    for (device, precision, mode), (steps, under, noted, odd) in counts.items():
        print(f"| {device} | {precision} | {mode} | {steps} | {under} | {noted} | {odd} |")
    for line in unexplained:
        print(line)
    print(f"\n{time.perf_counter() - start:.0f} s, batch {args.batch}")


if __name__ == "__main__":
    main()
