"""What a fitted profile records about its fit (its `provenance` and efficiency `source` line)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from specsim.calibration.fit import Calibration
from specsim.cost.hardware_profile import HardwareProfile


@dataclass(frozen=True)
class CalibrationProvenance:
    """What the profile was fitted on, when, with which parameters, and how well it fits (the
    fields in the order the profile YAML lists them)."""

    fitted_by: str
    date: str  # UTC, ISO 8601 to the second
    base_profile: str
    measurements: str
    measurements_sha256: str | None  # None when `measurements` is not a file
    rows_fitted: int
    rows_held_out: int
    holdout: str | None
    rows_dropped_noisy: int
    params: tuple[str, ...]
    mape_pct_fitted: float | None
    mape_pct_held_out: float | None
    mape_pct_by_group: dict[str, float]  # "rows: group" -> MAPE, token bands of the `--by` groups left out


def file_sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def provenance(cal: Calibration, measurements: str | Path, holdout: str | None, when: dt.datetime | None = None,
               ) -> CalibrationProvenance:
    """What the profile was fitted on, when, with which parameters, and how well it fits."""
    when = when or dt.datetime.now(dt.UTC)
    rep = cal.report.set_index(["rows", "group"])["mape_pct"]
    by_group = cast("Iterable[tuple[tuple[str, str], float]]", rep.items())  # ((rows, group), MAPE)

    def mape(subset: str, group: str = "all") -> float | None:
        return round(float(rep[(subset, group)]), 2) if (subset, group) in rep.index else None

    return CalibrationProvenance(
        fitted_by="specsim calibrate",
        date=when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        base_profile=cal.base.name,
        measurements=str(measurements),
        measurements_sha256=file_sha256(measurements) if Path(measurements).is_file() else None,
        rows_fitted=int((~cal.held).sum()),
        rows_held_out=int(cal.held.sum()),
        holdout=holdout,
        rows_dropped_noisy=cal.dropped_noisy,
        params=(*cal.params, *(["allreduce (per world size)"] if cal.allreduce else [])),
        mape_pct_fitted=mape("fitted"),
        mape_pct_held_out=mape("held-out"),
        mape_pct_by_group={f"{r}: {g}": round(float(v), 2) for (r, g), v in by_group
                           if g.startswith("op=") or g == "all" or " tokens=" not in g},
    )


def fitted_profile(cal: Calibration, measurements: str | Path, holdout: str | None, name: str | None = None,
                   when: dt.datetime | None = None) -> HardwareProfile:
    """The fitted profile with its provenance and an efficiency `source` line saying how it was made."""
    prov = provenance(cal, measurements, holdout, when)
    held = f", {prov.mape_pct_held_out}% on {prov.rows_held_out} held-out rows" if prov.rows_held_out else ""
    source = (f"fitted by `specsim calibrate` on {prov.date[:10]} to {prov.rows_fitted} rows of "
              f"{Path(str(measurements)).name} (params: {', '.join(prov.params)}); mean absolute error "
              f"{prov.mape_pct_fitted}% on the fitted rows{held}")
    eff = dataclasses.replace(cal.fitted.efficiency, source=source)
    return dataclasses.replace(cal.fitted, name=name or f"{cal.base.name}-fitted", efficiency=eff,
                               provenance=dataclasses.asdict(prov), source_path="")
