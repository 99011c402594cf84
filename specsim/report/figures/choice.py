"""The plan's choice against acceptance: the chosen policy's gain and the best the optimiser finds, at the
acceptance band's low end, centre and high end (the plan's own BandDecision, plan/bands.py), against the chosen
draft's tokens per step at k = 4; where a threshold changes the decision, the measurement that settles it."""

from __future__ import annotations

from matplotlib.figure import Figure

from specsim.plan.result import BandDecision
from specsim.report.figures.drawing import SERIES, new_figure, wrap_title


def choice_against_acceptance(band: BandDecision, draft: str, title: str) -> Figure | None:
    """None where the plan has no prior-based band for `draft` (its acceptance measured)."""
    taus = [(band.low.tau or {}).get(draft), (band.tau_central or {}).get(draft), (band.high.tau or {}).get(draft)]
    if any(t is None for t in taus):
        return None
    x = [float(t) for t in taus]  # type: ignore[arg-type]
    fig, (ax,) = new_figure(7.2, 4.2)
    kept = [band.low.gain, band.central.gain, band.high.gain]
    best = [band.low.best_gain, band.central.gain, band.high.best_gain]
    ax.plot(x, kept, "-o", color=SERIES[0], label=f"the plan's choice ({band.central.draft})")
    ax.plot(x, best, "--s", color=SERIES[1], ms=4, label="the best choice at that acceptance")
    for xi, case in ((x[0], band.low), (x[2], band.high)):
        ax.annotate(case.draft if case.speculates else "off", (xi, case.best_gain), textcoords="offset points",
                    xytext=(4 if xi == x[0] else -40, -12), fontsize=8, color=SERIES[1])
    ax.axhline(1.0, color=SERIES[7], lw=1, ls=":")
    for t in band.thresholds:
        ax.axvline(t.tau_k4, color=SERIES[3], lw=1.2)
        ax.annotate(f"measure: {t.tau_k4:.2f}", (t.tau_k4, 1.0), textcoords="offset points", xytext=(3, 4),
                    fontsize=8, color=SERIES[3])
    ax.axvspan(x[0], x[2], color=SERIES[0], alpha=0.06, lw=0)
    ax.set_xlabel(f"{draft}'s acceptance, its prior's 80% band shaded: tokens per step at k = 4 (tokens)")
    ax.set_ylabel("gain over plain decoding (x)")
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(wrap_title(title, 7.2, 10), fontsize=10)
    return fig
