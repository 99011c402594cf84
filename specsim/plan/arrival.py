"""Arrival-rate loads: Little's law with speculation in the loop, solved as a fixed point for every
candidate, and the plan that serves the rate at the lowest per-token latency."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np

from specsim.cost.forward import forward_time_s
from specsim.drafts.build import make_draft
from specsim.drafts.draft import Draft
from specsim.errors import SpecsimError
from specsim.plan.bands import robust
from specsim.plan.candidates import candidate_configs, evaluate_draft, with_depth
from specsim.plan.decide import prior_notes, require_fit
from specsim.plan.result import (
    FIELDS,
    ArrivalResult,
    BandCase,
    BandChoice,
    BandDecision,
    BucketPlan,
    Plan,
    PointMetrics,
)
from specsim.scenario.scenario import Bucket, Scenario
from specsim.step.evaluate import Target, config_metrics, fits, step_arrays
from specsim.step.policy import Config, Policy, Segment

FloatLike = TypeVar("FloatLike", float, np.ndarray)


def prefill_time_s(t: Target, prompt_tokens: int) -> float:
    """One request's prefill: its prompt in one pass, attending to half of it on average."""
    return float(forward_time_s(t.hardware, t.model, 1, prompt_tokens, prompt_tokens / 2, t.par, t.weight_dtype,
                                t.kv_dtype))


def time_in_batch_s(prefill_s: float, output_tokens: float, tpot_s: FloatLike) -> FloatLike:
    """W of Little's law (concurrency N = arrival rate x W): a request stays in the batch for its prefill and
    its decode, output tokens x the time per output token."""
    return prefill_s + output_tokens * tpot_s


def solve_concurrency(t: Target, d: Draft, k: int, rate_rps: float, prompt: int, output: int,
                      max_batch: float = 4096.0) -> tuple[float, float] | None:
    """Little's law with speculation in the loop: N = rate x (prefill + output x ms_per_token(N)).

    A request stays in the batch for its prefill and its decode; speculation shortens the decode,
    which lowers N, which changes the step time. g(N) = rate*T(N) - N changes sign once (T grows
    slowly with N); its root is bracketed on a geometric grid of N (one vectorised call), then
    refined by bisection on the exact cost. Returns (N, ms_per_token at N) or None if the load
    cannot be served below max_batch.
    """
    prefill_s = prefill_time_s(t, prompt)
    ctx = prompt + output / 2
    grid = np.geomspace(1.0, max_batch, 128)
    tpot_s = config_metrics(t, d, k, grid, ctx).ms_per_token / 1e3
    g = rate_rps * time_in_batch_s(prefill_s, output, tpot_s) - grid
    if g[-1] > 0:
        return None
    j = int(np.argmax(g <= 0))
    if j == 0:
        return 1.0, float(tpot_s[0] * 1e3)
    # the bracket spans 6.8% of N: a second vectorised call on 64 points inside it, then linear
    # interpolation of g between the two points around its sign change (g is smooth there), 1e-4 of N
    fine = np.linspace(grid[j - 1], grid[j], 64)
    tpot_f = config_metrics(t, d, k, fine, ctx).ms_per_token / 1e3
    gf = rate_rps * time_in_batch_s(prefill_s, output, tpot_f) - fine
    i = max(int(np.argmax(gf <= 0)), 1)
    w = gf[i - 1] / (gf[i - 1] - gf[i]) if gf[i - 1] != gf[i] else 1.0
    w = float(np.clip(w, 0.0, 1.0))
    n = float(fine[i - 1] + w * (fine[i] - fine[i - 1]))
    return n, float((tpot_f[i - 1] + w * (tpot_f[i] - tpot_f[i - 1])) * 1e3)  # tpot is smooth in N there


