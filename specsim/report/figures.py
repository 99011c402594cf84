"""Figures for reports and notebooks: pure functions of the data they are given, each returning a
matplotlib Figure drawn on an Agg canvas (object API: no pyplot state, no display, and importing
this module leaves the global backend alone, so notebooks keep their inline plots).

Every figure has a title, axis labels with units and a legend wherever it draws more than one
series; `report.py` computes the data, these functions only draw it.
"""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import matplotlib
import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter

FAMILY_COLOURS = {"linear": "#4C72B0", "attention": "#DD8452", "elementwise": "#55A868",
                  "communication": "#C44E52", "head": "#8172B3", "overhead": "#937860"}
SERIES = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C")


def _figure(width_in: float, height_in: float, ncols: int = 1, nrows: int = 1,
            **kw: object) -> tuple[Figure, list[Axes]]:
    fig = Figure(figsize=(width_in, height_in), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw)  # type: ignore[call-overload]
    return fig, [ax for row in axes for ax in row]


def _wrap(text: str, width_in: float, fontsize: float) -> str:
    """`text` wrapped to lines that fit `width_in` inches at `fontsize` points (a title the figure would
    otherwise clip); existing line breaks are kept."""
    chars = max(16, int(width_in * 72 / (fontsize * 0.6)))
    return "\n".join("\n".join(textwrap.wrap(line, chars)) or line for line in text.split("\n"))


wrap_title = _wrap


def _legend_columns(labels: Sequence[str], width_in: float, fontsize: float) -> int:
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


def _plain_log(ax: Axes, which: str = "x") -> None:
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


def _k_colours(max_k: int) -> list[tuple[float, float, float, float]]:
    cmap = matplotlib.colormaps["viridis"]
    return [cmap(i / max(max_k - 1, 1)) for i in range(max_k)]


# --- verification cost ------------------------------------------------------------------------

@dataclass
class VerifyCurve:
    """One (bucket, context)'s verification pass: B sequences x q tokens for q = 1..max_k+1."""

    label: str
    tokens: np.ndarray  # B * q
    total_ms: np.ndarray
    attention_ms: np.ndarray
    decode_ms: float  # q = 1 (plain decoding at this batch)
    chosen_tokens: float  # B * (tokens verified per sequence at the chosen k)
    chosen_ms: float


def verification_cost(tokens: np.ndarray, families_ms: Mapping[str, np.ndarray], context_tokens: int,
                      ridge_tokens: int | None, curves: Sequence[VerifyCurve], title: str,
                      names: Mapping[str, str] | None = None, engine: str = "") -> Figure:
    """(a) A pass of T tokens split by op family (stacked), ridge marked; (b) each bucket's
    verification pass as it verifies more tokens per sequence, with decode and chosen k marked.
    `names`: legend names of families (default: the family); `engine`: how the passes are priced (title)."""
    fig, (a, b) = _figure(13.0, 5.4, ncols=2)
    shown = names or {}
    fams = [f for f in families_ms if f != "attention" and np.any(np.asarray(families_ms[f]) > 0)]
    a.stackplot(tokens, *[np.asarray(families_ms[f]) for f in fams], labels=[shown.get(f, f) for f in fams],
                colors=[FAMILY_COLOURS.get(f, "#999999") for f in fams], alpha=0.85)
    top = float(np.max(sum((np.asarray(families_ms[f]) for f in fams), np.zeros_like(tokens))))
    if ridge_tokens is not None:
        a.axvline(ridge_tokens, color="black", lw=1.2, ls="--", label=f"ridge: linear layers compute-bound "
                  f"from T = {ridge_tokens}")
    for i, c in enumerate(curves):
        a.axvline(c.chosen_tokens, color=SERIES[i % len(SERIES)], lw=1.0, ls=":",
                  label=f"{c.label}: T = {c.chosen_tokens:.4g}")
    a.set_xlim(0, float(tokens.max()))
    a.set_ylim(0, top * 1.08)
    a.set_xlabel("tokens in the pass T (tokens)")
    a.set_ylabel("time of one forward pass (ms)")
    a.set_title("(a) A pass of T tokens by op family, excluding attention\n(tile steps above the ridge; "
                "attention, which depends on sequences x context, in (b))", fontsize=10)
    a.legend(fontsize=8, loc="upper left")
    for i, c in enumerate(curves):
        colour = SERIES[i % len(SERIES)]
        b.plot(c.tokens, c.total_ms, "-", color=colour, lw=1.6, label=f"{c.label}: whole pass")
        b.plot(c.tokens, c.attention_ms, "--", color=colour, lw=1.0, label=f"{c.label}: attention part")
        b.plot([c.tokens[0]], [c.decode_ms], "o", color=colour, ms=6)
        if len(c.tokens) > 1:  # a curve of one point is plain decoding alone (no k to choose)
            b.plot([c.chosen_tokens], [c.chosen_ms], "*", color=colour, ms=13, mec="black", mew=0.6)
    b.plot([], [], "o", color="grey", label="plain decoding (1 token per sequence)")
    b.plot([], [], "*", color="grey", mec="black", label="verification at the chosen k")
    b.set_xscale("log")
    _plain_log(b)
    b.set_xlabel("tokens verified per pass T = B x q (tokens)")
    b.set_ylabel("time of the verification pass (ms)")
    b.set_title("(b) Verification pass of each bucket, B sequences x q tokens\n(q = k + 1 for a chain, "
                "nodes + 1 for a tree)", fontsize=10)
    b.legend(fontsize=7, loc="upper left", ncol=1)
    b.set_ylim(bottom=0)
    priced = f" (passes priced as {engine})" if engine else ""
    fig.suptitle(_wrap(f"{title}: verification cost at context {context_tokens:,} tokens{priced}", 13.0, 12),
                 fontsize=12)
    return fig


