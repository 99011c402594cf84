"""An entry fed back in its own source shape: the figures the model gives against the published ones."""

from __future__ import annotations

from dataclasses import dataclass

from specsim.acceptance.priors.entries import PriorEntry


@dataclass(frozen=True)
class Reproduction:
    """An entry fed back in its own source shape: the model's figure against the published one."""

    entry_id: str
    quantity: str
    published: float
    model: float

    @property
    def rel_error(self) -> float:
        """model / published - 1 (the absolute difference when the published figure is 0)."""
        return self.model / self.published - 1.0 if self.published else self.model - self.published


def reproduce(entry: PriorEntry) -> list[Reproduction]:
    """The entry's published figures recomputed from its fitted rates in its own shape."""
    out = []
    pub = entry.published
    if "tau" in pub and entry.shape is not None:
        out.append(Reproduction(entry.id, "tau", float(pub["tau"]), entry.tau_for(entry.shape)))
    if "conditional" in pub:
        for i, c in enumerate(pub["conditional"]):
            out.append(Reproduction(entry.id, f"c{i + 1}", float(c), entry.rates[i]))
    if "alpha" in pub:
        out.append(Reproduction(entry.id, "alpha", float(pub["alpha"]), entry.rates[0]))
    return out
