"""The GPU L2 read kernel of `rooflow ceilings` (Triton), imported only where an L2 roof is measured.

A grid-stride sum over a resident fp32 buffer, `passes` times per launch, with `ld.global.cg` loads (cached
in L2, not in L1): the bytes come from L2, and one launch reads hundreds of MB from a buffer of a few MB, so
it lasts tens of microseconds and launch overhead does not matter. Each program writes one fp32 partial sum;
with a buffer of ones their total is passes × elements, which rooflow.ceilings.measure checks before it trusts the
byte count.

Builtins only (tl.full, tl.reduce with our own combine function — not tl.zeros or tl.sum): Triton's standard
library functions are compiled-mode objects when Triton was imported before TRITON_INTERPRET was set, and the
tests run this kernel in Triton's CPU interpreter (rooflow.ceilings.measure.l2_read_kernel loads a fresh copy of this
module for each mode).
"""

import triton
import triton.language as tl


@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def l2_read(x_ptr, out_ptr, n, passes, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    acc = tl.full([BLOCK], 0.0, tl.float32)
    for _ in range(passes):
        for start in range(pid * BLOCK, n, programs * BLOCK):
            offsets = start + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + offsets, mask=offsets < n, other=0.0, cache_modifier=".cg")
    tl.store(out_ptr + pid, tl.reduce(acc, 0, _add))
