"""Held-out checks of the kernel model (rooflow.estimate.kernel_calibration) on measured single ops.

Held one GPU out: train on all GPUs of the data set but one, predict the one left out from its family's
(GEMM, convolution) or all GPUs' (elementwise, normalization, softmax, launch floors) parameters and its
own datasheet. Held-out shapes: per GPU, fit on its rows but a fixed random 20% of each operator's shapes,
predict those. Each prints per class the fraction within ±25% and the median |error|.

    python benchmarks/bench_kernel_calibration.py [--data ../shared/fixtures/public/neusight-kernels]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rooflow.estimate.kernel_calibration import (
    format_table,
    held_one_out,
    held_out_shapes,
    load_dataset_gpus,
    load_measurements,
)

DEFAULT = Path(__file__).resolve().parent.parent.parent / "shared" / "fixtures" / "public" / "neusight-kernels"


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
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
