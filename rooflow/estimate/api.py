"""The estimate of any ``nn.Module`` from Python, and of any run the workflow or the command line names.

``estimate_module(module, example_inputs, device=None, ...)`` returns an :class:`~rooflow.estimate.core.Estimate`:
a read-only mapping whose keys are exactly those of one element of ``rooflow estimate --format json``
(``dict(result)`` is that object), with the per-layer and per-op tables as ``result.layers`` and ``result.ops``
(pandas DataFrames, the workflow's ``layers.csv`` and ``ops.csv``).
"""

from __future__ import annotations

import copy
import re
import time
import warnings
from typing import Any

from rooflow.errors import RooflowError, first_line
from rooflow.estimate.core import (
    VALUE_READING_OPS,
    Estimate,
    check_run,
    count_module,
    estimate,
    not_countable,
)


def _meta_inputs(example_inputs) -> tuple:
    """Meta tensors of the inputs' shapes, strides, dtypes and requires_grad (only those matter)."""
    import torch

    inputs = tuple(example_inputs) if isinstance(example_inputs, (list, tuple)) else (example_inputs,)
    meta = []
    for i, tensor in enumerate(inputs):
        if not isinstance(tensor, torch.Tensor):
            raise RooflowError(f"estimate_module: example input {i} is a {type(tensor).__name__}, not a tensor: "
                               f"pass a tuple of tensors (meta or real; only shapes and dtypes matter)")
        if tensor.device.type != "meta":
            tensor = torch.empty_strided(tuple(tensor.shape), tuple(tensor.stride()), dtype=tensor.dtype,
                                         device="meta").requires_grad_(tensor.requires_grad)
        meta.append(tensor)
    return tuple(meta)


def _meta_module(module, name: str):
    """The module itself when its parameters and buffers are all on meta; otherwise a copy of it on meta
    (its tensors' shapes and dtypes, no data: the module and its memory are left as they are), with a
    warning that says so."""
    import torch

    tensors = list(module.parameters()) + list(module.buffers())
    real = sorted({str(t.device) for t in tensors if t.device.type != "meta"})
    if not real:
        return module
    warnings.warn(f"estimate_module: {name}'s parameters are on {', '.join(real)}; counting a copy of it on "
                  f"the meta device (the module itself is not changed)", stacklevel=3)
    memo: dict[int, Any] = {}
    lazy = (torch.nn.parameter.UninitializedParameter, torch.nn.parameter.UninitializedBuffer)
    for p in module.parameters():
        # a lazy module's parameter has no shape yet: the copy's takes one on meta at its first forward
        memo[id(p)] = (torch.nn.parameter.UninitializedParameter(p.requires_grad, "meta", p.dtype)
                       if isinstance(p, lazy) else
                       torch.nn.Parameter(torch.empty_like(p, device="meta"), requires_grad=p.requires_grad))
    for b in module.buffers():
        memo[id(b)] = (torch.nn.parameter.UninitializedBuffer(b.requires_grad, "meta", b.dtype) if isinstance(b, lazy)
                       else torch.empty_like(b, device="meta"))
    return copy.deepcopy(module, memo)


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def estimate_module(module, example_inputs, device: str | None = None, precision: str = "fp32",
                    mode: str = "inference", loss_fn=None, name: str | None = None, *,
                    devices_file: str | None = None, ceilings: str | None = None,
                    measured: bool = False) -> Estimate:
    """Count one step of ``module`` on ``example_inputs`` (a tensor or a tuple of tensors, the batch first;
    meta or real: only shapes and dtypes matter) and, with ``device`` (a key of the device catalogue,
    `rooflow devices`), predict its step time, its steady-state memory and whether it fits.

    ``mode``: inference (eval, no_grad) or training (forward, loss, backward, SGD step: rooflow.workload.step);
    ``loss_fn(output) -> scalar tensor`` is the training loss (default: the sum of the floating outputs).
    A module whose parameters are not on the meta device is counted through a meta copy (a warning says
    so); the module is not changed. The result maps the keys of ``rooflow estimate --format json``;
    ``.layers`` and ``.ops`` are the per-layer and per-op tables. Attention counts as its math path.
    """
    import torch

    if not isinstance(module, torch.nn.Module):
        raise RooflowError(f"estimate_module: the module is a {type(module).__name__}, not a torch.nn.Module: pass the "
                           f"model itself (e.g. estimate_module(MyNet(), torch.randn(8, 3, 224, 224)))")
    from rooflow.workload.spec import scripted_module_problem

    if problem := scripted_module_problem(module):
        raise RooflowError(f"estimate_module: the module {problem}")
    name = name or _snake(type(module).__name__)
    inputs = _meta_inputs(example_inputs)
    batch = int(inputs[0].shape[0]) if inputs and inputs[0].dim() else 1
    check_run(precision, mode, batch, "estimate_module")
    _check_device_key(device, "estimate_module", optional=True)
    was_training = module.training
    counted = _meta_module(module, name)
    try:
        result = count_module(counted, inputs, precision, mode, loss_fn=loss_fn, name=name)
    except (NotImplementedError, RuntimeError, ValueError, TypeError, IndexError) as error:
        countable = not_countable(name, error, "check the example inputs' shapes and dtypes against what the module "
                                                "takes (the batch first)")
        if countable is not error:
            raise countable from error
        rejected = _rejected_inputs(counted, inputs, name)
        if rejected is None:  # the module runs them: the failure is the counter's, not the user's
            raise
        raise rejected from error
    finally:
        module.train(was_training)
    if device is not None:
        predict(result, device, devices_file, ceilings, measured)
    return result


