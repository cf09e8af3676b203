"""Measured roofs: ERT-style microbenchmarks (GEMM, copy/triad, L2 read, convolutions) on this machine,
and the time model's calibration measured beside them.

Imports hardware, workload, estimate and the base modules.
"""
