"""A base hardware profile of the CPU a bench run timed, from its own peak-matmul and copy rates
(so that `specsim calibrate` can start from it)."""

from __future__ import annotations

from dataclasses import dataclass

from specsim.calibration.bench_device import CpuDevice
from specsim.errors import SpecsimError


@dataclass(frozen=True)
class CpuBaseProfile:
    """The profile YAML's fields, in the order it lists them."""

    name: str
    description: str
    sm_count: int
    clock_mhz: int
    memory_gb: float
    mem_bw_tb_per_s: float
    l2_mb: float
    peak_tflops: dict[str, float | None]
    interconnect: dict[str, str | int]
    launch_overhead_us: int
    measured: dict[str, float]
    efficiency: dict[str, float | str]


def cpu_profile(device: CpuDevice, date: str, peak: float | None, bw: float | None, dtype: str) -> CpuBaseProfile:
    """A base profile of this CPU from the run's peak matmul (TFLOP/s) and copy bandwidth (GB/s) on
    `date`: datasheet fields = measured / 0.9."""
    if not peak or not bw:
        raise SpecsimError("a CPU base profile needs the peak and memcpy measurements (--ops with peak,memcpy)")
    tflops = round(peak / 0.9, 4)
    return CpuBaseProfile(
        name="cpu", description=f"{device.device_name} ({device.threads} threads), from `specsim bench` on {date[:10]}",
        sm_count=int(device.threads or 1), clock_mhz=0, memory_gb=1.0,
        mem_bw_tb_per_s=round(bw / 0.9 / 1e3, 6), l2_mb=round(float(device.cache_bytes or 2**25) / 1e6, 3),
        peak_tflops={"fp32": tflops, "tf32": None, "bf16": tflops, "fp16": tflops, "fp8": None, "int8": None},
        interconnect={"kind": "none", "link_bw_gb_per_s": 1, "allreduce_busbw_gb_per_s": 1,
                      "allreduce_latency_us": 1},
        launch_overhead_us=5, measured={"mem_bw_tb_per_s": bw / 1e3, "gemm_bf16_tflops": peak},
        efficiency={"gemm_compute": 0.9, "memory": 0.9, "kernel_overhead_us": 5.0,
                    "l2_bw_tb_per_s": round(bw / 1e3 * 4, 4),
                    "source": f"measured by `specsim bench` ({dtype}); peak and bandwidth = measured / 0.9"},
    )
