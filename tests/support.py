"""Helpers several test modules share (not tests themselves)."""

from __future__ import annotations

import collections
import contextlib
import csv
import dataclasses
import functools
import gzip
import json
import os
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import torch
from conftest import ROOT, Recorder
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from rooflow.hardware.devices import Device
from rooflow.measure import driver
from rooflow.measure.timing import Runner
from rooflow.profilers.nvtx import format_nvtx_stack as format_stack
from rooflow.profilers.nvtx import parse_nvtx_stack as parse_stack
from rooflow.workload import step

DATA = Path(__file__).resolve().parent / "data"
REAL = DATA / "real"
ANOUSHKA = "anoushka21-cloudml/proj1"
DEEPCAM = "cyanguwa-DeepLearningProfiling/mlperf-deepcam"
OLD_RULES_HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Kernel Time","Context","Stream",'
                    '"Section Name","Metric Name","Metric Unit","Metric Value","Rule Name","Rule Type",'
                    '"Rule Description"')
RULE_ROW = ('"{id}","11","python","h","volta_sgemm_128x64_nt","2021-Mar-01 10:00:00","1","7","SpeedOfLight","",'
            '"","","SOLBottleneck","WRN","Compute is ""more"" heavily utilized than memory, see ""SOL"", below"')




H100 = ROOT / "tests" / "data" / "real" / "h100-rooflow"


class Block(nn.Module):
    """A ResNet basic block without BN: conv, shared ReLU, conv, residual add, the same ReLU again."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        out = self.conv2(self.relu(self.conv1(x)))
        return self.relu(out + x)


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.layer = nn.Sequential(Block(4), Block(4))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4, 5)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.layer(self.stem(x))), 1))


class Tiny3d(nn.Module):
    """A tiny video model: 3-D convolutions over (channels, frames, height, width)."""

    def __init__(self, with_2d: bool = False):
        super().__init__()
        self.stem = nn.Conv3d(3, 4, 3, padding=1)
        self.head = nn.Conv2d(4, 4, 1) if with_2d else None
        self.fc = nn.Linear(4, 5)

    def forward(self, x):
        x = self.stem(x).mean(dim=2)  # frames pooled: (N, 4, H, W)
        if self.head is not None:
            x = self.head(x)
        return self.fc(x.mean(dim=(2, 3)))


def tiny_3d_with_2d() -> nn.Module:
    return Tiny3d(with_2d=True)


def tiny_runner(mode: str) -> Runner:
    """A Runner (rooflow.measure.timing) around the tiny model: Runner.step is exactly what the driver runs."""
    torch.manual_seed(0)
    runner = Runner.__new__(Runner)
    runner.spec = SimpleNamespace(mode=mode, precision="fp32")
    runner.cuda = False
    runner.autocast = contextlib.nullcontext()
    runner.model = Tiny()
    runner.inputs = (torch.randn(2, 3, 8, 8),)
    if mode == "training":
        runner.model.train()
        runner.loss_fn = step.make_loss("tiny", torch.tensor([1, 3]), classification=True)  # the shared step's
        # foreach=True: the multi-tensor optimizer ops PyTorch uses on CUDA (on CPU it would loop per tensor)
        runner.optimizer = torch.optim.SGD(runner.model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4,
                                           foreach=True)
        runner.scaler = torch.amp.GradScaler("cpu", enabled=False)
    else:
        runner.model.eval()
    return runner


class Spy(TorchDispatchMode):
    """Sees every aten op after the driver's own mode: (op, NVTX stack, profiling on)."""

    def __init__(self, recorder: Recorder):
        super().__init__()
        self.recorder, self.calls, self.signatures = recorder, [], []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls.append((str(func), list(self.recorder.stack), self.recorder.profiling))
        self.signatures.append(driver.op_signature(func, args, kwargs or {}))
        return func(*args, **(kwargs or {}))


def run_step(runner: Runner, recorder: Recorder, ncu_mode: str, spy: Spy | None = None):
    runner.step()  # a warm-up step, as the driver does: optimizer state exists, AccumulateGrad nodes too
    spy = spy or Spy(recorder)
    with spy:
        plan = driver.annotated_step(runner, ncu_mode)
    assert recorder.stack == [] and not recorder.profiling
    return plan, spy.calls



