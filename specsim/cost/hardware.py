"""Hardware profiles by name or path: the bundled hardware_profiles/*.yaml or a user's YAML, read and
validated into a HardwareProfile (hardware_profile.py; the schema is the README's "Hardware profiles").
"""

from __future__ import annotations

import dataclasses
from importlib import resources
from pathlib import Path
from typing import Any

from specsim.cost.dtypes import COMPUTE_DTYPES
from specsim.cost.hardware_profile import (
    ALLREDUCE_IMPLEMENTATIONS,
    ATTENTION_KERNELS,
    COST_MODELS,
    MOE_KERNELS,
    TUNED_CONFIG_FILE,
    CostModelChoice,
    Efficiency,
    FrameworkKernels,
    HardwareProfile,
    Interconnect,
)
from specsim.errors import SpecsimError
from specsim.files import is_file, parsed_once, positive, read_mapping, require
from specsim.names import resolve_name, unknown

TOP_LEVEL_KEYS = {"name", "description", "vendor", "sm_count", "clock_mhz", "memory_gb", "memory_gib",
                  "mem_bw_tb_per_s", "l2_mb", "peak_tflops", "interconnect", "launch_overhead_us", "measured",
                  "efficiency", "provenance", "cost_model", "attention_kernel", "moe_kernel",
                  "moe_tuned_configs", "frameworks", "gemm_dispatch"}


def profiles_dir() -> Path:
    """The bundled hardware_profiles/ folder (installed as package data specsim.hardware_profiles)."""
    return Path(str(resources.files("specsim.hardware_profiles")))


def available() -> list[str]:
    return sorted(p.stem for p in profiles_dir().glob("*.yaml"))


def hardware_path(name_or_path: str | Path) -> Path:
    """The YAML of a bundled profile by name (spelt in any case and separators: ``H100-SXM``, ``h100_sxm``),
    or a user's YAML by path; an unknown name is refused naming the nearest bundled ones."""
    text = str(name_or_path)
    path = Path(text)
    if text.endswith((".yaml", ".yml")) or is_file(path):
        return path
    if "/" not in text and is_file(bundled := profiles_dir() / f"{text}.yaml"):
        return bundled
    known = available()
    name = resolve_name(text, known)
    if name is None:
        raise unknown("hardware", text, known, also="or a path to a YAML")
    return profiles_dir() / f"{name}.yaml"


def hardware_name(name_or_path: str | Path) -> str:
    """The bundled name a GPU spelt otherwise stands for (``H100-SXM`` -> ``h100-sxm``), a path as given:
    what an answer echoes. SpecsimError for an unknown name, as ``load_hardware``."""
    path = hardware_path(name_or_path)
    return path.stem if path.parent == profiles_dir() and str(name_or_path) != str(path) else str(name_or_path)


def load_hardware(name_or_path: str | Path) -> HardwareProfile:
    """A bundled profile by name or a user's YAML by path (``hardware_path``)."""
    return _load_hardware_file(hardware_path(name_or_path))


@parsed_once
def _load_hardware_file(path: Path) -> HardwareProfile:
    data = read_mapping(path)
    try:
        return parse_hardware(data, str(path))
    except SpecsimError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError) as exc:  # a field of an unexpected type: bad input
        raise SpecsimError(f"{path}: malformed profile ({type(exc).__name__}: {exc})") from None


def _efficiency(raw: object, where: str) -> Efficiency:
    if raw is None:
        return Efficiency()
    if not isinstance(raw, dict):
        raise SpecsimError(f"{where}: field 'efficiency' must be a mapping")
    known = {f.name for f in dataclasses.fields(Efficiency)}
    unknown = set(raw) - known
    if unknown:
        raise SpecsimError(f"{where}: unknown efficiency field(s) {sorted(map(str, unknown))} "
                           f"(allowed: {sorted(known)})")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "source":
            values[key] = str(value)
            continue
        if key in Efficiency.NONNEGATIVE:
            value = require(raw, key, f"{where}: efficiency")
            if not float(value) >= 0:
                raise SpecsimError(f"{where}: efficiency: field '{key}' must be >= 0, got {value}")
            values[key] = float(value)
            continue
        values[key] = positive(raw, key, f"{where}: efficiency")
        if key in Efficiency.FRACTIONS and values[key] > 1:
            raise SpecsimError(f"{where}: efficiency.{key} must be in (0, 1], got {values[key]}")
    return Efficiency(**values)


