"""The capacity figure: GPUs needed and cost per million output tokens, with and without speculation."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from specsim.report.figures.drawing import SERIES, new_figure, wrap_title


def capacity(labels: Sequence[str], gpus_base: Sequence[float], gpus_spec: Sequence[float],
             cost_base: Sequence[float] | None, cost_spec: Sequence[float] | None, gpu_title: str,
             title: str, xlabel: str = "bucket (load)", cost_labels: Sequence[str] | None = None,
             cost_xlabel: str | None = None) -> Figure:
    """GPUs per load (`labels`) and the cost per million output tokens per `cost_labels` (default: the same
    loads), each bar labelled with its value as the report's text writes it (costs to a tenth of a cent)."""
    ncols = 2 if cost_base is not None and cost_spec is not None else 1
    fig, axes = new_figure(6.0 * ncols, 4.6, ncols=ncols)
    w = 0.38
    panels: list[tuple[Axes, Sequence[str], Sequence[float], Sequence[float], str, str, str, str]] = [
        (axes[0], labels, gpus_base, gpus_spec, "GPUs needed (count)", gpu_title, xlabel, "{:.3g}")]
    if ncols == 2:
        assert cost_base is not None and cost_spec is not None
        panels.append((axes[1], cost_labels if cost_labels is not None else labels, cost_base, cost_spec,
                       "cost per million output tokens (USD)", "cost per million output tokens",
                       cost_xlabel or xlabel, "${:.3f}"))
    for ax, names, base, spec, ylabel, sub, xl, fmt in panels:
        xs = np.arange(len(names))
        rb = ax.bar(xs - w / 2, base, w, color=SERIES[7], label="without speculation")
        rs = ax.bar(xs + w / 2, spec, w, color=SERIES[0], label="with speculation")
        for rects, vals in ((rb, base), (rs, spec)):
            for r, v in zip(rects, vals, strict=True):
                ax.text(r.get_x() + r.get_width() / 2, v, fmt.format(v), ha="center", va="bottom", fontsize=8)
        ax.set_xticks(xs, names, fontsize=8, rotation=15 if len(names) > 3 else 0)
        ax.set_xlabel(xl)
        ax.set_ylabel(ylabel)
        ax.set_title(sub, fontsize=10)
        ax.set_ylim(0, max(max(base), max(spec)) * 1.2)
        ax.legend(fontsize=8, loc="upper left")
    fig.suptitle(wrap_title(f"{title}: capacity and cost", 6.0 * ncols, 12), fontsize=12)
    return fig
