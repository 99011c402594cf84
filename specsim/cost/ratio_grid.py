"""Ratio grids: log(measured / roofline) of one kernel family on a regular grid over log-axes,
interpolated multilinearly where measured neighbours bracket a shape (the table cost model's unit)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from specsim.cost.roofline import Array


def safe_log(x: ArrayLike) -> Array:
    return np.log(np.maximum(np.asarray(x, dtype=float), 1e-30))


def _fill_holes(values: Array) -> Array:
    """Unmeasured grid points with measured neighbours on both sides along some axis get the mean of
    those pairs (one pass, interior only: a hole between measured shapes, never an extrapolation)."""
    filled = values.copy()
    holes = np.argwhere(np.isnan(values))
    for idx in holes:
        got = []
        for axis in range(values.ndim):
            lo, hi = idx.copy(), idx.copy()
            lo[axis] -= 1
            hi[axis] += 1
            if lo[axis] < 0 or hi[axis] >= values.shape[axis]:
                continue
            a, b = values[tuple(lo)], values[tuple(hi)]
            if np.isfinite(a) and np.isfinite(b):
                got.append(0.5 * (a + b))
        if got:
            filled[tuple(idx)] = float(np.mean(got))
    return filled


@dataclass
class RatioGrid:
    """log(measured / roofline) on a regular grid over log-axes (NaN where not measured);
    `lookup` interpolates multilinearly and returns NaN where any bracketing corner is missing."""

    axes: tuple[Array, ...]  # log of each axis' measured values, sorted
    values: Array  # shape = tuple(len(a) for a in axes)

    @classmethod
    def build(cls, coords: list[Array], log_ratio: Array) -> RatioGrid:
        axes = tuple(np.unique(safe_log(c)) for c in coords)
        values = np.full(tuple(len(a) for a in axes), np.nan)
        idx = tuple(np.searchsorted(a, safe_log(c)) for a, c in zip(axes, coords, strict=True))
        import pandas as pd

        df = pd.DataFrame({**{f"i{j}": ix for j, ix in enumerate(idx)}, "r": log_ratio})
        med = df.groupby([f"i{j}" for j in range(len(idx))])["r"].median()  # repeated keys: their median
        values[tuple(np.asarray(med.index.get_level_values(j)) if len(idx) > 1 else np.asarray(med.index)
                     for j in range(len(idx)))] = med.to_numpy()
        return cls(axes, _fill_holes(values))

    def lookup(self, *coords: ArrayLike) -> Array:
        xs = [safe_log(c) for c in np.broadcast_arrays(*coords)]
        shape = xs[0].shape
        xs = [x.reshape(-1) for x in xs]
        out = np.zeros(xs[0].shape)
        inside = np.ones(xs[0].shape, bool)
        corners: list[tuple[NDArray[np.intp], Array]] = []  # per axis: (lower index, weight of upper)
        for a, x in zip(self.axes, xs, strict=True):
            if len(a) == 1:
                hit = np.isclose(x, a[0])
                inside &= hit
                corners.append((np.zeros(x.shape, int), np.zeros(x.shape)))
                continue
            inside &= (x >= a[0] - 1e-12) & (x <= a[-1] + 1e-12)
            i = np.clip(np.searchsorted(a, x, side="right") - 1, 0, len(a) - 2)
            w = np.clip((x - a[i]) / (a[i + 1] - a[i]), 0.0, 1.0)
            corners.append((i, w))
        for bits in range(2 ** len(self.axes)):
            weight = np.ones(xs[0].shape)
            index = []
            for j, (i, w) in enumerate(corners):
                up = (bits >> j) & 1
                if len(self.axes[j]) == 1:
                    if up:
                        weight = weight * 0.0
                    index.append(i)
                    continue
                weight = weight * (w if up else 1.0 - w)
                index.append(i + up)
            v = self.values[tuple(index)]
            used = weight > 1e-12
            inside &= ~(used & np.isnan(v))
            out = out + np.where(used, np.nan_to_num(v), 0.0) * weight
        return np.where(inside, out, np.nan).reshape(shape)

    def padded(self, base: Callable[..., Array]) -> RatioGrid:
        """The grid with its times made non-decreasing along the first axis (tokens): at each measured point the
        time is the least over that point and every larger measured one at the same other coordinates, since an
        engine runs a smaller problem at a larger one's cost by padding it (its graphs pad batches the same
        way). `base(*coords)` is the roofline time the ratio multiplies, evaluated on the grid's points."""
        mesh = np.meshgrid(*(np.exp(a) for a in self.axes), indexing="ij")
        roof = np.asarray(base(*mesh), dtype=float)
        times = roof * np.exp(self.values)
        least = np.fmin.accumulate(times[::-1], axis=0)[::-1]  # least from each point up (NaN never wins)
        out = np.where(np.isnan(times), np.nan, least)  # an unmeasured point stays unmeasured
        return RatioGrid(self.axes, safe_log(out) - safe_log(roof))
