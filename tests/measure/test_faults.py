"""Minor page faults as the timing job counts them (rooflow.measure.faults): real allocations, real counters, no
stand-in for the kernel's bookkeeping."""

import mmap
import os
import subprocess
import sys

import pytest

from rooflow.measure import faults
from rooflow.measure.timing import RunSpec, timed_rounds

torch = pytest.importorskip("torch")
PROBE_BYTES = 64 * 2**20  # over glibc's largest dynamic mmap threshold (32 MiB): mapped afresh at each allocation
PROBE_PAGES = PROBE_BYTES // faults.page_bytes()


def test_a_fresh_tensor_over_the_mmap_threshold_faults_its_pages_and_a_kept_one_none():
    """64 MiB is over glibc's largest mmap threshold: allocated and written, every one of its pages faults in; the
    same writes into a tensor kept fault nothing."""
    kept = torch.empty(PROBE_BYTES // 4)
    kept.fill_(0.0)
    before = faults.minor_faults()
    fresh = torch.empty(PROBE_BYTES // 4)
    fresh.fill_(1.0)
    taken = faults.minor_faults() - before
    del fresh
    assert 0.9 * PROBE_PAGES <= taken <= 1.1 * PROBE_PAGES
    before = faults.minor_faults()
    kept.fill_(1.0)
    assert faults.minor_faults() - before < 0.01 * PROBE_PAGES


# A step run 3 times after 5 (glibc's heap takes a few to settle), in a fresh process: the median faults of a step
_STEPS = """
import statistics, torch
from rooflow.measure.faults import minor_faults
torch.set_num_threads(1)
{setup}
taken = []
for _ in range(8):
    before = minor_faults()
    {step}
    taken.append(minor_faults() - before)
print(statistics.median(taken[5:]))
"""
# Three 40 MiB tensors written and freed, past glibc's largest dynamic mmap threshold: its own mechanism, on any host
_BLOCKS = {"setup": "", "step": "[torch.empty(10 * 2**20).fill_(1.0) for _ in range(3)]"}
_BLOCK_PAGES = 3 * 40 * 2**20 // faults.page_bytes()
# A MobileNetV2 batch-1 forward: the real network the check's advice was measured on
_MOBILENET = {"setup": "import torchvision; torch.set_grad_enabled(False)\n"
                       "model, x = torchvision.models.mobilenet_v2().eval(), torch.randn(1, 3, 224, 224)",
              "step": "model(x)"}
BOTH = {"MALLOC_TRIM_THRESHOLD_": "4000000000", "MALLOC_MMAP_THRESHOLD_": "2000000000"}
TRIM_ALONE = {"MALLOC_TRIM_THRESHOLD_": "4000000000"}


def _faults_per_step(workload: dict, **env) -> float:
    code = _STEPS.format(**workload)
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return float(out.stdout.splitlines()[-1])


def test_the_allocator_settings_the_check_names_remove_glibcs_faults_and_the_trim_threshold_alone_does_not():
    """The mechanism the page-fault check names, on any host: glibc maps a tensor over 32 MiB (its mmap threshold's
    largest dynamic value) afresh at each allocation, so every step faults its pages in (30,720 for three of 40 MiB);
    both thresholds raised past it, none once the heap has settled; the trim threshold alone, not fewer."""
    default = _faults_per_step(_BLOCKS)
    assert 0.9 * _BLOCK_PAGES <= default <= 1.1 * _BLOCK_PAGES
    assert _faults_per_step(_BLOCKS, **BOTH) == 0
    assert _faults_per_step(_BLOCKS, **TRIM_ALONE) >= 0.9 * default


def test_the_allocator_settings_remove_a_real_networks_faults_and_the_trim_threshold_alone_multiplies_them():
    """What the check tells a user to do, done to a real network: glibc's defaults leave MobileNetV2's batch-1
    forward 1,500-4,400 faults a step on the project's VM, but none on one CI host (why, unrecorded: the test above
    pins the mechanism on any host); its mmap and trim thresholds raised together (the mmap one to 32 MiB or 2 GB,
    past its tensors), none. The trim threshold set alone maps every tensor over 128 KiB afresh: 15,000-18,000
    faults, more than twice the default's — why the check names both."""
    default = _faults_per_step(_MOBILENET)
    assert _faults_per_step(_MOBILENET, **BOTH) == 0
    assert _faults_per_step(_MOBILENET, **{**BOTH, "MALLOC_MMAP_THRESHOLD_": "33554432"}) == 0
    trim_alone = _faults_per_step(_MOBILENET, **TRIM_ALONE)
    assert trim_alone > 2 * default


class _Clock:
    def __init__(self, cuda):
        self.marks = []

    def mark(self):
        self.marks.append(0.0)

    def intervals_seconds(self):
        return [0.001] * (len(self.marks) - 1)


class _Allocating:
    """A step that writes a fresh 64 MiB tensor (``fresh``) or one it keeps."""
    cuda = False

    def __init__(self, fresh: bool):
        self.fresh = fresh
        self.kept = torch.zeros(PROBE_BYTES // 4)

    def step(self, clock=None):
        clock.mark()
        (torch.empty(PROBE_BYTES // 4) if self.fresh else self.kept).fill_(1.0)
        clock.mark()


@pytest.mark.parametrize("fresh", [True, False])
def test_timed_rounds_count_each_iterations_faults(fresh):
    spec = RunSpec("squeezenet1_0", 1, timed_iterations=4, max_timing_rounds=1)
    _, info = timed_rounds(_Allocating(fresh), spec, clock_class=_Clock)
    assert len(info["minor_faults"]) == 4
    if fresh:
        assert info["median_minor_faults"] >= 0.9 * PROBE_PAGES
    else:
        assert info["median_minor_faults"] < 0.01 * PROBE_PAGES


class _Fresh(torch.nn.Module):
    """A layer that writes 64 MiB mapped afresh at every call (an anonymous mapping of its own, not glibc's: in
    a pytest worker other tests ran in, a 64 MiB tensor once came from memory already faulted in)."""

    def forward(self, x):
        with mmap.mmap(-1, PROBE_BYTES) as fresh:
            torch.frombuffer(fresh, dtype=torch.uint8)[:: faults.page_bytes()].fill_(1)  # one write per page
        return x.clone()


def test_the_profiled_iteration_counts_each_leaf_layers_forward_faults():
    """rooflow.measure.optime.module_ranges yields each leaf layer's forward faults as the model runs: the layer
    that maps 64 MiB afresh takes its pages' worth, a small Linear none; a block (the Sequential) is not counted
    apart from its leaves."""
    from rooflow.measure.optime import module_ranges

    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Sequential(_Fresh(), torch.nn.ReLU()))
    with torch.no_grad(), module_ranges(model) as faults_by_layer:
        model(torch.ones(2, 8))
    assert set(faults_by_layer) == {"0", "1.0", "1.1"}
    assert faults_by_layer["1.0"] >= 0.9 * PROBE_PAGES and faults_by_layer["0"] < 0.01 * PROBE_PAGES
