"""The one protocol every draft family implements (``DraftFamily``), and ``Family``, its defaults.

A family answers, for one draft method (``drafts/families/``, registered by name in
``drafts/registry.py``): what drafting costs per step on the target's hardware, the memory the drafter
takes on each GPU, the tokens each sequence feeds the verification pass at depth k, the host work it
implies, whether it can draft a tree, and how ``make_draft`` builds it. Callers ask the family (through
``Draft.family``) instead of comparing method names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.layout import Layout
from specsim.cost.model import ModelSpec
from specsim.cost.roofline import Array
from specsim.engines.profile import EngineProfile

if TYPE_CHECKING:
    from specsim.drafts.draft import Draft


class DraftFamily(Protocol):
    """What every draft family answers for one of its methods."""

    @property
    def name(self) -> str:
        """The family: none, head, draft_model, parallel, medusa, lookup or lookahead."""
        ...

    @property
    def method(self) -> str:
        """The method this family serves (the registry's spelling; serialised in outputs)."""
        ...

    @property
    def speculates(self) -> bool:
        """Whether the method drafts at all (False for plain decoding)."""
        ...

    @property
    def can_tree(self) -> bool:
        """Whether the planner may search trees for it (EAGLE-2/3 and Medusa style drafters)."""
        ...

    @property
    def parallel(self) -> bool:
        """Whether it drafts all k tokens in one forward pass (the drafting loop's extend pass is all)."""
        ...

    @property
    def host_drafter(self) -> bool:
        """Whether it drafts on the host (engines then run it without async scheduling)."""
        ...

    @property
    def drafts_on_match(self) -> bool:
        """Whether it proposes only where it finds a match (vLLM V1's n-gram proposer), so the tokens
        drafted per step follow the acceptance rather than k."""
        ...

    @property
    def settings(self) -> frozenset[str]:
        """The integer settings of a draft description (build.INT_FIELDS) this family reads; another is refused."""
        ...

    def draft_model(self, data: dict[str, Any], target: ModelSpec, where: str) -> ModelSpec | None:
        """The draft's own model from a draft description (``make_draft``); None for other families."""
        ...

    def complete(self, settings: dict[str, int], target: ModelSpec, where: str) -> dict[str, int]:
        """The draft's integer settings with the family's defaults filled in, checked against the target."""
        ...

    def verify_tokens_per_seq(self, d: Draft, k: Array) -> Array:
        """Tokens each sequence feeds the target's verification pass at depth k."""
        ...

    def draft_time_s(self, d: Draft, e: EngineProfile, hw: HardwareProfile, target: ModelSpec, b: Array, k: Array,
                     ctx: Array, tp: int | Layout, weight_dtype: str, kv_dtype: str) -> Array:
        """Seconds a step spends drafting k >= 1 tokens for b sequences at context ctx (broadcast arrays)."""
        ...

    def memory_bytes_per_gpu(self, d: Draft, target: ModelSpec, b: Array, ctx: Array, tp: int | Layout,
                             weight_dtype: str, kv_dtype: str) -> tuple[Array, Array]:
        """(draft weights, draft KV cache) bytes on each GPU (broadcast arrays b, ctx)."""
        ...


@dataclass(frozen=True)
class Family:
    """The defaults of ``DraftFamily``: a chain (or the draft's tree) verified as drafted, no drafting
    pass, no memory, no settings of its own. Each family overrides what it does differently."""

    method: str
    name: str = ""
    speculates: bool = True
    can_tree: bool = False
    parallel: bool = False
    host_drafter: bool = False
    drafts_on_match: bool = False

    def draft_model(self, data: dict[str, Any], target: ModelSpec, where: str) -> ModelSpec | None:
        return None

    @property
    def settings(self) -> frozenset[str]:
        return frozenset(("topk", "num_draft_tokens")) if self.can_tree else frozenset()

    def complete(self, settings: dict[str, int], target: ModelSpec, where: str) -> dict[str, int]:
        return settings

    def verify_tokens_per_seq(self, d: Draft, k: Array) -> Array:
        return d.shape_verify_tokens(k)

    def draft_time_s(self, d: Draft, e: EngineProfile, hw: HardwareProfile, target: ModelSpec, b: Array, k: Array,
                     ctx: Array, tp: int | Layout, weight_dtype: str, kv_dtype: str) -> Array:
        return np.zeros(b.shape)

    def memory_bytes_per_gpu(self, d: Draft, target: ModelSpec, b: Array, ctx: Array, tp: int | Layout,
                             weight_dtype: str, kv_dtype: str) -> tuple[Array, Array]:
        return np.zeros(b.shape), np.zeros(b.shape)
