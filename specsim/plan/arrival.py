"""Arrival-rate loads: Little's law with speculation in the loop, solved as a fixed point for every
candidate, and the plan that serves the rate at the lowest per-token latency.

One model of a request, shared with the serving simulation: its prefill is one pass of the prompt as the engine
runs it (`prefill_pass_s`, the simulator's `advise.planner.PlannerCost.prefill_s`), and the GPU time every
request's prefill takes is taken from the decode steps (`time_in_batch_s`): at rate r each second spends
r x prefill on prompts, so the decode steps, and every token they emit, are stretched by 1 / (1 - r x prefill).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar, cast

import numpy as np

from specsim.drafts.build import make_draft
from specsim.drafts.draft import Draft
from specsim.engines.passes import pass_time_s
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


def prefill_pass_s(t: Target, tokens: np.ndarray, mean_context: np.ndarray) -> np.ndarray:
    """One pass of `tokens` prompt tokens over `mean_context` in the target's layout as its engine runs it
    (`engines.passes.pass_time_s`); 0 for no tokens. Batch 1, but under DP attention the prompts being prefilled
    spread over the groups as the decodes do (each group's scheduler admits its own requests): dp sequences of
    tokens / dp each."""
    tok = np.asarray(tokens, dtype=np.float64)
    ctx = np.maximum(np.asarray(mean_context, dtype=np.float64), 0.0)
    dp = 1.0 if t.layout is None else float(t.layout.dp)
    s = pass_time_s(t.engine, t.hardware, t.model, dp, np.maximum(tok / dp, 1.0), ctx, t.par, t.weight_dtype,
                    t.kv_dtype)
    return np.asarray(np.where(tok > 0, s, 0.0), dtype=np.float64)


def prefill_time_s(t: Target, prompt_tokens: int) -> float:
    """One request's prefill: its prompt in one pass, attending to half of it on average (`prefill_pass_s`)."""
    return float(prefill_pass_s(t, np.asarray(float(prompt_tokens)), np.asarray(prompt_tokens / 2)))


def time_in_batch_s(prefill_s: float, output_tokens: float, tpot_s: FloatLike, rate_rps: float | np.ndarray
                    ) -> FloatLike:
    """W of Little's law (concurrency N = arrival rate x W): a request stays in the batch for its prefill and
    its decode, output tokens x the decode's time per token as a request sees it (`decode_tpot_s`)."""
    return prefill_s + output_tokens * decode_tpot_s(tpot_s, rate_rps, prefill_s)


def decode_tpot_s(tpot_s: FloatLike, rate_rps: float | np.ndarray, prefill_s: float) -> FloatLike:
    """The time per output token a request sees: the decode step's, stretched by 1 / (1 - rate x prefill), since
    the other requests' prompts take that share of the GPU between (or, chunked, inside) the decode steps; inf
    where the prompts alone fill the GPU (module docstring). Elementwise over arrays."""
    free = 1.0 - np.asarray(rate_rps, dtype=np.float64) * prefill_s
    out = np.where(free > 0, np.asarray(tpot_s, dtype=np.float64) / np.where(free > 0, free, 1.0), math.inf)
    return cast(FloatLike, out if out.ndim else float(out))


def rate_at_concurrency(n: np.ndarray, prefill_s: float, output_tokens: float, tpot_s: np.ndarray) -> np.ndarray:
    """The arrival rate r at which N requests are in flight, inverting N = r (p + o t / (1 - r p)) for r < 1 / p:
    p^2 r^2 - (p + o t + N p) r + N = 0, its smaller root (p = prefill, o = output tokens, t = the decode step's
    time per token at N)."""
    p, ot = float(prefill_s), output_tokens * np.asarray(tpot_s, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    if p <= 0:
        return np.asarray(n / ot, dtype=np.float64)
    b = p + ot + n * p
    return np.asarray((b - np.sqrt(np.maximum(b * b - 4 * p * p * n, 0.0))) / (2 * p * p), dtype=np.float64)


def solve_concurrency(t: Target, d: Draft, k: int, rate_rps: float, prompt: int, output: int,
                      max_batch: float = 4096.0) -> tuple[float, float] | None:
    """Little's law with speculation in the loop: N = rate x (prefill + output x ms_per_token(N)), the time per
    token stretched by the prompts' share of the GPU (`time_in_batch_s`).

    A request stays in the batch for its prefill and its decode; speculation shortens the decode,
    which lowers N, which changes the step time. g(N) = rate*T(N) - N changes sign once (T grows
    slowly with N); its root is bracketed on a geometric grid of N (one vectorised call), then
    refined by bisection on the exact cost. Returns (N, ms_per_token a request sees at N, prefill
    included) or None if the load cannot be served below max_batch.
    """
    prefill_s = prefill_time_s(t, prompt)
    ctx = prompt + output / 2
    grid = np.geomspace(1.0, max_batch, 128)
    tpot_s = config_metrics(t, d, k, grid, ctx).ms_per_token / 1e3
    g = rate_rps * time_in_batch_s(prefill_s, output, tpot_s, rate_rps) - grid
    if g[-1] > 0:
        return None
    j = int(np.argmax(g <= 0))
    if j == 0:
        return 1.0, float(decode_tpot_s(tpot_s[0], rate_rps, prefill_s) * 1e3)
    # the bracket spans 6.8% of N: a second vectorised call on 64 points inside it, then linear
    # interpolation of g between the two points around its sign change (g is smooth there), 1e-4 of N
    fine = np.linspace(grid[j - 1], grid[j], 64)
    tpot_f = config_metrics(t, d, k, fine, ctx).ms_per_token / 1e3
    gf = rate_rps * time_in_batch_s(prefill_s, output, tpot_f, rate_rps) - fine
    i = max(int(np.argmax(gf <= 0)), 1)
    w = gf[i - 1] / (gf[i - 1] - gf[i]) if gf[i - 1] != gf[i] else 1.0
    w = float(np.clip(w, 0.0, 1.0))
    n = float(fine[i - 1] + w * (fine[i] - fine[i - 1]))
    tpot = float(tpot_f[i - 1] + w * (tpot_f[i] - tpot_f[i - 1]))  # tpot is smooth in N there
    return n, float(decode_tpot_s(tpot, rate_rps, prefill_s) * 1e3)


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
    g = rate_rps * time_in_batch_s(prefill_s, output, tpot, rate_rps) - grid
    j = np.argmax(g <= 0, axis=1)
    lo = grid[0, np.maximum(j - 1, 0)][:, None]
    hi = grid[0, j][:, None]
    fine = lo + (hi - lo) * np.linspace(0.0, 1.0, 64)[None, :]
    tpot_f = np.broadcast_to(step_arrays(t, d, kk, fine, ctx, tps).ms_per_token / 1e3, fine.shape)
    gf = rate_rps * time_in_batch_s(prefill_s, output, tpot_f, rate_rps) - fine
    stretch = decode_tpot_s(1.0, rate_rps, prefill_s)  # the prompts' share of the GPU (module docstring)
    out: list[tuple[float, float] | None] = []
    for r in range(len(ks)):
        if g[r, -1] > 0:
            out.append(None)
        elif j[r] == 0:
            out.append((1.0, float(tpot[r, 0] * stretch * 1e3)))
        else:
            i = max(int(np.argmax(gf[r] <= 0)), 1)
            w = gf[r, i - 1] / (gf[r, i - 1] - gf[r, i]) if gf[r, i - 1] != gf[r, i] else 1.0
            w = float(np.clip(w, 0.0, 1.0))
            out.append((float(fine[r, i - 1] + w * (fine[r, i] - fine[r, i - 1])),
                        float((tpot_f[r, i - 1] + w * (tpot_f[r, i] - tpot_f[r, i - 1])) * stretch * 1e3)))
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
    base = _baseline(s, t)
    drafts = [with_depth(d, s.max_k) for d in s.drafts]
    rep = max(1.0, base[0] / 4.0)
    results = _arrival_best(s, t, drafts, rep)
    if not results:
        raise SpecsimError(f"{s.path}: no configuration serves {a.rate_rps:g} requests/s within memory on {s.where}"
                           f": lower the rate, shorten prompts/outputs, raise tp or use fp8")
    lat, d, cfg, n = min(results, key=lambda r: r[0])
    bp, arrival, policy = arrival_answer(s, t, d, cfg, (n, lat), base)
    on = cfg.k > 0
    notes, details = prior_notes(drafts, d) if s.max_k > 0 else ([], [])
    band = None
    if detail and s.max_k > 0 and any(x.prior is not None for x in drafts):
        central = BandChoice(arrival.gain_same_rate, d.method if on else "none", d.label)
        band = _arrival_band(s, t, drafts, results, central, (d, cfg), base, rep)
    return Plan(s, d.method if on else "none", d.label, (bp,), policy, {}, arrival.gain_same_rate, {}, arrival,
                tuple(notes), band, None, policy if not cfg.is_tree else None, details=tuple(details))


def _baseline(s: Scenario, t: Target) -> tuple[float, float]:
    """Plain decoding at the scenario's rate: (concurrency, ms per token); SpecsimError where it does not fit or
    one replica cannot serve the rate."""
    a = s.arrival
    assert a is not None
    ctx = a.prompt_tokens + a.output_tokens / 2
    base = solve_concurrency(t, make_draft("none", s.model), 0, a.rate_rps, a.prompt_tokens, a.output_tokens)
    require_fit(s, t, np.array([1.0 if base is None else max(base[0], 1.0)]), np.array([ctx]),
                [f"{a.rate_rps:g} requests/s (concurrency {1.0 if base is None else base[0]:.0f}, context {ctx:.0f})"])
    if base is None:
        raise SpecsimError(f"{s.path}: {a.rate_rps:g} requests/s exceed what one replica serves even at batch 4096 "
                           "(prefill included)")
    return base


def arrival_answer(s: Scenario, t: Target, d: Draft, cfg: Config, sol: tuple[float, float],
                   base: tuple[float, float]) -> tuple[BucketPlan, ArrivalResult, Policy]:
    """The arrival plan's answer for draft d in configuration cfg at its Little's-law fixed point sol = (N, ms per
    token): the bucket row (the step's figures at the integer batch nearest N, what `specsim evaluate --batch`
    reproduces), the same-rate comparison with plain decoding (base) and the one-band policy up to that batch."""
    a = s.arrival
    assert a is not None
    ctx = round(a.prompt_tokens + a.output_tokens / 2)
    n, lat = sol
    dd = with_depth(d, s.max_k)
    b = Bucket("arrival", 1.0, max(1, round(n)), ((ctx, 1.0),))
    row = _point(t, cfg.draft(dd), cfg.k, b.batch, ctx)
    on = cfg.k > 0
    bp = BucketPlan(b, d.label if on else "none", d.method if on else "none", cfg.k,
                    (row,), (_point(t, make_draft("none", s.model), 0, max(1, round(base[0])), ctx),), True,
                    cfg.topk if cfg.is_tree else 1, int(cfg.nodes) if cfg.is_tree and cfg.nodes is not None else None)
    arrival = ArrivalResult(a.rate_rps, n, base[0], lat, base[1], base[1] / lat, float(row.speedup))
    return bp, arrival, Policy.bands([Segment(1, b.batch, cfg, cfg.verify_tokens(dd))])


def arrival_under_policy(s: Scenario, t: Target, d: Draft, policy: Policy) -> tuple[BucketPlan, ArrivalResult]:
    """The arrival plan's answer when `policy` (chain lengths by batch) runs: the k the policy gives at the
    concurrency that k itself produces (Little's law solved per k until the policy's k at the fixed point is the
    k solved for; a policy that speculates nowhere there gives plain decoding)."""
    a = s.arrival
    assert a is not None
    base = _baseline(s, t)
    dd = with_depth(d, max(s.max_k, policy.max_k, 1))
    k = max(policy.k_for_batch(1), 0)
    sol: tuple[float, float] | None = base
    for _ in range(8):  # k never rises with batch in a planner's policy: this settles in a step or two
        sol = base if k == 0 else solve_concurrency(t, dd, k, a.rate_rps, a.prompt_tokens, a.output_tokens)
        k_there = 0 if sol is None else max(policy.k_for_batch(max(1, round(sol[0]))), 0)
        if k_there == k:
            break
        k = k_there
    if sol is None:
        raise SpecsimError(f"{s.path}: policy {policy.label} does not serve {a.rate_rps:g} requests/s on one replica")
    bp, arrival, _ = arrival_answer(s, t, dd, Config(k), sol, base)
    return bp, arrival


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
