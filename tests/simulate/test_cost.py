"""StepTable against the cost it tabulates; AnalyticCost against its formula by hand."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from specsim.errors import SpecsimError
from specsim.simulate.cost import AnalyticCost, StepTable


class RooflineLike:
    """A non-linear step cost: max(compute, memory) + overhead, memory sub-linear in context."""

    def decode_s(self, batch: np.ndarray, mean_context: np.ndarray, k: np.ndarray) -> np.ndarray:
        b, c, kk = np.asarray(batch, float), np.asarray(mean_context, float), np.asarray(k, float)
        compute = 2e-4 * b * (kk + 1)
        memory = 8e-3 + 3e-8 * b * c + 1e-6 * np.sqrt(b * c)
        return 2e-3 + np.maximum(compute, memory) + 1.5e-3 * kk

    def prefill_s(self, tokens: np.ndarray, mean_context: np.ndarray) -> np.ndarray:
        t, c = np.asarray(tokens, float), np.asarray(mean_context, float)
        return 4e-3 + 1e-4 * t + 2e-9 * t * c + 1e-5 * np.sqrt(t)


def test_analytic_cost_by_hand() -> None:
    cost = AnalyticCost(step_s=0.01, per_token_s=1e-4, per_token_context_s=1e-7, prefill_fixed_s=0.002,
                        prefill_per_token_s=5e-5)
    # 0.01 + 1e-4 * 8 * 4 + 1e-7 * 8 * 1000 = 0.01 + 0.0032 + 0.0008
    assert float(cost.decode_s(np.array(8), np.array(1000.0), np.array(3))) == pytest.approx(0.014)
    # 0.002 + 5e-5 * 512
    assert float(cost.prefill_s(np.array(512), np.array(0.0))) == pytest.approx(0.0276)


def test_table_is_exact_for_a_cost_linear_in_context() -> None:
    cost = AnalyticCost(0.01, 1e-4, 1e-7, 0.002, 5e-5)
    table = StepTable.build(cost, max_batch=64, ks=[0, 2, 5], max_context=50_000, max_prefill_tokens=4096)
    rng = np.random.default_rng(1)
    b = rng.integers(1, 65, 500)
    c = rng.uniform(0, 50_000, 500)
    k = rng.choice([0, 2, 5], 500)
    np.testing.assert_allclose(table.decode_s(b, c, k), cost.decode_s(b, c, k), rtol=1e-12)
    t = rng.uniform(1, 4096, 500)
    np.testing.assert_allclose(table.prefill_s(t, c), cost.prefill_s(t, c), rtol=1e-9)


def test_table_within_one_and_a_half_percent_of_a_roofline_kink() -> None:
    cost = RooflineLike()
    table = StepTable.build(cost, max_batch=256, ks=[0, 4], max_context=131_072, max_prefill_tokens=8192)
    rng = np.random.default_rng(2)
    b = rng.integers(1, 257, 2000)
    c = np.exp(rng.uniform(np.log(16), np.log(131_072), 2000))
    k = rng.choice([0, 4], 2000)
    rel = np.abs(table.decode_s(b, c, k) / cost.decode_s(b, c, k) - 1)
    assert rel.max() < 0.015  # worst case at a max() kink: (ratio - 1) / 4 = 1%
    t = np.exp(rng.uniform(0, np.log(8192), 2000))
    rel_p = np.abs(table.prefill_s(t, c) / cost.prefill_s(t, c) - 1)
    assert rel_p.max() < 0.015
    # The scalar fast path agrees with the vectorised lookup.
    assert table.prefill_time(1234.0, 5678.0) == pytest.approx(float(table.prefill_s(np.array(1234.0),
                                                                                      np.array(5678.0))))


def test_table_refuses_batches_and_k_it_does_not_hold() -> None:
    table = StepTable.build(AnalyticCost(0.01), max_batch=8, ks=[0, 3], max_context=100, max_prefill_tokens=64)
    with pytest.raises(SpecsimError, match="batch"):
        table.decode_s(np.array(9), np.array(10.0), np.array(0))
    with pytest.raises(SpecsimError, match="k must be one of"):
        table.decode_s(np.array(2), np.array(10.0), np.array(2))
    assert table.covers(8, [0, 3]) and not table.covers(9, [0]) and not table.covers(8, [4])


def test_table_survives_pickling() -> None:
    cost = RooflineLike()
    table = StepTable.build(cost, max_batch=16, ks=[0, 2], max_context=4096, max_prefill_tokens=512)
    copy = pickle.loads(pickle.dumps(table))
    x = (np.array([3, 16]), np.array([100.0, 3000.0]), np.array([2, 0]))
    np.testing.assert_array_equal(copy.decode_s(*x), table.decode_s(*x))
    assert copy.prefill_time(300.0, 1000.0) == table.prefill_time(300.0, 1000.0)
