"""Step tables evaluated row by row and shared (`StepTable.build(rows=...)`, `cached_table`, `Setup.table`): the
same values as a full fresh build, reused across setups, and simulations that do not change with the cache."""

from __future__ import annotations

import numpy as np
import pandas as pd  # type: ignore[import-untyped]
import pytest

from specsim.advise.simulation import make_setup, run_scenario
from specsim.errors import SpecsimError
from specsim.records import to_record
from specsim.scenario.scenario import load_scenario
from specsim.scenario.serving import SLO, EngineConfig
from specsim.scenario.traffic import Lognormal, Poisson, Traffic
from specsim.scenario.workload import AcceptanceMix
from specsim.simulate.cost import AnalyticCost, StepTable, cached_table, clear_table_cache, rows_of
from specsim.simulate.sweep import grid, sweep, sweep_many
from specsim.step.policy import Policy
from tests.corpus.harness import ROOT
from tests.simulate.test_cost import RooflineLike


def _filled_equal(part: StepTable, full: StepTable) -> None:
    assert set(part.ks) <= set(full.ks)
    n = len(part.context_grid)
    for i, k in enumerate(part.ks):
        j = full.ks.index(k)
        rows = np.flatnonzero(part.filled[i])
        assert rows.size
        np.testing.assert_array_equal(part.decode[i, rows], full.decode[j, rows, :n])
    np.testing.assert_array_equal(part.context_grid, full.context_grid[:len(part.context_grid)])
    np.testing.assert_array_equal(part.prefill, full.prefill[:, :len(part.context_grid)])


def test_rows_of_a_policy_and_a_partial_table_equal_to_the_full_one() -> None:
    eng = EngineConfig(16, 24, 10_000, Policy.parse("1-4:k=3,5-16:k=1"))
    rows = rows_of([eng.k_by_batch(), EngineConfig(16, 24, 10_000).k_by_batch()])
    assert rows[3] == {1, 2, 3, 4} and rows[0] == set(range(1, 17))
    assert rows[1] == set(range(5, 13))  # 13 x (1 + 1) > 24 tokens: k cut to 0 from batch 13
    cost = RooflineLike()
    full = StepTable.build(cost, 16, [0, 1, 3], 5000, 256)
    part = StepTable.build(cost, 16, [], 5000, 256, rows=rows)
    assert part.ks == (0, 1, 3) and int(part.filled.sum()) == sum(len(b) for b in rows.values())
    _filled_equal(part, full)
    assert part.covers_rows(rows) and not part.covers_rows({3: [5]}) and not part.covers(16, [3])
    with pytest.raises(SpecsimError, match="not evaluated"):
        part.decode_s(np.array([5]), np.array([100.0]), np.array([3]))
    with pytest.raises(SpecsimError, match="not evaluated"):
        part.decode_rows(np.array([0] + [3] * 16))
    assert len(part.decode_rows(eng.k_by_batch())) == 17


def test_cached_table_is_reused_extended_and_rebuilt_as_a_fresh_build_would_be() -> None:
    clear_table_cache()
    cost = RooflineLike()
    a = cached_table(cost, 32, 512, {0: range(1, 33), 2: [1, 2, 3]}, 3000)
    assert cached_table(cost, 32, 512, {2: [2]}, 2000) is a  # held already: the same object
    b = cached_table(cost, 32, 512, {4: [7, 8]}, 3000)  # more rows: evaluated and added
    assert b is not a and b.covers_rows({0: range(1, 33), 2: [1, 2, 3], 4: [7, 8]})
    c = cached_table(cost, 32, 512, {1: [5]}, 50_000)  # a longer context: rebuilt, keeping the rows held
    assert c.context_grid[-1] >= 50_000 and c.covers_rows({2: [1, 2, 3], 4: [7, 8], 1: [5]})
    fresh = StepTable.build(cost, 32, [0, 1, 2, 4], 50_000, 512)
    for t in (a, b, c):
        _filled_equal(t, fresh)
    assert cached_table(RooflineLike(), 16, 512, {0: [1]}, 100) is not c  # other limits: another table
    assert cached_table(AnalyticCost(0.01), 32, 512, {0: [1]}, 100).ks == (0,)  # another cost: another table
    clear_table_cache()


@pytest.fixture(scope="module")
def chat():  # type: ignore[no-untyped-def]
    return load_scenario(ROOT / "scenarios" / "chat-traffic-llama8b-h100.yaml")


def test_planner_cost_rows_are_the_full_grid_values(chat) -> None:  # type: ignore[no-untyped-def]
    setup = make_setup(chat, policy=Policy.static(3), draft="eagle3")
    cost = setup.cost()
    full = StepTable.build(cost, 12, [0, 3], 20_000, 2048)
    part = StepTable.build(cost, 12, [], 20_000, 2048, rows={3: [2, 7, 12], 0: [5]})
    _filled_equal(part, full)  # bit for bit: the planner's step arithmetic is elementwise


