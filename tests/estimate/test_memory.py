"""The steady-state memory replay (rooflow.estimate.memory) on two bias-free linear layers: closed forms."""

from __future__ import annotations

import pytest
import torch

from rooflow.estimate import estimate_module
from rooflow.estimate.memory import foreach_optimizer_peak, live_bytes, previous_gradients

BATCH, WIDTH = 1024, 1024
ACTIVATION = BATCH * WIDTH * 4  # fp32: the input, the hidden and the output are one size
WEIGHTS = 2 * WIDTH * WIDTH * 4


@pytest.fixture(scope="module")
def trace():
    model = torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH, bias=False),
                                torch.nn.Linear(WIDTH, WIDTH, bias=False)).to("meta")
    return estimate_module(model, torch.empty(BATCH, WIDTH, device="meta"), mode="training").trace


def test_previous_gradients_live_through_the_forward(trace):
    """zero_grad runs after the forward: at the loss, weights + momentum + last step's gradients + input,
    hidden and output activations (+ the scalar loss) are alive — the step's peak; they go when backward
    starts (without them the peak would be the backward's, a weight gradient less)."""
    stale, first_backward = previous_gradients(trace)
    assert stale == WEIGHTS
    assert trace.records[first_backward].phase == "backward"
    assert trace.records[first_backward - 1].phase != "backward"
    live = live_bytes(trace)
    assert max(live[:first_backward]) == pytest.approx(3 * WEIGHTS + 3 * ACTIVATION, abs=1024)
    assert max(live[first_backward:]) < max(live) - WEIGHTS / 4


def test_foreach_update_holds_a_copy_of_every_gradient(trace):
    """SGD's foreach update: weights, momentum, gradients and g + wd·p of both layers at once (+ the input,
    which the caller holds); the single-tensor update holds one layer's g + wd·p at a time."""
    optimizer = [i for i, r in enumerate(trace.records) if r.phase == "optimizer"]
    single = max(live_bytes(trace)[optimizer[0]:optimizer[-1] + 1])
    assert single == pytest.approx(3 * WEIGHTS + WEIGHTS / 2 + ACTIVATION, abs=1024)
    assert foreach_optimizer_peak(trace) == pytest.approx(4 * WEIGHTS + ACTIVATION, abs=1024)


def test_inference_has_neither(trace):
    model = torch.nn.Linear(WIDTH, WIDTH, bias=False, device="meta")
    inference = estimate_module(model, torch.empty(BATCH, WIDTH, device="meta")).trace
    assert previous_gradients(inference) == (0, None)
    assert foreach_optimizer_peak(inference) == 0
