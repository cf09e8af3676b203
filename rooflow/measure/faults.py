"""Minor page faults: pages a process maps afresh, which the kernel zeroes on their first touch.

On a CPU, glibc's malloc serves a tensor over its mmap threshold (128 KiB, rising to at most 32 MiB as such blocks
are freed) from pages mapped for it, and gives them back to the OS when it is freed (munmap, or trimming the top of
its heap), so the next step's tensor of that size faults them in again. Whether a network's sizes defeat the
threshold's adaptation is the allocator's affair, not its ops': on the project's 2-core VM a MobileNetV2 batch-1
forward took about 3,500 faults in every step (14 MB), ResNet-18, AlexNet and VGG11 none. The time model prices ops,
not that, so the timing job counts the faults of each timed iteration and measures what one costs in its own process
(:func:`seconds_per_fault`), and a check says how much of a miss they carry (rooflow.report.findings).
"""

from __future__ import annotations

import resource
import statistics
import time

# Over glibc's largest mmap threshold (32 MiB on 64-bit): a probe this size is mapped afresh at every allocation
PROBE_BYTES = 64 * 2**20


def minor_faults() -> int:
    """Minor page faults of this process so far, all its threads (getrusage)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def page_bytes() -> int:
    return resource.getpagesize()


def seconds_per_fault(repeats: int = 5, probe_bytes: int = PROBE_BYTES) -> float | None:
    """What one minor fault costs this process, as a step pays it: a fresh ``probe_bytes`` tensor allocated, written
    by torch's threads and freed, against the same write into a tensor kept, over the faults the fresh one took
    (medians of ``repeats``). The mapping, zeroing and unmapping are in it; on the project's VM, 1.2 µs. None
    where the allocator kept the pages (no faults to price: a caching allocator such as jemalloc or tcmalloc, or
    MALLOC_MMAP_THRESHOLD_ raised past the probe)."""
    import torch

    elements = probe_bytes // 4
    try:
        kept = torch.empty(elements)
    except RuntimeError:  # no room for the probe (a run at its memory limit): nothing measured
        return None
    kept.fill_(0.0)
    fresh_seconds, kept_seconds, faults = [], [], []
    for _ in range(repeats):
        before, start = minor_faults(), time.perf_counter()
        try:
            fresh = torch.empty(elements)
        except RuntimeError:
            return None
        fresh.fill_(1.0)
        del fresh
        fresh_seconds.append(time.perf_counter() - start)
        faults.append(minor_faults() - before)
        start = time.perf_counter()
        kept.fill_(1.0)
        kept_seconds.append(time.perf_counter() - start)
    taken = statistics.median(faults)
    if taken < probe_bytes / page_bytes() / 2:
        return None
    return max(statistics.median(fresh_seconds) - statistics.median(kept_seconds), 0.0) / taken
