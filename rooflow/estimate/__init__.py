"""Analytic estimate of a model's step: FLOPs, bytes, peak memory, per layer and per op.

Counted on the meta device (no memory, no arithmetic: any batch size in a fraction of a second) by a
``TorchDispatchMode`` that sees every aten op of the forward pass, the loss, autograd's backward and the
optimizer step. Conventions: rooflow.estimate.formulas (one FMA = 2 FLOPs; attention at the math path).
"""

from rooflow.estimate.api import estimate_module, estimate_run
from rooflow.estimate.core import Estimate, estimate
from rooflow.estimate.formulas import COUNTING_CONVENTION
from rooflow.estimate.predict import predict_seconds

__all__ = ["COUNTING_CONVENTION", "Estimate", "estimate", "estimate_module", "estimate_run", "predict_seconds"]
