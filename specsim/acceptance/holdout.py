"""How good the priors are: the lookup's tau against published measurements it was not given.

Two measurements, both without the measured acceptance (priors only):

* ``catalogue_holdout``: every catalogue entry with a published tau, predicted by the lookup with
  every entry of the same source left out (leave-one-source-out), in the entry's own shape;
* ``published_holdout``: the published-results corpus (``specsim/validation/data/published.csv``):
  each row with a reported acceptance (tau, or Leviathan's alpha) mapped to a lookup question
  (method, target, draft, task from the dataset, temperature, the shape the source ran), in-sample
  (everything in the catalogue) or held out (the row's own source left out).

At a fixed configuration the step time does not depend on acceptance, so a speedup predicted from
a prior is off from the one predicted from the published acceptance by exactly ``tau_prior /
tau_published`` (step/economics.py: speedup = tokens per step x baseline step / step time): that ratio
minus 1 is the error the prior adds to every speedup, on top of the cost model's own.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from specsim.acceptance.chain import expected_tokens
from specsim.acceptance.priors import PriorEntry, Shape, load_catalogue, lookup, params_of_name, task_of_dataset
from specsim.acceptance.priors.names import method_info
from specsim.errors import SpecsimError

_ARXIV = re.compile(r"\d{4}\.\d{5}")
#: Distinctive names that identify a source across the catalogue's and the corpus's spellings.
_SOURCE_TOKENS = ("Spec-Bench", "Leviathan", "tech blog 7", "tech blog 2", "P-EAGLE", "Multiple Token Prediction",
                  "MiniMax", "Kimi K3", "SpecForge", "speculators-dashboard", "Sequoia", "MagicDec", "Medusa",
                  "TriForce", "Lookahead", "prompt-lookup-decoding")


def source_keys(source: str) -> tuple[str, ...]:
    """Substrings that identify a source (arXiv ids and distinctive names): what a held-out question
    excludes from the catalogue."""
    keys = set(_ARXIV.findall(source))
    low = source.lower()
    keys.update(t for t in _SOURCE_TOKENS if t.lower() in low)
    if not keys:
        keys.add(source.split(",")[0].strip())
    return tuple(sorted(keys))


def source_excluder(source: str) -> Any:
    """A lookup `exclude` that leaves out every catalogue entry from this source (``source_keys``)."""
    return _excluder(source_keys(source))


def _excluder(keys: Sequence[str]) -> Any:
    low = [k.lower() for k in keys]

    def excluded(e: PriorEntry) -> bool:
        src = e.source.lower()
        return any(k in src for k in low)

    return excluded


@dataclass(frozen=True)
class HoldoutRow:
    """One prediction: the published tau and the prior's (central, low, high)."""

    id: str
    group: str
    method: str
    published: float
    central: float
    low: float
    high: float
    entry_id: str

    @property
    def error(self) -> float:
        """Relative error of the central tau = relative error the prior adds to a speedup."""
        return self.central / self.published - 1.0

    @property
    def covered(self) -> bool:
        return self.low <= self.published <= self.high


def catalogue_holdout(methods: Iterable[str] | None = None) -> list[HoldoutRow]:
    """Every catalogue entry with a published tau, predicted with its own source left out."""
    cat = load_catalogue()
    wanted = set(methods) if methods is not None else None
    rows = []
    for e in cat.entries:
        if e.tau is None or e.shape is None or e.synthetic or (wanted is not None and e.method not in wanted):
            continue
        try:
            m = lookup(e.method, target=e.target, draft=e.draft or None, task=e.task, temperature=e.temperature,
                       shape=e.shape, exclude=_excluder(source_keys(e.source)))
        except SpecsimError:
            continue
        lo, mid, hi = m.tau_band(e.shape)
        rows.append(HoldoutRow(e.id, e.method, e.method, e.tau, mid, lo, hi, m.entry_id))
    return rows


# ---------------------------------------------------------------------------------------------
# the published-results corpus
# ---------------------------------------------------------------------------------------------

UNPRICED = {"triforce"}  # offloading systems whose acceptance the catalogue does not describe


def corpus_path() -> Path:
    return Path(str(resources.files("specsim.validation") / "data" / "published.csv"))


