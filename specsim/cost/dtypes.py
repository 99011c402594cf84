"""Every dtype map in one place: bytes per weight, per KV element, per activation; the tensor-core
dtype a weight format computes in; aliases (torch names) to specsim's short names."""

from __future__ import annotations

from specsim.errors import SpecsimError

#: Bytes per weight element. int4 is weight-only (4 bits; group scales ignored: ~3% at group 128).
WEIGHT_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
#: Bytes per KV-cache element.
KV_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0}
#: Tensor-core dtypes a hardware profile states peaks for (dense).
COMPUTE_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8")
ACT_BYTES = 2.0  # bf16 activations
LOGIT_BYTES = 4.0  # fp32 logits for sampling
#: torch names of the dtypes the bench runner times.
TORCH_NAMES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
_ALIASES = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float8": "fp8",
            "float8_e4m3fn": "fp8", "e4m3": "fp8", "w4a16": "int4", "awq": "int4", "gptq": "int4"}


def canonical(dtype: str) -> str:
    """specsim's short name for a dtype spelling (``bfloat16`` -> ``bf16``)."""
    text = str(dtype).strip().lower()
    return _ALIASES.get(text, text)


def weight_bytes(dtype: str) -> float:
    key = canonical(dtype)
    if key not in WEIGHT_BYTES:
        raise SpecsimError(f"unknown weight dtype '{dtype}' (known: {', '.join(WEIGHT_BYTES)})")
    return WEIGHT_BYTES[key]


def kv_bytes(dtype: str) -> float:
    key = canonical(dtype)
    if key not in KV_BYTES:
        raise SpecsimError(f"unknown KV dtype '{dtype}' (known: {', '.join(KV_BYTES)})")
    return KV_BYTES[key]


def compute_dtype(weight_dtype: str) -> str:
    """The tensor-core dtype GEMMs with these weights run in: W8A8 fp8 GEMMs on fp8 tensor cores,
    int8 on int8; weight-only int4 dequantises to bf16 (Marlin-style kernels); fp16 as bf16."""
    key = canonical(weight_dtype) if weight_dtype else "bf16"
    return {"fp8": "fp8", "int8": "int8"}.get(key, "bf16")
