"""The lookup: the closest sourced prior for a question (see the package docstring), its band and its
note; the pair model for a draft model without a measured pair; measured profiles carried deeper."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from specsim.acceptance.chain import AcceptanceProfile
from specsim.acceptance.priors.catalogue import Catalogue, load_catalogue
from specsim.acceptance.priors.distance import SIGMA, components, same_draft
from specsim.acceptance.priors.entries import PriorEntry
from specsim.acceptance.priors.match import MEASURE_YOURS, Band, PriorMatch
from specsim.acceptance.priors.names import family_of, lineage_of, method_info
from specsim.acceptance.priors.pairs import PairModel, fit_pair_model
from specsim.acceptance.priors.question import Question, ask, norm_dataset
from specsim.acceptance.priors.shapes import MAX_DEPTH, FloatArray, chain_shape, scale_to, tau_of
from specsim.errors import SpecsimError

Exclude = Iterable[str] | Callable[[PriorEntry], bool]


def lookup(method: str, target: Any = None, draft: Any = None, task: str | None = None,
           temperature: float | None = None, shape: Any = None, exclude: Exclude = ()) -> PriorMatch:
    """The closest sourced prior for a question, with its band (see the package docstring)."""
    cat = load_catalogue()
    q = ask(method, target, draft, task, temperature, shape)
    if q.info.sized_draft and q.draft is not None:
        exact = [e for e in cat.entries if e.method == q.method and same_draft(q.draft or "", e.draft)
                 and not _excluded(e, exclude)]
        if not exact and q.draft_params is not None:
            kept = [e for e in cat.entries if not _excluded(e, exclude)]
            pm = cat.pair_model if len(kept) == len(cat.entries) else fit_pair_model(kept)  # held out: refit
            return _pair_match(cat, pm, q, q.draft_params)
    ties = _closest(cat, q, exclude)
    # near-equals: their median (each carried to the asked task and temperature) is the central case
    carried = [_carry(e, comps, q, cat) for e, comps in ties]
    values = np.array([c.log_tau1 for c in carried])
    median = float(np.median(values))
    rep = min(carried, key=lambda c: (abs(c.log_tau1 - median), c.entry.quality, c.entry.id))
    spread = float(np.std(values)) if len(values) > 1 else 0.0
    cls = q.info.effect_class
    base = SIGMA["lookup_base"] if cls == "lookup" else SIGMA["base"]
    sigma = math.sqrt(base ** 2 + sum(v ** 2 for v in rep.comps.values()) + spread ** 2)
    if temperature is None and cls != "lookup":
        # temperature not given: the low side reaches the T=1 value
        r1 = cat.temperature_ratio.get(cls, 0.87)
        sigma_low = math.sqrt(sigma ** 2 + math.log(r1) ** 2)
    else:
        sigma_low = sigma
    sigma_high = sigma
    if task is None and cls == "lookup":
        # task not given: a data-dependent draft's acceptance moves most with the data; both sides reach as far as
        # the catalogue's tasks spread (repetitive ones included: code editing, translation, summarisation)
        spread_task = _task_spread(cls)
        sigma_high, sigma_low = math.hypot(sigma, spread_task), math.hypot(sigma_low, spread_task)
    e = rep.entry
    band = Band.around(np.asarray(rep.rates), sigma_high, sigma_low, q.ref)
    return PriorMatch(
        method=q.method, entry_id=e.id, entry_ids=tuple(c.entry.id for c in carried),
        distance=float(sum(rep.comps.values())), components=dict(rep.comps), central=band.central, low=band.low,
        high=band.high, measured_depth=e.measured_depth, sigma=sigma, reference=q.ref,
        note=_note(q, rep, band), source=e.source, adjustments=tuple(rep.what))


@cache
def _task_spread(cls: str) -> float:
    """The standard deviation, over the tasks the catalogue measures for an effect class, of each task's median
    log(tau - 1) in the entries' reference shape."""
    by_task: dict[str, list[float]] = {}
    for e in load_catalogue().entries:
        tau = e.reference_tau()
        if not e.synthetic and tau > 1.05 and method_info(e.method).effect_class == cls:
            by_task.setdefault(e.task, []).append(math.log(tau - 1.0))
    medians = [float(np.median(v)) for v in by_task.values()]
    return float(np.std(medians)) if len(medians) > 1 else 0.0


