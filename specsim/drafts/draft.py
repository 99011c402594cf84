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

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from specsim.acceptance.chain import AcceptanceProfile, alpha_from_mean_tokens
from specsim.acceptance.trees import Tree, chain, eagle2_tree, sibling_probs_independent
from specsim.cost import roofline as rl
from specsim.cost.forward import forward_time_s
from specsim.cost.hardware import HardwareProfile
from specsim.cost.model import ModelSpec, load_model, weight_bytes
from specsim.cost.roofline import Array
from specsim.errors import SpecsimError

METHODS = ("none", "draft_model", "ngram", "suffix", "medusa", "eagle", "eagle2", "eagle3", "mtp", "lookahead")


@dataclass(frozen=True)
class Prior:
    """A published mean acceptance length (tokens per step, bonus included) at a draft depth."""

    mean_tokens: float
    depth: int
    decay: float  # per-position multiplicative decay of the conditional rate (1 = i.i.d.)
    source: str


# Published acceptance priors. Spec-Bench leaderboard (hemingkx/Spec-Bench Leaderboard.md; A100,
# Vicuna-7B, greedy, batch 1) mean accepted tokens per step; depths are each method's default
# draft depth in that benchmark (an assumption where the leaderboard does not state it). Tree
# methods reached their mean with a tree: treating it as a chain of that depth is optimistic, so
# measure and override (`acceptance:` in a scenario, or a /metrics scrape) before trusting a plan.
PRIORS: dict[str, Prior] = {
    "draft_model": Prior(2.28, 4, 1.0, "Spec-Bench SpS 2.28 tokens/step (Vicuna-68M draft), assumed k=4"),
    "ngram": Prior(1.75, 4, 1.0, "Spec-Bench PLD 1.75 tokens/step, assumed k=4; a workload property"),
    "suffix": Prior(1.75, 4, 1.0, "as prompt lookup (Spec-Bench PLD 1.75); a workload property"),
    "medusa": Prior(2.31, 5, 0.85, "Spec-Bench Medusa 2.31 tokens/step, 5 heads, rates decaying x0.85 per head"),
    "eagle": Prior(3.58, 5, 1.0, "Spec-Bench EAGLE 3.58 tokens/step at tree depth 5"),
    "eagle2": Prior(4.34, 6, 1.0, "Spec-Bench EAGLE-2 4.34 tokens/step at tree depth 6"),
    "eagle3": Prior(5.6, 7, 1.0, "EAGLE-3 paper: ~1.3x EAGLE-2's acceptance length (5.6 at depth 7 assumed)"),
    "mtp": Prior(1.875, 1, 0.9, "DeepSeek-V3 report: second-token acceptance 85-90% (0.875), x0.9 per reuse"),
    "lookahead": Prior(1.64, 4, 1.0, "Spec-Bench Lookahead 1.64 tokens/step, n-gram size 5 (k=4)"),
}

# Host-side n-gram matching per step: a fixed cost plus a per-sequence scan (vLLM's numba
# NgramProposer, order of microseconds per request; an estimate, not a measurement).
NGRAM_FIXED_US = 20.0
NGRAM_PER_SEQ_US = 3.0


def prior_profile(method: str) -> AcceptanceProfile:
    """The documented default acceptance of a method: decaying conditional rates fitted to the prior."""
    p = PRIORS[method]
    if p.decay == 1.0:
        return AcceptanceProfile((), float(alpha_from_mean_tokens(p.mean_tokens, p.depth)), p.source)
    # solve a1 so that 1 + sum_i prod_{j<=i} a1 decay^(j-1) = mean at depth (bisection; monotone in a1)
    lo, hi = 0.0, 1.0
    for _ in range(60):
        a1 = (lo + hi) / 2
        rates = a1 * p.decay ** np.arange(p.depth)
        lo, hi = (a1, hi) if 1 + np.cumprod(rates).sum() < p.mean_tokens else (lo, a1)
    rates = tuple(float(a1 * p.decay**i) for i in range(32))
    return AcceptanceProfile(rates, float(rates[-1]), p.source)


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


