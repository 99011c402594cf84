from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from specsim.cost.hardware import load_hardware
from specsim.cost.model import load_model
from specsim.drafts.build import make_draft
from specsim.engines.passes import host_step_s
from specsim.step.evaluate import Target, config_metrics, step_arrays, step_times

H100 = load_hardware("h100-sxm")
L8 = load_model("llama-3.1-8b")
T = Target(H100, L8)


def test_a_draft_that_does_not_speculate_is_plain_decoding_at_any_k() -> None:
    """The method "none" at k = 4 is the plain step: no draft, the one-token pass, the baseline step."""
    none = make_draft("none", L8)
    times = step_times(T, none, [0.0, 4.0], 8.0, 1024.0)
    assert np.all(times.draft_s == 0.0)
    assert np.allclose(times.verify_s + times.overhead_s, times.baseline_s)
    m = config_metrics(T, none, 4, 8.0, 1024.0)
    assert float(np.asarray(m.speedup)) == pytest.approx(1.0)


def test_an_ngram_draft_verifies_what_it_drafted_only_where_the_engine_skips_empty_drafts() -> None:
    """vLLM V1 verifies 1 + the drafted tokens per sequence (fewer than k + 1 at low acceptance); the
    same engine without that behaviour verifies k + 1; suffix decoding always verifies k + 1."""
    ngram, suffix = make_draft("ngram", L8), make_draft("suffix", L8)
    full = dataclasses.replace(T, engine=dataclasses.replace(T.engine, ngram_empty_drafts=False))
    skip = float(np.asarray(step_arrays(T, ngram, 4.0, 64.0, 1024.0, 1.3).verify_time_s))
    every = float(np.asarray(step_arrays(full, ngram, 4.0, 64.0, 1024.0, 1.3).verify_time_s))
    assert skip < every
    assert float(np.asarray(step_arrays(T, suffix, 4.0, 64.0, 1024.0, 1.3).verify_time_s)) == pytest.approx(every)


def test_host_drafters_step_without_async_scheduling() -> None:
    """vLLM's async scheduling hides the host's step work behind an EAGLE-3 step, but the CPU drafters
    (n-gram, suffix) run without it (vllm PR #31998): their step pays all of the host work."""
    e = T.engine
    assert e.async_scheduling and not e.spec_sync
    host = float(host_step_s(e, 8.0, True))
    for method in ("ngram", "suffix", "eagle3"):
        d = make_draft({"method": method, "acceptance": {"alpha": 0.6}}, L8)
        over = float(np.asarray(step_times(T, d, 3.0, 8.0, 1024.0).overhead_s))
        assert (over >= host) == d.family.host_drafter


def test_a_deployments_calibration_prices_each_part_as_stated() -> None:
    """StepCalibration (a fitted deployment's): the identity prices the profile to the last digit; the passes'
    scale multiplies the decode passes and the drafting loop, the verification's multiplies that pass again; the
    host cost adds to every step, the speculative one to speculative steps. On an engine that steps synchronously
    (vLLM 0.10: no async scheduling) the step is device + host, so by hand:
    plain' = plain + (pass_scale - 1) x pass + host."""
    from specsim.step.evaluate import StepCalibration, bundled_engine

    eagle = make_draft("eagle3", L8)
    sync = dataclasses.replace(T, engine=bundled_engine("vllm-0.10"))
    cal = StepCalibration(host_ms=0.7, pass_scale=1.3, verify_scale=0.9, spec_host_ms=0.4)
    args = (eagle, np.array([0.0, 3.0]), np.array([1.0, 16.0, 128.0])[:, None, None], 2048.0)
    raw = step_times(sync, *args)
    same = step_times(dataclasses.replace(sync, calibration=StepCalibration()), *args)
    for part in ("draft_s", "verify_s", "overhead_s", "baseline_s"):
        assert np.array_equal(getattr(raw, part), getattr(same, part))
    got = step_times(dataclasses.replace(sync, calibration=cal), *args)
    plain_pass = raw.verify_s[..., 0:1]  # k = 0: the verify part is the one-token pass
    assert np.allclose(got.baseline_s, raw.baseline_s + 0.3 * plain_pass + 0.7e-3)
    assert np.allclose(got.draft_s[..., 1], raw.draft_s[..., 1] * 1.3)
    assert np.allclose(got.verify_s[..., 1], raw.verify_s[..., 1] * 1.3 * 0.9)
    step_raw = raw.draft_s + raw.verify_s + raw.overhead_s
    step_got = got.draft_s + got.verify_s + got.overhead_s
    # the speculative step: its draft and verification rescaled, the same host work plus both fitted host costs
    assert np.allclose(step_got[..., 1] - step_raw[..., 1],
                       raw.draft_s[..., 1] * (1.3 - 1) + raw.verify_s[..., 1] * (1.3 * 0.9 - 1) + 1.1e-3)


def test_a_negative_fitted_host_cost_never_takes_a_step_below_its_kernels() -> None:
    """A fit may find the profile's host work overstated (host_ms < 0); the step floors at its device time."""
    from specsim.step.evaluate import StepCalibration

    eagle = make_draft("eagle3", L8)
    raw = step_times(T, eagle, np.array([0.0, 3.0]), 8.0, 2048.0)
    got = step_times(dataclasses.replace(T, calibration=StepCalibration(host_ms=-500.0)), eagle,
                     np.array([0.0, 3.0]), 8.0, 2048.0)
    assert np.allclose(got.baseline_s, raw.verify_s[0])  # plain decoding: the one-token pass alone
    assert np.all(got.overhead_s >= 0.0)
    assert np.all(got.draft_s + got.verify_s + got.overhead_s <= raw.draft_s + raw.verify_s + raw.overhead_s)
