"""Do measured FLOPs and bytes agree with the estimate, and if not, which kernels carry the difference and why?

A pure function of the measured totals, the estimate and — for the explanation — the per-kernel table of the
profile and the estimate's per-op table. FLOPs agree when measured / estimated lies within ±``tolerance``
(20%). When they do not, the cause comes from evidence, never from the ratio alone:

1. **Per class.** The convolution/matmul side — tensor-core FLOPs of every kernel plus the CUDA-core FLOPs of
   convolution/GEMM kernels (FP32 convolutions, FFT/Winograd transforms, epilogues) — against the estimate's
   convolution/matmul FLOPs; the other side — the CUDA-core FLOPs of every other kernel — against the
   estimate's other op classes (elementwise, normalization, pooling, softmax, loss, optimizer). The two sides
   add up to the measured and estimated totals; the side whose difference has the sign of the gap and is the
   larger carries it.
2. **Per layer.** Convolution/matmul kernels are matched to the estimate's ops (NVTX layer ranges where ncu
   recorded them, else launch order: :mod:`rooflow.profilers.layers`), so each layer's measured FLOPs meet
   its estimate and the layers holding the gap are named with their kernels (class, short name, count, FLOPs).
3. **The algorithm, where kernel names show it**: FFT (``fft2d_*``, complex ``cf32`` GEMMs), Winograd, the
   first layer's 3 input channels padded (measured / estimated = p/3 for a padding to p channels), GEMM
   padding — more multiply-adds than the layer's M·N·K in a GEMM kernel, where a tile model confirms it when
   it can (the tile from the name, the GEMM shape from the layer: the padded shape must reproduce the
   measured ratio) — split-K. A deficit in a GEMM kernel, or an excess no rule explains,
   stays **unexplained** — and the cause says so, so the checks flag it as an error.

Without a per-kernel table only two facts are evidence: no tensor-core metric was collected on a precision
and GPU that use tensor cores (the counters cannot see that work), and nothing else: the cause then says
"unexplained".

**DRAM bytes** are held to the estimate's traffic model for how the step ran
(:func:`rooflow.conventions.bytes_model`). An eager step (either memory format) agrees when its bytes lie
between the compulsory floor and the unfused traffic (± ``tolerance``): caches keep part of the unfused
traffic off DRAM. A compiled step (torch.compile) is held to the fusion-aware bytes within ± ``tolerance``;
a gap is explained from the kernels like a FLOP gap: per side, the convolution/matmul kernels (cuDNN and
cuBLAS, to which inductor leaves convolutions and GEMMs) against the estimate's convolution/matmul ops, and
the other kernels — inductor's own ``triton_*`` kernels and whatever ran outside them (aten kernels, layout
copies) — against the estimate's other ops after its fusion rules. The side carrying at least half of the gap
is named with its kernels; otherwise, or without a per-kernel table, the cause says "unexplained". A
compiled step is profiled whole (its kernels fuse ops across layers): no per-layer attribution.

Keys read from ``measured`` (rooflow's ncu totals): ``flops_total``, ``dram_bytes``. Keys read from
``estimated`` (rooflow's estimate JSON, or plain names): ``total_flops`` or ``flops``; ``matmul_flops`` +
``attention_flops``, or ``forward_matmul_flops`` + ``backward_matmul_flops``; ``unfused_bytes`` (eager) or
``fused_bytes`` (compiled), else the other, else ``bytes``; ``min_bytes`` for the floor; ``forward_flops`` and
``first_layer_flops`` for the training note. Missing keys just leave the corresponding check out.
"""

from __future__ import annotations

import functools
import math
import re
from collections import defaultdict
from typing import Any

import pandas as pd

from rooflow.conventions import MATMUL_OP_CLASSES, bytes_model
from rooflow.profilers.kernels import (
    MATMUL_KERNEL_CLASSES,
    abbreviate_kernel_name,
    is_inductor_kernel,
    kernel_algorithm,
    kernel_direction,
    kernel_tile,
    short_kernel_name,
    uses_tensor_cores,
)
from rooflow.units import format_flops, format_quantity

TENSOR_PRECISIONS = {"tf32", "fp16", "bf16"}
DEFAULT_TOLERANCE = 0.2
MATMUL_SIDE = "convolution/matmul"
OTHER_SIDE = "other ops"
UNEXPLAINED = "Unexplained"
# The cause of a FLOP deficit the counters could not see (tensor-core work without its metrics).
TENSOR_UNSEEN = "no tensor-core metric was collected"
# A layer whose measured convolution/matmul FLOPs lie within this share of its estimate agrees.
LAYER_TOLERANCE = 0.02
# A padding or tile model explains a layer when it reproduces the measured ratio within this share.
MODEL_TOLERANCE = 0.03
# The explanation must account for at least this share of the carrying side's gap.
EXPLAINED_SHARE = 0.5
# Channel counts cuDNN/CUTLASS pad a 3-channel input to (vector widths and tensor-core K steps).
CHANNEL_PADDINGS = (4, 8, 16, 32)
# The estimate's op classes on the convolution/matmul side; other classes, and measured kernel classes, by
# the kind of work they count (for naming the kernels of the other side).
OTHER_CLASS_GROUPS = {
    "normalization": (("normalization",), ("normalization_flops",)),
    "pooling, reduction and loss": (("pooling", "reduction"), ("pooling_flops", "softmax_flops", "loss_flops")),
    "elementwise and optimizer": (("elementwise", "memory", "other"), ("elementwise_flops",)),
}


def _number(mapping: dict, *keys: str) -> float | None:
    for key in keys:
        value = mapping.get(key)
        if value is not None:
            try:
                value = float(value)
            except (TypeError, ValueError):
                continue
            if not math.isnan(value):
                return value
    return None


