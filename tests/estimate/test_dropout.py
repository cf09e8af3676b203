"""Dropout as a GPU runs it (rooflow.estimate.dropout): the meta device records ``_dropout_impl``'s bernoulli_,
div_ and mul and saves a noise tensor in the input's dtype; a CUDA tensor takes ``native_dropout``, one kernel
that saves a one-byte mask. The estimate keeps what it counted (a CPU runs exactly that); a GPU's time and memory
price the kernel and the mask."""

from __future__ import annotations

import pytest
import torch
from support import ROOT
from torch import nn

from rooflow.estimate import dropout
from rooflow.estimate.api import estimate_module
from rooflow.estimate.calibration import for_device
from rooflow.estimate.predict import predict_memory
from rooflow.estimate.timemodel import predict_step
from rooflow.hardware.devices import load_device

BATCH, WIDTH = 4096, 256  # activations, not weights, make the peak
ELEMENTS = BATCH * WIDTH  # of the dropout's input
CATALOGUE = ROOT / "config" / "devices.yaml"


class Mlp(nn.Module):
    def __init__(self, p: float = 0.1, inplace: bool = False):
        super().__init__()
        self.fc1, self.drop, self.fc2 = nn.Linear(WIDTH, WIDTH), nn.Dropout(p, inplace=inplace), nn.Linear(WIDTH, 10)

    def forward(self, x):
        return self.fc2(torch.relu(self.drop(self.fc1(x))))


def _estimate(module, shape=(BATCH, WIDTH), precision="fp32"):
    return estimate_module(module.to("meta"), (torch.empty(*shape, device="meta"),), precision=precision,
                           mode="training")


@pytest.mark.parametrize("precision, element", [("fp32", 4), ("bf16", 2)])
def test_a_gpu_runs_a_dropout_as_one_kernel_that_writes_a_one_byte_mask(precision, element):
    ops = _estimate(Mlp(), precision=precision).ops
    layer = ops[ops["layer"] == "drop"]
    # the estimate keeps what it counted, each row saying which CUDA op it is part of
    assert dict(zip(layer["op"] + "/" + layer["phase"], layer["cuda_op"])) == {
        "bernoulli_/forward": "native_dropout", "div_/forward": "native_dropout", "mul/forward": "native_dropout",
        "mul/backward": "native_dropout_backward"}
    recorded = layer.groupby("phase")[["bytes_read", "bytes_written"]].sum().sum(axis=1) / ELEMENTS
    # the noise written, scaled and read with the input; the gradient times the noise
    assert recorded.to_dict() == {"forward": 6 * element, "backward": 3 * element}

    cuda = dropout.as_cuda_runs(ops)
    ran = cuda[cuda["layer"] == "drop"].set_index("phase")
    assert list(ran["op"]) == ["native_dropout", "native_dropout_backward"]
    # forward reads the input, writes the output and the mask; backward reads the gradient and the mask
    assert ran.loc["forward", ["bytes_read", "bytes_written"]].tolist() == [element * ELEMENTS, (element + 1) * ELEMENTS]
    assert ran.loc["backward", ["bytes_read", "bytes_written"]].tolist() == [(element + 1) * ELEMENTS, element * ELEMENTS]
    assert ran.loc["forward", "flops"] == 3 * ELEMENTS and ran.loc["backward", "flops"] == 2 * ELEMENTS
    assert set(cuda.index) < set(ops.index)  # the other rows keep their labels (row_seconds are keyed by them)
    others = ops[ops["layer"] != "drop"]
    assert cuda.loc[others.index, ["op", "bytes_read", "bytes_written"]].equals(
        others[["op", "bytes_read", "bytes_written"]].astype({"bytes_read": float, "bytes_written": float}))


@pytest.mark.filterwarnings("ignore:dropout2d")  # a 2-D input to nn.Dropout2d is deprecated, and still runs
def test_feature_alpha_in_place_dropout_and_stochastic_depth_run_as_recorded():
    """PyTorch takes native_dropout only for F.dropout, not in place; nn.Dropout2d, nn.AlphaDropout and
    torchvision's stochastic depth (noise of one element per channel or per sample) are the decomposition on a GPU
    too — as is a 2-D input to nn.Dropout2d, whose noise has the input's size."""
    from torchvision.ops import StochasticDepth

    for module, shape in [(nn.Sequential(nn.Conv2d(8, 8, 3), nn.Dropout2d(0.1)), (4, 8, 16, 16)),
                          (nn.Sequential(nn.Linear(32, 32), nn.AlphaDropout(0.1)), (4, 32)),
                          (nn.Sequential(nn.Linear(32, 32), nn.Dropout2d(0.1)), (4, 32)),
                          (nn.Sequential(nn.Linear(32, 32), StochasticDepth(0.1, "row")), (4, 32)),
                          (Mlp(inplace=True), (BATCH, WIDTH))]:
        result = _estimate(module, shape)
        ops = result.ops
        assert "bernoulli_" in set(ops["op"]), module
        assert not ops["cuda_op"].astype(bool).any(), module
        assert dropout.as_cuda_runs(ops) is ops
        assert result["peak_memory_bytes_cuda"] == result["peak_memory_bytes"]


def test_a_gpus_memory_holds_the_mask_where_the_meta_device_holds_the_noise():
    """The noise lives from the forward to its backward product, through the peak: as a bool mask a GPU holds one
    byte of it per element where the meta device holds four (fp32) or two (bf16)."""
    for precision, element in (("fp32", 4), ("bf16", 2)):
        totals = dict(_estimate(Mlp(), precision=precision))
        assert totals["peak_memory_bytes"] - totals["peak_memory_bytes_cuda"] == (element - 1) * ELEMENTS
        h100 = load_device(CATALOGUE, "h100-sxm5-80gb")
        as_noise = {**totals, **{key: value + (element - 1) * ELEMENTS for key, value in totals.items()
                                 if key.startswith("peak_memory_bytes_")}}
        point, noise_point = (predict_memory(t, h100)["predicted_memory_bytes"] for t in (totals, as_noise))
        assert noise_point - point == (element - 1) * ELEMENTS


