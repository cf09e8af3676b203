"""The machine's load beside timed iterations (rooflow.measure.load): /proc/stat read as the kernel writes it, other
processes' CPU time apart from this process's, and a real busy neighbour seen beside the iterations it slowed;
this process's own CPU time, which tells slow iterations that ran slower on the CPU from ones that waited."""

from __future__ import annotations

import os
import time

import pytest

from rooflow.measure import load

STAT = """cpu  6788139 3527 862880 3741742 111006 0 5997 39906 0 0
cpu0 3394069 1763 431440 1870871 55503 0 2998 19953 0 0
intr 1 2 3
"""


def test_proc_stat_busy_and_steal_in_seconds(tmp_path):
    path = tmp_path / "stat"
    path.write_text(STAT)
    tick = os.sysconf("SC_CLK_TCK")
    busy, steal = load.machine_cpu_seconds(path)
    assert busy == pytest.approx((6788139 + 3527 + 862880 + 0 + 5997) / tick)  # user nice system irq softirq
    assert steal == pytest.approx(39906 / tick)
    for bad in ("", "intr 1 2 3\n", "cpu  1 2 x 4 5 6 7 8\n", "cpu 1 2\n"):
        path.write_text(bad)
        assert load.machine_cpu_seconds(path) is None
    assert load.machine_cpu_seconds(tmp_path / "absent") is None
    sampler = load.LoadSampler(tmp_path / "absent")
    sampler.start()
    sampler.stop(0.1)
    assert sampler.summary() is None  # no /proc/stat (macOS): nothing recorded


def test_other_processes_work_is_the_machines_busy_time_less_this_processs(tmp_path, monkeypatch):
    """Per iteration: the machine's busy ticks over the window, less this process's own CPU time (all threads),
    is other processes' work; steal apart; quarters ranked by the timed seconds. A clock, a /proc/stat and a
    getrusage that this test sets (the real ones are read by the recorded timing in tests/report/test_summary.py)."""
    tick = os.sysconf("SC_CLK_TCK")
    path, now = tmp_path / "stat", {"wall": 0.0, "own": 0.0, "busy": 0, "steal": 0}

    def write():
        path.write_text(f"cpu  {now['busy']} 0 0 100 0 0 0 {now['steal']} 0 0\n")

    monkeypatch.setattr(load, "own_cpu_times", lambda: (now["own"], 0.0))
    monkeypatch.setattr(load.time, "perf_counter", lambda: now["wall"])
    write()
    sampler = load.LoadSampler(path)
    # eight 1 s iterations, each with 1 s of its own CPU; the four slow ones beside 1 core of others' work and
    # 0.2 s of steal, the four fast ones beside none
    for i in range(8):
        sampler.start()
        slow = i % 2 == 1
        now["wall"] += 1.0
        now["own"] += 1.0
        now["busy"] += round((2.0 if slow else 1.0) * tick)
        now["steal"] += round((0.2 if slow else 0.0) * tick)
        write()
        sampler.stop(1.2 if slow else 1.0)
    summary = sampler.summary()
    assert summary["iterations"] == 8 and summary["readable"] and summary["wall_seconds"] == pytest.approx(8.0)
    slow, fast = summary["slowest"], summary["fastest"]
    assert slow["iterations"] == fast["iterations"] == 2 and slow["timed_seconds"] == pytest.approx(2.4)
    assert load.other_cores(slow) == pytest.approx(1.0) and load.other_cores(fast) == pytest.approx(0.0)
    assert load.steal_share(slow, 2) == pytest.approx(0.1) and load.steal_share(fast, 2) == 0.0
    assert load.other_cores(summary) == pytest.approx(0.5)


