"""What every profiler parser shares: reading a file, numbers as the tools print them, units to SI, and
the tools' own error lines.

Numbers are converted through :class:`decimal.Decimal` so that "208.82 Mbyte" becomes exactly 208,820,000
bytes: sums over hundreds of kernels then reproduce a study's own integer totals to the last byte.
"""

from __future__ import annotations

import gzip
import math
import re
import zlib
from collections.abc import Iterable, Iterator
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import BinaryIO

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
# Count units ncu prints without a prefix (Launch Statistics' "# SMs", a cluster's size): with _COUNT_BASES the
# words it is known to print; another word ("Furlong") is not guessed to be a count
_COUNT_WORDS = {"SM", "SMSP", "TPC", "GPC", "cluster", "context"}
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(,\d{3})+(\.\d*)?([eE][+-]?\d+)?$")
# rooflow.measure.launch logs "running: <executable> profile ..." before each nsys profile.
_RUNNING_NSYS = re.compile(r"running: (\S*nsys) profile ")
_MISSING = {"", "n/a", "N/A", "(!) n/a", "nan", "NaN", "-"}


def read_text(path: str | Path) -> str:
    """The file's text; `.gz` files are decompressed (profiler logs are often stored compressed)."""
    path = Path(path)
    with open_binary(path) as handle:
        raw = _read_all(path, handle)
    return raw.decode("utf-8-sig", errors="replace")  # -sig: a byte-order mark would hide the CSV header


def open_binary(path: str | Path) -> BinaryIO:
    """The file opened for reading bytes, decompressed on the fly when it is gzip data; a missing file, a
    directory or a file without read permission is one ParseError naming the path and the fix."""
    path = Path(path)
    try:
        handle = open(path, "rb")  # noqa: SIM115 - returned to the caller, who closes it
    except FileNotFoundError:
        raise ParseError(f"{path}: no such file; check the path (did the profiling job run and finish?).")
    except IsADirectoryError:
        raise ParseError(f"{path}: is a directory, not a profiler output file; give the file(s) inside it.")
    except PermissionError:
        raise ParseError(f"{path}: permission denied; check the file's permissions (ls -l) or copy it somewhere "
                         f"readable.")
    except OSError as error:
        raise ParseError(f"{path}: cannot be read ({error.strerror}); check the path and its permissions.")
    try:
        magic = handle.peek(2)[:2] if hasattr(handle, "peek") else b""
    except OSError as error:  # a directory opened on some systems, a device that cannot be read
        handle.close()
        raise ParseError(f"{path}: cannot be read ({error.strerror}); give the profiler's output file.")
    if magic == b"\x1f\x8b":
        return gzip.GzipFile(filename=str(path), mode="rb", fileobj=handle)  # closes with `handle` below
    return handle


def _read_all(path: Path, handle: BinaryIO) -> bytes:
    try:
        return handle.read()
    except (OSError, EOFError, zlib.error) as error:
        raise ParseError(f"{path}: the gzip data is corrupt or truncated ({error}); "
                         f"copy the file again from where the profiler wrote it.")


def read_blocks(path: str | Path, block_bytes: int = 1 << 21) -> Iterator[bytes]:
    """The file's bytes (decompressed if gzip) in blocks of about `block_bytes` that end at a line break;
    only the last block may end without one. Read errors are ParseErrors naming the file.

    One buffer is reused (``readinto``): no fresh allocation per block, which on a busy machine costs more
    page faults than the parsing of the block."""
    path = Path(path)
    buffer = bytearray(block_bytes)
    filled = 0
    with open_binary(path) as handle:
        while True:
            if filled == len(buffer):  # a line longer than the buffer: make room
                buffer.extend(bytes(len(buffer)))
            try:
                with memoryview(buffer) as view:
                    read = handle.readinto(view[filled:])
            except (OSError, EOFError, zlib.error) as error:
                raise ParseError(f"{path}: the gzip data is corrupt or truncated ({error}); "
                                 f"copy the file again from where the profiler wrote it.")
            if not read:
                if filled:
                    yield bytes(buffer[:filled])
                return
            filled += read
            cut = buffer.rfind(b"\n", 0, filled) + 1
            if cut == 0:
                continue
            with memoryview(buffer) as view:
                block = bytes(view[:cut])
            buffer[: filled - cut] = buffer[cut:filled]
            filled -= cut
            yield block