NVTX_RECORDING = H100 / "resnet18-b16-fp32-training-ncu-nvtx.csv.gz"


OP_ITEM = re.compile(r"^(?P<name>[^,]+?)(?:, seq = (?P<seq>\d+))?, op_id = (?P<op_id>\d+)$")


EVALUATE = "autograd::engine::evaluate_function: "


def module_shapes(model_name: str, batch: int) -> dict[str, tuple]:
    """Per module (first call): type, configuration, input and output shape — on the meta device."""
    import torch

    from rooflow.workload.models import build_model, parameters_on_meta

    with parameters_on_meta():
        model = build_model(model_name)
    shapes: dict[str, tuple] = {}

    def hook(name):
        def record(module, inputs, output):
            shapes.setdefault(name, (type(module).__name__, module.extra_repr(), tuple(inputs[0].shape),
                                     tuple(output.shape)))
        return record

    for name, module in model.named_modules():
        if name:
            module.register_forward_hook(hook(name))
    model.train()(torch.empty(batch, 3, 224, 224, device="meta"))
    return shapes


@dataclasses.dataclass
class Call:
    """One recorded op call: its kernels (in launch order) and where it ran."""

    kernels: list[dict]
    phase: str | None
    layers: list[str]
    node: str | None = None
    seq: int | None = None


def signature_groups(kernels: pd.DataFrame, shapes: dict[str, tuple]) -> dict[tuple, list[Call]]:
    """The recorded op calls grouped by their aten signature, both in the step's order.

    A call is the outermost op range of a main-thread kernel, or one op of an autograd node's evaluation
    (the node's own work, or an op the engine ran for it: a gradient accumulation ``aten::add_``). Its
    signature is what decides its tensors' shapes: the op and its module's type, configuration and shapes;
    for backward, the node and the module of the forward op with the same ``seq``; a residual or gradient
    ``add_`` by the shape it adds. Calls nothing identifies (the loss, the optimizer's multi-tensor ops) are
    their own signature. Modules the recording left without a range (the residual add between a block's
    leaf layers) take the shape of the block.
    """
    seq_layer: dict[int, str | None] = {}
    evaluate_seq: dict[str, int] = {}
    parsed = []
    for kernel in kernels.to_dict("records"):
        _, messages = parse_stack(kernel["nvtx_stack"])
        ops = [match for match in map(OP_ITEM.match, messages) if match]
        layers = [m[len("layer:"):] for m in messages if m.startswith("layer:")]
        phase = next((m[len("phase:"):] for m in messages if m.startswith("phase:")), None)
        parsed.append((kernel, ops, layers, phase))
        for op in ops:
            if op["seq"] and phase == "forward":
                seq_layer.setdefault(int(op["seq"]), layers[-1] if layers else None)
            if op["seq"] and ops[0]["name"].startswith(EVALUATE):
                evaluate_seq[ops[0]["op_id"]] = int(op["seq"])

    def module(layer):
        return ("module", *shapes[layer])

    calls: dict[tuple, tuple[tuple, Call]] = collections.OrderedDict()
    previous_layer = None
    for kernel, ops, layers, phase in parsed:
        top, layer, node, seq = ops[0], (layers[-1] if layers else None), None, None
        if top["name"].startswith(EVALUATE):
            node, seq = top["name"][len(EVALUATE):], evaluate_seq[top["op_id"]]
            forward_layer = seq_layer.get(seq)
            forward = module(forward_layer) if forward_layer else ("seq", seq)
            phase, layers = "backward", [forward_layer] if forward_layer else []
            inner = ops[1]
            if inner["name"] == node:
                call, key = (top["op_id"], "node"), ("backward", node, forward)
            elif inner["name"] == "aten::add_":  # gradient accumulation into the layer's input gradient
                call, key = (top["op_id"], inner["op_id"]), ("add_", shapes[forward_layer][2])
            else:
                call, key = (top["op_id"], inner["op_id"]), ("backward", node, inner["name"], forward)
        elif phase == "forward" and layer:
            call, key = (top["op_id"],), ("forward", top["name"], module(layer))
            previous_layer = layer
        elif phase == "forward" and top["name"] == "aten::add_":  # a block's residual add
            block = ".".join(previous_layer.split(".")[:2])
            call, key = (top["op_id"],), ("add_", shapes[block][3])
        else:
            call, key = (top["op_id"],), ("call", top["op_id"])
        calls.setdefault(call, (key, Call([], phase, layers, node, seq)))[1].kernels.append(kernel)
    groups: dict[tuple, list[Call]] = collections.OrderedDict()
    for key, found in calls.values():
        groups.setdefault(key, []).append(found)
    return groups


