"""A CPU's theoretical peak FLOP/s from its microarchitecture (FLOP per cycle per core × cores × clock),
with the sources and the assumptions written out."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

GIGA = 1e9

# Sources for the per-core FP32 throughput of each microarchitecture (FLOP per cycle per core, one FMA = 2).
# Counted: the FMA units only. GEMMs and convolutions are FMA work, so the two extra FADD pipes of AMD Zen 2-4
# (which would allow FMA + ADD mixes above this number) are not counted.
AGNER = "https://www.agner.org/optimize/microarchitecture.pdf"  # Agner Fog, "The microarchitecture of ..."
INTEL_OPT = "Intel 64 and IA-32 Architectures Optimization Reference Manual (order 248966), per-core FLOP table"
AMD_ZEN2 = "AMD Software Optimization Guide for AMD Family 17h Models 30h and Greater (pub. 56305)"
AMD_ZEN3 = "AMD Software Optimization Guide for AMD Family 19h Processors (pub. 56665)"
AMD_ZEN4 = ("AMD Software Optimization Guide for the AMD Zen4 Microarchitecture (pub. 57647): 512-bit ops "
            "execute on the 256-bit datapaths")
AMD_ZEN5 = "AMD Software Optimization Guide for the AMD Zen5 Microarchitecture (pub. 58455)"
ARM_NEOVERSE = "Arm Neoverse N1/V1/N2/V2 Software Optimization Guides (Arm developer documentation)"


@dataclass(frozen=True)
class Microarchitecture:
    """One CPU core design: how many FP32 FLOPs one core can retire per cycle at most, and why."""

    name: str
    fp32_flops_per_cycle: int  # per core: FMA units × FP32 lanes per unit × 2 (or add + multiply lanes)
    datapath: str  # the execution units behind the number
    source: str


def _intel(name: str, flops: int, datapath: str) -> Microarchitecture:
    return Microarchitecture(name, flops, datapath, f"{INTEL_OPT}; {AGNER}")


_AVX_NO_FMA = "1x256-bit add + 1x256-bit multiply per cycle (AVX, no FMA): 8 + 8 FP32 FLOP"
_TWO_256_FMA = "2x256-bit FMA units (AVX2): 2 x 8 lanes x 2"
_ONE_512_FMA = "1x512-bit FMA (ports 0+1 fused; client parts have no port-5 FMA): 16 lanes x 2"
_TWO_512_FMA = "2x512-bit FMA units (AVX-512): 2 x 16 lanes x 2"
_SKYLAKE_SP = "Skylake-SP / Cascade Lake / Cooper Lake"

# Intel family 6 model numbers (Intel SDM vol. 4, table 2-1, and the Linux kernel's intel-family.h).
INTEL_FAMILY6: dict[int, Microarchitecture] = {
    **{m: _intel("Sandy Bridge", 16, _AVX_NO_FMA) for m in (0x2A, 0x2D)},
    **{m: _intel("Ivy Bridge", 16, _AVX_NO_FMA) for m in (0x3A, 0x3E)},
    **{m: _intel("Haswell", 32, _TWO_256_FMA) for m in (0x3C, 0x3F, 0x45, 0x46)},
    **{m: _intel("Broadwell", 32, _TWO_256_FMA) for m in (0x3D, 0x47, 0x4F, 0x56)},
    **{m: _intel("Skylake (client)", 32, _TWO_256_FMA) for m in (0x4E, 0x5E)},
    **{m: _intel("Kaby/Coffee/Comet Lake", 32, _TWO_256_FMA) for m in (0x8E, 0x9E, 0xA5, 0xA6)},
    **{m: _intel("Cannon/Ice/Tiger/Rocket Lake (client)", 32, _ONE_512_FMA)
       for m in (0x66, 0x7D, 0x7E, 0x8C, 0x8D, 0xA7)},
    **{m: _intel("Ice Lake-SP", 64, _TWO_512_FMA) for m in (0x6A, 0x6C)},
    **{m: _intel("Sapphire/Emerald/Granite Rapids", 64, _TWO_512_FMA) for m in (0x8F, 0xCF, 0xAD, 0xAE)},
    **{m: _intel("Alder/Raptor/Meteor/Arrow/Lunar Lake (P-core)", 32,
                 _TWO_256_FMA + "; E-cores have 2x128-bit: half")
       for m in (0x97, 0x9A, 0xB7, 0xBA, 0xBF, 0xAA, 0xAC, 0xC5, 0xC6, 0xBD)},
    **{m: _intel("Knights Landing/Mill (Xeon Phi)", 64, _TWO_512_FMA) for m in (0x57, 0x85)},
}


def _skylake_sp(model_name: str) -> Microarchitecture:
    """Skylake-SP/Cascade Lake parts differ by SKU: Platinum, Gold 6xxx, Xeon W and the HEDT Core i7/i9 have
    two 512-bit FMA units; Silver, Bronze and most Gold 5xxx one (Intel ARK, "# of AVX-512 FMA Units")."""
    one_unit = re.search(r"\b(Silver|Bronze)\b", model_name) or (
        re.search(r"\bGold\s+5\d{3}", model_name) and not re.search(r"\bGold\s+5122\b", model_name))
    if one_unit:
        return _intel(f"{_SKYLAKE_SP} (one 512-bit FMA unit: Silver/Bronze/Gold 5xxx)", 32,
                      "1x512-bit FMA unit (port 0+1 fused; no port-5 FMA on this SKU): 16 lanes x 2")
    return _intel(f"{_SKYLAKE_SP} (two 512-bit FMA units)", 64, _TWO_512_FMA + " (Platinum, Gold 6xxx, W, HEDT)")


def _amd(family: int, model: int, flags: set[str]) -> Microarchitecture | None:
    if family == 0x17:
        if model < 0x30:
            return Microarchitecture("AMD Zen / Zen+", 16, "2x128-bit FMA units: 2 x 4 lanes x 2",
                                     f"AMD Software Optimization Guide for AMD Family 17h (pub. 55723); {AGNER}")
        return Microarchitecture("AMD Zen 2", 32, _TWO_256_FMA, AMD_ZEN2)
    if family == 0x19:
        if "avx512f" in flags:
            return Microarchitecture(
                "AMD Zen 4", 32, "AVX-512 executed on 256-bit datapaths (each 512-bit op issues twice): "
                "2x256-bit FMA units, 2 x 8 lanes x 2", AMD_ZEN4)
        return Microarchitecture("AMD Zen 3", 32, _TWO_256_FMA, AMD_ZEN3)
    if family == 0x1A:
        if model <= 0x1F or 0x40 <= model <= 0x4F:  # Turin (server), Granite Ridge (desktop)
            return Microarchitecture("AMD Zen 5 (server/desktop)", 64, "full 512-bit datapaths: " + _TWO_512_FMA,
                                     AMD_ZEN5)
        if 0x20 <= model <= 0x2F:  # Strix Point (mobile)
            return Microarchitecture("AMD Zen 5 (mobile)", 32, "AVX-512 on 256-bit datapaths: 2x256-bit FMA",
                                     AMD_ZEN5)
    return None


# Arm Neoverse cores by `CPU implementer` 0x41 and `CPU part` (Arm technical reference manuals).
ARM_PARTS: dict[int, Microarchitecture] = {
    0xD0C: Microarchitecture("Arm Neoverse N1 (e.g. AWS Graviton2)", 16, "2x128-bit NEON FMA: 2 x 4 lanes x 2",
                             ARM_NEOVERSE),
    0xD40: Microarchitecture("Arm Neoverse V1 (e.g. AWS Graviton3)", 32,
                             "4x128-bit NEON FMA (or 2x256-bit SVE): 4 x 4 lanes x 2", ARM_NEOVERSE),
    0xD49: Microarchitecture("Arm Neoverse N2", 16, "2x128-bit NEON/SVE2 FMA: 2 x 4 lanes x 2", ARM_NEOVERSE),
    0xD4F: Microarchitecture("Arm Neoverse V2 (e.g. AWS Graviton4, NVIDIA Grace)", 32,
                             "4x128-bit NEON/SVE2 FMA: 4 x 4 lanes x 2", ARM_NEOVERSE),
}


def _isa_upper_bound(flags: set[str]) -> tuple[int, str]:
    """FP32 FLOP/cycle/core an unknown core could reach at most with its widest ISA and two FMA units."""
    if "avx512f" in flags:
        return 64, "avx512f: 2 x 16 lanes x 2 (two 512-bit FMA units)"
    if ("avx2" in flags or "avx" in flags) and "fma" in flags:
        return 32, "avx2+fma: 2 x 8 lanes x 2 (two 256-bit FMA units)"
    if "avx" in flags:
        return 16, "avx without fma: 8 add + 8 multiply lanes"
    if "asimd" in flags:
        return 16, "asimd (NEON): 2 x 4 lanes x 2 (two 128-bit FMA units)"
    if "sse2" in flags:
        return 8, "sse2: 4 add + 4 multiply lanes"
    return 2, "scalar: one FMA"


def _cpuinfo_fields(cpuinfo: str) -> dict[str, Any]:
    """The first processor's fields of a /proc/cpuinfo text, plus the physical core count where known."""
    fields: dict[str, str] = {}
    packages: set[str] = set()
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "physical id":
            packages.add(value)
        if key == "Features":
            key = "flags"
        fields.setdefault(key, value)
    out: dict[str, Any] = dict(fields)
    out["flag_set"] = set(fields.get("flags", "").split())
    out["packages"] = max(1, len(packages))
    return out


