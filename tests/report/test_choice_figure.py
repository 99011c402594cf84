"""The report's figure of the plan's choice against acceptance: the plan's own band decision drawn as it is (the
chosen policy's gain and the best choice at the band's ends, the threshold that would change it)."""

from __future__ import annotations

import numpy as np

from specsim.plan.result import BandCase, BandChoice, BandDecision, Threshold
from specsim.report.figures.choice import choice_against_acceptance

LOW = BandCase(0.9, 1.0, "none", "eagle3", {"eagle3": 1.8})
HIGH = BandCase(1.6, 1.7, "eagle3", "eagle3", {"eagle3": 3.6})
BAND = BandDecision(BandChoice(1.3, "eagle3", "eagle3"), LOW, HIGH, False, {"eagle3": 2.6},
                    (Threshold("low", "eagle3", 2.1, LOW),))


def test_the_figure_draws_the_plans_own_band() -> None:
    fig = choice_against_acceptance(BAND, "eagle3", "t")
    assert fig is not None
    ax = fig.axes[0]
    kept, best = (line for line in ax.lines if line.get_marker() in ("o", "s"))
    assert np.allclose(kept.get_xdata(), [1.8, 2.6, 3.6]) and np.allclose(kept.get_ydata(), [0.9, 1.3, 1.6])
    assert np.allclose(best.get_ydata(), [1.0, 1.3, 1.7])
    verticals = [line for line in ax.lines if np.allclose(line.get_xdata(), line.get_xdata()[0])
                 and line not in (kept, best)]
    assert any(np.isclose(line.get_xdata()[0], 2.1) for line in verticals)  # the threshold to measure


def test_no_figure_without_the_drafts_band() -> None:
    assert choice_against_acceptance(BAND, "ngram", "t") is None