def _allreduce_table(raw: object, where: str) -> dict[int, tuple[float, float, float]]:
    """interconnect.allreduce_by_world_size: {n: {latency_us, busbw_gb_per_s, sharpness}}."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise SpecsimError(f"{where}: field 'allreduce_by_world_size' must be a mapping of GPU count to "
                           "{latency_us, busbw_gb_per_s, sharpness}")
    table: dict[int, tuple[float, float, float]] = {}
    for key, entry in raw.items():
        w = f"{where}.allreduce_by_world_size.{key}"
        try:
            n = int(key)
        except (TypeError, ValueError):
            raise SpecsimError(f"{w}: the key must be a GPU count (an integer >= 2)") from None
        if n < 2 or not isinstance(entry, dict):
            raise SpecsimError(f"{w}: expected GPU count >= 2 mapped to {{latency_us, busbw_gb_per_s, sharpness}}")
        unknown = set(entry) - {"latency_us", "busbw_gb_per_s", "sharpness"}
        if unknown:
            raise SpecsimError(f"{w}: unknown field(s) {sorted(map(str, unknown))} "
                               "(allowed: busbw_gb_per_s, latency_us, sharpness)")
        table[n] = (positive(entry, "latency_us", w) * 1e-6, positive(entry, "busbw_gb_per_s", w) * 1e9,
                    float(positive(entry, "sharpness", w)) if "sharpness" in entry else 1.0)
    return table


def _allreduce_impls(raw: object, where: str) -> dict[str, dict[int, tuple[float, float, float]]]:
    """interconnect.allreduce_by_implementation: {nccl_graph | custom: {n: {latency_us, busbw_gb_per_s,
    sharpness}}} (eager NCCL is allreduce_by_world_size)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise SpecsimError(f"{where}: field 'allreduce_by_implementation' must be a mapping of implementation "
                           f"({', '.join(ALLREDUCE_IMPLEMENTATIONS[1:])}) to GPU-count tables")
    out: dict[str, dict[int, tuple[float, float, float]]] = {}
    for impl, table in raw.items():
        if impl not in ALLREDUCE_IMPLEMENTATIONS[1:]:
            raise SpecsimError(f"{where}.allreduce_by_implementation: unknown implementation {str(impl)!r} "
                               f"(allowed: {', '.join(ALLREDUCE_IMPLEMENTATIONS[1:])}; eager nccl is "
                               "allreduce_by_world_size)")
        out[str(impl)] = _allreduce_table(table, f"{where}.allreduce_by_implementation.{impl}")
    return out


_ALLTOALL_FIELDS = ("dispatch_latency_us", "dispatch_efficiency", "combine_latency_us", "combine_efficiency")
#: A framework mode's fields (alltoall.ALLTOALL_FRAMEWORK_PARAMS); the copy costs may be left out (0).
_ALLTOALL_FRAMEWORK_FIELDS = ("dispatch_overhead_us", "dispatch_efficiency", "combine_overhead_us",
                              "combine_efficiency", "sharpness", "dispatch_copy_ns", "combine_copy_ns")


def _required_nonnegative(entry: dict[str, Any], key: str, where: str) -> float:
    value = float(require(entry, key, where))
    if not 0 <= value < float("inf"):
        raise SpecsimError(f"{where}: field '{key}' must be a finite number >= 0, got {value}")
    return value


def _alltoall_mode(entry: object, fields: tuple[str, ...], where: str) -> dict[str, float]:
    """One mode's mapping: only `fields`, efficiencies in (0, 1]."""
    if not isinstance(entry, dict):
        raise SpecsimError(f"{where}: must be a mapping {{{', '.join(fields)}}}")
    if unknown := set(entry) - set(fields):
        raise SpecsimError(f"{where}: unknown field(s) {sorted(map(str, unknown))} (allowed: {', '.join(fields)})")
    out: dict[str, float] = {}
    entry = {**{k: 0.0 for k in fields if k.endswith("_ns")}, **entry}
    for key in fields:
        if key.endswith(("overhead_us", "_ns")):
            out[key] = _required_nonnegative(entry, key, where)
        else:
            out[key] = positive(entry, key, where)
        if key.endswith("efficiency") and out[key] > 1:
            raise SpecsimError(f"{where}: field '{key}' must be in (0, 1], got {out[key]}")
        if key == "sharpness" and out[key] < 1:
            raise SpecsimError(f"{where}: field 'sharpness' must be >= 1 (the p of a p-norm), got {out[key]}")
    return out


