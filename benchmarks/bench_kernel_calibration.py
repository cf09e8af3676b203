"""Held-out checks of the kernel model (rooflow.estimate.kernel_calibration) on measured single ops.

Held one GPU out: train on all GPUs of the data set but one, predict the one left out from its family's
(GEMM, convolution) or all GPUs' (elementwise, normalization, softmax, launch floors) parameters and its
own datasheet. Held-out shapes: per GPU, fit on its rows but a fixed random 20% of each operator's shapes,
predict those. Fitted on few: per GPU, fit on as many shapes per operator as `rooflow ceilings --single-ops`
measures on a user's GPU, predict the rest. Each prints per class the fraction within ±25% and the median
|error|. Third-party FP32
GEMMs: catalogue GPUs' predicted FP32 torch.mm rates against rates measured by others (never fitted).

    python benchmarks/bench_kernel_calibration.py [--data ../shared/fixtures/public/neusight-kernels]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from rooflow.ceilings.single_ops import shape_counts
from rooflow.estimate import kernel_calibration
from rooflow.estimate.kernel_calibration import (
    fitted_on_few,
    format_table,
    held_one_out,
    held_out_shapes,
    load_dataset_gpus,
    load_measurements,
)

DEFAULT = Path(__file__).resolve().parent.parent.parent / "shared" / "fixtures" / "public" / "neusight-kernels"
CATALOGUE = Path(__file__).resolve().parent.parent / "config" / "devices.yaml"
H100_CEILINGS = Path(__file__).resolve().parent.parent / "tests" / "data" / "real" / "h100-rooflow" / "ceilings-h100.json"
# FP32 torch.mm (TF32 off) of n×n by n×n, 30 calls back to back after 6 warm-up calls, TFLOP/s: the database of
# github.com/zzc0721/torch-performance-test-data (database.md: the best of n = 1024, 2048, 4096, 8192, 10240; its
# issue #120 gives the L4's every size). Other people's machines and drivers: a check, never a fit.
THIRD_PARTY_MM = {"l4": {1024: 12.87, 2048: 15.38, 4096: 12.53, 8192: 10.66, 10240: 11.11},
                  "t4": {"best": 4.43}, "a100-sxm4-80gb": {"best": 19.18}, "h100-sxm5-80gb": {"best": 52.11},
                  "h200-sxm-141gb": {"best": 51.34}, "l40s": {"best": 46.88}}
MM_SIZES = (1024, 2048, 4096, 8192, 10240)


def third_party_mm() -> str:
    """Predicted against measured FP32 torch.mm rates (THIRD_PARTY_MM), per GPU and size (or the best size)."""
    from rooflow.hardware.devices import load_device

    lines = ["| GPU | n | measured TFLOP/s | predicted TFLOP/s | measured / predicted |", "|---|---|---:|---:|---:|"]
    for key, measured in THIRD_PARTY_MM.items():
        device = load_device(CATALOGUE, key, H100_CEILINGS if key == "h100-sxm5-80gb" else None)
        calibration, gpu = kernel_calibration.for_gpu(device)
        rows = pd.DataFrame([{"operator": "linear", "op_class": "gemm", "B": 1, "M": n, "N": n, "K": n}
                             for n in MM_SIZES])
        rates = dict(zip(MM_SIZES, 2 * rows["M"].to_numpy(float) ** 3 / 1e12
                         / kernel_calibration.predict_seconds(rows, gpu, calibration)))
        for n, rate in measured.items():
            predicted = max(rates.values()) if n == "best" else rates[n]
            lines.append(f"| {key} | {n} | {rate:.2f} | {predicted:.2f} | {rate / predicted:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT))
    args = parser.parse_args()
    start = time.perf_counter()
    data = load_measurements(args.data)
    gpus = load_dataset_gpus(args.data)
    print(f"{len(data)} measured calls on {data['gpu'].nunique()} GPUs\n\nheld one GPU out:")
    print(format_table(held_one_out(data, gpus)))
    print("\nheld-out shapes (20% of each GPU's shapes per operator, fitted on the rest):")
    print(format_table(held_out_shapes(data, gpus), "held-out shapes of"))
    counts = shape_counts()
    print(f"\nfitted on as many shapes per operator as `rooflow ceilings --single-ops` measures ({counts['conv']} "
          f"of each convolution and GEMM operator, {counts['add']} of the others), predicting the rest:")
    print(format_table(fitted_on_few(data, gpus, counts), "fitted on few of"))
    print("\nthird-party FP32 torch.mm (TF32 off), the shipped calibrations:")
    print(third_party_mm())
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