# --- speedup against batch ---------------------------------------------------------------------

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
    fig, axes = _figure(width, 5.0, ncols=n, sharey=True)
    for ax, p in zip(axes, panels, strict=True):
        colours = _k_colours(p.speedup.shape[0] - 1)
        kind = "" if p.line_kind == "chain" else " (tree)"
        for k in range(1, p.speedup.shape[0]):
            ax.plot(p.batch, p.speedup[k], color=colours[k - 1], lw=1.2, label=f"k = {k}{kind}")
        ax.plot(p.batch, best_speedup(p), color="black", lw=2.2, ls="--", label=p.best_label)
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
        _plain_log(ax)
        ax.set_xlabel("batch size B (sequences)")
        ax.set_ylabel("speedup over plain decoding (x)")
        ax.set_title(_wrap(p.label, width / n, 10), fontsize=10)
        ax.margins(y=0.12)
    handles: dict[str, Artist] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(lab, h)
    fig.legend(handles.values(), handles.keys(), loc="outside lower center", fontsize=7.5,
               ncol=_legend_columns(list(handles), width, 7.5), frameon=False)
    fig.suptitle(_wrap(f"{title}: speedup against batch for each draft and k (below 1: speculation hurts)",
                       width, 12), fontsize=12)
    return fig


# --- optimal k over (batch, alpha) --------------------------------------------------------------

def optimal_k_heatmap(batch: np.ndarray, alphas: np.ndarray, best_k: np.ndarray, max_k: int, draft: str,
                      points: Sequence[tuple[str, float, float, int]], title: str) -> Figure:
    """best_k[alpha, batch]; -1 where nothing fits in memory. points: (label, batch, alpha, k)."""
    fig, (ax,) = _figure(9.0, 5.2)
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
    _plain_log(ax)
    ax.set_xlabel("batch size B (sequences)")
    ax.set_ylabel("acceptance rate alpha per draft token (probability)")
    ax.set_title(_wrap(f"{title}: optimal k for {draft} over batch and acceptance", 9.0 * 0.75, 12), fontsize=12)
    return fig


# --- the policy over the day / over the load --------------------------------------------------

@dataclass
class DaySegment:
    name: str
    hours: float
    batch: int
    k: int
    speedup: float