def solve_concurrency_chains(t: Target, d: Draft, ks: Sequence[int], rate_rps: float, prompt: int, output: int,
                             max_batch: float = 4096.0) -> list[tuple[float, float] | None]:
    """`solve_concurrency` for several chain lengths of one draft at once: the same bracket-then-refine
    fixed point, each grid one vectorised `step_arrays` call over (k, N)."""
    prefill_s = prefill_time_s(t, prompt)
    ctx = prompt + output / 2
    kk = np.asarray(ks, dtype=float)[:, None]
    tps = np.array([d.tokens_per_step(int(k)) if k > 0 else 1.0 for k in ks], dtype=float)[:, None]
    grid = np.geomspace(1.0, max_batch, 128)[None, :]
    tpot = np.broadcast_to(step_arrays(t, d, kk, grid, ctx, tps).ms_per_token / 1e3, (len(ks), grid.shape[1]))
    g = rate_rps * time_in_batch_s(prefill_s, output, tpot) - grid
    j = np.argmax(g <= 0, axis=1)
    lo = grid[0, np.maximum(j - 1, 0)][:, None]
    hi = grid[0, j][:, None]
    fine = lo + (hi - lo) * np.linspace(0.0, 1.0, 64)[None, :]
    tpot_f = np.broadcast_to(step_arrays(t, d, kk, fine, ctx, tps).ms_per_token / 1e3, fine.shape)
    gf = rate_rps * time_in_batch_s(prefill_s, output, tpot_f) - fine
    out: list[tuple[float, float] | None] = []
    for r in range(len(ks)):
        if g[r, -1] > 0:
            out.append(None)
        elif j[r] == 0:
            out.append((1.0, float(tpot[r, 0] * 1e3)))
        else:
            i = max(int(np.argmax(gf[r] <= 0)), 1)
            w = gf[r, i - 1] / (gf[r, i - 1] - gf[r, i]) if gf[r, i - 1] != gf[r, i] else 1.0
            w = float(np.clip(w, 0.0, 1.0))
            out.append((float(fine[r, i - 1] + w * (fine[r, i] - fine[r, i - 1])),
                        float((tpot_f[r, i - 1] + w * (tpot_f[r, i] - tpot_f[r, i - 1])) * 1e3)))
    return out


def _arrival_candidates(t: Target, d: Draft, max_k: int, batch: float, ctx: float, keep_trees: int = 4
                        ) -> list[Config]:
    """Chains of every k and the few trees fastest per token at a representative batch (solving Little's
    law for every tree shape would cost a fixed point each)."""
    d = with_depth(d, max_k)
    cfgs = candidate_configs(d, max_k)
    chains = [c for c in cfgs if not c.is_tree]
    trees = [c for c in cfgs if c.is_tree]
    if not trees:
        return chains
    ev = evaluate_draft(t, d, max_k, np.array([batch]), np.array([ctx]), trees)
    ms = np.where(ev.feasible[:, 0], ev.values["ms_per_token"][:, 0], np.inf)
    best = [trees[i] for i in np.argsort(ms)[:keep_trees] if np.isfinite(ms[i])]
    return chains + best


def _arrival_best(s: Scenario, t: Target, drafts: list[Draft], rep_batch: float,
                  only: dict[str, list[Config]] | None = None) -> list[tuple[float, Draft, Config, float]]:
    """(ms/token, draft, configuration, concurrency) for every candidate that serves the rate in memory;
    `only` restricts each draft to given configurations (the band cases re-solve the central finalists)."""
    a = s.arrival
    assert a is not None
    ctx = a.prompt_tokens + a.output_tokens / 2
    results = []
    for d in drafts:
        dd = with_depth(d, s.max_k)
        cfgs = only.get(d.label, []) if only is not None else _arrival_candidates(t, dd, s.max_k, rep_batch, ctx)
        chains = [c for c in cfgs if not c.is_tree]
        sols = dict(zip((c.k for c in chains), solve_concurrency_chains(
            t, chains[0].draft(dd), [c.k for c in chains], a.rate_rps, a.prompt_tokens, a.output_tokens)
            if chains else [], strict=True))
        for cfg in cfgs:
            dc = cfg.draft(dd)
            sol = (sols[cfg.k] if not cfg.is_tree else
                   solve_concurrency(t, dc, cfg.k, a.rate_rps, a.prompt_tokens, a.output_tokens))
            if sol is None or not bool(fits(t, dc, cfg.k, max(sol[0], 1.0), ctx)):
                continue
            results.append((sol[1], d, cfg, sol[0]))
    return results


