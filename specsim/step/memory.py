"""GPU memory per GPU as a serving engine counts it: the one implementation of the memory check.

vLLM's accounting (``gpu_worker.determine_available_memory``; logs quoted in the sources below):
the engine may use ``total_gpu_memory x gpu_memory_utilization``; from that it takes the weights,
the non-torch memory (CUDA context, cuBLAS workspaces, NCCL / custom all-reduce buffers), the
activation peak of a profiling pass over ``max_num_batched_tokens`` tokens and the CUDA-graph pool;
the rest is KV cache. A configuration fits when its KV cache (target and draft, for every running
sequence's context plus the tokens it verifies) fits in that rest.

All figures are bytes on one GPU; people read GiB (``Memory.to_dict``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from specsim.cost.dtypes import ACT_BYTES, LOGIT_BYTES
from specsim.cost.layout import Layout, as_layout
from specsim.cost.mixers import state_slots
from specsim.cost.model import ModelSpec
from specsim.cost.roofline import Array
from specsim.drafts.cost import memory_bytes_per_gpu
from specsim.drafts.draft import Draft

GIB = float(2**30)
#: vLLM's default token budget of the profiling pass (``max_num_batched_tokens`` with chunked prefill).
PROFILE_TOKENS = 8192
#: vLLM's default ``max_num_seqs``: logits of that many sequences are materialised in the profile run. The
#: profile's sampler run takes the engine's own max_num_seqs (vllm/v1/worker/gpu_model_runner.py profile_run /
#: _dummy_sampler_run: `num_reqs = min(num_tokens, max_num_reqs)`, max_num_reqs = scheduler_config.max_num_seqs),
#: so a server started with --max-num-seqs 16 materialises 16 sequences' logits, not 256.
PROFILE_SEQS = 256
#: Non-torch memory at tp = 1: 0.16 GiB in vLLM V1 logs on H100 (kubernetes-sigs/gateway-api-inference-
#: extension#550; generative-computing/mellea#416); NCCL and custom all-reduce buffers add about 1.8 GiB
#: per GPU at tp > 1 (vllm-project/vllm#10511: 1.79 -> 3.58 GiB from tp 1 to tp 2, Llama-3-8B, H100).
NON_TORCH_BYTES = 0.16 * GIB
NON_TORCH_TP_BYTES = 1.8 * GIB
#: CUDA-graph pool: 0.13-0.21 GiB for 0.5-1B models (vllm-project/vllm#11349, mellea#416); larger
#: models capture the same graphs with wider buffers: an estimate of 0.25 GiB per GPU.
GRAPH_BYTES = 0.25 * GIB


def activation_peak_bytes(hidden: int, intermediate: int, q_heads: int, kv_heads: float, head_dim: int, vocab: int,
                          tp: int, verify_tokens_per_seq: float = 1.0, profile_seqs: int = PROFILE_SEQS) -> float:
    """Peak activations of vLLM's profiling pass over PROFILE_TOKENS tokens, per GPU.

    The widest live tensors of one layer: the MLP's gate+up output (2 x inter/tp), the activation
    output (inter/tp), three hidden-size buffers (residual, normed input, output) and the QKV output,
    in bf16; plus fp32 logits (and the sampler's copy) for `profile_seqs` sequences (the engine's max_num_seqs,
    PROFILE_SEQS by default) x the tokens each verifies. Checked against vLLM's log for Llama-3-8B on H100:
    "PyTorch activation peak memory 1.26 GiB" (vllm-project/vllm#10511); this gives 1.18 GiB.
    """
    per_token = 3.0 * intermediate / tp + 3.0 * hidden + (q_heads + 2.0 * kv_heads) * head_dim / tp
    logits = 2.0 * min(profile_seqs, PROFILE_TOKENS) * verify_tokens_per_seq * vocab / tp * LOGIT_BYTES
    return PROFILE_TOKENS * per_token * ACT_BYTES + logits


@dataclass(frozen=True, eq=False)
class Memory:
    """Bytes on each GPU (arrays broadcast over batch and context)."""

    weights: Array
    kv_cache: Array
    activations: Array
    reserved: Array  # non-torch memory and the CUDA-graph pool
    draft_weights: Array
    draft_kv: Array
    capacity: Array  # total_gpu_memory x gpu_memory_utilization

    PARTS = ("weights", "kv_cache", "activations", "reserved", "draft_weights", "draft_kv")

    @property
    def total(self) -> Array:
        return sum((getattr(self, p) for p in self.PARTS), np.zeros_like(self.capacity))

    @property
    def fits(self) -> np.ndarray:
        return np.asarray(self.total <= self.capacity)

    @property
    def kv_capacity(self) -> Array:
        """Bytes left for the KV cache (target and draft) after everything else."""
        return self.capacity - (self.weights + self.activations + self.reserved + self.draft_weights)

    def to_dict(self) -> dict[str, Array]:
        """Every part, the total and the capacity in GiB."""
        out = {f"{p}_gib": getattr(self, p) / GIB for p in self.PARTS}
        out["total_gib"] = self.total / GIB
        out["capacity_gib"] = self.capacity / GIB
        return out


def memory_per_gpu(hardware_total_bytes: float, utilization: float, model: ModelSpec, d: Draft, k: int,
                   batch: ArrayLike, context_len: ArrayLike, tp: int | Layout, weight_dtype: str, kv_dtype: str,
                   verify_tokens_per_seq: float = 1.0, profile_seqs: int = PROFILE_SEQS) -> Memory:
    """Memory on each GPU for B sequences at context L running draft d at depth k (k = 0: plain).

    Each sequence holds KV for its context plus the tokens it verifies (their slots are written
    before acceptance is known); the draft adds its weights and, for draft models and EAGLE/MTP
    layers, its own KV cache. Under a layout (cost/layout.py) the weights split as
    `ModelSpec.weight_bytes_per_gpu`; a GPU caches the KV of its DP-attention group's sequences only (MLA's
    latent is replicated over the group's tp), its pipeline stage's layers, and 1/cp of each context.
    """
    lay = as_layout(tp)
    b, ctx = (np.asarray(a, dtype=float) for a in np.broadcast_arrays(batch, context_len))
    q = verify_tokens_per_seq if k else 1.0
    weights = model.weight_bytes_per_gpu(weight_dtype, lay)
    # hybrid models add each sequence's recurrent state, one slot per draft position besides its own
    # (cost.mixers.state_slots: vLLM's 1 + num_speculative_tokens), in the same pool as the KV cache
    state = model.linear_state_bytes_per_sequence(lay.tp) * state_slots(k)
    seqs = np.ceil(b / lay.dp)
    kv = seqs * (model.kv_bytes_per_sequence(ctx + q, kv_dtype, lay.tp) / lay.cp + state) / lay.pp
    act = activation_peak_bytes(model.hidden, max(model.intermediate, model.moe_intermediate * max(model.top_k, 1)),
                                model.n_heads, model.kv_heads_per_gpu(lay.tp) * lay.tp, model.head_dim, model.vocab,
                                lay.tp, q, profile_seqs)
    reserved = NON_TORCH_BYTES + (NON_TORCH_TP_BYTES if lay.gpus > 1 else 0.0) + GRAPH_BYTES
    if k:
        dw, dkv = memory_bytes_per_gpu(d, model, b, ctx + q, lay, weight_dtype, kv_dtype)
    else:
        dw, dkv = np.zeros(b.shape), np.zeros(b.shape)
    full = np.full(b.shape, 1.0)
    return Memory(weights * full, kv, act * full, reserved * full, dw, dkv,
                  hardware_total_bytes * utilization * full)
