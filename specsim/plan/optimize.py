"""The optimiser: for each load bucket the (draft, k) that serves the scenario's objective best,
with plain decoding always a candidate and memory always checked; the policy over batch size;
each draft's crossover batch; the load-weighted gain; Little's-law loads solved as a fixed point.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specsim.cost.forward import forward_time_s
from specsim.drafts.build import make_draft
from specsim.drafts.draft import Draft
from specsim.errors import SpecsimError
from specsim.plan.evaluate import Target, config_metrics, fits
from specsim.plan.scenario import Bucket, Scenario

FIELDS = ("tokens_per_step", "step_ms", "draft_ms", "verify_ms", "baseline_step_ms", "speedup", "throughput_tok_s",
          "ms_per_token")


def target_of(s: Scenario) -> Target:
    return Target(s.hardware, s.model, s.tp, s.weight_dtype, s.kv_dtype, s.memory_utilization)


@dataclass
class Evaluated:
    """Metrics of one draft over k = 0..max_k at a set of (batch, context) points: arrays [k, point]."""

    draft: Draft
    values: dict[str, np.ndarray]
    feasible: np.ndarray

    def at(self, k: int, i: int) -> dict[str, float]:
        return {f: float(self.values[f][k, i]) for f in FIELDS}


def evaluate_draft(t: Target, d: Draft, max_k: int, batch: np.ndarray, context: np.ndarray,
                   alpha_scale: float = 1.0) -> Evaluated:
    rows: dict[str, list[np.ndarray]] = {f: [] for f in FIELDS}
    ok = []
    # A measured acceptance profile without an i.i.d. tail describes k up to its positions only:
    # deeper k are not candidates (marked infeasible) rather than extrapolated.
    k_known = max_k if d.acceptance.max_k is None or d.method == "none" else min(max_k, d.acceptance.max_k)
    for k in range(max_k + 1):
        m = config_metrics(t, d, min(k, k_known), batch, context, alpha_scale).as_dict()
        for f in FIELDS:
            rows[f].append(np.broadcast_to(m[f], batch.shape))
        ok.append(fits(t, d, k, batch, context) & (k <= k_known))
    return Evaluated(d, {f: np.stack(v) for f, v in rows.items()}, np.stack(ok))


def score_configs(values: dict[str, np.ndarray], feasible: np.ndarray, weights: np.ndarray, objective: str,
           slo: float | None) -> np.ndarray:
    """Objective per k (higher is better) over points weighted by `weights` (last axis)."""
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


@dataclass
class BucketPlan:
    bucket: Bucket
    draft: str
    method: str
    k: int
    rows: list[dict[str, Any]]  # one per context: the figures `evaluate` gives there
    baseline_rows: list[dict[str, Any]]
    fits: bool


@dataclass
class Plan:
    scenario: Scenario
    method: str  # the draft method chosen for the whole load (engines run one method)
    draft_label: str
    buckets: list[BucketPlan]
    policy: list[dict[str, Any]]  # segments over batch: {batch_from, batch_to, k}
    crossover: dict[str, int | None]  # per draft: first batch where it stops paying
    gain: float  # load-weighted throughput (or latency) gain over plain decoding
    per_draft_gain: dict[str, float]
    arrival: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


TIE = 0.01  # scores within 1% count as a tie, broken towards the smaller k (fewer wasted tokens)


def pick_k(score: np.ndarray) -> int:
    """The smallest k whose score is within TIE of the best; -1 when nothing fits in memory."""
    best = score.max()
    if not np.isfinite(best):
        return -1
    margin = abs(best) * TIE
    return int(np.flatnonzero(score >= best - margin)[0])


def bucket_points(buckets: tuple[Bucket, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    batch, ctx, share, owner = [], [], [], []
    for i, b in enumerate(buckets):
        for c, s in b.contexts:
            batch.append(b.batch)
            ctx.append(c)
            share.append(s)
            owner.append(i)
    return np.array(batch, float), np.array(ctx, float), np.array(share), np.array(owner)


def _rows(ev: Evaluated, k: int, idx: np.ndarray, batch: np.ndarray, ctx: np.ndarray, share: np.ndarray
          ) -> list[dict[str, Any]]:
    return [{"batch": int(batch[i]), "context": int(ctx[i]), "share": float(share[i]), **ev.at(k, int(i))}
            for i in idx]


def _grid_scores(t: Target, d: Draft, s: Scenario, grid: np.ndarray,
                 contexts: list[tuple[tuple[int, float], ...]]) -> tuple[np.ndarray, Evaluated, np.ndarray]:
    """Objective score [k, point] of draft d at each grid batch, each point with its own contexts."""
    bb, cc, ww, owner = [], [], [], []
    for j, (b, ctxs) in enumerate(zip(grid, contexts, strict=True)):
        for c, w in ctxs:
            bb.append(b)
            cc.append(c)
            ww.append(w)
            owner.append(j)
    owner_a = np.array(owner)
    ev = evaluate_draft(t, d, s.max_k, np.array(bb, float), np.array(cc, float))
    score = np.stack([score_configs({f: v[:, owner_a == j] for f, v in ev.values.items()},
                                    ev.feasible[:, owner_a == j], np.array(ww)[owner_a == j], s.objective,
                                    s.slo_ms_per_token) for j in range(len(grid))], axis=1)
    return score, ev, owner_a


def monotone_schedule(score: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """The k per grid point (batch ascending) that never rises with batch and loses the least.

    Engines schedule k by batch size and expect it to fall with load (vLLM
    num_speculative_tokens_per_batch_size, TensorRT-LLM draft_len_schedule). Tile steps make the
    unconstrained best k zig-zag by a percent or two; dynamic programming over (point, k) picks the
    non-increasing sequence with the largest weighted sum of relative scores (1 = the point's best),
    with a slight preference for smaller k. Points where nothing fits in memory get -1.
    """
    n_k, n = score.shape
    best = score.max(axis=0)
    ok = np.isfinite(best)
    with np.errstate(invalid="ignore"):
        rel = 1.0 - (best - score) / np.maximum(np.abs(best), 1e-300) - 1e-4 * np.arange(n_k)[:, None]
    rel = np.where(np.isfinite(score), rel, -1e9)
    idx = np.flatnonzero(ok)
    out = np.full(n, -1)
    if not idx.size:
        return out
    dp = np.zeros((len(idx), n_k))
    arg = np.zeros((len(idx), n_k), dtype=int)
    dp[0] = weight[idx[0]] * rel[:, idx[0]]
    for i in range(1, len(idx)):
        # best predecessor with k' >= k: suffix maximum of the previous row
        prev = dp[i - 1]
        suf_arg = np.array([k + int(np.argmax(prev[k:])) for k in range(n_k)])
        dp[i] = weight[idx[i]] * rel[:, idx[i]] + prev[suf_arg]
        arg[i] = suf_arg
    k = int(np.argmax(dp[-1]))
    for i in range(len(idx) - 1, -1, -1):
        out[idx[i]] = k
        k = arg[i, k]
    return out


def _segments(grid: np.ndarray, ks: np.ndarray) -> list[dict[str, Any]]:
    segments: list[dict[str, Any]] = []
    for b, k in zip(grid, ks, strict=True):
        if segments and segments[-1]["k"] == int(k):
            segments[-1]["batch_to"] = int(b)
        else:
            segments.append({"batch_from": int(b), "batch_to": int(b), "k": int(k)})
    return segments


def _batch_grid(s: Scenario) -> np.ndarray:
    top = max([b.batch for b in s.buckets] + [64]) * 2
    return np.unique(np.concatenate([np.round(np.geomspace(1, top, 48)), [b.batch for b in s.buckets]]).astype(int))


def _pooled(s: Scenario) -> tuple[tuple[int, float], ...]:
    pooled: dict[int, float] = {}
    for b in s.buckets:
        for c, w in b.contexts:
            pooled[c] = pooled.get(c, 0.0) + w * b.weight
    return tuple(sorted(pooled.items()))


def crossover_batch(t: Target, d: Draft, s: Scenario) -> int | None:
    """First batch of the grid (contexts pooled over the load) where d's best k is 0."""
    grid = _batch_grid(s)
    score, _, _ = _grid_scores(t, d, s, grid, [_pooled(s)] * len(grid))
    off = [int(b) for j, b in enumerate(grid) if pick_k(score[:, j]) == 0]
    return off[0] if off else None


def plan(s: Scenario) -> Plan:
    t = target_of(s)
    if s.arrival is not None:
        return _plan_arrival(s, t)
    batch, ctx, share, owner = bucket_points(s.buckets)
    none = make_draft("none", s.model)
    base = evaluate_draft(t, none, 0, batch, ctx)
    candidates = []
    for d in s.drafts:
        ev = evaluate_draft(t, d, s.max_k, batch, ctx)
        choice, total = [], 0.0
        for i, b in enumerate(s.buckets):
            idx = np.flatnonzero(owner == i)
            sc = score_configs({f: v[:, idx] for f, v in ev.values.items()}, ev.feasible[:, idx], share[idx],
                        s.objective, s.slo_ms_per_token)
            k = max(pick_k(sc), 0)
            choice.append(k)
            val = {f: (ev.values[f][k, idx] * share[idx]).sum() for f in ("throughput_tok_s", "ms_per_token")}
            total += b.weight * (val["throughput_tok_s"] if s.objective != "latency" else -val["ms_per_token"])
        candidates.append((total, d, ev, choice))
    base_total = sum(b.weight * ((base.values["throughput_tok_s"][0, owner == i] * share[owner == i]).sum()
                                 if s.objective != "latency" else
                                 -(base.values["ms_per_token"][0, owner == i] * share[owner == i]).sum())
                     for i, b in enumerate(s.buckets))

    def gain(total: float) -> float:
        return total / base_total if s.objective != "latency" else base_total / total

    _, best, ev, _ = max(candidates, key=lambda c: c[0])
    # The deployed policy: one non-increasing schedule of k over batch for the chosen method. Grid
    # points at a bucket's batch use that bucket's contexts and weigh by its share of the day.
    grid = _batch_grid(s)
    at = {b.batch: i for i, b in enumerate(s.buckets)}
    ctxs = [s.buckets[at[int(g)]].contexts if int(g) in at else _pooled(s) for g in grid]
    score, _, _ = _grid_scores(t, best, s, grid, ctxs)
    weight = np.array([1.0 + 100.0 * sum(b.weight for b in s.buckets if b.batch == g) for g in grid])
    schedule = monotone_schedule(score, weight)
    policy = _segments(grid, schedule)
    choice = [max(int(schedule[int(np.flatnonzero(grid == b.batch)[0])]), 0) for b in s.buckets]
    total = 0.0
    for i, b in enumerate(s.buckets):
        idx = np.flatnonzero(owner == i)
        val = {f: (ev.values[f][choice[i], idx] * share[idx]).sum() for f in ("throughput_tok_s", "ms_per_token")}
        total += b.weight * (val["throughput_tok_s"] if s.objective != "latency" else -val["ms_per_token"])
    buckets = []
    for i, b in enumerate(s.buckets):
        idx = np.flatnonzero(owner == i)
        k = choice[i]
        buckets.append(BucketPlan(b, best.label if k else "none", best.method if k else "none", k,
                                  _rows(ev, k, idx, batch, ctx, share), _rows(base, 0, idx, batch, ctx, share),
                                  bool(base.feasible[0, idx].all())))
    crossover = {d.label: crossover_batch(t, d, s) for d in s.drafts}
    notes = []
    if s.objective == "slo":
        assert s.slo_ms_per_token is not None
        for bp in buckets:
            worst = max(r["ms_per_token"] for r in bp.rows)
            if worst > s.slo_ms_per_token:
                notes.append(f"bucket {bp.bucket.name} misses the SLO ({worst:.1f} > {s.slo_ms_per_token:g} ms/token) "
                             "even with its best configuration: lower its batch (more replicas)")
    if not all(bp.fits for bp in buckets):
        notes.append("some buckets do not fit in memory even without speculation: add GPUs or shorten contexts")
    if (best.acceptance.source and "Spec-Bench" in best.acceptance.source) or "paper" in best.acceptance.source:
        notes.append(f"acceptance for {best.label} is a published prior ({best.acceptance.source}); "
                     "measure yours (specsim evaluate --acceptance metrics.txt) before committing")
    return Plan(s, best.method if any(choice) else "none", best.label, buckets, policy, crossover,
                float(gain(total)), {d.label: float(gain(c[0])) for c, d in zip(candidates, s.drafts, strict=True)},
                None, notes)


def solve_concurrency(t: Target, d: Draft, k: int, rate_rps: float, prompt: int, output: int,
                      max_batch: float = 4096.0) -> tuple[float, float] | None:
    """Little's law with speculation in the loop: N = rate x (prefill + output x ms_per_token(N)).

    A request stays in the batch for its prefill and its decode; speculation shortens the decode,
    which lowers N, which changes the step time. g(N) = rate*T(N) - N changes sign once (T grows
    slowly with N); its root is bracketed on a geometric grid of N (one vectorised call), then
    refined by bisection on the exact cost. Returns (N, ms_per_token at N) or None if the load
    cannot be served below max_batch.
    """
    prefill_s = float(forward_time_s(t.hardware, t.model, 1, prompt, prompt / 2, t.tp, t.weight_dtype, t.kv_dtype))
    ctx = prompt + output / 2
    grid = np.geomspace(1.0, max_batch, 64)
    tpot_s = config_metrics(t, d, k, grid, ctx).ms_per_token / 1e3
    g = rate_rps * (prefill_s + output * tpot_s) - grid
    if g[-1] > 0:
        return None
    j = int(np.argmax(g <= 0))
    if j == 0:
        return 1.0, float(tpot_s[0] * 1e3)
    lo, hi = grid[j - 1], grid[j]
    for _ in range(20):
        mid = (lo + hi) / 2
        val = rate_rps * (prefill_s + output * float(config_metrics(t, d, k, mid, ctx).ms_per_token) / 1e3) - mid
        lo, hi = (mid, hi) if val > 0 else (lo, mid)
    return hi, float(config_metrics(t, d, k, hi, ctx).ms_per_token)


def _plan_arrival(s: Scenario, t: Target) -> Plan:
    a = s.arrival
    assert a is not None
    none = make_draft("none", s.model)
    ctx = a.prompt_tokens + a.output_tokens / 2
    base = solve_concurrency(t, none, 0, a.rate_rps, a.prompt_tokens, a.output_tokens)
    if base is None:
        raise SpecsimError(f"{s.path}: {a.rate_rps:g} requests/s exceed what one replica serves even at batch 4096")
    results = []
    for d in s.drafts:
        for k in range(s.max_k + 1):
            sol = solve_concurrency(t, d, k, a.rate_rps, a.prompt_tokens, a.output_tokens)
            if sol is None or not bool(fits(t, d, k, max(sol[0], 1.0), ctx)):
                continue
            results.append((sol[1], d, k, sol[0]))
    lat, d, k, n = min(results, key=lambda r: r[0])
    # The bucket's figures are those at the integer batch nearest the fixed point (what
    # `specsim evaluate --batch` reproduces); the fixed point itself is in `arrival`.
    b = Bucket("arrival", 1.0, max(1, round(n)), ((round(ctx), 1.0),))
    m = config_metrics(t, d, k, b.batch, round(ctx))
    mb = config_metrics(t, none, 0, max(1, round(base[0])), round(ctx))
    row = {"batch": b.batch, "context": round(ctx), "share": 1.0, **{f: float(m.as_dict()[f]) for f in FIELDS}}
    brow = {"batch": max(1, round(base[0])), "context": round(ctx), "share": 1.0,
            **{f: float(mb.as_dict()[f]) for f in FIELDS}}
    bp = BucketPlan(b, d.label if k else "none", d.method if k else "none", k, [row], [brow], True)
    arrival = {"rate_rps": a.rate_rps, "concurrency": n, "baseline_concurrency": base[0],
               "ms_per_token": lat, "baseline_ms_per_token": base[1]}
    return Plan(s, d.method if k else "none", d.label, [bp], [{"batch_from": 1, "batch_to": b.batch, "k": k}],
                {}, base[1] / lat, {}, arrival,
                [f"concurrency solved by Little's law: {base[0]:.1f} sequences without speculation, {n:.1f} with"])
