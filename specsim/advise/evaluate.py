"""`specsim evaluate`'s application layer: one speculative configuration, from what the user asked
(`EvaluateRequest`) to what it costs (`RatioStep` or `RealStep`).

Two cost routes: the seed chapter's abstract ratio model (--draft-cost-ratio: a target step costs T,
a draft step c x T) and the roofline cost model (--hardware/--model/--draft: the same
`step.evaluate.config_metrics` that `specsim plan` uses). Both read acceptance the same way and a
tree file's acceptance is resolved in one place (`tree_probs`). Checks run in the order the CLI has
always reported them, so a command with two mistakes names the same one it always did.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from specsim.acceptance.adaptive import adaptive_stats, expected_verify_tokens, stop_rule
from specsim.acceptance.chain import AcceptanceProfile, alpha_from_mean_tokens, check_k, check_rates
from specsim.acceptance.metrics import load_acceptance
from specsim.acceptance.sibling_probs import sibling_probs_hazard
from specsim.acceptance.tree_files import TreeSpec, load_tree
from specsim.acceptance.tree_shapes import chain
from specsim.acceptance.trees import Tree
from specsim.cost.costmodel import describe as cost_model_label
from specsim.cost.hardware import load_hardware
from specsim.cost.layout import Layout, check_layout
from specsim.cost.model import load_model
from specsim.cost.roofline import Array
from specsim.drafts.build import make_draft
from specsim.drafts.draft import Draft
from specsim.engines.mla import verify_path_note
from specsim.engines.profile import EngineProfile, load_engine
from specsim.errors import SpecsimError
from specsim.step.economics import StepMetrics, ratio_step_metrics, step_metrics
from specsim.step.evaluate import (
    DEFAULT_ENGINE,
    StepCalibration,
    Target,
    bundled_engine,
    config_metrics,
    memory_per_gpu,
    step_arrays,
)
from specsim.step.memory import GIB, Memory

#: A comma-separated option (--alphas, --sibling-probs) as the CLI parses it: called only when the
#: value is needed, so its errors come where they always came (and a tree file's own table wins).
FloatList = Callable[[], Sequence[float]]

ABSTRACT_NOTE = (
    "abstract cost model (seed chapter): target step = T, draft step = c*T, verification = one "
    "target step{ridge}; times in ms with T = {t:g} ms"
)


@dataclass(frozen=True)
class RatioCost:
    """The seed chapter's abstract cost model: a target step costs T = `target_step_ms`, a draft step
    `draft_cost_ratio` x T, verification one target step (growing past `ridge_tokens` if given)."""

    draft_cost_ratio: float
    target_step_ms: float = 1.0
    ridge_tokens: float | None = None


@dataclass(frozen=True)
class RealCost:
    """The roofline cost route: `model` on `tp` x `hardware` as `engine` runs it, and `draft` (a method:
    eagle3, ngram, mtp, medusa, lookahead, ... or a catalogue model, i.e. a draft model)."""

    hardware: str
    model: str
    draft: str
    tp: int = 1
    draft_tp: int | None = None
    weight_dtype: str = "native"  # the checkpoint's own, as the engines load it
    kv_dtype: str = "bf16"
    topk: int | None = None
    num_draft_tokens: int | None = None
    engine: str = DEFAULT_ENGINE  # a bundled name or version, or a profile YAML path
    cost_model: str | None = None  # None: the hardware profile's
    layout: Layout | None = None  # DP attention, EP, pipeline, context parallelism beside tp (cost/layout.py)
    window: int | None = None  # lookahead's window and guesses (None: the family's defaults)
    guesses: int | None = None
    task: str | None = None  # the acceptance prior's keys (None: chat, greedy, the method's usual head)
    temperature: float | None = None
    checkpoint: str | None = None
    memory_utilization: float = 0.9  # vLLM's --gpu-memory-utilization default
    calibration: StepCalibration | None = None  # a fitted deployment's (scenario/deployment.py)


@dataclass(frozen=True)
class Acceptance:
    """Where acceptance comes from: at most one of an i.i.d. `alpha`, per-position `alphas` and a
    metrics `file`, or a measured `mean_length` (tokens per step incl. the bonus token). None of
    them: the real route uses the draft's published prior."""

    alpha: float | None = None
    alphas: FloatList | None = None
    file: Path | None = None
    mean_length: float | None = None


