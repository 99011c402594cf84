"""The memory figure: memory per GPU by part against capacity."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from specsim.report.figures.drawing import SERIES, new_figure, wrap_title

MEMORY_PARTS = ("weights", "kv_cache", "activations", "reserved", "draft_weights", "draft_kv")
MEMORY_NAMES = {"weights": "target weights", "kv_cache": "target KV cache", "activations": "activation peak",
                "reserved": "non-torch + CUDA graphs", "draft_weights": "draft weights",
                "draft_kv": "draft KV cache"}


def memory(labels: Sequence[str], parts_gb: Mapping[str, Sequence[float]], capacity_gb: float, physical_gb: float,
           title: str) -> Figure:
    """Horizontal stacked bars, one per (row, with/without speculation), in GiB per GPU."""
    fig, (ax,) = new_figure(11.0, max(3.4, 1.2 + 0.45 * len(labels)))
    ys = np.arange(len(labels))
    left = np.zeros(len(labels))
    colours = {"weights": SERIES[0], "kv_cache": SERIES[1], "activations": SERIES[5], "reserved": SERIES[7],
               "draft_weights": SERIES[2], "draft_kv": SERIES[4]}
    for part in MEMORY_PARTS:
        vals = np.asarray(parts_gb[part], dtype=float)
        if np.any(vals > 0):
            ax.barh(ys, vals, left=left, color=colours[part], label=MEMORY_NAMES[part], height=0.7)
        left += vals
    ax.axvline(capacity_gb, color="red", ls="--", lw=1.5, label=f"usable: {capacity_gb:.1f} GiB")
    ax.axvline(physical_gb, color="black", ls=":", lw=1.2, label=f"total (CUDA): {physical_gb:.1f} GiB")
    ax.set_yticks(ys, labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(physical_gb, float(np.max(left))) * 1.05)
    ax.set_xlabel("memory per GPU (GiB)")
    ax.set_ylabel("bucket, context and setting (rows)")
    ax.set_title(wrap_title(f"{title}: memory per GPU against capacity", 11.0 * 0.7, 12), fontsize=12)
    ax.legend(fontsize=8, loc="lower right")
    return fig
