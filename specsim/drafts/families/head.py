"""Autoregressive heads at the target's width, run k times in sequence by the engine's drafting loop:

  eagle, eagle2, eagle3
        one decoder layer on target features + an LM head (Li et al. 2024, 2025); EAGLE-3 fuses three
        feature layers and has a reduced draft vocabulary
  mtp   DeepSeek-V3 multi-token-prediction module(s): one full layer (MoE for DeepSeek-V3) + projection,
        reused; shipped in the target's checkpoint
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from specsim.cost.dtypes import part_dtype, weight_bytes
from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.layout import Layout, as_layout
from specsim.cost.model import ModelSpec
from specsim.cost.roofline import Array
from specsim.drafts.family import Family
from specsim.drafts.loop import Drafter, drafting_loop_s
from specsim.engines.profile import EngineProfile
from specsim.errors import SpecsimError

if TYPE_CHECKING:
    from specsim.drafts.draft import Draft

#: EAGLE-3 released heads: a 32k draft vocabulary.
EAGLE3_DRAFT_VOCAB = 32000


def head_model(target: ModelSpec, vocab: int | None = None, moe: bool = False) -> ModelSpec:
    """A one-layer model at the target's width: EAGLE's draft layer (dense, full attention) or an MTP
    module (as the target's layer: MoE for DeepSeek-V3, full attention in a hybrid model (Qwen3-Next's
    qwen3_next_mtp.py), with the target's sparse attention (DSA: the MTP layer has its indexer) and, in
    DeepSeek-V4, its last compress_ratios entry 0: the sliding window only). A dense head on a target without
    dense layers (DeepSeek-V4, Qwen3.5: no dense width in the config) gets the target's active FFN width (top-k
    experts plus the shared ones): an assumption, no released head states its width."""
    sparse = 1 if moe and target.n_sparse_layers else 0
    width = target.intermediate or target.moe_intermediate * max(target.top_k, 1) + target.shared_width
    return dataclasses.replace(
        target, name=f"{target.name}-head", n_layers=1, vocab=vocab or target.vocab, intermediate=width,
        n_dense_layers=0,
        n_experts=target.n_experts if moe else 0, top_k=target.top_k if moe else 0,
        n_shared_experts=target.n_shared_experts if moe else 0,
        shared_intermediate=target.shared_intermediate if moe else 0, moe_latent=target.moe_latent if moe else 0,
        kv_lora_rank=target.kv_lora_rank if moe else 0, q_lora_rank=target.q_lora_rank if moe else 0,
        mtp_layers=0, n_attention_layers=0, n_linear_layers=0, sliding_window=0, n_sliding_layers=0,
        chunked_attention=False, n_sparse_layers=sparse, n_index_layers=0,
        index_key_bytes=target.index_key_bytes if sparse else 0.0,
        compressed_layers=((0, 1),) if moe and target.compressed_layers else (),
    )


@dataclass(frozen=True)
class Head(Family):
    """A one-layer autoregressive head fusing `fuse` x h target features into its h-wide input."""

    name: str = "head"
    can_tree: bool = True
    fuse: int = 2  # 2h -> h (EAGLE-1/2, MTP's projection), 3h -> h (EAGLE-3)
    own_vocab: bool = False  # its own reduced-vocabulary LM head (EAGLE-3)
    moe: bool = False  # the target's (MoE) layer (MTP)
    shipped: bool = False  # ships in the target's checkpoint (MTP): the target must have it

    @property
    def settings(self) -> frozenset[str]:
        tree = frozenset(("topk", "num_draft_tokens")) if self.can_tree else frozenset()
        return tree | (frozenset(("draft_vocab",)) if self.own_vocab else frozenset())

    def complete(self, settings: dict[str, int], target: ModelSpec, where: str) -> dict[str, int]:
        if self.own_vocab and "draft_vocab" not in settings:
            settings["draft_vocab"] = min(EAGLE3_DRAFT_VOCAB, target.vocab)
        if self.shipped and not target.mtp_layers:
            raise SpecsimError(f"{where}: {target.name} ships no MTP module; use another draft")
        return settings

    def model(self, d: Draft, target: ModelSpec) -> ModelSpec:
        """The head as a one-layer model."""
        return head_model(target, d.draft_vocab if self.own_vocab else None, moe=self.moe)

    def draft_time_s(self, d: Draft, e: EngineProfile, hw: HardwareProfile, target: ModelSpec, b: Array, k: Array,
                     ctx: Array, tp: int | Layout, weight_dtype: str, kv_dtype: str) -> Array:
        if self.shipped and not target.mtp_layers:
            raise SpecsimError(f"{target.name} ships no MTP module (num_nextn_predict_layers = 0)")
        drafter = Drafter(self.model(d, target), tp, float(d.topk if d.is_tree else 1), self.fuse * target.hidden,
                          e.draft_tree_ops)
        return drafting_loop_s(drafter, e, hw, target, b, k, ctx, self._dtype(weight_dtype), kv_dtype)

    def _dtype(self, weight_dtype: str) -> str:
        """An MTP module runs in the precision's `mtp` format (TensorRT-LLM's DeepSeek-R1 NVFP4 recipe keeps
        it bf16); other heads in the target's."""
        return part_dtype(weight_dtype, "mtp") if self.shipped else weight_dtype

    def memory_bytes_per_gpu(self, d: Draft, target: ModelSpec, b: Array, ctx: Array, tp: int | Layout,
                             weight_dtype: str, kv_dtype: str) -> tuple[Array, Array]:
        wb = weight_bytes(self._dtype(weight_dtype))
        head = self.model(d, target)
        c = head.param_counts()
        lay = as_layout(tp)
        # split as the target's: attention over tp, experts over the stage (EP x moe_tp: MTP's MoE layer)
        w = (c["attention"] + c["dense_mlp"]) * wb / lay.tp + c["experts"] * wb / lay.world
        if self.own_vocab:
            w += c["lm_head"] * wb / lay.tp  # its own reduced-vocabulary head
        w += self.fuse * target.hidden**2 * wb / lay.tp
        kv = b * head.kv_bytes_per_sequence(ctx, kv_dtype, lay.tp)
        return np.full(b.shape, w), kv


EAGLE = Head("eagle")
EAGLE2 = Head("eagle2")
EAGLE3 = Head("eagle3", fuse=3, own_vocab=True)
MTP = Head("mtp", can_tree=False, moe=True, shipped=True)
