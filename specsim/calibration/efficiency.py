"""Fitting a profile's efficiency and overhead parameters to measured kernel timings.

Robust least squares (scipy.optimize.least_squares, soft-L1 loss) on relative error, with rows
weighted so that each (op, token band) counts alike (a sweep has many more large-M rows than decode
rows, but decode rows decide speculation). Before fitting, every requested parameter is checked
against the rows: one that moves no prediction by more than `MIN_EFFECT` across its whole range is
refused, never invented.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from specsim.calibration.params import BOUNDS, F_SCALE, MIN_EFFECT, default_params, determinable
from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.measurements import RowSet, token_band
from specsim.errors import SpecsimError

POLISH_RESTARTS = 4  # restarts from the optimum while each lowers the cost by >= 0.01%
LOG_SPAN = 100.0  # a parameter whose bounds span >= 100x is fitted in log space (see _FitSpace)

# --------------------------------------------------------------------------------------------------
# Fast predictions on fixed rows (the fit evaluates them hundreds of times)


_Rows = RowSet  # the prepared rows of one measurement table (measurements.RowSet)


def row_weights(df: pd.DataFrame) -> np.ndarray:
    """1/sqrt(rows in the same (op, token band)): bands count alike without drowning in noise."""
    band = token_band(df["tokens"].fillna(df["batch"].fillna(1) * df["q_per_seq"].fillna(1)))
    key = df["op"].astype(str) + ":" + band.astype(str)
    if "world_size" in df:
        key = key + ":" + df["world_size"].fillna(0).astype(str)
    if "impl" in df:
        key = key + ":" + df["impl"].fillna("").astype(str)
    return 1.0 / np.sqrt(key.map(key.value_counts()).to_numpy(dtype=float))


def _probe_profile(hw: HardwareProfile, params: Sequence[str]) -> HardwareProfile:
    """The start profile with interacting parameters switched on, so that each one's effect shows."""
    changes: dict[str, float] = {}
    if "throttle_tau_ms" in params and hw.efficiency.power_throttle < 0.1:
        changes["power_throttle"] = 0.2
    return hw.with_efficiency(**changes) if changes else hw


def undetermined(rows: _Rows, hw: HardwareProfile, params: Sequence[str]) -> dict[str, float]:
    """Parameters that move no row's prediction by MIN_EFFECT across their range: {name: largest effect}."""
    probe = _probe_profile(hw, params)
    out: dict[str, float] = {}
    for p in params:
        lo, hi = BOUNDS[p]
        span = [lo + 0.05 * (hi - lo), hi - 0.05 * (hi - lo)]
        preds = [rows.predict_ms(probe.with_efficiency(**{p: v})) for v in span]
        ok = np.isfinite(preds[0]) & np.isfinite(preds[1]) & (preds[0] > 0)
        effect = float(np.max(np.abs(preds[1][ok] / preds[0][ok] - 1.0))) if ok.any() else 0.0
        if effect < MIN_EFFECT:
            out[p] = effect
    return out


@dataclass(frozen=True)
class _FitSpace:
    """Where the optimiser moves: log of a parameter whose range spans LOG_SPAN or more, else its value.

    A scale parameter (cta_k_overhead 0.01-4096, kernel_overhead_us, l2_bw_tb_per_s, throttle_tau_ms)
    moves timings by ratios, not differences: in linear space a trust-region step sized for its upper
    decades overshoots its lower one, the fit parks it on a bound (cta_k_overhead 80 -> 0.01) and stops
    in a valley 20x above the optimum, where which valley depends on the BLAS kernel's rounding (the
    GEMM fit's timing error 3.3% on AVX-512 kernels, 2.5% on Haswell's). In log space the same rows
    come back within 0.6% on every OPENBLAS_CORETYPE tried (tests/calibration/test_efficiency.py).
    """

    lo: np.ndarray
    hi: np.ndarray

    @property
    def log(self) -> np.ndarray:
        return (self.lo > 0) & (self.hi >= LOG_SPAN * np.where(self.lo > 0, self.lo, np.inf))

    def to_u(self, x: np.ndarray) -> np.ndarray:
        return np.where(self.log, np.log(np.where(self.log, x, 1.0)), x)

    def to_x(self, u: np.ndarray) -> np.ndarray:
        return np.clip(np.where(self.log, np.exp(np.where(self.log, u, 0.0)), u), self.lo, self.hi)

    @property
    def u_lo(self) -> np.ndarray:
        return self.to_u(self.lo)

    @property
    def u_hi(self) -> np.ndarray:
        return self.to_u(self.hi)