def _cc(architecture: Any) -> int | None:
    if architecture is None:
        return None
    match = re.match(r"^(?:sm_?)?(\d)\.?(\d)", str(architecture).strip(), re.IGNORECASE)
    return int(match.group(1)) * 10 + int(match.group(2)) if match else None



def _signed(flops: float) -> str:
    return ("+" if flops >= 0 else "−") + format_flops(abs(flops))


def estimated_sides(estimated: dict) -> tuple[float | None, float | None]:
    """(convolution/matmul FLOPs, other FLOPs) of an estimate; other = total − convolution/matmul."""
    total = _number(estimated, "total_flops", "flops")
    matmul = _number(estimated, "matmul_flops")
    if matmul is not None:
        matmul += _number(estimated, "attention_flops") or 0.0
    else:
        forward = _number(estimated, "forward_matmul_flops")
        backward = _number(estimated, "backward_matmul_flops")
        if forward is not None:
            matmul = forward + (backward or 0.0)
    if total is None or matmul is None:
        return matmul, None
    return matmul, total - matmul


def _has_flops(kernels: Any) -> bool:
    return (kernels is not None and "kernel_class" in getattr(kernels, "columns", ())
            and any(c in kernels.columns for c in ("flops_fp32", "flops_tensor", "flops_total")))


def measured_sides(kernels: pd.DataFrame) -> dict[str, float]:
    """Measured FLOPs per side (module docstring) from an ncu kernel table: ``matmul``, of which ``tensor`` and
    ``matmul_cuda_core``; ``other``."""
    from rooflow.profilers.layers import cuda_core_flops, matmul_flops_per_kernel

    matmul = matmul_flops_per_kernel(kernels)
    cuda_core = cuda_core_flops(kernels)
    is_matmul = kernels["kernel_class"].isin(MATMUL_KERNEL_CLASSES)
    tensor = pd.to_numeric(kernels.get("flops_tensor", pd.Series(0.0, index=kernels.index)), errors="coerce")
    return {"matmul": float(math.fsum(matmul)), "tensor": float(math.fsum(tensor.fillna(0.0))),
            "matmul_cuda_core": float(math.fsum(cuda_core[is_matmul])),
            "other": float(math.fsum(cuda_core[~is_matmul]))}


def reconcile(measured: dict, estimated: dict, precision: str, mode: str, tensor_metrics_collected: bool,
              *, architecture: str | int | None = None, kernels: Any = None, ops: pd.DataFrame | None = None,
              layers: pd.DataFrame | None = None, tolerance: float = DEFAULT_TOLERANCE,
              variant: str = "eager") -> dict[str, Any]:
    """Compare measured with estimated FLOPs and bytes; explain a FLOP gap from the kernels.

    ``kernels``: the profile's per-kernel table (``name``, ``kernel_class``, ``flops_*``, optionally
    ``nvtx_stack``; a table of names alone still shows FFT/Winograd/tensor-core kernels); ``ops`` and
    ``layers``: the estimate's ops.csv and layers.csv (per-layer evidence); ``architecture`` ("sm_80")
    sharpens the tensor-core diagnosis for FP32 (TF32 exists from sm_80 on); ``variant``: how the step ran
    (rooflow.conventions.VARIANTS) — which bytes it is held to, and ``compile`` profiles are not split by layer.

    Returns ``flops_measured, flops_estimated, flops_ratio`` (measured / estimated), ``flops_agree``,
    ``bytes_measured, bytes_estimated`` (the variant's traffic model, ``bytes_model``), ``bytes_ratio,
    bytes_agree``, ``cause`` (a sentence starting "Unexplained" when no evidence explains the gap; None when the
    FLOPs agree or cannot be compared), ``bytes_cause`` (likewise for the bytes), ``bytes_sides`` (compiled
    steps: {side: {measured, estimated, difference}} of DRAM bytes), ``bytes_unexplained``, ``notes``,
    ``tolerance``, and the evidence: ``sides`` ({side: {measured, estimated, difference}}), ``side`` (the side
    carrying the gap), ``attribution`` ("nvtx", "launch order" or None), ``layers`` (per-layer evidence rows),
    ``explained_share``, ``unexplained`` (bool) and ``tensor_work_unseen`` (bool: the counters missed tensor-core
    work, so the measured FLOPs are a lower bound and the measured intensity says nothing of the step's bound).
    """
    precision = (precision or "").lower()
    mode = (mode or "").lower()
    model = bytes_model(variant)
    flops_measured = _number(measured, "flops_total", "flops")
    flops_estimated = _number(estimated, "total_flops", "flops")
    bytes_measured = _number(measured, "dram_bytes", "bytes")
    bytes_estimated = _number(estimated, f"{model}_bytes", "fused_bytes", "unfused_bytes", "bytes", "dram_bytes")
    bytes_floor = _number(estimated, "min_bytes", "bytes_floor")
    bytes_unfused = _number(estimated, "unfused_bytes", "bytes_unfused")

    result: dict[str, Any] = {
        "variant": variant, "flops_measured": flops_measured, "flops_estimated": flops_estimated,
        "flops_ratio": None, "flops_agree": None, "bytes_measured": bytes_measured,
        "bytes_estimated": bytes_estimated, "bytes_model": model, "bytes_ratio": None, "bytes_agree": None,
        "cause": None, "bytes_cause": None, "bytes_sides": {}, "bytes_unexplained": False, "notes": [],
        "tolerance": tolerance, "sides": {}, "side": None, "attribution": None, "layers": [],
        "explained_share": None, "unexplained": False, "tensor_work_unseen": False,
    }
    notes: list[str] = result["notes"]
    evidence = _Evidence(measured, estimated, kernels, ops, layers, per_layer=variant != "compile")
    result["sides"] = evidence.sides
    result["attribution"] = evidence.attribution

    if flops_measured is not None and flops_estimated:
        ratio = flops_measured / flops_estimated
        result["flops_ratio"] = ratio
        result["flops_agree"] = abs(ratio - 1.0) <= tolerance
        if not result["flops_agree"]:
            cause, side, share = _flops_cause(ratio, precision, tensor_metrics_collected, _cc(architecture),
                                              evidence, flops_measured - flops_estimated)
            result.update(cause=cause, side=side, explained_share=share,
                          unexplained=cause.startswith(UNEXPLAINED),
                          tensor_work_unseen=TENSOR_UNSEEN in cause and not cause.startswith(UNEXPLAINED))
        elif mode == "training" and ratio < 1.0:
            first = _number(estimated, "first_layer_flops")
            forward = _number(estimated, "forward_flops")
            share = f" (the first layer is {100 * first / forward:.1f}% of forward FLOPs)" if first and forward else ""
            notes.append(f"Measured is {100 * (1 - ratio):.1f}% below the estimate: in training the first layer "
                         f"computes no input gradient, so backward is less than 2× forward{share}.")
        if result["flops_agree"] and evidence.sides:
            notes.append(evidence.side_sentence())
    result["layers"] = evidence.rows
    if not tensor_metrics_collected and precision in TENSOR_PRECISIONS | {"fp32"} and result["flops_agree"]:
        notes.append("No tensor-core metric was collected; if cuDNN used tensor cores, their FLOPs are missing.")

    if bytes_measured is not None and bytes_estimated:
        result["bytes_ratio"] = bytes_measured / bytes_estimated
    if model == "fused":
        if bytes_measured is not None and bytes_estimated:
            result.update(_fused_bytes(bytes_measured, bytes_estimated, bytes_floor, evidence, tolerance))
        return result
    if bytes_measured is not None and (bytes_floor or bytes_unfused or bytes_estimated):
        low = (bytes_floor or bytes_estimated or 0.0) * (1 - tolerance)
        high = (bytes_unfused or bytes_estimated or float("inf")) * (1 + tolerance)
        result["bytes_agree"] = low <= bytes_measured <= high
        if not result["bytes_agree"]:
            result.update(_eager_bytes(bytes_measured, bytes_floor or bytes_estimated or 0.0,
                                       bytes_unfused or bytes_estimated or 0.0, evidence))
    return result


