"""The engine's speculation policy: which draft length k a decode step uses at a given batch size.

Forms: off; a static k; a per-batch schedule of (batch_from, batch_to, k) ranges; either with a batch
above which speculation is switched off (vLLM's former ``speculative_disable_by_batch_size``). The
"batch" is the number of sequences decoding in the step.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from specsim.errors import SpecsimError

_SPAN = re.compile(r"^(\d{1,7})-(\d{1,7}):(?:k=)?(\d{1,3})$")
_K = re.compile(r"^(?:k=)?(\d{1,3})$")
_OFF = re.compile(r"^off>(\d{1,7})$")


@dataclass(frozen=True)
class SpecPolicy:
    """k per decode batch. Batches outside every schedule range use `k` (0 = no speculation)."""

    k: int = 0
    schedule: tuple[tuple[int, int, int], ...] = ()  # (batch_from, batch_to, k), inclusive, non-overlapping
    disable_above_batch: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int | np.integer) or self.k < 0:
            raise SpecsimError(f"speculation: field 'k' must be an integer >= 0, got {self.k!r}")
        spans = sorted(self.schedule)
        for i, span in enumerate(spans):
            if len(span) != 3 or any(isinstance(v, bool) or not isinstance(v, int | np.integer) for v in span):
                raise SpecsimError(f"speculation: schedule entries must be [batch_from, batch_to, k] integers, "
                                   f"got {list(span)!r}")
            lo, hi, k = span
            if lo < 1 or hi < lo or k < 0:
                raise SpecsimError(f"speculation: schedule entry {list(span)} needs 1 <= batch_from <= batch_to "
                                   "and k >= 0")
            if i and lo <= spans[i - 1][1]:
                raise SpecsimError(f"speculation: schedule ranges {list(spans[i - 1])} and {list(span)} overlap")
        if self.disable_above_batch is not None and (
                isinstance(self.disable_above_batch, bool) or self.disable_above_batch < 0):
            raise SpecsimError(f"speculation: field 'disable_above_batch' must be an integer >= 0, "
                               f"got {self.disable_above_batch!r}")
        object.__setattr__(self, "schedule", tuple(tuple(int(v) for v in s) for s in spans))

    @classmethod
    def off(cls) -> SpecPolicy:
        return cls()

    @classmethod
    def static(cls, k: int, disable_above_batch: int | None = None) -> SpecPolicy:
        return cls(k=k, disable_above_batch=disable_above_batch)

    @classmethod
    def by_batch(cls, schedule: Iterable[tuple[int, int, int]], disable_above_batch: int | None = None,
                 default_k: int = 0) -> SpecPolicy:
        return cls(k=default_k, schedule=tuple(tuple(s) for s in schedule),  # type: ignore[misc]
                   disable_above_batch=disable_above_batch)

    @property
    def max_k(self) -> int:
        return max([self.k, *(s[2] for s in self.schedule)])

    @property
    def enabled(self) -> bool:
        return self.max_k > 0

    @property
    def label(self) -> str:
        if not self.enabled:
            return "off"
        text = f"k={self.k}" if not self.schedule else ",".join(f"{a}-{b}:k={k}" for a, b, k in self.schedule)
        if self.schedule and self.k:
            text += f",else k={self.k}"
        return text + (f",off>{self.disable_above_batch}" if self.disable_above_batch is not None else "")

    def k_table(self, max_batch: int) -> npt.NDArray[np.int64]:
        """k for every batch 0..max_batch (index = batch)."""
        out = np.full(max_batch + 1, self.k, dtype=np.int64)
        for lo, hi, k in self.schedule:
            out[lo:hi + 1] = k
        if self.disable_above_batch is not None:
            out[self.disable_above_batch + 1:] = 0
        out[0] = 0
        return out

    def k_for_batch(self, batch: int) -> int:
        return int(self.k_table(batch)[batch])

    @classmethod
    def parse(cls, text: str, option: str = "--policy") -> SpecPolicy:
        """From text: ``off``; ``k=4`` (or ``4``); ``1-16:4,17-64:2`` (batch ranges, ``:k=4`` too); with
        ``off>64`` to switch off above a batch and ``k=N`` as the k outside the ranges; the `label` of a
        policy reads back as the same policy."""
        items = [x.strip() for x in str(text).replace("else ", "").split(",")]
        if items == ["off"]:
            return cls.off()
        k, spans, off_above = 0, [], None
        for item in items:
            m = _SPAN.match(item)
            if m:
                spans.append((int(m.group(1)), int(m.group(2)), int(m.group(3))))
            elif m := _K.match(item):
                k = int(m.group(1))
            elif m := _OFF.match(item):
                off_above = int(m.group(1))
            else:
                raise SpecsimError(f"{option}: cannot read {item!r} in {text!r} (use off, k=4, 1-16:4,17-64:2, "
                                   "k=4,off>64)")
        if len(str(text)) > 4000 or len(spans) > 1000:
            raise SpecsimError(f"{option}: too long ({len(spans)} ranges)")
        return cls(k, tuple(spans), off_above)
