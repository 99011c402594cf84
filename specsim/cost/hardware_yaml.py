"""A HardwareProfile back in the YAML schema hardware.py reads (`specsim calibrate` writes fitted
profiles with it; `specsim hardware show` lists it): typed mappings, plain dicts at run time, their keys
in the schema's order (a written profile is compared byte for byte)."""

from __future__ import annotations

import dataclasses
from typing import Any, TypedDict

from specsim.cost.hardware_profile import CostModelChoice, FrameworkKernels, HardwareProfile


class AllreduceYaml(TypedDict):
    """One GPU count of an all-reduce table (interconnect.allreduce_by_world_size)."""

    latency_us: float
    busbw_gb_per_s: float
    sharpness: float


class AlltoallYaml(TypedDict):
    """One mode of the MoE all-to-all parameters (interconnect.alltoall)."""

    dispatch_latency_us: float
    dispatch_efficiency: float
    combine_latency_us: float
    combine_efficiency: float


class AlltoallFrameworkYaml(TypedDict):
    """One mode of a framework's all-to-all parameters (interconnect.alltoall.<vllm | trtllm>)."""

    dispatch_overhead_us: float
    dispatch_efficiency: float
    combine_overhead_us: float
    combine_efficiency: float
    sharpness: float
    dispatch_copy_ns: float
    combine_copy_ns: float


class InterconnectYaml(TypedDict, total=False):
    """The interconnect block; the all-reduce tables and the all-to-all block only where the profile has them."""

    kind: str
    link_bw_gb_per_s: float
    allreduce_busbw_gb_per_s: float
    allreduce_latency_us: float
    allreduce_by_world_size: dict[int, AllreduceYaml]
    allreduce_by_implementation: dict[str, dict[int, AllreduceYaml]]
    #: DeepEP's modes (ll, normal) at the top level, then one {mode: parameters} block per framework
    alltoall: dict[str, AlltoallYaml | dict[str, AlltoallFrameworkYaml]]


class ProfileYaml(TypedDict, total=False):
    """A whole profile. Keys that hold their default (attention_kernel fa3, moe_kernel grouped, no tuned
    configs, the roofline cost model) are left out, so every key is optional here."""

    name: str
    description: str
    vendor: str
    sm_count: int
    clock_mhz: float
    memory_gb: float
    memory_gib: float
    mem_bw_tb_per_s: float
    l2_mb: float
    peak_tflops: dict[str, float | None]
    interconnect: InterconnectYaml
    launch_overhead_us: float
    attention_kernel: str
    moe_kernel: str
    gemm_dispatch: dict[str, str]
    moe_tuned_configs: list[str]
    efficiency: dict[str, float | str]
    provenance: dict[str, Any]
    cost_model: dict[str, str | None]
    frameworks: dict[str, dict[str, Any]]


def _allreduce_yaml(table: dict[int, tuple[float, float, float]]) -> dict[int, AllreduceYaml]:
    return {int(n): {"latency_us": lat * 1e6, "busbw_gb_per_s": bw / 1e9, "sharpness": p}
            for n, (lat, bw, p) in sorted(table.items())}


def _interconnect_yaml(hw: HardwareProfile) -> InterconnectYaml:
    ic = hw.interconnect
    out: InterconnectYaml = {
        "kind": ic.kind,
        "link_bw_gb_per_s": ic.link_bw_bytes_per_s / 1e9,
        "allreduce_busbw_gb_per_s": ic.allreduce_busbw_bytes_per_s / 1e9,
        "allreduce_latency_us": ic.allreduce_latency_s * 1e6,
    }
    if ic.allreduce_by_world_size:
        out["allreduce_by_world_size"] = _allreduce_yaml(ic.allreduce_by_world_size)
    if ic.allreduce_by_implementation:
        out["allreduce_by_implementation"] = {impl: _allreduce_yaml(t)
                                              for impl, t in ic.allreduce_by_implementation.items()}
    if ic.alltoall:
        a2a: dict[str, AlltoallYaml | dict[str, AlltoallFrameworkYaml]] = {}
        for mode, p in ic.alltoall.get("deepep", {}).items():
            a2a[mode] = {"dispatch_latency_us": p[0] * 1e6, "dispatch_efficiency": p[1],
                         "combine_latency_us": p[2] * 1e6, "combine_efficiency": p[3]}
        for impl, modes in ic.alltoall.items():
            if impl != "deepep":
                a2a[impl] = {mode: {"dispatch_overhead_us": p[0] * 1e6, "dispatch_efficiency": p[1],
                                    "combine_overhead_us": p[2] * 1e6, "combine_efficiency": p[3],
                                    "sharpness": p[4], "dispatch_copy_ns": p[5] * 1e9,
                                    "combine_copy_ns": p[6] * 1e9}
                             for mode, p in modes.items()}
        out["alltoall"] = a2a
    return out


def profile_yaml_dict(hw: HardwareProfile) -> ProfileYaml:
    """The profile in the YAML schema it was read from (for fitted profiles)."""
    out: ProfileYaml = {
        "name": hw.name,
        "description": hw.description,
        "vendor": hw.vendor,
        "sm_count": hw.sm_count,
        "clock_mhz": hw.clock_mhz,
        "memory_gb": hw.memory_bytes / 1e9,
        "memory_gib": hw.total_memory_bytes / 2**30,
        "mem_bw_tb_per_s": hw.mem_bw_bytes_per_s / 1e12,
        "l2_mb": hw.l2_bytes / 1e6,
        "peak_tflops": {
            k: (None if v is None else v / 1e12) for k, v in hw.peak_flops_per_s.items()
        },
        "interconnect": _interconnect_yaml(hw),
        "launch_overhead_us": hw.launch_overhead_s * 1e6,
    }
    if hw.attention_kernel != "fa3":
        out["attention_kernel"] = hw.attention_kernel
    if hw.moe_kernel != "grouped":
        out["moe_kernel"] = hw.moe_kernel
    if hw.moe_tuned_configs:
        out["moe_tuned_configs"] = list(hw.moe_tuned_configs)
    if hw.gemm_dispatch:
        out["gemm_dispatch"] = dict(hw.gemm_dispatch)
    out["efficiency"] = dataclasses.asdict(hw.efficiency)
    out["provenance"] = hw.provenance
    if hw.cost_model != CostModelChoice():
        out["cost_model"] = dataclasses.asdict(hw.cost_model)
    if hw.frameworks:
        out["frameworks"] = {name: framework_yaml(k) for name, k in hw.frameworks.items()}
    return out


def framework_yaml(k: FrameworkKernels) -> dict[str, Any]:
    """One framework's kernels block (frameworks.<name>)."""
    out: dict[str, Any] = {}
    if k.attention_kernel:
        out["attention_kernel"] = k.attention_kernel
    if k.gemm_dispatch is not None:
        out["gemm_dispatch"] = dict(k.gemm_dispatch)
    out["efficiency"] = {f: v for f, v in dataclasses.asdict(k.efficiency).items() if f != "source"}
    if k.allreduce_by_implementation:
        out["allreduce_by_implementation"] = {impl: _allreduce_yaml(t)
                                              for impl, t in k.allreduce_by_implementation.items()}
    if k.source:
        out["source"] = k.source
    return out
