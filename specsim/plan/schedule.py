"""The policy over load: the configuration per batch that never grows with load (dynamic programming over
the batch grid), merged into few bands, laid out as contiguous bands; and where each draft pays."""

from __future__ import annotations

import dataclasses

import numpy as np

from specsim.drafts.draft import Draft
from specsim.plan.candidates import TIE, Evaluated, evaluate_draft, pick_k, score_configs
from specsim.scenario.scenario import Scenario
from specsim.step.evaluate import Target
from specsim.step.policy import Config, Policy, Segment


def grid_scores(t: Target, d: Draft, s: Scenario, grid: np.ndarray,
                 contexts: list[tuple[tuple[int, float], ...]]) -> tuple[np.ndarray, Evaluated, np.ndarray]:
    """Objective score [config, point] of draft d at each grid batch, each point with its own contexts."""
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
    """The configuration per grid point (batch ascending) that never grows with batch and loses the least.

    Engines schedule speculation by batch size and expect it to shrink with load (vLLM
    num_speculative_tokens_per_batch_size, TensorRT-LLM draft_len_schedule); configurations are
    ordered by verification tokens. Tile steps make the unconstrained best zig-zag by a percent or
    two; dynamic programming over (point, config) picks the non-increasing sequence with the largest
    weighted sum of relative scores (1 = the point's best), with a slight preference for smaller
    configurations. Points where nothing fits in memory get -1.
    """
    n_k, n = score.shape
    best = score.max(axis=0)
    ok = np.isfinite(best)
    with np.errstate(invalid="ignore"):
        rel = 1.0 - (best - score) / np.maximum(np.abs(best), 1e-300) - 1e-4 * np.arange(n_k)[:, None] / max(1, n_k / 8)
    rel = np.where(np.isfinite(score), rel, -1e9)
    idx = np.flatnonzero(ok)
    out = np.full(n, -1)
    if not idx.size:
        return out
    dp = np.zeros((len(idx), n_k))
    arg = np.zeros((len(idx), n_k), dtype=int)
    dp[0] = weight[idx[0]] * rel[:, idx[0]]
    for i in range(1, len(idx)):
        # best predecessor with config' >= config: suffix maximum of the previous row
        prev = dp[i - 1]
        suf_arg = np.array([k + int(np.argmax(prev[k:])) for k in range(n_k)])
        dp[i] = weight[idx[i]] * rel[:, idx[i]] + prev[suf_arg]
        arg[i] = suf_arg
    k = int(np.argmax(dp[-1]))
    for i in range(len(idx) - 1, -1, -1):
        out[idx[i]] = k
        k = arg[i, k]
    return out


def merge_runs(score: np.ndarray, schedule: np.ndarray, tol: float = TIE) -> np.ndarray:
    """Fewer distinct configurations: a run of grid points takes a neighbouring run's configuration when
    that loses at most ``tol`` (relative score) at every point of the run. Engines switch configurations
    by batch band (SGLang: one server per band), so a tree that wins by 0.3% at three batch sizes is
    not worth a band. The schedule stays non-increasing (a run only takes a neighbour's value)."""
    out = schedule.copy()
    changed = True
    while changed:
        changed = False
        runs: list[tuple[int, list[int]]] = []
        for j, c in enumerate(out):
            if runs and runs[-1][0] == c:
                runs[-1][1].append(j)
            else:
                runs.append((c, [j]))
        if len(runs) < 2:
            break
        for r, (c, pts) in enumerate(runs):
            if c < 0:
                continue
            for nb in (r + 1, r - 1):  # prefer the smaller (higher-batch) neighbour
                if not 0 <= nb < len(runs) or runs[nb][0] < 0:
                    continue
                alt = runs[nb][0]
                base = score[c, pts]
                loss = (base - score[alt, pts]) / np.maximum(np.abs(base), 1e-300)
                if np.all(np.isfinite(score[alt, pts])) and np.all(loss <= tol):
                    out[pts] = alt
                    changed = True
                    break
            if changed:
                break
    return out


