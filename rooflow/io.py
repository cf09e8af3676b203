"""Writing outputs atomically: a crash mid-write leaves no file a re-run would trust.

A temporary is written beside its output as ``.<name>.<random>.tmp`` and renamed onto ``<name>`` only
when complete. A process killed with SIGKILL cannot remove its temporary: the workflow's ``onstart``
handler (rules/common.smk) removes those beside the outputs it is about to make
(:func:`remove_stale_temporaries`), so they never accumulate.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rooflow.errors import RooflowError

TEMPORARY_SUFFIX = ".tmp"


def temporary_prefix(path: str | Path) -> str:
    """``.<name>.``: the start of every temporary that stands for output `path` (file or folder)."""
    return f".{Path(path).name}."


def _output_folder(path: Path) -> None:
    """Make the folder of output `path`; a part of it that is a file, or a folder rooflow may not write in, is
    one sentence naming the output (not the temporary beside it, nor "did the step that writes it run?")."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocking = next((p for p in (path.parent, *path.parent.parents) if p.is_file()), path.parent)
        raise RooflowError(f"{path}: cannot write it: {blocking} is a file, not a folder; give an output path in "
                           f"a folder (or move that file)") from None
    except PermissionError:
        raise RooflowError(f"{path}: cannot make its folder {path.parent}: permission denied; write it somewhere "
                           f"you may") from None
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise RooflowError(f"{path}: cannot write in its folder {path.parent}: permission denied; write it "
                           f"somewhere you may") from None


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it onto `path` only if the block succeeds."""
    path = Path(path)
    _output_folder(path)
    if path.is_dir():
        raise RooflowError(f"{path}: cannot write it: it is a folder; give the path of a file (in it, or elsewhere)")
    try:
        fd, tmp = tempfile.mkstemp(prefix=temporary_prefix(path), suffix=TEMPORARY_SUFFIX, dir=path.parent)
    except OSError as error:  # a folder no file can be made in (/proc): named, not the temporary beside the output
        raise RooflowError(f"{path}: cannot write in its folder {path.parent} ({error.strerror}); write it somewhere "
                           "else") from None
    os.close(fd)
    try:
        yield Path(tmp)
        # mkstemp makes it 0600; an output gets the mode open() would give it (0644 under the usual umask), so
        # that the project's group can read a results folder on a shared cluster file system
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


class _Probe(Exception):
    pass


def check_writable(path: str | Path) -> None:
    """Refuse now, in the sentence :func:`atomic_path` would say it in after the work, an output that cannot be
    written (a folder, a folder no file can be made in); nothing is left behind but its missing folders."""
    try:
        with atomic_path(path):
            raise _Probe
    except _Probe:
        pass


@contextmanager
def scratch_directory(path: str | Path) -> Iterator[Path]:
    """A scratch folder beside output `path`, named like its temporaries (``.<name>.<random>.tmp``) so that
    :func:`remove_stale_temporaries` finds it when a SIGKILL leaves it behind; removed on exit."""
    path = Path(path)
    _output_folder(path)
    scratch = Path(tempfile.mkdtemp(prefix=temporary_prefix(path), suffix=TEMPORARY_SUFFIX, dir=path.parent))
    try:
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def stale_temporaries(outputs: Iterable[str | Path]) -> list[Path]:
    """The temporaries (files or scratch folders) beside `outputs` that :func:`atomic_path` or
    :func:`scratch_directory` left: ``.<name>.*.tmp`` in each output's folder, for that output's name only."""
    found: set[Path] = set()
    for output in outputs:
        output = Path(output)
        pattern = glob.escape(str(output.parent / temporary_prefix(output))) + "*" + TEMPORARY_SUFFIX
        # the pattern starts with a dot, so glob matches these hidden names without include_hidden (3.11+)
        found.update(Path(p) for p in glob.glob(pattern))
    return sorted(found)


def remove_stale_temporaries(outputs: Iterable[str | Path]) -> list[Path]:
    """Remove the temporaries beside `outputs` (see :func:`stale_temporaries`) and return them.

    Only safe for outputs no running process is writing: the workflow calls it from ``onstart`` for the
    outputs of the jobs it is about to run, which Snakemake's lock keeps every other run from writing."""
    removed = []
    for path in stale_temporaries(outputs):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def write_json(path: str | Path, data: Any) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=_jsonable) + "\n")


def write_csv(path: str | Path, frame) -> None:
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)


def missing(path: str | Path, folder: bool = False) -> str | None:
    """Why ``path`` is not the existing file (``folder``: folder) an option names — "no such file", "a folder,
    not a file", … — or None. A folder given for a file was reported as missing."""
    path = Path(path)
    if path.is_dir() if folder else path.is_file():
        return None
    if path.is_dir() or path.is_file():
        return "a folder, not a file" if path.is_dir() else "a file, not a folder"
    if path.exists():  # a device, a socket
        return "not a folder" if folder else "not a regular file"
    return f"no such {'folder' if folder else 'file'}"


def inside(path: str | Path, folder: str | Path) -> Path | None:
    """``path``'s place in ``folder`` (relative), where writing it would land in that input's tree; else None."""
    resolved, root = Path(path).resolve(), Path(folder).resolve()
    return resolved.relative_to(root) if resolved.is_relative_to(root) else None


def check_distinct(outputs: dict[str, str | Path | None], inputs: dict[str, Any]) -> None:
    """Refuse an output (option → path) that is an input (option → path or paths) or another output: written,
    it would replace the user's input (`rooflow ncu F --kernels-csv F`: the Nsight output, often the only copy)
    or lose the other output."""
    seen: dict[Path, str] = {}
    for option, paths in inputs.items():
        for path in ([paths] if isinstance(paths, (str, Path)) else paths or []):
            seen.setdefault(Path(path).resolve(), f"the input {option} {path}")
    for option, path in outputs.items():
        if not path:
            continue
        resolved = Path(path).resolve()
        if resolved in seen:
            raise RooflowError(f"{option} {path} is also {seen[resolved]}: writing it would replace that file; give "
                               f"{option} a path of its own")
        seen[resolved] = f"the output {option} {path}"


def read_json(path: str | Path) -> Any:
    """A JSON file's content; a file that is not JSON (cut short, or another kind of file given) ends in one
    sentence naming it (a missing or binary one: rooflow.logs.describe_failure)."""
    try:
        return json.loads(Path(path).read_text())
    except UnicodeDecodeError as error:
        raise RooflowError(f"{path} is not text ({error.reason} at byte {error.start}): a binary file was given "
                           f"where a JSON file is expected; give the JSON file the step or command wrote") from None
    except json.JSONDecodeError as error:
        raise RooflowError(f"{path}: not JSON ({error.msg} at line {error.lineno}, column {error.colno}): a file cut "
                           f"short, or not the file that belongs here; give the JSON file the step or command "
                           f"wrote, or make it again") from None


def read_json_object(path: str | Path, what: str) -> dict[str, Any]:
    """A JSON file that must hold an object (``what`` it should be, and the command that writes it, e.g. "a
    ceilings file (`rooflow ceilings --output`)"); anything else ends in one sentence naming it."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise RooflowError(f"{path}: not {what}: it holds a JSON {type(data).__name__}, not an object; give that file")
    return data


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy / torch scalars
        return value.item()
    if isinstance(value, (set, tuple)):
        return list(value)
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
