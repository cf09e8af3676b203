"""Time batch-256 steps of torchvision models no rooflow fixture holds on the lent GPU, as the H200 sweep of
gpu-2026-11-25 did (rooflow.measure.timing.measure, cudnn.benchmark switched on after the Runner is built), with
5 warm-up and 15 timed iterations in one round, most wanted first, within a time budget.
Usage: python3 sweep_new.py OUT.jsonl SECONDS"""
import json
import sys
import time
import traceback

import torch
import torchvision

from rooflow.measure import timing
from rooflow.workload.dataset import SubsetSpec, build_subset, load_subset

MODELS = ["resnet101", "resnext50_32x4d", "mobilenet_v3_large", "swin_t", "wide_resnet50_2", "vit_b_32",
          "shufflenet_v2_x1_0", "densenet169", "efficientnet_b2", "regnet_x_3_2gf", "convnext_small", "mnasnet1_0"]
PASSES = [("bf16", "training"), ("tf32", "training"), ("bf16", "inference"), ("fp32", "training"), ("fp32", "inference")]
_init = timing.Runner.__init__


def _init_then_benchmark(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    torch.backends.cudnn.benchmark = True


timing.Runner.__init__ = _init_then_benchmark
out, budget = sys.argv[1], float(sys.argv[2])
start = time.monotonic()
build_subset(SubsetSpec(), "/tmp/subset.pt", "/tmp/subset.csv")
subset = load_subset("/tmp/subset.pt")
env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "torchvision": torchvision.__version__,
       "cudnn": torch.backends.cudnn.version()}
with open(out, "a") as log:
    for precision, mode in PASSES:
        for model in MODELS:
            row = {"model": model, "batch": 256, "precision": precision, "mode": mode, "variant": "eager"}
            if time.monotonic() - start > budget:
                continue
            began = time.monotonic()
            try:
                r = timing.measure(timing.RunSpec(model, 256, precision, mode, device="cuda", warmup_iterations=5,
                                                  timed_iterations=15, max_timing_rounds=1), subset)
                row.update(status=r["status"], message=r.get("message"))
                for key in ("median_seconds", "min_seconds", "iqr_over_median", "forward_median_seconds",
                            "backward_median_seconds", "optimizer_median_seconds", "throttled"):
                    row[key] = r.get(key)
                for key in ("steady_peak_allocated", "steady_peak_reserved", "warmup_peak_allocated",
                            "warmup_peak_reserved"):
                    row[key] = r.get(key + "_bytes")
            except Exception as error:  # noqa: BLE001 - record it, go on
                row.update(status="error", message=f"{type(error).__name__}: {error}"[:300],
                           traceback=traceback.format_exc()[-1500:])
            torch.cuda.empty_cache()
            row.update(wall_seconds=time.monotonic() - began, **env)
            log.write(json.dumps(row) + "\n")
            log.flush()
            print(model, precision, mode, row["status"], row.get("median_seconds"), round(row["wall_seconds"], 1),
                  flush=True)
