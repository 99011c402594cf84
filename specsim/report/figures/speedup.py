"""The speedup-against-batch figure: one panel per draft, a curve per k, the best configuration and the plan's
buckets."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from matplotlib.artist import Artist
from matplotlib.figure import Figure

from specsim.report.figures.drawing import k_colours, legend_columns, new_figure, plain_log, wrap_title


@dataclass
class BucketPoint:
    """One of the plan's buckets on its draft's panel: its batch and speedup, and its configuration."""

    name: str
    batch: float
    speedup: float
    config: str = ""  # "k = 3", "tree 2 x 5 (depth 3)"
    tree: bool = False


@dataclass
class SpeedupPanel:
    """One draft: speedup over plain decoding at each batch for k = 1..max_k (NaN: does not fit)."""

    label: str
    batch: np.ndarray
    speedup: np.ndarray  # [k, batch], row 0 is k = 0 (1.0)
    points: list[BucketPoint] = field(default_factory=list)  # the plan's operating points
    best: np.ndarray | None = None  # best speculative configuration per batch (NaN: none fits); None: rows 1..
    best_label: str = "best k"
    line_kind: str = "chain"  # what a row is: "chain" (k draft tokens) or "tree" (the draft's fixed tree)
    own_contexts: bool = False  # the points are at their buckets' own contexts, the lines at the pooled ones
    best_band: tuple[np.ndarray, np.ndarray] | None = None  # the best curve's 80% band (step/bands.py)


def best_speedup(p: SpeedupPanel) -> np.ndarray:
    """The panel's best-k curve: the best configuration that fits at each batch, NaN (a gap) where none does;
    plain decoding (row 0) never stands in for it."""
    if p.best is not None:
        return np.asarray(p.best, dtype=float)
    rows = np.asarray(p.speedup, dtype=float)[1:]
    if not rows.size:
        return np.full(len(p.batch), np.nan)
    with np.errstate(invalid="ignore"):
        best = np.nanmax(np.where(np.isnan(rows), -np.inf, rows), axis=0)
    return np.where(np.isfinite(best), best, np.nan)


def speedup_vs_batch(panels: Sequence[SpeedupPanel], title: str) -> Figure:
    """One panel per draft; one legend for all of them below the panels (inside, it would hide curves and the
    plan's labels)."""
    n = len(panels)
    width = min(max(5.6 * n, 7.5), 16.0)
    fig, axes = new_figure(width, 5.0, ncols=n, sharey=True)
    for ax, p in zip(axes, panels, strict=True):
        colours = k_colours(p.speedup.shape[0] - 1)
        kind = "" if p.line_kind == "chain" else " (tree)"
        for k in range(1, p.speedup.shape[0]):
            ax.plot(p.batch, p.speedup[k], color=colours[k - 1], lw=1.2, label=f"k = {k}{kind}")
        ax.plot(p.batch, best_speedup(p), color="black", lw=2.2, ls="--", label=p.best_label)
        if p.best_band is not None:
            ax.fill_between(p.batch, *p.best_band, color="black", alpha=0.12, lw=0,
                            label="its 80% band (acceptance and cost model)")
        for marker, tree in (("o", False), ("D", True)):
            mine = [q for q in p.points if q.tree == tree]
            if mine:
                ax.plot([q.batch for q in mine], [q.speedup for q in mine], marker, ls="none", color="red",
                        ms=7 if not tree else 6.5, mec="black",
                        label=f"the plan's buckets: {'trees' if tree else 'chains'}"
                              + (" (at the bucket's contexts)" if p.own_contexts else ""))
        for q in p.points:
            ax.annotate(f"{q.name}: {q.config}" if q.config else q.name, (q.batch, q.speedup),
                        textcoords="offset points", xytext=(0, 8), ha="center", fontsize=7.5,
                        bbox={"boxstyle": "round,pad=0.15", "fc": "white", "alpha": 0.75, "lw": 0})
        ax.axhline(1.0, color="grey", lw=1.0)
        ax.set_xscale("log")
        plain_log(ax)
        ax.set_xlabel("batch size B (sequences)")
        ax.set_ylabel("speedup over plain decoding (x)")
        ax.set_title(wrap_title(p.label, width / n, 10), fontsize=10)
        ax.margins(y=0.12)
    handles: dict[str, Artist] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(lab, h)
    fig.legend(handles.values(), handles.keys(), loc="outside lower center", fontsize=7.5,
               ncol=legend_columns(list(handles), width, 7.5), frameon=False)
    fig.suptitle(wrap_title(f"{title}: speedup against batch for each draft and k (below 1: speculation hurts)",
                       width, 12), fontsize=12)
    return fig
