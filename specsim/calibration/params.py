"""The fittable parameters: their bounds, which ops' rows determine them, and `--params`.

Each efficiency parameter has a physical range (BOUNDS) and is determined only by rows of the ops
that exercise it (DETERMINES). All-reduce rows are fitted per world size (latency, bus bandwidth,
sharpness of the p-norm joining them; roofline.allreduce_time_s).
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from specsim.cost.hardware_profile import HardwareProfile
from specsim.errors import SpecsimError

# Bounds of each fittable efficiency parameter (physical ranges).
BOUNDS: dict[str, tuple[float, float]] = {
    "gemm_compute": (0.2, 1.0),
    "memory": (0.3, 1.0),
    "kernel_overhead_us": (0.01, 50.0),
    "ridge_sharpness": (1.0, 20.0),
    "cta_k_overhead": (0.01, 4096.0),
    "attention_compute": (0.05, 1.0),
    "l2_bw_tb_per_s": (1.0, 100.0),
    "small_tile_efficiency": (0.3, 1.0),
    "streamk_fixup_tiles": (0.0, 4.0),
    "bw_ramp_ctas_frac": (0.02, 1.0),
    "power_throttle": (0.0, 1.0),
    "throttle_tau_ms": (0.01, 100.0),
    "swap_tile_efficiency": (0.05, 1.0),
    "splitk_overhead_us": (0.0, 30.0),
    "l2_resident_frac": (0.1, 1.2),
    "l2_stream_tb_per_s": (0.3, 100.0),
    "fp8_compute": (0.3, 1.0),
    "dequant_tera_per_s": (0.5, 50.0),
    "attention_memory": (0.3, 1.0),
    "attention_overhead_us": (0.5, 100.0),
    "attention_cta_us": (0.0, 30.0),
    "attention_cta_overlap": (1.0, 20.0),
    "attention_split_us": (0.0, 50.0),
    "attention_split_bw_loss": (0.0, 0.9),
    "attention_cta_gb_per_s": (1.0, 5000.0),
    "moe_compute": (0.05, 1.0),
    "moe_overhead_us": (0.0, 1000.0),
    "moe_permute_tb_per_s": (0.05, 50.0),
    "moe_expert_us": (0.0, 20.0),
    "moe_memory": (0.3, 1.0),
    "moe_default_tile_efficiency": (0.1, 1.0),
    "quant_overhead_us": (0.0, 30.0),
    "quant_row_ns": (0.0, 100.0),
    "xqa_compute": (0.01, 1.0),
    "xqa_cta_gb_per_s": (1.0, 5000.0),
    "attention_softmax_ops": (0.0, 4.0),
    "attention_prefill_cta_us": (0.0, 30.0),
}
GEMM_PARAMS = ("gemm_compute", "memory", "kernel_overhead_us", "ridge_sharpness", "cta_k_overhead",
               "l2_bw_tb_per_s", "small_tile_efficiency", "streamk_fixup_tiles", "bw_ramp_ctas_frac",
               "power_throttle", "throttle_tau_ms", "swap_tile_efficiency", "splitk_overhead_us", "l2_resident_frac",
               "l2_stream_tb_per_s", "fp8_compute", "dequant_tera_per_s", "quant_overhead_us", "quant_row_ns")
ATTENTION_PARAMS = ("attention_compute", "attention_memory", "attention_overhead_us", "attention_cta_us",
                    "attention_cta_overlap", "attention_split_us", "attention_split_bw_loss",
                    "attention_cta_gb_per_s", "xqa_compute", "xqa_cta_gb_per_s", "attention_softmax_ops",
                    "attention_prefill_cta_us")
MOE_PARAMS = ("moe_compute", "moe_overhead_us", "moe_permute_tb_per_s", "moe_expert_us", "moe_memory",
              "moe_default_tile_efficiency")
# Which parameters each op's rows can determine. Attention and MoE rows determine only their own
# parameters: their kernels share the GEMM's tile model, fitted on GEMM rows (calibrate GEMMs first).
DETERMINES: dict[str, tuple[str, ...]] = {
    "gemm": GEMM_PARAMS,
    "attention": ATTENTION_PARAMS,
    "moe": MOE_PARAMS,
    "memcpy": ("memory", "kernel_overhead_us"),
    "elementwise": ("memory", "kernel_overhead_us"),
}
# Ops whose rows time one library kernel each: a fit refuses rows of several (framework, kernel)
# pairs for one (op, dtype) unless asked (`mix_kernels`); elementwise rows are many small kernels.
SINGLE_KERNEL_OPS = ("gemm", "attention", "moe", "allreduce")
# Fitted unless asked otherwise (`--params`): the power-limit pair only on request, since only a
# sweep of long compute-bound kernels shows it (Vidur H100 rows do; its A100 rows stay flat).
DEFAULT_OFF = ("power_throttle", "throttle_tau_ms")
ALLREDUCE_PARAMS = ("allreduce_latency_us", "allreduce_busbw_gb_per_s", "allreduce_sharpness")
ALLREDUCE_BOUNDS = {"allreduce_latency_us": (0.5, 2000.0), "allreduce_busbw_gb_per_s": (1.0, 5000.0),
                    "allreduce_sharpness": (0.3, 8.0)}
MIN_EFFECT = 0.01  # a parameter must move some prediction by >= 1% across its range to be fitted
F_SCALE = 0.05  # soft-L1 knee: residuals beyond 5% count linearly (robust to heuristic outliers)


def determinable(df: pd.DataFrame) -> tuple[set[str], set[str]]:
    """(the rows' ops that determine parameters, the parameters those ops can determine)."""
    ops = set(df["op"]) & set(DETERMINES)
    return ops, {p for op in ops for p in DETERMINES[op]}


def default_params(df: pd.DataFrame) -> list[str]:
    """Every efficiency parameter the rows' ops could determine, in BOUNDS order, less DEFAULT_OFF."""
    _, can = determinable(df)
    return [p for p in BOUNDS if p in can and p not in DEFAULT_OFF]


def parse_params(spec: str | None, df: pd.DataFrame) -> tuple[list[str], list[str], bool]:
    """--params: None (defaults), 'a,b' (exactly these) or '+a,b' (defaults plus these).

    Returns (efficiency params, those named explicitly, fit all-reduce?). Named parameters the rows
    cannot determine are refused; defaults they cannot determine are left at the base profile's
    value. 'allreduce' stands for the three all-reduce parameters, fitted together per world size.
    """
    has_ar = bool((df["op"] == "allreduce").any())
    if spec is None or not spec.strip():
        return default_params(df), [], has_ar
    text = spec.strip()
    extend = text.startswith("+")
    names = [t.strip() for t in text.lstrip("+").split(",") if t.strip()]
    known = set(BOUNDS) | set(ALLREDUCE_PARAMS) | {"allreduce"}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SpecsimError(f"--params: unknown parameter(s) {', '.join(unknown)} "
                           f"(known: {', '.join([*BOUNDS, 'allreduce'])})")
    want_ar = any(n == "allreduce" or n in ALLREDUCE_PARAMS for n in names)
    named = [n for n in names if n in BOUNDS]
    eff = [*default_params(df), *[n for n in named if n not in default_params(df)]] if extend else named
    if want_ar and not has_ar:
        raise SpecsimError("the measurements cannot determine the all-reduce parameters: no allreduce rows")
    return eff, named, want_ar or (extend and has_ar)


def fitted_values(hw: HardwareProfile) -> dict[str, float]:
    """The profile's value of every fittable efficiency parameter."""
    return {k: v for k, v in dataclasses.asdict(hw.efficiency).items() if k in BOUNDS}
