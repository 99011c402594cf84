"""Speculation policy: k per batch, by hand."""

from __future__ import annotations

import pytest

from specsim.errors import SpecsimError
from specsim.scenario.serving import EngineConfig
from specsim.step.policy import SpecPolicy


def test_static_and_disable_above() -> None:
    p = SpecPolicy.static(4, disable_above_batch=32)
    table = p.k_table(64)
    assert table[1] == 4 and table[32] == 4 and table[33] == 0 and table[64] == 0
    assert SpecPolicy.off().k_table(8).tolist() == [0] * 9


def test_schedule_by_batch() -> None:
    p = SpecPolicy.by_batch([(17, 64, 2), (1, 16, 5)], disable_above_batch=100)
    table = p.k_table(128)
    assert table[1] == 5 and table[16] == 5 and table[17] == 2 and table[64] == 2
    assert table[65] == 0 and table[101] == 0
    assert p.max_k == 5
    assert SpecPolicy.by_batch([(1, 8, 3)], default_k=1).k_table(10)[9] == 1


def test_overlapping_ranges_are_refused() -> None:
    with pytest.raises(SpecsimError, match="overlap"):
        SpecPolicy.by_batch([(1, 16, 4), (16, 32, 2)])
    with pytest.raises(SpecsimError, match="batch_from"):
        SpecPolicy.by_batch([(8, 4, 2)])


def test_k_cut_to_fit_the_token_budget() -> None:
    # 16 sequences x (k + 1) <= 48 tokens: k <= 48 // 16 - 1 = 2.
    eng = EngineConfig(max_num_seqs=16, max_num_batched_tokens=48, kv_capacity_tokens=10**6,
                       policy=SpecPolicy.static(4))
    k = eng.k_by_batch()
    assert k[16] == 2  # 48 // 16 - 1
    assert k[12] == 3  # 48 // 12 - 1
    assert k[4] == 4  # the policy's own k fits


def test_budget_below_max_num_seqs_is_refused() -> None:
    with pytest.raises(SpecsimError, match="max_num_batched_tokens"):
        EngineConfig(max_num_seqs=64, max_num_batched_tokens=32)