def _excluded(e: PriorEntry, exclude: Exclude) -> bool:
    if callable(exclude):
        return bool(exclude(e))
    return any(x and (x == e.id or x.lower() in e.source.lower()) for x in exclude)


def _closest(cat: Catalogue, q: Question, exclude: Exclude) -> list[tuple[PriorEntry, dict[str, float]]]:
    """The entries nearest the question (the method's own and its related methods'), with their distances.

    The window grows with the distance: an exact match stands alone; an unnamed checkpoint pools
    checkpoints."""
    candidates: list[tuple[float, PriorEntry, dict[str, float]]] = []
    allowed = {q.method, *q.info.related}
    for e in cat.entries:
        if e.method not in allowed or e.synthetic or _excluded(e, exclude):
            continue
        comps = components(e, q, cat)
        if q.dataset and q.dataset not in norm_dataset(e.dataset):
            comps["dataset"] = 0.06  # the same task on another benchmark (MT-bench vs Alpaca: both chat)
        candidates.append((sum(comps.values()), e, comps))
    if not candidates:
        raise SpecsimError(f"no acceptance prior in the catalogue for {q.method} (all candidates excluded)")
    candidates.sort(key=lambda c: (c[0], c[1].quality, c[1].id))
    best = candidates[0][0]
    return [(e, comps) for d, e, comps in candidates if d <= best + 0.03 + 0.25 * best]


@dataclass(frozen=True)
class _Carried:
    """An entry carried to the asked task and temperature, evaluated in the reference shape."""

    log_tau1: float  # log(tau - 1) in the reference shape
    entry: PriorEntry
    comps: dict[str, float]
    rates: FloatArray
    what: list[str]  # the adjustments applied


def _carry(e: PriorEntry, comps: dict[str, float], q: Question, cat: Catalogue) -> _Carried:
    ratio, what = _adjust(e, q, cat)
    rates = scale_to(np.asarray(e.rates), ratio, q.ref if q.ref.depth else chain_shape(5))
    return _Carried(math.log(max(tau_of(rates, q.ref) - 1.0, 1e-6)), e, comps, rates, what)


def _adjust(e: PriorEntry, q: Question, cat: Catalogue) -> tuple[float, list[str]]:
    """(tau - 1) ratio that carries entry e to the asked task and temperature, and what was applied."""
    cls = q.info.effect_class
    ratio, what = 1.0, []
    factors = cat.task_factor.get(cls, {})
    if e.task != q.task and q.task in factors and e.task in factors:
        r = factors[q.task] / factors[e.task]
        ratio *= r
        what.append(f"task {e.task} -> {q.task}: (tau-1) x{r:.2f} (median over paired catalogue entries)")
    t_e = 0.0 if e.temperature is None else e.temperature
    t_q = 0.0 if q.temperature is None else q.temperature
    if abs(t_e - t_q) > 1e-9:
        r1 = cat.temperature_ratio.get(cls, cat.temperature_ratio.get("head", 0.87))
        r = (1.0 + (r1 - 1.0) * t_q) / (1.0 + (r1 - 1.0) * t_e)  # linear in T between the T=0 and T=1 pairs
        ratio *= r
        what.append(f"temperature {t_e:g} -> {t_q:g}: (tau-1) x{r:.2f} (paired T=0/T=1 entries, {cls})")
    return ratio, what


def _note(q: Question, rep: _Carried, band: Band) -> str:
    """What the number is, how far it was carried, and "measure yours"."""
    e, ref = rep.entry, q.ref
    parts = [f"{q.method} acceptance prior {e.id}: {e.source}"]
    if e.shape is not None:
        parts.append(f"measured as a {e.shape.label()}" + (f" ({e.shape.assumed})" if e.shape.assumed else ""))
    parts.append(f"rates: {e.fit}")
    if rep.what:
        parts.append("carried: " + "; ".join(rep.what))
    gaps = [k for k in rep.comps if k not in ("quality",)]
    if gaps:
        parts.append("differs in " + ", ".join(gaps))
    if not q.task_stated:
        parts.append("task not given: chat assumed")
    if q.temperature is None:
        parts.append("temperature not given: greedy central, band down to T=1")
    measured = max(e.measured_depth, e.shape.depth if e.shape else 0)
    if ref.depth > measured:
        parts.append(f"positions past {measured} follow the decay model, not a flat rate")
    parts.append(band.label(ref))
    parts.append(MEASURE_YOURS)
    return "; ".join(parts)


