"""The engine's prefix cache and host KV tier as a scenario asks for them (serving.kv_cache), the defaults each
engine and GPU brings (simulate/sessions.py prices them), and the prefill / decode pools a scenario compares
(serving.pools; simulate/disagg.py).

Defaults, each with its source (research/serving-2026.md):
- block: vLLM 16 tokens on CUDA unless the attention backend forces more (FlashMLA 64: an MLA target gets 64)
  [V-CUDA `check_and_update_config`]; SGLang's radix cache `--page-size 1` [SG-ARGS]; TensorRT-LLM 32
  (`tokens_per_block`, not read at a commit: an assumption, said where it is used); ATOM as vLLM (assumption);
- EAGLE / MTP drafts in vLLM drop the last matched block (its hidden states feed the drafter) [V-KVM];
- host link, GB/s per GPU host-to-device (nvbandwidth / TransferBench; research/hardware.md section 5): H100 51,
  H200 52, A100 26.3, MI300X 55, GB200 201 (NVLink-C2C). Others: give --host-bw.
"""

from __future__ import annotations

from dataclasses import dataclass

from specsim.errors import SpecsimError

#: tokens per prefix-cache block by engine (module docstring)
ENGINE_BLOCK_TOKENS = {"vllm": 16, "sglang": 1, "trtllm": 32, "atom": 16}
MLA_BLOCK_TOKENS = 64  # vLLM with FlashMLA [V-CUDA]
#: measured host-to-GPU GB/s per GPU by hardware profile (module docstring)
HOST_LINK_GB_PER_S = {"h100-sxm": 51.0, "h100-pcie": 51.0, "h200": 52.0, "h800": 51.0, "a100-sxm-80gb": 26.3,
                      "a100-sxm-40gb": 26.3, "a100-pcie-80gb": 26.3, "mi300x": 55.0, "gb200": 201.0}
#: draft methods that read the target's hidden states (vLLM `use_eagle`: eagle, eagle3, mtp) [V-KVM]
HIDDEN_STATE_DRAFTS = ("eagle", "eagle3", "mtp", "dflash")


@dataclass(frozen=True)
class KvCacheSpec:
    """serving.kv_cache: the prefix cache's block (None: the engine's), a host tier of `offload_gb` per replica
    (0: none) and its link (None: the GPU's measured one)."""

    block_tokens: int | None = None
    offload_gb: float = 0.0
    host_gb_per_s: float | None = None

    def block_for(self, engine: str, mla: bool) -> int:
        """The block the cache matches whole: the scenario's, else the engine's (module docstring)."""
        if self.block_tokens is not None:
            return self.block_tokens
        family = engine.split("-")[0].lower()
        if family == "vllm" and mla:
            return MLA_BLOCK_TOKENS
        return ENGINE_BLOCK_TOKENS.get(family, 16)

    def host_tokens(self, kv_bytes_per_token: float) -> int:
        """The host tier's capacity in tokens of this target's KV (0: no host tier)."""
        return int(self.offload_gb * 1e9 // kv_bytes_per_token) if self.offload_gb > 0 else 0

    def reload_s_per_token(self, hardware: str, gpus: int, kv_bytes_per_token: float) -> float:
        """Seconds to reload one token's KV from the host tier: its bytes over every GPU's host link at once."""
        if self.offload_gb <= 0:
            return 0.0
        bw = self.host_gb_per_s if self.host_gb_per_s is not None else HOST_LINK_GB_PER_S.get(hardware)
        if bw is None:
            known = ", ".join(sorted(HOST_LINK_GB_PER_S))
            raise SpecsimError(f"--kv-offload: no measured host link for {hardware!r} (measured: {known}); give "
                               "--host-bw GB/s")
        return kv_bytes_per_token / (bw * 1e9 * gpus)


def drops_block(engine: str, draft_method: str | None) -> int:
    """Matched blocks a lookup drops: 1 in vLLM with a draft reading the target's hidden states [V-KVM]."""
    return int(engine.split("-")[0].lower() == "vllm" and (draft_method or "") in HIDDEN_STATE_DRAFTS)


#: KV transfer bandwidth per GPU between prefill and decode pools: one 400 Gb/s NIC per GPU (ConnectX-7 in DGX H100 /
#: B200) at the 87% of line rate Mooncake's transfer engine measured (87 GB/s on 4 x 200 Gb/s RoCE;
#: research/serving-2026.md section 5.2, [MOONCAKE])
DEFAULT_KV_LINK_GB_PER_S = 43.5


@dataclass(frozen=True)
class PoolsSpec:
    """serving.pools: the prefill:decode replica layouts to compare (xPyD), the KV link between the pools (GB/s per
    GPU) and its per-transfer latency (ms; not found published: 0)."""

    pd: tuple[tuple[int, int], ...] = ((1, 1), (1, 2), (2, 1))
    kv_link_gb_per_s: float = DEFAULT_KV_LINK_GB_PER_S
    kv_latency_ms: float = 0.0

    def __post_init__(self) -> None:
        if not self.pd or any(not (1 <= x <= 64 and 1 <= y <= 64) for x, y in self.pd):
            raise SpecsimError(f"pools: replicas per pool must be in [1, 64], got {list(self.pd)}")
        if not self.kv_link_gb_per_s > 0 or not self.kv_latency_ms >= 0:
            raise SpecsimError("pools: the KV link must be > 0 GB/s and its latency >= 0 ms")


def parse_pd(text: str) -> tuple[tuple[int, int], ...]:
    """'1:1,1:2,2:1' (or 1P2D) -> ((1, 1), (1, 2), (2, 1)); one line on a bad entry."""
    out = []
    for part in str(text).split(","):
        p = part.strip().upper().replace("P", ":").replace("D", "")
        try:
            x, y = (int(v) for v in p.split(":"))
        except ValueError:
            raise SpecsimError(f"--pd (serving.pools.pd): '{part.strip()}' is not prefill:decode replicas (e.g. 1:2, "
                               "1P2D)") from None
        if not (1 <= x <= 64 and 1 <= y <= 64):
            raise SpecsimError(f"--pd (serving.pools.pd): replicas per pool must be in [1, 64], got '{part.strip()}'")
        out.append((x, y))
    return tuple(out)