def _eager_bytes(measured: float, floor: float, unfused: float, evidence: _Evidence) -> dict[str, Any]:
    """An eager step's DRAM bytes outside [floor, unfused estimate]: which side's kernels carry the gap and
    which kernels move the most, from the per-kernel table; "Unexplained" without one. Keys of
    :func:`reconcile`'s result."""
    above = measured > unfused
    bound, name = (unfused, "the unfused estimate") if above else (floor, "the compulsory floor")
    lead = (f"Measured DRAM bytes are {measured / bound:.3g}× {name} ({_traffic(measured)} vs {_traffic(bound)})")
    sides = bytes_sides(evidence.kernels, evidence.ops, estimate="unfused")
    if not sides:
        return {"bytes_unexplained": True, "bytes_cause": (
            f"{UNEXPLAINED}: {lead[0].lower()}{lead[1:]}, and without the profile's per-kernel table (with DRAM "
            f"bytes) and the estimate's ops.csv no kernel can be named for it.")}
    gap = measured - sides[MATMUL_SIDE]["estimated"] - sides[OTHER_SIDE]["estimated"]
    carrier = max((MATMUL_SIDE, OTHER_SIDE), key=lambda side: sides[side]["difference"] * math.copysign(1, gap))
    return {"bytes_sides": sides, "bytes_cause": (
        f"{lead}. By side against the unfused estimate: convolution/matmul kernels "
        f"{_traffic(sides[MATMUL_SIDE]['measured'])} where its convolution/matmul ops move "
        f"{_traffic(sides[MATMUL_SIDE]['estimated'])}; other kernels {_traffic(sides[OTHER_SIDE]['measured'])} "
        f"where its other ops move {_traffic(sides[OTHER_SIDE]['estimated'])}. The {carrier} side carries most of "
        f"the difference; its kernels moving the most: {_describe_bytes(sides[carrier]['kernels'], 3)}.")}