@dataclass(frozen=True)
class EvaluateRequest:
    """What the user asked `specsim evaluate`: a cost route, acceptance, a chain of `k` drafts or a
    `tree` file (its acceptance by sibling rank: `sibling_probs`), and the batch and context."""

    cost: RatioCost | RealCost
    acceptance: Acceptance = Acceptance()
    k: int | None = None
    tree: Path | None = None
    sibling_probs: FloatList | None = None
    batch: int = 1
    context: int = 1024
    overhead_ms: float = 0.0  # fixed per-step cost of speculation on top of the model's
    adaptive: AdaptiveStop | None = None  # a drafter that stops early on its own signal (acceptance/adaptive.py)


@dataclass(frozen=True)
class AdaptiveStop:
    """An adaptive draft length: the drafter stops on its own signal, with this recall of the drafts the target
    rejects (P(stop | rejected)) and this false-alarm rate (P(stop | accepted)), at every position up to k."""

    stop_if_reject: float
    stop_if_accept: float
    convention: str = "inclusive"  # the stopping token verified (inclusive) or dropped (exclusive)


@dataclass(frozen=True)
class StepResult:
    """One configuration's step economics and where its numbers came from."""

    metrics: StepMetrics  # scalars
    batch: int
    context: int
    acceptance: str  # the acceptance's source
    cost_source: str  # one line naming the cost model and its inputs


@dataclass(frozen=True)
class RatioStep(StepResult):
    """The abstract cost model's answer for a chain (`chain_rates`: its per-position rates) or a tree."""

    tree: Tree
    is_chain: bool
    chain_rates: tuple[float, ...] | None

    @property
    def k(self) -> int | None:
        return self.tree.num_nodes if self.is_chain else None

    @property
    def verify_tokens(self) -> int:
        """Tokens the batch verifies per pass."""
        return self.batch * self.tree.num_verify_tokens


@dataclass(frozen=True)
class RealStep(StepResult):
    """The roofline cost model's answer, with the memory it needs on each GPU."""

    draft: str
    method: str
    engine: str
    acceptance_note: str | None
    memory_gib: float
    capacity_gib: float
    fits_memory: bool
    k: int
    cost_model: str
    tp: int
    gpus: int
    layout: str
    expected_k: float | None = None  # adaptive draft length: the drafts verified per step, on average
    model: str = ""  # the echo of what was priced: the resolved model, its weights, KV dtype and draft shape
    weights: str = ""
    kv_dtype: str = ""
    shape: str = ""
    verify_tokens_per_seq: float = 1.0  # tokens each sequence feeds the verification pass (adaptive: expected)
    where: str = ""  # GPUs and their profile: 8x h100-sxm
    hardware: str = ""  # the profile's name
    table_share: float = float("nan")  # the share of the verify pass the measured tables priced (NaN: roofline)
    #: the acceptance's tokens per step at its band's 10th / 90th percentile (the prior's; the central value where
    #: the acceptance was given)
    tau_band: tuple[float, float] = (float("nan"), float("nan"))
    calibration: StepCalibration | None = None  # a fitted deployment's (its label in the echo, its spread in bands)
    verify_path: str = ""  # a line where verification runs another kernel path than decoding (engines/mla.py)


def evaluate_step(req: EvaluateRequest) -> RatioStep | RealStep:
    """Tokens per step, step time, throughput and speedup of one speculative configuration."""
    if isinstance(req.cost, RealCost):
        return _real_step(req, req.cost)
    return _ratio_step(req, req.cost)


def acceptance_profile(a: Acceptance, k: int | None) -> AcceptanceProfile | None:
    """The profile of --alpha, --alphas or --acceptance FILE (None when none is given)."""
    if sum(x is not None for x in (a.alpha, a.alphas, a.file)) > 1:
        raise SpecsimError("give only one of --alpha, --alphas, --acceptance")
    if a.alpha is not None:
        check_rates(a.alpha, "--alpha")
        return AcceptanceProfile.from_alpha(a.alpha)
    if a.alphas is not None:
        rates = a.alphas()
        check_rates(rates, "--alphas")
        return AcceptanceProfile.from_alphas(rates)
    if a.file is not None:
        return load_acceptance(a.file, k)
    return None


def check_chain_or_tree(k: int | None, tree: Path | None) -> None:
    if k is not None and tree is not None:
        raise SpecsimError("give either --k (a chain) or --tree FILE, not both")


