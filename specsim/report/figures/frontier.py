"""The throughput-interactivity frontier: output tokens/s per GPU against tokens/s per user, one curve per
configuration (InferenceMAX's and the vendors' serving plots), each point a load, and where each speculating
configuration stops paying marked."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from specsim.report.figures.drawing import SERIES, legend_columns, new_figure, wrap_title

OFF = "off"


def frontier(rows: pd.DataFrame, load: str, crossovers: Mapping[str, float | None], title: str) -> Figure:
    """One curve per configuration through its load points (labelled with the load), plain decoding grey; a ring
    at each configuration's crossover load (module docstring)."""
    fig, (ax,) = new_figure(7.2, 4.8)
    configs = list(dict.fromkeys(rows["configuration"]))
    configs.sort(key=lambda c: c != OFF)
    labels = []
    for i, name in enumerate(configs):
        part = rows[rows["configuration"] == name].sort_values(load)
        x, y = part["per_user_tok_s"].to_numpy(float), part["output_tok_s_per_gpu"].to_numpy(float)
        colour = SERIES[7] if name == OFF else SERIES[(i - 1) % 7]
        label = "speculation off" if name == OFF else name
        at = crossovers.get(name)
        if at is not None:
            label += f" (stops paying at {load} {at:g})"
        labels.append(label)
        ax.plot(x, y, "-o", color=colour, lw=1.8, ms=4, label=label)
        for xi, yi, li in zip(x, y, part[load].to_numpy(), strict=True):
            ax.annotate(f"{li:g}", (xi, yi), textcoords="offset points", xytext=(3, 3), fontsize=7, color=colour)
        if at is not None:
            hit = part[np.isclose(part[load].to_numpy(float), at)]
            ax.plot(hit["per_user_tok_s"], hit["output_tok_s_per_gpu"], "o", ms=11, mfc="none", mec=colour, mew=1.5)
    ax.set_xlabel("interactivity: output per user, 1000 / median TPOT (tokens/s)")
    ax.set_ylabel("output throughput per GPU (tokens/s)")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right", ncol=legend_columns(labels, 7.2, 8))
    point = "concurrency" if load == "concurrency" else "rate (requests/s)"
    fig.suptitle(wrap_title(f"{title}: throughput against interactivity (labels: {point})", 7.2, 11), fontsize=11)
    return fig
