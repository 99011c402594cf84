"""The cost model's memos (`engines.passes.pass_time_s`, `cost.ops._gemm_times`): a remembered result equals a
fresh evaluation bit for bit, a hit hands out a copy, and other inputs (another profile, model, array) miss."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd

from specsim.cost import attention, ops_core
from specsim.cost.aiconfigurator_files import FrameMemo
from specsim.cost.forward import breakdown
from specsim.cost.memo import unique_rows
from specsim.cost.ops import make_shape
from specsim.engines import passes
from specsim.scenario.scenario import load_scenario
from specsim.step.evaluate import bundled_engine
from tests.corpus.harness import ROOT


def _target():  # type: ignore[no-untyped-def]
    s = load_scenario(ROOT / "scenarios" / "chat-traffic-llama8b-h100.yaml")
    return s.hardware, s.model


def test_pass_memo_equals_a_fresh_evaluation_and_hands_out_copies() -> None:
    hw, model = _target()
    e = bundled_engine()
    b, ctx = np.geomspace(1, 256, 40), np.full(40, 1500.0)
    passes.clear_pass_cache()
    ops_core.clear_gemm_cache()
    fresh = passes.pass_time_s(e, hw, model, b, 4.0, ctx, 1)
    assert len(passes._PASSES) == 1
    hit = passes.pass_time_s(e, hw, model, b, 4.0, ctx, 1)
    np.testing.assert_array_equal(hit, fresh)
    hit[:] = -1.0  # the caller's copy: the memo keeps its own
    np.testing.assert_array_equal(passes.pass_time_s(e, hw, model, b, 4.0, ctx, 1), fresh)
    assert len(passes._PASSES) == 1
    # everything the pass depends on is in the key: another array, scalar, model or profile is another entry
    slower = hw.with_efficiency(memory=hw.efficiency.memory * 0.5)
    other_model = dataclasses.replace(model, n_layers=model.n_layers + 1)
    for args in ((e, hw, model, b, 4.0, ctx * 2, 1), (e, hw, model, b, 3.0, ctx, 1), (e, slower, model, b, 4.0, ctx, 1),
                 (e, hw, other_model, b, 4.0, ctx, 1), (dataclasses.replace(e, graph_launch_us=99.0), hw, model, b,
                                                         4.0, ctx, 1)):
        got = passes.pass_time_s(*args)  # type: ignore[arg-type]
        passes.clear_pass_cache()
        ops_core.clear_gemm_cache()
        np.testing.assert_array_equal(got, passes.pass_time_s(*args))  # type: ignore[arg-type]
        assert not np.array_equal(got, fresh)
    # calls over more points than the memo keeps are evaluated, not kept
    passes.clear_pass_cache()
    big = np.arange(1.0, passes.PASS_CACHE_MAX_POINTS + 2)
    passes.pass_time_s(e, hw, model, big, 1.0, 100.0)
    assert not passes._PASSES


def test_gemm_memo_leaves_every_breakdown_unchanged() -> None:
    hw, model = _target()
    shapes = [make_shape(np.arange(1.0, 65.0), q, np.full(64, 800.0)) for q in (1.0, 2.0, 4.0)]
    ops_core.clear_gemm_cache()
    first = [breakdown(model, hw, s) for s in shapes]
    again = [breakdown(model, hw, s) for s in shapes]  # GEMMs from the memo
    assert ops_core._GEMMS
    ops_core.clear_gemm_cache()
    for a, b in zip(first, again, strict=True):
        assert [op.name for op in a.ops] == [op.name for op in b.ops]
        for x, y in zip(a.ops, b.ops, strict=True):
            for f in ("time_s", "compute_s", "memory_s", "flops", "bytes_"):
                np.testing.assert_array_equal(getattr(x, f), getattr(y, f))
    # another profile misses (identity-keyed, the profile held by the entry)
    slower = hw.with_efficiency(gemm_compute=hw.efficiency.gemm_compute * 0.5)
    t_slow = breakdown(model, slower, shapes[0]).time_s
    ops_core.clear_gemm_cache()
    np.testing.assert_array_equal(t_slow, breakdown(model, slower, shapes[0]).time_s)
    assert not np.array_equal(t_slow, first[0].time_s)


def test_unique_rows_equals_numpys_unique_over_rows() -> None:
    rng = np.random.default_rng(7)
    cols = [rng.integers(0, 5, 400).astype(float) for _ in range(3)]
    cols[1][::37] = 0.5  # a fraction among whole numbers
    got, inverse = unique_rows(*cols)
    want, want_inverse = np.unique(np.stack(cols, axis=1), axis=0, return_inverse=True)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(inverse, want_inverse.reshape(-1))
    np.testing.assert_array_equal(got[inverse], np.stack(cols, axis=1))  # each row found back
    cols[2][3] = np.nan  # NaN: numpy's own route, same contract
    got, inverse = unique_rows(*cols)
    np.testing.assert_array_equal(got[inverse], np.stack(cols, axis=1))


def test_fa_splits_memo_answers_as_the_heuristic_does() -> None:
    rng = np.random.default_rng(3)
    work = rng.integers(1, 300, 500).astype(float)
    slots, blocks = rng.choice([132.0, 264.0], 500), rng.integers(1, 2000, 500).astype(float)
    attention._SEEN.clear()
    first = attention.fa_num_splits(work, slots, blocks)  # worked out, then kept
    assert attention._SEEN
    again = attention.fa_num_splits(work, slots, blocks)  # from the memo
    np.testing.assert_array_equal(first, again)
    need = (work < 0.8 * slots) & (blocks > 1)
    keys = np.stack([work[need], slots[need], blocks[need]], axis=1)
    np.testing.assert_array_equal(first[need], attention._splits_heuristic(keys, 128))
    assert (first[~need] == 1.0).all()
    huge = attention.fa_num_splits(10.0, 132.0, 2.0**attention.SPLITS_KEY_BITS + 5)  # outside the packed codes
    np.testing.assert_array_equal(huge, attention._splits_heuristic(np.array([[10.0, 132.0, 2.0**20 + 5]]), 128))


def test_frame_memo_hands_out_copies_and_misses_on_a_changed_file(tmp_path: Path) -> None:
    f = tmp_path / "t.txt"
    f.write_text("a")
    memo = FrameMemo(max_rows=10)
    key = memo.key([str(f)], "x")
    assert memo.get(key) is None
    out = memo.put(key, pd.DataFrame({"v": [1.0, 2.0]}))
    out.loc[0, "v"] = -1.0  # the caller's copy
    hit = memo.get(key)
    assert hit is not None and hit["v"].tolist() == [1.0, 2.0]
    f.write_text("abc")  # another size: another key
    assert memo.get(memo.key([str(f)], "x")) is None
    assert memo.key([str(tmp_path / "gone")], "x") is None
    memo.put(memo.key([str(f)], "y"), pd.DataFrame({"v": np.arange(9.0)}))  # 11 rows in all: the oldest goes
    assert memo.get(key) is None
