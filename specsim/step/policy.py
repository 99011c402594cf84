"""The speculation policy over load: which configuration a decode step runs at each batch size.

One typed form for every use: the planner's schedule (contiguous batch bands, each a chain length or a
tree, `None` where nothing fits in memory), the engine's per-batch k the simulator runs, and the text form
(``off``, ``k=4``, ``1-16:4,17-64:2``, ``k=4,off>64``) users write. Batches outside every band use `k`;
above `disable_above_batch` speculation is off (vLLM's former ``speculative_disable_by_batch_size``). The
"batch" is the number of sequences decoding in the step.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from specsim.errors import SpecsimError

if TYPE_CHECKING:
    from specsim.drafts.draft import Draft

_SPAN = re.compile(r"^(\d{1,7})-(\d{1,7}):(?:k=)?(\d{1,3})$")
_K = re.compile(r"^(?:k=)?(\d{1,3})$")
_OFF = re.compile(r"^off>(\d{1,7})$")


@dataclass(frozen=True)
class Config:
    """One speculative configuration of a draft: k draft passes (chain length or tree depth), and for
    a tree the candidates expanded per level and the draft nodes verified (root excluded)."""

    k: int
    topk: int = 1
    nodes: int | None = None

    @property
    def is_tree(self) -> bool:
        return self.topk > 1 and self.nodes is not None and self.nodes > self.k

    def verify_tokens(self, d: Draft) -> int:
        """Tokens per sequence in the verification pass: a tree's nodes + the root; a chain what its
        method feeds the target (k + 1, or lookahead's 1 + (W + G) k branches: Fu et al. 2024 §3)."""
        return 1 + int(self.nodes or 0) if self.is_tree else int(self.draft(d).verify_tokens_per_seq(self.k))

    def draft(self, d: Draft) -> Draft:
        """The draft drafting this configuration."""
        return d.with_tree(self.topk, self.nodes) if self.is_tree else d.with_tree(1, None)


@dataclass(frozen=True)
class Segment:
    """One band of the policy: batches batch_from..batch_to (inclusive) run `config` (None: nothing fits in
    memory there), verifying `verify_tokens` tokens per sequence."""

    batch_from: int
    batch_to: int
    config: Config | None
    verify_tokens: int

    @classmethod
    def chain(cls, batch_from: int, batch_to: int, k: int) -> Segment:
        return cls(int(batch_from), int(batch_to), Config(int(k)), int(k) + 1)

    @property
    def k(self) -> int:
        return -1 if self.config is None else self.config.k

    @property
    def topk(self) -> int:
        return self.config.topk if self.config is not None and self.config.is_tree else 1

    @property
    def num_draft_tokens(self) -> int | None:
        c = self.config
        return int(c.nodes) if c is not None and c.is_tree and c.nodes is not None else None

    def same_config(self, other: Segment) -> bool:
        return (self.k, self.topk, self.num_draft_tokens, self.verify_tokens) == (
            other.k, other.topk, other.num_draft_tokens, other.verify_tokens)

    def record(self) -> dict[str, int | None]:
        """The band as written in plans and engine configs."""
        return {"batch_from": self.batch_from, "batch_to": self.batch_to, "k": self.k, "topk": self.topk,
                "num_draft_tokens": self.num_draft_tokens, "verify_tokens": self.verify_tokens}


def _check_span(span: object) -> Segment:
    if isinstance(span, Segment):
        return span
    if (not isinstance(span, tuple | list) or len(span) != 3
            or any(isinstance(v, bool) or not isinstance(v, int | np.integer) for v in span)):
        raise SpecsimError(f"speculation: schedule entries must be [batch_from, batch_to, k] integers, "
                           f"got {list(span) if isinstance(span, tuple | list) else span!r}")
    lo, hi, k = span
    if lo < 1 or hi < lo or k < 0:
        raise SpecsimError(f"speculation: schedule entry {list(span)} needs 1 <= batch_from <= batch_to "
                           "and k >= 0")
    return Segment.chain(lo, hi, k)


@dataclass(frozen=True)
class Policy:
    """The configuration per decode batch: `schedule` bands (given as Segments or (batch_from, batch_to, k)
    triples), `k` outside every band (0 = no speculation), off above `disable_above_batch`."""

    k: int = 0
    schedule: tuple[Segment, ...] = ()
    disable_above_batch: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int | np.integer) or self.k < 0:
            raise SpecsimError(f"speculation: field 'k' must be an integer >= 0, got {self.k!r}")
        spans = sorted((_check_span(s) for s in self.schedule), key=lambda g: (g.batch_from, g.batch_to))
        for i, span in enumerate(spans):
            if i and span.batch_from <= spans[i - 1].batch_to:
                prev = spans[i - 1]
                raise SpecsimError(f"speculation: schedule ranges {[prev.batch_from, prev.batch_to, prev.k]} and "
                                   f"{[span.batch_from, span.batch_to, span.k]} overlap")
        if self.disable_above_batch is not None and (
                isinstance(self.disable_above_batch, bool) or self.disable_above_batch < 0):
            raise SpecsimError(f"speculation: field 'disable_above_batch' must be an integer >= 0, "
                               f"got {self.disable_above_batch!r}")
        object.__setattr__(self, "k", int(self.k))
        object.__setattr__(self, "schedule", tuple(spans))

    @classmethod
    def off(cls) -> Policy:
        return cls()

    @classmethod
    def static(cls, k: int, disable_above_batch: int | None = None) -> Policy:
        return cls(k=k, disable_above_batch=disable_above_batch)

    @classmethod
    def of_ranges(cls, k: int, ranges: Iterable[Sequence[int]], disable_above_batch: int | None = None) -> Policy:
        """From (batch_from, batch_to, k) ranges as users write them (checked: integers, k >= 0, no overlap)."""
        return cls(k, tuple(_check_span(r) for r in ranges), disable_above_batch)

    @classmethod
    def bands(cls, segments: Iterable[Segment]) -> Policy:
        """A planner's schedule: contiguous bands, nothing outside them."""
        return cls(0, tuple(segments))

    @property
    def max_k(self) -> int:
        return max([self.k, *(s.k for s in self.schedule)])

    @property
    def enabled(self) -> bool:
        return self.max_k > 0

    @property
    def top_batch(self) -> int | None:
        """The last band's upper batch (None without bands)."""
        return self.schedule[-1].batch_to if self.schedule else None

    @property
    def label(self) -> str:
        if not self.enabled:
            return "off"
        text = (f"k={self.k}" if not self.schedule else
                ",".join(f"{s.batch_from}-{s.batch_to}:k={s.k}" for s in self.schedule))
        if self.schedule and self.k:
            text += f",else k={self.k}"
        return text + (f",off>{self.disable_above_batch}" if self.disable_above_batch is not None else "")

    def records(self) -> list[dict[str, int | None]]:
        """The bands as written in plans and engine configs."""
        return [s.record() for s in self.schedule]

    def k_table(self, max_batch: int) -> npt.NDArray[np.int64]:
        """k for every batch 0..max_batch (index = batch); a band where nothing fits runs no speculation."""
        out = np.full(max_batch + 1, self.k, dtype=np.int64)
        for s in self.schedule:
            out[s.batch_from:s.batch_to + 1] = max(s.k, 0)
        if self.disable_above_batch is not None:
            out[self.disable_above_batch + 1:] = 0
        out[0] = 0
        return out

    def k_for_batch(self, batch: int) -> int:
        return int(self.k_table(batch)[batch])

    def as_run(self) -> Policy:
        """The chain policy an engine runs from a planner's bands: k per band (no fit counts as off) and past
        the last band its k continues (the analytic arrival plan gives one band up to its batch)."""
        spans = [(s.batch_from, s.batch_to, max(s.k, 0)) for s in self.schedule]
        if not spans:
            return Policy.off() if not self.k else Policy.static(self.k, self.disable_above_batch)
        last = spans[-1][2]
        return Policy.of_ranges(last, [sp for sp in spans if sp[2] != last])

    def as_bands(self, max_batch: int) -> Policy:
        """The policy as contiguous chain bands over batch 1..max_batch (what engine configs render)."""
        out: list[list[int]] = []
        for b, k in enumerate(self.k_table(max_batch)[1:].tolist(), start=1):
            if out and out[-1][2] == k:
                out[-1][1] = b
            else:
                out.append([b, b, int(k)])
        return Policy.bands(Segment.chain(*band) for band in out)

    @classmethod
    def parse(cls, text: str, option: str = "--policy") -> Policy:
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
        return cls.of_ranges(k, spans, off_above)
