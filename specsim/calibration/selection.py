"""Which rows a calibration uses: one framework or kernel, the base profile's device, known ops,
never several kernels of one op silently, quiet rows only; and which of them are held out."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import numpy as np
import pandas as pd

from specsim.calibration.allreduce import allreduce_impl
from specsim.calibration.params import SINGLE_KERNEL_OPS
from specsim.cost.measurements import NEEDS
from specsim.errors import SpecsimError


def parse_holdout(spec: str, df: pd.DataFrame) -> np.ndarray:
    """'COLUMN=V1,V2' holds out rows whose COLUMN is one of the values; 'COLUMN!=V' all other rows."""
    neg = "!=" in spec
    if "=" not in spec:
        raise SpecsimError(f"--holdout: expected COLUMN=VALUE or COLUMN!=VALUE, got {spec!r}")
    col, _, value = spec.partition("!=" if neg else "=")
    col = col.strip()
    if col not in df.columns:
        raise SpecsimError(f"--holdout: no column {col!r} in the measurements (columns: {', '.join(df.columns)})")
    values = {v.strip() for v in value.split(",")}
    cells = df[col].astype(str).str.strip()
    numeric = pd.to_numeric(df[col], errors="coerce")
    hit = cells.isin(values)
    for v in values:
        with contextlib.suppress(ValueError):
            hit |= numeric == float(v)
    if not hit.any():
        raise SpecsimError(f"--holdout: no row has {col} = {value!r}")
    return (~hit if neg else hit).to_numpy()


def kernel_groups(df: pd.DataFrame) -> dict[str, list[str]]:
    """For each (op, dtype[, impl]) of the single-kernel ops, the distinct 'framework/kernel' pairs
    its rows were timed with (blank framework and kernel count as one unnamed kernel)."""
    out: dict[str, list[str]] = {}
    if df.empty:
        return out
    fw = df["framework"].fillna("").astype(str) if "framework" in df else pd.Series("", index=df.index)
    kern = df["kernel"].fillna("").astype(str) if "kernel" in df else pd.Series("", index=df.index)
    label = (fw + "/" + kern).str.strip("/")
    impl = allreduce_impl(df).where(df["op"] == "allreduce", "")
    key = df["op"].astype(str) + " " + df["dtype"].fillna("").astype(str) + impl.map(lambda x: f" {x}" if x else "")
    for k, g in label.groupby(key):
        op = k.split(" ")[0]
        if op in SINGLE_KERNEL_OPS:
            out[k] = sorted(set(g))
    return out


def select_rows(df: pd.DataFrame, framework: str | None = None, kernel: str | None = None) -> pd.DataFrame:
    """Rows of one framework (column `framework`) and/or kernels whose name contains `kernel`."""
    d = df
    for col, value in (("framework", framework), ("kernel", kernel)):
        if not value:
            continue
        if col not in d.columns:
            raise SpecsimError(f"--{col}: the measurements have no '{col}' column")
        cells = d[col].fillna("").astype(str)
        hit = cells.str.lower() == value.lower() if col == "framework" else cells.str.contains(value, regex=False)
        if not hit.any():
            known = ", ".join(sorted(set(cells))[:12])
            raise SpecsimError(f"--{col}: no row has {col} {value!r} (present: {known})")
        d = d[hit.to_numpy()]
    return d


def calibration_rows(df: pd.DataFrame, device: str, ops: Sequence[str] | None = None, all_devices: bool = False,
                     framework: str | None = None, kernel: str | None = None, mix_kernels: bool = False,
                     max_rel_std: float = 1.0) -> tuple[pd.DataFrame, dict[str, int], int]:
    """(rows to calibrate `device` on, {why: rows skipped}, rows dropped as noisy).

    Rows of one (op, dtype[, all-reduce implementation]) timed with more than one framework/kernel
    are refused (fits never silently mix kernels) unless `mix_kernels`; `framework` / `kernel`
    select rows first."""
    skipped: dict[str, int] = {}
    d = select_rows(df, framework, kernel).copy()
    if not all_devices:
        other = (d["device"] != "") & (d["device"] != device)
        if other.any():
            skipped["other devices"] = int(other.sum())
        d = d[~other]
    d = _known_ops(d, ops, skipped)
    if d.empty:
        raise SpecsimError(f"no rows to calibrate {device} on (rows of other devices or ops: "
                           f"{', '.join(f'{k}: {v}' for k, v in skipped.items()) or 'none'}; try --all-devices)")
    mixed = {k: v for k, v in kernel_groups(d).items() if len(v) > 1}
    if mixed and not mix_kernels:
        detail = "; ".join(f"{k}: {', '.join(v)}" for k, v in mixed.items())
        raise SpecsimError(f"the rows mix kernels ({detail}); choose one with --framework / --kernel, or pass "
                           "--mix-kernels to fit them together")
    dropped = 0
    if "std_ms" in d.columns and max_rel_std > 0:
        noisy = (pd.to_numeric(d["std_ms"], errors="coerce") / d["time_ms"] > max_rel_std).to_numpy()
        dropped = int(noisy.sum())
        d = d[~noisy]
    return d.reset_index(drop=True), skipped, dropped


def _known_ops(d: pd.DataFrame, ops: Sequence[str] | None, skipped: dict[str, int]) -> pd.DataFrame:
    """Rows of `ops` (all when None) that the cost model predicts; counts the others into `skipped`."""
    if ops:
        bad = [o for o in ops if o not in NEEDS]
        if bad:
            raise SpecsimError(f"--ops: unknown op(s) {', '.join(bad)} (known: {', '.join(NEEDS)})")
        keep = d["op"].isin(list(ops))
        if (~keep).any():
            skipped["other ops"] = int((~keep).sum())
        d = d[keep]
    unknown_op = ~d["op"].isin(list(NEEDS))
    if unknown_op.any():
        skipped["unknown op"] = int(unknown_op.sum())
        d = d[~unknown_op]
    return d
