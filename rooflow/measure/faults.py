"""Minor page faults: pages a process maps afresh, which the kernel zeroes on their first touch.

On a CPU, glibc's malloc serves a tensor over its mmap threshold (128 KiB, rising to at most 32 MiB as such blocks
are freed) from pages mapped for it, and gives them back to the OS when it is freed (munmap, or trimming the top of
its heap), so the next step's tensor of that size faults them in again. Whether a network's sizes defeat the
threshold's adaptation is the allocator's affair, not its ops': on the project's 2-core VM a MobileNetV2 batch-1
forward took 2,000-3,500 faults in every step (8-14 MB), ResNet-18's none, and VGG11's batch-1 forward none in one
process and 6,240 in a make run's timing job (the process's allocation history). The time model prices ops,
not that (but for tensors of 32 MiB or more, which glibc maps afresh whatever its state: rooflow.estimate.core's
LARGE_ALLOCATION_BYTES), so the timing job counts the faults of each timed iteration; priced at the cost per byte the
device's calibration measured (rooflow.ceilings.calibrate.measure_page_fault_seconds_per_byte), a check says how much
of a miss they carry (rooflow.report.findings).
"""

from __future__ import annotations

import resource


def minor_faults() -> int:
    """Minor page faults of this process so far, all its threads (getrusage)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def page_bytes() -> int:
    return resource.getpagesize()
