"""The one definition of a step that rooflow estimates, times and profiles: the loss, the optimizer, the
autocast precision and the loss scaling. The estimator (rooflow.estimate.counter), the timing job
(rooflow.measure.timing) and the profiling driver (rooflow.measure.driver) all take them from here, so what is
estimated is what is measured.

- **Inference**: ``model.eval()``, ``torch.no_grad()``, one forward pass.
- **Training**: ``model.train()``, forward and loss under autocast (fp16/bf16), backward, then one
  ``torch.optim.SGD(lr=0.1, momentum=0.9, weight_decay=1e-4)`` step — PyTorch's ImageNet example
  (https://github.com/pytorch/examples/blob/main/imagenet/main.py); fp16 scales the loss with a GradScaler
  (bf16 has fp32's exponent range and needs none).
- **The loss** (:class:`StepLoss`):

  - a torchvision *classification* model: cross-entropy of its logits against the batch's labels. GoogLeNet
    and Inception-v3 return auxiliary logits in training mode, and their forward pass computes them
    whatever the loss; a step that computed them and dropped them would be no one's training step, so
    their auxiliary classifiers are trained as the papers and PyTorch's fine-tuning tutorial do:
    ``loss = CE(logits) + w · Σ CE(aux)``, w = 0.3 for GoogLeNet (two auxiliary heads, Szegedy et al. 2015),
    0.4 for Inception-v3 (https://pytorch.org/tutorials/beginner/finetuning_torchvision_models_tutorial.html);
  - a user's loss (``package.module:callable``, or ``loss_fn`` in the Python API): ``loss(output)``, the
    model's output as it returned it, to a scalar tensor;
  - anything else (a custom model without a loss, segmentation models): the **sum of every floating-point
    tensor in the output** (a tensor, or tensors nested in tuples, lists and dicts), so that backward reaches
    every output head.
"""

from __future__ import annotations

from typing import Any

# PyTorch's ImageNet example: SGD(lr=0.1, momentum=0.9, weight_decay=1e-4)
SGD_LR, SGD_MOMENTUM, SGD_WEIGHT_DECAY = 0.1, 0.9, 1e-4
# Weight of each auxiliary classifier's loss (see the module docstring).
AUX_LOSS_WEIGHT = {"googlenet": 0.3, "inception_v3": 0.4}
# GradScaler's initial scale (torch.amp.GradScaler(init_scale=2.**16)): the estimator multiplies the loss by it.
GRAD_SCALE = 2.0**16


# What BatchNorm says when a training step gives it one value per channel (a batch of 1 reaching a 1×1 map, as
# Inception-v3's auxiliary head does at 299 px): torch.nn.functional._verify_batch_size
ONE_VALUE_PER_CHANNEL = "Expected more than 1 value per channel when training"


def rejected_run_message(model: str, mode: str, batch: int, size: Any, error: BaseException) -> str:
    """One sentence for a step the model itself rejects (a ValueError its forward raised): the run, the model's
    words, and what to change."""
    fix = ("its BatchNorm normalizes over the batch in training: give a batch of 2 or more, or run it in mode "
           "inference" if ONE_VALUE_PER_CHANNEL in str(error) else "give a batch, input or mode it takes")
    return f"{model} cannot run {mode} at batch {batch} (input {size}): {error}: {fix}"


# What autograd says when an in-place op changed a tensor it saved for the backward pass (y.relu_() after a
# layer whose backward needs y): torch/csrc/autograd/saved_variable.cpp
INPLACE_ON_SAVED = "modified by an inplace operation"


def backward_failure(error: BaseException, name: str = ""):
    """One sentence for a backward pass PyTorch itself refuses (an in-place op on a tensor autograd saved, an
    op without a derivative): the model's training step cannot run as written, whatever its inputs — the
    sentence had named the input shapes as the fix (`rooflow estimate`) or was a traceback (`rooflow time`)."""
    from rooflow.errors import RooflowError

    said = (str(error).strip().splitlines() or [type(error).__name__])[0].split(" Hint:")[0][:300].rstrip(". ")
    fix = ("an in-place op changed a tensor autograd saved for the backward pass: use its out-of-place form "
           "(y = y.relu() for y.relu_(), y = y + 1 for y += 1)" if INPLACE_ON_SAVED in said else "fix the model")
    return RooflowError(f"{f'model {name!r}: ' if name else ''}its training step's backward pass fails in PyTorch "
                        f"({type(error).__name__}: {said}): {fix}, or run it in mode inference")


def autocast_dtype(precision: str):
    """The dtype autocast runs matmul-class ops in (fp16, bf16), or None (fp32, tf32: no autocast)."""
    import torch

    return {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)


def uses_grad_scaler(precision: str, mode: str) -> bool:
    """fp16 training scales the loss (its 5-bit exponent underflows small gradients); nothing else does."""
    return precision == "fp16" and mode == "training"


