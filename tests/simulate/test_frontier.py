"""The frontier's arithmetic on sweeps written by hand: on / off ratios at each load point, the crossover (the
load from which speculation never pays again), and the recommendation per load range."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from specsim.errors import SpecsimError
from specsim.simulate.frontier import crossover, crossovers, ratios, recommend


def _frame(off: list[float], on: dict[str, list[float]], loads: list[int]) -> pd.DataFrame:
    rows = [{"configuration": "off", "concurrency": c, "output_tok_s": t, "tpot_mean_ms": 1000 * c / t}
            for c, t in zip(loads, off, strict=True)]
    for name, values in on.items():
        rows += [{"configuration": name, "concurrency": c, "output_tok_s": t, "tpot_mean_ms": 1000 * c / t}
                 for c, t in zip(loads, values, strict=True)]
    return pd.DataFrame(rows)


LOADS = [1, 4, 16, 64, 256]
SWEEP = _frame([100, 380, 1400, 4000, 9000], {"eagle3 k=3": [230, 800, 2100, 4200, 8100],
                                              "eagle3 k=1": [160, 600, 2000, 4400, 9100]}, LOADS)


def test_ratios_are_on_over_off_at_the_same_load() -> None:
    r = ratios(SWEEP)
    k3 = r[r["configuration"] == "eagle3 k=3"]
    assert np.allclose(k3["throughput_ratio"], [2.3, 800 / 380, 1.5, 1.05, 0.9])
    # at a fixed concurrency TPOT scales as 1 / throughput here, so its ratio is the inverse
    assert np.allclose(k3["tpot_ratio"], 1 / k3["throughput_ratio"])


@pytest.mark.parametrize(("ratio", "expected"), [
    ([2.0, 1.5, 1.1, 0.9, 0.8], 64.0),  # stops paying at 64 and never again
    ([2.0, 0.9, 1.1, 0.9, 0.8], 64.0),  # a dip that recovers is not the crossover
    ([2.0, 1.5, 1.1, 1.05, 1.0], None),  # still pays (breaks even) at the largest load
    ([0.9, 0.8, 0.7, 0.6, 0.5], 1.0),  # never pays: the smallest load
])
def test_crossover(ratio: list[float], expected: float | None) -> None:
    assert crossover(np.array(LOADS, float), np.array(ratio)) == expected
    shuffled = np.array([3, 0, 4, 1, 2])  # the loads need not come sorted
    assert crossover(np.array(LOADS, float)[shuffled], np.array(ratio)[shuffled]) == expected


def test_crossovers_per_configuration() -> None:
    assert crossovers(SWEEP) == {"eagle3 k=1": None, "eagle3 k=3": 256.0}


def test_recommendation_ranges() -> None:
    picks = [(c.load_from, c.load_to, c.configuration) for c in recommend(SWEEP)]
    # k=3 wins at 1-16 (2.3x, 2.1x, 1.5x); k=1 at 64 (1.1x) and 256 (1.011x, past the 1% margin): one range
    assert picks == [(1, 16, "eagle3 k=3"), (64, 256, "eagle3 k=1")]
    gains = {c.configuration: c.gain for c in recommend(SWEEP)}
    assert gains["eagle3 k=3"] == pytest.approx(1.5)  # the smallest gain over its range
    strict = recommend(SWEEP, margin=0.05)  # a 5% margin: 256 (1.011x) goes to plain decoding
    assert strict[-1].configuration == "off" and strict[-1].load_from == 256


def test_a_sweep_without_plain_decoding_is_refused() -> None:
    with pytest.raises(SpecsimError, match="no plain-decoding rows"):
        ratios(SWEEP[SWEEP["configuration"] != "off"])
    with pytest.raises(SpecsimError, match="margin"):
        recommend(SWEEP, margin=1.5)


def test_a_configuration_that_completed_nothing_never_pays_and_does_not_crash() -> None:
    """Issue 30: a load point whose requests were all rejected (longer than the KV cache) has NaN throughput; the
    speculating configuration then made no tokens there (ratio 0), and where plain decoding completed nothing the
    ratio is unknown and read past, never an all-NaN idxmax."""
    nan = float("nan")
    frame = _frame([100, 380, nan], {"eagle3 k=3": [230, nan, nan]}, [1, 4, 16])
    r = ratios(frame).set_index("concurrency")["throughput_ratio"]
    assert r[1] == pytest.approx(2.3) and r[4] == 0.0 and np.isnan(r[16])
    # it pays at 1, stops at 4 (made nothing there); 16 says nothing
    assert crossovers(frame) == {"eagle3 k=3": 4.0}
    picks = [(c.load_from, c.load_to, c.configuration) for c in recommend(frame)]
    assert picks == [(1.0, 1.0, "eagle3 k=3"), (4.0, 16.0, "off")]
    assert crossover(np.array([1.0, 2.0]), np.array([nan, nan])) is None
