"""``rooflow estimate``: the analytic estimate of one or more models, as a table, JSON or CSV."""

from __future__ import annotations

import argparse
import io
import json
import sys
from typing import Any

from rooflow.arguments import batch_size
from rooflow.conventions import MODES, PRECISIONS
from rooflow.units import format_milliseconds, format_scaled

GIGA, MEGA = 1e9, 1e6




def _flatten(totals: dict[str, Any]) -> dict[str, Any]:
    """One CSV row: nested dicts become their own columns (peak memory parts) or JSON text."""
    row = {}
    for key, value in totals.items():
        if key == "peak_memory_breakdown":
            row.update({f"peak_memory_{part}_bytes": v for part, v in value.items()})
        elif isinstance(value, (dict, list)):
            row[key] = json.dumps(value, sort_keys=True)
        else:
            row[key] = value
    return row


def _intensity(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}" if value >= 10 else f"{value:.2g}"


def _scaled(value: float | None, scale: float, digits: int = 2) -> str:
    """:func:`format_scaled`, but a value it would round to 0 (a small model's GFLOP) with 2 significant digits."""
    if value and abs(value / scale) < 0.5 * 10 ** -digits:
        return f"{value / scale:.2g}"
    return format_scaled(value, scale, digits)


def _table(results: list[tuple[dict, Any]], show_layers: bool) -> str:
    out = io.StringIO()
    width = max([22, *(len(totals["model"]) for totals, _ in results)])  # a long factory name keeps its columns
    header = (f"{'model':{width}} {'batch':>5} {'prec':4} {'mode':9} {'fwd GFLOP':>10} {'bwd GFLOP':>10} "
              f"{'total GFLOP':>11} {'params M':>8} {'floor MB':>9} {'fused MB':>10} {'unfused MB':>11} "
              f"{'eager AI':>8} {'fused AI':>8} {'floor AI':>8} {'peak GB':>8} {'bwd/fwd':>7}")
    has_time = any("predicted_seconds" in totals for totals, _ in results)
    if has_time:
        header += f" {'pred ms':>9} {'range ms':>15} {'bound':>5} {'mem GB':>7} {'fits':>4}"
    print(header, file=out)
    print("-" * len(header), file=out)
    for totals, _ in results:
        ratio = totals["forward_backward_ratio"]
        line = (f"{totals['model']:{width}} {totals['batch']:>5} {totals['precision']:4} {totals['mode']:9} "
                f"{_scaled(totals['forward_flops'], GIGA):>10} {_scaled(totals['backward_flops'], GIGA):>10} "
                f"{_scaled(totals['total_flops'], GIGA):>11} {_scaled(totals['params'], MEGA):>8} "
                f"{_scaled(totals['min_bytes'], MEGA, 0):>9} {_scaled(totals['fused_bytes'], MEGA, 0):>10} "
                f"{_scaled(totals['unfused_bytes'], MEGA, 0):>11} "
                f"{_intensity(totals.get('arithmetic_intensity_unfused')):>8} "
                f"{_intensity(totals.get('arithmetic_intensity_fused')):>8} "
                f"{_intensity(totals.get('arithmetic_intensity')):>8} {_scaled(totals['peak_memory_bytes'], GIGA):>8} "
                f"{'-' if ratio is None else f'{ratio:.3f}':>7}")
        if has_time:
            seconds = totals.get("predicted_seconds")
            memory = totals.get("predicted_memory_bytes")
            fits = {True: "yes", False: "NO", None: "-"}[totals.get("fits")]
            memory_text = "-" if memory is None else f"{memory / GIGA:.2f}"
            if seconds is None:
                unpriced = str(totals.get("calibration_source", "")).startswith(f"none for {totals['device']} at ")
                why = (f"no {totals['precision']} roof" if unpriced  # a CPU's 16-bit run (timemodel.unpriced_precision)
                       else "no time model" if totals.get("roofline_seconds") else "no roof")
                line += f" {'-':>9} {why:>15} {'-':>5} {memory_text:>7} {fits:>4}"
            else:
                span = f"{format_milliseconds(totals['predicted_seconds_low'])}–{format_milliseconds(totals['predicted_seconds_high'])}"
                line += (f" {format_milliseconds(seconds):>9} {span:>15} {totals['predicted_bound']:>5} {memory_text:>7} "
                         f"{fits:>4}")
        print(line, file=out)
    unsupported = {t["model"]: t["unsupported_ops"] for t, _ in results if t["unsupported_ops"]}
    print("\nFLOPs: 1 FMA = 2 FLOPs; attention counted as math-path bmm. Bytes: floor = input + weights + "
          "output (+ gradients, momentum in training); fused = BN folded, ReLU/add in epilogues; unfused = "
          "every aten op reads its inputs and writes its outputs. Where nothing was measured the report plots an "
          "eager (or channels_last) run at eager AI = total FLOPs / unfused bytes and a compiled one at fused AI = "
          "total FLOPs / fused bytes; floor AI = total FLOPs / floor bytes, an upper bound no step reaches.",
          file=out)
    if unsupported:
        print(f"Ops without a FLOP formula (counted as 0 FLOPs, bytes counted): {unsupported}", file=out)
    for totals, _ in results:
        if totals.get("fit_verdict"):
            print(f"{totals['model']} b{totals['batch']} {totals['precision']} {totals['mode']} on "
                  f"{totals['device']}: {totals['fit_verdict']}.", file=out)
    for totals, _ in results:
        phases = totals.get("predicted_seconds_by_phase") or {}
        if totals["mode"] == "training" and phases.get("forward") is not None:
            print(f"{totals['model']} b{totals['batch']} {totals['precision']} training on {totals['device']}: "
                  f"predicted forward {format_milliseconds(phases['forward'])} ms (the loss in it), backward "
                  f"{format_milliseconds(phases.get('backward', 0.0))} ms, optimizer "
                  f"{format_milliseconds(phases.get('optimizer', 0.0))} ms, as `rooflow time` splits a step.",
                  file=out)
    for totals, _ in results:
        if totals.get("below_roofline"):
            print(f"{totals['model']} b{totals['batch']} {totals['precision']} {totals['mode']} on "
                  f"{totals['device']}: {totals['below_roofline']}.", file=out)
    sources = {(t["calibration_source"], t.get("predicted_seconds") is not None) for t, _ in results
               if t.get("calibration_source")}
    for source, timed in sorted(sources):
        if not timed:  # the source says why there is no time (a TPU)
            print(f"Predicted time: {source}.", file=out)
            continue
        parts = source_parts(source)
        print("Predicted time: host and GPU work per op, the range its uncertainty; calibration:", file=out)
        print("\n".join(f"  - {part}" for part in parts), file=out)
        print("roofline_seconds (--format json): every op at its roof (attention as its fused kernel runs it on a GPU), "
              "a lower bound but for Winograd/FFT convolutions, which multiply less than the FLOPs counted, and data "
              "priced in cache (a line above names such rows).", file=out)
    if show_layers:
        for totals, layers in results:
            print(f"\n{totals['model']} — per layer (GFLOP, MB)", file=out)
            view = layers[["layer", "type", "output_shape", "forward_flops", "backward_flops", "params",
                           "activation_bytes", "unfused_bytes"]].copy()
            for column in ("forward_flops", "backward_flops"):
                view[column] = view[column] / GIGA
            for column in ("activation_bytes", "unfused_bytes"):
                view[column] = view[column] / MEGA
            print(view.to_string(index=False, float_format=lambda v: f"{v:,.3f}"), file=out)
    return out.getvalue()


