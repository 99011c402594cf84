"""Draft methods: what each costs per step on the target's hardware, what it accepts, what memory
it takes. Costs come from each draft's own architecture through the same cost model as the
target (forward.py), never from a constant ratio.

Methods (seed chapter, "Choosing a draft"; vLLM / SGLang / TensorRT-LLM method names in ENGINE_*):
  none          plain decoding (k = 0)
  draft_model   a smaller model sharing the tokenizer: k sequential passes of B tokens, own KV cache
  ngram, suffix prompt lookup / suffix decoding: host-side matching, no GPU weights
  medusa        k heads on the last hidden state, all evaluated in one pass (Cai et al. 2024)
  eagle, eagle2, eagle3
                one decoder layer at target width on target features + an LM head, run k times
                in sequence (Li et al. 2024, 2025); EAGLE-3 has a reduced draft vocabulary
  mtp           DeepSeek-V3 multi-token-prediction module(s): one full layer + projection, reused
  lookahead     Jacobi-style lookahead decoding: no draft model, more tokens per verification
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from specsim.acceptance.chain import AcceptanceProfile
from specsim.acceptance.trees import Tree, chain, eagle2_tree, sibling_probs_independent
from specsim.cost.model import ModelSpec
from specsim.cost.roofline import Array

METHODS = ("none", "draft_model", "ngram", "suffix", "medusa", "eagle", "eagle2", "eagle3", "mtp", "lookahead")


@dataclass(frozen=True)
class Draft:
    """One draft method with its settings; `acceptance` defaults to the method's published prior."""

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

    # acceptance ----------------------------------------------------------------------------
    def tree(self, k: int, alpha_scale: float = 1.0) -> Tree:
        """The draft tree at depth k (a chain unless topk > 1)."""
        if not self.is_tree or k == 0:
            return chain(k)
        probs = sibling_probs_independent(self.rates(k, alpha_scale), self.topk)
        return eagle2_tree(probs, self.topk, k, min(self.num_draft_tokens or k, self.topk * k))

    def rates(self, k: int, alpha_scale: float = 1.0) -> Array:
        return np.clip(self.acceptance.rates_for(k) * alpha_scale, 0.0, 1.0)

    def tokens_per_step(self, k: int, alpha_scale: float = 1.0) -> float:
        """Expected tokens per step at depth k (chain formula, or Sequoia tree expectation)."""
        if self.method == "none" or k == 0:
            return 1.0
        if self.is_tree:
            probs = sibling_probs_independent(self.rates(k, alpha_scale), self.topk)
            return float(self.tree(k, alpha_scale).expected_tokens(probs))
        rates = self.rates(k, alpha_scale)
        return float(1.0 + np.cumprod(rates).sum())

    def verify_tokens_per_seq(self, k: ArrayLike) -> Array:
        """Tokens each sequence feeds the target's verification pass."""
        kk = np.asarray(k, dtype=float)
        if self.method == "lookahead":
            # Lookahead decoding: the step's input holds the lookahead branch (W x (N-1)) and the
            # verification branch (G x (N-1)) plus the current token, with N - 1 = k (Fu et al. 2024 §3).
            return np.where(kk > 0, 1.0 + (self.window + self.guesses) * kk, 1.0)
        if self.is_tree:
            return np.where(kk > 0, 1.0 + np.minimum(self.num_draft_tokens or 0, self.topk * kk), 1.0)
        return kk + 1.0
