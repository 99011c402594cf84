"""A draft's default acceptance: the sourced prior from ``specsim.acceptance.priors`` (used when a
scenario or a command gives no measured acceptance). The catalogue, the lookup, the tree <-> chain
conversion and the draft-model pair model live there; this module only asks the right question
for a draft method."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from specsim.acceptance.chain import AcceptanceProfile
from specsim.acceptance.priors import PriorMatch, chain_shape, lookup

#: Reference draft length of each method's prior: where it is chosen and its band is drawn (the
#: engines' usual settings: vLLM/SGLang EAGLE chains 3-5, MTP 1-3, n-gram 4, draft models 4-5).
REFERENCE_K = {"mtp": 3, "eagle3": 4, "eagle": 4, "eagle2": 4, "medusa": 4, "draft_model": 4, "ngram": 4,
               "suffix": 4, "lookahead": 4, "p_eagle": 7, "dflash": 7, "dspark": 7, "pard": 12}


def prior_match(method: str, target: Any, draft: Any = None, task: str | None = None,
                temperature: float | None = None, held_out_source: str | None = None) -> PriorMatch:
    """The prior for a draft method on a target (``draft``: the draft model, or a head's checkpoint name);
    ``held_out_source``: a source whose entries are left out (validation against that source's results).
    Answers are memoised for hashable questions (the catalogue is fixed within a process; a grid or the
    published corpus asks the same question for many rows)."""
    key = (method, target, draft, task, temperature, held_out_source)
    try:
        return _memo_match(*key)
    except TypeError:  # an unhashable target or draft: asked afresh
        return _match(*key)


@lru_cache(maxsize=4096)
def _memo_match(method: str, target: Any, draft: Any, task: str | None, temperature: float | None,
                held_out_source: str | None) -> PriorMatch:
    return _match(method, target, draft, task, temperature, held_out_source)


def _match(method: str, target: Any, draft: Any, task: str | None, temperature: float | None,
           held_out_source: str | None) -> PriorMatch:
    exclude: Any = ()
    if held_out_source:
        from specsim.acceptance.holdout import source_excluder

        exclude = source_excluder(held_out_source)
    return lookup(method, target=target, draft=draft, task=task, temperature=temperature,
                  shape=chain_shape(REFERENCE_K.get(method, 4)), exclude=exclude)


def prior_profile(method: str, target: Any, draft: Any = None, task: str | None = None,
                  temperature: float | None = None) -> AcceptanceProfile:
    """The central acceptance profile of ``prior_match`` (32 explicit positions, a note, no flat tail)."""
    return prior_match(method, target, draft, task, temperature).profile("central")
