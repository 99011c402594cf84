"""Parallel drafters (acceptance issue #10): all k drafts from ONE forward pass of a small drafter over k
tokens per sequence (vLLM P-EAGLE / DFlash / DSpark posts: drafting cost flat in k); acceptance per
position (the positional decay lives in the prior)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from specsim.cost.dtypes import weight_bytes
from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.layout import Layout, as_layout
from specsim.cost.model import ModelSpec
from specsim.cost.roofline import Array
from specsim.drafts.families.head import head_model
from specsim.drafts.family import Family
from specsim.drafts.loop import Drafter, drafting_loop_s
from specsim.engines.profile import EngineProfile

if TYPE_CHECKING:
    from specsim.drafts.draft import Draft


@dataclass(frozen=True)
class Parallel(Family):
    """A `layers`-deep drafter at the target's width (``Draft.draft_layers`` overrides the depth)."""

    name: str = "parallel"
    parallel: bool = True
    layers: int = 1

    @property
    def settings(self) -> frozenset[str]:
        return frozenset(("draft_layers",))

    def complete(self, settings: dict[str, int], target: ModelSpec, where: str) -> dict[str, int]:
        if "draft_layers" not in settings:
            settings["draft_layers"] = self.layers
        return settings

    def draft_time_s(self, d: Draft, e: EngineProfile, hw: HardwareProfile, target: ModelSpec, b: Array, k: Array,
                     ctx: Array, tp: int | Layout, weight_dtype: str, kv_dtype: str) -> Array:
        # P-EAGLE / DFlash / DSpark draft all k tokens in ONE pass of a `draft_layers`-deep drafter at
        # the target's width, over the verified positions and the k-token block, on the target's fused
        # features (2h -> h): "drafting cost stays flat as the block deepens" (vLLM P-EAGLE post).
        model = dataclasses.replace(head_model(target), n_layers=d.draft_layers or 1,
                                    name=f"{target.name}-{self.method}")
        drafter = Drafter(model, tp, fuse_in=2 * target.hidden, one_pass=True)
        return drafting_loop_s(drafter, e, hw, target, b, k, ctx, weight_dtype, kv_dtype)

    def memory_bytes_per_gpu(self, d: Draft, target: ModelSpec, b: Array, ctx: Array, tp: int | Layout,
                             weight_dtype: str, kv_dtype: str) -> tuple[Array, Array]:
        # draft_layers target-width layers + the 2h -> h fusion
        head = dataclasses.replace(head_model(target), n_layers=d.draft_layers or 1)
        c = head.param_counts()
        lay = as_layout(tp)
        w = (c["attention"] + c["dense_mlp"] + 2 * target.hidden**2) * weight_bytes(weight_dtype) / lay.tp
        w += c["experts"] * weight_bytes(weight_dtype) / lay.world  # experts split over the stage (EP x moe_tp)
        return np.full(b.shape, w), b * head.kv_bytes_per_sequence(ctx, kv_dtype, lay.tp)


#: Layers of a parallel drafter: P-EAGLE 4 (amazon/GPT-OSS-20B-P-EAGLE, "4-layer"), DFlash 5
#: (poolside/Laguna-XS.2-speculator.dflash, "5-layer"), DSpark 1 (a head shipped in the target's
#: checkpoint, as MTP; an assumption: the posts do not give its depth).
P_EAGLE = Parallel("p_eagle", layers=4)
DFLASH = Parallel("dflash", layers=5)
DSPARK = Parallel("dspark", layers=1)
