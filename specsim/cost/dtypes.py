"""Every dtype map in one place: bytes per weight, per KV element, per activation; the tensor-core
dtype a weight format computes in; aliases (torch names) to specsim's short names; and a deployment's
precision per component (`Precision`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from specsim.errors import SpecsimError

#: Bytes per weight element. int4 is weight-only (4 bits; group scales ignored: ~3% at group 128), and so is
#: w4a8 (int4 weights on fp8 MMAs: TensorRT-LLM W4A8-AWQ). Block-scaled formats carry their scales:
#: nvfp4 one fp8 (E4M3) scale per 16 values (NVIDIA, "Introducing NVFP4", 2025), mxfp4 one E8M0 scale per
#: 32 (OCP Microscaling Formats v1.0), fp8_block one fp32 scale per 128 x 128 block (DeepSeek-V3 weights).
WEIGHT_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "fp8_block": 1.0 + 4.0 / (128 * 128), "int8": 1.0,
                "int4": 0.5, "w4a8": 0.5, "nvfp4": 0.5 + 1.0 / 16, "mxfp4": 0.5 + 1.0 / 32}
#: Bytes per KV-cache element.
KV_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0}
#: Tensor-core dtypes a hardware profile states peaks for (dense).
COMPUTE_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")
ACT_BYTES = 2.0  # bf16 activations
LOGIT_BYTES = 4.0  # fp32 logits for sampling
#: torch names of the dtypes the bench runner times.
TORCH_NAMES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
_ALIASES = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float8": "fp8",
            "float8_e4m3fn": "fp8", "e4m3": "fp8", "w4a16": "int4", "awq": "int4", "gptq": "int4",
            "modelopt_fp4": "nvfp4", "fp8-block": "fp8_block", "w4a8_awq": "w4a8"}


def canonical(dtype: str) -> str:
    """specsim's short name for a dtype spelling (``bfloat16`` -> ``bf16``)."""
    text = str(dtype).strip().lower()
    return _ALIASES.get(text, text)


def weight_bytes(dtype: str, part: str = "dense") -> float:
    """Bytes per weight of a format, or of `part` under a per-part precision spec (`Precision`)."""
    return Precision.parse(dtype).bytes_of(part)


def part_dtype(spec: str, part: str) -> str:
    """The weight format of `part` under a spec (a lone format: that format)."""
    return Precision.parse(spec).of(part)


def resolve_native(spec: str, native: str) -> str:
    """A spec with `native` replaced by the checkpoint's own precision."""
    return native if str(spec).strip().lower() == "native" else spec


def kv_bytes(dtype: str) -> float:
    key = canonical(dtype)
    if key not in KV_BYTES:
        raise SpecsimError(f"unknown KV dtype '{dtype}' (known: {', '.join(KV_BYTES)})")
    return KV_BYTES[key]


def compute_dtype(weight_dtype: str) -> str:
    """The tensor-core dtype GEMMs with these weights run in: W8A8 fp8 GEMMs (per-tensor or block-scaled)
    on fp8 tensor cores, int8 on int8, W4A8 on fp8 (int4 weights converted in the kernel); NVFP4 / MXFP4
    on fp4 tensor cores (the GEMM falls back to bf16 MMAs, weight-only, where the GPU has none: Marlin FP4
    on Hopper and Ampere); weight-only int4 dequantises to bf16 (Marlin-style kernels); fp16 as bf16."""
    key = canonical(weight_dtype) if weight_dtype else "bf16"
    return {"fp8": "fp8", "fp8_block": "fp8", "int8": "int8", "w4a8": "fp8", "nvfp4": "fp4",
            "mxfp4": "fp4"}.get(key, "bf16")


#: The parts of a model a deployment quantises apart (TensorRT-LLM's DeepSeek-R1 NVFP4 recipe: bf16
#: attention, nvfp4 dense FFN and MoE, bf16 MTP layers; gpt-oss: MXFP4 experts, bf16 rest).
PARTS = ("attention", "dense", "experts", "head", "mtp")


@dataclass(frozen=True)
class Precision:
    """Weight format per part. Spelled `fp8` (one format for all), `native` (the checkpoint's own, from
    its quantization_config), or a default and overrides: `bf16,experts=nvfp4,dense=nvfp4`."""

    attention: str = "bf16"
    dense: str = "bf16"
    experts: str = "bf16"
    head: str = "bf16"
    mtp: str = "bf16"

    @staticmethod
    def parse(spec: str, native: str = "bf16") -> Precision:
        return _parse(str(spec), native)

    def of(self, part: str) -> str:
        return str(getattr(self, part))

    def bytes_of(self, part: str) -> float:
        return WEIGHT_BYTES[self.of(part)]

    @property
    def spec(self) -> str:
        """The canonical spelling: the most common format, then the parts that differ (`fp8,experts=nvfp4`)."""
        formats = [self.of(p) for p in PARTS]
        base = max(dict.fromkeys(formats), key=formats.count)
        return ",".join([base] + [f"{p}={f}" for p, f in zip(PARTS, formats, strict=True) if f != base])


@lru_cache(maxsize=256)
def _parse(spec: str, native: str) -> Precision:
    text = spec.strip().lower()
    if text == "native":
        text = native
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise SpecsimError(f"empty weight precision {spec!r}")
    base = "bf16"
    parts: dict[str, str] = {}
    for item in items:
        key, _, value = item.partition("=")
        if not value:
            base = _weight_format(key, spec)
            continue
        if key.strip() not in PARTS:
            raise SpecsimError(f"weight precision {spec!r}: unknown part '{key.strip()}' (parts: {', '.join(PARTS)})")
        parts[key.strip()] = _weight_format(value, spec)
    return Precision(**{p: parts.get(p, base) for p in PARTS})


def _weight_format(name: str, spec: str) -> str:
    key = canonical(name)
    if key not in WEIGHT_BYTES:
        raise SpecsimError(f"unknown weight dtype '{name.strip()}' in {spec!r} (known: {', '.join(WEIGHT_BYTES)}, "
                           "native, or per part: attention=, dense=, experts=, head=, mtp=)")
    return key


def check_precision(spec: str) -> str:
    """The spec spelled canonically (`native` kept for the model to resolve), or SpecsimError naming what
    is wrong."""
    if str(spec).strip().lower() == "native":
        return "native"
    return Precision.parse(spec).spec
