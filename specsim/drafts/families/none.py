"""Plain decoding (k = 0): no draft, nothing to verify beyond the step's own token."""

from __future__ import annotations

from dataclasses import dataclass

from specsim.drafts.family import Family


@dataclass(frozen=True)
class NoDraft(Family):
    """No speculation: no drafting pass, no memory; ``make_draft`` gives it acceptance 0."""

    name: str = "none"
    speculates: bool = False


NONE = NoDraft("none")
