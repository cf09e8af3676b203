"""Faults inside one job (issue 14): temporaries left by a SIGKILL are found and removed, a profiler job
stops promptly on SIGTERM/SIGINT and takes its whole process tree with it, and names that look like HTML
or C++ templates survive the report's tables as text.

The profiler here is a STAND-IN (no GPU or Nsight on these machines): a Python script that behaves like
ncu -- writes a large CSV into --log-file, starts a child of its own (ncu's target application) and runs
for ten minutes -- optionally ignoring SIGTERM. What is tested is rooflow's side: rooflow.io and
rooflow.measure.launch.run_tool, run as a real job process that receives real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from rooflow.io import atomic_path, remove_stale_temporaries, scratch_directory, stale_temporaries

ROOT = Path(__file__).resolve().parents[2]

# ---- temporaries ----


def test_atomic_path_names_its_temporary_after_the_output_and_cleans_up_on_error(tmp_path):
    out = tmp_path / "ncu.csv"
    with pytest.raises(RuntimeError), atomic_path(out) as tmp:
        assert tmp.parent == out.parent and tmp.name.startswith(".ncu.csv.") and tmp.name.endswith(".tmp")
        tmp.write_text("half a CSV")
        assert stale_temporaries([out]) == [tmp]
        raise RuntimeError("the profiler failed")
    assert not out.exists() and stale_temporaries([out]) == []


def test_an_output_under_a_file_or_onto_a_folder_is_one_sentence_naming_it(tmp_path):
    """An output whose folder path runs through a file said "<that file>: file exists; check the path", and one
    onto a folder named a temporary; now one sentence names the output and the part in the way."""
    from rooflow.errors import RooflowError

    (tmp_path / "file").write_text("")
    output = tmp_path / "file" / "deeper" / "out.json"
    with pytest.raises(RooflowError) as error:
        with atomic_path(output):
            pytest.fail("the block ran")
    assert str(error.value) == (f"{output}: cannot write it: {tmp_path / 'file'} is a file, not a folder; give an "
                                f"output path in a folder (or move that file)")
    with pytest.raises(RooflowError, match=f"^{tmp_path}: cannot write it: it is a folder; give the path of a file"):
        with atomic_path(tmp_path):
            pytest.fail("the block ran")
    with pytest.raises(RooflowError, match="is a file, not a folder"):
        with scratch_directory(output):
            pytest.fail("the block ran")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_an_output_gets_the_mode_open_gives_not_mkstemps_0600(tmp_path):
    """results/summary.csv and every other output were 0600 (mkstemp's temporary, renamed): unreadable to the
    project's group on a shared cluster file system. An output now gets 0666 less the umask, as open() gives."""
    previous = os.umask(0o027)
    try:
        with atomic_path(tmp_path / "summary.csv") as tmp:
            tmp.write_text("device,model\n")
    finally:
        os.umask(previous)
    assert (tmp_path / "summary.csv").stat().st_mode & 0o777 == 0o640
    with atomic_path(tmp_path / "other.csv") as tmp:
        tmp.write_text("x\n")
    assert (tmp_path / "other.csv").stat().st_mode & 0o777 == 0o666 & ~previous


def test_stale_temporaries_are_those_of_the_given_outputs_only(tmp_path):
    """What a SIGKILL leaves: `.ncu.csv.<random>.tmp` files and `.<trace>.<random>.tmp` scratch folders.
    Temporaries of OTHER outputs in the same folder (perhaps being written by another run) are kept."""
    run = tmp_path / "results" / "profile" / "a100" / "resnet18" / "b1-fp32-training"
    run.mkdir(parents=True)
    left = [run / ".ncu.csv.k2j3h4.tmp", run / ".ncu.csv.9x8y7z.tmp"]
    for path in left:
        path.write_bytes(b"x" * 2_000_000)
    scratch = run / ".nsys_cuda_gpu_trace.csv.abc123.tmp"
    (scratch / "nested").mkdir(parents=True)
    (scratch / "nested" / "nsys.nsys-rep").write_bytes(b"y" * 1000)
    others = [run / ".timing.json.aaaa.tmp", run / "ncu.csv.backup.tmp", run / ".ncu.csv.tmp.keep"]
    for path in others:
        path.write_text("not ours")
    outputs = [run / "ncu.csv", run / "nsys_cuda_gpu_trace.csv", tmp_path / "elsewhere" / "x.json"]
    assert stale_temporaries(outputs) == sorted([*left, scratch])
    assert remove_stale_temporaries(outputs) == sorted([*left, scratch])
    assert not any(p.exists() for p in [*left, scratch])
    assert all(p.exists() for p in others)
    assert remove_stale_temporaries(outputs) == []


def test_scratch_directory_is_a_temporary_of_its_output(tmp_path):
    out = tmp_path / "nsys_cuda_gpu_trace.csv"
    with scratch_directory(out) as scratch:
        (scratch / "nsys.nsys-rep").write_text("report")
        assert stale_temporaries([out]) == [scratch]
    assert not scratch.exists()


# ---- a profiler job and its signals ----

STAND_IN_PROFILER = textwrap.dedent('''\
    """Stand-in for ncu: write 2 MB of CSV to the --log-file path, start a target process, run 10 minutes."""
    import os, signal, subprocess, sys, time
    log_file, pids, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    if mode == "ignore-term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(log_file, "w") as f:
        f.write('"ID","Kernel Name","Metric Name","Metric Value"\\n' + '"1","k","m","1"\\n' * 160_000)
    with open(pids + ".part", "w") as f:
        f.write(f"{os.getpid()} {target.pid}\\n")
    os.replace(pids + ".part", pids)
    if mode == "kill-parent":
        os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(600)
''')

JOB = textwrap.dedent('''\
    """A profile_ncu-like job: the profiler writes into an atomic temporary of the output."""
    import sys
    from rooflow.io import atomic_path
    from rooflow.logs import step_logging
    from rooflow.measure.launch import run_tool

    out, log, fake, pids, mode = sys.argv[1:6]
    with step_logging(log, "profile_ncu"):
        with atomic_path(out) as tmp:
            run_tool([sys.executable, fake, str(tmp), pids, mode], log, "ncu", outputs=[tmp], grace_seconds=2)
''')


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie waiting for its parent counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def wait_for(condition, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def start_job(tmp_path: Path, mode: str):
    fake, job = tmp_path / "fake_ncu.py", tmp_path / "job.py"
    fake.write_text(STAND_IN_PROFILER)
    job.write_text(JOB)
    out, log, pids = tmp_path / "results" / "ncu.csv", tmp_path / "ncu.log", tmp_path / "pids"
    process = subprocess.Popen([sys.executable, str(job), str(out), str(log), str(fake), str(pids), mode],
                               env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    wait_for(pids.exists, 120, "the stand-in profiler to start")
    profiler, target = map(int, pids.read_text().split())
    return process, out, log, profiler, target


@pytest.mark.parametrize("signum,mode", [(signal.SIGTERM, "plain"), (signal.SIGINT, "plain"),
                                         (signal.SIGTERM, "ignore-term")],
                         ids=["SIGTERM", "SIGINT", "SIGTERM-to-a-profiler-that-ignores-it"])
def test_a_stopped_profiler_job_stops_its_whole_tree_and_leaves_nothing(tmp_path, signum, mode):
    """scancel / `timeout` (SIGTERM) or Ctrl-C (SIGINT) reach the job's Python process: it must not wait for
    a ten-minute profiler. The profiler and its target get SIGTERM (SIGKILL after the grace period when
    they ignore it), the job ends with one sentence, and neither the output nor its temporary remains."""
    process, out, log, profiler, target = start_job(tmp_path, mode)
    try:
        assert stale_temporaries([out]) and stale_temporaries([out])[0].stat().st_size > 2_000_000
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=120)  # the stand-in would run 600 s
        assert process.returncode == 1, stderr
        assert f"ncu was stopped by {signal.Signals(signum).name}" in stderr and "Traceback" not in stderr, stderr
        wait_for(lambda: not alive(profiler) and not alive(target), 30, "the profiler's tree to end")
        assert not out.exists() and stale_temporaries([out]) == []
        assert "SIGKILL" in log.read_text() if mode == "ignore-term" else "SIGKILL" not in log.read_text()
    finally:
        for pid in (profiler, target):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        if process.poll() is None:
            process.kill()


def test_a_sigkilled_job_takes_its_profiler_along_and_its_temporary_is_removed_later(tmp_path):
    """SIGKILL cannot be caught: the job dies mid-write and its 2 MB temporary stays (what was seen on a GPU
    node). The kernel kills the profiler with it (PR_SET_PDEATHSIG); the profiler's own child is not its
    business (a real ncu target finishes its one iteration). The next run's onstart removes the temporary."""
    process, out, _, profiler, target = start_job(tmp_path, "kill-parent")
    try:
        process.communicate(timeout=120)
        assert process.returncode == -signal.SIGKILL
        wait_for(lambda: not alive(profiler), 30, "the profiler to die with its parent")
        left = stale_temporaries([out])
        assert len(left) == 1 and left[0].stat().st_size > 2_000_000 and not out.exists()
        assert remove_stale_temporaries([out]) == left and not left[0].exists()
    finally:
        for pid in (profiler, target):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_run_tool_without_signals_reports_the_exit_status(tmp_path):
    from rooflow.errors import RooflowError
    from rooflow.measure.launch import run_tool

    log = tmp_path / "tool.log"
    run_tool([sys.executable, "-c", "print('fine')"], log, "tool")
    assert "fine" in log.read_text()
    with pytest.raises(RooflowError, match=r"tool exited with status 3: see .*tool.log"):
        run_tool([sys.executable, "-c", "import sys; sys.exit(3)"], log, "tool")


# ---- names in the report's HTML ----


class _Text(HTMLParser):
    """Text of every <td>/<th> cell and of the title, as a browser shows it."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.cells: list[str] = []
        self.title = ""
        self._in: str | None = None
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag in ("td", "th", "title", "strong", "span", "li"):
            self._in = tag
            if tag in ("td", "th"):
                self.cells.append("")

    def handle_endtag(self, tag):
        if tag == self._in:
            self._in = None

    def handle_data(self, data):
        if self._in in ("td", "th") and self.cells:
            self.cells[-1] += data
        elif self._in == "title":
            self.title += data


HOSTILE_NAMES = [
    "void foo<float, 4>(float const*, int)",
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>(Params)",
    "<script>alert('x')</script>",
    "a & b \"quoted\" 'single'",
    "ampere_sgemm_128x64_nn</td></tr><tr><td>forged",
]


def test_kernel_and_model_names_are_text_in_every_table():
    from rooflow.report.tables import html_table

    frame = pd.DataFrame({"kernel <name>": HOSTILE_NAMES, "model": ["resnet18<b>"] * len(HOSTILE_NAMES),
                          "seconds": [1.5e-3] * len(HOSTILE_NAMES)})
    page = html_table(frame, "Kernels of void foo<float, 4>", note="<b>not bold</b>",
                      row_class=["error", "x\" onload=\"alert(1)", "", "", ""])
    parser = _Text()
    parser.feed(page)
    assert parser.title == "Kernels of void foo<float, 4>"
    columns = len(frame.columns)
    assert parser.cells[:columns] == ["kernel <name>", "model", "seconds"]
    body = [parser.cells[i:i + columns] for i in range(columns, len(parser.cells), columns)]
    assert [row[0] for row in body] == HOSTILE_NAMES
    assert all(row[1] == "resnet18<b>" for row in body)
    # no markup was injected: exactly one table, its rows and cells, and the page's own tags
    assert parser.tags.count("table") == 1 and parser.tags.count("tr") == 1 + len(HOSTILE_NAMES)
    assert "script" in parser.tags and parser.tags.count("script") == 1  # the page's own sorter only
    assert "b" not in parser.tags
    assert 'onload="alert(1)"' not in page


def test_checks_overview_escapes_names_and_causes():
    from rooflow.report.tables import checks_overview

    checks = pd.DataFrame([{"run": "cpu <script>x</script> b1 fp32 training", "severity": "warning",
                            "check": "noisy <b>", "value": "spread 9% <10%>", "expected": "≤ 5% & quiet",
                            "likely_cause": "kernel void foo<float, 4> dominates"}])
    fragment = checks_overview(checks)
    parser = _Text()
    parser.feed(fragment)
    assert "script" not in parser.tags and "b" not in parser.tags
    text = fragment.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    assert "void foo<float, 4>" in text and "cpu <script>x</script> b1" in text


def test_layer_table_from_a_real_nvtx_recording_keeps_kernel_names_as_text():
    """Real C++ kernel names from rooflow's own H100 recording, through the report's table writer."""
    from rooflow.report.tables import html_table

    recorded = pd.read_csv(ROOT / "tests/data/real/h100-rooflow/resnet18-b16-fp32-training-ncu-nvtx.csv.gz",
                           skiprows=2, usecols=["Kernel Name"], nrows=4000)  # two ==PROF== lines first
    names = sorted(set(recorded["Kernel Name"]))
    templated = [n for n in names if "<" in n and ">" in n]
    assert templated, "the recording has templated kernel names"
    parser = _Text()
    parser.feed(html_table(pd.DataFrame({"name": templated}), "kernels"))
    assert parser.cells[1:] == templated