def tree_probs(spec: TreeSpec, sibling_probs: FloatList | None,
               rates: Callable[[int], ArrayLike] | None) -> np.ndarray:
    """A tree's acceptance by (depth, sibling rank): the file's own table, else --sibling-probs, else the
    hazard model over the chain rates `rates(depth)` (the profile's, or the draft's prior)."""
    if spec.probs is not None:
        if sibling_probs is not None:
            raise SpecsimError("the tree file has its own acceptance table: --sibling-probs would change nothing "
                               "(give one or the other)")
        return spec.probs
    if sibling_probs is not None:
        return np.asarray(sibling_probs())
    if rates is None:
        raise SpecsimError("a tree needs acceptance: an 'acceptance' table in the tree file, "
                           "--sibling-probs, or --alpha/--alphas/--acceptance")
    return sibling_probs_hazard(rates(max(spec.tree.depth, 1)), int(np.max(spec.tree.ranks, initial=0)) + 1)


def _ratio_profile(req: EvaluateRequest) -> AcceptanceProfile | None:
    """The ratio route's acceptance: a measured mean length becomes the i.i.d. alpha at depth k."""
    a, k = req.acceptance, req.k
    if a.mean_length is not None:
        if k is None:
            raise SpecsimError("--acceptance-length needs the draft length --k K")
        if not 1.0 <= a.mean_length <= k + 1:
            raise SpecsimError(f"--acceptance-length must lie in [1, k+1] = [1, {k + 1}], got {a.mean_length:g}")
        a = dataclasses.replace(a, alpha=float(alpha_from_mean_tokens(a.mean_length, k)) if k else 0.0)
    if k is not None:
        check_k(k, "--k")
    check_chain_or_tree(k, req.tree)
    return acceptance_profile(a, k)


def _ratio_shape(req: EvaluateRequest, profile: AcceptanceProfile | None) -> tuple[Tree, float, bool]:
    """(the draft tree, tokens per step, whether it is a chain)."""
    if req.tree is not None:
        spec = load_tree(req.tree)
        probs = tree_probs(spec, req.sibling_probs, profile.rates_for if profile is not None else None)
        return spec.tree, float(spec.tree.expected_tokens(probs)), False
    if req.sibling_probs is not None:
        raise SpecsimError("--sibling-probs applies to --tree only")
    if profile is None:
        raise SpecsimError("give the acceptance: --alpha A, --alphas a1,a2,.. or --acceptance FILE")
    k = req.k
    if k is None:
        if profile.max_k is None:
            raise SpecsimError("give the draft length --k K (or a --tree FILE)")
        k = profile.max_k
    return chain(k), float(profile.mean_tokens(k)), True


def _ratio_step(req: EvaluateRequest, cost: RatioCost) -> RatioStep:
    profile = _ratio_profile(req)
    t, tokens, is_chain = _ratio_shape(req, profile)
    metrics = ratio_step_metrics(
        tokens_per_step=tokens,
        draft_passes=t.depth,
        draft_cost_ratio=cost.draft_cost_ratio,
        batch=req.batch,
        verify_tokens_per_seq=t.num_verify_tokens,
        target_step_time_s=cost.target_step_ms / 1e3,
        ridge_tokens=cost.ridge_tokens,
        overhead_time_s=req.overhead_ms / 1e3,
    )
    r = cost.ridge_tokens
    ridge = "" if r is None else f" up to {r:g} tokens, then x tokens/{r:g}"
    note = ABSTRACT_NOTE.format(ridge=ridge, t=cost.target_step_ms) + f", c = {cost.draft_cost_ratio:g}"
    rates = (tuple(float(a) for a in profile.rates_for(t.num_nodes)) if is_chain and profile is not None
             else None)
    return RatioStep(metrics, req.batch, req.context,
                     profile.source if profile is not None else "tree file / --sibling-probs", note,
                     t, is_chain, rates)


def _real_profile(a: Acceptance, k: int | None) -> AcceptanceProfile | None:
    """The real route's acceptance (None: the draft's prior, or a measured mean length)."""
    if a.alpha is not None:
        check_rates(a.alpha, "--alpha")
    if a.mean_length is not None and any(x is not None for x in (a.alpha, a.alphas, a.file)):
        raise SpecsimError("give one acceptance: --acceptance-length, --alpha, --alphas or --acceptance")
    return acceptance_profile(a, k)


