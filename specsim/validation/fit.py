"""Fitting an engine's unknown overheads on named groups of published rows, and only those.

An engine profile states what its sources measured; a few figures have no source (a host cost per
request of a speculative step, say). `fit_engine` finds them by least squares on the relative speedup
error of the rows of the named fit groups (robust soft-L1 loss, so one odd row does not decide a
figure), pricing acceptance as `validate --published` does in the chosen mode. Everything else — the
other groups — is the check. data/fits.yaml records which groups fitted which figures, so reports call
those groups "fit" (in-sample); `specsim engines show` prints each fitted figure's source, which names
the groups.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from specsim.engines.profile import NUMBERS, load_engine
from specsim.errors import SpecsimError
from specsim.validation.corpus import load_corpus
from specsim.validation.mapping import to_grid
from specsim.validation.score import MODES, _priced


@dataclass(frozen=True)
class EngineFit:
    engine: str
    values: dict[str, float]
    groups: tuple[str, ...]
    mode: str
    n_rows: int
    median_abs_error_before: float
    median_abs_error_after: float


def fit_engine(engine: str, params: Sequence[str], groups: Sequence[str], mode: str = "priors",
               bounds: tuple[float, float] = (0.0, 20_000.0), corpus: pd.DataFrame | None = None) -> EngineFit:
    """Fit `params` (engine profile numbers, microseconds or counts) of `engine` on `groups`."""
    if mode not in MODES:
        raise SpecsimError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    unknown = [p for p in params if p not in NUMBERS]
    if unknown:
        raise SpecsimError(f"cannot fit {unknown}: engine numbers are {', '.join(NUMBERS)}")
    base = load_engine(engine)
    c = load_corpus() if corpus is None else corpus
    grid, _ = to_grid(c[c["group"].isin(groups)])
    grid = grid[grid["engine"] == base.name]
    if grid.empty:
        raise SpecsimError(f"no priceable rows of groups {list(groups)} run on engine {engine!r}")

    def errors(x: np.ndarray) -> np.ndarray:
        e = dataclasses.replace(base, **{p: float(v) for p, v in zip(params, x, strict=True)})  # type: ignore[arg-type]
        rows = _priced(grid, c, mode, {base.name: e})
        err = rows["error"].to_numpy(dtype=float)
        return np.where(np.isfinite(err), err, 1.0)

    x0 = np.array([getattr(base, p) for p in params], dtype=float)
    before = float(np.median(np.abs(errors(x0))))
    res = least_squares(errors, np.clip(x0, *bounds), bounds=bounds, loss="soft_l1", f_scale=0.05,
                        diff_step=0.05)
    after_err = errors(res.x)
    return EngineFit(base.name, {p: float(v) for p, v in zip(params, res.x, strict=True)}, tuple(groups), mode,
                     int(after_err.size), before, float(np.median(np.abs(after_err))))
