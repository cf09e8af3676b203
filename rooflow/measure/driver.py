"""The one-iteration driver that Nsight Compute and Nsight Systems wrap: warm up, then run ONE annotated step.

Annotations (NVTX push/pop ranges, in the format of the real H100 recording
``tests/data/real/h100-rooflow/resnet18-b16-fp32-training-ncu-nvtx.csv.gz``, where ``ncu --nvtx`` writes them
into each kernel's row of the details page):

- ``phase:forward``, ``phase:loss``, ``phase:backward``, ``phase:optimizer`` around each phase, on the main
  thread (forward and loss by forward hooks on the model and the loss module, backward and optimizer at the
  phase boundaries :meth:`rooflow.measure.timing.Runner.step` marks);
- ``layer:<qualified module name>`` around every call of every module but the root, containers included,
  by forward pre-/post-hooks: a ResNet block's residual add lands inside ``layer:layer1.0``;
- ``torch.autograd.profiler.emit_nvtx()`` around the step: op ranges such as
  ``aten::conv2d, seq = 360, op_id = 1``; backward ops run on autograd's own thread, outside the main
  thread's ranges, as ``ConvolutionBackward0, seq = 360`` (the ``seq`` of the forward op that recorded them).

A **compiled step** (``--variant compile``: torch.compile, inductor) is profiled whole, in exhaustive mode,
with the phase ranges alone (:class:`PhaseRanges`, pushed at the phase boundaries ``Runner.step`` marks):
inductor's Triton kernels fuse ops across layers, so a layer range could name no kernel's layer — and the layer
hooks never run anyway: dynamo ignores module hooks added after compilation
(``torch._dynamo.config.skip_nnmodule_hook_guards``, on by default: no guard, no call; tests/measure/
test_driver.py shows it). Its FLOPs and DRAM bytes are the step's, not split by layer. A ``channels_last``
step runs eager modules and is annotated and profiled like an eager one.

Two ways to profile (``profiling.ncu.mode``):

- ``exhaustive``: ``cudaProfilerStart``/``Stop`` around the whole step: ncu replays every kernel.
- ``distinct`` (the default): a ``TorchDispatchMode`` (below autograd, so backward and optimizer ops are
  seen too; modes propagate to autograd's worker threads with the rest of the thread-local state) keys every
  aten op call by its signature — the op and every argument: each tensor's shape, dtype, stride, storage
  offset and device, and the non-tensor arguments. The FIRST call of each signature runs between
  ``cudaProfilerStart``/``Stop`` (``ncu --profile-from-start off`` then profiles only the kernels it launches)
  inside an NVTX range ``rooflow:sig:<k>``; later calls run unprofiled. The plan written beside ncu's CSV
  lists, per signature, every call with its phase and layer, and :func:`rooflow.profilers.distinct.expand`
  weights each profiled kernel by its signature's calls. Keying by ncu's launch configuration (name, grid,
  block) instead is wrong: the same kernel with the same grid does different work when a GEMM's K differs
  (tests/profilers/test_distinct.py shows −35% to +33% FLOPs on the H100 recordings).

Backward calls are attributed to the layer whose forward op created their autograd node (a node-creation
hook records the layer stack when each node is created; ``torch._C._current_autograd_node()`` names the node
a backward op runs for) — the ``seq = N`` tie of ``emit_nvtx``, resolved in-process.

    python -m rooflow.measure.driver --model resnet18 --batch 16 --mode training --subset subset.pt \\
        --ncu-mode distinct --plan ncu_plan.json
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import threading
from typing import Any

from rooflow.errors import RooflowError
from rooflow.profilers.nvtx import LAYER_RANGE, PHASE_RANGE, PLAN_FORMAT, SIGNATURE_RANGE

log = logging.getLogger(__name__)

NCU_MODES = ("distinct", "exhaustive")


def ncu_mode_for(variant: str, requested: str) -> str:
    """The ncu mode a step of ``variant`` is profiled in: as ``requested`` (profiling.ncu.mode), except a compiled
    step, which runs no aten op per kernel for distinct mode's signatures to key: exhaustive."""
    return "exhaustive" if variant == "compile" else requested


def _push(message: str) -> None:
    import torch

    torch.cuda.nvtx.range_push(message)


def _pop() -> None:
    import torch

    torch.cuda.nvtx.range_pop()


def _profiler_start() -> None:
    import torch

    torch.cuda.profiler.start()


def _profiler_stop() -> None:
    import torch

    torch.cuda.profiler.stop()