def _number(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text, 0)  # "25", "0xd0c"
    except ValueError:
        return None


def cpu_microarchitecture(cpuinfo: str) -> dict[str, Any]:
    """The core design of a /proc/cpuinfo text: {name, fp32_flops_per_cycle (per core), datapath, source,
    known, how} — from vendor_id, cpu family, model, model name and flags (x86) or CPU implementer and
    CPU part (Arm). An unknown core gets an UPPER BOUND from its widest ISA (two FMA units) and says so."""
    fields = _cpuinfo_fields(cpuinfo)
    flags = fields["flag_set"]
    vendor = fields.get("vendor_id", "")
    family, model = _number(fields.get("cpu family")), _number(fields.get("model"))
    model_name = fields.get("model name", "")
    found: Microarchitecture | None = None
    identity = f"vendor {vendor or '?'}, family {family}, model {model}"
    if vendor == "GenuineIntel" and family == 6 and model is not None:
        found = _skylake_sp(model_name) if model == 0x55 else INTEL_FAMILY6.get(model)
    elif vendor == "AuthenticAMD" and family is not None and model is not None:
        found = _amd(family, model, flags)
    elif _number(fields.get("CPU implementer")) == 0x41:
        part = _number(fields.get("CPU part"))
        identity = f"Arm CPU part {fields.get('CPU part')}"
        found = ARM_PARTS.get(part) if part is not None else None
    if found is not None:
        return {"name": found.name, "fp32_flops_per_cycle": found.fp32_flops_per_cycle,
                "datapath": found.datapath, "source": found.source, "known": True,
                "how": f"{identity} ({model_name or 'no model name'})"}
    flops, why = _isa_upper_bound(flags)
    return {"name": "unknown", "fp32_flops_per_cycle": flops, "datapath": why, "source": None, "known": False,
            "how": (f"{identity} ({model_name or 'no model name'}) is not in rooflow's table "
                    "(rooflow.ceilings.measure.INTEL_FAMILY6, _amd, ARM_PARTS): assumed two FMA units of the widest ISA, "
                    "an UPPER bound (many cores have one)")}


