"""Which MLA attention backend an engine runs on a GPU, and whether it takes queries of more than one token
(issue 33): where it does not, verifying k + 1 tokens runs MLA's prefill path (cost.ops._mla_prefill_form),
which up-projects every cached token's latent before attending.

vLLM: each MLA backend's metadata builder declares `query_len_support`; the common builder's default is
QueryLenSupport.SINGLE_ONLY with reorder_batch_threshold 1 (vllm/model_executor/layers/attention/mla_attention.py
@90b0a26e, MLACommonMetadataBuilder), and a sequence with more new tokens than the threshold is split off as a
prefill (split_decodes_and_prefills). Backends and their support:
  FLASH_ATTN_MLA  VARLEN       (vllm/v1/attention/backends/mla/flashattn_mla.py @09aa6b34; capability.major == 9)
  FLASHMLA        UNIFORM      (flashmla.py @01b1d340; sm90 / sm100)
  FLASHINFER_MLA  UNIFORM      (flashinfer_mla.py @002d68ef; sm100)
  CUTLASS_MLA     SINGLE_ONLY  (cutlass_mla.py: CutlassMLAMetadataBuilder sets only _cudagraph_support
                                UNIFORM_SINGLE_TOKEN_DECODE, inheriting the default; capability.major == 10)
  TRITON_MLA      SINGLE_ONLY  (triton_mla.py @0155494b: no builder of its own; supports any capability)
  ROCM_AITER_MLA  UNIFORM      (rocm_aiter_mla.py; VARLEN in some versions)
vLLM's default choice (vllm/platforms/cuda.py @002db495, _get_backend_priorities and check_and_update_config):
sm100 FLASHINFER_MLA (qk_nope_head_dim 128, no DCP), else CUTLASS_MLA; other GPUs FLASH_ATTN_MLA, FLASHMLA,
FLASHINFER_MLA, TRITON_MLA, the first the GPU supports: FA-MLA on Hopper, TRITON_MLA on sm8x and sm120 (A100,
L40S, RTX 4090/5090, RTX PRO 6000), where neither FA-MLA (sm90), FlashMLA (sm90/sm100) nor FlashInfer-MLA
(sm100) runs.
"""

from __future__ import annotations

from specsim.cost.hardware_profile import HardwareProfile

#: vLLM MLA backends -> their QueryLenSupport (see the module docstring for the files).
VLLM_MLA_QUERY_LEN = {
    "flash_attn_mla": "varlen",
    "flashmla": "uniform",
    "flashinfer_mla": "uniform",
    "cutlass_mla": "single_only",
    "triton_mla": "single_only",
    "rocm_aiter_mla": "uniform",
}
#: An engine profile's `mla_backend`: "" (the engine's MLA decode kernels take q > 1: no switch), "vllm_auto"
#: (vLLM's default choice on the GPU, `vllm_default_mla_backend`) or a vLLM backend forced by name (as
#: `--attention-backend` does).
MLA_BACKENDS = ("", "vllm_auto", *VLLM_MLA_QUERY_LEN)


def vllm_default_mla_backend(hw: HardwareProfile) -> str:
    """The MLA backend vLLM picks on this GPU with no backend set (module docstring), "" where the choice is not
    confirmed in vLLM's source for the profile (AMD: ROCm picks AITER MLA or TRITON_MLA by VLLM_ROCM_USE_AITER,
    not read). NVIDIA GPUs are told apart as their profiles' vLLM attention kernel tells them: "fa2" profiles are
    the sm8x / sm120 GPUs (FlashAttention-2), the others Hopper (is_hopper) or datacenter Blackwell (sm100).
    Decode context parallelism on sm100 sent vLLM to CUTLASS_MLA at cuda.py @002db495 (FlashInfer-MLA returned no
    LSE), but a later flashinfer_mla.py supports DCP: not switched here (force `cutlass_mla` to price it)."""
    if hw.vendor != "nvidia":
        return ""
    if hw.attention_kernel == "fa2":
        return "triton_mla"
    return "flash_attn_mla" if hw.is_hopper else "flashinfer_mla"


def mla_single_query(backend: str, hw: HardwareProfile) -> bool:
    """Whether the engine's MLA decode kernel on `hw` takes one-token queries only (its verification of q > 1
    tokens then runs MLA's prefill path), for an engine profile's `mla_backend`."""
    if backend == "vllm_auto":
        backend = vllm_default_mla_backend(hw)
    return VLLM_MLA_QUERY_LEN.get(backend) == "single_only"


def verify_path_note(backend: str, hw: HardwareProfile, is_mla: bool) -> str:
    """A line saying that verification runs MLA's prefill path on `hw` (where `mla_single_query`), else ""."""
    if not is_mla or not mla_single_query(backend, hw):
        return ""
    name = vllm_default_mla_backend(hw) if backend == "vllm_auto" else backend
    return (f"verification runs MLA's prefill path: vLLM's {name.upper()} takes one-token queries only, so k + 1 "
            "tokens up-project every cached latent (specsim/engines/mla.py); a build whose MLA kernel takes k + 1 "
            "queries prices with an engine YAML of `base: vllm` and `mla_backend: \"\"`")