def node_creation_recorder(callback):
    """A context manager calling ``callback(node)`` once for each autograd node created inside it:
    torch.autograd.graph.node_creation_hook where torch has it (2.14 here); torch 2.11, which rooflow met on
    the lent H100/H200 image, has none, and there a TorchFunctionMode records, after each torch call, its
    outputs' grad_fn and the new nodes behind it (a composite op's inner nodes too) — the same nodes,
    found when the call returns, which is still inside the layer that made them."""
    import torch

    hook = getattr(torch.autograd.graph, "node_creation_hook", None)
    if hook is not None:
        return hook(callback)
    from torch.overrides import TorchFunctionMode

    class NodeRecorder(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.seen: set = set()

        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for value in out if isinstance(out, (tuple, list)) else (out,):
                node = getattr(value, "grad_fn", None)
                if node is not None and node not in self.seen:
                    for new in reversed(_new_nodes(node, self.seen)):
                        callback(new)
            return out

        def __exit__(self, *exc):
            self.seen.clear()
            return super().__exit__(*exc)

    return NodeRecorder()


def _new_nodes(node, seen: set) -> list:
    """``node`` and the nodes behind it not in ``seen``, stopping at known ones (they were recorded before)."""
    found, stack = [], [node]
    while stack:
        current = stack.pop()
        if current is None or current in seen or hasattr(current, "variable"):  # AccumulateGrad: a parameter
            continue
        seen.add(current)
        found.append(current)
        stack.extend(next_node for next_node, _ in current.next_functions)
    return found


class StepAnnotations:
    """Phase and layer NVTX ranges of one step, and where each op of it runs (phase, layer stack).

    Use as a context manager around the step, and pass it to ``Runner.step`` as its clock: ``mark()`` is
    called at the phase boundaries (training: start, after the loss, after backward, after the optimizer).
    """

    def __init__(self, model, loss_fn=None, training: bool = False):
        self.model, self.loss_fn, self.training = model, loss_fn, training
        self.phase: str | None = None
        self.layers: list[str] = []  # the main thread's open layer ranges, outermost first
        self.node_layers: dict[Any, tuple[str, ...]] = {}  # autograd node -> layer stack at its creation
        self.param_layers: dict[int, tuple[str, ...]] = {}  # id(parameter) -> its module's layer stack
        self._marks = 0
        self._handles: list[Any] = []
        self._node_hook: Any = None

    # -- installation ---------------------------------------------------------------------------------

    def __enter__(self) -> StepAnnotations:
        import torch

        root = self.model
        self._handles += [root.register_forward_pre_hook(lambda *_: self._enter_phase("forward")),
                          root.register_forward_hook(lambda *_: self._exit_phase())]
        if self.loss_fn is not None and isinstance(self.loss_fn, torch.nn.Module):
            self._handles += [self.loss_fn.register_forward_pre_hook(lambda *_: self._enter_phase("loss")),
                              self.loss_fn.register_forward_hook(lambda *_: self._exit_phase())]
        for name, module in root.named_modules():
            if module is root:
                continue
            self._handles += [module.register_forward_pre_hook(self._layer_enter(name)),
                              module.register_forward_hook(self._layer_exit(name))]
            prefix = tuple(name.split("."))
            stack = tuple(".".join(prefix[: i + 1]) for i in range(len(prefix)))
            for parameter in module.parameters(recurse=False):
                self.param_layers[id(parameter)] = stack
        if self.training:
            self._node_hook = node_creation_recorder(self._node_created)
            self._node_hook.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._node_hook is not None:
            self._node_hook.__exit__(*exc)
            self._node_hook = None
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self.node_layers.clear()  # the step's autograd nodes: nothing needs them once it is done

    def _layer_enter(self, name: str):
        def hook(*_):
            self.layers.append(name)
            _push(f"{LAYER_RANGE}{name}")

        return hook

    def _layer_exit(self, name: str):
        def hook(*_):
            _pop()
            if self.layers and self.layers[-1] == name:
                self.layers.pop()

        return hook

    def _node_created(self, node) -> None:
        self.node_layers[node] = tuple(self.layers)

    def _enter_phase(self, phase: str) -> None:
        self.phase = phase
        _push(f"{PHASE_RANGE}{phase}")

    def _exit_phase(self) -> None:
        _pop()
        self.phase = None

    # -- Runner.step's clock --------------------------------------------------------------------------

    def mark(self) -> None:
        """Runner.step marks training phase boundaries: 0 start, 1 after the loss, 2 after backward,
        3 after the optimizer step (inference: 0 and 1 around the forward, which the model's hooks mark)."""
        if self.training:
            if self._marks == 1:
                self._enter_phase("backward")
            elif self._marks == 2:
                self._exit_phase()
                self._enter_phase("optimizer")
            elif self._marks == 3:
                self._exit_phase()
        self._marks += 1

    # -- where an op runs -----------------------------------------------------------------------------

    def where(self) -> dict[str, Any]:
        """Phase, layer stack and (in backward) the autograd node of the op being dispatched now, on
        whichever thread it runs."""
        import torch

        node = torch._C._current_autograd_node()
        if node is None:
            return {"phase": self.phase, "layers": list(self.layers)}
        layers = self.node_layers.get(node)
        if layers is None and hasattr(node, "variable"):  # AccumulateGrad kept alive from an earlier step
            layers = self.param_layers.get(id(node.variable))
        sequence = node._sequence_nr()
        entry = {"phase": "backward", "layers": list(layers or ()), "node": node.name()}
        if sequence < 2**63:  # AccumulateGrad nodes have no sequence number (UINT64_MAX)
            entry["seq"] = sequence
        return entry


class PhaseRanges:
    """The phase NVTX ranges of one step, pushed and popped at the boundaries ``Runner.step`` marks (its clock):
    ``phase:forward`` (with the loss, in training), ``phase:backward``, ``phase:optimizer``. Nothing is installed
    on the model: what a compiled step is annotated with (module docstring)."""

    def __init__(self, training: bool):
        self.phases = ("forward", "backward", "optimizer") if training else ("forward",)
        self._marks = 0

    def mark(self) -> None:
        if 0 < self._marks <= len(self.phases):
            _pop()
        if self._marks < len(self.phases):
            _push(f"{PHASE_RANGE}{self.phases[self._marks]}")
        self._marks += 1


def _describe(value: Any) -> str:
    """One argument of an op call, as the signature sees it: what decides the kernels it launches."""
    import torch

    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        if value.layout != torch.strided:
            return f"{dtype}{list(value.shape)}:{value.layout}@{value.device.type}"
        return (f"{dtype}{list(value.shape)}/{list(value.stride())}+{value.storage_offset()}"
                f"@{value.device.type}")
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_describe(item) for item in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}={_describe(item)}" for key, item in value.items()) + "}"
    return repr(value)  # numbers, dtypes, devices, memory formats, None