def target_and_draft(cost: RealCost, profile: AcceptanceProfile | None, held_out_source: str | None = None,
                     engines: Mapping[str, EngineProfile] | None = None) -> tuple[Target, Draft]:
    """The Target as its engine runs it and the Draft (with the given acceptance, else its prior, from which
    `held_out_source`'s entries are left out); `engines` replaces bundled engine profiles by name (the engine
    fit tries parameter values this way)."""
    hw = load_hardware(cost.hardware)
    if cost.cost_model is not None:
        hw = hw.with_cost_model(cost.cost_model)
    bundled = "/" not in cost.engine and not cost.engine.endswith((".yaml", ".yml"))
    name = cost.engine.strip().lower() if bundled else cost.engine
    engine = (engines[name] if engines and name in engines else bundled_engine(name) if bundled
              else load_engine(cost.engine))
    target = Target(hw, load_model(cost.model), cost.tp, cost.weight_dtype, cost.kv_dtype, cost.memory_utilization,
                    engine=engine, layout=cost.layout, calibration=cost.calibration)
    target.model.check_tp(cost.tp, "--tp")
    if cost.layout is not None:
        check_layout(cost.layout, target.model.n_experts)
    spec: dict[str, object] = {"method": cost.draft}
    for key in ("draft_tp", "topk", "num_draft_tokens", "window", "guesses", "checkpoint"):
        if getattr(cost, key) is not None:
            spec[key] = getattr(cost, key)
    d = make_draft(spec, target.model, "--draft", task=cost.task, temperature=cost.temperature,
                   held_out_source=held_out_source)
    return target, d if profile is None else dataclasses.replace(d, acceptance=profile)


def _real_shape(req: EvaluateRequest, d: Draft) -> tuple[int, float | None, float | None]:
    """(k, tokens per step, verified tokens per sequence); None: the draft's own at depth k."""
    k, tokens, verify_q = req.k, None, None
    if req.tree is not None:
        check_chain_or_tree(k, req.tree)
        spec = load_tree(req.tree)
        tokens = float(spec.tree.expected_tokens(tree_probs(spec, req.sibling_probs, d.rates)))
        verify_q = float(spec.tree.num_verify_tokens)
        k = spec.tree.depth
    if k is None:
        raise SpecsimError("give the draft length --k K (or a --tree FILE)")
    check_k(k, "--k")
    tau = req.acceptance.mean_length
    if tau is not None:
        if req.tree is not None:
            raise SpecsimError("give either --acceptance-length or a --tree's acceptance, not both")
        q = float(d.verify_tokens_per_seq(k)) if k else 1.0
        if not 1.0 <= tau <= q:
            raise SpecsimError(f"--acceptance-length must lie in [1, {q:g}] at this draft shape (tokens per "
                               f"verification step including the bonus token), got {tau:g}")
        tokens = tau
    return k, tokens, verify_q


def checked_memory(target: Target, d: Draft, k: int, batch: int, context: int) -> Memory:
    """Memory on each GPU; SpecsimError naming what to change when it does not fit."""
    mem = memory_per_gpu(target, d, k, batch, context)
    if bool(np.all(mem.fits)):
        return mem
    base = memory_per_gpu(target, make_draft("none", target.model), 0, batch, context)
    why = ("even without speculation" if not bool(np.all(base.fits))
           else f"with {d.label} at k={k} (plain decoding needs {float(base.total) / GIB:.1f} GiB)")
    need, cap = float(mem.total / GIB), float(mem.capacity / GIB)
    raise SpecsimError(f"does not fit: {need:.1f} GiB needed of {cap:.1f} GiB per GPU for {target.model.name} "
                       f"on {target.where} at batch {batch}, context {context}, "
                       f"{target.model.precision_label(target.weight_dtype)} weights, {why}; lower --batch or "
                       "--context, raise --tp, or give smaller weights (--weight-dtype fp8, nvfp4, ...) or "
                       "--kv-dtype fp8")


