"""Profiler output -> FLOPs, bytes and time: Nsight Compute (``ncu``) and Nsight Systems (``nsys``).

- :mod:`rooflow.profilers.ncu` parses ncu's text output and its CSV pages and aggregates one run
  (:func:`~rooflow.profilers.ncu.aggregate_ncu`).
- :mod:`rooflow.profilers.nsys` parses ``nsys stats`` CSV reports and sums kernel time
  (:func:`~rooflow.profilers.nsys.aggregate_nsys`).
- :mod:`rooflow.profilers.metrics` says which metrics to collect per GPU architecture and how they become
  FLOPs and bytes; :mod:`rooflow.profilers.kernels` classifies kernels by layer type;
  :mod:`rooflow.profilers.reconcile` compares measured with estimated FLOPs and bytes and explains a gap from
  the kernels (per class, per layer, the algorithm the names show) or says it is unexplained;
  :mod:`rooflow.profilers.layers` attributes kernels to layers (NVTX ranges, launch order) and builds the
  per-layer measured vs estimated table; :mod:`rooflow.profilers.commands` builds the ncu/nsys command lines and checks their logs;
  :mod:`rooflow.cli.profilers` adds the ``rooflow ncu`` and ``rooflow nsys`` sub-commands.

Every parser raises :class:`rooflow.errors.ParseError` (one sentence: file, line, cause, fix) for input it
does not accept; nothing is silently dropped or guessed.
"""

# What the package offers, by the module that holds it: imported on first use, so that reading a file's first
# bytes (rooflow.profilers._text, at every workflow parse's config validation) costs no pandas and numpy
_EXPORTS = {"KERNEL_CLASSES": "kernels", "classify_kernel": "kernels", "metrics_for_architecture": "metrics",
            "NcuResult": "ncu", "aggregate_ncu": "ncu", "NsysResult": "nsys", "aggregate_nsys": "nsys"}
# (reconcile, the function, from its module: once imported, the module is the package's attribute of that name)
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
