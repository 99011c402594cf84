"""The whole calibration of a profile to measured kernel timings: select the rows, hold some out,
fit the efficiency (efficiency.py) and all-reduce (allreduce.py) parameters, and report the errors
(accuracy.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from specsim.calibration.accuracy import error_report
from specsim.calibration.allreduce import fit_allreduce
from specsim.calibration.efficiency import fit_efficiency_params
from specsim.calibration.params import parse_params
from specsim.calibration.selection import calibration_rows, parse_holdout
from specsim.cost.hardware_profile import HardwareProfile
from specsim.cost.measurements import RowSet
from specsim.errors import SpecsimError


@dataclass
class Calibration:
    base: HardwareProfile
    fitted: HardwareProfile
    rows: pd.DataFrame  # the rows used (fitted and held out), with predicted_ms_base / predicted_ms
    held: np.ndarray
    params: list[str]
    allreduce: bool
    report: pd.DataFrame
    dropped_noisy: int
    skipped: dict[str, int]


def calibrate(df: pd.DataFrame, hw: HardwareProfile, params: str | None = None, holdout: str | None = None,
              max_rel_std: float = 1.0, ops: Sequence[str] | None = None, all_devices: bool = False,
              by: str | None = None, starts: int = 1, framework: str | None = None, kernel: str | None = None,
              mix_kernels: bool = False) -> Calibration:
    """Select rows, hold some out, fit, and report errors (see the `calibrate` command).

    Rows of one (op, dtype[, all-reduce implementation]) timed with more than one framework/kernel
    are refused (fits never silently mix kernels) unless `mix_kernels`; `framework` / `kernel`
    select rows first."""
    d, skipped, dropped = calibration_rows(df, hw.name, ops, all_devices, framework, kernel, mix_kernels,
                                           max_rel_std)
    held = parse_holdout(holdout, d) if holdout else np.zeros(len(d), bool)
    train = d[~held]
    if train.empty:
        raise SpecsimError(f"--holdout {holdout!r} holds out every row: nothing left to fit")
    fitted, eff_params, fit_ar = _fit(train, hw, params, starts)
    rows = RowSet(d)
    out = d.copy()
    out["predicted_ms_base"] = rows.predict_ms(hw)
    out["predicted_ms"] = rows.predict_ms(fitted)
    out["held_out"] = held
    rep = error_report(out, out["predicted_ms"].to_numpy(), held, by)
    return Calibration(hw, fitted, out, held, eff_params, fit_ar, rep, dropped, skipped)


def _fit(train: pd.DataFrame, hw: HardwareProfile, params: str | None,
         starts: int) -> tuple[HardwareProfile, list[str], bool]:
    """(fitted profile, efficiency parameters fitted, all-reduce fitted?) for the `--params` spec."""
    eff_params, named, fit_ar = parse_params(params, train)
    fitted = hw
    if eff_params:
        fitted, eff_params = fit_efficiency_params(train, fitted, eff_params, starts=starts,
                                                   lenient=[p for p in eff_params if p not in named])
    if fit_ar:
        fitted = fit_allreduce(train, fitted)
    if not eff_params and not fit_ar:
        raise SpecsimError("nothing to fit: no gemm, attention, memcpy or allreduce rows")
    return fitted, eff_params, fit_ar