def _pair_match(cat: Catalogue, pm: PairModel, q: Question, draft_params: float) -> PriorMatch:
    """Draft-model acceptance from the pair model (no catalogue entry for this pair)."""
    if q.params is None:
        raise SpecsimError(f"the draft-model pair model needs the target's size ({q.target or 'target'} unknown)")
    alpha0 = pm.alpha(q.params, draft_params)
    cls = q.info.effect_class
    ratio, what = _pair_adjust(cat, q)
    rates = scale_to(np.full(MAX_DEPTH, alpha0), ratio, q.ref)
    dfam = family_of(q.draft or "")
    comps = {"pair": pm.spread / 0.07 * 0.1 + 0.15}
    if q.family is not None and (lineage_of(dfam) or dfam) != (lineage_of(q.family) or q.family):
        comps["family"] = SIGMA["family"]
    sigma = math.sqrt(SIGMA["base"] ** 2 + sum(v ** 2 for v in comps.values()))
    sigma_low = math.sqrt(sigma ** 2 + (math.log(cat.temperature_ratio.get(cls, 0.66)) ** 2 if q.temperature is None
                                        else 0.0))
    band = Band.around(rates, sigma, sigma_low, q.ref)
    note = "; ".join(filter(None, [
        f"draft_model acceptance for {q.draft} -> {q.target}: not measured for this pair; predicted from the size "
        f"ratio {q.params / draft_params:.0f}x by the pair model alpha = {pm.intercept:.2f} - {pm.slope:.3f} "
        f"log10(target/draft) = {alpha0:.2f} (common slope over {pm.series} published series, {pm.points} pairs: "
        "Leviathan et al. 2022 Table 3, e.g. LaMDA 137B with 100M / 2B / 8B drafts alpha 0.61 / 0.71 / 0.75; "
        "T5-XXL with T5-small/base/large; Vicuna-68M for Vicuna-7B/13B)",
        "caveat: the pairs are older models; a draft distilled from its target accepts more, one from another "
        "family or tokenizer less",
        "; ".join(what),
        "task not given: chat assumed" if not q.task_stated else "",
        "temperature not given: greedy central, band down to T=1" if q.temperature is None else "",
        band.label(q.ref),
        MEASURE_YOURS,
    ]))
    return PriorMatch(
        method=q.method, entry_id="pair-model", entry_ids=pm.evidence, distance=float(sum(comps.values())),
        components=comps, central=band.central, low=band.low, high=band.high, measured_depth=MAX_DEPTH,
        sigma=sigma, reference=q.ref, note=note,
        source="pair model over Leviathan et al. 2022 Table 3 and the catalogue's draft-model pairs",
        adjustments=tuple(what))


def _pair_adjust(cat: Catalogue, q: Question) -> tuple[float, list[str]]:
    """(tau - 1) ratio that carries the pair model (chat, T=0) to the asked task and temperature."""
    cls = q.info.effect_class
    factors = cat.task_factor.get(cls, {})
    ratio, what = 1.0, []
    if q.task != "chat" and q.task in factors:
        ratio *= factors[q.task]
        what.append(f"task chat -> {q.task}: (tau-1) x{factors[q.task]:.2f}")
    if q.temperature:
        t = float(q.temperature)
        r1 = cat.temperature_ratio.get(cls, 0.66)
        ratio *= 1.0 + (r1 - 1.0) * t
        what.append(f"temperature 0 -> {t:g}: (tau-1) x{1.0 + (r1 - 1.0) * t:.2f}")
    return ratio, what


def extend_profile(profile: AcceptanceProfile, method: str, depth: int = MAX_DEPTH) -> AcceptanceProfile:
    """A measured profile continued past its measured depth by the method's decay model, with a note.

    Profiles with an i.i.d. tail or already at ``depth`` are returned unchanged.
    """
    if profile.tail is not None or len(profile.rates) >= depth or not profile.rates:
        return profile
    cat = load_catalogue()
    model = cat.decay.get(method_info(method).decay_group, cat.decay["iid"])
    rates = model.extend(profile.rates, depth)
    n = len(profile.rates)
    note = (f"{profile.note + '; ' if profile.note else ''}measured to k = {n}; deeper positions follow the "
            f"{model.describe()}")
    return AcceptanceProfile(tuple(float(x) for x in rates), None, profile.source, note, profile.prior)
