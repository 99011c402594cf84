"""How good the priors are: held-out catalogue entries and the published-results corpus."""

from __future__ import annotations

from specsim.acceptance.holdout import by_group, catalogue_holdout, published_holdout, row_shape, summarize
from specsim.acceptance.priors import Shape


def test_held_out_catalogue_error_and_band_coverage() -> None:
    """Leave-one-source-out on the methods with few sources (fast): the band's 10th-90th percentile
    covers most held-out measurements and the central error is moderate."""
    rows = catalogue_holdout(methods=("eagle", "eagle2", "medusa", "hydra", "draft_model", "lookahead", "dspark",
                                      "p_eagle", "hass"))
    s = summarize(rows)
    assert s.n > 300
    assert s.median_abs < 0.10 and abs(s.median_bias) < 0.05 and s.coverage > 0.85



def test_published_corpus_acceptance_floors() -> None:
    """The acceptance part of the floors on the published corpus (priors only, no acceptance given):
    at a fixed configuration speedup is proportional to tau, so tau_prior / tau_published - 1 is the
    error the prior adds to the speedup. In-sample (the catalogue holds these sources): every stated-
    hardware group of >= 10 rows and the whole set within 15% median |error| and 5% median bias;
    held out (each row's own source removed from the catalogue): the whole corpus too."""
    inside = published_holdout(held_out=False, stated_hardware=True)
    for group, s in by_group(inside).items():
        if s.n >= 10:
            assert s.median_abs <= 0.15 and abs(s.median_bias) <= 0.05, (group, str(s))
    all_in = summarize(published_holdout(held_out=False))
    assert all_in.median_abs <= 0.15 and abs(all_in.median_bias) <= 0.05
    held = summarize(published_holdout(held_out=True))
    assert held.n > 400 and held.median_abs <= 0.15 and abs(held.median_bias) <= 0.05



def test_row_shape_falls_back_to_the_methods_published_trees() -> None:
    assert row_shape({"draft": "eagle", "shape": "tree"}) == Shape("tree", 5, 4, 25, static="eagle1")
    assert row_shape({"draft": "hydra", "shape": "tree"}).label() == Shape("tree", 4, 10, 63, static="medusa").label()
    assert row_shape({"draft": "eagle-2", "shape": "tree", "model": "llama-2-70b"}) == Shape("tree", 6, 10, 47)
    assert row_shape({"draft": "eagle2", "shape": "tree", "k": "6", "topk": "8", "num_draft_tokens": "32",
                      "engine": "sglang"}) == Shape("tree", 6, 8, 31)
    assert row_shape({"draft": "dflash", "k": "7"}) == Shape("parallel", 7)
    assert row_shape({"draft": "pld"}) == Shape("chain", 10)
