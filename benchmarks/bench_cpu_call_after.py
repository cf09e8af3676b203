"""What a small CPU op costs right after other work: the time of one op timed alone against the same op timed
first after a large convolution, matrix product or elementwise op (no GPU; torch's threads).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_cpu_call_after.py      # a table, about 10 s

A network's step on a CPU runs each small op after a large one; the time model prices each op as if timed alone
(rooflow.ceilings.calibrate's microbenchmarks repeat one op). This prints how far that holds on this machine:
per preceding op, the median over ``--repeats`` of the small op's time, and, for a frozen backbone's whole
backward (a 512-to-10 head and its loss), the same. Numbers are this machine's; benchmarks/README.md has a run.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from rooflow.ceilings.plan import last_level_cache_bytes


def preceding_ops() -> dict[str, object]:
    """The large ops a small one follows, each on tensors made once (an output freed at once)."""
    image = torch.randn(4, 64, 112, 112)  # 12.8 MB, a ResNet stem's output at batch 4
    conv = torch.nn.Conv2d(64, 64, 3, padding=1)
    left, right = torch.randn(64, 65536), torch.randn(65536, 64)  # 16 MB operands, a 16 KB product
    swept = {mib: torch.empty(mib * 2**18) for mib in (4, 16, 32, 64, 128)}
    return {
        "nothing": lambda: None,
        "3x3 convolution, 64 channels of 112x112 (12.8 MB out)": lambda: conv(image),
        "matrix product of 16 MB operands (16 KB out)": lambda: left @ right,
        "elementwise mul (12.8 MB out, new)": lambda: image.mul(2),
        "5 ms of Python": lambda: sum(range(200_000)),
        # no allocation, no library call: only the bytes swept through the caches
        **{f"fill of a kept {mib} MiB tensor": (lambda kept=kept: kept.fill_(1.0)) for mib, kept in swept.items()},
    }


def small_ops() -> dict[str, tuple[object, object]]:
    """The small ops timed after each, as (prepare, timed): a head's product, and a frozen backbone's whole
    backward (prepare makes its loss, untimed; its backward is timed)."""
    features, weight = torch.randn(4, 512), torch.randn(512, 10)
    head, loss = torch.nn.Linear(512, 10), torch.nn.CrossEntropyLoss()
    labels = torch.randint(0, 10, (4,))
    return {"mm 4x512 by 512x10": (None, lambda: torch.mm(features, weight)),
            "a 512-to-10 head's loss backward": (lambda: loss(head(features), labels), None)}


def median_seconds(before, timed, prepare=None, repeats: int = 40) -> float:
    """Median seconds of ``timed`` run right after ``before`` (``prepare``: untimed, run before ``before``; where it
    returns a tensor, the loss whose backward is timed in ``timed``'s place)."""
    seconds = []
    for _ in range(repeats):
        made = prepare() if prepare else None
        with torch.no_grad():
            before()
        start = time.perf_counter()
        made.backward() if made is not None else timed()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=40, help="timings per cell (median taken)")
    args = parser.parse_args()
    ops = small_ops()
    before = preceding_ops()
    cache = last_level_cache_bytes()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, last-level cache "
          f"{cache / 2**20:.0f} MiB\n" if cache else f"torch {torch.__version__}, {torch.get_num_threads()} threads\n")
    print("| run right after | " + " | ".join(f"{name} (µs)" for name in ops) + " |")
    print("|---|" + "---:|" * len(ops))
    for label, op in before.items():
        cells = [median_seconds(op, timed, prepare, args.repeats) for prepare, timed in ops.values()]
        print(f"| {label} | " + " | ".join(f"{1e6 * seconds:.1f}" for seconds in cells) + " |")


if __name__ == "__main__":
    main()