def bands_of(grid: np.ndarray, choice: np.ndarray, configs: list[Config], d: Draft) -> Policy:
    """The schedule as contiguous batch bands: a grid point's configuration holds from its batch up to the
    next point's, so every batch size from 1 to the grid's top belongs to exactly one band (an engine
    config must cover every batch it can see)."""
    segments: list[Segment] = []
    for b, c in zip(grid, choice, strict=True):
        cfg = configs[int(c)] if c >= 0 else None
        seg = Segment(int(b), int(b), cfg, cfg.verify_tokens(d) if cfg is not None else 1)
        if segments and segments[-1].same_config(seg):
            segments[-1] = dataclasses.replace(segments[-1], batch_to=int(b))
        else:
            if segments:
                segments[-1] = dataclasses.replace(segments[-1], batch_to=int(b) - 1)
            segments.append(seg)
    return Policy.bands(segments)


def batch_ranges(grid: np.ndarray, mask: np.ndarray) -> list[tuple[int, int]]:
    """The grid points where `mask` holds as inclusive batch ranges, each reaching up to the batch before
    the next grid point (the last to the grid's top)."""
    out: list[tuple[int, int]] = []
    for j, b in enumerate(grid):
        if not mask[j]:
            continue
        end = int(grid[j + 1]) - 1 if j + 1 < len(grid) else int(b)
        if out and j > 0 and mask[j - 1]:
            out[-1] = (out[-1][0], end)
        else:
            out.append((int(b), end))
    return out


def batch_grid(s: Scenario) -> np.ndarray:
    top = max([b.batch for b in s.buckets] + [64]) * 2
    return np.unique(np.concatenate([np.round(np.geomspace(1, top, 48)), [b.batch for b in s.buckets]]).astype(int))


def pooled_contexts(s: Scenario) -> tuple[tuple[int, float], ...]:
    pooled: dict[int, float] = {}
    for b in s.buckets:
        for c, w in b.contexts:
            pooled[c] = pooled.get(c, 0.0) + w * b.weight
    return tuple(sorted(pooled.items()))


def pays_and_crossover(t: Target, d: Draft, s: Scenario) -> tuple[list[tuple[int, int]], int | None,
                                                                   tuple[int | None, int | None]]:
    """Where d pays and where it first stops, over the batch grid with contexts pooled over the load:
    (batch ranges where d's best configuration beats plain decoding, the first batch after one where it
    paid at which plain decoding is best; None if it never stops within the grid; that batch at the 80% band's
    low and high ends: plan/bands.crossover_band)."""
    from specsim.plan.bands import best_curve_band, crossover_band

    grid = batch_grid(s)
    score, ev, _ = grid_scores(t, d, s, grid, [pooled_contexts(s)] * len(grid))
    pick = np.array([pick_k(score[:, j]) for j in range(len(grid))])
    pays = batch_ranges(grid, pick > 0)
    after = grid[(pick == 0) & (np.arange(len(grid)) > (np.flatnonzero(pick > 0)[0] if pays else -1))]
    spec = [i for i, c in enumerate(ev.configs) if c.k > 0]
    band: tuple[int | None, int | None] = (None, None)
    if spec:
        w = np.array([wt for _, wt in pooled_contexts(s)])  # the points are grid x contexts, in that order
        per = (len(ev.configs), len(grid), len(w))
        speed = np.where(ev.feasible, ev.values["speedup"], np.nan).reshape(per) @ w
        tau = ev.values["tokens_per_step"][:, 0]
        plain_fits = ev.feasible[0].reshape(per[1:]).all(-1)
        curve = best_curve_band(d, ev.configs, speed, tau, spec, s.engine.name, s.calibration)
        band = crossover_band(grid, plain_fits, *curve)
    return pays, (int(after[0]) if after.size else None), band