def distinct_stand_in(kernels: pd.DataFrame, groups: dict[tuple, list[Call]], csv_path, plan_path) -> None:
    """A STAND-IN for a distinct-mode run, made from the real exhaustive recording: the CSV keeps only the
    kernels of each signature's first call, with ``rooflow:sig:<k>`` pushed inside its outermost op range
    (where the driver's dispatch mode pushes it), and the plan lists every call — what the driver and ncu
    would have written had they profiled this step in distinct mode."""
    first: dict[int, tuple[int, list[str]]] = {}
    signatures, order = [], {}
    for number, (key, members) in enumerate(groups.items()):
        for kernel in members[0].kernels:
            thread, messages = parse_stack(kernel["nvtx_stack"])
            top = next(i for i, m in enumerate(messages) if OP_ITEM.match(m))
            first[int(kernel["id"])] = (number, format_stack(thread, [*messages[:top + 1], f"rooflow:sig:{number}",
                                                                       *messages[top + 1:]]))
        signatures.append({"id": number, "op": str(key[:2]), "signature": repr(key), "count": len(members),
                           "occurrences": members})
    for call in sorted((c for members in groups.values() for c in members), key=lambda c: c.kernels[0]["id"]):
        order[id(call)] = len(order)
    for entry in signatures:
        entry["occurrences"] = [{"index": order[id(c)], "phase": c.phase, "layers": c.layers,
                                 **({"node": c.node, "seq": c.seq} if c.node else {})} for c in entry["occurrences"]]
    plan = {"format": "rooflow-ncu-plan/1", "mode": "distinct", "calls": len(order), "distinct": len(signatures),
            "signatures": signatures}
    plan_path.write_text(json.dumps(plan))
    with gzip.open(NVTX_RECORDING, "rt") as source, open(csv_path, "w", newline="") as target:
        writer = csv.writer(target, quoting=csv.QUOTE_ALL, lineterminator="\n")
        header = None
        for line in source:
            if not line.startswith('"'):
                target.write(line)
                continue
            fields = next(csv.reader([line]))
            if header is None:
                header = fields
                nvtx = next(i for i, name in enumerate(header) if name.startswith("thread Domain:Push/Pop_Range"))
                writer.writerow(fields)
            elif int(fields[0]) in first:
                fields[nvtx] = first[int(fields[0])][1] + " "
                writer.writerow(fields)

TARGET = "results/aggregate/a100-sxm4-40gb/resnet18/b64-fp32-training/ncu.json"


RECORDED = ROOT / "tests/data/real/cyanguwa-DeepLearningProfiling/mlperf-deepcam/PT-fp32-O1-AdamW-fw-733731"


REPLAY = """#!/usr/bin/env bash
# Stand-in for Nsight Compute: record argv, write a recorded ncu CSV to --log-file and, where the driver would
# have written one, the plan to --plan.
printf '%s\\n' "$@" > "{argv}"
while [ $# -gt 0 ]; do [ "$1" = --log-file ] && log="$2"; [ "$1" = --plan ] && plan="$2"; shift; done
{{ echo "==PROF== Connected to process 4242"; zcat -f "{recorded}"; }} > "$log"
[ -n "$plan" ] && cp "{plan}" "$plan"
exit 0
"""


def run_with_fake_ncu(workdir: Path, snakemake_exe: str, script: str, ncu_mode: str = "distinct",
                      targets: tuple[str, ...] = (TARGET,)):
    bin_dir = workdir / "fake-bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "ncu"
    fake.write_text(script)
    fake.chmod(0o755)
    config = workdir / "tests" / "configs" / "gpu-ncu.yaml"
    config.write_text((workdir / "tests" / "configs" / "gpu.yaml").read_text()
                      + f"profiling: {{ncu: {{mode: {ncu_mode}}}}}\n")
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run([snakemake_exe, *targets, "--cores", "2", "--configfile", str(config)],
                          cwd=workdir, env=env, capture_output=True, text=True, timeout=600)


