"""Logging for a step run by a workflow job: to its log file (line-buffered, so a failure on a cluster
node is readable afterwards) and to stderr, with user errors ending the step as one sentence.

:func:`describe_failure` is the one place that turns a failure rooflow can foresee — a
:class:`~rooflow.errors.RooflowError`, a missing, unreadable or binary input file, a full disk — into one
sentence naming the input and the fix; the ``rooflow`` command line (:func:`rooflow.cli.main`) and every rule
script (through :func:`step_logging`) print that sentence instead of a traceback. Anything else is a bug,
and keeps its traceback.
"""

from __future__ import annotations

import errno
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rooflow.errors import RooflowError

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# The exit status of a process stopped by Ctrl-C (128 + SIGINT), as shells report it.
INTERRUPTED_STATUS = 130

_OS_FIXES = {
    errno.ENOENT: "no such file or directory; check the path (did the step that writes it run?)",
    errno.EACCES: "permission denied; check the file's permissions, or run as a user who may read it",
    errno.EPERM: "operation not permitted; check the file's permissions, or run as a user who may read it",
    errno.EISDIR: "is a directory, not a file; give the file inside it",
    errno.ENOTDIR: "a part of the path is a file, not a directory; check the path",
    errno.ENOSPC: "no space left on the device; free some space or write the results elsewhere",
    errno.EDQUOT: "disk quota exceeded; free some space or write the results elsewhere",
    errno.EROFS: "the file system is read-only; write the results elsewhere",
    errno.ENAMETOOLONG: "the file name is too long; use a shorter path",
}


def describe_failure(error: BaseException) -> str | None:
    """One sentence for a failure rooflow can foresee, or None for anything else (a bug: keep its traceback).

    >>> describe_failure(FileNotFoundError(2, "No such file or directory", "results/x.json"))
    'results/x.json: no such file or directory; check the path (did the step that writes it run?).'
    """
    if isinstance(error, RooflowError):
        return " ".join(str(error).split("\n"))  # one line, whatever the message
    if isinstance(error, OSError):
        fix = _OS_FIXES.get(error.errno or -1)
        if fix is None:
            fix = f"{(error.strerror or str(error)).rstrip('.').lower()}; check the path and the file system"
        where = error.filename if error.filename is not None else "an input or output file"
        return f"{where}: {fix}."
    if isinstance(error, UnicodeDecodeError):
        return (f"an input file is not text ({error.reason} at byte {error.start}): a binary file was given "
                f"where a text file (CSV, JSON, YAML, log) is expected; check the files given.")
    return None


@contextmanager
def step_logging(log_path: str | Path | None, step: str) -> Iterator[logging.Logger]:
    """Log a rule script's step to ``log_path`` and stderr; a foreseeable failure (:func:`describe_failure`)
    ends the step as one logged sentence and exit status 1, Ctrl-C/SIGINT as "interrupted" and status 130."""
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        # Emptied, then appended to: a profiler run by the step appends its program's output to the same file,
        # and a handle opened "w" would write over it from its own offset (a traceback lost on the H100).
        Path(log_path).write_text("")
        stream = open(log_path, "a", buffering=1)  # noqa: SIM115 - closed by logging.shutdown
        handlers.append(logging.StreamHandler(stream))
    logging.basicConfig(level=logging.INFO, format=FORMAT, handlers=handlers, force=True)
    logger = logging.getLogger(f"rooflow.{step}")
    try:
        yield logger
    except KeyboardInterrupt:
        logger.error("%s interrupted (Ctrl-C or SIGINT): no output was written; run the workflow again to "
                     "redo this step", step)
        logging.shutdown()
        raise SystemExit(INTERRUPTED_STATUS) from None
    except Exception as error:
        message = describe_failure(error)
        if message is None:
            raise
        logger.error("%s failed: %s", step, message)
        logging.shutdown()
        raise SystemExit(1) from None
    logging.shutdown()