def _alltoall(raw: object, where: str) -> dict[str, dict[str, tuple[float, ...]]]:
    """interconnect.alltoall (specsim/cost/alltoall.py): DeepEP's kernels per mode,
    {ll | normal: {dispatch_latency_us, dispatch_efficiency, combine_latency_us, combine_efficiency}},
    and per framework running DeepEP, {vllm | trtllm: {ll | normal: {dispatch_overhead_us,
    dispatch_efficiency, combine_overhead_us, combine_efficiency, sharpness, dispatch_copy_ns,
    combine_copy_ns}}};
    latencies > 0 us, overheads and copy costs >= 0, efficiencies in (0, 1], sharpness >= 1."""
    from specsim.cost.alltoall import ALLTOALL_IMPLEMENTATIONS, ALLTOALL_MODES

    if raw is None:
        return {}
    w = f"{where}.alltoall"
    frameworks = ALLTOALL_IMPLEMENTATIONS[1:]
    allowed = f"allowed: {', '.join((*ALLTOALL_MODES, *frameworks))}"
    if not isinstance(raw, dict):
        raise SpecsimError(f"{w}: must be a mapping of DeepEP's modes ({', '.join(ALLTOALL_MODES)}) and "
                           f"frameworks ({', '.join(frameworks)}) to their parameters")
    out: dict[str, dict[str, tuple[float, ...]]] = {}
    for key, entry in raw.items():
        if key in ALLTOALL_MODES:
            v = _alltoall_mode(entry, _ALLTOALL_FIELDS, f"{w}.{key}")
            out.setdefault("deepep", {})[str(key)] = (v["dispatch_latency_us"] * 1e-6, v["dispatch_efficiency"],
                                                      v["combine_latency_us"] * 1e-6, v["combine_efficiency"])
        elif key in frameworks:
            wf = f"{w}.{key}"
            if not isinstance(entry, dict):
                raise SpecsimError(f"{wf}: must be a mapping of mode ({', '.join(ALLTOALL_MODES)}) to "
                                   f"{{{', '.join(_ALLTOALL_FRAMEWORK_FIELDS)}}}")
            modes: dict[str, tuple[float, ...]] = {}
            for mode, params in entry.items():
                if mode not in ALLTOALL_MODES:
                    raise SpecsimError(f"{wf}: unknown mode {str(mode)!r} (allowed: {', '.join(ALLTOALL_MODES)})")
                v = _alltoall_mode(params, _ALLTOALL_FRAMEWORK_FIELDS, f"{wf}.{mode}")
                modes[str(mode)] = (v["dispatch_overhead_us"] * 1e-6, v["dispatch_efficiency"],
                                    v["combine_overhead_us"] * 1e-6, v["combine_efficiency"], v["sharpness"],
                                    v["dispatch_copy_ns"] * 1e-9, v["combine_copy_ns"] * 1e-9)
            out[str(key)] = modes
        else:
            raise SpecsimError(f"{w}: unknown mode or implementation {str(key)!r} ({allowed}; DeepEP's own "
                               "modes sit at the top level)")
    return out


def _cost_model(raw: object, where: str) -> CostModelChoice:
    """cost_model: roofline | table, or {backend, framework, measurements}."""
    if raw is None:
        return CostModelChoice()
    if isinstance(raw, str):
        raw = {"backend": raw}
    if not isinstance(raw, dict):
        raise SpecsimError(f"{where}: field 'cost_model' must be roofline, table or a mapping "
                           "{backend, framework, measurements}")
    if unknown := set(raw) - {"backend", "framework", "measurements"}:
        raise SpecsimError(f"{where}: cost_model: unknown field(s) {sorted(map(str, unknown))} "
                           "(allowed: backend, framework, measurements)")
    backend = str(raw.get("backend", "roofline"))
    if backend not in COST_MODELS:
        raise SpecsimError(f"{where}: cost_model.backend must be one of {', '.join(COST_MODELS)}, got {backend!r}")
    measurements = raw.get("measurements")
    if measurements is not None:
        path = Path(str(measurements))
        if not path.is_absolute() and where and Path(where).parent.is_dir():
            path = Path(where).parent / path  # relative to the profile's folder
        measurements = str(path)
    return CostModelChoice(backend, str(raw.get("framework") or "vllm"), measurements)


