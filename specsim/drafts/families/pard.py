"""PARD (An et al., AMD, arXiv:2504.18583; github.com/AMD-AIG-AIMA/PARD): a small draft model of the
target's family (PARD-Llama-3.2-1B for Llama-3.x, PARD-Qwen2.5-0.5B, PARD-Qwen3-0.6B,
PARD-DeepSeek-R1-Distill-Qwen-1.5B) trained to propose k tokens in ONE forward pass over k - 1 mask
tokens appended to the verified tokens, with its own KV cache (a draft model's).

The pass, as the reference loop runs it (AMD-AIG-AIMA/PARD@5dfe809 pard/pard_infer.py, ``generate``):
the draft input is the tokens accepted in the last step (1 .. k + 1, the bonus included) followed by
k - 1 ``pard_token`` masks; the k drafts are the argmax of the last k logits; afterwards the k - 1 mask
positions are dropped from the draft KV cache (``cache_mask(draft_cache, draft_cache_length - (k - 1))``).
An engine that replays CUDA graphs runs that pass at a fixed width: the k + 1 verification slots plus
the k - 1 masks, 2k tokens per sequence (vLLM's unified parallel drafting, PR #32887, pads the
rejected slots). Priced here at that width: one pass of the draft model over B x 2k tokens, not k
sequential passes. Acceptance is per position (the decay lives in the prior)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.layout import Layout
from specsim.cost.model import ModelSpec
from specsim.cost.roofline import Array
from specsim.drafts.families.draft_model import DraftModel
from specsim.engines.passes import US, pass_time_s
from specsim.engines.profile import EngineProfile
from specsim.errors import SpecsimError

if TYPE_CHECKING:
    from specsim.drafts.draft import Draft

#: The PARD draft AMD released for each target family (AMD-AIG-AIMA/PARD README "Model Weights"; AMD-AGI/PARD
#: README adds PARD-Llama-4-1B), as the catalogue's architecture: (target-name prefix, catalogue draft).
#: PARD-DeepSeek-R1-Distill-Qwen-1.5B is a Qwen2 1.5B (hidden 1536, 28 layers), priced as qwen2.5-1.5b.
DEFAULT_DRAFTS: tuple[tuple[str, str], ...] = (
    ("llama-3", "llama-3.2-1b"),  # amd/PARD-Llama-3.2-1B (Llama-3.1 / 3.2 / 3.3 targets)
    ("deepseek-r1-distill-qwen", "qwen2.5-1.5b"),  # amd/PARD-DeepSeek-R1-Distill-Qwen-1.5B
    ("qwen2.5", "qwen2.5-0.5b"),  # amd/PARD-Qwen2.5-0.5B
    ("qwen3-", "qwen3-0.6b"),  # amd/PARD-Qwen3-0.6B (Qwen3 dense targets; not Qwen3.5 / Qwen3-Next)
)


def default_draft(target: ModelSpec) -> str | None:
    """The catalogue model of AMD's released PARD draft for a target's family (None: none released)."""
    name = target.name.lower()
    for prefix, draft in DEFAULT_DRAFTS:
        if name.startswith(prefix):
            return draft
    return None


def pard_tokens_per_seq(k: Array) -> Array:
    """Tokens each sequence feeds the PARD draft pass at depth k: the k + 1 verification slots and k - 1 masks."""
    return 2.0 * np.asarray(k, dtype=float)


@dataclass(frozen=True)
class Pard(DraftModel):
    """A PARD parallel draft model (``Draft.model``; by default AMD's released draft for the target's family)."""

    name: str = "pard"
    parallel: bool = True

    def draft_model(self, data: dict[str, Any], target: ModelSpec, where: str) -> ModelSpec | None:
        if not data.get("model"):
            model = default_draft(target)
            if model is None:
                raise SpecsimError(f"{where}: pard needs 'model' (a catalogue name or config.json path): no PARD "
                                   f"draft is released for {target.name}'s family")
            data = {**data, "model": model}
        return super().draft_model(data, target, where)

    def draft_time_s(self, d: Draft, e: EngineProfile, hw: HardwareProfile, target: ModelSpec, b: Array, k: Array,
                     ctx: Array, tp: int | Layout, weight_dtype: str, kv_dtype: str) -> Array:
        assert d.model is not None
        t = pass_time_s(e, hw, d.model, b, pard_tokens_per_seq(k), ctx, d.draft_tp or tp, weight_dtype, kv_dtype,
                        graphs=e.draft_graphs)
        return t + e.draft_pass_overhead_us * US


PARD = Pard("pard")