def theoretical_cpu_peak(cpuinfo: str, cores: int, sustained: dict[str, Any] | None = None) -> dict[str, Any]:
    """fp32 peak of `cores` cores from a /proc/cpuinfo text: cores × clock × FP32 FLOP/cycle/core of the
    core's microarchitecture (:func:`cpu_microarchitecture`: AMD Zen 4 runs AVX-512 on 256-bit datapaths,
    32 FLOP/cycle, not 64; a Xeon Silver has one 512-bit FMA unit, a Platinum two; Ivy Bridge has no FMA).

    Clock: the clock the cores sustain under load where it was measured (``sustained``:
    rooflow.ceilings.clock.sustained_clock, a chain of dependent adds on every thread), else the nominal (base)
    clock in the model name ("@ 2.60GHz") where there is one, else the highest `cpu MHz` (a VM's model name
    often has none); with a nominal clock, turbo is not modelled, so a measured peak above this one means the
    cores ran above that clock (a check flags it). `cores` beyond the physical cores
    (SMT siblings) are not counted: a sibling thread shares its core's FMA units. Returns
    {"flops_per_second": {"fp32": x} or {}, "basis": how it was derived, "microarchitecture": name, ...}.
    """
    fields = _cpuinfo_fields(cpuinfo)
    uarch = cpu_microarchitecture(cpuinfo)
    model = fields.get("model name", "")
    mhz = []
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "cpu MHz":
            try:
                mhz.append(float(value))
            except ValueError:
                pass
    nominal = re.search(r"@\s*([\d.]+)\s*GHz", model)
    if nominal:
        clock_hz, clock_from = float(nominal.group(1)) * 1e9, "the nominal (base) clock in the model name"
    elif mhz:
        clock_hz, clock_from = max(mhz) * 1e6, "the highest 'cpu MHz' in /proc/cpuinfo"
    else:
        clock_hz, clock_from = None, None
    nominal_clock_hz = clock_hz
    if sustained and sustained.get("clock_hz"):
        clock_hz = float(sustained["clock_hz"])
        clock_from = (f"the clock the cores sustained under load ({sustained.get('how', 'measured')}"
                      + (f"; nominal {nominal_clock_hz / 1e9:.3f} GHz" if nominal_clock_hz else "") + ")")

    counted, smt_note = cores, ""
    siblings, per_package = _number(fields.get("siblings")), _number(fields.get("cpu cores"))
    if siblings and per_package and siblings > per_package:
        physical = per_package * fields["packages"]
        if cores > physical:
            counted = physical
            smt_note = (f"; {cores} threads run on {physical} physical cores (SMT: {siblings} logical CPUs share "
                        f"{per_package} cores per package), and sibling threads share their core's FMA units, "
                        f"so {physical} cores are counted")
        else:
            smt_note = f"; SMT: {siblings} logical CPUs share {per_package} cores, so threads beyond cores add no FMA units"

    flops_per_cycle = uarch["fp32_flops_per_cycle"]
    result: dict[str, Any] = {
        "cores": counted, "threads": cores, "clock_hz": clock_hz, "nominal_clock_hz": nominal_clock_hz,
        "clock_measured": bool(sustained and sustained.get("clock_hz")), "model_name": model or None,
        "microarchitecture": uarch["name"], "microarchitecture_known": uarch["known"],
        "fp32_flops_per_cycle_per_core": flops_per_cycle, "datapath": uarch["datapath"],
        "microarchitecture_source": uarch["source"], "identified_from": uarch["how"],
    }
    if clock_hz is None:
        result["flops_per_second"] = {}
        result["basis"] = f"no clock in /proc/cpuinfo: no theoretical peak (microarchitecture {uarch['name']})"
        return result
    peak = counted * clock_hz * flops_per_cycle
    result["flops_per_second"] = {"fp32": peak}
    known = (f"microarchitecture {uarch['name']} ({uarch['how']}; source {uarch['source']})" if uarch["known"]
             else f"microarchitecture UNKNOWN: {uarch['how']}")
    result["basis"] = (
        f"{counted} cores x {clock_hz / 1e9:.3f} GHz x {flops_per_cycle} FP32 FLOP/cycle/core "
        f"[{uarch['datapath']}] = {peak / GIGA:.1f} GFLOP/s; {known}; clock from {clock_from}"
        + ("" if result["clock_measured"] else "; turbo and AVX frequency licences ignored") + smt_note)
    return result
