"""Closed-form FLOP counts per layer type, forward and backward (input- and weight-gradient separately).

Each expected value is written out from the layer's definition (one FMA = 2 FLOPs), never taken from
another counter: torch.utils.flop_counter's grouped-convolution weight gradient is wrong, and these tests
are what pins rooflow's formulas (DESIGN.md, "Analytic estimation — conventions").
"""

from __future__ import annotations

import math
from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from rooflow.estimate import estimate_module, formulas

N = 4  # batch


def meta(*shape, grad=True):
    return torch.empty(*shape, device="meta", requires_grad=grad)


def phase_flops(est, phase, op_class=None, layer="(root)"):
    ops = est.ops[(est.ops["phase"] == phase) & (est.ops["layer"] == layer)]
    if op_class is not None:
        ops = ops[ops["op_class"] == op_class]
    return float(ops["flops"].sum())


def layer_row(est, layer="(root)"):
    return est.layers.set_index("layer").loc[layer]


def out_size(size, k, stride=1, padding=0, dilation=1):
    return (size + 2 * padding - dilation * (k - 1) - 1) // stride + 1


# --------------------------------------------------------------------------------------------- Conv2d
CONV_CASES = {
    # name: (cin, cout, k, stride, padding, dilation, groups, bias, H)
    "plain": (8, 16, 3, 1, 0, 1, 1, False, 12),
    "bias": (8, 16, 3, 1, 0, 1, 1, True, 12),
    "strided": (8, 16, 3, 2, 0, 1, 1, True, 13),
    "padded": (8, 16, 3, 1, 1, 1, 1, False, 12),
    "dilated": (8, 16, 3, 1, 2, 2, 1, True, 12),
    "grouped": (8, 16, 3, 1, 1, 1, 4, True, 12),
    "depthwise": (16, 16, 3, 2, 1, 1, 16, False, 12),
    "pointwise": (16, 32, 1, 1, 0, 1, 1, True, 7),
    "kernel7_stride2": (3, 8, 7, 2, 3, 1, 1, False, 32),
}


@pytest.mark.parametrize("case", CONV_CASES, ids=list(CONV_CASES))
def test_conv2d_forward_and_backward_closed_form(case):
    cin, cout, k, stride, padding, dilation, groups, bias, size = CONV_CASES[case]
    layer = nn.Conv2d(cin, cout, k, stride=stride, padding=padding, dilation=dilation, groups=groups, bias=bias)
    est = estimate_module(layer, meta(N, cin, size, size), mode="training")
    ho = out_size(size, k, stride, padding, dilation)
    outputs = N * cout * ho * ho
    macs = outputs * (cin // groups) * k * k  # each output: (Cin/groups)·k² products
    row = layer_row(est)
    assert row["output_shape"] == [N, cout, ho, ho]
    assert row["forward_flops"] == 2 * macs + (outputs if bias else 0)
    assert row["backward_input_flops"] == 2 * macs  # transposed conv of grad_out with the weight
    # weight gradient: the same products, per group (flop_counter forgets the groups here);
    # bias gradient: a sum over N·Ho·Wo per output channel
    assert row["backward_weight_flops"] == 2 * macs + (outputs if bias else 0)
    assert row["params"] == cout * (cin // groups) * k * k + (cout if bias else 0)


def test_depthwise_weight_gradient_is_not_scaled_by_groups():
    """The FlopCounterMode bug (DESIGN.md): its weight-gradient term ignores groups, 16× too high here."""
    layer = nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False)
    est = estimate_module(layer, meta(N, 16, 8, 8), mode="training")
    row = layer_row(est)
    assert row["backward_weight_flops"] == row["forward_flops"] == 2 * N * 16 * 8 * 8 * 9


def test_first_layer_has_no_input_gradient():
    layer = nn.Conv2d(3, 8, 3, bias=False)
    est = estimate_module(layer, meta(N, 3, 10, 10, grad=False), mode="training")
    row = layer_row(est)
    assert row["backward_input_flops"] == 0
    assert row["backward_weight_flops"] == row["forward_flops"] == 2 * N * 8 * 8 * 8 * 3 * 9


def test_conv_formula_direct():
    """The registry formulas are pure functions of shapes."""
    x, w, out = torch.Size([2, 4, 9, 9]), torch.Size([6, 2, 3, 3]), torch.Size([2, 6, 7, 7])
    assert formulas.conv_flops(x, w, None, [1, 1], [0, 0], [1, 1], False, out_shape=out) == 2 * 2 * 6 * 49 * 2 * 9
    grads = formulas.conv_backward_flops(out, x, w, [6], [1, 1], [0, 0], [1, 1], False, [0, 0], 2,
                                         [True, True, True], out_shape=None)
    assert grads == {"input": 2 * 2 * 6 * 49 * 18, "weight": 2 * 2 * 6 * 49 * 18 + 2 * 6 * 49}
    # transposed: every input element meets (Cout/groups)·k² weights
    wt = torch.Size([4, 3, 3, 3])
    assert formulas.conv_flops(x, wt, None, [1, 1], [0, 0], [1, 1], True,
                               out_shape=torch.Size([2, 3, 11, 11])) == 2 * math.prod(x) * 27


# --------------------------------------------------------------------------------------------- Linear
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(N, 32), (N, 5, 32)], ids=["2d", "3d"])
def test_linear_closed_form(shape, bias):
    layer = nn.Linear(32, 24, bias=bias)
    est = estimate_module(layer, meta(*shape), mode="training")
    rows = math.prod(shape[:-1])  # a 3-D input is rows of tokens: (B·T)×in times in×out
    row = layer_row(est)
    assert row["forward_flops"] == 2 * rows * 32 * 24 + (rows * 24 if bias else 0)
    assert row["forward_matmul_flops"] == row["forward_flops"]
    assert row["backward_input_flops"] == 2 * rows * 32 * 24
    assert row["backward_weight_flops"] == 2 * rows * 32 * 24 + (rows * 24 if bias else 0)
    assert row["output_shape"] == [*shape[:-1], 24]


