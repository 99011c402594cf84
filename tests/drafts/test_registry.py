from __future__ import annotations

import pytest

from specsim.drafts.registry import FAMILIES, METHODS, family_of, parse_method
from specsim.errors import SpecsimError


def test_every_method_has_its_family() -> None:
    assert METHODS == ("none", "draft_model", "ngram", "suffix", "medusa", "eagle", "eagle2", "eagle3", "mtp",
                       "lookahead", "p_eagle", "dflash", "dspark", "pard")
    assert all(family_of(m).method == m for m in METHODS)
    names = {m: FAMILIES[m].name for m in METHODS}
    assert names == {"none": "none", "draft_model": "draft_model", "ngram": "lookup", "suffix": "lookup",
                     "medusa": "medusa", "eagle": "head", "eagle2": "head", "eagle3": "head", "mtp": "head",
                     "lookahead": "lookahead", "p_eagle": "parallel", "dflash": "parallel", "dspark": "parallel",
                     "pard": "pard"}


def test_family_flags() -> None:
    def having(flag: str) -> set[str]:
        return {m for m, f in FAMILIES.items() if getattr(f, flag)}

    assert having("speculates") == set(METHODS) - {"none"}
    assert having("can_tree") == {"eagle", "eagle2", "eagle3", "medusa"}
    assert having("parallel") == {"p_eagle", "dflash", "dspark", "pard"}
    assert having("host_drafter") == {"ngram", "suffix"}
    assert having("drafts_on_match") == {"ngram"}


def test_names_at_the_input_edge() -> None:
    assert parse_method("EAGLE-3") == "eagle3" and parse_method("pld") == "ngram" and parse_method("Medusa") == "medusa"
    assert parse_method("sps") == "draft_model" and parse_method("p-eagle") == "p_eagle"
    assert parse_method("Llama-3.2-1B") == "llama_3.2_1b"  # unknown: lowered, for the model lookup to try
    with pytest.raises(SpecsimError, match="unknown draft method 'warp'"):
        family_of("warp")
