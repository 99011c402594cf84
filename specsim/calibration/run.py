"""One `specsim calibrate` run: read the measurements and the base profile, calibrate, and write the
fitted profile with its figures as one set of files (all written, or none)."""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from specsim.calibration.fit import Calibration, calibrate
from specsim.calibration.provenance import fitted_profile
from specsim.calibration.writing import write_profile
from specsim.cost.hardware import load_hardware
from specsim.cost.hardware_profile import Efficiency, HardwareProfile
from specsim.cost.measurements import read_measurements
from specsim.errors import SpecsimError
from specsim.files import Outputs, check_target


@dataclass(frozen=True)
class CalibrationRequest:
    """What to calibrate, on which rows, and where to write it (the `calibrate` command's options)."""

    measurements: Path
    hardware: str  # base profile: bundled name or YAML path
    output: Path  # the fitted profile's YAML
    holdout: str | None = None
    params: str | None = None
    ops: tuple[str, ...] | None = None
    by: str | None = None
    max_rel_std: float = 1.0
    name: str | None = None
    plots: Path | None = None  # folder of the figures (None: beside `output`)
    no_plots: bool = False
    all_devices: bool = False
    starts: int = 1
    from_defaults: bool = False  # start from default efficiencies, not the base profile's
    framework: str | None = None
    kernel: str | None = None
    mix_kernels: bool = False


@dataclass(frozen=True)
class CalibrationRun:
    """The calibration, the profile written, and the figures drawn beside it."""

    result: Calibration
    fitted: HardwareProfile
    figures: tuple[Path, ...]


def run_calibration(req: CalibrationRequest) -> CalibrationRun:
    """Check the options and the output target, fit, and write the profile and its figures."""
    _check(req)
    with warnings.catch_warnings():  # pandas' mixed-type note on sparse text columns (e.g. topology)
        warnings.simplefilter("ignore", pd.errors.DtypeWarning)
        df = read_measurements(req.measurements)
    base = load_hardware(req.hardware)
    if req.from_defaults:
        base = dataclasses.replace(base, efficiency=Efficiency())
    result = calibrate(df, base, params=req.params, holdout=req.holdout, max_rel_std=req.max_rel_std,
                       ops=list(req.ops) if req.ops else None, all_devices=req.all_devices, by=req.by,
                       starts=req.starts, framework=req.framework, kernel=req.kernel, mix_kernels=req.mix_kernels)
    fitted = fitted_profile(result, req.measurements, req.holdout, req.name)
    return CalibrationRun(result, fitted, _write(req, result, fitted))


def _check(req: CalibrationRequest) -> None:
    if req.starts < 1:
        raise SpecsimError(f"--starts must be >= 1, got {req.starts}")
    if req.max_rel_std < 0:
        raise SpecsimError(f"--max-rel-std must be >= 0, got {req.max_rel_std}")
    if req.output.suffix not in (".yaml", ".yml"):
        raise SpecsimError(f"--output must end in .yaml or .yml, got {req.output}")
    check_target(req.output)  # before the fit


def _write(req: CalibrationRequest, result: Calibration, fitted: HardwareProfile) -> tuple[Path, ...]:
    """Write the profile and (unless `no_plots`) its figures as one set; returns the figures' paths."""
    figs: tuple[Path, ...] = ()
    output = req.output
    with Outputs() as outs:  # the profile and its figures as one set: all written, or none
        staged = outs.path(output)
        write_profile(fitted, staged)
        if not req.no_plots:
            from specsim.calibration.plots import calibration_plots

            folder = req.plots or output.parent
            if not folder.is_dir():
                raise SpecsimError(f"--plots: {folder} is not a folder")
            same = folder.resolve() == output.parent.resolve()
            drawn = calibration_plots(result.rows, staged.parent if same else outs.folder(folder, "--plots"),
                                      output.stem, fitted.name)
            figs = tuple(folder / f.name for f in drawn)
    return figs
