"""The one place numbers become display text. Data files hold SI base units (`flops`, `bytes`, `seconds`,
`flops_per_second`); tables, sentences and figure labels format them here."""

from __future__ import annotations

import math
from typing import Any

SI_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
BINARY_PREFIXES = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def finite_number(value: Any) -> bool:
    """A JSON number, finite (not a string, a bool, NaN or an infinity)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def positive_number(value: Any) -> bool:
    """A JSON number that can be a roof or a time: finite and above 0 (not a string, a bool, NaN or a negative)."""
    return finite_number(value) and value > 0


def format_quantity(value: float | None, unit: str) -> str:
    """4 significant digits with an SI prefix: 12_345_678_900, "FLOP" -> "12.35 GFLOP"; seconds as
    s/ms/µs/ns; None or NaN -> "not collected"."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "not collected"
    if unit == "s":
        for scale, name in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
            if abs(value) >= scale:
                return f"{value / scale:.4g} {name}"
        return f"{value / 1e-9:.4g} ns"
    for scale, prefix in SI_PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.4g} {prefix}{unit}"
    return f"{value:.4g} {unit}"


def format_si(value: float, unit: str) -> str:
    """3 significant digits with an engineering SI prefix, for figure labels: 19.5 TFLOP/s, 1.56 TB/s."""
    value = float(f"{value:.3g}")
    if value == 0:
        return f"0 {unit}"
    exponent = max(min(int(math.floor(math.log10(abs(value)) / 3) * 3), 15), 0)
    prefix = dict((int(round(math.log10(scale))), p) for scale, p in SI_PREFIXES).get(exponent, "")
    return f"{value / 10 ** exponent:g} {prefix}{unit}"


def format_bytes(value: float | None) -> str:
    """Binary units for memory sizes: 1.50 GiB, 12.00 MiB, 512 bytes; None -> "an unknown amount"."""
    if value is None:
        return "an unknown amount"
    for unit, size in BINARY_PREFIXES:
        if abs(value) >= size:
            return f"{value / size:.2f} {unit}"
    return f"{int(value)} bytes"


def format_flops(flops: float) -> str:
    """FLOPs in a sentence, 4 significant digits: '523.4 GFLOP', '60 GFLOP', '93.2 MFLOP'."""
    if abs(flops) >= 1e9:
        return f"{flops / 1e9:.4g} GFLOP"
    return f"{flops / 1e6:.4g} MFLOP"


def format_scaled(value: float | None, scale: float, digits: int = 2) -> str:
    """`value / scale` with thousands separators and fixed decimals for table columns; None -> '-'."""
    return "-" if value is None else f"{value / scale:,.{digits}f}"


def format_milliseconds(seconds: float) -> str:
    """Milliseconds with 3 significant digits, without exponents: 0.123, 12.3, 3,610."""
    value = seconds * 1e3
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
