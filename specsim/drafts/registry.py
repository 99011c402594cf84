"""The draft methods, registered by name: method name -> its family (``drafts/families/``). Method names
are compared as strings only here and at the input edge (``parse_method``); everything else asks the
family (``Draft.family``).

Methods (seed chapter, "Choosing a draft"; vLLM / SGLang / TensorRT-LLM method names in ENGINE_*):
  none          plain decoding (k = 0)                                       families/none.py
  draft_model   a smaller model sharing the tokenizer: k sequential passes   families/draft_model.py
                of B tokens, own KV cache
  ngram, suffix host-side prompt lookup / suffix decoding                    families/lookup.py
  medusa        k heads on the last hidden state, all evaluated in one pass  families/medusa.py
                (Cai et al. 2024)
  eagle, eagle2, eagle3, mtp
                one layer at target width on target features + an LM head,  families/head.py
                run k times in sequence (Li et al. 2024, 2025); MTP: DeepSeek-V3's module
  lookahead     Jacobi-style lookahead decoding: no draft model, more tokens families/lookahead.py
                per verification
  p_eagle, dflash, dspark
                parallel drafters: all k drafts from ONE forward pass        families/parallel.py
  pard          PARD parallel draft model (An et al. 2025): a small model of    families/pard.py
                the target's family, k drafts from ONE pass over the verified
                tokens and k - 1 masks, own KV cache
"""

from __future__ import annotations

from collections.abc import Mapping

from specsim.acceptance.priors.names import canonical_method
from specsim.drafts.families.draft_model import DRAFT_MODEL
from specsim.drafts.families.head import EAGLE, EAGLE2, EAGLE3, MTP
from specsim.drafts.families.lookahead import LOOKAHEAD
from specsim.drafts.families.lookup import NGRAM, SUFFIX
from specsim.drafts.families.medusa import MEDUSA
from specsim.drafts.families.none import NONE
from specsim.drafts.families.parallel import DFLASH, DSPARK, P_EAGLE
from specsim.drafts.families.pard import PARD
from specsim.drafts.family import DraftFamily
from specsim.errors import SpecsimError

#: Every draft method's family, by the method's name (in the order error messages list them).
FAMILIES: Mapping[str, DraftFamily] = {f.method: f for f in (
    NONE, DRAFT_MODEL, NGRAM, SUFFIX, MEDUSA, EAGLE, EAGLE2, EAGLE3, MTP, LOOKAHEAD, P_EAGLE, DFLASH, DSPARK, PARD)}
METHODS = tuple(FAMILIES)


def family_of(method: str) -> DraftFamily:
    """The family of a registered method."""
    try:
        return FAMILIES[method]
    except KeyError:
        raise SpecsimError(f"unknown draft method '{method}' (known: {', '.join(METHODS)})") from None


def parse_method(given: str) -> str:
    """A method name as a user writes it, in the registry's spelling (``EAGLE-3``, ``pld``, ``sps`` ->
    eagle3, ngram, draft_model); a name the registry does not know comes back lowered, with '-' as '_'."""
    method = given.lower().replace("-", "_")
    if method not in FAMILIES and canonical_method(method) in FAMILIES:
        method = canonical_method(method)
    return method
