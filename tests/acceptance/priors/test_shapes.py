"""The tree model the shapes are evaluated with, against published sibling data."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.acceptance.sibling_probs import sibling_probs_hazard


def test_sibling_hazard_against_published_sibling_data() -> None:
    """The hazard decay 0.6 against two independent sibling measurements: Medusa head 1's top-5
    accuracy (0.78 at top-1 0.56; medusa_acc.csv) and Sequoia's acceptance vector (ranks 0-3:
    0.634, 0.108, 0.057, 0.0225)."""
    medusa = sibling_probs_hazard(np.array([0.56]), 5)[0]
    assert medusa.sum() == pytest.approx(0.78, rel=0.05)
    seq = sibling_probs_hazard(np.array([0.634]), 4)[0]
    assert seq.sum() == pytest.approx(0.634 + 0.108 + 0.057 + 0.0225, rel=0.05)
    assert seq[0] == pytest.approx(0.634)
