"""What a measurement ran on: recorded beside every measurement so a number can be explained later."""

from __future__ import annotations

import os
import platform
import socket
import time
from typing import Any

# NVML "clocks event reasons" (formerly "clocks throttle reasons", nvml.h nvmlClocksEventReason*) that
# slow a running measurement down. Not listed, because they are no slowdown of a busy GPU: 0x1 GpuIdle,
# 0x2 ApplicationsClocksSetting (clocks set on purpose), 0x10 SyncBoost, 0x100 DisplayClockSetting.
SLOWDOWN_REASONS = {
    0x4: "sw_power_cap",  # the board's power limit: clocks lowered to stay under it
    0x8: "hw_slowdown",  # hardware slowdown (temperature, power brake) by a factor of 2 or more
    0x20: "sw_thermal_slowdown",  # driver lowers clocks: GPU or memory temperature over its limit
    0x40: "hw_thermal_slowdown",  # hardware: temperature too high
    0x80: "hw_power_brake_slowdown",  # hardware: an external power brake (the system's power supply)
}


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_state(index: int = 0) -> dict[str, Any]:
    """Clocks, temperature, power and driver of one GPU through NVML; empty where NVML is absent."""
    try:
        import pynvml
    except ImportError:
        return {}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return {}
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        state = {
            "gpu_name": pynvml.nvmlDeviceGetName(handle),
            "driver_version": pynvml.nvmlSystemGetDriverVersion(),
            "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "memory_clock_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
            "max_sm_clock_mhz": pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "temperature_celsius": pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
            "power_watts": pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
        }
        return {k: (v.decode() if isinstance(v, bytes) else v) for k, v in state.items()}
    except pynvml.NVMLError as error:
        return {"nvml_error": str(error)}
    finally:
        pynvml.nvmlShutdown()


def describe(threads: int | None = None) -> dict[str, Any]:
    """Versions, host, CPU, GPU and the math-mode flags that change what a kernel does."""
    import torch

    info: dict[str, Any] = {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": threads if threads is not None else torch.get_num_threads(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "cuda_available": torch.cuda.is_available(),
        "allow_tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "allow_tf32_cudnn": torch.backends.cudnn.allow_tf32,
    }
    try:
        import torchvision

        info["torchvision"] = torchvision.__version__
    except ImportError:
        pass
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(
            cuda=torch.version.cuda,
            cudnn=torch.backends.cudnn.version(),
            gpu_name=props.name,
            gpu_compute_capability=f"sm_{props.major}{props.minor}",
            gpu_memory_bytes=props.total_memory,
            gpu_sm_count=props.multi_processor_count,
        )
        info.update(gpu_state(0))
    return info


def slowdown_reasons(mask: int) -> list[str]:
    """Names of the slowdown reasons set in an NVML clocks-event-reasons bit mask (SLOWDOWN_REASONS)."""
    return [name for bit, name in SLOWDOWN_REASONS.items() if int(mask) & bit]


