"""The decision under the acceptance band: the chosen policy's gain at the prior's low and high acceptance,
and what the optimiser would choose there instead."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from specsim.acceptance.chain import AcceptanceProfile
from specsim.drafts.draft import Draft
from specsim.plan.candidates import evaluate_draft
from specsim.plan.decide import decide, objective_total
from specsim.plan.result import BandCase, BandChoice, BandDecision, Threshold
from specsim.scenario.scenario import Scenario
from specsim.step.bands import spread_for, step_bands
from specsim.step.evaluate import StepCalibration, Target
from specsim.step.policy import Config


def band_decision(s: Scenario, t: Target, drafts: list[Draft], best: Draft, choice: list[int], batch: np.ndarray,
                  ctx: np.ndarray, share: np.ndarray, owner: np.ndarray, base_total: float, central_gain: float,
                  speculating: bool) -> BandDecision | None:
    """The plan under the acceptance band: the chosen policy's gain with low / high acceptance, and what
    the optimiser would choose there. None when no prior is involved (all acceptance measured)."""
    if not any(d.prior is not None for d in drafts):
        return None

    def gain(total: float) -> float:
        return total / base_total if s.objective != "latency" else base_total / total

    def case(which: str) -> BandCase:
        band_drafts = [d.band(which) for d in drafts]
        ev = evaluate_draft(t, band_drafts[drafts.index(best)], s.max_k, batch, ctx)
        kept = objective_total(s, ev, choice, owner, share)
        dec = decide(s, t, band_drafts, batch, ctx, share, owner)
        on = any(dec.evs[dec.best].configs[c].k > 0 for c in dec.choices[dec.best])
        return BandCase(gain(kept), gain(dec.totals[dec.best]), drafts[dec.best].method if on else "none",
                        drafts[dec.best].label,
                        {d.label: d.band(which).tokens_per_step(4) for d in drafts if d.prior is not None})

    def flips(ds: list[Draft]) -> tuple[bool, BandCase]:
        ev = evaluate_draft(t, ds[drafts.index(best)], s.max_k, batch, ctx)
        kept = gain(objective_total(s, ev, choice, owner, share))
        dec = decide(s, t, ds, batch, ctx, share, owner)
        on = any(dec.evs[dec.best].configs[c].k > 0 for c in dec.choices[dec.best])
        method = drafts[dec.best].method if on else "none"
        c = BandCase(kept, gain(dec.totals[dec.best]), method, drafts[dec.best].label)
        return method != central.method or (speculating and kept < 1.0), c

    central = BandChoice(central_gain, best.method if speculating else "none", best.label)
    low, high = case("low"), case("high")
    is_robust = robust(central, (low, high), speculating)
    ends = [which for which, c in (("low", low), ("high", high)) if not robust(central, (c,), speculating)]
    return BandDecision(central, low, high, is_robust,
                        {d.label: d.tokens_per_step(4) for d in drafts if d.prior is not None},
                        tuple(threshold(drafts, best, which, flips) for which in ends))


def between(d: Draft, which: str, theta: float) -> Draft:
    """`d` with its conditional rates `theta` of the way from the prior's central to its `which` end (itself
    without a prior)."""
    if d.prior is None or theta == 0.0:
        return d
    mid, end = np.asarray(d.prior.central.conditional_rates), np.asarray(getattr(d.prior, which).conditional_rates)
    rates = tuple(float(x) for x in mid + theta * (end - mid))
    return dataclasses.replace(d, acceptance=AcceptanceProfile(rates, None, d.acceptance.source, d.acceptance.note,
                                                               True))


def threshold(drafts: list[Draft], best: Draft, which: str,
              flips: Callable[[list[Draft]], tuple[bool, BandCase]]) -> Threshold:
    """Where between the band's centre and its `which` end the decision changes (bisection, 8 halvings: the
    acceptance moving every prior draft together), as the chosen draft's tokens per step at k = 4 there, and what
    the plan would be beyond it."""
    lo, hi = 0.0, 1.0
    _, beyond = flips([between(d, which, 1.0) for d in drafts])
    for _ in range(8):
        mid = 0.5 * (lo + hi)
        flipped, case = flips([between(d, which, mid) for d in drafts])
        if flipped:
            hi, beyond = mid, case
        else:
            lo = mid
    return Threshold(which, best.label, float(between(best, which, hi).tokens_per_step(4)), beyond)


def robust(central: BandChoice, cases: tuple[BandCase, ...], speculating: bool) -> bool:
    """Neither end of the band flips the method, nor makes the chosen (speculating) policy lose."""
    return not any(c.method != central.method or (speculating and c.gain < 1.0) for c in cases)


def best_curve_band(d: Draft, configs: list[Config], speed: np.ndarray, tau: np.ndarray, spec: list[int],
                    engine: str, calibration: StepCalibration | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A draft's best speculative configuration per batch (`speed`: speedup [config, batch], NaN where it does not
    fit; `tau`: each configuration's tokens per step; `spec`: the speculative configurations) and that curve's 80%
    band: the best configuration's acceptance band and the engine's speedup spread (step/bands.py)."""
    masked = np.where(np.isnan(speed[spec]), -np.inf, speed[spec])
    best = masked.max(axis=0)
    best = np.where(np.isfinite(best), best, np.nan)  # nothing speculative fits: a gap
    pick = np.asarray(spec)[np.argmax(masked, axis=0)]
    ends = np.array([d.tau_band(configs[i].k, float(tau[i]), exact=not configs[i].is_tree) for i in pick])
    b = step_bands({"tokens_per_step": tau[pick], "speedup": best}, ends[:, 0], ends[:, 1], engine,
                   spread_for(engine, calibration), banded={"speedup": (1, "speedup")})
    return best, b.low["speedup"], b.high["speedup"]


def crossover_band(grid: np.ndarray, plain_fits: np.ndarray, best: np.ndarray, low: np.ndarray,
                   high: np.ndarray) -> tuple[int | None, int | None]:
    """Where the best curve stops paying at its band's ends: the first batch, past the first where the central
    curve pays, at which the band's low end (the earliest it may stop) and its high end (the latest) fall below 1;
    None: not within the grid."""
    pays = np.flatnonzero(best >= 1.0)
    if not pays.size:
        return None, None

    def first_below(curve: np.ndarray) -> int | None:
        # a stop: plain decoding beats it, or only plain decoding fits (as the crossover itself counts it)
        stops = (curve < 1.0) | (np.isnan(curve) & plain_fits)
        after = np.flatnonzero((np.arange(len(grid)) > pays[0]) & stops)
        return int(grid[after[0]]) if after.size else None

    return first_below(low), first_below(high)