def floating_tensors(output) -> list:
    """Every floating-point tensor in a model's output (a tensor, or tensors nested in tuples/lists/dicts,
    detection outputs and torchvision's named tuples included), in order."""
    import torch
    from torch.utils._pytree import tree_flatten

    return [t for t in tree_flatten(output)[0] if isinstance(t, torch.Tensor) and t.is_floating_point()]


def default_loss(output):
    """The sum of every floating-point output tensor: the loss of a model without one of its own."""
    tensors = floating_tensors(output)
    if not tensors:
        from rooflow.errors import RooflowError

        raise RooflowError("the model's output holds no floating-point tensor to train on: give the run a loss "
                           "(package.module:callable taking the output) or use mode inference")
    loss = tensors[0].sum()
    for tensor in tensors[1:]:
        loss = loss + tensor.sum()
    return loss


def classification_loss(name: str, output, target):
    """Cross-entropy of the logits, plus the weighted auxiliary losses of GoogLeNet/Inception-v3."""
    import torch

    if isinstance(output, torch.Tensor):
        return torch.nn.functional.cross_entropy(output, target)
    logits, *aux = [o for o in output if isinstance(o, torch.Tensor)]
    loss = torch.nn.functional.cross_entropy(logits, target)
    for extra in aux:
        loss = loss + AUX_LOSS_WEIGHT.get(name, 0.3) * torch.nn.functional.cross_entropy(extra, target)
    return loss


def main_output(output):
    """The tensor a step hands on (its bytes are the step's output): the output itself, or its first
    floating-point tensor."""
    import torch

    if isinstance(output, torch.Tensor):
        return output
    tensors = floating_tensors(output)
    return tensors[0] if tensors else None


def scalar_loss(loss: Any, loss_fn: Any, name: str = "") -> Any:
    """``loss``, what the user's ``loss_fn`` returned, if backward() can start from it (a tensor of one number);
    anything else is one sentence naming the loss (autograd's "grad can be implicitly created only for scalar
    outputs" was read as a wrong input shape)."""
    import torch

    from rooflow.errors import RooflowError

    if isinstance(loss, torch.Tensor) and loss.numel() == 1:
        return loss
    shape = (f"a tensor of shape {'x'.join(map(str, loss.shape))}" if isinstance(loss, torch.Tensor)
             else f"a {type(loss).__name__}")
    where = f"{getattr(loss_fn, '__module__', '?')}:{getattr(loss_fn, '__qualname__', loss_fn)}"
    raise RooflowError(f"{f'model {name!r}: ' if name else ''}the loss {where} returned {shape}, not a scalar "
                       f"tensor: reduce it to one number (e.g. .mean() or .sum())")


def call_loss(loss_fn: Any, output: Any, name: str = "") -> Any:
    """``loss_fn(output)``; what the user's loss raises is one sentence naming the loss (a TypeError in it was
    read as the model rejecting its input shapes). Out of memory passes: a result, not the loss's fault."""
    from rooflow.errors import RooflowError, first_line, is_out_of_memory

    try:
        return loss_fn(output)
    except RooflowError:
        raise
    except Exception as error:  # noqa: BLE001 - the user's loss: any failure in it is theirs to fix
        if is_out_of_memory(error):
            raise
        where = f"{getattr(loss_fn, '__module__', '?')}:{getattr(loss_fn, '__qualname__', loss_fn)}"
        raise RooflowError(f"{f'model {name!r}: ' if name else ''}the loss {where} raised {type(error).__name__}: "
                           f"{first_line(error)}: fix the loss (rooflow calls it as loss(output), on the model's "
                           f"output alone)") from error


def make_loss(name: str = "", target=None, user_loss=None, classification: bool = False):
    """The step's loss as a module (the profiling driver marks its phase with forward hooks on it)."""
    import torch

    class StepLoss(torch.nn.Module):
        """The loss of one step: ``loss(output)`` (see rooflow.workload.step)."""

        def forward(self, output):
            if user_loss is not None:
                return scalar_loss(call_loss(user_loss, output, name), user_loss, name)
            if classification and target is not None:
                return classification_loss(name, output, target)
            return default_loss(output)

    return StepLoss()


def make_optimizer(parameters: Any):
    """The step's optimizer: SGD with momentum and weight decay, as PyTorch's ImageNet example."""
    import torch

    return torch.optim.SGD(parameters, lr=SGD_LR, momentum=SGD_MOMENTUM, weight_decay=SGD_WEIGHT_DECAY)


def make_scaler(device_type: str, precision: str, mode: str):
    """A GradScaler, enabled for fp16 training only (disabled it passes the loss and the step through)."""
    import torch

    return torch.amp.GradScaler(device_type, init_scale=GRAD_SCALE, enabled=uses_grad_scaler(precision, mode))
