"""The policy figures: the speculation policy laid over the day's buckets, and per-token latency against load."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure

from specsim.report.figures.drawing import k_colours, new_figure, plain_log, wrap_title


@dataclass
class DaySegment:
    name: str
    hours: float
    batch: int
    k: int
    speedup: float


def policy_over_day(segments: Sequence[DaySegment], max_k: int, draft: str, title: str) -> Figure:
    fig, (ax,) = new_figure(11.0, 4.6)
    colours = ["#bdbdbd", *k_colours(max_k)]
    start = 0.0
    seen: set[int] = set()
    for seg in segments:
        colour = colours[max(seg.k, 0)]
        label = None if seg.k in seen else ("k = 0 (off)" if seg.k == 0 else f"k = {seg.k}")
        seen.add(seg.k)
        ax.bar(start, seg.batch, width=seg.hours, align="edge", color=colour, edgecolor="black", label=label)
        ax.text(start + seg.hours / 2, seg.batch, f"{seg.name}\nk = {seg.k}, {seg.speedup:.2f}x",
                ha="center", va="bottom", fontsize=9)
        start += seg.hours
    ax.set_xlim(0, max(start, 24.0))
    ax.set_ylim(0, max(s.batch for s in segments) * 1.3)
    ax.set_xticks(np.arange(0, 25, 2))
    ax.set_xlabel("hours of the day, buckets in the scenario's order (h)")
    ax.set_ylabel("batch size B (sequences in flight)")
    ax.set_title(wrap_title(f"{title}: {draft} policy laid over the day's load (bar colour: k; label: throughput gain)",
                       11.0 * 0.9, 12), fontsize=12)
    ax.legend(fontsize=8, loc="upper right", title="draft tokens per step")
    return fig


@dataclass
class RateCurve:
    """Per-token latency against requests/s for one k (Little's law fixed points)."""

    k: int
    rate_rps: np.ndarray
    ms_per_token: np.ndarray


def policy_over_load(curves: Sequence[RateCurve], rate_rps: float, slo_ms: float, slo_label: str, draft: str,
                     title: str) -> Figure:
    fig, (ax,) = new_figure(10.0, 5.0)
    max_k = max(c.k for c in curves)
    colours = k_colours(max(max_k, 1))
    for c in curves:
        if c.k == 0:
            ax.plot(c.rate_rps, c.ms_per_token, color="black", lw=2.2, label="k = 0 (no speculation)")
        else:
            ax.plot(c.rate_rps, c.ms_per_token, color=colours[c.k - 1], lw=1.2, label=f"k = {c.k}")
    ax.axvline(rate_rps, color="red", ls="--", lw=1.2, label=f"scenario: {rate_rps:g} requests/s")
    ax.axhline(slo_ms, color="grey", ls=":", lw=1.5, label=f"{slo_label}: {slo_ms:.1f} ms/token")
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain_log(ax)
    plain_log(ax, "y")
    ax.set_xlabel("arrival rate per replica (requests/s)")
    ax.set_ylabel("time per output token (ms)")
    ax.set_title(wrap_title(f"{title}: per-token latency against load for {draft}, concurrency by Little's law",
                       10.0 * 0.9, 12), fontsize=12)
    ax.legend(fontsize=8, ncol=2, loc="upper left")
    return fig
