"""Draft methods: what each costs per step on the target's hardware, what it accepts, what memory
it takes. Costs come from each draft's own architecture through the same cost model as the
target (forward.py), never from a constant ratio.

Methods (seed chapter, "Choosing a draft"; vLLM / SGLang / TensorRT-LLM method names in ENGINE_*):
  none          plain decoding (k = 0)
  draft_model   a smaller model sharing the tokenizer: k sequential passes of B tokens, own KV cache
  ngram         prompt lookup: host-side n-gram matching against the prompt and output
  suffix        suffix decoding (Oliaro et al. 2025, Arctic Inference): host-side suffix trees over
                this request and earlier outputs; its own acceptance, not prompt lookup's
  medusa        k heads on the last hidden state, all evaluated in one pass (Cai et al. 2024)
  eagle, eagle2, eagle3
                one decoder layer at target width on target features + an LM head, run k times
                in sequence (Li et al. 2024, 2025); EAGLE-3 has a reduced draft vocabulary
  mtp           DeepSeek-V3 multi-token-prediction module(s): one full layer + projection, reused
  lookahead     Jacobi-style lookahead decoding: no draft model, more tokens per verification
  p_eagle, dflash, dspark
                parallel drafters: all k drafts from ONE forward pass of a small drafter over k
                tokens per sequence (vLLM P-EAGLE / DFlash / DSpark posts: drafting cost flat in k);
                acceptance per position (the positional decay lives in the prior)

Acceptance is a chain of conditional per-depth rates (``AcceptanceProfile``). A tree (topk > 1 and a
node budget) is evaluated from those rates explicitly: siblings by the hazard model
``trees.sibling_probs_hazard``, the tree by EAGLE-2's construction (``trees.eagle2_tree``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from specsim.acceptance.chain import AcceptanceProfile
from specsim.acceptance.trees import Tree, chain, eagle2_expected_tokens, eagle2_tree, sibling_probs_hazard
from specsim.cost.model import ModelSpec
from specsim.cost.roofline import Array

if TYPE_CHECKING:
    from specsim.acceptance.priors import PriorMatch

PARALLEL_METHODS = ("p_eagle", "dflash", "dspark")
TREE_METHODS = ("eagle", "eagle2", "eagle3", "medusa")
METHODS = ("none", "draft_model", "ngram", "suffix", "medusa", "eagle", "eagle2", "eagle3", "mtp", "lookahead",
           *PARALLEL_METHODS)
#: Layers of a parallel drafter: P-EAGLE 4 (amazon/GPT-OSS-20B-P-EAGLE, "4-layer"), DFlash 5
#: (poolside/Laguna-XS.2-speculator.dflash, "5-layer"), DSpark 1 (a head shipped in the target's
#: checkpoint, as MTP; an assumption: the posts do not give its depth).
PARALLEL_LAYERS = {"p_eagle": 4, "dflash": 5, "dspark": 1}


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
    draft_layers: int | None = None  # parallel drafters: layers of the drafter (PARALLEL_LAYERS)
    trees: bool = True  # the planner may choose a tree (tree-capable methods only)
    prior: PriorMatch | None = field(default=None, compare=False, repr=False)

    @property
    def label(self) -> str:
        """A name unique within a scenario: the user's, or method + model / tree shape."""
        if self.name:
            return self.name
        if self.method == "draft_model" and self.model is not None:
            return f"draft:{self.model.name}"
        if self.is_tree:
            return f"{self.method}:top{self.topk}x{self.num_draft_tokens}"
        return self.method

    @property
    def is_tree(self) -> bool:
        return self.topk > 1 and self.num_draft_tokens is not None

    @property
    def is_parallel(self) -> bool:
        return self.method in PARALLEL_METHODS

    @property
    def can_tree(self) -> bool:
        """Whether the planner may search trees for this draft (EAGLE-2/3 and Medusa style drafters)."""
        return self.method in TREE_METHODS and self.trees

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
        if self.method == "none" or k == 0:
            return 1.0
        rates = self.rates(k, alpha_scale)
        if self.is_tree:
            probs = sibling_probs_hazard(rates, self.topk)
            return float(eagle2_expected_tokens(probs, self.topk, k, self.nodes(k)))
        return float(1.0 + np.cumprod(rates).sum())

    def verify_tokens_per_seq(self, k: ArrayLike) -> Array:
        """Tokens each sequence feeds the target's verification pass."""
        kk = np.asarray(k, dtype=float)
        if self.method == "lookahead":
            # Lookahead decoding: the step's input holds the lookahead branch (W x (N-1)) and the
            # verification branch (G x (N-1)) plus the current token, with N - 1 = k (Fu et al. 2024 §3).
            return np.where(kk > 0, 1.0 + (self.window + self.guesses) * kk, 1.0)
        if self.is_tree:
            cap = self.topk + np.maximum(kk - 1.0, 0.0) * self.topk**2
            return np.where(kk > 0, 1.0 + np.minimum(self.num_draft_tokens or 0, cap), 1.0)
        return kk + 1.0


#: Cumulative acceptance of an n-gram draft *given that a draft was proposed*, by position: vLLM V1's
#: n-gram proposer on InstructCoder, k = 5, prompt_lookup 2..5 (vllm PR #24344 spec_decode.py logs; the
#: acceptance prior vllm-pr24344-ngram-instructcoder-k5). The only per-proposal measurement read.
NGRAM_PER_PROPOSAL = (0.69, 0.57, 0.50, 0.45, 0.42)


def ngram_drafted_tokens(k: ArrayLike, tokens_per_step: ArrayLike) -> Array:
    """Draft tokens an n-gram proposer actually proposes per sequence per step, where a request without a
    match proposes none (vLLM V1: vllm/v1/spec_decode/ngram_proposer.py returns []).

    A step yields 1 + (accepted) tokens; with proposal coverage m (the share of steps with a match) and
    per-proposal cumulative acceptance c_i, tokens per step = 1 + m sum_{i<=k} c_i, so m = (tau - 1) /
    sum c_i and the drafted tokens are m k. c_i is NGRAM_PER_PROPOSAL (extended past 5 positions by its
    last ratio); m is capped at 1. Check on the source: InstructCoder's sequence-normalised tau 1.95
    (163,128 tokens, 53,327 without a draft) gives m = 0.95 / 2.63 = 0.36, the logs' 30,248 drafted
    steps of 83,575. Where tau is unknown (NaN) or 1 (no acceptance information) every step drafts k."""
    kk, tau = np.broadcast_arrays(np.asarray(k, dtype=float), np.asarray(tokens_per_step, dtype=float))
    c = np.asarray(NGRAM_PER_PROPOSAL)
    n = int(np.nanmax(kk, initial=0.0))
    if n > c.size:
        c = np.concatenate([c, c[-1] * (c[-1] / c[-2]) ** np.arange(1, n - c.size + 1)])
    cum = np.concatenate([[0.0], np.cumsum(c)])
    gain = cum[np.clip(np.nan_to_num(kk), 0, cum.size - 1).astype(int)]
    known = np.isfinite(tau) & (tau > 1.0) & (gain > 0)
    cover = np.where(known, np.minimum((tau - 1.0) / np.where(gain > 0, gain, 1.0), 1.0), 1.0)
    return np.asarray(np.where(kk > 0, kk * cover, 0.0), dtype=float)
