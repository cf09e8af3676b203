"""The estimator's emulation of CUDA autocast (rooflow.estimate.autocast) on meta tensors.

Closed forms on single layers: what autocast casts (inputs, weights AND biases of convolutions and linears),
where the casts land (forward, before autograd records the op, so backward casts the weight gradient back to
fp32), what is saved for backward (the low-precision copy, not the fp32 input), and that the policy lists
cover every op the installed torch gives an AutocastCUDA kernel.
"""

from __future__ import annotations

import functools

import pytest
import torch

from rooflow.errors import RooflowError
from rooflow.estimate import estimate, estimate_module
from rooflow.estimate.autocast import ATEN_POLICIES, FUNCTION_ALIASES, POLICIES, function_policy

LOW = ["fp16", "bf16"]


def _autocast_cuda_ops() -> set[str]:
    """Base names of every aten op with an AutocastCUDA kernel in the installed torch (the dispatcher's own
    registry: it needs no GPU)."""
    names = set()
    for op in torch._C._dispatch_get_all_op_names():
        if op.startswith("aten::") and torch._C._dispatch_has_kernel_for_dispatch_key(op, "AutocastCUDA"):
            names.add(op.removeprefix("aten::").split(".")[0])
    return names


def test_policies_cover_every_autocast_cuda_op():
    registered = _autocast_cuda_ops()
    assert len(registered) > 90  # conv*, matmuls, the fp32 list, losses, upsampling, ...
    missing = sorted(registered - set(POLICIES))
    assert not missing, f"ops autocast handles that the emulation does not know: {missing}"


@pytest.mark.parametrize("func, policy", [
    (torch.nn.functional.conv2d, "lower_precision_fp"), (torch.nn.functional.linear, "lower_precision_fp"),
    (torch.Tensor.__matmul__, "lower_precision_fp"), (torch.layer_norm, "fp32"),
    (torch.Tensor.softmax, "fp32_set_opt_dtype"), (torch.addcmul, "promote"), (torch.relu, None),
    (torch.batch_norm, None), (torch.Tensor.add, None)])
def test_function_policy(func, policy):
    """What the emulation's function-level mode sees: functions and Tensor methods, by name."""
    assert function_policy(func) == policy
    assert all(alias_target in POLICIES for alias_target in FUNCTION_ALIASES.values())
    assert all(policy in ("lower_precision_fp", "fp32") for policy in ATEN_POLICIES.values())


def _ops(est, op, phase="forward"):
    return est.ops[(est.ops["op"] == op) & (est.ops["phase"] == phase)]


@pytest.mark.parametrize("low", LOW)
@pytest.mark.parametrize("mode", ["inference", "training"])
def test_biased_conv_casts_input_weight_and_bias(low, mode):
    """conv2d with a bias (VGG, AlexNet) under autocast: input, weight and bias are cast (a composite-level
    dtype check rejects a low-precision input with an fp32 bias), the convolution runs in the low dtype."""
    n, cin, cout, hw, k = 2, 3, 8, 16, 3
    conv = torch.nn.Conv2d(cin, cout, k, padding=1, bias=True)
    x = torch.empty(n, cin, hw, hw, device="meta")
    est = estimate_module(conv, x, precision=low, mode=mode)
    casts = _ops(est, "_to_copy")
    element = 2
    # input n·cin·hw² (fp32 read, low written), weight cout·cin·k², bias cout: one cast each
    read = 4 * (n * cin * hw * hw + cout * cin * k * k + cout)
    assert int(casts["bytes_read"].sum()) == read
    assert int(casts["bytes_written"].sum()) == read // 4 * element
    convolution = _ops(est, "convolution")
    assert set(convolution["compute_precision"]) == {low}
    assert int(convolution["bytes_written"].sum()) == n * cout * hw * hw * element
    assert est.totals["forward_flops"] == 2 * cin * k * k * cout * hw * hw * n + cout * hw * hw * n