class _Evidence:
    """Everything the explanation may cite: per-side FLOPs, per-layer matches, kernel families."""

    def __init__(self, measured: dict, estimated: dict, kernels: Any, ops: pd.DataFrame | None,
                 layers: pd.DataFrame | None, per_layer: bool = True):
        self.estimated = estimated
        self.per_layer = per_layer
        self.kernels = kernels if kernels is not None and "name" in getattr(kernels, "columns", ()) else None
        self.with_flops = _has_flops(self.kernels)
        self.ops = ops
        self.shapes = _output_shapes(layers)
        self.sides: dict[str, dict[str, float]] = {}
        self.attribution: str | None = None
        self.rows: list[dict[str, Any]] = []
        self.repeated: int | None = None
        est_matmul, est_other = estimated_sides(estimated)
        if self.with_flops and est_matmul is not None and est_other is not None:
            got = measured_sides(self.kernels)
            self.tensor = got["tensor"]
            self.matmul_cuda_core = got["matmul_cuda_core"]
            self.sides = {
                MATMUL_SIDE: {"measured": got["matmul"], "estimated": est_matmul,
                              "difference": got["matmul"] - est_matmul},
                OTHER_SIDE: {"measured": got["other"], "estimated": est_other,
                             "difference": got["other"] - est_other},
            }
        if self.with_flops and ops is not None and len(ops) and per_layer:
            self._match_layers()

    # -- per layer ------------------------------------------------------------------------------------------

    def _match_layers(self) -> None:
        from rooflow.profilers.layers import (
            attribute_by_launch_order,
            attribute_by_nvtx,
            has_nvtx,
            matmul_flops_per_kernel,
            matmul_ops,
            repeated_steps,
        )

        kernels = self.kernels
        where = None
        if has_nvtx(kernels):
            where, self.attribution = attribute_by_nvtx(kernels), "nvtx"
        else:
            where = attribute_by_launch_order(kernels, self.ops)
            if where is not None:
                self.attribution = "launch order"
            else:
                self.repeated = repeated_steps(kernels, self.ops)
                return
        targets = matmul_ops(self.ops)
        first_layer = targets["layer"].iloc[0] if len(targets) else None
        flops = matmul_flops_per_kernel(kernels)
        on_matmul_side = kernels["kernel_class"].isin(MATMUL_KERNEL_CLASSES) | (flops > 0)
        chosen = on_matmul_side & where["layer"].notna()
        groups: dict[tuple[str, str], list[int]] = defaultdict(list)
        for position, (layer, phase) in enumerate(zip(where["layer"][chosen], where["phase"][chosen])):
            groups[(layer, phase)].append(position)
        names = kernels["name"][chosen].tolist()
        classes = kernels["kernel_class"][chosen].tolist()
        values = flops[chosen].tolist()
        estimate = targets.groupby(["layer", "phase"], sort=False)["flops"].sum()
        for key in list(estimate.index) + [k for k in groups if k not in estimate.index]:
            positions = groups.get(key, [])
            est = float(estimate.get(key, 0.0))
            got = math.fsum(values[p] for p in positions)
            if not positions and not est:
                continue
            group_names = [names[p] for p in positions]
            row = {"layer": key[0], "phase": key[1], "estimated_flops": est, "measured_flops": got,
                   "difference": got - est, "ratio": got / est if est else None,
                   "kernels": _summarize([classes[p] for p in positions], group_names, [values[p] for p in positions])}
            row["mechanism"], row["detail"] = _mechanism(group_names, row["ratio"], key[0] == first_layer, key[1],
                                                         est, self.shapes.get(key[0]), self.estimated)
            self.rows.append(row)

    # -- sentences ----------------------------------------------------------------------------------------------

    def side_sentence(self) -> str:
        matmul, other = self.sides[MATMUL_SIDE], self.sides[OTHER_SIDE]
        tensor = (f", of which {format_flops(self.tensor)} on tensor cores"
                  f"{f' and {format_flops(self.matmul_cuda_core)} on CUDA cores' if self.matmul_cuda_core >= 1e9 else ''}"
                  if self.tensor else "")
        return (f"Per class: convolution/matmul kernels {format_flops(matmul['measured'])}{tensor} vs {format_flops(matmul['estimated'])} "
                f"of convolution/matmul in the estimate ({_signed(matmul['difference'])}); other kernels "
                f"{format_flops(other['measured'])} vs {format_flops(other['estimated'])} of elementwise, normalization, pooling, softmax, "
                f"loss and optimizer ops ({_signed(other['difference'])}).")

    def carrier(self, gap: float) -> str | None:
        if not self.sides:
            return None
        same = [s for s in self.sides if self.sides[s]["difference"] * gap > 0]
        pool = same or list(self.sides)
        return max(pool, key=lambda s: abs(self.sides[s]["difference"]))


def _output_shapes(layers: pd.DataFrame | None) -> dict[str, list[int]]:
    if layers is None or "output_shape" not in getattr(layers, "columns", ()):
        return {}
    shapes = {}
    for name, text in zip(layers["layer"], layers["output_shape"]):
        numbers = [int(v) for v in re.findall(r"\d+", str(text))] if isinstance(text, (str, list, tuple)) else []
        if numbers:
            shapes[name] = numbers
    return shapes


def _kernel_summary(kernels: pd.DataFrame, flops: pd.Series) -> list[dict[str, Any]]:
    """[{class, name (short), count, flops}] of a group of kernels, most FLOPs first."""
    return _summarize(kernels["kernel_class"].tolist(), kernels["name"].tolist(), flops.tolist())


def _summarize(classes: list[str], names: list[str], flops: list[float]) -> list[dict[str, Any]]:
    summary: dict[tuple[str, str], dict[str, Any]] = {}
    for kernel_class, name, value in zip(classes, names, flops):
        key = (kernel_class, _short(name))
        entry = summary.setdefault(key, {"class": kernel_class, "name": key[1], "count": 0, "flops": 0.0})
        entry["count"] += 1
        entry["flops"] += float(value)
    return sorted(summary.values(), key=lambda entry: -entry["flops"])


@functools.lru_cache(maxsize=4096)
def _short(name: str) -> str:
    return short_kernel_name(name)


def _describe_kernels(summary: list[dict[str, Any]], limit: int = 2) -> str:
    parts = [f"{k['class']} {abbreviate_kernel_name(k['name'])} ×{k['count']} ({format_flops(k['flops'])})"
             for k in summary[:limit] if k["flops"] or len(summary) == 1]
    return ", ".join(parts) if parts else ", ".join(f"{k['class']} {abbreviate_kernel_name(k['name'])} ×{k['count']}"
                                                    for k in summary[:limit])


