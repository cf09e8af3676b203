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


def non_negative_int(text: str) -> int:
    """A whole number of at least 0 (warm-up iterations)."""
    value = _whole(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is not a whole number of 0 or more")
    return value


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