def test_mm_addmm_bmm_compose():
    a, b = torch.Size([3, 5]), torch.Size([5, 7])
    assert formulas.mm_flops(a, b) == 2 * 3 * 5 * 7
    assert formulas.addmm_flops(torch.Size([7]), a, b, out_shape=torch.Size([3, 7])) == 2 * 3 * 5 * 7 + 21
    assert formulas.bmm_flops(torch.Size([2, 3, 5]), torch.Size([2, 5, 7])) == 2 * 2 * 3 * 5 * 7
    assert formulas.baddbmm_flops(None, torch.Size([2, 3, 5]), torch.Size([2, 5, 7]),
                                  out_shape=torch.Size([2, 3, 7])) == 2 * 2 * 3 * 5 * 7 + 42


# ------------------------------------------------------------------------------------- normalisation
def test_batch_norm_training_closed_form():
    x = meta(N, 6, 5, 5)
    n = x.numel()
    est = estimate_module(nn.BatchNorm2d(6), x, mode="training")
    # statistics (mean 1 + variance 3) + normalise 2 + affine 2 = 8 per element
    assert phase_flops(est, "forward", "normalization") == 8 * n
    grads = est.ops[(est.ops["phase"] == "backward") & (est.ops["op_class"] == "normalization")]
    assert float(grads["flops"].sum()) == 12 * n
    row = layer_row(est)
    assert row["backward_input_flops"] == 9 * n
    assert row["backward_weight_flops"] == 3 * n  # grad_γ = Σ dy·x̂ (2), grad_β = Σ dy (1)


def test_batch_norm_inference_closed_form():
    x = meta(N, 6, 5, 5, grad=False)
    est = estimate_module(nn.BatchNorm2d(6), x, mode="inference")
    assert est.totals["normalization_flops"] == 4 * x.numel()  # (x − μ)·σ⁻¹·γ + β
    assert est.totals["backward_flops"] == 0


def test_layer_norm_closed_form():
    x = meta(N, 7, 16)
    n = x.numel()
    est = estimate_module(nn.LayerNorm(16), x, mode="training")
    assert phase_flops(est, "forward") == 8 * n
    row = layer_row(est)
    assert row["backward_input_flops"] == 9 * n
    assert row["backward_weight_flops"] == 3 * n


# --------------------------------------------------------------------------------------- activations
@pytest.mark.parametrize("module, forward, backward", [
    (nn.ReLU(), 1, 1),  # max(x, 0); threshold_backward
    (nn.GELU(), 5, 9),
    (nn.SiLU(), 5, 8),
    (nn.Sigmoid(), 4, 3),
    (nn.Hardswish(), 4, 4),
    (nn.ReLU6(), 2, 2),
], ids=["relu", "gelu", "silu", "sigmoid", "hardswish", "relu6"])
def test_activation_closed_form(module, forward, backward):
    x = meta(N, 3, 5, 5)
    n = x.numel()
    est = estimate_module(module, x, mode="training")
    assert phase_flops(est, "forward", "elementwise") == forward * n
    assert phase_flops(est, "backward", "elementwise") == backward * n
    assert layer_row(est)["backward_weight_flops"] == 0


class Residual(nn.Module):
    def forward(self, x, y):
        return x + y


def test_residual_add():
    x, y = meta(N, 3, 5, 5), meta(N, 3, 5, 5)
    est = estimate_module(Residual(), (x, y), mode="training")
    assert phase_flops(est, "forward") == x.numel()
    # the gradient of an add is the incoming gradient, passed on: no arithmetic
    assert phase_flops(est, "backward") == 0


# ------------------------------------------------------------------------------------------- pooling
def test_max_pool_closed_form():
    x = meta(N, 3, 12, 12)
    est = estimate_module(nn.MaxPool2d(3, stride=2, padding=1), x, mode="training")
    outputs = N * 3 * 6 * 6
    assert phase_flops(est, "forward", "pooling") == 9 * outputs  # k² comparisons per output
    assert phase_flops(est, "backward", "pooling") == outputs  # scatter each gradient to its argmax
    # meta (like CUDA) writes int64 indices next to the fp32 output
    fwd = est.ops[(est.ops["phase"] == "forward") & (est.ops["op"] == "max_pool2d_with_indices")]
    assert int(fwd["bytes_written"].sum()) == outputs * 4 + outputs * 8