def _mechanism(names: list[str], ratio: float | None, first_layer: bool, phase: str, estimated: float,
               shape: list[int] | None, totals: dict) -> tuple[str | None, str]:
    """(mechanism, detail) of one layer × phase from its kernels' names and its measured/estimated ratio;
    (None, "") where it agrees; ("unexplained", ...) where no rule applies."""
    if ratio is None:
        return ("unexplained", "kernels with no convolution/matmul op of the estimate in this layer") if names \
            else ("unexplained", "no kernel matched this op")
    if abs(ratio - 1) <= LAYER_TOLERANCE:
        return None, ""
    algorithms = {kernel_algorithm(n) for n in names}
    if "fft" in algorithms:
        return "FFT convolution", "products in the frequency domain (fft2d transforms, complex cf32 GEMMs)"
    if "winograd" in algorithms:
        if any(re.search(r"winograd\w*4x4", n, re.IGNORECASE) for n in names):
            return "Winograd convolution", ("F(4×4, 3×3) takes 36 multiplications per 4×4 output tile where direct "
                                            "convolution takes 144 (×0.25)")
        return "Winograd convolution", "fewer multiplications per output tile than direct convolution"
    if ratio > 1:
        if first_layer and phase == "forward":
            padded = min(CHANNEL_PADDINGS, key=lambda p: abs(ratio - p / 3))
            if abs(ratio / (padded / 3) - 1) <= MODEL_TOLERANCE:
                return "first-layer channel padding", (f"{ratio:.2f}× ≈ {padded}/3: the image's 3 channels "
                                                       f"padded to {padded}")
        tiled = algorithms & {"implicit-gemm", "gemm", "split-k"}
        if tiled:
            tiles = sorted({t for t in (kernel_tile(n) for n in names) if t}, key=str)
            detail = _tile_model(tiles, phase, estimated, shape, ratio, totals)
            if not detail:
                # A GEMM does exactly M·N·K multiply-adds; more executed ones are padding: whole tiles that
                # overhang the problem, and in a strided convolution's input gradient (dgrad) the zeros between
                # the strided positions. The names show the tiles, not which of the two it is.
                shown = ", ".join("x".join(str(d) for d in t if d) for t in tiles[:2])
                detail = (f"GEMM kernels compute whole {shown} tiles" if shown else
                          "GEMM kernels compute whole tiles") + (
                    " and split-K partial sums" if "split-k" in algorithms else "") + (
                    ", or run over a strided convolution's zero-filled gradient"
                    if phase == "backward" and any(kernel_direction(n) == "dgrad" for n in names) else "")
            return "GEMM padding", detail
    return "unexplained", (f"{ratio:.2f}× the estimate in {', '.join(sorted(a or 'unnamed' for a in algorithms))} "
                           f"kernels")


def _tile_model(tiles: list[tuple], phase: str, estimated: float, shape: list[int] | None, ratio: float,
                totals: dict) -> str:
    """Where a forward convolution's GEMM (M = output pixels, per image or per batch; N = output channels;
    K = estimated FLOPs / 2MN) padded to a kernel's tile reproduces the measured ratio: say so."""
    if phase != "forward" or not shape or len(shape) < 2 or not estimated:
        return ""
    batch, channels = shape[0], shape[1]
    pixels = math.prod(shape[2:]) if len(shape) > 2 else 1
    depth = estimated / (2 * batch * pixels * channels)
    for tile in tiles:
        t_m, t_n = tile[0], tile[1]
        t_k = tile[2] or 1
        for rows, label in ((batch * pixels, "output pixels of the batch"), (pixels, "output pixels per image")):
            for a, b in ((t_m, t_n), (t_n, t_m)):
                padded = (math.ceil(rows / a) * a / rows) * (math.ceil(channels / b) * b / channels) * (
                    math.ceil(depth / t_k) * t_k / depth if depth >= 1 else 1.0)
                if padded > 1 + LAYER_TOLERANCE and abs(ratio / padded - 1) <= MODEL_TOLERANCE:
                    return (f"{a}×{b} tiles over {rows} {label} × {channels} channels pad the GEMM to "
                            f"×{padded:.3f}")
    return ""


def _flops_cause(ratio: float, precision: str, tensor_collected: bool, cc: int | None, evidence: _Evidence,
                 gap: float) -> tuple[str, str | None, float | None]:
    """(cause, carrying side, explained share) of a FLOP gap outside the tolerance."""
    factor = f"measured/estimated = {ratio:.3g}"
    direction = f"{100 * (ratio - 1):.0f}% above" if ratio > 1 else f"{100 * (1 - ratio):.0f}% below"
    lead = f"Measured FLOPs are {direction} the estimate ({factor})"
    # FP16 tensor cores exist from Volta (sm_70); TF32/BF16 — and with them cuDNN's default TF32 for FP32
    # convolutions — from Ampere (sm_80). An unknown architecture is given the benefit of the doubt.
    tensor_capable = ((precision == "fp16" and (cc is None or cc >= 70))
                      or (precision in {"fp32", "tf32", "bf16"} and (cc is None or cc >= 80)))
    if ratio < 1 and not tensor_collected and tensor_capable:
        return _missing_tensor_metrics(lead, ratio, precision, evidence), MATMUL_SIDE, None

    if evidence.repeated:
        return (f"{lead}: the profile holds {evidence.repeated}× the convolution/matmul kernel runs of one step, "
                f"so the profiled range held {evidence.repeated} iterations; check where the driver calls "
                f"torch.cuda.profiler.start()/stop()."), None, 1.0
    if evidence.kernels is None:
        return (f"{UNEXPLAINED}: {lead[0].lower()}{lead[1:]}, and without the profile's per-kernel table no "
                f"kernel can be named for it; give reconcile() the ncu kernel table (ncu_kernels.csv) and the "
                f"estimate's ops.csv."), None, None
    if not evidence.with_flops:
        return _names_only(lead, ratio, evidence), None, None

    sides = evidence.side_sentence()
    side = evidence.carrier(gap)
    if side == OTHER_SIDE:
        text, share = _other_side(evidence, gap)
        return (f"{lead}. {sides} {text}" if share >= EXPLAINED_SHARE else
                f"{UNEXPLAINED}: {lead[0].lower()}{lead[1:]}. {sides} {text}"), side, share
    difference = evidence.sides[side]["difference"]
    if evidence.attribution:
        text, share = _by_layer(evidence, difference)
    else:
        text, share = _by_family(evidence, difference)
    if share is not None and share >= EXPLAINED_SHARE:
        return f"{lead}. {sides} {text}", side, share
    return f"{UNEXPLAINED}: {lead[0].lower()}{lead[1:]}. {sides} {text}", side, share


