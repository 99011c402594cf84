"""The range an answer may be off by: each figure's 10th and 90th percentile (an 80% central interval).

Where the spread comes from, each part measured (data/spread.yaml names the rows it was fitted on):
  * acceptance: the prior's band (its tokens per step at the 10th / 90th percentile, acceptance/priors/match.py),
    scaled by the corpus's calibration; none when the acceptance was given (measured, a rate, a metrics file);
  * the cost model: the log error of the speedup with the acceptance given (a ratio of two passes priced by the
    same model, whose errors the published corpus measures together): its bias (the mean of the source groups'
    means: the corpus finds the speedups high by it) and its spread about that bias for a deployment of its own
    (between groups plus within one); and the log error of a step's absolute time (plain decoding's tokens per
    second), per engine family the corpus measured, else the largest of them (an engine nobody here measured is
    assumed as far off as the worst one that was).
    Where the acceptance was given, the speedup's band leans by the bias (the central value stays the model's);
    a band from the priors does not: held out, the priors' answers show no such lean (their acceptance errors
    dominate and differ in sign by source), and leaning them puts 16% of the corpus above its band.
The parts are independent and combined through the step, not added by hand: log speedup = log tau + log(baseline /
step); (tau - 1) is split log-normal through the prior's low / central / high, the cost error normal in log. The
percentile of the sum is solved exactly on 64 quantile nodes of the acceptance part (bisection on the mixture's
distribution function), vectorised over rows.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import ndtr, ndtri

from specsim.errors import SpecsimError
from specsim.files import read_mapping

FloatArray = np.ndarray
COVERAGE = 0.80  # nominal: the band is the 10th-90th percentile
Z = float(ndtri(0.5 + COVERAGE / 2))  # 1.2816
_NODES = ndtri((np.arange(64) + 0.5) / 64)  # equal-weight quantile nodes of a standard normal
UNMEASURED = "unmeasured"  # a spread table's entry for an engine family the corpus did not measure


@dataclass(frozen=True)
class Spread:
    """The measured spreads (log-space standard deviations) a band is drawn from (data/spread.yaml)."""

    speedup_sigma: dict[str, float]  # engine family -> SD of log(predicted / published speedup), acceptance given
    step_sigma: dict[str, float]  # engine family -> SD of log(predicted / published plain decoding tok/s)
    acceptance_scale: float  # the prior band's log(tau - 1) spread times this covers 80% of the corpus
    source: str = ""
    speedup_bias: float = 0.0  # mean log(predicted / published speedup), acceptance given (the band leans by it)

    def sigma(self, table: dict[str, float], engine: str) -> float:
        """An engine family's spread, else the table's UNMEASURED entry, else the largest measured."""
        return table.get(family(engine), table.get(UNMEASURED, max(table.values())))

    def fitted(self, engine: str, sigma: float | None) -> Spread:
        """The spread with a fitted deployment's error (StepCalibration.sigma_log) for the engine's cost spreads
        (None: as it stands)."""
        if sigma is None:
            return self
        return dataclasses.replace(self, speedup_sigma={family(engine): sigma}, step_sigma={family(engine): sigma},
                                   speedup_bias=0.0, source=f"{self.source}; cost spread of the fitted deployment")


def spread_for(engine: str, calibration: Any = None) -> Spread:
    """The spreads a band of this engine's figures takes: the measured ones, or a fitted deployment's
    (StepCalibration.sigma_log) where the step is calibrated."""
    return load_spread().fitted(engine, getattr(calibration, "sigma_log", None))


def family(engine: str) -> str:
    """An engine profile's family: its name without a version (sglang-0.4 -> sglang; hf-naive stays)."""
    return re.sub(r"-\d+(\.\d+)*$", "", engine.strip().lower())


@cache
def load_spread(path: str | None = None) -> Spread:
    """data/spread.yaml (written by benchmarks/fit_spread.py), or `path`."""
    p = Path(path) if path else Path(str(resources.files("specsim.step"))) / "data" / "spread.yaml"
    data = read_mapping(p)
    try:
        sp = {str(k): float(v) for k, v in data["speedup_sigma"].items()}
        st = {str(k): float(v) for k, v in data["step_sigma"].items()}
        scale = float(data["acceptance_scale"])
        bias = float(data.get("speedup_bias", 0.0))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SpecsimError(f"{p}: needs speedup_sigma, step_sigma (engine -> sigma) and acceptance_scale "
                           f"({exc})") from None
    if not sp or not st or scale <= 0 or min([*sp.values(), *st.values()]) < 0:
        raise SpecsimError(f"{p}: spreads must be non-empty and non-negative, the scale positive")
    return Spread(sp, st, scale, str(data.get("source", "")), bias)


def _sides(tau: FloatArray, low: FloatArray, high: FloatArray, scale: float) -> tuple[FloatArray, ...]:
    """(tau - 1, the low side's and the high side's SD of log(tau - 1)): the split log-normal through the prior's
    low / central / high at its 10th / 90th percentile, each side's spread times `scale`."""
    t1 = np.maximum(tau - 1.0, 1e-9)
    s_low = np.log(t1 / np.maximum(low - 1.0, 1e-9)) / Z * scale
    s_high = np.log(np.maximum(high - 1.0, 1e-9) / t1) / Z * scale
    return t1, s_low, s_high


