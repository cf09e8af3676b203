"""The machine's other load while a step is timed: what the noisy-timing check reads its cause from.

A timed iteration that takes longer than its neighbours does the same work, so something took the CPU or the
memory from it. Two counters say who, per iteration: the machine's busy CPU time (``/proc/stat``, all cores, less
this process's own — ``getrusage``, all its threads) is the other processes' work beside it, and the ``steal``
column is the time a hypervisor ran other guests on this machine's virtual CPUs. On the project's 2-core VM with a
test suite running beside it, ResNet-18's batch-1 forward took 67 ms in its fastest quarter of 80 iterations beside
36 ms of other processes' CPU time, and 191 ms in its slowest beside 163 ms (0.53 and 0.85 of a core).

``/proc/stat`` counts in clock ticks (``SC_CLK_TCK``, 100 per second on Linux), so a slow quarter of iterations
is told from a fast one only where each lasts long enough (:data:`READABLE_SECONDS`); a timing's mean load is
read whatever its length. No ``/proc/stat`` (macOS): nothing recorded, and the check says the load is unknown.

The process's own CPU time beside each iteration (``getrusage``: counted to the microsecond, so it splits short
iterations too), its kernel part and the iteration's page faults tell the rest apart on a CPU: where the slow
iterations' threads were not on the CPU for their extra time, the step waited; where they were, either the kernel
carries the extra CPU time, beside the page faults it handled, or the processor ran the step slower — its clock,
caches and memory another guest shares, or a hypervisor pausing a virtual CPU without reporting steal, none of
them recorded. On the same VM with nothing beside it (tests/data/recorded/cpu-rooflow), VGG11's batch-4 training
step on 2 threads spent 1,349 ms of CPU time in the kernel in its slowest 5 of 20 iterations against 712 ms in its
fastest 5, beside 324,123 and 304,250 page faults: 72% of their extra CPU time; MobileNetV2's batch-1 step 212 ms
of CPU time against 168, 18.8 and 8.08 ms of it in the kernel: slower in its own code.
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path
from typing import Any

PROC_STAT = Path("/proc/stat")
# A quarter of the iterations lasting this long holds 50 ticks of each core: its load read within a few percent
READABLE_SECONDS = 0.5


def machine_cpu_seconds(path: Path = PROC_STAT) -> tuple[float, float] | None:
    """(busy, steal) CPU seconds of the whole machine since boot, all cores: ``/proc/stat``'s first line (busy:
    user, nice, system, irq, softirq; guest time is inside user), or None where it cannot be read."""
    try:
        fields = path.read_text().split("\n", 1)[0].split()
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[1:9])
    except (OSError, ValueError):
        return None
    if fields[0] != "cpu":
        return None
    tick = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / tick, steal / tick


def own_cpu_times() -> tuple[float, float]:
    """(user, system) CPU seconds of this process so far, all its threads; system: the kernel's work for it (page
    faults among it)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


def own_cpu_seconds() -> float:
    """User and system CPU seconds of this process so far, all its threads."""
    return sum(own_cpu_times())


