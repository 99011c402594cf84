"""Agent sessions: the mean prompt by turn (the context growing turn by turn), and the speedup of the plan's
speculation by context length (where it stops paying)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from specsim.report.figures.drawing import SERIES, new_figure, plain_log, wrap_title


def agentic_figure(mean_prompt: np.ndarray, contexts: Sequence[int], speedup: Sequence[float], title: str) -> Figure:
    fig, (left, right) = new_figure(7.2, 3.6, ncols=2)
    turns = np.arange(1, len(mean_prompt) + 1)
    left.plot(turns, mean_prompt, "o-", color=SERIES[0], ms=3, lw=1.5)
    left.set_xlabel("turn")
    left.set_ylabel("mean prompt tokens")
    right.plot(contexts, speedup, "o-", color=SERIES[1], ms=4, lw=1.5)
    right.axhline(1.0, color="0.5", lw=0.8, ls="--")
    right.set_xscale("log", base=2)
    plain_log(right, "x")
    right.set_xlabel("context (tokens)")
    right.set_ylabel("speedup")
    fig.suptitle(wrap_title(title, 7.2, 10), fontsize=10)
    return fig
