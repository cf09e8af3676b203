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

from rooflow.profilers.kernels import KERNEL_CLASSES, classify_kernel
from rooflow.profilers.metrics import metrics_for_architecture
from rooflow.profilers.ncu import NcuResult, aggregate_ncu
from rooflow.profilers.nsys import NsysResult, aggregate_nsys
from rooflow.profilers.reconcile import reconcile

__all__ = ["KERNEL_CLASSES", "NcuResult", "NsysResult", "aggregate_ncu", "aggregate_nsys", "classify_kernel",
           "metrics_for_architecture", "reconcile"]
