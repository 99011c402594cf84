"""Acceptance probabilities by sibling rank, ``probs[d, r]`` of a draft tree (see trees.py for the convention):
from chain rates (independent candidates, or the hazard model behind specsim's chain <-> tree conversion), or
exactly for SpecInfer's multi-candidate rule with i.i.d. candidates."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from specsim.acceptance.chain import acceptance_beta, check_rates, residual_distribution
from specsim.acceptance.trees import FloatArray
from specsim.errors import SpecsimError


def sibling_probs_independent(depth_rates: ArrayLike, max_rank: int) -> FloatArray:
    """``probs[d, r] = a_d (1 - a_d)^r``: each candidate independently passes with the depth's rate.

    An approximation (a real multi-candidate rule updates the residual after each rejection; see
    ``sibling_probs_multicandidate``); used when only chain rates are known. Rank 0 equals the
    chain rate, so a chain evaluates exactly as the chain formula.
    """
    a = check_rates(depth_rates)[..., :, None]
    r = np.arange(max_rank)[None, :]
    return a * (1.0 - a) ** r


def sibling_probs_multicandidate(p: ArrayLike, q: ArrayLike, max_rank: int) -> FloatArray:
    """Sibling-rank acceptance vector for SpecInfer's multi-candidate rule with i.i.d. candidates.

    Candidates are drawn independently from ``q``. Candidate r is tried only if 0..r-1 were
    rejected, against the residual ``p_r`` (``p_0 = p``, ``p_{r+1} = norm(max(0, p_r - q))``), and
    is accepted with probability ``beta_r = sum min(p_r, q)`` (Miao et al. 2023, SpecInfer,
    multi-step speculative sampling). Returns ``P(rank r is the accepted one)`` for r < max_rank;
    the residual sequence does not depend on which token was rejected, so this is exact when p
    and q are the same at every node (e.g. the circulant toy models of ``specsim.reference``).
    """
    pr = np.asarray(p, dtype=np.float64)
    qa = np.asarray(q, dtype=np.float64)
    out = np.zeros(max_rank)
    reach = 1.0
    for r in range(max_rank):
        beta = float(acceptance_beta(pr, qa))
        out[r] = reach * beta
        reach *= 1.0 - beta
        if reach <= 0:
            break
        pr = residual_distribution(pr, qa)
    return out


#: Sibling-rank decay of the acceptance hazard (``sibling_probs_hazard``). 0.6 reproduces EAGLE's
#: static 25-node tree from its own chain on the same head (Li et al. 2024, EAGLE, Table 5 chain-5
#: tau 3.20 and Table 2 tree tau 3.94, Vicuna-7B, MT-bench, T=0: 3.96 with 0.6). Independent checks:
#: Medusa head-1 top-5 accuracy 0.78 against top-1 0.56 (FasterDecoding/Medusa assets/medusa_acc.csv)
#: implies 0.55; Sequoia's acceptance-rate vector (0.634, 0.108, 0.057, ...) implies about 0.5.
SIBLING_HAZARD_DECAY = 0.6


def sibling_probs_hazard(depth_rates: ArrayLike, max_rank: int, decay: float = SIBLING_HAZARD_DECAY) -> FloatArray:
    """``probs[d, r]``: rank r is tried only when ranks < r failed, and then passes with ``a_d decay^r``.

    The hazard model behind specsim's chain <-> tree conversion: rank 0 passes with the chain rate
    ``a_d`` (so a chain evaluates exactly as the chain formula), and each further sibling is less
    likely to be the target's token than the one before: ``P(rank r) = h_r prod_{j<r} (1 - h_j)`` with
    ``h_r = a_d decay^r``. ``decay = 1`` is ``sibling_probs_independent``. Leading axes broadcast.
    """
    if not 0.0 <= decay <= 1.0:
        raise SpecsimError(f"sibling hazard decay must lie in [0, 1], got {decay:g}")
    a = check_rates(depth_rates)[..., :, None]
    hazard = a * decay ** np.arange(max_rank)
    survive = np.cumprod(1.0 - hazard, axis=-1)
    before = np.concatenate([np.ones((*survive.shape[:-1], 1)), survive[..., :-1]], axis=-1)
    return hazard * before