# --------------------------------------------------------------------------------------------------
# The fit, step by step


def fit_efficiency(df: pd.DataFrame, hw: HardwareProfile, params: Sequence[str] | None = None,
                   starts: int = 1, lenient: Sequence[str] = ()) -> HardwareProfile:
    """Profile with `params` fitted to the rows' time_ms (see `fit_efficiency_params`)."""
    return fit_efficiency_params(df, hw, params, starts, lenient)[0]


def fit_efficiency_params(df: pd.DataFrame, hw: HardwareProfile, params: Sequence[str] | None = None,
                          starts: int = 1, lenient: Sequence[str] = ()) -> tuple[HardwareProfile, list[str]]:
    """(profile, fitted params): `params` fitted to the rows' time_ms (defaults: all the rows determine).

    Refuses (SpecsimError) parameters the rows' ops cannot determine, or whose effect on every row
    stays under MIN_EFFECT across their range; those in `lenient` are instead left at the base
    profile's value. `starts` > 1 adds fits from spread starting points and keeps the best (the loss
    surface has shallow valleys among the tile-model parameters).
    """
    chosen, lenient = _requested_params(df, params, lenient)
    sub, rows, usable = _predictable_rows(df, hw)
    chosen = _determined_params(rows, hw, chosen, lenient)
    space = _FitSpace(np.array([BOUNDS[p][0] for p in chosen]), np.array([BOUNDS[p][1] for p in chosen]))
    x0 = np.clip(np.array([getattr(hw.efficiency, p) for p in chosen], dtype=float), space.lo + 1e-9,
                 space.hi - 1e-9)
    residual = _residual(hw, chosen, space, rows, sub["time_ms"].to_numpy(dtype=float), row_weights(sub) * usable)
    best_x = space.to_x(_least_squares(residual, space, space.to_u(x0), starts))
    fitted = hw.with_efficiency(**dict(zip(chosen, (float(v) for v in best_x), strict=True)))
    kept = _moved_params(rows, fitted, chosen, best_x)
    fitted = fitted.with_efficiency(**{p: getattr(hw.efficiency, p) for p in chosen if p not in kept})
    return fitted, kept


def _requested_params(df: pd.DataFrame, params: Sequence[str] | None,
                      lenient: Sequence[str]) -> tuple[list[str], list[str]]:
    """(params to fit, those left at the base value when the rows cannot determine them); refuses
    unknown parameters and those the rows' ops cannot determine."""
    ops, can = determinable(df)
    lenient = list(lenient)
    if params is None:  # the defaults: those the rows cannot determine are left alone, not refused
        params = default_params(df)
        lenient = [*lenient, *params]
    params = list(params)
    unknown = [p for p in params if p not in BOUNDS]
    if unknown:
        raise SpecsimError(f"unknown efficiency parameter(s) {', '.join(unknown)} (known: {', '.join(BOUNDS)})")
    wrong_op = [p for p in params if p not in can]
    if wrong_op:
        raise SpecsimError(f"the measurements cannot determine {', '.join(wrong_op)} "
                           f"(their ops: {', '.join(sorted(ops)) or 'none'})")
    if not params:
        raise SpecsimError("nothing to fit: no gemm, attention or memcpy rows")
    return params, lenient


def _predictable_rows(df: pd.DataFrame, hw: HardwareProfile) -> tuple[pd.DataFrame, RowSet, np.ndarray]:
    """(the rows of ops that determine parameters, them prepared, which of them `hw` can predict)."""
    ops, _ = determinable(df)
    sub = df[df["op"].isin(list(ops))].reset_index(drop=True)
    rows = RowSet(sub)
    usable = np.isfinite(rows.predict_ms(hw))
    if not usable.any():
        raise SpecsimError("no row can be predicted: gemm rows need tokens, d_in, d_out; attention rows "
                           "batch, context_len, q_per_seq, n_heads, n_kv_heads, head_dim; memcpy rows bytes")
    return sub, rows, usable