def op_signature(func, args: tuple, kwargs: dict) -> str:
    """``aten.convolution.default(float32[16, 3, 224, 224]/[...]+0@cuda, ..., stride=...)``: the op and
    every argument (tensors: dtype, shape, stride, storage offset, device; the rest: their value)."""
    parts = [_describe(arg) for arg in args] + [f"{key}={_describe(value)}" for key, value in kwargs.items()]
    return f"{func}({', '.join(parts)})"


def _dispatch_mode_class():
    from torch.utils._python_dispatch import TorchDispatchMode

    class DistinctOps(TorchDispatchMode):
        """Records every aten op call of the step by signature; the first call of each signature runs between
        cudaProfilerStart/Stop inside an NVTX range ``rooflow:sig:<k>``."""

        def __init__(self, annotations: StepAnnotations):
            super().__init__()
            self.annotations = annotations
            self.index: dict[str, int] = {}
            self.signatures: list[dict[str, Any]] = []
            self.calls = 0
            self._lock = threading.Lock()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            key = op_signature(func, args, kwargs)
            occurrence = self.annotations.where()
            with self._lock:
                occurrence = {"index": self.calls, **occurrence}
                self.calls += 1
                number = self.index.get(key)
                first = number is None
                if first:
                    number = self.index[key] = len(self.signatures)
                    self.signatures.append({"id": number, "op": str(func), "signature": key, "occurrences": []})
                self.signatures[number]["occurrences"].append(occurrence)
            if not first:
                return func(*args, **kwargs)
            _push(f"{SIGNATURE_RANGE}{number}")
            _profiler_start()
            try:
                return func(*args, **kwargs)
            finally:
                _profiler_stop()
                _pop()

        def plan(self) -> dict[str, Any]:
            for entry in self.signatures:
                entry["count"] = len(entry["occurrences"])
            return {"format": PLAN_FORMAT, "mode": "distinct", "calls": self.calls,
                    "distinct": len(self.signatures), "signatures": self.signatures}

    return DistinctOps