def _check_device_key(device, where: str, optional: bool = False) -> None:
    """``device`` is a catalogue key (a non-empty string): 0 or "" skipped the prediction without a word, and
    None in what_if_module raised an AttributeError."""
    if optional and device is None:
        return
    if not isinstance(device, str) or not device.strip():
        raise RooflowError(f"{where}: device is {device!r}, not a key of the device catalogue: name one, e.g. "
                           f"device='a100-sxm4-40gb' (`rooflow devices` lists them; cuda:0 is not one)"
                           f"{'' if not optional else ', or leave device out to count without predicting'}")


def _rejected_inputs(module, inputs: tuple, name: str) -> RooflowError | None:
    """Where ``module`` itself refuses ``inputs`` (one plain forward on meta, outside the counter): one sentence
    naming their shapes and dtypes and what it said; None where it runs them."""
    import torch

    try:
        with torch.no_grad():
            module.eval()(*inputs)
    except Exception as error:  # noqa: BLE001 - the user's module: whatever it raises on these inputs
        given = ", ".join(f"{'x'.join(map(str, t.shape)) or 'a scalar'} {str(t.dtype).removeprefix('torch.')}"
                          for t in inputs) or "none"
        said = first_line(error)
        outside = _made_outside_meta(f"estimate_module: {name}", error)
        if outside:
            return outside
        return RooflowError(f"estimate_module: {name} rejects its example inputs ({given}) with {type(error).__name__}"
                            f"{f': {said}' if said else ''}: pass the inputs it takes, the batch first (float32 for a "
                            f"float32 module: precision='fp16' or 'bf16' runs it under autocast)")
    return None


def _made_outside_meta(who: str, error: BaseException) -> RooflowError | None:
    """One sentence for what a forward did that no example input could fix, read from its error; None for
    anything else: a tensor made on a CUDA device of its own (no driver here, or one beside the meta tensors), or
    one handed to NumPy. ``who``: the sentence's subject ("estimate_module: net", "model 'net'")."""
    said = first_line(error)
    if re.search(r"NVIDIA driver|compiled with CUDA|CUDA GPUs are available|cuda:\d+ and meta|meta and cuda", said):
        what, fix = ("makes a tensor on a CUDA device in its forward", "make it on its input's device "
                     "(device=x.device) or register it as a buffer, so it follows the model")
    elif "to numpy" in said:
        what, fix = "hands a tensor to NumPy in its forward", "keep the forward in torch ops"
    else:
        return None
    return RooflowError(f"{who} {what} ({type(error).__name__}: {said}); rooflow counts a step on the meta device "
                        f"(shapes, no values): {fix}")


def estimate_run(spec, batch: int, precision: str = "fp32", mode: str = "inference",
                 input_size: int | None = None) -> Estimate:
    """The estimate of one run of a model spec (rooflow.workload.spec): a torchvision model by name, or the
    user's factory on its inputs, with its loss."""
    from rooflow.workload.spec import build_custom, example_inputs, load_loss, shape_error

    if not spec.custom:
        return estimate(spec.name, batch, precision, mode, input_size)
    check_run(precision, mode, batch, "estimate")
    start = time.perf_counter()
    module = build_custom(spec, meta=True)
    loss = load_loss(spec)
    try:
        result = count_module(module, example_inputs(spec, batch, module=module), precision, mode, loss_fn=loss,
                              name=spec.name)
    except (NotImplementedError, RuntimeError, ValueError, TypeError) as error:
        # not the inputs' fault: name the op, or what the forward did
        if "data-dependent" in str(error) or getattr(error, "rooflow_op", None) in VALUE_READING_OPS:
            raise not_countable(spec.name, error) from error
        raise (_made_outside_meta(f"model '{spec.name}'", error) or shape_error(spec, batch, error)) from error
    result.totals["input_shapes"] = [[batch, *shape] for shape in spec.inputs]
    result.totals["input_dtypes"] = list(spec.dtypes)
    result.seconds = time.perf_counter() - start
    return result


TIME_MODEL_KINDS = ("cuda", "cpu")  # catalogue kinds whose step time rooflow predicts