def test_a_gpu_prices_a_dropout_layer_as_native_dropouts_kernels_and_a_cpu_as_recorded():
    """18 bytes per fp32 element where the decomposition moves 36, in two kernels where it launches four."""
    result = _estimate(Mlp())
    totals = dict(result)
    h100 = load_device(CATALOGUE, "h100-sxm5-80gb")
    step = predict_step(result.ops, totals, h100, for_device(h100))
    as_recorded = predict_step(result.ops.assign(cuda_op=""), totals, h100, for_device(h100))
    assert as_recorded.kernels - step.kernels == 2
    ratio = step.by_layer_type_seconds["Dropout"] / as_recorded.by_layer_type_seconds["Dropout"]
    assert 0.4 < ratio < 0.6, ratio  # half the bytes in half the launches (0.46 here)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_h200_ran_squeezenets_dropout_as_native_dropout(precision):
    """SqueezeNet 1.1's classifier dropout (256 × 512 × 13 × 13 elements) in a b256 training step on a lent H200
    (tests/data/real/gpu-2026-11-27, torch.profiler): aten::dropout called aten::native_dropout, one
    fused_dropout_kernel_vec writing a bool mask, and native_dropout_backward one elementwise kernel; no
    bernoulli_ anywhere. Recorded 62.4 + 44.3 µs (fp32) and 38.8 + 24.9 µs (bf16); priced as the decomposition
    they had been 182 and 91 µs (1.71× and 1.43×), as the kernels 91 and 51 µs."""
    import gzip
    import json

    from support import REAL, cached_estimate

    trace = REAL / "gpu-2026-11-27" / f"torch-profiler-squeezenet1_1-b256-{precision}-training.json.gz"
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    ops = [e["name"] for e in events if e.get("cat") == "cpu_op"]
    assert ops.count("aten::native_dropout") == ops.count("aten::native_dropout_backward") == 1
    assert not [name for name in ops if "bernoulli" in name]
    launched = {e["args"]["correlation"]: e["name"] for e in events if e.get("cat") == "kernel"}
    kernels = {e["args"]["correlation"]: e["dur"] * 1e-6 for e in events if e.get("cat") == "kernel"}
    dropout_kernel = [c for c, name in launched.items() if "fused_dropout_kernel" in name]
    assert len(dropout_kernel) == 1 and launched[dropout_kernel[0]].rstrip(")").split(">")[0].endswith("bool")
    backward = next(e for e in events if e.get("cat") == "cpu_op" and e["name"] == "aten::native_dropout_backward")
    backward_kernels = [e["args"]["correlation"] for e in events if e.get("cat") == "cuda_runtime"
                        and backward["ts"] <= e["ts"] <= backward["ts"] + backward["dur"]
                        and e["args"].get("correlation") in kernels]
    assert len(backward_kernels) == 1
    recorded = kernels[dropout_kernel[0]] + kernels[backward_kernels[0]]

    result = cached_estimate("squeezenet1_1", 256, precision, "training")
    cuda = dropout.as_cuda_runs(result.ops)
    layer = cuda[cuda["type"] == "Dropout"]
    assert sorted(layer["op"]) == ["native_dropout", "native_dropout_backward"]
    h200 = load_device(CATALOGUE, "h200-sxm-141gb")
    step = predict_step(result.ops, dict(result), h200, for_device(h200))
    predicted = sum(step.row_seconds[index] for index in layer.index)
    assert 0.7 < predicted / recorded < 1.1, (predicted, recorded)


def test_the_h200_ran_convnexts_stochastic_depth_as_recorded():
    """ConvNeXt-T's stochastic depth (a noise of one element per sample, in 17 of its 18 blocks; the first one's
    probability is 0) in a b256 TF32 training step on the H200 (tests/data/real/gpu-2026-11-27): 17
    aten::bernoulli_ and 17 aten::div_, each a kernel of its own, and no native_dropout — the decomposition the
    estimate counts, which it leaves untagged."""
    import gzip
    import json

    from support import REAL, cached_estimate

    trace = REAL / "gpu-2026-11-27" / "torch-profiler-convnext_tiny-b256-tf32-training.json.gz"
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    ops = [e["name"] for e in events if e.get("cat") == "cpu_op"]
    assert ops.count("aten::bernoulli_") == ops.count("aten::div_") == 17 and "aten::native_dropout" not in ops
    counted = cached_estimate("convnext_tiny", 256, "tf32", "training").ops
    draws = counted[counted["op"] == "bernoulli_"]
    assert draws["calls"].sum() == 17 and not counted["cuda_op"].astype(bool).any()


def test_a_gpu_priced_from_single_ops_takes_each_dropout_kernel_at_its_own_bytes():
    """The kernel model (a V100: calibrated from the public single ops) prices elementwise kernels by elements of
    one operand; a dropout kernel moves a tensor and a one-byte mask each way, 9 bytes per fp32 element."""
    from rooflow.estimate import kernel_ops

    cuda = dropout.as_cuda_runs(_estimate(Mlp()).ops)
    rows = kernel_ops.kernel_rows(cuda[cuda["layer"] == "drop"], load_device(CATALOGUE, "v100-sxm2-16gb"))
    assert list(rows["operator"]) == ["native_dropout", "native_dropout_backward"]
    assert list(rows["operands"] * 2 * 4 * rows["H"]) == [9 * ELEMENTS, 9 * ELEMENTS]
