"""Decay models: positions past the measured depth follow a stated model, never a flat rate."""

from __future__ import annotations

from specsim.acceptance.priors import MAX_DEPTH, load_catalogue, lookup


def test_no_flat_rate_past_the_measured_depth_without_a_note() -> None:
    """vLLM CI measured EAGLE-3 on Llama-3.1-8B to k = 3; asked for k = 8, the positions past 3 follow the
    EAGLE-3 decay model read from the catalogue's per-position entries, and the note says so."""
    m = lookup("eagle3", target="llama-3.1-8b", draft="RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3",
               task="mt-bench", temperature=0.0, shape=8)
    assert m.measured_depth < 8 and "follow the decay model" in m.note
    cat = load_catalogue()
    model = cat.decay["eagle3"]
    assert len(model.relative) >= 4 and model.relative[1] < 1.0  # decays, not flat
    for e in cat.entries:
        if 0 < e.measured_depth < MAX_DEPTH and e.method != "draft_model":
            assert "deeper:" in e.fit, e.id  # every entry states its model past the measured depth
