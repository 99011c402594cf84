"""Jacobi-style lookahead decoding (Fu et al. 2024): no draft model, more tokens per verification."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from specsim.cost.roofline import Array
from specsim.drafts.family import Family

if TYPE_CHECKING:
    from specsim.drafts.draft import Draft


@dataclass(frozen=True)
class Lookahead(Family):
    """No drafting pass and no memory: the target's own step carries the lookahead and verification
    branches (window W = ``Draft.window``, guess set G = ``Draft.guesses``)."""

    name: str = "lookahead"

    @property
    def settings(self) -> frozenset[str]:
        return frozenset(("window", "guesses"))

    def verify_tokens_per_seq(self, d: Draft, k: Array) -> Array:
        # Lookahead decoding: the step's input holds the lookahead branch (W x (N-1)) and the
        # verification branch (G x (N-1)) plus the current token, with N - 1 = k (Fu et al. 2024 §3).
        return np.where(k > 0, 1.0 + (d.window + d.guesses) * k, 1.0)


LOOKAHEAD = Lookahead("lookahead")