def acceptance_nodes(tau: FloatArray, low: FloatArray, high: FloatArray, scale: float = 1.0) -> FloatArray:
    """log(tau_true / tau) at the 64 nodes (rows x 64) of the split log-normal (_sides); zero where no band (low =
    high = tau, or plain decoding)."""
    tau, low, high = (np.asarray(a, dtype=float)[..., None] for a in (tau, low, high))
    t1, s_low, s_high = _sides(tau, low, high, scale)
    s = np.where(_NODES < 0, s_low, s_high)
    s = np.where((tau > 1.0 + 1e-9) & np.isfinite(s), np.maximum(s, 0.0), 0.0)
    return np.asarray(np.log((1.0 + t1 * np.exp(s * _NODES)) / np.maximum(tau, 1.0)))


def acceptance_quantile(tau: FloatArray, low: FloatArray, high: FloatArray, scale: float, q: float) -> FloatArray:
    """The q-quantile of tokens per step alone (the split log-normal of _sides, exactly)."""
    tau, low, high = (np.asarray(a, dtype=float) for a in (tau, low, high))
    t1, s_low, s_high = _sides(tau, low, high, scale)
    z = float(ndtri(q))
    s = np.abs(s_low if z < 0 else s_high)
    return np.where(tau > 1.0 + 1e-9, 1.0 + t1 * np.exp(s * z), tau)


def unscaled(tau: FloatArray, end: FloatArray, scale: float) -> FloatArray:
    """A band end drawn at `scale` (acceptance_quantile) back at scale 1: the prior's own end."""
    tau, end = np.asarray(tau, dtype=float), np.asarray(end, dtype=float)
    t1 = np.maximum(tau - 1.0, 1e-9)
    return np.where(tau > 1.0 + 1e-9, 1.0 + t1 * (np.maximum(end - 1.0, 1e-12) / t1) ** (1.0 / scale), end)


def percentiles(nodes: FloatArray, sigma: FloatArray, q: float | FloatArray) -> FloatArray:
    """The q-quantile(s) of X + sigma Z (X equally weighted on `nodes` per row, Z standard normal): bisection on the
    mixture's distribution function, to 1e-6 in log; several q at once give a last axis of them."""
    x = np.asarray(nodes, dtype=float)[..., None, :]
    qs = np.atleast_1d(np.asarray(q, dtype=float))[:, None]
    s = np.broadcast_to(np.asarray(sigma, dtype=float), x.shape[:-2])[..., None, None]
    shape = (*x.shape[:-2], len(qs), 1)  # one bracket per row and q
    lo = np.broadcast_to(x.min(axis=-1, keepdims=True) - 6.0 * s - 1e-12, shape)
    hi = np.broadcast_to(x.max(axis=-1, keepdims=True) + 6.0 * s + 1e-12, shape)
    positive, scale = s > 0, np.where(s > 0, s, 1.0)
    for _ in range(24):  # the bracket (< 8 in log) to < 1e-6
        mid = 0.5 * (lo + hi)
        cdf = np.where(positive, ndtr((mid - x) / scale), (x <= mid).astype(float)).mean(-1, keepdims=True)
        below = cdf < qs
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    out = np.asarray(0.5 * (lo + hi)[..., 0])
    return out if np.ndim(q) else out[..., 0]


