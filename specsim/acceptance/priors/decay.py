"""Decay models (per-position shapes by method group) read from the catalogue, and the fit of a
first-position rate to a published tau through them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from specsim.acceptance.priors.fields import conditional_of, is_synthetic
from specsim.acceptance.priors.names import method_info
from specsim.acceptance.priors.shapes import MAX_DEPTH, RATE_CAP, FloatArray, Shape, tau_grid


@dataclass(frozen=True)
class DecayModel:
    """Conditional rate at position i relative to position 1, for a group of methods.

    ``relative[i-1]`` is the median over the catalogue's per-position entries of ``c_i / c_1``
    (positions with at least 3 entries); past them each position multiplies by ``tail_ratio`` (the
    median ratio of the last two measured positions). Rates are capped at ``RATE_CAP``.
    """

    group: str
    relative: tuple[float, ...]
    tail_ratio: float
    evidence: tuple[str, ...]  # entry ids the shape was read from
    source: str

    def relative_curve(self, depth: int = MAX_DEPTH) -> FloatArray:
        """c_i / c_1 for i = 1..depth: the measured medians, then ``tail_ratio`` per position."""
        rel = np.empty(depth)
        n = min(depth, len(self.relative))
        rel[:n] = self.relative[:n]
        if depth > n:
            rel[n:] = rel[n - 1] * self.tail_ratio ** np.arange(1, depth - n + 1)
        return rel

    def rates_from_first(self, first: float | FloatArray, depth: int = MAX_DEPTH) -> FloatArray:
        """Rates for a first-position rate (scalar, or an array: one row per value)."""
        f = np.asarray(first, dtype=float)
        return np.clip(f[..., None] * self.relative_curve(depth), 0.0, RATE_CAP)

    def extend(self, measured: Sequence[float], depth: int = MAX_DEPTH) -> FloatArray:
        """Measured rates, continued past their depth along this model: ``c_i = c_n rel_i / rel_n``."""
        m = np.asarray(measured, dtype=float)
        n = min(depth, m.size)
        rel = self.relative_curve(depth)
        out = np.empty(depth)
        out[:n] = m[:n]
        if depth > n:
            out[n:] = m[n - 1] * rel[n:] / max(rel[n - 1], 1e-9)
        return np.clip(out, 0.0, RATE_CAP)

    def describe(self) -> str:
        shown = ", ".join(f"{r:.2f}" for r in self.relative[:6])
        return (f"{self.group} decay model: c_i / c_1 = {shown}{', ...' if len(self.relative) > 6 else ''}, then "
                f"x{self.tail_ratio:.3f} per position ({self.source})")


def derive_decay_models(raw: Sequence[Mapping[str, Any]]) -> dict[str, DecayModel]:
    """One decay model per method group, from the catalogue's per-position entries; the groups without
    enough of them borrow another group's model (stated in its source) or the i.i.d. one."""
    per_group: dict[str, list[tuple[str, list[float]]]] = defaultdict(list)
    for e in raw:
        cond = conditional_of(e)
        if cond and len(cond) >= 2 and not is_synthetic(e) and cond[0] > 0.3 and "derived" not in e:
            per_group[method_info(e["method"]).decay_group].append((e["id"], cond))
    models = {group: model for group, items in per_group.items()
              if (model := _median_model(group, items)) is not None}
    # Medusa: heads predict independently, so conditional acceptance of head i is modelled as its
    # marginal top-1 accuracy relative to head 1 (FasterDecoding/Medusa assets/medusa_acc.csv).
    heads = [(e["id"], [float(x) for x in e["marginal_head_accuracy"]]) for e in raw if e.get("marginal_head_accuracy")]
    if heads:
        rel = np.median([np.asarray(a) / a[0] for _, a in heads], axis=0)
        models["medusa"] = DecayModel("medusa", tuple(float(x) for x in rel), float(rel[-1] / rel[-2]),
                                      tuple(i for i, _ in heads), "Medusa heads' marginal top-1 accuracy by head "
                                      "(independent heads), medusa_acc.csv")
    # i.i.d. drafts: Leviathan et al.'s model (one alpha for every position), as their source states it.
    models["iid"] = DecayModel("iid", (1.0,), 1.0, (), "Leviathan et al. 2022's i.i.d. alpha model")
    for group in ("dflash", "dspark"):
        models.setdefault(group, models.get("eagle3", models["iid"]))
    models.setdefault("mtp", models.get("eagle3", models["iid"]))
    models.setdefault("lookup", models["iid"])
    return models


def _median_model(group: str, items: Sequence[tuple[str, list[float]]]) -> DecayModel | None:
    """The median ``c_i / c_1`` of a group's per-position entries (None when too few back it)."""
    rel_by_pos: dict[int, list[float]] = defaultdict(list)
    tails = []
    for _, cond in items:
        for i, c in enumerate(cond):
            rel_by_pos[i].append(c / cond[0])
        tails.append(cond[-1] / cond[-2] if cond[-2] > 0 else 1.0)
    need = min(3, len(items))  # positions backed by at least 3 entries (2 in a group of 2)
    relative = [float(np.median(rel_by_pos[i])) for i in sorted(rel_by_pos) if len(rel_by_pos[i]) >= need]
    if len(items) < 2 or len(relative) < 2:
        return None
    # deeper positions are not easier for a learned drafter (cap 1); lookup drafts may rise
    tail = float(np.clip(np.median(tails), 0.85, 1.05 if group == "lookup" else 1.0))
    return DecayModel(group, tuple(relative), tail, tuple(i for i, _ in items),
                      f"median of {len(items)} per-position catalogue entries")


_GRID = np.linspace(0.002, RATE_CAP, 2000)


@cache
def _curve(model: DecayModel, shape: Shape) -> FloatArray:
    """tau on the grid of first-position rates, for one decay model and one shape (cached)."""
    return tau_grid(model.rates_from_first(_GRID), shape)


def fit_first(model: DecayModel, shape: Shape, tau: float) -> float:
    """The first-position rate whose rates reproduce ``tau`` in ``shape``: linear interpolation on the
    cached monotone curve (2,000 points; the published figures are reproduced to about 1e-4)."""
    curve = _curve(model, shape)
    return float(np.interp(tau, curve, _GRID))
