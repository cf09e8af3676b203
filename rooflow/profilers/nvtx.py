"""The NVTX ranges rooflow's profiling driver pushes, and the one parser of the stacks ncu's ``--nvtx``
writes beside each kernel (the ``thread Domain:Push/Pop_Range`` column).

The driver (rooflow.measure.driver) pushes ``phase:<forward|loss|backward|optimizer>``, ``layer:<module>``
and, in the distinct-kernel mode, ``rooflow:sig:<k>`` around the first call of each aten op signature; the
per-layer attribution (layers), the distinct mode's expansion (distinct) and the timeline read them back.
"""

from __future__ import annotations

import re
from typing import Any

PLAN_FORMAT = "rooflow-ncu-plan/1"
PHASE_RANGE = "phase:"
LAYER_RANGE = "layer:"
SIGNATURE_RANGE = "rooflow:sig:"
PHASES = ("forward", "loss", "backward", "optimizer")
DEFAULT_DOMAIN = "<default domain>"
NVTX_ITEM_TAIL = ":none:none:none:none:none:none"  # PL_Type … Msg of a push/pop item without payload or color

_ITEM = re.compile(r'"([^"]*)"')


def parse_nvtx_stack(text: Any) -> tuple[str, list[str]]:
    """(thread id, messages outermost first) of one ncu ``thread Domain:Push/Pop_Range`` cell:
    ``1360  "<default domain>:phase:forward:none:…"  "…"`` -> ("1360", ["phase:forward", …]).

    An item is ``<domain>:<message>:<payload>:...``: the domain (``<default domain>`` or a name) is cut at
    its first colon, the trailing payload/category/colour fields (``:none``...) at the last colons; the
    message keeps its own colons (``layer:features.0``, ``autograd::engine::evaluate_function: ...``)."""
    if not isinstance(text, str) or not text.strip():
        return "", []
    text = text.strip()
    thread = "" if text.startswith('"') else text.split(None, 1)[0]
    messages = []
    for item in _ITEM.findall(text):
        if item.startswith("<") and ">:" in item:
            body = item[item.index(">:") + 2:]
        else:
            body = item.split(":", 1)[1] if ":" in item else item
        # ncu appends six fields (payload type, payload, category, colour, ...), "none" where unset
        parts = body.rsplit(":", 6)
        if len(parts) == 7 and parts[1:] == ["none"] * 6:
            body = parts[0]
        else:
            while body.endswith(":none"):
                body = body[:-5]
        messages.append(body.strip())
    return thread, messages


def format_nvtx_stack(thread: str, messages: list[str], domain: str = DEFAULT_DOMAIN) -> str:
    """The inverse of :func:`parse_nvtx_stack`, as ncu writes the column (two spaces between items)."""
    items = "  ".join(f'"{domain}:{message}{NVTX_ITEM_TAIL}"' for message in messages)
    return f"{thread}  {items}" if thread else items


def innermost(messages: list[str], prefix: str) -> str | None:
    """The innermost open range that starts with `prefix`, without it (``layer:features.0`` -> features.0)."""
    for message in reversed(messages):
        if message.startswith(prefix):
            return message[len(prefix):].strip()
    return None
