"""The steady-state memory replay (rooflow.estimate.memory): closed forms on two bias-free linear layers, and which
convolutions hold NHWC copies."""

from __future__ import annotations

import pytest
import torch

from rooflow.estimate import estimate, estimate_module
from rooflow.estimate.formulas import runs_as_gemm
from rooflow.estimate.memory import (
    foreach_optimizer_peak,
    layout_workspace_bytes,
    live_bytes,
    previous_gradients,
)

BATCH, WIDTH = 1024, 1024
ACTIVATION = BATCH * WIDTH * 4  # fp32: the input, the hidden and the output are one size
WEIGHTS = 2 * WIDTH * WIDTH * 4


@pytest.fixture(scope="module")
def trace():
    model = torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH, bias=False),
                                torch.nn.Linear(WIDTH, WIDTH, bias=False)).to("meta")
    return estimate_module(model, torch.empty(BATCH, WIDTH, device="meta"), mode="training").trace


def test_previous_gradients_live_through_the_forward(trace):
    """zero_grad runs after the forward: at the loss, weights + momentum + last step's gradients + input,
    hidden and output activations (+ the scalar loss) are alive — the step's peak; they go when backward
    starts (without them the peak would be the backward's, a weight gradient less)."""
    stale, first_backward = previous_gradients(trace)
    assert stale == WEIGHTS
    assert trace.records[first_backward].phase == "backward"
    assert trace.records[first_backward - 1].phase != "backward"
    live = live_bytes(trace)
    assert max(live[:first_backward]) == pytest.approx(3 * WEIGHTS + 3 * ACTIVATION, abs=1024)
    assert max(live[first_backward:]) < max(live) - WEIGHTS / 4


def test_foreach_update_holds_a_copy_of_every_gradient(trace):
    """SGD's foreach update: weights, momentum, gradients and g + wd·p of both layers at once (+ the input,
    which the caller holds); the single-tensor update holds one layer's g + wd·p at a time."""
    optimizer = [i for i, r in enumerate(trace.records) if r.phase == "optimizer"]
    single = max(live_bytes(trace)[optimizer[0]:optimizer[-1] + 1])
    assert single == pytest.approx(3 * WEIGHTS + WEIGHTS / 2 + ACTIVATION, abs=1024)
    assert foreach_optimizer_peak(trace) == pytest.approx(4 * WEIGHTS + ACTIVATION, abs=1024)


def test_inference_has_neither(trace):
    model = torch.nn.Linear(WIDTH, WIDTH, bias=False, device="meta")
    inference = estimate_module(model, torch.empty(BATCH, WIDTH, device="meta")).trace
    assert previous_gradients(inference) == (0, None)
    assert foreach_optimizer_peak(inference) == 0


def test_pointwise_convolutions_run_as_gemms_without_nhwc_copies():
    """1×1 stride-1 ungrouped convolutions are GEMMs on NCHW tensors (no layout workspace); a 3×3 or a strided 1×1
    is not. Views (m, n, k, groups, fast, k_taps, n_taps) of N = 2 images of 8 × 8, 16 → 32 channels."""
    m, cin, cout = 2 * 8 * 8, 16, 32
    forward = ((m, cout, cin, 1, 0, 1, 0),)
    assert runs_as_gemm(forward, read_elements=m * cin + cout * cin + cout)  # input, weights, bias
    assert not runs_as_gemm(forward, read_elements=4 * m * cin + cout * cin)  # stride 2: 4× the input
    assert not runs_as_gemm(((m, cout, cin * 9, 1, 1, 9, 0),), read_elements=m * cin + cout * cin * 9)
    assert not runs_as_gemm(((m, cout // 4, cin // 4, 4, 0, 1, 0),), read_elements=m * cin + cout * cin // 4)
    backward = ((m, cin, cout, 1, 0, 1, 0), (cout, cin, m, 1, 0, 0, 1))  # data gradient, weight gradient
    assert runs_as_gemm(backward, read_elements=0)
    assert not runs_as_gemm(((4 * m, cin, cout, 1, 0, 1, 0), (cout, cin, m, 1, 0, 0, 1)), read_elements=0)


def test_layout_workspace_skips_pointwise_convolutions():
    """ResNet-50 in TF32: the 3×3 convolutions and the strided 1×1 downsample hold NHWC copies, the 1×1 stride-1
    ones not (cuDNN's GEMM kernels in rooflow's H100 recordings)."""
    est = estimate("resnet50", 2, "tf32", "inference")
    workspace = dict(zip(((r.layer, r.op) for r in est.trace.records), layout_workspace_bytes(est.trace)))
    assert workspace[("layer1.0.conv2", "convolution")] > 0
    assert workspace[("layer2.0.downsample.0", "convolution")] > 0
    assert workspace[("layer1.0.conv1", "convolution")] == 0 and workspace[("layer1.0.conv3", "convolution")] == 0


def _stem_workspace(model: str, precision: str) -> tuple[int, int, int]:
    """(layout workspace, input bytes, output bytes) of a model's first forward convolution at batch 2."""
    est = estimate(model, 2, precision, "inference")
    workspace = layout_workspace_bytes(est.trace)
    index = next(i for i, r in enumerate(est.trace.records) if r.op.startswith(("convolution", "_convolution")))
    record = est.trace.records[index]
    reads = sum(nbytes for key, nbytes in record.reads if key not in est.trace.param_keys)
    writes = sum(nbytes for _, nbytes in record.writes)
    return workspace[index], reads, writes


def test_an_rgb_stem_holds_the_copies_of_the_kernels_cudnn_runs_it_with():
    """A 3-channel image's convolution (formulas.IMAGE_CHANNELS; the H200's b256 traces): 3×3 and 4×4 taps run
    FFMA kernels on NCHW tensors, no copies (SqueezeNet's, VGG16's and RegNet's bf16 stems, ConvNeXt's TF32 one);
    7×7 and 11×11 taps hold NHWC copies, a 16-bit input's as 4-byte elements with 4 channels (cuDNN's TF32
    kernel on nchwToNhwcKernel<__nv_bfloat16, float>'s copy). AlexNet, ResNet-18 and GoogLeNet bf16 b256
    inference peak there: 0.12 GB over the prediction on both GPUs before, now within 1%."""
    for model, precision in (("squeezenet1_1", "bf16"), ("squeezenet1_1", "tf32"), ("vgg16", "bf16"),
                             ("regnet_y_1_6gf", "bf16"), ("convnext_tiny", "tf32")):
        assert _stem_workspace(model, precision)[0] == 0, (model, precision)
    workspace, reads, writes = _stem_workspace("resnet18", "tf32")
    assert workspace == reads + writes and reads == 2 * 3 * 224 * 224 * 4  # as it is, 4-byte, 3 channels
    workspace, reads, writes = _stem_workspace("resnet18", "bf16")
    assert reads == 2 * 3 * 224 * 224 * 2
    assert workspace == 2 * 4 * 224 * 224 * 4 + writes  # 4 channels of 4 bytes, the output as it is
    workspace, reads, writes = _stem_workspace("alexnet", "bf16")
    assert workspace == 2 * 4 * 224 * 224 * 4 + writes
