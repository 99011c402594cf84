"""Reading a raw catalogue entry's fields (``data/priors.yaml``): numbers, per-position rates, synthetic runs."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np


def num(x: Any) -> float | None:
    """A finite number, or None (absent, a bool, text, NaN or infinite)."""
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def conditional_of(e: Mapping[str, Any]) -> list[float] | None:
    """The entry's conditional per-position rates: as given, or from its cumulative (unconditional) ones."""
    if e.get("conditional"):
        return [float(x) for x in e["conditional"]]
    if e.get("cumulative"):
        u = np.asarray(e["cumulative"], dtype=float)
        prev = np.concatenate([[1.0], u[:-1]])
        return [float(x) for x in np.where(prev > 0, u / np.where(prev > 0, prev, 1.0), 0.0)]
    return None


def is_synthetic(e: Mapping[str, Any]) -> bool:
    """Random-token benchmarks: measured, but not a workload prior."""
    text = f"{e.get('notes', '')} {e.get('dataset', '')}".lower()
    return "synthetic" in text or "random-token" in text or "random tokens" in text