def source_parts(source: str) -> list[str]:
    """A calibration source's clauses, one per printed line: the text split at each "; " outside parentheses (a
    clause's own parenthesised list keeps its semicolons)."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(source):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and source.startswith("; ", index):
            parts.append(source[start:index])
            start = index + 2
    parts.append(source[start:])
    return [part.strip() for part in parts if part.strip()]


def _what_if(args: argparse.Namespace, specs: list) -> int:
    from rooflow.errors import RooflowError
    from rooflow.estimate.api import what_if_run
    from rooflow.estimate.whatif import format_table

    if not args.device or len(specs) != 1:
        raise RooflowError("--what-if: give one model and --device (the device the run is on)")
    if args.format == "csv":
        raise RooflowError("--what-if: use --format table or json (the alternatives are not one CSV)")
    result = what_if_run(specs[0], args.batch, args.precision, args.mode, args.device, args.input_size,
                         devices_file=args.devices_file, ceilings=args.ceilings, measured=args.from_measured)
    if args.format == "json":
        json.dump(result, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_table(result))
    return 0


def run(args: argparse.Namespace) -> int:
    from rooflow.errors import RooflowError
    from rooflow.estimate.api import estimate_run, predict
    from rooflow.workload.spec import refuse_factory_options, refuse_input_size, spec_from_options

    args.models = [*args.models, *args.model_options]
    if not args.models:
        raise RooflowError("give a model, e.g. `rooflow estimate resnet50` (or --model resnet50); "
                           "`rooflow estimate --help` says which names it takes")
    refuse_factory_options(args.models, args.input, args.loss, args.name, mode=args.mode)
    refuse_input_size(args.models, args.input_size)
    specs = [spec_from_options(model, args.input, args.loss, args.name if len(args.models) == 1 else None)
             for model in args.models]
    if (args.ceilings or args.measured) and not args.device:  # read by the prediction only: silently ignored
        raise RooflowError(f"rooflow estimate {'--ceilings' if args.ceilings else '--measured'}: it is for the "
                           "prediction on a device: add --device KEY")
    if args.measured and not args.ceilings:  # it predicted with the datasheet roofs without a word
        raise RooflowError(f"--measured: the measured roofs are a ceilings file's: add --ceilings "
                           f"FILE (results/ceilings/{args.device}.json, or what `rooflow ceilings --device "
                           f"{args.device} --output FILE` wrote on it)")
    if args.kernel_calibrations:
        from rooflow.estimate.kernel_calibration import add_calibrations

        add_calibrations(*args.kernel_calibrations)
    if args.what_if:
        return _what_if(args, specs)
    if args.from_measured:
        raise RooflowError("--from-measured: it is the starting point of --what-if: add --what-if")
    results = []
    for spec in specs:
        est = estimate_run(spec, args.batch, args.precision, args.mode, args.input_size)
        if args.device:
            predict(est, args.device, args.devices_file, args.ceilings, args.measured)
        results.append((dict(est.totals), est.layers))

    if args.format == "json":
        payload = []
        for totals, layers in results:
            if args.layers:
                totals = {**totals, "layers": json.loads(layers.to_json(orient="records"))}
            payload.append(totals)
        json.dump(payload, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif args.format == "csv":
        import pandas as pd

        if args.layers:
            frames = [layers.assign(model=totals["model"], batch=totals["batch"], precision=totals["precision"],
                                    mode=totals["mode"]) for totals, layers in results]
            pd.concat(frames, ignore_index=True).to_csv(sys.stdout, index=False)
        else:
            pd.DataFrame([_flatten(totals) for totals, _ in results]).to_csv(sys.stdout, index=False)
    else:
        sys.stdout.write(_table(results, args.layers))
    return 0


def register(subparsers) -> None:
    from rooflow.hardware.devices import default_catalogue_path

    parser = subparsers.add_parser(
        "estimate", help="analytic FLOPs, bytes, peak memory (and predicted time) of models",
        description="Count FLOPs, DRAM bytes and peak memory of one step of torchvision or your own models on the meta "
                    "device (no memory, no compute: any batch in about a second); with --device, predict its "
                    "time (host and GPU work per op, from the device's calibration), its steady-state memory "
                    "and whether it fits the device.")
    parser.add_argument("models", nargs="*", metavar="MODEL",
                        help="torchvision model names (classification, segmentation, video, optical flow; not "
                             "detection: its box filtering's shapes depend on the data, which the meta device does "
                             "not have: `rooflow time` measures it), or your own model as package.module:factory "
                             "(a callable returning the nn.Module, importable from the working directory or "
                             "PYTHONPATH) with --input")
    # as `rooflow time --model` takes it (a user going from one to the other typed it here and was refused)
    parser.add_argument("--model", action="append", dest="model_options", default=[], metavar="MODEL",
                        help="a MODEL given as an option (repeatable), as `rooflow time --model` takes it")
    parser.add_argument("--input", action="append", metavar="SHAPE",
                        help="one input's shape without the batch, e.g. 3x224x224, for a package.module:factory "
                             "model; repeat for a model of several inputs (the batch prepended; float32, or the "
                             "dtype after a colon: 35:int64 for token ids, drawn below the model's smallest "
                             "nn.Embedding)")
    parser.add_argument("--loss", metavar="package.module:callable",
                        help="training loss of a factory model: loss(output) -> scalar tensor (default: the sum "
                             "of the floating outputs)")
    parser.add_argument("--name", help="run name of a factory model (default: derived from its path)")
    parser.add_argument("--batch", type=batch_size, default=1, help="batch size (default: %(default)s)")
    parser.add_argument("--precision", choices=PRECISIONS, default="fp32",
                        help="fp32; tf32 (fp32 tensors, TF32 matmuls); fp16/bf16 (torch.autocast semantics)")
    parser.add_argument("--mode", choices=MODES, default="inference",
                        help="inference (eval, no_grad) or training (forward, loss, backward, SGD step)")
    parser.add_argument("--input-size", type=int, default=None,
                        help="square input side in pixels, of an image or of a video clip's frames (default: the size the "
                             "model's weights were evaluated at; optical-flow models take their fixed 520×960 frames)")
    parser.add_argument("--device", help="predict the step's time and memory on this device, and whether it fits "
                                         "(a key of --devices-file; `rooflow devices` lists them)")
    parser.add_argument("--devices-file", default=str(default_catalogue_path()),
                        help="device catalogue (default: %(default)s)")
    parser.add_argument("--ceilings", default=None,
                        help="measured ceilings JSON of the device (results/ceilings/DEVICE.json) to merge in")
    parser.add_argument("--measured", action="store_true",
                        help="predict with the measured roofs instead of the datasheet ones")
    parser.add_argument("--kernel-calibrations", metavar="FILE", action="append", default=[],
                        help="kernel calibrations from `rooflow calibrate-kernels --data DIR -o FILE` (DIR: single "
                             "ops `rooflow ceilings --device KEY --single-ops DIR` measured on your GPU): a GPU they "
                             "hold is predicted from its own, the others' families take them in too; repeat it for "
                             "several files (the workflow's `kernel_calibrations:`)")
    parser.add_argument("--what-if", action="store_true",
                        help="with --device: list what to try next, ranked by predicted throughput: the other "
                             "precisions the device has, half/double/4x the batch, the variants (channels_last, "
                             "torch.compile) and every catalogue GPU, each with its predicted time range, memory, "
                             "fit and (where the catalogue prices it) cost per 1,000 images")
    parser.add_argument("--from-measured", metavar="TIMING.json",
                        help="with --what-if: a timing record of the same run on a catalogue device (the "
                             "workflow's results/profile/DEVICE/MODEL/bBATCH-PRECISION-MODE/timing.json, or `rooflow "
                             "time --output`'s on --device); every alternative on a device of its kind (GPU, "
                             "CPU) is then the measured step x its predicted ratio to it")
    parser.add_argument("--layers", action="store_true", help="add the per-layer table")
    parser.add_argument("--format", choices=["table", "json", "csv"], default="table",
                        help="table (display units: GFLOP, MB, ms), or json / csv (SI units: flops, bytes, seconds; "
                             "every field) (default: %(default)s)")
    parser.set_defaults(func=run)
