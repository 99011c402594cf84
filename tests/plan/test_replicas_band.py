"""An SLO plan's simulated replicas with their 80% band: a replica's capacity at the SLO moves with the
speculative gain, so the replicas scale inversely with the gain's band (hand-checked)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from specsim.plan import summary


def _plan(replicas: int, gain: float, speculates: bool = True) -> SimpleNamespace:
    sv = SimpleNamespace(meets_slo=True, speculates=speculates, replicas=replicas)
    return SimpleNamespace(serving=sv, off_by_setting=False, gain=gain)


def test_replicas_scale_inversely_with_the_gain_band(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(summary, "gain_band", lambda plan: (1.5, 2.5))
    # 6 replicas at a 2.0x gain: 6 x 2.0 / 2.5 = 4.8 -> 5 at the high end, 6 x 2.0 / 1.5 = 8 at the low end
    assert summary.replicas_band(_plan(6, 2.0)) == (5, 8)  # type: ignore[arg-type]
    assert summary.replicas_band(_plan(1, 2.0)) == (1, 2)  # type: ignore[arg-type]


def test_no_band_where_the_plan_does_not_speculate() -> None:
    assert summary.replicas_band(_plan(6, 2.0, speculates=False)) is None  # type: ignore[arg-type]
    assert summary.replicas_band(SimpleNamespace(serving=None)) is None  # type: ignore[arg-type]
