"""Calibration figures: predicted vs measured time, and error vs tokens (or message size)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> None:
    from specsim.calibration.writing import write_atomic

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    write_atomic(path, buf.getvalue())


def predicted_vs_measured(rows: pd.DataFrame, path: Path, title: str) -> None:
    """Log-log scatter of predicted against measured ms, fitted and held-out rows, with y = x and +-10%."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 6.0))
    ok = rows["predicted_ms"].notna() & (rows["predicted_ms"] > 0)
    for held, label, color in ((False, "fitted rows", "tab:blue"), (True, "held-out rows", "tab:orange")):
        s = rows[ok & (rows["held_out"] == held)]
        if len(s):
            ax.scatter(s["time_ms"], s["predicted_ms"], s=4, alpha=0.35, color=color, label=f"{label} ({len(s)})")
    lo = float(min(rows.loc[ok, "time_ms"].min(), rows.loc[ok, "predicted_ms"].min()))
    hi = float(max(rows.loc[ok, "time_ms"].max(), rows.loc[ok, "predicted_ms"].max()))
    line = np.array([lo, hi])
    ax.plot(line, line, color="black", lw=1, label="predicted = measured")
    ax.fill_between(line, line * 0.9, line * 1.1, color="grey", alpha=0.2, label="±10%")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured time (ms)")
    ax.set_ylabel("predicted time (ms)")
    ax.set_title(title)
    ax.legend(loc="upper left", markerscale=3)
    _save(fig, path)
    plt.close(fig)


def error_vs_size(rows: pd.DataFrame, path: Path, title: str) -> None:
    """Signed relative error (%) against tokens (GEMM/attention) and against message bytes (all-reduce)."""
    plt = _pyplot()
    err = (rows["predicted_ms"] / rows["time_ms"] - 1.0) * 100.0
    tokens = rows["tokens"].fillna(rows["batch"] * rows["q_per_seq"])
    panels = [("tokens", rows["op"].isin(["gemm", "attention"]), tokens, "tokens in the pass (M)"),
              ("bytes", rows["op"].isin(["allreduce", "memcpy"]), rows["bytes"] / 2**20, "message / copy size (MiB)")]
    panels = [p for p in panels if (p[1] & err.notna()).any()]
    if not panels:
        return
    fig, axes = plt.subplots(1, len(panels), figsize=(7.0 * len(panels), 4.6), squeeze=False)
    for ax, (_, sel, x, xlabel) in zip(axes[0], panels, strict=True):
        for held, label, color in ((False, "fitted rows", "tab:blue"), (True, "held-out rows", "tab:orange")):
            s = sel & err.notna() & (rows["held_out"] == held)
            if s.any():
                ax.scatter(x[s], err[s], s=4, alpha=0.35, color=color, label=f"{label} ({int(s.sum())})")
        ax.axhline(0, color="black", lw=1)
        for y in (-10, 10):
            ax.axhline(y, color="grey", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("error of prediction (%)")
        ax.set_title(title)
        ax.legend(loc="best", markerscale=3)
    _save(fig, path)
    plt.close(fig)


def calibration_plots(rows: pd.DataFrame, out_dir: Path, stem: str, name: str) -> list[Path]:
    """Both figures into out_dir; returns their paths."""
    a = out_dir / f"{stem}_predicted_vs_measured.png"
    b = out_dir / f"{stem}_error_vs_size.png"
    predicted_vs_measured(rows, a, f"{name}: predicted vs measured kernel time")
    error_vs_size(rows, b, f"{name}: error of prediction")
    return [p for p in (a, b) if p.exists()]
