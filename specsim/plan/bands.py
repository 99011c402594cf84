"""The decision under the acceptance band: the chosen policy's gain at the prior's low and high acceptance,
and what the optimiser would choose there instead."""

from __future__ import annotations

import numpy as np

from specsim.drafts.draft import Draft
from specsim.plan.candidates import evaluate_draft
from specsim.plan.decide import decide, objective_total
from specsim.plan.result import BandCase, BandChoice, BandDecision
from specsim.scenario.scenario import Scenario
from specsim.step.evaluate import Target


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

    central = BandChoice(central_gain, best.method if speculating else "none", best.label)
    low, high = case("low"), case("high")
    return BandDecision(central, low, high, robust(central, (low, high), speculating),
                        {d.label: d.tokens_per_step(4) for d in drafts if d.prior is not None})


def robust(central: BandChoice, cases: tuple[BandCase, ...], speculating: bool) -> bool:
    """Neither end of the band flips the method, nor makes the chosen (speculating) policy lose."""
    return not any(c.method != central.method or (speculating and c.gain < 1.0) for c in cases)
