"""rooflow: where a network's time goes on a machine, and how far it is from the roofline.

The package holds all the logic and knows nothing of Snakemake; the workflow's rule scripts are thin
adapters over it, and ``python -m rooflow`` / ``rooflow`` gives the same steps on the command line.
From Python: ``rooflow.estimate_module(module, example_inputs, device=None, ...)`` (rooflow.estimate.api) and
``rooflow.what_if_module(module, example_inputs, device, ...)`` (what to change next, rooflow.estimate.whatif),
imported on first use so that ``import rooflow`` stays free of torch.
"""

__version__ = "0.1.0"

from rooflow.conventions import MODES, PRECISIONS

__all__ = ["MODES", "PRECISIONS", "__version__", "estimate_module", "what_if_module"]


def __getattr__(name: str):
    # the same first-use import as rooflow.estimate's own exports
    if name in ("estimate_module", "what_if_module"):
        import importlib

        return getattr(importlib.import_module("rooflow.estimate.api"), name)
    raise AttributeError(f"module 'rooflow' has no attribute {name!r}")