PEAK_FP32, PEAK_TF32, PEAK_FP16 = 20e12, 150e12, 300e12
DRAM, L2 = 2e12, 6e12



def gpu() -> Device:
    """An A100-like GPU: FP32 20, TF32 150, FP16 = BF16 300 TFLOP/s, FP64 10; DRAM 2 TB/s, L2 6 TB/s; measured
    FP32 18 TFLOP/s (90%) and DRAM 1.8 TB/s (90%)."""
    return Device(key="gpu", kind="cuda", name="Test GPU", architecture="sm_80",
                  peak_flops_per_second={"fp64": 10e12, "fp32": PEAK_FP32, "tf32": PEAK_TF32, "fp16": PEAK_FP16,
                                         "bf16": PEAK_FP16},
                  dram_bytes_per_second=DRAM, l2_bytes_per_second=L2,
                  measured_peak_flops_per_second={"fp32": 0.9 * PEAK_FP32}, measured_dram_bytes_per_second=0.9 * DRAM)


def text_box(artist, renderer):
    """The text's own box (an Annotation's box would include its leader line)."""
    from matplotlib.text import Text

    return Text.get_window_extent(artist, renderer)


def overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def marker_boxes(ax):
    """Pixel boxes of every scatter marker on the axes, from the artists themselves."""
    from matplotlib.transforms import Bbox

    boxes = []
    for collection in ax.collections:
        sizes = collection.get_sizes()
        for i, (x, y) in enumerate(collection.get_offsets()):
            px, py = ax.transData.transform((x, y))
            half = np.sqrt(sizes[i % len(sizes)]) / 2 * ax.figure.dpi / 72
            boxes.append(Bbox.from_extents(px - half, py - half, px + half, py + half))
    return boxes








@functools.cache
def cached_estimate(model: str, batch: int, precision: str, mode: str, inputs: tuple[str, ...] = ()):
    """rooflow.estimate.estimate, once per run for the whole session: the H100 and H200 sweep checks
    (tests/estimate/test_sweep_7_models.py) and the step model's (test_step_model_gpus.py) ask for the same
    batch-256 estimates, each seconds on 2 cores. Callers must not change the result's tables. A
    package.module:factory ``model`` is estimated on ``inputs`` (per-sample shapes, as --input takes them)."""
    from rooflow.estimate.api import estimate_run
    from rooflow.workload.spec import spec_from_options

    return estimate_run(spec_from_options(model, list(inputs)), batch, precision, mode)


def real(relative: str) -> Path:
    """A fixture, plain or (as stored to keep the repository small) gzip-compressed."""
    path = REAL / relative
    return path if path.exists() else path.with_name(path.name + ".gz")


def assert_one_sentence(message: str, path: Path) -> None:
    assert str(path) in message
    assert "\n" not in message and message.endswith(".")
    assert not re.search(r"[.;:] [A-Z][a-z]+ [a-z]", message.removesuffix(".").split(": ", 1)[1]), message


def _old_row(kernel_id: int, metric: str, unit: str, value: str, name: str = "volta_sgemm_128x64_nt") -> str:
    """A metric row as ncu writes it under the rule columns: 13 fields under the header's 15."""
    return (f'"{kernel_id}","11","python","h","{name}","2021-Mar-01 10:00:00","1","7",'
            f'"Command line profiler metrics","{metric}","{unit}","{value}",""')


def _short_rows_file(tmp_path: Path, kernels: int = 3) -> tuple[Path, list[str]]:
    lines = ["==PROF== Connected to process 11 (/usr/bin/python3)", OLD_RULES_HEADER]
    for kernel_id in range(kernels):
        lines += [_old_row(kernel_id, "dram__bytes_read.sum", "Mbyte", f"{kernel_id + 1},000.5"),
                  _old_row(kernel_id, "dram__bytes_write.sum", "byte", "2,048"),
                  RULE_ROW.format(id=kernel_id),
                  _old_row(kernel_id, "gpu__time_duration.sum", "usecond", "12.25")]
    path = tmp_path / "rules.csv"
    path.write_text("\n".join(lines) + "\n")
    return path, lines


