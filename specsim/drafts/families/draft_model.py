"""A draft model: a smaller model sharing the target's tokenizer, run by the engine's drafting loop (k
sequential passes of B tokens) with its own KV cache and its own TP degree."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from specsim.cost.dtypes import weight_bytes
from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.layout import Layout, as_layout
from specsim.cost.model import ModelSpec, load_model
from specsim.cost.roofline import Array
from specsim.drafts.family import Family
from specsim.drafts.loop import Drafter, drafting_loop_s
from specsim.engines.profile import EngineProfile
from specsim.errors import SpecsimError

if TYPE_CHECKING:
    from specsim.drafts.draft import Draft


@dataclass(frozen=True)
class DraftModel(Family):
    """A standalone draft model (``Draft.model``, at ``Draft.draft_tp`` or the target's TP)."""

    name: str = "draft_model"

    @property
    def settings(self) -> frozenset[str]:
        return frozenset(("draft_tp",))

    def draft_model(self, data: dict[str, Any], target: ModelSpec, where: str) -> ModelSpec | None:
        if not data.get("model"):
            raise SpecsimError(f"{where}: a draft_model needs 'model' (a catalogue name or config.json path)")
        model = load_model(str(data["model"]))
        # Same tokenizer: vocabularies equal up to embedding padding (Qwen2.5 pads 151,646 tokens
        # to 151,936 or 152,064 by model size); Llama-2 (32k) vs Llama-3 (128k) is refused.
        if abs(model.vocab - target.vocab) > 0.01 * target.vocab:
            raise SpecsimError(f"{where}: draft {model.name} has vocabulary {model.vocab}, target {target.name} "
                               f"{target.vocab}: a draft model must share the target's tokenizer")
        return model

    def draft_time_s(self, d: Draft, e: EngineProfile, hw: HardwareProfile, target: ModelSpec, b: Array, k: Array,
                     ctx: Array, tp: int | Layout, weight_dtype: str, kv_dtype: str) -> Array:
        assert d.model is not None
        return drafting_loop_s(Drafter(d.model, d.draft_tp or tp), e, hw, target, b, k, ctx, weight_dtype, kv_dtype)

    def memory_bytes_per_gpu(self, d: Draft, target: ModelSpec, b: Array, ctx: Array, tp: int | Layout,
                             weight_dtype: str, kv_dtype: str) -> tuple[Array, Array]:
        if d.model is None:
            return np.zeros(b.shape), np.zeros(b.shape)
        dtp = d.draft_tp or as_layout(tp).tp
        w = d.model.n_params() * weight_bytes(weight_dtype) / dtp
        kv = b * d.model.kv_bytes_per_sequence(ctx, kv_dtype, dtp)
        return np.full(b.shape, w), kv


DRAFT_MODEL = DraftModel("draft_model")
