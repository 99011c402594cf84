"""Catalogue entries: a raw entry of ``data/priors.yaml`` turned into conditional per-depth rates.

* per-position data (vLLM / SGLang / dashboards) are used as measured; positions past the measured
  depth follow the method's stated decay model (``DecayModel``), never a flat rate;
* a tau measured with a chain, a parallel block or a tree is fitted by scaling the method's decay
  shape so that the tau of that shape (``tau_of``) equals it: a tree-measured tau is never reused
  as a chain tau;
* an alpha (Leviathan et al.'s i.i.d. model) is a flat rate, as its source defines it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specsim.acceptance.priors.decay import DecayModel, fit_first
from specsim.acceptance.priors.fields import conditional_of, is_synthetic, num
from specsim.acceptance.priors.names import MethodInfo, family_of, method_info
from specsim.acceptance.priors.shapes import (
    EAGLE1_TREE,
    EAGLE2_PAPER_TREE,
    EAGLE3_PAPER_TREE,
    MAX_DEPTH,
    RATE_CAP,
    FloatArray,
    Shape,
    chain_shape,
    tau_of,
)
from specsim.acceptance.trees import Tree


@dataclass(frozen=True)
class PriorEntry:
    """One catalogue entry with its acceptance turned into conditional per-depth rates."""

    id: str
    method: str
    family: str
    target: str
    target_params_b: float | None
    draft: str
    draft_params_b: float | None
    task: str
    dataset: str
    temperature: float | None
    shape: Shape | None
    published: Mapping[str, Any]  # the figures the source gives: tau, alpha, conditional, cumulative, ...
    source: str
    implementation: str
    rates: tuple[float, ...]  # conditional per-depth rates, MAX_DEPTH positions
    measured_depth: int  # positions taken from per-position data (0: fitted from a mean)
    fit: str  # how the rates were obtained
    quality: float  # 0 = a point value stated by the source; larger = weaker evidence
    synthetic: bool = False  # random-token benchmarks: not a workload prior

    @property
    def tau(self) -> float | None:
        """The published mean acceptance length (bonus included) in the entry's own shape, if any."""
        t = self.published.get("tau")
        return None if t is None else float(t)

    def tau_for(self, shape: Shape | Tree | int) -> float:
        return tau_of(self.rates, shape)

    def reference_tau(self) -> float:
        """The entry's tau in its own shape (or a chain of 5 when the source gave per-token rates)."""
        return self.tau_for(self.shape if self.shape is not None else chain_shape(5))


# ---------------------------------------------------------------------------------------------
# the shape an entry was measured with
# ---------------------------------------------------------------------------------------------


def resolve_shape(e: Mapping[str, Any]) -> Shape | None:
    """The shape an entry was measured with, filling what the source left out (stated in ``assumed``)."""
    info = method_info(e["method"])
    s = e.get("shape") or {}
    kind = s.get("kind")
    name = str(s.get("name") or "")
    depth = s.get("depth")
    if kind in ("heads", "tree-siblings"):
        return None
    if name == "eagle1-static-tree":
        return EAGLE1_TREE
    if name.startswith("medusa-default") or name == "hydra-default" or kind in ("method-default", "lookahead"):
        # the configuration the method's published implementation runs (lookahead: its W / N / G defaults)
        return info.default_tree or Shape("chain", info.default_depth, assumed=info.default_depth_why)
    if name == "eagle2-dynamic":
        ndt = s.get("num_draft_tokens")
        if ndt is None:
            return EAGLE2_PAPER_TREE
        return Shape("tree", int(depth or 6), int(s.get("topk") or 10), int(ndt) - 1)
    if name == "eagle3-dynamic-tree":
        return EAGLE3_PAPER_TREE
    if kind == "tree":
        return _tree_shape(s)
    if kind in ("chain", "parallel_block", "unknown"):
        return _chain_shape(s, info)
    return None