@pytest.mark.parametrize("low", LOW)
def test_weight_gradient_is_cast_back_to_fp32_in_backward(low):
    """autocast's casts are recorded by autograd: the weight gradient is computed in the low dtype and
    ToCopyBackward casts it back to the fp32 master weight's dtype — a _to_copy in backward, nothing more."""
    linear = torch.nn.Linear(64, 32, bias=True)
    x = torch.empty(8, 64, device="meta")
    est = estimate_module(linear, x, precision=low, mode="training")
    back = _ops(est, "_to_copy", "backward")
    # weight 32×64 and bias 32 gradients: read in the low dtype, written in fp32
    assert int(back["bytes_read"].sum()) == 2 * (32 * 64 + 32)
    assert int(back["bytes_written"].sum()) == 4 * (32 * 64 + 32)
    matmuls = est.ops[(est.ops["op_class"] == "matmul") & (est.ops["phase"] == "backward")]
    assert set(matmuls["compute_precision"]) == {low}


@pytest.mark.parametrize("low", LOW)
def test_saved_activation_is_the_low_precision_copy(low):
    """Real autocast casts before autograd records the op, so a linear saves the fp16/bf16 copy of its input
    for backward, not the fp32 tensor: a LayerNorm's fp32 output feeding a linear (every transformer block)
    is freed after the cast. When backward starts, no fp32 forward tensor of that size is alive but the
    input; in fp32 the LayerNorm output is (the linear saved it)."""
    n, d = 64, 256

    def fp32_forward_tensors_alive_at_backward(precision):
        model = torch.nn.Sequential(torch.nn.LayerNorm(d), torch.nn.Linear(d, d))
        x = torch.empty(n, d, device="meta")
        trace = estimate_module(model, x, precision=precision, mode="training").trace
        first_backward = next(r.index for r in trace.records if r.phase == "backward")
        return [s for s in trace.storages.values()
                if s.category == "forward" and s.nbytes == 4 * n * d and s.alloc_index <= first_backward
                and (s.free_index is None or s.free_index > first_backward)]

    assert len(fp32_forward_tensors_alive_at_backward("fp32")) == 1  # the LayerNorm output, saved
    assert fp32_forward_tensors_alive_at_backward(low) == []


def test_cross_entropy_runs_in_fp32_and_attention_is_cast_once():
    """cross_entropy is not on autocast's lists: what it decomposes into is (log_softmax, nll_loss: fp32).
    LayerNorm is on the fp32 list, the projections on the fp16 one. scaled_dot_product_attention is cast to
    fp16 as a whole and nothing inside it is cast again by autocast: on meta it runs torch's math kernel,
    which itself upcasts fp16 inputs to fp32 (what a plain fp16 call does too) — the emulation adds nothing."""
    est = estimate("vit_b_32", 2, precision="fp16", mode="training")
    ops = est.ops
    loss = ops[ops["phase"] == "loss"]
    assert set(loss.loc[loss["op"] == "_log_softmax", "compute_precision"]) == {"fp32"}
    assert set(ops.loc[ops["op"] == "native_layer_norm", "compute_precision"]) == {"fp32"}
    forward = ops[ops["phase"] == "forward"]
    assert set(forward.loc[forward["op_class"] == "matmul", "compute_precision"]) == {"fp16"}

    q = torch.empty(2, 12, 50, 64, device="meta", dtype=torch.float16)
    plain = estimate_module(_Attention(), q, precision="fp32").ops
    emulated = estimate_module(_Attention(), q.float(), precision="fp16").ops
    inner = ["mul", "bmm", "_safe_softmax"]
    assert [tuple(plain.loc[plain["op"] == op, "compute_precision"]) for op in inner] == \
        [tuple(emulated.loc[emulated["op"] == op, "compute_precision"]) for op in inner]


