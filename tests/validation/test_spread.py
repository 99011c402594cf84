"""The bands judged on the published corpus, each source group left out of the spreads' fit in turn, and the
shipped spreads (step/data/spread.yaml) as benchmarks/fit_spread.py fits them on today's rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from specsim.step.bands import load_spread
from specsim.validation.score import score
from specsim.validation.spread import coverage, fit_spread


@pytest.fixture(scope="module")
def rows() -> pd.DataFrame:
    r = score(crossovers=False).rows
    return r[r["error"].notna()]


def test_the_shipped_spreads_are_todays_fit(rows: pd.DataFrame) -> None:
    fit, shipped = fit_spread(rows), load_spread()
    for fitted, kept in ((fit.speedup_sigma, shipped.speedup_sigma), (fit.step_sigma, shipped.step_sigma)):
        assert set(fitted) == set(kept)
        for key, value in fitted.items():
            assert kept[key] == pytest.approx(value, abs=1e-4), key
    assert shipped.acceptance_scale == pytest.approx(fit.acceptance_scale, abs=1e-4)
    assert shipped.speedup_bias == pytest.approx(fit.speedup_bias, abs=1e-4)


def test_held_out_bands_hold_about_as_often_as_they_say(rows: pd.DataFrame) -> None:
    """Measured on this corpus with each group's bands drawn without it (the floors the note quotes): from the
    priors the speedup band holds 79% of 547 rows, neither side over 12%, half-width 30%; with the acceptance given
    85% of 136 (4% above, 11% below: the band leans by the cost model's bias, +8%), half-width 12%, narrower than a
    constant band that holds as often."""
    def cov(mode: str):  # type: ignore[no-untyped-def]
        r = rows[rows["mode"] == mode]
        return coverage(*(r[c].to_numpy(dtype=float) for c in ("published", "predicted", "speedup_low",
                                                               "speedup_high")))
    priors, measured = cov("priors"), cov("measured")
    assert priors.n > 500 and 0.75 <= priors.inside <= 0.85 and max(priors.above, priors.below) <= 0.12
    assert priors.half_width <= 0.30
    assert measured.n > 100 and 0.75 <= measured.inside <= 0.85 and max(measured.above, measured.below) <= 0.12
    assert measured.half_width <= 0.15 and measured.half_width < measured.constant_half_width
    # the central values are today's answers: the bands leave them alone (0.138 -> 0.136 with prefill attention
    # priced as its kernels run, issue 33)
    assert np.median(np.abs(rows[rows["mode"] == "priors"]["error"])) == pytest.approx(0.136, abs=0.002)


def test_the_speedup_spread_splits_a_groups_offset_from_a_rows_scatter() -> None:
    """By hand on three made-up groups (two families): bias = the mean of the group means; sigma^2 = the between-group
    variance less the means' sampling share, plus the pooled within-group variance; an unmeasured family's sigma^2
    adds the families' offsets' variance about the bias."""
    from specsim.step.bands import UNMEASURED
    from specsim.validation.spread import _group_effects

    e = np.array([0.10, 0.20, 0.00, 0.02, 0.30, 0.34])
    groups = np.array(["a", "a", "b", "b", "c", "c"])
    bias, sigma = _group_effects(e, groups, np.array(["vllm"] * 4 + ["hf-1.0"] * 2))
    means = np.array([0.15, 0.01, 0.32])
    within = (0.05 ** 2 * 2 + 0.01 ** 2 * 2 + 0.02 ** 2 * 2) / 3
    between = max(0.0, np.mean((means - means.mean()) ** 2) - within / 2)
    assert bias == pytest.approx(means.mean())
    assert sigma["vllm"] == sigma["hf"] == pytest.approx(np.sqrt(between + within))
    fam = np.array([0.08, 0.32])  # vllm's groups a and b together, hf's c
    assert sigma[UNMEASURED] == pytest.approx(np.sqrt(between + within + np.mean((fam - bias) ** 2)))
