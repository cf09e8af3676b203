"""argparse types the command line and the profiling driver share: a count that must be positive is refused
by argparse in one sentence, before a step runs on it (``rooflow time --batch 0`` had timed an empty batch and
recorded it ``ok``; ``--iterations 0`` ended in a KeyError)."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """A whole number of at least 1 (a batch, iterations, threads, pixels, classes)."""
    value = _whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer (1 or more)")
    return value


def thread_count(text: str) -> int:
    """CPU threads: at least 1, at most 4 × this machine's CPUs (100,000 crashed torch's OpenMP in a segfault)."""
    import os

    value = positive_int(text)
    cpus = os.cpu_count() or 1
    if value > 4 * cpus:
        raise argparse.ArgumentTypeError(f"{text} is more than 4 × this machine's {cpus} CPUs: give at most {cpus} "
                                         f"(one per core)")
    return value


# The largest batch rooflow takes: it counts every tensor's bytes in int64, and a batch of 10^12 images overflowed
# them (negative megabytes) long before any device could hold it; 2^24 samples of a 100-million-element
# activation is still 6.7e15 bytes, far inside int64
MAX_BATCH = 2**24


def batch_size(text: str) -> int:
    """A batch: a whole number from 1 to :data:`MAX_BATCH`."""
    value = positive_int(text)
    if value > MAX_BATCH:
        raise argparse.ArgumentTypeError(f"{text} is more than {MAX_BATCH:,} (2^24) samples, the largest batch "
                                         f"rooflow counts the bytes of without overflowing; give a smaller batch")
    return value


def bounded_int(low: int, high: int, what: str):
    """An argparse type: a whole number from ``low`` to ``high`` (the config schema's bounds of the same key)."""

    def parse(text: str) -> int:
        value = _whole(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is not {what} from {low:,} to {high:,}")
        return value

    return parse


# the config schema's bounds (rooflow/schemas/config.schema.yaml; tests/config pins that they agree)
RESIZE_PIXELS = (2, 4096)  # 1 failed inside torch's antialiased resize, 10^8 asked for petabytes
SEED = (0, 2**32 - 1)  # the stand-in images' generator seeds from seed × 1,000,003: a long long
CPU_MEMORY_LIMIT_BYTES = (1, 2**62)  # setrlimit takes no more


def non_negative_int(text: str) -> int:
    """A whole number of at least 0 (warm-up iterations)."""
    value = _whole(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is not a whole number of 0 or more")
    return value


def non_negative_seconds(text: str) -> float:
    """A finite number of seconds, 0 or more (a budget of time; the config's schema says minimum 0 alike)."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text} is not a number of seconds of 0 or more")
    return value


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
