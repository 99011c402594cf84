"""How far a catalogue entry is from a question: one component per difference, each a standard
deviation of log(tau - 1) (their root sum of squares is the band's width)."""

from __future__ import annotations

import math
import re
from functools import cache

from specsim.acceptance.priors.catalogue import Catalogue
from specsim.acceptance.priors.entries import PriorEntry
from specsim.acceptance.priors.names import lineage_of
from specsim.acceptance.priors.question import Question
from specsim.acceptance.priors.shapes import Shape

#: Standard deviation of log(tau - 1) contributed by each kind of distance (calibrated on held-out
#: catalogue entries, see tests/acceptance/test_holdout.py::test_held_out_catalogue_error_and_band_coverage).
SIGMA = {
    "base": 0.08,  # same method, target, draft, task and temperature: run-to-run, prompt subsets, engines
    "lookup_base": 0.35,  # n-gram / suffix / lookahead: acceptance is a property of the workload's repetition
    "method": 0.35,  # per unit of RELATED distance
    "family": 0.30,  # another model family
    "lineage": 0.20,  # another generation of the same lineage (Llama-2 -> Llama-3)
    "size": 0.08,  # per factor e of target size within a family
    "draft": 0.40,  # another draft checkpoint for the same method and target ("draft quality dominates")
    "draft_unknown": 0.22,  # a learned head whose checkpoint was not named: the spread between checkpoints
    "task": 0.22,  # another task, factor applied
    "task_unknown": 0.35,  # another task without a measured factor
    "task_unstated": 0.15,  # the task was not given: the spread between tasks
    "temperature": 0.18,  # per unit of temperature difference, ratio applied
    "temperature_unknown": 0.12,  # the entry's temperature is not stated
    "shape": 0.08,  # converting between chain and tree or past the measured depth
    "quality": 0.8,  # per unit of entry quality (approximate, third-party, assumed shape, bounds)
}


def components(e: PriorEntry, q: Question, cat: Catalogue) -> dict[str, float]:
    """The entry's distance from the question, by kind of difference (absent kinds: no difference)."""
    c: dict[str, float] = {}
    if e.method != q.method:
        c["method"] = SIGMA["method"] * q.info.related.get(e.method, 6.0)
    if q.family is not None:
        if e.family != q.family:
            same_line = lineage_of(e.family) is not None and lineage_of(e.family) == lineage_of(q.family)
            c["family"] = SIGMA["lineage"] if same_line else SIGMA["family"]
        if q.params and e.target_params_b and not _same_model(q.target, e.target):
            c["size"] = SIGMA["size"] * min(abs(math.log(q.params / e.target_params_b)), 3.0)
    if q.draft and not same_draft(q.draft, e.draft):
        c["draft"] = SIGMA["draft"]
    elif not q.draft and q.info.checkpoint:
        c["draft"] = SIGMA["draft_unknown"]
    _task_component(c, e, q, cat)
    t_req = 0.0 if q.temperature is None else q.temperature
    if e.temperature is None:
        c["temperature"] = SIGMA["temperature_unknown"]
    elif abs(e.temperature - t_req) > 1e-9:
        c["temperature"] = SIGMA["temperature"] * abs(e.temperature - t_req)
    if e.shape is not None and (shape := _shape_component(e, e.shape, q.ref)) is not None:
        c["shape"] = shape
    if e.quality:
        c["quality"] = SIGMA["quality"] * e.quality
    return c


def _task_component(c: dict[str, float], e: PriorEntry, q: Question, cat: Catalogue) -> None:
    if not q.task_stated:
        # the workload's task is unknown: chat-like and mixed benchmarks stand in for it, with its spread
        c["task"] = SIGMA["task_unstated"] if e.task in ("chat", "mixed") else SIGMA["task_unknown"]
    elif e.task != q.task:
        factors = cat.task_factor.get(q.info.effect_class, {})
        c["task"] = SIGMA["task"] if q.task in factors and e.task in factors else SIGMA["task_unknown"]
        if "mixed" in (e.task, q.task):
            c["task"] *= 0.5  # a mixed benchmark contains the asked task


def _shape_component(e: PriorEntry, shape: Shape, ref: Shape) -> float | None:
    same = (shape.kind == ref.kind and shape.depth == ref.depth and shape.topk == ref.topk
            and shape.num_nodes == ref.num_nodes and shape.static == ref.static)
    if same and "tau" in e.published:
        return None  # measured in exactly the asked shape
    if not ref.is_tree and not shape.is_tree and e.measured_depth >= ref.depth:
        return 0.06  # per-position rates covering the asked chain (n-alpha style, not a measured tau)
    beyond = max(0, ref.depth - max(e.measured_depth, shape.depth))
    return SIGMA["shape"] * (1.0 + 0.25 * beyond)


@cache
def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9.]", "", name.lower().split("(")[0].replace("-instruct", "").replace("-chat", ""))


def _same_model(a: str, b: str) -> bool:
    na, nb = _norm(a), _norm(b)
    return bool(na) and (na == nb or na in nb or nb in na)


def same_draft(asked: str, entry_draft: str) -> bool:
    """Whether an asked draft name names the entry's draft (checkpoint or model)."""
    a, b = asked.lower(), entry_draft.lower()
    return bool(a) and (a in b or b in a or _norm(a) == _norm(b))
