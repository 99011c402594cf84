"""Parallel drafters (acceptance issue #10): all k drafts from ONE forward pass of a small drafter over k
tokens per sequence (vLLM P-EAGLE / DFlash / DSpark posts: drafting cost flat in k); acceptance per
position (the positional decay lives in the prior). DSpark adds a sequential Markov head after that pass:
k small steps, each reading its rank-r x V projection (`markov_time_s`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from specsim.cost import roofline as rl
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
    """A `layers`-deep drafter at the target's width (``Draft.draft_layers`` overrides the depth), fusing `fuse`
    target feature layers (fuse x h -> h) and, for DSpark, a rank-`markov_rank` Markov head (0: none)."""

    name: str = "parallel"
    parallel: bool = True
    layers: int = 1
    fuse: int = 2
    markov_rank: int = 0

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
        # features (fuse x h -> h): "drafting cost stays flat as the block deepens" (vLLM P-EAGLE post).
        model = dataclasses.replace(head_model(target), n_layers=d.draft_layers or 1,
                                    name=f"{target.name}-{self.method}")
        drafter = Drafter(model, tp, fuse_in=self.fuse * target.hidden, one_pass=True)
        t = drafting_loop_s(drafter, e, hw, target, b, k, ctx, weight_dtype, kv_dtype)
        return t + markov_time_s(self.markov_rank, e, hw, target.vocab, b, k) if self.markov_rank else t

    def memory_bytes_per_gpu(self, d: Draft, target: ModelSpec, b: Array, ctx: Array, tp: int | Layout,
                             weight_dtype: str, kv_dtype: str) -> tuple[Array, Array]:
        # draft_layers target-width layers + the fuse x h -> h fusion (+ DSpark's Markov head, replicated on each GPU)
        head = dataclasses.replace(head_model(target), n_layers=d.draft_layers or 1)
        c = head.param_counts()
        lay = as_layout(tp)
        w = (c["attention"] + c["dense_mlp"] + self.fuse * target.hidden**2) * weight_bytes(weight_dtype) / lay.tp
        w += 2 * self.markov_rank * target.vocab * MARKOV_BYTES
        w += c["experts"] * weight_bytes(weight_dtype) / lay.world  # experts split over the stage (EP x moe_tp)
        return np.full(b.shape, w), b * head.kv_bytes_per_sequence(ctx, kv_dtype, lay.tp)


#: DSpark's Markov head runs outside the drafter's pass, its weights (markov_w1 V x r, markov_w2 r x V) kept in
#: bf16 and replicated on every TP rank ("Both weights are replicated because the head runs sequentially for
#: every draft position. Sharding them would add an all-reduce and a full-vocab gather to each position":
#: vllm-project/vllm vllm/model_executor/models/qwen3_dspark.py@0302ff40 DSparkMarkovHead)
MARKOV_BYTES = 2.0
#: kernels of one Markov step as vLLM's unfused sampler runs it (vllm/v1/spec_decode/dspark_sampling.py@432d4cea
#: sample_dspark_markov_block, greedy: markov_w1 lookup, the r -> V projection, the bias add, argmax, the
#: token copy), launched eagerly outside the drafter's graph
MARKOV_KERNELS = 5.0


def markov_time_s(rank: int, e: EngineProfile, hw: HardwareProfile, vocab: int, b: Array, k: Array) -> Array:
    """DSpark's sequential Markov head (vllm/v1/spec_decode/dspark_sampling.py@432d4cea
    sample_dspark_markov_block: `for step_idx in range(block_size)`): k steps, each the r -> V projection of the
    previous token's embedding (its replicated weight read once a step, "the full-vocab w2 weight is read
    exactly once per step") and the bias added to that position's B x V logits and an argmax over them (fp32:
    written, read and written, read); each step the slower of its kernels and their eager launches."""
    gemm = rl.gemm_time_s(b, float(vocab), float(rank), hw, "bf16", MARKOV_BYTES)[0]
    logits = rl.memory_op_time_s(4.0 * b * vocab * 4.0, hw, MARKOV_KERNELS - 1.0)
    step = np.maximum(gemm + logits, MARKOV_KERNELS * e.eager_op_us * 1e-6)
    return np.asarray(k * step, dtype=float)


#: Layers of a parallel drafter: P-EAGLE 4 (amazon/GPT-OSS-20B-P-EAGLE, "4-layer"), DFlash 5
#: (poolside/Laguna-XS.2-speculator.dflash, "5-layer"), DSpark 5: deepseek-ai/dspark_qwen3_8b_block7 as a NeMo RL
#: draft-training guide loads it (`num_layers: 5`, `target_hidden_state_layer_ids: [1, 9, 17, 25, 33]`,
#: `markov_rank: 256`; found by code search, repository not named), a 4.74 GB bf16 checkpoint (HF API figure quoted
#: in a DSpark porting note) = 5 Qwen3-8B layers + embedding + LM head + the 5h -> h fusion + the Markov head
#: (tests/drafts/families/test_parallel.py), and xuhuan51/dspark-spec-serving-benchmark
#: reports/qwen38_dspark_tp4_20261003.md ("DSpark 草稿约 1.988B 参数、5 层", its Qwen3.8-27B drafter). DSpark fuses
#: those 5 target layers (vllm/v1/spec_decode/dspark.py@26a86f53: aux_hidden_size = hidden_size x
#: len(dspark_target_layer_ids)); P-EAGLE and DFlash keep the 2h -> h estimate.
P_EAGLE = Parallel("p_eagle", layers=4)
DFLASH = Parallel("dflash", layers=5)
DSPARK = Parallel("dspark", layers=5, fuse=5, markov_rank=256)