def _missing_tensor_metrics(lead: str, ratio: float, precision: str, evidence: _Evidence) -> str:
    why = ("cuDNN runs FP32 convolutions in TF32 on tensor cores by default on Ampere and newer"
           if precision == "fp32" else f"{precision.upper()} convolutions and GEMMs run on tensor cores")
    text = (f"Measured FLOPs are {1 / ratio:.1f}× below the estimate ({lead.split('(', 1)[1]} because "
            f"{TENSOR_UNSEEN}: {why}, and the fadd/fmul/ffma counters cannot see that work")
    if evidence.kernels is not None:
        names = [n for n in evidence.kernels["name"] if uses_tensor_cores(n)]
        if not names:
            return (f"{UNEXPLAINED}: {text[0].lower()}{text[1:]} — but no kernel name shows tensor-core work "
                    f"(tensorop, hmma, tf32), so that explanation is not supported by this profile; look for "
                    f"kernels missing from the profiled range.")
        counts = pd.Series([short_kernel_name(n) for n in names]).value_counts()
        shown = ", ".join(f"{abbreviate_kernel_name(name)} ×{count}" for name, count in counts.head(2).items())
        text += f" ({len(names)} kernels run on tensor cores by their names, e.g. {shown})"
    return (text + "; profile again with the sm__ops_path_tensor_src_* metrics "
                   "(rooflow.profilers.metrics.metrics_for_architecture).")


def _names_only(lead: str, ratio: float, evidence: _Evidence) -> str:
    names = list(evidence.kernels["name"])
    families = defaultdict(int)
    for name in names:
        algorithm = kernel_algorithm(name)
        if algorithm in ("fft", "winograd"):
            families[algorithm] += 1
    if ratio < 1 and families:
        which = " and ".join(f"{'FFT' if a == 'fft' else 'Winograd'} ({n} kernels)" for a, n in families.items())
        return (f"{lead}: the profile runs {which} convolution, which does fewer multiplications than the direct "
                f"convolution the estimate counts (kernel names only: per-kernel FLOPs were not given, so the "
                f"share of the gap they carry is not known).")
    return (f"{UNEXPLAINED}: {lead[0].lower()}{lead[1:]}; the kernel names show no FFT or Winograd algorithm and "
            f"no per-kernel FLOPs were given to say which kernels carry the gap.")


def _other_side(evidence: _Evidence, gap: float) -> tuple[str, float]:
    """The other-ops side carries the gap: which kernel class, and its kernels."""
    from rooflow.profilers.layers import cuda_core_flops

    kernels = evidence.kernels
    cuda_core = cuda_core_flops(kernels)
    difference = evidence.sides[OTHER_SIDE]["difference"]
    rows = []
    for label, (kernel_classes, estimate_keys) in OTHER_CLASS_GROUPS.items():
        mask = kernels["kernel_class"].isin(kernel_classes)
        got = float(cuda_core[mask].sum())
        est = sum(_number(evidence.estimated, key) or 0.0 for key in estimate_keys)
        rows.append((label, got, est, got - est, mask))
    rows.sort(key=lambda r: -abs(r[3]) if r[3] * difference > 0 else 0)
    label, got, est, delta, mask = rows[0]
    share = delta / difference if difference else 0.0
    summary = _kernel_summary(kernels[mask], cuda_core[mask])
    text = (f"The other kernels carry the gap: {label} kernels compute {format_flops(got)} where the estimate's {label} "
            f"ops count {format_flops(est)} ({_signed(delta)}; {_describe_kernels(summary, 3)}) — these kernels do a "
            f"different amount of arithmetic per element than the estimate's formulas.")
    return text, share


def _by_layer(evidence: _Evidence, difference: float) -> tuple[str, float]:
    """The convolution/matmul side carries the gap and its kernels are matched to layers."""
    how = ("by NVTX layer ranges" if evidence.attribution == "nvtx" else
           "matched to the estimate's convolution/matmul ops in launch order")
    rows = [r for r in evidence.rows if r["difference"] * difference > 0 and r["mechanism"]]
    groups: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        top = row["kernels"][0]["name"] if row["kernels"] else ""
        key = (row["mechanism"], row["phase"], top if row["mechanism"] != "FFT convolution" else "")
        group = groups.setdefault(key, {"difference": 0.0, "estimated": 0.0, "measured": 0.0, "layers": [],
                                        "kernels": defaultdict(lambda: [0, 0.0, ""]), "details": []})
        group["difference"] += row["difference"]
        group["estimated"] += row["estimated_flops"]
        group["measured"] += row["measured_flops"]
        group["layers"].append(row["layer"])
        if row["detail"]:  # the detail of the layer with the largest difference speaks for the group
            group["details"].append((abs(row["difference"]), row["layer"], row["detail"]))
        for kernel in row["kernels"]:
            entry = group["kernels"][(kernel["class"], kernel["name"])]
            entry[0] += kernel["count"]
            entry[1] += kernel["flops"]
    ordered = sorted(groups.items(), key=lambda item: -abs(item[1]["difference"]))
    explained = sum(g["difference"] for (mechanism, _, _), g in groups.items() if mechanism != "unexplained")
    share = explained / difference if difference else 0.0
    parts = []
    for (mechanism, phase, _), group in ordered[:3]:
        kernels = sorted(({"class": c, "name": n, "count": v[0], "flops": v[1]}
                          for (c, n), v in group["kernels"].items()), key=lambda k: -k["flops"])
        named = [k for k in kernels if kernel_algorithm(k["name"]) in ("fft", "winograd")]
        if mechanism in ("FFT convolution", "Winograd convolution") and named and named[0] is not kernels[0]:
            # a kernel whose name shows the algorithm first (the evidence), then the ones with the FLOPs
            kernels = [named[0]] + [k for k in kernels if k is not named[0]]
        ratio = group["measured"] / group["estimated"] if group["estimated"] else float("nan")
        best = max(group["details"]) if group["details"] else None
        detail = "" if best is None else f"; {best[2]}" if len(group["layers"]) == 1 else f"; {best[1]}: {best[2]}"
        parts.append(f"{mechanism} — {_layer_list(group['layers'])} {phase}: {_signed(group['difference'])} "
                     f"({format_flops(group['estimated'])} → {format_flops(group['measured'])}, ×{ratio:.2f}{detail}) in "
                     f"{_describe_kernels(kernels, 3 if mechanism in ('FFT convolution', 'Winograd convolution') else 2)}")
    rest = difference - sum(g["difference"] for _, g in ordered[:3])
    tail = f"; other layers {_signed(rest)}" if abs(rest) >= 0.05 * abs(difference) else ""
    verdict = ("These account for all of the convolution/matmul difference"
               + (f" (layers going the other way offset {100 * (share - 1):.0f}% of it)." if share > 1.005 else ".")
               if share >= 0.995 else
               f"These explain {100 * share:.0f}% of the convolution/matmul difference."
               if share >= EXPLAINED_SHARE else
               f"Only {100 * max(share, 0):.0f}% of the convolution/matmul difference has a mechanism the kernel "
               f"names show.")
    return (f"The convolution/matmul kernels carry the gap; by layer ({how}): {'; '.join(parts)}{tail}. "
            f"{verdict}"), share