def _f(x: str | None) -> float | None:
    try:
        v = float(x) if x not in (None, "") else None
    except ValueError:
        return None
    return v if v is not None and math.isfinite(v) else None


def row_shape(row: dict[str, str]) -> Shape:
    """The shape a corpus row ran: its own k / topk / verified tokens, else the method's published default."""
    info = method_info(row["draft"])
    k = _f(row.get("k"))
    topk = _f(row.get("topk"))
    ndt = _f(row.get("num_draft_tokens"))
    sglang = row.get("engine", "").lower() == "sglang"  # SGLang counts the root in num_draft_tokens
    if row.get("shape") == "tree" or (topk and topk > 1):
        if k and topk and ndt:
            return Shape("tree", int(k), int(topk), int(ndt) - (1 if sglang else 0))
        if info.sized_tree:
            size = params_of_name(row.get("model", "")) or 7
            nodes = 49 if 10 <= size < 30 else 47 if size >= 30 else 59  # EAGLE-2 App. A: 60 / 50 / 48 tokens
            return Shape("tree", 6, 10, nodes)
        if info.default_tree is not None:
            return info.default_tree
    kind = "parallel" if info.parallel else "chain"
    if k:
        return Shape(kind, int(k))
    if ndt:
        return Shape(kind, int(ndt) - (1 if sglang else 0))
    return Shape(kind, info.default_depth)


def published_tau(row: dict[str, str], shape: Shape) -> float | None:
    """The row's reported tau, or tau from Leviathan's alpha at the row's draft length (i.i.d. model)."""
    tau = _f(row.get("acceptance_length"))
    if tau is not None:
        return tau
    alpha = _f(row.get("acceptance_rate"))
    if alpha is not None and row.get("group") == "leviathan-tpu":
        return float(expected_tokens(alpha, shape.depth))
    return None


def published_holdout(held_out: bool = True, path: str | Path | None = None,
                      stated_hardware: bool = False) -> list[HoldoutRow]:
    """Corpus rows with a reported acceptance, predicted from the priors (own source excluded if held_out)."""
    p = Path(path) if path is not None else corpus_path()
    with open(p, encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    out = []
    for row in rows:
        if row["draft"] in UNPRICED or (stated_hardware and row.get("hardware_confidence") != "stated"):
            continue
        info = method_info(row["draft"])
        shape = row_shape(row)
        tau = published_tau(row, shape)
        if tau is None:
            continue
        temp = _f(row.get("temperature"))
        draft = row.get("draft_model") or None
        if info.sized_draft and draft:
            draft = draft.split("(")[0].strip()
        elif draft and "/" not in draft:
            draft = None  # a generic head name ("eagle-head"): no checkpoint to match
        dataset = row.get("dataset") or None
        task = dataset if dataset and task_of_dataset(dataset) else None  # the benchmark name also picks entries
        try:
            m = lookup(info.name, target=row["model"], draft=draft, task=task, temperature=temp, shape=shape,
                       exclude=_excluder(source_keys(row["source"])) if held_out else ())
        except SpecsimError:
            continue
        lo, mid, hi = m.tau_band(shape)
        out.append(HoldoutRow(row["id"], row["group"], info.name, tau, mid, lo, hi, m.entry_id))
    return out


@dataclass(frozen=True)
class ErrorSummary:
    n: int
    median_abs: float
    median_bias: float
    coverage: float

    def __str__(self) -> str:
        return (f"n={self.n:4d}  median |error| {self.median_abs * 100:5.1f}%  "
                f"median bias {self.median_bias * 100:+5.1f}%  band coverage {self.coverage * 100:4.0f}%")


def summarize(rows: Sequence[HoldoutRow]) -> ErrorSummary:
    if not rows:
        return ErrorSummary(0, float("nan"), float("nan"), float("nan"))
    e = np.array([r.error for r in rows])
    return ErrorSummary(len(rows), float(np.median(np.abs(e))), float(np.median(e)),
                        float(np.mean([r.covered for r in rows])))


def by_group(rows: Sequence[HoldoutRow]) -> dict[str, ErrorSummary]:
    groups: dict[str, list[HoldoutRow]] = {}
    for r in rows:
        groups.setdefault(r.group, []).append(r)
    return {g: summarize(v) for g, v in sorted(groups.items())}
