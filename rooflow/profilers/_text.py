"""What every profiler parser shares: reading a file, numbers as the tools print them, units to SI, and
the tools' own error lines.

Numbers are converted through :class:`decimal.Decimal` so that "208.82 Mbyte" becomes exactly 208,820,000
bytes: sums over hundreds of kernels then reproduce a study's own integer totals to the last byte.
"""

from __future__ import annotations

import gzip
import re
from decimal import Decimal, InvalidOperation
from pathlib import Path

from rooflow.errors import ParseError

# SI prefixes as ncu prints them ("Kbyte", "Mbyte", "Gbyte"; ncu's documentation: auto-scaled units use
# powers of 1000 unless --print-units base is given). Binary prefixes for completeness.
_PREFIXES = {"": Decimal(1), "K": Decimal(10) ** 3, "M": Decimal(10) ** 6, "G": Decimal(10) ** 9,
             "T": Decimal(10) ** 12, "P": Decimal(10) ** 15,
             "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30, "Ti": Decimal(2) ** 40}
# Time units: ncu's text and CSV pages ("nsecond", "usecond", "msecond", "second"), the raw page and
# nsys headers ("ns", "us", "ms", "s", "nsec", "sec").
_TIME = {"nsecond": Decimal("1e-9"), "usecond": Decimal("1e-6"), "msecond": Decimal("1e-3"),
         "second": Decimal(1), "ns": Decimal("1e-9"), "us": Decimal("1e-6"), "ms": Decimal("1e-3"),
         "s": Decimal(1), "nsec": Decimal("1e-9"), "usec": Decimal("1e-6"), "msec": Decimal("1e-3"),
         "sec": Decimal(1)}
# Count-like base units that ncu may print with an SI prefix ("Kinst", "Msector").
_COUNT_BASES = ("byte", "inst", "sector", "cycle", "warp", "thread", "block", "request", "wavefront",
                "instruction", "transaction", "op", "flop", "register", "pass", "hz")
_PREFIXED = re.compile(r"^(Ki|Mi|Gi|Ti|K|M|G|T|P)?(" + "|".join(_COUNT_BASES) + r")$", re.IGNORECASE)
_WORD = re.compile(r"^[A-Za-z][A-Za-z_]*$")
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(,\d{3})+(\.\d*)?([eE][+-]?\d+)?$")
_MISSING = {"", "n/a", "N/A", "(!) n/a", "nan", "NaN", "-"}


def read_text(path: str | Path) -> str:
    """The file's text; `.gz` files are decompressed (profiler logs are often stored compressed)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ParseError(f"{path}: no such file; check the path (did the profiling job run and finish?).")
    except OSError as error:
        raise ParseError(f"{path}: cannot be read ({error.strerror}); check the path and its permissions.")
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as error:
            raise ParseError(f"{path}: the gzip data is corrupt or truncated ({error}); "
                             f"copy the file again from where the profiler wrote it.")
    return raw.decode("utf-8-sig", errors="replace")  # -sig: a byte-order mark would hide the CSV header


def parse_number(text: str) -> Decimal | None:
    """A number as ncu/nsys print it ("1,644,167,168", "208.82", "1.2e+06"); None for "n/a" or blank.

    Raises ValueError for anything else, so the caller can name the line.
    """
    text = text.strip().strip('"').strip()
    if text in _MISSING:
        return None
    if _THOUSANDS.match(text):
        text = text.replace(",", "")
    if not _NUMBER.match(text):
        raise ValueError(text)
    try:
        return Decimal(text)
    except InvalidOperation:  # pragma: no cover - the regex admits only valid literals
        raise ValueError(text) from None


def unit_factor(unit: str) -> Decimal | None:
    """Factor taking a value in `unit` to SI base units (bytes, seconds, counts, per-second rates).

    "Mbyte" -> 1e6, "usecond" -> 1e-6, "Gbyte/second" -> 1e9, "cycle/nsecond" -> 1e9, "%" -> 1 (a percent
    stays a percent). None when the unit is not understood, so that a metric rooflow relies on never goes
    through with a wrong scale.
    """
    unit = unit.strip()
    if unit in ("", "%"):
        return Decimal(1)
    if "/" in unit:
        numerator, _, denominator = unit.partition("/")
        top, bottom = unit_factor(numerator), unit_factor(denominator)
        if top is None or bottom is None or bottom == 0:
            return None
        return top / bottom
    if unit in _TIME:
        return _TIME[unit]
    match = _PREFIXED.match(unit)
    if match:
        # Prefixes are case-sensitive ("Kbyte", "Ghz"): "kbyte" is not something ncu prints, so reject it.
        return _PREFIXES.get(match.group(1) or "")
    if _WORD.match(unit):
        if len(unit) > 1 and unit[0] in "KMGTP" and unit[1].islower():
            return None  # looks like a prefixed unit rooflow does not know: never guess its scale
        return Decimal(1)  # an unscaled count unit: "warp", "SM", "cluster"
    return None


def to_si(value: str, unit: str) -> float | None:
    """`value` printed in `unit`, as a float in SI base units (None for n/a). ValueError when it is not a
    number, KeyError when the unit is unknown."""
    number = parse_number(value)
    if number is None:
        return None
    factor = unit_factor(unit)
    if factor is None:
        raise KeyError(unit)
    return float(number * factor)


# --------------------------------------------------------------------------------------------------
# The profilers' own error lines. Each yields one sentence: file, line, cause, fix.

_PERMISSION = ("ncu could not read the GPU performance counters (ERR_NVGPUCTRPERM): the cluster's driver "
               "restricts them to administrators; ask the admins to load the NVIDIA driver with "
               "NVreg_RestrictProfilingToAdminUsers=0 (or to grant profiling rights), or run ncu with "
               "admin rights, then profile again")
_NO_KERNELS = ("the profiler recorded no kernels (\"No kernels were profiled\"): nothing ran between "
               "torch.cuda.profiler.start() and stop() (ncu runs with --profile-from-start off), the "
               "driver failed before that point, or a --kernel-name filter matched nothing; check the "
               "driver's output in this log and profile again")


def profiler_error(path: str | Path, lines: list[str]) -> ParseError | None:
    """The error a profiler reported in its own output, if any: `==ERROR==` lines, ERR_NVGPUCTRPERM,
    "No kernels were profiled", or nsys's "does not contain CUDA kernel data"."""
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if "ERR_NVGPUCTRPERM" in stripped:
            return ParseError(f"{path}: line {number}: {_PERMISSION}.")
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped.startswith("==ERROR=="):
            message = stripped[len("==ERROR=="):].strip().rstrip(".")
            return ParseError(f"{path}: line {number}: the profiler reported an error ({message}); "
                              f"{_error_fix(message)}.")
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if "No kernels were profiled" in stripped:
            return ParseError(f"{path}: line {number}: {_NO_KERNELS}.")
        if "No reports were generated" in stripped:
            return ParseError(
                f"{path}: line {number}: nsys wrote no report (\"No reports were generated\"): the capture range "
                f"never opened, because the driver did not reach torch.cuda.profiler.start() or CUDA tracing "
                f"failed on this node (look for CUPTI errors above); fix that and profile again.")
        if "does not contain CUDA kernel data" in stripped or "does not contain CUDA trace data" in stripped:
            return ParseError(
                f"{path}: line {number}: the nsys report holds no CUDA kernels ({stripped[:120].rstrip('.')}): "
                f"nothing ran "
                f"inside the capture range (--capture-range=cudaProfilerApi needs the driver to call "
                f"torch.cuda.profiler.start()/stop()) or CUDA tracing was off (-t cuda); profile again.")
    return None


def _error_fix(message: str) -> str:
    lowered = message.lower()
    if "failed to find metric" in lowered or "invalid metric" in lowered or "unknown metric" in lowered:
        return ("this GPU's ncu does not offer that metric: take the metric list for the GPU's architecture "
                "from rooflow.profilers.metrics.metrics_for_architecture (or `ncu --query-metrics`)")
    if "application returned an error" in lowered or "terminated" in lowered:
        return "the profiled program failed: read its own output above in this log, fix it and profile again"
    if "connect" in lowered or "timeout" in lowered or "timed out" in lowered:
        return "ncu lost the profiled process: rerun, and check that the node's driver matches the CUDA toolkit"
    return "fix the cause it names and profile again"


def looks_like_nsys_report(lines: list[str]) -> bool:
    """A `nsys stats` CSV table header somewhere in the first lines (for a hint when given to the ncu parser)."""
    return any("," in line and ("Duration (" in line or "Duration(" in line or "Total Time (" in line)
               for line in lines[:200])


def looks_like_ncu_output(lines: list[str]) -> bool:
    """ncu's CSV header or its ==PROF== lines (for a hint when given to the nsys parser)."""
    return any(line.startswith(('"ID","Process ID"', "==PROF==")) for line in lines[:2000])


def looks_like_html(text: str) -> bool:
    head = text.lstrip()[:512].lower()
    return head.startswith(("<!doctype html", "<html")) or "<html" in head[:200]


def first_content_line(lines: list[str]) -> int:
    """1-based number of the first non-blank line (1 for an all-blank file)."""
    for number, line in enumerate(lines, start=1):
        if line.strip():
            return number
    return 1


def profiler_lines(path: Path, text: str, output: str, empty_cause: str, again: str) -> list[str]:
    """The lines of a profiler output file, after refusing what no parser should read: an empty file, an
    HTML page saved in place of the raw file, and a file holding the profiler's own error lines.
    `output` names what the file should be, `empty_cause` why it could be empty, `again` the fix."""
    if not text.strip():
        raise ParseError(f"{path}: the file is empty: {empty_cause}; read the profiling job's log and {again}.")
    lines = text.splitlines()
    if looks_like_html(text):
        raise ParseError(f"{path}: line {first_content_line(lines)}: this is an HTML page, not {output} "
                         f"(a web page saved in place of the raw file?); download the raw file or {again}.")
    error = profiler_error(path, lines)
    if error:
        raise error
    return lines