def plan_arrival(s: Scenario, t: Target, detail: bool = True) -> Plan:
    """The configuration serving the scenario's arrival rate at the lowest per-token latency, each candidate's
    concurrency solved by Little's law; the headline compares the same arrival rate."""
    a = s.arrival
    assert a is not None
    none = make_draft("none", s.model)
    ctx = a.prompt_tokens + a.output_tokens / 2
    base = solve_concurrency(t, none, 0, a.rate_rps, a.prompt_tokens, a.output_tokens)
    require_fit(s, t, np.array([1.0 if base is None else max(base[0], 1.0)]), np.array([ctx]),
                [f"{a.rate_rps:g} requests/s (concurrency {1.0 if base is None else base[0]:.0f}, context {ctx:.0f})"])
    if base is None:
        raise SpecsimError(f"{s.path}: {a.rate_rps:g} requests/s exceed what one replica serves even at batch 4096")
    drafts = [with_depth(d, s.max_k) for d in s.drafts]
    rep = max(1.0, base[0] / 4.0)
    results = _arrival_best(s, t, drafts, rep)
    if not results:
        raise SpecsimError(f"{s.path}: no configuration serves {a.rate_rps:g} requests/s within memory on {s.where}"
                           f": lower the rate, shorten prompts/outputs, raise tp or use fp8")
    lat, d, cfg, n = min(results, key=lambda r: r[0])
    dd = with_depth(d, s.max_k)
    # The bucket's figures are those at the integer batch nearest the fixed point (what
    # `specsim evaluate --batch` reproduces); the fixed point itself is in `arrival`.
    b = Bucket("arrival", 1.0, max(1, round(n)), ((round(ctx), 1.0),))
    row = _point(t, cfg.draft(dd), cfg.k, b.batch, round(ctx))
    on = cfg.k > 0
    bp = BucketPlan(b, d.label if on else "none", d.method if on else "none", cfg.k,
                    (row,), (_point(t, none, 0, max(1, round(base[0])), round(ctx)),), True,
                    cfg.topk if cfg.is_tree else 1, int(cfg.nodes) if cfg.is_tree and cfg.nodes is not None else None)
    gain_rate = base[1] / lat
    arrival = ArrivalResult(a.rate_rps, n, base[0], lat, base[1], gain_rate, float(row.speedup))
    notes = (f"concurrency solved by Little's law: {base[0]:.1f} sequences without speculation, {n:.1f} with; "
             f"the headline compares the same arrival rate ({gain_rate:.2f}x per token); at the same batch "
             f"({b.batch}) speculation is {row.speedup:.2f}x", *prior_notes(drafts, d))
    band = None
    if detail and any(x.prior is not None for x in drafts):
        central = BandChoice(gain_rate, d.method if on else "none", d.label)
        band = _arrival_band(s, t, drafts, results, central, (d, cfg), base, rep)
    policy = Policy.bands([Segment(1, b.batch, cfg, cfg.verify_tokens(dd))])
    return Plan(s, d.method if on else "none", d.label, (bp,), policy, {}, gain_rate, {}, arrival, notes, band, None,
                policy if not cfg.is_tree else None)


def _point(t: Target, d: Draft, k: int, batch: int, context: int) -> PointMetrics:
    m = config_metrics(t, d, k, batch, context).as_dict()
    return PointMetrics(batch, context, 1.0, *(float(m[f]) for f in FIELDS))


def _arrival_band(s: Scenario, t: Target, drafts: list[Draft], results: list[tuple[float, Draft, Config, float]],
                  central: BandChoice, chosen: tuple[Draft, Config], base: tuple[float, float], rep: float
                  ) -> BandDecision:
    """The arrival plan at the band's ends: each draft's three best configurations at the central acceptance
    are re-solved there."""
    a = s.arrival
    assert a is not None
    d, cfg = chosen
    none = make_draft("none", s.model)
    finalists: dict[str, list[Config]] = {}
    for _, dr, c_, _ in sorted(results, key=lambda r: r[0]):
        if len(finalists.setdefault(dr.label, [])) < 3:
            finalists[dr.label].append(c_)

    def case(which: str) -> BandCase:
        bd = [x.band(which) for x in drafts]
        kept = solve_concurrency(t, cfg.draft(with_depth(bd[drafts.index(d)], s.max_k)), cfg.k, a.rate_rps,
                                 a.prompt_tokens, a.output_tokens)
        res = _arrival_best(s, t, bd, rep, finalists)
        blat, bdraft, bcfg, _ = min(res, key=lambda r: r[0]) if res else (base[1], none, Config(0), base[0])
        return BandCase(base[1] / kept[1] if kept is not None else 0.0, base[1] / blat,
                        bdraft.method if bcfg.k > 0 else "none", bdraft.label)

    low, high = case("low"), case("high")
    return BandDecision(central, low, high, robust(central, (low, high), cfg.k > 0))