def _tree_shape(s: Mapping[str, Any]) -> Shape:
    """A tree a source ran in an engine (SGLang's flags), what it did not state filled from SGLang's examples."""
    depth, topk, ndt = s.get("depth"), s.get("topk"), s.get("num_draft_tokens")
    if depth is not None and topk is not None and ndt is not None:
        # SGLang: num_draft_tokens counts the root (trees.eagle2_tree docstring)
        return Shape("tree", int(depth), int(topk), int(ndt) - 1)
    if depth is not None and topk is not None:
        return Shape("tree", int(depth), int(topk), int(topk) * int(depth),
                     assumed="verified tokens not stated: every expanded candidate assumed verified")
    if depth is not None:
        nodes = 31 if int(depth) <= 5 else 63
        return Shape("tree", int(depth), 8, nodes, assumed=f"topk / draft tokens not stated: SGLang's EAGLE "
                     f"example (--speculative-eagle-topk 8, --speculative-num-draft-tokens {nodes + 1}) assumed")
    return Shape("tree", 3, int(topk or 4), 7, assumed="depth / draft tokens not stated: SGLang "
                 "--speculative-num-steps 3, --speculative-num-draft-tokens 8 assumed")


def _chain_shape(s: Mapping[str, Any], info: MethodInfo) -> Shape:
    """A chain or a parallel block; its depth as stated, from an MTP window, or the method's default."""
    shape_kind = "parallel" if s.get("kind") == "parallel_block" else "chain"
    depth = s.get("depth")
    if depth is not None:
        return Shape(shape_kind, int(depth))
    if s.get("window_tokens"):
        k = max(1, int(s["window_tokens"]) - 1)
        return Shape(shape_kind, k, assumed=f"'{int(s['window_tokens'])}-token MTP window' read as SGLang "
                     f"num_draft_tokens (root included): {k} draft steps")
    return Shape(shape_kind, info.default_depth, assumed=info.default_depth_why)


# ---------------------------------------------------------------------------------------------
# fitting an entry
# ---------------------------------------------------------------------------------------------


@dataclass
class _Reading:
    """What one raw entry states, as read so far by the steps of ``make_entry``."""

    shape: Shape | None
    quality: float = 0.0  # 0 = a point value stated by the source; larger = weaker evidence
    tau: float | None = None
    mda: float | None = None  # mean draft acceptance (vLLM's accepted / drafted)
    cond: list[float] | None = None
    alpha: float | None = None
    published: dict[str, Any] = field(default_factory=dict)


def make_entry(e: Mapping[str, Any], models: Mapping[str, DecayModel]) -> PriorEntry | None:
    """A raw entry fitted to per-depth rates (None when it states no acceptance to fit)."""
    info = method_info(e["method"])
    model = models.get(info.decay_group, models["iid"])
    r = _Reading(resolve_shape(e))
    _read_quality(e, r)
    _read_tau(e, r)
    _read_conditional(e, r)
    _read_alpha(e, r)
    fitted = _fit(e, r, model)
    if fitted is None:
        return None
    rates, measured, fit = fitted
    tgt = e.get("target") or {}
    drf = e.get("draft") or {}
    return PriorEntry(
        id=str(e["id"]), method=info.name, family=str(tgt.get("family") or family_of(str(tgt.get("name", "")))),
        target=str(tgt.get("name", "")), target_params_b=num(tgt.get("params_b")),
        draft=str(drf.get("name") or ""), draft_params_b=num(drf.get("params_b")), task=str(e.get("task") or "mixed"),
        dataset=str(e.get("dataset") or ""), temperature=num(e.get("temperature")), shape=r.shape,
        published=r.published, source=str(e.get("source") or ""), implementation=str(e.get("implementation") or ""),
        rates=tuple(float(x) for x in rates), measured_depth=measured, fit=fit, quality=r.quality,
        synthetic=is_synthetic(e),
    )


def _read_quality(e: Mapping[str, Any], r: _Reading) -> None:
    """Weaker evidence for approximate figures, third-party runs and assumed targets or shapes."""
    notes = str(e.get("notes") or "")
    if "approximate" in notes.lower() or "~" in notes:
        r.quality += 0.1
    if "third-party" in f"{e.get('source', '')} {notes}".lower() or "assumed" in str((e.get("target") or {}).get(
            "name", "")):
        r.quality += 0.1
    if r.shape is not None and r.shape.assumed:
        r.quality += 0.1