def _real_step(req: EvaluateRequest, cost: RealCost) -> RealStep:
    """The roofline route: the same `config_metrics` that `specsim plan` uses."""
    target, d = target_and_draft(cost, _real_profile(req.acceptance, req.k))
    k, tokens, verify_q = _real_shape(req, d)
    target.model.check_context(req.context, "context")
    mem = checked_memory(target, d, k, req.batch, req.context)
    expected_k = None
    vq = verify_q if verify_q is not None else float(d.verify_tokens_per_seq(k)) if k and d.speculates else 1.0
    if req.adaptive is not None:
        m, expected_k, vq = _adaptive_metrics(req, target, d, k, tokens)
    else:
        m = config_metrics(target, d, k, req.batch, req.context, tokens_per_step=tokens,
                           verify_tokens_per_seq=verify_q, extra_overhead_s=req.overhead_ms / 1e3)
    measured = req.acceptance.mean_length is not None
    source = "measured acceptance length" if measured else d.acceptance.source
    tau = float(np.asarray(m.tokens_per_step))
    tau_band = (tau, tau) if measured else d.tau_band(k, tau, exact=req.tree is None and req.adaptive is None)
    label, share = cost_label(target, req.batch, vq, req.context)
    tables = "" if np.isnan(share) else f", {float(share):.0%} of the verify pass from the tables"
    note = (f"{label}{tables} cost model: {target.model.name} on {target.where} as {target.engine.name} runs it, draft "
            f"{d.label} ({d.method}), acceptance " + ("measured (--acceptance-length)" if measured else source))
    return RealStep(m, req.batch, req.context, source, note, d.label, d.method, target.engine.name,
                    d.acceptance.note if d.acceptance.note and not measured else None,
                    float(mem.total) / GIB, float(mem.capacity) / GIB, bool(mem.fits), k, label, cost.tp,
                    target.gpus, str(target.layout or f"tp {target.tp}"), expected_k, target.model.name,
                    target.model.precision_label(cost.weight_dtype), target.kv_dtype, _shape_label(req, d, k, verify_q),
                    vq, target.where, target.hardware.name, float(share), tau_band, target.calibration,
                    verify_path_note(target.engine.mla_backend, target.hardware, target.model.is_mla) if vq > 1 else "")


def cost_label(target: Target, batch: ArrayLike, verify_q: ArrayLike, context: ArrayLike) -> tuple[str, Array]:
    """(the cost model priced, as the echo names it: "roofline", or whose tables; the share of the verify pass's
    kernel time the measured tables priced, per point: NaN on the roofline) (cost/table_coverage.py)."""
    e = target.engine
    label = cost_model_label(target.hardware, e.framework)
    if target.hardware.cost_model.backend != "table":
        return label, np.full(np.shape(np.broadcast_arrays(batch, verify_q, context)[0]), np.nan)
    from specsim.cost.table_coverage import pass_coverage

    cov = pass_coverage(target.model, target.hardware, batch, verify_q, context, target.par, target.weight_dtype,
                        target.kv_dtype, e.allreduce, e.alltoall, e.framework)
    return label, cov.share


def _shape_label(req: EvaluateRequest, d: Draft, k: int, verify_q: float | None) -> str:
    """The draft shape priced: a chain, a tree (the file's or topk x nodes), an adaptive chain."""
    if req.tree is not None:
        return f"tree of {int(verify_q or 1) - 1} nodes, depth {k} ({req.tree.name})"
    if d.is_tree:
        return f"tree topk {d.topk} x {d.num_draft_tokens} nodes"
    if req.adaptive is not None:
        return f"chain up to k={k}, adaptive stop ({req.adaptive.convention})"
    return f"chain k={k}" if d.speculates else "none (plain decoding)"


def _adaptive_metrics(req: EvaluateRequest, target: Target, d: Draft, k: int, tokens: float | None
                      ) -> tuple[StepMetrics, float, float]:
    """A chain capped at k whose drafter stops on its own signal (acceptance/adaptive.py): the expected tokens
    per step, the expected draft passes, and the verify tokens per sequence of a padded batch (1 + E[max k] over
    the batch: engines that capture a graph per request count, SGLang, TensorRT-LLM) or a ragged one (1 + E[k]:
    vLLM's token-count graphs); the memory check is the cap's. (tokens and chain per-position rates as given.)"""
    a = req.adaptive
    assert a is not None
    if req.tree is not None or d.is_tree or k < 1:
        raise SpecsimError("--adaptive-stop applies to a chain of k >= 1 drafts (no --tree, topk 1)")
    accept = (np.full(k, alpha_from_mean_tokens(tokens, k)) if tokens is not None else d.rates(k))
    rule = (stop_rule(accept, a.stop_if_reject, a.stop_if_accept, convention="exclusive") if a.convention == "exclusive"
            else stop_rule(accept, a.stop_if_reject, a.stop_if_accept))
    stats = adaptive_stats(rule)
    ragged = target.engine.graph_unit == "tokens"
    verify_q = float(expected_verify_tokens(stats, req.batch, padded=not ragged))
    passes = float(stats.expected_passes)
    m = step_arrays(target, d, np.asarray(passes), req.batch, req.context, float(stats.expected_tokens),
                    np.asarray(verify_q), req.overhead_ms / 1e3 if passes > 0 else 0.0)
    out = step_metrics(m.tokens_per_step, m.draft_time_s, m.verify_time_s, m.baseline_step_time_s, m.batch,
                       m.overhead_time_s)
    return out, float(stats.expected_k), verify_q
