"""The serving section's typed values: the engine's scheduler limits, the latency SLO, the price.

Cost per million output tokens = GPUs x price per GPU-hour / 3600 / (output tokens / s) x 1e6
(one formula, read by the planner's capacity table and the simulator's metrics).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from specsim.errors import SpecsimError
from specsim.step.policy import Policy

IntArray = npt.NDArray[np.int64]


def _int_at_least(name: str, value: Any, lo: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < lo:
        raise SpecsimError(f"serving: field '{name}' must be an integer >= {lo}, got {value!r}")


@dataclass(frozen=True)
class EngineConfig:
    """Scheduler limits (vLLM names), the KV capacity in tokens (from the memory model) and the policy.

    `verify_tokens` describes a draft tree: the tokens each decoding sequence feeds the verification pass at
    depth k (index k = 0..the policy's deepest; 1 + the tree's nodes, `Draft.verify_tokens_per_seq`); None is a
    chain, k + 1. A decoding sequence takes that many tokens of the budget and KV slots for them."""

    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    kv_capacity_tokens: int = 1_000_000
    policy: Policy = field(default_factory=Policy)
    verify_tokens: tuple[int, ...] | None = None
    # the prefix cache (simulate/sessions.py): its block (vLLM 16 on CUDA, SGLang 1), the matched blocks a draft
    # reading the target's hidden states drops (EAGLE / MTP: 1, vLLM kv_cache_manager.py), a host tier's capacity
    # and its reload seconds per token (KV bytes per token / the host link's bandwidth)
    kv_block_tokens: int = 16
    cache_drop_blocks: int = 0
    host_kv_tokens: int = 0
    host_reload_s_per_token: float = 0.0

    def __post_init__(self) -> None:
        _int_at_least("max_num_seqs", self.max_num_seqs, 1)
        _int_at_least("kv_block_tokens", self.kv_block_tokens, 1)
        _int_at_least("cache_drop_blocks", self.cache_drop_blocks, 0)
        _int_at_least("host_kv_tokens", self.host_kv_tokens, 0)
        if not (self.host_reload_s_per_token >= 0 and math.isfinite(self.host_reload_s_per_token)):
            raise SpecsimError(f"serving: host_reload_s_per_token must be >= 0, got {self.host_reload_s_per_token}")
        _int_at_least("max_num_batched_tokens", self.max_num_batched_tokens, 1)
        _int_at_least("kv_capacity_tokens", self.kv_capacity_tokens, 1)
        if self.max_num_batched_tokens < self.max_num_seqs:  # vLLM SchedulerConfig enforces the same
            raise SpecsimError(f"serving: max_num_batched_tokens ({self.max_num_batched_tokens}) must be >= "
                               f"max_num_seqs ({self.max_num_seqs})")
        q = self.verify_tokens
        if q is not None and (len(q) <= self.policy.max_k or q[0] != 1 or any(b < a for a, b in itertools.pairwise(q))):
            raise SpecsimError(f"serving: verify_tokens must start at 1, not decrease and reach k = "
                               f"{self.policy.max_k}, got {list(q)}")

    def k_by_batch(self) -> IntArray:
        """The k each decode batch 0..max_num_seqs runs at: the policy's, cut so batch x (k+1) fits the budget
        (vLLM truncates the speculative tokens that do not fit). A tree's shape is fixed when the engine starts
        (SGLang's --speculative-num-steps / -eagle-topk / -num-draft-tokens): a batch whose tree does not fit the
        budget decodes without speculation."""
        k = self.policy.k_table(self.max_num_seqs)
        b = np.arange(len(k))
        if self.verify_tokens is not None:
            q = np.asarray(self.verify_tokens, dtype=np.int64)[k]
            return np.asarray(np.where(b * q <= self.max_num_batched_tokens, k, 0), dtype=np.int64)
        fit = self.max_num_batched_tokens // np.maximum(b, 1) - 1
        return np.asarray(np.maximum(np.minimum(k, fit), 0), dtype=np.int64)

    def verify_by_batch(self) -> IntArray:
        """Tokens each decoding sequence takes of the budget and the KV cache at each decode batch: k + 1 for a
        chain, 1 + the tree's nodes for a tree (`verify_tokens`)."""
        k = self.k_by_batch()
        if self.verify_tokens is None:
            return np.asarray(k + 1, dtype=np.int64)
        return np.asarray(np.asarray(self.verify_tokens, dtype=np.int64)[k], dtype=np.int64)

    @property
    def max_verify_tokens(self) -> int:
        """The most tokens one decoding sequence can take in a step (at the policy's deepest k)."""
        k = self.policy.max_k
        return k + 1 if self.verify_tokens is None else int(self.verify_tokens[k])

    def with_policy(self, policy: Policy) -> EngineConfig:
        return dataclasses.replace(self, policy=policy)


@dataclass(frozen=True)
class SLO:
    """Latency bounds per request; `percentile` is the one replica planning holds them at."""

    ttft_s: float
    tpot_s: float
    percentile: float = 99.0

    def __post_init__(self) -> None:
        if not (self.ttft_s > 0 and self.tpot_s > 0 and 0 < self.percentile <= 100):
            raise SpecsimError(f"slo: need ttft > 0, tpot > 0 and 0 < percentile <= 100, got {self}")


@dataclass(frozen=True)
class Pricing:
    gpu_hour_usd: float
    gpus_per_replica: int = 1

    def __post_init__(self) -> None:
        if not (self.gpu_hour_usd >= 0 and self.gpus_per_replica >= 1):
            raise SpecsimError(f"pricing: need gpu_hour_usd >= 0 and gpus_per_replica >= 1, got {self}")


def cost_per_mtok_usd(gpus: float, gpu_hour_usd: float, output_tok_s: float) -> float:
    """Dollars per million output tokens for `gpus` GPUs producing output_tok_s tokens per second."""
    return gpus * gpu_hour_usd / 3600.0 / output_tok_s * 1e6 if output_tok_s > 0 else math.inf
