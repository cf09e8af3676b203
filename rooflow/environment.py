"""What a measurement ran on: recorded beside every measurement so a number can be explained later."""

from __future__ import annotations

import os
import platform
import socket
from typing import Any


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
