"""One exception type for every error a user can fix: the message is one sentence naming the input and the fix.

The CLI and the rule scripts print ``str(error)`` alone (no traceback), so the message must stand on its own.
"""


class RooflowError(Exception):
    """An error caused by the user's input (config, file, environment), with a message that says what to do."""


class ParseError(RooflowError):
    """A profiler output file that is not in any accepted shape, truncated, or reports a profiler error."""


def first_line(error: BaseException, limit: int = 200) -> str:
    """What ``error`` said, for quoting inside a sentence: its message's first line, at most ``limit`` characters
    ('' for an empty message)."""
    lines = str(error).strip().splitlines()
    return lines[0][:limit] if lines else ""


def is_out_of_memory(error: BaseException) -> bool:
    """An allocator's failure (torch's CUDA OutOfMemoryError, Python's MemoryError, a CPU allocator's "can't
    allocate memory"): a result to record, never the user's input to blame."""
    import torch

    if isinstance(error, (torch.OutOfMemoryError, MemoryError)):
        return True
    text = str(error).lower()
    if isinstance(error, RuntimeError) and "could not create a primitive" in text and _address_space_capped():
        # oneDNN's allocation failing under RLIMIT_AS (profiling.cpu_memory_limit_bytes): it was blamed on the
        # model's input shapes, which ran without the cap
        return True
    return isinstance(error, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text
                                                or "failed to allocate" in text or "bad_alloc" in text)


def _address_space_capped() -> bool:
    """Whether this process runs under a soft RLIMIT_AS (rooflow.measure.oom.cpu_memory_limit sets one)."""
    import resource

    return resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY
