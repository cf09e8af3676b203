"""Held-out checks of the kernel model (rooflow.estimate.kernel_calibration) on measured single ops.

Held one GPU out: train on all GPUs of the data set but one, predict the one left out from its family's
(GEMM, convolution) or all GPUs' (elementwise, normalization, softmax, launch floors) parameters and its
own datasheet; held one family out: its whole architecture family with it (all families' parameters: the case
of the L4, and of the A100's convolutions). Held-out shapes: per GPU, fit on its rows but a fixed random 20% of each operator's shapes,
predict those. Fitted on few: per GPU, fit on as many shapes per operator as `rooflow ceilings --single-ops`
measures on a user's GPU, predict the rest. Each prints per class the fraction within ±25%, the fraction inside
the range the calibration's predictions print (its GPU's ±, after its name) and the median |error|. Convolution
algorithms: which of cuDNN's algorithms (read from the kernels each call ran) the model makes fastest, and how its
model of the one that ran compares. Power pairs: a power-limited board's time
over its family's full-power board's for the same shapes, per operator and call duration. Third-party GEMMs:
catalogue GPUs' predicted torch.mm rates against rates measured by others (never fitted): FP32 by the kernel
model, then every precision by the step model.

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
    SHAPE_COLUMNS,
    algorithm_agreement,
    fit_each,
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
# The same database's rows with every precision, best of those sizes (TF32: allow_tf32 on FP32 tensors; FP16/BF16:
# 16-bit tensors, FP32 accumulate): the step model's matrix-product time of one x @ w (`rooflow.estimate_module`,
# its matmul class, autocast casts apart). Its contributors: P100 and T4 zzc0208 (Kaggle), V100 hhhhhge, A100
# SXM4 80GB Charming, L4 issue #120, L40S, H200 Mightlaus, H100 HaxxorCialtion. Never fitted.
THIRD_PARTY_PRECISIONS = {"p100-pcie-16gb": {"fp32": 8.63, "tf32": 8.63, "fp16": 8.39, "bf16": 6.11},
                          "v100-sxm2-16gb": {"fp32": 14.06, "fp16": 94.84, "bf16": 10.34},
                          "t4": {"fp32": 4.35, "tf32": 3.97, "fp16": 41.93, "bf16": 2.01},
                          "a100-sxm4-80gb": {"fp32": 19.18, "fp16": 258.74, "bf16": 264.53},
                          "l4": {"fp32": 15.38, "tf32": 31.88, "fp16": 68.83, "bf16": 70.89},
                          "l40s": {"fp32": 46.88, "fp16": 264.02, "bf16": 269.15},
                          "h100-sxm5-80gb": {"fp32": 51.88, "tf32": 402.15, "fp16": 760.04, "bf16": 797.51},
                          "h200-sxm-141gb": {"fp32": 51.34, "fp16": 759.40, "bf16": 790.29}}


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


def third_party_precisions() -> str:
    """Measured best torch.mm rate per precision (THIRD_PARTY_PRECISIONS) against the step model's best over
    MM_SIZES: what `rooflow estimate` prices a matrix product at on each catalogue GPU."""
    import torch

    from rooflow.estimate.api import estimate_module, predict

    class Product(torch.nn.Module):
        def __init__(self, n: int):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.empty(n, n, device="meta"))

        def forward(self, x):
            return x @ self.weight

    precisions = ("fp32", "tf32", "fp16", "bf16")
    estimates = {(n, precision): estimate_module(Product(n), torch.empty(n, n, device="meta"), precision=precision)
                 for n in MM_SIZES for precision in precisions}
    lines = ["| GPU | " + " | ".join(f"{p} measured / predicted TFLOP/s (ratio)" for p in precisions) + " |",
             "|---|" + "---:|" * len(precisions)]
    ratios = []
    for key, measured in THIRD_PARTY_PRECISIONS.items():
        cells = []
        for precision in precisions:
            if precision not in measured:
                cells.append("-")
                continue
            predicted = max(2 * n ** 3 / 1e12 / predict(estimates[n, precision], key, ceilings=(
                str(H100_CEILINGS) if key == "h100-sxm5-80gb" else None)).totals["predicted_seconds_by_class"]["matmul"]
                for n in MM_SIZES)
            ratios.append(measured[precision] / predicted)
            cells.append(f"{measured[precision]:.1f} / {predicted:.1f} ({ratios[-1]:.2f})")
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    within = sum(abs(ratio - 1) <= 0.25 for ratio in ratios)
    return "\n".join(lines) + f"\n\n{within} of {len(ratios)} within ±25%"


# Power-limited boards beside a full-power board of their family, the same shapes measured on both
POWER_PAIRS = (("Tesla T4", "Tesla V100-PCIE-32GB"), ("Tesla P4", "Tesla P100-PCIE-16GB"))
DURATION_BINS = (0, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e3)


def power_pairs(data: pd.DataFrame, gpus: dict) -> str:
    """Per power-limited board and operator: the median of its time over the full-power board's for the same
    compute-bound shapes (over 100 FLOPs per byte), by the full-power board's call duration. Against the ratio of
    their datasheet FP32 peaks, this shows how far each operator's kernels slow down under the power limit."""
    lines = ["| pair (peak ratio) | operator | " + " | ".join(
        f"{low * 1e3:g}–{high * 1e3:g} ms" if high < 1 else f"≥ {low * 1e3:g} ms"
        for low, high in zip(DURATION_BINS, DURATION_BINS[1:])) + " |",
        "|---|---|" + "---:|" * (len(DURATION_BINS) - 1)]
    for limited, full in POWER_PAIRS:
        if limited not in gpus or full not in gpus:
            continue
        peak_ratio = gpus[full].fp32_flops_per_second / gpus[limited].fp32_flops_per_second
        for operator, keys in SHAPE_COLUMNS.items():  # the same shape measured on both boards
            rows = data[data["operator"] == operator]
            pair = pd.concat([rows[rows["gpu"] == name].groupby(list(keys))["seconds"].median().rename(name)
                              for name in (limited, full)], axis=1, join="inner")
            if pair.empty:
                continue
            m, n, k, count, moved = kernel_calibration._gemm_views(pair.reset_index().assign(operator=operator))
            pair = pair[(2 * m * n * k * count / moved > 100)]
            ratio = (pair[limited] / pair[full]).groupby(pd.cut(pair[full], DURATION_BINS), observed=False)
            cells = [f"{value:.2f} ({size})" if size else "-" for value, size in zip(ratio.median(), ratio.size())]
            lines.append(f"| {limited} / {full} ({peak_ratio:.2f}) | {operator} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


H200_RUNS = Path(__file__).resolve().parent.parent / "tests" / "data" / "real" / "gpu-2026-11-28"


def hopper_single_ops() -> str:
    """rooflow's H200 single ops (the shipped calibration's first run, and its repeat of the same shapes) with the
    launch floors of their host: predicted from the other measured GPUs (held out), then as shipped (fitted on the
    first run; its repeat is the check)."""
    calibrations, gpus, _, roofs = kernel_calibration.load_shipped()
    others = {name: calibration for name, calibration in calibrations.items() if name != "NVIDIA H200"}
    table = []
    for run in ("single-ops-h200", "single-ops-h200-repeat"):
        rows = load_measurements(H200_RUNS / run)
        gpu = load_dataset_gpus(H200_RUNS / run)["NVIDIA H200"]
        for label, calibration in (("held out", kernel_calibration.family_calibration(gpu, others, gpus, roofs)),
                                   ("shipped", kernel_calibration.calibration_of(gpu, "h200-sxm-141gb"))):
            calibration = kernel_calibration.with_host_floors(rows, gpu, calibration)
            name = f"{'repeat' if run.endswith('repeat') else 'first'} run, {label}"
            table += [{**score, "gpu": name} for score in kernel_calibration._score(
                rows, kernel_calibration.predict_seconds(rows, gpu, calibration), gpu.name, 0.25,
                calibration.relative_uncertainty)]
    return format_table(pd.DataFrame(table), "H200 run, calibration")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT))
    args = parser.parse_args()
    start = time.perf_counter()
    data = load_measurements(args.data)
    gpus = load_dataset_gpus(args.data)
    print(f"{len(data)} measured calls on {data['gpu'].nunique()} GPUs\n\nheld one GPU out:")
    fitted = fit_each(data, gpus)
    print(format_table(held_one_out(data, gpus, calibrations=fitted)))
    print("\nheld one GPU out, with the launch floors of the host that measured it (each operator's fastest calls; "
          "a convolution's fastest tenth less their work):")
    print(format_table(held_one_out(data, gpus, host_floors=True, calibrations=fitted), "held out, host floors"))
    print("\nheld one family out (its whole architecture family left out with it: a GPU of a family nothing measured, "
          "the L4's; the A100's convolutions):")
    print(format_table(held_one_out(data, gpus, calibrations=fitted, whole_family=True), "family held out"))
    print(format_table(held_one_out(data, gpus, host_floors=True, calibrations=fitted, whole_family=True),
                       "family out, host floors"))
    print("\nheld-out shapes (20% of each GPU's shapes per operator, fitted on the rest):")
    print(format_table(held_out_shapes(data, gpus), "held-out shapes of"))
    counts = shape_counts()
    print(f"\nfitted on as many shapes per operator as `rooflow ceilings --single-ops` measures ({counts['conv']} "
          f"of each convolution and GEMM operator, {counts['add']} of the others), predicting the rest:")
    print(format_table(fitted_on_few(data, gpus, counts), "fitted on few of"))
    print("\nconvolution algorithms: cuDNN's picks (the kernels each call ran) against the model's fastest, each GPU "
          "fitted on its own calls; median predicted/measured of the algorithm it ran:")
    print(algorithm_agreement(data, gpus).to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    print("\npower-limited boards: time over their family's full-power board's for the same compute-bound shapes "
          "(median, calls), by the full-power board's call duration:")
    print(power_pairs(data, gpus))
    print("\nrooflow's H200 single ops, the host's floors: from the other GPUs (held out) and as shipped (fitted on "
          "the first run; the repeat of its shapes is the check):")
    print(hopper_single_ops())
    print("\nthird-party FP32 torch.mm (TF32 off), the shipped calibrations:")
    print(third_party_mm())
    print("\nthird-party torch.mm by precision (best of n = 1024 ... 10240), the step model's matrix products:")
    print(third_party_precisions())
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