def release_memory() -> None:
    """Hand back to the system the memory freed by reading a big file: pyarrow's pool keeps the blocks'
    buffers, and glibc's heap the holes left by a few hundred blocks' arrays (malloc_trim; nothing where the C
    library is not glibc). Called once a page is read, before its per-kernel tables are built (on a 1 GB
    per-metric file, ~18 MB less peak RSS, measured)."""
    try:
        import pyarrow as pa

        pa.default_memory_pool().release_unused()
    except ImportError:  # pragma: no cover - installed with pandas
        pass
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        pass


def read_ahead(blocks: Iterator[bytes], depth: int = 2) -> Iterator[bytes]:
    """`blocks` as they come, read in a thread of their own up to `depth` blocks ahead of the one handed out:
    the read (and a gzip file's inflation, which release the GIL) overlaps the parsing of earlier blocks. An
    exception in the reading thread (a read error's ParseError, a KeyboardInterrupt) is raised here when the
    blocks before it are handed out; a caller that stops early stops the thread (at most one block later)."""
    import queue
    import threading

    handed: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    end = object()

    def put(item: tuple) -> bool:
        while not stop.is_set():
            try:
                handed.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        try:
            for block in blocks:
                if not put((block, None)):
                    return
            put((end, None))
        except BaseException as error:  # noqa: BLE001 - raised again in the caller's thread
            put((end, error))
        finally:
            close = getattr(blocks, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=read, name="rooflow-read", daemon=True)
    thread.start()
    try:
        while True:
            block, error = handed.get()
            if block is end:
                if error is not None:
                    raise error
                return
            yield block
    finally:
        stop.set()
        thread.join()


# Leading bytes of file kinds a user may give by mistake, and what to do instead.
_MAGIC = [(b"PK\x03\x04", "a ZIP archive", "unpack it and give the file inside"),
          (b"\xfd7zXZ\x00", "xz-compressed data", "decompress it first (xz -d); rooflow reads plain and gzip files"),
          (b"BZh", "bzip2-compressed data", "decompress it first (bunzip2); rooflow reads plain and gzip files"),
          (b"\x28\xb5\x2f\xfd", "zstd-compressed data",
           "decompress it first (zstd -d); rooflow reads plain and gzip files"),
          (b"SQLite format 3\x00", "an SQLite database (an nsys export?)",
           "give the CSV that `nsys stats --format csv` writes from it")]
_REPORT_SUFFIXES = {
    ".ncu-rep": ("a binary Nsight Compute report (.ncu-rep)", "export its details page as text with `ncu --import {path} --csv "
                 "--page details > {stem}.csv` and give that file"),
    ".nsys-rep": ("a binary Nsight Systems report (.nsys-rep)", "run `nsys stats --report cuda_gpu_kern_sum,cuda_gpu_trace "
                  "--format csv --output {stem} {path}` and give the CSV files it writes"),
    ".qdrep": ("a binary Nsight Systems report (.qdrep)", "run `nsys stats --report gpukernsum,gputrace --format csv "
               "--output {stem} {path}` and give the CSV files it writes"),
    ".qdstrm": ("an unimported Nsight Systems capture (.qdstrm)", "open it with a full Nsight Systems (QdstrmImporter) to "
                "make a .nsys-rep, then run `nsys stats` on that"),
}


def binary_kind(path: Path, head: bytes) -> tuple[str, str] | None:
    """(what the file is, what to do) when its first bytes are not text, else None."""
    for suffix, (kind, fix) in _REPORT_SUFFIXES.items():
        if path.name.endswith(suffix) or path.name.endswith(suffix + ".gz"):
            stem = path.name[: path.name.index(suffix)]
            return kind, fix.format(path=path, stem=stem)
    for magic, kind, fix in _MAGIC:
        if head.startswith(magic):
            return kind, fix
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "UTF-16 text", "convert it to UTF-8 (iconv -f UTF-16 -t UTF-8) and give the converted file"
    sample = head[:8192]
    control = sum(byte < 9 or 13 < byte < 32 for byte in sample)
    undecodable = sample.count("\ufffd".encode())  # bytes that were not UTF-8, replaced when decoded
    if b"\x00" in sample or control > len(sample) // 10 or undecodable > len(sample) // 60:
        return "a binary file, not text", "give the text or CSV output the profiler wrote (with --csv or --log-file)"
    return None