def head_model(target: ModelSpec, vocab: int | None = None, moe: bool = False) -> ModelSpec:
    """A one-layer model at the target's width: EAGLE's draft layer (dense) or an MTP module (as
    the target's layer, MoE for DeepSeek-V3)."""
    return dataclasses.replace(
        target, name=f"{target.name}-head", n_layers=1, vocab=vocab or target.vocab,
        n_dense_layers=0,
        n_experts=target.n_experts if moe else 0, top_k=target.top_k if moe else 0,
        n_shared_experts=target.n_shared_experts if moe else 0,
        kv_lora_rank=target.kv_lora_rank if moe else 0, q_lora_rank=target.q_lora_rank if moe else 0,
        mtp_layers=0,
    )


def draft_time_s(d: Draft, hw: HardwareProfile, target: ModelSpec, batch: ArrayLike, k: ArrayLike,
                 context_len: ArrayLike, tp: int = 1, weight_dtype: str = "bf16", kv_dtype: str = "bf16") -> Array:
    """Seconds a step spends drafting k tokens for B sequences at context L (broadcasting)."""
    b, kk, ctx = (np.asarray(a, dtype=float) for a in np.broadcast_arrays(batch, k, context_len))
    zero = np.zeros(np.broadcast_shapes(b.shape, kk.shape, ctx.shape))
    if d.method in ("none", "lookahead"):
        return zero
    if d.method in ("ngram", "suffix"):
        return np.where(kk > 0, (NGRAM_FIXED_US + NGRAM_PER_SEQ_US * b) * 1e-6, 0.0) + zero
    if d.method == "draft_model":
        assert d.model is not None
        one = forward_time_s(hw, d.model, b, 1, ctx, d.draft_tp or tp, weight_dtype, kv_dtype)
        return kk * one
    if d.method == "medusa":
        # k heads, each a residual block (h x h) and its own LM head (h x V), one pass over B tokens.
        h, v = target.hidden, target.vocab
        wb = weight_bytes(weight_dtype)
        per_head = rl.gemm_time_s(b, h, h, hw, "bf16", wb)[0] + rl.gemm_time_s(b, v / tp, h, hw, "bf16", wb)[0]
        return np.where(kk > 0, kk * per_head + rl.memory_op_time_s(b * kk * v * 4.0, hw), 0.0)
    if d.method in ("eagle", "eagle2", "eagle3"):
        head = head_model(target, d.draft_vocab if d.method == "eagle3" else None)
        width = float(d.topk if d.is_tree else 1)  # tokens per sequence each draft pass expands
        # Fuse target features into the draft input: 2h -> h (EAGLE-1/2), 3h -> h (EAGLE-3).
        fuse_in = (3 if d.method == "eagle3" else 2) * target.hidden
        fuse = rl.gemm_time_s(b, target.hidden, fuse_in, hw, "bf16", weight_bytes(weight_dtype))[0]
        layer = forward_time_s(hw, head, b, width, ctx, tp, weight_dtype, kv_dtype)
        return np.where(kk > 0, fuse + kk * layer, 0.0)
    if d.method == "mtp":
        if not target.mtp_layers:
            raise SpecsimError(f"{target.name} ships no MTP module (num_nextn_predict_layers = 0)")
        module = head_model(target, moe=target.is_moe)
        proj = rl.gemm_time_s(b, target.hidden, 2 * target.hidden, hw, "bf16", weight_bytes(weight_dtype))[0]
        return kk * (proj + forward_time_s(hw, module, b, 1, ctx, tp, weight_dtype, kv_dtype))
    raise SpecsimError(f"unknown draft method '{d.method}' (known: {', '.join(METHODS)})")


def memory_bytes_per_gpu(d: Draft, target: ModelSpec, batch: ArrayLike, context_len: ArrayLike, tp: int = 1,
                         weight_dtype: str = "bf16", kv_dtype: str = "bf16") -> tuple[Array, Array]:
    """(draft weights, draft KV cache) bytes on each GPU."""
    b, ctx = np.broadcast_arrays(np.asarray(batch, dtype=float), np.asarray(context_len, dtype=float))
    wb = weight_bytes(weight_dtype)
    if d.method == "draft_model" and d.model is not None:
        dtp = d.draft_tp or tp
        w = d.model.n_params() * wb / dtp
        kv = b * ctx * d.model.kv_bytes_per_token(kv_dtype) / dtp
        return np.full(b.shape, w), kv
    if d.method in ("eagle", "eagle2", "eagle3", "mtp"):
        head = head_model(target, d.draft_vocab if d.method == "eagle3" else None, moe=d.method == "mtp")
        c = head.param_counts()
        w = (c["attention"] + c["dense_mlp"] + c["experts"]) * wb / tp
        if d.method == "eagle3":
            w += c["lm_head"] * wb / tp  # its own reduced-vocabulary head
        w += (3 if d.method == "eagle3" else 2) * target.hidden**2 * wb / tp
        kv = b * ctx * head.kv_bytes_per_token(kv_dtype) / tp
        return np.full(b.shape, w), kv
    if d.method == "medusa":
        w = 5 * (target.hidden**2 + target.hidden * target.vocab) * wb / tp
        return np.full(b.shape, w), np.zeros(b.shape)
    return np.zeros(b.shape), np.zeros(b.shape)