def test_where_the_slow_iterations_extra_time_went_on_the_cpu_or_off_it(tmp_path, monkeypatch):
    """The slow quarter's extra wall time per iteration against its extra own CPU time, over the cores the fast
    iterations kept busy: 1 where the same work took that much more CPU time, 0 where the step waited; None for a
    timing recorded before rooflow kept its own CPU time, or one whose slow quarter is no slower. Each part also
    sums the kernel's share of that CPU time and the iterations' page faults, where every one gave its count. Set
    counters."""
    path, now = tmp_path / "stat", {"wall": 0.0, "own": 0.0, "system": 0.0}
    path.write_text("cpu  0 0 0 100 0 0 0 0 0 0\n")
    monkeypatch.setattr(load, "own_cpu_times", lambda: (now["own"] - now["system"], now["system"]))
    monkeypatch.setattr(load.time, "perf_counter", lambda: now["wall"])

    def quarters(slow_wall, slow_own, faults=True):
        """Eight iterations on 2 threads: four of 1 s with 2 CPU-seconds (0.1 in the kernel, 40 page faults),
        four slow ones as given (0.4 s in the kernel, 100 faults)."""
        sampler = load.LoadSampler(path)
        for i in range(8):
            wall, own, system, count = (slow_wall, slow_own, 0.4, 100) if i % 2 else (1.0, 2.0, 0.1, 40)
            sampler.start()
            now["wall"] += wall
            now["own"] += own
            now["system"] += system
            sampler.stop(wall, count if faults else None)
        summary = sampler.summary()
        return summary["slowest"], summary["fastest"]

    slow, fast = quarters(1.5, 3.0)  # half as long again, both threads busy throughout: slower on the CPU
    assert load.own_cores(slow) == pytest.approx(2.0) and load.own_cores(fast) == pytest.approx(2.0)
    assert load.on_cpu_share(slow, fast) == pytest.approx(1.0)
    assert slow["own_system_seconds"] == pytest.approx(0.8) and fast["own_system_seconds"] == pytest.approx(0.2)
    assert slow["minor_faults"] == 200 and fast["minor_faults"] == 80
    assert "minor_faults" not in quarters(1.5, 3.0, faults=False)[0]
    slow, fast = quarters(1.5, 2.0)  # the same CPU time over half as long again: waiting off the CPU
    assert load.on_cpu_share(slow, fast) == pytest.approx(0.0)
    assert load.own_cores(slow) == pytest.approx(4 / 3)
    slow, fast = quarters(1.5, 2.5)  # half of each
    assert load.on_cpu_share(slow, fast) == pytest.approx(0.5)
    assert load.on_cpu_share(*quarters(1.0, 2.0)) is None  # no slower
    old = {k: v for k, v in slow.items() if k != "own_cpu_seconds"}
    assert load.on_cpu_share(old, fast) is None


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def _spin_cpu(seconds: float) -> None:
    """Spin until this thread has had ``seconds`` of CPU time, however long the scheduler makes that take."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


@pytest.mark.skipif(not load.PROC_STAT.exists(), reason="needs Linux's /proc/stat")
def test_real_iterations_that_compute_longer_or_sleep_read_as_on_or_off_the_cpu():
    """On the real counters: slow iterations that do twice the work read as time on the CPU, slow iterations that
    do the same work and then sleep as time off it, with this suite's other worker beside them (the work is counted
    in this thread's CPU seconds, not in wall time)."""
    def share(slow):
        sampler = load.LoadSampler()
        for i in range(8):
            sampler.start()
            start = time.perf_counter()
            _spin_cpu(0.02)
            if i % 2:
                slow()
            sampler.stop(time.perf_counter() - start)
        summary = sampler.summary()
        return load.on_cpu_share(summary["slowest"], summary["fastest"])

    # more than half of the extra time on the CPU alone; a neighbour taking part of this core lowers it
    assert share(lambda: _spin_cpu(0.1)) > 0.4
    assert share(lambda: time.sleep(0.1)) < 0.2


@pytest.mark.skipif(not load.PROC_STAT.exists(), reason="needs Linux's /proc/stat")
def test_the_real_counters_add_up_to_no_more_than_the_machine():
    """On the real /proc/stat, a process spinning for its iterations: its own CPU time and the other work read
    beside it add up to no more than the machine's cores over the window (to the counters' 10 ms ticks), however
    busy the machine is with this suite's other worker."""
    sampler = load.LoadSampler()
    own_before = load.own_cpu_seconds()
    for _ in range(5):
        sampler.start()
        _spin(0.1)
        sampler.stop(0.1)
    own = load.own_cpu_seconds() - own_before
    summary = sampler.summary()
    assert summary["iterations"] == 5 and summary["wall_seconds"] >= 0.5 and own > 0
    ticks = 5 * 2 * summary["cores"] / os.sysconf("SC_CLK_TCK")  # a tick each side of each window, every core
    assert 0 <= summary["other_cpu_seconds"] + own <= summary["cores"] * summary["wall_seconds"] + ticks
