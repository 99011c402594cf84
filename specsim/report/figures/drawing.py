"""The figures' shared drawing helpers: a figure on its own Agg canvas, titles wrapped to fit, legend columns that
fit, log axes in plain numbers, the palettes."""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Sequence

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

FAMILY_COLOURS = {"linear": "#4C72B0", "attention": "#DD8452", "elementwise": "#55A868",
                  "communication": "#C44E52", "head": "#8172B3", "overhead": "#937860"}
SERIES = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C")


def new_figure(width_in: float, height_in: float, ncols: int = 1, nrows: int = 1,
               **kw: object) -> tuple[Figure, list[Axes]]:
    """A figure on its own Agg canvas (no pyplot state) with constrained layout, and its axes row by row."""
    fig = Figure(figsize=(width_in, height_in), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw)  # type: ignore[call-overload]
    return fig, [ax for row in axes for ax in row]


def wrap_title(text: str, width_in: float, fontsize: float) -> str:
    """`text` wrapped to lines that fit `width_in` inches at `fontsize` points (a title the figure would
    otherwise clip); existing line breaks are kept."""
    chars = max(16, int(width_in * 72 / (fontsize * 0.6)))
    return "\n".join("\n".join(textwrap.wrap(line, chars)) or line for line in text.split("\n"))


def legend_columns(labels: Sequence[str], width_in: float, fontsize: float) -> int:
    """The most columns a legend of `labels` can have across `width_in` inches. Matplotlib fills a legend
    column by column, each as wide as its longest entry (plus the marker and padding)."""
    def entry_in(label: str) -> float:
        return len(label) * fontsize * 0.6 / 72 + 0.6

    for ncol in range(len(labels), 1, -1):
        rows, large = divmod(len(labels), ncol)  # as matplotlib.legend splits them: the first `large` columns
        sizes = [rows + 1] * large + [rows] * (ncol - large)  # hold one entry more
        starts = [int(x) for x in np.cumsum([0, *sizes])]
        columns = [labels[a:b] for a, b in itertools.pairwise(starts) if b > a]
        if sum(max(entry_in(lab) for lab in col) for col in columns) <= width_in * 0.95:
            return ncol
    return 1


def plain_log(ax: Axes, which: str = "x") -> None:
    """Log axis ticks as plain numbers (1, 10, 100) rather than powers of ten; on an axis spanning less than two
    decades (one or two labelled ticks) the minor ticks at 2 and 5 are labelled too."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))

    def minor(v: float, _pos: int | None) -> str:
        lo, hi = sorted(axis.get_view_interval())
        if lo <= 0 or hi / lo > 100:
            return ""
        text = f"{v:g}"
        return text if text.lstrip("0.")[:1] in ("2", "5") else ""

    axis.set_minor_formatter(FuncFormatter(minor))


def k_colours(max_k: int) -> list[tuple[float, float, float, float]]:
    cmap = matplotlib.colormaps["viridis"]
    return [cmap(i / max(max_k - 1, 1)) for i in range(max_k)]