def test_setups_share_a_table_and_simulations_do_not_change_with_the_cache(chat) -> None:  # type: ignore[no-untyped-def]
    clear_table_cache()
    setup = make_setup(chat, requests=300, policy=Policy.static(3), draft="eagle3")
    cold = run_scenario(setup, compare=True, bins=None)
    other = make_setup(chat, requests=200, policy=Policy.parse("1-8:k=5,9-256:k=2"), draft="eagle3")
    warm_table = other.table([Policy.off(), other.policy], [])
    again = make_setup(chat, requests=300, policy=Policy.static(3), draft="eagle3")
    table = again.table([Policy.off(), again.policy], [])
    assert table is warm_table or table.covers_rows(rows_of([again.engine(p).k_by_batch()
                                                              for p in (Policy.off(), again.policy)]))
    assert table.covers_rows({5: [1, 8], 2: [9, 256], 3: range(1, 257)})  # one table across the setups
    warm = run_scenario(again, compare=True, bins=None)
    for x, y in zip(cold.runs, warm.runs, strict=True):
        np.testing.assert_array_equal(x.result.finish_s, y.result.finish_s)
        np.testing.assert_array_equal(x.result.first_token_s, y.result.first_token_s)
        assert to_record(x.metrics) == to_record(y.metrics)
    clear_table_cache()


def test_sweep_many_over_forked_workers_equals_the_serial_sweeps() -> None:
    tr = Traffic(Poisson(1.0), Lognormal(300, 0.6), Lognormal(60, 0.6), num_requests=300)
    cost = AnalyticCost(0.01, 5e-5, 2e-8, 0.003, 3e-5)
    mix = AcceptanceMix.constant(0.7)
    one = grid(tr, EngineConfig(32, 1024, 50_000), mix, rates_rps=[4.0, 12.0],
               policies=[Policy.off(), Policy.static(2)], seeds=[3])
    two = grid(tr, EngineConfig(16, 512, 20_000), mix, rates_rps=[8.0], policies=[Policy.static(4)], seeds=[5])
    slo = SLO(0.5, 0.02)
    serial = [sweep(one, cost, slo, n_jobs=1), sweep(two, cost, slo, n_jobs=1)]
    for workers in (1, 2):
        got = sweep_many([(one, cost), (two, cost)], slo, workers=workers)
        assert len(got) == 2
        for g, s in zip(got, serial, strict=True):
            pd.testing.assert_frame_equal(g, s)
    assert serial[0].loc[2, "queue_mean_s"] >= serial[0].loc[0, "queue_mean_s"]  # the rows differ by case


def test_blocks_evaluated_when_read_equal_the_full_build_and_simulations_do_not_change(chat) -> None:  # type: ignore[no-untyped-def]
    """A table evaluates its decode rows block by block as lookups read them: each value is the full build's, a
    simulation reads the same costs as on a completed table, and it evaluates a part of the grid only."""
    from specsim.simulate.engine import simulate

    setup = make_setup(chat, requests=300, policy=Policy.static(3), draft="eagle3")
    cost = setup.cost()
    eng = setup.engine(setup.policy)
    req = run_scenario(setup, compare=False, bins=None).requests
    rows = rows_of([eng.k_by_batch()])
    lazy = StepTable.build(cost, eng.max_num_seqs, rows, 20_000, eng.max_num_batched_tokens, rows=rows)
    done = StepTable.build(cost, eng.max_num_seqs, rows, 20_000, eng.max_num_batched_tokens, rows=rows).complete()
    assert not lazy._done.any() and bool(np.isnan(lazy._decode[:, 1:]).all())
    mix = setup.mix()[0]
    a, b = simulate(req, eng, lazy, mix, 7), simulate(req, eng, done, mix, 7)
    for x, y in ((a.finish_s, b.finish_s), (a.first_token_s, b.first_token_s),
                 (a.steps.duration_s, b.steps.duration_s), (a.steps.emitted, b.steps.emitted)):
        np.testing.assert_array_equal(x, y)
    assert 0 < int(lazy._done.sum()) < int(done._done.sum())  # a part of the grid was evaluated
    held = lazy._decode[~np.isnan(lazy._decode)]
    assert held.size and np.isin(held, done._decode).all()
    # the vectorised lookup evaluates what it reads, and equals the completed table's
    bs, ctx = np.array([1, 5, 40, 100]), np.array([30.0, 900.0, 5000.0, 19_000.0])
    np.testing.assert_array_equal(lazy.decode_s(bs, ctx, np.full(4, 3)), done.decode_s(bs, ctx, np.full(4, 3)))
    np.testing.assert_array_equal(lazy.decode, done.decode)  # `decode` completes the table first
