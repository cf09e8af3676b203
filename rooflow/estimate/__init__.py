"""Analytic estimate of a model's step: FLOPs, bytes, peak memory, per layer and per op.

Counted on the meta device (no memory, no arithmetic: any batch size in a fraction of a second) by a
``TorchDispatchMode`` that sees every aten op of the forward pass, the loss, autograd's backward and the
optimizer step. Conventions: rooflow.estimate.formulas (one FMA = 2 FLOPs; attention at the math path).
"""

import importlib

# Imported on first use (PEP 562): the package's light modules (kernel_calibration, whose file check the
# workflow's config validation runs on every Snakefile parse) then load without torch.
_EXPORTS = {"COUNTING_CONVENTION": "formulas", "Estimate": "core", "estimate": "core", "estimate_module": "api",
            "estimate_run": "api", "predict_seconds": "predict"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"rooflow.estimate.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'rooflow.estimate' has no attribute {name!r}")
