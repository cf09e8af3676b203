"""The ``rooflow`` command line: one sub-command per step, so every step runs by hand outside Snakemake.

Each module that offers a sub-command has ``register(subparsers)``, which adds its parser and sets
``func`` (a callable taking the parsed arguments and returning an exit status).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import warnings
from pathlib import Path

from rooflow import __version__
from rooflow.logs import INTERRUPTED_STATUS, describe_failure

# Modules offering sub-commands, in the order ``rooflow --help`` lists them.
COMMAND_MODULES = (
    "rooflow.cli.estimate",
    "rooflow.cli.profilers",
    "rooflow.cli.ceilings",
    "rooflow.cli.calibrate",
    "rooflow.cli.calibrate_kernels",
    "rooflow.cli.devices",
    "rooflow.cli.subset",
    "rooflow.cli.time",
    "rooflow.cli.summary",
    "rooflow.cli.checks",
    "rooflow.cli.doctor",
)


class Parser(argparse.ArgumentParser):
    """argparse's parser whose errors are one line: the sentence and where the usage is (argparse printed the
    whole usage block above it, up to ten lines, for a mistyped value)."""

    def __init__(self, *args, allow_abbrev: bool = False, **kwargs):
        # no abbreviated options: `rooflow devices --device h100` was read as --devices-file h100 ("h100 does
        # not exist: give the path of an existing YAML file"), a prefix of another option than the one meant
        super().__init__(*args, allow_abbrev=allow_abbrev, **kwargs)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (usage: {self.prog} --help)\n")

    def parse_args(self, args=None, namespace=None):
        """argparse's, but an argument the sub-command does not take is that sub-command's error (its usage named):
        argparse left it to the top parser, which pointed at `rooflow --help`."""
        known, extras = self.parse_known_args(args, namespace)
        if extras:
            owner = getattr(self, "commands", {}).get(getattr(known, "command", None), self)
            owner.error(f"unrecognized arguments: {' '.join(extras)}")
        return known


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="rooflow",
        description=(
            "Roofline analysis of torchvision models and your own nn.Modules: analytic estimates, measured time, "
            "Nsight Compute / Nsight Systems aggregation, device ceilings. "
            "The full pipeline runs as a Snakemake workflow (see README.md); "
            "these sub-commands run one step by hand."
        ),
    )
    parser.add_argument("--version", action="version", version=f"rooflow {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:  # a step not installed in this build: leave it out of --help
            if error.name and name.startswith(error.name):
                continue
            raise
        module.register(subparsers)
    parser.commands = dict(subparsers.choices)  # each sub-command's parser, by name (Parser.parse_args)
    return parser


def _one_line_warning(command: str, default):
    """rooflow's own warnings as one line, "rooflow COMMAND: warning: ..." (Python's format added the source line
    that raised it, an API caller's context); other libraries' warnings as Python shows them."""
    package = str(Path(__file__).resolve().parents[1])

    def show(message, category, filename, lineno, file=None, line=None):
        if not str(Path(filename).resolve()).startswith(package):
            return default(message, category, filename, lineno, file, line)
        print(f"rooflow {command}: warning: {message}", file=file or sys.stderr)

    return show


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warning(args.command, warnings.showwarning)
            return int(args.func(args) or 0)
    except BrokenPipeError:  # `rooflow estimate ... | head`
        return 0
    except KeyboardInterrupt:
        print(f"rooflow {args.command}: interrupted", file=sys.stderr)
        return INTERRUPTED_STATUS
    except Exception as error:
        # A failure rooflow can foresee (RooflowError, a missing/unreadable/binary file, a full disk) is one
        # line naming the input and the fix; anything else is a bug and keeps its traceback.
        message = describe_failure(error)
        if message is None:
            raise
        print(f"rooflow {args.command}: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