class GpuMonitor:
    """Samples one GPU's clocks-event (throttle) reasons, SM clock, temperature and power through NVML while
    a measurement runs: `with GpuMonitor() as m: ... m.sample() ...; m.summary()`. A no-op where NVML is
    absent. Each sample is four NVML queries (tens of microseconds); `sample()` skips calls closer together
    than `min_interval_seconds`, so calling it after every timed iteration stays cheap.

    `nvml` is the pynvml module, or a stand-in with the same functions (tests); `uuid` ("GPU-...") picks the
    GPU the measurement runs on, since NVML's indices ignore CUDA_VISIBLE_DEVICES (set by SLURM's gres)."""

    def __init__(self, index: int = 0, uuid: str | None = None, nvml: Any = None,
                 min_interval_seconds: float = 0.02, clock=time.monotonic):
        self.index, self.uuid, self.nvml = index, uuid, nvml
        self.min_interval_seconds, self.clock = min_interval_seconds, clock
        self.handle: Any = None
        self.error: str | None = None
        self.samples: list[dict[str, Any]] = []
        self._last = float("-inf")

    def __enter__(self) -> GpuMonitor:
        if self.nvml is None:
            try:
                import pynvml
            except ImportError:
                self.error = "pynvml is not installed"
                return self
            self.nvml = pynvml
        try:
            self.nvml.nvmlInit()
        except Exception as error:  # noqa: BLE001 - NVMLError subclasses, driver missing
            self.error, self.nvml = f"NVML unavailable: {error}", None
            return self
        try:
            self.handle = (self.nvml.nvmlDeviceGetHandleByUUID(self.uuid) if self.uuid
                           else self.nvml.nvmlDeviceGetHandleByIndex(self.index))
            self.max_sm_clock_mhz = self.nvml.nvmlDeviceGetMaxClockInfo(self.handle, self.nvml.NVML_CLOCK_SM)
            self.power_limit_watts = self.nvml.nvmlDeviceGetEnforcedPowerLimit(self.handle) / 1000.0
        except Exception as error:  # noqa: BLE001
            self.error, self.handle = f"NVML query failed: {error}", None
        return self

    def __exit__(self, *exc) -> None:
        if self.nvml is not None:
            try:
                self.nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001, S110 - shutting down a library that may be half-initialised
                pass

    def _reasons(self) -> int:
        query = getattr(self.nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            self.nvml.nvmlDeviceGetCurrentClocksThrottleReasons  # drivers before 535
        return int(query(self.handle))

    def sample(self) -> None:
        if self.handle is None:
            return
        now = self.clock()
        if now - self._last < self.min_interval_seconds:
            return
        self._last = now
        nvml = self.nvml
        try:
            self.samples.append({
                "reasons": self._reasons(),
                "sm_clock_mhz": nvml.nvmlDeviceGetClockInfo(self.handle, nvml.NVML_CLOCK_SM),
                "temperature_celsius": nvml.nvmlDeviceGetTemperature(self.handle, nvml.NVML_TEMPERATURE_GPU),
                "power_watts": nvml.nvmlDeviceGetPowerUsage(self.handle) / 1000.0,
            })
        except Exception as error:  # noqa: BLE001 - one failed query must not end a measurement
            self.error = f"NVML query failed: {error}"
            self.handle = None

    def summary(self) -> dict[str, Any]:
        """What the GPU did during the samples: `throttled` when any slowdown reason was seen, with the
        reasons, how many samples had one, and the SM clock, temperature and power ranges."""
        out: dict[str, Any] = {"samples": len(self.samples)}
        if self.error:
            out["nvml_error"] = self.error
        if not self.samples:
            out["throttled"] = None  # unknown, not "no"
            return out
        seen = 0
        for sample in self.samples:
            seen |= sample["reasons"]
        reasons = slowdown_reasons(seen)
        clocks = [s["sm_clock_mhz"] for s in self.samples]
        out.update(
            throttled=bool(reasons), reasons=reasons,
            throttled_samples=sum(1 for s in self.samples if slowdown_reasons(s["reasons"])),
            sm_clock_mhz_min=min(clocks), sm_clock_mhz_max=max(clocks),
            max_sm_clock_mhz=getattr(self, "max_sm_clock_mhz", None),
            temperature_celsius_max=max(s["temperature_celsius"] for s in self.samples),
            power_watts_max=max(s["power_watts"] for s in self.samples),
            power_limit_watts=getattr(self, "power_limit_watts", None),
        )
        return out


def throttle_reading(summary: dict[str, Any] | None) -> str:
    """'sw_power_cap in 12 of 30 samples; SM clock 1005-1410 MHz (max 1980); up to 84 °C; up to 398 W of
    400 W': a GpuMonitor summary as the report shows it; empty when nothing slowed the GPU down."""
    if not summary or not summary.get("throttled"):
        return ""
    parts = [f"{', '.join(summary['reasons'])} in {summary['throttled_samples']} of {summary['samples']} samples"]
    clock = f"SM clock {summary['sm_clock_mhz_min']}-{summary['sm_clock_mhz_max']} MHz"
    if summary.get("max_sm_clock_mhz"):
        clock += f" (max {summary['max_sm_clock_mhz']})"
    parts.append(clock)
    parts.append(f"up to {summary['temperature_celsius_max']} °C")
    power = f"up to {summary['power_watts_max']:.0f} W"
    if summary.get("power_limit_watts"):
        power += f" of {summary['power_limit_watts']:.0f} W"
    parts.append(power)
    return "; ".join(parts)
