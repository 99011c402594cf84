"""The serving section's typed values: the engine's scheduler limits, the latency SLO, the price.

Cost per million output tokens = GPUs x price per GPU-hour / 3600 / (output tokens / s) x 1e6
(one formula, read by the planner's capacity table and the simulator's metrics).
"""

from __future__ import annotations

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
    """Scheduler limits (vLLM names), the KV capacity in tokens (from the memory model) and the policy."""

    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    kv_capacity_tokens: int = 1_000_000
    policy: Policy = field(default_factory=Policy)

    def __post_init__(self) -> None:
        _int_at_least("max_num_seqs", self.max_num_seqs, 1)
        _int_at_least("max_num_batched_tokens", self.max_num_batched_tokens, 1)
        _int_at_least("kv_capacity_tokens", self.kv_capacity_tokens, 1)
        if self.max_num_batched_tokens < self.max_num_seqs:  # vLLM SchedulerConfig enforces the same
            raise SpecsimError(f"serving: max_num_batched_tokens ({self.max_num_batched_tokens}) must be >= "
                               f"max_num_seqs ({self.max_num_seqs})")

    def k_by_batch(self) -> IntArray:
        """The k each decode batch 0..max_num_seqs runs at: the policy's, cut so batch x (k+1) fits the budget."""
        k = self.policy.k_table(self.max_num_seqs)
        b = np.arange(len(k))
        fit = self.max_num_batched_tokens // np.maximum(b, 1) - 1
        return np.asarray(np.maximum(np.minimum(k, fit), 0), dtype=np.int64)

    def with_policy(self, policy: Policy) -> EngineConfig:
        return EngineConfig(self.max_num_seqs, self.max_num_batched_tokens, self.kv_capacity_tokens, policy)


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
