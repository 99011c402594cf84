"""The priors catalogue (``data/priors.yaml``) fitted entry by entry, and the regularities read from
it: decay models, temperature ratios, task factors and the draft-model pair model."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from specsim.acceptance.priors.cache import cache_key, read_cache, write_cache
from specsim.acceptance.priors.decay import DecayModel, derive_decay_models
from specsim.acceptance.priors.entries import PriorEntry, make_entry
from specsim.acceptance.priors.names import method_info
from specsim.acceptance.priors.pairs import PairModel, fit_pair_model
from specsim.errors import SpecsimError


@dataclass(frozen=True)
class Catalogue:
    entries: tuple[PriorEntry, ...]
    decay: Mapping[str, DecayModel]
    temperature_ratio: Mapping[str, float]  # (tau-1) at T=1 over (tau-1) at T=0, by effect class
    temperature_pairs: Mapping[str, int]
    task_factor: Mapping[str, Mapping[str, float]]  # (tau-1) on a task over (tau-1) on chat, by effect class
    pair_model: PairModel
    raw_count: int

    def by_id(self, entry_id: str) -> PriorEntry:
        for e in self.entries:
            if e.id == entry_id:
                return e
        raise SpecsimError(f"no prior with id {entry_id!r}")


def _temperature_ratios(entries: Sequence[PriorEntry]) -> tuple[dict[str, float], dict[str, int]]:
    """Median (tau-1)_{T=1} / (tau-1)_{T=0} over entries that differ only in temperature."""
    groups: dict[tuple[Any, ...], dict[float, PriorEntry]] = defaultdict(dict)
    for e in entries:
        if e.temperature in (0.0, 1.0) and not e.synthetic:
            key = (e.method, e.target, e.draft, e.dataset, e.shape, e.source.split(",")[0], e.measured_depth > 0)
            groups[key][e.temperature] = e
    ratios: dict[str, list[float]] = defaultdict(list)
    for pair in groups.values():
        if 0.0 in pair and 1.0 in pair:
            t0, t1 = pair[0.0].reference_tau() - 1.0, pair[1.0].reference_tau() - 1.0
            if t0 > 0.05:
                ratios[method_info(pair[0.0].method).effect_class].append(t1 / t0)
    out = {cls: float(np.median(v)) for cls, v in ratios.items()}
    counts = {cls: len(v) for cls, v in ratios.items()}
    out.setdefault("lookup", 1.0)  # no paired data: prompt lookup proposes existing text (T-independent), stated
    return out, counts


def _task_factors(entries: Sequence[PriorEntry]) -> dict[str, dict[str, float]]:
    """Median (tau-1)_task / (tau-1)_chat over entries that differ only in task (chat = MT-bench)."""
    groups: dict[tuple[Any, ...], dict[str, list[PriorEntry]]] = defaultdict(lambda: defaultdict(list))
    for e in entries:
        if e.synthetic:
            continue
        key = (e.method, e.target, e.draft, e.temperature, e.shape, e.source.split(",")[0], e.measured_depth > 0)
        groups[key][e.task].append(e)
    per: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for by_task in groups.values():
        chats = [e for e in by_task.get("chat", []) if "mt" in e.dataset.lower()] or by_task.get("chat", [])
        if not chats:
            continue
        ref = float(np.median([c.reference_tau() - 1.0 for c in chats]))
        if ref <= 0.05:
            continue
        cls = method_info(chats[0].method).effect_class
        for task, es in by_task.items():
            if task != "chat":
                per[cls][task].append(float(np.median([x.reference_tau() - 1.0 for x in es])) / ref)
    out: dict[str, dict[str, float]] = {}
    for cls, tasks in per.items():
        out[cls] = {t: float(np.median(v)) for t, v in tasks.items() if len(v) >= 2}
        out[cls]["chat"] = 1.0
    return out


def catalogue_path() -> str:
    return str(resources.files("specsim.acceptance") / "data" / "priors.yaml")


@cache
def load_catalogue() -> Catalogue:
    """The priors catalogue, every entry fitted (cached: one load per process, and on disk by the file's
    SHA-256 and specsim's version so that a CLI call does not parse and fit 1,000+ entries again)."""
    path = catalogue_path()
    key = cache_key(path)
    cached = read_cache(key, Catalogue)
    if cached is not None:
        return cached
    cat = build_catalogue(path)
    write_cache(key, cat)
    return cat


def build_catalogue(path: str) -> Catalogue:
    """Parse and fit every entry of the catalogue file."""
    import yaml

    with open(path, encoding="utf-8") as fh:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        raw = yaml.load(fh, Loader=loader)  # a safe loader (CSafeLoader when built)
    if not isinstance(raw, list):
        raise SpecsimError(f"{path}: the priors catalogue must be a list of entries")
    ids = [e.get("id") for e in raw]
    if len(set(ids)) != len(ids):
        raise SpecsimError(f"{path}: duplicate prior ids")
    for e in raw:
        if not e.get("source"):
            raise SpecsimError(f"{path}: prior {e.get('id')!r} has no source")
    models = derive_decay_models(raw)
    entries = tuple(x for x in (make_entry(e, models) for e in raw) if x is not None)
    ratios, counts = _temperature_ratios(entries)
    return Catalogue(entries, models, ratios, counts, _task_factors(entries), fit_pair_model(entries), len(raw))
