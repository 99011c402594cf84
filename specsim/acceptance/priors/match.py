"""A lookup's answer: the chosen prior's central, low and high rates with their provenance."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from specsim.acceptance.chain import AcceptanceProfile
from specsim.acceptance.priors.shapes import FloatArray, Shape, scale_to, tau_of
from specsim.acceptance.trees import Tree

#: One-sided z of the band: low/high are the 10th/90th percentiles of a log-normal (tau - 1).
BAND_Z = 1.2816

MEASURE_YOURS = ("measure yours: scrape the engine's /metrics before and after a representative window of "
                 "your traffic and give both (a scenario draft's acceptance: {before: B, after: A})")


@dataclass(frozen=True)
class RateModel:
    """Conditional per-depth rates with the tau of any shape (a prior's central, low or high case)."""

    conditional_rates: tuple[float, ...]

    def tau_for(self, shape: Shape | Tree | int) -> float:
        return tau_of(self.conditional_rates, shape)

    def unconditional(self, k: int) -> tuple[float, ...]:
        """P(draft i accepted), i = 1..k (vLLM's per-position convention)."""
        return tuple(float(x) for x in np.cumprod(self.conditional_rates[:k]))


@dataclass(frozen=True)
class Band:
    """Central rates and the band around them: low / high are (tau - 1) in the reference shape moved
    by ``exp(-+ BAND_Z sigma)`` (``sigma_low`` below: it may reach further down)."""

    central: RateModel
    low: RateModel
    high: RateModel

    @classmethod
    def around(cls, central: FloatArray, sigma: float, sigma_low: float, ref: Shape) -> Band:
        low = scale_to(central, math.exp(-BAND_Z * sigma_low), ref)
        high = scale_to(central, math.exp(BAND_Z * sigma), ref)
        return cls(*(RateModel(tuple(float(x) for x in r)) for r in (central, low, high)))

    def label(self, ref: Shape) -> str:
        """``<shape>: tau <central>, band <low>-<high>`` for a note."""
        lo, mid, hi = self.low.tau_for(ref), self.central.tau_for(ref), self.high.tau_for(ref)
        return f"{ref.label()}: tau {mid:.2f}, band {lo:.2f}-{hi:.2f}"


@dataclass(frozen=True)
class PriorMatch:
    """The prior chosen for a question, with its band and provenance (see the package docstring)."""

    method: str
    entry_id: str
    entry_ids: tuple[str, ...]
    distance: float
    components: Mapping[str, float]
    central: RateModel
    low: RateModel
    high: RateModel
    measured_depth: int
    sigma: float  # standard deviation of log(tau - 1) the band is drawn from
    reference: Shape
    note: str
    source: str
    adjustments: tuple[str, ...] = ()

    @property
    def conditional_rates(self) -> tuple[float, ...]:
        return self.central.conditional_rates

    def tau_for(self, shape: Shape | Tree | int) -> float:
        return self.central.tau_for(shape)

    def tau_band(self, shape: Shape | Tree | int) -> tuple[float, float, float]:
        """(low, central, high) tokens per step in ``shape``."""
        return self.low.tau_for(shape), self.central.tau_for(shape), self.high.tau_for(shape)

    def profile(self, which: str = "central") -> AcceptanceProfile:
        """An AcceptanceProfile of the central / low / high rates for the planner (no flat tail)."""
        rm = {"central": self.central, "low": self.low, "high": self.high}[which]
        lo, mid, hi = self.tau_band(self.reference)
        src = (f"prior {self.entry_id} ({which}); {self.reference.label()} tau {mid:.2f} "
               f"[{lo:.2f}-{hi:.2f}]")
        return AcceptanceProfile(rm.conditional_rates, None, src, self.note, True)
