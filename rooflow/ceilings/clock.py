"""The clock the CPU's cores sustain under load: a chain of dependent integer adds, timed against each thread's
CPU-time clock on every thread at once.

A CPU's theoretical peak is cores × clock × FLOP/cycle; /proc/cpuinfo gives only the nominal (base) clock,
and cores boost above it (a Zen 4 VM measured 129% of a theoretical peak computed at its 2.6 GHz nominal
clock). An ``add`` of two registers whose input is the previous ``add``'s output takes exactly one cycle on
every x86-64 core since the Pentium 4 (Agner Fog's instruction tables: ADD r,r latency 1), so a loop of N × 8
dependent adds runs N × 8 cycles: its time gives the clock. Not ``add rax, 1``: Intel's Golden Cove and later
cores fold chains of immediate adds in the renamer (a Xeon of this kind measured 19 GHz with them, 3.8 GHz
with register adds). The loop is eight bytes of machine code per add, placed in an
executable page and called through ctypes, which releases the GIL: one call per thread, in parallel, is the
all-core clock the FP32 GEMM ran at. Elsewhere (aarch64, a system that forbids executable memory) it returns
None and the theoretical peak keeps the nominal clock — then a measured peak above it is flagged instead
(rooflow.report.checks).
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import platform
import statistics
import threading
import time
from typing import Any

log = logging.getLogger(__name__)

ADDS_PER_ITERATION = 8
# mov rcx, rdi; xor eax, eax; mov edx, 1; loop: 8 × (add rax, rdx); dec rcx; jnz loop; ret — rax = 8 × rdi
_ADD = bytes([0x48, 0x01, 0xD0])
_BODY = _ADD * ADDS_PER_ITERATION + bytes([0x48, 0xFF, 0xC9])
_X86_64 = (bytes([0x48, 0x89, 0xF9, 0x31, 0xC0, 0xBA, 0x01, 0x00, 0x00, 0x00]) + _BODY
           + bytes([0x75, (-(len(_BODY) + 2)) & 0xFF, 0xC3]))
MAX_PLAUSIBLE_HZ = 7e9  # no x86-64 core clocks higher: a faster loop means the adds did not take a cycle each


def _dependent_adds() -> tuple[Any, Any] | None:
    """(the callable loop, the mapping that holds it) on x86-64, else None."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return None
    try:
        page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    except (OSError, ValueError, AttributeError):
        return None
    page.write(_X86_64)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    loop = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_uint64)(address)
    return loop, page


def sustained_clock(threads: int, seconds: float = 0.2, repeats: int = 5) -> dict[str, Any] | None:
    """The clock in Hz that ``threads`` cores sustain together, from ``repeats`` rounds of about ``seconds``
    each: {"clock_hz": median over rounds of the slowest thread's clock, "per_round_hz", "threads", "how"},
    or None where the loop cannot run here."""
    made = _dependent_adds()
    if made is None:
        return None
    loop, page = made
    try:
        if loop(1000) != 1000 * ADDS_PER_ITERATION:  # the code ran, and ran the adds it says
            return None
        # size the loop: ~seconds at the speed of one quick call
        started = time.thread_time_ns()
        loop(1_000_000)
        elapsed = max(time.thread_time_ns() - started, 1)
        iterations = max(1_000_000, int(1_000_000 * seconds * 1e9 / elapsed))
        rounds = []
        for _ in range(repeats):
            clocks: list[float] = []

            def run(loop: Any = loop, clocks: list[float] = clocks) -> None:
                # the thread's own CPU time: a core shared with other jobs slices the loop, not its clock
                begin = time.thread_time_ns()
                loop(iterations)
                clocks.append(iterations * ADDS_PER_ITERATION / ((time.thread_time_ns() - begin) * 1e-9))

            workers = [threading.Thread(target=run) for _ in range(max(1, threads))]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
            rounds.append(min(clocks))  # the slowest core: the GEMM waits for it
    finally:
        page.close()
    clock = statistics.median(rounds)
    if clock > MAX_PLAUSIBLE_HZ:
        log.warning("the dependent-add loop ran at %.1f GHz, faster than any core clocks: this core does not take "
                    "one cycle per add, so the theoretical roof keeps the nominal clock", clock / 1e9)
        return None
    return {"clock_hz": clock, "per_round_hz": rounds, "threads": max(1, threads),
            "how": (f"{ADDS_PER_ITERATION} × {iterations:,} dependent integer adds (1 cycle each) per thread on "
                    f"{max(1, threads)} thread(s) at once, timed with each thread's CPU-time clock; median of {repeats} "
                    f"rounds of the slowest thread")}
