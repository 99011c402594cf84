"""The verification-cost figure: a pass by op family, and each bucket's verification pass against tokens."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure

from specsim.report.figures.drawing import FAMILY_COLOURS, SERIES, new_figure, plain_log, wrap_title


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
    fig, (a, b) = new_figure(13.0, 5.4, ncols=2)
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
    plain_log(b)
    b.set_xlabel("tokens verified per pass T = B x q (tokens)")
    b.set_ylabel("time of the verification pass (ms)")
    b.set_title("(b) Verification pass of each bucket, B sequences x q tokens\n(q = k + 1 for a chain, "
                "nodes + 1 for a tree)", fontsize=10)
    b.legend(fontsize=7, loc="upper left", ncol=1)
    b.set_ylim(bottom=0)
    priced = f" (passes priced as {engine})" if engine else ""
    fig.suptitle(wrap_title(f"{title}: verification cost at context {context_tokens:,} tokens{priced}", 13.0, 12),
                 fontsize=12)
    return fig
