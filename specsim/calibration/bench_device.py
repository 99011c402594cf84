"""What a bench run records about where it ran: the device, the software, the timing settings."""

from __future__ import annotations

import datetime as dt
import os
import platform
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specsim.calibration.bench_backend import Backend, cpu_cache_bytes

# GPU names (torch.cuda.get_device_name) -> bundled profile names.
_PROFILE_NAMES = (
    (r"H100.*PCIe", "h100-pcie"), (r"H100", "h100-sxm"), (r"H200", "h200"), (r"B200", "b200"),
    (r"A100.*40GB", "a100-sxm-40gb"), (r"A100", "a100-sxm-80gb"), (r"L40S", "l40s"), (r"MI300X", "mi300x"),
)


def profile_name(device_name: str) -> str:
    """A bundled profile name for a GPU name, else a slug of the name."""
    for pattern, name in _PROFILE_NAMES:
        if re.search(pattern, device_name, re.IGNORECASE):
            return name
    return re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-") or "unknown"


@dataclass(frozen=True)
class CudaDevice:
    """The GPU a CUDA run timed (fields in the order the sidecar JSON lists them)."""

    device_name: str
    device_count: int
    sm_count: int
    memory_bytes: int
    l2_bytes: int | None
    driver_version: str | None  # the CUDA driver API version, e.g. "12.4"
    profile: str  # the bundled profile of this GPU (profile_name)


@dataclass(frozen=True)
class CpuDevice:
    """The CPU a CPU run timed (fields in the order the sidecar JSON lists them)."""

    device_name: str
    threads: int
    cores: int | None
    cache_bytes: float  # the largest cache level
    driver_version: None
    profile: str  # always "cpu"
    load_average_1min: float | None


@dataclass(frozen=True)
class DeviceMeta:
    """Where and how a run timed its kernels; the device's own fields follow these in the sidecar JSON."""

    backend: str  # "cuda" | "cpu"
    dtype: str
    torch_version: str
    cuda_version: str | None
    date: str  # UTC, ISO 8601 to the second
    host: str
    python: str
    warmup: int
    repeats: int
    rotate_bytes: float
    clocks: str
    device: CudaDevice | CpuDevice


def device_meta(be: Backend, dtype: str) -> DeviceMeta:
    torch = be.torch
    device = _cuda_device(torch) if be.device == "cuda" else _cpu_device(torch)
    return DeviceMeta(
        backend=be.device, dtype=dtype, torch_version=torch.__version__, cuda_version=torch.version.cuda,
        date=dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), host=platform.node(),
        python=platform.python_version(), warmup=be.warmup, repeats=be.repeats, rotate_bytes=be.flush_bytes,
        clocks="left as they are (not locked)", device=device)


def _cuda_device(torch: Any) -> CudaDevice:
    props = torch.cuda.get_device_properties(0)
    name = torch.cuda.get_device_name(0)
    return CudaDevice(device_name=name, device_count=torch.cuda.device_count(),
                      sm_count=props.multi_processor_count, memory_bytes=props.total_memory,
                      l2_bytes=getattr(props, "L2_cache_size", None), driver_version=_driver_version(torch),
                      profile=profile_name(name))


def _cpu_device(torch: Any) -> CpuDevice:
    return CpuDevice(device_name=_cpu_name(), threads=torch.get_num_threads(), cores=os.cpu_count(),
                     cache_bytes=cpu_cache_bytes(), driver_version=None, profile="cpu",
                     load_average_1min=os.getloadavg()[0] if hasattr(os, "getloadavg") else None)


def _driver_version(torch: Any) -> str | None:
    try:
        v = torch._C._cuda_getDriverVersion()  # e.g. 12040 -> "12.4" (the CUDA driver API version)
        return f"{v // 1000}.{v % 1000 // 10}"
    except Exception:
        return None


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"
