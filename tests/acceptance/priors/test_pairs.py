"""The draft-model pair model: acceptance from the target/draft size ratio."""

from __future__ import annotations

from specsim.acceptance.priors import load_catalogue, lookup
from specsim.cost.model import load_model


def test_pair_model_by_size_ratio() -> None:
    """Leviathan's LaMDA series fixes the slope: within it the model keeps the published order and is
    within 0.06 of each alpha; a modern pair without data gets the model, says so, and a bigger draft
    accepts more."""
    pm = load_catalogue().pair_model
    assert 0.04 < pm.slope < 0.12
    for draft_b, alpha in ((0.1, 0.61), (2.0, 0.71), (8.0, 0.75)):
        assert abs(pm.alpha(137.0, draft_b) - alpha) < 0.1
    assert pm.alpha(137.0, 0.1) < pm.alpha(137.0, 2.0) < pm.alpha(137.0, 8.0)
    l70 = load_model("llama-3.1-70b")
    one = lookup("draft_model", target=l70, draft=load_model("llama-3.2-1b"), shape=4)
    eight = lookup("draft_model", target=l70, draft=load_model("llama-3.1-8b"), shape=4)
    assert one.entry_id == "pair-model" and "caveat" in one.note and "LaMDA 137B" in one.note
    assert eight.tau_for(4) > one.tau_for(4)
    assert one.low.tau_for(4) < one.tau_for(4) < one.high.tau_for(4)