def _read_tau(e: Mapping[str, Any], r: _Reading) -> None:
    """The mean acceptance length: as stated, a range's middle, or from vLLM's acceptance rate; an
    assumed chain depth is corrected to one that holds it."""
    r.tau = num(e.get("tau"))
    if r.tau is None and e.get("tau_range"):
        lo, hi = (float(x) for x in e["tau_range"])
        r.tau, r.quality = 0.5 * (lo + hi), r.quality + 0.2
    r.mda = mda = num(e.get("mean_draft_acceptance"))
    shape = r.shape
    if r.tau is None and mda is not None and shape is not None and not shape.is_tree:
        r.tau = 1.0 + shape.depth * mda  # vLLM: acceptance rate = accepted / draft tokens = (tau - 1) / k
        r.published["mean_draft_acceptance"] = mda
    tau = r.tau
    if tau is not None and mda and shape is not None and shape.assumed and not shape.is_tree:
        k = max(1, round((tau - 1.0) / mda))  # both given: k = (tau - 1) / (accepted / drafted)
        shape = Shape(shape.kind, k, assumed=f"k not stated: {k} = (tau - 1) / acceptance rate {mda:g}")
    while (tau is not None and shape is not None and not shape.is_tree
           and tau > 1.0 + sum(RATE_CAP ** i for i in range(1, shape.depth + 1))):
        # the assumed depth cannot hold the published mean: take the smallest depth that can
        shape = Shape(shape.kind, shape.depth + 1, assumed=f"{shape.assumed.split('; depth raised')[0]}; depth "
                      f"raised to hold tau {tau:g}")
    r.shape = shape


def _read_conditional(e: Mapping[str, Any], r: _Reading) -> None:
    """Per-position rates: measured, made per step, or read from ranges, endpoints and figures."""
    cond = conditional_of(e)
    step_tau = num((e.get("proposal_coverage") or {}).get("seq_normalized_tau"))
    if cond and step_tau is not None and r.tau is not None and r.tau > 1.0:
        # Rates measured per *proposed* draft, where a proposer drafts only on a match (vLLM V1's n-gram
        # proposer returns [] otherwise): per step the first position is reached on the share of steps
        # that draft, m = (tau_step - 1) / (tau_proposal - 1); deeper conditionals are unchanged.
        r.published["tau_per_proposal"] = r.tau
        cond = [cond[0] * (step_tau - 1.0) / (r.tau - 1.0), *cond[1:]]
        r.tau = step_tau
    if cond is None and e.get("conditional_range"):
        cond = [0.5 * (float(a) + float(b)) for a, b in e["conditional_range"]]
        r.quality += 0.05
    if cond is None and e.get("conditional_range_all"):
        lo, hi = (float(x) for x in e["conditional_range_all"])
        cond, r.quality = [0.5 * (lo + hi)] * 3, r.quality + 0.3  # figure reading: "almost unchanged" across positions
    if cond is None and e.get("conditional_endpoints"):
        cond, r.quality = [float(e["conditional_endpoints"][0])], r.quality + 0.3
    if cond is None and e.get("cumulative_at") and r.tau is None:
        first = num(e["cumulative_at"].get("1", e["cumulative_at"].get(1)))
        if first is not None:
            cond, r.quality = [first], r.quality + 0.3
    if cond is None and r.tau is None and r.mda is not None and r.shape is not None and r.shape.depth == 1:
        cond = [r.mda]
    if e.get("acceptance_bound") or e.get("cumulative_bound"):
        r.quality += 0.3
    r.cond = cond


def _read_alpha(e: Mapping[str, Any], r: _Reading) -> None:
    r.alpha = num(e.get("alpha"))
    if r.alpha is None and e.get("sibling_acceptance"):
        r.alpha, r.quality = float(e["sibling_acceptance"][0]), r.quality + 0.2  # Sequoia: P(rank 0 accepted)


def _fit(e: Mapping[str, Any], r: _Reading, model: DecayModel) -> tuple[FloatArray, int, str] | None:
    """(rates, positions measured, how) from the per-position rates, else the alpha, else the mean."""
    if r.cond:
        r.published["conditional"] = tuple(r.cond)
        if e.get("cumulative"):
            r.published["cumulative"] = tuple(float(x) for x in e["cumulative"])
        if r.tau is not None:
            r.published["tau"] = r.tau
        return model.extend(r.cond), len(r.cond), f"{len(r.cond)} measured position(s); deeper: {model.describe()}"
    if r.alpha is not None:
        r.published["alpha"] = r.alpha
        return (np.full(MAX_DEPTH, min(r.alpha, RATE_CAP)), MAX_DEPTH,
                "i.i.d. alpha (Leviathan et al. 2022's model: one rate for every position)")
    if r.tau is not None and r.shape is not None:
        r.published["tau"] = r.tau
        rates = model.rates_from_first(fit_first(model, r.shape, r.tau))
        return rates, 0, f"fitted to tau {r.tau:g} measured as a {r.shape.label()}; {model.describe()}"
    return None
