"""The self-checks table, from summaries and estimates built by hand with closed-form expected values."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from rooflow.io import write_csv, write_json
from rooflow.report.checks import (
    CHECK_COLUMNS,
    FB_FLOPS_TOLERANCE,
    FB_LATENCY_FACTOR,
    build_checks,
    check_files,
    flagged_runs,
    forward_backward_table,
    implied_backward_forward_ratio,
    severity_of,
)
from rooflow.report.summary import COLUMNS
from rooflow.report.tables import checks_overview


def run_row(**values) -> dict:
    """A summary row: every column NaN/None unless given; a healthy measured run by default."""
    row = {c: math.nan for c in COLUMNS}
    row.update(device="cpu", model="resnet18", batch=8, precision="fp32", mode="inference", device_kind="cpu",
               status="ok", checks="", measured_seconds=0.1, seconds_spread=0.01, percent_of_roofline=40.0,
               roof_source="measured", params=11_689_512, estimated_flops=8 * 3.64e9)
    row.update(values)
    return row


def summary(*rows) -> pd.DataFrame:
    return pd.DataFrame(list(rows), columns=COLUMNS)


def layers(first: float, rest: list[float]) -> pd.DataFrame:
    """A layers.csv in execution order: a BatchNorm before nothing, the first conv, then the others."""
    names = ["conv1", "bn1"] + [f"layer{i}" for i in range(len(rest))]
    types = ["Conv2d", "BatchNorm2d"] + ["Conv2d"] * len(rest)
    flops = [first, 0.0] + rest
    return pd.DataFrame({"layer": names, "type": types, "forward_matmul_flops": flops})


def test_a_healthy_summary_fails_no_check():
    checks, _ = build_checks(summary(run_row(), run_row(model="alexnet")))
    assert checks.empty
    assert list(checks.columns) == CHECK_COLUMNS
    assert "all passed" in checks_overview(checks)


def test_a_point_above_its_roof_is_an_error_with_the_summary_cause():
    wrong = run_row(model="vgg11", percent_of_roofline=180.0,
                    checks="above the roof: 180% of the attainable 1 TFLOP/s (measured fp32 roof): a wrong peak")
    checks, _ = build_checks(summary(run_row(), wrong))
    assert len(checks) == 1
    row = checks.iloc[0]
    assert (row["severity"], row["check"], row["model"]) == ("error", "above the roof", "vgg11")
    assert row["run"] == "cpu vgg11 b8 fp32 inference"
    assert row["value"].startswith("180%")
    assert "wrong peak" in row["likely_cause"]


def test_a_cpu_run_timed_with_other_threads_than_its_roofs_is_warned(tmp_path):
    """A CPU's roofs are those of the cores that measured them: a run timed on 1 core against roofs of 2 sits at
    a share of a roof it could never reach (and one of 2 cores against 1 core's roofs above it)."""
    from pathlib import Path

    from rooflow.hardware.devices import load_devices
    from rooflow.report.summary import build_row

    checks, _ = build_checks(summary(run_row(threads=1, roof_threads=2), run_row(model="alexnet", threads=2,
                                                                                 roof_threads=2)))
    assert len(checks) == 1
    check = checks.iloc[0]
    assert (check["severity"], check["check"], check["model"]) == ("warning", "roofs of other threads", "resnet18")
    assert check["value"] == "timed with 1 thread, its CPU roofs measured with 2"
    assert "--forcerun measure_ceilings --cores 1" in check["likely_cause"]
    # the summary row carries both counts, from the timing record and the ceilings file
    device = load_devices(Path(__file__).resolve().parents[2] / "config" / "devices.yaml")["cpu"]
    device.with_measured({"threads": 2, "peak_flops_per_second": {"fp32": 1e11}, "dram_bytes_per_second": 2e10})
    row = build_row(device, {"model": "resnet18", "batch": 8, "precision": "fp32", "mode": "inference"},
                    {"status": "ok", "median_seconds": 0.1, "threads": 1})
    assert (row["threads"], row["roof_threads"]) == (1, 2)
    assert "roofs of other threads" in row["checks"]


def test_a_timing_of_too_few_iterations_or_a_gpu_timing_without_warm_up_is_warned():
    """`rooflow time --iterations 1 --warmup 0` was a run like any other: its one iteration (on a GPU, with
    cuDNN's autotuning in it) printed as the step's latency."""
    from rooflow.report.summary import build_row

    once = run_row(timer="perf_counter_ns", timed_iterations=1, warmup_iterations=3)
    cold = run_row(model="alexnet", device="h100", device_kind="cuda", timer="cuda-events", timed_iterations=10,
                   warmup_iterations=0)
    settled = run_row(model="vgg11", timer="perf_counter_ns", timed_iterations=3, warmup_iterations=0)  # a CPU's
    imported = run_row(model="vgg13", timer="imported", timed_iterations=1, warmup_iterations=0)
    checks, _ = build_checks(summary(once, cold, settled, imported))
    assert sorted(zip(checks["model"], checks["check"], checks["value"])) == [
        ("alexnet", "no warm-up", "0 warm-up iterations"), ("resnet18", "too few timed iterations", "1 timed")]
    assert "profiling.timed_iterations" in checks.set_index("model").at["resnet18", "likely_cause"]
    row = build_row(gpu_device(), {"model": "resnet18", "batch": 8, "precision": "fp32", "mode": "inference"},
                    {"status": "ok", "median_seconds": 0.1, "timer": "cuda-events", "warmup_iterations": 0,
                     "timed_iterations": 2})
    assert (row["warmup_iterations"], row["timed_iterations"]) == (0, 2)
    assert "too few timed iterations" in row["checks"] and "no warm-up" in row["checks"]


def gpu_device():
    from pathlib import Path

    from rooflow.hardware.devices import load_devices

    return load_devices(Path(__file__).resolve().parents[2] / "config" / "devices.yaml")["h100-sxm5-80gb"]


def test_noisy_oom_and_flop_ratio_checks_with_their_severities():
    # the summary's `checks` text is for people: the checks come from the columns (the oom message has its own)
    noisy = run_row(model="alexnet", seconds_spread=0.12, checks="noisy: unread | above the roof: unread")
    oom = run_row(model="vgg16", batch=256, status="oom", measured_seconds=math.nan,
                  status_message="out of memory: CUDA out of memory. Tried to allocate 3 GiB")
    unexplained = run_row(device="a100", model="resnet50", flops_ratio=0.05, reconciliation=math.nan)
    explained = run_row(device="a100", model="resnet18", flops_ratio=2.6,
                        reconciliation="cuDNN runs Winograd: fewer multiplies than direct convolution")
    in_band = run_row(device="a100", model="alexnet", flops_ratio=1.9)
    checks, _ = build_checks(summary(noisy, oom, unexplained, explained, in_band))
    by_model = {r["model"]: r for _, r in checks.iterrows()}
    assert set(by_model) == {"alexnet", "vgg16", "resnet50", "resnet18"}
    assert by_model["alexnet"]["check"] == "noisy" and by_model["alexnet"]["severity"] == "warning"
    # no load recorded beside its iterations (a row without load_during_timing): its cause is not guessed
    assert by_model["alexnet"]["likely_cause"].startswith("unexplained: the machine's load while it was timed was "
                                                          "not recorded")
    assert by_model["vgg16"]["severity"] == "result" and "Tried to allocate" in by_model["vgg16"]["likely_cause"]
    assert by_model["resnet50"]["severity"] == "error" and "no explanation" in by_model["resnet50"]["likely_cause"]
    assert by_model["resnet18"]["severity"] == "warning" and "Winograd" in by_model["resnet18"]["likely_cause"]
    # errors sort first
    assert list(checks["severity"]) == sorted(checks["severity"], key=["error", "warning", "result"].index)


def test_above_the_measured_roof_is_a_warning_only_beside_a_datasheet_roof():
    gpu = run_row(device="a100", roof_source="datasheet", percent_of_roofline=80.0,
                  percent_of_measured_roofline=104.0)
    cpu = run_row(roof_source="measured", percent_of_roofline=80.0, percent_of_measured_roofline=104.0)
    checks, _ = build_checks(summary(gpu, cpu))
    assert list(checks["check"]) == ["above the measured roof"] and checks.iloc[0]["device"] == "a100"


def test_implied_ratio_is_two_minus_the_first_layers_share():
    # first conv 10 of 100 forward matmul FLOPs: backward = 2 × 100 − 10 = 190 → ratio 1.9
    name, share, implied = implied_backward_forward_ratio(layers(10.0, [40.0, 50.0]))
    assert (name, share, implied) == ("conv1", pytest.approx(0.1), pytest.approx(1.9))
    # the totals' forward matmul FLOPs are the denominator where given
    assert implied_backward_forward_ratio(layers(10.0, [40.0, 50.0]), 200.0)[2] == pytest.approx(1.95)


def test_behind_an_embedding_the_first_matmul_layer_computes_its_input_gradient():
    """A language model's first matmul layer takes the embeddings' output, whose gradient the tables need: every
    matmul layer computes its input gradient, so the layers imply 2, not 2 − its share (which had flagged the
    token-id example's correct 1.99 as an error against 1.83)."""
    table = pd.DataFrame({"layer": ["(root)", "tokens", "attention", "head"],
                          "type": ["LM", "Embedding", "MultiheadAttention", "Linear"],
                          "forward_matmul_flops": [0.0, 0.0, 20.0, 80.0], "params": [0, 4096, 300, 500]})
    assert implied_backward_forward_ratio(table) == ("attention", 0.0, 2.0)
    frozen_front = table.assign(params=[0, 0, 300, 500])  # no parameters before it: 2 − 0.2
    assert implied_backward_forward_ratio(frozen_front) == ("attention", pytest.approx(0.2), pytest.approx(1.8))
    key = ("tiny_lm", 8, "fp32", "training")
    for ratio, failed in ((1.99, False), (1.8, True)):
        totals = {key: {"model": "tiny_lm", "batch": 8, "precision": "fp32", "mode": "training",
                        "forward_matmul_flops": 100.0, "matmul_backward_forward_ratio": ratio,
                        "unsupported_ops": {}}}
        checks, fb = build_checks(summary(run_row(model="tiny_lm", mode="training")), totals, {key: table})
        assert fb.iloc[0]["trainable_before_first_layer"] == "tokens (Embedding)"
        flops = checks[checks["check"] == "forward:backward FLOPs"]
        assert len(flops) == failed
        if failed:
            assert "2: tokens (Embedding) runs before the first matmul layer attention" in flops.iloc[0]["expected"]


def test_a_frozen_embedding_leaves_the_first_matmul_layer_without_its_input_gradient():
    """Counted, not assumed: behind a trainable nn.Embedding the first nn.Linear computes its input gradient
    (backward 2× the forward), behind a frozen one it does not (2 − its share), and the layers table's
    gradient bytes tell the check which."""
    import torch
    from torch import nn

    from rooflow.estimate.api import estimate_module

    for frozen in (False, True):
        model = nn.Sequential(nn.Embedding(100, 64), nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
        model[0].weight.requires_grad_(not frozen)
        result = estimate_module(model.to("meta"), (torch.zeros(8, 32, dtype=torch.int64, device="meta"),),
                                 mode="training")
        first, share, implied = implied_backward_forward_ratio(result.layers, result["forward_matmul_flops"])
        counted = result["matmul_backward_forward_ratio"]
        assert first == "1" and abs(counted / implied - 1) < FB_FLOPS_TOLERANCE
        first_share = 64 * 256 / (64 * 256 + 256 * 10)  # of the forward products' FLOPs
        assert implied == pytest.approx(2.0 - first_share if frozen else 2.0, rel=0.01)  # bias adds apart


@pytest.mark.parametrize("reentrant", [True, False])
def test_activation_checkpointing_recomputes_forward_matmuls_the_ratio_expects(reentrant):
    """A checkpointed model's backward runs its forward again: its counted matmul ratio (2.62 here) is what the
    layers imply with the recomputed forward matmuls added, not an over-count. The check had called it an error
    ("a backward formula that over-counts"); the recomputed part is read from the estimate, and a ratio off even
    that is still an error that names it."""
    import torch
    from torch import nn

    from rooflow.estimate.api import estimate_module

    class Checkpointed(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Linear(16, 64)
            self.block = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64))

        def forward(self, x):
            x = self.stem(x)
            return x + torch.utils.checkpoint.checkpoint(self.block, x, use_reentrant=reentrant)

    result = estimate_module(Checkpointed().to("meta"), torch.empty(32, 16, device="meta"), mode="training")
    # the block's two linears, bias adds; without reentry PyTorch stops recomputing once the tensors backward
    # saved are back: the second linear's input and weight are, before it runs
    recomputed = ((64, 256), (256, 64)) if reentrant else ((64, 256),)
    assert result["recomputed_matmul_flops"] == pytest.approx(sum(2 * 32 * a * b + 32 * b for a, b in recomputed))
    assert result["backward_flops"] == pytest.approx(
        result["backward_input_flops"] + result["backward_weight_flops"] + result["recomputed_flops"])
    key = ("checkpointed", 32, "fp32", "training")
    totals = {key: {**dict(result), "model": "checkpointed"}}
    run = run_row(model="checkpointed", batch=32, mode="training")
    checks, table = build_checks(summary(run), totals, {key: result.layers})
    row = table.iloc[0]
    assert row["estimated_matmul_flops_ratio"] > (2.5 if reentrant else 2.4)
    assert row["implied_flops_ratio"] == pytest.approx(row["estimated_matmul_flops_ratio"], rel=FB_FLOPS_TOLERANCE)
    assert checks[checks["check"] == "forward:backward FLOPs"].empty
    doubled = {key: {**totals[key], "matmul_backward_forward_ratio": 2 * row["estimated_matmul_flops_ratio"]}}
    flops = build_checks(summary(run), doubled, {key: result.layers})[0]
    flops = flops[flops["check"] == "forward:backward FLOPs"]
    assert len(flops) == 1 and "activation checkpointing runs again in backward" in flops.iloc[0]["expected"]


def test_a_bilinear_layer_is_left_out_of_the_rule_of_two_gradients_by_name():
    """nn.Bilinear takes a gradient of each of its three operands (and its loop multiplies elementwise): its
    backward is 3.50x its forward here, and this net's matmul ratio 3.40, which the check's rule — two gradients
    per conv/linear layer, 2 − the first layer's share — called an error ("a backward formula that over-counts").
    Its layers are now left out of both sides of the ratio, by name; the rest still has to meet the rule, and an
    over-count there is still an error."""
    import torch
    from torch import nn

    from rooflow.estimate.api import estimate_module

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(64, 128), nn.Linear(128, 96)
            self.bil, self.head = nn.Bilinear(128, 96, 32), nn.Linear(32, 10)

        def forward(self, x):
            h = self.a(x).relu()
            return self.head(self.bil(h, self.b(h).relu()))

    result = estimate_module(Net().to("meta"), torch.empty(64, 64, device="meta"), mode="training")
    assert result["matmul_backward_forward_ratio"] > 3.3
    key = ("net", 64, "fp32", "training")
    totals = {key: {**dict(result), "model": "net"}}
    run = run_row(model="net", batch=64, mode="training")
    checks, table = build_checks(summary(run), totals, {key: result.layers})
    row = table.iloc[0]
    row_forward = result["forward_matmul_flops"] - float(result.layers.set_index("layer").at["bil", "forward_matmul_flops"])
    assert row["layers_apart"] == "bil" and row["estimated_matmul_flops_ratio"] < 2.0
    assert row["implied_flops_ratio"] == pytest.approx(row["estimated_matmul_flops_ratio"], rel=FB_FLOPS_TOLERANCE)
    assert checks[checks["check"] == "forward:backward FLOPs"].empty
    over = {key: {**totals[key], "backward_matmul_flops": result["backward_matmul_flops"] + 0.1 * row_forward}}
    flops = build_checks(summary(run), over, {key: result.layers})[0]
    flops = flops[flops["check"] == "forward:backward FLOPs"]
    assert len(flops) == 1 and flops.iloc[0]["severity"] == "error"
    assert "nn.Bilinear layers bil apart" in flops.iloc[0]["expected"]


def _flop_check(model, x, name: str, backward_factor: float = 1.0, check: str = "forward:backward FLOPs", **run):
    """(the forward:backward table's row, the rows of `check`) of `model`'s training estimate on `x`, its
    backward matmul FLOPs scaled by `backward_factor` (an injected miscount); `run`: the summary row's values."""
    from rooflow.estimate.api import estimate_module

    result = estimate_module(model.to("meta"), x, mode="training")
    key = (name, 8, "fp32", "training")
    totals = {key: {**dict(result), "model": name,
                    "matmul_backward_forward_ratio": result["matmul_backward_forward_ratio"] * backward_factor}}
    checks, table = build_checks(summary(run_row(model=name, batch=8, mode="training", **run)), totals,
                                 {key: result.layers})
    return table.iloc[0], checks[checks["check"] == check]


def test_a_frozen_backbone_takes_no_gradients_and_is_no_backward_undercount():
    """Fine-tuning a head on a frozen ResNet-18: the backbone's products take no gradient (nothing before them
    does), the new head two. The estimate's backward:forward matmul ratio, 0.0003, was an error against the rule
    2 − the first layer's share (1.935): 'backward counted short of the layers'. The layers imply it now, read from
    which operands took a gradient as the step ran; an undercount of the rest is still an error, naming them."""
    import torch
    import torchvision
    from torch import nn

    model = torchvision.models.resnet18()
    model.requires_grad_(False)
    model.fc = nn.Linear(512, 1000)
    row, flagged = _flop_check(model, torch.empty(8, 3, 224, 224, device="meta"), "frozen_resnet18")
    assert row["estimated_matmul_flops_ratio"] < 0.001
    assert row["implied_flops_ratio"] == pytest.approx(row["estimated_matmul_flops_ratio"], rel=0.01)
    assert flagged.empty
    frozen = row["layers_no_gradient"].split(", ")
    assert len(frozen) == 20 and frozen[0] == "conv1" and row["layers_one_gradient"] == "fc"  # its weight's
    row, flagged = _flop_check(model, torch.empty(8, 3, 224, 224, device="meta"), "frozen_resnet18", 0.5)
    assert len(flagged) == 1 and flagged.iloc[0]["severity"] == "error"
    assert "two, but one in fc; none in 20 layers (conv1, layer1.0.conv1, layer1.0.conv2, …)" in \
        flagged.iloc[0]["expected"]
    assert "frozen parameters" not in flagged.iloc[0]["likely_cause"]  # counted on both sides: not a cause
    # its backward, the head's few ops, timed (a CPU run of it: 7.68 ms forward, 0.231 ms backward): the band
    # around the implied ratio in figures that show it (it printed "[0.00, 0.00] (implied FLOP ratio 0.000 ...")
    row, latency = _flop_check(model, torch.empty(8, 3, 224, 224, device="meta"), "frozen_resnet18",
                               check="forward:backward latency", forward_seconds=7.68e-3, backward_seconds=0.231e-3)
    implied = row["implied_flops_ratio"]
    assert len(latency) == 1 and latency.iloc[0]["value"] == "backward/forward time 0.03"
    assert latency.iloc[0]["expected"] == (f"[{implied / 2:.2g}, {implied * 2:.2g}] (implied FLOP ratio "
                                          f"{implied:.2g} ÷/× 2)") and f"{implied * 2:.2f}" == "0.00"


def test_two_layers_that_read_the_input_each_skip_its_gradient():
    """Two stems on the same image: neither computes an input gradient, where the rule 2 − the first layer's
    share gave the second one two: its 17% share made the estimate's right ratio (1.66) an error against 1.83
    ('backward counted short of the layers'). Both now take one, and the words name them."""
    import torch
    from torch import nn

    class TwoStems(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Conv2d(3, 64, 7, 2, 3), nn.Conv2d(3, 64, 7, 2, 3)
            self.c, self.head = nn.Conv2d(64, 64, 3, 1, 1), nn.Linear(64, 10)

        def forward(self, x):
            return self.head(self.c(self.a(x) + self.b(x)).mean((2, 3)))

    x = torch.empty(8, 3, 64, 64, device="meta")
    row, flagged = _flop_check(TwoStems(), x, "two_stems")
    assert row["layers_one_gradient"] == "a, b" and flagged.empty
    assert row["implied_flops_ratio"] == pytest.approx(row["estimated_matmul_flops_ratio"], rel=0.01)
    share = row["first_layer_share"]
    assert row["implied_flops_ratio"] == pytest.approx(2 - 2 * share, rel=0.01)  # the two stems' equal shares
    assert (2 - share) / row["implied_flops_ratio"] - 1 > 3 * FB_FLOPS_TOLERANCE  # the old rule's ratio
    _, flagged = _flop_check(TwoStems(), x, "two_stems", 1.2)
    assert len(flagged) == 1 and "two, but one in a, b" in flagged.iloc[0]["expected"]


def test_products_whose_gradients_are_not_products_and_bias_sums_are_no_flop_error():
    """Two nets whose right counts the rule of two gradients per product called errors. Spectral norm: its power
    iteration's mv and vdot run under no_grad but its sigma's do not, and their gradients are outer products and
    scalings (elementwise), not products: 0.731 against 1.627. A linear layer on 9 features (after an FFT): its
    bias add is 5% of its forward, its gradient a sum outside the matmul class: 0.947 against 1.000. The registry
    now says which operands' gradients are products (mv: the vector's; dot: neither) and whose bias gradient an
    op's own backward computes (a convolution's)."""
    import torch
    from torch import nn

    class Spectral(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.utils.parametrizations.spectral_norm(nn.Linear(16, 32)), nn.Linear(32, 4)

        def forward(self, x):
            return self.b(self.a(x).relu())

    class Spectrum(nn.Module):
        def __init__(self):
            super().__init__()
            self.head = nn.Linear(9, 4)

        def forward(self, x):
            return self.head(torch.fft.rfft(x).abs())

    for model, x, flops in ((Spectral(), torch.empty(4, 16, device="meta"), (0.731, 1.627)),
                            (Spectrum(), torch.empty(2, 16, device="meta"), (0.947, 1.0))):
        row, flagged = _flop_check(model, x, type(model).__name__)
        assert row["estimated_matmul_flops_ratio"] == pytest.approx(flops[0], abs=0.001)
        assert row["implied_flops_ratio"] == pytest.approx(row["estimated_matmul_flops_ratio"], rel=1e-9)
        assert flagged.empty, flagged["expected"].tolist()
        # the old rule's ratio, two gradients per product bias adds and all: off by more than the tolerance
        assert 2 - row["first_layer_share"] == pytest.approx(flops[1], abs=0.001)


def training_estimate(ratio: float, model: str = "resnet18") -> tuple[dict, dict]:
    key = (model, 8, "fp32", "training")
    total = {"model": model, "batch": 8, "precision": "fp32", "mode": "training", "forward_matmul_flops": 100.0,
             "backward_matmul_flops": 100.0 * ratio, "matmul_backward_forward_ratio": ratio,
             "forward_flops": 110.0, "backward_flops": 100.0 * ratio + 12, "unsupported_ops": {}}
    return {key: total}, {key: layers(10.0, [40.0, 50.0])}


def test_forward_backward_flops_matching_the_layers_pass():
    totals, layer_tables = training_estimate(1.9)
    run = run_row(mode="training", forward_seconds=0.05, backward_seconds=0.1)
    checks, table = build_checks(summary(run), totals, layer_tables)
    assert checks.empty
    row = table.iloc[0]
    assert row["implied_flops_ratio"] == pytest.approx(1.9)
    assert row["latency_ratio"] == pytest.approx(2.0)
    assert row["latency_ratio_low"] == pytest.approx(1.9 / FB_LATENCY_FACTOR)
    assert row["latency_ratio_high"] == pytest.approx(1.9 * FB_LATENCY_FACTOR)


def test_forward_backward_flops_of_the_grouped_conv_bug_are_an_error_once_per_run():
    # FlopCounterMode's depthwise weight-gradient bug: mobilenet_v2's ratio came out 19 (DESIGN.md)
    totals, layer_tables = training_estimate(19.0, "mobilenet_v2")
    runs = [run_row(device=d, model="mobilenet_v2", mode="training", forward_seconds=0.05, backward_seconds=0.1)
            for d in ("cpu", "a100")]
    checks, _ = build_checks(summary(*runs), totals, layer_tables)
    flops = checks[checks["check"] == "forward:backward FLOPs"]
    assert len(flops) == 1 and flops.iloc[0]["severity"] == "error"
    assert flops.iloc[0]["device"] == "" and flops.iloc[0]["run"] == "mobilenet_v2 b8 fp32 training"
    assert "groups" in flops.iloc[0]["likely_cause"] and "1.900" in flops.iloc[0]["expected"]
    # an estimate-level flag rings the run on every device
    flags = flagged_runs(checks)
    assert severity_of(flags, "a100", "mobilenet_v2", 8, "fp32", "training") == "error"
    assert severity_of(flags, "cpu", "mobilenet_v2", 8, "fp32", "inference") is None


@pytest.mark.parametrize("ratio, cause", [(0.4, "over twice"), (1.9 * 2.5, "under half")])
def test_forward_backward_latency_outside_its_band_is_a_warning(ratio, cause):
    # band: implied 1.9 ÷/× 2 = [0.95, 3.8]
    totals, layer_tables = training_estimate(1.9)
    run = run_row(mode="training", forward_seconds=0.1, backward_seconds=0.1 * ratio)
    checks, _ = build_checks(summary(run), totals, layer_tables)
    assert list(checks["check"]) == ["forward:backward latency"]
    assert checks.iloc[0]["severity"] == "warning" and cause in checks.iloc[0]["likely_cause"]


def test_a_fast_backward_the_time_model_predicts_names_the_parts_it_is_short_in():
    """A backward under half the forward's FLOP/s names its excess parts; one over twice it (ratio 0.4 against
    [0.95, 3.8]) names where the predicted backward falls short of implied × forward, and a prediction inside the
    band, or on the other side, or beyond 1.5x of the measurement, accounts for nothing."""
    import json

    totals, layer_tables = training_estimate(1.9)
    parts = json.dumps({"forward": {"matmul": 0.08, "host": 0.02}, "backward": {"matmul": 0.03, "host": 0.01}})

    def cause(predicted_backward):
        run = run_row(mode="training", forward_seconds=0.1, backward_seconds=0.04, predicted_forward_seconds=0.1,
                      predicted_backward_seconds=predicted_backward, predicted_seconds_by_phase_part=parts)
        checks, _ = build_checks(summary(run), totals, layer_tables)
        return checks.iloc[0]["likely_cause"]

    said = cause(0.05)  # predicted 0.50: measured 0.40 is 0.80x of it
    assert said.startswith("the time model predicts it: backward/forward 0.50 (forward 100 ms, backward 50 ms; "
                           "measured 0.40, 0.80x of it), its backward's shortfall under 1.90 × forward in matmul "
                           "-122 ms (81% of it); per op: the backward ran at over twice")
    for predicted_backward in (0.1, 0.5, 0.07):  # inside the band; above it; 0.40 is 0.57x of 0.70
        assert cause(predicted_backward).startswith("unexplained: the backward ran at over twice")


def test_a_part_carrying_more_than_the_net_excess_is_not_called_all_of_it():
    """The named parts are a share of the NET excess of backward over implied × forward: where another part goes
    the other way, they carry more than all of it, and the cause says so (it printed "(100% of it)" beside +79 ms
    of a 78 ms excess: the share of the parts that went the same way)."""
    import json

    totals, layer_tables = training_estimate(1.9)
    # backward excess over 1.90 x forward: matmul 0.39 - 0.152 = +238 ms, host 0.01 - 0.038 = -28 ms; net 210 ms
    parts = json.dumps({"forward": {"matmul": 0.08, "host": 0.02}, "backward": {"matmul": 0.39, "host": 0.01}})
    run = run_row(mode="training", forward_seconds=0.1, backward_seconds=0.45, predicted_forward_seconds=0.1,
                  predicted_backward_seconds=0.4, predicted_seconds_by_phase_part=parts)
    checks, _ = build_checks(summary(run), totals, layer_tables)
    assert "its backward's excess over 1.90 × forward in matmul +238 ms (more than all of it: the other parts " \
           "offset 13% of it)" in checks.iloc[0]["likely_cause"]


def test_uncounted_ops_are_listed():
    totals, layer_tables = training_estimate(1.9)
    next(iter(totals.values()))["unsupported_ops"] = {"aten._fft_r2c": 2}
    checks, _ = build_checks(summary(run_row(mode="training")), totals, layer_tables)
    assert list(checks["check"]) == ["uncounted ops"] and "aten._fft_r2c" in checks.iloc[0]["likely_cause"]


def test_inference_runs_have_no_forward_backward_row():
    assert forward_backward_table(summary(run_row()), {}, {}).empty


def test_check_files_reads_a_workflows_outputs(tmp_path):
    totals, layer_tables = training_estimate(3.7, "resnext50_32x4d")
    (key, total), = totals.items()
    run_dir = tmp_path / "estimate" / "resnext50_32x4d" / "b8-fp32-training"
    write_json(run_dir / "totals.json", total)
    write_csv(run_dir / "layers.csv", layer_tables[key])
    write_csv(tmp_path / "summary.csv", summary(run_row(model="resnext50_32x4d", mode="training")))
    checks, _ = check_files(tmp_path / "summary.csv", [run_dir / "totals.json"], [run_dir / "layers.csv"])
    assert list(checks["check"]) == ["forward:backward FLOPs"]
    overview = checks_overview(checks)
    assert "1 flagged" in overview and "resnext50_32x4d b8 fp32 training" in overview


def test_an_fp32_run_whose_estimate_sits_above_the_fp32_roof_is_flagged():
    # A100 VGG11 training, b16, as recorded (tests/data/real/anoushka21-cloudml): ncu saw 11.8 GFLOP (no
    # tensor metrics), the estimate counts 734 GFLOP; 20.95 ms of kernels. FP32 roof 19.5 TFLOP/s at
    # 1,555 GB/s; estimated bytes 10 GB → AI 73.4, attainable 19.5 TFLOP/s; 734e9 / 0.02095 = 35 TFLOP/s: 180%.
    run = run_row(device="a100-sxm4-40gb", model="vgg11", batch=16, mode="training", roof_source="datasheet",
                  flops_source="ncu", bytes_source="ncu-dram", percent_of_roofline=30.0, flops_ratio=0.016,
                  reconciliation="no tensor-core metric was collected", estimated_flops=734e9,
                  estimated_fused_bytes=10e9, measured_seconds=0.02095, peak_flops_per_second=19.5e12,
                  bandwidth_bytes_per_second=1555e9)
    checks, _ = build_checks(summary(run))
    row = checks[checks["check"] == "estimate above the roof"].iloc[0]
    assert row["severity"] == "warning" and row["value"].endswith("= 180% of the attainable FLOP/s")
    assert row["likely_cause"] == ("the counters saw 0.02× the estimated FLOPs, and the FLOP reconciliation says "
                                   "why: no tensor-core metric was collected")
    # without a reconciliation the cause can only list what may be behind it
    bare = build_checks(summary({**run, "reconciliation": None}))[0]
    assert "TF32" in bare.loc[bare["check"] == "estimate above the roof", "likely_cause"].iloc[0]
    # the same run placed by the estimate itself: the plain above-the-roof check covers it, not this one
    plain = run_row(estimated_flops=734e9, estimated_fused_bytes=10e9, measured_seconds=0.02095,
                    peak_flops_per_second=19.5e12, bandwidth_bytes_per_second=1555e9,
                    flops_source="estimate", bytes_source="estimate-fused")
    assert build_checks(summary(plain))[0].empty


def test_a_prediction_under_its_roofline_is_flagged_with_the_models_cause():
    """The summary's below_roofline (rooflow.estimate.predict.below_roofline_flag): a warning where every row under
    its roof has a known cause, an error where one is unexplained; nothing where the column is empty."""
    from rooflow.estimate.predict import BELOW_ROOF_CAUSES

    explained = run_row(device="a100", model="vgg16", predicted_seconds=0.0268, roofline_seconds=0.0533,
                        below_roofline="predicted 26.8 ms, under its per-op roofline time of 53.3 ms: 12 convolution "
                                       "row(s) at 22.1 ms against 50.1 ms at their roof, "
                                       + BELOW_ROOF_CAUSES["fast convolutions"])
    unexplained = run_row(device="a100", model="resnet18", predicted_seconds=0.005, roofline_seconds=0.0068,
                          below_roofline="predicted 5 ms, under its per-op roofline time of 6.8 ms: 3 convolution "
                                         "row(s) at 0.01 ms against 0.06 ms at their roof, "
                                         + BELOW_ROOF_CAUSES["unexplained"])
    checks, _ = build_checks(summary(explained, unexplained, run_row(model="alexnet", below_roofline=None)))
    by_model = {r["model"]: r for _, r in checks.iterrows()}
    assert set(by_model) == {"vgg16", "resnet18"}
    assert by_model["vgg16"]["severity"] == "warning" and by_model["vgg16"]["check"] == "prediction under its roofline"
    assert by_model["vgg16"]["value"] == "predicted 26.8 ms, roofline 53.3 ms"
    assert "Winograd/FFT" in by_model["vgg16"]["likely_cause"]
    assert by_model["resnet18"]["severity"] == "error"
