"""Adaptive draft length: a drafter that stops drafting early on its own signal (issue 20).

A fixed-k chain drafts ``k`` tokens every step. An *adaptive* drafter stops as soon as its own
signal says the next token is unlikely to survive: the draft's top-1 probability under a threshold
(Hugging Face transformers ``assistant_confidence_threshold``, llama.cpp ``--draft-p-min``, vLLM PR
#35301 ``draft_confidence_threshold``, DISCO arXiv:2405.04304), the entropy bound of AdaEDL
(arXiv:2410.18351), a trained acceptance head (SpecDec++ arXiv:2405.19715) or a confidence head
(DSpark, vLLM ``enable_adaptive_verification``, PR #47808, which trims a drafted block before
verification). This module gives the expected tokens per step, the distribution of the number of
verified drafts ``k`` per step, the expected verify tokens for padded and ragged batches, and the
expected step cost, so the planner can compare such a rule with the best fixed ``k``. vLLM's
per-batch-size ``k`` (``specsim/plan/dynamic_k.py``) is a different policy (one ``k`` per batch
size, chosen offline); this one changes ``k`` per sequence and per step.

The form (positions ``i = 1..K`` on the last axis, ``K`` = the cap, ``num_speculative_tokens``)
------------------------------------------------------------------------------------------------
While the draft is still on a correct prefix (every earlier draft included and accepted), draft
``i`` has a pair of binary outcomes: ``A_i`` (the target accepts it) and ``S_i`` (the drafter's
signal says stop). Their joint law at position ``i`` is given by three rates::

    accept[i]          = P(A_i = 1)                    conditional acceptance, the chain's alpha_i
    stop_if_reject[i]  = P(S_i = 1 | A_i = 0)          the stop rule's recall of rejections (TPR)
    stop_if_accept[i]  = P(S_i = 1 | A_i = 1)          its false-alarm rate (FPR)

so ``P(continue, accept) = a (1 - fpr)``, ``P(continue, reject) = (1 - a)(1 - tpr)``,
``P(stop, accept) = a fpr`` and ``P(stop, reject) = (1 - a) tpr``. An uninformative signal has
``tpr = fpr``; a perfect one ``tpr = 1, fpr = 0``. This is the classifier view SpecDec++ (a
trained head predicting acceptance, stopping when P(some rejection) passes a threshold) and DISCO
(a classifier deciding continue/stop) use, and the precision/recall a paper reports maps onto it
(``stop_rule_from_precision_recall``). Once a draft was rejected the later drafts have no
acceptance; the drafter keeps going on its wrong prefix and stops at position ``i`` with
probability ``stop_off_path[i]`` (default: the on-path marginal stop rate
``a fpr + (1 - a) tpr``, i.e. the drafter's signal is as confident on its own continuation as it
is in general). That rate only moves ``k`` (cost and padding), never the tokens emitted.

Assumption: the outcomes are Markov in the position (the pair at ``i`` depends on the past only
through "still on a correct prefix"); a real signal is also correlated across positions.

Two conventions for the token whose signal says stop:

* ``"inclusive"``: that token is still verified, then drafting stops (Hugging Face
  transformers' ``ConfidenceCriteria``, older llama.cpp ``common_speculative_gen_draft``:
  ``result.push_back(id)`` before the ``p_min`` test). ``k`` = draft passes, ``1 <= k <= K``.
* ``"exclusive"``: that token is dropped (newer llama.cpp: ``p < p_min`` -> ``continue`` before
  ``push_back``; DSpark verification trimming keeps only the confident prefix). ``0 <= k <= K``
  and the draft passes are ``k + 1`` when it stopped (the pass that produced the dropped token
  was paid), ``K`` otherwise.

With ``stop_if_reject = stop_if_accept = 0`` (never stop) the inclusive rule is a fixed-k chain
and ``expected_tokens`` equals ``chain.expected_tokens_positional(accept, K)``.

Tokens per step follow specsim's convention (``chain.MEAN_LENGTH_CONVENTION``): ``1 + A`` with
``A`` the accepted drafts. A padded engine verifies ``max_b k_b + 1`` tokens for every sequence
of a batch of ``B`` (``E[max] = sum_j (1 - F(j)^B)`` for i.i.d. sequences); a ragged (varlen)
engine verifies ``k_b + 1`` per sequence.

Published figures for such rules are in ``SOURCES`` (each names its source).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

# published figures of adaptive rules: sourced data, kept in a module of its own and read here by name
from specsim.acceptance.adaptive_sources import GLM52_DSPARK16_GB200_PER_POSITION as GLM52_DSPARK16_GB200_PER_POSITION
from specsim.acceptance.adaptive_sources import SOURCES as SOURCES
from specsim.acceptance.chain import check_rates, expected_tokens_positional
from specsim.errors import SpecsimError

FloatArray = NDArray[np.float64]
Convention = Literal["inclusive", "exclusive"]
#: verify cost: total tokens the target verifies in one step (whole batch, int array) -> cost array
VerifyCost = Callable[[NDArray[np.int64]], ArrayLike]


# ---------------------------------------------------------------------------------------------
# the stop rule
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StopRule:
    """Per-position joint law of (stop signal, acceptance); positions on the last axis (``K``).

    Build it with ``stop_rule``, ``independent_stop_rule`` or ``stop_rule_from_precision_recall``;
    all arrays share one broadcast shape ``(..., K)``.
    """

    accept: FloatArray
    stop_if_reject: FloatArray
    stop_if_accept: FloatArray
    stop_off_path: FloatArray
    convention: Convention = "inclusive"

    @property
    def k_max(self) -> int:
        return int(self.accept.shape[-1])


def stop_rule(accept: ArrayLike, stop_if_reject: ArrayLike, stop_if_accept: ArrayLike,
              stop_off_path: ArrayLike | None = None,
              convention: Convention = "inclusive") -> StopRule:
    """A ``StopRule`` from per-position rates (see the module docstring); broadcasts the inputs.

    ``accept`` is the conditional per-position acceptance (a chain's ``alpha_i``), last axis = the
    cap ``K`` >= 1; ``stop_if_reject`` / ``stop_if_accept`` are P(stop | rejected) and
    P(stop | accepted) at that position; ``stop_off_path`` P(stop) after an earlier rejection.
    """
    if convention not in ("inclusive", "exclusive"):
        raise SpecsimError(f"convention must be 'inclusive' or 'exclusive', got {convention!r}")
    a = check_rates(accept, "accept")
    t = check_rates(stop_if_reject, "stop_if_reject")
    f = check_rates(stop_if_accept, "stop_if_accept")
    if a.ndim == 0:
        raise SpecsimError("accept needs the positions on its last axis (length K >= 1)")
    a, t, f = np.broadcast_arrays(a, t, f)
    if stop_off_path is None:
        o = a * f + (1.0 - a) * t
    else:
        o = np.broadcast_to(check_rates(stop_off_path, "stop_off_path"), a.shape)
    if a.shape[-1] < 1:
        raise SpecsimError("the cap K (positions on the last axis) must be >= 1")
    return StopRule(np.array(a, dtype=np.float64), np.array(t, dtype=np.float64),
                    np.array(f, dtype=np.float64), np.array(o, dtype=np.float64), convention)


def independent_stop_rule(accept: ArrayLike, continue_prob: ArrayLike,
                          convention: Convention = "inclusive") -> StopRule:
    """A signal independent of acceptance: it continues with ``continue_prob`` whatever happens.

    The baseline a correlated rule must beat: it shortens drafts without picking the bad ones.
    """
    stop = 1.0 - check_rates(continue_prob, "continue_prob")
    return stop_rule(accept, stop, stop, None, convention)


def stop_rule_from_precision_recall(accept: ArrayLike, precision: ArrayLike, recall: ArrayLike,
                                    stop_off_path: ArrayLike | None = None,
                                    convention: Convention = "inclusive") -> StopRule:
    """A ``StopRule`` from the stop classifier's precision and recall *as a rejection detector*.

    ``precision`` = P(rejected | stop), ``recall`` = P(stop | rejected) (per position, or
    scalars). Then ``P(stop) = recall (1 - a) / precision`` and
    ``stop_if_accept = P(stop) (1 - precision) / a``; SpecsimError when that exceeds 1 (the
    three numbers are inconsistent).
    """
    a = check_rates(accept, "accept")
    p = check_rates(precision, "precision")
    r = check_rates(recall, "recall")
    a, p, r = np.broadcast_arrays(a, p, r)
    if np.any((p <= 0) & (r > 0)):
        raise SpecsimError("precision must be > 0 where recall is > 0")
    with np.errstate(divide="ignore", invalid="ignore"):
        p_stop = np.where(r > 0, r * (1.0 - a) / np.where(p > 0, p, 1.0), 0.0)
        fpr = np.where(a > 0, p_stop * (1.0 - p) / np.where(a > 0, a, 1.0), 0.0)
    if np.any(fpr > 1.0 + 1e-12) or np.any(p_stop > 1.0 + 1e-12):
        raise SpecsimError("precision, recall and acceptance are inconsistent (P(stop | accepted) > 1)")
    return stop_rule(a, r, np.clip(fpr, 0.0, 1.0), stop_off_path, convention)


# ---------------------------------------------------------------------------------------------
# per-sequence statistics
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AdaptiveStats:
    """What one sequence's step looks like under a ``StopRule`` (leading axes = configurations).

    ``k_dist[..., j]`` = P(k = j verified drafts), j = 0..K; ``passes_dist[..., j]`` = P(j draft
    passes), j = 0..K (``passes = k`` for the inclusive convention); ``tokens_dist[..., n-1]`` =
    P(tokens per step = n), n = 1..K+1; ``accepted_per_position[..., i-1]`` = P(draft i accepted)
    unconditionally (vLLM's per-position metric, ``1 + sum`` = tokens per step).
    """

    k_dist: FloatArray
    passes_dist: FloatArray
    tokens_dist: FloatArray
    accepted_per_position: FloatArray

    @property
    def expected_k(self) -> FloatArray:
        """E[k]: drafts verified per step (= E[drafted tokens] for the inclusive convention)."""
        return _mean(self.k_dist)

    @property
    def expected_passes(self) -> FloatArray:
        """E[draft passes] per step (the drafter's work; > E[k] for the exclusive convention)."""
        return _mean(self.passes_dist)

    @property
    def expected_tokens(self) -> FloatArray:
        """E[tokens per step] = 1 + E[accepted drafts] (includes the bonus/residual token)."""
        # cumsum, not sum: the same float operations as chain.expected_tokens_positional
        return np.asarray(1.0 + np.cumsum(self.accepted_per_position, axis=-1)[..., -1], dtype=np.float64)

    @property
    def expected_accepted(self) -> FloatArray:
        return np.asarray(np.cumsum(self.accepted_per_position, axis=-1)[..., -1], dtype=np.float64)

    @property
    def acceptance_rate(self) -> FloatArray:
        """Accepted / verified drafts (vLLM/TRT "acceptance rate" with a ragged denominator)."""
        k = self.expected_k
        return np.asarray(np.where(k > 0, self.expected_accepted / np.where(k > 0, k, 1.0), 0.0),
                          dtype=np.float64)


def _mean(dist: FloatArray) -> FloatArray:
    return np.asarray(dist @ np.arange(dist.shape[-1], dtype=np.float64), dtype=np.float64)


def adaptive_stats(rule: StopRule) -> AdaptiveStats:
    """Exact per-sequence statistics of ``rule`` (one pass over the K positions, vectorised over
    the leading axes)."""
    a, t, f, o = rule.accept, rule.stop_if_reject, rule.stop_if_accept, rule.stop_off_path
    K = rule.k_max
    lead = a.shape[:-1]
    k_dist = np.zeros((*lead, K + 1))
    passes = np.zeros((*lead, K + 1))
    n_acc = np.zeros((*lead, K + 1))  # P(A = m), m = 0..K
    surv = np.zeros((*lead, K))       # P(A >= i), i = 1..K
    on = np.ones(lead)                 # P(draft position i reached on a correct prefix)
    off = np.zeros(lead)               # P(position i reached after a rejection)
    inclusive = rule.convention == "inclusive"
    for i in range(K):
        ai, ti, fi, oi = a[..., i], t[..., i], f[..., i], o[..., i]
        cont_acc = ai * (1.0 - fi)
        stop_acc = ai * fi
        cont_rej = (1.0 - ai) * (1.0 - ti)
        stop_rej = (1.0 - ai) * ti
        last = i == K - 1
        if inclusive:
            # draft i+1 is verified whatever its signal; the signal decides whether i+2 is drafted
            surv[..., i] = on * ai
            n_acc[..., i] += on * (1.0 - ai)
            if last:
                k_dist[..., K] += on + off
                n_acc[..., K] += on * ai
                break
            stopped = on * (stop_acc + stop_rej) + off * oi
            k_dist[..., i + 1] += stopped
            n_acc[..., i + 1] += on * stop_acc
            on, off = on * cont_acc, off * (1.0 - oi) + on * cont_rej
        else:
            # a stop signal drops draft i+1 (its pass is paid): k = i, passes = i + 1
            surv[..., i] = on * cont_acc
            stopped = on * (stop_acc + stop_rej) + off * oi
            k_dist[..., i] += stopped
            passes[..., i + 1] += stopped
            n_acc[..., i] += on * (stop_acc + stop_rej + cont_rej)
            if last:
                k_dist[..., K] += on * (cont_acc + cont_rej) + off * (1.0 - oi)
                passes[..., K] += on * (cont_acc + cont_rej) + off * (1.0 - oi)
                n_acc[..., K] += on * cont_acc
                break
            on, off = on * cont_acc, off * (1.0 - oi) + on * cont_rej
    if inclusive:
        passes = k_dist.copy()
    return AdaptiveStats(k_dist, passes, n_acc, surv)


# ---------------------------------------------------------------------------------------------
# batches: padded vs ragged verification
# ---------------------------------------------------------------------------------------------


def _cdf(dist: ArrayLike) -> FloatArray:
    d = np.asarray(dist, dtype=np.float64)
    return np.clip(np.cumsum(d, axis=-1), 0.0, 1.0)


def _batch(batch: ArrayLike) -> FloatArray:
    b = np.asarray(batch, dtype=np.float64)
    if np.any(b < 1) or np.any(b != np.round(b)):
        raise SpecsimError(f"batch must be a whole number >= 1, got {batch!r}")
    return b


def max_distribution(dist: ArrayLike, batch: ArrayLike) -> FloatArray:
    """P(max of ``batch`` i.i.d. draws = j), j = 0..K, from ``dist`` over 0..K (last axis).

    ``P(max <= j) = F(j)^B``. ``batch`` broadcasts against the leading axes of ``dist``.
    """
    F = _cdf(dist)
    b = _batch(batch)[..., None]
    Fb = F ** b
    return np.asarray(np.diff(Fb, axis=-1, prepend=0.0), dtype=np.float64)


def expected_max(dist: ArrayLike, batch: ArrayLike) -> FloatArray:
    """E[max of ``batch`` i.i.d. draws] = ``sum_{j=0}^{K-1} (1 - F(j)^B)`` for ``dist`` over 0..K."""
    F = _cdf(dist)[..., :-1]
    b = _batch(batch)[..., None]
    return np.asarray(np.sum(1.0 - F ** b, axis=-1), dtype=np.float64)


def expected_verify_tokens(stats: AdaptiveStats, batch: ArrayLike, padded: bool = True) -> FloatArray:
    """Expected tokens the target verifies per sequence per step: ``1 + E[max_b k_b]`` for an
    engine that pads the batch to its longest draft, ``1 + E[k]`` for a ragged (varlen) engine."""
    if padded:
        return 1.0 + expected_max(stats.k_dist, batch)
    return np.asarray(1.0 + np.broadcast_to(stats.expected_k, np.broadcast_shapes(
        stats.expected_k.shape, np.shape(batch))), dtype=np.float64)


def sum_distribution(dist: ArrayLike, batch: int) -> FloatArray:
    """P(sum of ``batch`` i.i.d. draws = s), s = 0..B*K, from ``dist`` over 0..K (last axis).

    The B-fold convolution, by FFT (exact up to float rounding; tiny negatives clipped).
    """
    d = np.asarray(dist, dtype=np.float64)
    B = int(_batch(batch))
    if np.ndim(batch) != 0:
        raise SpecsimError("sum_distribution needs one batch size")
    n = B * (d.shape[-1] - 1) + 1
    out = np.fft.irfft(np.fft.rfft(d, n, axis=-1) ** B, n, axis=-1)
    out = np.clip(out, 0.0, None)
    return np.asarray(out / out.sum(axis=-1, keepdims=True), dtype=np.float64)


# ---------------------------------------------------------------------------------------------
# step cost and the comparison with fixed k
# ---------------------------------------------------------------------------------------------


def _verify_costs(verify_cost: VerifyCost, tokens: NDArray[np.int64]) -> FloatArray:
    c = np.asarray(verify_cost(tokens), dtype=np.float64)
    if c.shape != tokens.shape:
        c = np.broadcast_to(c, tokens.shape)
    return c


def expected_step_cost(stats: AdaptiveStats, draft_cost: ArrayLike, verify_cost: VerifyCost,
                       batch: int, *, padded: bool = True, draft_lockstep: bool = True,
                       overhead: ArrayLike = 0.0) -> FloatArray:
    """Expected cost of one step of a batch of ``batch`` sequences that all use the rule.

    ``draft_cost[..., i-1]`` is the cost of the batch's i-th draft pass (last axis K; a
    one-pass block drafter puts its whole cost at position 1). ``draft_lockstep`` (batched
    engines): pass i runs while any sequence still drafts, paid with P(max_b passes_b >= i);
    otherwise each sequence pays its share, P(passes >= i) (cost linear in active sequences).
    ``verify_cost(tokens)`` maps the total tokens verified in the step (whole batch, int array)
    to a cost: ``batch * (1 + max_b k_b)`` when ``padded``, ``sum_b (1 + k_b)`` otherwise
    (exact distribution of the sum). ``overhead`` is added per step. Cost units are the caller's.
    """
    K = stats.k_dist.shape[-1] - 1
    dc = np.asarray(draft_cost, dtype=np.float64)
    if dc.shape[-1:] != (K,):
        raise SpecsimError(f"draft_cost needs {K} positions on its last axis, got shape {dc.shape}")
    B = int(_batch(batch))
    pdist = max_distribution(stats.passes_dist, B) if draft_lockstep else stats.passes_dist
    # P(passes >= i), i = 1..K
    reach = 1.0 - np.cumsum(pdist, axis=-1)[..., :-1]
    draft = np.sum(dc * reach, axis=-1)
    if padded:
        tok = (B * (np.arange(K + 1) + 1)).astype(np.int64)
        verify = max_distribution(stats.k_dist, B) @ _verify_costs(verify_cost, tok)
    else:
        sdist = sum_distribution(stats.k_dist, B)
        tok = (B + np.arange(sdist.shape[-1])).astype(np.int64)
        verify = sdist @ _verify_costs(verify_cost, tok)
    return np.asarray(draft + verify + np.asarray(overhead, dtype=np.float64), dtype=np.float64)


@dataclass(frozen=True)
class FixedKComparison:
    """An adaptive rule against every fixed k = 0..K at the same cost inputs.

    Rates are tokens per unit cost for the whole batch (``batch * tokens / cost``, the long-run
    rate of a renewal process). ``fixed_*`` have k = 0..K on the last axis (k = 0: no drafting,
    one verified token per sequence).
    """

    adaptive_tokens: FloatArray
    adaptive_cost: FloatArray
    adaptive_rate: FloatArray
    fixed_tokens: FloatArray
    fixed_cost: FloatArray
    fixed_rate: FloatArray

    @property
    def best_fixed_k(self) -> NDArray[np.int64]:
        return np.asarray(np.argmax(self.fixed_rate, axis=-1), dtype=np.int64)

    @property
    def best_fixed_rate(self) -> FloatArray:
        return np.asarray(np.max(self.fixed_rate, axis=-1), dtype=np.float64)

    @property
    def speedup_vs_best_fixed(self) -> FloatArray:
        return np.asarray(self.adaptive_rate / self.best_fixed_rate, dtype=np.float64)

    @property
    def speedup_vs_no_spec(self) -> FloatArray:
        return np.asarray(self.adaptive_rate / self.fixed_rate[..., 0], dtype=np.float64)


def compare_with_fixed_k(rule: StopRule, draft_cost: ArrayLike, verify_cost: VerifyCost,
                         batch: int, *, padded: bool = True, draft_lockstep: bool = True,
                         overhead: ArrayLike = 0.0) -> FixedKComparison:
    """The rule's throughput against fixed k = 0..K with the same drafter, acceptance and costs.

    A fixed k drafts k passes and verifies ``batch * (k + 1)`` tokens; its tokens per step are
    ``chain.expected_tokens_positional(rule.accept, k)`` (the same per-position acceptance, the
    signal ignored). See ``expected_step_cost`` for the cost arguments.
    """
    stats = adaptive_stats(rule)
    K = rule.k_max
    B = int(_batch(batch))
    ad_tokens = stats.expected_tokens
    ad_cost = expected_step_cost(stats, draft_cost, verify_cost, B, padded=padded,
                                 draft_lockstep=draft_lockstep, overhead=overhead)
    ks = np.arange(K + 1)
    fx_tokens = expected_tokens_positional(rule.accept[..., None, :], ks)
    dc = np.asarray(draft_cost, dtype=np.float64)
    cum_draft = np.concatenate([np.zeros((*dc.shape[:-1], 1)), np.cumsum(dc, axis=-1)], axis=-1)
    vc = _verify_costs(verify_cost, (B * (ks + 1)).astype(np.int64))
    fx_cost = cum_draft + vc + np.asarray(overhead, dtype=np.float64)[..., None]
    fx_tokens, fx_cost = np.broadcast_arrays(fx_tokens, fx_cost)
    return FixedKComparison(ad_tokens, ad_cost, B * ad_tokens / ad_cost,
                            np.array(fx_tokens), np.array(fx_cost), B * fx_tokens / fx_cost)

