"""Chain acceptance: how many tokens one speculative step emits.

Conventions used throughout specsim:

* ``k`` is the number of drafted tokens per step (the draft length, vLLM's
  ``num_speculative_tokens``).
* ``alpha_i`` is the *conditional* acceptance rate of draft position ``i``: the probability that
  draft ``i`` is accepted given drafts ``1..i-1`` were. An i.i.d. model has ``alpha_i = alpha``.
* "tokens per step" (the engines' *mean acceptance length*) counts the accepted drafts **plus
  the one token every step emits anyway** (the residual sample on rejection or the bonus token
  when all drafts pass), so it lies in ``[1, k + 1]``.

Formulas come from the seed chapter (``shared/seed/speculative-decoding-chapter.txt``, section
"Expected tokens per step"), which follows Leviathan et al. 2022, "Fast Inference from
Transformers via Speculative Decoding", eq. (1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from specsim.errors import SpecsimError

FloatArray = NDArray[np.float64]

#: The convention every "mean acceptance length" in specsim follows.
MEAN_LENGTH_CONVENTION = (
    "mean acceptance length = tokens per step = 1 + E[accepted drafts] (includes the bonus/"
    "residual token; vLLM, SGLang and TensorRT-LLM report it this way)"
)


# ---------------------------------------------------------------------------------------------
# validation helpers
# ---------------------------------------------------------------------------------------------


def check_rates(values: ArrayLike, name: str = "alpha") -> FloatArray:
    """``values`` as a float array, every entry in [0, 1]; SpecsimError otherwise."""
    arr = np.asarray(values, dtype=np.float64)
    bad = ~((arr >= 0.0) & (arr <= 1.0))  # also catches NaN
    if np.any(bad):
        first = arr[bad].flat[0]
        raise SpecsimError(f"{name} must lie in [0, 1], got {first:g}")
    return arr


def check_k(k: ArrayLike, name: str = "k") -> NDArray[np.int64]:
    """``k`` as an integer array, every entry a whole number >= 0; SpecsimError otherwise."""
    arr = np.asarray(k)
    if arr.dtype.kind not in "iuf" or (arr.dtype.kind == "f" and np.any(arr != np.round(arr))):
        raise SpecsimError(f"{name} must be a whole number >= 0, got {k!r}")
    arr = arr.astype(np.int64)
    if np.any(arr < 0):
        raise SpecsimError(f"{name} must be >= 0, got {int(arr[arr < 0].flat[0])}")
    return arr


# ---------------------------------------------------------------------------------------------
# i.i.d. alpha
# ---------------------------------------------------------------------------------------------


def expected_tokens(alpha: ArrayLike, k: ArrayLike) -> FloatArray:
    """Expected tokens per step for i.i.d. acceptance ``alpha`` and draft length ``k``.

    ``E = (1 - alpha^(k+1)) / (1 - alpha)``, with the limit ``k + 1`` at ``alpha = 1``
    (seed chapter, "Expected tokens per step"; Leviathan et al. 2022, eq. 1). Broadcasts:
    ``expected_tokens(a[:, None], k[None, :])`` is a table.

    >>> float(expected_tokens(0.6, 3).round(2))
    2.18
    """
    a = check_rates(alpha)
    kk = check_k(k)
    a, kk = np.broadcast_arrays(a, kk)
    near_one = np.abs(1.0 - a) < 1e-9
    safe = np.where(near_one, 0.5, a)
    geometric = (1.0 - safe ** (kk + 1)) / (1.0 - safe)
    return np.where(near_one, kk + 1.0, geometric)


def tokens_distribution(alpha: ArrayLike, k: int) -> FloatArray:
    """P(tokens per step = n) for n = 1..k+1 under i.i.d. acceptance; last axis has k+1 entries.

    ``P(N = n) = alpha^(n-1) (1 - alpha)`` for ``n <= k`` and ``P(N = k+1) = alpha^k``, since
    ``P(A >= i) = alpha^i`` for the number ``A`` of accepted drafts (seed chapter).
    """
    a = check_rates(alpha)
    kk = int(check_k(k))
    rates = np.broadcast_to(a[..., None], (*a.shape, kk))
    return tokens_distribution_positional(rates, kk)


def alpha_from_mean_tokens(mean_tokens: ArrayLike, k: ArrayLike) -> FloatArray:
    """The i.i.d. alpha whose expected tokens per step at draft length ``k`` is ``mean_tokens``.

    Inverts ``expected_tokens`` (increasing in alpha) by vectorised bisection; ``mean_tokens``
    must lie in ``[1, k + 1]`` (it includes the bonus token, see ``MEAN_LENGTH_CONVENTION``).
    """
    m = np.asarray(mean_tokens, dtype=np.float64)
    kk = check_k(k)
    m, kk = np.broadcast_arrays(m, kk)
    if np.any(kk < 1):
        raise SpecsimError("k must be >= 1 to fit alpha from a mean acceptance length")
    bad = ~((m >= 1.0 - 1e-9) & (m <= kk + 1.0 + 1e-9))
    if np.any(bad):
        raise SpecsimError(
            f"mean acceptance length {m[bad].flat[0]:g} is outside [1, k+1] = "
            f"[1, {int(kk[bad].flat[0]) + 1}] (it must include the bonus token)"
        )
    lo = np.zeros(m.shape)
    hi = np.ones(m.shape)
    for _ in range(60):  # 2^-60: far below any measurement's precision
        mid = 0.5 * (lo + hi)
        too_low = expected_tokens(mid, kk) < m
        lo = np.where(too_low, mid, lo)
        hi = np.where(too_low, hi, mid)
    return 0.5 * (lo + hi)


# ---------------------------------------------------------------------------------------------
# per-position rates
# ---------------------------------------------------------------------------------------------


def survival_positional(rates: ArrayLike) -> FloatArray:
    """P(A >= i) for i = 1..K given conditional per-position rates (last axis): cumulative products."""
    return np.cumprod(check_rates(rates, "per-position acceptance rate"), axis=-1).astype(np.float64)


def expected_tokens_positional(rates: ArrayLike, k: ArrayLike) -> FloatArray:
    """Expected tokens per step ``E = 1 + sum_{i<=k} prod_{j<=i} alpha_j`` (conditional rates).

    ``rates`` has the positions on its last axis (length K >= max k); leading axes broadcast
    against ``k``. This is the seed's ``E[A] = sum_i P(A >= i)`` with ``P(A >= i) = prod_j alpha_j``
    (the Medusa-style decaying-acceptance case).
    """
    surv = survival_positional(rates)
    kk = check_k(k)
    K = surv.shape[-1]
    if np.any(kk > K):
        raise SpecsimError(f"k = {int(np.max(kk))} exceeds the {K} positions with known acceptance")
    cum = np.concatenate([np.zeros((*surv.shape[:-1], 1)), np.cumsum(surv, axis=-1)], axis=-1)
    lead = np.broadcast_shapes(cum.shape[:-1], kk.shape)
    cum = np.broadcast_to(cum, (*lead, K + 1))
    kk = np.broadcast_to(kk, lead)
    return 1.0 + np.take_along_axis(cum, kk[..., None], axis=-1)[..., 0]


def tokens_distribution_positional(rates: ArrayLike, k: int) -> FloatArray:
    """P(tokens per step = n), n = 1..k+1, from conditional per-position rates (last axis >= k).

    ``P(N = n) = P(A >= n-1) - P(A >= n)`` for ``n <= k`` and ``P(N = k+1) = P(A >= k)``.
    """
    surv = survival_positional(rates)
    kk = int(check_k(k))
    if kk > surv.shape[-1]:
        raise SpecsimError(f"k = {kk} exceeds the {surv.shape[-1]} positions with known acceptance")
    ones = np.ones((*surv.shape[:-1], 1))
    s = np.concatenate([ones, surv[..., :kk]], axis=-1)  # P(A >= 0..k)
    return np.concatenate([s[..., :-1] - s[..., 1:], s[..., -1:]], axis=-1)


def conditional_from_unconditional(unconditional: ArrayLike) -> FloatArray:
    """Conditional rates ``alpha_i = u_i / u_{i-1}`` from unconditional ones ``u_i = P(A >= i)``.

    vLLM's per-position rate is ``accepted_per_pos[i] / drafts`` = P(draft i accepted), which is
    unconditional (vLLM ``v1/spec_decode/metrics.py``); in a chain it is non-increasing. A position
    never reached (``u_{i-1} = 0``) gets rate 0.
    """
    u = check_rates(unconditional, "unconditional per-position rate")
    prev = np.concatenate([np.ones((*u.shape[:-1], 1)), u[..., :-1]], axis=-1)
    if np.any(u > prev + 1e-9):
        i = int(np.argmax((u > prev + 1e-9).reshape(-1, u.shape[-1]).any(axis=0)))
        raise SpecsimError(
            f"unconditional per-position rates must be non-increasing; position {i + 1} "
            f"({u[..., i].flat[0]:g}) exceeds position {i} ({prev[..., i].flat[0]:g})"
        )
    with np.errstate(divide="ignore", invalid="ignore"):
        rates = np.where(prev > 0, u / np.where(prev > 0, prev, 1.0), 0.0)
    return np.clip(rates, 0.0, 1.0)


def conditional_from_histogram(counts: ArrayLike) -> FloatArray:
    """Conditional per-position rates from a histogram of accepted drafts per step.

    ``counts[a]`` = number of steps that accepted exactly ``a`` drafts, ``a = 0..K`` (the bonus
    token is *not* counted). Then ``P(A >= i) = sum_{a>=i} counts[a] / total`` and the rates
    follow from ``conditional_from_unconditional``.
    """
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim != 1 or c.size < 2:
        raise SpecsimError("an accepted-length histogram needs counts for 0..K accepted drafts, K >= 1")
    if np.any(~np.isfinite(c)) or np.any(c < 0):
        raise SpecsimError("histogram counts must be finite and >= 0")
    total = c.sum()
    if total <= 0:
        raise SpecsimError("histogram is empty (no steps counted)")
    tail = np.cumsum(c[::-1])[::-1] / total  # P(A >= a), a = 0..K
    return conditional_from_unconditional(np.clip(tail[1:], 0.0, 1.0))


# ---------------------------------------------------------------------------------------------
# the profile object
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AcceptanceProfile:
    """Acceptance of a chain draft: conditional per-position rates, optionally an i.i.d. tail.

    ``rates[i-1]`` is alpha_i, the rate of draft position i given positions < i were accepted.
    Positions beyond ``len(rates)`` use ``tail`` (an i.i.d. rate) if it is set; otherwise the
    profile only describes ``k <= len(rates)`` and asking for more is an error.

    ``note`` says what a reader must know before trusting the profile (a prior's provenance and
    band, a model used past the measured depth); ``prior`` marks a profile that comes from the
    sourced catalogue rather than from the user's own measurement.
    """

    rates: tuple[float, ...] = ()
    tail: float | None = None
    source: str = "given"
    note: str = ""
    prior: bool = False

    def __post_init__(self) -> None:
        check_rates(np.asarray(self.rates, dtype=np.float64), "per-position acceptance rate")
        if self.tail is not None:
            check_rates(self.tail, "alpha")
        if not self.rates and self.tail is None:
            raise SpecsimError("an acceptance profile needs per-position rates or an alpha")

    # constructors ----------------------------------------------------------------------------
    @classmethod
    def from_alpha(cls, alpha: float) -> AcceptanceProfile:
        """i.i.d. acceptance ``alpha`` at every position (seed chapter's simplifying model)."""
        check_rates(alpha)
        return cls((), float(alpha), f"alpha={float(alpha):g}")

    @classmethod
    def from_alphas(cls, alphas: Sequence[float]) -> AcceptanceProfile:
        """Conditional per-position rates alpha_1..alpha_K (e.g. decaying Medusa heads)."""
        rates = tuple(float(a) for a in alphas)
        if not rates:
            raise SpecsimError("--alphas needs at least one rate")
        return cls(rates, None, "alphas=" + ",".join(f"{a:g}" for a in rates))

    @classmethod
    def from_unconditional(cls, unconditional: Sequence[float], source: str = "") -> AcceptanceProfile:
        """From unconditional per-position rates ``P(draft i accepted)`` (vLLM's convention)."""
        rates = conditional_from_unconditional(np.asarray(unconditional, dtype=np.float64))
        return cls(tuple(float(r) for r in rates), None, source or "unconditional per-position")

    @classmethod
    def from_histogram(cls, counts: Sequence[float] | Mapping[int, float], source: str = "") -> AcceptanceProfile:
        """From counts of steps by number of accepted drafts (0..K, bonus token not counted)."""
        if isinstance(counts, Mapping):
            keys = [int(key) for key in counts]
            if min(keys) < 0:
                raise SpecsimError("histogram keys (accepted drafts) must be >= 0")
            arr = np.zeros(max(keys) + 1)
            for key, value in counts.items():
                arr[int(key)] += float(value)
        else:
            arr = np.asarray(counts, dtype=np.float64)
        rates = conditional_from_histogram(arr)
        return cls(tuple(float(r) for r in rates), None, source or "histogram")

    @classmethod
    def from_mean_length(cls, mean_length: float, k: int, source: str = "") -> AcceptanceProfile:
        """The i.i.d. alpha whose tokens per step at draft length k equals ``mean_length``.

        ``mean_length`` includes the bonus token (``MEAN_LENGTH_CONVENTION``). The fitted profile
        reproduces the mean at this k exactly; at other k it extrapolates with the i.i.d. model.
        """
        alpha = float(alpha_from_mean_tokens(mean_length, k))
        return cls((), alpha, source or f"mean length {mean_length:g} at k={k}")

    # queries ---------------------------------------------------------------------------------
    @property
    def max_k(self) -> int | None:
        """The largest k this profile describes (None: any k, thanks to an i.i.d. tail)."""
        return None if self.tail is not None else len(self.rates)

    def rates_for(self, k: int) -> FloatArray:
        """alpha_1..alpha_k as an array (uses the tail beyond the measured positions)."""
        kk = int(check_k(k))
        if kk <= len(self.rates):
            return np.asarray(self.rates[:kk], dtype=np.float64)
        if self.tail is None:
            raise SpecsimError(
                f"k = {kk} exceeds the {len(self.rates)} positions this acceptance profile ({self.source}) measured"
            )
        extra = np.full(kk - len(self.rates), self.tail)
        return np.concatenate([np.asarray(self.rates, dtype=np.float64), extra])

    def mean_tokens(self, k: ArrayLike) -> FloatArray:
        """Expected tokens per step (mean acceptance length incl. bonus) at draft length(s) k."""
        kk = check_k(k)
        kmax = int(np.max(kk)) if kk.size else 0
        return expected_tokens_positional(self.rates_for(kmax), kk)

    def distribution(self, k: int) -> FloatArray:
        """P(tokens per step = n), n = 1..k+1."""
        return tokens_distribution_positional(self.rates_for(k), k)

    def acceptance_rate(self, k: int) -> float:
        """The engines' "draft acceptance rate" E[A]/k (accepted / drafted tokens); not alpha."""
        kk = int(check_k(k))
        if kk == 0:
            return float("nan")
        return float((self.mean_tokens(kk) - 1.0) / kk)


# ---------------------------------------------------------------------------------------------
# from token distributions
# ---------------------------------------------------------------------------------------------


def _check_distribution(x: FloatArray, name: str) -> None:
    if np.any(~np.isfinite(x)) or np.any(x < 0):
        raise SpecsimError(f"{name} must be finite and >= 0")
    if np.any(np.abs(x.sum(axis=-1) - 1.0) > 1e-6):
        raise SpecsimError(f"{name} must sum to 1 over the vocabulary (last axis)")


def acceptance_beta(p: ArrayLike, q: ArrayLike) -> FloatArray:
    """Acceptance probability of one draft: ``beta = sum_x min(p(x), q(x)) = 1 - TV(p, q)``.

    ``p`` is the target's and ``q`` the draft's next-token distribution, vocabulary on the last
    axis (seed chapter, "Proof that the output distribution is exactly p"; Leviathan et al. 2022,
    Theorem 3.5).
    """
    pa = np.asarray(p, dtype=np.float64)
    qa = np.asarray(q, dtype=np.float64)
    _check_distribution(pa, "p")
    _check_distribution(qa, "q")
    return np.minimum(pa, qa).sum(axis=-1)


def residual_distribution(p: ArrayLike, q: ArrayLike) -> FloatArray:
    """The residual ``max(0, p - q) / sum max(0, p - q)`` sampled on rejection (seed chapter).

    Where ``p == q`` (beta = 1) the residual is never used; it is returned as ``p``.
    """
    pa = np.asarray(p, dtype=np.float64)
    qa = np.asarray(q, dtype=np.float64)
    diff = np.maximum(pa - qa, 0.0)
    norm = diff.sum(axis=-1, keepdims=True)
    return np.where(norm > 0, diff / np.where(norm > 0, norm, 1.0), pa)


def softmax(logits: ArrayLike, temperature: float = 1.0) -> FloatArray:
    """``softmax(logits / temperature)`` over the last axis; temperature 0 gives the one-hot argmax."""
    z = np.asarray(logits, dtype=np.float64)
    if not np.all(np.isfinite(z)):
        raise SpecsimError("logits must be finite")
    if not temperature >= 0:
        raise SpecsimError(f"temperature must be >= 0, got {temperature:g}")
    if temperature == 0:
        return np.eye(z.shape[-1])[np.argmax(z, axis=-1)]
    z = z / temperature
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def beta_from_logits(target_logits: ArrayLike, draft_logits: ArrayLike, temperature: float = 1.0) -> FloatArray:
    """beta for target/draft logits sampled at the same temperature (0 = greedy: 1 iff argmaxes agree).

    Both distributions must go through the same processing (seed chapter, "Mismatched sampling
    parameters"); this applies the temperature to both.
    """
    return acceptance_beta(softmax(target_logits, temperature), softmax(draft_logits, temperature))
