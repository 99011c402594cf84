"""Speculation policy: k per batch, by hand."""

from __future__ import annotations

import pytest

from specsim.errors import SpecsimError
from specsim.scenario.serving import EngineConfig
from specsim.step.policy import Config, Policy, Segment


def test_static_and_disable_above() -> None:
    p = Policy.static(4, disable_above_batch=32)
    table = p.k_table(64)
    assert table[1] == 4 and table[32] == 4 and table[33] == 0 and table[64] == 0
    assert Policy.off().k_table(8).tolist() == [0] * 9


def test_schedule_by_batch() -> None:
    p = Policy.of_ranges(0, [(17, 64, 2), (1, 16, 5)], disable_above_batch=100)
    table = p.k_table(128)
    assert table[1] == 5 and table[16] == 5 and table[17] == 2 and table[64] == 2
    assert table[65] == 0 and table[101] == 0
    assert p.max_k == 5
    assert Policy.of_ranges(1, [(1, 8, 3)]).k_table(10)[9] == 1


def test_overlapping_ranges_are_refused() -> None:
    with pytest.raises(SpecsimError, match="overlap"):
        Policy.of_ranges(0, [(1, 16, 4), (16, 32, 2)])
    with pytest.raises(SpecsimError, match="batch_from"):
        Policy.of_ranges(0, [(8, 4, 2)])


def test_k_cut_to_fit_the_token_budget() -> None:
    # 16 sequences x (k + 1) <= 48 tokens: k <= 48 // 16 - 1 = 2.
    eng = EngineConfig(max_num_seqs=16, max_num_batched_tokens=48, kv_capacity_tokens=10**6,
                       policy=Policy.static(4))
    k = eng.k_by_batch()
    assert k[16] == 2  # 48 // 16 - 1
    assert k[12] == 3  # 48 // 12 - 1
    assert k[4] == 4  # the policy's own k fits


def test_budget_below_max_num_seqs_is_refused() -> None:
    with pytest.raises(SpecsimError, match="max_num_batched_tokens"):
        EngineConfig(max_num_seqs=64, max_num_batched_tokens=32)


def test_planner_bands_as_the_engine_runs_them() -> None:
    """A planner's bands (a tree, chains, a band where nothing fits) as records, and as the chain policy an
    engine runs: no fit counts as off, past the last band its k continues."""
    bands = Policy.bands([Segment(1, 4, Config(3, 4, 10), 11), Segment.chain(5, 32, 2),
                          Segment(33, 64, None, 1)])
    assert bands.records()[0] == {"batch_from": 1, "batch_to": 4, "k": 3, "topk": 4, "num_draft_tokens": 10,
                                  "verify_tokens": 11}
    assert bands.records()[2]["k"] == -1 and bands.top_batch == 64
    run = bands.as_run()
    assert run.k_table(80).tolist() == [0] + [3] * 4 + [2] * 28 + [0] * 48
    assert Policy.parse(run.label).k_table(80).tolist() == run.k_table(80).tolist()


def test_verify_tokens_ask_the_draft() -> None:
    """A chain verifies what its method feeds the target: k + 1, or lookahead's 1 + (W + G) k (Fu et al.
    2024 §3: W = G = 7 by default); a tree its nodes + the root."""
    from specsim.cost.model import load_model
    from specsim.drafts.build import make_draft

    m = load_model("llama-3.1-8b")
    assert Config(4).verify_tokens(make_draft("eagle3", m)) == 5
    assert Config(4).verify_tokens(make_draft("lookahead", m)) == 1 + 14 * 4
    assert Config(4, 4, 12).verify_tokens(make_draft("eagle3", m)) == 13
