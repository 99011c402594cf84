"""Sensitivity's re-plans (specsim/report/sections/sensitivity.py): each distinct scenario planned once, started in
workers ahead of the section, with the same answers as planning serially."""

from __future__ import annotations

from specsim.report.sections.sensitivity import ACCEPTANCE_SCALES, Replans, Sensitivity, replan
from specsim.scenario.scenario import load_scenario
from tests.corpus.harness import ROOT


def test_each_distinct_replan_runs_once_and_early_results_match_serial() -> None:
    s = load_scenario(ROOT / "scenarios" / "code-edit-prompt-lookup.yaml")
    sens = Sensitivity(s)
    recipes = len(ACCEPTANCE_SCALES) - 1 + 2 * len(sens.inputs)
    assert len(sens._slot) == recipes and len(sens._jobs) == recipes - 1  # acceptance x0.8 appears twice
    jobs = sens._jobs[:3]
    pending = Replans(jobs, workers=2)
    try:
        early = pending.results()
    finally:
        pending.close()
    assert early == [replan(j) for j in jobs]
    done = sens.start(1).results()
    assert len(done) == recipes
    assert done[1] == done[len(ACCEPTANCE_SCALES) - 1]  # x0.8 from the table and the swing: one plan
    assert done[1].gain < done[0].gain  # less acceptance, less gain