def _nonnegative(data: dict[str, Any], key: str, where: str) -> float:
    """An optional finite number >= 0 (0 when absent)."""
    if data.get(key) is None:
        return 0.0
    value = float(require(data, key, where))
    if not 0 <= value < float("inf"):
        raise SpecsimError(f"{where}: field '{key}' must be a finite number >= 0, got {value}")
    return value


def _mapping(data: dict[str, Any], key: str, where: str) -> dict[str, object]:
    value = data.get(key) or {}
    if not isinstance(value, dict):
        raise SpecsimError(f"{where}: field '{key}' must be a mapping, got {type(value).__name__}")
    return dict(value)


def parse_hardware(data: dict[str, Any], where: str) -> HardwareProfile:
    """Validate a profile mapping (the YAML schema in the README, "Hardware profiles")."""
    unknown = set(data) - TOP_LEVEL_KEYS
    if unknown:
        raise SpecsimError(f"{where}: unknown field(s) {sorted(map(str, unknown))} (allowed: {sorted(TOP_LEVEL_KEYS)})")
    peaks_raw = require(data, "peak_tflops", where, dict)
    if unknown_peaks := set(peaks_raw) - set(COMPUTE_DTYPES):
        raise SpecsimError(f"{where}: unknown peak_tflops field(s) {sorted(map(str, unknown_peaks))} "
                           f"(allowed: {', '.join(COMPUTE_DTYPES)})")
    for dtype in ("bf16", "fp16"):
        if dtype in peaks_raw and peaks_raw[dtype] is None:
            raise SpecsimError(f"{where}: peak_tflops.{dtype} is null; give the dense {dtype} peak in TFLOPS "
                               "(or leave the key out to use the other 16-bit peak)")
    peaks: dict[str, float | None] = {}
    for dtype in COMPUTE_DTYPES:
        value = peaks_raw.get(dtype)
        if value is not None:
            value = positive(peaks_raw, dtype, f"{where}: peak_tflops") * 1e12
        peaks[dtype] = value
    if peaks["bf16"] is None and peaks["fp16"] is None:
        raise SpecsimError(f"{where}: peak_tflops needs bf16 or fp16")
    peaks["bf16"] = peaks["bf16"] or peaks["fp16"]
    peaks["fp16"] = peaks["fp16"] or peaks["bf16"]
    ic = require(data, "interconnect", where, dict)
    icw = f"{where}: interconnect"
    vendor = str(data.get("vendor", "nvidia"))
    if vendor not in ("nvidia", "amd"):
        raise SpecsimError(f"{where}: field 'vendor' must be nvidia or amd, got {vendor!r}")
    return HardwareProfile(
        name=str(require(data, "name", where, str)),
        description=str(data.get("description", "")),
        vendor=vendor,
        sm_count=int(positive(data, "sm_count", where)),
        clock_mhz=_nonnegative(data, "clock_mhz", where),
        memory_bytes=positive(data, "memory_gb", where) * 1e9,
        total_memory_bytes=(positive(data, "memory_gib", where) * 2**30) if data.get("memory_gib") is not None else 0.0,
        mem_bw_bytes_per_s=positive(data, "mem_bw_tb_per_s", where) * 1e12,
        l2_bytes=positive(data, "l2_mb", where) * 1e6,
        peak_flops_per_s=peaks,
        interconnect=Interconnect(
            kind=str(ic.get("kind", "")),
            link_bw_bytes_per_s=positive(ic, "link_bw_gb_per_s", icw) * 1e9,
            allreduce_busbw_bytes_per_s=positive(ic, "allreduce_busbw_gb_per_s", icw) * 1e9,
            allreduce_latency_s=positive(ic, "allreduce_latency_us", icw) * 1e-6,
            allreduce_by_world_size=_allreduce_table(ic.get("allreduce_by_world_size"), icw),
            allreduce_by_implementation=_allreduce_impls(ic.get("allreduce_by_implementation"), icw),
            alltoall=_alltoall(ic.get("alltoall"), icw),
        ),
        launch_overhead_s=positive(data, "launch_overhead_us", where) * 1e-6,
        efficiency=_efficiency(data.get("efficiency"), where),
        provenance=_mapping(data, "provenance", where),
        source_path=where,
        cost_model=_cost_model(data.get("cost_model"), where),
        attention_kernel=_attention_kernel(data.get("attention_kernel", "fa3"), where),
        moe_kernel=_moe_kernel(data.get("moe_kernel", "grouped"), where),
        gemm_dispatch=_gemm_dispatch(data.get("gemm_dispatch", {}), where),
        moe_tuned_configs=_moe_tuned_configs(data.get("moe_tuned_configs"), data.get("moe_kernel", "grouped"),
                                             where),
        frameworks=_frameworks(data.get("frameworks"), where),
    )


