"""The profiling driver's annotations and its distinct-op bookkeeping, on the CPU with a tiny model.

No GPU here: NVTX push/pop and cudaProfilerStart/Stop are replaced by recorders, and a spy
TorchDispatchMode outside the driver's own sees every aten op with the NVTX stack open at that moment and
whether profiling was on. What is tested is what ncu would see: the stack of each op, which op calls are
profiled, and the plan that weights them. (On a GPU, backward ops run on autograd's own thread, whose NVTX
stack holds none of the main thread's ranges; on the CPU autograd runs them on the calling thread.)"""

from __future__ import annotations

import pytest
import torch
from support import run_step, tiny_runner

from rooflow.measure import driver


def stacks_of(calls, op):
    return [stack for name, stack, _ in calls if name == op]


FWD = "phase:forward"
BLOCK0 = ["layer:layer", "layer:layer.0"]


def test_every_module_gets_a_layer_range_and_each_phase_its_range(recorder):
    plan, calls = run_step(tiny_runner("training"), recorder, "exhaustive")
    assert plan == {"format": driver.PLAN_FORMAT, "mode": "exhaustive"}
    assert recorder.starts == 1 and all(profiling for _, _, profiling in calls)  # one range around the step
    convolutions = stacks_of(calls, "aten.convolution.default")
    assert convolutions == [
        [FWD, "layer:stem"],
        [FWD, *BLOCK0, "layer:layer.0.conv1"], [FWD, *BLOCK0, "layer:layer.0.conv2"],
        [FWD, "layer:layer", "layer:layer.1", "layer:layer.1.conv1"],
        [FWD, "layer:layer", "layer:layer.1", "layer:layer.1.conv2"],
    ]
    # the residual add is in no leaf module, but inside its block's range (containers get ranges too)
    assert stacks_of(calls, "aten.add.Tensor")[:2] == [[FWD, *BLOCK0], [FWD, "layer:layer", "layer:layer.1"]]
    # the block calls its one ReLU twice: two ranges of the same name
    assert stacks_of(calls, "aten.relu.default")[:2] == [[FWD, *BLOCK0, "layer:layer.0.relu"]] * 2
    assert stacks_of(calls, "aten.addmm.default") == [[FWD, "layer:fc"]]
    assert stacks_of(calls, "aten._log_softmax.default") == [["phase:loss"]]
    assert stacks_of(calls, "aten.nll_loss_forward.default") == [["phase:loss"]]
    assert {tuple(s) for s in stacks_of(calls, "aten.convolution_backward.default")} == {("phase:backward",)}
    assert {tuple(s) for s in stacks_of(calls, "aten._foreach_add_.List")} == {("phase:optimizer",)}
    assert not any(name.startswith("aten.") and not stack for name, stack, _ in calls)  # every op in a phase


def test_inference_has_only_the_forward_phase(recorder):
    _, calls = run_step(tiny_runner("inference"), recorder, "exhaustive")
    assert {stack[0] for _, stack, _ in calls} == {FWD}
    assert stacks_of(calls, "aten.convolution.default")[1] == [FWD, *BLOCK0, "layer:layer.0.conv1"]


def signature_of(plan, op, layers):
    found = [entry for entry in plan["signatures"] if entry["op"] == op
             and any(o["layers"] == layers for o in entry["occurrences"])]
    assert len(found) == 1, (op, layers, found)
    return found[0]


def test_distinct_mode_profiles_the_first_call_of_each_signature_once(recorder):
    plan, calls = run_step(tiny_runner("training"), recorder, "distinct")
    assert plan["calls"] == len(calls)  # the driver's mode saw every op the spy saw
    assert plan["distinct"] == len(plan["signatures"]) == recorder.starts
    assert sum(entry["count"] for entry in plan["signatures"]) == plan["calls"]
    profiled = [(name, stack) for name, stack, profiling in calls if profiling]
    # each profiled call runs inside its own rooflow:sig:<k>, k = 0, 1, 2, ... in order of first calls
    assert [stack[-1] for _, stack in profiled] == [f"rooflow:sig:{k}" for k in range(plan["distinct"])]
    assert [name for name, _ in profiled] == [entry["op"] for entry in plan["signatures"]]
    # occurrences are numbered in call order, each call exactly once
    indices = sorted(o["index"] for entry in plan["signatures"] for o in entry["occurrences"])
    assert indices == list(range(plan["calls"]))

    # the four block convolutions (4 -> 4 channels, same shapes) share one signature; the stem's is its own
    block = signature_of(plan, "aten.convolution.default", ["layer", "layer.0", "layer.0.conv1"])
    assert block["count"] == 4
    assert [o["layers"][-1] for o in block["occurrences"]] == ["layer.0.conv1", "layer.0.conv2", "layer.1.conv1",
                                                               "layer.1.conv2"]
    assert {o["phase"] for o in block["occurrences"]} == {"forward"}
    assert signature_of(plan, "aten.convolution.default", ["stem"])["count"] == 1

    # backward: attributed to the layer whose forward op created the autograd node
    backward = signature_of(plan, "aten.convolution_backward.default", ["layer", "layer.1", "layer.1.conv2"])
    assert backward["count"] == 4
    assert [o["layers"][-1] for o in backward["occurrences"]] == ["layer.1.conv2", "layer.1.conv1",
                                                                  "layer.0.conv2", "layer.0.conv1"]
    assert {(o["phase"], o["node"]) for o in backward["occurrences"]} == {("backward", "ConvolutionBackward0")}
    assert all(isinstance(o["seq"], int) for o in backward["occurrences"])
    # the stem computes no input gradient (output_mask differs): its own signature
    stem = signature_of(plan, "aten.convolution_backward.default", ["stem"])
    assert stem["count"] == 1 and stem["signature"] != backward["signature"]
    # the multi-tensor optimizer ops run once per step, in the optimizer phase
    foreach = [entry for entry in plan["signatures"] if entry["op"].startswith("aten._foreach_")]
    assert foreach and {o["phase"] for entry in foreach for o in entry["occurrences"]} == {"optimizer"}


