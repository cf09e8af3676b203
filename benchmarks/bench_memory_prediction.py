"""How well rooflow predicts the steady-state peak of ``torch.cuda.max_memory_allocated`` on the GPU sweeps.

    .venv/bin/python benchmarks/bench_memory_prediction.py                 # both sweeps, the default cache
    .venv/bin/python benchmarks/bench_memory_prediction.py --gpu h100 --rows   # every H100 run's ratio

Per GPU and batch: runs, how many are within ±15% (the issue's target: 90%), and the worst misses with their
ratio measured / predicted. The sweeps: the H100's 7 models at batch 1/32/256
(../shared/fixtures/real/h100-rooflow/h100-sweep-7-models.jsonl) and the H200's 12 models at batch 32/256
(tests/data/real/gpu-2026-11-25/h200-sweep-12-models.jsonl), and 10 H100 runs of models not in the H100 sweep
(h100-sweep-5-new-models-partial.jsonl there). Estimates take seconds each on 2 cores; they are
pickled to ``--cache`` with their traces, whose memory replay (rooflow.estimate.memory) is rerun each time; the
cache holds the estimates of one version of rooflow.estimate's source and starts afresh when that changes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pickle
from pathlib import Path

from rooflow.estimate.api import estimate_run
from rooflow.estimate.memory import memory_totals
from rooflow.estimate.predict import held_workspace_threads, predict_memory
from rooflow.hardware.devices import load_device
from rooflow.workload.spec import spec_from_options

ROOT = Path(__file__).resolve().parents[1]
DEVICES = ROOT / "config" / "devices.yaml"
# (file, device, whether its at_rest_before counts the run's weights and input: the H100's does, the H200's not)
SWEEPS = {
    "h100": (ROOT.parent / "shared" / "fixtures" / "real" / "h100-rooflow" / "h100-sweep-7-models.jsonl",
             "h100-sxm5-80gb", True),
    "h200": (ROOT / "tests" / "data" / "real" / "gpu-2026-11-25" / "h200-sweep-12-models.jsonl", "h200-sxm-141gb",
             False),
    # 10 H100 runs of two models not in the H100 sweep (convnext_tiny, densenet121), batch 256
    "h100-new": (ROOT / "tests" / "data" / "real" / "gpu-2026-11-25" / "h100-sweep-5-new-models-partial.jsonl",
                 "h100-sxm5-80gb", False),
}
TOLERANCE = 0.15


def _runs(path: Path) -> list[dict]:
    runs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [run for run in runs if run.get("status") == "ok" and run.get("steady_peak_allocated")]


def _source_fingerprint() -> str:
    """A digest of rooflow.estimate's source: estimates cached under another one are stale (an ops table's
    columns, a counter's rules)."""
    digest = hashlib.sha256()
    for path in sorted((Path(__file__).resolve().parents[1] / "rooflow" / "estimate").glob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _estimates(keys: list[tuple], cache: Path, inputs: dict[str, list[str]] | None = None) -> dict[tuple, object]:
    """The estimate of each (model, batch, precision, mode): a torchvision name, or a package.module:factory
    model on its ``inputs`` (per-sample shapes by factory)."""
    fingerprint = _source_fingerprint()
    stored = pickle.loads(cache.read_bytes()) if cache.is_file() else {}
    done = stored.get("estimates", {}) if stored.get("fingerprint") == fingerprint else {}
    for key in keys:
        if key not in done:
            model, *run = key
            done[key] = estimate_run(spec_from_options(model, (inputs or {}).get(model)), *run)
            # after each: an interrupted run keeps what it made
            cache.write_bytes(pickle.dumps({"fingerprint": fingerprint, "estimates": done}))
    return done


def compare(gpu: str, cache: Path) -> list[dict]:
    path, device_key, rest_counts_run = SWEEPS[gpu]
    device = load_device(DEVICES, device_key)
    runs = _runs(path)
    keys = sorted({(r["model"], r["batch"], r["precision"], r["mode"]) for r in runs})
    estimates = _estimates(keys, cache)
    rows = []
    for run in runs:
        est = estimates[(run["model"], run["batch"], run["precision"], run["mode"])]
        est.totals.update(memory_totals(est.trace))  # the replay is cheap: a cached trace sees memory.py's changes
        # the sweep ran in one process: earlier steps' cuBLAS workspaces are still held (at_rest_before)
        run_bytes = est.totals["weight_bytes"] + est.totals["input_bytes"] if rest_counts_run else 0
        held = held_workspace_threads(run["at_rest_before"], device, run_bytes)
        predicted = predict_memory(est.totals, device, held)["predicted_memory_bytes"]
        rows.append({**{k: run[k] for k in ("model", "batch", "precision", "mode")},
                     "measured_bytes": run["steady_peak_allocated"], "predicted_bytes": predicted,
                     "ratio": run["steady_peak_allocated"] / predicted})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", choices=sorted(SWEEPS), nargs="+", default=sorted(SWEEPS))
    parser.add_argument("--cache", type=Path, default=Path("/tmp/rooflow-memory-estimates.pkl"))
    parser.add_argument("--worst", type=int, default=4, help="misses listed per GPU and batch")
    parser.add_argument("--rows", action="store_true", help="print every run's ratio too")
    args = parser.parse_args()
    print(f"| GPU | batch | runs | within ±{TOLERANCE:.0%} | worst misses (measured / predicted) |")
    print("|---|---:|---:|---:|---|")
    for gpu in args.gpu:
        rows = compare(gpu, args.cache)
        for batch in sorted({r["batch"] for r in rows}):
            at = [r for r in rows if r["batch"] == batch]
            within = sum(abs(r["ratio"] - 1) <= TOLERANCE for r in at)
            misses = sorted((r for r in at if abs(r["ratio"] - 1) > TOLERANCE), key=lambda r: -abs(r["ratio"] - 1))
            worst = ", ".join(f"{r['model']} {r['precision']} {r['mode'][:5]} {r['ratio']:.2f}"
                              for r in misses[:args.worst])
            print(f"| {gpu} | {batch} | {len(at)} | {within} ({within / len(at):.0%}) | {worst} |")
        if args.rows:
            for r in sorted(rows, key=lambda r: (r["model"], r["batch"], r["precision"], r["mode"])):
                print(f"  {r['model']:16s} b{r['batch']:<4d} {r['precision']:5s} {r['mode']:9s} "
                      f"measured {r['measured_bytes'] / 1e9:7.3f} GB predicted {r['predicted_bytes'] / 1e9:7.3f} GB "
                      f"ratio {r['ratio']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