def test_avg_pool_closed_form():
    x = meta(N, 3, 12, 12)
    est = estimate_module(nn.AvgPool2d(2), x, mode="training")
    outputs = N * 3 * 6 * 6
    assert phase_flops(est, "forward", "pooling") == 4 * outputs
    assert phase_flops(est, "backward", "pooling") == 4 * outputs


def test_adaptive_avg_pool_closed_form():
    x = meta(N, 3, 7, 7)
    est = estimate_module(nn.AdaptiveAvgPool2d(1), x, mode="training")
    assert est.totals["pooling_flops"] == x.numel() + N * 3  # one add per input, one divide per output
    assert phase_flops(est, "backward") == x.numel()  # each input gradient = g / window
    est2 = estimate_module(nn.AdaptiveAvgPool2d(2), meta(N, 3, 8, 8), mode="training")
    assert phase_flops(est2, "forward", "pooling") == N * 3 * 64 + N * 3 * 4


class Interpolate(nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.mode = mode

    def forward(self, x):
        return F.interpolate(x, scale_factor=2, mode=self.mode)


@pytest.mark.parametrize("mode, spatial, forward, backward", [
    ("nearest", (6, 6), 0, 1), ("nearest-exact", (6, 6), 0, 1), ("linear", (6,), 3, 4),
    ("bilinear", (6, 6), 9, 12), ("bicubic", (6, 6), 35, 48), ("trilinear", (4, 4, 4), 21, 32)])
def test_interpolation_closed_form(mode, spatial, forward, backward):
    """F.interpolate had no formula: FCN's, DeepLabV3's and LR-ASPP's bilinear upsampling were "unsupported ops",
    0 FLOPs (class "other"). Per output element: nested lerps of two weighted taps, 3·(2^d − 1);
    bicubic 5 × (4 mul + 3 add); backward: each tap's weight product and its add, (d + 1)·2^d."""
    x = meta(N, 3, *spatial)
    est = estimate_module(Interpolate(mode), x, mode="training")
    outputs = x.numel() * 2 ** len(spatial)
    assert est.totals["unsupported_ops"] == {}
    assert phase_flops(est, "forward") == forward * outputs
    assert phase_flops(est, "backward") == backward * outputs
    forward_op = est.ops[est.ops["phase"] == "forward"]
    assert set(forward_op["op_class"]) == {"memory" if forward == 0 else "elementwise"}


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_an_upsampling_backward_copies_a_broadcast_gradient_dense_first(mode):
    """A sum-of-outputs loss (rooflow's for segmentation models) hands the final upsample a stride-0 gradient, which
    the interpolation backward kernels copy contiguous before they read it (formulas.CONTIGUOUS_OPERANDS: ATen's
    `grad_output_.contiguous()`). Counted as 4 bytes read, FCN-ResNet50's b2 upsample backward (45 MB of gradient)
    was priced under its FLOPs' roof on every GPU, an "unexplained" below-roofline error in each segmentation
    training report. Now a clone writes it and the kernel reads it; a dense gradient is read as it is."""
    x = meta(N, 3, 6, 6)
    gradient_bytes = N * 3 * 12 * 12 * 4
    est = estimate_module(Interpolate(mode), x, mode="training")
    backward = est.ops[est.ops["phase"] == "backward"].set_index("op")
    assert backward.at["clone", "op_class"] == "memory"
    assert backward.at["clone", "bytes_written"] == gradient_bytes
    assert backward.at[f"upsample_{mode}2d_backward", "bytes_read"] == gradient_bytes
    dense = estimate_module(Interpolate(mode), x, mode="training", loss_fn=lambda out: (out * out).sum())
    backward = dense.ops[dense.ops["phase"] == "backward"].set_index("op")
    assert "clone" not in backward.index
    assert backward.at[f"upsample_{mode}2d_backward", "bytes_read"] == gradient_bytes


class GridSample(nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.mode = mode
        self.grid = nn.Parameter(torch.zeros(N, 4, 5, 2))  # learnt, as a spatial transformer's: it takes a gradient

    def forward(self, x):
        return F.grid_sample(x, self.grid, mode=self.mode, align_corners=False)


@pytest.mark.parametrize("mode, forward, backward", [
    # per output element + per grid location: bilinear 9 + 16, backward 8 (input) + 24 (grid) + 18
    ("bilinear", (9, 16), (8 + 24, 18)), ("nearest", (0, 6), (1, 6)), ("bicubic", (35, 16), (48 + 96, 18))])
def test_grid_sample_closed_form(mode, forward, backward):
    """RAFT's lookups (grid_sampler_2d) were unsupported ops at 0 FLOPs."""
    est = estimate_module(GridSample(mode), meta(N, 3, 8, 8), mode="training")
    outputs, locations = N * 3 * 4 * 5, N * 4 * 5
    assert est.totals["unsupported_ops"] == {}
    ops = est.ops.set_index(["op", "phase"])["flops"]
    assert ops["grid_sampler_2d", "forward"] == forward[0] * outputs + forward[1] * locations
    assert ops["grid_sampler_2d_backward", "backward"] == backward[0] * outputs + backward[1] * locations


@pytest.mark.parametrize("module, forward, backward", [
    (nn.MaxPool3d(2), 8, 1), (nn.AvgPool3d(2), 8, 8)])  # per output element: the window; its backward
def test_3d_pooling_closed_form(module, forward, backward):
    """S3D's and MViT's 3-D pooling were unsupported ops at 0 FLOPs."""
    est = estimate_module(module, meta(N, 3, 4, 6, 6), mode="training")
    outputs = N * 3 * 2 * 3 * 3
    assert est.totals["unsupported_ops"] == {}
    assert phase_flops(est, "forward", "pooling") == forward * outputs
    assert phase_flops(est, "backward", "pooling") == backward * outputs


class Loss(nn.Module):
    def __init__(self, loss):
        super().__init__()
        self.loss = loss

    def forward(self, x):
        return self.loss(x, torch.zeros_like(x))


@pytest.mark.parametrize("loss, op, forward, backward", [
    (F.mse_loss, "mse_loss", 3, 3), (F.smooth_l1_loss, "smooth_l1_loss", 5, 4), (F.huber_loss, "huber_loss", 5, 4),
    (lambda x, t: F.binary_cross_entropy(torch.sigmoid(x), t), "binary_cross_entropy", 7, 5),
    (F.binary_cross_entropy_with_logits, "binary_cross_entropy_with_logits", 8, None)])
def test_losses_closed_form(loss, op, forward, backward):
    """Per element of the input (forward) and of the gradient written (backward): the loss's reduction to one
    number made a per-output count 0."""
    x = meta(N, 10)
    est = estimate_module(Loss(loss), x, mode="training")
    assert est.totals["unsupported_ops"] == {}
    ops = est.ops.set_index(["op", "phase"])["flops"]
    assert ops[op, "forward"] == forward * x.numel()
    if backward is not None:
        assert ops[f"{op}_backward", "backward"] == backward * x.numel()


@pytest.mark.parametrize("module, op, forward, backward", [
    (nn.GLU(), "glu", 5, 9), (nn.LogSigmoid(), "log_sigmoid_forward", 10, 12)])  # per output element
def test_glu_and_log_sigmoid_closed_form(module, op, forward, backward):
    est = estimate_module(module, meta(N, 2), mode="training")
    assert est.totals["unsupported_ops"] == {}
    assert phase_flops(est, "forward") == forward * N and phase_flops(est, "backward") == backward * N


class Apply(nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, *inputs):
        return self.function(*inputs)


@pytest.mark.parametrize("module, op, forward, backward", [
    (nn.PReLU(), "_prelu_kernel", 2, 3), (nn.CELU(), "celu", 3, None), (Apply(torch.log1p), "log1p", 1, None),
    (Apply(torch.nan_to_num), "nan_to_num", 3, None), (Apply(lambda x: torch.xlogy(x, x)), "xlogy", 3, None)])
def test_more_activations_closed_form(module, op, forward, backward):
    """Per element, as ELEMENTWISE_FLOPS_PER_ELEMENT says (these were unsupported ops at 0 FLOPs): PReLU's
    backward writes both gradients elementwise, the weight's summed after."""
    x = meta(N, 8)
    est = estimate_module(module, x, mode="training")
    assert est.totals["unsupported_ops"] == {}
    ops = est.ops.set_index(["op", "phase"])["flops"]
    assert ops[op, "forward"] == forward * x.numel()
    if backward is not None:
        assert ops[f"{op}_backward", "backward"] == backward * x.numel()


def test_bilinear_runs_two_products_per_output_feature():
    """nn.Bilinear runs as aten._trilinear: per output feature a B×in2×in1 GEMM and B dot products of in2, then an
    add into the output; its backward is _trilinear again per operand that takes a gradient (both inputs and the
    weight here). Its GEMM views are the bmm calls torch.profiler lists for the same module run on the CPU, forward
    and backward, call for call; its FLOPs those products' multiply-adds and the muls and adds between them (it
    had counted the three operands' broadcast product only: no dot products, no views, priced at the peak)."""
    module = nn.Bilinear(8, 6, 4)
    est = estimate_module(module, (meta(N, 8), meta(N, 6)), mode="training")
    assert est.totals["unsupported_ops"] == {}
    trilinear = est.ops[est.ops["op"] == "_trilinear"]
    counted = Counter()
    for _, row in trilinear.iterrows():
        for m, n, k, count, *_ in formulas.parse_gemms(row["gemms"]):
            counted[((count, m, k), (count, k, n))] += int(row["calls"])
    x1, x2 = torch.randn(N, 8, requires_grad=True), torch.randn(N, 6, requires_grad=True)
    with torch.profiler.profile(record_shapes=True) as profiler:
        module(x1, x2).sum().backward()
    ran = Counter(tuple(tuple(shape) for shape in event.input_shapes[:2])
                  for event in profiler.events() if event.name == "aten::bmm")
    assert sum(ran.values()) == 4 * 2 + 3 * 4  # forward: two products per feature; backward: one per feature and operand
    assert counted == ran
    flops = trilinear.groupby("phase")["flops"].sum()
    assert flops["forward"] == 2 * N * 4 * 6 * (8 + 1) + N * 4
    # backward, per output feature: d/dx1 a mul (N×8×6) then the product (2·N·8·6) and its add (N·8); d/dW a mul
    # (N·8), the product (2·N·8·6) and the add (8·6); d/dx2 the product (2·N·6·8), a mul (N·6) and the add (N·6)
    assert flops["backward"] == 4 * ((N * 48 + 96 * N + 8 * N) + (8 * N + 96 * N + 48) + (96 * N + 6 * N + 6 * N))


def test_distances_transforms_and_reductions_closed_form():
    """torch.cdist (3 per feature per pair, and the root), logsumexp (4 per input, 2 per output), torch.fft
    (5·N·log2 N per complex transform of N points, half for a real one)."""
    x = meta(N, 8)
    cdist = estimate_module(Apply(lambda x: torch.cdist(x, x)), x, mode="training")
    assert cdist.totals["unsupported_ops"] == {}
    ops = cdist.ops.groupby(["op", "phase"])["flops"].sum()
    assert ops["_cdist_forward", "forward"] == N * N * (3 * 8 + 1)
    assert ops["_cdist_backward", "backward"] == 2 * N * N * (3 * 8 + 1)  # x is both operands: two gradients
    many = meta(32, 8)  # over 25 rows: PyTorch's p = 2 path through ‖a‖² + ‖b‖² − 2·a·b
    ops = estimate_module(Apply(lambda x: torch.cdist(x, x)), many).ops.set_index("op")["flops"]
    assert ops["_euclidean_dist"] == 2 * 2 * many.numel() + 32 * 32 * (2 * 8 + 4)
    # its product, as torch.profiler lists it: [-2·a, ‖a‖², 1] (32 × 10) @ [b, 1, ‖b‖²]ᵀ (10 × 32), per batch
    batched = (meta(3, 40, 8), meta(3, 30, 8))
    for inputs, view in (((many, many), (32, 32, 10, 1)), (batched, (40, 30, 10, 3))):
        gemms = estimate_module(Apply(lambda a, b: torch.cdist(a, b)), inputs).ops.set_index("op")["gemms"]
        assert formulas.parse_gemms(gemms["_euclidean_dist"])[0][:4] == view
    ops = estimate_module(Apply(lambda x: x.logsumexp(-1)), x).ops.set_index("op")["flops"]
    assert ops["logsumexp"] == 4 * N * 8 + 2 * N
    ops = estimate_module(Apply(lambda x: torch.fft.rfft(x).abs()), x).ops.set_index("op")["flops"]
    assert ops["_fft_r2c"] == 2.5 * N * 8 * 3
    ops = estimate_module(Apply(lambda x: torch.fft.fft2(x.to(torch.complex64)).abs()), x).ops.set_index("op")
    assert ops.loc["_fft_c2c", "flops"] == 5 * (N * 8) * math.log2(N * 8)


def test_padding_pooling_and_masks_leave_no_op_uncounted():
    """Reflection/replication padding (replication_pad2d had been listed under a wrong name) copies; its
    backward adds each border gradient into the element it copied. Fractional max pooling compares a kh·kw
    window per output. Boolean mask logic is no floating-point work."""
    x = meta(N, 8, 10, 10)
    padded = estimate_module(nn.Sequential(nn.ReplicationPad2d(1), nn.ReflectionPad2d(1)), x, mode="training")
    assert padded.totals["unsupported_ops"] == {}
    ops = padded.ops.groupby(["op", "phase"])["flops"].sum()
    assert ops["replication_pad2d", "forward"] == 0 == ops["reflection_pad2d", "forward"]
    assert ops["replication_pad2d_backward", "backward"] == N * 8 * (12 * 12 - 10 * 10)
    assert ops["reflection_pad2d_backward", "backward"] == N * 8 * (14 * 14 - 12 * 12)
    pooled = estimate_module(nn.FractionalMaxPool2d(2, output_size=5), x, mode="training")
    assert pooled.totals["unsupported_ops"] == {}
    ops = pooled.ops.groupby(["op", "phase"])["flops"].sum()
    assert ops["fractional_max_pool2d", "forward"] == 4 * N * 8 * 5 * 5
    assert ops["fractional_max_pool2d_backward", "backward"] == N * 8 * 5 * 5
    masked = estimate_module(Apply(lambda x: x * ((x > 0) & ~(x > 1) | (x < -1))), meta(N, 8, grad=False))
    assert masked.totals["unsupported_ops"] == {}
    logic = masked.ops[masked.ops["op"].str.startswith(("bitwise", "logical"))]
    assert len(logic) and (logic["flops"] == 0).all() and (logic["op_class"] == "memory").all()


def test_weight_norm_and_profiler_markers_closed_form():
    """weight_norm's w = g·v/‖v‖ (3 per weight element, 2 per channel; backward 5 and 3); a model's
    torch.autograd.profiler.record_function markers (nn.DataParallel's forward has one) are no op at all."""
    from torch.nn.utils.parametrizations import weight_norm

    class Marked(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = weight_norm(nn.Conv2d(3, 8, 3))

        def forward(self, x):
            with torch.autograd.profiler.record_function("stem"):
                return self.conv(x)

    est = estimate_module(Marked().to("meta"), meta(N, 3, 8, 8), mode="training")
    assert est.totals["unsupported_ops"] == {}
    ops = est.ops.groupby(["op", "phase"])["flops"].sum()
    weights, channels = 8 * 3 * 3 * 3, 8
    assert ops["_weight_norm_interface", "forward"] == 3 * weights + 2 * channels
    assert ops["_weight_norm_interface_backward", "backward"] == 5 * weights + 3 * channels
    assert not est.ops["op"].str.contains("record_function").any()


class Bag(nn.Module):
    def __init__(self, mode, weighted=False):
        super().__init__()
        self.bag, self.weighted = nn.EmbeddingBag(100, 8, mode=mode), weighted

    def forward(self, ids):
        return self.bag(ids, per_sample_weights=torch.ones(ids.shape, device=ids.device) if self.weighted else None)


@pytest.mark.parametrize("mode, weighted, per_index, per_output", [
    ("sum", False, 8, 0), ("mean", False, 8, 1), ("max", False, 8, 0), ("sum", True, 16, 0)])
def test_embedding_bag_closed_form(mode, weighted, per_index, per_output):
    """nn.EmbeddingBag was an unsupported op: each index's row added into its bag (dim adds, a multiply more with
    per-sample weights), mean's divide per output element; its backward the same into the weight's gradient."""
    ids = torch.zeros(3, 5, dtype=torch.long, device="meta")
    est = estimate_module(Bag(mode, weighted).to("meta"), ids, mode="training")
    assert est.totals["unsupported_ops"] == {}
    expected = ids.numel() * per_index + 3 * 8 * per_output
    assert phase_flops(est, "forward", layer="bag") == expected
    assert phase_flops(est, "backward", layer="bag") == expected == est.layers.set_index("layer").loc[
        "bag", "backward_weight_flops"]


def test_variance_closed_form():
    x = meta(N, 3, 8, grad=False)

    class Var(nn.Module):
        def forward(self, x):
            return x.var(-1) + x.std(-1)

    est = estimate_module(Var(), x)
    ops = est.ops.set_index("op")["flops"]
    assert ops["var"] == ops["std"] == 4 * x.numel() + 2 * N * 3  # two passes; the divides (and sqrt)


def test_segmentation_heads_and_pixel_shuffles_leave_no_op_uncounted():
    from rooflow.estimate import estimate

    # bilinear heads; RAFT's grid_sample lookups; S3D's and MViT's 3-D pooling
    for model in ("fcn_resnet50", "lraspp_mobilenet_v3_large", "raft_small", "s3d", "mvit_v2_s"):
        assert estimate(model, 1, mode="training").totals["unsupported_ops"] == {}, model
    shuffled = estimate_module(nn.Sequential(nn.PixelShuffle(2), nn.PixelUnshuffle(2)), meta(N, 8, 4, 4),
                               mode="training")
    assert shuffled.totals["unsupported_ops"] == {} and phase_flops(shuffled, "forward") == 0


# ------------------------------------------------------------------------------------ softmax/attention
def test_softmax_closed_form():
    x = meta(N, 5, 10)
    est = estimate_module(nn.Softmax(dim=-1), x, mode="training")
    assert phase_flops(est, "forward", "softmax") == 5 * x.numel()
    assert phase_flops(est, "backward", "softmax") == 4 * x.numel()


class SDPA(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


def test_sdpa_counted_at_math_path():
    b, h, s, d = 2, 3, 6, 8
    q, k, v = meta(b, h, s, d), meta(b, h, s, d), meta(b, h, s, d)
    est = estimate_module(SDPA(), (q, k, v), mode="training")
    # QK^T and AV: 2·b·h·s²·d each
    assert phase_flops(est, "forward", "attention") == 2 * (2 * b * h * s * s * d)
    # dV = PᵀdO, dP = dO·Vᵀ, dQ = dS·K, dK = dSᵀ·Q
    assert phase_flops(est, "backward", "attention") == 4 * (2 * b * h * s * s * d)
    assert phase_flops(est, "forward", "softmax") == 5 * b * h * s * s


def test_fused_sdpa_formula_matches_math_path():
    q = torch.Size([2, 3, 6, 8])
    assert formulas.sdpa_flops(q, q, q) == 2 * (2 * 2 * 3 * 6 * 6 * 8)
    assert formulas.sdpa_backward_flops(q, q, q, q) == 2 * formulas.sdpa_flops(q, q, q)


@pytest.mark.parametrize("mode", ["training", "inference"])
def test_multihead_attention_closed_form(mode):
    b, s, e, heads = 2, 7, 16, 4
    mha = nn.MultiheadAttention(e, heads, batch_first=True)

    class Wrapper(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = mha

        def forward(self, x):
            return self.attn(x, x, x, need_weights=False)[0]

    x = meta(b, s, e, grad=mode == "training")
    est = estimate_module(Wrapper(), x, mode=mode)
    tokens = b * s
    # in_proj runs on the (seq, batch)-transposed input: F.linear decomposes to mm + a separate bias add
    # (elementwise); out_proj runs as addmm (bias inside the matmul op)
    in_proj_mm, in_proj_bias = 2 * tokens * e * 3 * e, tokens * 3 * e
    out_proj = 2 * tokens * e * e + tokens * e
    attention = 2 * (2 * b * s * s * e)  # QK^T and AV over all heads: 2·b·s²·(heads·d)
    assert est.totals["attention_flops"] == attention * (3 if mode == "training" else 1)
    assert est.totals["forward_matmul_flops"] == in_proj_mm + out_proj + attention
    if mode == "training":
        # weight gradients: in_proj (mm + bias sum), out_proj (mm + bias sum)
        assert est.totals["backward_weight_flops"] == in_proj_mm + in_proj_bias + out_proj
        # matmul backward: input- and weight-gradient mms of both projections (bias sums are reductions),
        # and four attention bmms
        assert est.totals["backward_matmul_flops"] == (2 * in_proj_mm + 2 * (out_proj - tokens * e)
                                                      + 2 * attention)


# ------------------------------------------------------------------------------------ whole-step rules
class TwoConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1, bias=False)

    def forward(self, x):
        return self.conv2(self.conv1(x))


def test_two_conv_backward_ratio_below_two():
    """Backward = 2× forward except for the first layer, which has no input gradient."""
    est = estimate_module(TwoConv(), meta(N, 3, 8, 8, grad=False), mode="training")
    f1 = 2 * N * 8 * 64 * 3 * 9
    f2 = 2 * N * 16 * 64 * 8 * 9
    assert est.totals["forward_matmul_flops"] == f1 + f2
    assert est.totals["backward_matmul_flops"] == f1 + 2 * f2
    assert est.totals["backward_input_flops"] == f2
    assert est.totals["backward_weight_flops"] == f1 + f2
    assert est.totals["matmul_backward_forward_ratio"] == pytest.approx((f1 + 2 * f2) / (f1 + f2))


class CalledTwice(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(16, 16)

    def forward(self, x):
        return self.linear(torch.relu(self.linear(x)))


def test_a_parameter_used_twice_has_both_partial_gradients_as_weight_work():
    """Autograd sums one partial gradient per use into p.grad: both products writing them (and the bias sums) are
    weight-gradient work; only the second call's input gradient and the ReLU's are input-gradient work."""
    est = estimate_module(CalledTwice(), meta(N, 16, grad=False), mode="training")
    product, bias_sum = 2 * N * 16 * 16, N * 16
    relu = N * 16
    assert est.totals["backward_input_flops"] == product + relu
    # two products and two bias sums, then the two sums of partials (weight and bias)
    assert est.totals["backward_weight_flops"] == 2 * product + 2 * bias_sum + 16 * 16 + 16


class LayerScale(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.gamma = nn.Parameter(torch.ones(8, 1, 1))

    def forward(self, x):
        return self.conv(x) * self.gamma


def test_a_broadcast_parameters_gradient_terms_are_weight_work():
    """gamma's gradient is Σ grad·x over the dimensions it was broadcast along: the product writing the summed
    terms is weight work with the sum; grad·gamma, the convolution output's gradient, is the one input product."""
    est = estimate_module(LayerScale(), meta(N, 3, 8, 8, grad=False), mode="training")
    elements = N * 8 * 8 * 8
    assert est.totals["backward_input_flops"] == elements
    convolution_weight = 2 * N * 8 * 64 * 3 * 9
    assert est.totals["backward_weight_flops"] == convolution_weight + 2 * elements  # the product and its sum


def test_a_recurrent_layers_weight_gradients_are_weight_work():
    """A GRU's weights take a partial gradient at every step: those products are weight work, which then matches
    the forward's products (x·W_ih at every step, h·W_hh at every step), and its input gradients are h's."""
    steps, hidden, features = 3, 64, 32
    est = estimate_module(nn.GRU(features, hidden, batch_first=True), meta(N, steps, features, grad=False),
                          mode="training")
    gates = 3 * hidden
    input_products = steps * 2 * N * features * gates
    hidden_products = steps * 2 * N * hidden * gates
    bias_sums = 2 * steps * N * gates  # b_ih's and b_hh's gradients at each step
    sums_of_partials = (steps - 1) * (gates * features + gates * hidden + 2 * gates)  # W_ih, W_hh, b_ih, b_hh
    assert est.totals["backward_weight_flops"] == input_products + hidden_products + bias_sums + sums_of_partials
    # h's gradient through W_hh at every step but the first (h0 takes none)
    assert est.totals["backward_input_flops"] < hidden_products


def test_batch_scaling_is_linear():
    small = estimate_module(TwoConv(), meta(2, 3, 8, 8, grad=False), mode="training").totals
    large = estimate_module(TwoConv(), meta(6, 3, 8, 8, grad=False), mode="training").totals
    for key in ("forward_flops", "backward_flops", "forward_matmul_flops"):
        assert large[key] == 3 * small[key]
    assert large["optimizer_flops"] == small["optimizer_flops"]  # per parameter, not per sample


def test_sgd_momentum_optimizer_flops():
    """d = g + wd·p (2), buf = m·buf + d (2), p = p − lr·buf (2): 6 FLOPs per parameter."""
    layer = nn.Linear(10, 5)
    est = estimate_module(layer, meta(N, 10), mode="training")
    assert est.totals["optimizer_flops"] == 6 * (10 * 5 + 5)


def test_unknown_ops_are_reported_not_zeroed():
    class Odd(nn.Module):
        def forward(self, x):
            return torch.special.bessel_j0(x)

    est = estimate_module(Odd(), meta(N, 3, grad=False), mode="inference")
    assert est.totals["unsupported_ops"] == {"special_bessel_j0": 1}


# ---------------------------------------------------------------------------------------- GEMM views
def test_gemm_views_of_convolution_and_its_backward():
    """Implicit-GEMM views, whose products are exactly the FLOP formula's multiply-adds."""
    from rooflow.estimate.formulas import gemm_views

    aten = torch.ops.aten
    x, w = torch.empty(8, 64, 56, 56, device="meta"), torch.empty(128, 64, 3, 3, device="meta")
    args = (x, w, None, [2, 2], [1, 1], [1, 1], False, [0, 0], 1)
    out = aten.convolution.default(*args)
    (m, n, k, count, fast, k_taps, n_taps), = gemm_views(aten.convolution.default, args, {}, out)
    assert (m, n, k, count, fast) == (8 * 28 * 28, 128, 64 * 9, 1, 0)  # stride 2: no Winograd
    assert (k_taps, n_taps) == (9, 0)  # k is 64 channels at each of the 9 filter taps
    assert 2 * m * n * k * count == count_flops(aten.convolution.default, args, out)
    grad = torch.empty_like(out)
    backward = (grad, x, w, [0], [2, 2], [1, 1], [1, 1], False, [0, 0], 1, [True, True, False])
    dgrad, wgrad = gemm_views(aten.convolution_backward.default, backward, {}, None)
    assert dgrad == (8 * 56 * 56, 64, 128 * 9, 1, 0, 9, 0) and wgrad == (128, 64 * 9, 8 * 28 * 28, 1, 0, 0, 9)
    same = (x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)  # 3×3, stride 1: Winograd/FFT may run it
    assert gemm_views(aten.convolution.default, same, {}, aten.convolution.default(*same))[0][4] == 1
    depthwise = (x, torch.empty(64, 1, 3, 3, device="meta"), None, [1, 1], [1, 1], [1, 1], False, [0, 0], 64)
    assert gemm_views(aten.convolution.default, depthwise, {}, aten.convolution.default(*depthwise)) == \
        ((8 * 56 * 56, 1, 9, 64, 0, 9, 0),)
    a, b = torch.empty(32, 512, device="meta"), torch.empty(512, 1000, device="meta")
    assert gemm_views(aten.addmm.default, (torch.empty(1000, device="meta"), a, b), {}, None) == ((32, 1000, 512, 1),)
    assert gemm_views(aten.relu.default, (a,), {}, a) == ()


def count_flops(func, args, out):
    from rooflow.estimate.formulas import count

    return count(func, args, {}, out)[0]


class _NhwcBlock(nn.Module):
    """ConvNeXt's pattern: a 1×1 convolution, then a depthwise one on a channels_last view (the NHWC permute back)."""

    def __init__(self):
        super().__init__()
        self.pointwise = nn.Conv2d(16, 16, 1)
        self.depthwise = nn.Conv2d(16, 16, 3, padding=1, groups=16)

    def forward(self, x):
        x = self.pointwise(x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2))  # a channels_last input
        return self.depthwise(x)


def test_depthwise_calls_say_whether_their_input_is_channels_last():
    """A grouped convolution's call shape is (groups, channels_last): PyTorch runs a depthwise convolution on a
    channels_last input with cuDNN's kernels in every dtype, on a contiguous one with its own (fp16 aside). A
    convolution's output follows its input's layout, as on a GPU (meta kernels leave it contiguous: the depthwise
    layer after the 1×1 one would see NCHW)."""
    est = estimate_module(_NhwcBlock(), meta(N, 16, 8, 8), mode="training")
    depthwise = est.ops[(est.ops["layer"] == "depthwise") & est.ops["op"].str.startswith("convolution")]
    assert set(depthwise["phase"]) == {"forward", "backward"} and set(depthwise["call"]) == {"16x1"}
    plain = estimate_module(nn.Conv2d(16, 16, 3, padding=1, groups=16), meta(N, 16, 8, 8), mode="training")
    convs = plain.ops[plain.ops["op"].str.startswith("convolution")]
    assert len(convs) == 2 and set(convs["call"]) == {"16x0"}

    aten = torch.ops.aten
    nhwc = torch.empty(N, 16, 8, 8, device="meta").to(memory_format=torch.channels_last)
    args = (nhwc, torch.empty(16, 16, 1, 1, device="meta"), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    assert formulas.call_shape(aten.convolution.default, args, {}) == (N, 16, 8, 16, 1, 1, 0)  # ungrouped: as before
    from rooflow.estimate.counter import _conv_output_layout

    out = _conv_output_layout(aten.convolution, args, aten.convolution.default(*args))
    assert formulas.suggests_channels_last(out) and not formulas.suggests_channels_last(torch.empty(N, 16, 8, 8))
