"""Held-one-GPU-out check of the kernel model (rooflow.estimate.kernel_calibration) on measured single ops.

Train on all GPUs of the data set but one, predict the one left out from its architecture family's (or all
GPUs') parameters and its own datasheet, and print per class the fraction within ±25% and the median
|error|; then the in-sample fit (each GPU's own calibration on its own rows).

    python benchmarks/bench_kernel_calibration.py [--data ../shared/fixtures/public/neusight-kernels]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from rooflow.estimate.kernel_calibration import (
    _score,
    fit_gpu,
    format_table,
    held_one_out,
    load_dataset_gpus,
    load_measurements,
    predict_seconds,
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
    rows = []
    for name, part in data.groupby("gpu"):
        rows += _score(part, predict_seconds(part, gpus[name], fit_gpu(part, gpus[name], "in-sample")), name, 0.25)
    print("\nin sample (each GPU's own calibration):")
    print(format_table(pd.DataFrame(rows)))
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
