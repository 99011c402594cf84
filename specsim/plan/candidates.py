"""Candidate configurations of a draft and their figures: plain decoding, every chain length and, for
tree-capable drafts, dynamic trees of several (topk, nodes); each evaluated at a set of load points in one
vectorised call per draft-pass width, and scored for the scenario's objective.

Trees are chosen, not assumed: for EAGLE-2/3 and Medusa style drafts every depth is tried as a chain
and as dynamic trees of several (topk, nodes); a tree verifies nodes + 1 tokens per sequence (the
verification cost grows with it, through `step.evaluate.step_arrays`) and each draft pass expands
topk tokens, so big trees win at low load and small trees or chains at high load. The tree's
acceptance comes from the draft's per-depth rates through the sibling hazard model
(`acceptance.sibling_probs.sibling_probs_hazard`), never from a tree factor on a tree-measured mean.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from specsim.acceptance.priors import extend_profile
from specsim.drafts.draft import Draft, max_tree_nodes
from specsim.plan.result import FIELDS, PointMetrics
from specsim.step.economics import step_metrics
from specsim.step.evaluate import Target, fits, step_arrays
from specsim.step.policy import Config

#: Tree shapes searched for tree-capable drafts: candidates per level (SGLang's usual
#: --speculative-eagle-topk values) and verified nodes as multiples of the depth, at most 63 (Medusa's
#: and EAGLE-2's largest published trees verify 60-64 tokens).
TREE_TOPK = (2, 4, 8)
TREE_NODE_FACTORS = (1.5, 2.0, 4.0, 8.0)
MAX_TREE_NODES = 63


def candidate_configs(d: Draft, max_k: int) -> list[Config]:
    """Plain decoding, every chain length up to max_k and, for tree-capable drafts, the tree shapes of
    TREE_TOPK x TREE_NODE_FACTORS; a draft whose scenario fixed its tree keeps that tree. Ordered by
    verification tokens (then depth): the order in which a schedule may only shrink with load."""
    if not d.speculates:
        return [Config(0)]
    out = {Config(0)}
    for k in range(1, max_k + 1):
        if d.is_tree:  # the scenario fixed topk and the node budget
            out.add(Config(k, d.topk, d.nodes(k)) if d.nodes(k) > k else Config(k))
            continue
        out.add(Config(k))
        if d.can_tree and k >= 2:
            for topk in TREE_TOPK:
                for f in TREE_NODE_FACTORS:
                    n = math.ceil(f * k)
                    if k < n <= min(max_tree_nodes(topk, k), MAX_TREE_NODES):
                        out.add(Config(k, topk, n))
    return sorted(out, key=lambda c: (c.verify_tokens(d), c.k, c.topk))


@dataclass
class Evaluated:
    """Metrics of one draft over its configurations at a set of (batch, context) points: [config, point]."""

    draft: Draft
    configs: list[Config]
    values: dict[str, np.ndarray]
    feasible: np.ndarray

    def point(self, c: int, i: int, batch: float, context: float, share: float) -> PointMetrics:
        """Configuration c's figures at point i."""
        return PointMetrics(int(batch), int(context), float(share), *(float(self.values[f][c, i]) for f in FIELDS))

    def index(self, config: Config) -> int:
        return self.configs.index(config)


def with_depth(d: Draft, max_k: int) -> Draft:
    """A measured profile shorter than max_k is continued by the method's stated decay model (with a
    note), never by a flat rate; priors already carry 32 positions."""
    if not d.speculates or d.acceptance.max_k is None or d.acceptance.max_k >= max_k:
        return d
    return dataclasses.replace(d, acceptance=extend_profile(d.acceptance, d.method, max(max_k, 8)))


def evaluate_draft(t: Target, d: Draft, max_k: int, batch: np.ndarray, context: np.ndarray,
                   configs: list[Config] | None = None) -> Evaluated:
    """Every configuration of d at the points (batch[i], context[i]), through `plan.evaluate.step_arrays`
    (one call per draft-pass width: a tree's verification tokens vary along the config axis)."""
    d = with_depth(d, max_k)
    cfgs = configs if configs is not None else candidate_configs(d, max_k)
    n, p = len(cfgs), batch.size
    values = {f: np.empty((n, p)) for f in FIELDS}
    feasible = np.zeros((n, p), dtype=bool)
    groups: dict[int, list[int]] = {}
    for i, c in enumerate(cfgs):
        groups.setdefault(c.topk if c.is_tree else 1, []).append(i)
    for width, idx in groups.items():
        sub = [cfgs[i] for i in idx]
        dd = sub[0].draft(d) if width > 1 else d.with_tree(1, None)
        ks = np.array([c.k for c in sub], dtype=float)[:, None]
        q = np.array([c.verify_tokens(dd) for c in sub], dtype=float)[:, None]
        tps = np.array([c.draft(d).tokens_per_step(c.k) for c in sub])[:, None]
        m = step_arrays(t, dd, ks, batch[None, :], context[None, :], tps, q)
        m = step_metrics(m.tokens_per_step, m.draft_time_s, m.verify_time_s, m.baseline_step_time_s, m.batch,
                         m.overhead_time_s)
        md = m.as_dict()
        for f in FIELDS:
            values[f][idx] = np.broadcast_to(md[f], (len(sub), p))
    for i, c in enumerate(cfgs):
        feasible[i] = np.broadcast_to(fits(t, c.draft(d), c.k, batch, context), (p,))
    return Evaluated(d, cfgs, values, feasible)


def score_configs(values: dict[str, np.ndarray], feasible: np.ndarray, weights: np.ndarray, objective: str,
                  slo: float | None) -> np.ndarray:
    """Objective per configuration (higher is better) over points weighted by `weights` (last axis)."""
    thr = (values["throughput_tok_s"] * weights).sum(-1)
    lat = (values["ms_per_token"] * weights).sum(-1)
    ok = feasible.all(-1)
    if objective == "throughput":
        score = thr
    elif objective == "latency":
        score = -lat
    else:  # throughput subject to the per-token latency SLO; if nothing meets it, the fastest
        assert slo is not None
        score = np.where(lat <= slo, thr, -lat)  # any config meeting the SLO beats every one that misses
    return np.where(ok, score, -np.inf)


TIE = 0.01  # scores within 1% count as a tie, broken towards the smaller configuration (fewer wasted tokens)


def pick_k(score: np.ndarray) -> int:
    """The first (smallest) configuration whose score is within TIE of the best; -1 when nothing fits."""
    best = score.max()
    if not np.isfinite(best):
        return -1
    margin = abs(best) * TIE
    return int(np.flatnonzero(score >= best - margin)[0])