def test_backward_layers_without_node_creation_hook(recorder, monkeypatch):
    """torch 2.11 (the lent H100/H200 image) has no torch.autograd.graph.node_creation_hook: the recorder that
    stands in for it gives every backward call the same layer and node as the hook does."""
    def backward_occurrences():
        plan, _ = run_step(tiny_runner("training"), recorder, "distinct")
        return sorted((o["index"], o.get("node"), tuple(o["layers"])) for entry in plan["signatures"]
                      for o in entry["occurrences"] if o["phase"] == "backward")

    with_hook = backward_occurrences()
    monkeypatch.delattr(torch.autograd.graph, "node_creation_hook")
    without_hook = backward_occurrences()
    assert without_hook == with_hook
    assert ("ConvolutionBackward0", ("layer", "layer.0", "layer.0.conv1")) in {o[1:] for o in without_hook}


def test_op_signature_tells_apart_what_changes_the_kernels():
    conv = torch.ops.aten.convolution.default
    x = torch.empty(2, 4, 8, 8)
    w = torch.empty(4, 4, 3, 3)
    base = driver.op_signature(conv, (x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1), {})
    assert base == driver.op_signature(conv, (torch.empty(2, 4, 8, 8), torch.empty(4, 4, 3, 3), None, [1, 1],
                                              [1, 1], [1, 1], False, [0, 0], 1), {})
    others = [
        (torch.empty(2, 8, 8, 8), torch.empty(4, 8, 3, 3)),             # K differs: other work, same grid
        (x.to(torch.float16), w.to(torch.float16)),                   # dtype
        (x.contiguous(memory_format=torch.channels_last), w),         # stride
        (torch.empty(3, 4, 8, 8)[1:], w),                             # storage offset
    ]
    for xi, wi in others:
        assert driver.op_signature(conv, (xi, wi, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1), {}) != base
    assert driver.op_signature(conv, (x, w, None, [2, 2], [1, 1], [1, 1], False, [0, 0], 1), {}) != base


def test_unknown_mode_is_one_clear_error():
    with pytest.raises(driver.RooflowError, match="profiling.ncu.mode"):
        driver.annotated_step(tiny_runner("inference"), "fast")



def compiled_runner(mode: str, compiles: list):
    """tiny_runner's step as torch.compile runs it (dynamo, with a backend that counts the graphs it is given
    and runs them as they are: no inductor, no C++ compiler), compiled by one step."""
    runner = tiny_runner(mode)
    runner.spec.variant = "compile"

    def backend(graph, example_inputs):
        compiles.append(graph)
        return graph.forward

    runner.model = torch.compile(runner.model, backend=backend)
    runner.step()
    return runner


@pytest.mark.parametrize("mode, phases", [("training", ["forward", "backward", "optimizer"]),
                                          ("inference", ["forward"])])
def test_a_compiled_step_is_profiled_whole_with_its_phase_ranges(recorder, monkeypatch, mode, phases):
    compiles, pushed = [], []
    runner = compiled_runner(mode, compiles)
    compiled = len(compiles)
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", lambda message: (pushed.append(message),
                                                                       recorder.push(message)))
    plan = driver.annotated_step(runner, "exhaustive")
    assert plan == {"format": driver.PLAN_FORMAT, "mode": "exhaustive", "variant": "compile",
                    "attribution": "whole step"}
    assert pushed == [f"phase:{phase}" for phase in phases] and recorder.stack == []
    assert recorder.starts == 1 and not recorder.profiling  # one profiler range around the whole step
    assert len(compiles) == compiled  # nothing compiled again inside the profiled step
    with pytest.raises(driver.RooflowError, match="profiled whole"):
        driver.annotated_step(runner, "distinct")
    assert driver.ncu_mode_for("compile", "distinct") == "exhaustive"
    assert driver.ncu_mode_for("channels_last", "distinct") == "distinct"


def test_layer_hooks_added_after_compilation_never_run(recorder, monkeypatch):
    """Why a compiled step gets no layer ranges: the eager annotations' module hooks, installed on a compiled
    model, are skipped by dynamo (no guard on hooks by default), so no kernel would be inside a layer range."""
    pushed = []
    runner = compiled_runner("inference", [])
    runner.spec.variant = "eager"  # annotate it as if it ran eager modules
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", lambda message: (pushed.append(message),
                                                                       recorder.push(message)))
    driver.annotated_step(runner, "exhaustive")
    # only the wrapper's range around the whole compiled module; none of its layers (stem, layer.0.conv1, ...)
    assert [message for message in pushed if message.startswith("layer:")] == ["layer:_orig_mod"]