class _Attention(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.scaled_dot_product_attention(x, x, x)


@functools.cache
def _fp32_estimate(model, mode):
    return estimate(model, 4, "fp32", mode)


@pytest.mark.parametrize("precision", ["fp32", "tf32", "fp16", "bf16"])
@pytest.mark.parametrize("mode", ["inference", "training"])
@pytest.mark.parametrize("model", ["resnet18", "resnet50", "vgg16", "alexnet"])
def test_h100_fixture_models_estimate_in_every_precision(model, precision, mode):
    """The models of rooflow's H100 sweep (tests/data/real/h100-rooflow) in all four precisions × both
    modes: no crash, every op counted, FLOPs independent of the precision."""
    result, fp32 = estimate(model, 4, precision, mode), _fp32_estimate(model, mode)
    est, reference = result.totals, fp32.totals
    assert est["unsupported_ops"] == {}
    assert est["forward_matmul_flops"] == reference["forward_matmul_flops"]

    def matmul_output_bytes(e):
        ops = e.ops
        return ops.loc[(ops["phase"] == "forward") & (ops["op_class"] == "matmul"), "bytes_written"].sum()

    if precision in LOW:  # every convolution and linear writes its output in 2 bytes instead of 4
        assert 2 * matmul_output_bytes(result) == matmul_output_bytes(fp32)
        # ... while every weight is read in fp32 and written and read again as a 2-byte copy: at batch 4
        # VGG16's 138 M weights make autocast inference move MORE bytes than fp32 (8 vs 4 bytes a weight)
        casts = result.ops[(result.ops["op"] == "_to_copy") & (result.ops["phase"] == "forward")]
        assert casts["bytes_read"].sum() >= 4 * est["params"]
    else:
        assert est["unfused_bytes"] == reference["unfused_bytes"]


@pytest.mark.parametrize("low", ["fp16", "bf16"])
def test_weight_copies_live_until_the_autocast_region_ends(low):
    """Autocast caches each weight's low-precision copy for its whole region. The emulation re-enters its
    mode to redispatch calls that are not autocast's (torch.flatten in ResNet's forward); a re-entry must not
    clear the cache. So at the end of an inference forward every conv/linear weight's 2-byte copy is still
    live beside the fp32 weights: on the H100, ResNet-50 b1 bf16 inference held 215.7 MiB where its fp32
    weights are 97.5 MiB (tests/data/real/h100-rooflow/h100-sweep-4-models.jsonl)."""
    from rooflow.workload.models import build_meta_model

    result = estimate("resnet50", 1, low, "inference")
    net = build_meta_model("resnet50")
    matrices = [p for p in net.parameters() if p.dim() > 1]  # 53 convolution weights and the fc's
    cast_elements = sum(p.numel() for p in matrices) + net.fc.bias.numel() + 3 * 224 * 224  # + bias, input
    casts = result.ops[result.ops["op"] == "_to_copy"]
    assert casts["calls"].sum() == len(matrices) + 2  # each weight cast once, the fc bias, the input batch
    assert casts["bytes_written"].sum() == 2 * cast_elements
    copies = 2 * (cast_elements - 3 * 224 * 224)
    assert result.totals["peak_memory_breakdown"]["params"] == result.totals["weight_bytes"] + copies


def test_banned_op_is_one_sentence():
    class Probabilities(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.binary_cross_entropy(torch.sigmoid(x), torch.zeros_like(x))

    with pytest.raises(RooflowError, match="unsafe under autocast"):
        estimate_module(Probabilities(), torch.empty(4, 4, device="meta"), precision="fp16")


class _SelfAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = torch.nn.MultiheadAttention(64, 4, batch_first=True)

    def forward(self, x):
        return self.attention(x, x, x, need_weights=False)[0]


def test_nested_ops_are_cast_on_a_torch_without_redispatch(monkeypatch):
    """torch 2.11 (the lent H100/H200 image) has no torch.overrides.redispatch_function: the projections and
    attention inside F.multi_head_attention_forward are still seen and cast to bf16, op for op as on torch 2.14."""
    x = torch.empty(2, 16, 64, device="meta")

    def ops():
        table = estimate_module(_SelfAttention().to("meta"), x, precision="bf16", mode="training").ops
        return sorted(zip(table["op"], table["phase"], table["compute_precision"], table["flops"]))

    with_redispatch = ops()
    monkeypatch.delattr(torch.overrides, "redispatch_function")
    monkeypatch.delattr(torch._C, "_skip_one_hop_torch_function")
    without = ops()
    assert without == with_redispatch
    assert ("addmm", "forward", "bf16") in {row[:3] for row in without}
    assert torch.nn.functional.has_torch_function is torch._C._has_torch_function  # restored