def annotated_step(runner, ncu_mode: str = "exhaustive") -> dict[str, Any]:
    """Run ONE step of ``runner`` (a :class:`rooflow.measure.timing.Runner`) with the phase/layer/op NVTX ranges and
    the profiler ranges of ``ncu_mode``; return the plan (``distinct``: every op call by signature)."""
    import torch

    if ncu_mode not in NCU_MODES:
        raise RooflowError(f"ncu mode '{ncu_mode}' is unknown: use one of {', '.join(NCU_MODES)} "
                           f"(profiling.ncu.mode in the config)")
    training = runner.spec.mode == "training"
    if getattr(runner.spec, "variant", "eager") == "compile":
        if ncu_mode != "exhaustive":
            raise RooflowError(f"a compiled step is profiled whole (exhaustive), not in {ncu_mode} mode: inductor's "
                               f"kernels run no aten op each for the signatures to key")
        _profiler_start()
        runner.step(PhaseRanges(training))
        runner.synchronize()
        _profiler_stop()
        return {"format": PLAN_FORMAT, "mode": "exhaustive", "variant": "compile", "attribution": "whole step"}
    annotations = StepAnnotations(runner.model, getattr(runner, "loss_fn", None), training)
    # emit_nvtx needs CUDA (it synchronizes on entry); on a CPU runner (tests) the op ranges are left out.
    op_ranges = torch.autograd.profiler.emit_nvtx() if runner.cuda else contextlib.nullcontext()
    distinct = _dispatch_mode_class()(annotations) if ncu_mode == "distinct" else None
    with annotations, op_ranges:
        if distinct is None:
            _profiler_start()
            runner.step(annotations)
            runner.synchronize()
            _profiler_stop()
            return {"format": PLAN_FORMAT, "mode": "exhaustive"}
        with distinct:
            runner.step(annotations)
        runner.synchronize()
    return distinct.plan()


def profile_one_iteration(spec, subset: dict, ncu_mode: str = "exhaustive",
                          plan_path: str | None = None) -> dict[str, Any]:
    """Warm up, then run exactly ONE annotated iteration for ``ncu --profile-from-start off`` (``ncu_mode``)
    or ``nsys --capture-range=cudaProfilerApi`` (exhaustive: one start/stop pair around the step); write
    the plan to ``plan_path`` when given."""
    import torch

    from rooflow.hardware.environment import describe
    from rooflow.io import write_json
    from rooflow.measure.timing import Runner, _set_threads

    _set_threads(spec.threads)
    runner = Runner(spec, subset)
    if not runner.cuda:
        raise RooflowError("the one-iteration profiling driver needs a CUDA device: ncu/nsys profile GPUs only")
    # a compiled model compiles in its first step, as in the timing job: warm up after it, never profile it
    for _ in range(max(spec.warmup_iterations, 1) + (spec.variant == "compile")):
        runner.step()
    torch.cuda.synchronize()
    plan = annotated_step(runner, ncu_mode)
    plan.update(model=spec.model, batch=spec.batch, precision=spec.precision, run_mode=spec.mode,
                variant=spec.variant)
    if plan_path:
        write_json(plan_path, plan)
    record = {"profiled_iterations": 1, "ncu_mode": ncu_mode, "variant": spec.variant,
              "environment": describe(spec.threads)}
    if ncu_mode == "distinct":
        record.update(op_calls=plan["calls"], distinct_signatures=plan["distinct"])
    return record


def main(argv: list[str] | None = None) -> int:
    from rooflow.measure.timing import RunSpec, add_run_arguments, model_fields
    from rooflow.workload.dataset import load_subset

    parser = argparse.ArgumentParser(prog="python -m rooflow.measure.driver", description=__doc__.splitlines()[0])
    add_run_arguments(parser, "cuda", "a cuda device (default: %(default)s)")
    parser.add_argument("--subset", required=True, help="subset .pt written by `rooflow subset`")
    parser.add_argument("--ncu-mode", choices=NCU_MODES, default="exhaustive",
                        help="distinct: profile the first call of each op signature; exhaustive: the whole step")
    parser.add_argument("--plan", help="plan JSON to write (the op calls by signature, for the aggregation)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        spec = RunSpec(batch=args.batch, precision=args.precision, mode=args.mode, device=args.device,
                       warmup_iterations=args.warmup, timed_iterations=1, threads=args.threads, variant=args.variant,
                       **model_fields(args))
        record = profile_one_iteration(spec, load_subset(args.subset), args.ncu_mode, args.plan)
    except RooflowError as error:
        print(f"rooflow driver: error: {error}", file=sys.stderr)
        return 2
    log.info("profiled one iteration: %s", {k: v for k, v in record.items() if k != "environment"})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
