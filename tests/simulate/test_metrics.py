"""Metrics by hand on schedules small enough to write down."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.records import to_record
from specsim.scenario.serving import SLO, EngineConfig, Pricing, cost_per_mtok_usd
from specsim.scenario.traffic import Requests
from specsim.scenario.workload import AcceptanceMix
from specsim.simulate.cost import AnalyticCost
from specsim.simulate.engine import simulate
from specsim.simulate.metrics import Percentiles, summarize, weighted_percentile
from specsim.step.policy import Policy


def test_weighted_percentile_by_hand() -> None:
    v, w = np.array([4.0, 1.0, 3.0, 2.0]), np.ones(4)
    assert weighted_percentile(v, 50, w) == 2.0
    assert weighted_percentile(v, 99, w) == 4.0
    assert weighted_percentile(v, 50, np.array([0.0, 1.0, 0.0, 3.0])) == 2.0  # 1 has weight 1 of 4
    p = Percentiles.of(np.array([1.0, 2.0, 3.0, 4.0, np.nan]))
    assert (p.p50, p.mean) == (2.5, 2.5)


def _two_waves():
    """4 requests at t=0, two seats, prompt 1 (free prefill), output 3, 1 s decode steps: requests 0 and 1
    run 0-2 s, requests 2 and 3 wait 2 s and run 2-4 s."""
    return simulate(Requests.at_once(4, 1, 3), EngineConfig(2, 64, 10**6), AnalyticCost(step_s=1.0))


def test_latency_goodput_and_time_averages_by_hand() -> None:
    res = _two_waves()
    np.testing.assert_allclose(res.first_token_s, [0, 0, 2, 2])
    np.testing.assert_allclose(res.finish_s, [2, 2, 4, 4])
    m = summarize(res, SLO(ttft_s=1.0, tpot_s=1.5), Pricing(gpu_hour_usd=2.0, gpus_per_replica=8), bins=4)
    assert m.window_s == 4.0
    assert m.tpot_s.mean == 1.0 and m.ttft_s.mean == 1.0 and m.queue_s.p99 == pytest.approx(2.0)
    assert m.goodput_rps == pytest.approx(2 / 4) and m.slo_attainment == 0.5
    assert m.requests_per_s == 1.0 and m.output_tok_s == 12 / 4
    assert m.mean_in_system == pytest.approx((2 + 2 + 4 + 4) / 4)
    assert m.mean_waiting == pytest.approx((2 + 2) / 4) and m.mean_running == pytest.approx(2.0)
    ts = m.timeseries
    assert ts is not None
    np.testing.assert_allclose(ts.waiting, [2, 2, 0, 0])
    np.testing.assert_allclose(ts.running, [2, 2, 2, 2])
    # 16 GPU-dollars an hour for 3 tokens/s.
    assert m.cost_per_mtok_usd == pytest.approx(16 / (3 * 3600) * 1e6)


def test_cost_per_million_tokens_by_hand() -> None:
    # 8 GPUs at $2/h = $16/h; 1000 tok/s = 3.6 M tokens an hour: $4.44 per million.
    assert cost_per_mtok_usd(8, 2.0, 1000.0) == pytest.approx(16 / 3.6)


def test_itl_per_token_and_per_step_with_speculation() -> None:
    # k = 2, every draft accepted: each 0.3 s step hands the request 3 tokens, 0.1 s each.
    res = simulate(Requests.at_once(1, 1, 16), EngineConfig(4, 64, 1000, Policy.static(2)),
                   AnalyticCost(step_s=0.3), AcceptanceMix.constant(1.0))
    m = summarize(res, bins=None)
    assert m.itl_token_s.p50 == pytest.approx(0.1) and m.itl_token_s.p99 == pytest.approx(0.1)
    assert m.itl_step_s.p50 == pytest.approx(0.3)
    assert m.tpot_s.mean == pytest.approx(5 * 0.3 / 15)
    assert m.tokens_per_decode_step == 3.0


def test_record_is_plain_data() -> None:
    d = to_record(summarize(_two_waves(), SLO(1.0, 1.0)))
    assert d["ttft_s"]["p50"] == 1.0 and isinstance(d["timeseries"]["time_s"], list)
    res = _two_waves()
    assert int(res.requests.output_tokens[res.completed].sum()) == 12
