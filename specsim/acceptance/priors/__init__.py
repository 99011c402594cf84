"""Sourced acceptance priors: the catalogue (``data/priors.yaml``) and the lookup that picks one.

Most users have not measured acceptance when they first ask specsim; a prior then decides the
answer, so it has to be sourced, per position, honest about trees, and carry its uncertainty.

The catalogue holds published measurements (method, target, draft checkpoint, task, temperature,
the shape they were measured with, and per-position rates, a mean acceptance length tau, or an
alpha), each naming its source. This package turns every entry into **conditional per-depth rates**
``c_1..c_32`` (``c_i`` = P(draft i accepted | drafts 1..i-1 accepted), the chain rate of depth i):

* per-position data (vLLM / SGLang / dashboards) are used as measured; positions past the measured
  depth follow the method's stated decay model (``DecayModel``), never a flat rate;
* a tau measured with a *chain* (or a parallel block) of depth k is fitted by scaling the method's
  decay shape so that ``1 + sum_i prod_{j<=i} c_j`` equals tau;
* a tau measured with a *tree* is fitted the same way through the tree model: siblings by the
  hazard model ``trees.sibling_probs_hazard`` and the tree the source ran (EAGLE's static 25-node
  tree, Medusa's 63-node tree, or an EAGLE-2/SGLang dynamic tree of (topk, depth, nodes)), so a
  tree-measured tau is never reused as a chain tau, and no tree factor is ever applied to it;
* an alpha (Leviathan et al.'s i.i.d. model) is a flat rate, as its source defines it.

Feeding an entry's own source shape back reproduces its published figure (tests check this
against the sources' numbers).

Lookup API (agreed with the published-results validation, ``specsim validate --published``)::

    lookup(method, target=ModelSpec | name | None, draft=ModelSpec | name | None, task=None,
           temperature=None, shape=None, exclude=()) -> PriorMatch

* ``method``: a specsim draft method or a catalogue method (eagle, eagle2, eagle3, hass, medusa,
  hydra, mtp, draft_model, ngram, suffix, lookahead, p_eagle, dflash, dspark, ...; aliases such as
  ``eagle-3``, ``pld``, ``sps``, ``sam``, ``recycling`` are accepted);
* ``target``: the served model (family and size are read from the name and ``n_params()``);
* ``draft``: a draft checkpoint name (EAGLE heads: matches the catalogue's checkpoint), or for
  ``draft_model`` the draft model; without a catalogue entry for that pair the **pair model**
  predicts alpha from the size ratio (Leviathan et al. 2022, Table 3) and says so;
* ``task``: chat | code | math | summarisation | translation | rag | reasoning | qa | mixed |
  tool_call | writing | lm (``task_of_dataset`` maps benchmark names); None = chat, stated;
* ``temperature``: sampling temperature; None = not given (greedy central, band down to T=1);
* ``shape``: the configuration asked about (``int`` k = a chain, a ``Shape``, a ``Tree``, or a
  mapping ``{depth|k, topk, num_draft_tokens}``); it sets the reference for choosing and for the
  band, and ``tau_for`` evaluates any other;
* ``exclude``: entry ids or substrings of sources to leave out (held-out validation, e.g. the
  arXiv id of the paper whose rows are being predicted).

``PriorMatch`` fields: ``.conditional_rates`` (central, 32 positions), ``.low`` / ``.high``
(``RateModel`` with the same interface), ``.tau_for(k | Tree | Shape)``, ``.tau_band(shape)``,
``.entry_id`` (the representative entry), ``.entry_ids`` (all equally close), ``.distance`` (and
``.components``), ``.measured_depth`` (positions measured directly; deeper ones follow the
stated model), ``.note`` (what the number is, how far it was carried, and "measure yours"),
``.profile(which)`` (an ``AcceptanceProfile`` for the planner).

Modules, one job each: ``names`` (the method registry, tasks, families), ``shapes`` (shapes and tau
in them), ``fields`` (reading raw entries), ``decay`` (decay models), ``entries`` (fitting an entry),
``pairs`` (the draft-model pair model), ``catalogue`` and ``cache`` (the fitted catalogue),
``question``, ``distance``, ``match`` and ``lookup`` (the lookup), ``reproduce`` (entries against
their sources).
"""

from specsim.acceptance.priors.catalogue import load_catalogue
from specsim.acceptance.priors.entries import PriorEntry
from specsim.acceptance.priors.lookup import extend_profile, lookup
from specsim.acceptance.priors.match import MEASURE_YOURS, PriorMatch
from specsim.acceptance.priors.names import TASKS, canonical_method, family_of, params_of_name, task_of_dataset
from specsim.acceptance.priors.reproduce import reproduce
from specsim.acceptance.priors.shapes import EAGLE2_PAPER_TREE, EAGLE3_PAPER_TREE, MAX_DEPTH, Shape, chain_shape

__all__ = [
    "EAGLE2_PAPER_TREE",
    "EAGLE3_PAPER_TREE",
    "MAX_DEPTH",
    "MEASURE_YOURS",
    "TASKS",
    "PriorEntry",
    "PriorMatch",
    "Shape",
    "canonical_method",
    "chain_shape",
    "extend_profile",
    "family_of",
    "load_catalogue",
    "lookup",
    "params_of_name",
    "reproduce",
    "task_of_dataset",
]
