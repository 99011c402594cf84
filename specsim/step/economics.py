"""The economics of one speculative step, vectorised over everything (numpy broadcasting).

One step of speculative decoding at batch B (seed chapter, "Expected tokens per step" and "When
speculation hurts"):

    step time   = draft time + verification time of B x (k+1) tokens (B x (n+1) for an n-node
                  tree) + fixed per-step overhead (rejection sampling, KV rollback)
    throughput  = B x tokens_per_step / step time                       [tokens/s, all sequences]
    ms/token    = step time / tokens_per_step                           [per sequence]
    speedup     = throughput / plain-decoding throughput at the same B
                = tokens_per_step x baseline step time / step time

Times come from a *cost source*. Two exist:

* the seed's abstract ratio (``ratio_step_times``): a target step costs T, a draft step c T, and
  verification one target step (optionally growing past a compute ridge);
* the roofline cost model: ``specsim.forward.forward_time_s(hw, model, batch, q_per_seq,
  context_len)`` gives, for arrays of batch and context, ``verify_time_s = forward_time_s(hw,
  target, B, k + 1, L)``, ``baseline_step_time_s = forward_time_s(hw, target, B, 1, L)`` and the
  draft's ``k x forward_time_s(hw, draft, B, 1, L)``; these arrays go straight into
  ``step_metrics``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from specsim.errors import SpecsimError

FloatArray = NDArray[np.float64]


def _nonneg(x: ArrayLike, name: str) -> FloatArray:
    arr = np.asarray(x, dtype=np.float64)
    if np.any(~(arr >= 0)):
        raise SpecsimError(f"{name} must be >= 0, got {arr[~(arr >= 0)].flat[0]:g}")
    return arr


def _positive(x: ArrayLike, name: str) -> FloatArray:
    arr = np.asarray(x, dtype=np.float64)
    if np.any(~(arr > 0)):
        raise SpecsimError(f"{name} must be > 0, got {arr[~(arr > 0)].flat[0]:g}")
    return arr


@dataclass(frozen=True, eq=False)
class StepMetrics:
    """The economics of one speculative step; every field broadcasts to the same shape.

    Times are in seconds; the ``*_ms`` properties give milliseconds.
    """

    tokens_per_step: FloatArray
    draft_time_s: FloatArray
    verify_time_s: FloatArray
    overhead_time_s: FloatArray
    baseline_step_time_s: FloatArray
    batch: FloatArray

    @property
    def step_time_s(self) -> FloatArray:
        """Draft + verification + fixed overhead."""
        return self.draft_time_s + self.verify_time_s + self.overhead_time_s

    @property
    def step_ms(self) -> FloatArray:
        return 1e3 * self.step_time_s

    @property
    def draft_ms(self) -> FloatArray:
        return 1e3 * self.draft_time_s

    @property
    def verify_ms(self) -> FloatArray:
        return 1e3 * self.verify_time_s

    @property
    def overhead_ms(self) -> FloatArray:
        return 1e3 * self.overhead_time_s

    @property
    def baseline_step_ms(self) -> FloatArray:
        return 1e3 * self.baseline_step_time_s

    @property
    def throughput_tok_s(self) -> FloatArray:
        """Output tokens per second over the whole batch: B x tokens_per_step / step time."""
        return self.batch * self.tokens_per_step / self.step_time_s

    @property
    def baseline_throughput_tok_s(self) -> FloatArray:
        """Plain decoding at the same batch: B tokens per baseline step."""
        return self.batch / self.baseline_step_time_s

    @property
    def ms_per_token(self) -> FloatArray:
        """Per-sequence time per output token (TPOT): step time / tokens per step."""
        return self.step_ms / self.tokens_per_step

    @property
    def speedup(self) -> FloatArray:
        """Throughput (equivalently TPOT) ratio against plain decoding at the same batch."""
        return self.tokens_per_step * self.baseline_step_time_s / self.step_time_s

    def as_dict(self) -> dict[str, FloatArray]:
        """The reported quantities by name (the keys of ``specsim evaluate --format json``)."""
        return {
            "tokens_per_step": self.tokens_per_step,
            "step_ms": self.step_ms,
            "draft_ms": self.draft_ms,
            "verify_ms": self.verify_ms,
            "overhead_ms": self.overhead_ms,
            "baseline_step_ms": self.baseline_step_ms,
            "speedup": self.speedup,
            "throughput_tok_s": self.throughput_tok_s,
            "baseline_throughput_tok_s": self.baseline_throughput_tok_s,
            "ms_per_token": self.ms_per_token,
        }


def step_metrics(
    tokens_per_step: ArrayLike,
    draft_time_s: ArrayLike,
    verify_time_s: ArrayLike,
    baseline_step_time_s: ArrayLike,
    batch: ArrayLike = 1,
    overhead_time_s: ArrayLike = 0.0,
) -> StepMetrics:
    """Assemble a step's economics from tokens per step and its component times (any cost source).

    All arguments broadcast together, so a sweep over (batch, k, alpha, context) is one call.
    ``overhead_time_s`` is what a speculative step pays beyond draft and verification and plain
    decoding does not (rejection sampling, KV rollback, tree-mask build).
    """
    e = np.asarray(tokens_per_step, dtype=np.float64)
    if np.any(~(e >= 1.0)):
        raise SpecsimError("tokens per step must be >= 1 (every step emits at least one token)")
    arrays = np.broadcast_arrays(
        e,
        _nonneg(draft_time_s, "draft time"),
        _positive(verify_time_s, "verification time"),
        _nonneg(overhead_time_s, "overhead time"),
        _positive(baseline_step_time_s, "baseline step time"),
        _positive(batch, "batch"),
    )
    return StepMetrics(*(np.array(a, dtype=np.float64) for a in arrays))


# ---------------------------------------------------------------------------------------------
# the seed's abstract cost source
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class StepTimes:
    """Component times of one step from a cost source (seconds, broadcast arrays)."""

    draft_time_s: FloatArray
    verify_time_s: FloatArray
    baseline_step_time_s: FloatArray


def target_pass_time_s(
    tokens: ArrayLike, target_step_time_s: ArrayLike = 1.0, ridge_tokens: ArrayLike | None = None
) -> FloatArray:
    """Time of one target pass over ``tokens`` tokens (all sequences) in the abstract model.

    Memory-bound (the seed's assumption): always one step T. With ``ridge_tokens`` R, the pass
    turns compute-bound past R tokens and costs ``T x tokens / R`` (seed chapter, "Batch
    effect": at batch 128 and k = 4, 640 tokens cost 640/128 = 5 T with R = 128).
    """
    t = _positive(target_step_time_s, "target step time")
    n = _positive(tokens, "tokens per pass")
    if ridge_tokens is None:
        return np.broadcast_to(t, np.broadcast_shapes(t.shape, n.shape)).astype(np.float64)
    r = _positive(ridge_tokens, "ridge tokens")
    return t * np.maximum(1.0, n / r)


def ratio_step_times(
    draft_passes: ArrayLike,
    draft_cost_ratio: ArrayLike,
    batch: ArrayLike = 1,
    verify_tokens_per_seq: ArrayLike | None = None,
    target_step_time_s: ArrayLike = 1.0,
    ridge_tokens: ArrayLike | None = None,
) -> StepTimes:
    """The seed's cost source: draft step = c x T, verification = one target pass, baseline = T.

    ``draft_passes`` is k for a chain (the depth for a tree drafted level by level, EAGLE-style);
    ``verify_tokens_per_seq`` defaults to ``draft_passes + 1`` (a chain's k + 1; n + 1 for an
    n-node tree). Without ``ridge_tokens`` the batch does not change any time and the speedup is
    the seed's ``E / (1 + c k)``.
    """
    k = _nonneg(draft_passes, "draft passes")
    c = _nonneg(draft_cost_ratio, "draft cost ratio")
    b = _positive(batch, "batch")
    t = _positive(target_step_time_s, "target step time")
    q = k + 1.0 if verify_tokens_per_seq is None else _positive(verify_tokens_per_seq, "verify tokens")
    return StepTimes(
        draft_time_s=c * k * t,
        verify_time_s=target_pass_time_s(b * q, t, ridge_tokens),
        baseline_step_time_s=target_pass_time_s(b, t, ridge_tokens),
    )


def ratio_step_metrics(
    tokens_per_step: ArrayLike,
    draft_passes: ArrayLike,
    draft_cost_ratio: ArrayLike,
    batch: ArrayLike = 1,
    verify_tokens_per_seq: ArrayLike | None = None,
    target_step_time_s: ArrayLike = 1.0,
    ridge_tokens: ArrayLike | None = None,
    overhead_time_s: ArrayLike = 0.0,
) -> StepMetrics:
    """``step_metrics`` with times from ``ratio_step_times``.

    >>> m = ratio_step_metrics(3.3616, 4, 0.05)   # seed worked example: alpha 0.8, k 4, c 0.05
    >>> round(float(m.speedup), 2)
    2.8
    """
    times = ratio_step_times(
        draft_passes, draft_cost_ratio, batch, verify_tokens_per_seq, target_step_time_s, ridge_tokens
    )
    return step_metrics(
        tokens_per_step,
        times.draft_time_s,
        times.verify_time_s,
        times.baseline_step_time_s,
        batch,
        overhead_time_s,
    )