def _layer_list(names: list[str]) -> str:
    if len(names) == 1:
        return names[0]
    if len(names) <= 3:
        return ", ".join(names)
    return f"{len(names)} layers ({', '.join(names[:2])}, …)"


def _by_family(evidence: _Evidence, difference: float) -> tuple[str, float | None]:
    """Kernels not matched to layers: a deficit is explained by FFT/Winograd kernels where they run."""
    from rooflow.profilers.layers import matmul_flops_per_kernel, matmul_ops, matmul_runs

    kernels = evidence.kernels
    flops = matmul_flops_per_kernel(kernels)
    algorithms = kernels["name"].map(kernel_algorithm)
    runs = len(matmul_runs(kernels)) if "kernel_class" in kernels.columns else 0
    ops = len(matmul_ops(evidence.ops)) if evidence.ops is not None else 0
    why = ("a compiled step is profiled whole, not by layer (inductor's kernels fuse ops across layers)"
           if not evidence.per_layer else
           f"the kernels could not be matched to layers ({runs} runs of convolution/GEMM kernels for {ops} "
           f"convolution/matmul ops in the estimate)" if ops else
           "the kernels could not be matched to layers (no estimate ops.csv given)")
    fast = algorithms.isin(["fft", "winograd"])
    if difference < 0 and fast.any():
        summary = _kernel_summary(kernels[fast], flops[fast])
        names = " and ".join(sorted({"FFT" if a == "fft" else "Winograd" for a in algorithms[fast]}))
        return (f"The convolution/matmul kernels carry the gap and include {names} convolution "
                f"({_describe_kernels(summary, 3)}), which does fewer multiplications than the direct convolution "
                f"the estimate counts; {why}, so the share of the gap they carry is not measured."), 1.0
    summary = _kernel_summary(kernels[flops > 0], flops[flops > 0])
    return (f"The convolution/matmul kernels carry the gap ({_describe_kernels(summary, 3)}), but {why} and "
            f"their names show no algorithm that {'saves' if difference < 0 else 'adds'} FLOPs."), None


# -- DRAM bytes of a compiled step ---------------------------------------------------------------------------

INDUCTOR_KERNELS = "inductor's triton_ kernels"
OUTSIDE_INDUCTOR = "kernels outside them"


def bytes_sides(kernels: Any, ops: pd.DataFrame | None, estimate: str = "fused") -> dict[str, dict[str, Any]]:
    """Measured DRAM bytes of a step's kernels against the estimate's ``estimate`` (fused or unfused) bytes,
    per side: {MATMUL_SIDE, OTHER_SIDE: {measured, estimated, difference, kernels}}; the other side's measured
    bytes also split into inductor's ``triton_*`` kernels and the kernels outside them (``families``). Empty
    without a per-kernel table with DRAM bytes, or without the estimate's ops table."""
    if kernels is None or "dram_bytes" not in getattr(kernels, "columns", ()) or ops is None or not len(ops) \
            or "kernel_class" not in kernels.columns:
        return {}
    dram = _dram(kernels)
    on_matmul = kernels["kernel_class"].isin(MATMUL_KERNEL_CLASSES)
    inductor = kernels["name"].map(is_inductor_kernel) & ~on_matmul
    prefix = "fused_" if estimate == "fused" else ""
    fused = ops[f"{prefix}bytes_read"] + ops[f"{prefix}bytes_written"]
    estimated_matmul = float(math.fsum(fused[ops["op_class"].isin(MATMUL_OP_CLASSES)]))
    estimated_other = float(math.fsum(fused)) - estimated_matmul
    sides = {}
    for side, mask, estimate in ((MATMUL_SIDE, on_matmul, estimated_matmul), (OTHER_SIDE, ~on_matmul, estimated_other)):
        got = float(math.fsum(dram[mask]))
        sides[side] = {"measured": got, "estimated": estimate, "difference": got - estimate,
                       "kernels": _byte_summary(kernels[mask], dram[mask])}
    sides[OTHER_SIDE]["families"] = {
        family: {"measured": float(math.fsum(dram[mask])), "kernels": _byte_summary(kernels[mask], dram[mask]),
                 "count": int(mask.sum())}
        for family, mask in ((INDUCTOR_KERNELS, inductor), (OUTSIDE_INDUCTOR, ~on_matmul & ~inductor))}
    return sides


def _dram(kernels: pd.DataFrame) -> pd.Series:
    return pd.to_numeric(kernels.get("dram_bytes", pd.Series(0.0, index=kernels.index)), errors="coerce").fillna(0.0)


