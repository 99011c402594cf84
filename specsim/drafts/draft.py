"""A draft: one draft method (``method``, its family in ``Draft.family``) with its settings and its
acceptance, and what the acceptance implies: tokens per step, the draft tree, tokens verified.

Acceptance is a chain of conditional per-depth rates (``AcceptanceProfile``). A tree (topk > 1 and a
node budget) is evaluated from those rates explicitly: siblings by the hazard model
``trees.sibling_probs_hazard``, the tree by EAGLE-2's construction (``trees.eagle2_tree``).
The methods and their families are listed in ``drafts/registry.py``; costs and memory per family in
``drafts/families/``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from specsim.acceptance.chain import AcceptanceProfile
from specsim.acceptance.sibling_probs import sibling_probs_hazard
from specsim.acceptance.tree_shapes import chain, eagle2_expected_tokens, eagle2_tree
from specsim.acceptance.trees import Tree
from specsim.cost.model import ModelSpec
from specsim.cost.roofline import Array
from specsim.drafts.registry import family_of

if TYPE_CHECKING:
    from specsim.acceptance.priors import PriorMatch
    from specsim.drafts.family import DraftFamily
    from specsim.engines.profile import EngineProfile


def max_tree_nodes(topk: int, depth: int) -> int:
    """Candidates of an EAGLE-2-style tree (trees.eagle2_tree): topk + (depth - 1) topk^2."""
    return 0 if depth <= 0 else int(topk + (depth - 1) * topk * topk)


@dataclass(frozen=True)
class Draft:
    """One draft method with its settings; `acceptance` defaults to the method's sourced prior,
    whose low / high cases travel in `prior` (None when the acceptance was given or measured)."""

    method: str
    acceptance: AcceptanceProfile
    name: str = ""
    model: ModelSpec | None = None  # draft_model only
    draft_tp: int | None = None  # draft_model: its own TP degree (vLLM: 1 or the target's)
    draft_vocab: int | None = None  # eagle3: reduced draft vocabulary (EAGLE-3: 32k)
    topk: int = 1  # tree expansion per level (1 = chain); eagle*/medusa
    num_draft_tokens: int | None = None  # tree budget (nodes, root excluded); None = chain
    window: int = 7  # lookahead: window W and guess-set G sizes (Fu et al. 2024 defaults)
    guesses: int = 7
    draft_layers: int | None = None  # parallel drafters: layers of the drafter (families/parallel.py)
    trees: bool = True  # the planner may choose a tree (tree-capable methods only)
    prior: PriorMatch | None = field(default=None, compare=False, repr=False)

    @property
    def label(self) -> str:
        """A name unique within a scenario: the user's, or method + model / tree shape."""
        if self.name:
            return self.name
        if self.model is not None:  # a draft model
            return f"draft:{self.model.name}"
        if self.is_tree:
            return f"{self.method}:top{self.topk}x{self.num_draft_tokens}"
        return self.method

    @property
    def family(self) -> DraftFamily:
        """The method's draft family: its costs, memory, verify tokens and host work (drafts/families/)."""
        return family_of(self.method)

    @property
    def speculates(self) -> bool:
        """Whether this draft drafts at all (False for the method "none": plain decoding)."""
        return self.family.speculates

    @property
    def is_tree(self) -> bool:
        return self.topk > 1 and self.num_draft_tokens is not None

    @property
    def is_parallel(self) -> bool:
        return self.family.parallel

    @property
    def can_tree(self) -> bool:
        """Whether the planner may search trees for this draft (EAGLE-2/3 and Medusa style drafters)."""
        return self.family.can_tree and self.trees

    @property
    def acceptance_note(self) -> str:
        """What a reader must know about this draft's acceptance ("" for a plain measured one)."""
        return self.acceptance.note

    def with_tree(self, topk: int, num_draft_tokens: int | None) -> Draft:
        """The same draft drafting a tree of (topk, nodes); topk 1 or no budget = a chain."""
        if topk <= 1 or num_draft_tokens is None:
            return dataclasses.replace(self, topk=1, num_draft_tokens=None)
        return dataclasses.replace(self, topk=int(topk), num_draft_tokens=int(num_draft_tokens))

    def band(self, which: str) -> Draft:
        """This draft with the prior's low / central / high acceptance (itself when not a prior)."""
        if self.prior is None or which == "central":
            return self
        return dataclasses.replace(self, acceptance=self.prior.profile(which))

    def tau_band(self, k: int, tau: float, exact: bool = True) -> tuple[float, float]:
        """The acceptance's (low, high) tokens per step at depth k: the prior's band (exact for this draft's chain
        or tree; else, for a tree file or adaptive drafting whose tokens are `tau`, as the band moves the draft's
        depth-k tokens); none (`tau` twice) when the acceptance is not a prior or nothing is drafted."""
        if self.prior is None or not self.acceptance.prior or not self.speculates or not k:
            return tau, tau
        lo, mid, hi = (float(self.band(which).tokens_per_step(k)) for which in ("low", "central", "high"))
        if exact:
            return lo, hi
        return 1.0 + (tau - 1.0) * (lo - 1.0) / (mid - 1.0), 1.0 + (tau - 1.0) * (hi - 1.0) / (mid - 1.0)

    # acceptance ----------------------------------------------------------------------------
    def nodes(self, k: int) -> int:
        """Draft nodes verified at depth k: the budget, at most the candidates an EAGLE-2 / SGLang tree
        of depth k holds (topk at the first level, topk^2 at each further one: each of the topk frontier
        nodes proposes topk children)."""
        if not self.is_tree:
            return k
        return int(min(self.num_draft_tokens or k, max_tree_nodes(self.topk, k)))

    def tree(self, k: int, alpha_scale: float = 1.0) -> Tree:
        """The draft tree at depth k (a chain unless topk > 1)."""
        if not self.is_tree or k == 0:
            return chain(k)
        probs = sibling_probs_hazard(self.rates(k, alpha_scale), self.topk)
        return eagle2_tree(probs, self.topk, k, self.nodes(k))

    def rates(self, k: int, alpha_scale: float = 1.0) -> Array:
        return np.clip(self.acceptance.rates_for(k) * alpha_scale, 0.0, 1.0)

    def tokens_per_step(self, k: int, alpha_scale: float = 1.0) -> float:
        """Expected tokens per step at depth k (chain formula, or the tree's expectation)."""
        if not self.speculates or k == 0:
            return 1.0
        rates = self.rates(k, alpha_scale)
        if self.is_tree:
            probs = sibling_probs_hazard(rates, self.topk)
            return float(eagle2_expected_tokens(probs, self.topk, k, self.nodes(k)))
        return float(1.0 + np.cumprod(rates).sum())

    def verify_tokens_per_seq(self, k: ArrayLike) -> Array:
        """Tokens each sequence feeds the target's verification pass (as the family builds its step)."""
        return self.family.verify_tokens_per_seq(self, np.asarray(k, dtype=float))

    def shape_verify_tokens(self, k: Array) -> Array:
        """Tokens per sequence verified for this draft's chain or tree at depth k: k + 1 for a chain; the
        tree's nodes (at most its candidates, ``nodes``) + 1 for a tree."""
        if self.is_tree:
            cap = self.topk + np.maximum(k - 1.0, 0.0) * self.topk**2
            return np.where(k > 0, 1.0 + np.minimum(self.num_draft_tokens or 0, cap), 1.0)
        return k + 1.0

    def verifies_drafted_only(self, engine: EngineProfile) -> bool:
        """Whether engine verifies only the tokens this draft actually proposed, which then follow the
        acceptance (``families.lookup.ngram_drafted_tokens``), not k + 1 (vLLM V1's n-gram proposer)."""
        return self.family.drafts_on_match and engine.ngram_empty_drafts
