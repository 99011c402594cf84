"""The bands' spreads (step/bands.py), fitted on the published corpus's scored rows, and how often the bands
hold: each source group left out in turn, its rows' bands drawn from spreads fitted on the other groups alone.

Fitted:
  * speedup_bias and speedup_sigma: log(predicted / published speedup) with the source's acceptance given (mode
    "measured": the cost model alone) as a source group's offset plus a row's scatter (a random-effects split:
    a new deployment is a new group): the bias is the mean of the groups' means, the sigma the root of the
    between-group variance (of the means about the bias, less their sampling share) plus the pooled within-group
    variance. One value for every engine family measured: 7 groups over 4 families do not tell them apart (held
    out, per-family sigmas hold 87.5% of the rows, wider than the 80% asked); for a family not measured
    (UNMEASURED) that sigma widened by the spread of the measured families' own offsets;
  * step_sigma: per engine family, the RMS of log(predicted / published plain decoding tok/s) at batch 1, shrunk
    towards the pooled value by SHRINK pseudo-rows;
  * acceptance_scale: the factor on the prior bands' spread at which they contain the published tokens per step
    in 80% of the rows that report it (held-out priors).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from specsim.step.bands import COVERAGE, UNMEASURED, Spread, acceptance_quantile, family, step_bands

SHRINK = 5.0  # pseudo-rows at the pooled spread added to each family's own


def _rms_by_family(log_err: pd.Series, engines: pd.Series) -> dict[str, float]:
    fam = engines.map(family)
    pooled = float(np.sqrt(np.mean(log_err ** 2)))
    out = {}
    for f, e in log_err.groupby(fam):
        out[str(f)] = float(np.sqrt((np.sum(e ** 2) + SHRINK * pooled ** 2) / (len(e) + SHRINK)))
    return out


def _group_effects(log_err: np.ndarray, groups: np.ndarray, engines: np.ndarray) -> tuple[float, dict[str, float]]:
    """(bias, sigma per engine family) of a log error made of a group offset and a row's scatter (module
    docstring): every measured family the same sigma; UNMEASURED (an engine family no row measured) that sigma
    widened by the spread of the families' own offsets about the bias."""
    df = pd.DataFrame({"e": log_err, "g": groups, "f": pd.Series(engines).map(family).to_numpy()})
    by = df.groupby("g").agg(mean=("e", "mean"), size=("e", "size"), f=("f", "first"))
    bias = float(by["mean"].mean())
    within = df["e"] - df["g"].map(by["mean"])
    s_within2 = float((within ** 2).sum() / max(int((by["size"] - 1).sum()), 1))
    s_between2 = max(0.0, float(((by["mean"] - bias) ** 2).mean() - np.mean(s_within2 / by["size"])))
    sigma = float(np.sqrt(s_between2 + s_within2))
    s_family2 = float(((by.groupby("f")["mean"].mean() - bias) ** 2).mean())
    measured = {str(f): sigma for f in sorted(by["f"].unique())}
    return bias, {**measured, UNMEASURED: float(np.sqrt(sigma ** 2 + s_family2))}


def _scale_for_coverage(rows: pd.DataFrame) -> float:
    """The scale on the prior bands at which they hold the published tokens per step in COVERAGE of the rows
    (bisection: coverage rises with the scale)."""
    r = rows[np.isfinite(rows["acceptance_length"]) & np.isfinite(rows["tau_low"])]
    if r.empty:
        return 1.0
    lo, hi = 0.05, 20.0
    for _ in range(50):
        mid = float(np.sqrt(lo * hi))
        if _tau_inside(r, mid).mean() < COVERAGE:
            lo = mid
        else:
            hi = mid
    return hi


def _tau_ends(r: pd.DataFrame, scale: float) -> tuple[np.ndarray, np.ndarray]:
    tau, low, high = (r[c].to_numpy(float) for c in ("tokens_per_step", "tau_low", "tau_high"))
    q = 0.5 - COVERAGE / 2
    return acceptance_quantile(tau, low, high, scale, q), acceptance_quantile(tau, low, high, scale, 1.0 - q)


def _tau_inside(r: pd.DataFrame, scale: float) -> np.ndarray:
    low, high = _tau_ends(r, scale)
    pub = r["acceptance_length"].to_numpy(float)
    return np.asarray((pub >= low - 1e-9) & (pub <= high + 1e-9))


def fit_spread(rows: pd.DataFrame, source: str = "") -> Spread:
    """The spreads fitted on scored rows (validation/score.py PublishedReport.rows)."""
    measured = rows[(rows["mode"] == "measured") & rows["error"].notna()]
    bias, sigma = (_group_effects(np.log1p(measured["error"].to_numpy(float)), measured["group"].to_numpy(),
                                  measured["engine"].to_numpy()) if len(measured) else (0.0, {"all": 0.0}))
    base = rows[np.isfinite(rows["baseline_error"].astype(float))].drop_duplicates("id")
    step = _rms_by_family(pd.Series(np.log1p(base["baseline_error"].to_numpy(float)), index=base.index),
                          base["engine"])
    scale = _scale_for_coverage(rows[rows["mode"] == "priors"])
    return Spread(sigma, step or {"all": 0.0}, scale, source, bias)


def banded(rows: pd.DataFrame, spread: Spread) -> pd.DataFrame:
    """`rows` with the speedup's and the tokens per step's band drawn from `spread` (each row's engine's)."""
    out = rows.copy()
    for col in ("speedup_low", "speedup_high", "tps_low", "tps_high"):
        out[col] = np.nan
    for engine, r in rows.groupby("engine"):
        b = step_bands({"tokens_per_step": r["tokens_per_step"].to_numpy(float),
                        "speedup": r["predicted"].to_numpy(float)}, r["tau_low"].to_numpy(float),
                       r["tau_high"].to_numpy(float), str(engine), spread)
        out.loc[r.index, ["speedup_low", "speedup_high", "tps_low", "tps_high"]] = np.column_stack(
            [b.low["speedup"], b.high["speedup"], b.low["tokens_per_step"], b.high["tokens_per_step"]])
    return out


def held_out_bands(rows: pd.DataFrame) -> pd.DataFrame:
    """Every scored row with its bands drawn from spreads fitted without its own source group."""
    parts = [banded(rows[rows["group"] == g], fit_spread(rows[rows["group"] != g])) for g in rows["group"].unique()]
    return pd.concat(parts).loc[rows.index]


@dataclass(frozen=True)
class Coverage:
    """How often a band held: the share inside, above and below it, the median relative half-width, and the
    median half-width of the constant-width band (in log) that holds as often on the same rows."""

    n: int
    inside: float
    above: float
    below: float
    half_width: float
    constant_half_width: float


def coverage(published: np.ndarray, central: np.ndarray, low: np.ndarray, high: np.ndarray) -> Coverage:
    ok = np.isfinite(published) & np.isfinite(low) & np.isfinite(high) & (central > 0)
    p, c, lo, hi = published[ok], central[ok], low[ok], high[ok]
    if not p.size:
        return Coverage(0, *(np.nan,) * 5)
    inside = (p >= lo - 1e-9) & (p <= hi + 1e-9)
    half = (hi - lo) / (2.0 * c)
    # the constant band: the |log error| quantile that holds as often, as a relative half-width
    const = float(np.quantile(np.abs(np.log(p / c)), inside.mean())) if inside.any() else 0.0
    return Coverage(int(p.size), float(inside.mean()), float(np.mean(p > hi + 1e-9)), float(np.mean(p < lo - 1e-9)),
                    float(np.median(half)), float(np.sinh(const)))
