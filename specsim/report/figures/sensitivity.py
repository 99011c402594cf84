"""The sensitivity figure: the plan's gain if acceptance is lower than assumed, and the inputs it hinges on."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from specsim.report.figures.drawing import SERIES, new_figure, wrap_title


@dataclass
class Swing:
    """An input moved down and up: the gain of the re-made plan at each end (NaN: no plan)."""

    name: str
    low_label: str
    high_label: str
    low_gain: float
    high_gain: float


def sensitivity(scales: Sequence[float], scale_gains: Sequence[float], swings: Sequence[Swing], base_gain: float,
                gain_label: str, title: str) -> Figure:
    fig, (a, b) = new_figure(13.0, 4.8, ncols=2, width_ratios=[1, 1.6])
    xs = np.arange(len(scales))
    bars = a.bar(xs, scale_gains, color=[SERIES[0] if g >= 1 else SERIES[3] for g in scale_gains],
                 label="gain of the re-made plan")
    for rect, g in zip(bars, scale_gains, strict=True):
        a.text(rect.get_x() + rect.get_width() / 2, g, f"{g:.2f}x", ha="center", va="bottom", fontsize=9)
    a.axhline(1.0, color="black", lw=1.0, label="break-even (no gain)")
    a.set_xticks(xs, [f"{s:.0%}" + ("\n(as assumed)" if s == 1 else "") for s in scales])
    a.set_xlabel("acceptance rates (share of the scenario's)")
    a.set_ylabel(f"{gain_label} (x)")
    a.set_title("(a) If acceptance is lower than assumed", fontsize=10)
    a.set_ylim(0, max(max(scale_gains), 1.0) * 1.18)
    a.legend(fontsize=8, loc="lower right")
    order = sorted(range(len(swings)), key=lambda i: -np.nan_to_num(abs(swings[i].high_gain - swings[i].low_gain)))
    ys = np.arange(len(order))
    for y, i in zip(ys, order, strict=True):
        s = swings[i]
        for dy, value, colour, text in ((-0.19, s.low_gain, SERIES[3], s.low_label),
                                        (0.19, s.high_gain, SERIES[0], s.high_label)):
            if np.isfinite(value):
                b.barh(y + dy, value - base_gain, left=base_gain, color=colour, height=0.36)
                b.text(value, y + dy, f" {text}: {value:.2f}x ", va="center", fontsize=7,
                       ha="left" if value >= base_gain else "right")
            else:
                b.text(base_gain, y + dy, f" {text}: no plan ", va="center", fontsize=7, color="red")
    b.axvline(base_gain, color="black", lw=1.0)
    b.axvline(1.0, color="grey", lw=1.0, ls=":")
    handles = [Patch(color=SERIES[3], label="input moved down"), Patch(color=SERIES[0], label="input moved up"),
               Line2D([], [], color="black", lw=1.0, label=f"as assumed: {base_gain:.2f}x"),
               Line2D([], [], color="grey", lw=1.0, ls=":", label="break-even (1x)")]
    b.legend(handles=handles, fontsize=7, loc="lower right")
    b.set_yticks(ys, [swings[i].name for i in order])
    b.invert_yaxis()
    finite = [v for s in swings for v in (s.low_gain, s.high_gain) if np.isfinite(v)] + [base_gain, 1.0]
    span = max(finite) - min(finite)
    b.set_xlim(min(finite) - 0.35 * span - 0.05, max(finite) + 0.35 * span + 0.05)
    b.set_xlabel(f"{gain_label} of the re-made plan (x)")
    b.set_ylabel("input (moved down / up)")
    b.set_title("(b) Which inputs the answer hinges on", fontsize=10)
    fig.suptitle(wrap_title(f"{title}: sensitivity of the plan", 13.0, 12), fontsize=12)
    return fig
