"""The optimal-k heatmap over batch and acceptance rate."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib
import numpy as np
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.figure import Figure

from specsim.report.figures.drawing import new_figure, plain_log, wrap_title


def optimal_k_heatmap(batch: np.ndarray, alphas: np.ndarray, best_k: np.ndarray, max_k: int, draft: str,
                      points: Sequence[tuple[str, float, float, int]], title: str) -> Figure:
    """best_k[alpha, batch]; -1 where nothing fits in memory. points: (label, batch, alpha, k)."""
    fig, (ax,) = new_figure(9.0, 5.2)
    colours = ["#d9d9d9", *[matplotlib.colormaps["viridis"](i / max(max_k, 1)) for i in range(max_k + 1)]]
    cmap = ListedColormap(np.array(colours, dtype=object).tolist())
    norm = BoundaryNorm(np.arange(-1.5, max_k + 1.5), cmap.N)
    # cell edges: geometric midpoints in batch, arithmetic in alpha
    be = np.sqrt(batch[1:] * batch[:-1])
    bedges = np.r_[batch[0] / (be[0] / batch[0]), be, batch[-1] * (batch[-1] / be[-1])]
    ae = (alphas[1:] + alphas[:-1]) / 2
    aedges = np.r_[alphas[0] - (ae[0] - alphas[0]), ae, alphas[-1] + (alphas[-1] - ae[-1])]
    mesh = ax.pcolormesh(bedges, aedges, best_k, cmap=cmap, norm=norm, shading="flat")
    cb = fig.colorbar(mesh, ax=ax, ticks=np.arange(-1, max_k + 1))
    cb.ax.set_yticklabels(["does not fit", "0 (off)", *[str(k) for k in range(1, max_k + 1)]])
    cb.set_label("optimal k (draft tokens per step)")
    for name, bb, al, k in points:
        ax.plot([bb], [al], "o", ms=9, color="white", mec="red", mew=2)
        ax.annotate(f"{name}: k = {k}", (bb, al), textcoords="offset points", xytext=(7, -4), fontsize=8,
                    color="white", bbox={"boxstyle": "round,pad=0.2", "fc": "black", "alpha": 0.6, "lw": 0})
    if points:
        ax.plot([], [], "o", color="white", mec="red", mew=2, label="the plan's buckets (assumed acceptance)")
        ax.legend(fontsize=8, loc="lower left")
    ax.set_xscale("log")
    plain_log(ax)
    ax.set_xlabel("batch size B (sequences)")
    ax.set_ylabel("acceptance rate alpha per draft token (probability)")
    ax.set_title(wrap_title(f"{title}: optimal k for {draft} over batch and acceptance", 9.0 * 0.75, 12), fontsize=12)
    return fig
