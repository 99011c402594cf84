from __future__ import annotations

import numpy as np
import pytest

from specsim.acceptance.chain import expected_tokens
from specsim.errors import SpecsimError
from specsim.step.economics import ratio_step_metrics, ratio_step_times, step_metrics, target_pass_time_s

SEED_K = np.array([1, 2, 3, 4, 5, 6, 7, 8, 10])
SEED_SPEEDUP = [1.71, 2.22, 2.57, 2.80, 2.95, 3.04, 3.08, 3.09, 3.05]


def test_seed_worked_example_speedups() -> None:
    e = expected_tokens(0.8, SEED_K)
    m = ratio_step_metrics(e, SEED_K, 0.05)
    assert np.round(m.speedup, 2).tolist() == SEED_SPEEDUP
    # the seed's closed form: speedup = E / (1 + c k)
    assert np.allclose(m.speedup, e / (1 + 0.05 * SEED_K))
    # k = 4: each step costs T (1 + 4 x 0.05) = 1.2 T
    assert float(m.step_time_s[3]) == pytest.approx(1.2)


def test_seed_batch_effect_example() -> None:
    """Batch 128, k 4: 640 tokens cost 5 T when compute-bound; speedup ~ 3.36 / 5.2 = 0.65."""
    e = float(expected_tokens(0.8, 4))
    m = ratio_step_metrics(e, 4, 0.05, batch=128, ridge_tokens=128)
    assert float(m.verify_time_s) == pytest.approx(5.0)
    assert float(m.speedup) == pytest.approx(e / 5.2)
    assert round(float(m.speedup), 2) == 0.65
    # batch 8: 40 tokens, still memory-bound -> the batch-1 estimate holds
    m8 = ratio_step_metrics(e, 4, 0.05, batch=8, ridge_tokens=128)
    assert float(m8.speedup) == pytest.approx(e / 1.2)


def test_derived_quantities_by_hand() -> None:
    # 3 tokens/step, draft 2 ms, verify 10 ms, overhead 0.5 ms, plain step 8 ms, batch 4
    m = step_metrics(3.0, 2e-3, 10e-3, 8e-3, batch=4, overhead_time_s=0.5e-3)
    assert float(m.step_ms) == pytest.approx(12.5)
    assert float(m.throughput_tok_s) == pytest.approx(4 * 3 / 12.5e-3)
    assert float(m.baseline_throughput_tok_s) == pytest.approx(4 / 8e-3)
    assert float(m.ms_per_token) == pytest.approx(12.5 / 3)
    assert float(m.speedup) == pytest.approx(3 * 8 / 12.5)
    assert float(m.speedup) == pytest.approx(float(m.throughput_tok_s / m.baseline_throughput_tok_s))
    d = m.as_dict()
    for key in (
        "tokens_per_step",
        "step_ms",
        "draft_ms",
        "verify_ms",
        "baseline_step_ms",
        "speedup",
        "throughput_tok_s",
        "ms_per_token",
    ):
        assert key in d


def test_vectorised_over_alpha_k_batch() -> None:
    alpha = np.linspace(0.1, 0.9, 5)[:, None, None]
    k = np.arange(0, 7)[None, :, None]
    batch = np.array([1, 8, 64, 512])[None, None, :]
    e = expected_tokens(alpha, k)
    m = ratio_step_metrics(e, k, 0.1, batch=batch, ridge_tokens=256)
    assert m.speedup.shape == (5, 7, 4)
    one = ratio_step_metrics(float(expected_tokens(0.5, 3)), 3, 0.1, batch=512, ridge_tokens=256)
    assert float(m.speedup[2, 3, 3]) == pytest.approx(float(one.speedup))
    # k = 0 is plain decoding: speedup exactly 1 at every batch
    assert np.allclose(m.speedup[:, 0, :], 1.0)
    # past the ridge, more drafts cost real compute: the best k shrinks with batch
    best_k = m.speedup.argmax(axis=1)
    assert np.all(best_k[:, -1] <= best_k[:, 0])


def test_real_cost_arrays_slot_in() -> None:
    """What the cost-model route passes: arrays of times by batch (and context)."""
    batch = np.array([1, 16, 256])
    fwd = lambda b, q: 5e-3 + 1e-5 * b * q  # noqa: E731  (a stand-in for forward_time_s)
    k = 3
    m = step_metrics(expected_tokens(0.7, k), k * 0.1 * fwd(batch, 1), fwd(batch, k + 1), fwd(batch, 1), batch=batch)
    assert m.step_ms.shape == (3,)
    assert np.allclose(m.verify_ms, 1e3 * (5e-3 + 1e-5 * batch * 4))
    assert np.all(np.diff(m.speedup) < 0)  # verification grows with B(k+1): speedup falls


def test_tree_verification_counts_nodes() -> None:
    t = ratio_step_times(draft_passes=2, draft_cost_ratio=0.05, batch=64, verify_tokens_per_seq=7, ridge_tokens=128)
    assert float(t.verify_time_s) == pytest.approx(64 * 7 / 128)
    assert float(t.draft_time_s) == pytest.approx(0.1)
    assert float(t.baseline_step_time_s) == pytest.approx(1.0)
    assert np.allclose(target_pass_time_s([10, 128, 256], 2.0, 128), [2.0, 2.0, 4.0])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tokens_per_step": 0.5}, "tokens per step"),
        ({"draft_time_s": -1.0}, "draft time"),
        ({"verify_time_s": 0.0}, "verification time"),
        ({"batch": 0}, "batch"),
    ],
)
def test_bad_step_inputs(kwargs: dict[str, float], message: str) -> None:
    args = {
        "tokens_per_step": 2.0,
        "draft_time_s": 0.0,
        "verify_time_s": 1.0,
        "baseline_step_time_s": 1.0,
        "batch": 1,
    } | kwargs
    with pytest.raises(SpecsimError, match=message):
        step_metrics(**args)