def predict(result: Estimate, device_key: str, devices_file: str | None = None, ceilings: str | None = None,
            measured: bool = False) -> Estimate:
    """Add the prediction on a catalogue device to ``result``'s totals: the step's time (host and GPU work
    per op, from the device's calibration) with its range, the per-op roofline time, the steady-state memory
    and whether it fits. A second call, on another device, replaces the first's prediction."""
    from rooflow.estimate.calibration import for_device
    from rooflow.estimate.predict import below_roofline_flag, predict_memory, predict_seconds
    from rooflow.estimate.recurrent import substitute
    from rooflow.estimate.timemodel import predict_step, unpriced_precision
    from rooflow.hardware.devices import CEILINGS_FILE, default_catalogue_path, load_device
    from rooflow.io import read_json_object

    device = load_device(devices_file or default_catalogue_path(), device_key, ceilings)
    calibration = for_device(device, read_json_object(ceilings, CEILINGS_FILE) if ceilings else None)
    totals = result.totals
    for key in result.predicted_keys:
        del totals[key]
    estimated = set(totals)
    totals["device"] = device.key
    # a GPU runs nn.LSTM/GRU/RNN as cuDNN's kernels (rooflow.estimate.recurrent): their roofs, not the cells counted
    ops = (substitute(result.ops, totals["recurrent_calls"], totals["precision"])
           if device.is_cuda and totals.get("recurrent_calls") else result.ops)
    roofline = predict_seconds(ops, device, totals["precision"], measured=measured)
    totals["roofline_seconds"] = roofline.get("predicted_seconds")
    if device.kind not in TIME_MODEL_KINDS:  # a TPU: XLA compiles and fuses the whole step, no eager ops to price
        totals.update(predicted_seconds=None, calibration_source=f"none for {device.key}: rooflow's time model prices "
                      f"PyTorch's eager ops on a CUDA GPU or a CPU, and a {device.kind.upper()} runs an XLA-compiled "
                      f"step (only its roofline time: roofline_seconds in --format json)")
    elif unpriced := unpriced_precision(device, totals["precision"]):
        totals.update(predicted_seconds=None, calibration_source=unpriced)
    elif device.bandwidth(True) or device.bandwidth(False):
        step = predict_step(result.ops, totals, device, calibration)
        totals.update(step.as_dict())
        flag = below_roofline_flag(ops, step, device, totals["precision"], totals["roofline_seconds"], measured,
                                   calibration.cache_bytes)
        if flag:
            totals["below_roofline"] = flag
    else:  # the local machine's entry: its roofs are measured, not in a datasheet
        totals.update(calibration_source=(
            f"none for {device.key}: its catalogue entry has no roofs (they are measured on the machine): measure "
            f"them with `rooflow ceilings --device {device.key} --output ceilings.json` and pass --ceilings "
            f"ceilings.json (the workflow does this itself)"))
    totals.update(predict_memory(totals, device))
    result.predicted_keys = frozenset(set(totals) - estimated)
    return result



def _what_if(estimator, batch: int, precision: str, mode: str, device: str, devices_file: str | None,
             ceilings: str | None, measured) -> dict[str, Any]:
    from rooflow.estimate.whatif import what_if
    from rooflow.hardware.devices import CEILINGS_FILE, check_ceilings, default_catalogue_path, load_devices
    from rooflow.io import read_json_object

    record = measured
    if isinstance(measured, (str, bytes)) or hasattr(measured, "__fspath__"):
        record = {"source": str(measured), **read_json_object(measured, "a timing record (`rooflow time --output`)")}
    devices = load_devices(devices_file or default_catalogue_path())
    roofs = read_json_object(ceilings, CEILINGS_FILE) if ceilings else None
    if roofs is not None and device in devices:
        check_ceilings(roofs, devices[device], ceilings)
    return what_if(estimator, batch, precision, mode, device, devices, ceilings=roofs, measured=record)


def what_if_run(spec, batch: int, precision: str, mode: str, device: str, input_size: int | None = None, *,
                devices_file: str | None = None, ceilings: str | None = None, measured=None) -> dict[str, Any]:
    """What to change next for one run of a model spec on ``device`` (rooflow.estimate.whatif.what_if):
    ``measured`` is a timing record (a path or its dict) of the same run, to start from it."""
    return _what_if(lambda b, p: estimate_run(spec, b, p, mode, input_size), batch, precision, mode, device,
                    devices_file, ceilings, measured)


def what_if_module(module, example_inputs, device: str, precision: str = "fp32", mode: str = "inference",
                   loss_fn=None, name: str | None = None, *, devices_file: str | None = None,
                   ceilings: str | None = None, measured=None) -> dict[str, Any]:
    """What to change next for ``module`` on ``example_inputs`` (as :func:`estimate_module`): its other
    precisions, batches (the inputs' first dimension scaled), variants and every catalogue GPU, ranked by
    predicted throughput (rooflow.estimate.whatif.what_if)."""
    import torch

    _check_device_key(device, "what_if_module")
    name = name or _snake(type(module).__name__)
    inputs = _meta_inputs(example_inputs)
    batch = int(inputs[0].shape[0]) if inputs and inputs[0].dim() else 1
    counted = _meta_module(module, name)  # once, not per alternative

    def estimator(b: int, p: str) -> Estimate:
        resized = tuple(torch.empty((b, *t.shape[1:]), dtype=t.dtype, device="meta").requires_grad_(t.requires_grad)
                        if t.dim() and t.shape[0] == batch else t for t in inputs)
        return estimate_module(counted, resized, None, p, mode, loss_fn, name)

    return _what_if(estimator, batch, precision, mode, device, devices_file, ceilings, measured)
