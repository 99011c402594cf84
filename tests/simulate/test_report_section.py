"""The report's serving section (specsim/report/sections/serving.py): latency against rate and the batch over the
day for a traffic scenario; nothing for a scenario without traffic."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.advise.simulation import make_setup
from specsim.report.context import make_ctx
from specsim.report.sections.serving import _hour_cases, _hours, serving_section
from specsim.scenario.scenario import load_scenario
from specsim.step.policy import Policy
from tests.corpus.harness import ROOT


@pytest.fixture(scope="module")
def chat():  # type: ignore[no-untyped-def]
    return load_scenario(ROOT / "scenarios" / "chat-traffic-llama8b-h100.yaml")


def test_batch_over_the_day_follows_the_rate_curve(chat) -> None:  # type: ignore[no-untyped-def]
    setup = make_setup(chat, requests=200, policy=Policy.static(3), draft="eagle3")
    got = _hours(setup)
    assert got is not None
    rates, frame = got
    rows = frame.to_dict(orient="records")
    off = {r["hour"]: r for r in rows if r["policy"] == "off"}
    on = {r["hour"]: r for r in rows if r["policy"] == "k=3"}
    assert len(off) == len(on) == 24
    # each hour runs at the curve's rate then (a stationary run: its own measured rate within sampling noise)
    measured = np.array([off[h]["requests_per_s"] for h in range(24)])
    assert np.corrcoef(measured, rates)[0, 1] > 0.95
    peak, night = int(np.argmax(rates)), int(np.argmin(rates))
    assert off[peak]["mean_decode_batch"] > 4 * off[night]["mean_decode_batch"]
    # speculation shortens requests: fewer in flight at the busy hours (Little's law)
    assert on[peak]["mean_decode_batch"] < off[peak]["mean_decode_batch"]


def test_section_for_traffic_and_none_without(chat) -> None:  # type: ignore[no-untyped-def]
    sec = serving_section(make_ctx(chat))
    assert sec is not None and sec.figure is not None and sec.figure_name == "serving"
    assert "| TPOT p50 / p99 (ms) |" in sec.body and "no speculation" in sec.body
    assert "Replicas by simulation" in sec.body  # the scenario's objective slo: the plan's simulated choice
    assert len(sec.figure.axes) >= 2
    buckets = load_scenario(ROOT / "scenarios" / "llama8b-1b-draft-h100.yaml")
    assert serving_section(make_ctx(buckets)) is None


def test_hours_at_one_rate_share_one_run(chat) -> None:  # type: ignore[no-untyped-def]
    setup = make_setup(chat, requests=200, policy=Policy.static(3), draft="eagle3")
    got = _hour_cases(setup)
    assert got is not None
    rates, cases, _ = got
    assert len(cases) == 2 * len(set(rates.tolist())) < 2 * 24  # the curve repeats rates: fewer runs than hours
    hours = _hours(setup)
    assert hours is not None
    rows = hours[1].to_dict(orient="records")
    same = [h for h in range(1, 24) if rates[h] == rates[h - 1]]
    assert same
    for h in same:
        a = [{k: v for k, v in r.items() if k != "hour"} for r in rows if r["hour"] in (h - 1.0,)]
        b = [{k: v for k, v in r.items() if k != "hour"} for r in rows if r["hour"] in (float(h),)]
        assert a == b
    assert {r["hour"] for r in rows} == set(map(float, range(24)))
