"""Activation checkpointing (torch.utils.checkpoint): the checkpointed forward runs again in backward, in the
forward's precision, attributed to its layers, and its activations are not held between forward and backward."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from rooflow.estimate import estimate_module

BATCH, WIDTH, HIDDEN = 64, 32, 128


class Blocks(nn.Module):
    """Two residual MLP blocks, each checkpointed (``reentrant``: True/False) or not (None)."""

    def __init__(self, reentrant: bool | None):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(WIDTH, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, WIDTH))
                                    for _ in range(2))
        self.reentrant = reentrant

    def forward(self, x):
        for block in self.blocks:
            if self.reentrant is None:
                x = x + block(x)
            else:
                x = x + torch.utils.checkpoint.checkpoint(block, x, use_reentrant=self.reentrant)
        return x


def step(reentrant, precision="fp32"):
    x = torch.empty(BATCH, WIDTH, device="meta", requires_grad=True)
    return estimate_module(Blocks(reentrant).to("meta"), x, mode="training", precision=precision)


def backward_by_layer(est, ops=None):
    rows = est.ops[est.ops["phase"] == "backward"]
    rows = rows if ops is None else rows[rows["op"].isin(ops)]
    return rows.groupby("layer")["flops"].sum()


FORWARD_OPS = ("addmm", "gelu")  # a linear's and the GELU's forward ops (their backward ops are mm, sum, gelu_backward)
LINEAR_IN = 2 * BATCH * WIDTH * HIDDEN + BATCH * HIDDEN  # the first linear's forward (matmul and bias)
GELU = 5 * BATCH * HIDDEN
LINEAR_OUT = 2 * BATCH * HIDDEN * WIDTH + BATCH * WIDTH


@pytest.mark.parametrize("reentrant, recomputed", [
    # non-reentrant stops recomputing once backward's saved tensors are back: the second linear's output is not one
    (False, {"0": LINEAR_IN, "1": GELU, "2": 0}),
    (True, {"0": LINEAR_IN, "1": GELU, "2": LINEAR_OUT})])  # reentrant reruns the whole block
def test_recomputed_forward_is_counted_in_backward_at_its_layers(reentrant, recomputed):
    plain, checkpointed = step(None), step(reentrant)
    assert backward_by_layer(plain, FORWARD_OPS).sum() == 0
    again = backward_by_layer(checkpointed, FORWARD_OPS)
    for block in ("0", "1"):
        for layer, flops in recomputed.items():
            assert again.get(f"blocks.{block}.{layer}", 0) == flops, f"blocks.{block}.{layer}"
    extra = checkpointed.totals["backward_flops"] - plain.totals["backward_flops"]
    assert extra == pytest.approx(2 * sum(recomputed.values()), rel=1e-3)


@pytest.mark.parametrize("precision, low", [("bf16", "bf16"), ("fp16", "fp16")])
def test_recompute_under_autocast_casts_as_the_forward(precision, low):
    """torch.utils.checkpoint restores the forward's autocast state for its recompute; with rooflow's emulation
    it had found fp32 tensors where the forward saved bf16 ones and failed (CheckpointError)."""
    est = step(False, precision)
    ops = est.ops[(est.ops["phase"] == "backward") & est.ops["op"].isin(["addmm", "mm"])]
    assert set(ops["compute_precision"]) == {low}
    assert est.totals["backward_flops"] == pytest.approx(step(False).totals["backward_flops"])


def test_checkpointed_activations_are_not_held_to_backward():
    plain, checkpointed = step(None).totals, step(False).totals
    held = 2 * (BATCH * HIDDEN * 4) * 2  # per block the first linear's and the GELU's outputs (fp32)
    assert plain["peak_memory_breakdown"]["activations"] - checkpointed["peak_memory_breakdown"]["activations"] \
        >= held


def test_recompute_on_a_torch_without_redispatch(monkeypatch):
    """torch 2.11 (the lent H100/H200 image) has no torch.overrides.redispatch_function: the mode that stays active
    through ``loss.backward()`` re-enters it by the older hop, with the same ops recorded."""
    def ops():
        table = step(False, "bf16").ops
        return sorted(zip(table["op"], table["phase"], table["layer"], table["compute_precision"], table["flops"]))

    with_redispatch = ops()
    monkeypatch.delattr(torch.overrides, "redispatch_function")
    monkeypatch.delattr(torch._C, "_skip_one_hop_torch_function")
    without = ops()
    assert without == with_redispatch
    assert ("addmm", "backward", "blocks.0.0", "bf16") in {row[:4] for row in without}
