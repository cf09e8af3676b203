"""Out of memory as a result: recognising an allocator's failure (CUDA caching allocator, glibc, the
address-space cap rooflow sets for a CPU run) and reading what it says it needed and had, in bytes."""

from __future__ import annotations

import contextlib
import re
import resource
from typing import Any

from rooflow.errors import first_line, is_out_of_memory  # noqa: F401 - measure.oom is where the timing job reads is_out_of_memory
from rooflow.units import format_bytes

_UNITS = {"": 1, "b": 1, "bytes": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
          "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12}


def _bytes_in(text: str, pattern: str) -> int | None:
    """The size `pattern` (one group: '<number> <unit>') captures in an allocator's message, in bytes."""
    match = re.search(pattern + r"\s*([0-9][0-9.,]*)\s*(bytes|[KMGT]i?B|B)?", text, re.IGNORECASE)
    if not match:
        return None
    return int(float(match.group(1).replace(",", "")) * _UNITS[(match.group(2) or "").lower()])



def _proc_status_bytes(field: str) -> int | None:
    """A kB field of /proc/self/status (VmSize: address space, VmRSS: resident memory), in bytes."""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _mem_available_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def oom_details(error: BaseException, cuda: bool, address_space_cap: int | None = None,
                cpu_limit: int | None = None) -> dict[str, Any]:
    """The memory an out-of-memory run asked for and the memory it had: `memory_requested_bytes` (the
    allocation that failed, from the allocator's message), `memory_available_bytes` (CUDA: free device
    memory then; CPU under a limit: address space left under it at the process's peak, i.e. when the
    allocation failed; CPU without: MemAvailable),
    `memory_limit_bytes` (device capacity, or the configured CPU limit), `memory_in_use_bytes`, and a
    `message` that says all of it in one line."""
    text = str(error)
    first = first_line(error, 300) or type(error).__name__
    requested = _bytes_in(text, r"(?:you tried to allocate|tried to allocate)")
    details: dict[str, Any] = {"memory_requested_bytes": requested}
    if cuda:
        import torch

        try:
            free, total = torch.cuda.mem_get_info()
            in_use = torch.cuda.memory_reserved()
        except RuntimeError:  # the message still says it
            free = _bytes_in(text, r"of which")
            total = _bytes_in(text, r"total capacity of")
            in_use = _bytes_in(text, r"this process has")
        details.update(memory_available_bytes=free, memory_limit_bytes=total, memory_in_use_bytes=in_use)
        where = f"free on the GPU of {format_bytes(total)}"
    elif address_space_cap:
        # By now the failed step's tensors are freed; the high-water mark of the address space (VmPeak)
        # is where the run stood when the allocation failed (a job's process peaks there, not before).
        peak = _proc_status_bytes("VmPeak")
        available = max(address_space_cap - peak, 0) if peak is not None else None
        details.update(memory_available_bytes=available, memory_limit_bytes=cpu_limit,
                       memory_in_use_bytes=_proc_status_bytes("VmRSS"))
        # the workflow's key or `rooflow time`'s option: it said the config key to a command-line user too
        where = (f"left under the memory limit of {format_bytes(cpu_limit)} (profiling.cpu_memory_limit_bytes, "
                 f"--cpu-memory-limit)")
    else:
        details.update(memory_available_bytes=_mem_available_bytes(), memory_limit_bytes=None,
                       memory_in_use_bytes=_proc_status_bytes("VmRSS"))
        where = "available on this machine"
    details["message"] = (f"out of memory: asked for {format_bytes(requested)} with "
                          f"{format_bytes(details['memory_available_bytes'])} {where} ({first})")
    return details


def _address_space_bytes() -> int:
    import os

    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


@contextlib.contextmanager
def cpu_memory_limit(limit_bytes: int | None):
    """Within the block, the process may map at most `limit_bytes` more address space than it has now
    (RLIMIT_AS, soft limit only, restored on exit), so an allocation beyond it fails as out-of-memory
    instead of swapping or drawing the kernel's OOM killer. Yields the cap, or None without a limit.

    Address space counts what is mapped, a little more than what is touched; torch, torchvision and the
    intra-op thread pool (stacks, malloc arenas) are mapped before the baseline is taken."""
    if not limit_bytes:
        yield None
        return
    import torch
    import torchvision  # noqa: F401 - mapped now, not counted against the run

    torch.ones(64, 64) @ torch.ones(64, 64)  # starts the intra-op threads
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _address_space_bytes() + int(limit_bytes)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield cap
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