def policy_over_day(segments: Sequence[DaySegment], max_k: int, draft: str, title: str) -> Figure:
    fig, (ax,) = _figure(11.0, 4.6)
    colours = ["#bdbdbd", *_k_colours(max_k)]
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
    ax.set_title(_wrap(f"{title}: {draft} policy laid over the day's load (bar colour: k; label: throughput gain)",
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
    fig, (ax,) = _figure(10.0, 5.0)
    max_k = max(c.k for c in curves)
    colours = _k_colours(max(max_k, 1))
    for c in curves:
        if c.k == 0:
            ax.plot(c.rate_rps, c.ms_per_token, color="black", lw=2.2, label="k = 0 (no speculation)")
        else:
            ax.plot(c.rate_rps, c.ms_per_token, color=colours[c.k - 1], lw=1.2, label=f"k = {c.k}")
    ax.axvline(rate_rps, color="red", ls="--", lw=1.2, label=f"scenario: {rate_rps:g} requests/s")
    ax.axhline(slo_ms, color="grey", ls=":", lw=1.5, label=f"{slo_label}: {slo_ms:.1f} ms/token")
    ax.set_xscale("log")
    ax.set_yscale("log")
    _plain_log(ax)
    _plain_log(ax, "y")
    ax.set_xlabel("arrival rate per replica (requests/s)")
    ax.set_ylabel("time per output token (ms)")
    ax.set_title(_wrap(f"{title}: per-token latency against load for {draft}, concurrency by Little's law",
                       10.0 * 0.9, 12), fontsize=12)
    ax.legend(fontsize=8, ncol=2, loc="upper left")
    return fig


# --- sensitivity --------------------------------------------------------------------------------

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
    fig, (a, b) = _figure(13.0, 4.8, ncols=2, width_ratios=[1, 1.6])
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
    fig.suptitle(_wrap(f"{title}: sensitivity of the plan", 13.0, 12), fontsize=12)
    return fig


# --- memory -------------------------------------------------------------------------------------

MEMORY_PARTS = ("weights", "kv_cache", "activations", "reserved", "draft_weights", "draft_kv")
MEMORY_NAMES = {"weights": "target weights", "kv_cache": "target KV cache", "activations": "activation peak",
                "reserved": "non-torch + CUDA graphs", "draft_weights": "draft weights",
                "draft_kv": "draft KV cache"}


def memory(labels: Sequence[str], parts_gb: Mapping[str, Sequence[float]], capacity_gb: float, physical_gb: float,
           title: str) -> Figure:
    """Horizontal stacked bars, one per (row, with/without speculation), in GiB per GPU."""
    fig, (ax,) = _figure(11.0, max(3.4, 1.2 + 0.45 * len(labels)))
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
    ax.set_xlim(0, max(physical_gb, float(left.max())) * 1.05)
    ax.set_xlabel("memory per GPU (GiB)")
    ax.set_ylabel("bucket, context and setting (rows)")
    ax.set_title(_wrap(f"{title}: memory per GPU against capacity", 11.0 * 0.7, 12), fontsize=12)
    ax.legend(fontsize=8, loc="lower right")
    return fig


# --- capacity and cost ----------------------------------------------------------------------------

def capacity(labels: Sequence[str], gpus_base: Sequence[float], gpus_spec: Sequence[float],
             cost_base: Sequence[float] | None, cost_spec: Sequence[float] | None, gpu_title: str,
             title: str, xlabel: str = "bucket (load)") -> Figure:
    ncols = 2 if cost_base is not None and cost_spec is not None else 1
    fig, axes = _figure(6.0 * ncols, 4.6, ncols=ncols)
    xs = np.arange(len(labels))
    w = 0.38
    panels: list[tuple[Axes, Sequence[float], Sequence[float], str, str]] = [
        (axes[0], gpus_base, gpus_spec, "GPUs needed (count)", gpu_title)]
    if ncols == 2:
        assert cost_base is not None and cost_spec is not None
        panels.append((axes[1], cost_base, cost_spec, "cost per million output tokens (USD)",
                       "cost per million output tokens"))
    for ax, base, spec, ylabel, sub in panels:
        rb = ax.bar(xs - w / 2, base, w, color=SERIES[7], label="without speculation")
        rs = ax.bar(xs + w / 2, spec, w, color=SERIES[0], label="with speculation")
        for rects, vals in ((rb, base), (rs, spec)):
            for r, v in zip(rects, vals, strict=True):
                ax.text(r.get_x() + r.get_width() / 2, v, f"{v:.3g}", ha="center", va="bottom", fontsize=8)
        ax.set_xticks(xs, labels, fontsize=8, rotation=15 if len(labels) > 3 else 0)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(sub, fontsize=10)
        ax.set_ylim(0, max(max(base), max(spec)) * 1.2)
        ax.legend(fontsize=8, loc="upper left")
    fig.suptitle(_wrap(f"{title}: capacity and cost", 6.0 * ncols, 12), fontsize=12)
    return fig


def save_png(fig: Figure, path: str, dpi: int = 100) -> None:
    """The figure as a PNG file. On its own Agg canvas at its own dpi (every figure here) it is drawn once, laid
    out inside that draw: `savefig` draws it twice (once only to run the layout engine, then again with the
    layout frozen), for the same pixels."""
    if isinstance(fig.canvas, FigureCanvasAgg) and fig.dpi == dpi:
        fig.canvas.print_png(path)
    else:
        fig.savefig(path, dpi=dpi, format="png")


_PENDING: list[tuple[Figure, str, int]] = []  # set before forking: workers inherit it, nothing is pickled


def _save_pending(i: int) -> None:
    fig, path, dpi = _PENDING[i]
    save_png(fig, path, dpi)


def save_pngs(jobs: Sequence[tuple[Figure, str]], dpi: int = 100) -> None:
    """Render several figures, spread over the CPUs by forked workers where the platform forks (figure
    layout and rasterising are most of a report's time), serially otherwise or if the pool fails."""
    import multiprocessing
    import os
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    from specsim.forking import fork_context

    workers = min(os.cpu_count() or 1, len(jobs), 4)
    if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
        _PENDING[:] = [(fig, path, dpi) for fig, path in jobs]
        try:
            with ProcessPoolExecutor(workers, mp_context=fork_context()) as pool:
                list(pool.map(_save_pending, range(len(jobs))))
            return
        except (OSError, RuntimeError, BrokenProcessPool):
            pass
        finally:
            _PENDING.clear()
    for fig, path in jobs:
        save_png(fig, path, dpi)