def check_head(path: Path, head: bytes, output: str, empty_cause: str, again: str, *, whole: bool) -> None:
    """Refuse what no parser should read, from the first bytes of a file: nothing (`whole`: `head` is the
    whole file), a binary file, an HTML page saved in place of the raw file."""
    if whole and not head.strip():
        raise ParseError(f"{path}: the file is empty: {empty_cause}; read the profiling job's log and {again}.")
    binary = binary_kind(path, head)
    if binary:
        kind, fix = binary
        raise ParseError(f"{path}: this is {kind}, not {output}; {fix}.")
    text = head[:4096].decode("utf-8-sig", errors="replace")
    if looks_like_html(text):
        lines = text.splitlines()
        raise ParseError(f"{path}: line {first_content_line(lines)}: this is an HTML page, not {output} "
                         f"(a web page saved in place of the raw file?); download the raw file or {again}.")


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
        value = Decimal(text)
    except InvalidOperation:  # pragma: no cover - the regex admits only valid literals
        raise ValueError(text) from None
    if not math.isfinite(float(value)):  # 1e400: summed as an infinite DRAM traffic, an intensity of 0
        raise ValueError(text)
    return value


def unit_factor(unit: str) -> Decimal | None:
    """Factor taking a value in `unit` to SI base units (bytes, seconds, counts, per-second rates).

    "Mbyte" -> 1e6, "usecond" -> 1e-6, "Gbyte/second" -> 1e9, "cycle/nsecond" -> 1e9, "%" -> 1 (a percent
    stays a percent), "warp" -> 1. None when the unit is not understood (also a word ncu does not print, such as
    "Furlong": it was taken for a count, and a byte counter in it summed as bytes), so that a metric rooflow relies
    on never goes through with a wrong scale.
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
    if unit in _COUNT_WORDS:
        return Decimal(1)  # an unscaled count unit: "SM", "cluster"
    return None  # a unit rooflow does not know ("Furlong", "Kfoo"): never guess its scale


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


NO_NSYS_REPORT = ("{nsys} wrote only a .qdstrm capture ({qdstrm}) and no .nsys-rep report, because it is the nsys "
                   "bundled inside Nsight Compute, which lacks the QdstrmImporter that turns a capture into a "
                   "report; install Nsight Systems on the GPU nodes and set profiling.nsys.executable to its nsys, "
                   "or set profiling.nsys.enabled: false")


def profiler_error(path: str | Path, lines: list[str]) -> ParseError | None:
    """The error a profiler reported in its own output, if any: `==ERROR==` lines, ERR_NVGPUCTRPERM,
    "No kernels were profiled", an nsys that could only write a ``.qdstrm`` capture, or nsys's "does not
    contain CUDA kernel data"."""
    return profiler_error_numbered(path, enumerate(lines, start=1))


def profiler_error_numbered(path: str | Path, numbered: Iterable[tuple[int, str]]) -> ParseError | None:
    """:func:`profiler_error` over (1-based line number, line) pairs: a streaming parser passes only the
    lines that are not CSV rows, with their numbers in the file."""
    numbered = [(number, line.strip()) for number, line in numbered]
    for number, stripped in numbered:
        # ncu's own line (==ERROR== ERR_NVGPUCTRPERM - ...), not any text that names it (a README, a script)
        if stripped.startswith("==ERROR==") and "ERR_NVGPUCTRPERM" in stripped:
            return ParseError(f"{path}: line {number}: {_PERMISSION}.")
    for number, stripped in numbered:
        if stripped.startswith("==ERROR=="):
            message = stripped[len("==ERROR=="):].strip().rstrip(".")
            return ParseError(f"{path}: line {number}: the profiler reported an error ({message}); "
                              f"{_error_fix(message)}.")
    qdstrm = _qdstrm_without_report(numbered)
    if qdstrm:
        number, capture, nsys = qdstrm
        return ParseError(f"{path}: line {number}: " + NO_NSYS_REPORT.format(nsys=nsys, qdstrm=capture) + ".")
    for number, stripped in numbered:
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


def _qdstrm_without_report(numbered: list[tuple[int, str]]) -> tuple[int, str, str] | None:
    """(line, capture file, nsys executable) when `nsys profile` listed a ``.qdstrm`` file under
    "Generated:" and no ``.nsys-rep``: the nsys bundled inside Nsight Compute, which cannot import its
    captures (fixture h100-rooflow/nsys-without-qdstrm-importer.log)."""
    nsys = "the nsys on this node"
    for index, (number, stripped) in enumerate(numbered):
        found = _RUNNING_NSYS.search(stripped)
        if found:
            nsys = found.group(1)
        if stripped != "Generated:":
            continue
        listed = []
        for _, following in numbered[index + 1:]:
            if not following.startswith("/") and not following.endswith((".qdstrm", ".nsys-rep", ".qdrep")):
                break
            listed.append(following)
        captures = [name for name in listed if name.endswith(".qdstrm")]
        if captures and not any(name.endswith((".nsys-rep", ".qdrep")) for name in listed):
            return number, captures[0], nsys
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