#: Frameworks whose own kernels a profile may carry (the engines' `framework`).
KERNEL_FRAMEWORKS = ("vllm", "sglang", "trtllm")


def _frameworks(raw: object, where: str) -> dict[str, FrameworkKernels]:
    """frameworks: {vllm | sglang | trtllm: {attention_kernel: str, gemm_dispatch: {...}, efficiency: {...},
    allreduce_by_implementation: {...}, source: str}}."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise SpecsimError(f"{where}: field 'frameworks' must be a mapping of framework to its kernels")
    out: dict[str, FrameworkKernels] = {}
    for name, block in raw.items():
        w = f"{where}: frameworks.{name}"
        if name not in KERNEL_FRAMEWORKS:
            raise SpecsimError(f"{where}: frameworks: unknown framework {name!r} "
                               f"(known: {', '.join(KERNEL_FRAMEWORKS)})")
        if not isinstance(block, dict) or "efficiency" not in block:
            raise SpecsimError(f"{w} must be a mapping with an 'efficiency' block")
        unknown = set(block) - {"attention_kernel", "gemm_dispatch", "efficiency", "allreduce_by_implementation",
                                "source"}
        if unknown:
            raise SpecsimError(f"{w}: unknown field(s) {sorted(map(str, unknown))}")
        out[str(name)] = FrameworkKernels(_efficiency(block["efficiency"], w),
                                          _allreduce_impls(block.get("allreduce_by_implementation"), w),
                                          str(block.get("source", "")),
                                          _attention_kernel(block["attention_kernel"], w) if "attention_kernel" in block
                                          else "",
                                          _gemm_dispatch(block["gemm_dispatch"], w) if "gemm_dispatch" in block
                                          else None)
    return out


def _attention_kernel(raw: object, where: str) -> str:
    if raw not in ATTENTION_KERNELS:
        raise SpecsimError(f"{where}: attention_kernel must be one of {', '.join(ATTENTION_KERNELS)}, got {raw!r}")
    return str(raw)


def _gemm_dispatch(raw: object, where: str) -> dict[str, str]:
    """gemm_dispatch: {tensor-core dtype: a table of gemm_dispatch.DISPATCH}."""
    from specsim.cost.gemm_dispatch import DISPATCH

    if not isinstance(raw, dict):
        raise SpecsimError(f"{where}: gemm_dispatch must be a mapping of dtype to a dispatch table")
    for dtype, name in raw.items():
        if dtype != "fp8":
            raise SpecsimError(f"{where}: gemm_dispatch: only fp8 GEMMs have a fixed dispatch, got {dtype!r}")
        if name not in DISPATCH:
            raise SpecsimError(f"{where}: gemm_dispatch.{dtype} must be one of {', '.join(DISPATCH)}, got {name!r}")
    return {str(d): str(n) for d, n in raw.items()}


def _moe_kernel(raw: object, where: str) -> str:
    if raw not in MOE_KERNELS:
        raise SpecsimError(f"{where}: moe_kernel must be one of {', '.join(MOE_KERNELS)}, got {raw!r}")
    return str(raw)


def _moe_tuned_configs(raw: object, kernel: object, where: str) -> tuple[str, ...]:
    """moe_tuned_configs: a list of SGLang tuned-config paths (E=..,N=..,device_name=...json); only with
    moe_kernel: triton_sglang (another family has no default config to escape)."""
    if raw is None:
        return ()
    if kernel != "triton_sglang":
        raise SpecsimError(f"{where}: moe_tuned_configs needs moe_kernel: triton_sglang")
    if not isinstance(raw, list):
        raise SpecsimError(f"{where}: moe_tuned_configs must be a list of config file paths")
    for path in raw:
        if not isinstance(path, str) or not TUNED_CONFIG_FILE.search(path):
            raise SpecsimError(f"{where}: moe_tuned_configs: {path!r} is not a fused-MoE config file name "
                               "(E=<experts>,N=<width>,device_name=<GPU>[,dtype=<dtype>].json)")
    return tuple(raw)
