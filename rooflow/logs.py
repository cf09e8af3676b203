"""Logging for a step run by a workflow job: to its log file (line-buffered, so a failure on a cluster
node is readable afterwards) and to stderr, with user errors ending the step as one sentence."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rooflow.errors import RooflowError

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


@contextmanager
def step_logging(log_path: str | Path | None, step: str) -> Iterator[logging.Logger]:
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        stream = open(log_path, "w", buffering=1)  # noqa: SIM115 - closed by logging.shutdown
        handlers.append(logging.StreamHandler(stream))
    logging.basicConfig(level=logging.INFO, format=FORMAT, handlers=handlers, force=True)
    logger = logging.getLogger(f"rooflow.{step}")
    try:
        yield logger
    except RooflowError as error:
        logger.error("%s failed: %s", step, error)
        logging.shutdown()
        raise SystemExit(1) from None
    logging.shutdown()
