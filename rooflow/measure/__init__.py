"""Running a step for real: the timed job (CUDA events / monotonic clock, OOM as a result), the profiling
driver (NVTX ranges, one iteration between profiler start/stop), the torch.profiler timeline, and the
launching of ncu/nsys around it.

Imports profilers, workload, hardware and the base modules.
"""
