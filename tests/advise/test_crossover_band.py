"""The frontier's crossover with its band: where speculation may stop paying at the throughput ratio's 80% band's
low and high end, the band from the acceptance's and the engine's measured speedup spread."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specsim.advise.benchmark import BenchmarkFlags, benchmark_scenario, frontier
from specsim.advise.simulation import make_setup
from specsim.simulate.frontier import crossover
from specsim.step.bands import load_spread
from specsim.step.policy import Policy

LOADS = [1, 16, 64, 256]


def _frontier(**kw: object):  # type: ignore[no-untyped-def]
    flags = BenchmarkFlags(hardware="h100-sxm", model="llama-3.1-70b", drafts=("ngram",), tp=4, k=3, input_len=512,
                           output_len=64, concurrency=tuple(LOADS), **kw)  # type: ignore[arg-type]
    setup = make_setup(benchmark_scenario(flags), policy=Policy.static(3))
    return frontier(setup, concurrencies=LOADS, num_prompts=None)


def _rank(x: float | None) -> float:
    return math.inf if x is None else x


def test_the_band_holds_the_central_crossover() -> None:
    f = _frontier()
    (name, at), = f.crossovers.items()
    early, late = f.crossover_bands[name]
    assert _rank(early) <= _rank(at) <= _rank(late)
    assert early != late  # a prior's acceptance band is wide enough to move it


def test_with_the_acceptance_given_only_the_cost_spread_remains() -> None:
    """By hand: the ratio at each load times exp(-bias -/+ 1.2816 sigma) (the engine's speedup spread, leaning by the
    cost model's bias where the acceptance was given), its crossover."""
    f = _frontier(acceptance_length=1.6)
    (name, _), = f.crossovers.items()
    g = f.rows[f.rows["configuration"] == name]
    sp = load_spread()
    z = 1.2816 * sp.sigma(sp.speedup_sigma, "vllm")
    ratio, x = g["throughput_ratio"].to_numpy(float), g["concurrency"].to_numpy(float)
    lean = np.exp(-sp.speedup_bias)
    assert sp.speedup_bias > 0.0
    assert f.crossover_bands[name] == pytest.approx((crossover(x, ratio * lean * np.exp(-z)),
                                                     crossover(x, ratio * lean * np.exp(z))))
