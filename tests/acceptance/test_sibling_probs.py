from __future__ import annotations

import numpy as np
import pytest

from specsim.acceptance.chain import expected_tokens_positional
from specsim.acceptance.sibling_probs import (
    sibling_probs_hazard,
    sibling_probs_independent,
    sibling_probs_multicandidate,
)
from specsim.acceptance.tree_shapes import chain


def test_sibling_probability_models() -> None:
    # SpecInfer multi-candidate: seed p/q -> beta 0.7, residual (1,0,0), second try passes w.p. q(a)=0.3
    p, q = np.array([0.6, 0.3, 0.1]), np.array([0.3, 0.6, 0.1])
    assert np.allclose(sibling_probs_multicandidate(p, q, 3), [0.7, 0.3 * 0.3, 0.3 * 0.7 * 0.3])
    ind = sibling_probs_independent([0.8, 0.5], 3)
    assert np.allclose(ind, [[0.8, 0.16, 0.032], [0.5, 0.25, 0.125]])


def test_sibling_hazard_by_hand() -> None:
    """probs[d, r] = a decay^r prod_{j<r} (1 - a decay^j): a = 0.8, decay 0.5 by hand."""
    p = sibling_probs_hazard([0.8], 3, decay=0.5)[0]
    assert p == pytest.approx([0.8, 0.2 * 0.4, 0.2 * 0.6 * 0.2])
    # decay 1 is the independent model; rank 0 is always the chain rate
    rates = np.array([0.9, 0.6, 0.3])
    assert sibling_probs_hazard(rates, 4, decay=1.0) == pytest.approx(sibling_probs_independent(rates, 4))
    assert sibling_probs_hazard(rates, 4)[:, 0] == pytest.approx(rates)
    assert np.all(sibling_probs_hazard(rates, 8).sum(axis=1) <= 1.0 + 1e-12)
    assert np.all(np.diff(sibling_probs_hazard(rates, 8), axis=1) <= 1e-12)  # rank-monotone (best_tree needs it)
    # a chain under the hazard model is the chain formula
    assert float(chain(3).expected_tokens(sibling_probs_hazard(rates, 2))) == pytest.approx(
        float(expected_tokens_positional(rates, 3)))