class LoadSampler:
    """Around each timed iteration: ``start()`` before, ``stop(timed_seconds, minor_faults)`` after; ``summary()``
    at the end."""

    def __init__(self, path: Path = PROC_STAT):
        self.path = path
        self.readable = machine_cpu_seconds(path) is not None
        # per iteration: (its timed seconds, the sampled window's wall seconds, other processes' CPU, steal,
        # this process's own CPU seconds (all its threads) and of them its system seconds, its minor page faults)
        self.iterations: list[tuple[float, float, float, float, float, float, int | None]] = []
        self._before: tuple[float, float, float, float, float] | None = None

    def start(self) -> None:
        if self.readable:
            busy, steal = machine_cpu_seconds(self.path) or (0.0, 0.0)
            user, system = own_cpu_times()
            self._before = (busy, steal, user, system, time.perf_counter())

    def stop(self, timed_seconds: float, minor_faults: int | None = None) -> None:
        if not self.readable or self._before is None:
            return
        wall = time.perf_counter() - self._before[4]
        reading = machine_cpu_seconds(self.path)
        if reading is None:
            self.readable = False
            return
        user, system = own_cpu_times()
        own, own_system = user + system - self._before[2] - self._before[3], system - self._before[3]
        # clamped: ticks count a core's time in whole ticks, so a short iteration can read less than its own
        other = max(0.0, reading[0] - self._before[0] - own)
        self.iterations.append((timed_seconds, wall, other, max(0.0, reading[1] - self._before[1]), own, own_system,
                                minor_faults))
        self._before = None

    def summary(self) -> dict[str, Any] | None:
        """The timing's load: ``cores``, over all its iterations ``wall_seconds`` (of the sampled windows),
        ``other_cpu_seconds`` (other processes'), ``steal_seconds``, ``own_cpu_seconds`` (this process's, all
        its threads), ``own_system_seconds`` (of it, the kernel's), ``minor_faults`` (where every iteration gave
        its count); and the same for its ``slowest`` and
        ``fastest`` quarter of iterations by timed seconds, with ``readable`` saying whether each quarter lasts
        :data:`READABLE_SECONDS`."""
        if not self.readable or not self.iterations:
            return None
        ranked = sorted(self.iterations, key=lambda r: r[0])
        quarter = max(1, len(ranked) // 4)

        def part(rows):
            return {"iterations": len(rows), "timed_seconds": sum(r[0] for r in rows),
                    "wall_seconds": sum(r[1] for r in rows), "other_cpu_seconds": sum(r[2] for r in rows),
                    "steal_seconds": sum(r[3] for r in rows), "own_cpu_seconds": sum(r[4] for r in rows),
                    "own_system_seconds": sum(r[5] for r in rows),
                    **({"minor_faults": sum(r[6] for r in rows)} if all(r[6] is not None for r in rows) else {})}

        fastest, slowest = part(ranked[:quarter]), part(ranked[-quarter:])
        return {**part(ranked), "cores": os.cpu_count() or 1, "slowest": slowest, "fastest": fastest,
                "readable": min(fastest["wall_seconds"], slowest["wall_seconds"]) >= READABLE_SECONDS}


def other_cores(part: dict[str, Any]) -> float:
    """Cores' worth of other processes' work beside ``part`` (a :meth:`LoadSampler.summary` part)."""
    return part["other_cpu_seconds"] / part["wall_seconds"] if part["wall_seconds"] > 0 else 0.0


def steal_share(part: dict[str, Any], cores: int) -> float:
    """The share of the machine's CPU time a hypervisor took beside ``part``."""
    return part["steal_seconds"] / (part["wall_seconds"] * cores) if part["wall_seconds"] > 0 else 0.0


def own_cores(part: dict[str, Any]) -> float:
    """Cores' worth of this process's own threads busy beside ``part``."""
    return part["own_cpu_seconds"] / part["wall_seconds"] if part["wall_seconds"] > 0 else 0.0


def on_cpu_share(slowest: dict[str, Any], fastest: dict[str, Any]) -> float | None:
    """The share of the slowest quarter's extra wall time per iteration (over the fastest quarter's) that its
    threads spent on the CPU: its extra CPU seconds per iteration over the cores the fast iterations kept busy.
    1: the same work took that much more CPU time; 0: the step waited off the CPU. None where the parts carry no
    own CPU time (a timing recorded before rooflow sampled it) or the slow quarter is no slower."""
    if "own_cpu_seconds" not in slowest or "own_cpu_seconds" not in fastest:
        return None
    extra_wall = slowest["wall_seconds"] / slowest["iterations"] - fastest["wall_seconds"] / fastest["iterations"]
    cores = own_cores(fastest)
    if extra_wall <= 0 or cores <= 0:
        return None
    extra_cpu = slowest["own_cpu_seconds"] / slowest["iterations"] - fastest["own_cpu_seconds"] / fastest["iterations"]
    return min(1.0, max(0.0, extra_cpu / cores / extra_wall))