def _determined_params(rows: _Rows, hw: HardwareProfile, params: list[str], lenient: Sequence[str]) -> list[str]:
    """`params` less the lenient ones the rows cannot determine; refuses the others they cannot."""
    flat = undetermined(rows, hw, params)
    params = [p for p in params if not (p in flat and p in lenient)]
    flat = {p: e for p, e in flat.items() if p not in lenient}
    if not params:
        raise SpecsimError("the measurements cannot determine any efficiency parameter")
    if flat:
        detail = ", ".join(f"{p} (moves predictions by at most {100 * e:.2g}%)" for p, e in flat.items())
        raise SpecsimError(f"the measurements cannot determine {detail}; leave it out of --params")
    return params


def _residual(hw: HardwareProfile, params: list[str], space: _FitSpace, rows: _Rows, y: np.ndarray,
              w: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """The weighted relative error of every row, as a function of the point `u` of the fit space."""
    def residual(u: np.ndarray) -> np.ndarray:
        trial = hw.with_efficiency(**dict(zip(params, space.to_x(u), strict=True)))
        r = (rows.predict_ms(trial) / y - 1.0) * w
        return np.nan_to_num(r, nan=0.0)

    return residual


def _least_squares(residual: Callable[[np.ndarray], np.ndarray], space: _FitSpace, u0: np.ndarray,
                   starts: int) -> np.ndarray:
    """The best point of fits from u0 and `starts` - 1 spread starts, polished by restarts."""
    candidates = [u0]
    rng = np.random.default_rng(0)
    for _ in range(max(0, starts - 1)):
        candidates.append(space.u_lo + (space.u_hi - space.u_lo) * rng.uniform(0.15, 0.85, size=len(u0)))
    best: Any = None
    for start in candidates:
        fit = least_squares(residual, np.clip(start, space.u_lo + 1e-9, space.u_hi - 1e-9),
                            bounds=(space.u_lo, space.u_hi), loss="soft_l1", f_scale=F_SCALE, x_scale="jac")
        if best is None or fit.cost < best.cost:
            best = fit
    assert best is not None
    # restarted from its own optimum (a fresh trust region) while that still lowers the cost: the first
    # run can stop on ftol in a shallow valley of the tile model
    for _ in range(POLISH_RESTARTS):
        again = least_squares(residual, best.x, bounds=(space.u_lo, space.u_hi), loss="soft_l1", f_scale=F_SCALE,
                              x_scale="jac")
        if again.cost >= best.cost * (1 - 1e-4):
            break
        best = again
    return np.asarray(best.x)


def _moved_params(rows: _Rows, fitted: HardwareProfile, params: list[str], best_x: np.ndarray) -> list[str]:
    """The parameters whose neighbourhood of the optimum moves some prediction.

    A parameter whose neighbourhood moves none was not determined by the fit (the start value was
    already on a flat): it is reported as such and keeps the base value."""
    base = rows.predict_ms(fitted)
    kept = []
    for p, v in zip(params, best_x, strict=True):
        lo_p, hi_p = BOUNDS[p]
        steps = [float(np.clip(v * f, lo_p, hi_p)) for f in (0.8, 1.25)]
        # fitted onto a bound (e.g. no per-expert cost at 0): scaling barely moves it, so also step 5% of
        # the range inwards, else a parameter the rows pin to its bound would be reverted to the base value
        at_bound = 1e-6 * (hi_p - lo_p)
        if v - lo_p <= at_bound:
            steps.append(float(min(v + 0.05 * (hi_p - lo_p), hi_p)))
        elif hi_p - v <= at_bound:
            steps.append(float(max(v - 0.05 * (hi_p - lo_p), lo_p)))
        trial = [rows.predict_ms(fitted.with_efficiency(**{p: s})) for s in steps]
        effect = max(float(np.nanmax(np.abs(t / base - 1.0))) for t in trial)
        if effect >= MIN_EFFECT / 10:
            kept.append(p)
    return kept
