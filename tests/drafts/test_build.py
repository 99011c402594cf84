from __future__ import annotations

import pytest

from specsim.cost.model import load_model
from specsim.drafts.build import make_draft
from specsim.drafts.registry import METHODS
from specsim.errors import SpecsimError

L70 = load_model("llama-3.1-70b")


def test_bad_drafts() -> None:
    with pytest.raises(SpecsimError, match="unknown draft 'warp'"):
        make_draft("warp", L70)
    with pytest.raises(SpecsimError, match="share the target's tokenizer"):
        make_draft("llama-2-7b", L70)
    with pytest.raises(SpecsimError, match="unknown field"):
        make_draft({"method": "eagle3", "depth": 3}, L70)
    assert set(METHODS) >= {"draft_model", "ngram", "medusa", "eagle3", "mtp", "lookahead"}


def test_method_names_in_any_spelling_and_model_names() -> None:
    """The input edge: aliases and spellings reach the registry's names; a catalogue model name is a draft model."""
    assert [make_draft(m, L70).method for m in ("EAGLE-3", "eagle_3", "pld", "P-EAGLE")] == [
        "eagle3", "eagle3", "ngram", "p_eagle"]
    d = make_draft("llama-3.2-1b", L70)
    assert d.method == "draft_model" and d.model is not None and d.model.name == "llama-3.2-1b"
    with pytest.raises(SpecsimError, match="a draft_model needs 'model'"):
        make_draft("sps", L70)
    assert make_draft({"method": "sps", "model": "llama-3.2-1b"}, L70).method == "draft_model"


def test_family_defaults_fill_the_settings() -> None:
    assert make_draft("eagle3", L70).draft_vocab == 32000  # EAGLE-3's released heads
    assert make_draft({"method": "eagle3", "draft_vocab": 64000}, L70).draft_vocab == 64000
    assert make_draft("eagle2", L70).draft_vocab is None
    assert [make_draft(m, L70).draft_layers for m in ("p_eagle", "dflash", "dspark")] == [4, 5, 5]
    assert make_draft({"method": "dflash", "draft_layers": 2}, L70).draft_layers == 2
    assert make_draft("none", L70).acceptance.rates_for(3).tolist() == [0.0, 0.0, 0.0]
    assert make_draft("none", L70).prior is None and make_draft("eagle3", L70).prior is not None