DETAILS_FILES = [relative for relative in (
    "h100-rooflow/resnet50-b64-tf32-training-ncu.csv", "h100-rooflow/mobilenet_v2-b64-fp32-training-ncu.csv",
    "h100-rooflow/resnet18-b16-fp32-training-ncu-nvtx.csv", "h100-rooflow/vgg16-b64-fp32-inference-ncu.csv",
    f"{DEEPCAM}/PT-fp32-O1-AdamW-fw-733731/out.sm__cycles_elapsed.avg.per_second")]


def _same_result(a, b) -> None:
    assert a.totals == b.totals
    pd.testing.assert_frame_equal(a.kernels, b.kernels)
    pd.testing.assert_frame_equal(a.metrics, b.metrics)
    assert a.notes == b.notes








class SquareProduct(nn.Module):
    """``x @ weight`` of n × n by n × n: the third-party torch.mm benchmarks' GEMM as a module."""

    def __init__(self, n: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n, n, device="meta"))

    def forward(self, x):
        return x @ self.weight


def product_matmul_seconds(n: int, precision: str, device: str) -> float:
    """The step model's matrix-product seconds (its matmul class: autocast's casts apart) of one n³ product."""
    from rooflow.estimate.api import estimate_module

    totals = estimate_module(SquareProduct(n), torch.empty(n, n, device="meta"), device=device, precision=precision).totals
    return totals["predicted_seconds_by_class"]["matmul"]


RECORDED_CPU = DATA / "recorded" / "cpu-rooflow"
RECORDED_CPU_RUN = RECORDED_CPU / "alexnet-b1-fp32-training-2026-12-02-timing.json"
RECORDED_CPU_CEILINGS = RECORDED_CPU / "ceilings-cpu-2026-12-02.json"
# a later make run's, whose timing records count their page faults (rooflow.measure.faults)
RECORDED_CPU_FAULTS_RUN = RECORDED_CPU / "mobilenet_v2-b4-fp32-inference-2026-12-02-faults-timing.json"
# a timing with the test suite running beside it: the machine's load beside each timed iteration
RECORDED_CPU_LOADED_RUN = RECORDED_CPU / "resnet18-b1-fp32-inference-2026-12-02-loaded-timing.json"
# a make run's timing, nothing else running, still noisy after its rounds
RECORDED_CPU_QUIET_NOISY_RUN = RECORDED_CPU / "vgg11-b4-fp32-training-2026-12-02-quiet-noisy-timing.json"
# timings run alone, nothing else running, whose records have their own CPU time (and its kernel part, and their
# page faults) beside each iteration: one whose slow iterations' extra kernel time is its page faults', the same
# step with a caching allocator's settings, and one whose slow iterations ran slower in user time
RECORDED_CPU_FAULTS_NOISY_RUN = RECORDED_CPU / "vgg11-b4-fp32-training-2026-12-03-faults-noisy-timing.json"
RECORDED_CPU_CACHING_RUN = RECORDED_CPU / "vgg11-b4-fp32-training-2026-12-03-caching-allocator-timing.json"
RECORDED_CPU_ON_CPU_RUN = RECORDED_CPU / "mobilenet_v2-b1-fp32-training-2026-12-03-on-cpu-timing.json"
RECORDED_CPU_FAULTS_CEILINGS = RECORDED_CPU / "ceilings-cpu-2026-12-02-faults.json"


def recorded_cpu_row(calibration=None, run=RECORDED_CPU_RUN, ceilings=RECORDED_CPU_CEILINGS):
    """A recorded CPU run from one `make run` (alexnet b1 fp32 training, or ``run``: tests/data/README.md) as the
    workflow summarises it: (its summary row, the estimate, the timing record, the calibration) — the time model on
    the calibration the same run measured (``ceilings``), or ``calibration``."""
    from rooflow.estimate import estimate
    from rooflow.estimate.calibration import for_device
    from rooflow.hardware.devices import load_device
    from rooflow.io import read_json
    from rooflow.report.summary import build_row

    device = load_device(ROOT / "config" / "devices.yaml", "cpu", ceilings)
    timing = read_json(run)
    result = estimate(timing["model"], timing["batch"], timing["precision"], timing["mode"])
    calibration = calibration or for_device(device, read_json(ceilings))
    return build_row(device, result.totals, timing, ops=result.ops, calibration=calibration), result, timing, calibration