def make_draft(spec: str | dict[str, Any], target: ModelSpec, where: str = "draft") -> Draft:
    """A Draft from a method name, a catalogue model name (a draft model), or a mapping
    {method, name, model, draft_tp, draft_vocab, topk, num_draft_tokens, window, guesses,
    acceptance: {alpha | alphas | mean_length + k}}."""
    from specsim.acceptance.metrics import load_acceptance

    data: dict[str, Any] = {"method": spec} if isinstance(spec, str) else dict(spec)
    given = str(data.pop("method", "") or "")
    method = given.lower().replace("-", "_")
    if method not in METHODS:
        try:  # a bare catalogue model name (or config path) means a draft model
            data["model"] = data.get("model") or given
            load_model(data["model"])
            method = "draft_model"
        except SpecsimError:
            raise SpecsimError(f"{where}: unknown draft '{method or spec}' (methods: {', '.join(METHODS)}; "
                               "or a catalogue model name for a draft model)") from None
    model = None
    if method == "draft_model":
        if not data.get("model"):
            raise SpecsimError(f"{where}: a draft_model needs 'model' (a catalogue name or config.json path)")
        model = load_model(str(data.pop("model")))
        # Same tokenizer: vocabularies equal up to embedding padding (Qwen2.5 pads 151,646 tokens
        # to 151,936 or 152,064 by model size); Llama-2 (32k) vs Llama-3 (128k) is refused.
        if abs(model.vocab - target.vocab) > 0.01 * target.vocab:
            raise SpecsimError(f"{where}: draft {model.name} has vocabulary {model.vocab}, target {target.name} "
                               f"{target.vocab}: a draft model must share the target's tokenizer")
    data.pop("model", None)
    acc = data.pop("acceptance", None)
    if acc is None:
        profile = AcceptanceProfile.from_alpha(0.0) if method == "none" else prior_profile(method)
    elif isinstance(acc, int | float) and not isinstance(acc, bool):
        profile = AcceptanceProfile.from_alpha(float(acc))
    elif isinstance(acc, dict):
        if "alpha" in acc:
            profile = AcceptanceProfile.from_alpha(float(acc["alpha"]))
        elif "alphas" in acc:
            profile = AcceptanceProfile.from_alphas([float(a) for a in acc["alphas"]])
        elif "mean_length" in acc and "k" in acc:
            profile = AcceptanceProfile.from_mean_length(float(acc["mean_length"]), int(acc["k"]))
        elif "file" in acc:
            profile = load_acceptance(str(acc["file"]), acc.get("k"))
        else:
            raise SpecsimError(f"{where}.acceptance: give alpha, alphas, mean_length + k, or file")
    else:
        raise SpecsimError(f"{where}.acceptance: expected a number or a mapping, got {acc!r}")
    allowed = {"name", "draft_tp", "draft_vocab", "topk", "num_draft_tokens", "window", "guesses"}
    unknown = set(data) - allowed
    if unknown:
        raise SpecsimError(f"{where}: unknown field(s) {sorted(unknown)} (allowed: method, model, acceptance, "
                           f"{', '.join(sorted(allowed))})")
    ints = {key: int(data[key]) for key in ("draft_tp", "draft_vocab", "topk", "num_draft_tokens", "window", "guesses")
            if data.get(key) is not None}
    for key, value in ints.items():
        if value < 1:
            raise SpecsimError(f"{where}.{key} must be >= 1, got {value}")
    if method == "eagle3" and "draft_vocab" not in ints:
        ints["draft_vocab"] = min(32000, target.vocab)  # EAGLE-3 released heads: 32k draft vocabulary
    if method == "mtp" and not target.mtp_layers:
        raise SpecsimError(f"{where}: {target.name} ships no MTP module; use another draft")
    return Draft(method=method, acceptance=profile, name=str(data.get("name") or ""), model=model, **ints)