def _byte_summary(kernels: pd.DataFrame, dram: pd.Series) -> list[dict[str, Any]]:
    """[{class, name (short), count, bytes}] of a group of kernels, most DRAM bytes first."""
    return [{"class": k["class"], "name": k["name"], "count": k["count"], "bytes": k["flops"]}
            for k in _summarize(kernels["kernel_class"].tolist(), kernels["name"].tolist(), dram.tolist())]


def _traffic(value: float) -> str:
    """DRAM traffic in a sentence, SI units as the summary's columns: '2.183 GB'."""
    return format_quantity(value, "B")


def _describe_bytes(summary: list[dict[str, Any]], limit: int = 2) -> str:
    return ", ".join(f"{abbreviate_kernel_name(k['name'])} ×{k['count']} ({_traffic(k['bytes'])})"
                     for k in summary[:limit]) or "none"


def _fused_bytes(measured: float, estimated: float, floor: float | None, evidence: _Evidence,
                 tolerance: float) -> dict[str, Any]:
    """A compiled step's DRAM bytes against the fusion-aware estimate: agreement within ± ``tolerance``, else
    the cause from the kernels (module docstring). Keys of :func:`reconcile`'s result."""
    ratio = measured / estimated
    sides = bytes_sides(evidence.kernels, evidence.ops)
    out: dict[str, Any] = {"bytes_agree": abs(ratio - 1) <= tolerance, "bytes_sides": sides}
    if out["bytes_agree"]:
        return out
    direction = f"{100 * (ratio - 1):.0f}% above" if ratio > 1 else f"{100 * (1 - ratio):.0f}% below"
    lead = (f"Measured DRAM bytes are {direction} the fusion-aware estimate (measured/estimated = {ratio:.3g}, "
            f"{_traffic(measured)} vs {_traffic(estimated)})")
    kernels = evidence.kernels
    if kernels is not None and "kernel_class" in kernels.columns and len(kernels) \
            and not kernels["name"].map(is_inductor_kernel).any():
        out["bytes_cause"] = (
            f"{lead}: the profile holds no kernel inductor generated (triton_*), so the profiled step ran "
            f"library and eager kernels only ({len(kernels)} kernels, e.g. "
            f"{_describe_bytes(_byte_summary(kernels, _dram(kernels)))}): a graph break or "
            f"a compile that fell back to eager; the fusion-aware estimate does not describe such a step.")
        return out
    if not sides:
        out.update(bytes_unexplained=True, bytes_cause=(
            f"{UNEXPLAINED}: {lead[0].lower()}{lead[1:]}, and without the profile's per-kernel table (with DRAM "
            f"bytes) and the estimate's ops.csv no kernel can be named for it."))
        return out
    families = sides[OTHER_SIDE]["families"]
    per_side = (f"By side: convolution/matmul kernels {_traffic(sides[MATMUL_SIDE]['measured'])} where the "
                f"estimate's convolution/matmul ops move {_traffic(sides[MATMUL_SIDE]['estimated'])}; other "
                f"kernels {_traffic(sides[OTHER_SIDE]['measured'])} (inductor's "
                f"{families[INDUCTOR_KERNELS]['count']} triton_ kernels "
                f"{_traffic(families[INDUCTOR_KERNELS]['measured'])}, "
                f"{families[OUTSIDE_INDUCTOR]['count']} kernels outside them "
                f"{_traffic(families[OUTSIDE_INDUCTOR]['measured'])}) where the estimate's other ops move "
                f"{_traffic(sides[OTHER_SIDE]['estimated'])} after its fusion rules.")
    if floor and measured < floor * (1 - tolerance):
        out["bytes_cause"] = (f"{lead}, below even the compulsory floor ({_traffic(floor)}): data that fits "
                              f"in L2 is read from DRAM once however often kernels reuse it, or the profiled range "
                              f"missed part of the step. {per_side}")
        return out
    # the two sides add up to the gap: the larger one with its sign carries at least half of it
    gap = measured - estimated
    carrier = max((MATMUL_SIDE, OTHER_SIDE), key=lambda side: sides[side]["difference"] * math.copysign(1, gap))
    share = sides[carrier]["difference"] / gap
    more = gap > 0
    # what the profile shows: which side, which kernels, how many bytes (why a kernel moves them is not measured)
    if carrier == MATMUL_SIDE:
        text = (f"The convolution/matmul kernels carry {100 * min(share, 1):.0f}% of the gap "
                f"({_describe_bytes(sides[MATMUL_SIDE]['kernels'])}): library kernels (cuDNN, cuBLAS) that inductor "
                f"did not generate, moving {'more' if more else 'less'} than the estimate's convolution/matmul ops.")
    else:
        outside = families[OUTSIDE_INDUCTOR]["measured"]
        inside = families[INDUCTOR_KERNELS]["measured"]
        if more and outside >= EXPLAINED_SHARE * gap:
            text = (f"The other kernels carry {100 * min(share, 1):.0f}% of the gap, and the kernels outside "
                    f"inductor's fused code alone move {_traffic(outside)} "
                    f"({_describe_bytes(families[OUTSIDE_INDUCTOR]['kernels'])}): ops inductor did not fuse, whose "
                    f"tensors the fusion-aware estimate keeps on chip.")
        else:
            text = (f"The other kernels carry {100 * min(share, 1):.0f}% of the gap: inductor's triton_ kernels move "
                    f"{_traffic(inside)} ({_describe_bytes(families[INDUCTOR_KERNELS]['kernels'])}), "
                    + ("more intermediate tensors in DRAM than the estimate's fusion rules (an epilogue per "
                       "producer, BatchNorm folded in inference) leave there." if more else
                       "less than the estimate's fusion rules leave in DRAM."))
    out["bytes_cause"] = f"{lead}. {per_side} {text}"
    return out
