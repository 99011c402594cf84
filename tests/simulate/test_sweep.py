"""Sweeps: the grid, parallel = serial, rows = direct runs."""

from __future__ import annotations

import pandas as pd  # type: ignore[import-untyped]
import pytest

from specsim.scenario.serving import SLO, EngineConfig
from specsim.scenario.traffic import Lognormal, Poisson, Traffic, generate_requests
from specsim.scenario.workload import AcceptanceMix
from specsim.simulate.cost import AnalyticCost
from specsim.simulate.engine import simulate
from specsim.simulate.metrics import summarize
from specsim.simulate.sweep import grid, metrics_row, sweep
from specsim.step.policy import Policy

COST = AnalyticCost(0.01, 5e-5, 2e-8, 0.003, 3e-5)
MIX = AcceptanceMix.constant(0.75)


def _cases():
    tr = Traffic(Poisson(1.0), Lognormal(300, 0.6), Lognormal(60, 0.6), num_requests=400)
    eng = EngineConfig(32, 1024, 50_000)
    return grid(tr, eng, MIX, rates_rps=[4.0, 16.0], policies=[Policy.off(), Policy.static(3)], seeds=[1])


def test_grid_is_the_product() -> None:
    cases = _cases()
    assert len(cases) == 4
    assert [dict(c.labels)["rate_rps"] for c in cases] == [4.0, 4.0, 16.0, 16.0]
    assert [dict(c.labels)["policy"] for c in cases] == ["off", "k=3", "off", "k=3"]


def test_parallel_sweep_equals_serial_and_direct_runs() -> None:
    cases = _cases()
    slo = SLO(0.5, 0.02)
    serial = sweep(cases, COST, slo, n_jobs=1)
    parallel = sweep(cases, COST, slo, n_jobs=2)
    pd.testing.assert_frame_equal(serial, parallel)
    c = cases[3]
    direct = metrics_row(summarize(simulate(generate_requests(c.traffic, c.seed), c.engine, COST, MIX, c.seed),
                                   slo, bins=None))
    row = serial.iloc[3]
    for key in ("ttft_p99_s", "tpot_p50_s", "goodput_rps", "output_tok_s", "preemptions"):
        assert row[key] == pytest.approx(direct[key])
    # More load, more queueing (same seed, same lengths).
    assert serial.loc[2, "queue_mean_s"] > serial.loc[0, "queue_mean_s"]