# Other profilers' output, recognised so the error can say what the file is.
_OTHER_TOOLS = [
    (re.compile(r"^==\d+== NVPROF is profiling|^\"Device\",\"Kernel\",\"Invocations\""),
     "nvprof output (the profiler before Nsight Compute; it does not support GPUs from Ampere on)"),
    (re.compile(r"^\"?(KernelName|Index)\"?,.*\b(gpu-id|DurationNs|BeginNs)\b"), "rocprof output (AMD GPUs)"),
    (re.compile(r"^\s*\{\s*\"(traceEvents|schemaVersion|deviceProperties)\""),
     "a torch.profiler / Chrome trace (JSON)"),
    (re.compile(r"^\s*Name\s+Self CPU %"), "a torch.profiler table (key_averages)"),
]


def other_tool(lines: list[str]) -> str | None:
    """What another profiler's output is, from its first lines; None when it is not one rooflow knows."""
    for line in lines[:50]:
        for pattern, kind in _OTHER_TOOLS:
            if pattern.search(line):
                return kind
    return None


IMPORT_HEAD_BYTES = 1 << 16  # what an imported file's kind is read from at config validation: its first 64 KiB


def listed_kind_problem(path: str | Path, listed_as: str) -> str | None:
    """Why a file listed under an import's ``ncu:`` or ``nsys:`` (``listed_as``) cannot be that profiler's output,
    read from its first bytes alone (config validation runs at every workflow parse: no parser, no pandas) — an
    empty file, a binary or JSON file, the other profiler's output — in words that end in the fix; None where it may
    be (its aggregate job reads it whole)."""
    path = Path(path)
    try:
        with open_binary(path) as handle:
            head = handle.read(IMPORT_HEAD_BYTES)
    except (OSError, EOFError, ParseError, zlib.error):  # a broken gzip stream: the aggregate job's parser names it
        return None
    head = head.removeprefix(b"\xef\xbb\xbf")
    if not head.strip():
        return "is empty: copy it again from where the profiler wrote it"
    binary = binary_kind(path, head)
    if binary:
        return f"is {binary[0]}: {binary[1]}"
    text = head.decode("utf-8", errors="replace")
    lines = text.splitlines()
    # a JSON object or array of them (a timing record, a Chrome trace); not a line nsys stats starts with
    # ("[3/8] Executing 'cuda_gpu_trace' stats report")
    if re.match(r"\s*(\{|\[\s*[\[{\"\]])", text):
        return (f"is JSON, not {'Nsight Compute' if listed_as == 'ncu' else 'Nsight Systems'} output: list the "
                f"profiler's text or CSV output")
    if listed_as == "ncu" and looks_like_nsys_report(lines) and not looks_like_ncu_output(lines):
        return "is an nsys stats report, not Nsight Compute output: list it under nsys:"
    if listed_as == "nsys" and looks_like_ncu_output(lines):
        return "is Nsight Compute output, not an nsys stats report: list it under ncu:"
    return None


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
    """The lines of a profiler output file, after refusing what no parser should read: an empty file, a
    binary file, an HTML page saved in place of the raw file, and a file holding the profiler's own error lines.
    `output` names what the file should be, `empty_cause` why it could be empty, `again` the fix."""
    head = text[:8192].encode("utf-8", errors="replace")
    check_head(Path(path), head, output, empty_cause, again, whole=not text[8192:])
    if not text.strip():
        raise ParseError(f"{path}: the file is empty: {empty_cause}; read the profiling job's log and {again}.")
    lines = text.splitlines()
    error = profiler_error(path, lines)
    if error:
        raise error
    return lines


def not_a_number(path: str | Path, number: int, metric: str, value: str) -> ParseError:
    """The error for a metric rooflow adds up whose value is not a number (ncu's per-instance values), or one
    past any finite number (1e400: an edited or damaged file)."""
    written = value.strip().strip('"').strip()
    if _NUMBER.match(written.replace(",", "") if _THOUSANDS.match(written) else written):
        return ParseError(f"{path}: line {number}: {metric} is {written[:40]!r}, past any finite number: the file was "
                          f"edited or damaged; profile again and give the file as ncu wrote it.")
    return ParseError(f"{path}: line {number}: {metric} is {value[:40]!r}, not a number; rooflow needs one value "
                      f"per kernel, so profile without --print-metric-instances and give the file as ncu wrote it.")