def log_band(nodes: FloatArray, sigma: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(10th, 90th percentile) of log(true / central) of a figure whose acceptance part is `nodes` (rows x 64) and
    whose cost part is normal with SD `sigma`; solved once per distinct row (a grid's rows share a few)."""
    x = np.asarray(nodes, dtype=float)
    s = np.broadcast_to(np.asarray(sigma, dtype=float), x.shape[:-1])
    flat = np.column_stack([x.reshape(-1, x.shape[-1]), s.reshape(-1)])
    ok = np.isfinite(flat).all(axis=1)
    low, high = np.full(len(flat), np.nan), np.full(len(flat), np.nan)
    # no acceptance part (given, or a figure that does not move with it): the normal's own percentiles
    plain = ok & (flat[:, :-1] == 0.0).all(axis=1)
    low[plain], high[plain] = -Z * flat[plain, -1], Z * flat[plain, -1]
    mixed = ok & ~plain
    if mixed.any():
        uniq, inverse = np.unique(flat[mixed], axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        q = 0.5 - COVERAGE / 2
        both = percentiles(uniq[:, :-1], uniq[:, -1], np.array([q, 1.0 - q]))[inverse]
        low[mixed], high[mixed] = both[:, 0], both[:, 1]
    return low.reshape(s.shape), high.reshape(s.shape)


@dataclass(frozen=True)
class Bands:
    """Low / high of each figure of a step's answer, beside the central values."""

    low: dict[str, FloatArray]
    high: dict[str, FloatArray]

    def as_dict(self) -> dict[str, FloatArray]:
        return {**{f"{k}_low": v for k, v in self.low.items()}, **{f"{k}_high": v for k, v in self.high.items()}}


#: the figures a band is given for: how each moves with acceptance (+1 as tau, -1 as 1 / tau, 0 not) and the cost
#: spread it carries (the speedup's, a ratio of two passes; a step's absolute time; none)
BANDED: dict[str, tuple[int, str | None]] = {
    "tokens_per_step": (1, None), "speedup": (1, "speedup"), "step_ms": (0, "step"), "baseline_step_ms": (0, "step"),
    "throughput_tok_s": (1, "step"), "baseline_throughput_tok_s": (0, "step"), "ms_per_token": (-1, "step")}


def step_bands(central: dict[str, FloatArray], low_tau: FloatArray, high_tau: FloatArray, engine: str,
               spread: Spread | None = None, banded: Mapping[str, tuple[int, str | None]] | None = None) -> Bands:
    """The band of each figure of `central` that `banded` (default BANDED: a step's figures) names, from the
    acceptance's low / high tokens per step (equal to the central where the acceptance was given; `central`'s
    "tokens_per_step" is the central value) and the engine's measured cost spreads."""
    sp = spread or load_spread()
    banded = BANDED if banded is None else banded
    tau = np.asarray(central["tokens_per_step"], dtype=float)
    # the acceptance part per distinct (tau, low, high): a grid's rows share a few
    keys = np.column_stack([np.broadcast_to(np.asarray(a, dtype=float), tau.shape).reshape(-1)
                            for a in (tau, low_tau, high_tau)])
    finite = np.isfinite(keys).all(axis=1)
    uniq, inverse = np.unique(np.where(finite[:, None], keys, 1.0), axis=0, return_inverse=True)
    nodes_u = acceptance_nodes(uniq[:, 0], uniq[:, 1], uniq[:, 2], sp.acceptance_scale)
    sigmas = {"speedup": sp.sigma(sp.speedup_sigma, engine), "step": sp.sigma(sp.step_sigma, engine), None: 0.0}
    q = 0.5 - COVERAGE / 2
    solved: dict[tuple[int, str | None], tuple[FloatArray, FloatArray]] = {(1, None): (
        np.log(acceptance_quantile(tau, low_tau, high_tau, sp.acceptance_scale, q) / tau),
        np.log(acceptance_quantile(tau, low_tau, high_tau, sp.acceptance_scale, 1.0 - q) / tau))}
    # every other (acceptance part, cost spread) the figures need, solved in one stacked call
    needed = list(dict.fromkeys((abs(sign), cost) for name, (sign, cost) in banded.items() if name in central))
    needed = [key for key in needed if key not in solved]
    if needed:
        lo_s, hi_s = log_band(np.concatenate([key[0] * nodes_u for key in needed]),
                              np.concatenate([np.full(len(uniq), sigmas[key[1]]) for key in needed]))
        def back(v: FloatArray, i: int) -> FloatArray:  # the i-th key's rows, back on every row
            return np.where(finite, v[i * len(uniq):(i + 1) * len(uniq)][inverse.reshape(-1)], np.nan).reshape(
                tau.shape)

        for i, key in enumerate(needed):
            solved[key] = (back(lo_s, i), back(hi_s, i))
    low, high = {}, {}
    for name, (sign, cost) in banded.items():
        if name not in central:
            continue
        key = (abs(sign), cost)
        lo, hi = solved[key] if sign >= 0 else (-solved[key][1], -solved[key][0])  # 1 / tau: the ends swap
        if cost == "speedup":  # the cost model's lean, where the acceptance was given (module docstring)
            given = np.broadcast_to(np.asarray(high_tau, dtype=float) - np.asarray(low_tau, dtype=float), tau.shape)
            lean = np.where(np.abs(given) <= 1e-12, sp.speedup_bias, 0.0) * (1.0 if sign >= 0 else -1.0)
            lo, hi = lo - lean, hi - lean
        value = np.asarray(central[name], dtype=float)
        low[name], high[name] = value * np.exp(lo), value * np.exp(hi)
    return Bands(low, high)


def gain_band(gain: float, low: float | None, high: float | None, engine: str,
              spread: Spread | None = None) -> tuple[float, float]:
    """The 80% band of a plan's gain (a ratio of speculative to plain figures, as the speedup): `low` / `high`
    are its value at the acceptance band's ends (None: the acceptance was given), taken as its 10th / 90th
    percentile in log with the spread's acceptance scale, combined with the engine's speedup spread."""
    sp = spread or load_spread()
    lo_end = np.log(low / gain) if low else 0.0
    hi_end = np.log(high / gain) if high else 0.0
    nodes = np.where(_NODES < 0, -min(lo_end, 0.0), max(hi_end, 0.0)) / Z * sp.acceptance_scale * _NODES
    lo, hi = log_band(nodes[None, :], np.array([sp.sigma(sp.speedup_sigma, engine)]))
    lean = sp.speedup_bias if low is None and high is None else 0.0  # the acceptance given: the cost model's lean
    return gain * float(np.exp(lo[0] - lean)), gain * float(np.exp(hi[0] - lean))
